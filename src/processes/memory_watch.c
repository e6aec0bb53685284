/*
 * memory_watch.c — the memory budget while sampling (memory_watch.h).
 */
#include "src/processes/memory_watch.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/mem_usage.h"

/* Read this often while past half the sampling budget, else once a second (the daemon's drain timer wakes it
 * then anyway): a wakeup costs what the reading does. */
#define MEMORY_WATCH_NS 250000000ULL
#define MEMORY_WATCH_IDLE_NS 1000000000ULL

struct memory_watch {
	uint64_t budget;
	struct execinfo_mgr *files;
	struct log_sink log;
	struct memory_watch_state state;
	uint64_t next_ns;
};

int memory_watch_new(uint64_t budget, struct execinfo_mgr *files, const struct log_sink *log,
		     struct memory_watch **out)
{
	struct memory_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->budget = budget;
	w->files = files;
	if (log)
		w->log = *log;
	*out = w;
	return 0;
}

void memory_watch_free(struct memory_watch *w)
{
	free(w);
}

/* Resident memory now (VmRSS: anonymous and file-backed), 0 when it cannot be read. */
static uint64_t resident(void)
{
	struct mem_usage u;
	return mem_usage_read(0, &u) == 0 ? u.rss : 0;
}

uint64_t memory_watch_sampling_budget(const struct memory_watch *w)
{
	return w->budget / 4 * 3;
}

/* Over the sampling budget: what costs nothing to get again first, then the idle files' state. */
static uint64_t give_back(struct memory_watch *w, uint64_t rss, uint64_t budget)
{
	if (rss <= budget)
		return rss;
	struct execinfo_evicted ev;
	execinfo_mgr_trim_files(w->files);
	malloc_trim(0);
	if ((rss = resident()) > budget) {
		execinfo_mgr_evict(w->files, false, &ev);
		malloc_trim(0);
		rss = resident();
	}
	return rss;
}

void memory_watch_tick(struct memory_watch *w, uint64_t now)
{
	uint64_t budget = memory_watch_sampling_budget(w), rss;
	if (!budget || now < w->next_ns || !(rss = resident()))
		return;
	w->next_ns = now + (rss * 2 > budget || w->state.over ? MEMORY_WATCH_NS : MEMORY_WATCH_IDLE_NS);
	w->state.peak_rss = rss > w->state.peak_rss ? rss : w->state.peak_rss;
	rss = give_back(w, rss, budget);
	/* Back under nine tenths, not just under: no flapping at the line. */
	bool over = w->state.over ? rss * 10 > budget * 9 : rss > budget;
	if (over == w->state.over)
		return;
	w->state.over = over;
	w->state.episodes += over;
	execinfo_mgr_defer_builds(w->files, over);
	if (over)
		log_write(&w->log, LOG_LEVEL_WARN, "memory: %.1f MiB resident, over the %.0f MiB of the budget "
			  "sampling may use: no new table is built and no sample held until it is back under %.0f MiB",
			  rss / 1048576.0, budget / 1048576.0, budget * 0.9 / 1048576.0);
	else
		log_write(&w->log, LOG_LEVEL_INFO, "memory: %.1f MiB resident, back under the budget: %llu tables "
			  "waited and %llu samples were walked without being held meanwhile", rss / 1048576.0,
			  (unsigned long long)execinfo_mgr_builds_deferred(w->files),
			  (unsigned long long)w->state.holds_refused);
}

uint64_t memory_watch_next_ns(const struct memory_watch *w)
{
	return w->budget ? w->next_ns : 0;
}

bool memory_watch_over(const struct memory_watch *w)
{
	return w->state.over;
}

void memory_watch_count_refused_hold(struct memory_watch *w)
{
	w->state.holds_refused++;
}

/* Over it, memory_watch_tick() lifts the deferral once memory is back under nine tenths of the budget. */
bool memory_watch_room_for_build(void *ctx, uint64_t bytes)
{
	struct memory_watch *w = ctx;
	uint64_t rss = resident(), budget = memory_watch_sampling_budget(w);
	if (!rss || rss + bytes <= budget)
		return true;
	if (!w->state.over) {
		w->state.over = true;
		w->state.episodes++;
		log_write(&w->log, LOG_LEVEL_WARN, "memory: %.1f MiB resident, a table of %.1f MiB more would pass "
			  "the %.0f MiB of the budget sampling may use: no new table is built and no sample held until it "
			  "is back under %.0f MiB", rss / 1048576.0, bytes / 1048576.0, budget / 1048576.0,
			  budget * 0.9 / 1048576.0);
	}
	return false;
}

void memory_watch_get_state(const struct memory_watch *w, struct memory_watch_state *out)
{
	*out = w->state;
	out->builds_deferred = execinfo_mgr_builds_deferred(w->files);
}

/* Give the heap's free pages and the files' mapped pages back to the kernel, and read what is left resident. */
static uint64_t trimmed_rss(struct memory_watch *w)
{
	malloc_trim(0);
	execinfo_mgr_trim_files(w->files);
	return resident();
}

static void add_evicted(struct memory_enforced *out, const struct execinfo_evicted *ev)
{
	out->tables += ev->tables;
	out->table_bytes += ev->table_bytes;
	out->symbolizers += ev->symbolizers;
}

void memory_watch_enforce(struct memory_watch *w, uint64_t budget, struct memory_enforced *out)
{
	struct execinfo_evicted ev;
	memset(out, 0, sizeof(*out));
	execinfo_mgr_evict(w->files, false, &ev);
	add_evicted(out, &ev);
	out->rss = trimmed_rss(w);
	if (budget && out->rss > budget) {
		/* Still over: the files in use give up their tables and symbolizers too (back when asked). */
		out->over = true;
		execinfo_mgr_evict(w->files, true, &ev);
		add_evicted(out, &ev);
		out->rss = trimmed_rss(w);
	}
	out->files = execinfo_mgr_count(w->files);
}
