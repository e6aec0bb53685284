/*
 * Unit tests of src/processes/blocked_stack.c: the syscall file's three shapes parsed and anything else refused, and a live
 * read of a child blocked in read(2) checked against what the child's code says it must be: the program counter
 * right after a syscall instruction, and the blocking function's return address on the stack read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/processes/blocked_stack.h"
#include "src/processes/procmem.h"

static int parse(const char *text, uint64_t *sp, uint64_t *ip)
{
	return blocked_stack_parse(text, strlen(text), sp, ip);
}

static void test_parse_shapes(void **state)
{
	uint64_t sp = 0, ip = 0;
	(void)state;
	assert_int_equal(parse("230 0x0 0x0 0x7ffdad5d6910 0x7ffdad5d6950 0x0 0x0 0x7ffdad5d68f8 0x7f215c555503\n", &sp,
			       &ip), 0);
	assert_int_equal(sp, 0x7ffdad5d68f8);
	assert_int_equal(ip, 0x7f215c555503);
	assert_int_equal(parse("-1 0x7ffd00001000 0x401136\n", &sp, &ip), 0);
	assert_int_equal(sp, 0x7ffd00001000);
	assert_int_equal(ip, 0x401136);
	assert_int_equal(parse("running\n", &sp, &ip), -EAGAIN);
}

/* Anything but the kernel's shapes is refused: wrong counts, missing 0x, junk, overlong numbers, a truncation. */
static void test_parse_refuses(void **state)
{
	uint64_t sp, ip;
	(void)state;
	const char *bad[] = {
		"", "\n", "-1\n", "-1 0x10\n", "-1 0x10 0x20 0x30\n", "0 0x1 0x2 0x3 0x4 0x5 0x6 0x7\n",
		"0 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 0x9\n", "-1 10 0x20\n", "x 0x10 0x20\n", "-1 0x10 0x20 junk\n",
		"-1 0x10000000000000000000000000000 0x20\n", "-1 0xzz 0x20\n", "-1 0x 0x20\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse(bad[i], &sp, &ip), -EBADMSG);
	char big[BLOCKED_STACK_TEXT_MAX * 2];
	memset(big, ' ', sizeof(big));
	memcpy(big, "-1 0x10", 7);
	memcpy(big + sizeof(big) - 6, " 0x20\n", 6);	/* past the bound: never seen */
	assert_int_equal(blocked_stack_parse(big, sizeof(big), &sp, &ip), -EBADMSG);
}

/* The child's blocking call: read(2) from a pipe no one writes until the parent has looked. */
__attribute__((noinline)) static ssize_t wait_in_read(int fd, char *c)
{
	ssize_t n = read(fd, c, 1);
	__asm__ volatile("" ::: "memory");	/* a real return site after the call */
	return n;
}

static pid_t blocked_child(int *wr)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		close(fds[1]);
		_exit(wait_in_read(fds[0], &c) == 1 ? 0 : 1);
	}
	close(fds[0]);
	*wr = fds[1];
	return pid;
}

/* Whether a word of the stack read is a return address into wait_in_read. */
static int holds_return_into(const uint8_t *stack, size_t size, uintptr_t fn)
{
	for (size_t off = 0; off + 8 <= size && off < 4096; off += 8) {
		uint64_t v;
		memcpy(&v, stack + off, 8);
		if (v > fn && v < fn + 256)
			return 1;
	}
	return 0;
}

static void test_live_read_of_blocked_child(void **state)
{
	int wr;
	uint8_t stack[16384], insn[2];
	struct blocked_stack bs;
	(void)state;
	pid_t pid = blocked_child(&wr);
	int err = -EAGAIN;
	for (int i = 0; i < 200 && err == -EAGAIN; i++) {	/* until it has blocked */
		usleep(5000);
		err = blocked_stack_read(pid, pid, stack, sizeof(stack), &bs);
	}
	assert_int_equal(err, 0);
	assert_true(bs.size > 64 && bs.size <= sizeof(stack));
	assert_true(bs.done_ns > 0);
	/* In a system call: the program counter follows a syscall instruction (0f 05). */
	assert_int_equal(procmem_read(pid, bs.ip - 2, insn, 2), 2);
	assert_int_equal(insn[0], 0x0f);
	assert_int_equal(insn[1], 0x05);
	assert_true(holds_return_into(stack, bs.size, (uintptr_t)wait_in_read));
	assert_int_equal(write(wr, "x", 1), 1);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(wr);
	assert_int_equal(blocked_stack_read(pid, pid, stack, sizeof(stack), &bs), -ESRCH);
}

/* A thread on a CPU, or runnable: the kernel has no registers to give. */
static void test_running_child(void **state)
{
	uint8_t stack[256];
	struct blocked_stack bs;
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		for (volatile unsigned long x = 0;; x++)
			;
	usleep(20000);
	assert_int_equal(blocked_stack_read(pid, pid, stack, sizeof(stack), &bs), -EAGAIN);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_shapes),
		cmocka_unit_test(test_parse_refuses),
		cmocka_unit_test(test_live_read_of_blocked_child),
		cmocka_unit_test(test_running_child),
	};
	return cmocka_run_group_tests_name("blocked_stack", tests, NULL, NULL);
}
