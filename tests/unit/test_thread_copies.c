/*
 * Unit tests for src/pipeline/thread_copies.c on this very process: real perf_event_open, real rings. Which reads
 * give a thread its copy, which walks give it back, which samples are kept around its start and after its exit, and that a thread copy's
 * samples come through the sampler's drain with the larger copy. They skip, saying why, where the kernel refuses
 * perf_event_open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "src/base/clock.h"
#include "src/pipeline/thread_copies.h"
#include "tests/lib/testlib.h"

#define SMALL_COPY 4096
#define LARGE_COPY 32768

/* A sampler of this thread with a small copy, enabled; skips where the kernel refuses. */
static struct sampler *open_self(void)
{
	struct sampler_options o = { .event = "cpu-clock", .freq_hz = 1000, .stack_size = SMALL_COPY };
	struct sampler *s;
	char why[512];
	assert_int_equal(sampler_new(&o, &s), 0);
	if (sampler_open_task(s, (pid_t)syscall(SYS_gettid), SAMPLER_INHERIT_NONE, 0) < 0) {
		snprintf(why, sizeof(why), "%s", sampler_error(s));
		sampler_free(s);
		test_skip("the kernel refuses perf_event_open here (%s)", why);
	}
	assert_int_equal(sampler_enable(s), 0);
	return s;
}

static struct thread_copies *new_copies(struct sampler *s)
{
	struct thread_copies *t;
	struct thread_copies_options o = { .sampler = s, .stack_size = LARGE_COPY };
	assert_int_equal(thread_copies_new(&o, &t), 0);
	return t;
}

/* Two reads of tid's stack past the copy that found it changed: what gives a thread its copy. */
static void two_stale_reads(struct thread_copies *t, pid_t tid)
{
	thread_copies_live_read(t, tid, clock_mono_ns(), -ESTALE, false);
	thread_copies_live_read(t, tid, clock_mono_ns(), -ESTALE, false);
}

static void test_size_must_be_larger(void **state)
{
	(void)state;
	struct sampler *s = open_self();
	struct thread_copies *t;
	struct thread_copies_options o = { .sampler = s, .stack_size = SMALL_COPY };
	assert_int_equal(thread_copies_new(&o, &t), -EINVAL);
	o.stack_size = SAMPLER_MAX_STACK + 8;
	assert_int_equal(thread_copies_new(&o, &t), -EINVAL);
	o.stack_size = LARGE_COPY + 4;
	assert_int_equal(thread_copies_new(&o, &t), -EINVAL);
	sampler_free(s);
}

/* Two reads that found the stack changed give the thread its copy; reads that were fine need a share. */
static void test_which_reads_give_a_copy(void **state)
{
	(void)state;
	struct sampler *s = open_self();
	struct thread_copies *t = new_copies(s);
	struct thread_copies_stats st;
	pid_t self = (pid_t)syscall(SYS_gettid);
	unsigned before = sampler_nevents(s);

	/* Fine reads, 1 in 10 samples: not enough. */
	assert_true(thread_copies_live_read(t, self, clock_mono_ns(), 0, false));
	for (int i = 0; i < 200; i++) {
		thread_copies_count_sample(t, self);
		if (i % 10 == 0)
			assert_true(thread_copies_live_read(t, self, clock_mono_ns(), 0, false));
	}
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.opened, 0);
	/* Held samples' stale reads are hostprof's lateness: reads, never changed ones (two changed ones would give
	 * the copy). */
	for (int i = 0; i < 2; i++)
		assert_true(thread_copies_live_read(t, self, clock_mono_ns(), -ESTALE, true));
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.opened, 0);
	/* One stale read is not enough; the second is. */
	assert_true(thread_copies_live_read(t, self, clock_mono_ns(), -ESTALE, false));
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.opened, 0);
	uint64_t before_copy = clock_mono_ns();
	assert_true(thread_copies_live_read(t, self, clock_mono_ns(), -ESTALE, false));
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.opened, 1);
	assert_int_equal(st.threads, 1);
	assert_true(sampler_nevents(s) > before);
	/* Its reads past the larger copy are the fast lane's to count; a read of a sample from before the copy (held
	 * while a table was built, or in a batch drained after the copy opened) is the copy's: it answers it now.
	 * Counted for the lane, the reads of a clang's samples held at its start took it to the lane. */
	assert_false(thread_copies_live_read(t, self, clock_mono_ns(), -ESTALE, false));
	assert_true(thread_copies_live_read(t, self, before_copy, -ESTALE, true));
	assert_true(thread_copies_live_read(t, self, before_copy, -ESTALE, false));
	thread_copies_free(t);
	sampler_free(s);
}

/* A thread gone before its events open is counted, and the next thread still gets its copy. */
static void test_gone_thread(void **state)
{
	(void)state;
	struct sampler *s = open_self();
	struct thread_copies *t = new_copies(s);
	struct thread_copies_stats st;
	pid_t gone = 0x3ffffff0;	/* above any pid_max */
	two_stale_reads(t, gone);
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.gone, 1);
	assert_int_equal(st.opened, 0);
	pid_t self = (pid_t)syscall(SYS_gettid);
	two_stale_reads(t, self);
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.opened, 1);
	thread_copies_free(t);
	sampler_free(s);
}

/* Around its start, one sample of each instant: the sampler's before, the copy's after; after its exit, the
 * sampler's again (a thread that got its tid). */
static void test_kept_by_time(void **state)
{
	(void)state;
	struct sampler *s = open_self();
	struct thread_copies *t = new_copies(s);
	pid_t self = (pid_t)syscall(SYS_gettid), other = self + 1;
	uint64_t before = clock_mono_ns();
	two_stale_reads(t, self);
	uint64_t after = clock_mono_ns();
	assert_false(thread_copies_drops(t, self, before, false));
	assert_true(thread_copies_drops(t, self, before, true));
	assert_true(thread_copies_drops(t, self, after, false));
	assert_false(thread_copies_drops(t, self, after, true));
	assert_false(thread_copies_drops(t, other, after, false));
	assert_true(thread_copies_drops(t, other, after, true));
	thread_copies_on_exit(t, self);
	assert_false(thread_copies_drops(t, self, after + 1, false));
	assert_true(thread_copies_drops(t, self, after + 1, true));
	struct thread_copies_stats st;
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.threads, 0);
	assert_int_equal(st.samples, 1);
	assert_int_equal(st.replaced, 1);
	assert_int_equal(st.early, 3);
	thread_copies_free(t);
	sampler_free(s);
}

/* A window of 1024 samples from the copy that needed more than the sampler's copy for 16 keeps it; one that
 * needed it for 15 gives it back: its events are closed, and its samples are the sampler's again. */
static void test_copy_given_back(void **state)
{
	(void)state;
	pid_t self = (pid_t)syscall(SYS_gettid);
	struct sampler *s = open_self();
	unsigned before = sampler_nevents(s);
	struct thread_copies *t = new_copies(s);
	two_stale_reads(t, self);
	unsigned with_copy = sampler_nevents(s);
	struct thread_copies_stats st;
	assert_true(with_copy > before);
	for (int i = 0; i < 1024; i++)
		thread_copies_copy_walked(t, self, i % 64 == 0);
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.threads, 1);
	assert_int_equal(st.given_back, 0);
	assert_int_equal(sampler_nevents(s), with_copy);
	for (int i = 0; i < 1024; i++)
		thread_copies_copy_walked(t, self, i % 64 == 0 && i > 0);
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.threads, 0);
	assert_int_equal(st.given_back, 1);
	assert_int_equal(sampler_nevents(s), before);
	uint64_t now = clock_mono_ns();
	assert_false(thread_copies_drops(t, self, now, false));
	assert_true(thread_copies_drops(t, self, now, true));
	/* It may get one again, as it got the first. */
	two_stale_reads(t, self);
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.opened, 2);
	assert_int_equal(sampler_nevents(s), with_copy);
	thread_copies_free(t);
	sampler_free(s);
}

/* A thread that says it is there (ready), then waits for a word (go) to exit: two pipes, one each way. */
struct waiter {
	pid_t tid;
	int ready[2], go[2];
};

static void *wait_for_word(void *arg)
{
	struct waiter *w = arg;
	char c;
	w->tid = (pid_t)syscall(SYS_gettid);
	if (write(w->ready[1], "r", 1) != 1 || read(w->go[0], &c, 1) != 1)
		return NULL;
	return NULL;
}

/* Until /proc/TID is gone (at most 5 s: a thread joined is released within milliseconds). */
static void wait_until_gone(pid_t tid)
{
	char path[32];
	snprintf(path, sizeof(path), "/proc/%d", (int)tid);
	for (int i = 0; i < 5000 && access(path, F_OK) == 0; i++)
		usleep(1000);
	assert_int_not_equal(access(path, F_OK), 0);
}

/* A covered thread that exited without an exit record seen (a ring lost it) is forgotten by the next reap, so a
 * later thread under its tid keeps its samples. */
static void test_vanished_thread_forgotten(void **state)
{
	(void)state;
	struct sampler *s = open_self();
	struct thread_copies *t = new_copies(s);
	struct thread_copies_stats st;
	struct waiter w = { 0 };
	pthread_t th;
	char c;
	assert_int_equal(pipe(w.ready), 0);
	assert_int_equal(pipe(w.go), 0);
	assert_int_equal(pthread_create(&th, NULL, wait_for_word, &w), 0);
	assert_int_equal(read(w.ready[0], &c, 1), 1);	/* its tid is set */
	two_stale_reads(t, w.tid);
	uint64_t covered_at = clock_mono_ns();
	assert_true(thread_copies_drops(t, w.tid, covered_at, false));
	thread_copies_reap(t, clock_mono_ns());	/* alive: kept */
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.threads, 1);
	/* A second thread with one stale read counted, not enough for a copy: forgotten too once it vanished (a
	 * daemon would keep such counts for good). */
	struct waiter w2 = { 0 };
	pthread_t th2;
	assert_int_equal(pipe(w2.ready), 0);
	assert_int_equal(pipe(w2.go), 0);
	assert_int_equal(pthread_create(&th2, NULL, wait_for_word, &w2), 0);
	assert_int_equal(read(w2.ready[0], &c, 1), 1);
	assert_true(thread_copies_live_read(t, w2.tid, clock_mono_ns(), -ESTALE, false));
	thread_copies_reap(t, clock_mono_ns() + 2000000000ull);	/* alive: kept */
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.counting, 1);
	assert_int_equal(write(w.go[1], "x", 1), 1);
	assert_int_equal(write(w2.go[1], "x", 1), 1);
	pthread_join(th, NULL);
	pthread_join(th2, NULL);
	/* A joined thread's tid is cleared before the kernel has released it: /proc/TID may stay a moment longer. */
	wait_until_gone(w.tid);
	wait_until_gone(w2.tid);
	thread_copies_reap(t, clock_mono_ns() + 4000000000ull);
	thread_copies_get_stats(t, &st);
	assert_int_equal(st.threads, 0);
	assert_int_equal(st.counting, 0);
	assert_false(thread_copies_drops(t, w.tid, clock_mono_ns(), false));
	for (int i = 0; i < 2; i++) {
		close(w.ready[i]);
		close(w.go[i]);
		close(w2.ready[i]);
		close(w2.go[i]);
	}
	thread_copies_free(t);
	sampler_free(s);
}

struct copies_seen {
	const struct perf_layout *layout;
	pid_t tid;
	unsigned small, large, larger_than_small;
};

static int on_record(void *ctx, const struct perf_event_header *h, const struct record_origin *origin)
{
	struct copies_seen *c = ctx;
	struct perf_sample ps;
	if (h->type != PERF_RECORD_SAMPLE || perf_decode_sample(c->layout, h, &ps) < 0 || (pid_t)ps.tid != c->tid)
		return 0;
	if (origin->thread_copy) {
		c->large++;
		c->larger_than_small += ps.stack_size > SMALL_COPY;
	} else {
		c->small++;
	}
	return 0;
}

/* Deep enough that the copy has more than the small one: a frame of 16 KiB. */
static __attribute__((noipa)) void burn_deep(double seconds)
{
	volatile char pad[16384];
	struct timespec a, b;
	pad[0] = 1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	do {
		for (int i = 0; i < 100000; i++)
			pad[i & 16383] += (char)i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	} while ((double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < seconds);
}

/* Both events sample the thread; the copy's records come from the thread-copy rings, with the larger copy. */
static void test_copy_samples_come_through_the_drain(void **state)
{
	(void)state;
	struct sampler *s = open_self();
	struct thread_copies *t = new_copies(s);
	pid_t self = (pid_t)syscall(SYS_gettid);
	struct copies_seen c = { .layout = sampler_layout(s), .tid = self };
	two_stale_reads(t, self);
	burn_deep(0.3);
	assert_int_equal(sampler_disable(s), 0);
	while (sampler_read(s, 10, on_record, &c) > 0)
		;
	fprintf(stderr, "0.3 s of CPU: %u samples with the small copy, %u with the thread's (%u of them past %d "
		"bytes)\n", c.small, c.large, c.larger_than_small, SMALL_COPY);
	assert_true(c.small >= 100 && c.large >= 100);
	assert_true(c.large * 10 >= c.small * 7 && c.small * 10 >= c.large * 7);
	assert_true(c.larger_than_small * 10 >= c.large * 9);
	thread_copies_free(t);
	sampler_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_must_be_larger),
		cmocka_unit_test(test_which_reads_give_a_copy),
		cmocka_unit_test(test_gone_thread),
		cmocka_unit_test(test_kept_by_time),
		cmocka_unit_test(test_copy_given_back),
		cmocka_unit_test(test_vanished_thread_forgotten),
		cmocka_unit_test(test_copy_samples_come_through_the_drain),
	};
	return cmocka_run_group_tests_name("thread copies", tests, NULL, NULL);
}
