/*
 * hindex.h — hashing, and one growable hash index for every table that looks things up by content.
 *
 * The index stores (64-bit hash, 64-bit value) pairs and never the keys: the value is whatever names the element
 * in the caller's own table (an index into an array, a pointer cast to uint64_t), and the caller supplies the
 * key equality. So one index type serves every table, growing it never re-reads the elements, and the elements
 * may live where the caller wants (arrays that grow, separately allocated objects).
 *
 * Hashes place entries by their low bits, so they must be well mixed there: the hash functions below are, and
 * so are hashes that are hashes already (a stack-trace ID, a FileID). Keys that are 32-bit integers (pids, tids)
 * need no equality at all: hindex_u32() gives each key its own hash (the key itself in the high half, a
 * golden-ratio product of it in the low half), so equal hashes mean equal keys. Pass eq = NULL for them, and only
 * for them: other keys may share a hash.
 *
 * Layout: open addressing with linear probing, at most half full; removal leaves a tombstone that later
 * insertions reuse and a growth clears, so removal never moves an entry and iteration may remove as it goes. A
 * lookup is inline (with a constant eq the compiler inlines that too) and costs usually one slot and one
 * comparison: the per-sample path looks processes, traces and counts up this way.
 *
 * Ownership: a zero-initialised struct hindex is empty; hindex_free() releases its memory (hindex_clear() only
 * empties it). Errors: negative errno (-ENOMEM, or -EOVERFLOW past 2^31 slots). Not thread-safe.
 */
#ifndef HOSTPROF_BASE_HINDEX_H
#define HOSTPROF_BASE_HINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- hashing: FNV-1a over bytes, finished with a 64-bit mixer; combinable ---- */
#define HASH_SEED 0xcbf29ce484222325ULL

/* h combined with v. For a fixed h, distinct v give distinct results. */
uint64_t hash_u64(uint64_t h, uint64_t v);
uint64_t hash_bytes(uint64_t h, const void *data, size_t len);
uint64_t hash_str(uint64_t h, const char *s);

/* ---- the index ---- */
/* Slot hashes 0 and 1 mark empty and removed slots; hashes given to the index are moved off them. */
#define HINDEX_EMPTY 0
#define HINDEX_REMOVED 1

struct hindex_slot {
	uint64_t hash;
	uint64_t value;
};

struct hindex {
	struct hindex_slot *slots;
	uint32_t mask;		/* slots - 1 (a power of two) when slots != NULL */
	uint32_t used, removed;	/* entries, and tombstones */
};

/* True when value (an entry of the caller's table) has the key the lookup is for. */
typedef bool (*hindex_eq_fn)(const void *ctx, uint64_t value, const void *key);

/* The hash of an integer key (eq = NULL): distinct keys, distinct hashes, none but key 0's below 2^32. */
static inline uint64_t hindex_u32(uint32_t key)
{
	return (uint64_t)key << 32 | (uint32_t)((key * 0x9e3779b97f4a7c15ULL) >> 32);
}

static inline uint64_t hindex_hash(uint64_t hash)
{
	return hash > HINDEX_REMOVED ? hash : hash + 2;
}

static inline uint32_t hindex_home(const struct hindex *h, uint64_t hash)
{
	return (uint32_t)hash & h->mask;
}

/*
 * The value of an entry stored under hash whose key equals key (eq(ctx, value, key); eq NULL: the first entry
 * with that hash). True and *value set when found.
 */
static inline bool hindex_find(const struct hindex *h, uint64_t hash, hindex_eq_fn eq, const void *ctx,
			       const void *key, uint64_t *value)
{
	if (!h->slots)
		return false;
	hash = hindex_hash(hash);
	for (uint32_t pos = hindex_home(h, hash);; pos = (pos + 1) & h->mask) {
		const struct hindex_slot *s = &h->slots[pos];
		if (s->hash == hash && (!eq || eq(ctx, s->value, key))) {
			*value = s->value;
			return true;
		}
		if (s->hash == HINDEX_EMPTY)
			return false;
	}
}

/* hindex_find() for tables whose values are uint32_t indices into an array. */
static inline bool hindex_find_index(const struct hindex *h, uint64_t hash, hindex_eq_fn eq, const void *ctx,
				     const void *key, uint32_t *index)
{
	uint64_t value;
	if (!hindex_find(h, hash, eq, ctx, key, &value))
		return false;
	*index = (uint32_t)value;
	return true;
}

/* Add value under hash; the caller has checked that its key is not present. */
int hindex_insert(struct hindex *h, uint64_t hash, uint64_t value);

/* Remove the entry stored with exactly this hash and value; false if there is none. */
bool hindex_remove(struct hindex *h, uint64_t hash, uint64_t value);

/*
 * Iteration, in slot order: for (uint32_t pos = 0; hindex_next(h, &pos, &v);) { ... }. Entries may be removed
 * meanwhile (each is still seen once); insertions may grow the index and must wait until the loop is over.
 */
static inline const struct hindex_slot *hindex_next_slot(const struct hindex *h, uint32_t *pos)
{
	for (; h->slots && *pos <= h->mask; (*pos)++) {
		if (h->slots[*pos].hash > HINDEX_REMOVED)
			return &h->slots[(*pos)++];
	}
	return NULL;
}

static inline bool hindex_next(const struct hindex *h, uint32_t *pos, uint64_t *value)
{
	const struct hindex_slot *s = hindex_next_slot(h, pos);
	if (s)
		*value = s->value;
	return s != NULL;
}

static inline uint32_t hindex_count(const struct hindex *h)
{
	return h->used;
}

/*
 * Integer keys (pids, tids): the index as a map from key to value, each key its own hash (hindex_u32), so no
 * equality function and no key storage. Key 0 is allowed but no pid or tid is 0.
 */
static inline bool hindex_u32_get(const struct hindex *h, uint32_t key, uint64_t *value)
{
	return hindex_find(h, hindex_u32(key), NULL, NULL, NULL, value);
}

/* Set key's value, inserting key when absent. 0 or -ENOMEM / -EOVERFLOW. */
int hindex_u32_put(struct hindex *h, uint32_t key, uint64_t value);
/* Remove key; false if it was absent. */
bool hindex_u32_del(struct hindex *h, uint32_t key);

/* hindex_next() for an integer-keyed index, with each entry's key. */
static inline bool hindex_u32_next(const struct hindex *h, uint32_t *pos, uint32_t *key, uint64_t *value)
{
	const struct hindex_slot *s = hindex_next_slot(h, pos);
	if (s) {
		*key = (uint32_t)(s->hash >> 32);
		*value = s->value;
	}
	return s != NULL;
}

/* Forget every entry, keeping the slots' memory: inserting again at most as many entries as the index held
 * before cannot fail. */
void hindex_clear(struct hindex *h);
void hindex_free(struct hindex *h);

#endif
