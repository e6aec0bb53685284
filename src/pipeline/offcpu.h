/*
 * offcpu.h — off-CPU intervals: from a thread's switch-out to its next switch-in, with the stack it left on.
 *
 * The sampler's off-CPU events (sampler.h) deliver, for each followed thread that switches out, a sample taken as
 * it leaves the CPU (its registers and stack copy) followed by a switch-out record (PERF_RECORD_SWITCH: preempted
 * or blocked), and a switch-in record when it runs again. Why switch records for the switch-in and not the
 * thread's next sample: a task-bound event fires only while its task runs, so it samples the task's switch-outs
 * and never its switch-ins; the switch record is what the kernel emits at switch-in, for task and CPU events
 * alike, and it is small (a header and the sample_id). The time off CPU is switch-in time minus switch-out
 * time, both on the sampler's clock. Where the kernel gives no sample (kernel sampling refused: sampler.h) or
 * lost it, the switch-out record alone starts the interval: timed and counted, without a stack, unless the
 * caller reads the waiting thread's stack from the live process (blocked_stack.h) while it waits: threads that
 * have waited threshold_ns without a sample are offered for that (offcpu_want_live(), within the rate cap), and
 * a stack read is the interval's only if the read ended before the switch-in that closes it (offcpu_set_live()).
 *
 * A switch-out sample is kept (its record copied, in a buffer per thread that is reused) until its switch-in;
 * only then is it known whether the block was long enough to be worth a stack:
 * - blocks shorter than threshold_ns are handed over without a record: the caller sums them per thread;
 * - of the longer ones, at most max_rate per second (a token bucket of one second's worth) keep their record
 *   for the caller to unwind; the others are handed over without it (counted as capped): unwinding is the cost
 *   per switch a busy system must be protected from, measured in `make bench`.
 * Threads still off CPU when the caller flushes (the end of a run, a daemon interval) are handed over up to
 * that time and go on from there.
 *
 * Nothing is lost silently: switch-outs without a sample, switch-ins without a switch-out seen (a thread blocked
 * before the run began), threads over max_threads and records too large are counted (offcpu_stats).
 *
 * Ownership: the table owns its buffers; an interval's record is valid until the next call. Errors: negative
 * errno. Not thread-safe.
 */
#ifndef HOSTPROF_OFFCPU_H
#define HOSTPROF_OFFCPU_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <sys/types.h>

#define OFFCPU_DEFAULT_THRESHOLD_US 100
#define OFFCPU_DEFAULT_MAX_RATE 10000
#define OFFCPU_DEFAULT_MAX_THREADS 4096
#define OFFCPU_NOTE_MAX 256	/* bytes of a switch-out's note (offcpu_set_note()) */

struct offcpu_options {
	uint64_t threshold_ns;	/* shorter blocks keep no stack */
	unsigned max_rate;	/* stacks kept per second at most; 0: no limit */
	unsigned max_threads;	/* threads tracked at once; 0: OFFCPU_DEFAULT_MAX_THREADS */
};

/* Why an interval comes without its record. */
enum offcpu_nostack {
	OFFCPU_WITH_STACK,
	OFFCPU_SHORT,		/* under threshold_ns */
	OFFCPU_CAPPED,		/* over max_rate */
	OFFCPU_NO_SAMPLE,	/* the switch-out came without its sample (none given, or lost) */
};

/* A waiting thread's user registers and stack, read from the live process (blocked_stack.h). */
struct offcpu_live {
	uint64_t ip, sp;
	const uint8_t *bytes;
	size_t size;
};

struct offcpu_interval {
	pid_t pid, tid;
	uint64_t start_ns;			/* when it switched out (or the flush it went on from) */
	uint64_t ns;				/* time off CPU */
	int preempted;				/* still runnable when it switched out: waited for a CPU */
	enum offcpu_nostack why;
	const struct perf_event_header *rec;	/* the switch-out sample (why == OFFCPU_WITH_STACK), else NULL */
	const struct offcpu_live *live;		/* or the stack read live as it waited (rec NULL), else NULL */
	const void *note;			/* the switch-out's note (offcpu_set_note()), NULL if none */
	size_t note_len;
};

struct offcpu_stats {
	uint64_t switch_outs;		/* switch-outs seen (a sample, a switch-out record, or both) */
	uint64_t without_sample;	/* ... of them without a sample: a switch-out record alone */
	uint64_t intervals;		/* intervals ended by a switch-in or a flush */
	uint64_t with_stack, short_blocks, capped, no_sample;	/* the intervals by enum offcpu_nostack */
	uint64_t capped_ns;		/* time of the capped intervals */
	uint64_t unmatched;		/* switch-ins of threads with no switch-out seen */
	uint64_t untracked;		/* switch-outs of threads over max_threads, or without memory */
	uint64_t live_tries;		/* threads offered for a live read (offcpu_want_live()) */
	uint64_t live_reads;		/* ... whose stack was read (offcpu_set_live()) */
	uint64_t live_stacks;		/* ... that became an interval's stack (others: the thread ran first) */
};

typedef void (*offcpu_fn)(void *ctx, const struct offcpu_interval *iv);

struct offcpu;

/* o is copied. Returns 0 and *out (free with offcpu_free()) or -ENOMEM. */
int offcpu_new(const struct offcpu_options *o, struct offcpu **out);
void offcpu_free(struct offcpu *o);

/* The sample of tid (of pid) switching out at time_ns: rec, copied. It comes before the switch-out record of the
 * same switch. Returns 0, or -ENOMEM / -E2BIG when the thread is not tracked (counted). */
int offcpu_sample_out(struct offcpu *o, pid_t pid, pid_t tid, uint64_t time_ns, const struct perf_event_header *rec);
/* tid's switch-out record at time_ns (preempted: still runnable, else blocked). It completes the sample before it,
 * or starts an interval without a stack when none came. Returns 0, or -ENOMEM / -E2BIG (counted). */
int offcpu_switch_out(struct offcpu *o, pid_t pid, pid_t tid, uint64_t time_ns, int preempted);
/* What the caller read of tid as it switched out (the APM trace context it blocked in), kept with its pending
 * switch-out and handed over with each interval of it (note_len bytes, a copy). 0, -ENOENT when tid has no
 * switch-out pending, -E2BIG over OFFCPU_NOTE_MAX. */
int offcpu_set_note(struct offcpu *o, pid_t tid, const void *note, size_t len);
/* Called by offcpu_want_live() for a thread whose stack should be read now. */
typedef void (*offcpu_read_fn)(void *ctx, pid_t pid, pid_t tid);
/* fn for each thread blocked (not preempted) since threshold_ns or more before now_ns whose switch-out came without
 * a sample and whose stack was not read for it yet, as long as the rate cap allows (a token per read). */
void offcpu_want_live(struct offcpu *o, uint64_t now_ns, offcpu_read_fn fn, void *ctx);
/* The stack of tid read live, ending at done_ns, while it waits in its pending switch-out (bytes copied). 0,
 * -ENOENT when tid has no switch-out pending, -ENOMEM. */
int offcpu_set_live(struct offcpu *o, pid_t tid, const struct offcpu_live *live, uint64_t done_ns);
/* tid switched in at time_ns: 1 and *iv for the interval this ends, 0 when none was pending. */
int offcpu_switch_in(struct offcpu *o, pid_t tid, uint64_t time_ns, struct offcpu_interval *iv);
/* Hand every thread still off CPU its time up to now_ns (fn per thread); they go on from now_ns. */
void offcpu_flush(struct offcpu *o, uint64_t now_ns, offcpu_fn fn, void *ctx);
/* Sampling stopped (paused): forget every pending switch-out, whose switch-in will not be seen. */
void offcpu_cancel(struct offcpu *o);
/* tid exited: forget it. */
void offcpu_forget(struct offcpu *o, pid_t tid);

void offcpu_get_stats(const struct offcpu *o, struct offcpu_stats *out);
void offcpu_reset_stats(struct offcpu *o);

#endif
