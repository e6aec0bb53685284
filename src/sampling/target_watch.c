/*
 * target_watch.c — exits of the processes `hostprof record` follows. See target_watch.h for the contract.
 */
#include "src/sampling/target_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct target {
	pid_t pid;
	int pidfd;		/* -1: no pidfd (checked by hand) */
	int is_child;
	int exited;
	int status;		/* the child's wait status */
	struct rusage usage;	/* the child's */
};

struct target_watch {
	struct target *t;
	unsigned n, max;
};

int target_watch_new(unsigned max_targets, struct target_watch **out)
{
	struct target_watch *w = calloc(1, sizeof(*w));
	if (w && !(w->t = calloc(max_targets ? max_targets : 1, sizeof(*w->t)))) {
		free(w);
		w = NULL;
	}
	if (!w)
		return -ENOMEM;
	w->max = max_targets;
	*out = w;
	return 0;
}

void target_watch_free(struct target_watch *w)
{
	if (!w)
		return;
	for (unsigned i = 0; i < w->n; i++)
		if (w->t[i].pidfd >= 0)
			close(w->t[i].pidfd);
	free(w->t);
	free(w);
}

int target_watch_add(struct target_watch *w, pid_t pid, int is_child)
{
	if (w->n == w->max)
		return -E2BIG;
	struct target *t = &w->t[w->n];
	long fd = syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0 && errno == ESRCH && !is_child)
		return -ESRCH;
	*t = (struct target){ .pid = pid, .pidfd = fd >= 0 ? (int)fd : -1, .is_child = is_child };
	if (t->pidfd >= 0)
		fcntl(t->pidfd, F_SETFD, FD_CLOEXEC);
	w->n++;
	return 0;
}

unsigned target_watch_pollfds(const struct target_watch *w, struct pollfd *out, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < w->n && n < max; i++)
		if (!w->t[i].exited && w->t[i].pidfd >= 0)
			out[n++] = (struct pollfd){ .fd = w->t[i].pidfd, .events = POLLIN };
	return n;
}

static void reap(struct target *t, int options)
{
	pid_t r = wait4(t->pid, &t->status, options, &t->usage);
	if (r == t->pid || (r < 0 && errno == ECHILD))
		t->exited = 1;
}

/* Without a pidfd: one system call per target and call. */
static void check_by_hand(struct target *t)
{
	if (t->is_child)
		reap(t, WNOHANG);
	else if (kill(t->pid, 0) < 0 && errno == ESRCH)
		t->exited = 1;
}

void target_watch_update(struct target_watch *w, const struct pollfd *fds, unsigned n)
{
	for (unsigned i = 0; i < w->n; i++) {
		struct target *t = &w->t[i];
		if (t->exited)
			continue;
		if (t->pidfd < 0) {
			check_by_hand(t);
			continue;
		}
		for (unsigned j = 0; j < n; j++) {
			if (fds[j].fd != t->pidfd || !fds[j].revents)
				continue;
			/* A child is reaped now: it has exited, so this does not block. */
			if (t->is_child)
				reap(t, 0);
			else
				t->exited = 1;
		}
	}
}

int target_watch_alive(const struct target_watch *w)
{
	for (unsigned i = 0; i < w->n; i++)
		if (!w->t[i].exited)
			return 1;
	return w->n == 0;
}

static struct target *child_of(const struct target_watch *w)
{
	for (unsigned i = 0; i < w->n; i++)
		if (w->t[i].is_child)
			return &w->t[i];
	return NULL;
}

int target_watch_child_exit(const struct target_watch *w, int *status, struct rusage *usage)
{
	const struct target *t = child_of(w);
	if (!t || !t->exited)
		return 0;
	*status = t->status;
	*usage = t->usage;
	return 1;
}

int target_watch_stop_child(struct target_watch *w)
{
	struct target *t = child_of(w);
	if (!t)
		return 0;
	if (!t->exited) {
		/* Interrupted: the command got the same Ctrl-C from the terminal; wait so it is not left behind. */
		kill(t->pid, SIGTERM);
		reap(t, 0);
	}
	return t->exited;
}
