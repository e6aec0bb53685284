/*
 * procmem.c — reading another process's memory. See procmem.h for the contract.
 */
#include "src/processes/procmem.h"

#include <errno.h>
#include <sys/uio.h>

ssize_t procmem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	if (len == 0)
		return 0;
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	return n < 0 ? -errno : n;
}

static ssize_t read_pid(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const pid_t *pid = ctx;
	return procmem_read(*pid, addr, buf, len);
}

struct unwind_memory procmem_reader(const pid_t *pid)
{
	return (struct unwind_memory){ .read = read_pid, .ctx = (void *)pid };
}
