/*
 * file_cache.c — per-file data by file key. See file_cache.h.
 *
 * Open addressing with linear probing over a power-of-two table kept at most half full; a removed entry's
 * successors in its probe run are shifted back over it, so a lookup never meets a tombstone.
 */
#include "unwind/file_cache.h"

#include <errno.h>
#include <stdlib.h>

#define FC_MIN_SLOTS 64

struct fc_entry {
	const void *key;	/* NULL: empty */
	void *value;
};

struct file_cache {
	struct file_cache_hooks hooks;
	struct fc_entry *slots;
	size_t nslots, count;	/* nslots: 0 or a power of two */
};

int file_cache_new(const struct file_cache_hooks *hooks, struct file_cache **out)
{
	struct file_cache *c = calloc(1, sizeof(*c));
	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->hooks = *hooks;
	*out = c;
	return 0;
}

void file_cache_free(struct file_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nslots; i++)
		if (c->slots[i].key)
			c->hooks.release(c->hooks.ctx, c->slots[i].value);
	free(c->slots);
	free(c);
}

static size_t fc_home(const struct file_cache *c, const void *key)
{
	uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & (c->nslots - 1);
}

/* The slot holding key, or the empty one where it would go. Needs nslots > 0. */
static size_t fc_slot(const struct file_cache *c, const void *key)
{
	size_t i = fc_home(c, key);
	while (c->slots[i].key && c->slots[i].key != key)
		i = (i + 1) & (c->nslots - 1);
	return i;
}

void *file_cache_find(const struct file_cache *c, const void *key)
{
	if (!c->nslots || !key)
		return NULL;
	return c->slots[fc_slot(c, key)].value;
}

static int fc_grow(struct file_cache *c)
{
	size_t n = c->nslots ? 2 * c->nslots : FC_MIN_SLOTS;
	struct fc_entry *old = c->slots;
	size_t nold = c->nslots;
	struct fc_entry *slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	c->slots = slots;
	c->nslots = n;
	for (size_t i = 0; i < nold; i++)
		if (old[i].key)
			c->slots[fc_slot(c, old[i].key)] = old[i];
	free(old);
	return 0;
}

int file_cache_get(struct file_cache *c, const struct unwind_module *mod, void **value)
{
	const void *key = file_cache_key(mod);
	void *v = mod->elf ? file_cache_find(c, key) : NULL;
	if (v) {
		*value = v;
		return 0;
	}
	if (!mod->elf)
		return -ENOENT;
	if (2 * (c->count + 1) > c->nslots && fc_grow(c) < 0)
		return -ENOMEM;
	int err = c->hooks.make(c->hooks.ctx, key, mod->elf, &v);
	if (err < 0)
		return err;
	c->slots[fc_slot(c, key)] = (struct fc_entry){ key, v };
	c->count++;
	*value = v;
	return 0;
}

/* Whether the entry at j, whose home is h, may move back to the hole at i (its probe run passes i). */
static bool fc_may_fill(size_t i, size_t j, size_t h)
{
	return i <= j ? (h <= i || h > j) : (h <= i && h > j);
}

void file_cache_forget(struct file_cache *c, const void *key)
{
	if (!c || !c->nslots || !key)
		return;
	size_t i = fc_slot(c, key), mask = c->nslots - 1;
	if (!c->slots[i].key)
		return;
	c->hooks.release(c->hooks.ctx, c->slots[i].value);
	c->count--;
	for (size_t j = (i + 1) & mask; c->slots[j].key; j = (j + 1) & mask) {
		if (fc_may_fill(i, j, fc_home(c, c->slots[j].key))) {
			c->slots[i] = c->slots[j];
			i = j;
		}
	}
	c->slots[i] = (struct fc_entry){ NULL, NULL };
}
