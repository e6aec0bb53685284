/*
 * blocked_stack.c — a waiting thread's registers and stack, read live. See blocked_stack.h for the contract.
 *
 * The syscall file has one of three shapes (fs/proc/base.c, proc_pid_syscall):
 *   "running"                          the thread is on a CPU
 *   "-1 SP PC"                         off CPU, not in a system call (preempted, a page fault)
 *   "NR A1 A2 A3 A4 A5 A6 SP PC"       off CPU in system call NR (its six arguments)
 * numbers after the first in hex with 0x. The last two are what a walk starts from.
 */
#include "src/processes/blocked_stack.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/clock.h"
#include "src/processes/procmem.h"

#define MAX_FIELDS 9

/* The next space-separated token of [*p, end) as a number in base (16: with 0x): 1, 0 at the end of the text, or
 * -1 for a token that is no such number. */
static int next_number(const char **p, const char *end, int base, uint64_t *out)
{
	char tok[32];
	size_t n = 0;
	while (*p < end && (**p == ' ' || **p == '\n'))
		(*p)++;
	if (*p == end)
		return 0;
	while (*p < end && **p != ' ' && **p != '\n' && n < sizeof(tok) - 1)
		tok[n++] = *(*p)++;
	tok[n] = '\0';
	if (n == sizeof(tok) - 1 || (base == 16 && (n < 3 || tok[0] != '0' || tok[1] != 'x')))
		return -1;
	char *stop;
	errno = 0;
	*out = base == 16 ? strtoull(tok, &stop, 16) : (uint64_t)strtoll(tok, &stop, 10);
	return errno == 0 && *stop == '\0' ? 1 : -1;
}

int blocked_stack_parse(const char *text, size_t len, uint64_t *sp, uint64_t *ip)
{
	const char *p = text, *end = text + (len < BLOCKED_STACK_TEXT_MAX ? len : BLOCKED_STACK_TEXT_MAX);
	uint64_t v[MAX_FIELDS], nr;
	unsigned n = 0;
	int r = 1;
	if ((size_t)(end - p) >= 7 && memcmp(p, "running", 7) == 0)
		return -EAGAIN;
	if (next_number(&p, end, 10, &nr) != 1)
		return -EBADMSG;
	while (n < MAX_FIELDS && (r = next_number(&p, end, 16, &v[n])) == 1)
		n++;
	/* Two numbers after a negative one (no system call), eight after a system call's number; then the end. */
	if (r < 0 || n != ((int64_t)nr < 0 ? 2u : 8u) || next_number(&p, end, 16, &nr) != 0)
		return -EBADMSG;
	*sp = v[n - 2];
	*ip = v[n - 1];
	return 0;
}

/* The syscall file's text of tid: 0 and *len, or a negative errno. */
static int read_syscall_file(pid_t pid, pid_t tid, char *text, size_t *len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ssize_t n = read(fd, text, BLOCKED_STACK_TEXT_MAX);
	int err = n < 0 ? (errno == ESRCH ? -ESRCH : -errno) : 0;
	close(fd);
	*len = n > 0 ? (size_t)n : 0;
	return err;
}

int blocked_stack_read(pid_t pid, pid_t tid, uint8_t *buf, size_t max, struct blocked_stack *out)
{
	char text[BLOCKED_STACK_TEXT_MAX];
	size_t len;
	int err = read_syscall_file(pid, tid, text, &len);
	if (err < 0 || (err = blocked_stack_parse(text, len, &out->sp, &out->ip)) < 0)
		return err;
	ssize_t n = procmem_read(pid, out->sp, buf, max);
	if (n < 0)
		return (int)n;
	out->size = (size_t)n;
	out->done_ns = clock_mono_ns();
	return 0;
}
