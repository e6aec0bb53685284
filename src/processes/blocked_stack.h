/*
 * blocked_stack.h — the user registers and stack of a thread that is off CPU, read from the live process.
 *
 * Where the kernel gives no sample of a switch-out (an unprivileged user: its switch-out samples are taken in
 * kernel mode, which kernel.perf_event_paranoid 2 refuses; sampler.h), the thread's stack as it waits can still be
 * read while it waits: a thread off CPU does not move. /proc/PID/task/TID/syscall gives its user stack pointer
 * and program counter (the kernel answers "running" for a thread on a CPU, which has none to give), and the
 * stack is read from that stack pointer through the one process-memory reader (procmem.h). Only those two
 * registers exist this way: an unwinder given them starts at the leaf with the other registers unknown (0), which
 * walks the usual code (the stack pointer is what a frame's CFA is computed from) and stops, rather than guesses,
 * at a frame that needs another register.
 *
 * Whether the thread stayed off CPU during the read is the caller's to check against its switch records:
 * done_ns (CLOCK_MONOTONIC, the sampler's clock) is when the read ended, and a read that ended before the switch-in
 * that closes the interval it was made in was made while the thread waited in that interval (offcpu.h).
 *
 * Untrusted input: the file's text is parsed bounded (BLOCKED_STACK_TEXT_MAX bytes at most), numbers range-checked;
 * the stack read never writes past the caller's buffer. The file and the memory are the kernel's answer for the
 * reader's own permissions (ptrace access to the thread), so no one sees another user's stack through this.
 *
 * Errors: negative errno: -EAGAIN (the thread is running: nothing to read now), -ESRCH (gone), -EACCES / -EPERM
 * (not permitted), -EBADMSG (the file's text is not understood), -EFAULT (its stack pointer is not readable).
 * Thread-safe (no state).
 */
#ifndef HOSTPROF_BLOCKED_STACK_H
#define HOSTPROF_BLOCKED_STACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BLOCKED_STACK_TEXT_MAX 256	/* the syscall file's line: a number and at most eight in hex */

struct blocked_stack {
	uint64_t ip, sp;	/* the thread's user program counter and stack pointer as it waits */
	size_t size;		/* stack bytes read from sp into the caller's buffer */
	uint64_t done_ns;	/* when the read ended (CLOCK_MONOTONIC) */
};

/* Read tid's (of process pid) registers and up to max bytes of its stack into buf. Returns 0 and *out. */
int blocked_stack_read(pid_t pid, pid_t tid, uint8_t *buf, size_t max, struct blocked_stack *out);

/* The stack pointer and program counter in a syscall file's text (len bytes, need not end in NUL): 0, -EAGAIN
 * for "running", or -EBADMSG. */
int blocked_stack_parse(const char *text, size_t len, uint64_t *sp, uint64_t *ip);

#endif
