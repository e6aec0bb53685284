/*
 * names_cache.h — the frames one ELF file's addresses were named with, kept between runs in the cache directory.
 *
 * Naming an address costs little once a file's symbol table is sorted and its DWARF open, but getting there
 * costs milliseconds per file on every run: the C library with its separate debug file (libc6-dbg) takes ~6 ms
 * of CPU to open the debug file, read and sort its ~9000 symbols, and read its address ranges and the line table
 * and scopes of each compilation unit met. That is most of a short report's CPU. The names depend only on the
 * file, its separate debug file and this hostprof, so a run writes the names it made to a file per build-id,
 * and a later run answers those addresses from it without opening the symbol table or the DWARF at all.
 * Addresses the file does not hold are named as before and added.
 *
 * Key: the caller states in a string everything the names depend on (symbolizer.c: the symbolizer's sources,
 * libdw's version, the file's size, its debug file's). The file, "<build-id>.names", holds the key; a file of
 * another key is not used, and the next save replaces it.
 *
 * Format (native byte order, x86_64): struct names_cache_head, the entries (by address, strictly increasing),
 * the frames, then the strings (NUL-terminated, the last byte NUL). A file is used only from the private cache
 * directory (src/base/cache_dir.h) and only whole: its length, an XXH3 hash and every entry, frame and string
 * offset are checked; a file that fails any check is not used, and the next save replaces it. Files are written
 * atomically (src/base/atomic_file.h) and take at most NAMES_CACHE_DIR_MAX_BYTES together: the least recently
 * used are removed to make room.
 *
 * Ownership: names_cache_open() returns a handle that owns the mapped file; strings names_cache_get() returns
 * point into it and stay valid until names_cache_free(). names_cache_add() keeps the caller's strings, not
 * copies: they must stay valid until names_cache_save() or names_cache_free().
 * Errors: negative errno. Not thread-safe.
 */
#ifndef HOSTPROF_NAMES_CACHE_H
#define HOSTPROF_NAMES_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "symbols/symbolizer.h"

#define NAMES_CACHE_SUFFIX ".names"
#define NAMES_CACHE_DIR_MAX_BYTES (128ull << 20)	/* all the names files together */
#define NAMES_CACHE_ENTRIES_MAX (1u << 18)		/* addresses per file: more are not added */
#define NAMES_CACHE_ADDED_MAX (1u << 16)		/* addresses added per handle: the memory a long-lived one
							 * (the daemon's) holds until it saves, ~100 bytes each */
#define NAMES_CACHE_FILE_MAX_BYTES (32ull << 20)	/* one file: a bound on what is mapped */
#define NAMES_CACHE_CHAIN_MAX 64			/* frames per address (inlined chain and function) */
#define NAMES_CACHE_KEY_MAX 256
#define NAMES_CACHE_BUILD_ID_MAX 128			/* hex digits */

#define NAMES_CACHE_MAGIC "HPNAMES\n"
#define NAMES_CACHE_FORMAT 1
struct names_cache_head {
	char magic[8];
	uint32_t format, head_size;	/* head_size: sizeof(this struct) */
	char key[NAMES_CACHE_KEY_MAX];	/* NUL-padded */
	uint32_t nentries, nframes;
	uint64_t strings_size;
	uint64_t hash;			/* XXH3-64 of what follows the head, seeded with the head's (this field 0) */
};

struct names_cache_entry {
	uint64_t addr;
	uint32_t first, n;		/* frames[first, first + n): innermost first, as symbolizer_lookup() */
};

struct names_cache_frame {
	uint32_t function, file;	/* 1 + offset into the strings; 0: NULL */
	int32_t line;			/* >= 0 */
	uint8_t inlined, go;		/* 0 or 1 */
	uint8_t reserved[2];		/* 0 */
};

/* What names_cache_open() found. */
enum names_cache_state {
	NAMES_CACHE_ABSENT,		/* no file */
	NAMES_CACHE_USED,		/* a whole file of this key */
	NAMES_CACHE_STALE,		/* a whole file of another key */
	NAMES_CACHE_DAMAGED,		/* a file that failed a check (or not private to the user) */
};

struct names_cache;

/*
 * The names of the file whose GNU build-id is build_id (lowercase hex), under key, from the cache directory dir
 * (created, mode 0700, when absent). Whatever the file, a handle is returned: without a usable file it holds
 * nothing and every lookup misses. Returns 0 and *out, -EINVAL (build-id not lowercase hex of 2 to
 * NAMES_CACHE_BUILD_ID_MAX digits, or a key of NAMES_CACHE_KEY_MAX bytes or more), -ENOMEM, -EPERM (dir not
 * private to the effective user), or another negative errno.
 */
int names_cache_open(const char *dir, const char *build_id, const char *key, struct names_cache **out);
/* Saves nothing: see names_cache_save(). NULL is a no-op. */
void names_cache_free(struct names_cache *c);

enum names_cache_state names_cache_state(const struct names_cache *c);

/*
 * The frames held for addr into frames[0..max) (the innermost when there are more): how many, 0 for an address
 * that has no name, or -ENOENT when the file holds no entry for addr. O(log n).
 */
int names_cache_get(const struct names_cache *c, uint64_t addr, struct symbol_frame *frames, size_t max);

/*
 * Remember the n (0 to NAMES_CACHE_CHAIN_MAX) frames addr was named with, for names_cache_save(). Returns 0,
 * -E2BIG once the file would exceed NAMES_CACHE_ENTRIES_MAX addresses or the handle hold NAMES_CACHE_ADDED_MAX
 * (not added), -EINVAL, -ENOMEM.
 */
int names_cache_add(struct names_cache *c, uint64_t addr, const struct symbol_frame *frames, int n);

/*
 * Write the held entries and the added ones to the file, if any were added (0 without writing otherwise): a
 * new file replaces the old atomically. An address both held and added keeps the held frames. Returns 0 or a
 * negative errno (the file is then unchanged).
 */
int names_cache_save(struct names_cache *c);

#endif
