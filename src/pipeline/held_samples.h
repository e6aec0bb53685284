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
 * current generation to the caller, to be walked again (held_batch_next()) and given back (held_samples_done()),
 * and starts a new one for records held meanwhile. A record of the batch held again (its table still not ready)
 * stays where it is, moved down over the records handled before it: while many tables are built one after the
 * other, each ready table replays every held sample, and copying those that wait on into a new mapping each time
 * (page faults on fresh pages, then an munmap) cost the draining thread most of its time. held_samples_done()
 * makes them the oldest of the current generation again. Each record is held with its process's pid, and the
 * queue counts them per process (held_samples_of()): a process is kept while samples of its are held, so that they
 * are walked in the mappings they were taken in. Not thread-safe. Errors: -errno.
 */
#ifndef HOSTPROF_HELD_SAMPLES_H
#define HOSTPROF_HELD_SAMPLES_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Default bounds: enough for 1 s of 4 kHz sampling with 8 KiB stack copies. */
#define HELD_SAMPLES_MAX_COUNT 4096u
#define HELD_SAMPLES_MAX_BYTES (48u << 20)

struct held_batch {
	uint8_t *base;		/* the generation's mapping; NULL: empty */
	size_t len, cap;	/* bytes used, reserved */
	size_t pos;		/* held_batch_next()'s */
	unsigned count;
	size_t kept;		/* while walked again: bytes of its records held again, moved to its start */
	unsigned kept_count;
	const void *walked;	/* the entry held_batch_next() gave last */
	bool last_kept;		/* ... held again */
};

struct held_samples;

/* Returns 0 and *out, or -ENOMEM. max_count/max_bytes 0: the defaults. */
int held_samples_new(unsigned max_count, size_t max_bytes, struct held_samples **out);
void held_samples_free(struct held_samples *h);

/* Copy rec (rec->size bytes), a sample of pid, in; or keep it in place if it is the batch being walked again's.
 * Returns 0, -ENOSPC (over a bound, or shorter than its header: not held), -ENOMEM (no mapping). */
int held_samples_add(struct held_samples *h, const struct perf_event_header *rec, pid_t pid);
/* Whether rec would be held now (within the bounds); a walk that could not be held need not stop short. */
bool held_samples_room(const struct held_samples *h, const struct perf_event_header *rec);
/* Records held now. */
unsigned held_samples_count(const struct held_samples *h);
/* Records of pid held now, in the queue or in a batch being walked again. */
unsigned held_samples_of(const struct held_samples *h, pid_t pid);
/* Take every record held now, to be walked again; the queue starts empty again. One batch at a time. */
void held_samples_take(struct held_samples *h, struct held_batch *out);
/* The batch walked: its records held again become the oldest held, before those held meanwhile. */
void held_samples_done(struct held_samples *h, struct held_batch *b);

/* The next record of b (taken from h), oldest first, or NULL at the end. The one before it, unless held again, is
 * no longer counted for its process. */
const struct perf_event_header *held_batch_next(struct held_samples *h, struct held_batch *b);

#endif
