/*
 * hindex.c — hashing and the growable hash index. See hindex.h for the contract.
 */
#include "src/base/hindex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HINDEX_MIN_SLOTS 64u
#define HINDEX_MAX_SLOTS (1ULL << 31)

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t hash_u64(uint64_t h, uint64_t v)
{
	return mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
	const uint8_t *b = data;
	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return mix64(h ^ len);
}

uint64_t hash_str(uint64_t h, const char *s)
{
	return hash_bytes(h, s, strlen(s));
}

/* Put (hash, value) in the first free or removed slot from its home on (hash already moved off 0 and 1). */
static void place(struct hindex *h, uint64_t hash, uint64_t value)
{
	uint32_t pos = hindex_home(h, hash);
	while (h->slots[pos].hash > HINDEX_REMOVED)
		pos = (pos + 1) & h->mask;
	h->removed -= h->slots[pos].hash == HINDEX_REMOVED;
	h->slots[pos] = (struct hindex_slot){ .hash = hash, .value = value };
}

/*
 * Room for one more entry with the index at most half full of entries and tombstones. A rebuild sizes it for
 * the entries alone at most a quarter full, so at least a quarter of its slots' worth of insertions and
 * removals pass before the next one (growing doubles; mostly tombstones shrinks it back).
 */
static int reserve_one(struct hindex *h)
{
	uint64_t cap = h->slots ? (uint64_t)h->mask + 1 : 0;
	if (h->slots && ((uint64_t)h->used + h->removed + 1) * 2 <= cap)
		return 0;
	uint64_t ncap = HINDEX_MIN_SLOTS;
	while (((uint64_t)h->used + 1) * 4 > ncap)
		ncap *= 2;
	if (ncap > HINDEX_MAX_SLOTS)
		return -EOVERFLOW;
	struct hindex old = *h;
	if (!(h->slots = calloc(ncap, sizeof(*h->slots)))) {
		*h = old;
		return -ENOMEM;
	}
	h->mask = (uint32_t)(ncap - 1);
	h->removed = 0;
	for (uint64_t i = 0; i < cap; i++) {
		if (old.slots[i].hash > HINDEX_REMOVED)
			place(h, old.slots[i].hash, old.slots[i].value);
	}
	free(old.slots);
	return 0;
}

int hindex_insert(struct hindex *h, uint64_t hash, uint64_t value)
{
	int err = reserve_one(h);
	if (err < 0)
		return err;
	place(h, hindex_hash(hash), value);
	h->used++;
	return 0;
}

bool hindex_remove(struct hindex *h, uint64_t hash, uint64_t value)
{
	if (!h->slots)
		return false;
	hash = hindex_hash(hash);
	for (uint32_t pos = hindex_home(h, hash);; pos = (pos + 1) & h->mask) {
		struct hindex_slot *s = &h->slots[pos];
		if (s->hash == HINDEX_EMPTY)
			return false;
		if (s->hash == hash && s->value == value) {
			s->hash = HINDEX_REMOVED;
			h->used--;
			h->removed++;
			return true;
		}
	}
}

int hindex_u32_put(struct hindex *h, uint32_t key, uint64_t value)
{
	uint64_t hash = hindex_hash(hindex_u32(key));
	for (uint32_t pos = h->slots ? hindex_home(h, hash) : 0; h->slots; pos = (pos + 1) & h->mask) {
		if (h->slots[pos].hash == hash) {
			h->slots[pos].value = value;
			return 0;
		}
		if (h->slots[pos].hash == HINDEX_EMPTY)
			break;
	}
	return hindex_insert(h, hindex_u32(key), value);
}

bool hindex_u32_del(struct hindex *h, uint32_t key)
{
	uint64_t value;
	return hindex_u32_get(h, key, &value) && hindex_remove(h, hindex_u32(key), value);
}

void hindex_clear(struct hindex *h)
{
	if (h->slots)
		memset(h->slots, 0, ((size_t)h->mask + 1) * sizeof(*h->slots));
	h->used = h->removed = 0;
}

void hindex_free(struct hindex *h)
{
	free(h->slots);
	*h = (struct hindex){ 0 };
}
