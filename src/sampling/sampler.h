/*
 * sampler.h — perf_event_open sampling of user registers and user stacks, with side-band records.
 *
 * A sampler owns one ring buffer per online CPU. Each ring belongs to a "holder": a disabled dummy event on
 * hostprof's own thread on that CPU, which never hangs up (an event whose task exited makes poll() report
 * POLLHUP for ever). Events are opened per CPU either for the whole system or for given threads (inherit
 * follows their future threads, and children unless SAMPLER_INHERIT_THREADS); every event of one CPU writes
 * into that CPU's ring (PERF_EVENT_IOC_SET_OUTPUT), so the number of rings stays at the number of CPUs however
 * many threads are followed (beside them, off-CPU rings and thread-copy rings, one per CPU each, see below). Records are handed to a callback in place — copied only when one wraps around
 * the end of the ring — and released when the callback returns.
 *
 * Wakeups (why hostprof is cheap per sample): by default the kernel wakes the reader when a ring is half
 * full (a quarter, for the small rings of unprivileged users: room for a late reader), and the caller's poll
 * timeout drains what a slow ring holds (see sampler_wait()). Root's rings hold ~200 samples (4 MiB for a
 * 16 KiB stack copy, 2 to 8 MiB): a wakeup per ~100 samples at most, and the other half, ~100 ms at 999 Hz,
 * is room for a burst while the reader gets scheduled. low_latency wakes the reader at every sample instead:
 * only for the APM fast lane (fastlane.h), whose trace-context read must follow the sample at once.
 *
 * Off-CPU events (off_cpu): next to each sampling event, a software context-switches event on the same task or
 * CPU, sampling every switch (period 1). The kernel takes that sample as the task that is switching out leaves
 * the CPU, so its user registers and stack copy are that task's, as it blocks or is preempted, and its kernel
 * call chain is the path into the scheduler (futex_wait, do_nanosleep, ...: why it waits). The same event asks
 * for switch records (attr.context_switch): the switch-out record follows its sample and says whether the task
 * was preempted (PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: still runnable) or blocked, the switch-in record when it
 * runs again. No tracefs, no tracepoint: what sched:sched_switch would add (prev_state's sleep kind) is
 * covered by the kernel frames. The events write into off-CPU rings of their own, one per CPU beside the CPU
 * ring (off_cpu_ring_pages): a flood of switches (tens of thousands a second) fills those and loses off-CPU
 * samples only, which the sampler counts apart (sampler_off_cpu_lost(): the off-CPU rings' loss records are not
 * delivered), never CPU samples. sampler_drain() merges both kinds of rings in time order and tells the callback
 * which kind each record came from: an off-CPU ring's samples are switch-outs. Both events ask for the same
 * sample_type, so one layout decodes every record; the off-CPU stack copy may be smaller
 * (off_cpu_stack_size).
 * The kernel takes a switch's sample with its own registers (in the scheduler), so exclude_kernel would drop
 * every one: the off-CPU event needs kernel sampling, which root has, and other users where
 * kernel.perf_event_paranoid is 1 or less. Where it is refused (paranoid 2), the off-CPU event is a dummy event
 * that asks only for the switch records: every interval off CPU is still seen and timed, without the kernel's
 * sample of it (sampler_off_cpu_samples() says which; sampler_note() tells the user).
 *
 * Errors: negative errno, with a one-line explanation in the sampler's message buffer (sampler_error()).
 * Threads: one thread calls everything, except that once the rings exist (after the first open) another
 * thread may wait on and drain a ring with sampler_ring_fd()/sampler_drain_ring() while this one opens
 * more events: a ring's buffer and holder never change after their creation.
 */
#ifndef HOSTPROF_SAMPLER_H
#define HOSTPROF_SAMPLER_H

#include <linux/perf_event.h>
#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/sampling/perf_record.h"
#include "src/sampling/record_source.h"

#define SAMPLER_DEFAULT_STACK 16384
#define SAMPLER_MAX_STACK 65528

struct sampler_options {
	const char *event;	/* "cpu-clock" (default), "task-clock", "cycles", "instructions", ... */
	unsigned freq_hz;
	uint32_t stack_size;	/* bytes of user stack per sample: multiple of 8, <= SAMPLER_MAX_STACK */
	int kernel;		/* also sample kernel mode and ask for kernel callchains, where permitted */
	unsigned ring_pages;	/* data pages per CPU ring, a power of two; 0 = choose (~200 samples for root,
				 * what perf_event_mlock_kb allows for others) */
	int fp_chain;		/* also have the kernel walk the user frame-pointer chain at each sample (the user
				 * part of PERF_SAMPLE_CALLCHAIN): what the stack was at the sample, for walks the
				 * stack copy cannot finish (unwind_deltas.h) */
	int low_latency;	/* wake the reader at every sample instead of when half a ring is full: what
				 * must be read from a process while the sample is fresh (APM trace context) is
				 * read at once, at the cost of a wakeup per sample */
	int samples_only;	/* no side-band records (mmap, comm, fork/exit): another sampler that follows
				 * the same threads already has them */
	int off_cpu;		/* also sample every switch-out of the followed tasks (context-switches, period 1:
				 * the same registers and stack copy), with PERF_RECORD_SWITCH records
				 * (attr.context_switch) for preempted or blocked and the switch-ins; see "Off-CPU
				 * events" above */
	uint32_t off_cpu_stack_size;	/* bytes of user stack per off-CPU sample; 0: stack_size */
	unsigned off_cpu_ring_pages;	/* data pages per off-CPU ring, a power of two; 0 = choose (~512 off-CPU
					 * samples for root) */
};

/* What sampler_open_task()'s events follow besides the thread itself. */
enum sampler_inherit {
	SAMPLER_INHERIT_NONE,
	SAMPLER_INHERIT_ALL,		/* threads it creates and child processes (and theirs) */
	SAMPLER_INHERIT_THREADS,	/* threads only (inherit_thread, Linux 5.13): -EOPNOTSUPP if refused */
};

struct sampler;

/* Records are delivered with a record_fn (record_source.h): the origin of an off-CPU ring's records has kind
 * RECORD_OFF_CPU (its samples are switch-outs: see Off-CPU events above), the others RECORD_CPU. */

/* o is copied; nothing is opened yet. Returns 0 and *out (free with sampler_free()), -EINVAL (stack_size 0, it or
 * off_cpu_stack_size not a multiple of 8 or over SAMPLER_MAX_STACK), -ENOENT (unknown event) or -ENOMEM; *out is set only on success. */
int sampler_new(const struct sampler_options *o, struct sampler **out);
void sampler_free(struct sampler *s);

/* Open one event per CPU following every task (root, or perf_event_paranoid <= 0). */
int sampler_open_system(struct sampler *s);
/* Open one event per CPU for thread tid (inherit: enum sampler_inherit); enable_on_exec waits for exec. */
int sampler_open_task(struct sampler *s, pid_t tid, int inherit, int enable_on_exec);

/*
 * Close the events of tasks that are gone: an event whose task exited and which has no inherited event left on a
 * thread still running, which the kernel reports as POLLHUP on an event writing into a ring (a thread that made
 * threads keeps its event while one of them runs). Their records are in the rings already. A long-lived sampler
 * of threads that come and go (the fast lane) calls it now and then, or their descriptors pile up. Returns how
 * many were closed.
 */
unsigned sampler_close_exited(struct sampler *s);
/*
 * A thread copy: one event per CPU on thread tid alone (no inheritance, no side-band records) that copies
 * stack_size bytes of its stack per sample, where the sampler's own events copy opts.stack_size. Its records come
 * through thread-copy rings of their own, one per CPU (made at the first call, batched as the CPU rings are),
 * merged into sampler_drain()'s time order with origin.thread_copy set. The thread is then sampled twice, by these
 * events and by the sampler's: the caller keeps one of the two (the pipeline: thread_copies.h). Opened enabled
 * unless sampler_disable() was the last call; closed with the others, or by sampler_close_exited() once the
 * thread exited. After the first open only (-EINVAL before, or for a bad size); -ESRCH if tid is gone; -ENOSPC
 * where the rings could hold only a few such samples (an unprivileged user's perf_event_mlock_kb); all CPUs or
 * none.
 */
int sampler_open_thread_copy(struct sampler *s, pid_t tid, uint32_t stack_size);
/* Close tid's thread copy, whose thread lives on: its records already written stay in the thread-copy rings, to
 * be drained (and dropped by the caller). Returns how many events were closed (0: tid had none). */
unsigned sampler_close_thread_copy(struct sampler *s, pid_t tid);

int sampler_enable(struct sampler *s);
int sampler_disable(struct sampler *s);

/*
 * Sleep until a ring wants reading (half full, or a sample in low-latency mode), one of the caller's nextra
 * file descriptors is ready (their revents are set), a signal arrives, or timeout_ms passes (-1: no limit).
 * Returns 1 if a ring woke it, 0 otherwise, or a negative errno (never -EINTR: a signal is a normal wake).
 */
int sampler_wait(struct sampler *s, int timeout_ms, struct pollfd *extra, unsigned nextra);
/* Deliver every complete record of every ring, merged in time order across the rings. Returns records
 * delivered. */
int sampler_drain(struct sampler *s, record_fn fn, void *ctx);
/* sampler_wait() up to timeout_ms (0: not at all), then sampler_drain(). */
int sampler_read(struct sampler *s, int timeout_ms, record_fn fn, void *ctx);
/* The sampler as the pipeline's source (record_source.h): sampler_wait(), sampler_drain(), and stop turns the
 * events off (sampler_disable()). Borrowed: valid while s is. */
void sampler_source(struct sampler *s, struct record_source *out);

/* Per-ring access for a reader on another thread (see Threads above). Ring cpu is that CPU's ring, ring
 * ncpus + cpu its off-CPU ring (off_cpu only); sampler_nrings() is ncpus or 2 × ncpus. */
int sampler_ncpus(const struct sampler *s);
int sampler_nrings(const struct sampler *s);
/* The pollable descriptor of a ring, -1 if its CPU has none. */
int sampler_ring_fd(const struct sampler *s, int ring);
/* Drain one ring; scratch (SAMPLER_SCRATCH_SIZE bytes, the caller's) takes a record that wraps. */
#define SAMPLER_SCRATCH_SIZE 65536
int sampler_drain_ring(struct sampler *s, int ring, uint8_t *scratch, record_fn fn, void *ctx);
/* Off-CPU samples the kernel could not write into a full off-CPU ring (any thread may drain: atomic). */
uint64_t sampler_off_cpu_lost(const struct sampler *s);

const struct perf_layout *sampler_layout(const struct sampler *s);
/* The event actually sampled (after any fallback) and whether kernel mode is included. */
const char *sampler_event(const struct sampler *s);
int sampler_kernel_enabled(const struct sampler *s);
/* The options as settled by the first open (event after a fallback, kernel as permitted); out->event points
 * into the sampler. */
void sampler_get_options(const struct sampler *s, struct sampler_options *out);
/* The last error explanation, and a note about a fallback taken ("" if none). */
const char *sampler_error(const struct sampler *s);
const char *sampler_note(const struct sampler *s);
/* Bytes of data in each CPU's ring (0 before the first open). */
uint64_t sampler_ring_bytes(const struct sampler *s);
/* Number of open sampling events (ring holders not counted). */
unsigned sampler_nevents(const struct sampler *s);

/* With off_cpu, after the first open: 1 if switch-outs come with their sample (registers and stack copy), 0 if
 * kernel sampling was refused and only their switch records come (see Off-CPU events above). */
int sampler_off_cpu_samples(const struct sampler *s);

/* Parse an event name; returns 0 and the attr type/config, or -ENOENT. */
int sampler_parse_event(const char *name, uint32_t *type, uint64_t *config);

#endif
