/*
 * apm_thread.c — a thread's thread pointer (fs_base), which perf's register dump does not carry.
 *
 * One ptrace stop per thread, done the least intrusive way: PTRACE_SEIZE (attaches without stopping and
 * without changing the thread's signal semantics), PTRACE_INTERRUPT, wait for that stop, PTRACE_GETREGS,
 * PTRACE_DETACH. A seized tracee is detached by the kernel if the tracer dies, so a killed hostprof never
 * leaves a thread stopped. The wait is bounded: a thread in uninterruptible sleep stops only when it wakes,
 * so after wait_ms it stays seized with the interrupt pending and corr_ptrace_finish() detaches it later.
 *
 * Waiting: the status is peeked with WNOWAIT first so that the exit status of the leader of the caller's
 * own child (hostprof record -- CMD) is left for the caller's waitpid(). A signal that arrives during the stop
 * is re-injected on detach.
 */
#include <errno.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "correlate/correlate_impl.h"
#include "src/base/clock.h"

/*
 * 1 with the signal to re-inject once stopped, 0 while running, -ESRCH if it exited. The exit of a tracee
 * must be reaped by us (it lingers as a zombie otherwise) unless keep_exit says the caller is its real parent
 * and will reap it.
 */
static int poll_stop(pid_t tid, int keep_exit, int *inject)
{
	siginfo_t si = { 0 };
	int status;
	if (waitid(P_PID, (id_t)tid, &si, WSTOPPED | WEXITED | WNOHANG | WNOWAIT | __WALL) < 0)
		return errno == ECHILD ? -ESRCH : -errno;
	if (si.si_pid == 0)
		return 0;
	if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) {
		if (!keep_exit)
			waitpid(tid, &status, WNOHANG | __WALL);
		return -ESRCH;
	}
	if (waitpid(tid, &status, WNOHANG | __WALL) != tid || !WIFSTOPPED(status))
		return -ESRCH;
	/* PTRACE_EVENT_STOP is our interrupt (or a group stop, which detaching leaves in place). */
	*inject = (status >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(status);
	return 1;
}

int corr_ptrace_fs_base(pid_t tid, int keep_exit, unsigned wait_ms, uint64_t *fs_base)
{
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0)
		return -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0) {
		int err = -errno;
		ptrace(PTRACE_DETACH, tid, NULL, NULL);
		return err;
	}
	uint64_t deadline = clock_mono_ns() + (uint64_t)wait_ms * 1000000ull;
	int inject = 0, r;
	const struct timespec pause = { 0, 20000 };
	while ((r = poll_stop(tid, keep_exit, &inject)) == 0) {
		if (clock_mono_ns() >= deadline)
			return -EINPROGRESS;
		nanosleep(&pause, NULL);
	}
	if (r < 0)
		return r;
	struct user_regs_struct regs;
	int err = ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0 ? -errno : 0;
	ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)inject);
	if (err == 0)
		*fs_base = regs.fs_base;
	return err;
}

int corr_ptrace_finish(pid_t tid, int keep_exit)
{
	int inject = 0;
	int r = poll_stop(tid, keep_exit, &inject);
	if (r == 0)
		return 0;
	if (r > 0)
		ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)inject);
	return 1;
}
