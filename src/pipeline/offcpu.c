/*
 * offcpu.c — off-CPU intervals per thread. See offcpu.h for the contract.
 */
#include "src/pipeline/offcpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hindex.h"

struct thread_state {
	pid_t pid, tid;
	uint64_t out_ns;	/* when it switched out (pending) */
	int pending, preempted;
	enum { STACK_NONE, STACK_SAMPLE, STACK_LIVE } stack;	/* what rec holds for the pending switch-out */
	int out_seen;		/* its switch-out record came */
	int live_tried;		/* its stack was offered for a live read (offcpu_want_live()) */
	uint8_t *rec;		/* the switch-out sample or the live stack's bytes, rec_len bytes of rec_cap */
	struct offcpu_live live;	/* STACK_LIVE: the registers read (live.bytes is rec) */
	uint64_t live_done_ns;	/* ... and when the read ended */
	size_t rec_len, rec_cap;
	uint8_t note[OFFCPU_NOTE_MAX];	/* offcpu_set_note()'s, note_len bytes */
	size_t note_len;
};

struct offcpu {
	struct offcpu_options o;
	struct hindex threads;	/* tid → struct thread_state * */
	double tokens;		/* stacks the rate cap still allows now */
	uint64_t tokens_ns;	/* when tokens was last refilled */
	struct offcpu_stats stats;
};

int offcpu_new(const struct offcpu_options *opts, struct offcpu **out)
{
	struct offcpu *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->o = *opts;
	if (!o->o.max_threads)
		o->o.max_threads = OFFCPU_DEFAULT_MAX_THREADS;
	o->tokens = o->o.max_rate;
	*out = o;
	return 0;
}

static void state_free(struct thread_state *t)
{
	if (t) {
		free(t->rec);
		free(t);
	}
}

void offcpu_free(struct offcpu *o)
{
	uint64_t v;
	if (!o)
		return;
	for (uint32_t pos = 0; hindex_next(&o->threads, &pos, &v);)
		state_free((struct thread_state *)(uintptr_t)v);
	hindex_free(&o->threads);
	free(o);
}

static struct thread_state *thread_get(struct offcpu *o, pid_t tid, int make)
{
	uint64_t v;
	if (hindex_u32_get(&o->threads, (uint32_t)tid, &v))
		return (struct thread_state *)(uintptr_t)v;
	if (!make || hindex_count(&o->threads) >= o->o.max_threads)
		return NULL;
	struct thread_state *t = calloc(1, sizeof(*t));
	if (t && hindex_u32_put(&o->threads, (uint32_t)tid, (uintptr_t)t) < 0) {
		free(t);
		t = NULL;
	}
	return t;
}

/* len bytes into t's buffer. */
static int keep_bytes(struct thread_state *t, const void *bytes, size_t len)
{
	if (len > t->rec_cap) {
		uint8_t *b = realloc(t->rec, len);
		if (!b)
			return -ENOMEM;
		t->rec = b;
		t->rec_cap = len;
	}
	memcpy(t->rec, bytes, len);
	t->rec_len = len;
	return 0;
}

/* A new pending switch-out of tid at time_ns; NULL (counted) when the thread cannot be tracked. */
static struct thread_state *begin(struct offcpu *o, pid_t pid, pid_t tid, uint64_t time_ns)
{
	struct thread_state *t = thread_get(o, tid, 1);
	o->stats.switch_outs++;
	if (!t) {
		o->stats.untracked++;
		return NULL;
	}
	t->pid = pid;
	t->tid = tid;
	t->out_ns = time_ns;
	t->preempted = 0;
	t->pending = 1;
	t->stack = STACK_NONE;
	t->out_seen = t->live_tried = 0;
	t->note_len = 0;
	return t;
}

int offcpu_sample_out(struct offcpu *o, pid_t pid, pid_t tid, uint64_t time_ns, const struct perf_event_header *rec)
{
	struct thread_state *t = begin(o, pid, tid, time_ns);
	if (!t)
		return -E2BIG;
	if (keep_bytes(t, rec, rec->size) < 0) {
		t->pending = 0;
		o->stats.untracked++;
		return -ENOMEM;
	}
	t->stack = STACK_SAMPLE;
	return 0;
}

int offcpu_switch_out(struct offcpu *o, pid_t pid, pid_t tid, uint64_t time_ns, int preempted)
{
	struct thread_state *t = thread_get(o, tid, 0);
	if (!t || !t->pending || t->stack != STACK_SAMPLE || t->out_seen || time_ns < t->out_ns) {
		/* No sample before it: switch records only, or the sample was lost. */
		if (!(t = begin(o, pid, tid, time_ns)))
			return -E2BIG;
		o->stats.without_sample++;
	}
	t->preempted = preempted;
	t->out_seen = 1;
	return 0;
}

int offcpu_set_note(struct offcpu *o, pid_t tid, const void *note, size_t len)
{
	struct thread_state *t = thread_get(o, tid, 0);
	if (len > OFFCPU_NOTE_MAX)
		return -E2BIG;
	if (!t || !t->pending)
		return -ENOENT;
	memcpy(t->note, note, len);
	t->note_len = len;
	return 0;
}

/* One stack more within the rate cap, refilling max_rate tokens a second up to one second's worth. */
static int take_token(struct offcpu *o, uint64_t now_ns)
{
	if (!o->o.max_rate)
		return 1;
	if (now_ns > o->tokens_ns) {
		o->tokens += (double)(now_ns - o->tokens_ns) * o->o.max_rate / 1e9;
		if (o->tokens > o->o.max_rate)
			o->tokens = o->o.max_rate;
		o->tokens_ns = now_ns;
	}
	if (o->tokens < 1.0)
		return 0;
	o->tokens -= 1.0;
	return 1;
}

/* The interval of t from its switch-out to end_ns, decided: with its record, short, or capped. */
static void make_interval(struct offcpu *o, const struct thread_state *t, uint64_t end_ns, struct offcpu_interval *iv)
{
	*iv = (struct offcpu_interval){ .pid = t->pid, .tid = t->tid, .preempted = t->preempted, .start_ns = t->out_ns,
					.ns = end_ns > t->out_ns ? end_ns - t->out_ns : 0 };
	o->stats.intervals++;
	if (iv->ns < o->o.threshold_ns) {
		iv->why = OFFCPU_SHORT;
		o->stats.short_blocks++;
	} else if (t->stack == STACK_LIVE && t->live_done_ns < end_ns) {
		/* Read while it waited in this interval (its token was taken for the read). */
		iv->why = OFFCPU_WITH_STACK;
		iv->live = &t->live;
		o->stats.with_stack++;
		o->stats.live_stacks++;
	} else if (t->stack != STACK_SAMPLE) {
		iv->why = OFFCPU_NO_SAMPLE;
		o->stats.no_sample++;
	} else if (!take_token(o, end_ns)) {
		iv->why = OFFCPU_CAPPED;
		o->stats.capped++;
		o->stats.capped_ns += iv->ns;
	} else {
		iv->why = OFFCPU_WITH_STACK;
		iv->rec = (const struct perf_event_header *)t->rec;
		o->stats.with_stack++;
	}
	iv->note = t->note_len ? t->note : NULL;
	iv->note_len = t->note_len;
}

void offcpu_want_live(struct offcpu *o, uint64_t now_ns, offcpu_read_fn fn, void *ctx)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&o->threads, &pos, &v);) {
		struct thread_state *t = (struct thread_state *)(uintptr_t)v;
		/* A preempted thread is runnable: the kernel gives no registers of it (blocked_stack.h). */
		if (!t->pending || t->stack != STACK_NONE || t->live_tried || t->preempted ||
		    now_ns < t->out_ns + o->o.threshold_ns)
			continue;
		if (!take_token(o, now_ns))
			return;
		t->live_tried = 1;
		o->stats.live_tries++;
		fn(ctx, t->pid, t->tid);
	}
}

int offcpu_set_live(struct offcpu *o, pid_t tid, const struct offcpu_live *live, uint64_t done_ns)
{
	struct thread_state *t = thread_get(o, tid, 0);
	if (!t || !t->pending || t->stack == STACK_SAMPLE)
		return -ENOENT;
	if (keep_bytes(t, live->bytes, live->size) < 0)
		return -ENOMEM;
	t->stack = STACK_LIVE;
	t->live = (struct offcpu_live){ .ip = live->ip, .sp = live->sp, .bytes = t->rec, .size = live->size };
	t->live_done_ns = done_ns;
	o->stats.live_reads++;
	return 0;
}

int offcpu_switch_in(struct offcpu *o, pid_t tid, uint64_t time_ns, struct offcpu_interval *iv)
{
	struct thread_state *t = thread_get(o, tid, 0);
	if (!t || !t->pending) {
		o->stats.unmatched++;
		return 0;
	}
	t->pending = 0;
	make_interval(o, t, time_ns, iv);
	return 1;
}

void offcpu_flush(struct offcpu *o, uint64_t now_ns, offcpu_fn fn, void *ctx)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&o->threads, &pos, &v);) {
		struct thread_state *t = (struct thread_state *)(uintptr_t)v;
		if (!t->pending || now_ns <= t->out_ns)
			continue;
		struct offcpu_interval iv;
		make_interval(o, t, now_ns, &iv);
		fn(ctx, &iv);
		t->out_ns = now_ns;
	}
}

void offcpu_cancel(struct offcpu *o)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&o->threads, &pos, &v);)
		((struct thread_state *)(uintptr_t)v)->pending = 0;
}

void offcpu_forget(struct offcpu *o, pid_t tid)
{
	struct thread_state *t = thread_get(o, tid, 0);
	if (t) {
		hindex_u32_del(&o->threads, (uint32_t)tid);
		state_free(t);
	}
}

void offcpu_get_stats(const struct offcpu *o, struct offcpu_stats *out)
{
	*out = o->stats;
}

void offcpu_reset_stats(struct offcpu *o)
{
	memset(&o->stats, 0, sizeof(o->stats));
}
