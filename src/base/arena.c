/*
 * arena.c — zeroed allocations freed together. See arena.h.
 */
#include "src/base/arena.h"

#include <stdint.h>
#include <stdlib.h>

#define ARENA_BLOCK_SIZE 65536

struct arena_block {
	struct arena_block *next;
	size_t used, size;
	max_align_t data[];
};

void *arena_alloc(struct arena *a, size_t count, size_t size)
{
	const size_t align = sizeof(max_align_t);
	if (size && count > SIZE_MAX / size / 2)
		return NULL;
	size_t n = (count * size + align - 1) / align * align;
	struct arena_block *b = a->head;
	if (!b || b->size - b->used < n) {
		size_t cap = n > ARENA_BLOCK_SIZE ? n : ARENA_BLOCK_SIZE;
		if (!(b = calloc(1, sizeof(*b) + cap)))
			return NULL;
		b->size = cap;
		b->next = a->head;
		a->head = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	return p;
}

void arena_free(struct arena *a)
{
	while (a->head) {
		struct arena_block *next = a->head->next;
		free(a->head);
		a->head = next;
	}
}
