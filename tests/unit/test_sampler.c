/*
 * Unit tests for src/sampling/sampler.c on this very process: real perf_event_open, real rings. They skip, saying why,
 * where the kernel refuses perf_event_open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "src/sampling/sampler.h"
#include "tests/lib/testlib.h"

struct seen {
	const struct perf_layout *layout;
	pid_t tid;
	unsigned samples, with_stack, mmaps, bad;
	unsigned with_chain, chain_at_ip;	/* samples with a user frame-pointer chain; whose first entry is the IP */
	int saw_marker_mmap;
};

static int on_record(void *ctx, const struct perf_event_header *h, const struct record_origin *origin)
{
	struct seen *s = ctx;
	(void)origin;	/* no off-CPU events here */
	if (h->type == PERF_RECORD_SAMPLE) {
		struct perf_sample ps;
		if (perf_decode_sample(s->layout, h, &ps) < 0) {
			s->bad++;
			return 0;
		}
		if ((pid_t)ps.tid != s->tid)
			return 0;
		s->samples++;
		if (ps.regs_abi && ps.stack_size > 0 && ps.regs[UNWIND_REG_SP] && ps.regs[UNWIND_REG_IP])
			s->with_stack++;
		const uint64_t *chain;
		size_t n;
		perf_callchain_user(&ps, &chain, &n);
		s->with_chain += n > 0;
		s->chain_at_ip += n > 0 && chain[0] == ps.regs[UNWIND_REG_IP];
	} else if (h->type == PERF_RECORD_MMAP2) {
		struct perf_mmap2 m;
		if (perf_decode_mmap2(h, &m) == 0) {
			s->mmaps++;
			if (strstr(m.filename, "hostprof-sampler-marker"))
				s->saw_marker_mmap = 1;
		}
	}
	return 0;
}

static void burn_cpu(double seconds)
{
	struct timespec a, b;
	volatile unsigned long x = 0;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i * i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	} while ((double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < seconds);
}

/* A sampler of this thread under options o; skips the test where the kernel refuses. */
static struct sampler *open_self_with(const struct sampler_options *o, int *err)
{
	char why[512];
	struct sampler *s;
	assert_int_equal(sampler_new(o, &s), 0);
	*err = sampler_open_task(s, (pid_t)syscall(SYS_gettid), 1, 0);
	if (*err < 0) {
		snprintf(why, sizeof(why), "%s", sampler_error(s));
		sampler_free(s);
		test_skip("the kernel refuses perf_event_open here (%s)", why);
	}
	return s;
}

static struct sampler *open_self(const char *event, int *err)
{
	struct sampler_options o = { .event = event, .freq_hz = 1000, .stack_size = 8192, .kernel = 1 };
	return open_self_with(&o, err);
}

/* Samples of this thread burning CPU for 0.2 s under options o; skips the test where the kernel refuses. */
static int sample_self(const struct sampler_options *o, struct seen *seen)
{
	int err;
	struct sampler *s = open_self_with(o, &err);
	*seen = (struct seen){ .layout = sampler_layout(s), .tid = (pid_t)syscall(SYS_gettid) };
	assert_int_equal(sampler_enable(s), 0);
	burn_cpu(0.2);
	assert_int_equal(sampler_disable(s), 0);
	while (sampler_read(s, 10, on_record, seen) > 0)
		;
	sampler_free(s);
	return 0;
}

/* fp_chain: every sample carries the kernel's user frame-pointer chain, from the sampled IP on; else none. */
static void test_fp_chain(void **state)
{
	(void)state;
	struct seen with, without;
	struct sampler_options o = { .event = "cpu-clock", .freq_hz = 1000, .stack_size = 8192, .fp_chain = 1 };
	assert_int_equal(sample_self(&o, &with), 0);
	o.fp_chain = 0;
	assert_int_equal(sample_self(&o, &without), 0);
	fprintf(stderr, "fp chain: %u of %u samples with one (%u starting at the IP); without: %u of %u\n",
		with.with_chain, with.samples, with.chain_at_ip, without.with_chain, without.samples);
	assert_true(with.samples >= 100 && without.samples >= 100);
	assert_int_equal(with.bad + without.bad, 0);
	assert_int_equal(with.with_chain, with.samples);
	assert_int_equal(with.chain_at_ip, with.samples);
	assert_int_equal(without.with_chain, 0);
}

static void test_samples_and_mmap_records(void **state)
{
	(void)state;
	int err;
	struct sampler *s = open_self("cpu-clock", &err);
	struct seen seen = { .layout = sampler_layout(s), .tid = (pid_t)syscall(SYS_gettid) };
	assert_int_equal(sampler_enable(s), 0);
	burn_cpu(0.3);

	/* An executable mapping of a file must show up as MMAP2. */
	char path[] = "/tmp/hostprof-sampler-marker-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	void *m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);

	assert_int_equal(sampler_disable(s), 0);
	while (sampler_read(s, 10, on_record, &seen) > 0)
		;
	munmap(m, 4096);
	close(fd);
	unlink(path);
	fprintf(stderr, "sampler: %u samples (%u with stack) in 0.3 s CPU, %u mmap records\n", seen.samples,
		seen.with_stack, seen.mmaps);
	assert_int_equal(seen.bad, 0);
	assert_true(seen.samples >= 150); /* 1000 Hz over 0.3 s of CPU, with slack for a loaded machine */
	assert_true(seen.with_stack >= seen.samples * 9 / 10);
	assert_true(seen.saw_marker_mmap);
	sampler_free(s);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Batched by default: a few samples do not wake the reader, a ring half full does. Low latency: one sample
 * does. Ring of 64 pages (256 KiB) and samples of ~9 KiB (8 KiB stacks): half full is ~14 samples.
 */
static void test_wakeups(void **state)
{
	(void)state;
	for (int low_latency = 0; low_latency <= 1; low_latency++) {
		struct sampler_options o = { .event = "cpu-clock", .freq_hz = 1000, .stack_size = 8192,
					     .ring_pages = 64, .low_latency = low_latency };
		int err;
		struct sampler *s = open_self_with(&o, &err);
		struct seen seen = { .layout = sampler_layout(s), .tid = (pid_t)syscall(SYS_gettid) };
		assert_int_equal(sampler_enable(s), 0);
		burn_cpu(0.004);
		int woke = sampler_wait(s, 0, NULL, 0);
		assert_int_equal(woke, low_latency); /* ~4 samples: only a low-latency ring is ready */
		sampler_drain(s, on_record, &seen);
		burn_cpu(0.05);
		assert_int_equal(sampler_wait(s, 0, NULL, 0), 1); /* ~50 samples: past half the ring */
		assert_int_equal(sampler_disable(s), 0);
		sampler_drain(s, on_record, &seen);
		assert_true(seen.samples >= 20);
		sampler_free(s);
	}
}

/* The caller's descriptors wake the wait too, with their revents set. */
static void test_extra_descriptors(void **state)
{
	(void)state;
	int err;
	struct sampler *s = open_self("cpu-clock", &err);
	struct pollfd extra[2] = { { .fd = eventfd(0, EFD_CLOEXEC), .events = POLLIN },
				   { .fd = eventfd(0, EFD_CLOEXEC), .events = POLLIN } };
	uint64_t one = 1, t0 = mono_ms();
	assert_int_equal(write(extra[1].fd, &one, sizeof(one)), sizeof(one));
	assert_int_equal(sampler_wait(s, 5000, extra, 2), 0);
	assert_true(mono_ms() - t0 < 2000);
	assert_int_equal(extra[0].revents, 0);
	assert_true(extra[1].revents & POLLIN);
	close(extra[0].fd);
	close(extra[1].fd);
	sampler_free(s);
}

struct runner {
	volatile pid_t tid;
	volatile int go;
};

static void *burn_and_exit(void *arg)
{
	struct runner *r = arg;
	r->tid = (pid_t)syscall(SYS_gettid);
	while (!r->go)
		;
	burn_cpu(0.05);
	return NULL;
}

/*
 * A sampled thread that exited leaves its events hung up (poll() says POLLHUP at once, for ever): the rings
 * are held by events of their own, so a wait after the exit still sleeps for its timeout rather than spin.
 */
static void test_no_spin_after_exit(void **state)
{
	(void)state;
	struct sampler_options o = { .event = "cpu-clock", .freq_hz = 1000, .stack_size = 8192, .samples_only = 1 };
	int err;
	struct sampler *s;
	assert_int_equal(sampler_new(&o, &s), 0);
	struct runner r = { 0, 0 };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, burn_and_exit, &r), 0);
	while (!r.tid)
		;
	if ((err = sampler_open_task(s, r.tid, SAMPLER_INHERIT_THREADS, 0)) < 0) {
		char why[512];
		snprintf(why, sizeof(why), "%s", sampler_error(s));
		r.go = 1;
		pthread_join(t, NULL);
		sampler_free(s);
		test_skip("the kernel refuses perf_event_open here (%s)", why);
	}
	assert_int_equal(sampler_enable(s), 0);
	r.go = 1;
	pthread_join(t, NULL);
	struct seen seen = { .layout = sampler_layout(s), .tid = r.tid };
	sampler_drain(s, on_record, &seen);
	assert_true(seen.samples >= 10);
	assert_int_equal(seen.mmaps, 0); /* samples only */
	uint64_t t0 = mono_ms();
	for (int i = 0; i < 3; i++)
		assert_int_equal(sampler_wait(s, 50, NULL, 0), 0);
	assert_true(mono_ms() - t0 >= 140);
	sampler_free(s);
}

/* Records in delivery order: their times, and the CPUs samples came from. */
struct order {
	const struct perf_layout *layout;
	uint64_t last, records, out_of_order;
	unsigned cpus_seen;	/* bit per CPU < 32 */
};

static int on_ordered(void *ctx, const struct perf_event_header *h, const struct record_origin *origin)
{
	struct order *o = ctx;
	(void)origin;	/* both kinds of ring, merged */
	int off = perf_record_time_offset(o->layout, h->type, h->size);
	if (off < 0)
		return 0;
	uint64_t t;
	memcpy(&t, (const uint8_t *)h + off, sizeof(t));
	if (h->type == PERF_RECORD_SAMPLE) {
		struct perf_sample ps;
		assert_int_equal(perf_decode_sample(o->layout, h, &ps), 0);
		assert_int_equal(ps.time, t);	/* the offset finds the decoder's time */
		if (ps.cpu < 32)
			o->cpus_seen |= 1u << ps.cpu;
	}
	o->out_of_order += t < o->last;
	o->last = t > o->last ? t : o->last;
	o->records++;
	return 0;
}

static void *burn_on_cpu(void *arg)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((int)(intptr_t)arg, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	burn_cpu(0.15);
	return NULL;
}

/*
 * A drain delivers the records of every CPU's ring merged in time order: two threads burning on two CPUs at
 * once fill two rings with interleaved times, which ring after ring would deliver out of order.
 */
static void test_drain_in_time_order(void **state)
{
	(void)state;
	int err;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		test_skip("needs a machine with two CPUs: one ring is always in order");
	struct sampler_options opt = { .event = "cpu-clock", .freq_hz = 1000, .stack_size = 1024 };
	struct sampler *s = open_self_with(&opt, &err);
	struct order o = { .layout = sampler_layout(s) };
	pthread_t t[2];
	assert_int_equal(sampler_enable(s), 0);
	for (intptr_t i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, burn_on_cpu, (void *)i), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(sampler_disable(s), 0);
	sampler_drain(s, on_ordered, &o);
	assert_true(o.records >= 100);
	assert_int_equal(o.cpus_seen & 3, 3);
	assert_int_equal(o.out_of_order, 0);
	sampler_free(s);
}

static void test_hardware_event_falls_back(void **state)
{
	(void)state;
	int err;
	struct sampler *s = open_self("cycles", &err);
	/* Either the machine has a cycles counter, or hostprof explains the fallback to cpu-clock. */
	if (strcmp(sampler_event(s), "cycles") != 0) {
		assert_string_equal(sampler_event(s), "cpu-clock");
		assert_non_null(strstr(sampler_note(s), "not supported"));
		fprintf(stderr, "fallback note: %s\n", sampler_note(s));
	}
	sampler_free(s);
}

/* Records of a flood: CPU and off-CPU samples, and loss records that reached the callback. */
struct flood {
	const struct perf_layout *layout;
	unsigned cpu_samples, off_cpu_samples, lost_records;
};

static int on_flood(void *ctx, const struct perf_event_header *h, const struct record_origin *origin)
{
	struct flood *f = ctx;
	struct perf_sample ps;
	if (h->type == PERF_RECORD_LOST || h->type == PERF_RECORD_LOST_SAMPLES)
		f->lost_records++;
	else if (h->type == PERF_RECORD_SAMPLE && perf_decode_sample(f->layout, h, &ps) == 0)
		origin->kind == RECORD_OFF_CPU ? f->off_cpu_samples++ : f->cpu_samples++;
	return 0;
}

/* Switch-outs of this thread as its off-CPU ring delivers them: samples, then their switch-out records. */
struct switches {
	const struct perf_layout *layout;
	pid_t tid;
	unsigned samples, in_syscall, records_out, preempted, records_in, sample_then_record, cpu_ring_switches;
	int last_was_sample;
};

static int on_switch_rec(void *ctx, const struct perf_event_header *h, const struct record_origin *origin)
{
	struct switches *w = ctx;
	struct perf_sample ps;
	struct perf_switch sw;
	if (h->type == PERF_RECORD_SAMPLE && origin->kind == RECORD_OFF_CPU &&
	    perf_decode_sample(w->layout, h, &ps) == 0 && (pid_t)ps.tid == w->tid) {
		w->samples++;
		/* The user registers are the thread's own as it left the CPU: in nanosleep, right after the
		 * syscall instruction (0f 05) of this very process, whose code is readable here. */
		const uint8_t *pc = (const uint8_t *)(uintptr_t)ps.regs[UNWIND_REG_IP];
		w->in_syscall += ps.stack_size > 0 && pc && pc[-2] == 0x0f && pc[-1] == 0x05;
		w->last_was_sample = 1;
		return 0;
	}
	if ((h->type == PERF_RECORD_SWITCH || h->type == PERF_RECORD_SWITCH_CPU_WIDE) &&
	    perf_decode_switch(w->layout, h, &sw) == 0 && (pid_t)sw.tid == w->tid) {
		w->cpu_ring_switches += origin->kind != RECORD_OFF_CPU;
		if (sw.out) {
			w->records_out++;
			w->preempted += sw.preempted;
			w->sample_then_record += w->last_was_sample;
		} else {
			w->records_in++;
		}
	}
	w->last_was_sample = 0;
	return 0;
}

/*
 * Off-CPU events: every switch-out of this thread comes as a sample in the off-CPU ring, with the thread's own
 * user registers and stack (it sleeps: its IP follows a syscall instruction), followed by its switch-out record
 * (blocked, not preempted); its switch-ins come as records. None of them in the CPU rings.
 */
static void test_off_cpu_switch_out_samples(void **state)
{
	(void)state;
	struct sampler_options o = { .event = "cpu-clock", .freq_hz = 100, .stack_size = 4096, .kernel = 1,
				     .off_cpu = 1, .off_cpu_stack_size = 2048 };
	int err;
	struct sampler *s = open_self_with(&o, &err);
	if (!sampler_off_cpu_samples(s))
		test_skip("the kernel refuses perf_event_open of kernel-mode samples here (%s)", sampler_note(s));
	struct switches w = { .layout = sampler_layout(s), .tid = (pid_t)syscall(SYS_gettid) };
	assert_int_equal(sampler_enable(s), 0);
	for (int i = 0; i < 20; i++)
		usleep(2000);
	assert_int_equal(sampler_disable(s), 0);
	sampler_drain(s, on_switch_rec, &w);
	sampler_free(s);
	fprintf(stderr, "off-CPU: %u switch-out samples (%u in a system call), %u switch-out records (%u preempted, "
		"%u right after their sample), %u switch-ins\n", w.samples, w.in_syscall, w.records_out, w.preempted,
		w.sample_then_record, w.records_in);
	assert_true(w.samples >= 20);			/* each sleep blocks at least once */
	assert_true(w.in_syscall * 10 >= w.samples * 9);	/* the others: preempted on the way */
	assert_int_equal(w.records_out, w.samples);
	assert_int_equal(w.sample_then_record, w.records_out);
	assert_true(w.preempted * 10 <= w.records_out);	/* sleeps block; preemption is rare */
	assert_true(w.records_in >= w.records_out - 1);	/* the last switch-in may come after the disable */
	assert_int_equal(w.cpu_ring_switches, 0);
}

static void *echo_bytes(void *arg)
{
	int *fds = arg;
	char c;
	while (read(fds[0], &c, 1) == 1 && c)
		if (write(fds[3], &c, 1) != 1)
			break;
	return NULL;
}

/* n round trips between this thread and another through two pipes: 4 × n switches. */
static void ping_pong(unsigned n)
{
	int fds[4];
	pthread_t t;
	char c = 1;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pipe(fds + 2), 0);
	assert_int_equal(pthread_create(&t, NULL, echo_bytes, fds), 0);
	for (unsigned i = 0; i < n; i++)
		if (write(fds[1], &c, 1) != 1 || read(fds[2], &c, 1) != 1)
			break;
	c = 0;
	assert_int_equal(write(fds[1], &c, 1), 1);
	pthread_join(t, NULL);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
}

/*
 * A flood of switches into a tiny off-CPU ring (4 pages: a sample or two) while no one reads it: off-CPU samples
 * are lost, counted by the sampler, and no loss record reaches the caller; the CPU samples taken meanwhile, in
 * their own ring, are all there.
 */
static void test_off_cpu_flood_spares_cpu_samples(void **state)
{
	(void)state;
	struct sampler_options o = { .event = "cpu-clock", .freq_hz = 1000, .stack_size = 4096, .kernel = 1,
				     .off_cpu = 1, .off_cpu_stack_size = 2048, .off_cpu_ring_pages = 4 };
	int err;
	struct sampler *s = open_self_with(&o, &err);
	struct flood f = { .layout = sampler_layout(s) };
	assert_int_equal(sampler_enable(s), 0);
	ping_pong(2000);
	burn_cpu(0.1);
	/* The kernel writes what it lost when it next has room for a record: drained, a few switches more. Each
	 * read that waits switches this thread out, which makes one more off-CPU sample: the drains are bounded. */
	for (int i = 0; i < 20 && sampler_read(s, 10, on_flood, &f) > 0; i++)
		;
	ping_pong(10);
	assert_int_equal(sampler_disable(s), 0);
	for (int i = 0; i < 20 && sampler_read(s, 10, on_flood, &f) > 0; i++)
		;
	fprintf(stderr, "flood: %u CPU samples, %u off-CPU samples, %llu off-CPU samples lost, %u loss records seen\n",
		f.cpu_samples, f.off_cpu_samples, (unsigned long long)sampler_off_cpu_lost(s), f.lost_records);
	assert_true(sampler_off_cpu_lost(s) > 1000);
	assert_true(f.off_cpu_samples > 0);
	assert_int_equal(f.lost_records, 0);
	assert_true(f.cpu_samples >= 50);	/* 0.1 s at 1000 Hz, on a loaded machine */
	sampler_free(s);
}

static void test_bad_options(void **state)
{
	(void)state;
	struct sampler *s = NULL;
	struct sampler_options o = { .event = "cpu-clock", .freq_hz = 99, .stack_size = 100 };
	assert_int_equal(sampler_new(&o, &s), -EINVAL);
	o.stack_size = 65536;
	assert_int_equal(sampler_new(&o, &s), -EINVAL);
	o.stack_size = 8192;
	o.off_cpu_stack_size = 100;
	assert_int_equal(sampler_new(&o, &s), -EINVAL);
	o.off_cpu_stack_size = 0;
	o.event = "no-such-event";
	assert_int_equal(sampler_new(&o, &s), -ENOENT);
	assert_null(s);	/* *out is set only on success */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fp_chain),
		cmocka_unit_test(test_samples_and_mmap_records),
		cmocka_unit_test(test_hardware_event_falls_back),
		cmocka_unit_test(test_wakeups),
		cmocka_unit_test(test_extra_descriptors),
		cmocka_unit_test(test_no_spin_after_exit),
		cmocka_unit_test(test_drain_in_time_order),
		cmocka_unit_test(test_off_cpu_flood_spares_cpu_samples),
		cmocka_unit_test(test_off_cpu_switch_out_samples),
		cmocka_unit_test(test_bad_options),
	};
	return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
