/*
 * sampler.h — perf_event_open sampling of user registers and user stacks, with side-band records.
 *
 * A sampler owns one ring buffer per CPU. Events are opened per CPU either for the whole system or for given
 * threads (inherit follows their future children and threads); all events of one CPU write into that CPU's
 * ring (PERF_EVENT_IOC_SET_OUTPUT), so the number of rings stays at the number of CPUs however many threads
 * are followed. sampler_read() hands each record to a callback in place — copied only when it wraps around
 * the end of the ring — and releases it when the callback returns.
 *
 * Errors: negative errno, with a one-line explanation in the sampler's message buffer (sampler_error()).
 * Not thread-safe.
 */
#ifndef HOSTPROF_SAMPLER_H
#define HOSTPROF_SAMPLER_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/perf_record.h"

#define SAMPLER_DEFAULT_STACK 16384
#define SAMPLER_MAX_STACK 65528

struct sampler_options {
	const char *event;	/* "cpu-clock" (default), "task-clock", "cycles", "instructions", ... */
	unsigned freq_hz;
	uint32_t stack_size;	/* bytes of user stack per sample: multiple of 8, <= SAMPLER_MAX_STACK */
	int kernel;		/* also sample kernel mode and ask for kernel callchains, where permitted */
	unsigned ring_pages;	/* data pages per CPU ring, a power of two; 0 = choose */
	int fp_chain;		/* also have the kernel walk the user frame-pointer chain at each sample (the user
				 * part of PERF_SAMPLE_CALLCHAIN): what the stack was at the sample, for walks the
				 * stack copy cannot finish (unwind_deltas.h) */
	int low_latency;	/* wake the reader at every sample instead of when a quarter of a ring is full:
				 * what must be read from a process while the sample is fresh (APM trace context)
				 * is read sooner, at the cost of a wakeup per sample */
};

struct sampler;

/* Records are delivered with this callback; returning non-zero stops the current read early. */
typedef int (*sampler_record_fn)(void *ctx, const struct perf_event_header *rec);

struct sampler *sampler_new(const struct sampler_options *o, int *err);
void sampler_free(struct sampler *s);

/* Open one event per CPU following every task (root, or perf_event_paranoid <= 0). */
int sampler_open_system(struct sampler *s);
/* Open one event per CPU for thread tid; inherit follows its children; enable_on_exec waits for exec. */
int sampler_open_task(struct sampler *s, pid_t tid, int inherit, int enable_on_exec);

int sampler_enable(struct sampler *s);
int sampler_disable(struct sampler *s);

/* Wait up to timeout_ms for data, then drain every ring. Returns records delivered, or negative errno. */
int sampler_read(struct sampler *s, int timeout_ms, sampler_record_fn fn, void *ctx);

const struct perf_layout *sampler_layout(const struct sampler *s);
/* The event actually sampled (after any fallback) and whether kernel mode is included. */
const char *sampler_event(const struct sampler *s);
int sampler_kernel_enabled(const struct sampler *s);
/* The last error explanation, and a note about a fallback taken ("" if none). */
const char *sampler_error(const struct sampler *s);
const char *sampler_note(const struct sampler *s);

/* Parse an event name; returns 0 and the attr type/config, or -ENOENT. */
int sampler_parse_event(const char *name, uint32_t *type, uint64_t *config);

#endif
