/*
 * profile_impl.h — internals shared by the profile modules (profile.c, msgpack_write.c, msgpack_read.c, report.c,
 * pprof.c, speedscope.c): table growth, and the hash index they all use (src/base/hindex.h: element indices stored with
 * their hashes, the table's own equality). Not part of the profile API.
 *
 * Functions return 0 or a negative errno. Not thread-safe.
 */
#ifndef HOSTPROF_PROFILE_IMPL_H
#define HOSTPROF_PROFILE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/base/hindex.h"

/* Make room for need elements of elem_size in *items (capacity *cap, grown by doubling). */
int profile_grow(void **items, uint32_t *cap, uint64_t need, size_t elem_size);
#define PROFILE_TABLE_RESERVE(t, need) profile_grow((void **)&(t).items, &(t).cap, (need), sizeof(*(t).items))

#endif
