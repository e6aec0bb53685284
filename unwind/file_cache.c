/*
 * file_cache.c — per-file data by file key. See file_cache.h.
 *
 * The index is the shared hash index (src/base/hindex.h): each file is an entry of its own holding the key and
 * the value made for it, indexed by a hash of the key's address, so a lookup is one probe, usually one slot, and
 * one key comparison. An entry is allocated alone, so forgetting a file moves no other.
 */
#include "unwind/file_cache.h"

#include "src/base/hindex.h"

#include <errno.h>
#include <stdlib.h>

/* One cached file. */
struct fc_entry {
	const void *key;
	void *value;
};

struct file_cache {
	struct file_cache_hooks hooks;
	struct hindex index;	/* hash of the key -> struct fc_entry * */
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
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&c->index, &pos, &v);) {
		struct fc_entry *e = (struct fc_entry *)(uintptr_t)v;
		c->hooks.release(c->hooks.ctx, e->value);
		free(e);
	}
	hindex_free(&c->index);
	free(c);
}

/* Keys are addresses: distinct keys get distinct hashes (hash_u64), well mixed in the bits the index uses. */
static uint64_t fc_hash(const void *key)
{
	return hash_u64(HASH_SEED, (uintptr_t)key);
}

static bool fc_has_key(const void *ctx, uint64_t value, const void *key)
{
	(void)ctx;
	return ((const struct fc_entry *)(uintptr_t)value)->key == key;
}

static struct fc_entry *fc_find(const struct file_cache *c, const void *key)
{
	uint64_t v;
	if (!hindex_find(&c->index, fc_hash(key), fc_has_key, NULL, key, &v))
		return NULL;
	return (struct fc_entry *)(uintptr_t)v;
}

void *file_cache_find(const struct file_cache *c, const void *key)
{
	const struct fc_entry *e = key ? fc_find(c, key) : NULL;
	return e ? e->value : NULL;
}

int file_cache_get(struct file_cache *c, const struct unwind_module *mod, void **value)
{
	if (!mod->elf)
		return -ENOENT;
	const void *key = file_cache_key(mod);
	struct fc_entry *e = fc_find(c, key);
	if (e) {
		*value = e->value;
		return 0;
	}
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = (struct fc_entry){ .key = key };
	int err = c->hooks.make(c->hooks.ctx, key, mod->elf, &e->value);
	if (err == 0 && (err = hindex_insert(&c->index, fc_hash(key), (uintptr_t)e)) < 0)
		c->hooks.release(c->hooks.ctx, e->value);
	if (err < 0) {
		free(e);
		return err;
	}
	*value = e->value;
	return 0;
}

void file_cache_forget(struct file_cache *c, const void *key)
{
	struct fc_entry *e = c && key ? fc_find(c, key) : NULL;
	if (!e)
		return;
	hindex_remove(&c->index, fc_hash(key), (uintptr_t)e);
	c->hooks.release(c->hooks.ctx, e->value);
	free(e);
}
