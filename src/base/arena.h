/*
 * arena.h — zeroed allocations that are freed together: the many small structs of a message built once and
 * packed (the pprof and OTLP encoders' protobuf-c trees), without a free() per part.
 *
 * Blocks of at least 64 KiB are taken from calloc as needed; an allocation larger than that gets a block of its
 * own. Every allocation is zeroed and aligned for any type (max_align_t).
 *
 * Ownership: a zero-initialised struct arena is empty; arena_free() releases every allocation at once and leaves
 * it empty. Errors: arena_alloc() returns NULL when memory runs out or count * size would not fit in half of
 * SIZE_MAX (so a size computed from input cannot wrap). Not thread-safe.
 */
#ifndef HOSTPROF_BASE_ARENA_H
#define HOSTPROF_BASE_ARENA_H

#include <stddef.h>

struct arena_block;

struct arena {
	struct arena_block *head;
};

/* count elements of size bytes, zeroed; NULL on failure. count 0 gives a valid, empty allocation. */
void *arena_alloc(struct arena *a, size_t count, size_t size);
void arena_free(struct arena *a);

#endif
