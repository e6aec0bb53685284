/*
 * worker.c — a thread running jobs in order. See worker.h for the contract.
 */
#include "src/base/worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

struct worker {
	pthread_mutex_t lock;
	pthread_cond_t work;		/* a job was queued, or stop */
	pthread_cond_t idle;		/* a job was done */
	struct worker_job *queue, *queue_tail;	/* submitted, not started */
	struct worker_job *done, *done_tail;	/* finished, not yet returned */
	unsigned outstanding;		/* submitted, not yet returned (the caller's count) */
	unsigned unfinished;		/* queued or running */
	bool stop, started;
	pthread_t thread;
	int wake_fd;
};

int worker_new(int wake_fd, struct worker **out)
{
	struct worker *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->idle, NULL);
	w->wake_fd = wake_fd;
	*out = w;
	return 0;
}

static void push(struct worker_job **head, struct worker_job **tail, struct worker_job *job)
{
	job->next = NULL;
	if (*tail)
		(*tail)->next = job;
	else
		*head = job;
	*tail = job;
}

/* A job is done (the lock held): onto the done list, and the caller told. */
static void finish(struct worker *w, struct worker_job *job)
{
	uint64_t one = 1;
	push(&w->done, &w->done_tail, job);
	w->unfinished--;
	pthread_cond_broadcast(&w->idle);
	if (w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the caller has a wakeup pending already */
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->queue && !w->stop)
			pthread_cond_wait(&w->work, &w->lock);
		if (w->stop)
			break;
		struct worker_job *job = w->queue;
		if (!(w->queue = job->next))
			w->queue_tail = NULL;
		pthread_mutex_unlock(&w->lock);
		job->run(job);
		pthread_mutex_lock(&w->lock);
		finish(w, job);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int start(struct worker *w)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int err = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	w->started = true;
	return 0;
}

int worker_submit(struct worker *w, struct worker_job *job)
{
	int err = w->started ? 0 : start(w);
	if (err < 0)
		return err;
	job->cancelled = false;
	pthread_mutex_lock(&w->lock);
	push(&w->queue, &w->queue_tail, job);
	w->outstanding++;
	w->unfinished++;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

struct worker_job *worker_done(struct worker *w, bool wait)
{
	pthread_mutex_lock(&w->lock);
	while (wait && w->unfinished)
		pthread_cond_wait(&w->idle, &w->lock);
	struct worker_job *list = w->done;
	w->done = w->done_tail = NULL;
	for (struct worker_job *j = list; j; j = j->next)
		w->outstanding--;
	pthread_mutex_unlock(&w->lock);
	return list;
}

void worker_cancel(struct worker *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->queue) {
		struct worker_job *job = w->queue;
		w->queue = job->next;
		job->cancelled = true;
		finish(w, job);
	}
	w->queue_tail = NULL;
	pthread_mutex_unlock(&w->lock);
}

unsigned worker_outstanding(const struct worker *w)
{
	return w->outstanding;
}

void worker_free(struct worker *w, void (*free_job)(struct worker_job *job))
{
	if (!w)
		return;
	worker_cancel(w);
	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_signal(&w->work);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	for (struct worker_job *j = w->done, *next; j; j = next) {
		next = j->next;
		if (free_job)
			free_job(j);
	}
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->idle);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
