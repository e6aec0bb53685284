/*
 * execinfo.h — the executable-info manager: what hostprof knows per executable file.
 *
 * One entry per distinct file, shared by every process that maps it and reference counted: acquired when a
 * sample first lands in a mapping of the file (not at mmap time), released when the last mapping that holds
 * it goes away. Entries are found by (dev, inode, size, mtime), then by FileID, never by path: the same path
 * in two containers can be two files. An entry holds the open file, its ELF handle, FileID, build-id, load
 * segments and, lazily, its symbolizer.
 *
 * Files that only root can write are mmap'd; any other file is read with pread, so that a user truncating it
 * cannot turn hostprof's next read into SIGBUS (a truncated file is then a read error, e.g. no delta table).
 * Large tables are built by a worker thread (execinfo_mgr_start_worker()), so that the caller never waits for one.
 *
 * The manager never calls into the process manager. Release hooks let other caches keyed on an entry (the
 * unwinders' per-file tables) drop their data before the entry is freed. Not thread-safe: one thread calls it (the
 * table worker's thread touches no entry), but for the symbolizers a profile build on another thread uses
 * (execinfo_naming_symbolizer()).
 */
#ifndef HOSTPROF_EXECINFO_H
#define HOSTPROF_EXECINFO_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/profile/ids.h"
#include "symbols/symbolizer.h"
#include "unwind/stack_deltas.h"

#include "src/base/load_bias.h"

struct execinfo;

struct execinfo_mgr;

typedef void (*execinfo_release_fn)(void *ctx, const struct execinfo *e);

/* Returns 0 and *out (free with execinfo_mgr_free()), -ENOMEM, or -ENOTSUP when libelf refuses its version;
 * *out is set only on success. */
int execinfo_mgr_new(struct execinfo_mgr **out);
/* Every entry must have been released. */
void execinfo_mgr_free(struct execinfo_mgr *m);
/* hostprof's private cache directory (src/base/cache_dir.h): symbolizers of its entries keep decompressed debug
 * files there (symbols/debug_cache.h), and stack-delta tables are loaded from and stored there
 * (unwind/stack_deltas_cache.h; for files with a build-id that only root or the effective user can write).
 * Without it, neither is read nor written. Set it once, before the first entry is acquired. Returns 0, -EINVAL
 * (already set, or dir NULL), -ENOMEM. */
int execinfo_mgr_set_cache_dir(struct execinfo_mgr *m, const char *dir);
/* Called with each entry just before it is freed, and when its per-file state is dropped (execinfo_mgr_evict()):
 * drop what is kept for it. At most 4 hooks. */
int execinfo_mgr_add_release_hook(struct execinfo_mgr *m, execinfo_release_fn fn, void *ctx);

/*
 * Acquire the entry for the open file fd (path is for display). Takes ownership of fd: it is closed if an
 * entry for the same file already exists or on error. Returns 0 or a negative errno (-ENOEXEC: not ELF).
 */
int execinfo_acquire_fd(struct execinfo_mgr *m, int fd, const char *path, struct execinfo **out);
/* Acquire an entry for an ELF image in memory (copied), e.g. the vdso. */
int execinfo_acquire_image(struct execinfo_mgr *m, const void *image, size_t size, const char *name,
			   struct execinfo **out);
/*
 * Acquire the entry of a file that is not at hand (a recording's file missing here, or only another build of it
 * found): nothing is read, it has no ELF, symbolizer nor delta table, and every mapping of it has the bias
 * start - pgoff, so that its frames' addresses are offsets in the file. It is known by build_id (lowercase hex)
 * when given ("" or NULL: by path), never by an open file. Returns 0, -ENOMEM or -ENAMETOOLONG.
 */
int execinfo_acquire_unread(struct execinfo_mgr *m, const char *path, const char *build_id, struct execinfo **out);
/* Add a reference to an acquired entry. */
void execinfo_ref(struct execinfo *e);
void execinfo_release(struct execinfo_mgr *m, struct execinfo *e);

/*
 * For a mapping of e at [map_start, map_end) with file offset pgoff and protection prot (PROT_* bits, or
 * LOAD_PROT_UNKNOWN): the bias (runtime address minus ELF virtual address), see load_bias.h. Returns 0, or
 * -ENOENT when pgoff is in no load segment.
 */
int execinfo_bias(const struct execinfo *e, uint64_t map_start, uint64_t map_end, uint64_t pgoff, int prot,
		  uint64_t *bias);
/* Whether va lies inside one of the file's load segments. */
int execinfo_contains_va(const struct execinfo *e, uint64_t va);

/* The symbolizer for e, opened on first use; NULL if the file cannot be symbolized. It marks e used (kept by the
 * next execinfo_mgr_evict() of idle files). */
struct symbolizer *execinfo_symbolizer(struct execinfo *e);
/*
 * The same without marking e: for a profile build on a thread of its own (traces.h), between
 * execinfo_mgr_naming(m, true) and execinfo_mgr_naming(m, false) on the manager's thread, while that thread goes
 * on unwinding. The symbolizers are touched by builds only, and execinfo_mgr_evict() leaves them alone while a
 * build is in flight; the entries a build names are held by its traces, and freed on the manager's thread.
 */
struct symbolizer *execinfo_naming_symbolizer(struct execinfo *e);
/* Close e's symbolizer, for the build naming it (the same rules): it comes back when asked for again. Returns
 * whether there was one. */
bool execinfo_naming_close_symbolizer(struct execinfo *e);
/* A profile build on another thread begins (true) or has ended (false). */
void execinfo_mgr_naming(struct execinfo_mgr *m, bool begin);

/* The file's stack-delta table, built on first use (once per file, shared by every process), or loaded from
 * the table cache when the manager has a cache directory; NULL if the file has no usable unwind information.
 * With a worker, waits for its build. */
const struct stack_deltas *execinfo_deltas(struct execinfo *e);

/*
 * Table building off the caller's thread. After execinfo_mgr_start_worker(), a table that is neither built nor in
 * the table cache is built by a worker thread (src/processes/table_worker.h) on an Elf handle of its own: the entry's own
 * handle stays the caller's alone. The worker holds a reference on the entry until its job is collected.
 * wake_fd: an eventfd the worker writes when a table is ready (or -1). Returns 0, -EINVAL (started already),
 * -ENOMEM.
 */
int execinfo_mgr_start_worker(struct execinfo_mgr *m, int wake_fd);
/* The table if it is ready (built, or loaded now from the cache: a file of up to EXECINFO_LOAD_NOW_BYTES); else
 * NULL, with *pending true while the worker loads or builds it (asked now if needed; when EXECINFO_MAX_BUILDS jobs
 * are queued already, once one of them is done). In-memory images and managers without a worker build at once.
 * While builds are deferred (execinfo_mgr_defer_builds()), a table not there is neither built nor pending: NULL,
 * and execinfo_mgr_deferring() says why. */
const struct stack_deltas *execinfo_deltas_nowait(struct execinfo *e, bool *pending);
#define EXECINFO_MAX_BUILDS 32
#define EXECINFO_LOAD_NOW_BYTES (1u << 20)
/* Install the tables the worker finished (releasing its references: entries may be freed). Returns how many. */
unsigned execinfo_mgr_collect(struct execinfo_mgr *m);
/* The same, after waiting for every build submitted. */
unsigned execinfo_mgr_wait(struct execinfo_mgr *m);
/* Cancel the builds not started, wait for the running one and collect all: call before releasing the last
 * entries, and before execinfo_mgr_free(). */
void execinfo_mgr_stop(struct execinfo_mgr *m);

/*
 * The memory budget's lever: drop the delta tables and symbolizers of the entries whose table or symbolizer was
 * not asked for since the previous call (all: of every entry). Entries stay (their processes still map them); a
 * table or symbolizer asked for again comes back, from the table cache (cheap) or built by the worker. Tables being
 * built are left alone. The release hooks are called for each entry dropped. out gets what was dropped.
 */
struct execinfo_evicted {
	unsigned tables, symbolizers;
	uint64_t table_bytes;
};
void execinfo_mgr_evict(struct execinfo_mgr *m, bool all, struct execinfo_evicted *out);

/* Over a memory budget (the caller's to watch): while defer is set, a file without a table gets none built (its
 * samples' walks stop at it: unwind.h, table_refused); once cleared, it is built when asked for again. */
void execinfo_mgr_defer_builds(struct execinfo_mgr *m, bool defer);
/* Asked before each build with the bytes it will take at its peak: false defers builds (as above) until the
 * caller clears it. */
typedef bool (*execinfo_room_fn)(void *ctx, uint64_t bytes);
void execinfo_mgr_set_room(struct execinfo_mgr *m, execinfo_room_fn room, void *ctx);
/* Whether builds are deferred now (a table not there is not to be made by anyone). */
bool execinfo_mgr_deferring(const struct execinfo *e);
/* Tables asked for while deferred, so far. */
uint64_t execinfo_mgr_builds_deferred(const struct execinfo_mgr *m);
/* Give back the resident pages of the files mapped (read only, ELF_C_READ_MMAP: root's): they count in the
 * process's resident memory while touched, and come back from the page cache when read again. */
void execinfo_mgr_trim_files(struct execinfo_mgr *m);

/* What the entry knows of its file; the strings and the FileID live as long as the entry. */
const struct file_id *execinfo_file_id(const struct execinfo *e);
const char *execinfo_build_id(const struct execinfo *e);	/* lowercase hex GNU build-id, "" if none */
const char *execinfo_path(const struct execinfo *e);	/* as first seen: for display, never an identity */
const char *execinfo_name(const struct execinfo *e);	/* basename of the path */
Elf *execinfo_elf(const struct execinfo *e);
bool execinfo_in_memory(const struct execinfo *e);	/* an image in memory (the vdso), not a file */
bool execinfo_unread(const struct execinfo *e);		/* from execinfo_acquire_unread() */
uint64_t execinfo_size(const struct execinfo *e);	/* bytes of the file or image */
/* A malloc'd copy of the whole file or image, at most max bytes (-EFBIG past it), for replay files. 0 or
 * -errno; the caller frees *out. */
int execinfo_copy_contents(const struct execinfo *e, size_t max, uint8_t **out, size_t *len);
/* Whether bias places the load segment holding pgoff at map_start (load_bias_fits() over e's segments). */
bool execinfo_bias_fits(const struct execinfo *e, uint64_t map_start, uint64_t pgoff, uint64_t bias);
/* The delta table's statistics; NULL before it is built or when it could not be. */
const struct stack_deltas_stats *execinfo_deltas_stats(const struct execinfo *e);

/* References held on e (acquisitions and execinfo_ref() not yet released): for tests and diagnostics. */
unsigned execinfo_refs(const struct execinfo *e);

/* Entries alive. */
unsigned execinfo_mgr_count(const struct execinfo_mgr *m);

/* Totals over the entries alive, for reporting: delta tables built or loaded (tables_cached of them from the
 * table cache), their rows and bytes, time spent building or loading them. */
struct execinfo_totals {
	unsigned entries, tables, tables_cached;
	uint64_t rows, bytes, build_ns;
};
void execinfo_mgr_totals(const struct execinfo_mgr *m, struct execinfo_totals *t);

#endif
