/* Unit tests for src/pipeline/offcpu.c: intervals from switch-out to switch-in, the threshold, the rate cap, flushing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/pipeline/offcpu.h"

#define MS 1000000ULL

/* A fake switch-out sample: a header and a marker the interval must hand back intact. */
struct fake_rec {
	struct perf_event_header h;
	uint64_t marker;
};

static struct fake_rec fake(uint64_t marker)
{
	return (struct fake_rec){ { PERF_RECORD_SAMPLE, 0, sizeof(struct fake_rec) }, marker };
}

/* A switch-out as the kernel reports it: its sample, then its switch record (preempted or blocked). */
static int switch_out(struct offcpu *o, pid_t pid, pid_t tid, uint64_t t, int preempted,
		      const struct perf_event_header *rec)
{
	int err = offcpu_sample_out(o, pid, tid, t, rec);
	return err < 0 ? err : offcpu_switch_out(o, pid, tid, t, preempted);
}

static void test_interval_with_stack(void **state)
{
	struct offcpu *o;
	struct offcpu_options opts = { .threshold_ns = 100000 };
	struct offcpu_interval iv;
	struct fake_rec r = fake(42);
	(void)state;
	assert_int_equal(offcpu_new(&opts, &o), 0);
	assert_int_equal(switch_out(o, 10, 11, 1000 * MS, 0, &r.h), 0);
	r.marker = 0;	/* the record was copied */
	assert_int_equal(offcpu_switch_in(o, 11, 1250 * MS, &iv), 1);
	assert_int_equal(iv.ns, 250 * MS);
	assert_int_equal(iv.pid, 10);
	assert_int_equal(iv.why, OFFCPU_WITH_STACK);
	assert_non_null(iv.rec);
	assert_int_equal(((const struct fake_rec *)iv.rec)->marker, 42);
	assert_int_equal(offcpu_switch_in(o, 11, 1300 * MS, &iv), 0);	/* nothing pending any more */
	struct offcpu_stats st;
	offcpu_get_stats(o, &st);
	assert_int_equal(st.with_stack, 1);
	assert_int_equal(st.unmatched, 1);
	offcpu_free(o);
}

static void copy_note(void *ctx, const struct offcpu_interval *iv)
{
	if (iv->note)
		memcpy(ctx, iv->note, iv->note_len);
}

/* A note set at the switch-out comes back with each interval of it (a flush, then the switch-in), and goes
 * with the next switch-out; none without a pending switch-out, none too large. */
static void test_note(void **state)
{
	struct offcpu *o;
	struct offcpu_options opts = { 0 };
	struct offcpu_interval iv;
	struct fake_rec r = fake(1);
	char note[OFFCPU_NOTE_MAX + 1] = "transaction c0";
	(void)state;
	assert_int_equal(offcpu_new(&opts, &o), 0);
	assert_int_equal(offcpu_set_note(o, 5, note, 15), -ENOENT);
	switch_out(o, 4, 5, 100 * MS, 0, &r.h);
	assert_int_equal(offcpu_set_note(o, 5, note, sizeof(note)), -E2BIG);
	assert_int_equal(offcpu_set_note(o, 5, note, 15), 0);
	note[0] = 'X';	/* copied */
	char flushed[OFFCPU_NOTE_MAX] = "";
	offcpu_flush(o, 150 * MS, copy_note, flushed);
	assert_string_equal(flushed, "transaction c0");
	assert_int_equal(offcpu_switch_in(o, 5, 200 * MS, &iv), 1);
	assert_int_equal(iv.note_len, 15);
	assert_string_equal((const char *)iv.note, "transaction c0");
	switch_out(o, 4, 5, 300 * MS, 0, &r.h);
	assert_int_equal(offcpu_switch_in(o, 5, 400 * MS, &iv), 1);
	assert_null(iv.note);
	assert_int_equal(iv.note_len, 0);
	offcpu_free(o);
}

static void test_threshold_and_preempted(void **state)
{
	struct offcpu *o;
	struct offcpu_options opts = { .threshold_ns = 100000 };
	struct offcpu_interval iv;
	struct fake_rec r = fake(1);
	(void)state;
	assert_int_equal(offcpu_new(&opts, &o), 0);
	switch_out(o, 10, 12, 1000, 1, &r.h);
	assert_int_equal(offcpu_switch_in(o, 12, 1000 + 99999, &iv), 1);
	assert_int_equal(iv.why, OFFCPU_SHORT);
	assert_null(iv.rec);
	assert_true(iv.preempted);
	assert_int_equal(iv.ns, 99999);
	offcpu_free(o);
}

/* Over max_rate stacks a second, intervals come without their record, counted; the bucket refills. */
static void test_rate_cap(void **state)
{
	struct offcpu *o;
	struct offcpu_options opts = { .threshold_ns = 0, .max_rate = 10 };
	struct offcpu_interval iv;
	struct fake_rec r = fake(1);
	unsigned with = 0;
	uint64_t t = 5000 * MS;
	(void)state;
	assert_int_equal(offcpu_new(&opts, &o), 0);
	for (int i = 0; i < 30; i++, t += MS) {	/* 30 switches in 30 ms */
		switch_out(o, 1, 2, t, 0, &r.h);
		assert_int_equal(offcpu_switch_in(o, 2, t + MS / 2, &iv), 1);
		with += iv.why == OFFCPU_WITH_STACK;
	}
	assert_int_equal(with, 10);
	struct offcpu_stats st;
	offcpu_get_stats(o, &st);
	assert_int_equal(st.capped, 20);
	assert_int_equal(st.capped_ns, 20 * MS / 2);
	t += 1000 * MS;	/* a second later: ten more */
	switch_out(o, 1, 2, t, 0, &r.h);
	assert_int_equal(offcpu_switch_in(o, 2, t + MS, &iv), 1);
	assert_int_equal(iv.why, OFFCPU_WITH_STACK);
	offcpu_free(o);
}

struct flushed {
	unsigned n;
	uint64_t ns;
};

static void on_flush(void *ctx, const struct offcpu_interval *iv)
{
	struct flushed *f = ctx;
	f->n++;
	f->ns += iv->ns;
}

/* A thread still off CPU is counted up to the flush, and from there on at its switch-in. */
static void test_flush_splits(void **state)
{
	struct offcpu *o;
	struct offcpu_options opts = { .threshold_ns = 0 };
	struct offcpu_interval iv;
	struct fake_rec r = fake(1);
	struct flushed f = { 0 };
	(void)state;
	assert_int_equal(offcpu_new(&opts, &o), 0);
	switch_out(o, 1, 2, 100 * MS, 0, &r.h);
	switch_out(o, 1, 3, 100 * MS, 0, &r.h);
	assert_int_equal(offcpu_switch_in(o, 3, 150 * MS, &iv), 1);
	offcpu_flush(o, 400 * MS, on_flush, &f);
	assert_int_equal(f.n, 1);
	assert_int_equal(f.ns, 300 * MS);
	assert_int_equal(offcpu_switch_in(o, 2, 450 * MS, &iv), 1);
	assert_int_equal(iv.ns, 50 * MS);
	switch_out(o, 1, 2, 500 * MS, 0, &r.h);
	offcpu_cancel(o);	/* paused: its switch-in will not come */
	assert_int_equal(offcpu_switch_in(o, 2, 900 * MS, &iv), 0);
	offcpu_forget(o, 2);
	offcpu_free(o);
}

static void test_max_threads(void **state)
{
	struct offcpu *o;
	struct offcpu_options opts = { .max_threads = 2 };
	struct fake_rec r = fake(1);
	(void)state;
	assert_int_equal(offcpu_new(&opts, &o), 0);
	assert_int_equal(switch_out(o, 1, 1, 1, 0, &r.h), 0);
	assert_int_equal(switch_out(o, 1, 2, 1, 0, &r.h), 0);
	assert_int_equal(switch_out(o, 1, 3, 1, 0, &r.h), -E2BIG);
	struct offcpu_stats st;
	offcpu_get_stats(o, &st);
	assert_int_equal(st.untracked, 1);
	offcpu_forget(o, 1);
	assert_int_equal(switch_out(o, 1, 3, 1, 0, &r.h), 0);
	offcpu_free(o);
}

/* Preempted or blocked is the switch record's, which follows the sample; a sample whose record was lost counts
 * as blocked, with its stack. */
static void test_preempted_from_record(void **state)
{
	struct offcpu *o;
	struct offcpu_options opts = { 0 };
	struct offcpu_interval iv;
	struct fake_rec r = fake(7);
	(void)state;
	assert_int_equal(offcpu_new(&opts, &o), 0);
	assert_int_equal(offcpu_sample_out(o, 1, 2, 100 * MS, &r.h), 0);
	assert_int_equal(offcpu_switch_out(o, 1, 2, 100 * MS + 500, 1), 0);
	assert_int_equal(offcpu_switch_in(o, 2, 110 * MS, &iv), 1);
	assert_true(iv.preempted);
	assert_int_equal(iv.ns, 10 * MS);	/* from the sample */
	assert_int_equal(iv.why, OFFCPU_WITH_STACK);
	assert_int_equal(offcpu_sample_out(o, 1, 2, 200 * MS, &r.h), 0);
	assert_int_equal(offcpu_switch_in(o, 2, 230 * MS, &iv), 1);	/* its switch record lost */
	assert_false(iv.preempted);
	assert_int_equal(iv.why, OFFCPU_WITH_STACK);
	assert_int_equal(((const struct fake_rec *)iv.rec)->marker, 7);
	struct offcpu_stats st;
	offcpu_get_stats(o, &st);
	assert_int_equal(st.switch_outs, 2);
	assert_int_equal(st.without_sample, 0);
	offcpu_free(o);
}

/* A switch record without a sample before it (none given, or lost) starts an interval of its own: timed and
 * counted, without a stack, never joined to an older sample already matched. */
static void test_switch_record_alone(void **state)
{
	struct offcpu *o;
	struct offcpu_options opts = { .threshold_ns = MS };
	struct offcpu_interval iv;
	struct fake_rec r = fake(1);
	(void)state;
	assert_int_equal(offcpu_new(&opts, &o), 0);
	assert_int_equal(offcpu_switch_out(o, 1, 2, 100 * MS, 0), 0);
	assert_int_equal(offcpu_switch_in(o, 2, 150 * MS, &iv), 1);
	assert_int_equal(iv.why, OFFCPU_NO_SAMPLE);
	assert_null(iv.rec);
	assert_int_equal(iv.ns, 50 * MS);
	assert_int_equal(switch_out(o, 1, 2, 200 * MS, 0, &r.h), 0);
	assert_int_equal(offcpu_switch_out(o, 1, 2, 300 * MS, 1), 0);	/* its switch-in and next sample lost */
	assert_int_equal(offcpu_switch_in(o, 2, 320 * MS, &iv), 1);
	assert_int_equal(iv.why, OFFCPU_NO_SAMPLE);
	assert_true(iv.preempted);
	assert_int_equal(iv.ns, 20 * MS);
	assert_int_equal(offcpu_switch_out(o, 1, 2, 400 * MS, 0), 0);
	assert_int_equal(offcpu_switch_in(o, 2, 400 * MS + 10, &iv), 1);
	assert_int_equal(iv.why, OFFCPU_SHORT);	/* short is short, with or without a sample */
	struct offcpu_stats st;
	offcpu_get_stats(o, &st);
	assert_int_equal(st.switch_outs, 4);
	assert_int_equal(st.without_sample, 3);
	assert_int_equal(st.no_sample, 2);
	assert_int_equal(st.short_blocks, 1);
	offcpu_free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interval_with_stack),
		cmocka_unit_test(test_note),
		cmocka_unit_test(test_threshold_and_preempted),
		cmocka_unit_test(test_rate_cap),
		cmocka_unit_test(test_flush_splits),
		cmocka_unit_test(test_max_threads),
		cmocka_unit_test(test_preempted_from_record),
		cmocka_unit_test(test_switch_record_alone),
	};
	return cmocka_run_group_tests_name("offcpu", tests, NULL, NULL);
}
