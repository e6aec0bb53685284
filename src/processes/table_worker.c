/*
 * table_worker.c — stack-delta tables built off the sampling thread. See table_worker.h for the contract.
 */
#include "src/processes/table_worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct table_worker {
	struct worker *w;
};

int table_worker_new(int wake_fd, struct table_worker **out)
{
	struct table_worker *tw = calloc(1, sizeof(*tw));
	int err = tw ? worker_new(wake_fd, &tw->w) : -ENOMEM;
	if (err < 0) {
		free(tw);
		return err;
	}
	*out = tw;
	return 0;
}

/* Job's table, from the cache or built with an Elf handle of the worker's own (and stored in the cache). */
static void build(struct worker_job *base)
{
	struct table_job *job = (struct table_job *)base;
	struct stack_deltas_key key = { .build_id = job->build_id };
	memcpy(key.file, job->file, sizeof(key.file));
	Elf *elf = elf_begin(job->fd, job->cmd, NULL);
	job->err = elf && elf_kind(elf) == ELF_K_ELF ?
			   stack_deltas_cache_get(job->cache, job->cache ? &key : NULL, elf, &job->table, &job->stats) :
			   -ENOEXEC;
	if (elf)
		elf_end(elf);
}

int table_worker_submit(struct table_worker *tw, struct table_job *job)
{
	job->base.run = build;
	return worker_submit(tw->w, &job->base);
}

struct table_job *table_worker_done(struct table_worker *tw, bool wait)
{
	return (struct table_job *)worker_done(tw->w, wait);
}

void table_worker_cancel(struct table_worker *tw)
{
	worker_cancel(tw->w);
}

unsigned table_worker_outstanding(const struct table_worker *tw)
{
	return worker_outstanding(tw->w);
}

static void free_job(struct worker_job *base)
{
	struct table_job *job = (struct table_job *)base;
	stack_deltas_free(job->table);
	free(job);
}

void table_worker_free(struct table_worker *tw)
{
	if (!tw)
		return;
	worker_free(tw->w, free_job);
	free(tw);
}
