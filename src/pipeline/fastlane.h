/*
 * fastlane.h — the fast lane: samples of APM, Go, deep and CPython threads read the moment
 * they are taken.
 *
 * Everything else hostprof samples is read in batches (sampler.h: a ring wakes it when half full), which is
 * what makes it cheap. Some samples need something read from the live process before the thread moves
 * on, which a batch read tens of milliseconds later cannot do:
 * - FASTLANE_APM: a thread of an APM process, whose trace context must be read before the thread switches
 *   transactions (from when correlation says the process is ready: correlate.h);
 * - FASTLANE_GO: a Go thread (Go >= 1.17, which keeps g in a register) sampled on its g0 stack (stack growth,
 *   runtime.systemstack, cgo), whose goroutine's context and stack are valid only until it resumes — a stack
 *   growth is over within microseconds, and the old stack it leaves is reused within milliseconds — and a
 *   goroutine deeper than the sample's stack copy, whose outer frames change as it returns
 *   (go_stack_snapshot());
 * - FASTLANE_DEEP: any thread whose stack runs deeper than the sample's copy and changes there within a batch's
 *   delay (deep recursion), and deeper than the larger copy such a thread gets first (thread_copies.h), whose
 *   stack past the copy is read then: FASTLANE_DEEP_READ bytes, or as far as the
 *   process's walks were seen to need (fastlane_read_deeper()).
 * - FASTLANE_PYTHON: a thread of a CPython process, whose Python frames (pyframes.h) change with every call and
 *   return: read by the reader, each holding a reference on its code, released after the entry is handed over.
 * Go and deep processes take the fast lane after GO/deep reads in batches came too late a few times, CPython
 * processes from their first sample (the session decides: session.h, lanes.h).
 * For such a process the fast lane opens per-thread events on every thread of it (one per thread and CPU,
 * inherit following the threads it creates later, not its children: inherit_thread, Linux 5.13), writing into
 * per-CPU rings of their own that wake a reader at every sample. There is one reader thread per CPU, pinned to
 * that CPU and, when permitted, at real-time priority (SCHED_FIFO): woken by the sample, it preempts whatever
 * runs there — the sampled thread itself, sampled on that CPU — so the thread has not run on since the sample
 * when the reader reads it. A reader does nothing else: it reads the trace context (correlate_reader) and the
 * goroutine (go_stack_snapshot()), measures how long after the sample that was, and queues a copy of the sample
 * with what it read for the main thread, which unwinds, counts and sends (fastlane_drain()) as for any sample.
 *
 * The process's samples still arrive in the main rings too (the main events follow it as before): from the
 * time the fast lane started (fastlane_add_process()'s start) they are dropped there (fastlane_covers()), and
 * the fast lane's own samples from before it are dropped here, so none is counted twice or lost.
 *
 * Off-CPU (the main sampler's off_cpu, sampler.h): the fast lane's events then carry the process's switch-outs
 * (their samples and switch records) and switch-ins (switch records) too, in off-CPU rings of their own beside each
 * CPU's fast-lane ring, and the main rings' ones of a covered process are dropped like its CPU samples. A reader
 * woken by a switch-out reads the thread's trace context while it is switched out: the context it blocked in,
 * which cannot change until it runs again, so the interval off CPU that the switch-in closes is that
 * transaction's time (session.h). A switch-out and its switch-in may be read by readers of two CPUs:
 * fastlane_drain() hands the off-CPU records over merged in time order across the queues, up to a couple of
 * milliseconds ago (the later ones wait for the next drain), so a switch-in never overtakes its switch-out.
 *
 * Cost: threads × CPUs events per process (bounded by max_events; a process that would exceed it is refused
 * and read in batches as before; a thread's events are closed once it and the threads it made have exited), a second sample per period for those threads in the kernel, and a reader
 * wakeup per sample of them. With -a and in the daemon the same holds: the per-CPU events sample these
 * threads too, and those samples are dropped.
 *
 * Nothing is lost silently: a full queue (the main thread fell behind) and samples the kernel could not write
 * into a fast-lane ring are counted (fastlane_stats); a goroutine snapshot too large for a queue is left out
 * (counted), the sample kept.
 *
 * Threads: everything here is called from the main thread; the readers share with it only the queues
 * (single producer, single consumer, lock-free), their counters (atomics), the map of covered processes and
 * the correlate_reader (both behind locks). Errors: negative errno.
 */
#ifndef HOSTPROF_FASTLANE_H
#define HOSTPROF_FASTLANE_H

#include <stdint.h>
#include <sys/types.h>

#include "correlate/correlate.h"
#include "unwind/go_stack.h"
#include "src/sampling/perf_record.h"
#include "src/sampling/sampler.h"
#include "src/processes/pyframes.h"

#define FASTLANE_DEFAULT_MAX_EVENTS 16384

/* Why a process takes the fast lane (bits; a process may have both). */
enum fastlane_kind {
	FASTLANE_APM = 1,
	FASTLANE_GO = 2,
	FASTLANE_DEEP = 4,
	FASTLANE_PYTHON = 8,
};

/* Stack past the copy a reader reads for a FASTLANE_DEEP sample (a Go one: up to its goroutine's end). The walk
 * goes on past it from the live process, as in batches (stackext.h). */
#define FASTLANE_DEEP_READ (64u << 10)
#define FASTLANE_RT_PRIORITY 10		/* SCHED_FIFO priority of the readers (as chrt -f 10) */

struct fastlane_options {
	struct sampler_options sampler;	/* the main sampler's settings (sampler_get_options()) */
	struct correlate_reader *reader;
	int realtime;			/* readers at SCHED_FIFO when permitted */
	unsigned max_events;		/* per-thread events at most; 0: FASTLANE_DEFAULT_MAX_EVENTS */
	size_t go_max_stack;		/* most goroutine stack read per Go sample (the walk's limit) */
	size_t deep_max;		/* most stack read past the copy per FASTLANE_DEEP sample (the walk's limit) */
	int wake_fd;			/* an eventfd the readers write when a queue needs draining soon */
	struct pyframes *py;		/* reads FASTLANE_PYTHON samples' Python frames (borrowed; NULL: none) */
};

/* A sample as a reader handed it over: a copy of the record, valid during the fastlane_fn call. */
struct fastlane_entry {
	const struct perf_event_header *rec;
	const struct correlate_read *ctx;	/* the trace context read (status NOT_APM for other processes) */
	uint64_t read_ns;			/* when (CLOCK_MONOTONIC, as the sample's time) */
	const struct go_stack_snapshot *go;	/* the goroutine, or the stack past the copy, read (kind NONE if
						 * nothing; EXTENSION also for FASTLANE_DEEP) */
	int off_cpu;				/* a sample: a switch-out (from an off-CPU ring) */
	/* The record decoded once, by the reader: a sample (its pointers into rec) or a switch record. */
	const struct perf_sample *sample;	/* NULL: a switch record */
	const struct perf_switch *sw;		/* NULL: a sample */
	/* FASTLANE_PYTHON: the thread's Python frames as read (pyframes_read()), innermost first, valid (and their
	 * references held) during the fastlane_fn call; py_read 0 when not read, 1 read, else the read's error. */
	const struct pyframe *py;
	unsigned npy;
	int py_read;
};

typedef void (*fastlane_fn)(void *ctx, const struct fastlane_entry *e);

struct fastlane_stats {
	uint64_t samples;		/* samples read by the readers */
	uint64_t queue_full;		/* ... dropped because a queue was full (counted, not silent) */
	uint64_t kernel_lost;		/* samples the kernel could not write into a fast-lane ring */
	uint64_t off_cpu_samples;	/* ... of them switch-outs (off-CPU samples) */
	uint64_t off_cpu_lost;		/* off-CPU samples the kernel could not write into its off-CPU rings */
	uint64_t go_snapshots;		/* samples whose goroutine (Go) or stack past the copy was read */
	uint64_t go_too_large;		/* ... left out: larger than a queue (the sample kept) */
	uint64_t python_reads;		/* samples whose Python frames were read */
	uint64_t python_read_ns;	/* ... the readers' time reading them */
	uint64_t before_start;		/* fast-lane samples from before a process's start, or of a refused
					 * process: left to the main rings, which have them */
	uint64_t read_p50_ns, read_p99_ns, read_max_ns;	/* sample → context read latency */
	uint64_t reads;			/* ... over this many samples */
	unsigned processes;		/* processes covered */
	unsigned events;		/* per-thread events open */
	uint64_t events_closed;		/* ... and closed, their threads gone (fastlane_reap()) */
	unsigned refused;		/* processes refused (max_events, or the kernel refused) */
	unsigned readers, realtime;	/* reader threads, and how many of them run SCHED_FIFO */
	uint64_t readers_cpu_ns;	/* their CPU time */
};

struct fastlane;

/* o is copied (its reader and wake_fd are borrowed: they must outlive the fast lane). Nothing is opened or started
 * until the first fastlane_add_process(). Returns 0 and *out (free with fastlane_free()), -ENOMEM, or
 * pthread_mutex_init()'s error, negated; *out is set only on success. */
int fastlane_new(const struct fastlane_options *o, struct fastlane **out);
/* Stops the readers (if fastlane_stop() was not called) and closes everything. */
void fastlane_free(struct fastlane *f);

/*
 * Open events on every thread of pid and start covering it (for kinds, enum fastlane_kind) from *start_ns
 * (CLOCK_MONOTONIC). A process already covered keeps its start and gains kinds. -E2BIG past max_events,
 * -EOPNOTSUPP on a kernel without inherit_thread, -ESRCH if it is gone; fastlane_error() explains. A refused
 * process is not tried again: -EALREADY.
 */
int fastlane_add_process(struct fastlane *f, pid_t pid, unsigned kinds, uint64_t *start_ns);
const char *fastlane_error(const struct fastlane *f);

/* 1 if a sample of pid taken at time_ns, read from the main rings, is the fast lane's to count. */
int fastlane_covers(const struct fastlane *f, pid_t pid, uint64_t time_ns);
/* pid exited at time_ns (perf EXIT of its leader): it stops being covered after that time. */
void fastlane_on_exit(struct fastlane *f, pid_t pid, uint64_t time_ns);
/* Forget processes that exited long ago (their samples are all read), and close the events of exited threads
 * (sampler_close_exited(), once a second at most). Call now and then. */
void fastlane_reap(struct fastlane *f, uint64_t now_ns);

/* Hand every queued sample and switch record to fn and release it: in each reader's order, off-CPU records
 * merged in time order across the readers (see Off-CPU above). Returns how many. */
int fastlane_drain(struct fastlane *f, fastlane_fn fn, void *ctx);
/* pid's walks went this far past the copy: its readers read that much (up to deep_max) from now on. */
void fastlane_read_deeper(struct fastlane *f, pid_t pid, size_t bytes);

/* Stop (paused) or resume sampling in the fast lane, as the main sampler is (the daemon's probabilistic
 * profiling); processes added meanwhile start paused. */
void fastlane_pause(struct fastlane *f, int paused);
/* Disable the events, let each reader read its ring a last time, and stop them. Drain after this. */
void fastlane_stop(struct fastlane *f);

/* The layout of the records the entries carry. */
const struct perf_layout *fastlane_layout(const struct fastlane *f);
void fastlane_get_stats(const struct fastlane *f, struct fastlane_stats *out);

#endif
