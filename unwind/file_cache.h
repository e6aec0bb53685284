/*
 * file_cache.h — an unwinder's per-file data, kept by file key until the caller forgets the file.
 *
 * The reference unwinders (unwind_libunwind.h, unwind_libdw.h) derive data from each ELF file a walk meets: its
 * load layout, tables built from its CFI. They keep it here, keyed by unwind_module.cache_key (the Elf itself
 * for a module without one: file_cache_key), built on the file's first use by the make hook and released by the
 * release hook when the caller forgets the key or the cache is freed. A lookup is one hash probe (in the shared
 * index, src/base/hindex.h).
 *
 * Ownership: file_cache_new() / file_cache_free(); the cache owns the values make returned. Not thread-safe: one
 * per unwinder. Errors are negative errno values; nothing is exited on.
 */
#ifndef HOSTPROF_UNWIND_FILE_CACHE_H
#define HOSTPROF_UNWIND_FILE_CACHE_H

#include <gelf.h>

#include "unwind/unwind.h"

struct file_cache_hooks {
	/* Build the data of the file behind key, whose open image is elf. Returns 0 and *value, or -ENOMEM. */
	int (*make)(void *ctx, const void *key, Elf *elf, void **value);
	/* Release a value make built. */
	void (*release)(void *ctx, void *value);
	void *ctx;
};

struct file_cache;

/* Returns 0 and *out, or -ENOMEM. */
int file_cache_new(const struct file_cache_hooks *hooks, struct file_cache **out);
/* Releases every value, then the cache. NULL is ignored. */
void file_cache_free(struct file_cache *c);

/* The key a module's file is cached under: its cache_key, else its Elf. (Inline: the delta unwinder's rule cache
 * asks for every frame.) */
static inline const void *file_cache_key(const struct unwind_module *mod)
{
	return mod->cache_key ? mod->cache_key : (const void *)mod->elf;
}

/* The value cached for key, or NULL. */
void *file_cache_find(const struct file_cache *c, const void *key);

/*
 * The value of mod's file, built on first use. Returns 0 and *value, -ENOENT when the module has no Elf (nothing
 * to read), or -ENOMEM (nothing is cached then, the next call tries again: a value made but not indexed is
 * released).
 */
int file_cache_get(struct file_cache *c, const struct unwind_module *mod, void **value);

/* Release and drop what is cached for key; an unknown key is ignored. */
void file_cache_forget(struct file_cache *c, const void *key);

#endif
