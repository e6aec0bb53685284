/*
 * Integration tests of off-CPU profiling (`record --off-cpu`, `report --wall`): the offcpu_split fixture's
 * threads split their wall time between running and waiting in known ways, and time themselves as a stopwatch
 * would; each split hostprof's wall view shows must be within 5 percentage points of the stopwatch's. The
 * off-CPU stacks must show where each thread waited, complete to its root, and a preempted thread must show as
 * preempted, not blocked. They skip, saying why, only where the kernel refuses perf_event_open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

#define TOLERANCE 5.0	/* percentage points */

/* A thread's row of the wall view: its shares on CPU, blocked and preempted. */
struct wall_row {
	double wall_ms, cpu, blocked, preempted;
};

/* A thread's stopwatch line from the fixture: wall time, time inside the waiting call, CPU time (ns). */
struct stopwatch {
	double wall, waited, cpu;
};

static void require_off_cpu(const struct test_workdir *f)
{
	test_require_perf();
	if (test_run("\"$HOSTPROF\" record -q --off-cpu -o %s/probe.msgpack -- true 2>%s/probe.err", f->dir,
		     f->dir) != 0) {
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "cat %s/probe.err >&2", f->dir);
		test_run("%s", cmd);
		test_skip("the kernel refuses perf_event_open of the off-CPU events here (see the message above)");
	}
}

/* Record the fixture in mode, its stopwatch lines into <dir>/stopwatch, the wall view into <dir>/wall. */
static void record_mode(const struct test_workdir *f, const char *mode)
{
	char fixture[256];
	assert_int_equal(test_run("\"$HOSTPROF\" record -q --off-cpu -o %s -- %s %s 2>%s/stopwatch", f->out,
				  test_fixture_path("offcpu_split", fixture, sizeof(fixture)), mode, f->dir), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" report --wall %s >%s/wall && cat %s/stopwatch %s/wall >&2", f->out,
				  f->dir, f->dir, f->dir), 0);
}

static struct wall_row wall_row(const struct test_workdir *f, const char *thread)
{
	char path[600], line[512], quoted[64];
	struct wall_row r = { 0 };
	int found = 0;
	snprintf(path, sizeof(path), "%s/wall", f->dir);
	snprintf(quoted, sizeof(quoted), "\"%s\" of process", thread);
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	while (!found && fgets(line, sizeof(line), in))
		found = strstr(line, quoted) && sscanf(line, "%lf %lf%% %lf%% %lf%%", &r.wall_ms, &r.cpu, &r.blocked,
						     &r.preempted) == 4;
	fclose(in);
	assert_true(found);
	return r;
}

static struct stopwatch stopwatch(const struct test_workdir *f, const char *name)
{
	char path[600], line[256], want[64];
	struct stopwatch w = { 0 };
	int found = 0;
	snprintf(path, sizeof(path), "%s/stopwatch", f->dir);
	snprintf(want, sizeof(want), "offcpu_split: %s wall=%%lf waited=%%lf cpu=%%lf", name);
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	while (!found && fgets(line, sizeof(line), in))
		found = sscanf(line, want, &w.wall, &w.waited, &w.cpu) == 3;
	fclose(in);
	assert_true(found && w.wall > 0);
	return w;
}

static void assert_near(const char *what, double got, double want)
{
	fprintf(stderr, "%s: hostprof %.2f%%, stopwatch %.2f%%\n", what, got, want);
	assert_true(got >= want - TOLERANCE && got <= want + TOLERANCE);
}

/* Off-CPU time of thread whose stack holds outer, and further leafward a function whose name contains inner
 * (NULL: any), without an error frame: complete to its root. */
static uint64_t off_cpu_under(const struct profile *p, const char *thread, const char *outer, const char *inner)
{
	uint64_t ns = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const char *names[512];
		if (!s->off_cpu_ns || strcmp(profile_string(p, s->thread_name), thread) != 0 ||
		    test_stack_has_error(p, s->stack))
			continue;
		size_t n = test_stack_functions(p, s->stack, names, 512), k = 0;
		while (k < n && strcmp(names[k], outer) != 0)
			k++;
		while (k < n && inner && !strstr(names[k], inner))
			k++;
		ns += k < n ? s->off_cpu_ns : 0;
	}
	return ns;
}

static uint64_t thread_off_cpu(const struct profile *p, const char *thread)
{
	uint64_t ns = 0;
	for (uint32_t i = 0; i < p->samples.count; i++)
		if (strcmp(profile_string(p, p->samples.items[i].thread_name), thread) == 0)
			ns += p->samples.items[i].off_cpu_ns - p->samples.items[i].preempted_ns;
	return ns;
}

/* The blocked share of thread matches the stopwatch, and its blocked time is under outer -> inner. */
static void check_blocked(const struct test_workdir *f, const char *thread, const char *sw, const char *outer,
			  const char *inner)
{
	struct wall_row r = wall_row(f, thread);
	struct stopwatch w = stopwatch(f, sw);
	assert_near("blocked", r.blocked, 100.0 * w.waited / w.wall);
	assert_near("on CPU or runnable", r.cpu + r.preempted, 100.0 - 100.0 * w.waited / w.wall);
	struct profile *p = test_read_profile(f->out);
	uint64_t blocked = thread_off_cpu(p, thread), under = off_cpu_under(p, thread, outer, inner);
	fprintf(stderr, "%s: %.1f%% of %.1f ms blocked under %s -> %s, complete\n", thread,
		test_share(under, blocked), blocked / 1e6, outer, inner ? inner : "");
	assert_true(test_share(under, blocked) >= 90.0);
	profile_free(p);
}

static void test_sleep_split(void **state)
{
	require_off_cpu(*state);
	record_mode(*state, "sleep");
	check_blocked(*state, "offcpu_split", "main", "main", "nanosleep");
}

static void test_pipe_split(void **state)
{
	require_off_cpu(*state);
	record_mode(*state, "pipe");
	check_blocked(*state, "offcpu_split", "main", "wait_pipe", "read");
}

static void test_mutex_waiter(void **state)
{
	require_off_cpu(*state);
	record_mode(*state, "mutex");
	/* The lock call under its caller: glibc's pthread_mutex_lock (___pthread_mutex_lock, lll_lock_wait). */
	check_blocked(*state, "waiter", "waiter", "waiter_loop", "lock");
}

static void test_preempted_not_blocked(void **state)
{
	struct test_workdir *f = *state;
	require_off_cpu(f);
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		test_skip("needs a machine with two CPUs: the fixture pins two threads to the last one");
	record_mode(f, "preempt");
	struct wall_row r = wall_row(f, "victim");
	struct stopwatch w = stopwatch(f, "victim");
	assert_near("victim on CPU", r.cpu, 100.0 * w.cpu / w.wall);
	assert_near("victim preempted", r.preempted, 100.0 - 100.0 * w.cpu / w.wall);
	assert_true(r.blocked <= TOLERANCE);
	assert_true(r.preempted >= 50.0 - TOLERANCE);	/* at least the busy thread's half of the CPU */
}

/* pprof carries the off-CPU time as its own sample type, which go tool pprof reads. */
static void test_pprof_off_cpu(void **state)
{
	struct test_workdir *f = *state;
	require_off_cpu(f);
	test_require_go();
	record_mode(f, "sleep");
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s --to pprof -o %s/p.pb.gz && go tool pprof -symbolize=none "
				  "-sample_index=off-cpu -top %s/p.pb.gz >%s/top 2>&1 && cat %s/top >&2", f->out, f->dir,
				  f->dir, f->dir, f->dir), 0);
	assert_int_equal(test_run("grep -q 'Type: off-cpu' %s/top && grep -q wait_sleep %s/top", f->dir, f->dir), 0);
	/* The sleep's second, in microseconds, as one collapsed line under main. */
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s --to collapsed --value off-cpu | grep -Eq "
				  "'main;wait_sleep;.*;schedule_\\[k\\] (9[5-9][0-9]{4}|10[0-4][0-9]{4})$'", f->out), 0);
}

/*
 * A user without kernel sampling (kernel.perf_event_paranoid 2): the kernel takes no switch-out samples for it,
 * yet `record --off-cpu` of its own command works. The note says why the stacks come another way, the wall view
 * holds as for root (switch records are the user's), and the second-long sleep's stack, read from the process
 * as it waited, is complete under main -> wait_sleep -> nanosleep.
 */
static void test_unprivileged_off_cpu(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	require_off_cpu(f);
	test_require_root("to run hostprof as an unprivileged user");
	test_require_tool("command -v setpriv", "setpriv");
	assert_int_equal(test_run("chmod 777 %s", f->dir), 0);
	assert_int_equal(test_run("setpriv --reuid=65534 --regid=65534 --clear-groups \"$HOSTPROF\" record --off-cpu "
				  "-o %s -- %s sleep 2>%s/stopwatch", f->out,
				  test_fixture_path("offcpu_split", fixture, sizeof(fixture)), f->dir), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" report --wall %s >%s/wall && cat %s/stopwatch %s/wall >&2", f->out,
				  f->dir, f->dir, f->dir), 0);
	int paranoid = test_run("test \"$(cat /proc/sys/kernel/perf_event_paranoid)\" -ge 2") == 0;
	if (paranoid)	/* else this user may sample the kernel, and gets the kernel's samples as root does */
		assert_int_equal(test_run("grep -q 'off-CPU: switch records without samples' %s/stopwatch", f->dir), 0);
	check_blocked(f, "offcpu_split", "main", "main", "nanosleep");
}

/*
 * A system-wide recording (-a) while short-lived processes come and go: a CPU-wide event sees each leave the CPU
 * once more after its exit record, and that switch-out must not count as time off CPU up to the end of the run
 * (it showed 1.4 s for each of 8 runs of /bin/true). Each such process's off-CPU time stays within its life.
 */
static void test_system_wide_exited(void **state)
{
	struct test_workdir *f = *state;
	require_off_cpu(f);
	/* the processes start once the recording's events are open (its perf_event fds), not after a guessed delay */
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -a --off-cpu -d 3 -o %s 2>%s/err & rec=$!; "
				  "for i in $(seq 100); do ls -l /proc/$rec/fd 2>/dev/null | grep -q perf_event && break; "
				  "sleep 0.1; done; sleep 0.3; for i in 1 2 3 4 5 6 7 8; do /bin/true & echo $! >> %s/pids; "
				  "wait $!; done; wait $rec", f->out, f->dir, f->dir), 0);
	char path[600];
	snprintf(path, sizeof(path), "%s/pids", f->dir);
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	int pids[8], n = 0;
	while (n < 8 && fscanf(in, "%d", &pids[n]) == 1)
		n++;
	fclose(in);
	assert_int_equal(n, 8);
	struct profile *p = test_read_profile(f->out);
	int seen = 0;
	for (int k = 0; k < n; k++) {
		uint64_t off = 0, rows = 0;
		for (uint32_t i = 0; i < p->samples.count; i++)
			if (p->samples.items[i].pid == pids[k]) {
				off += p->samples.items[i].off_cpu_ns;
				rows++;
			}
		fprintf(stderr, "process %d: %" PRIu64 " rows, %.1f ms off CPU\n", pids[k], rows, off / 1e6);
		seen += rows > 0;
		assert_true(off < 100000000ULL);	/* /bin/true lives about a millisecond */
	}
	assert_true(seen >= 1);	/* the recording saw them */
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sleep_split, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_pipe_split, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_mutex_waiter, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_preempted_not_blocked, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_pprof_off_cpu, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_unprivileged_off_cpu, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_system_wide_exited, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("off-CPU (integration)", tests, NULL, NULL);
}
