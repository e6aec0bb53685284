/*
 * offcpu.c — off-CPU intervals per thread. See offcpu.h for the contract.
 */
#include "src/offcpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hindex.h"

struct thread_state {
	pid_t pid, tid;
	uint64_t out_ns;	/* when it switched out (pending) */
	int pending, preempted;
	uint8_t *rec;		/* the switch-out sample, rec_len bytes of rec_cap */
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

static int keep_record(struct thread_state *t, const struct perf_event_header *rec)
{
	if (rec->size > t->rec_cap) {
		uint8_t *b = realloc(t->rec, rec->size);
		if (!b)
			return -ENOMEM;
		t->rec = b;
		t->rec_cap = rec->size;
	}
	memcpy(t->rec, rec, rec->size);
	t->rec_len = rec->size;
	return 0;
}

int offcpu_switch_out(struct offcpu *o, pid_t pid, pid_t tid, uint64_t time_ns, int preempted,
		      const struct perf_event_header *rec)
{
	struct thread_state *t = thread_get(o, tid, 1);
	o->stats.switch_outs++;
	if (!t || keep_record(t, rec) < 0) {
		o->stats.untracked++;
		return t ? -ENOMEM : -E2BIG;
	}
	t->pid = pid;
	t->tid = tid;
	t->out_ns = time_ns;
	t->preempted = preempted;
	t->pending = 1;
	t->note_len = 0;
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
	*iv = (struct offcpu_interval){ .pid = t->pid, .tid = t->tid, .preempted = t->preempted,
					.ns = end_ns > t->out_ns ? end_ns - t->out_ns : 0 };
	o->stats.intervals++;
	if (iv->ns < o->o.threshold_ns) {
		iv->why = OFFCPU_SHORT;
		o->stats.short_blocks++;
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
