/*
 * thread_copies.c — which threads get a bigger stack copy, and which of their samples are kept. See
 * thread_copies.h for the contract.
 */
#include "src/pipeline/thread_copies.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "src/base/clock.h"
#include "src/base/hindex.h"

/*
 * A thread gets a thread copy once its reads in batches found STALE_FOR_COPY changed stacks (each one a stack cut
 * short), or were needed by 1 in READ_SHARE of its samples since its first read, READS_FOR_COPY at least: a
 * thread that ran past the copy once in a while keeps the sampler's copy, which the kernel copies for every sample.
 * The counts start again after WINDOW samples. A clang of a template-heavy file needed reads for 13% of its
 * samples, and found the stack changed for most of them: it gets its copy within its first few batches.
 */
#define STALE_FOR_COPY 2
#define READS_FOR_COPY 16
#define READ_SHARE 8
#define WINDOW 1024
#define REAP_EVERY_NS 1000000000ull

/*
 * A thread copy is given back once WINDOW samples taken from it in a row needed more than the sampler's copy for
 * fewer than 1 in GIVE_BACK_SHARE (16 of 1024): a stack that ran deep a while (a JVM's main thread starting up)
 * would otherwise cost the kernel both copies, and hostprof the larger one's reading, for the thread's life.
 * Java 17 with -XX:+PreserveFramePointer: its main thread got a copy in its first second, and then needed it for
 * none of its samples (6.6-6.9 us of hostprof's CPU a sample with it given back, against 8.9-9.1 kept, and a
 * context switch per 51-54 samples against 1 per 35). Should it need the copy again, it gets one as it did the
 * first time.
 */
#define GIVE_BACK_SHARE 64

/* Per covered thread, packed: samples from its copy in this window, and those that needed more than the sampler's. */
#define USE_SAMPLES(v) ((v) & 0xffffffff)
#define USE_DEEP(v) ((v) >> 32)

/* Per-thread need, packed in one hindex value: samples since the first read, reads, stale reads. */
#define NEED_SAMPLES(v) ((v) & 0xfffff)
#define NEED_READS(v) (((v) >> 20) & 0xfffff)
#define NEED_STALE(v) (((v) >> 40) & 0xfffff)
#define NEED(samples, reads, stale) ((uint64_t)(samples) | (uint64_t)(reads) << 20 | (uint64_t)(stale) << 40)

struct thread_copies {
	struct thread_copies_options o;
	struct hindex need;	/* tid → its packed need, from its first read until it gets a copy or exits */
	struct hindex covered;	/* tid → start (CLOCK_MONOTONIC ns): its thread copy's samples are kept from then */
	struct hindex use;	/* tid (covered) → its packed use of the copy in this window */
	bool refused;		/* a refusal was logged: no thread copy is tried again */
	uint64_t next_reap_ns;
	struct thread_copies_stats stats;
};

int thread_copies_new(const struct thread_copies_options *o, struct thread_copies **out)
{
	struct sampler_options so;
	sampler_get_options(o->sampler, &so);
	if (!o->stack_size || o->stack_size % 8 || o->stack_size > SAMPLER_MAX_STACK || o->stack_size <= so.stack_size)
		return -EINVAL;
	struct thread_copies *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->o = *o;
	if (!t->o.max_threads)
		t->o.max_threads = THREAD_COPIES_DEFAULT_MAX;
	*out = t;
	return 0;
}

void thread_copies_free(struct thread_copies *t)
{
	if (!t)
		return;
	hindex_free(&t->need);
	hindex_free(&t->covered);
	hindex_free(&t->use);
	free(t);
}

void thread_copies_count_sample(struct thread_copies *t, pid_t tid)
{
	uint64_t v;
	if (!hindex_count(&t->need) || !hindex_u32_get(&t->need, (uint32_t)tid, &v))
		return;
	/* out of memory: counted again from the next read, no harm */
	hindex_u32_put(&t->need, (uint32_t)tid, NEED_SAMPLES(v) + 1 >= WINDOW ? 0 : v + 1);
}

/* tid's own events, and its samples kept from them from now on; a refusal but for an exited thread is said once. */
static void open_copy(struct thread_copies *t, pid_t tid)
{
	int err = sampler_open_thread_copy(t->o.sampler, tid, t->o.stack_size);
	if (err == 0 && hindex_u32_put(&t->covered, (uint32_t)tid, clock_mono_ns()) == 0) {
		t->stats.opened++;
		t->stats.threads++;
		return;
	}
	if (err == -ESRCH) {
		t->stats.gone++;
		return;
	}
	/* Open but not covered (out of memory): its events' samples are dropped until its thread exits. Rings too
	 * small for such copies (an unprivileged user's) are the user's setting, said at debug level. */
	t->refused = true;
	log_write(&t->o.log, err == -ENOSPC ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARN,
		  "thread %d: no stack copy of its own (%s): its stack past the sampler's copy is read from the "
		  "process, in batches or the fast lane", (int)tid,
		  err == 0 ? "out of memory" : sampler_error(t->o.sampler));
}

bool thread_copies_live_read(struct thread_copies *t, pid_t tid, uint64_t time_ns, int rc, bool replaying)
{
	uint64_t v = 0;
	/* A sample from before its copy (a held sample's, a batch's): the copy answers it now. */
	if (hindex_u32_get(&t->covered, (uint32_t)tid, &v))
		return time_ns < v;
	if (t->refused || hindex_count(&t->covered) >= t->o.max_threads)
		return false;
	hindex_u32_get(&t->need, (uint32_t)tid, &v);
	uint64_t samples = NEED_SAMPLES(v), reads = NEED_READS(v) + 1;
	uint64_t stale = NEED_STALE(v) + (rc == -ESTALE && !replaying);
	if (stale >= STALE_FOR_COPY || (reads >= READS_FOR_COPY && reads * READ_SHARE >= samples)) {
		hindex_u32_del(&t->need, (uint32_t)tid);
		open_copy(t, tid);
		return true;
	}
	if (reads <= 0xfffff && stale <= 0xfffff)
		hindex_u32_put(&t->need, (uint32_t)tid, NEED(samples, reads, stale));
	return true;
}

/* tid's copy goes: its samples come from the sampler's events again from this one on (the drain is in time order,
 * so none of either kind from before it is still to come). */
static void give_back(struct thread_copies *t, pid_t tid)
{
	sampler_close_thread_copy(t->o.sampler, tid);
	hindex_u32_del(&t->covered, (uint32_t)tid);
	hindex_u32_del(&t->use, (uint32_t)tid);
	t->stats.threads--;
	t->stats.given_back++;
}

void thread_copies_copy_walked(struct thread_copies *t, pid_t tid, bool deep)
{
	uint64_t v = 0;
	if (!hindex_count(&t->covered) || !hindex_u32_get(&t->covered, (uint32_t)tid, &v))
		return;
	v = 0;
	hindex_u32_get(&t->use, (uint32_t)tid, &v);
	uint64_t samples = USE_SAMPLES(v) + 1, needed = USE_DEEP(v) + deep;
	if (samples < WINDOW) {
		hindex_u32_put(&t->use, (uint32_t)tid, samples | needed << 32);	/* out of memory: a window restarts */
		return;
	}
	if (needed * GIVE_BACK_SHARE < samples)
		give_back(t, tid);
	else
		hindex_u32_del(&t->use, (uint32_t)tid);
}

bool thread_copies_drops(struct thread_copies *t, pid_t tid, uint64_t time_ns, bool from_copy)
{
	uint64_t start;
	bool covered = hindex_count(&t->covered) && hindex_u32_get(&t->covered, (uint32_t)tid, &start) &&
		       time_ns >= start;
	if (from_copy)
		*(covered ? &t->stats.samples : &t->stats.early) += 1;
	else if (covered)
		t->stats.replaced++;
	return from_copy != covered;
}

void thread_copies_on_exit(struct thread_copies *t, pid_t tid)
{
	if (hindex_count(&t->need))
		hindex_u32_del(&t->need, (uint32_t)tid);
	if (hindex_count(&t->covered) && hindex_u32_del(&t->covered, (uint32_t)tid))
		t->stats.threads--;
	if (hindex_count(&t->use))
		hindex_u32_del(&t->use, (uint32_t)tid);
}

static bool vanished(uint32_t tid)
{
	char path[32];
	snprintf(path, sizeof(path), "/proc/%u", tid);
	return access(path, F_OK) < 0 && errno == ENOENT;
}

/* Forget threads that are gone though no exit record said so (a ring lost it): a covered one, or a later thread
 * under its tid would have its samples dropped, with no thread copy to take them; one whose reads were counted,
 * or a daemon would keep its count for good. Removal during the loop: allowed (hindex.h). */
static void forget_vanished(struct thread_copies *t, struct hindex *threads)
{
	uint32_t tid;
	uint64_t v;
	for (uint32_t pos = 0; hindex_u32_next(threads, &pos, &tid, &v);)
		if (vanished(tid))
			thread_copies_on_exit(t, (pid_t)tid);
}

void thread_copies_reap(struct thread_copies *t, uint64_t now_ns)
{
	if (!(hindex_count(&t->covered) || hindex_count(&t->need) || t->stats.opened) || now_ns < t->next_reap_ns)
		return;
	t->next_reap_ns = now_ns + REAP_EVERY_NS;
	if (t->stats.opened)
		t->stats.closed += sampler_close_exited(t->o.sampler);
	forget_vanished(t, &t->covered);
	forget_vanished(t, &t->need);
}

void thread_copies_get_stats(const struct thread_copies *t, struct thread_copies_stats *out)
{
	*out = t->stats;
	out->counting = hindex_count(&t->need);
}
