/*
 * apm_reader.c — the TLS-reading half of correlation (correlate_reader in correlate.h): what must happen right
 * after a sample, on whichever thread handles it first.
 *
 * State per ready APM process: its own descriptor of /proc/PID/mem (a dup, so the handle may close its own),
 * the TLS offset, and the thread pointers found so far (tid → fs_base, TP_FAILED, or TP_BUSY while a thread
 * is being stopped for it). One mutex guards it all; reads hold it for the three pread()s of a sample (a few
 * microseconds), never across a ptrace stop, which may wait up to PTRACE_WAIT_MS: the thread is marked busy,
 * the lock dropped, and samples of that thread read meanwhile (by other threads) come back without a context.
 *
 * ptrace requests must come from the thread that attached, so a thread left seized after a stop that timed
 * out is recorded with the tid of its tracer, and only that thread detaches it (correlate_reader_poll()).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "correlate/correlate_impl.h"

#define TP_FAILED	UINT64_MAX
#define TP_BUSY		(UINT64_MAX - 1)
#define PTRACE_WAIT_MS	50
#define MAX_DETACH_POLL	64

struct reader_proc {
	pid_t pid;
	int memfd;
	int is_our_child;	/* the caller is its parent: leave its exit status alone */
	uint64_t tls_offset;
	struct hindex threads;	/* tid → fs_base, TP_FAILED or TP_BUSY */
};

struct correlate_reader {
	pthread_mutex_t lock;
	struct hindex procs;	/* pid → struct reader_proc * */
	struct hindex detaching;	/* tid → tracer tid << 1 | keep_exit: left seized by a timed-out stop */
};

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

int corr_reader_new(struct correlate_reader **out)
{
	struct correlate_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	int err = pthread_mutex_init(&r->lock, NULL);
	if (err != 0) {
		free(r);
		return -err;
	}
	*out = r;
	return 0;
}

static void proc_free(struct reader_proc *p)
{
	hindex_free(&p->threads);
	close(p->memfd);
	free(p);
}

void corr_reader_free(struct correlate_reader *r)
{
	if (!r)
		return;
	correlate_reader_thread_exit(r);
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&r->procs, &pos, &v);)
		proc_free((struct reader_proc *)(uintptr_t)v);
	hindex_free(&r->procs);
	hindex_free(&r->detaching);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static struct reader_proc *find(const struct correlate_reader *r, pid_t pid)
{
	uint64_t v;
	return hindex_u32_get(&r->procs, (uint32_t)pid, &v) ? (struct reader_proc *)(uintptr_t)v : NULL;
}

int corr_reader_add(struct correlate_reader *r, pid_t pid, int memfd, uint64_t tls_offset, int is_our_child)
{
	struct reader_proc *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->tls_offset = tls_offset;
	p->is_our_child = is_our_child;
	if ((p->memfd = fcntl(memfd, F_DUPFD_CLOEXEC, 0)) < 0) {
		int err = -errno;
		free(p);
		return err;
	}
	pthread_mutex_lock(&r->lock);
	struct reader_proc *old = find(r, pid);
	int err = hindex_u32_put(&r->procs, (uint32_t)pid, (uint64_t)(uintptr_t)p);
	pthread_mutex_unlock(&r->lock);
	if (err < 0)
		proc_free(p);
	else if (old)
		proc_free(old);
	return err;
}

void corr_reader_remove(struct correlate_reader *r, pid_t pid)
{
	pthread_mutex_lock(&r->lock);
	struct reader_proc *p = find(r, pid);
	if (p)
		hindex_u32_del(&r->procs, (uint32_t)pid);
	pthread_mutex_unlock(&r->lock);
	if (p)
		proc_free(p);
}

void corr_reader_forget_thread(struct correlate_reader *r, pid_t pid, pid_t tid)
{
	pthread_mutex_lock(&r->lock);
	struct reader_proc *p = find(r, pid);
	uint64_t v;
	/* A thread being stopped right now is left to that stop, which stores its result. */
	if (p && hindex_u32_get(&p->threads, (uint32_t)tid, &v) && v != TP_BUSY)
		hindex_u32_del(&p->threads, (uint32_t)tid);
	pthread_mutex_unlock(&r->lock);
}

/*
 * The thread pointer of tid by a ptrace stop, with the lock dropped meanwhile. Returns with the lock held:
 * 1 and *tp, or 0 (the thread cannot be used now; out says why).
 */
static int trace_thread(struct correlate_reader *r, struct reader_proc *p, pid_t tid, uint64_t *tp,
			struct correlate_read *out)
{
	const struct reader_proc *was = p;
	pid_t pid = p->pid;
	int keep_exit = p->is_our_child && tid == pid;
	uint64_t v = 0;
	if (hindex_u32_put(&p->threads, (uint32_t)tid, TP_BUSY) < 0)
		return 0;
	pthread_mutex_unlock(&r->lock);
	int rc = corr_ptrace_fs_base(tid, keep_exit, PTRACE_WAIT_MS, &v);
	pthread_mutex_lock(&r->lock);
	if (rc == -EINPROGRESS)
		hindex_u32_put(&r->detaching, (uint32_t)tid, (uint64_t)gettid_() << 1 | (uint64_t)keep_exit);
	/* The process may have been removed (or replaced, after an exec) while the lock was free. */
	if ((p = find(r, pid)) != was)
		return 0;
	if (rc == -EINPROGRESS || rc == -ESRCH) {
		hindex_u32_del(&p->threads, (uint32_t)tid);
		return 0;
	}
	out->traced = rc < 0 ? -1 : 1;
	out->err = rc < 0 ? -rc : 0;
	v = rc < 0 ? TP_FAILED : v;
	if (hindex_u32_put(&p->threads, (uint32_t)tid, v) < 0)
		return 0;
	*tp = v;
	return v != TP_FAILED;
}

/* 1 with the thread pointer; 0 if the thread cannot be used now. Called and returns with the lock held. */
static int thread_pointer(struct correlate_reader *r, struct reader_proc *p, pid_t tid, uint64_t *tp,
			  struct correlate_read *out)
{
	uint64_t v;
	if (hindex_u32_get(&p->threads, (uint32_t)tid, &v)) {
		*tp = v;
		return v != TP_FAILED && v != TP_BUSY;
	}
	if (hindex_u32_get(&r->detaching, (uint32_t)tid, &v))
		return 0;
	/* Never stop a thread of another process (a confused caller, or a reused pid). */
	char task[64];
	snprintf(task, sizeof(task), "/proc/%d/task/%d", (int)p->pid, (int)tid);
	if (access(task, F_OK) < 0)
		return 0;
	return trace_thread(r, p, tid, tp, out);
}

static int all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/*
 * The thread's 37-byte block, read twice: it must read the same, since the thread may be running and an
 * update in progress (the "valid" byte protects only readers that interrupt the writing thread).
 */
static void read_block(const struct reader_proc *p, uint64_t tp, struct correlate_read *out)
{
	uint64_t ptr = 0;
	uint8_t blk[CORR_TLS_LEN], again[CORR_TLS_LEN];
	out->tls_addr = tp + p->tls_offset;
	int rc = corr_mem_read(p->memfd, out->tls_addr, &ptr, sizeof(ptr));
	out->block_addr = ptr;
	if (rc == 0 && ptr)
		rc = corr_mem_read(p->memfd, ptr, blk, CORR_TLS_LEN);
	if (rc == 0 && ptr)
		rc = corr_mem_read(p->memfd, ptr, again, CORR_TLS_LEN);
	if (rc < 0) {
		out->status = rc == -ESRCH ? CORRELATE_READ_GONE : CORRELATE_READ_FAILED;
		out->err = -rc;
		return;
	}
	uint16_t minor = 0;
	if (ptr)
		memcpy(&minor, blk, sizeof(minor));
	out->status = CORRELATE_READ_NONE;
	if (ptr == 0 || memcmp(blk, again, CORR_TLS_LEN) != 0 || minor == 0 || !blk[CORR_TLS_OFF_VALID] ||
	    !blk[CORR_TLS_OFF_PRESENT] || all_zero(blk + CORR_TLS_OFF_TRACE, CORRELATE_TRACE_ID_LEN) ||
	    all_zero(blk + CORR_TLS_OFF_TXN, CORRELATE_TRANSACTION_ID_LEN))
		return;
	out->status = CORRELATE_READ_ACTIVE;
	memcpy(out->trace_id, blk + CORR_TLS_OFF_TRACE, CORRELATE_TRACE_ID_LEN);
	memcpy(out->transaction_id, blk + CORR_TLS_OFF_TXN, CORRELATE_TRANSACTION_ID_LEN);
	memcpy(out->span_id, blk + CORR_TLS_OFF_SPAN, CORRELATE_TRANSACTION_ID_LEN);
	out->trace_flags = blk[CORR_TLS_OFF_FLAGS];
}

int correlate_reader_read(struct correlate_reader *r, pid_t pid, pid_t tid, struct correlate_read *out)
{
	memset(out, 0, sizeof(*out));
	out->status = CORRELATE_READ_NOT_APM;
	if (!r || pid <= 0 || tid <= 0)
		return -EINVAL;
	pthread_mutex_lock(&r->lock);
	struct reader_proc *p = find(r, pid);
	uint64_t tp;
	if (p) {
		out->status = CORRELATE_READ_NO_THREAD;
		if (thread_pointer(r, p, tid, &tp, out) && (p = find(r, pid)) != NULL)
			read_block(p, tp, out);
	}
	pthread_mutex_unlock(&r->lock);
	return out->status == CORRELATE_READ_ACTIVE;
}

/* Threads this thread left seized: detach those that have stopped since. 1 while some remain. */
int correlate_reader_poll(struct correlate_reader *r)
{
	unsigned n = 0, mine = 0;
	uint64_t self = (uint64_t)gettid_();
	pthread_mutex_lock(&r->lock);
	uint32_t tid;
	uint64_t v;
	/* Removal while iterating is allowed (hindex.h); n bounds the detaches done under the lock. */
	for (uint32_t pos = 0; n < MAX_DETACH_POLL && hindex_u32_next(&r->detaching, &pos, &tid, &v);) {
		if (v >> 1 != self)
			continue;
		mine++;
		if (corr_ptrace_finish((pid_t)tid, (int)(v & 1))) {
			hindex_u32_del(&r->detaching, tid);
			n++;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return mine > n;
}

void correlate_reader_thread_exit(struct correlate_reader *r)
{
	/* A last chance to detach; when this thread ends, the kernel detaches what it still traces. */
	const struct timespec pause = { 0, 1000000 };
	for (int tries = 0; r && tries < 100 && correlate_reader_poll(r); tries++)
		nanosleep(&pause, NULL);
}
