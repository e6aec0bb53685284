/*
 * Unit tests for src/sampler.c on this very process: real perf_event_open, real rings. They skip, saying why,
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
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "src/sampler.h"
#include "tests/lib/testlib.h"

struct seen {
	const struct perf_layout *layout;
	pid_t tid;
	unsigned samples, with_stack, mmaps, bad;
	unsigned with_chain, chain_at_ip;	/* samples with a user frame-pointer chain; whose first entry is the IP */
	int saw_marker_mmap;
};

static int on_record(void *ctx, const struct perf_event_header *h)
{
	struct seen *s = ctx;
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
	struct sampler *s = sampler_new(o, err);
	assert_non_null(s);
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

static void test_bad_options(void **state)
{
	(void)state;
	int err = 0;
	struct sampler_options o = { .event = "cpu-clock", .freq_hz = 99, .stack_size = 100 };
	assert_null(sampler_new(&o, &err));
	assert_int_equal(err, -EINVAL);
	o.stack_size = 65536;
	assert_null(sampler_new(&o, &err));
	o.stack_size = 8192;
	o.event = "no-such-event";
	assert_null(sampler_new(&o, &err));
	assert_int_equal(err, -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fp_chain),
		cmocka_unit_test(test_samples_and_mmap_records),
		cmocka_unit_test(test_hardware_event_falls_back),
		cmocka_unit_test(test_bad_options),
	};
	return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
