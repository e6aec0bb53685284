/*
 * procmgr.h — the process manager: per-PID mappings, names and lifetimes.
 *
 * A process's mappings — its files' mappings, the vdso and its anonymous executable memory (JIT code) — are
 * seeded from /proc/PID/maps the first time the process is seen, then kept up to date
 * from perf MMAP2, COMM (exec), FORK and EXIT records; /proc/PID/maps is re-read only when a sample lands in
 * no known mapping, at most once per PROCMGR_RESYNC_NS per process. Files are opened lazily, when a sample
 * first needs them, through the executable-info manager: the plain path if it names the mapped inode, else
 * the path under /proc/PID/root (containers), else /proc/PID/map_files. An exec keeps the mappings it replaced
 * aside until the caller drops them: samples the kernel takes inside the exec, after its record, still carry
 * the old program's registers.
 *
 * Exited processes are kept until procmgr_reap() has been called twice after their exit, because per-CPU
 * rings are read one after the other and a sample of a process may be read after its exit record.
 * Not thread-safe.
 */
#ifndef HOSTPROF_PROCMGR_H
#define HOSTPROF_PROCMGR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/processes/container_id.h"
#include "src/processes/execinfo.h"
#include "src/sampling/perf_record.h"

#define PROCMGR_RESYNC_NS 200000000ULL
#define PROCMGR_COMM_LEN 16
/* The longest program path kept (the kernel's own limit); a longer one is not known rather than cut. */
#define PROCMGR_EXE_PATH_MAX 4096

struct mapping {
	uint64_t start, end, pgoff;
	uint64_t dev;		/* makedev(major, minor), 0 if unknown */
	uint64_t ino;
	int prot;		/* PROT_READ/WRITE/EXEC as mapped; 0 if unknown */
	int anon;		/* executable memory no file backs (JIT code, jitinfo.h): nothing to open */
	char *path;		/* as the process sees it; "[vdso]" for the vdso, "//anon" (or the name a
				 * process gave it, "[anon:...]") for anonymous executable memory */
	struct execinfo *exe;	/* NULL until first needed */
	int exe_failed;		/* opening the file failed: don't retry for this mapping */
	uint64_t bias;		/* valid when exe != NULL */
};

struct thread_info {
	pid_t tid;
	char name[PROCMGR_COMM_LEN];
};

struct process {
	pid_t pid;
	char comm[PROCMGR_COMM_LEN];
	struct mapping *maps;	/* sorted by start, non-overlapping */
	unsigned nmaps, capmaps;
	struct thread_info *threads;
	unsigned nthreads, capthreads;
	uint64_t last_resync_ns;
	uint64_t last_sample_ns;	/* monotonic time of the latest sample, for forgetting idle processes */
	int exited;		/* reap generations left: 0 while alive */
	/* The mappings of the image its last exec replaced (sorted like maps), kept until the new image's
	 * registers show (procmgr_drop_replaced()): the kernel sends the exec record before it sets the new
	 * program's registers, and samples it takes in between carry the old program's. */
	struct mapping *replaced;
	unsigned nreplaced;
	char *exe_path;		/* its program's path, NULL until procmgr_exe_path() learns it; an exec forgets it */
	bool offline;		/* known from records read back from a file only (procmgr_set_offline()) */
	bool container_known;	/* container_id was read (procmgr_container_id()) */
	bool stack_start_known;	/* stack_start was read (procmgr_stack_start()); an exec forgets it */
	uint64_t stack_start;
	char container_id[CONTAINER_ID_LEN + 1];	/* "" if none */
};

struct procmgr;

/* execinfo is borrowed and must outlive the process manager. Returns 0 and *out (free with procmgr_free()), or
 * -ENOMEM; *out is set only on success. */
int procmgr_new(struct execinfo_mgr *execinfo, struct procmgr **out);
void procmgr_free(struct procmgr *pm);

/*
 * Offline: the records come from a file (a perf.data file, perf_data.h), their processes are gone or are others
 * under the same pids. Nothing is read from /proc from now on: a process is known only by its records (mappings,
 * names), a miss re-reads nothing, a thread without a COMM record has its process's name, no container is known,
 * and a mapping's file is opened by open_file (a descriptor, or a negative errno) instead of by its path, /proc/PID/root
 * and map_files. A file open_file does not give (or that is no ELF file the mapping fits) is known without its
 * contents (execinfo_acquire_unread(): its frames are offsets in it, unnamed), by the build-id open_file wrote to
 * build_id (lowercase hex, at most 40 characters and a NUL; left "" when none was recorded). Call before the first
 * process is created.
 */
typedef int (*procmgr_open_fn)(void *ctx, const struct process *p, const struct mapping *m, char build_id[41]);
void procmgr_set_offline(struct procmgr *pm, procmgr_open_fn open_file, void *ctx);

/* The process, created (and seeded from /proc) if unknown. NULL with errno ENOMEM, or ENOSPC when the limit
 * set by procmgr_set_limit() is reached. */
struct process *procmgr_get(struct procmgr *pm, pid_t pid);

/* The process if tracked, else NULL: never created, nothing read from /proc. */
struct process *procmgr_find(struct procmgr *pm, pid_t pid);
/* Whether a mapping of p overlaps [start, end): a new mapping there replaces it. */
bool procmgr_overlaps(const struct process *p, uint64_t start, uint64_t end);

/* Track at most max processes (0: no limit). Memory stays bounded on hosts with very many processes. */
void procmgr_set_limit(struct procmgr *pm, unsigned max);
/* Whether the caller still needs pid's process as it is (samples of its held: walked in its mappings later). */
typedef bool (*procmgr_keep_fn)(void *ctx, pid_t pid);

/* Forget processes with no sample since before cutoff_ns and not kept (keep may be NULL); they are re-read from
 * /proc if sampled again. Returns how many were forgotten. */
unsigned procmgr_forget_idle(struct procmgr *pm, uint64_t cutoff_ns, procmgr_keep_fn keep, void *ctx);

void procmgr_on_mmap2(struct procmgr *pm, const struct perf_mmap2 *m);
void procmgr_on_comm(struct procmgr *pm, const struct perf_comm *c);
void procmgr_on_fork(struct procmgr *pm, const struct perf_task *t);
void procmgr_on_exit(struct procmgr *pm, const struct perf_task *t);
/* Free processes that exited two reaps ago and are not kept (keep may be NULL: a kept one waits for a later reap). */
void procmgr_reap(struct procmgr *pm, procmgr_keep_fn keep, void *ctx);

/*
 * The mapping containing addr; on a miss, /proc/PID/maps is re-read (rate limited) and the lookup retried.
 * now_ns is a monotonic clock for the rate limit. NULL if none. A re-read replaces the process's mappings but
 * keeps the files the old ones held (their executable-info: ELF images, delta tables) until
 * procmgr_release_deferred(): an unwinder in the middle of a walk may still be reading them.
 */
struct mapping *procmgr_find_mapping(struct procmgr *pm, struct process *p, uint64_t addr, uint64_t now_ns);
/* Release the files that re-reads of /proc/PID/maps replaced: call when no walk is in progress (after a sample). */
void procmgr_release_deferred(struct procmgr *pm);
/* The mapping containing addr as known now, without re-reading /proc/PID/maps on a miss: for addresses that are
 * only guesses (candidates a caller is checking), where a miss is no sign the mappings changed. */
struct mapping *procmgr_lookup_mapping(struct process *p, uint64_t addr);
/* The mapping containing addr in the image p's last exec replaced, while it is kept; NULL if none. */
struct mapping *procmgr_replaced_mapping(struct process *p, uint64_t addr);
/* Release the image p's last exec replaced: p runs its new one. */
void procmgr_drop_replaced(struct procmgr *pm, struct process *p);
/* Open the mapping's file (one of p's, or code of its replaced image) through the executable-info manager if not
 * done yet; returns its entry or NULL. */
struct execinfo *procmgr_mapping_exe(struct procmgr *pm, struct process *p, struct mapping *m);
/* Open the file of p's mapping m as the process sees it (its path, under its root, or the mapping itself), checked
 * to be the file mapped: a descriptor (the caller closes it) or a negative errno. */
int procmgr_open_mapping_file(const struct process *p, const struct mapping *m);

/*
 * The path of p's program, "" if unknown; owned by p, valid until the next call with p or p's exec. Learned once
 * per image: the path of its program's mapping as the records told it (the first mapping of a file, as for the
 * exec check above), else the link /proc/PID/exe, at most PROCMGR_EXE_PATH_MAX bytes; a child has its parent's
 * until it execs. A path that could not be learned is tried again at the next call.
 */
const char *procmgr_exe_path(struct process *p);
/* The id of the container p runs in (container_id.h), "" if none or unknown; read from /proc/PID/cgroup at the
 * first call (a child has its parent's). Owned by p, as long as p. */
const char *procmgr_container_id(struct process *p);
/* Where p's initial stack starts (/proc/PID/stat's startstack: argc's address, below argv, the environment and the
 * auxiliary vector), read once per image: its main thread's stack runs down from there (a goroutine's or a
 * coroutine's, on memory of their own, does not). 0 if unknown: offline, gone, or hidden from us. */
uint64_t procmgr_stack_start(struct process *p);

/* The thread's name (from COMM records or /proc); "" if unknown. */
const char *procmgr_thread_name(struct procmgr *pm, struct process *p, pid_t tid);

unsigned procmgr_count(const struct procmgr *pm);
/* Processes seen since procmgr_new(), exited ones included. */
unsigned procmgr_seen(const struct procmgr *pm);
/* Mappings, re-reads of /proc/PID/maps and thread names not kept for lack of memory since procmgr_new() (samples
 * in such a mapping show [unknown], such a thread no name). */
uint64_t procmgr_dropped(const struct procmgr *pm);

/* Call fn for every process (exited ones not yet reaped included); stops at and returns a negative result. */
int procmgr_for_each(struct procmgr *pm, int (*fn)(void *ctx, struct process *p), void *ctx);

/* Parse one /proc/PID/maps line into the fields of m (path is not copied: *path points into line).
 * Returns 0, or -EINVAL for a malformed line. Exposed for tests. */
int procmgr_parse_maps_line(char *line, struct mapping *m, int *executable, const char **path);

#endif
