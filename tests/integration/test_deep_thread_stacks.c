/*
 * Integration test of thread copies (src/pipeline/thread_copies.h): a thread whose stack runs past the sampler's
 * 16 KiB copy and changes there gets events of its own that copy 64 KiB, read in batches, and each of its samples
 * is counted once. The fixture (deep_changing) has one such thread beside a shallow one, each driven by its own
 * CPU time. The oracle is perf record --call-graph dwarf,65528 on the same fixture in the same run, which copies
 * 64 KiB with every sample of every thread: hostprof must take as large a share of samples whole to the deep
 * thread's entry, without the fast lane (no wakeup per sample), giving a copy to the deep thread only, with the
 * number of samples the fixture's CPU time makes; a thread whose stack ran deep for a while only gives its copy
 * back, with no sample lost or counted twice. Batches alone (--thread-stack-size 0 --fast-lane apm) lose the
 * deep thread's stacks on this fixture: that run shows the fixture tests what it should. Over a daemon's life, the
 * copies' events go with their threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1	/* hostprof too: ten times slower, it falls behind a first run's samples */
#else
#define UNDER_ASAN 0
#endif

/* What record's summary says of a run. */
struct run_summary {
	unsigned long long samples, copied_threads, given_back, copy_samples;
	double command_cpu_s, complete;
	bool fast_lane;
};


static struct run_summary read_summary(const char *err_path)
{
	struct run_summary r = { 0 };
	char line[2048];
	const char *cpu;
	FILE *f = fopen(err_path, "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, " samples in ") && (cpu = strstr(line, "command CPU "))) {
			assert_int_equal(sscanf(line, "hostprof: %llu samples in", &r.samples), 1);
			assert_int_equal(sscanf(cpu, "command CPU %lf s", &r.command_cpu_s), 1);
			r.complete = test_summary_complete(line);
		}
		const char *taken = strstr(line, " gone before), ");
		if (sscanf(line, "hostprof: thread copies: %llu threads given", &r.copied_threads) == 1 && taken)
			assert_int_equal(sscanf(taken, " gone before), %llu samples taken", &r.copy_samples), 1);
		const char *back = strstr(line, " events closed as their threads exited, ");
		if (back && strncmp(line, "hostprof: thread copies:", 24) == 0)
			assert_int_equal(sscanf(back, " events closed as their threads exited, %llu copies given back",
						&r.given_back), 1);
		r.fast_lane |= strncmp(line, "hostprof: fast lane:", 20) == 0;
	}
	fclose(f);
	return r;
}

/* Of the deep thread's samples (those in either recursion), the share (0..100) whole to its entry. */
static double deep_whole_share(const struct profile *p, uint64_t *deep_out)
{
	const char *const small[] = { "deep_worker", "descend_small" };
	const char *const large[] = { "deep_worker", "descend_large" };
	uint64_t deep = test_samples_with_function(p, "descend_small") + test_samples_with_function(p, "descend_large");
	*deep_out = deep;
	return test_share(test_samples_with_chain(p, small, 2) + test_samples_with_chain(p, large, 2), deep);
}

static struct run_summary record(const struct test_workdir *w, const char *flags, const char *fixture,
				 const char *args, double *whole, uint64_t *deep, uint64_t *total)
{
	assert_int_equal(test_run("\"$HOSTPROF\" record -v %s -o %s -- %s %s 2> %s/record.err", flags, w->out, fixture,
				  args, w->dir), 0);
	char err[600];
	snprintf(err, sizeof(err), "%s/record.err", w->dir);
	test_run("grep -E 'samples in|thread copies|fast lane|walks that ran past' %s >&2", err);
	struct profile *p = test_read_profile(w->out);
	*whole = deep_whole_share(p, deep);
	*total = test_total_samples(p);
	const char *const roots[] = { "deep_worker" };
	double of_all = test_share(test_samples_complete_to(p, roots, 1), *total);
	profile_free(p);
	fprintf(stderr, "%s: %.1f%% of the deep thread's %llu samples whole to deep_worker (%.1f%% of all %llu)\n",
		flags[0] ? flags : "default", *whole, (unsigned long long)*deep, of_all, (unsigned long long)*total);
	return read_summary(err);
}

/* Samples per second of the fixture's CPU, as recorded: each sample once makes 999 (both of a thread's events
 * kept would make ~1.5 times as many, none of either far fewer). */
static void assert_each_sample_once(const struct run_summary *r)
{
	double per_cpu_s = (double)r->samples / r->command_cpu_s;
	fprintf(stderr, "%llu samples for %.3f s of the fixture's CPU: %.0f a second at 999 Hz\n", r->samples,
		r->command_cpu_s, per_cpu_s);
	assert_true(per_cpu_s > 999 * 0.8 && per_cpu_s < 999 * 1.2);
}

/* The share of all samples whole to deep_worker in w's profile is perf's with a 64 KiB copy of every sample (the
 * same fixture and arguments, run now), or more, less 2 points. */
static void assert_as_whole_as_perf(const struct test_workdir *w, const char *fixture, const char *args)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "%s %s", fixture, args);
	struct test_perf_query q = { .cmd = cmd, .callgraph = "dwarf,65528", .symbol = "deep_worker" };
	double perf = test_perf_children_share(w->dir, &q);
	const char *const roots[] = { "deep_worker" };
	struct profile *p = test_read_profile(w->out);
	double ours = test_share(test_samples_complete_to(p, roots, 1), test_total_samples(p));
	profile_free(p);
	fprintf(stderr, "deep_worker whole: hostprof %.1f%% of all samples, perf --call-graph dwarf,65528 %.1f%%\n",
		ours, perf);
	if (perf >= 0)
		assert_true(ours >= perf - 2.0);
}

static void test_deep_thread_gets_its_copy(void **state)
{
	struct test_workdir *w = *state;
	char fixture[256];
	double whole, batch_whole;
	uint64_t deep, total, batch_deep, batch_total;
	test_require_perf();
	test_fixture_path("deep_changing", fixture, sizeof(fixture));

	struct run_summary r = record(w, "", fixture, "2", &whole, &deep, &total);
	/* The deep thread alone got a copy; no wakeup per sample; each sample once: the fixture's CPU time at 999 Hz
	 * (the thread's samples from both its events would make ~1.5 times as many). */
	assert_int_equal(r.copied_threads, 1);
	assert_false(r.fast_lane);
	assert_each_sample_once(&r);
	assert_int_equal(total, r.samples);

	/* The oracle: perf with the same 64 KiB copy for every sample. */
	assert_as_whole_as_perf(w, fixture, "2");

	/* Batches alone read the stack past the 16 KiB copy tens of milliseconds late, and find it changed. */
	record(w, "--thread-stack-size 0 --fast-lane apm", fixture, "2", &batch_whole, &batch_deep, &batch_total);
	assert_true(batch_deep * 100 >= deep * 80 && batch_whole < 90.0 && whole >= 97.0);
}

/*
 * A thread whose stack ran deep only for a while gives its copy back: the fixture's deep thread recurses in its
 * first second of CPU, then spins in one frame for two more. Once a window of its samples (~1 s) needed no more
 * than the sampler's copy, its copy goes; no sample is lost or counted twice across that, and its stacks are as
 * whole as perf's with a 64 KiB copy of every sample.
 */
static void test_copy_given_back(void **state)
{
	struct test_workdir *w = *state;
	char fixture[256];
	double whole;
	uint64_t deep, total;
	test_require_perf();
	test_fixture_path("deep_changing", fixture, sizeof(fixture));

	struct run_summary r = record(w, "", fixture, "3 1", &whole, &deep, &total);
	assert_int_equal(r.copied_threads, 1);
	assert_int_equal(r.given_back, 1);
	assert_false(r.fast_lane);
	assert_each_sample_once(&r);
	assert_int_equal(total, r.samples);

	assert_as_whole_as_perf(w, fixture, "3 1");
}

/*
 * Over a daemon's life, thread copies go with their threads: a daemon sampling the whole machine at 999 Hz sees
 * runs of the fixture, whose deep thread each gets a copy; once they exited, the daemon holds as many perf-event
 * descriptors as before them (the thread-copy rings, made by a first run, stay), and its log counted the copies.
 */
static void test_daemon_copies_go_with_their_threads(void **state)
{
	struct test_workdir *w = *state;
	char out[600], log[600], fixture[256];
	test_require_root("the daemon samples every CPU");
	test_fixture_path("deep_changing", fixture, sizeof(fixture));
	snprintf(out, sizeof(out), "%s/profiles", w->dir);
	snprintf(log, sizeof(log), "%s/daemon.log", w->dir);
	char *const dargv[] = { (char *)test_hostprof(), "daemon", "-o", out, "-F", "999", "--interval", "1", NULL };
	pid_t d = test_spawn(dargv, log);
	sleep(2);	/* started, its first profile written */
	assert_int_equal(test_run("%s 1.5", fixture), 0);	/* makes the thread-copy rings */
	unsigned before = test_settled_perf_event_fds(d);
	for (int i = 0; i < 3; i++)
		assert_int_equal(test_run("%s 1.5", fixture), 0);
	unsigned after = test_perf_event_fds(d);
	for (int i = 0; i < 10 && after != before; i++) {
		sleep(1);
		after = test_perf_event_fds(d);
	}
	kill(d, SIGTERM);
	int status;
	assert_int_equal(waitpid(d, &status, 0), d);
	test_run("grep 'thread copies' %s | tail -n 3 >&2", log);
	long long given = test_last_number_in_log(log, ".*thread copies: .*, \\([0-9]*\\) given so far.*");
	fprintf(stderr, "thread copies: the daemon held %u perf-event descriptors before 3 runs of deep_changing, %u "
		"after them; %lld copies given\n", before, after, given);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(given >= 2);
	assert_int_equal(after, before);
}

/*
 * A first run, nothing cached: clang++ compiling a template-heavy file (tests/fixtures/toolchains/template_heavy.py)
 * spends its first half second of samples held while libLLVM's and libclang-cpp's tables are built. Its main
 * thread runs deeper than the sampler's copy: its held samples give it its own copy at once (how deep they run
 * told by where the process stack starts), not once they are walked, and their reads send it to no fast lane.
 * Its stacks are then as whole as on a run of the same compile with every table cached, the oracle here: the first
 * run was 5-7 points below (92-94% against 98.6%), and before that in the fast lane at 56-62 us a sample. Under a
 * sanitizer, whose table builds take seconds, hostprof falls behind a first run (samples lost, more walked
 * without their table than its held samples' room takes): there only the copy's share is checked.
 */
static struct run_summary record_clang(const struct test_workdir *w, const char *flags)
{
	char err[600];
	snprintf(err, sizeof(err), "%s/clang.err", w->dir);
	assert_int_equal(test_run("\"$HOSTPROF\" record -v %s -o %s -- clang++ -O2 -c %s/heavy.cpp -o %s/heavy.o 2> %s",
				  flags, w->out, w->dir, w->dir, err), 0);
	test_run("grep -E 'samples in|thread copies|fast lane|held' %s >&2", err);
	return read_summary(err);
}

static void test_first_run_deep_main_thread(void **state)
{
	struct test_workdir *w = *state;
	test_require_perf();
	test_require_tool("command -v clang++ && command -v python3", "clang++ and python3");
	assert_int_equal(test_run("python3 tests/fixtures/toolchains/template_heavy.py 1 > %s/heavy.cpp", w->dir), 0);
	struct run_summary cold = record_clang(w, "--no-cache");
	record_clang(w, "");	/* its tables and names cached, if they were not */
	struct run_summary warm = record_clang(w, "");
	fprintf(stderr, "first run: %.1f%% whole, %llu of %llu samples from its thread copy; cached: %.1f%% whole\n",
		cold.complete, cold.copy_samples, cold.samples, warm.complete);
	assert_false(cold.fast_lane);
	assert_true(cold.copied_threads >= 1);
	assert_true(cold.copy_samples * 100 >= cold.samples * 93);	/* 85-92% when the copy came once walked */
	assert_true(warm.complete > 90.0);
	if (!UNDER_ASAN)
		assert_true(cold.complete >= warm.complete - 2.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_deep_thread_gets_its_copy, test_workdir_setup,
						test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_copy_given_back, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_first_run_deep_main_thread, test_workdir_setup,
						test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_daemon_copies_go_with_their_threads, test_workdir_setup,
						test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("deep thread stacks (integration)", tests, NULL, NULL);
}
