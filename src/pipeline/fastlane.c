/*
 * fastlane.c — the APM fast lane. See fastlane.h for the contract.
 *
 * Each reader owns one CPU's ring and one queue to the main thread: a byte ring of entries (a header with the
 * context read, then the record), written only by the reader and released only by the main thread, with
 * acquire/release on its two positions. An entry never wraps: one that does not fit before the end is
 * preceded by a skip marker. The reader writes the session's eventfd once a queue is a quarter full (and the
 * main thread has not been told since its last drain), which bounds how far the queue runs ahead of the main
 * thread; otherwise the main thread's own timer (the correlation flush, 100 ms) drains it.
 */
#include "src/pipeline/fastlane.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "src/base/clock.h"
#include "src/base/hindex.h"
#include "src/base/proc_threads.h"
#include "src/processes/procmem.h"

#define QUEUE_TOTAL_BYTES	(16u << 20)	/* shared out between the CPUs' queues ... */
#define QUEUE_MIN_BYTES		(1u << 20)	/* ... each at least this (60 samples of a 16 KiB copy) */
#define QUEUE_MAX_BYTES		(8u << 20)
#define QUEUE_SKIP		0x80000000u	/* entry length flag: skip to the start of the buffer */
#define RING_PAGES_ROOT		256		/* 1 MiB per CPU: a reader stalled 50 ms (a ptrace stop) at
						 * 999 Hz still fits */
#define MAX_THREADS		8192
#define ADD_PASSES		4		/* thread listings until one finds no new thread */
#define LAT_SUB			8		/* histogram: 8 buckets per power of two (12.5 % wide) */
#define LAT_BUCKETS		(64 * LAT_SUB)
#define REAP_AFTER_NS		10000000000ull	/* an exited process's samples are long read after 10 s */
#define DETACH_POLL_MS		20
#define READER_IDLE_MS		100
#define FASTLANE_ORDER_NS	2000000ull	/* off-CPU records younger than this wait for the next drain */
#define CLOSE_EVERY_NS		1000000000ull	/* events of exited threads are looked for once a second */

struct qentry {
	uint32_t len;		/* bytes of the entry, a multiple of 8; QUEUE_SKIP: go back to offset 0 */
	uint32_t rec_len;	/* bytes of the record (then padding to 8) */
	uint64_t read_ns;
	uint64_t order_ns;	/* off-CPU records: their time, the drain's merge order; 0: any order */
	struct correlate_read ctx;
	struct go_stack_snapshot go;	/* bytes: after the record (set again when handed out) */
	uint32_t npy;			/* Python frames after the goroutine's bytes (8-aligned), references held */
	int py_read;			/* fastlane_entry.py_read */
	int is_sample;			/* the record decoded once, by the reader: sample (into the copy) or sw */
	union {
		struct perf_sample sample;
		struct perf_switch sw;
	} decoded;
	/* the record follows, 8-aligned, then go.size bytes of goroutine stack, then npy struct pyframe */
};

struct queue {
	uint8_t *buf;
	uint64_t size;			/* a power of two */
	uint64_t head;			/* written by the reader (release) */
	uint64_t tail;			/* written by the main thread (release) */
	uint64_t drain_head;		/* during a drain: head as it began (main thread) */
	int told;			/* the reader wrote the eventfd since the main thread's last drain */
};

struct reader {
	struct fastlane *f;
	int cpu, ring_fd, off_fd, stop_fd;	/* off_fd: the CPU's off-CPU ring (-1: none) */
	pthread_t thread;
	int started, realtime;
	uint8_t *scratch;
	struct go_stack *gs;		/* the reader's own: goroutine snapshots of FASTLANE_GO samples */
	uint8_t *deep;			/* stack past the copy of FASTLANE_DEEP samples (deep_max bytes) */
	struct pyframe *pyf;		/* FASTLANE_PYTHON samples' frames (PYFRAMES_MAX_FRAMES; NULL without) */
	struct queue q;
	int detaching;			/* threads this reader left seized (correlate_reader_poll()) */
	uint64_t cpu_ns;		/* its CPU time, as last seen by the main thread (kept after it ended) */
	/* counters: written by the reader, read by the main thread (relaxed atomics) */
	uint64_t samples, queue_full, kernel_lost, max_ns, go_snapshots, go_too_large, off_cpu, py_reads, py_ns;
	uint64_t hist[LAT_BUCKETS];
};

struct fastlane {
	struct fastlane_options o;
	struct sampler *sampler;	/* created by the first fastlane_add_process() */
	struct reader *readers;
	unsigned nreaders;
	int stopped;
	int paused;			/* fastlane_pause(): events disabled, and new ones not enabled */
	struct hindex start_ns, end_ns;	/* pid → coverage start; pid → exit time (absent: running) */
	pthread_mutex_t lock;		/* guards kinds, which the readers read */
	struct hindex kinds;		/* pid → enum fastlane_kind bits | bytes to read past the copy << 8 */
	size_t deep_max;		/* most bytes read past the copy (the walk's limit) */
	struct hindex refused_pids;	/* pid → -errno of its refusal */
	unsigned refused;
	uint64_t before_start;
	uint64_t events_closed;		/* events of exited threads closed (sampler_close_exited()) */
	uint64_t next_close_ns;
	char error[256];
};

/* ---- latency histogram: bucket of v is 8 × (its power of two) + its next 3 bits ---- */

static unsigned lat_bucket(uint64_t v)
{
	if (v < LAT_SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	unsigned b = (msb - 2) * LAT_SUB + (unsigned)((v >> (msb - 3)) & (LAT_SUB - 1));
	return b < LAT_BUCKETS ? b : LAT_BUCKETS - 1;
}

/* The largest value of bucket b. */
static uint64_t lat_bucket_top(unsigned b)
{
	if (b < LAT_SUB)
		return b;
	unsigned msb = b / LAT_SUB + 2, sub = b % LAT_SUB;
	return ((uint64_t)(LAT_SUB + sub + 1) << (msb - 3)) - 1;
}

static uint64_t lat_percentile(const uint64_t *hist, uint64_t total, uint64_t num, uint64_t den, uint64_t max)
{
	uint64_t want = (total * num + den - 1) / den, seen = 0;
	for (unsigned b = 0; b < LAT_BUCKETS && total; b++) {
		seen += hist[b];
		if (seen >= want)
			return lat_bucket_top(b) < max ? lat_bucket_top(b) : max;
	}
	return 0;
}

/* ---- the queue (one producer, one consumer) ---- */

/* A decoded record: its sample (ps) or switch (sw), the other NULL. */
struct decoded {
	const struct perf_event_header *rec;
	const struct perf_sample *ps;
	const struct perf_switch *sw;
};

/* What a reader read of a sample besides its record. */
struct sample_reads {
	const struct correlate_read *ctx;
	const struct go_stack_snapshot *go;
	const struct pyframe *py;
	unsigned npy;
	int py_read;
};

static int queue_push(struct queue *q, const struct decoded *d, const struct sample_reads *sr, uint64_t read_ns,
		      uint64_t order_ns)
{
	const struct perf_event_header *rec = d->rec;
	const struct go_stack_snapshot *go = sr->go;
	uint64_t rec_len = (rec->size + 7) & ~7ull, go_len = (go->size + 7) & ~7ull;
	uint64_t need = sizeof(struct qentry) + rec_len + go_len + sr->npy * sizeof(struct pyframe);
	uint64_t head = q->head, tail = __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE);
	uint64_t off = head & (q->size - 1), room = q->size - off;
	if (room < need) {
		if (head + room + need - tail > q->size)
			return -ENOSPC;
		((struct qentry *)(q->buf + off))->len = QUEUE_SKIP;
		head += room;
		off = 0;
	} else if (head + need - tail > q->size) {
		return -ENOSPC;
	}
	struct qentry *e = (struct qentry *)(q->buf + off);
	e->len = (uint32_t)need;
	e->rec_len = (uint32_t)rec_len;
	e->read_ns = read_ns;
	e->order_ns = order_ns;
	e->ctx = *sr->ctx;
	e->go = *go;
	e->npy = sr->npy;
	e->py_read = sr->py_read;
	memcpy(e + 1, rec, rec->size);
	e->is_sample = d->ps != NULL;
	if (d->ps) {
		e->decoded.sample = *d->ps;
		perf_sample_rebase(&e->decoded.sample, rec, e + 1);
	} else {
		e->decoded.sw = *d->sw;
	}
	if (go->size)
		memcpy((uint8_t *)(e + 1) + rec_len, go->bytes, go->size);
	if (sr->npy)
		memcpy((uint8_t *)(e + 1) + rec_len + go_len, sr->py, sr->npy * sizeof(struct pyframe));
	__atomic_store_n(&q->head, head + need, __ATOMIC_RELEASE);
	return 0;
}

/* The entry at the queue's tail, skip markers passed, or NULL when it has none before drain_head. */
static struct qentry *queue_peek(struct queue *q)
{
	while (q->tail < q->drain_head) {
		uint64_t off = q->tail & (q->size - 1);
		struct qentry *e = (struct qentry *)(q->buf + off);
		if (e->len != QUEUE_SKIP)
			return e;
		__atomic_store_n(&q->tail, q->tail + (q->size - off), __ATOMIC_RELEASE);
	}
	return NULL;
}

static void queue_deliver(struct queue *q, struct qentry *e, fastlane_fn fn, void *ctx)
{
	e->go.bytes = (const uint8_t *)(e + 1) + e->rec_len;
	struct pyframe *py = (struct pyframe *)((uint8_t *)(e + 1) + e->rec_len + ((e->go.size + 7) & ~7ull));
	struct fastlane_entry fe = { .rec = (const void *)(e + 1), .ctx = &e->ctx, .read_ns = e->read_ns,
				     .go = &e->go, .off_cpu = e->is_sample && e->order_ns != 0,
				     .sample = e->is_sample ? &e->decoded.sample : NULL,
				     .sw = e->is_sample ? NULL : &e->decoded.sw, .py = py, .npy = e->npy,
				     .py_read = e->py_read };
	uint32_t len = e->len;
	fn(ctx, &fe);
	for (uint32_t i = 0; i < e->npy; i++)
		pycode_release(py[i].code);	/* the entry's: whoever kept a frame took its own */
	__atomic_store_n(&q->tail, q->tail + len, __ATOMIC_RELEASE);
}

/* ---- a reader ---- */

static void count(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static void tell_main(struct reader *r)
{
	uint64_t used = r->q.head - __atomic_load_n(&r->q.tail, __ATOMIC_ACQUIRE), one = 1;
	if (used > r->q.size / 4 && !__atomic_exchange_n(&r->q.told, 1, __ATOMIC_ACQ_REL) &&
	    write(r->f->o.wake_fd, &one, sizeof(one)) != sizeof(one))
		__atomic_store_n(&r->q.told, 0, __ATOMIC_RELEASE);
}

/* What to read of pid's samples (enum fastlane_kind) and how far past the copy for FASTLANE_DEEP. */
static unsigned kinds_of(struct fastlane *f, pid_t pid, size_t *deep)
{
	uint64_t k = 0;
	pthread_mutex_lock(&f->lock);
	hindex_u32_get(&f->kinds, (uint32_t)pid, &k);
	pthread_mutex_unlock(&f->lock);
	*deep = k >> 8 ? (size_t)(k >> 8) : FASTLANE_DEEP_READ;
	return (unsigned)(k & 0xff);
}

/* A Go sample: the goroutine behind g0, or the rest of a deep goroutine's stack (go_stack_snapshot()). Returns
 * -ESRCH when the sample names no goroutine (Go < 1.17 has no g register). */
static int read_goroutine(struct reader *r, const struct perf_sample *ps, struct go_stack_snapshot *go)
{
	uint64_t copy_end = ps->regs[UNWIND_REG_SP] + (ps->stack ? ps->stack_size : 0);
	pid_t pid = (pid_t)ps->pid;
	struct unwind_memory mem = procmem_reader(&pid);
	int rc = go_stack_snapshot(r->gs, &mem, ps->regs[UNWIND_REG_R14], copy_end, go);
	if (rc < 0)
		go->kind = GO_STACK_SNAPSHOT_NONE;
	if (go->kind == GO_STACK_SNAPSHOT_NONE)
		go->size = 0;
	else
		count(&r->go_snapshots, 1);
	/* An entry must fit in a quarter of the queue: a larger snapshot is left to the main path. */
	if (go->size + SAMPLER_SCRATCH_SIZE + sizeof(struct qentry) > r->q.size / 4) {
		count(&r->go_too_large, 1);
		*go = (struct go_stack_snapshot){ .kind = GO_STACK_SNAPSHOT_NONE };
	}
	return rc;
}

/* A deep sample that is not Go: the stack past the copy, as far as the process's walks went (deep bytes), up to
 * the first unmapped byte. */
static void read_deeper(struct reader *r, const struct perf_sample *ps, size_t deep, struct go_stack_snapshot *out)
{
	uint64_t copy_end = ps->regs[UNWIND_REG_SP] + (ps->stack ? ps->stack_size : 0);
	size_t len = deep < r->f->deep_max ? deep : r->f->deep_max;
	ssize_t n = copy_end ? procmem_read((pid_t)ps->pid, copy_end, r->deep, len) : -1;
	if (n <= 0)
		return;
	*out = (struct go_stack_snapshot){ .kind = GO_STACK_SNAPSHOT_EXTENSION, .addr = copy_end, .bytes = r->deep,
					  .size = (size_t)n };
	count(&r->go_snapshots, 1);
}

/* A CPython thread's Python frames, while it waits (pyframes.h): what the sample's eval frames stand for. */
static void read_python(struct reader *r, const struct perf_sample *ps, struct sample_reads *sr)
{
	uint64_t t0 = clock_mono_ns();
	int rc = pyframes_read(r->f->o.py, (pid_t)ps->pid, (pid_t)ps->tid, r->pyf, PYFRAMES_MAX_FRAMES, &sr->npy);
	sr->py_read = rc == 0 ? 1 : rc;
	count(&r->py_reads, 1);
	count(&r->py_ns, clock_mono_ns() - t0);
}

/* The read's latency, into the histogram and the maximum. */
static void count_read(struct reader *r, uint64_t lat)
{
	count(&r->samples, 1);
	count(&r->hist[lat_bucket(lat / 1000)], 1);
	if (lat > __atomic_load_n(&r->max_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&r->max_ns, lat, __ATOMIC_RELAXED);
}

/*
 * What must be read while the thread waits first (trace context, goroutine), then the copy for the main thread.
 * An off-CPU sample (a switch-out: fastlane.h) has the thread switched out already: its trace context is read
 * as it blocked, and only that (a blocked goroutine's stack does not move).
 */
static int on_sample(struct reader *r, const struct perf_event_header *rec, int off_cpu)
{
	struct perf_sample ps;
	struct correlate_read ctx = { .status = CORRELATE_READ_NOT_APM };
	struct go_stack_snapshot go = { .kind = GO_STACK_SNAPSHOT_NONE };
	if (perf_decode_sample(sampler_layout(r->f->sampler), rec, &ps) < 0)
		return 0;
	size_t deep;
	unsigned kinds = kinds_of(r->f, (pid_t)ps.pid, &deep);
	if (kinds & FASTLANE_APM)
		correlate_reader_read(r->f->o.reader, (pid_t)ps.pid, (pid_t)ps.tid, &ctx);
	uint64_t now = clock_mono_ns(), lat = now > ps.time ? now - ps.time : 0;
	int user = ps.regs_abi != PERF_SAMPLE_REGS_ABI_NONE && !off_cpu, rc = -ESRCH;
	if ((kinds & FASTLANE_GO) && r->gs && user)
		rc = read_goroutine(r, &ps, &go);
	/* Not Go, or a Go without a g register: what can be read is the stack past the copy. */
	if ((kinds & (FASTLANE_DEEP | FASTLANE_GO)) && user && rc == -ESRCH)
		read_deeper(r, &ps, deep, &go);
	struct sample_reads sr = { .ctx = &ctx, .go = &go, .py = r->pyf };
	if ((kinds & FASTLANE_PYTHON) && r->pyf && user)
		read_python(r, &ps, &sr);
	if (ctx.status == CORRELATE_READ_NO_THREAD && !ctx.traced)
		r->detaching = 1;
	count_read(r, lat);
	count(&r->off_cpu, (uint64_t)off_cpu);
	if (queue_push(&r->q, &(struct decoded){ .rec = rec, .ps = &ps }, &sr, now, off_cpu ? ps.time : 0) < 0) {
		count(&r->queue_full, 1);
		for (unsigned i = 0; i < sr.npy; i++)
			pycode_release(r->pyf[i].code);
	}
	tell_main(r);
	return 0;
}

/* A switch record: a switch-out says whether its sample's thread was preempted, a switch-in ends an interval off
 * CPU; handed over in time order. */
static int on_switch(struct reader *r, const struct perf_event_header *rec)
{
	struct perf_switch sw;
	struct correlate_read ctx = { .status = CORRELATE_READ_NOT_APM };
	struct go_stack_snapshot go = { .kind = GO_STACK_SNAPSHOT_NONE };
	if (perf_decode_switch(sampler_layout(r->f->sampler), rec, &sw) < 0)
		return 0;
	struct sample_reads sr = { .ctx = &ctx, .go = &go };
	if (queue_push(&r->q, &(struct decoded){ .rec = rec, .sw = &sw }, &sr, sw.time, sw.time) < 0)
		count(&r->queue_full, 1);
	tell_main(r);
	return 0;
}

static int on_record(void *arg, const struct perf_event_header *rec, const struct record_origin *origin)
{
	struct reader *r = arg;
	struct perf_lost l;
	uint64_t n;
	if (rec->type == PERF_RECORD_SAMPLE)
		return on_sample(r, rec, origin->kind == RECORD_OFF_CPU);
	if (rec->type == PERF_RECORD_SWITCH || rec->type == PERF_RECORD_SWITCH_CPU_WIDE)
		return on_switch(r, rec);
	if (rec->type == PERF_RECORD_LOST && perf_decode_lost(rec, &l) == 0)
		count(&r->kernel_lost, l.lost);
	else if (rec->type == PERF_RECORD_LOST_SAMPLES && perf_decode_lost_samples(rec, &n) == 0)
		count(&r->kernel_lost, n);
	return 0;
}

/* On its CPU, ahead of ordinary threads if permitted: then it preempts the sampled thread on that CPU. */
static void place(struct reader *r)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(r->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set); /* refused in a narrower cpuset: it then runs anywhere */
	struct sched_param sp = { .sched_priority = FASTLANE_RT_PRIORITY };
	if (r->f->o.realtime && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
		__atomic_store_n(&r->realtime, 1, __ATOMIC_RELAXED);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	place(r);
	struct pollfd p[3] = { { .fd = r->stop_fd, .events = POLLIN }, { .fd = r->ring_fd, .events = POLLIN },
			       { .fd = r->off_fd, .events = POLLIN } };
	int ncpus = sampler_ncpus(r->f->sampler);
	for (;;) {
		/* Woken by each sample; the timeout only bounds what a wakeup the reader missed would cost (a full
		 * ring wakes no one: the kernel writes nothing more into it). */
		int stop = poll(p, r->off_fd >= 0 ? 3 : 2, r->detaching ? DETACH_POLL_MS : READER_IDLE_MS) > 0 &&
			   p[0].revents;
		sampler_drain_ring(r->f->sampler, r->cpu, r->scratch, on_record, r);
		if (r->off_fd >= 0)
			sampler_drain_ring(r->f->sampler, ncpus + r->cpu, r->scratch, on_record, r);
		if (r->detaching)
			r->detaching = correlate_reader_poll(r->f->o.reader);
		if (stop)
			break;
	}
	correlate_reader_thread_exit(r->f->o.reader);
	return NULL;
}

static int reader_init(struct fastlane *f, struct reader *r, int cpu, uint64_t qsize)
{
	r->f = f;
	r->cpu = cpu;
	r->ring_fd = sampler_ring_fd(f->sampler, cpu);
	r->off_fd = sampler_ring_fd(f->sampler, sampler_ncpus(f->sampler) + cpu);
	r->q.size = qsize;
	r->stop_fd = eventfd(0, EFD_CLOEXEC);
	r->scratch = malloc(SAMPLER_SCRATCH_SIZE);
	r->q.buf = malloc(qsize);
	struct go_stack_options go = { .max_stack = f->o.go_max_stack };
	if (f->o.go_max_stack && go_stack_new(&go, &r->gs) < 0)
		return -ENOMEM;
	if (!(r->deep = malloc(f->deep_max)))
		return -ENOMEM;
	if (f->o.py && !(r->pyf = calloc(PYFRAMES_MAX_FRAMES, sizeof(*r->pyf))))
		return -ENOMEM;
	return r->stop_fd >= 0 && r->scratch && r->q.buf ? 0 : -ENOMEM;
}

/* One reader per ring; signals stay with the main thread. */
static int start_readers(struct fastlane *f)
{
	int ncpus = sampler_ncpus(f->sampler), nrings = 0, err = 0;
	for (int cpu = 0; cpu < ncpus; cpu++)
		nrings += sampler_ring_fd(f->sampler, cpu) >= 0;
	uint64_t qsize = QUEUE_MIN_BYTES;
	while (qsize * 2 <= QUEUE_MAX_BYTES && qsize * 2 * (uint64_t)nrings <= QUEUE_TOTAL_BYTES)
		qsize *= 2;
	if (!(f->readers = calloc((size_t)nrings, sizeof(*f->readers))))
		return -ENOMEM;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (int cpu = 0; cpu < ncpus && !err; cpu++) {
		if (sampler_ring_fd(f->sampler, cpu) < 0)
			continue;
		struct reader *r = &f->readers[f->nreaders++];
		if ((err = reader_init(f, r, cpu, qsize)) == 0)
			err = -pthread_create(&r->thread, NULL, reader_main, r);
		r->started = err == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* ---- processes ---- */


static int make_sampler(struct fastlane *f)
{
	struct sampler_options so = f->o.sampler;
	so.low_latency = 1;
	so.samples_only = 1;
	/* so.off_cpu as the main sampler's: an APM thread's switch-outs are read here, its context as it blocked. */
	so.ring_pages = geteuid() == 0 ? RING_PAGES_ROOT : 0;
	return sampler_new(&so, &f->sampler);
}

/* Events on each thread of pid not opened yet (done: the tids opened, *ndone of them). */
static int open_threads(struct fastlane *f, pid_t pid, pid_t *tids, pid_t *done, unsigned *ndone)
{
	unsigned n = 0, ncpus = (unsigned)sampler_ncpus(f->sampler);
	for (int pass = 0, fresh = 1; pass < ADD_PASSES && fresh; pass++) {
		int err = proc_list_threads(pid, tids, MAX_THREADS, &n);
		if (err < 0)
			return err == -ENOENT ? -ESRCH : err;
		fresh = 0;
		for (unsigned i = 0; i < n; i++) {
			unsigned j = 0;
			while (j < *ndone && done[j] != tids[i])
				j++;
			if (j < *ndone || *ndone == MAX_THREADS)
				continue;
			if (sampler_nevents(f->sampler) + ncpus > f->o.max_events) {
				snprintf(f->error, sizeof(f->error), "more than %u per-thread events", f->o.max_events);
				return -E2BIG;
			}
			err = sampler_open_task(f->sampler, tids[i], SAMPLER_INHERIT_THREADS, 0);
			if (err < 0 && err != -ESRCH) {
				snprintf(f->error, sizeof(f->error), "%s", sampler_error(f->sampler));
				return err;
			}
			done[(*ndone)++] = tids[i];
			fresh = 1;
		}
	}
	return 0;
}

/* The readers serve pid for kinds from now on. */
static int set_kinds(struct fastlane *f, pid_t pid, unsigned kinds)
{
	uint64_t k = 0;
	pthread_mutex_lock(&f->lock);
	hindex_u32_get(&f->kinds, (uint32_t)pid, &k);
	int err = hindex_u32_put(&f->kinds, (uint32_t)pid, k | kinds);
	pthread_mutex_unlock(&f->lock);
	return err;
}

void fastlane_read_deeper(struct fastlane *f, pid_t pid, size_t bytes)
{
	uint64_t k;
	bytes = bytes < f->deep_max ? bytes : f->deep_max;
	pthread_mutex_lock(&f->lock);
	if (hindex_u32_get(&f->kinds, (uint32_t)pid, &k) && (k >> 8 ? k >> 8 : FASTLANE_DEEP_READ) < bytes)
		hindex_u32_put(&f->kinds, (uint32_t)pid, (k & 0xff) | (uint64_t)bytes << 8);
	pthread_mutex_unlock(&f->lock);
}

int fastlane_add_process(struct fastlane *f, pid_t pid, unsigned kinds, uint64_t *start_ns)
{
	uint64_t v;
	if (!hindex_u32_get(&f->end_ns, (uint32_t)pid, &v) && hindex_u32_get(&f->start_ns, (uint32_t)pid, start_ns))
		return set_kinds(f, pid, kinds);
	if (hindex_u32_get(&f->refused_pids, (uint32_t)pid, &v))
		return -EALREADY;
	if (f->stopped)
		return -ESHUTDOWN;
	/* Before the events exist: the readers know what to read for the first sample. */
	int err = set_kinds(f, pid, kinds);
	if (err < 0)
		return err;
	err = f->sampler ? 0 : make_sampler(f);
	pid_t *tids = malloc(MAX_THREADS * sizeof(*tids)), *done = malloc(MAX_THREADS * sizeof(*done));
	unsigned ndone = 0;
	if (!err)
		err = tids && done ? open_threads(f, pid, tids, done, &ndone) : -ENOMEM;
	/* Unprivileged, the rings share perf_event_mlock_kb with the main sampler's: a ring must hold a few
	 * samples, or every one would be lost. */
	uint64_t ring = f->sampler ? sampler_ring_bytes(f->sampler) : 0, sample = f->o.sampler.stack_size + 4096;
	if (!err && ring < 4 * sample) {
		snprintf(f->error, sizeof(f->error), "its rings got %llu KiB, too small for samples of %llu KiB "
			 "(raise kernel.perf_event_mlock_kb)", (unsigned long long)ring >> 10,
			 (unsigned long long)sample >> 10);
		err = -ENOBUFS;
	}
	free(tids);
	free(done);
	/* Events already opened on a refused process stay until its threads exit (fastlane_reap()): harmless, its
	 * samples are not dropped from the main rings, and the fast lane's are counted as before its start. */
	if (!err && !f->paused && (err = sampler_enable(f->sampler)) < 0)
		snprintf(f->error, sizeof(f->error), "%s", sampler_error(f->sampler));
	if (!err && !f->readers && (err = start_readers(f)) < 0)
		snprintf(f->error, sizeof(f->error), "cannot start the readers: %s", strerror(-err));
	if (err < 0) {
		f->refused++;
		hindex_u32_put(&f->refused_pids, (uint32_t)pid, (uint64_t)(int64_t)err);
		pthread_mutex_lock(&f->lock);
		hindex_u32_del(&f->kinds, (uint32_t)pid);
		pthread_mutex_unlock(&f->lock);
		return err;
	}
	*start_ns = clock_mono_ns();
	hindex_u32_del(&f->end_ns, (uint32_t)pid);
	return hindex_u32_put(&f->start_ns, (uint32_t)pid, *start_ns);
}

int fastlane_covers(const struct fastlane *f, pid_t pid, uint64_t time_ns)
{
	uint64_t start, end;
	if (!hindex_count(&f->start_ns) || !hindex_u32_get(&f->start_ns, (uint32_t)pid, &start) || time_ns < start)
		return 0;
	return !hindex_u32_get(&f->end_ns, (uint32_t)pid, &end) || time_ns < end;
}

void fastlane_on_exit(struct fastlane *f, pid_t pid, uint64_t time_ns)
{
	uint64_t v;
	if (hindex_u32_get(&f->start_ns, (uint32_t)pid, &v))
		hindex_u32_put(&f->end_ns, (uint32_t)pid, time_ns ? time_ns : clock_mono_ns());
}

void fastlane_reap(struct fastlane *f, uint64_t now_ns)
{
	/* Each thread's events go with it: a process that took the lane costs nothing once it has exited, and its
	 * budget of max_events comes back. */
	if (f->sampler && now_ns >= f->next_close_ns) {
		f->events_closed += sampler_close_exited(f->sampler);
		f->next_close_ns = now_ns + CLOSE_EVERY_NS;
	}
	uint32_t old[64];
	unsigned n = 0;
	uint32_t pid;
	uint64_t end;
	for (uint32_t pos = 0; n < 64 && hindex_u32_next(&f->end_ns, &pos, &pid, &end);)
		if (end + REAP_AFTER_NS < now_ns)
			old[n++] = pid;
	for (unsigned i = 0; i < n; i++) {
		hindex_u32_del(&f->end_ns, old[i]);
		hindex_u32_del(&f->start_ns, old[i]);
		hindex_u32_del(&f->refused_pids, old[i]);
		pthread_mutex_lock(&f->lock);
		hindex_u32_del(&f->kinds, old[i]);
		pthread_mutex_unlock(&f->lock);
	}
}

/* ---- main thread ---- */

struct drain_ctx {
	struct fastlane *f;
	fastlane_fn fn;
	void *ctx;
};

/* The fast lane's samples from before a process's start (or of a process it refused) are the main rings'. */
static void filter_entry(void *arg, const struct fastlane_entry *e)
{
	struct drain_ctx *d = arg;
	uint32_t pid = e->sample ? e->sample->pid : e->sw->pid;
	uint64_t start, time = e->sample ? e->sample->time : e->sw->time;
	if (!hindex_u32_get(&d->f->start_ns, pid, &start) || time < start) {
		d->f->before_start++;
		return;
	}
	d->fn(d->ctx, e);
}

/* The queue whose next entry comes first: an entry without an order first, then the oldest off-CPU record up
 * to cutoff_ns. NULL when none is due. */
static struct queue *next_queue(struct fastlane *f, uint64_t cutoff_ns, struct qentry **out)
{
	struct queue *best = NULL;
	for (unsigned i = 0; i < f->nreaders; i++) {
		struct qentry *e = queue_peek(&f->readers[i].q);
		if (!e || e->order_ns > cutoff_ns || (best && e->order_ns >= (*out)->order_ns))
			continue;
		best = &f->readers[i].q;
		*out = e;
		if (!e->order_ns)
			break;
	}
	return best;
}

/*
 * The queues merged: off-CPU records (switch-outs and switch-ins, fastlane.h) in time order across the CPUs,
 * up to FASTLANE_ORDER_NS ago, which leaves a reader time to queue a switch-out whose switch-in another reader
 * queued already; once stopped, everything.
 */
int fastlane_drain(struct fastlane *f, fastlane_fn fn, void *ctx)
{
	struct drain_ctx d = { f, fn, ctx };
	uint64_t now = clock_mono_ns(), cutoff = f->stopped ? UINT64_MAX : now - FASTLANE_ORDER_NS;
	struct qentry *e = NULL;
	struct queue *q;
	int n = 0;
	for (unsigned i = 0; i < f->nreaders; i++)
		f->readers[i].q.drain_head = __atomic_load_n(&f->readers[i].q.head, __ATOMIC_ACQUIRE);
	while ((q = next_queue(f, cutoff, &e))) {
		/* The entries without an order that follow in q come next anyway (the queues before it have none at
		 * their tail): delivered without scanning every queue again for each. */
		do {
			queue_deliver(q, e, filter_entry, &d);
			n++;
		} while ((e = queue_peek(q)) && !e->order_ns);
	}
	for (unsigned i = 0; i < f->nreaders; i++)
		__atomic_store_n(&f->readers[i].q.told, 0, __ATOMIC_RELEASE);
	return n;
}

void fastlane_pause(struct fastlane *f, int paused)
{
	f->paused = paused;
	if (f->sampler && !f->stopped)
		paused ? sampler_disable(f->sampler) : sampler_enable(f->sampler);
}

void fastlane_stop(struct fastlane *f)
{
	uint64_t one = 1;
	if (f->stopped)
		return;
	if (f->sampler)
		sampler_disable(f->sampler);
	struct fastlane_stats st;
	fastlane_get_stats(f, &st); /* the readers' CPU time, while they are there to be asked */
	f->stopped = 1;
	for (unsigned i = 0; i < f->nreaders; i++)
		if (f->readers[i].started && write(f->readers[i].stop_fd, &one, sizeof(one)) != sizeof(one))
			pthread_cancel(f->readers[i].thread);
	for (unsigned i = 0; i < f->nreaders; i++)
		if (f->readers[i].started)
			pthread_join(f->readers[i].thread, NULL);
}

int fastlane_new(const struct fastlane_options *o, struct fastlane **out)
{
	struct fastlane *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->o = *o;
	if (!f->o.max_events)
		f->o.max_events = FASTLANE_DEFAULT_MAX_EVENTS;
	f->deep_max = o->deep_max > FASTLANE_DEEP_READ ? o->deep_max : FASTLANE_DEEP_READ;
	int err = pthread_mutex_init(&f->lock, NULL);
	if (err != 0) {
		free(f);
		return -err;
	}
	*out = f;
	return 0;
}

void fastlane_free(struct fastlane *f)
{
	if (!f)
		return;
	fastlane_stop(f);
	for (unsigned i = 0; i < f->nreaders; i++) {
		struct reader *r = &f->readers[i];
		if (r->stop_fd >= 0)
			close(r->stop_fd);
		free(r->scratch);
		free(r->q.buf);
		go_stack_free(r->gs);
		free(r->deep);
		free(r->pyf);
	}
	free(f->readers);
	sampler_free(f->sampler);
	hindex_free(&f->start_ns);
	hindex_free(&f->end_ns);
	hindex_free(&f->kinds);
	hindex_free(&f->refused_pids);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

const char *fastlane_error(const struct fastlane *f)
{
	return f->error;
}

const struct perf_layout *fastlane_layout(const struct fastlane *f)
{
	return f->sampler ? sampler_layout(f->sampler) : NULL;
}

void fastlane_get_stats(const struct fastlane *f, struct fastlane_stats *out)
{
	uint64_t hist[LAT_BUCKETS] = { 0 };
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < f->nreaders; i++) {
		struct reader *r = &f->readers[i];
		out->samples += __atomic_load_n(&r->samples, __ATOMIC_RELAXED);
		out->queue_full += __atomic_load_n(&r->queue_full, __ATOMIC_RELAXED);
		out->kernel_lost += __atomic_load_n(&r->kernel_lost, __ATOMIC_RELAXED);
		out->go_snapshots += __atomic_load_n(&r->go_snapshots, __ATOMIC_RELAXED);
		out->go_too_large += __atomic_load_n(&r->go_too_large, __ATOMIC_RELAXED);
		out->off_cpu_samples += __atomic_load_n(&r->off_cpu, __ATOMIC_RELAXED);
		out->python_reads += __atomic_load_n(&r->py_reads, __ATOMIC_RELAXED);
		out->python_read_ns += __atomic_load_n(&r->py_ns, __ATOMIC_RELAXED);
		uint64_t m = __atomic_load_n(&r->max_ns, __ATOMIC_RELAXED);
		out->read_max_ns = m > out->read_max_ns ? m : out->read_max_ns;
		for (unsigned b = 0; b < LAT_BUCKETS; b++)
			hist[b] += __atomic_load_n(&r->hist[b], __ATOMIC_RELAXED);
		out->realtime += __atomic_load_n(&r->realtime, __ATOMIC_RELAXED);
	}
	for (unsigned b = 0; b < LAT_BUCKETS; b++)
		out->reads += hist[b];
	/* The histogram is in microseconds, its percentiles bucket tops (at most 12.5 % above the value). */
	uint64_t max_us = out->read_max_ns / 1000;
	out->read_p50_ns = lat_percentile(hist, out->reads, 50, 100, max_us) * 1000;
	out->read_p99_ns = lat_percentile(hist, out->reads, 99, 100, max_us) * 1000;
	out->before_start = f->before_start;
	out->processes = hindex_count(&f->start_ns) - hindex_count(&f->end_ns);
	out->events = f->sampler ? sampler_nevents(f->sampler) : 0;
	out->events_closed = f->events_closed;
	out->off_cpu_lost = f->sampler ? sampler_off_cpu_lost(f->sampler) : 0;
	out->refused = f->refused;
	out->readers = f->nreaders;
	for (unsigned i = 0; i < f->nreaders; i++) {
		clockid_t clk;
		uint64_t ns;
		if (f->readers[i].started && !f->stopped && pthread_getcpuclockid(f->readers[i].thread, &clk) == 0 &&
		    (ns = clock_ns(clk)) != 0)
			f->readers[i].cpu_ns = ns;
		out->readers_cpu_ns += f->readers[i].cpu_ns;
	}
}
