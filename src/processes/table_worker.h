/*
 * table_worker.h — builds stack-delta tables on a thread of its own, so that the sampling loop never waits for one.
 *
 * Building a large file's table (stack_deltas.h: libLLVM, libclang-cpp) takes 100 ms and more of CPU; done in the
 * loop that drains the sampling rings, the rings overflow meanwhile and samples are lost, and any user who can run
 * a fresh copy of a large library can make that happen at will. The caller submits a job per file that needs a
 * table; one worker thread, in submission order, loads each from the table cache (stack_deltas_cache.h) when the
 * job names one and it holds the table (a large file's load is work too), else builds it and stores it there, and
 * hands the jobs back through table_worker_done().
 *
 * Elf handles. libelf/libdw handles are not thread-safe, and a build uses its handle (it decompresses a compressed
 * .debug_frame into it): the worker opens an Elf handle of its own on the job's file descriptor (pread, or its
 * own mapping), never touching the caller's. The descriptor must stay open until the job comes back.
 *
 * Ownership: the caller allocates a job, fills its inputs and submits it; from then until table_worker_done()
 * returns it, only the worker touches it. The job comes back with its outputs (a table the caller then owns, or
 * an error). The cache handle is only read (its calls may run concurrently, see stack_deltas_cache.h).
 * Thread-safety: every function here is called from one thread, the caller's; the worker (src/base/worker.h)
 * signals completion by writing 1 to the eventfd given at creation (if any), so that the caller's poll wakes up.
 */
#ifndef HOSTPROF_TABLE_WORKER_H
#define HOSTPROF_TABLE_WORKER_H

#include <gelf.h>
#include <stdbool.h>

#include "src/base/worker.h"
#include "unwind/stack_deltas.h"
#include "unwind/stack_deltas_cache.h"

struct table_job {
	struct worker_job base;	/* the worker's (worker.h) */
	/* in */
	int fd;			/* the file; the caller keeps it open */
	Elf_Cmd cmd;		/* how to read it (ELF_C_READ_MMAP only for files no one but root can write) */
	const struct stack_deltas_cache *cache;	/* load the table from there, or store it there; NULL: build */
	char build_id[STACK_DELTAS_CACHE_BUILD_ID_MAX + 1];	/* the cache key's */
	uint8_t file[16];
	void *owner;		/* the caller's */
	/* out */
	int err;		/* 0 or stack_deltas_build()'s error; base.cancelled: not run (table_worker_cancel()) */
	struct stack_deltas *table;	/* on success; the caller's */
	struct stack_deltas_stats stats;
};

static inline struct table_job *table_job_next(const struct table_job *job)
{
	return (struct table_job *)job->base.next;
}

struct table_worker;

/* A worker (its thread starts on the first job). wake_fd: an eventfd written when a job is done, or -1. Returns 0
 * and *out, or -ENOMEM. */
int table_worker_new(int wake_fd, struct table_worker **out);
/* Cancels the jobs not started, waits for the running one, joins the thread; the jobs not yet returned by
 * table_worker_done() are freed (their tables too). NULL is a no-op. */
void table_worker_free(struct table_worker *w);

/* Queue job (owned by the worker until it is returned). Returns 0, or the error of starting the thread. */
int table_worker_submit(struct table_worker *w, struct table_job *job);
/* The jobs done since the last call, oldest first (NULL: none), linked by table_job_next(). wait: first wait until
 * every submitted job is done. */
struct table_job *table_worker_done(struct table_worker *w, bool wait);
/* Give back the jobs not started, with err -ECANCELED, through table_worker_done(). */
void table_worker_cancel(struct table_worker *w);
/* Jobs submitted and not yet returned by table_worker_done(). */
unsigned table_worker_outstanding(const struct table_worker *w);

#endif
