/*
 * process_groups.c — samples grouped by (pid, process name). See process_groups.h.
 *
 * Each sample finds its group through a hash index over the groups' first samples; a counting sort then lays the
 * samples out group after group, keeping their order within a group.
 */
#include "src/profile/process_groups.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "src/profile/profile_impl.h"

struct grouping {
	const struct profile *p;
	uint32_t *first;	/* per group: its first sample */
	uint32_t count, cap;
	struct hindex index;
};

static uint64_t hash_group(const struct profile_sample *s)
{
	return hash_u64(hash_u64(HASH_SEED, (uint32_t)s->pid), s->comm);
}

static bool group_eq(const void *table, uint64_t g, const void *key)
{
	const struct grouping *gr = table;
	const struct profile_sample *a = &gr->p->samples.items[gr->first[g]], *b = key;
	return a->pid == b->pid && a->comm == b->comm;
}

/* group_of[i]: the group of sample i, numbered in order of first appearance. */
static int assign_groups(struct grouping *gr, uint32_t *group_of)
{
	const struct profile *p = gr->p;
	int err;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		uint64_t h = hash_group(s);
		if (hindex_find_index(&gr->index, h, group_eq, gr, s, &group_of[i]))
			continue;
		if ((err = profile_grow((void **)&gr->first, &gr->cap, (uint64_t)gr->count + 1, sizeof(uint32_t))) < 0 ||
		    (err = hindex_insert(&gr->index, h, gr->count)) < 0)
			return err;
		gr->first[gr->count] = i;
		group_of[i] = gr->count++;
	}
	return 0;
}

/* The counting sort: start[g + 1] counts group g, then becomes offsets, then each sample takes its place. */
static void lay_out(const uint32_t *group_of, uint32_t nsamples, struct process_groups *out)
{
	for (uint32_t i = 0; i < nsamples; i++)
		out->start[group_of[i] + 1]++;
	for (uint32_t g = 0; g < out->count; g++)
		out->start[g + 1] += out->start[g];
	for (uint32_t i = 0; i < nsamples; i++)
		out->order[out->start[group_of[i]]++] = i;
	for (uint32_t g = out->count; g > 0; g--)
		out->start[g] = out->start[g - 1];
	out->start[0] = 0;
}

int process_groups_build(const struct profile *p, struct process_groups *out)
{
	struct grouping gr = { .p = p };
	uint32_t n = p->samples.count;
	uint32_t *group_of = calloc(n ? n : 1, sizeof(uint32_t));
	int err = group_of ? assign_groups(&gr, group_of) : -ENOMEM;
	*out = (struct process_groups){ .count = gr.count };
	if (err == 0) {
		out->start = calloc((size_t)gr.count + 1, sizeof(uint32_t));
		out->order = calloc(n ? n : 1, sizeof(uint32_t));
		if (out->start && out->order)
			lay_out(group_of, n, out);
		else
			err = -ENOMEM;
	}
	if (err < 0)
		process_groups_free(out);
	free(group_of);
	free(gr.first);
	hindex_free(&gr.index);
	return err;
}

void process_groups_free(struct process_groups *g)
{
	free(g->start);
	free(g->order);
	*g = (struct process_groups){ 0 };
}
