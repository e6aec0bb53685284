/*
 * reporter.h — the daemon's interval profiles, named and encoded on a thread of their own.
 *
 * Naming an interval (symbolizing each of its locations: a large library's DWARF, met for the first time, takes
 * seconds) must not stop the thread that drains the sampling rings, or the rings overflow and the next interval
 * loses samples to it. So the daemon detaches each interval's traces from the session
 * (session_detach_interval(): counters filled in, JIT frames named) and submits them here with the profile they
 * go into; one worker thread (src/base/worker.h), in order, builds the profile (traces_build_profile()) and
 * encodes it (profile_encode(), and otlp_encode_profile() when the report asks for an OTLP export too), and the report comes back through reporter_done(), the caller's poll woken by
 * the eventfd given at creation. The caller writes the bytes and gives the traces back to the session on its own
 * thread (session_release_interval()): the session's files and JIT entries are never released here.
 *
 * Ownership: the caller allocates a report, fills its inputs and submits it; until reporter_done() returns it,
 * only the worker touches it. Bounds: the caller keeps at most a few reports outstanding (reporter_outstanding())
 * and extends its interval while the worker is behind, rather than queue without limit.
 * Threads: every function here is called from one thread, the caller's. Errors: negative errno.
 */
#ifndef HOSTPROF_REPORTER_H
#define HOSTPROF_REPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/base/worker.h"
#include "src/profile/otlp.h"
#include "src/profile/profile.h"
#include "src/pipeline/traces.h"

struct report {
	struct worker_job base;		/* the worker's */
	/* in */
	struct traces *traces;		/* the interval's, detached (traces.h: named) */
	struct profile *profile;	/* its info filled in; built here */
	uint64_t memory_budget;		/* VmRSS past which symbolizers are closed once used (traces.h) */
	void *owner;			/* the caller's */
	bool otlp;			/* also encode it for OTLP export (otlp.h) */
	struct otlp_encode_options otlp_options;
	/* out */
	int err;			/* 0, or the build's or the encoding's error */
	char *data;			/* the encoded profile (malloc'd; the caller frees), NULL on error */
	size_t size;
	uint8_t *otlp_data;		/* otlp: the export request (malloc'd; the caller frees), NULL on error */
	size_t otlp_size;
	int otlp_err;			/* 0, or its encoding's error */
	uint64_t name_ns;		/* how long the build and encoding took (CLOCK_MONOTONIC) */
	struct traces_build_stats stats;
};

static inline struct report *report_next(const struct report *report)
{
	return (struct report *)report->base.next;
}

struct reporter;

/* wake_fd: an eventfd written when a report is done, or -1. Returns 0 and *out, or -ENOMEM. */
int reporter_new(int wake_fd, struct reporter **out);
/* Waits for the running report and joins the thread; call it when nothing is outstanding (the reports not
 * returned would be lost with their traces). NULL is a no-op. */
void reporter_free(struct reporter *r);

/* Queue report. Returns 0, or the error of starting the thread. */
int reporter_submit(struct reporter *r, struct report *report);
/* The reports done since the last call, oldest first (NULL: none), linked by report_next(). wait: first wait until
 * every submitted one is done. */
struct report *reporter_done(struct reporter *r, bool wait);
/* Reports submitted and not yet returned. */
unsigned reporter_outstanding(const struct reporter *r);

#endif
