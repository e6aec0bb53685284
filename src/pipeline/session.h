/*
 * session.h — one profiling session: perf records in, counted traces out.
 *
 * The session wires the parts of the data flow (ARCHITECTURE.md) together: it decodes each record the sampler
 * delivers, keeps the process manager up to date, unwinds each sample's copied stack (the stack-delta unwinder,
 * libunwind for the rows its tables cannot express; or libunwind alone), turns frames into (FileID, ELF address)
 * and counts them in the trace handler. Everything slow (opening files, symbolizing) happens once per file or
 * once per trace. What a walk reads of the live process (a Go goroutine behind g0: unwind/go_stack.h; the stack
 * past the kernel's copy: stackext.h) goes through the process-memory reader (procmem.h) the session gives the
 * unwinder. The session prints nothing: its log lines go to the sink its caller passes (session_options.log).
 *
 * Samples of APM processes (once correlation says a process is ready), and of processes whose goroutines (Go)
 * or stacks past the copy had to be read from the live process often or came back changed in batches, take
 * the fast lane (fastlane.h): read by threads of their own as they are taken, they reach the session through a
 * queue drained in session_tick(), and the same process's samples in the main rings are dropped from then on. The caller polls session_wake_fd()
 * with the rings and calls session_tick() after each drain, at least every session_tick()'s return.
 *
 * Off-CPU samples (session_options.off_cpu) are the samples of the sampler's off-CPU rings, one per switch-out:
 * each is kept until its thread's switch-in record (offcpu.h), then unwound like a CPU sample and counted as time
 * off CPU under that stack (traces_add_off_cpu()), or summed per thread without one (a short block, over the rate
 * cap, or a switch-out record that came without its sample). A thread's trace context cannot change while
 * it is off CPU: for an APM process in the fast lane, the switch-outs and switch-ins come from the fast lane
 * (those of the main rings are dropped like its CPU samples), whose reader read the context while the thread
 * was switched out; it is kept with the switch-out (offcpu_set_note()) and the interval counts under that
 * transaction. Before the fast lane covers a process its intervals are correlated only when a batch read comes
 * within the staleness bound of the switch-in (else counted in apm_stale). Threads still off CPU are counted up
 * to the end of the run, or of the interval (session_build_profile()). Off-CPU samples lost in full off-CPU
 * rings are counted apart from CPU samples (session_counters() off_cpu_lost, the profile's off_cpu_lost).
 *
 * Ownership: the session owns its managers and unwinder; the sampler is borrowed. Not thread-safe (the fast
 * lane's readers are threads of their own behind the queue).
 */
#ifndef HOSTPROF_SESSION_H
#define HOSTPROF_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "correlate/correlate.h"
#include "src/base/log.h"
#include "src/processes/execinfo.h"
#include "src/pipeline/fastlane.h"
#include "src/processes/jitinfo.h"
#include "src/pipeline/lanes.h"
#include "src/pipeline/thread_copies.h"
#include "src/processes/memory_watch.h"
#include "src/processes/procmgr.h"
#include "src/pipeline/offcpu.h"
#include "src/processes/stackext.h"
#include "unwind/go_stack.h"
#include "unwind/unwind_deltas.h"
#include "src/profile/profile.h"
#include "src/sampling/sampler.h"
#include "src/pipeline/walk.h"

/*
 * A sample's APM trace context counts only if it was read within this time after the sample: the thread may
 * switch transactions meanwhile. The fast lane's readers (fastlane.h) read it, measured on a 2-CPU virtual
 * machine with both CPUs busy (tests/integration/test_apm, make bench): p50 40-70 us, p99 120-350 us after the
 * sample; the rare reads later than 1 ms are a thread's first samples (a ptrace stop for its thread pointer,
 * up to 50 ms) and reader stalls. And a reader pinned to the sample's CPU at real-time priority preempts the
 * sampled thread there, so what matters, the thread's own progress since the sample, is smaller still: wall
 * time bounds it. With transactions switching every 7 ms of CPU, 1 ms could cost at most ~1/7 of the samples
 * read that late, a fraction of the < 1 % read after p99: attribution measured 99.9 %, while the gate drops
 * only the outliers (counted in apm_stale).
 */
#define SESSION_APM_MAX_STALENESS_US 1000

struct session_stats {
	uint64_t samples;	/* samples counted into traces */
	uint64_t lost;		/* samples lost, wherever: the kernel's rings, and the fast lane's (lost_fast_lane) */
	uint64_t lost_fast_lane;	/* ... of them on the fast lane: its queue was full, or its rings (fastlane.h) */
	struct walk_counts walks;	/* how the CPU samples' stacks ended */
	uint64_t bad_records;	/* records that failed to decode */
	uint64_t unwind_ns;	/* time spent unwinding user stacks */
	uint64_t handle_ns;	/* time spent handling samples in total */
	uint64_t capture_errors;	/* samples that could not be added to the replay file */
	uint64_t untracked;	/* samples of processes over the tracking limit */
	uint64_t apm_read_hist[16];	/* APM context read latency after the sample: 8 us buckets below 64 us,
					 * 128 us buckets below 1 ms, then >= 1 ms */
	uint64_t apm_stale;	/* samples of APM processes handled too late to read their trace context */
	uint64_t fast_samples;	/* samples that came through the APM fast lane */
	uint64_t fast_dropped;	/* samples of the main rings left to the fast lane (it has them) */
	uint64_t fast_goroutines;	/* Go samples on g0 followed with the goroutine the fast lane read */
	uint64_t fast_extensions;	/* walks past the copy that went on with the stack the fast lane read */
	uint64_t off_cpu_stacks;	/* off-CPU stacks unwound (not counted in samples, complete, ...) */
	struct walk_counts off_cpu_walks;	/* ... how their stacks ended, apart from the CPU samples' */
	/* Held samples (each counted once; in the daemon per profile, so one held across a profile's end counts
	 * in the next): */
	uint64_t held;		/* samples held while a table their walk needs was built */
	uint64_t replayed;	/* ... walked with it once it was ready */
	uint64_t settled;	/* ... walked without it (the fallback unwinder through that module): their process
				 * exec'd, exited or mapped over the file first, or the run ended */
	uint64_t table_pending;	/* samples walked without a table being built, never held: no room to hold them,
				 * the fast lane's, and off-CPU stacks */
	/* CPython processes (pyframes.h, python_stack.h): */
	uint64_t python_samples;	/* CPU samples of CPython processes of a version hostprof reads */
	uint64_t python_merged;		/* ... with their Python frames in place */
	uint64_t python_untrusted;	/* ... whose Python frames were not trusted: native frames kept */
	uint64_t python_unread;		/* ... without their Python frames read by the fast lane (before the process took
					 * it, or without one): native frames kept */
};



enum session_unwinder {
	SESSION_UNWIND_DELTAS,		/* stack-delta tables, libunwind for the rows they cannot express */
	SESSION_UNWIND_LIBUNWIND,	/* the reference unwinder alone */
};

/* session_options.fast_lane: whose samples the fast lane reads as they are taken (lanes.h). */
#define SESSION_FAST_LANE_APM LANES_APM
#define SESSION_FAST_LANE_STACKS LANES_STACKS

/* Stack a walk may see by default (session_options.max_stack_bytes), and the most it may be set to. */
#define SESSION_DEFAULT_MAX_STACK (1u << 20)
#define SESSION_MAX_STACK_LIMIT (64u << 20)
/* User frames a walk keeps by default (session_options.max_frames), and the most it may be set to. */
#define SESSION_DEFAULT_MAX_FRAMES 1024u
#define SESSION_MAX_FRAMES_LIMIT 65536u

/*
 * A session over records read back from a file (session_options.offline): its processes are gone, or are others
 * under the same pids now. Nothing of them is read (procmgr_set_offline(): no /proc, mappings from the records
 * only; walks read no process memory), a mapping's file is opened by open_file, a process's perf map
 * ("/tmp/perf-PID.map", the recording's pid) by open_jit_map (jitinfo_mgr_set_offline(): JIT code is named and
 * walked from it alone; NULL: no map is read), and kernel frames are named from this machine's kallsyms only when
 * kernel says they are this kernel's. There is no sampler (session_new(NULL, ...)): no fast lane, no off-CPU
 * profiling, no APM correlation, and tables are built on the session's thread, as samples need them (none is
 * held).
 */
struct session_offline {
	procmgr_open_fn open_file;
	jitinfo_open_fn open_jit_map;	/* called with open_ctx too; NULL: none */
	void *open_ctx;
	bool kernel;			/* the file's kernel is the one running: name its frames from kallsyms */
	uint64_t realtime_offset_ns;	/* CLOCK_REALTIME minus the records' clock; 0: as a live session's */
	/* The layout of the file's off-CPU samples (switch-outs, with switch records: perf_data.h), NULL if it has
	 * none. With it the session counts off-CPU time as a live one does (session_options.off_cpu and its
	 * threshold and rate cap), threads still off CPU up to the last record's time. */
	const struct perf_layout *off_cpu_layout;
};

struct session_options {
	enum session_unwinder unwinder;
	const struct session_offline *offline;	/* records from a file (struct session_offline), or NULL */
	const char *capture_path;	/* also save every sample to this replay file (replay.h), or NULL */
	int apm;			/* correlate samples of APM agents' processes (correlate.h) */
	const char *host_id;		/* sent to APM agents (src/base/host_id.h); NULL or "": /etc/machine-id */
	unsigned apm_delay_ms;		/* 0: the correlation library's default */
	unsigned apm_max_staleness_us;	/* 0: SESSION_APM_MAX_STALENESS_US */
	/* Where the session's log lines go (and the correlation library's, as "apm: ..."): the caller decides what to
	 * print. Zeroed: nothing is logged. */
	struct log_sink log;
	int go_stacks;			/* follow samples on Go's g0 stack onto their goroutine's stack (go_stack.h) */
	unsigned go_stack_bytes;	/* most goroutine stack read per such sample (at least max_stack_bytes);
					 * 0: 16 KiB */
	/* Most stack a walk may see, from the sampled SP: past the kernel's copy of stack_copy_bytes, the rest is
	 * what the fast lane read as the sample was taken, if it did, then read from the live process when still
	 * unchanged (stackext.h). 0, or not above the copy: the copy only. */
	unsigned max_stack_bytes;
	unsigned stack_copy_bytes;	/* the stack copy size the sampler asked the kernel for */
	/* A thread whose stack runs past that copy gets events of its own that copy this much (thread_copies.h);
	 * 0, or not above stack_copy_bytes: none. */
	unsigned thread_copy_bytes;
	/* Most user frames per sample (at most SESSION_MAX_FRAMES_LIMIT); a stack cut there ends [truncated].
	 * 0: SESSION_DEFAULT_MAX_FRAMES. */
	unsigned max_frames;
	unsigned fast_lane;		/* SESSION_FAST_LANE_* bits: whose samples the fast lane reads (fastlane.h) */
	int fast_lane_realtime;		/* ... with its readers at real-time priority where permitted */
	unsigned fast_lane_max_events;	/* ... with at most this many per-thread events (0: the default) */
	/* Off-CPU profiling: the sampler's off-CPU events (sampler_options.off_cpu) are turned into off-CPU time per
	 * stack (offcpu.h); blocks under off_cpu_threshold_ns are summed per thread without a stack, at most
	 * off_cpu_max_rate stacks a second are unwound (0: no limit). */
	int off_cpu;
	uint64_t off_cpu_threshold_ns;
	unsigned off_cpu_max_rate;
	int use_cache;			/* this boot's kallsyms cache (kallsyms_cache.h), decompressed debug
					 * files (debug_cache.h) and built stack-delta tables
					 * (stack_deltas_cache.h), in the user's cache directory (cache_dir.h) */
	/* The daemon's memory budget: resident bytes (VmRSS, anonymous and file-backed), 0: none. Held samples are
	 * bounded by an eighth of it, and session_tick() watches it (memory_watch.h). */
	uint64_t memory_budget;
};

struct session;

/* sampler is borrowed (NULL with o->offline); o may be NULL (defaults; o is copied, o->log.ctx must outlive the session). Returns 0 and
 * *out, -ENOMEM, or the -errno of an unwinder that cannot be set up (-ENOTSUP: no capstone). */
int session_new(struct sampler *sampler, const struct session_options *o, struct session **out);
void session_free(struct session *s);

/* A record_fn (record_source.h): ctx is the session. */
int session_handle_record(void *ctx, const struct perf_event_header *rec, const struct record_origin *origin);

/* Register a process started or attached to by hostprof, so its /proc state is read while it exists (and, for the
 * JIT maps it and its children write, their roots: jitinfo.h). */
void session_track_pid(struct session *s, pid_t pid);

/* Readable when the session has work queued (APM fast-lane samples); -1 while it has none to signal. */
int session_wake_fd(const struct session *s);

/* Handle fast-lane samples, do the due correlation work (sends, retries), free state of processes that exited.
 * Call after each read of all rings. Returns the milliseconds until the session next has work due. */
int session_tick(struct session *s);

/* The end of a run, after the last read of the rings: the fast lane's last samples, then every pending APM
 * count sent (retrying a full agent queue within the announced delay; what is left is counted). */
void session_finish(struct session *s);

/* Sampling turned off (paused) or on again in the caller's sampler: the fast lane follows. */
void session_pause(struct session *s, int paused);

const struct session_stats *session_stats(struct session *s);

/*
 * Every part's counters since the session started, in one read (the commands' summaries and logs). A part that
 * is off has its has_ flag false and its counters zero.
 */
struct session_counters {
	struct unwind_deltas_stats unwind;	/* the delta unwinder: fallback steps, frame-pointer chain use... */
	struct jitinfo_stats jit;		/* JIT code seen, the perf maps and jitdump files read to name it */
	struct execinfo_totals tables;		/* delta tables built or loaded, from the cache, rows, bytes, time */
	struct memory_watch_state memory;	/* the memory budget's watch (memory_watch.h) */
	bool has_fastlane;			/* the fast lane started */
	struct fastlane_stats fastlane;
	bool has_thread_copies;			/* threads may get a bigger stack copy (thread_copies.h) */
	struct thread_copies_stats thread_copies;
	bool has_correlate;			/* APM correlation is on */
	struct correlate_stats correlate;
	bool has_go_stacks;			/* samples on Go's g0 stack followed onto their goroutine's */
	struct go_stack_stats go_stacks;
	bool has_stackext;			/* reads past the kernel's stack copy (max_stack_bytes above it) */
	struct stackext_stats stackext;
	bool has_offcpu;			/* off-CPU intervals and what became of them (offcpu.h) */
	struct offcpu_stats offcpu;
	uint64_t off_cpu_lost;			/* off-CPU samples the kernel could not write into the off-CPU rings
						 * (the sampler's and the fast lane's): lost apart from CPU samples */
	unsigned processes;			/* processes seen (with samples or mappings) */
	uint64_t dropped_mappings;		/* mappings and thread names not kept for lack of memory */
};
void session_counters(const struct session *s, struct session_counters *out);

/* Write the replay file asked for in the options (no-op without one). Returns 0 or a negative errno. */
int session_save_capture(struct session *s);

/* Symbolize and add everything counted so far to p (info counters included). */
int session_build_profile(struct session *s, struct profile *p);

/*
 * Detach the interval counted so far, for its profile to be built on another thread while the session goes on
 * (the daemon's naming thread): its counters go into p->info (threads still off CPU counted up to now), its JIT
 * frames are named and kallsyms loaded here, and *out becomes its traces, for traces_build_profile(*out, p) on
 * that thread (traces.h). The session counts anew, in a new table. Hand *out back with
 * session_release_interval() on the session's thread once built. Returns 0, or a negative errno with nothing
 * detached.
 */
struct traces;
int session_detach_interval(struct session *s, struct profile *p, struct traces **out);
void session_release_interval(struct session *s, struct traces *t);

/* Track at most max_processes processes (0: no limit); samples of others count as [too many processes]. */
void session_set_limits(struct session *s, unsigned max_processes);
/* Forget processes without a sample for idle_ns; returns how many. */
unsigned session_forget_idle(struct session *s, uint64_t idle_ns);

/* Start a new reporting interval: forget the traces, counts and counters already put into a profile. */
void session_reset_counts(struct session *s);

/* The memory budget's watch (memory_watch.h), the session's: valid while it is. */
struct memory_watch *session_memory_watch(const struct session *s);

#endif
