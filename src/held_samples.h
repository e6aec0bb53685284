/*
 * held_samples.h — sample records kept aside until the unwind table they need is ready.
 *
 * While a worker builds a file's stack-delta table (table_worker.h), the samples whose walk needs it are copied out
 * of the ring and held here, to be handled again once it is ready. Held records are bounded (count and bytes):
 * past the bound a sample is handled at once with what exists, and the caller counts it.
 *
 * Memory: the records live in one anonymous mapping per generation (reserved at the byte bound, touched only as
 * far as used) that is unmapped when its records have been handled, so that a burst of held stacks goes back to
 * the kernel rather than fragmenting the heap.
 *
 * Ownership: held_samples_new() makes the queue, held_samples_free() frees it. held_samples_take() hands the
 * current generation to the caller (walked with held_batch_next(), freed with held_batch_free()) and starts a new
 * one, so that records held again while a batch is replayed go to the new one. Not thread-safe. Errors: -errno.
 */
#ifndef HOSTPROF_HELD_SAMPLES_H
#define HOSTPROF_HELD_SAMPLES_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default bounds: enough for 1 s of 4 kHz sampling with 8 KiB stack copies. */
#define HELD_SAMPLES_MAX_COUNT 4096u
#define HELD_SAMPLES_MAX_BYTES (48u << 20)

struct held_batch {
	uint8_t *base;		/* the generation's mapping; NULL: empty */
	size_t len, cap;	/* bytes used, reserved */
	size_t pos;		/* held_batch_next()'s */
	unsigned count;
};

struct held_samples;

/* Returns 0 and *out, or -ENOMEM. max_count/max_bytes 0: the defaults. */
int held_samples_new(unsigned max_count, size_t max_bytes, struct held_samples **out);
void held_samples_free(struct held_samples *h);

/* Copy rec (rec->size bytes) in. Returns 0, -ENOSPC (over a bound, or shorter than its header: not held),
 * -ENOMEM (no mapping). */
int held_samples_add(struct held_samples *h, const struct perf_event_header *rec);
/* Whether rec would be held now (within the bounds); a walk that could not be held need not stop short. */
bool held_samples_room(const struct held_samples *h, const struct perf_event_header *rec);
/* Records held now. */
unsigned held_samples_count(const struct held_samples *h);
/* Take every record held now; the queue starts empty again. */
void held_samples_take(struct held_samples *h, struct held_batch *out);

/* The next record of b, oldest first, or NULL at the end. */
const struct perf_event_header *held_batch_next(struct held_batch *b);
void held_batch_free(struct held_batch *b);

#endif
