/*
 * worker.h — one thread that runs the caller's jobs in submission order, off the caller's thread.
 *
 * Work that takes long and must not stall a loop (building a large file's stack-delta table, naming an interval's
 * profile) is handed to a worker. The caller embeds a struct worker_job in its own job, sets run, and submits it;
 * from then until worker_done() returns it, only the worker touches the job. run() is called on the worker's
 * thread, one job at a time, in order; then the job goes onto the done list and the eventfd given at creation (if
 * any) is written, so that the caller's poll wakes up. Jobs not started can be given back unrun
 * (worker_cancel()). The thread starts with the first job and blocks every signal: signals are the caller's to
 * take (they must interrupt its poll, and would make the worker's writes fail with EINTR).
 *
 * Threads: every function here is called from one thread, the caller's. Errors: negative errno.
 */
#ifndef HOSTPROF_BASE_WORKER_H
#define HOSTPROF_BASE_WORKER_H

#include <stdbool.h>

struct worker_job {
	void (*run)(struct worker_job *job);	/* in: the work, called on the worker's thread */
	bool cancelled;				/* out: given back without being run (worker_cancel()) */
	struct worker_job *next;		/* the worker's list link, then the done list's */
};

struct worker;

/* A worker whose thread starts on the first job. wake_fd: an eventfd written when a job is done, or -1. Returns 0
 * and *out, or -ENOMEM. */
int worker_new(int wake_fd, struct worker **out);
/* Cancels the jobs not started, waits for the running one and joins the thread; each job not yet returned by
 * worker_done() goes to free_job (NULL: left alone). NULL is a no-op. */
void worker_free(struct worker *w, void (*free_job)(struct worker_job *job));

/* Queue job. Returns 0, or the error of starting the thread (the job is not queued then). */
int worker_submit(struct worker *w, struct worker_job *job);
/* The jobs done since the last call, oldest first (NULL: none), linked by next. wait: first wait until every
 * submitted job is done. */
struct worker_job *worker_done(struct worker *w, bool wait);
/* Give back the jobs not started, cancelled, through worker_done(). */
void worker_cancel(struct worker *w);
/* Jobs submitted and not yet returned by worker_done(). */
unsigned worker_outstanding(const struct worker *w);

#endif
