/*
 * jitinfo.h — the JIT code of profiled processes: what runtime-generated code a sample ran in, and its name.
 *
 * A process's JIT code is its anonymous executable memory (procmgr.h: mapping.anon). What its runtime tells
 * profilers about that code — a perf map, /tmp/perf-PID.map (symbols/perfmap.h), or a jitdump file it maps,
 * jit-PID.dump (symbols/jitdump.h) — is read into one table per process (symbols/jitsyms.h): first when a
 * sample lands in the process's JIT code, then from where the last read stopped, when the file grew: when a
 * JIT address is not named (at most every JITINFO_REFRESH_NS per process) and before every profile is built
 * (jitinfo_mgr_refresh), so that a map written as the process exits (HotSpot's -XX:+DumpPerfMapAtExit) still
 * names the samples of `record -- CMD`. What was read is kept after the process exited.
 *
 * Files are opened through the process's root directory (/proc/PID/root: containers), opened once while the
 * process lives — at its first JIT frame, or, for the processes hostprof starts or attaches to and their
 * children (jitinfo_mgr_track), as soon as they are seen, since their samples may be handled after they exited.
 * openat2's RESOLVE_IN_ROOT keeps symbolic links from leading out of it, and the file itself is never opened
 * through one; it is read only when it is a regular file owned by the process's effective user and modified
 * since the process started (a map left by an earlier process of the same pid is not its map). The map's name
 * uses the pid the process sees itself as (the last NSpid in /proc/PID/status).
 *
 * Frame pointers: JIT code has no unwind tables. It is walked by frame pointer (unwind.h: unwind_module.jit),
 * and so is code in a file the runtime's map names as its own (jitinfo_declares), in processes whose runtime
 * says it keeps them: one that publishes a perf map or a jitdump file (V8, CPython 3.12+ -X perf, ...) — but a
 * JVM (libjvm.so mapped), whose compiled code keeps them only with -XX:+PreserveFramePointer, given on its
 * command line or in JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS or _JAVA_OPTIONS (the last one wins, as in the JVM).
 * Trampolines of a known shape without a frame of their own (CPython's) are stepped by their shape instead
 * (jitinfo_trampoline). A JVM's code cache is read from its memory (hotspot.h), once the caller found its
 * exported tables (jitinfo_open_jvm): without frame pointers its JIT frames get their code blob's rule, with
 * them they are walked by frame pointer; either way each blob met is named into the process's table as a map
 * would name it, while the process lives (nothing is read once its exit was seen).
 *
 * Identity (stack-trace IDs; man/hostprof-profile.5): a JIT frame at an address the table names is (FileID =
 * FNV-1a-128 of "jit:" and the name, address = its offset in the named code), the same in every process and
 * run; elsewhere it is (FileID = FNV-1a-128 of "jit:pid:PID:START", START the process's start time in clock
 * ticks, address = the runtime address).
 *
 * Lifetime: an entry is reference counted. The manager holds one reference while the process lives, dropped
 * after its exit (jitinfo_mgr_on_exit), at its exec (jitinfo_mgr_on_exec) or when it has been idle
 * (jitinfo_mgr_forget_idle); each trace frame in its code holds another (jitinfo_ref / jitinfo_release), so a
 * table stays until the last profile that needs it was built. The manager must outlive every entry. Bounds: at
 * most limits.max_processes entries exist at once (each holds up to three file descriptors), each table within
 * limits.syms, each file read up to limits.max_file_bytes; what is dropped is counted (jitinfo_stats). Not
 * thread-safe.
 */
#ifndef HOSTPROF_JITINFO_H
#define HOSTPROF_JITINFO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/profile/ids.h"
#include "src/processes/hotspot.h"
#include "src/processes/procmgr.h"
#include "symbols/jitsyms.h"
#include "unwind/unwind.h"

#define JITINFO_REFRESH_NS 200000000ULL
#define JITINFO_DEFAULT_PROCESSES 256
#define JITINFO_DEFAULT_FILE_BYTES (512ULL << 20)

struct jitinfo_limits {
	unsigned max_processes;		/* 0: JITINFO_DEFAULT_PROCESSES */
	uint64_t max_file_bytes;	/* 0: JITINFO_DEFAULT_FILE_BYTES */
	struct jitsyms_limits syms;	/* per process */
};

struct jitinfo_stats {
	uint64_t processes;	/* processes whose JIT code samples landed in */
	uint64_t untracked;	/* ... not tracked: max_processes entries existed already */
	uint64_t fp_processes;	/* ... whose JIT code is walked by frame pointer */
	uint64_t perf_maps, jitdumps;	/* files read */
	uint64_t symbols;	/* code ranges read from them */
	uint64_t bytes;		/* bytes read from them */
	uint64_t skipped;	/* malformed or over-long map lines, jitdump records skipped or not usable */
	uint64_t dropped;	/* ranges a table did not keep (its limits), bytes past max_file_bytes */
	uint64_t refused;	/* files not read: not a regular file, another owner, older than the process */
	uint64_t jvms;		/* JVMs whose code cache was found (jitinfo_open_jvm) */
	uint64_t blob_frames;	/* ... lookups of a JIT address (a frame, or a return address a step checks) a
				 * code blob's rule answered, in JVMs without frame pointers */
	uint64_t blob_misses;	/* ... lookups no blob answered (code freed since, a word that was no return
				 * address) */
	uint64_t blob_names;	/* ... code blobs named from the JVMs' memory */
	uint64_t method_names;	/* ... interpreted methods named from the JVMs' memory */
};

/* What a JIT frame is. Strings stay valid until the entry is released. */
struct jitinfo_frame {
	struct file_id file_id;	/* with address: the frame's identity in stack-trace IDs */
	uint64_t address;
	const char *name;	/* NULL when nothing names the address */
	const char *source;	/* source file (jitdump debug information), "" if unknown */
	uint32_t line;		/* 0 if unknown */
	const char *origin;	/* where the name came from, as the process sees it ("/tmp/perf-42.map"),
				 * JITINFO_JVM_ORIGIN (a JVM's code cache), or "[jit]" when unnamed */
};

/* The origin of names read from a JVM's code cache (its memory). */
#define JITINFO_JVM_ORIGIN "[jvm]"

struct jitinfo_mgr;
struct jitinfo;

/* limits may be NULL (defaults). Returns 0 and *out (free with jitinfo_mgr_free()), or -ENOMEM; *out is set only on
 * success. */
int jitinfo_mgr_new(const struct jitinfo_limits *limits, struct jitinfo_mgr **out);

/*
 * Offline: the processes are a recording's (session.h: struct session_offline), gone or others under the same pids
 * now, so nothing is read of them: no root directory, user, start time, JVM options or memory (no trampoline is
 * checked, so none is stepped; a JVM's code is not walked by frame pointer), no jitdump file. Only the perf map is
 * read, "/tmp/perf-PID.map" with the recording's pid, through open_map: a descriptor of a regular file it accepts
 * (it decides where to look and whose file to trust), or a negative errno (-ENOENT: none; else counted refused).
 * The map is parsed and bounded as a live one (limits). Call before the first entry is made.
 */
typedef int (*jitinfo_open_fn)(void *ctx, const char *path);
void jitinfo_mgr_set_offline(struct jitinfo_mgr *m, jitinfo_open_fn open_map, void *ctx);
/* Every entry must have been released (the manager's own references are dropped here). */
void jitinfo_mgr_free(struct jitinfo_mgr *m);

/*
 * The entry of process p (a sample was in its JIT code), made (and its files read) on first use; now_ns is a
 * monotonic clock for the refresh rate. NULL when max_processes entries exist or memory is short. The reference
 * is the manager's: take one (jitinfo_ref) to keep the entry past jitinfo_mgr_detach.
 */
struct jitinfo *jitinfo_get(struct jitinfo_mgr *m, struct process *p, uint64_t now_ns);
/*
 * Make pid's entry now, while it lives, rather than at its first JIT frame (which may be handled after it exited:
 * its root directory is gone then), and so for what it execs and forks (the command of record -- CMD, -p PID).
 */
void jitinfo_mgr_track(struct jitinfo_mgr *m, pid_t pid, uint64_t now_ns);
/* A mapping perf reported for pid, if pid has an entry: a jitdump file (jit-N.dump) is read; libjvm.so makes it a
 * JVM, whose options are read then. */
void jitinfo_mgr_on_mapping(struct jitinfo_mgr *m, pid_t pid, const char *path);
/* pid exec'd: its entry (if any) lives on only through the references of frames; a tracked one is made again. */
void jitinfo_mgr_on_exec(struct jitinfo_mgr *m, pid_t pid, uint64_t now_ns);
/* parent forked child: a reused child pid's entry is detached; the child of a tracked process is tracked. */
void jitinfo_mgr_on_fork(struct jitinfo_mgr *m, pid_t parent, pid_t child, uint64_t now_ns);
/* pid's entry (if any) lives on only through the references of frames. */
void jitinfo_mgr_detach(struct jitinfo_mgr *m, pid_t pid);
/* pid exited: its entry is detached at the third jitinfo_mgr_reap() from now (per-CPU rings are read one after
 * the other: a sample of the process may come after its exit record). */
void jitinfo_mgr_on_exit(struct jitinfo_mgr *m, pid_t pid);
void jitinfo_mgr_reap(struct jitinfo_mgr *m);
/* The same, but an exited pid for which keep(ctx, pid) is true stays attached (its reap count paused): samples of
 * it are still to be named. */
void jitinfo_mgr_reap_but(struct jitinfo_mgr *m, bool (*keep)(void *ctx, pid_t pid), void *ctx);
/* Detach entries not used since before cutoff_ns; returns how many. */
unsigned jitinfo_mgr_forget_idle(struct jitinfo_mgr *m, uint64_t cutoff_ns);
/* Read what the files of every entry gained since they were last read (before building a profile). */
void jitinfo_mgr_refresh(struct jitinfo_mgr *m);
void jitinfo_mgr_get_stats(const struct jitinfo_mgr *m, struct jitinfo_stats *out);

void jitinfo_ref(struct jitinfo *j);
void jitinfo_release(struct jitinfo *j);

/* The entry of pid, if it has one (nothing is read or made). */
struct jitinfo *jitinfo_find(struct jitinfo_mgr *m, pid_t pid);

/* The entry of pid if it has one and its JIT map names addr (read again if it grew, as jitinfo_names): JIT code
 * in a mapping hostprof does not know (its record was lost and the process is gone). */
struct jitinfo *jitinfo_naming(struct jitinfo_mgr *m, pid_t pid, uint64_t addr, uint64_t now_ns);

/* Whether the process's JIT code is walked by frame pointer (see above). */
bool jitinfo_walks_fp(const struct jitinfo *j);
/*
 * Whether addr, in a file the process mapped, is code its runtime calls its own and walks by frame pointer (its
 * JIT map names it: V8 names the builtins embedded in the node binary, which have no unwind tables): true with
 * [*lo, *hi) that code, false with [*lo, *hi) the addresses around addr that are not.
 */
bool jitinfo_declares(struct jitinfo *j, uint64_t addr, uint64_t *lo, uint64_t *hi);
/*
 * Whether addr (an interrupted instruction, or a return address minus 1) is in a trampoline of a known shape that
 * keeps no frame pointer — CPython's perf trampolines (-X perf: "py::" copies of sub $8,%rsp; call *%rcx; add
 * $8,%rsp; ret, checked once per process against its memory): true, with the CFA at SP + *cfa_sp (FP the
 * caller's) in [*lo, *hi). False, with [*lo, *hi) around addr free of them.
 */
bool jitinfo_trampoline(struct jitinfo *j, uint64_t addr, uint32_t *cfa_sp, uint64_t *lo, uint64_t *hi);
/*
 * For an unwinder walking by frame pointer (unwind.h: unwind_module.jit): the module of addr, in the process's
 * anonymous executable mapping m. False when the process's JIT code is not walked (jitinfo_walks_fp). The module
 * is cut to where one rule holds: a trampoline's rows (jitinfo_trampoline), one named piece of code, or the code
 * between named ones; a JVM with frame pointers gets the whole mapping. In a JVM without frame pointers whose
 * code cache was opened (jitinfo_open_jvm): the code blob's rule at addr as the cache stands now (now_ns,
 * CLOCK_MONOTONIC), cut to where it holds in that blob (hotspot.h); false where there is none.
 */
bool jitinfo_module(struct jitinfo *j, const struct mapping *m, uint64_t addr, uint64_t now_ns,
		    struct unwind_module *mod);
/* The same for addr in no mapping hostprof knows, when the map names it (jitinfo_naming): the named code. */
bool jitinfo_module_unmapped(struct jitinfo *j, uint64_t addr, uint64_t now_ns, struct unwind_module *mod);
/*
 * Whether the process is a live JVM whose code cache has not been looked for: the caller then finds libjvm.so's
 * exported VMStructs globals in the process (hotspot.h) and passes them to jitinfo_open_jvm(), NULL when it could
 * not. Tried once per process; returns 0 or why it failed (negative errno).
 */
bool jitinfo_is_libjvm(const char *path);	/* a path whose file name is libjvm.so */
bool jitinfo_needs_jvm_tables(const struct jitinfo *j);
int jitinfo_open_jvm(struct jitinfo *j, const uint64_t globals[HOTSPOT_NGLOBALS]);
/*
 * mod, a file's module holding addr: becomes a JIT module where the runtime declares the code its own
 * (jitinfo_declares), and is cut to the addresses around addr where that does not change (an unwinder reuses a
 * module for every address it covers).
 */
void jitinfo_file_module(struct jitinfo *j, uint64_t addr, struct unwind_module *mod);
/* Whether addr is named; when not, the files are read again if they grew (at most every JITINFO_REFRESH_NS). */
bool jitinfo_names(struct jitinfo *j, uint64_t addr, uint64_t now_ns);
/*
 * A JVM's interpreted frame says which Method it runs (unwind_frame.frame_word): whether that Method is named in the
 * table, by a one-byte range at its address (a frame is then known by that address, its code being the
 * interpreter's for every method). Named at its first sight (hotspot_method_name); a word that is no Method is
 * not named, and not read again. A name is kept for the Method's address for the process's life: a class
 * unloaded and its Method's memory reused would keep the old name (as a blob's code range keeps its own).
 */
bool jitinfo_names_method(struct jitinfo *j, uint64_t method);
/* The identity of the frame at addr (for stack-trace IDs). */
void jitinfo_identity(struct jitinfo *j, uint64_t addr, struct file_id *file_id, uint64_t *address);
/* A number that changes whenever jitinfo_identity() of any address may: while it holds, the identity of an address
 * is what it was (so a stack's ID can be found again by its frames without hashing them). */
uint64_t jitinfo_generation(const struct jitinfo *j);
/* Everything known about the frame at addr. */
void jitinfo_frame(struct jitinfo *j, uint64_t addr, struct jitinfo_frame *out);

#endif
