/*
 * debug_cache.h — decompressed copies of separate debug files, one per build-id, in the private cache directory.
 *
 * Distributions compress the DWARF of their debug packages (SHF_COMPRESSED .debug_* sections, zlib). libdw
 * decompresses every such section when it opens the file, whatever the lookups will read: ~55 ms of CPU for
 * libc6-dbg's libc.so.6 on every run that names a libc frame. A copy with the same sections decompressed gives
 * libdw the same bytes to read without that work. The first run that opens such a debug file writes the copy
 * (the decompression it would have done, plus the write), later runs read the copy.
 *
 * A copy is made only of a debug file without a .gnu_debugaltlink (a dwz alternate file is found relative to
 * the debug file's directory, which a copy would change); it is used only from the private cache directory
 * (src/base/cache_dir.h), only if its build-id is the one asked for, and written atomically
 * (src/base/atomic_file.h). The directory keeps at most DEBUG_CACHE_MAX_BYTES of copies: the least recently
 * used are removed to make room for a new one.
 *
 * Errors: negative errno. No state; the caller owns returned descriptors.
 */
#ifndef HOSTPROF_DEBUG_CACHE_H
#define HOSTPROF_DEBUG_CACHE_H

#include <stdbool.h>

#define DEBUG_CACHE_MAX_BYTES (1ull << 30)

/* Whether the ELF file fd has the GNU build-id id[0..id_len). */
bool debug_file_has_build_id(int fd, const unsigned char *id, int id_len);

/*
 * A descriptor of the decompressed copy of the debug file fd, whose build-id is id[0..id_len), in the cache
 * directory dir; the copy is written first if absent. The caller keeps fd. Returns the descriptor, or -ENOTSUP
 * (nothing compressed, or a dwz alternate file: use fd itself), -EPERM (dir not private), another negative errno.
 */
int debug_cache_open(const char *dir, int fd, const unsigned char *id, int id_len);

#endif
