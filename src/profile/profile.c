/*
 * profile.c — the in-memory profile: tables, interning builder, merge. See profile.h.
 *
 * Every dictionary table has a hash index (src/base/hindex.h) keyed by the element's content, so adding an
 * element costs one hash and, usually, one comparison. Element 0 of each table is the zero value and is
 * indexed too, so interning a zero value yields index 0 as the data model requires.
 */
#include "src/profile/profile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/profile_impl.h"

struct profile_index {
	struct hindex strings, mappings, functions, locations, stacks, links, samples;
	struct hindex processes;	/* hindex_u32(pid): index in processes */
};

int profile_grow(void **items, uint32_t *cap, uint64_t need, size_t elem_size)
{
	if (need <= *cap)
		return 0;
	if (need >= UINT32_MAX)
		return -EOVERFLOW;
	uint64_t ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	if (ncap >= UINT32_MAX)
		ncap = UINT32_MAX - 1;
	void *n = realloc(*items, ncap * elem_size);
	if (!n)
		return -ENOMEM;
	memset((char *)n + (size_t)*cap * elem_size, 0, (ncap - *cap) * elem_size);
	*items = n;
	*cap = (uint32_t)ncap;
	return 0;
}

/* --- element hashing and equality -------------------------------------------------------------------------- */

static uint64_t hash_mapping(const struct profile_mapping *m)
{
	uint64_t h = hash_bytes(HASH_SEED, m->file_id, sizeof(m->file_id));
	h = hash_u64(h, m->build_id);
	h = hash_u64(h, m->filename);
	h = hash_u64(h, m->memory_start);
	h = hash_u64(h, m->memory_limit);
	return hash_u64(h, m->file_offset);
}

static bool mapping_eq(const void *table, uint64_t i, const void *key)
{
	const struct profile_mapping *a = &((const struct profile *)table)->mappings.items[i], *b = key;
	return memcmp(a->file_id, b->file_id, sizeof(a->file_id)) == 0 && a->build_id == b->build_id &&
	       a->filename == b->filename && a->memory_start == b->memory_start &&
	       a->memory_limit == b->memory_limit && a->file_offset == b->file_offset;
}

static uint64_t hash_function(const struct profile_function *f)
{
	return hash_u64(hash_u64(HASH_SEED, f->name), f->filename);
}

static bool function_eq(const void *table, uint64_t i, const void *key)
{
	const struct profile_function *a = &((const struct profile *)table)->functions.items[i], *b = key;
	return a->name == b->name && a->filename == b->filename;
}

static uint64_t hash_location(const struct profile_location *l)
{
	uint64_t h = hash_u64(HASH_SEED, l->mapping);
	return hash_u64(hash_u64(h, l->address), l->frame_kind);
}

static bool location_eq(const void *table, uint64_t i, const void *key)
{
	const struct profile_location *a = &((const struct profile *)table)->locations.items[i], *b = key;
	return a->mapping == b->mapping && a->address == b->address && a->frame_kind == b->frame_kind;
}

static uint64_t hash_stack(const struct profile_stack *s)
{
	uint64_t h = hash_bytes(HASH_SEED, s->trace_id, sizeof(s->trace_id));
	return hash_bytes(h, s->locations, (size_t)s->nlocations * sizeof(*s->locations));
}

static bool stack_eq(const void *table, uint64_t i, const void *key)
{
	const struct profile_stack *a = &((const struct profile *)table)->stacks.items[i], *b = key;
	return memcmp(a->trace_id, b->trace_id, sizeof(a->trace_id)) == 0 && a->nlocations == b->nlocations &&
	       (a->nlocations == 0 || memcmp(a->locations, b->locations, a->nlocations * sizeof(*a->locations)) == 0);
}

static uint64_t hash_link(const struct profile_link *l)
{
	uint64_t h = hash_bytes(HASH_SEED, l->trace_id, sizeof(l->trace_id));
	return hash_bytes(h, l->span_id, sizeof(l->span_id));
}

static bool link_eq(const void *table, uint64_t i, const void *key)
{
	const struct profile_link *a = &((const struct profile *)table)->links.items[i], *b = key;
	return memcmp(a, b, sizeof(*a)) == 0;
}

static uint64_t hash_sample(const struct profile_sample *s)
{
	uint64_t h = hash_u64(HASH_SEED, s->stack);
	h = hash_u64(h, (uint32_t)s->pid);
	h = hash_u64(h, (uint32_t)s->tid);
	h = hash_u64(h, s->comm);
	h = hash_u64(h, s->thread_name);
	h = hash_u64(h, s->service);
	return hash_u64(h, s->link);
}

static bool sample_eq(const void *table, uint64_t i, const void *key)
{
	const struct profile_sample *a = &((const struct profile *)table)->samples.items[i], *b = key;
	return a->stack == b->stack && a->pid == b->pid && a->tid == b->tid && a->comm == b->comm &&
	       a->thread_name == b->thread_name && a->link == b->link && a->service == b->service;
}

static bool string_eq(const void *table, uint64_t i, const void *key)
{
	return strcmp(((const struct profile *)table)->strings.items[i], key) == 0;
}

/* --- life cycle -------------------------------------------------------------------------------------------- */

/* Element 0 of every dictionary table: the zero value, indexed so that interning a zero value returns 0. */
static int add_zero_elements(struct profile *p)
{
	struct profile_index *x = p->index;
	int err;
	if ((err = PROFILE_TABLE_RESERVE(p->strings, 1)) < 0 || (err = PROFILE_TABLE_RESERVE(p->mappings, 1)) < 0 ||
	    (err = PROFILE_TABLE_RESERVE(p->functions, 1)) < 0 || (err = PROFILE_TABLE_RESERVE(p->locations, 1)) < 0 ||
	    (err = PROFILE_TABLE_RESERVE(p->stacks, 1)) < 0 || (err = PROFILE_TABLE_RESERVE(p->links, 1)) < 0)
		return err;
	if (!(p->strings.items[0] = strdup("")))
		return -ENOMEM;
	p->strings.count = p->mappings.count = p->functions.count = 1;
	p->locations.count = p->stacks.count = p->links.count = 1;
	if ((err = hindex_insert(&x->strings, hash_str(HASH_SEED, ""), 0)) < 0 ||
	    (err = hindex_insert(&x->mappings, hash_mapping(&p->mappings.items[0]), 0)) < 0 ||
	    (err = hindex_insert(&x->functions, hash_function(&p->functions.items[0]), 0)) < 0 ||
	    (err = hindex_insert(&x->locations, hash_location(&p->locations.items[0]), 0)) < 0 ||
	    (err = hindex_insert(&x->stacks, hash_stack(&p->stacks.items[0]), 0)) < 0 ||
	    (err = hindex_insert(&x->links, hash_link(&p->links.items[0]), 0)) < 0)
		return err;
	return 0;
}

int profile_new(struct profile **out)
{
	struct profile *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->index = calloc(1, sizeof(*p->index));
	int err = p->index ? add_zero_elements(p) : -ENOMEM;
	if (err < 0) {
		profile_free(p);
		return err;
	}
	*out = p;
	return 0;
}

static void free_index(struct profile_index *x)
{
	if (!x)
		return;
	hindex_free(&x->strings);
	hindex_free(&x->mappings);
	hindex_free(&x->functions);
	hindex_free(&x->locations);
	hindex_free(&x->stacks);
	hindex_free(&x->links);
	hindex_free(&x->samples);
	hindex_free(&x->processes);
	free(x);
}

static void free_info(struct profile_info *i)
{
	free(i->producer);
	free(i->hostname);
	free(i->host_id);
	free(i->kernel);
	free(i->cmdline);
	free(i->event);
	free(i->unwinder);
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	free_info(&p->info);
	for (uint32_t i = 0; i < p->strings.count; i++)
		free(p->strings.items[i]);
	for (uint32_t i = 0; i < p->locations.count; i++)
		free(p->locations.items[i].lines);
	for (uint32_t i = 0; i < p->stacks.count; i++)
		free(p->stacks.items[i].locations);
	for (uint32_t i = 0; i < p->samples.count; i++)
		free(p->samples.items[i].timestamps);
	free(p->strings.items);
	free(p->mappings.items);
	free(p->functions.items);
	free(p->locations.items);
	free(p->stacks.items);
	free(p->links.items);
	free(p->samples.items);
	free(p->processes.items);
	free_index(p->index);
	free(p);
}

int profile_set_info_string(struct profile *p, char **field, const char *value)
{
	(void)p;
	char *copy = NULL;
	if (value && !(copy = strdup(value)))
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

const char *profile_string(const struct profile *p, uint32_t i)
{
	return i < p->strings.count && p->strings.items[i] ? p->strings.items[i] : "";
}

/* --- interning --------------------------------------------------------------------------------------------- */

int profile_find_string(const struct profile *p, const char *s, uint32_t *index)
{
	if (!s || !*s) {
		*index = 0;
		return 0;
	}
	if (!p->index)
		return -EINVAL;
	uint64_t h = hash_str(HASH_SEED, s);
	return hindex_find_index(&p->index->strings, h, string_eq, p, s, index) ? 0 : -ENOENT;
}

int profile_add_string(struct profile *p, const char *s, uint32_t *index)
{
	int err = profile_find_string(p, s, index);
	if (err != -ENOENT)
		return err;
	char *copy = strdup(s);
	if (!copy || (err = PROFILE_TABLE_RESERVE(p->strings, p->strings.count + 1)) < 0 ||
	    (err = hindex_insert(&p->index->strings, hash_str(HASH_SEED, s), p->strings.count)) < 0) {
		free(copy);
		return err ? err : -ENOMEM;
	}
	*index = p->strings.count;
	p->strings.items[p->strings.count++] = copy;
	return 0;
}

/*
 * The common tail of profile_add_*: look key up, else append it (elem_size bytes) and index it. The table's
 * storage is passed as its parts because each table is its own anonymous struct type.
 */
struct table_ref {
	void **items;
	uint32_t *count, *cap;
	size_t elem_size;
	struct hindex *index;
	hindex_eq_fn eq;
};

static int intern(struct profile *p, const struct table_ref *t, const void *key, uint64_t hash, uint32_t *index,
		  bool *added)
{
	int err;
	*added = false;
	if (hindex_find_index(t->index, hash, t->eq, p, key, index))
		return 0;
	if ((err = profile_grow(t->items, t->cap, (uint64_t)*t->count + 1, t->elem_size)) < 0 ||
	    (err = hindex_insert(t->index, hash, *t->count)) < 0)
		return err;
	memcpy((char *)*t->items + (size_t)*t->count * t->elem_size, key, t->elem_size);
	*index = (*t->count)++;
	*added = true;
	return 0;
}

#define TABLE_REF(p, table, hidx, eqfn)                                                                      \
	((struct table_ref){ (void **)&(p)->table.items, &(p)->table.count, &(p)->table.cap,                 \
			     sizeof(*(p)->table.items), &(p)->index->hidx, (eqfn) })

int profile_add_mapping(struct profile *p, const struct profile_mapping *m, uint32_t *index)
{
	bool added;
	if (!p->index)
		return -EINVAL;
	if (m->build_id >= p->strings.count || m->filename >= p->strings.count)
		return -EINVAL;
	return intern(p, &TABLE_REF(p, mappings, mappings, mapping_eq), m, hash_mapping(m), index, &added);
}

int profile_add_function(struct profile *p, const struct profile_function *f, uint32_t *index)
{
	bool added;
	if (!p->index)
		return -EINVAL;
	if (f->name >= p->strings.count || f->filename >= p->strings.count)
		return -EINVAL;
	return intern(p, &TABLE_REF(p, functions, functions, function_eq), f, hash_function(f), index, &added);
}

static bool lines_valid(const struct profile *p, const struct profile_location *l)
{
	if (l->nlines && !l->lines)
		return false;
	for (uint32_t i = 0; i < l->nlines; i++) {
		if (l->lines[i].function >= p->functions.count)
			return false;
	}
	return true;
}

int profile_add_location(struct profile *p, const struct profile_location *l, uint32_t *index)
{
	struct profile_location copy = *l;
	bool added;
	int err;
	if (!p->index)
		return -EINVAL;
	if (l->mapping >= p->mappings.count || !lines_valid(p, l))
		return -EINVAL;
	copy.lines = NULL;
	if (l->nlines && !(copy.lines = malloc(l->nlines * sizeof(*l->lines))))
		return -ENOMEM;
	if (l->nlines)
		memcpy(copy.lines, l->lines, l->nlines * sizeof(*l->lines));
	err = intern(p, &TABLE_REF(p, locations, locations, location_eq), &copy, hash_location(l), index, &added);
	if (!added)
		free(copy.lines);
	return err;
}

int profile_add_stack(struct profile *p, const struct profile_stack *s, uint32_t *index)
{
	struct profile_stack copy = *s;
	bool added;
	int err;
	if (!p->index)
		return -EINVAL;
	if (s->nlocations && !s->locations)
		return -EINVAL;
	for (uint32_t i = 0; i < s->nlocations; i++) {
		if (s->locations[i] >= p->locations.count)
			return -EINVAL;
	}
	copy.locations = NULL;
	if (s->nlocations && !(copy.locations = malloc(s->nlocations * sizeof(*s->locations))))
		return -ENOMEM;
	if (s->nlocations)
		memcpy(copy.locations, s->locations, s->nlocations * sizeof(*s->locations));
	err = intern(p, &TABLE_REF(p, stacks, stacks, stack_eq), &copy, hash_stack(s), index, &added);
	if (!added)
		free(copy.locations);
	return err;
}

int profile_add_link(struct profile *p, const struct profile_link *l, uint32_t *index)
{
	bool added;
	if (!p->index)
		return -EINVAL;
	return intern(p, &TABLE_REF(p, links, links, link_eq), l, hash_link(l), index, &added);
}

/* --- totals: what the samples add up to (struct profile_totals) ------------------------------------------- */

/* a + b into *sum, false when it does not fit the bound. */
static bool add_bounded(uint64_t a, uint64_t b, uint64_t *sum)
{
	return !__builtin_add_overflow(a, b, sum) && *sum <= PROFILE_VALUE_MAX;
}

/* t and x added into *out, false when the sum breaks the bound with samples valued at period ns each. */
static bool totals_add(const struct profile_totals *t, const struct profile_totals *x, uint64_t period,
		       struct profile_totals *out)
{
	uint64_t by_period, weight;
	if (!add_bounded(t->count, x->count, &out->count) || !add_bounded(t->cpu_ns, x->cpu_ns, &out->cpu_ns) ||
	    !add_bounded(t->off_cpu_ns, x->off_cpu_ns, &out->off_cpu_ns) ||
	    !add_bounded(t->preempted_ns, x->preempted_ns, &out->preempted_ns))
		return false;
	return !__builtin_mul_overflow(out->count, period, &by_period) &&
	       add_bounded(by_period, out->cpu_ns, &weight) && add_bounded(weight, out->off_cpu_ns, &weight);
}

static struct profile_totals sample_totals(const struct profile_sample *s)
{
	return (struct profile_totals){ s->count, s->cpu_ns, s->off_cpu_ns, s->preempted_ns };
}

/* Room for n more timestamps in *ts (holding have), allocated before any count changes, so a failure leaves the
 * profile as it was. */
static int reserve_timestamps(uint64_t **ts, uint32_t have, uint32_t n)
{
	uint64_t *grown;
	if (n == 0)
		return 0;
	if ((uint64_t)have + n > UINT32_MAX)
		return -EOVERFLOW;
	if (!(grown = realloc(*ts, ((size_t)have + n) * sizeof(*grown))))
		return -ENOMEM;
	*ts = grown;
	return 0;
}

int profile_add_sample(struct profile *p, const struct profile_sample *s)
{
	struct profile_totals sum, one = sample_totals(s);
	uint64_t hash = hash_sample(s), *ts = NULL;
	uint32_t index, have = 0;
	bool added, found;
	int err;
	if (!p->index)
		return -EINVAL;
	if (s->stack >= p->stacks.count || s->comm >= p->strings.count || s->thread_name >= p->strings.count ||
	    s->service >= p->strings.count || s->link >= p->links.count || s->ntimestamps > s->count)
		return -EINVAL;
	if (!totals_add(&p->totals, &one, p->info.period_ns, &sum))
		return -EOVERFLOW;
	found = hindex_find_index(&p->index->samples, hash, sample_eq, p, s, &index);
	if (found) {
		ts = p->samples.items[index].timestamps;
		have = p->samples.items[index].ntimestamps;
	}
	if ((err = reserve_timestamps(&ts, have, s->ntimestamps)) < 0)
		return err;
	if (found)
		p->samples.items[index].timestamps = ts;	/* realloc moved it */
	err = intern(p, &TABLE_REF(p, samples, samples, sample_eq), s, hash, &index, &added);
	if (err < 0) {
		free(ts);	/* a new sample's, not found */
		return err;
	}
	struct profile_sample *d = &p->samples.items[index];
	p->totals = sum;
	if (!added) {
		d->count += s->count;
		d->cpu_ns += s->cpu_ns;
		d->off_cpu_ns += s->off_cpu_ns;
		d->preempted_ns += s->preempted_ns;
	}
	if (s->ntimestamps)
		memcpy(ts + have, s->timestamps, (size_t)s->ntimestamps * sizeof(*ts));
	d->timestamps = ts;
	d->ntimestamps = have + s->ntimestamps;
	return 0;
}

uint64_t profile_sample_value(const struct profile *p, const struct profile_sample *s, enum profile_value v)
{
	uint64_t cpu = s->cpu_ns ? s->cpu_ns : s->count * p->info.period_ns;
	switch (v) {
	case PROFILE_VALUE_CPU:
		return cpu;
	case PROFILE_VALUE_OFF_CPU:
		return s->off_cpu_ns;
	case PROFILE_VALUE_WALL:
		return cpu + s->off_cpu_ns;
	default:
		return s->count;
	}
}

int profile_has_off_cpu(const struct profile *p)
{
	for (uint32_t i = 0; i < p->samples.count; i++)
		if (p->samples.items[i].off_cpu_ns)
			return 1;
	return p->info.off_cpu_switches != 0;
}

/* --- processes ---------------------------------------------------------------------------------------------- */

const struct profile_process *profile_find_process(const struct profile *p, int32_t pid)
{
	uint64_t i;
	if (p->index)
		return hindex_find(&p->index->processes, hindex_u32((uint32_t)pid), NULL, NULL, NULL, &i)
			       ? &p->processes.items[i] : NULL;
	for (i = 0; i < p->processes.count; i++) {	/* a reader's scratch profile, which has no index */
		if (p->processes.items[i].pid == pid)
			return &p->processes.items[i];
	}
	return NULL;
}

int profile_set_process(struct profile *p, const struct profile_process *pr)
{
	struct profile_process *e = (struct profile_process *)profile_find_process(p, pr->pid);
	int err;
	if (!e) {
		if ((err = PROFILE_TABLE_RESERVE(p->processes, (uint64_t)p->processes.count + 1)) < 0 ||
		    (p->index && (err = hindex_insert(&p->index->processes, hindex_u32((uint32_t)pr->pid),
						      p->processes.count)) < 0))
			return err;
		e = &p->processes.items[p->processes.count++];
		*e = (struct profile_process){ .pid = pr->pid };
	}
	e->exe_path = e->exe_path ? e->exe_path : pr->exe_path;
	e->container_id = e->container_id ? e->container_id : pr->container_id;
	return 0;
}

/* --- merge ------------------------------------------------------------------------------------------------- */

/* src index -> dst index, per table; element 0 always maps to 0. */
struct merge_maps {
	uint32_t *strings, *mappings, *functions, *locations, *stacks, *links;
	uint32_t *scratch;	/* remapped lines' functions or a stack's locations */
	uint32_t scratch_cap;
	struct profile_line *lines;
	uint32_t lines_cap;
};

static void merge_maps_free(struct merge_maps *m)
{
	free(m->strings);
	free(m->mappings);
	free(m->functions);
	free(m->locations);
	free(m->stacks);
	free(m->links);
	free(m->scratch);
	free(m->lines);
}

static int merge_maps_alloc(struct merge_maps *m, const struct profile *src)
{
	m->strings = calloc(src->strings.count ? src->strings.count : 1, sizeof(uint32_t));
	m->mappings = calloc(src->mappings.count ? src->mappings.count : 1, sizeof(uint32_t));
	m->functions = calloc(src->functions.count ? src->functions.count : 1, sizeof(uint32_t));
	m->locations = calloc(src->locations.count ? src->locations.count : 1, sizeof(uint32_t));
	m->stacks = calloc(src->stacks.count ? src->stacks.count : 1, sizeof(uint32_t));
	m->links = calloc(src->links.count ? src->links.count : 1, sizeof(uint32_t));
	if (!m->strings || !m->mappings || !m->functions || !m->locations || !m->stacks || !m->links)
		return -ENOMEM;
	return 0;
}

/*
 * Strings that src's elements reference, in src's order: a reader's scratch profile also holds the attribute
 * keys of the file, which would otherwise become orphans in every profile read.
 */
static int merge_strings(struct profile *dst, const struct profile *src, struct merge_maps *m)
{
	uint8_t *used = calloc(src->strings.count ? src->strings.count : 1, 1);
	int err = 0;
	if (!used)
		return -ENOMEM;
	for (uint32_t i = 1; i < src->mappings.count; i++)
		used[src->mappings.items[i].build_id] = used[src->mappings.items[i].filename] = 1;
	for (uint32_t i = 1; i < src->functions.count; i++)
		used[src->functions.items[i].name] = used[src->functions.items[i].filename] = 1;
	for (uint32_t i = 0; i < src->samples.count; i++)
		used[src->samples.items[i].comm] = used[src->samples.items[i].thread_name] =
			used[src->samples.items[i].service] = 1;
	for (uint32_t i = 0; i < src->processes.count; i++)
		used[src->processes.items[i].exe_path] = used[src->processes.items[i].container_id] = 1;
	for (uint32_t i = 1; i < src->strings.count && err == 0; i++) {
		if (used[i])
			err = profile_add_string(dst, profile_string(src, i), &m->strings[i]);
	}
	free(used);
	return err;
}

static int merge_dictionary_flat(struct profile *dst, const struct profile *src, struct merge_maps *m)
{
	int err;
	if ((err = merge_strings(dst, src, m)) < 0)
		return err;
	for (uint32_t i = 1; i < src->mappings.count; i++) {
		struct profile_mapping x = src->mappings.items[i];
		x.build_id = m->strings[x.build_id];
		x.filename = m->strings[x.filename];
		if ((err = profile_add_mapping(dst, &x, &m->mappings[i])) < 0)
			return err;
	}
	for (uint32_t i = 1; i < src->functions.count; i++) {
		struct profile_function x = src->functions.items[i];
		x.name = m->strings[x.name];
		x.filename = m->strings[x.filename];
		if ((err = profile_add_function(dst, &x, &m->functions[i])) < 0)
			return err;
	}
	for (uint32_t i = 1; i < src->links.count; i++) {
		if ((err = profile_add_link(dst, &src->links.items[i], &m->links[i])) < 0)
			return err;
	}
	return 0;
}

static int merge_locations(struct profile *dst, const struct profile *src, struct merge_maps *m)
{
	int err;
	for (uint32_t i = 1; i < src->locations.count; i++) {
		struct profile_location x = src->locations.items[i];
		if ((err = profile_grow((void **)&m->lines, &m->lines_cap, x.nlines, sizeof(*m->lines))) < 0)
			return err;
		for (uint32_t j = 0; j < x.nlines; j++) {
			m->lines[j].function = m->functions[x.lines[j].function];
			m->lines[j].line = x.lines[j].line;
		}
		x.lines = m->lines;
		x.mapping = m->mappings[x.mapping];
		if ((err = profile_add_location(dst, &x, &m->locations[i])) < 0)
			return err;
	}
	return 0;
}

static int merge_stacks(struct profile *dst, const struct profile *src, struct merge_maps *m)
{
	int err;
	for (uint32_t i = 1; i < src->stacks.count; i++) {
		struct profile_stack x = src->stacks.items[i];
		if ((err = profile_grow((void **)&m->scratch, &m->scratch_cap, x.nlocations, sizeof(uint32_t))) < 0)
			return err;
		for (uint32_t j = 0; j < x.nlocations; j++)
			m->scratch[j] = m->locations[x.locations[j]];
		x.locations = m->scratch;
		if ((err = profile_add_stack(dst, &x, &m->stacks[i])) < 0)
			return err;
	}
	return 0;
}

/* Whether src's samples can join dst's within the bound, valued at the period dst will have after the merge
 * (merge_info()). src's totals are summed here: the reader's scratch profiles fill their samples directly. */
static int merge_fits(const struct profile *dst, const struct profile *src)
{
	uint64_t period = dst->info.period_ns ? dst->info.period_ns : src->info.period_ns;
	struct profile_totals t = dst->totals;
	for (uint32_t i = 0; i < src->samples.count; i++) {
		struct profile_totals one = sample_totals(&src->samples.items[i]);
		if (!totals_add(&t, &one, period, &t))
			return -EOVERFLOW;
	}
	return 0;
}

static int merge_samples(struct profile *dst, const struct profile *src, const struct merge_maps *m)
{
	for (uint32_t i = 0; i < src->samples.count; i++) {
		struct profile_sample x = src->samples.items[i];
		x.stack = m->stacks[x.stack];
		x.comm = m->strings[x.comm];
		x.thread_name = m->strings[x.thread_name];
		x.service = m->strings[x.service];
		x.link = m->links[x.link];
		int err = profile_add_sample(dst, &x);
		if (err < 0)
			return err;
	}
	return 0;
}

static int merge_processes(struct profile *dst, const struct profile *src, const struct merge_maps *m)
{
	for (uint32_t i = 0; i < src->processes.count; i++) {
		struct profile_process x = src->processes.items[i];
		x.exe_path = m->strings[x.exe_path];
		x.container_id = m->strings[x.container_id];
		int err = profile_set_process(dst, &x);
		if (err < 0)
			return err;
	}
	return 0;
}

static int merge_info_string(struct profile *dst, char **d, const char *s)
{
	return !*d && s ? profile_set_info_string(dst, d, s) : 0;
}

/* The header's counters describe a run; no share is taken of them as of the samples' totals, so a sum past
 * 2^64 - 1 (of hostile headers) stops there rather than wrapping to a small number. */
static void add_saturating(uint64_t *d, uint64_t s)
{
	if (__builtin_add_overflow(*d, s, d))
		*d = UINT64_MAX;
}

/* Counters add up; the time span covers both; the first profile's descriptive fields win. */
static int merge_info(struct profile *dst, const struct profile_info *s)
{
	struct profile_info *d = &dst->info;
	int err;
	if (!d->start_unix_ns && !d->duration_ns) {
		d->start_unix_ns = s->start_unix_ns;
		d->duration_ns = s->duration_ns;
	} else if (d->start_unix_ns && s->start_unix_ns) {
		uint64_t start = d->start_unix_ns < s->start_unix_ns ? d->start_unix_ns : s->start_unix_ns;
		uint64_t dend = d->start_unix_ns + d->duration_ns, send = s->start_unix_ns + s->duration_ns;
		d->duration_ns = (dend > send ? dend : send) - start;
		d->start_unix_ns = start;
	}
	d->period_ns = d->period_ns ? d->period_ns : s->period_ns;
	d->frequency_hz = d->frequency_hz ? d->frequency_hz : s->frequency_hz;
	if (!d->cpus_online && !d->cpus_available) {
		d->cpus_online = s->cpus_online;
		d->cpus_available = s->cpus_available;
	}
	add_saturating(&d->samples, s->samples);
	add_saturating(&d->lost, s->lost);
	add_saturating(&d->lost_fast_lane, s->lost_fast_lane);
	add_saturating(&d->unwound_complete, s->unwound_complete);
	add_saturating(&d->truncated, s->truncated);
	add_saturating(&d->unknown, s->unknown);
	d->off_cpu_threshold_ns = d->off_cpu_threshold_ns ? d->off_cpu_threshold_ns : s->off_cpu_threshold_ns;
	add_saturating(&d->off_cpu_switches, s->off_cpu_switches);
	add_saturating(&d->off_cpu_capped, s->off_cpu_capped);
	add_saturating(&d->off_cpu_no_stack, s->off_cpu_no_stack);
	add_saturating(&d->off_cpu_lost, s->off_cpu_lost);
	add_saturating(&d->timestamps_dropped, s->timestamps_dropped);
	if ((err = merge_info_string(dst, &d->producer, s->producer)) < 0 ||
	    (err = merge_info_string(dst, &d->hostname, s->hostname)) < 0 ||
	    (err = merge_info_string(dst, &d->host_id, s->host_id)) < 0 ||
	    (err = merge_info_string(dst, &d->kernel, s->kernel)) < 0 ||
	    (err = merge_info_string(dst, &d->cmdline, s->cmdline)) < 0 ||
	    (err = merge_info_string(dst, &d->event, s->event)) < 0 ||
	    (err = merge_info_string(dst, &d->unwinder, s->unwinder)) < 0)
		return err;
	return 0;
}

int profile_merge(struct profile *dst, const struct profile *src)
{
	struct merge_maps m = { 0 };
	int err;
	if (dst == src || !dst->index)
		return -EINVAL;
	if ((err = merge_fits(dst, src)) < 0)
		return err;
	if ((err = merge_maps_alloc(&m, src)) == 0 && (err = merge_dictionary_flat(dst, src, &m)) == 0 &&
	    (err = merge_locations(dst, src, &m)) == 0 && (err = merge_stacks(dst, src, &m)) == 0 &&
	    (err = merge_samples(dst, src, &m)) == 0 && (err = merge_processes(dst, src, &m)) == 0)
		err = merge_info(dst, &src->info);
	merge_maps_free(&m);
	return err;
}

int profile_thread_compare(const struct profile_sample *x, const struct profile_sample *y)
{
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return (x->thread_name > y->thread_name) - (x->thread_name < y->thread_name);
}
