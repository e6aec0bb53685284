/*
 * Unit tests for src/base/proc_threads.c on this very process: its threads listed (a thread started here is among
 * them), its identity (the uids getresuid() gives), and /proc/PID/stat's fields found past a command name with
 * blanks and parentheses in it (set with prctl), checked against what the process knows of itself: its stack's
 * start above main's frame, its start time no later than now, in clock ticks since boot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "src/base/proc_threads.h"

static uintptr_t main_frame;	/* main's frame: on the process stack (a local's address may not be, under ASan) */

/* A thread that says its tid, then waits for the test's word: no cmocka assertion off the test's thread. */
static void *wait_for_pipe(void *arg)
{
	int *fds = arg;	/* [0] [1]: its tid to the test, [2] [3]: the test's word to go */
	char c;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	if (write(fds[1], &tid, sizeof(tid)) != sizeof(tid) || read(fds[2], &c, 1) != 1)
		return (void *)1;
	return NULL;
}

static void test_threads_listed(void **state)
{
	(void)state;
	int fds[4];
	pthread_t th;
	pid_t tid, tids[64];
	unsigned n = 0;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pipe(fds + 2), 0);
	assert_int_equal(pthread_create(&th, NULL, wait_for_pipe, fds), 0);
	assert_int_equal(read(fds[0], &tid, sizeof(tid)), sizeof(tid));
	assert_int_equal(proc_list_threads(getpid(), tids, 64, &n), 0);
	bool found = false, self = false;
	for (unsigned i = 0; i < n; i++) {
		found |= tids[i] == tid;
		self |= tids[i] == getpid();
	}
	assert_true(found && self);
	assert_int_equal(write(fds[3], "x", 1), 1);
	void *failed;
	pthread_join(th, &failed);
	assert_null(failed);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	assert_int_equal(proc_list_threads(0x3ffffff0, tids, 64, &n), -ENOENT);	/* above any pid_max */
}

static void test_identity(void **state)
{
	(void)state;
	struct proc_identity id;
	uid_t r, e, s;
	assert_int_equal(getresuid(&r, &e, &s), 0);
	assert_int_equal(proc_read_identity(getpid(), &id), 0);
	assert_true(id.state == 'R');
	assert_int_equal(id.ruid, r);
	assert_int_equal(id.euid, e);
	assert_int_equal(id.suid, s);
	assert_int_equal(proc_read_identity(0x3ffffff0, &id), -ENOENT);
}

static void test_stat_fields_past_an_odd_name(void **state)
{
	(void)state;
	uint64_t stack_start, start_ticks, pid;
	assert_int_equal(prctl(PR_SET_NAME, "a) b (c) 1 2 3"), 0);	/* 15 bytes: all kept */
	assert_int_equal(proc_read_stat_field(getpid(), 28, &stack_start), 0);
	assert_int_equal(proc_read_stat_field(getpid(), 22, &start_ticks), 0);
	assert_int_equal(proc_read_stat_field(getpid(), 1, &pid), -EINVAL);	/* before the name: not read */
	assert_int_equal(proc_read_stat_field(getpid(), 99, &pid), -EINVAL);	/* past the line */
	assert_int_equal(proc_read_stat_field(0x3ffffff0, 28, &pid), -ENOENT);
	/* The process stack starts above main's frame, within the 8 MiB a main stack gets by default. */
	assert_true(stack_start > main_frame && stack_start - main_frame < (8u << 20));
	struct timespec boot;
	assert_int_equal(clock_gettime(CLOCK_BOOTTIME, &boot), 0);
	long hz = sysconf(_SC_CLK_TCK);
	assert_true(start_ticks > 0 && start_ticks / (uint64_t)hz <= (uint64_t)boot.tv_sec);
}

int main(void)
{
	main_frame = (uintptr_t)__builtin_frame_address(0);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_listed),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_stat_fields_past_an_odd_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
