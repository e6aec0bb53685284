/*
 * target_watch.h — noticing that the processes `hostprof record` follows have exited, without a system call
 * per wakeup.
 *
 * Each target gets a pidfd (pidfd_open, Linux 5.3), which poll() reports readable once the process has exited:
 * the caller adds target_watch_pollfds() to the poll that waits for samples, so an exit wakes it at once and
 * nothing is asked of the kernel otherwise. The command hostprof started is reaped then (its exit status and
 * CPU time kept). Where pidfds are not available (older kernels), targets are checked in target_watch_update()
 * instead: kill(pid, 0), or wait4(WNOHANG) for the command — at each call, which the caller makes once per
 * wakeup.
 *
 * Ownership: the watch owns its pidfds; target_watch_free() closes them. Not thread-safe. Errors: negative errno.
 */
#ifndef HOSTPROF_TARGET_WATCH_H
#define HOSTPROF_TARGET_WATCH_H

#include <poll.h>
#include <sys/resource.h>
#include <sys/types.h>

struct target_watch;

/* Room for max_targets targets (0: one). Returns 0 and *out (free with target_watch_free()), or -ENOMEM; *out is
 * set only on success. */
int target_watch_new(unsigned max_targets, struct target_watch **out);
void target_watch_free(struct target_watch *w);

/* Watch pid; is_child: hostprof's own child, reaped when it exits. -E2BIG past max_targets. */
int target_watch_add(struct target_watch *w, pid_t pid, int is_child);

/* The pidfds of targets still alive, for poll() (POLLIN); returns how many were written (at most max). */
unsigned target_watch_pollfds(const struct target_watch *w, struct pollfd *out, unsigned max);

/* After the poll: note the targets whose pidfd is readable (fds as filled by target_watch_pollfds(), with
 * revents), and check those without a pidfd. */
void target_watch_update(struct target_watch *w, const struct pollfd *fds, unsigned n);

/* 1 while a target is alive (or there are none), 0 once all have exited. */
int target_watch_alive(const struct target_watch *w);

/* The child's wait status and resource usage once it was reaped: 1, else 0. */
int target_watch_child_exit(const struct target_watch *w, int *status, struct rusage *usage);

/* Stop the child if still running (SIGTERM) and reap it; returns 1 if it was reaped. */
int target_watch_stop_child(struct target_watch *w);

#endif
