/*
 * memory_watch.h — the memory budget while sampling: read the resident memory, give back, make new work wait.
 *
 * Sampling may fill three quarters of the budget; the last quarter is naming's (the reporter holds one file's
 * symbols at a time while memory is short: traces.h). memory_watch_tick() reads the resident memory (VmRSS:
 * anonymous and file-backed) four times a second while it is past half of those three quarters, else once a
 * second, and each table build asks first (memory_watch_room_for_build(), an execinfo_room_fn). Over those
 * three quarters it first gives back what costs nothing to get again (the files' mapped pages, the heap's free
 * pages), then the idle files' tables and symbolizers; still over, new work waits: no table is built and no
 * sample held until memory is back under nine tenths of it (the samples are walked with what exists, their
 * walks stopping at a file without its table: counted). Each crossing is logged.
 *
 * After each profile the daemon calls memory_watch_enforce() with the whole budget: idle files' state goes, and
 * over the budget the files in use give theirs up too (built again when asked).
 *
 * Ownership: the watch borrows the file manager (execinfo.h), which must outlive it; the log sink is copied.
 * Errors: memory_watch_new() returns 0 or -ENOMEM; a resident size that cannot be read counts as room.
 */
#ifndef HOSTPROF_MEMORY_WATCH_H
#define HOSTPROF_MEMORY_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "src/base/log.h"
#include "src/processes/execinfo.h"

struct memory_watch;

/* What the watch saw (session.h reports it). */
struct memory_watch_state {
	bool over;			/* new work waits now */
	unsigned episodes;		/* times it went over and stayed over after giving back */
	uint64_t peak_rss;		/* the highest resident memory read */
	uint64_t builds_deferred;	/* tables not built meanwhile (their samples walked without) */
	uint64_t holds_refused;		/* samples not held meanwhile (walked without their table) */
};

/* What memory_watch_enforce() dropped and what is left. */
struct memory_enforced {
	unsigned tables, symbolizers;	/* dropped */
	unsigned files;			/* executable files still known (their processes map them, or samples of
					 * the interval being built hold them) */
	uint64_t table_bytes;		/* of the tables dropped */
	uint64_t rss;			/* resident (VmRSS) after */
	bool over;			/* the budget was exceeded after the idle files' state was dropped */
};

/* budget: the whole memory budget in bytes (0: none: the watch never reads). */
int memory_watch_new(uint64_t budget, struct execinfo_mgr *files, const struct log_sink *log,
		     struct memory_watch **out);
void memory_watch_free(struct memory_watch *w);
/* Three quarters of the budget (0 without one): also where a profile build stops keeping the symbols it has
 * used (traces_build_options), so that the one it opens next fits in the last quarter. */
uint64_t memory_watch_sampling_budget(const struct memory_watch *w);
/* Read the resident memory if due (now: CLOCK_MONOTONIC ns), give back, and set or lift the wait. */
void memory_watch_tick(struct memory_watch *w, uint64_t now);
/* When the next reading is due (0: never). */
uint64_t memory_watch_next_ns(const struct memory_watch *w);
/* New work waits now: a sample is not held. */
bool memory_watch_over(const struct memory_watch *w);
/* A sample that waited for a table was walked without it, the watch being over. */
void memory_watch_count_refused_hold(struct memory_watch *w);
/* An execinfo_room_fn (ctx: the watch): a table build of bytes fits in the sampling budget now. */
bool memory_watch_room_for_build(void *ctx, uint64_t bytes);
void memory_watch_get_state(const struct memory_watch *w, struct memory_watch_state *out);
/* After a profile: drop idle files' state, and files' in use past budget (0: no limit). */
void memory_watch_enforce(struct memory_watch *w, uint64_t budget, struct memory_enforced *out);

#endif
