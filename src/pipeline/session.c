/*
 * session.c — one profiling session. See session.h for the contract.
 */
#include "src/pipeline/session.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "src/base/cache_dir.h"
#include "src/base/clock.h"
#include "src/pipeline/apm_link.h"
#include "src/pipeline/fastlane.h"
#include "src/pipeline/held_samples.h"
#include "src/pipeline/kernel_frames.h"
#include "src/pipeline/lanes.h"
#include "src/pipeline/offcpu_time.h"
#include "src/pipeline/replay.h"
#include "src/pipeline/traces.h"
#include "src/pipeline/walk.h"
#include "src/pipeline/python_stack.h"
#include "src/processes/execinfo.h"
#include "src/processes/jitinfo.h"
#include "src/processes/memory_watch.h"
#include "src/processes/procmgr.h"
#include "src/processes/pyframes.h"

/* What a profile reader accepts (msgpack_read.c) is what a session can write: the kernel frames a trace keeps, the
 * most user frames --max-frames allows, and one error frame. */
_Static_assert(PROFILE_MAX_STACK_LOCATIONS == TRACE_MAX_KERNEL_FRAMES + SESSION_MAX_FRAMES_LIMIT + 1,
	       "PROFILE_MAX_STACK_LOCATIONS is the longest stack record writes");

struct session {
	struct sampler *sampler;
	struct execinfo_mgr *execinfo;
	struct procmgr *procs;
	struct traces *traces;
	struct session_options opts;
	struct walk *walk;			/* a sample's frames (walk.h) */
	struct lanes *lanes;			/* which processes take the fast lane, and the lane (lanes.h) */
	struct thread_copies *copies;		/* threads with a bigger stack copy (NULL: none) */
	struct replay_writer *capture;
	struct apm_link *apm;			/* NULL when APM correlation is off (apm_link.h) */
	int wake_fd;				/* eventfd the fast lane and the table worker write */
	struct jitinfo_mgr *jit;		/* profiled processes' JIT code (perf maps, jitdump files) */
	struct kernel_frames *kernel;		/* the kernel's build id, _text and symbols (kernel_frames.h) */
	uint64_t realtime_offset_ns;		/* CLOCK_REALTIME - CLOCK_MONOTONIC at the start: samples' times (the
						 * sampler's events are on CLOCK_MONOTONIC) as the profile keeps them */
	pid_t self;
	struct session_stats stats;
	struct session_stats report;		/* session_stats()'s copy, the parts' counts filled in */
	uint64_t fast_lost_base;		/* the fast lane's losses when the counts were last reset */
	struct memory_watch *memory;		/* the budget, as session_tick() watches it (memory_watch.h) */
	struct offcpu_time *offcpu;		/* NULL unless off-CPU profiling (offcpu_time.h) */
	uint64_t finish_ns;			/* session_finish()'s time: threads still off CPU count up to it */
	uint64_t last_record_ns;		/* offline: the latest sample's or switch's time, the end of the run */
	/* Samples whose walk needs a table the worker is building (execinfo_deltas_nowait()) are held until it is
	 * ready, then handled again (rehandle_held()). */
	struct held_samples *held;		/* NULL without a worker (the reference unwinder needs no table) */
	struct pyframes *py;			/* CPython processes' Python frames (pyframes.h) */
	struct trace_frame *merged;		/* scratch: one sample's mixed stack (merged_max frames) */
	unsigned merged_max;
};

/* Where a record handled comes from, and what is to be done with it: the per-record context (no state of one
 * record is kept on the session). */
struct record_ctx {
	const struct perf_layout *layout;	/* its layout */
	enum record_kind kind;			/* an off-CPU sample is a switch-out */
	const struct fastlane_entry *fe;	/* a fast-lane record, with what its reader read; else NULL */
	bool thread_copy;			/* a sample of a thread copy (thread_copies.h) */
	bool replaying;				/* a held sample handled again */
	bool hold_off;				/* ... walked with what exists: none held again */
};

/* Symbolizers read decompressed copies of compressed debug files (debug_cache.h) from the cache directory, and
 * stack-delta tables are loaded from there (stack_deltas_cache.h). */
static void set_cache_dir(struct session *s)
{
	char dir[4096];
	if (s->execinfo && s->opts.use_cache && cache_dir_default(dir, sizeof(dir)) == 0)
		execinfo_mgr_set_cache_dir(s->execinfo, dir);
}

/* The kernel's symbols, the first time a profile has kernel frames to name (kernel_frames.h). */
static void load_kallsyms(struct session *s)
{
	struct kallsyms *k;
	if (s->opts.offline && !s->opts.offline->kernel)
		return;	/* another kernel's frames: this one's symbols would misname them */
	if (walk_get_stats(s->walk)->kernel_frames && (k = kernel_frames_symbols(s->kernel)))
		traces_set_kallsyms(s->traces, k);
}

/* Correlation says pid is ready: its samples take the fast lane from now on. */
static void on_apm_ready(void *arg, pid_t pid)
{
	struct session *s = arg;
	lanes_apm_ready(s->lanes, pid);
}

static int setup_correlation(struct session *s)
{
	if (!s->opts.apm)
		return 0;
	struct apm_link_options ao = { .host_id = s->opts.host_id, .delay_ms = s->opts.apm_delay_ms,
				       .max_staleness_us = s->opts.apm_max_staleness_us ? s->opts.apm_max_staleness_us :
							   SESSION_APM_MAX_STALENESS_US,
				       .log = s->opts.log, .ready = on_apm_ready, .ready_ctx = s };
	return apm_link_new(&ao, &s->apm);
}

/*
 * Tables are built by a worker and the samples that wait for one held, so that sampling never waits for a build;
 * the worker wakes the caller's poll through the session's eventfd. The reference unwinder needs no table.
 */
static int setup_worker(struct session *s)
{
	if (s->opts.unwinder != SESSION_UNWIND_DELTAS || !s->execinfo || !s->sampler)
		return 0;
	int err = 0;
	/* Held records within an eighth of the memory budget: the tables they wait for need room too. */
	size_t held_bytes = s->opts.memory_budget ? s->opts.memory_budget / 8 : 0;
	if (held_bytes && held_bytes > HELD_SAMPLES_MAX_BYTES)
		held_bytes = HELD_SAMPLES_MAX_BYTES;
	if (err == 0)
		err = held_samples_new(0, held_bytes ? held_bytes : 0, &s->held);
	if (err == 0 && s->opts.memory_budget)
		execinfo_mgr_set_room(s->execinfo, memory_watch_room_for_build, s->memory);
	return err < 0 ? err : execinfo_mgr_start_worker(s->execinfo, s->wake_fd);
}

/* walk_live_read_fn: a walk's read of the live process weighs on its thread getting a thread copy (a batch's read
 * past the copy, a goroutine's as any thread's), or else on its process taking the fast lane. */
static void on_live_read(void *ctx, struct process *p, const struct walk_live_read *r)
{
	struct session *s = ctx;
	if (r->past_copy && !r->fast && s->copies &&
	    thread_copies_live_read(s->copies, r->tid, r->time, r->rc, r->replaying))
		return;
	lanes_live_read(s->lanes, p, r);
}

/* walk_read_deeper_fn: a fast-lane walk went past what its reader read. */
static void on_read_deeper(void *ctx, pid_t pid, size_t bytes)
{
	struct session *s = ctx;
	if (lanes_fastlane(s->lanes))
		fastlane_read_deeper(lanes_fastlane(s->lanes), pid, bytes);
}

/* The walker and the lane policy, over the managers made before them. */
static int setup_walk(struct session *s)
{
	struct walk_options wo = { .reference = s->opts.unwinder == SESSION_UNWIND_LIBUNWIND,
				   .max_frames = s->opts.max_frames, .go_stacks = s->opts.go_stacks,
				   .go_stack_bytes = s->opts.go_stack_bytes, .max_stack_bytes = s->opts.max_stack_bytes,
				   .stack_copy_bytes = s->opts.stack_copy_bytes, .offline = s->opts.offline != NULL };
	struct walk_deps wd = { .procs = s->procs, .execinfo = s->execinfo, .jit = s->jit, .capture = s->capture,
				.live_read = on_live_read, .read_deeper = on_read_deeper, .ctx = s };
	int err = walk_new(&wo, &wd, &s->walk);
	if (err < 0)
		return err;
	struct lanes_options lo = { .which = s->opts.fast_lane, .realtime = s->opts.fast_lane_realtime,
				    .max_events = s->opts.fast_lane_max_events,
				    .go_max_stack = walk_go_max_stack(s->walk), .deep_max = s->opts.max_stack_bytes,
				    .sampler = s->sampler,
				    .reader = s->apm ? apm_link_reader(s->apm) : NULL,
				    .wake_fd = s->wake_fd, .procs = s->procs, .py = s->py, .log = s->opts.log };
	err = lanes_new(&lo, &s->lanes);
	if (err < 0 || !s->sampler || s->opts.thread_copy_bytes <= s->opts.stack_copy_bytes ||
	    s->opts.max_stack_bytes <= s->opts.stack_copy_bytes)
		return err;
	struct thread_copies_options to = { .sampler = s->sampler, .stack_size = s->opts.thread_copy_bytes,
					    .log = s->opts.log };
	return thread_copies_new(&to, &s->copies);
}

/* jitinfo_open_fn of an offline session that reads no perf map: there is none (nothing of a pid is read). */
static int no_jit_map(void *ctx, const char *path)
{
	(void)ctx;
	(void)path;
	return -ENOENT;
}

int session_new(struct sampler *sampler, const struct session_options *o, struct session **out)
{
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (o)
		s->opts = *o;
	const struct session_offline *off = s->opts.offline;
	if (off) {	/* no process is read, so nothing that reads them live */
		s->opts.apm = 0;
		s->opts.go_stacks = 0;
		s->opts.max_stack_bytes = 0;
		s->opts.fast_lane = 0;
		s->opts.off_cpu = off->off_cpu_layout != NULL;
		sampler = NULL;
	} else if (!sampler) {
		free(s);
		return -EINVAL;
	}
	s->sampler = sampler;
	s->self = off ? INT32_MIN : getpid();	/* a file's pids are not ours (it may have -1) */
	s->realtime_offset_ns = off && off->realtime_offset_ns ? off->realtime_offset_ns
							      : clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	/* Each NULL on failure: checked with the rest below. */
	if (kernel_frames_new(off ? off->kernel : sampler_kernel_enabled(sampler), s->opts.use_cache, &s->kernel) ==
		    0 &&
	    execinfo_mgr_new(&s->execinfo) == 0) {
		set_cache_dir(s);
		memory_watch_new(s->opts.memory_budget, s->execinfo, &s->opts.log, &s->memory);
		if (procmgr_new(s->execinfo, &s->procs) == 0 && off)
			procmgr_set_offline(s->procs, off->open_file, off->open_ctx);
		traces_new(s->execinfo, kernel_frames_trace(s->kernel), &s->traces);
		pyframes_new(s->execinfo, &s->py);
	}
	/* A mixed stack is bounded as a walk's frames are: Python frames stand in for eval frames within the bound. */
	s->merged_max = TRACE_MAX_KERNEL_FRAMES + (s->opts.max_frames ? s->opts.max_frames : SESSION_DEFAULT_MAX_FRAMES)
			+ 1;
	s->merged = calloc(s->merged_max, sizeof(*s->merged));
	jitinfo_mgr_new(NULL, &s->jit);	/* each NULL on failure: checked below */
	if (s->jit && off)
		jitinfo_mgr_set_offline(s->jit, off->open_jit_map ? off->open_jit_map : no_jit_map, off->open_ctx);
	if (s->opts.capture_path)
		replay_writer_new(&s->capture);
	int err = s->wake_fd < 0 ? -errno : 0;
	if (err == 0 && (!s->memory || !s->procs || !s->traces || !s->jit || (s->opts.capture_path && !s->capture) ||
			 !s->py || !s->merged ||
			 setup_correlation(s) < 0))
		err = -ENOMEM;
	if (err == 0)
		err = setup_walk(s);
	struct offcpu_options oo = { .threshold_ns = s->opts.off_cpu_threshold_ns,
				     .max_rate = s->opts.off_cpu_max_rate };
	struct offcpu_deps od = { .sampler = s->sampler, .layout = off ? off->off_cpu_layout : NULL,
				  .lanes = s->lanes, .procs = s->procs, .walk = s->walk, .apm = s->apm, .self = s->self };
	if (err == 0 && s->opts.off_cpu)
		err = offcpu_time_new(&oo, &od, &s->offcpu);
	if (err == 0)
		err = setup_worker(s);
	if (err < 0) {
		session_free(s);
		return err;
	}
	*out = s;
	return 0;
}

void session_free(struct session *s)
{
	if (!s)
		return;
	/* The fast lane's readers use the correlation's reader. */
	lanes_free(s->lanes);
	thread_copies_free(s->copies);
	offcpu_time_free(s->offcpu);
	/* The worker's references go before the entries' last holders do. */
	if (s->execinfo)
		execinfo_mgr_stop(s->execinfo);
	held_samples_free(s->held);
	/* Traces and mappings hold execinfo references; the unwinder must outlive their release hooks. Traces hold
	 * jitinfo references too: the manager goes after them. */
	traces_free(s->traces);
	pyframes_free(s->py);	/* its code objects' last references may be the traces' */
	free(s->merged);
	jitinfo_mgr_free(s->jit);
	procmgr_free(s->procs);
	memory_watch_free(s->memory);
	execinfo_mgr_free(s->execinfo);
	walk_free(s->walk);	/* after the entries: their release hooks call it */
	replay_writer_free(s->capture);
	apm_link_free(s->apm);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	kernel_frames_free(s->kernel);
	free(s);
}

/* Samples the fast lane lost since it started: its queues full, its rings full. */
static uint64_t fast_lane_lost(const struct session *s)
{
	struct fastlane_stats fs;
	if (!lanes_fastlane(s->lanes))
		return 0;
	fastlane_get_stats(lanes_fastlane(s->lanes), &fs);
	return fs.queue_full + fs.kernel_lost;
}

/* The session's own counts with its parts' filled in, as a copy: the parts count on, unaware of it. */
const struct session_stats *session_stats(struct session *s)
{
	const struct walk_stats *ws = walk_get_stats(s->walk);
	struct session_stats *r = &s->report;
	*r = s->stats;
	r->lost_fast_lane = fast_lane_lost(s) - s->fast_lost_base;
	r->lost += r->lost_fast_lane;
	r->unwind_ns = ws->unwind_ns;
	r->capture_errors = ws->capture_errors;
	r->fast_goroutines = ws->fast_goroutines;
	r->fast_extensions = ws->fast_extensions;
	if (s->apm) {
		struct apm_link_stats as;
		struct correlate_stats cs;
		apm_link_get_stats(s->apm, &as, &cs);
		memcpy(r->apm_read_hist, as.read_hist, sizeof(as.read_hist));
		r->apm_stale = as.stale;
	}
	if (s->offcpu) {
		struct offcpu_time_stats os;
		offcpu_time_get_stats(s->offcpu, NULL, &os);
		r->off_cpu_stacks = os.stacks;
		r->off_cpu_walks = os.walks;
		r->handle_ns += os.handle_ns;
	}
	return r;
}

void session_track_pid(struct session *s, pid_t pid)
{
	struct process *p = procmgr_get(s->procs, pid);
	struct pyproc pp;
	/* A CPython process attached to takes the fast lane at once: its first batch's Python frames would be read
	 * too late. */
	if (p && pyframes_process(s->py, s->procs, p, &pp) == 0 && pp.python)
		lanes_python(s->lanes, pid);
	/* What only a living process tells (its root, for the JIT maps it writes) is read now, for it and its children:
	 * its samples may be handled after it exited. */
	jitinfo_mgr_track(s->jit, pid, clock_mono_ns());
}

static int handle_sample(struct session *s, const struct perf_event_header *rec, const struct record_ctx *rc);
static int handle_decoded(struct session *s, const struct perf_event_header *rec, const struct perf_sample *sample,
			  const struct record_ctx *rc);

/* A fast-lane entry: a sample (CPU or off-CPU) with what its reader read, or a switch record (fastlane.h). */
static void handle_fast_sample(void *ctx, const struct fastlane_entry *e)
{
	struct session *s = ctx;
	struct record_ctx rc = { .layout = fastlane_layout(lanes_fastlane(s->lanes)), .fe = e,
				 .kind = e->off_cpu ? RECORD_OFF_CPU : RECORD_CPU };
	if (e->sample)
		handle_decoded(s, e->rec, e->sample, &rc);
	else if (s->offcpu)
		offcpu_time_switch(s->offcpu, e->sw, true, s->traces);
}

int session_wake_fd(const struct session *s)
{
	return s->wake_fd;
}

/*
 * Handle the held samples again: those of pid only (0: every one; the others are held again, in order). hold: a
 * walk that meets a table still being built holds its sample again; else it walks on with what exists.
 */
static void rehandle_held(struct session *s, pid_t pid, bool hold)
{
	struct record_ctx rc = { .layout = sampler_layout(s->sampler), .kind = RECORD_CPU, .replaying = true,
				 .hold_off = !hold };	/* only CPU samples are held */
	const struct perf_event_header *rec;
	struct perf_sample ps;
	struct held_batch b;
	held_samples_take(s->held, &b);
	while ((rec = held_batch_next(s->held, &b))) {
		if (pid && perf_decode_sample(rc.layout, rec, &ps) == 0 && (pid_t)ps.pid != pid &&
		    held_samples_add(s->held, rec, (pid_t)ps.pid) == 0)
			continue;
		handle_sample(s, rec, &rc);
	}
	held_samples_done(s->held, &b);
}

/*
 * Walk now, with what exists, the held samples of pid, before a record changes its address space (an exec, a
 * mapping over one it had, a new process under its pid): walked later, they would meet the new one. The others
 * stay held, in order. An exit changes nothing: the process is kept until its held samples are walked.
 */
/* Whether samples of pid are held: its process and JIT code are kept (procmgr_keep_fn, jitinfo_mgr_reap_but()). */
static bool has_held(void *ctx, pid_t pid)
{
	struct session *s = ctx;
	return s->held && held_samples_of(s->held, pid);
}

static void settle_held(struct session *s, pid_t pid)
{
	if (has_held(s, pid))
		rehandle_held(s, pid, false);
}

int session_tick(struct session *s)
{
	int ms = CORRELATE_IDLE_MS;
	uint64_t now = clock_mono_ns(), n;
	/* The fast lane and the table worker write the eventfd: read it (reset) before looking at their work. */
	if (s->wake_fd >= 0 && read(s->wake_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		n = 0;
	if (s->held && execinfo_mgr_collect(s->execinfo) && held_samples_count(s->held))
		rehandle_held(s, 0, true);	/* tables they waited for are ready (some may be held again) */
	struct fastlane *fl = lanes_fastlane(s->lanes);
	if (fl) {
		fastlane_drain(fl, handle_fast_sample, s);
		fastlane_reap(fl, now);
	}
	if (s->copies)
		thread_copies_reap(s->copies, now);
	if (s->apm)
		ms = apm_link_tick(s->apm, now);
	/* While APM processes are covered, their queued samples are counted and sent every flush interval. */
	if (fl && ms > CORRELATE_DEFAULT_FLUSH_MS)
		ms = CORRELATE_DEFAULT_FLUSH_MS;
	/* A capture records every process's mappings at the end: keep exited processes until then. */
	if (!s->capture)
		procmgr_reap(s->procs, has_held, s);
	jitinfo_mgr_reap_but(s->jit, has_held, s);	/* held samples may be in an exited process's JIT code */
	memory_watch_tick(s->memory, now);
	uint64_t mem_next = memory_watch_next_ns(s->memory);
	if (ms < 0)
		ms = CORRELATE_DEFAULT_FLUSH_MS;
	if (mem_next > now && ms > (int)((mem_next - now) / 1000000) + 1)
		ms = (int)((mem_next - now) / 1000000) + 1;
	int live = s->offcpu && offcpu_time_tick(s->offcpu, now);
	return live && ms > OFFCPU_TIME_LIVE_TICK_MS ? OFFCPU_TIME_LIVE_TICK_MS : ms;
}

/* Wait for every table the held samples need and handle them; a few rounds, as a replayed walk may meet another
 * new file, then whatever is left is walked with what exists. */
static void finish_held(struct session *s)
{
	for (int round = 0; s->held && held_samples_count(s->held) && round < 8; round++) {
		execinfo_mgr_wait(s->execinfo);
		rehandle_held(s, 0, true);
	}
	if (s->held && held_samples_count(s->held))
		rehandle_held(s, 0, false);
}

void session_finish(struct session *s)
{
	struct fastlane *fl = lanes_fastlane(s->lanes);
	if (fl) {
		fastlane_stop(fl);
		fastlane_drain(fl, handle_fast_sample, s);
	}
	finish_held(s);
	if (s->apm)
		apm_link_finish(s->apm);
	s->finish_ns = clock_mono_ns();
}

void session_pause(struct session *s, int paused)
{
	if (s->offcpu && paused)
		offcpu_time_pause(s->offcpu);
	lanes_pause(s->lanes, paused);
}

/*
 * The APM trace context of a sample of p (apm_link.h): read by the fast lane right after the sample (fe), or now.
 * valid_from: the sample's time, or for off-CPU time its switch-in (the context held still until then).
 */
static int correlated(struct session *s, struct process *p, const struct perf_sample *ps, uint64_t valid_from,
		      const struct fastlane_entry *fe, const struct trace_id *id, struct correlate_context *ctx,
		      struct trace_link *link)
{
	struct apm_link_sample as = { .tid = (pid_t)ps->tid, .time = ps->time, .valid_from = valid_from,
				      .read = fe ? fe->ctx : NULL, .read_ns = fe ? fe->read_ns : 0 };
	return apm_link_sample(s->apm, p, !lanes_apm_checked(s->lanes, p->pid), &as, id, ctx, link);
}

/* When the sample was taken, CLOCK_REALTIME ns (0: its record has no time). */
static uint64_t sample_time(const struct session *s, const struct perf_sample *ps)
{
	return ps->time ? ps->time + s->realtime_offset_ns : 0;
}

/* A sample of a process over the tracking limit still counts, under one visible frame. */
static int count_untracked(struct session *s, const struct perf_sample *ps)
{
	struct trace_frame f = { .kind = PROFILE_FRAME_ERROR, .address = TRACE_ERROR_TOO_MANY };
	if (traces_add_linked(s->traces, NULL, (pid_t)ps->pid, (pid_t)ps->tid, "", "", &f, 1, ps->period,
			      sample_time(s, ps), NULL) == 0) {
		s->stats.samples++;
		s->stats.untracked++;
	}
	return 0;
}

/* Count a walked sample's frames into the traces, with its trace context when it has one. */
static void add_trace(struct session *s, struct process *p, const struct perf_sample *ps,
		      const struct fastlane_entry *fe, const struct trace_frame *frames, unsigned n)
{
	const char *tname = ps->pid ? procmgr_thread_name(s->procs, p, (pid_t)ps->tid) : "swapper";
	struct trace_id id;
	struct trace_link link;
	struct correlate_context ctx;
	traces_hash(s->traces, frames, n, &id);
	int linked = s->apm && ps->pid && correlated(s, p, ps, ps->time, fe, &id, &ctx, &link);
	if (traces_add_linked(s->traces, &id, (pid_t)ps->pid, (pid_t)ps->tid, ps->pid ? p->comm : "swapper", tname,
			      frames, n, ps->period, sample_time(s, ps), linked ? &link : NULL) == 0)
		s->stats.samples++;
	/* once per process and interval: what the export says of it besides its samples */
	if (ps->pid && !traces_knows_process(s->traces, (pid_t)ps->pid))
		traces_note_process(s->traces, (pid_t)ps->pid, procmgr_exe_path(p), procmgr_container_id(p));
}


/*
 * A sample of a CPython process: its Python frames, as the fast lane's reader read them right after the sample,
 * merged in place of the interpreter's eval frames (python_stack.h), *frames pointing at the merged stack. Frames
 * read later, in a batch, would be of whatever the thread ran meanwhile (on the split fixture half of such
 * samples showed the caller of the function sampled): a sample without a fast-lane read keeps its native frames,
 * counted (python_unread), and one whose read disagrees with its native stack too (python_untrusted).
 */
static unsigned python_frames(struct session *s, struct process *p, const struct perf_sample *ps,
			      const struct fastlane_entry *fe, const struct trace_frame **frames, unsigned n)
{
	struct pyproc pp;
	unsigned evals;
	bool known = ps->pid && pyframes_known_python(s->py, (pid_t)ps->pid);
	if (!ps->pid || pyframes_process(s->py, s->procs, p, &pp) < 0 || !pp.python)
		return n;
	if (!known)
		lanes_python(s->lanes, p->pid);	/* from its next samples on, read as they are taken */
	s->stats.python_samples++;
	if (!fe || !fe->py_read) {
		s->stats.python_unread++;
		return n;
	}
	int err = fe->py_read < 0 ? fe->py_read : 0;
	unsigned m = err == 0 ? python_stack_merge(&pp, *frames, n, fe->py, fe->npy, s->merged, s->merged_max,
						   &evals) : 0;
	if (m) {
		s->stats.python_merged++;
		*frames = s->merged;
		return m;
	}
	/* No Python running and no eval frame: a thread in C alone (a thread of a C library) is not a mismatch. */
	bool any_eval = false;
	for (unsigned i = 0; i < n && !any_eval; i++)
		any_eval = python_stack_is_eval(&pp, &(*frames)[i]);
	if ((err == -ENOENT || (err == 0 && fe->npy == 0)) && !any_eval)
		return n;
	s->stats.python_untrusted++;
	return n;
}

/*
 * A sample held while a table is built is walked once the table is ready, hundreds of milliseconds later on a
 * first run (libLLVM's), and until then its thread's need of a thread copy is not counted: clang++'s main thread
 * got its copy only then, and the samples taken meanwhile, read past the copy once the stack there had changed,
 * ended short (92-94% of its stacks whole on a first run, 98.6% on the next). A held sample of a main thread
 * whose stack on the process stack runs past the copy will need a read past it: it counts now, as a read in time.
 * A stack elsewhere (a goroutine's, a coroutine's: memory of their own), or another thread's, says nothing of how
 * deep it runs, and is left to its walk. Walked once its table is ready, such a sample counts again if its thread
 * has no copy by then (one from before a copy counts no more): a thread that showed its need twice.
 */
#define MAIN_STACK_MAX (64ull << 20)	/* farther, SP is on another stack: the mmap area starts 128 MiB below or
					 * more, even without address randomization */
static void count_held_depth(struct session *s, struct process *p, const struct perf_sample *ps)
{
	if (!s->copies || ps->tid != ps->pid || ps->stack_size < s->opts.stack_copy_bytes)
		return;
	uint64_t top = procmgr_stack_start(p), sp = ps->regs[UNWIND_REG_SP];
	if (top && sp < top && top - sp > ps->stack_size && top - sp <= MAIN_STACK_MAX)
		thread_copies_live_read(s->copies, (pid_t)ps->tid, ps->time, 0, true);
}

/*
 * Walk a sample, or hold it (true) because a table its walk needs is being built. A sample the queue has no room
 * for, a fast-lane sample (whose trace context is read for now) and one over the memory budget are walked at once
 * with what exists: the fallback unwinder through the module without a table (counted: table_pending).
 */
static bool walk_or_hold(struct session *s, struct process *p, const struct perf_sample *ps,
			 const struct perf_event_header *rec, const struct record_ctx *rc, struct walk_out *out)
{
	struct walk_in in = { .proc = p, .ps = ps, .fast_go = rc->fe ? rc->fe->go : NULL, .replaying = rc->replaying,
			      .counts = &s->stats.walks };
	if (rc->thread_copy && !rc->fe && s->copies)	/* whether the sampler's copy would have done */
		in.view = s->opts.stack_copy_bytes;
	/* Over the memory budget, a sample is held no more (one held already may stay so: in place). */
	in.may_hold = !rc->fe && s->held && !rc->hold_off && held_samples_room(s->held, rec) &&
		      (!memory_watch_over(s->memory) || rc->replaying);
	walk_sample(s->walk, &in, out);
	if (out->pending && !in.may_hold && memory_watch_over(s->memory) && !rc->replaying && !rc->fe)
		memory_watch_count_refused_hold(s->memory);
	if (out->stopped && held_samples_add(s->held, rec, p->pid) == 0) {
		s->stats.held += !rc->replaying;	/* held again while replayed: still the same one */
		if (!rc->replaying && !rc->thread_copy)
			count_held_depth(s, p, ps);
		return true;
	}
	if (out->stopped) {
		in.may_hold = false;
		walk_sample(s->walk, &in, out);
	}
	s->stats.table_pending += out->pending && !rc->replaying;	/* a held one is counted as settled */
	if (rc->replaying) {	/* a held sample walked at last: with its table, or settled without */
		s->stats.settled += out->pending;
		s->stats.replayed += !out->pending;
	}
	return false;
}

/* A sample (rec, decoded: ps) from the main rings, from the fast lane (rc->fe: with its trace context read) or
 * held; an off-CPU sample is a switch-out. */
static int handle_decoded(struct session *s, const struct perf_event_header *rec, const struct perf_sample *sample,
			  const struct record_ctx *rc)
{
	struct perf_sample ps = *sample;
	struct walk_out out;
	const struct fastlane_entry *fe = rc->fe;
	struct fastlane *fl = lanes_fastlane(s->lanes);
	if ((pid_t)ps.pid == s->self)
		return 0; /* hostprof's own work is not what the user asked about */
	if (!fe && !rc->replaying && fl && fastlane_covers(fl, (pid_t)ps.pid, ps.time)) {
		s->stats.fast_dropped++; /* the fast lane has this process's samples, off-CPU ones too */
		return 0;
	}
	if (!fe && !rc->replaying && rc->kind == RECORD_CPU && s->copies &&
	    thread_copies_drops(s->copies, (pid_t)ps.tid, ps.time, rc->thread_copy))
		return 0;	/* its thread copy has it, or it is a thread copy's before its start (counted there) */
	if (ps.time > s->last_record_ns)
		s->last_record_ns = ps.time;
	if (rc->kind == RECORD_OFF_CPU)
	{
		if (s->offcpu)	/* a switch-out: kept until its switch-in (offcpu_time.h) */
			offcpu_time_sample(s->offcpu, rec, &ps, fe);
		return 0;
	}
	s->stats.fast_samples += fe != NULL;
	/* A file's samples are not timed: nothing idles out of an offline session, and two clock reads a sample
	 * are a measurable share of reading a perf.data file. */
	uint64_t t0 = s->opts.offline ? 0 : clock_mono_ns();
	struct process *p = procmgr_get(s->procs, (pid_t)ps.pid);
	if (!p)
		return count_untracked(s, &ps);
	p->last_sample_ns = t0;
	if (!fe && !rc->replaying)
		lanes_first_sample(s->lanes, p);
	if (!walk_or_hold(s, p, &ps, rec, rc, &out)) {
		/* Once, when walked (a held sample when walked again), as its reads are (lanes_live_read()). */
		if (!fe)
			lanes_count_sample(s->lanes, p->pid);
		if (!fe && s->copies && rc->thread_copy)	/* whether its copy is still needed */
			thread_copies_copy_walked(s->copies, (pid_t)ps.tid, out.past_view);
		else if (!fe && s->copies)			/* whether it needs one */
			thread_copies_count_sample(s->copies, (pid_t)ps.tid);
		const struct trace_frame *frames = walk_frames(s->walk);
		unsigned n = python_frames(s, p, &ps, fe, &frames, out.n);
		add_trace(s, p, &ps, fe, frames, n);
	}
	/* The sample's frames hold their own references now: files its walk found replaced can go. */
	procmgr_release_deferred(s->procs);
	if (!s->opts.offline)
		s->stats.handle_ns += clock_mono_ns() - t0;
	return 0;
}

static int handle_sample(struct session *s, const struct perf_event_header *rec, const struct record_ctx *rc)
{
	struct perf_sample ps;
	if (perf_decode_sample(rc->layout, rec, &ps) < 0) {
		s->stats.bad_records++;
		return 0;
	}
	return handle_decoded(s, rec, &ps, rc);
}

/* A switch record of the main rings (offcpu_time.h). */
static void handle_switch(struct session *s, const struct perf_event_header *rec, const struct record_ctx *rc)
{
	struct perf_switch sw;
	if (!s->offcpu)
		return;
	if (perf_decode_switch(rc->layout, rec, &sw) < 0) {
		s->stats.bad_records++;
		return;
	}
	if (sw.time > s->last_record_ns)
		s->last_record_ns = sw.time;
	offcpu_time_switch(s->offcpu, &sw, false, s->traces);
}

static void handle_lost(struct session *s, const struct perf_event_header *rec)
{
	struct perf_lost l;
	uint64_t n;
	if (rec->type == PERF_RECORD_LOST && perf_decode_lost(rec, &l) == 0)
		s->stats.lost += l.lost;
	else if (rec->type == PERF_RECORD_LOST_SAMPLES && perf_decode_lost_samples(rec, &n) == 0)
		s->stats.lost += n;
	else
		s->stats.bad_records++;
}

/* A mapping: the process manager, the JIT maps, and correlation when it is an APM agent's library. */
static void handle_mmap2(struct session *s, const struct perf_event_header *rec)
{
	struct perf_mmap2 m;
	if (perf_decode_mmap2(rec, &m) < 0)
		return;
	struct process *p = has_held(s, (pid_t)m.pid) ? procmgr_find(s->procs, (pid_t)m.pid) : NULL;
	if (p && procmgr_overlaps(p, m.addr, m.addr + m.len))
		settle_held(s, (pid_t)m.pid);
	procmgr_on_mmap2(s->procs, &m);
	if (m.prot & PROT_EXEC)
		pyframes_on_mapping(s->py, (pid_t)m.pid);
	if (!s->opts.offline)
		jitinfo_mgr_on_mapping(s->jit, (pid_t)m.pid, m.filename);
	if (s->apm)
		apm_link_on_mapping(s->apm, (pid_t)m.pid, m.addr, m.addr + m.len, m.pgoff, m.filename);
}

static void handle_comm(struct session *s, const struct perf_event_header *rec)
{
	struct perf_comm c;
	if (perf_decode_comm(rec, &c) < 0)
		return;
	if (c.exec) {
		settle_held(s, (pid_t)c.pid);
		lanes_on_exec(s->lanes, (pid_t)c.pid);
	}
	procmgr_on_comm(s->procs, &c);
	if (c.exec && !s->opts.offline)
		jitinfo_mgr_on_exec(s->jit, (pid_t)c.pid, clock_mono_ns());
	if (c.exec)
		pyframes_forget(s->py, (pid_t)c.pid);
	if (s->apm && c.exec)
		apm_link_on_exec(s->apm, (pid_t)c.pid);
}

/* A fork or an exit, of a process (pid == tid) or of a thread. */
static void handle_task(struct session *s, const struct perf_event_header *rec)
{
	struct perf_task t;
	if (perf_decode_task(rec, &t) < 0)
		return;
	bool process = t.pid == t.tid;
	if (rec->type == PERF_RECORD_FORK) {
		if (process)
			settle_held(s, (pid_t)t.pid);	/* a pid reused: the exited one's held samples first */
		procmgr_on_fork(s->procs, &t);
		if (s->offcpu)
			offcpu_time_on_fork(s->offcpu, (pid_t)t.tid);
		if (process)
			pyframes_forget(s->py, (pid_t)t.pid);	/* a pid taken again: the exited one's is no more */
		if (process && t.pid != t.ppid && !s->opts.offline)
			jitinfo_mgr_on_fork(s->jit, (pid_t)t.ppid, (pid_t)t.pid, clock_mono_ns());
		return;
	}
	procmgr_on_exit(s->procs, &t);	/* kept, mappings and all, while samples of its are held */
	if (s->offcpu)
		offcpu_time_forget(s->offcpu, (pid_t)t.tid);
	if (process)
		jitinfo_mgr_on_exit(s->jit, (pid_t)t.pid);
	if (s->copies)
		thread_copies_on_exit(s->copies, (pid_t)t.tid);
	if (process)
		lanes_on_exit(s->lanes, (pid_t)t.pid, t.time);
	if (process)
		pyframes_on_exit(s->py, (pid_t)t.pid);
	if (s->apm)
		apm_link_on_exit(s->apm, (pid_t)t.pid, (pid_t)t.tid, process);
}

int session_handle_record(void *ctx, const struct perf_event_header *rec, const struct record_origin *origin)
{
	struct session *s = ctx;
	struct record_ctx rc = { .layout = origin->layout, .kind = origin->kind, .thread_copy = origin->thread_copy };
	switch (rec->type) {
	case PERF_RECORD_SAMPLE:
		return handle_sample(s, rec, &rc);
	case PERF_RECORD_MMAP2:
		handle_mmap2(s, rec);
		break;
	case PERF_RECORD_COMM:
		handle_comm(s, rec);
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		handle_task(s, rec);
		break;
	case PERF_RECORD_LOST:
	case PERF_RECORD_LOST_SAMPLES:
		handle_lost(s, rec);
		break;
	case PERF_RECORD_SWITCH:
	case PERF_RECORD_SWITCH_CPU_WIDE:
		handle_switch(s, rec, &rc);
		break;
	default:
		break; /* throttling and other records carry nothing hostprof uses */
	}
	return 0;
}

int session_save_capture(struct session *s)
{
	if (!s->capture)
		return 0;
	int err = replay_writer_add_processes(s->capture, s->procs);
	return err < 0 ? err : replay_writer_save(s->capture, s->opts.capture_path);
}

static void off_cpu_to_profile(struct session *s, struct profile *p)
{
	if (!s->offcpu)
		return;
	p->info.off_cpu_threshold_ns = s->opts.off_cpu_threshold_ns;
	uint64_t until = s->opts.offline ? s->last_record_ns : s->finish_ns ? s->finish_ns : clock_mono_ns();
	offcpu_time_to_profile(s->offcpu, s->traces, until, p);
}

/* The interval's counters into p->info, and what naming its traces needs made ready on this thread: the JIT
 * maps read again and its JIT frames named, kallsyms loaded if kernel frames need it. */
static int prepare_profile(struct session *s, struct profile *p)
{
	off_cpu_to_profile(s, p);
	p->info.samples += s->stats.samples;
	uint64_t fast_lost = fast_lane_lost(s) - s->fast_lost_base;
	p->info.lost += s->stats.lost + fast_lost;
	p->info.lost_fast_lane += fast_lost;
	p->info.unwound_complete += s->stats.walks.complete;
	p->info.truncated += s->stats.walks.truncated;
	p->info.unknown += s->stats.walks.unknown;
	/* A map written since the last read, even as its process exited, names the JIT frames. */
	jitinfo_mgr_refresh(s->jit);
	load_kallsyms(s);
	return traces_name_jit(s->traces);
}

int session_build_profile(struct session *s, struct profile *p)
{
	int err = prepare_profile(s, p);
	return err < 0 ? err : traces_build_profile(s->traces, p, NULL, NULL);
}

int session_detach_interval(struct session *s, struct profile *p, struct traces **out)
{
	struct traces *next;
	int err = traces_new(s->execinfo, kernel_frames_trace(s->kernel), &next);
	if (err == 0 && (err = prepare_profile(s, p)) < 0)
		traces_free(next);
	if (err < 0)
		return err;
	*out = s->traces;
	s->traces = next;
	session_reset_counts(s);
	execinfo_mgr_naming(s->execinfo, true);
	return 0;
}

void session_release_interval(struct session *s, struct traces *t)
{
	traces_free(t);
	execinfo_mgr_naming(s->execinfo, false);
}

void session_set_limits(struct session *s, unsigned max_processes)
{
	procmgr_set_limit(s->procs, max_processes);
}

unsigned session_forget_idle(struct session *s, uint64_t idle_ns)
{
	uint64_t now = clock_mono_ns();
	if (now > idle_ns)
		jitinfo_mgr_forget_idle(s->jit, now - idle_ns);
	return now > idle_ns ? procmgr_forget_idle(s->procs, now - idle_ns, has_held, s) : 0;
}

void session_reset_counts(struct session *s)
{
	traces_reset(s->traces);
	memset(&s->stats, 0, sizeof(s->stats));
	s->fast_lost_base = fast_lane_lost(s);
	walk_reset_stats(s->walk);
	if (s->offcpu)
		offcpu_time_reset_stats(s->offcpu);
}

struct memory_watch *session_memory_watch(const struct session *s)
{
	return s->memory;
}

void session_counters(const struct session *s, struct session_counters *out)
{
	struct fastlane *fl = lanes_fastlane(s->lanes);
	memset(out, 0, sizeof(*out));
	walk_unwind_stats(s->walk, &out->unwind);
	jitinfo_mgr_get_stats(s->jit, &out->jit);
	execinfo_mgr_totals(s->execinfo, &out->tables);
	memory_watch_get_state(s->memory, &out->memory);
	if ((out->has_fastlane = fl != NULL))
		fastlane_get_stats(fl, &out->fastlane);
	if ((out->has_thread_copies = s->copies != NULL))
		thread_copies_get_stats(s->copies, &out->thread_copies);
	struct apm_link_stats as;
	if ((out->has_correlate = s->apm != NULL))
		apm_link_get_stats(s->apm, &as, &out->correlate);
	out->has_go_stacks = walk_go_stack_stats(s->walk, &out->go_stacks) == 0;
	out->has_stackext = walk_stackext_stats(s->walk, &out->stackext) == 0;
	if ((out->has_offcpu = s->offcpu != NULL)) {
		offcpu_time_get_stats(s->offcpu, &out->offcpu, NULL);
		out->off_cpu_lost = offcpu_time_lost(s->offcpu);
	}
	out->processes = procmgr_seen(s->procs);
	out->dropped_mappings = procmgr_dropped(s->procs);
}
