/*
 * radix_sort.c — least significant byte first, counts of every byte taken in one pass. See radix_sort.h.
 */
#include "src/base/radix_sort.h"

#include <string.h>

#define RADIX_BYTES 8

void radix_sort_pairs(struct radix_pair *pairs, struct radix_pair *scratch, size_t n)
{
	size_t count[RADIX_BYTES][256];
	struct radix_pair *from = pairs, *to = scratch, *swap;
	if (n < 2)
		return;
	memset(count, 0, sizeof(count));
	for (size_t i = 0; i < n; i++)
		for (unsigned b = 0; b < RADIX_BYTES; b++)
			count[b][(pairs[i].key >> (8 * b)) & 0xff]++;
	for (unsigned b = 0; b < RADIX_BYTES; b++) {
		size_t *at = count[b], next = 0;
		if (at[(pairs[0].key >> (8 * b)) & 0xff] == n)
			continue;	/* every key has this byte: the pass would change nothing */
		for (unsigned d = 0; d < 256; d++) {
			size_t c = at[d];
			at[d] = next;
			next += c;
		}
		for (size_t i = 0; i < n; i++)
			to[at[(from[i].key >> (8 * b)) & 0xff]++] = from[i];
		swap = from;
		from = to;
		to = swap;
	}
	if (from != pairs)
		memcpy(pairs, from, n * sizeof(*pairs));
}
