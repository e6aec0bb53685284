/*
 * fuzz_table_cache.c — fuzz target: a stack-delta table cache file (unwind/stack_deltas_cache.h). The cache
 * directory is private, but a file there is still checked whole before a table reads it in place: the head's
 * counts and the arrays after it go through stack_deltas_adopt() as the loader passes them — past the hash
 * and key checks, which a fuzzer could not get by — and every row and a few addresses around each are looked
 * up in what it accepts. Any crash or sanitizer report is a bug: a bad file must only be refused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/stack_deltas.h"
#include "unwind/stack_deltas_cache.h"

static void look_up(const struct stack_deltas *t, const uint8_t *data, size_t size)
{
	struct stack_delta_rule r;
	size_t rows = stack_deltas_rows(t);
	for (size_t i = 0; i < rows && i < 4096; i++) {
		uint64_t va;
		stack_deltas_row(t, i, &va, &r);
		stack_deltas_lookup(t, va, &r);
		stack_deltas_lookup(t, va - 1, &r);
		stack_deltas_lookup(t, va + 70000, &r);	/* a page or more on */
	}
	for (size_t i = 0; i + 8 <= size && i < 512; i += 8) {
		uint64_t va;
		memcpy(&va, data + i, sizeof(va));
		stack_deltas_lookup(t, va, &r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stack_deltas_cache_head h;
	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	size_t len = size - sizeof(h);
	/* In the loader the arrays start 8-aligned in the mapping: the same here, in memory of exactly their size
	 * (so that the sanitizer sees any read past them). */
	void *arrays = malloc(len ? len : 1);
	if (!arrays)
		return 0;
	memcpy(arrays, data + sizeof(h), len);
	struct stack_deltas_image img = { .base = h.base, .nrows = h.nrows, .npages = h.npages, .nrules = h.nrules,
					  .data = arrays, .size = len };
	struct stack_deltas *t = NULL;
	if (stack_deltas_adopt(&img, NULL, 0, &t) == 0) {
		struct stack_deltas_stats st = { 0 };
		stack_deltas_count(t, &st);
		look_up(t, data, size);
		stack_deltas_free(t);
	}
	free(arrays);
	return 0;
}
