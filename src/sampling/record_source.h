/*
 * record_source.h — where the pipeline's perf records come from, behind one interface.
 *
 * The session (session.h) consumes perf records: samples with user registers and a stack copy, switch records,
 * and the side-band records that track processes (mmap, comm, fork/exit, lost). Where they come from is a sample
 * source: the live rings of a sampler (sampler_source(), sampler.h), and files written by other tools. Each
 * record comes with its origin, which says how its attribute laid it out and what its samples mean, so the
 * consumer needs nothing else of the source. (The fast lane, fastlane.h, is a source inside the session: its
 * entries carry what was read of the live process with each sample, and reach the session decoded.)
 *
 * The event loop (event_loop.h) drives a source: wait until records are ready (a live source; a file is always
 * ready), drain them to the session in time order, and, at the end, stop the source and drain what is left.
 *
 * Ownership: a record and its origin are the source's, valid during the callback only; the origin's layout lives
 * as long as the source.
 */
#ifndef HOSTPROF_RECORD_SOURCE_H
#define HOSTPROF_RECORD_SOURCE_H

#include <poll.h>
#include <stdbool.h>

#include "src/sampling/perf_record.h"

/* What a sample stands for: a CPU sample, or a switch-out of an off-CPU event (the thread stops running). */
enum record_kind {
	RECORD_CPU,
	RECORD_OFF_CPU,
};

struct record_origin {
	const struct perf_layout *layout;	/* the sample_type and registers of the record's event */
	enum record_kind kind;
	bool thread_copy;	/* a sample of a thread copy (sampler_open_thread_copy()): its thread's own copy size */
};

/* Records are delivered with this callback; returning non-zero stops the current drain early. */
typedef int (*record_fn)(void *ctx, const struct perf_event_header *rec, const struct record_origin *origin);

struct record_source {
	void *impl;
	/* Hand every record ready now to fn, in time order. Returns the number delivered (0: none ready),
	 * -ENODATA when a finite source has delivered its last, or a negative errno. */
	int (*drain)(void *impl, record_fn fn, void *ctx);
	/* Wait until records are ready, one of extra[0..n) is readable, or timeout_ms passes. NULL for a source
	 * whose records are always ready (a file). Returns >= 0, or a negative errno (-EINTR: a signal). */
	int (*wait)(void *impl, int timeout_ms, struct pollfd *extra, unsigned n);
	/* No more records are taken from now on: the next drain delivers the last ones. NULL: nothing to do. */
	void (*stop)(void *impl);
};

#endif
