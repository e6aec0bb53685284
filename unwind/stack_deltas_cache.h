/*
 * stack_deltas_cache.h — built stack-delta tables kept on disk by build-id, read back in place.
 *
 * Building a file's table (stack_deltas.h) interprets its CFI with libdw and disassembles its code without CFI:
 * ~17 ms of CPU for libc, a program and its libraries on every `hostprof record`, and again in the daemon for
 * every short-lived process of the same binary, for a result that depends only on the file and the builder.
 * The cache keeps each built table as one file in the private cache directory (src/base/cache_dir.h); a load
 * maps that file read-only and the table reads its arrays in place (stack_deltas_adopt()).
 *
 * Key. A file's table is found by the file's GNU build-id (files without one are not cached) and used only when
 * the cache file's head also names
 *  - the caller's identity of the file's contents (hostprof passes its FileID): one build-id can name two
 *    different files — a program and its stripped copy share it, and the prologue analysis splits code without
 *    CFI at the symbols the stripped copy lacks;
 *  - the builder's identity: a hash of the builder's sources (unwind/stack_deltas, prologue, gopclntab,
 *    byte_reader and this module, computed by the Makefile), the file format's version, and the versions of
 *    libdw and capstone found at run time, which interpret the CFI and the code. Any change of the algorithm
 *    changes one of them, so a table of another hostprof is never used. This rather than the build-id of the
 *    running program, which changes with every unrelated change of hostprof (and differs between hostprof and
 *    its tests), and does not change when a shared library is upgraded under it.
 * A cache file's name holds the build-id and a hash of the builder's identity, so that two hostprof versions
 * running at once (a daemon and a newer command) do not keep replacing each other's files; the files of a
 * version no longer run age out (below).
 *
 * Untrusted content: the directory is private to the user, yet a cache file is checked whole before use — its
 * length against its counts, a CRC-32 of all of it, every array of the table (stack_deltas_adopt()). A file
 * that fails is not used: the caller builds the table and stores it over that file.
 *
 * Size and concurrency: storing a table first removes the least recently used cache files (a load marks its file
 * used) so that all of them stay under STACK_DELTAS_CACHE_MAX_BYTES. Writes are atomic (src/base/atomic_file.h):
 * concurrent hostprof processes see a whole file or none, and a file replaced or removed while a table reads it
 * stays valid for that table (files are never rewritten in place).
 *
 * Ownership: stack_deltas_cache_open() returns a handle (the directory's descriptor and path, the builder's
 * identity), freed by stack_deltas_cache_free(); it does not change after the open, so calls on one handle may
 * run concurrently. Loaded tables are the caller's (stack_deltas_free()) and outlive the handle.
 * Errors: negative errno.
 */
#ifndef HOSTPROF_STACK_DELTAS_CACHE_H
#define HOSTPROF_STACK_DELTAS_CACHE_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind/stack_deltas.h"

/* Bound on the total size of the cache files (a libc table is ~200 KB). */
#define STACK_DELTAS_CACHE_MAX_BYTES (256ull << 20)
/* Suffix of the cache files' names: "<build-id>.<builder hash>.sdt". */
#define STACK_DELTAS_CACHE_SUFFIX ".sdt"
/* Longest build-id accepted, in hex digits. */
#define STACK_DELTAS_CACHE_BUILD_ID_MAX 128

/*
 * A cache file: this head, then the table's packed arrays (stack_deltas_image: data_size bytes). Native byte
 * order and layout (the tables are x86_64 only). Described here for tests and tools; only this module writes it.
 */
#define STACK_DELTAS_CACHE_MAGIC "HPSDTAB\n"
#define STACK_DELTAS_CACHE_FORMAT 3	/* the layout of the head and of the arrays: bumped with any change */
#define STACK_DELTAS_CACHE_BUILDER_MAX 64
struct stack_deltas_cache_head {
	char magic[8];
	uint32_t format, head_size;				/* head_size: sizeof(this struct) */
	char builder[STACK_DELTAS_CACHE_BUILDER_MAX];		/* the builder's identity, NUL-padded */
	char build_id[STACK_DELTAS_CACHE_BUILD_ID_MAX];		/* lowercase hex, NUL-padded */
	uint8_t file[16];					/* stack_deltas_key.file */
	uint64_t base;						/* stack_deltas_image's */
	uint32_t nrows, npages, nrules, reserved;		/* reserved: 0 */
	uint64_t hash;		/* XXH3-64 of the arrays, seeded with that of the head (this field taken as 0) */
	uint64_t data_size;
	/* The counts of the build that made the table (stack_deltas_stats), for summaries: a load does not count
	 * the rows' kinds again. */
	uint64_t fdes_eh, fdes_debug, fdes_skipped, analysed_ranges, fp_ranges, go_rows;
	uint64_t fallback_rows, plt_rows, signal_rows, stop_rows;
};

/* Which file a table is of. */
struct stack_deltas_key {
	const char *build_id;	/* lowercase hex GNU build-id, 2 to STACK_DELTAS_CACHE_BUILD_ID_MAX digits */
	uint8_t file[16];	/* the caller's identity of the file's contents (e.g. a hash of it) */
};

struct stack_deltas_cache;

/* The cache in the directory dir (created, mode 0700, when absent). Returns 0 and *out, -EPERM (dir not
 * private to the effective user), -ENOMEM, or another negative errno. */
int stack_deltas_cache_open(const char *dir, struct stack_deltas_cache **out);
/* The same with the builder's identity given (at most 63 characters) instead of this build's: for tests, to
 * play a table of another hostprof. */
int stack_deltas_cache_open_as(const char *dir, const char *builder, struct stack_deltas_cache **out);
/* NULL is a no-op. */
void stack_deltas_cache_free(struct stack_deltas_cache *c);

/* This build's builder identity ("f1 src:... dw:... cs:..."); the string lives as long as c. */
const char *stack_deltas_cache_builder(const struct stack_deltas_cache *c);

/* The name of key's cache file in the directory into buf. Returns 0, -EINVAL (build-id not lowercase hex of a
 * valid length), -ENAMETOOLONG. */
int stack_deltas_cache_file_name(const struct stack_deltas_cache *c, const struct stack_deltas_key *key, char *buf,
				 size_t len);

/*
 * key's table from the cache. stats may be NULL; else it gets the stored build's counts, from_cache set and
 * build_ns the time of the load. Returns 0 and *out, or -ENOENT (no file), -ESTALE (a file of another builder or
 * of another file with the same build-id), -EINVAL (short, corrupt or not a valid table), -EPERM (file not
 * private to the user), -ENOMEM, or another negative errno.
 */
int stack_deltas_cache_load(const struct stack_deltas_cache *c, const struct stack_deltas_key *key,
			    struct stack_deltas **out, struct stack_deltas_stats *stats);
/* The same for a file of at most max_bytes (a load costs in proportion: mapped, checked whole); -EFBIG, nothing
 * read, for a larger one. */
int stack_deltas_cache_load_upto(const struct stack_deltas_cache *c, const struct stack_deltas_key *key,
				 size_t max_bytes, struct stack_deltas **out, struct stack_deltas_stats *stats);

/* Store t, built for key with the counts stats (may be NULL), making room first. Returns 0, -EINVAL (bad key),
 * -EFBIG (larger than the whole cache), or the write's error. */
int stack_deltas_cache_store(const struct stack_deltas_cache *c, const struct stack_deltas_key *key,
			     const struct stack_deltas *t, const struct stack_deltas_stats *stats);

/*
 * The table of elf, the file key names: loaded from c when it holds a valid one, else built
 * (stack_deltas_build()) and stored in c. c or key NULL: built only. stats as for stack_deltas_build(), plus
 * from_cache; build_ns includes the store. Returns stack_deltas_build()'s result (a failed store only costs
 * the next run a build).
 */
int stack_deltas_cache_get(const struct stack_deltas_cache *c, const struct stack_deltas_key *key, Elf *elf,
			   struct stack_deltas **out, struct stack_deltas_stats *stats);

#endif
