/*
 * Tests of the target watch (src/sampling/target_watch.c) on real child processes: an exit wakes a poll() on the pidfds
 * at once (no polling by hand), the command's status and CPU time are kept when it is reaped, a process that
 * is not hostprof's child is only noticed (its parent reaps it), and stopping the command reaps it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/sampling/target_watch.h"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A child that burns a little CPU, sleeps ms, then exits with code. */
static pid_t spawn(unsigned ms, int code)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		volatile unsigned long x = 0;
		for (unsigned long i = 0; i < 20000000; i++)
			x += i;
		usleep(ms * 1000);
		_exit(code);
	}
	return pid;
}

/* Poll the watch's descriptors (as record's loop does) until nothing is alive or timeout_ms passes. */
static uint64_t wait_exits(struct target_watch *w, unsigned timeout_ms)
{
	uint64_t start = now_ms();
	struct pollfd fds[8];
	while (target_watch_alive(w) && now_ms() - start < (uint64_t)timeout_ms) {
		unsigned n = target_watch_pollfds(w, fds, 8);
		assert_true(n > 0);
		int r = poll(fds, n, (int)timeout_ms);
		assert_true(r >= 0);
		target_watch_update(w, fds, n);
	}
	return now_ms() - start;
}

static void test_child_exit_wakes_poll(void **state)
{
	(void)state;
	struct target_watch *w;
	assert_int_equal(target_watch_new(1, &w), 0);
	assert_true(target_watch_alive(w)); /* nothing to watch: -a runs until stopped */
	pid_t pid = spawn(100, 3);
	assert_int_equal(target_watch_add(w, pid, 1), 0);
	assert_int_equal(target_watch_add(w, pid, 1), -E2BIG);
	int status;
	struct rusage ru;
	assert_int_equal(target_watch_child_exit(w, &status, &ru), 0);
	/* One poll with a long timeout returns at the exit, not at the timeout. */
	uint64_t took = wait_exits(w, 5000);
	assert_true(took < 2000);
	assert_false(target_watch_alive(w));
	assert_int_equal(target_watch_child_exit(w, &status, &ru), 1);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	assert_true(ru.ru_utime.tv_sec > 0 || ru.ru_utime.tv_usec > 0); /* its CPU time came with it */
	assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);		 /* reaped */
	target_watch_free(w);
}

static void test_processes_not_ours(void **state)
{
	(void)state;
	struct target_watch *w;
	assert_int_equal(target_watch_new(3, &w), 0);
	pid_t a = spawn(50, 0), b = spawn(300, 0);
	assert_int_equal(target_watch_add(w, a, 0), 0);
	assert_int_equal(target_watch_add(w, b, 0), 0);
	struct pollfd fds[2];
	assert_int_equal(target_watch_pollfds(w, fds, 2), 2);
	wait_exits(w, 5000);
	assert_false(target_watch_alive(w));
	/* Not reaped by the watch: the parent (this test) still gets both statuses. */
	assert_int_equal(waitpid(a, NULL, 0), a);
	assert_int_equal(waitpid(b, NULL, 0), b);
	assert_int_equal(target_watch_pollfds(w, fds, 2), 0);
	/* A process that is already gone cannot be watched. */
	assert_int_equal(target_watch_add(w, a, 0), -ESRCH);
	target_watch_free(w);
}

static void test_stop_child(void **state)
{
	(void)state;
	struct target_watch *w;
	assert_int_equal(target_watch_new(1, &w), 0);
	pid_t pid = spawn(60000, 0);
	assert_int_equal(target_watch_add(w, pid, 1), 0);
	assert_int_equal(target_watch_stop_child(w), 1);
	int status;
	struct rusage ru;
	assert_int_equal(target_watch_child_exit(w, &status, &ru), 1);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	target_watch_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_child_exit_wakes_poll),
		cmocka_unit_test(test_processes_not_ours),
		cmocka_unit_test(test_stop_child),
	};
	return cmocka_run_group_tests_name("target watch", tests, NULL, NULL);
}
