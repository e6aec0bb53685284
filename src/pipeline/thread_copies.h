/*
 * thread_copies.h — a bigger stack copy for the threads whose stacks run deeper than the sampler's copy.
 *
 * Every thread is sampled with the sampler's copy (16 KiB by default: what most stacks need, and what the
 * kernel copies for every sample of every thread). A sample whose stack runs past it is walked on from the live
 * process (stackext.h), which a batch reads tens of milliseconds late: where the stack there changed meanwhile
 * (clang's template recursion, a parser's), the walk stops short. Reading each sample as it is taken (the fast
 * lane) costs a wakeup and a read per sample. A thread copy costs neither: once a thread's walks needed reads
 * past the copy for a good share of its samples, or found a few changed, that thread alone gets events of its own
 * that copy more (sampler_open_thread_copy(), the kernel's largest by default), drained in batches with the
 * rest. From then on its samples are taken from those events and its samples from the sampler's own events are
 * dropped (the kernel takes both: a thread copy costs the kernel both copies for that thread only). A thread
 * whose walks no longer need its copy (fewer than 1 in 64 of a window of its samples ran past the sampler's
 * copy) gives it back, and may get one again later the way it got the first.
 *
 * Which sample is kept is decided by time: a thread's thread-copy samples from the moment its events were open
 * (start) on, its samples from the sampler's events before that. Both come through one drain in time order
 * (sampler.h), so at a thread's exit every sample of it is in: its state goes then, and a later thread that gets
 * its tid is not covered.
 *
 * What a thread copy cannot do is left as it was: a stack deeper than the thread copy is read on from the
 * process, and its reads count for the fast lane as before (lanes.h: thread_copies_live_read() says which reads
 * it took); a thread's events that cannot be opened (too many thread copies, the kernel refuses) leave it to the
 * fast lane too.
 *
 * Bounds: at most max_threads threads have a thread copy at once, each one event per CPU. A refusal other than a
 * thread that exited is logged once, as a warning, and no thread copy is tried again.
 *
 * Ownership: the sampler is borrowed (its events are its own: closed with it, or by thread_copies_reap() once
 * their thread exited). Not thread-safe. Errors: negative errno.
 */
#ifndef HOSTPROF_THREAD_COPIES_H
#define HOSTPROF_THREAD_COPIES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/base/log.h"
#include "src/sampling/sampler.h"

#define THREAD_COPIES_DEFAULT_MAX 64

struct thread_copies_options {
	struct sampler *sampler;	/* the main sampler, whose events and rings the thread copies join */
	uint32_t stack_size;		/* bytes a thread copy copies (a multiple of 8, <= SAMPLER_MAX_STACK); no
					 * more than the sampler's own: thread_copies_new() says -EINVAL */
	unsigned max_threads;		/* threads with a thread copy at once; 0: THREAD_COPIES_DEFAULT_MAX */
	struct log_sink log;
};

struct thread_copies_stats {
	unsigned threads;		/* threads that have a thread copy now */
	unsigned counting;		/* threads whose reads are counted toward one now */
	uint64_t opened;		/* thread copies opened */
	uint64_t gone;			/* ... whose thread exited before its events were open */
	uint64_t samples;		/* samples taken from thread copies */
	uint64_t replaced;		/* the sampler's own samples of those threads, dropped */
	uint64_t early;			/* thread-copy samples from before their thread's start (or after its copy
					 * was given back), dropped */
	uint64_t given_back;		/* thread copies given back (closed) while their thread lived on */
	uint64_t closed;		/* events closed as their threads exited */
};

struct thread_copies;

/* o is copied. Returns 0 and *out (free with thread_copies_free()), -EINVAL or -ENOMEM; *out set on success. */
int thread_copies_new(const struct thread_copies_options *o, struct thread_copies **out);
void thread_copies_free(struct thread_copies *t);

/* A sample of tid from the sampler's events was walked: counted, for the share of its samples that needed reads. */
void thread_copies_count_sample(struct thread_copies *t, pid_t tid);
/*
 * A walk of a sample of tid taken at time_ns needed its stack past the copy read from the live process, in a
 * batch, or will need it once its table is built (a held sample of a main thread deeper than the copy, counted
 * as a read in time) (rc: the read's result, -ESTALE: it had changed; replaying: a held sample's, whose lateness
 * is hostprof's, the table it waited for, not the thread's: it counts as a read, never as a changed one, as in
 * lanes_live_read()). Returns true if the read is the thread copies' (tid has none yet and may get one, and this
 * read may give it one; or tid has one and the sample is from before it: held while a table was built, or in a
 * batch drained after the copy opened), false if it is the fast lane's to count (tid's stack runs deeper than its
 * thread copy, or no thread copy can be had). Which is told by time alone: a sample of an earlier copy of tid,
 * held until its thread gave that copy back and got another, counts as one from before (rare: a copy is given back
 * after 1024 samples, a sample is held while one table is built).
 */
bool thread_copies_live_read(struct thread_copies *t, pid_t tid, uint64_t time_ns, int rc, bool replaying);
/* A sample of tid from its thread copy was walked; deep: the walk needed more than the sampler's copy
 * (walk_in.view). A thread whose last 1024 such samples needed that for fewer than 16 gives its copy back: its
 * events are closed, and its samples are the sampler's again from the next one on. */
void thread_copies_copy_walked(struct thread_copies *t, pid_t tid, bool deep);
/* Whether a CPU sample of tid at time_ns is to be dropped: one from the sampler's own events while tid has a
 * thread copy (from_copy false), or one from a thread copy before its start or of a thread it no longer covers. */
bool thread_copies_drops(struct thread_copies *t, pid_t tid, uint64_t time_ns, bool from_copy);
/* Thread tid exited: every sample of it is in (see above), its state goes. */
void thread_copies_on_exit(struct thread_copies *t, pid_t tid);
/* Close the events of exited threads, and forget threads that are gone without an exit record seen (a full ring
 * lost it): covered ones, whose tid a later thread may get, and ones with reads counted (once a second at most). */
void thread_copies_reap(struct thread_copies *t, uint64_t now_ns);
void thread_copies_get_stats(const struct thread_copies *t, struct thread_copies_stats *out);

#endif
