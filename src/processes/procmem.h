/*
 * procmem.h — reading another process's memory: the one place hostprof calls process_vm_readv.
 *
 * The unwinders never touch a live process; what they need from its memory (a Go goroutine's stack, the stack
 * past the kernel's copy) is read through the reader they are given (unwind.h, struct unwind_memory), and for
 * the live process that reader is this one. The fast lane's readers and the JIT code check read through it too.
 *
 * Nothing is cached: every read is one system call, at the moment it is made, so what it returns may have
 * changed since the sample its caller is working on (callers check: stackext.h, go_stack.h).
 *
 * Untrusted input: addresses come from sampled stacks and registers. A read never writes past buf + len and
 * reports how much it read; an address the process does not map is an error (-EFAULT), not a crash. Thread-safe
 * (no state).
 */
#ifndef HOSTPROF_PROCMEM_H
#define HOSTPROF_PROCMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

/*
 * Read up to len bytes at addr of pid into buf. Returns how many were read (fewer than len where the readable
 * memory ends at that address), or a negative errno: -EFAULT (addr not readable), -ESRCH (no such process),
 * -EPERM (not permitted). len 0 reads nothing and returns 0.
 */
ssize_t procmem_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* The reader (unwind.h) of process *pid: *pid is read at each read, and must outlive the reader. */
struct unwind_memory procmem_reader(const pid_t *pid);

#endif
