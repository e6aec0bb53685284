/*
 * lanes.h — which processes' samples take the fast lane (fastlane.h), and the fast lane itself.
 *
 * Most samples are read in batches (sampler.h), which is what makes hostprof cheap. A process whose samples need
 * something read from it while the sample is fresh takes the fast lane instead, whose readers read each sample as
 * it is taken:
 * - an APM process, once correlation says it is ready (lanes_apm_ready()): its trace context;
 * - a process whose walks read its stack past the copy (walk.h; once its thread has a larger copy of its own or
 *   cannot have one: thread_copies.h) for a good share of its samples, or found it moved on a few times when
 *   read in a batch; or whose walks lost a fiftieth of its stacks for want of a goroutine behind g0
 *   read as the sample saw it (lanes_live_read());
 * - a CPython process (lanes_python()): its Python frames, which change with every call and return;
 * - a process of a program one of whose processes took the lane for its stacks before, from its first sample
 *   (lanes_first_sample()): short-lived processes of one program (a build tool run per file) would otherwise
 *   exit before their reads add up.
 * The policy keeps its own per-process state (the reads so far, what was checked), forgotten at the process's
 * exit (lanes_on_exit()); programs are remembered by the FileID of their executable, the last LANES_PROGRAMS.
 * The fast lane is made when the first process needs it and owned here; the caller drains it (lanes_fastlane()).
 *
 * Ownership: the process manager, the sampler and the correlation reader are borrowed. Not thread-safe (the fast
 * lane's readers are threads of their own behind its queue). Errors: negative errno; a process refused the lane is
 * logged once, as a warning, through the options' sink.
 */
#ifndef HOSTPROF_LANES_H
#define HOSTPROF_LANES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "correlate/correlate.h"
#include "src/base/log.h"
#include "src/pipeline/fastlane.h"
#include "src/pipeline/walk.h"
#include "src/processes/procmgr.h"
#include "src/processes/pyframes.h"
#include "src/sampling/sampler.h"

#define LANES_PROGRAMS 64

/* lanes_options.which: whose samples the fast lane may read as they are taken (the others' in batches). */
#define LANES_APM 1u	/* processes of APM agents: their trace context, before it changes */
#define LANES_STACKS 2u	/* processes whose walks read their stacks on from the process (Go's goroutine stacks, deep
			 * recursion), where a batch would find them moved on */

struct lanes_options {
	unsigned which;			/* LANES_* bits */
	int realtime;			/* the readers at real-time priority where permitted */
	unsigned max_events;		/* per-thread events at most (0: the fast lane's default) */
	size_t go_max_stack;		/* most goroutine stack a reader reads per Go sample (walk.h) */
	size_t deep_max;		/* most stack past the copy a reader reads per deep sample */
	struct sampler *sampler;	/* the main sampler, whose settings the fast lane's events copy */
	struct correlate_reader *reader;	/* reads APM trace contexts (NULL: no APM) */
	int wake_fd;			/* the readers wake the caller's poll through it */
	struct procmgr *procs;		/* to know a process's program */
	struct pyframes *py;		/* reads CPython processes' Python frames (NULL: none) */
	struct log_sink log;
};

struct lanes;

int lanes_new(const struct lanes_options *o, struct lanes **out);
void lanes_free(struct lanes *l);

/* A sample of p is about to be walked (not a held one walked again, nor the fast lane's): if its program took
 * the lane for its stacks before, p takes it now, once. */
void lanes_first_sample(struct lanes *l, struct process *p);
/* A sample of pid was walked: counted, for the share of its samples that needed reads. */
void lanes_count_sample(struct lanes *l, pid_t pid);
/* A walk of a sample of p needed a read of the live process (walk_live_read_fn, walk.h): the stack past the copy,
 * or a goroutine behind g0 it lost. */
void lanes_live_read(struct lanes *l, struct process *p, const struct walk_live_read *r);
/* pid is a CPython process whose Python frames can be read (pyframes.h): its samples take the lane from now on
 * (LANES_STACKS: its stack is what is read), for its frames to be read before the thread runs on. */
void lanes_python(struct lanes *l, pid_t pid);
/* Correlation says pid is ready: its samples take the lane from now on. */
void lanes_apm_ready(struct lanes *l, pid_t pid);
/* Whether pid's agent libraries were looked for already; marks them looked for (correlation's first look). */
bool lanes_apm_checked(struct lanes *l, pid_t pid);
/* pid exec'd: its program and its agent libraries are looked at again. */
void lanes_on_exec(struct lanes *l, pid_t pid);
/* pid exited at time_ns (its leader's exit): the lane stops covering it after that time, its state goes. */
void lanes_on_exit(struct lanes *l, pid_t pid, uint64_t time_ns);

/* Sampling stopped or resumed (the daemon's probabilistic profiling): the lane's events follow. */
void lanes_pause(struct lanes *l, int paused);
/* The fast lane, NULL until a first process took it. */
struct fastlane *lanes_fastlane(const struct lanes *l);

#endif
