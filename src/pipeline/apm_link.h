/*
 * apm_link.h — the pipeline's side of APM correlation: which processes run an agent, and the trace context of a
 * sample of theirs, for its trace's link and the agent's counts (correlate/correlate.h does the protocol).
 *
 * The session hands it what it sees of processes (an agent library mapped, an exec, an exit) and, for each
 * counted stack of a process with an agent, the sample: its trace context is the one the fast lane read right
 * after the sample (a struct correlate_read with when it was read), or read now. A thread may switch
 * transactions between the sample and the read: a read later than max_staleness_us after the sample is not
 * trusted, and the sample stays uncorrelated (counted: stale). For off-CPU time the context held still until
 * the switch-in, which is what the read is measured from.
 *
 * Ownership: apm_link_new() makes the link and the correlation under it; the reader it exposes is valid while the
 * link is (the fast lane's readers use it, so they stop first). Callbacks run on the caller's thread.
 * Errors: apm_link_new() returns 0 or a negative errno from correlate_new(); the rest count, never fail.
 */
#ifndef HOSTPROF_APM_LINK_H
#define HOSTPROF_APM_LINK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "correlate/correlate.h"
#include "src/base/log.h"
#include "src/processes/procmgr.h"
#include "src/sampling/perf_record.h"
#include "src/pipeline/traces.h"

struct apm_link;

struct apm_link_options {
	const char *host_id;		/* this host's ID as the agent is told (host_id.h); NULL: the machine's */
	unsigned delay_ms;		/* the agent's announced delay (0: correlation's default) */
	unsigned max_staleness_us;	/* a read this long after the sample is not trusted */
	struct log_sink log;		/* the correlation library's lines ("apm: ...") at their levels */
	void (*ready)(void *ctx, pid_t pid);	/* pid's agent is ready: its samples need the fast lane */
	void *ready_ctx;
};

/* What the reads of a sample's context came to. */
struct apm_link_stats {
	uint64_t read_hist[16];		/* latency after the sample: 8 us buckets below 64 us, then 128 us ones */
	uint64_t stale;			/* reads too late to be trusted: the sample left uncorrelated */
};

/* A sample whose stack is counted: its thread, time, and what the fast lane read of it (NULL: read now). */
struct apm_link_sample {
	pid_t tid;
	uint64_t time;			/* the sample's */
	uint64_t valid_from;		/* the sample's time, or for off-CPU time its switch-in */
	const struct correlate_read *read;	/* the fast lane's read, and when it was made */
	uint64_t read_ns;
};

int apm_link_new(const struct apm_link_options *o, struct apm_link **out);
void apm_link_free(struct apm_link *l);
/* The reader the fast lane's threads read trace contexts with. */
struct correlate_reader *apm_link_reader(struct apm_link *l);

void apm_link_on_mapping(struct apm_link *l, pid_t pid, uint64_t start, uint64_t end, uint64_t pgoff,
			 const char *path);
void apm_link_on_exec(struct apm_link *l, pid_t pid);
/* An exit: of the whole process (its leader's), or of one thread. */
void apm_link_on_exit(struct apm_link *l, pid_t pid, pid_t tid, bool process);

/* The trace context of a sample of p whose stack is id: 1 and *link when it ran in a transaction, else 0.
 * look_for_agent: p's mappings are looked at for an agent first (the first sample of p, or after an exec).
 * *ctx is the caller's storage of the context, which link's strings point into. */
int apm_link_sample(struct apm_link *l, const struct process *p, bool look_for_agent,
		    const struct apm_link_sample *s, const struct trace_id *id, struct correlate_context *ctx,
		    struct trace_link *link);

/* Send what is due; returns the ms until the next send (-1: nothing pending). */
int apm_link_tick(struct apm_link *l, uint64_t now_ns);
/* The end: send everything pending, waiting at most the agent's delay. */
void apm_link_finish(struct apm_link *l);
void apm_link_get_stats(const struct apm_link *l, struct apm_link_stats *out, struct correlate_stats *correlate);

#endif
