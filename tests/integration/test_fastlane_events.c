/*
 * Integration test of the fast lane's events over a daemon's life (src/pipeline/fastlane.h): a process that takes the lane
 * gets an event per thread and CPU, and they must go when its threads do. A daemon sampling at 999 Hz watches
 * 1,000 short runs of a program whose stacks are deeper than the kernel's copy (deep_recursion). A first run of a
 * second takes the lane by the reads its samples need; the daemon then knows the program, and each later process
 * of it takes the lane at its first sample handled (session.c, lane_by_program). Each burns 30 ms, then stays 1.5 s: the
 * daemon handles samples in batches up to a second late, and a process gone by then is refused the lane. Once
 * they have exited, the daemon's perf-event descriptors are back at the count they had before them, and its log
 * says how many it closed. The daemon profiles the whole machine: the count is awaited a few seconds, for the
 * events of any other process that took the lane meanwhile to go too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

#define RUNS 1000
#define PARALLEL 100	/* mostly asleep: the runs take ~16 s */

static void run_deep_programs(const char *fixture)
{
	for (int started = 0, running = 0; started < RUNS || running > 0;) {
		if (started < RUNS && running < PARALLEL) {
			pid_t pid = fork();
			assert_true(pid >= 0);
			if (pid == 0) {
				execl(fixture, fixture, "0.03", "240", "1.5", (char *)NULL);
				_exit(127);
			}
			started++;
			running++;
			continue;
		}
		int status;
		assert_true(wait(&status) > 0);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		running--;
	}
}

static void test_events_go_with_their_threads(void **state)
{
	(void)state;
	test_require_root("the daemon samples every CPU");
	char *dir = test_mkdtemp(), out[512], log[512], fixture[256];
	snprintf(out, sizeof(out), "%s/profiles", dir);
	snprintf(log, sizeof(log), "%s/daemon.log", dir);
	test_fixture_path("deep_recursion", fixture, sizeof(fixture));
	char *const dargv[] = { (char *)test_hostprof(), "daemon", "-o", out, "-F", "999", "--interval", "1", NULL };
	pid_t d = test_spawn(dargv, log);
	sleep(2);	/* started, its first profile written */
	/* One run makes the program known and the lane exist: the lane's rings (one per CPU) stay while the daemon
	 * runs, and count in "before". */
	assert_int_equal(test_run("%s 1 240", fixture), 0);
	unsigned before = test_settled_perf_event_fds(d);
	run_deep_programs(fixture);
	/* Exited threads' events are closed within a second, and a profile logs the count. */
	unsigned after = test_perf_event_fds(d);
	for (int i = 0; i < 10 && after != before; i++) {
		sleep(1);
		after = test_perf_event_fds(d);
	}
	sleep(2);
	long long closed = test_last_number_in_log(log, ".*fast lane: .* \\([0-9]*\\) closed as their threads .*");
	long long refused = test_last_number_in_log(log, ".*fast lane: .* \\([0-9]*\\) processes refused.*");
	kill(d, SIGTERM);
	int status;
	assert_int_equal(waitpid(d, &status, 0), d);
	test_run("grep 'fast lane' %s | tail -n 3 >&2", log);
	if (after != before)	/* a leak, or another program on this machine in the lane still: the log says */
		fprintf(stderr, "fast-lane events: %d descriptors more than before: if the last log line above counts "
			"processes in the lane, they are other programs of this machine's\n", (int)(after - before));
	fprintf(stderr, "fast-lane events: the daemon held %u perf-event descriptors before %d runs of deep_recursion, "
		"%u after them; it closed %lld of exited threads, refused %lld runs\n", before, RUNS, after, closed,
		refused);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Each run that took the lane had an event per CPU: nearly every run not refused did, the program being known
	 * (refused: it exited before its events were open; a run the daemon sampled none of does not either). */
	assert_true(refused >= 0 && refused < RUNS / 2);
	assert_true(closed >= (RUNS - refused) * 3 / 4 * (long long)sysconf(_SC_NPROCESSORS_ONLN));
	assert_int_equal(after, before);
	test_rmdir_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events_go_with_their_threads),
	};
	return cmocka_run_group_tests_name("fast-lane events (integration)", tests, NULL, NULL);
}
