/*
 * idmap.h — a u32 → u64 hash map, for pids and tids (correlation, the APM fast lane).
 *
 * Open addressing with linear probing and backward-shift deletion, so lookups on a per-sample path touch one
 * or two cache lines and deletions leave no tombstones. Key 0 is reserved (no pid or tid is 0). A zeroed
 * struct idmap is an empty map; idmap_free() releases its memory. Errors: negative errno. Not thread-safe.
 */
#ifndef HOSTPROF_BASE_IDMAP_H
#define HOSTPROF_BASE_IDMAP_H

#include <stdint.h>

struct idmap {
	uint32_t *keys;
	uint64_t *vals;
	uint32_t mask;		/* capacity - 1, capacity a power of two; 0 when empty and unallocated */
	uint32_t count;
};

int idmap_get(const struct idmap *m, uint32_t key, uint64_t *val);	/* -ENOENT if absent */
int idmap_put(struct idmap *m, uint32_t key, uint64_t val);		/* insert or replace */
int idmap_del(struct idmap *m, uint32_t key);				/* -ENOENT if absent */
void idmap_free(struct idmap *m);
/* Iteration: slots i in [0, mask] with keys[i] != 0 (only when count != 0). */

#endif
