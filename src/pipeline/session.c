/*
 * session.c — one profiling session. See session.h for the contract.
 */
#include "src/pipeline/session.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "correlate/correlate.h"
#include "src/base/cache_dir.h"
#include "src/base/clock.h"
#include "src/base/host_id.h"
#include "src/base/mem_usage.h"
#include "src/processes/blocked_stack.h"
#include "src/processes/execinfo.h"
#include "src/pipeline/fastlane.h"
#include "src/pipeline/held_samples.h"
#include "src/processes/jitinfo.h"
#include "src/pipeline/lanes.h"
#include "src/processes/memory_watch.h"
#include "src/pipeline/offcpu.h"
#include "src/processes/procmgr.h"
#include "src/pipeline/replay.h"
#include "src/pipeline/traces.h"
#include "src/pipeline/walk.h"
#include "symbols/kallsyms.h"
#include "symbols/kallsyms_cache.h"

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
	struct replay_writer *capture;
	struct correlate *correlate;		/* NULL when APM correlation is off */
	int wake_fd;				/* eventfd the fast lane and the table worker write */
	struct jitinfo_mgr *jit;		/* profiled processes' JIT code (perf maps, jitdump files) */
	char host_id[HOST_ID_MAX];
	struct kallsyms *kallsyms;
	struct trace_kernel kernel;
	pid_t self;
	struct session_stats stats;
	struct memory_watch *memory;		/* the budget, as session_tick() watches it (memory_watch.h) */
	struct offcpu *offcpu;			/* NULL unless off-CPU profiling */
	uint8_t *blocked_stack;			/* off-CPU without samples: a waiting thread's stack read live */
	size_t blocked_stack_size;		/* ... up to this (the off-CPU stack copy's size) */
	uint64_t finish_ns;			/* session_finish()'s time: threads still off CPU count up to it */
	uint64_t off_cpu_lost_told;		/* off-CPU samples lost in full rings, as far as in profiles */
	/* Samples whose walk needs a table the worker is building (execinfo_deltas_nowait()) are held until it is
	 * ready, then handled again (rehandle_held()). */
	struct held_samples *held;		/* NULL without a worker (the reference unwinder needs no table) */
};

/* Where a record handled comes from, and what is to be done with it: the per-record context (no state of one
 * record is kept on the session). */
struct record_ctx {
	const struct perf_layout *layout;	/* its layout */
	enum record_kind kind;			/* an off-CPU sample is a switch-out */
	const struct fastlane_entry *fe;	/* a fast-lane record, with what its reader read; else NULL */
	bool replaying;				/* a held sample handled again */
	bool hold_off;				/* ... walked with what exists: none held again */
};

/* The kernel's build-id from /sys/kernel/notes, a sequence of ELF notes. */
static void read_kernel_build_id(char *out)
{
	uint8_t buf[4096];
	FILE *f = fopen("/sys/kernel/notes", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	out[0] = '\0';
	if (f)
		fclose(f);
	for (size_t off = 0; off + 12 <= n;) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		size_t name_off = off + 12, desc_off = name_off + ((namesz + 3) & ~3u);
		if (namesz > n || descsz > n || desc_off + descsz > n)
			return;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 && descsz <= 20) {
			hex_encode(buf + desc_off, descsz, out);
			return;
		}
		off = desc_off + ((descsz + 3) & ~3u);
	}
}

/* Kernel frames are hashed relative to _text, read now; their names wait for a profile (load_kallsyms()). */
static void setup_kernel(struct session *s)
{
	read_kernel_build_id(s->kernel.build_id);
	if (s->kernel.build_id[0])
		fileid_from_build_id_hex(s->kernel.build_id, &s->kernel.file_id);
	if (sampler_kernel_enabled(s->sampler))
		kallsyms_read_text_start("/proc/kallsyms", &s->kernel.text_start);
}

/* Symbolizers read decompressed copies of compressed debug files (debug_cache.h) from the cache directory, and
 * stack-delta tables are loaded from there (stack_deltas_cache.h). */
static void set_cache_dir(struct session *s)
{
	char dir[4096];
	if (s->execinfo && s->opts.use_cache && cache_dir_default(dir, sizeof(dir)) == 0)
		execinfo_mgr_set_cache_dir(s->execinfo, dir);
}

/* The kernel's symbols, the first time a profile has kernel frames to name: from this boot's cache when there
 * is one (kallsyms_cache.h), else /proc/kallsyms (~60 ms of kernel time). */
static void load_kallsyms(struct session *s)
{
	char dir[4096];
	struct kallsyms_cache_paths paths = { .dir = NULL };
	if (s->kallsyms || !walk_get_stats(s->walk)->kernel_frames)
		return;
	if (s->opts.use_cache && cache_dir_default(dir, sizeof(dir)) == 0)
		paths.dir = dir;
	if (kallsyms_cache_open(&paths, &s->kallsyms, NULL) == 0) {
		s->kernel.kallsyms = s->kallsyms;	/* for the tables of later intervals */
		traces_set_kallsyms(s->traces, s->kallsyms);
	}
}

/* The correlation library's log lines go to the session's sink at their level (they begin "apm: "). */
static void correlate_log(void *arg, enum correlate_log_level level, const char *msg)
{
	const struct session *s = arg;
	static const enum log_level levels[] = { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };
	log_write(&s->opts.log, (unsigned)level < 4 ? levels[level] : LOG_LEVEL_ERROR, "%s", msg);
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
	host_id_get(s->opts.host_id, s->host_id, sizeof(s->host_id));
	struct correlate_options co = { .host_id = s->host_id, .delay_ms = s->opts.apm_delay_ms,
					.log = correlate_log, .log_arg = s, .ready = on_apm_ready, .ready_arg = s };
	return correlate_new(&co, &s->correlate);
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


/* walk_live_read_fn: a walk's read of the live process weighs on its process taking the fast lane. */
static void on_live_read(void *ctx, struct process *p, unsigned kind, int rc, bool fast, bool replaying)
{
	struct session *s = ctx;
	lanes_live_read(s->lanes, p, kind, rc, fast, replaying);
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
				   .stack_copy_bytes = s->opts.stack_copy_bytes };
	struct walk_deps wd = { .procs = s->procs, .execinfo = s->execinfo, .jit = s->jit, .capture = s->capture,
				.live_read = on_live_read, .read_deeper = on_read_deeper, .ctx = s };
	int err = walk_new(&wo, &wd, &s->walk);
	if (err < 0)
		return err;
	struct lanes_options lo = { .which = s->opts.fast_lane, .realtime = s->opts.fast_lane_realtime,
				    .max_events = s->opts.fast_lane_max_events,
				    .go_max_stack = walk_go_max_stack(s->walk), .deep_max = s->opts.max_stack_bytes,
				    .sampler = s->sampler,
				    .reader = s->correlate ? correlate_get_reader(s->correlate) : NULL,
				    .wake_fd = s->wake_fd, .procs = s->procs, .log = s->opts.log };
	return lanes_new(&lo, &s->lanes);
}

int session_new(struct sampler *sampler, const struct session_options *o, struct session **out)
{
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (o)
		s->opts = *o;
	s->sampler = sampler;
	s->self = getpid();
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	setup_kernel(s);
	if (execinfo_mgr_new(&s->execinfo) == 0) {	/* each NULL on failure: checked with the rest below */
		set_cache_dir(s);
		memory_watch_new(s->opts.memory_budget, s->execinfo, &s->opts.log, &s->memory);
		procmgr_new(s->execinfo, &s->procs);
		traces_new(s->execinfo, &s->kernel, &s->traces);
	}
	jitinfo_mgr_new(NULL, &s->jit);	/* each NULL on failure: checked below */
	if (s->opts.capture_path)
		replay_writer_new(&s->capture);
	int err = s->wake_fd < 0 ? -errno : 0;
	if (err == 0 && (!s->memory || !s->procs || !s->traces || !s->jit || (s->opts.capture_path && !s->capture) ||
			 setup_correlation(s) < 0))
		err = -ENOMEM;
	if (err == 0)
		err = setup_walk(s);
	struct offcpu_options oo = { .threshold_ns = s->opts.off_cpu_threshold_ns,
				     .max_rate = s->opts.off_cpu_max_rate };
	if (err == 0 && s->opts.off_cpu)
		err = offcpu_new(&oo, &s->offcpu);
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
	offcpu_free(s->offcpu);
	free(s->blocked_stack);
	/* The worker's references go before the entries' last holders do. */
	if (s->execinfo)
		execinfo_mgr_stop(s->execinfo);
	held_samples_free(s->held);
	/* Traces and mappings hold execinfo references; the unwinder must outlive their release hooks. Traces hold
	 * jitinfo references too: the manager goes after them. */
	traces_free(s->traces);
	jitinfo_mgr_free(s->jit);
	procmgr_free(s->procs);
	memory_watch_free(s->memory);
	execinfo_mgr_free(s->execinfo);
	walk_free(s->walk);	/* after the entries: their release hooks call it */
	replay_writer_free(s->capture);
	correlate_free(s->correlate);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	kallsyms_free(s->kallsyms);
	free(s);
}

const struct session_stats *session_stats(struct session *s)
{
	const struct walk_stats *ws = walk_get_stats(s->walk);
	s->stats.unwind_ns = ws->unwind_ns;
	s->stats.capture_errors = ws->capture_errors;
	s->stats.fast_goroutines = ws->fast_goroutines;
	s->stats.fast_extensions = ws->fast_extensions;
	return &s->stats;
}




void session_track_pid(struct session *s, pid_t pid)
{
	procmgr_get(s->procs, pid);
	/* What only a living process tells (its root, for the JIT maps it writes) is read now, for it and its children:
	 * its samples may be handled after it exited. */
	jitinfo_mgr_track(s->jit, pid, clock_mono_ns());
}

static int handle_sample(struct session *s, const struct perf_event_header *rec, const struct record_ctx *rc);
static int handle_decoded(struct session *s, const struct perf_event_header *rec, const struct perf_sample *sample,
			  const struct record_ctx *rc);
static void handle_switch_decoded(struct session *s, const struct perf_switch *sw, bool fast);

/* A fast-lane entry: a sample (CPU or off-CPU) with what its reader read, or a switch record (fastlane.h). */
static void handle_fast_sample(void *ctx, const struct fastlane_entry *e)
{
	struct session *s = ctx;
	struct record_ctx rc = { .layout = fastlane_layout(lanes_fastlane(s->lanes)), .fe = e,
				 .kind = e->off_cpu ? RECORD_OFF_CPU : RECORD_CPU };
	if (e->sample)
		handle_decoded(s, e->rec, e->sample, &rc);
	else if (s->offcpu)
		handle_switch_decoded(s, e->sw, true);
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

/* Where switch-outs come without samples, the stacks of threads that have waited long enough are read live, as
 * they wait, every tick this long at most (blocked_stack.h): blocks this long and longer all get their stack. */
#define OFF_CPU_LIVE_TICK_MS 2

/* offcpu_read_fn: tid's stack, read while it waits. */
static void read_blocked(void *ctx, pid_t pid, pid_t tid)
{
	struct session *s = ctx;
	struct blocked_stack bs;
	if (blocked_stack_read(pid, tid, s->blocked_stack, s->blocked_stack_size, &bs) < 0)
		return;	/* running again, gone, or not permitted: the interval stays without a stack (counted) */
	struct offcpu_live live = { .ip = bs.ip, .sp = bs.sp, .bytes = s->blocked_stack, .size = bs.size };
	offcpu_set_live(s->offcpu, tid, &live, bs.done_ns);
}

/* The live reads of waiting threads, where the sampler's switch-outs come without samples. 1 if it does them. */
static int read_blocked_stacks(struct session *s, uint64_t now)
{
	if (!s->offcpu || sampler_off_cpu_samples(s->sampler))
		return 0;
	if (!s->blocked_stack) {
		struct sampler_options so;
		sampler_get_options(s->sampler, &so);
		s->blocked_stack_size = so.off_cpu_stack_size ? so.off_cpu_stack_size : so.stack_size;
		if (!(s->blocked_stack = malloc(s->blocked_stack_size)))
			return 0;
	}
	offcpu_want_live(s->offcpu, now, read_blocked, s);
	return 1;
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
	if (s->correlate)
		ms = correlate_tick(s->correlate, now);
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
	return read_blocked_stacks(s, now) && ms > OFF_CPU_LIVE_TICK_MS ? OFF_CPU_LIVE_TICK_MS : ms;
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
	if (s->correlate) {
		correlate_tick(s->correlate, clock_mono_ns());
		correlate_finish(s->correlate, correlate_delay_ms(s->correlate));
	}
	s->finish_ns = clock_mono_ns();
}

void session_pause(struct session *s, int paused)
{
	if (s->offcpu && paused)
		offcpu_cancel(s->offcpu);
	lanes_pause(s->lanes, paused);
}



/* Tell the correlation library about the APM agent libraries a process mapped before hostprof saw it. */
static void find_apm_agent(struct session *s, struct process *p)
{
	for (unsigned i = 0; i < p->nmaps; i++) {
		const struct mapping *m = &p->maps[i];
		if (m->path && correlate_is_apm_library(m->path))
			correlate_on_mapping(s->correlate, p->pid, m->start, m->end, m->pgoff, m->path);
	}
}

/*
 * The APM trace context of a sample's thread, when its process runs an agent with a transaction active: read
 * by the fast lane right after the sample (fe), or now. A thread may switch transactions between the sample
 * and the read: a read long after the sample is not trusted, the sample stays uncorrelated (counted).
 */
static int correlated(struct session *s, struct process *p, const struct perf_sample *ps, uint64_t valid_from,
		      const struct fastlane_entry *fe, const struct trace_id *id, struct correlate_context *ctx,
		      struct trace_link *link)
{
	if (!lanes_apm_checked(s->lanes, p->pid))
		find_apm_agent(s, p);
	if (!correlate_is_ready(s->correlate, p->pid))
		return 0;
	uint64_t read_ns = fe ? fe->read_ns : clock_mono_ns();
	/* valid_from: the sample's time, or for off-CPU time its switch-in (the context held still until then). */
	uint64_t lat_us = read_ns > valid_from ? (read_ns - valid_from) / 1000 : 0;
	s->stats.apm_read_hist[lat_us < 64 ? lat_us / 8 : lat_us < 1024 ? 8 + lat_us / 128 : 15]++;
	if (lat_us > (s->opts.apm_max_staleness_us ? s->opts.apm_max_staleness_us : SESSION_APM_MAX_STALENESS_US)) {
		s->stats.apm_stale++;
		return 0;
	}
	int r = fe ? correlate_on_read(s->correlate, p->pid, (pid_t)ps->tid, fe->ctx, id->bytes, ps->time, ctx) :
		     correlate_on_sample(s->correlate, p->pid, (pid_t)ps->tid, id->bytes, ps->time, ctx);
	if (r != 1)
		return 0;
	memcpy(link->trace_id, ctx->trace_id, 16);
	memcpy(link->transaction_id, ctx->transaction_id, 8);
	link->service = ctx->service_name;
	return 1;
}

/* A sample of a process over the tracking limit still counts, under one visible frame. */
static int count_untracked(struct session *s, const struct perf_sample *ps)
{
	struct trace_frame f = { .kind = PROFILE_FRAME_ERROR, .address = TRACE_ERROR_TOO_MANY };
	if (traces_add(s->traces, (pid_t)ps->pid, (pid_t)ps->tid, "", "", &f, 1, ps->period) == 0) {
		s->stats.samples++;
		s->stats.untracked++;
	}
	return 0;
}

/* Count a walked sample's frames into the traces, with its trace context when it has one. */
static void add_trace(struct session *s, struct process *p, const struct perf_sample *ps,
		      const struct fastlane_entry *fe, unsigned n)
{
	const char *tname = ps->pid ? procmgr_thread_name(s->procs, p, (pid_t)ps->tid) : "swapper";
	const struct trace_frame *frames = walk_frames(s->walk);
	struct trace_id id;
	struct trace_link link;
	struct correlate_context ctx;
	traces_hash(s->traces, frames, n, &id);
	int linked = s->correlate && ps->pid && correlated(s, p, ps, ps->time, fe, &id, &ctx, &link);
	if (traces_add_linked(s->traces, &id, (pid_t)ps->pid, (pid_t)ps->tid, ps->pid ? p->comm : "swapper", tname,
			      frames, n, ps->period, linked ? &link : NULL) == 0)
		s->stats.samples++;
}



static int handle_off_cpu_sample(struct session *s, const struct perf_event_header *rec,
				 const struct perf_sample *ps, const struct fastlane_entry *fe);

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
	/* Over the memory budget, a sample is held no more (one held already may stay so: in place). */
	in.may_hold = !rc->fe && s->held && !rc->hold_off && held_samples_room(s->held, rec) &&
		      (!memory_watch_over(s->memory) || rc->replaying);
	walk_sample(s->walk, &in, out);
	if (out->pending && !in.may_hold && memory_watch_over(s->memory) && !rc->replaying && !rc->fe)
		memory_watch_count_refused_hold(s->memory);
	if (out->stopped && held_samples_add(s->held, rec, p->pid) == 0) {
		s->stats.held += !rc->replaying;	/* held again while replayed: still the same one */
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
	if (rc->kind == RECORD_OFF_CPU)
		return s->offcpu ? handle_off_cpu_sample(s, rec, &ps, fe) : 0;
	s->stats.fast_samples += fe != NULL;
	uint64_t t0 = clock_mono_ns();
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
		add_trace(s, p, &ps, fe, out.n);
	}
	/* The sample's frames hold their own references now: files its walk found replaced can go. */
	procmgr_release_deferred(s->procs);
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

/* ---- off-CPU time (offcpu.h) ---- */

/* What the fast lane's reader read of an APM thread as it switched out, kept with the switch-out (offcpu.h). */
struct off_cpu_note {
	struct correlate_read ctx;
	uint64_t read_ns;
};

/*
 * A switch-out's sample: the thread switching out (the kernel takes it in that thread), kept until its switch-in,
 * with the trace context the fast lane read (fe) while it was switched out. Its switch record, which follows,
 * says whether it was preempted. Idle and hostprof's own threads are left out.
 */
static int handle_off_cpu_sample(struct session *s, const struct perf_event_header *rec,
				 const struct perf_sample *ps, const struct fastlane_entry *fe)
{
	if (ps->pid == 0)
		return 0;	/* the idle task */
	if (offcpu_sample_out(s->offcpu, (pid_t)ps->pid, (pid_t)ps->tid, ps->time, rec) == 0 && fe) {
		struct off_cpu_note note = { .ctx = *fe->ctx, .read_ns = fe->read_ns };
		offcpu_set_note(s->offcpu, (pid_t)ps->tid, &note, sizeof(note));
	}
	return 0;
}

/* Time off CPU without a stack (a short block, over the rate cap, or no sample): summed per thread under one frame. */
static void count_off_cpu_alone(struct session *s, struct process *p, const struct offcpu_interval *iv)
{
	struct trace_frame f = { .kind = PROFILE_FRAME_ERROR, .address = iv->why == OFFCPU_SHORT ?
				 TRACE_ERROR_OFFCPU_SHORT : iv->why == OFFCPU_CAPPED ? TRACE_ERROR_OFFCPU_CAPPED :
				 TRACE_ERROR_OFFCPU_NO_SAMPLE };
	const char *tname = p ? procmgr_thread_name(s->procs, p, iv->tid) : "";
	traces_add_off_cpu(s->traces, NULL, iv->pid, iv->tid, p ? p->comm : "", tname, &f, 1, iv->ns, iv->preempted,
			   NULL);
}

/* The stack of an interval off CPU, unwound from its switch-out sample (the off-CPU tracker's copy, walked now with
 * what exists); its unwinding counted apart from the CPU samples'. Returns how many frames (walk_frames()). */
static unsigned off_cpu_frames(struct session *s, struct process *p, const struct perf_sample *ps)
{
	struct walk_in in = { .proc = p, .ps = ps, .counts = &s->stats.off_cpu_walks };
	struct walk_out out;
	s->stats.off_cpu_stacks++;
	walk_sample(s->walk, &in, &out);
	return out.n;
}

/* The sample an interval's stack is unwound from: its switch-out sample decoded, or the registers and stack read
 * live as it waited (blocked_stack.h), which are IP and SP only. 0, or -EBADMSG. */
static int off_cpu_sample(const struct offcpu_interval *iv, const struct perf_layout *layout, struct perf_sample *ps)
{
	if (iv->rec)
		return perf_decode_sample(layout, iv->rec, ps);
	*ps = (struct perf_sample){ .pid = (uint32_t)iv->pid, .tid = (uint32_t)iv->tid, .time = iv->start_ns,
				    .regs_abi = PERF_SAMPLE_REGS_ABI_64, .stack = iv->live->bytes,
				    .stack_size = iv->live->size, .misc = PERF_RECORD_MISC_USER };
	ps->ip = ps->regs[UNWIND_REG_IP] = iv->live->ip;
	ps->regs[UNWIND_REG_SP] = iv->live->sp;
	return 0;
}

/*
 * An interval off CPU (offcpu_fn): unwound from its switch-out sample (or the stack read as it waited) and
 * counted, or summed per thread. Its trace context is the one the fast lane read at the switch-out (its note),
 * valid until the switch-in.
 */
static void count_off_cpu(void *arg, const struct offcpu_interval *iv)
{
	struct session *s = arg;
	struct process *p = procmgr_get(s->procs, iv->pid);
	const struct off_cpu_note *note = iv->note_len == sizeof(*note) ? iv->note : NULL;
	const struct perf_layout *layout = note ? fastlane_layout(lanes_fastlane(s->lanes)) : sampler_layout(s->sampler);
	struct perf_sample ps;
	if ((!iv->rec && !iv->live) || !p || off_cpu_sample(iv, layout, &ps) < 0) {
		count_off_cpu_alone(s, p, iv);
		return;
	}
	uint64_t t0 = clock_mono_ns();
	p->last_sample_ns = t0;
	unsigned n = off_cpu_frames(s, p, &ps);
	struct trace_id id;
	struct trace_link link;
	struct correlate_context ctx;
	struct fastlane_entry fe = { .rec = iv->rec, .ctx = note ? &note->ctx : NULL, .read_ns = note ? note->read_ns : 0 };
	traces_hash(s->traces, walk_frames(s->walk), n, &id);
	int linked = s->correlate && correlated(s, p, &ps, ps.time + iv->ns, note ? &fe : NULL, &id, &ctx, &link);
	traces_add_off_cpu(s->traces, &id, iv->pid, iv->tid, p->comm, procmgr_thread_name(s->procs, p, iv->tid),
			   walk_frames(s->walk), n, iv->ns, iv->preempted, linked ? &link : NULL);
	procmgr_release_deferred(s->procs);
	s->stats.handle_ns += clock_mono_ns() - t0;
}

/* A switch record: a switch-out completes its sample (preempted or blocked), or starts an interval without one; a
 * switch-in ends the thread's interval off CPU. A process the fast lane covers has its switch records there
 * (fast), not from the main rings. The idle task and hostprof's own threads are left out. */
static void handle_switch_decoded(struct session *s, const struct perf_switch *decoded, bool fast)
{
	struct perf_switch sw = *decoded;
	struct offcpu_interval iv;
	struct fastlane *fl = lanes_fastlane(s->lanes);
	if (sw.pid == 0 || (pid_t)sw.pid == s->self)
		return;
	if (!fast && fl && fastlane_covers(fl, (pid_t)sw.pid, sw.time))
		return;
	if (sw.out)
		offcpu_switch_out(s->offcpu, (pid_t)sw.pid, (pid_t)sw.tid, sw.time, sw.preempted);
	else if (offcpu_switch_in(s->offcpu, (pid_t)sw.tid, sw.time, &iv))
		count_off_cpu(s, &iv);
}

static void handle_switch(struct session *s, const struct perf_event_header *rec, const struct record_ctx *rc)
{
	struct perf_switch sw;
	if (!s->offcpu)
		return;
	if (perf_decode_switch(rc->layout, rec, &sw) < 0) {
		s->stats.bad_records++;
		return;
	}
	handle_switch_decoded(s, &sw, false);
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
	jitinfo_mgr_on_mapping(s->jit, (pid_t)m.pid, m.filename);
	if (s->correlate && m.filename && correlate_is_apm_library(m.filename))
		correlate_on_mapping(s->correlate, (pid_t)m.pid, m.addr, m.addr + m.len, m.pgoff, m.filename);
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
	if (c.exec)
		jitinfo_mgr_on_exec(s->jit, (pid_t)c.pid, clock_mono_ns());
	if (s->correlate && c.exec)
		correlate_on_exec(s->correlate, (pid_t)c.pid);
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
		if (process && t.pid != t.ppid)
			jitinfo_mgr_on_fork(s->jit, (pid_t)t.ppid, (pid_t)t.pid, clock_mono_ns());
		return;
	}
	procmgr_on_exit(s->procs, &t);	/* kept, mappings and all, while samples of its are held */
	if (s->offcpu)
		offcpu_forget(s->offcpu, (pid_t)t.tid);
	if (process)
		jitinfo_mgr_on_exit(s->jit, (pid_t)t.pid);
	if (process)
		lanes_on_exit(s->lanes, (pid_t)t.pid, t.time);
	if (s->correlate && process)
		correlate_on_process_exit(s->correlate, (pid_t)t.pid);
	else if (s->correlate)
		correlate_on_thread_exit(s->correlate, (pid_t)t.pid, (pid_t)t.tid);
}

int session_handle_record(void *ctx, const struct perf_event_header *rec, const struct record_origin *origin)
{
	struct session *s = ctx;
	struct record_ctx rc = { .layout = origin->layout, .kind = origin->kind };
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

/* The mappings of p whose files can be opened, as a replay records them. */
static int capture_process(void *ctx, struct process *p)
{
	struct session *s = ctx;
	struct replay_mapping *maps = calloc(p->nmaps + 1, sizeof(*maps));
	uint32_t n = 0;
	int err = maps ? 0 : -ENOMEM;
	for (unsigned i = 0; i < p->nmaps && !err; i++) {
		struct execinfo *e = procmgr_mapping_exe(s->procs, p, &p->maps[i]);
		if (!e)
			continue;
		maps[n] = (struct replay_mapping){ .start = p->maps[i].start, .end = p->maps[i].end,
						   .pgoff = p->maps[i].pgoff, .prot = p->maps[i].prot };
		err = replay_writer_add_file(s->capture, e, &maps[n].file);
		n++;
	}
	if (!err)
		err = replay_writer_set_process(s->capture, p->pid, maps, n);
	free(maps);
	return err;
}

int session_save_capture(struct session *s)
{
	if (!s->capture)
		return 0;
	int err = procmgr_for_each(s->procs, capture_process, s);
	return err < 0 ? err : replay_writer_save(s->capture, s->opts.capture_path);
}


/* Off-CPU samples lost in full off-CPU rings (the sampler's and the fast lane's) since the start. */
static uint64_t off_cpu_lost(const struct session *s)
{
	struct fastlane_stats fs = { 0 };
	if (lanes_fastlane(s->lanes))
		fastlane_get_stats(lanes_fastlane(s->lanes), &fs);
	return sampler_off_cpu_lost(s->sampler) + fs.off_cpu_lost;
}

/* Threads still off CPU count up to the end of the run (or now, for a daemon's interval); the profile says what
 * the switches came to. */
static void off_cpu_to_profile(struct session *s, struct profile *p)
{
	struct offcpu_stats st;
	if (!s->offcpu)
		return;
	offcpu_flush(s->offcpu, s->finish_ns ? s->finish_ns : clock_mono_ns(), count_off_cpu, s);
	offcpu_get_stats(s->offcpu, &st);
	p->info.off_cpu_threshold_ns = s->opts.off_cpu_threshold_ns;
	p->info.off_cpu_switches += st.switch_outs;
	p->info.off_cpu_capped += st.capped;
	p->info.off_cpu_no_stack += st.no_sample;
	/* Off-CPU samples lost in full off-CPU rings (the main ones and the fast lane's), apart from CPU samples. */
	uint64_t lost = off_cpu_lost(s);
	p->info.off_cpu_lost += st.untracked + (lost - s->off_cpu_lost_told);
	s->off_cpu_lost_told = lost;
}

/* The interval's counters into p->info, and what naming its traces needs made ready on this thread: the JIT
 * maps read again and its JIT frames named, kallsyms loaded if kernel frames need it. */
static int prepare_profile(struct session *s, struct profile *p)
{
	off_cpu_to_profile(s, p);
	p->info.samples += s->stats.samples;
	p->info.lost += s->stats.lost;
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
	int err = traces_new(s->execinfo, &s->kernel, &next);
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
	walk_reset_stats(s->walk);
	if (s->offcpu)
		offcpu_reset_stats(s->offcpu);
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
	out->has_correlate = s->correlate && correlate_stats(s->correlate, &out->correlate) == 0;
	out->has_go_stacks = walk_go_stack_stats(s->walk, &out->go_stacks) == 0;
	out->has_stackext = walk_stackext_stats(s->walk, &out->stackext) == 0;
	if ((out->has_offcpu = s->offcpu != NULL))
		offcpu_get_stats(s->offcpu, &out->offcpu);
	out->off_cpu_lost = off_cpu_lost(s);
	out->processes = procmgr_seen(s->procs);
	out->dropped_mappings = procmgr_dropped(s->procs);
}
