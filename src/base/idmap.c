/*
 * idmap.c — a u32 → u64 hash map for pids and tids. See idmap.h.
 *
 * Open addressing with linear probing and backward-shift deletion, so lookups on the per-sample path touch
 * one or two cache lines and deletions leave no tombstones. Key 0 marks an empty slot (no pid or tid is 0).
 * The table grows at 1/2 load and never shrinks. Not thread-safe.
 */
#include <errno.h>
#include <stdlib.h>

#include "src/base/idmap.h"

static uint32_t slot_of(uint32_t key, uint32_t mask)
{
	return (key * 2654435761u) & mask;	/* Knuth's multiplicative hash spreads sequential tids */
}

int idmap_get(const struct idmap *m, uint32_t key, uint64_t *val)
{
	if (m->count == 0 || key == 0)
		return -ENOENT;
	for (uint32_t i = slot_of(key, m->mask);; i = (i + 1) & m->mask) {
		if (m->keys[i] == key) {
			*val = m->vals[i];
			return 0;
		}
		if (m->keys[i] == 0)
			return -ENOENT;
	}
}

static void insert_slot(uint32_t *keys, uint64_t *vals, uint32_t mask, uint32_t key, uint64_t val)
{
	uint32_t i = slot_of(key, mask);
	while (keys[i] != 0 && keys[i] != key)
		i = (i + 1) & mask;
	keys[i] = key;
	vals[i] = val;
}

static int grow(struct idmap *m)
{
	uint32_t cap = m->mask ? (m->mask + 1) * 2 : 16;
	if (cap == 0 || cap > (1u << 30))
		return -ENOMEM;
	uint32_t *keys = calloc(cap, sizeof(*keys));
	uint64_t *vals = calloc(cap, sizeof(*vals));
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	if (m->keys)
		for (uint32_t i = 0; i <= m->mask; i++)
			if (m->keys[i])
				insert_slot(keys, vals, cap - 1, m->keys[i], m->vals[i]);
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->mask = cap - 1;
	return 0;
}

int idmap_put(struct idmap *m, uint32_t key, uint64_t val)
{
	if (key == 0)
		return -EINVAL;
	if (!m->keys || (m->count + 1) * 2 > m->mask + 1) {
		int err = grow(m);
		if (err)
			return err;
	}
	uint32_t i = slot_of(key, m->mask);
	while (m->keys[i] != 0 && m->keys[i] != key)
		i = (i + 1) & m->mask;
	if (m->keys[i] == 0)
		m->count++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

int idmap_del(struct idmap *m, uint32_t key)
{
	if (m->count == 0 || key == 0)
		return -ENOENT;
	uint32_t i = slot_of(key, m->mask);
	while (m->keys[i] != key) {
		if (m->keys[i] == 0)
			return -ENOENT;
		i = (i + 1) & m->mask;
	}
	/* Shift later members of the probe run back so no lookup stops early at the hole. */
	for (uint32_t j = (i + 1) & m->mask; m->keys[j] != 0; j = (j + 1) & m->mask) {
		uint32_t home = slot_of(m->keys[j], m->mask);
		if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = 0;
	m->vals[i] = 0;
	m->count--;
	return 0;
}

void idmap_free(struct idmap *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
	m->mask = 0;
	m->count = 0;
}
