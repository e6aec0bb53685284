/*
 * process_groups.h — a profile's samples grouped by process, as the formats that mirror OpenTelemetry write them
 * (one ResourceProfiles per group: the msgpack file, OTLP).
 *
 * A process is a (pid, process name) pair: a process that exec'd is two. Groups come in the order of their first
 * sample, and a group's samples in their order in the profile, so the output is the same for the same profile.
 *
 * Ownership: process_groups_build() fills a caller's struct whose arrays process_groups_free() releases (a
 * zeroed struct may be freed too). Errors: -ENOMEM; nothing is left allocated then. Only reads the profile.
 */
#ifndef HOSTPROF_PROFILE_PROCESS_GROUPS_H
#define HOSTPROF_PROFILE_PROCESS_GROUPS_H

#include <stdint.h>

#include "src/profile/profile.h"

struct process_groups {
	uint32_t count;		/* groups */
	uint32_t *start;	/* count + 1 offsets into order: group g is order[start[g]] .. order[start[g + 1] - 1] */
	uint32_t *order;	/* every sample index once, grouped */
};

int process_groups_build(const struct profile *p, struct process_groups *out);
void process_groups_free(struct process_groups *g);

/* The first sample of group g: its pid and comm are the group's. */
static inline const struct profile_sample *process_group_sample(const struct profile *p,
								 const struct process_groups *g, uint32_t group)
{
	return &p->samples.items[g->order[g->start[group]]];
}

#endif
