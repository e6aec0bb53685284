/*
 * table_worker.c — stack-delta tables built off the sampling thread. See table_worker.h for the contract.
 */
#include "src/table_worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


struct table_worker {
	pthread_mutex_t lock;
	pthread_cond_t work;		/* a job was queued, or stop */
	pthread_cond_t idle;		/* a job was done */
	struct table_job *queue, *queue_tail;	/* submitted, not started */
	struct table_job *done, *done_tail;	/* finished, not yet returned */
	unsigned outstanding;		/* submitted, not yet returned (the caller's count) */
	unsigned unfinished;		/* queued or running */
	bool stop, started;
	pthread_t thread;
	int wake_fd;
};

int table_worker_new(int wake_fd, struct table_worker **out)
{
	struct table_worker *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->idle, NULL);
	w->wake_fd = wake_fd;
	*out = w;
	return 0;
}

/* Job's table, from the cache or built with an Elf handle of the worker's own (and stored in the cache). */
static void build(struct table_job *job)
{
	struct stack_deltas_key key = { .build_id = job->build_id };
	memcpy(key.file, job->file, sizeof(key.file));
	Elf *elf = elf_begin(job->fd, job->cmd, NULL);
	job->err = elf && elf_kind(elf) == ELF_K_ELF ?
			   stack_deltas_cache_get(job->cache, job->cache ? &key : NULL, elf, &job->table, &job->stats) :
			   -ENOEXEC;
	if (elf)
		elf_end(elf);
}

static void push(struct table_job **head, struct table_job **tail, struct table_job *job)
{
	job->next = NULL;
	if (*tail)
		(*tail)->next = job;
	else
		*head = job;
	*tail = job;
}

static void *worker_main(void *arg)
{
	struct table_worker *w = arg;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->queue && !w->stop)
			pthread_cond_wait(&w->work, &w->lock);
		if (w->stop)
			break;
		struct table_job *job = w->queue;
		if (!(w->queue = job->next))
			w->queue_tail = NULL;
		pthread_mutex_unlock(&w->lock);
		build(job);
		pthread_mutex_lock(&w->lock);
		push(&w->done, &w->done_tail, job);
		w->unfinished--;
		pthread_cond_broadcast(&w->idle);
		uint64_t one = 1;
		if (w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof(one)) < 0) {
			/* the counter is full: the caller has a wakeup pending already */
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int table_worker_submit(struct table_worker *w, struct table_job *job)
{
	if (!w->started) {
		/* Signals (SIGTERM, SIGHUP, SIGUSR1) are the caller's to take: they must interrupt its poll, and
		 * would make the worker's writes fail with EINTR. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		int err = pthread_create(&w->thread, NULL, worker_main, w);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (err)
			return -err;
		w->started = true;
	}
	pthread_mutex_lock(&w->lock);
	push(&w->queue, &w->queue_tail, job);
	w->outstanding++;
	w->unfinished++;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

struct table_job *table_worker_done(struct table_worker *w, bool wait)
{
	pthread_mutex_lock(&w->lock);
	while (wait && w->unfinished)
		pthread_cond_wait(&w->idle, &w->lock);
	struct table_job *list = w->done;
	w->done = w->done_tail = NULL;
	for (struct table_job *j = list; j; j = j->next)
		w->outstanding--;
	pthread_mutex_unlock(&w->lock);
	return list;
}

void table_worker_cancel(struct table_worker *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->queue) {
		struct table_job *job = w->queue;
		w->queue = job->next;
		job->err = -ECANCELED;
		push(&w->done, &w->done_tail, job);
		w->unfinished--;
	}
	w->queue_tail = NULL;
	pthread_mutex_unlock(&w->lock);
}

unsigned table_worker_outstanding(const struct table_worker *w)
{
	return w->outstanding;
}

void table_worker_free(struct table_worker *w)
{
	if (!w)
		return;
	table_worker_cancel(w);
	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_signal(&w->work);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	for (struct table_job *j = w->done, *next; j; j = next) {
		next = j->next;
		stack_deltas_free(j->table);
		free(j);
	}
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->idle);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
