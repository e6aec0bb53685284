/*
 * offcpu_time.h — off-CPU time through the pipeline: each switch-out's sample kept by the tracker (offcpu.h)
 * until the thread's switch-in, then walked (walk.h) and counted into the traces as off-CPU time under that stack,
 * with the trace context the fast lane read as the thread switched out.
 *
 * Where the sampler's switch-outs come without samples (perf_event_paranoid 2 without privileges: sampler.h),
 * the stacks of threads blocked past the threshold are read live while they wait (blocked_stack.h), on each
 * offcpu_time_tick(), which then asks to be called again within OFFCPU_TIME_LIVE_TICK_MS.
 *
 * The session hands it the off-CPU samples and switch records it has decoded (a process the fast lane covers has
 * its switch records there, not from the main rings), and the traces to count into at each call: the session
 * swaps them at each interval (session_detach_interval()).
 *
 * Ownership: the parts in deps are borrowed and must outlive it; the tracker and the live-read buffer are its own.
 * Errors: offcpu_time_new() returns 0 or -ENOMEM; a sample that cannot be walked is counted per thread without a
 * stack, never dropped.
 */
#ifndef HOSTPROF_OFFCPU_TIME_H
#define HOSTPROF_OFFCPU_TIME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/pipeline/apm_link.h"
#include "src/pipeline/fastlane.h"
#include "src/pipeline/lanes.h"
#include "src/pipeline/offcpu.h"
#include "src/pipeline/traces.h"
#include "src/pipeline/walk.h"
#include "src/processes/procmgr.h"
#include "src/profile/profile.h"
#include "src/sampling/sampler.h"

/* Live reads of waiting threads happen every tick this long at most: blocks this long and longer all get their
 * stack. */
#define OFFCPU_TIME_LIVE_TICK_MS 2

struct offcpu_deps {
	struct sampler *sampler;	/* its samples' layout; whether switch-outs come with samples; lost ones. NULL
					 * for a file's records (perf_data.h): switch-outs come with their samples, or
					 * without, nothing is read live, and none are lost in rings */
	const struct perf_layout *layout;	/* without a sampler: the layout of the switch-out samples */
	struct lanes *lanes;		/* the fast lane's layout and coverage, and which processes had their agent
					 * looked for */
	struct procmgr *procs;
	struct walk *walk;
	struct apm_link *apm;		/* NULL without correlation */
	pid_t self;			/* hostprof's own threads are left out */
};

/* What it walked, apart from the CPU samples' walks. */
struct offcpu_time_stats {
	uint64_t stacks;		/* off-CPU stacks unwound */
	struct walk_counts walks;	/* ... how they ended */
	uint64_t handle_ns;		/* time spent counting them */
	uint64_t after_exit;		/* switch records and samples of threads after their exit, not counted */
};

struct offcpu_time;

int offcpu_time_new(const struct offcpu_options *o, const struct offcpu_deps *deps, struct offcpu_time **out);
void offcpu_time_free(struct offcpu_time *t);
/* A switch-out's sample (rec, decoded: ps), taken in the thread switching out; fe: the fast lane's, with the
 * trace context its reader read while the thread was switched out (NULL: the main rings'). */
void offcpu_time_sample(struct offcpu_time *t, const struct perf_event_header *rec, const struct perf_sample *ps,
			const struct fastlane_entry *fe);
/* A switch record: a switch-out completes its sample (preempted or blocked) or starts an interval without one, a
 * switch-in ends the interval, counted into traces. fast: the fast lane's. */
void offcpu_time_switch(struct offcpu_time *t, const struct perf_switch *sw, bool fast, struct traces *traces);
/* Live reads due now (now: CLOCK_MONOTONIC ns). Returns 1 when it does them (call again within
 * OFFCPU_TIME_LIVE_TICK_MS), else 0. */
int offcpu_time_tick(struct offcpu_time *t, uint64_t now);
/* Sampling paused: the pending switch-outs are dropped (their switch-ins will not come). */
void offcpu_time_pause(struct offcpu_time *t);
/* A thread exited: its state goes, and its switch records are not counted until offcpu_time_on_fork() of its tid
 * (those of its last moments may come after its exit). */
void offcpu_time_forget(struct offcpu_time *t, pid_t tid);
/* A thread (or process) tid was made: switch records of it count again. */
void offcpu_time_on_fork(struct offcpu_time *t, pid_t tid);
/* Threads still off CPU counted into traces up to until_ns, and the interval's counters into p->info. */
void offcpu_time_to_profile(struct offcpu_time *t, struct traces *traces, uint64_t until_ns, struct profile *p);
/* Off-CPU samples lost in full off-CPU rings (the sampler's and the fast lane's) since the start. */
uint64_t offcpu_time_lost(const struct offcpu_time *t);
void offcpu_time_get_stats(const struct offcpu_time *t, struct offcpu_stats *tracker, struct offcpu_time_stats *out);
void offcpu_time_reset_stats(struct offcpu_time *t);

#endif
