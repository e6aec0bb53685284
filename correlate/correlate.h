/*
 * correlate.h — the host side of the Elastic APM ↔ profiler correlation protocol (man/hostprof-correlation.7).
 *
 * A process that maps a file named like `.../elastic-jvmti-linux-<arch>.so` runs an APM agent. For such a
 * process the library finds, in the agent library's ELF, the process-storage pointer and the TLSDESC GOT slot
 * of the thread-local pointer; reads each sampled thread's 37-byte block through /proc/PID/mem (the thread
 * pointer, fs_base, comes from a one-time ptrace stop of that thread); counts samples per (trace-id,
 * transaction-id, stack-trace ID); and sends the counts as datagrams to the agent's socket, reached under the
 * process's own root, after a registration message. See man/hostprof-correlation.7.
 *
 * Contract:
 * - Ownership: correlate_new() gives a handle the caller frees with correlate_free(); the library copies
 *   every string it is given (options, paths) and keeps nothing the caller owns.
 * - Lifetime: per-process state lives from the first correlate_on_mapping() of an agent library until
 *   correlate_on_exec() or correlate_on_process_exit() for that pid (or correlate_free()).
 * - Threads: the handle is not thread-safe: call correlate_* from one thread (the sampler's loop). The log
 *   and ready callbacks are called from inside these calls. The reading half, correlate_reader_* (below),
 *   is thread-safe, so that the trace context of a sample can be read first, on another thread, and the
 *   result handed to correlate_on_read() later. Reads and correlate_* calls may run at the same time.
 * - Errors: functions return 0 (or a count) on success and a negative errno on failure. Problems with a
 *   profiled process (hostile or broken ELF, process storage, socket, ptrace) are not errors of the call: they
 *   are logged once per process through the callback and the process is skipped or retried later.
 * - Time: every *_ns argument is CLOCK_MONOTONIC in nanoseconds. perf samples carry that clock only when the
 *   event is opened with use_clockid = 1, clockid = CLOCK_MONOTONIC; otherwise pass 0 ("now").
 * - Cost: correlate_on_sample() for a pid that is not an APM process is one hash lookup. For an APM thread it
 *   is three pread()s of /proc/PID/mem (TLS pointer, then the block twice to reject torn reads), plus one
 *   ptrace stop the first time the thread is seen (correlate_reader_read()). Everything else (ELF parsing,
 *   process storage, sockets, sending) happens in correlate_tick() and correlate_finish().
 * - Every action for a process (reading its storage, connecting, sending) is bound to the image (exec) it was
 *   attached in, and the agent's socket must be owned by the user the process was when it published the path:
 *   a process that execs, a setuid program say, is forgotten, never acted for (apm_image.c says how).
 * - The library never prints; it never leaves a thread stopped (ptrace SEIZE semantics: if hostprof dies,
 *   the kernel detaches).
 */
#ifndef HOSTPROF_CORRELATE_H
#define HOSTPROF_CORRELATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CORRELATE_TRACE_ID_LEN		16
#define CORRELATE_TRANSACTION_ID_LEN	8
#define CORRELATE_STACK_ID_LEN		16
#define CORRELATE_SERVICE_MAX		128	/* service name and environment, bytes */
#define CORRELATE_SOCKET_PATH_MAX	107	/* as the agent sees it (sun_path less its NUL) */
/* A registration datagram is 12 bytes plus the host id, and the Java agent reads at most 1024 bytes. */
#define CORRELATE_HOST_ID_MAX		1012

/*
 * Defaults (see correlate_options). The announced delay defaults to 2 × flush interval + 100 ms (300 ms with
 * the default flush): the library's own sample → received latency measured p50 45 ms, p99 95 ms, max 111 ms
 * (tests/unit/test_correlate_process.c), to which the caller adds how long it takes to count a sample (hostprof's
 * fast lane: at most one flush interval) and the agent its 20 ms socket poll; see man/hostprof-correlation.7.
 */
#define CORRELATE_DEFAULT_FLUSH_MS	100
#define CORRELATE_DEFAULT_DELAY_MS	(2 * CORRELATE_DEFAULT_FLUSH_MS + 100)
#define CORRELATE_DEFAULT_MAX_PENDING	16384

enum correlate_log_level {
	CORRELATE_LOG_DEBUG,	/* per-process progress: attached, registered */
	CORRELATE_LOG_INFO,	/* an APM process became ready, or went away with counts unsent */
	CORRELATE_LOG_WARN,	/* a process or thread is skipped: hostile/broken data, refused socket, ptrace */
	CORRELATE_LOG_ERROR,	/* the library itself failed (out of memory) */
};

/* msg is a single line without a trailing newline, valid only during the call. Strings the process supplied
 * (service, environment, socket and library paths) are escaped in it (src/base/escape.h); the reasons the
 * library gives may quote more of them, so the receiver prints msg through its escaping sink (src/base/log.h). */
typedef void (*correlate_log_fn)(void *arg, enum correlate_log_level level, const char *msg);

struct correlate_options {
	const char *host_id;		/* sent in registrations; NULL = "" (the agent then keeps its own) */
	uint32_t delay_ms;		/* samples-delay-ms announced; 0 = 2 × flush_interval_ms + 100 */
	uint32_t flush_interval_ms;	/* how often counts are sent; 0 = CORRELATE_DEFAULT_FLUSH_MS */
	uint32_t max_pending;		/* distinct unsent (trace, transaction, stack) keys per process;
					   0 = CORRELATE_DEFAULT_MAX_PENDING. Counts beyond are dropped (counted). */
	correlate_log_fn log;		/* NULL = silent */
	void *log_arg;
	/* Called (from correlate_tick()) when a process becomes ready: its samples can be correlated from now on,
	 * and their trace context is best read right after each sample (the caller's fast lane). NULL = none. */
	void (*ready)(void *arg, pid_t pid);
	void *ready_arg;
};

/* What a sample of an APM thread was doing; filled only when correlate_on_sample() returns 1. */
struct correlate_context {
	uint8_t trace_id[CORRELATE_TRACE_ID_LEN];		/* W3C trace id, raw bytes */
	uint8_t transaction_id[CORRELATE_TRANSACTION_ID_LEN];	/* local root span id, raw bytes */
	uint8_t span_id[CORRELATE_TRANSACTION_ID_LEN];		/* the active span (informational) */
	uint8_t trace_flags;
	char service_name[CORRELATE_SERVICE_MAX + 1];		/* NUL-terminated, "" if not published yet */
	char service_env[CORRELATE_SERVICE_MAX + 1];
};

#define CORRELATE_LATENCY_BUCKETS 256
#define CORRELATE_LATENCY_BUCKET_MS 5

struct correlate_stats {
	uint32_t apm_processes;		/* processes currently tracked as APM processes */
	uint32_t apm_ready;		/* ... of which correlation is possible (TLS offset known) */
	uint64_t samples;		/* correlate_on_sample() calls for APM processes */
	uint64_t samples_correlated;	/* ... that returned a transaction */
	uint64_t samples_unsendable;	/* correlated, but the process had no usable socket: not counted */
	uint64_t threads_traced;	/* thread pointers obtained with ptrace */
	uint64_t thread_trace_failures;	/* threads that could not be traced (skipped) */
	uint64_t registrations;		/* registration datagrams sent */
	uint64_t messages_sent;		/* correlation datagrams sent */
	uint64_t counts_sent;		/* sum of their counts */
	uint64_t counts_pending;	/* counted, not sent yet */
	uint64_t counts_dropped;	/* counted, never sent: process gone, or pending table full */
	uint64_t counts_unsent_at_exit;	/* ... of which still pending when correlate_finish() gave up */
	uint64_t eagain_retries;	/* sends that met a full receiver queue and were retried later */
	uint64_t send_errors;		/* other send failures (socket gone: reconnected and re-registered) */
	/*
	 * Sample → datagram latency, one entry per count sent, from the sample's time to the send of the
	 * datagram carrying it (an upper bound: a key's oldest pending sample is used for all its counts).
	 * Bucket i holds latencies in [i, i + 1) * CORRELATE_LATENCY_BUCKET_MS; the last bucket holds the rest.
	 * The percentiles are bucket upper bounds.
	 */
	uint64_t latency_hist[CORRELATE_LATENCY_BUCKETS];
	uint32_t latency_p50_ms, latency_p99_ms, latency_max_ms;
	uint32_t delay_ms;		/* the samples-delay-ms being announced */
};

struct correlate;

/* opts may be NULL (defaults); host_id is copied. Returns 0 and *out (free with correlate_free()), -EINVAL (host_id
 * too long or flush/delay out of range) or -ENOMEM; *out is set only on success. */
int correlate_new(const struct correlate_options *opts, struct correlate **out);
/* Closes sockets and files; pending counts are added to counts_dropped first. NULL is allowed. */
void correlate_free(struct correlate *c);

/* 1 if path (as in /proc/PID/maps, " (deleted)" allowed) names an APM agent library, else 0. */
int correlate_is_apm_library(const char *path);

/*
 * Tell the library about a file mapping of pid (from /proc/PID/maps or a perf MMAP2 record). Cheap for
 * non-agent paths; an agent library makes pid an APM process, attached in later correlate_tick() calls
 * (which read /proc/PID/maps for the current mappings of the library and of the dynamic loader, so the
 * caller need not report those in any order). Returns 1 if pid is (now) tracked as an APM process, 0 if
 * not, -EINVAL / -ENOMEM.
 */
int correlate_on_mapping(struct correlate *c, pid_t pid, uint64_t start, uint64_t end, uint64_t pgoff,
			 const char *path);

/*
 * A sample of thread tid of pid with the given stack-trace ID (src/profile/ids.h), taken at sample_time_ns (0 =
 * now). Returns 1 and fills out when the thread has an active transaction (the sample is then counted for
 * the agent), 0 when it has none or pid is not a (ready) APM process, negative errno on failure (-ENOMEM).
 * out may be NULL.
 */
int correlate_on_sample(struct correlate *c, pid_t pid, pid_t tid,
			const uint8_t stack_trace_id[CORRELATE_STACK_ID_LEN], uint64_t sample_time_ns,
			struct correlate_context *out);

/*
 * The reading half: a sampled thread's trace context, read from its memory at once. Thread-safe. A thread
 * pointer not known yet is found with a ptrace stop of the thread by the calling thread (at most 50 ms; a
 * stop that takes longer is finished later by correlate_reader_poll() on that same thread, as ptrace
 * requires). Failures are returned in the result, never logged here: correlate_on_read() logs and counts
 * them.
 */
struct correlate_reader;

enum correlate_read_status {
	CORRELATE_READ_NOT_APM,		/* pid is not a ready APM process (yet) */
	CORRELATE_READ_NO_THREAD,	/* the thread pointer is not known (being found, or ptrace failed) */
	CORRELATE_READ_NONE,		/* read: no active transaction */
	CORRELATE_READ_ACTIVE,		/* read: the trace context below */
	CORRELATE_READ_FAILED,		/* reading the thread's memory failed (err) */
	CORRELATE_READ_GONE,		/* the process's address space is gone */
};

struct correlate_read {
	uint8_t status;		/* enum correlate_read_status */
	int8_t traced;		/* 1: the thread pointer was found by a ptrace stop in this read; -1: that failed */
	int err;		/* errno of a failure (status FAILED, or traced -1) */
	uint64_t tls_addr, block_addr;	/* where it read (for messages) */
	uint8_t trace_id[CORRELATE_TRACE_ID_LEN];
	uint8_t transaction_id[CORRELATE_TRANSACTION_ID_LEN];
	uint8_t span_id[CORRELATE_TRANSACTION_ID_LEN];
	uint8_t trace_flags;
};

/* The handle's reader, valid as long as the handle. */
struct correlate_reader *correlate_get_reader(struct correlate *c);
/* Read thread tid of pid now. Returns 1 (status ACTIVE), 0 (anything else: see out->status), -EINVAL. */
int correlate_reader_read(struct correlate_reader *r, pid_t pid, pid_t tid, struct correlate_read *out);
/* Detach threads the calling thread left seized; 1 while some remain (call again within ~20 ms). */
int correlate_reader_poll(struct correlate_reader *r);
/* Before a thread that read ends: a bounded last chance (100 ms) to detach what it left seized. */
void correlate_reader_thread_exit(struct correlate_reader *r);

/*
 * A sample whose context was read earlier (correlate_reader_read(), rd): counted for the agent as
 * correlate_on_sample() would, with the same return value and out.
 */
int correlate_on_read(struct correlate *c, pid_t pid, pid_t tid, const struct correlate_read *rd,
		      const uint8_t stack_trace_id[CORRELATE_STACK_ID_LEN], uint64_t sample_time_ns,
		      struct correlate_context *out);

/* 1 if pid is a ready APM process (its samples can be correlated), else 0. One hash lookup. */
int correlate_is_ready(const struct correlate *c, pid_t pid);

/* Forget a thread's cached thread pointer (perf EXIT record of a thread). */
void correlate_on_thread_exit(struct correlate *c, pid_t pid, pid_t tid);
/* pid exec'd: its address space is new. Forgets everything about pid (unsent counts are dropped). */
void correlate_on_exec(struct correlate *c, pid_t pid);
/* pid exited: flushes what it can, then forgets pid (unsent counts are dropped and counted). */
void correlate_on_process_exit(struct correlate *c, pid_t pid);

/*
 * Do the due work: attach newly seen APM processes, retry those not ready (process storage not published
 * yet, socket not there), send registrations and the counts of every process whose flush is due, retry
 * sends that met a full queue. Call it at least every flush interval; more often makes retries prompter.
 * Returns the number of milliseconds until it next has work (the caller's poll timeout), or negative errno.
 */
int correlate_tick(struct correlate *c, uint64_t now_ns);
/* With no APM process tracked, correlate_tick() asks to be called again after at most this long. */
#define CORRELATE_IDLE_MS 60000

/*
 * The end of a run: connect and register where possible and send every pending count, retrying a full
 * receiver queue every 20 ms (the agents' poll) for at most budget_ms (the announced delay is the natural
 * bound: later counts are useless to the agent). What is still unsent is counted in counts_dropped and
 * counts_unsent_at_exit, and logged. Returns the number of counts left unsent.
 */
uint64_t correlate_finish(struct correlate *c, uint32_t budget_ms);

/* The samples-delay-ms announced to agents. */
uint32_t correlate_delay_ms(const struct correlate *c);

/* Snapshot of the counters; returns 0. */
int correlate_stats(const struct correlate *c, struct correlate_stats *out);

#endif
