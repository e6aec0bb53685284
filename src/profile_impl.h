/*
 * profile_impl.h — internals shared by the profile modules (profile.c, profile_msgpack.c, report.c): hashing,
 * an open-addressing index over table elements, and table growth. Not part of the profile API.
 *
 * The index stores element indices with their 64-bit hashes, never the elements: the caller owns the table and
 * supplies equality, so one index type serves every table and growing it never re-reads the elements.
 * Functions return 0 or a negative errno. Not thread-safe.
 */
#ifndef HOSTPROF_PROFILE_IMPL_H
#define HOSTPROF_PROFILE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROFILE_HASH_SEED 0xcbf29ce484222325ULL

uint64_t profile_hash_u64(uint64_t h, uint64_t v);
uint64_t profile_hash_bytes(uint64_t h, const void *data, size_t len);
uint64_t profile_hash_str(uint64_t h, const char *s);

struct profile_hslot {
	uint64_t hash;
	uint32_t index;
	uint32_t full;
};

/* Zero-initialised means empty. */
struct profile_hindex {
	struct profile_hslot *slots;
	uint32_t mask, used;
};

/* True when the element at index equals key. */
typedef bool (*profile_heq_fn)(const void *table, uint32_t index, const void *key);

/* Find an element equal to key among those hashed to hash; true and *index set when found. */
bool profile_hindex_find(const struct profile_hindex *h, uint64_t hash, profile_heq_fn eq, const void *table,
			 const void *key, uint32_t *index);
/* Record element index under hash (the caller has checked it is not present). */
int profile_hindex_insert(struct profile_hindex *h, uint64_t hash, uint32_t index);
void profile_hindex_free(struct profile_hindex *h);

/* Make room for need elements of elem_size in *items (capacity *cap, grown by doubling). */
int profile_grow(void **items, uint32_t *cap, uint64_t need, size_t elem_size);
#define PROFILE_TABLE_RESERVE(t, need) profile_grow((void **)&(t).items, &(t).cap, (need), sizeof(*(t).items))

#endif
