/*
 * pprof.c — pprof export. See pprof.h for the mapping from hostprof's model.
 *
 * protobuf-c packs a tree of C structs linked by pointer arrays, so the whole message is built first. Its many
 * small parts come from one arena, freed at once. The string table is the profile's own (same indices), plus
 * the strings pprof needs that the profile lacks (label keys, hex trace IDs, comments), appended and
 * deduplicated here.
 */
#include "src/profile/pprof.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/arena.h"
#include "src/base/gzip.h"
#include "src/profile/ids.h"
#include "src/profile/profile_impl.h"
#include "src/profile/proto/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

#define KERNEL_MAPPING_NAME "[kernel.kallsyms]"
#define JIT_MAPPING_NAME "[jit]"
#define MAX_LABELS 7

/* --- the builder ------------------------------------------------------------------------------------------ */

struct label_keys {
	int64_t pid, process_name, thread_id, thread_name, trace_id, local_root_span_id, transaction_id;
};

struct builder {
	const struct profile *p;
	struct arena arena;
	char **strings;		/* the pprof string table: p's strings, then extra ones */
	uint32_t nstrings, strings_cap;
	struct hindex extra_index;	/* the extra strings */
	uint8_t *loc_used, *map_used, *fn_used;
	uint8_t *map_symbolized;	/* per mapping: some used location has lines */
	bool kernel_used, kernel_symbolized;
	uint64_t kernel_mapping_id;
	bool jit_used, jit_symbolized;	/* JIT frames: one mapping for all, as for the kernel */
	uint64_t jit_mapping_id;
	uint64_t **stack_location_ids;	/* per stack, built on first use */
	int64_t *link_trace_id;		/* per link: string index of the hex trace ID, 0 until made */
	int64_t *link_span_id;		/* per link: string index of the hex transaction ID, 0 until made */
	struct label_keys keys;
	unsigned nvalues;	/* 2, or 4 with off-CPU time: samples, cpu, off-cpu, preempted */
	pb_profile msg;
};

/* A sample worth writing: with CPU samples, or with time off CPU. */
static bool sample_used(const struct profile_sample *s)
{
	return s->count || s->off_cpu_ns;
}

static bool extra_eq(const void *table, uint64_t i, const void *key)
{
	return strcmp(((const struct builder *)table)->strings[i], key) == 0;
}

/* The string table index of s, adding it when neither the profile nor the extras have it. */
static int pb_string(struct builder *b, const char *s, int64_t *index)
{
	uint32_t i;
	uint64_t h = hash_str(HASH_SEED, s);
	int err;
	if (profile_find_string(b->p, s, &i) == 0 || hindex_find_index(&b->extra_index, h, extra_eq, b, s, &i)) {
		*index = i;
		return 0;
	}
	char *copy = arena_alloc(&b->arena, strlen(s) + 1, 1);
	if (!copy || (err = profile_grow((void **)&b->strings, &b->strings_cap, (uint64_t)b->nstrings + 1,
					 sizeof(*b->strings))) < 0 ||
	    (err = hindex_insert(&b->extra_index, h, b->nstrings)) < 0)
		return copy ? err : -ENOMEM;
	strcpy(copy, s);
	b->strings[b->nstrings] = copy;
	*index = b->nstrings++;
	return 0;
}

static int copy_profile_strings(struct builder *b)
{
	const struct profile *p = b->p;
	int err = profile_grow((void **)&b->strings, &b->strings_cap, p->strings.count ? p->strings.count : 1,
			       sizeof(*b->strings));
	if (err < 0)
		return err;
	for (uint32_t i = 0; i < p->strings.count; i++)
		b->strings[i] = p->strings.items[i];
	b->strings[0] = "";	/* pprof requires it whatever element 0 of the input held */
	b->nstrings = p->strings.count ? p->strings.count : 1;
	return 0;
}

static bool all_zero(const uint8_t *bytes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (bytes[i])
			return false;
	}
	return true;
}

/* --- what the samples reach ------------------------------------------------------------------------------- */

static void mark_location(struct builder *b, uint32_t loc)
{
	const struct profile *p = b->p;
	const struct profile_location *l = &p->locations.items[loc];
	if (b->loc_used[loc])
		return;
	b->loc_used[loc] = 1;
	if (l->frame_kind == PROFILE_FRAME_KERNEL) {
		b->kernel_used = true;
		b->kernel_symbolized |= l->nlines > 0;
	} else if (l->frame_kind == PROFILE_FRAME_JIT) {
		b->jit_used = true;
		b->jit_symbolized |= l->nlines > 0;
	} else if (l->mapping) {
		b->map_used[l->mapping] = 1;
		b->map_symbolized[l->mapping] |= l->nlines > 0;
	}
	for (uint32_t j = 0; j < l->nlines; j++)
		b->fn_used[l->lines[j].function] = 1;
}

static int mark_used(struct builder *b)
{
	const struct profile *p = b->p;
	b->loc_used = arena_alloc(&b->arena, p->locations.count + 1, 1);
	b->map_used = arena_alloc(&b->arena, p->mappings.count + 1, 1);
	b->map_symbolized = arena_alloc(&b->arena, p->mappings.count + 1, 1);
	b->fn_used = arena_alloc(&b->arena, p->functions.count + 1, 1);
	b->stack_location_ids = arena_alloc(&b->arena, p->stacks.count + 1, sizeof(uint64_t *));
	b->link_trace_id = arena_alloc(&b->arena, p->links.count + 1, sizeof(int64_t));
	b->link_span_id = arena_alloc(&b->arena, p->links.count + 1, sizeof(int64_t));
	if (!b->loc_used || !b->map_used || !b->map_symbolized || !b->fn_used || !b->stack_location_ids ||
	    !b->link_trace_id || !b->link_span_id)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_stack *st = &p->stacks.items[p->samples.items[i].stack];
		if (!sample_used(&p->samples.items[i]))
			continue;
		for (uint32_t k = 0; k < st->nlocations; k++)
			mark_location(b, st->locations[k]);
	}
	b->fn_used[0] = 0;	/* "no function": such lines are dropped */
	b->kernel_mapping_id = p->mappings.count;	/* after the profile's own, which pprof gets as ids */
	b->jit_mapping_id = p->mappings.count + 1;
	return 0;
}

/* --- dictionary ------------------------------------------------------------------------------------------- */

static int build_functions(struct builder *b)
{
	const struct profile *p = b->p;
	size_t n = 0;
	for (uint32_t f = 1; f < p->functions.count; f++)
		n += b->fn_used[f];
	pb_function *fs = arena_alloc(&b->arena, n, sizeof(*fs));
	pb_function **ptrs = arena_alloc(&b->arena, n, sizeof(*ptrs));
	if (!fs || !ptrs)
		return -ENOMEM;
	for (uint32_t f = 1, k = 0; f < p->functions.count; f++) {
		if (!b->fn_used[f])
			continue;
		perftools__profiles__function__init(&fs[k]);
		fs[k].id = f;
		fs[k].name = fs[k].system_name = p->functions.items[f].name;
		fs[k].filename = p->functions.items[f].filename;
		ptrs[k] = &fs[k];
		k++;
	}
	b->msg.function = ptrs;
	b->msg.n_function = n;
	return 0;
}

/*
 * Whole-address-space mapping: pprof then reads location addresses as ELF addresses, unadjusted. pprof
 * re-symbolizes every location of a mapping without has_* flags, replacing the lines it has, so the flags are
 * set whenever hostprof symbolized any of them: addresses it could not resolve are kept as they are.
 */
static void init_mapping(pb_mapping *m, uint64_t id, bool symbolized)
{
	perftools__profiles__mapping__init(m);
	m->id = id;
	m->memory_limit = UINT64_MAX;
	m->has_functions = m->has_filenames = m->has_line_numbers = m->has_inline_frames = symbolized;
}

static int mapping_build_id(struct builder *b, const struct profile_mapping *m, int64_t *index)
{
	char hex[33];
	*index = m->build_id;
	if (m->build_id || all_zero(m->file_id, sizeof(m->file_id)))
		return 0;
	hex_encode(m->file_id, sizeof(m->file_id), hex);
	return pb_string(b, hex, index);
}

/* pprof shows mapping[0] as the profiled program: the first mapping that is no shared library, as pprof's
 * own heuristic for legacy profiles picks it. */
static uint32_t main_mapping(const struct builder *b)
{
	const struct profile *p = b->p;
	for (uint32_t m = 1; m < p->mappings.count; m++) {
		const char *name = profile_string(p, p->mappings.items[m].filename);
		const char *so = strstr(name, ".so");
		if (b->map_used[m] && name[0] != '[' && (!so || (so[3] != '\0' && so[3] != '.' && so[3] != '_')))
			return m;
	}
	return 0;
}

static int add_mapping(struct builder *b, uint32_t m, pb_mapping *out)
{
	init_mapping(out, m, b->map_symbolized[m]);
	out->filename = b->p->mappings.items[m].filename;
	return mapping_build_id(b, &b->p->mappings.items[m], &out->build_id);
}

static int build_mappings(struct builder *b)
{
	const struct profile *p = b->p;
	uint32_t main = main_mapping(b);
	size_t n = b->kernel_used + b->jit_used, k = 0;
	int err;
	for (uint32_t m = 1; m < p->mappings.count; m++)
		n += b->map_used[m];
	pb_mapping *ms = arena_alloc(&b->arena, n, sizeof(*ms));
	pb_mapping **ptrs = arena_alloc(&b->arena, n, sizeof(*ptrs));
	if (!ms || !ptrs)
		return -ENOMEM;
	if (main && (err = add_mapping(b, main, &ms[k++])) < 0)
		return err;
	for (uint32_t m = 1; m < p->mappings.count; m++) {
		if (b->map_used[m] && m != main && (err = add_mapping(b, m, &ms[k++])) < 0)
			return err;
	}
	if (b->kernel_used) {
		init_mapping(&ms[k], b->kernel_mapping_id, b->kernel_symbolized);
		if ((err = pb_string(b, KERNEL_MAPPING_NAME, &ms[k++].filename)) < 0)
			return err;
	}
	if (b->jit_used) {
		init_mapping(&ms[k], b->jit_mapping_id, b->jit_symbolized);
		if ((err = pb_string(b, JIT_MAPPING_NAME, &ms[k++].filename)) < 0)
			return err;
	}
	for (size_t i = 0; i < n; i++)
		ptrs[i] = &ms[i];
	b->msg.mapping = ptrs;
	b->msg.n_mapping = n;
	return 0;
}

static int build_location(struct builder *b, uint32_t loc, pb_location *out)
{
	const struct profile_location *l = &b->p->locations.items[loc];
	pb_line *lines = arena_alloc(&b->arena, l->nlines, sizeof(*lines));
	pb_line **ptrs = arena_alloc(&b->arena, l->nlines, sizeof(*ptrs));
	if (!lines || !ptrs)
		return -ENOMEM;
	perftools__profiles__location__init(out);
	out->id = (uint64_t)loc + 1;	/* + 1: a stack may list location 0, and pprof ids are nonzero */
	out->mapping_id = l->frame_kind == PROFILE_FRAME_KERNEL ? b->kernel_mapping_id :
			  l->frame_kind == PROFILE_FRAME_JIT ? b->jit_mapping_id : l->mapping;
	out->address = l->address;
	out->line = ptrs;
	for (uint32_t j = 0; j < l->nlines; j++) {
		if (!l->lines[j].function)
			continue;
		perftools__profiles__line__init(&lines[out->n_line]);
		lines[out->n_line].function_id = l->lines[j].function;
		lines[out->n_line].line = l->lines[j].line;
		ptrs[out->n_line] = &lines[out->n_line];
		out->n_line++;
	}
	return 0;
}

static int build_locations(struct builder *b)
{
	const struct profile *p = b->p;
	size_t n = 0, k = 0;
	int err;
	for (uint32_t i = 0; i < p->locations.count; i++)
		n += b->loc_used[i];
	pb_location *ls = arena_alloc(&b->arena, n, sizeof(*ls));
	pb_location **ptrs = arena_alloc(&b->arena, n, sizeof(*ptrs));
	if (!ls || !ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->locations.count; i++) {
		if (!b->loc_used[i])
			continue;
		if ((err = build_location(b, i, &ls[k])) < 0)
			return err;
		ptrs[k] = &ls[k];
		k++;
	}
	b->msg.location = ptrs;
	b->msg.n_location = n;
	return 0;
}

/* --- samples ---------------------------------------------------------------------------------------------- */

static int label_keys(struct builder *b)
{
	struct label_keys *k = &b->keys;
	int err;
	if ((err = pb_string(b, "pid", &k->pid)) < 0 || (err = pb_string(b, "process name", &k->process_name)) < 0 ||
	    (err = pb_string(b, "thread id", &k->thread_id)) < 0 ||
	    (err = pb_string(b, "thread name", &k->thread_name)) < 0 ||
	    (err = pb_string(b, "trace id", &k->trace_id)) < 0 ||
	    (err = pb_string(b, "transaction id", &k->transaction_id)) < 0)
		return err;
	return pb_string(b, "local root span id", &k->local_root_span_id);
}

static const uint64_t *stack_location_ids(struct builder *b, uint32_t s)
{
	const struct profile_stack *st = &b->p->stacks.items[s];
	if (b->stack_location_ids[s] || !st->nlocations)
		return b->stack_location_ids[s];
	uint64_t *ids = arena_alloc(&b->arena, st->nlocations, sizeof(*ids));
	if (ids) {
		for (uint32_t k = 0; k < st->nlocations; k++)
			ids[k] = (uint64_t)st->locations[k] + 1;
	}
	return b->stack_location_ids[s] = ids;
}

static pb_label *add_label(pb_sample *s, pb_label *storage, int64_t key)
{
	pb_label *l = &storage[s->n_label];
	perftools__profiles__label__init(l);
	l->key = key;
	s->label[s->n_label++] = l;
	return l;
}

static uint64_t read_be64(const uint8_t *bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | bytes[i];
	return v;
}

/* The string index of bytes in hex, made once per link into *cache. */
static int hex_label(struct builder *b, const uint8_t *bytes, size_t n, int64_t *cache)
{
	char hex[33];
	if (*cache)
		return 0;
	hex_encode(bytes, n, hex);
	return pb_string(b, hex, cache);
}

static int link_labels(struct builder *b, uint32_t link, pb_sample *s, pb_label *storage)
{
	const struct profile_link *l = &b->p->links.items[link];
	int err;
	if ((err = hex_label(b, l->trace_id, sizeof(l->trace_id), &b->link_trace_id[link])) < 0 ||
	    (err = hex_label(b, l->span_id, sizeof(l->span_id), &b->link_span_id[link])) < 0)
		return err;
	add_label(s, storage, b->keys.trace_id)->str = b->link_trace_id[link];
	/* Two's complement: Datadog stores 64-bit span IDs in pprof's int64 the same way. */
	add_label(s, storage, b->keys.local_root_span_id)->num = (int64_t)read_be64(l->span_id);
	/* The same ID exactly as APM UIs show it (pprof prints numbers above 2^53 rounded). */
	add_label(s, storage, b->keys.transaction_id)->str = b->link_span_id[link];
	return 0;
}

static int sample_labels(struct builder *b, const struct profile_sample *ps, pb_sample *s)
{
	pb_label *storage = arena_alloc(&b->arena, MAX_LABELS, sizeof(*storage));
	if (!storage || !(s->label = arena_alloc(&b->arena, MAX_LABELS, sizeof(*s->label))))
		return -ENOMEM;
	add_label(s, storage, b->keys.pid)->num = ps->pid;
	if (ps->comm)
		add_label(s, storage, b->keys.process_name)->str = ps->comm;
	add_label(s, storage, b->keys.thread_id)->num = ps->tid;
	if (ps->thread_name)
		add_label(s, storage, b->keys.thread_name)->str = ps->thread_name;
	return ps->link ? link_labels(b, ps->link, s, storage) : 0;
}

static int build_sample(struct builder *b, const struct profile_sample *ps, pb_sample *s)
{
	const struct profile_stack *st = &b->p->stacks.items[ps->stack];
	perftools__profiles__sample__init(s);
	s->n_location_id = st->nlocations;
	s->location_id = (uint64_t *)stack_location_ids(b, ps->stack);
	s->n_value = b->nvalues;
	if (!(s->value = arena_alloc(&b->arena, b->nvalues, sizeof(*s->value))) || (st->nlocations && !s->location_id))
		return -ENOMEM;
	s->value[0] = (int64_t)ps->count;
	s->value[1] = (int64_t)(ps->cpu_ns ? ps->cpu_ns : ps->count * b->p->info.period_ns);
	if (b->nvalues == 4) {
		s->value[2] = (int64_t)ps->off_cpu_ns;
		s->value[3] = (int64_t)ps->preempted_ns;
	}
	return sample_labels(b, ps, s);
}

static int build_samples(struct builder *b)
{
	const struct profile *p = b->p;
	size_t n = 0, k = 0;
	int err;
	for (uint32_t i = 0; i < p->samples.count; i++)
		n += sample_used(&p->samples.items[i]);
	pb_sample *ss = arena_alloc(&b->arena, n, sizeof(*ss));
	pb_sample **ptrs = arena_alloc(&b->arena, n, sizeof(*ptrs));
	if (!ss || !ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		if (!sample_used(&p->samples.items[i]))
			continue;
		if ((err = build_sample(b, &p->samples.items[i], &ss[k])) < 0)
			return err;
		ptrs[k] = &ss[k];
		k++;
	}
	b->msg.sample = ptrs;
	b->msg.n_sample = n;
	return 0;
}

/* --- the profile ------------------------------------------------------------------------------------------ */

static int value_type(struct builder *b, const char *type, const char *unit, pb_value_type **out)
{
	pb_value_type *v = arena_alloc(&b->arena, 1, sizeof(*v));
	int err;
	if (!v)
		return -ENOMEM;
	perftools__profiles__value_type__init(v);
	if ((err = pb_string(b, type, &v->type)) < 0 || (err = pb_string(b, unit, &v->unit)) < 0)
		return err;
	*out = v;
	return 0;
}

static int add_comment(struct builder *b, const char *text)
{
	int err = pb_string(b, text, &b->msg.comment[b->msg.n_comment]);
	if (err == 0)
		b->msg.n_comment++;
	return err;
}

/* Free-form facts pprof shows with -comments. */
static int build_comments(struct builder *b)
{
	const struct profile_info *i = &b->p->info;
	char text[512];
	int err = 0;
	if (!(b->msg.comment = arena_alloc(&b->arena, 5, sizeof(*b->msg.comment))))
		return -ENOMEM;
	if (i->producer && *i->producer)
		err = add_comment(b, i->producer);
	if (err == 0 && i->hostname && *i->hostname) {
		int at = snprintf(text, sizeof(text), "host %s, Linux %s", i->hostname, i->kernel ? i->kernel : "");
		uint32_t cpus = i->cpus_online ? i->cpus_online : i->cpus_available;
		if (cpus && at >= 0 && (size_t)at < sizeof(text))
			snprintf(text + at, sizeof(text) - (size_t)at, ", %" PRIu32 " CPUs", cpus);
		err = add_comment(b, text);
	}
	if (err == 0 && i->cmdline && *i->cmdline) {
		snprintf(text, sizeof(text), "command %s", i->cmdline);
		err = add_comment(b, text);
	}
	if (err == 0 && i->event && *i->event) {
		snprintf(text, sizeof(text), "event %s at %" PRIu64 " Hz", i->event, i->frequency_hz);
		err = add_comment(b, text);
	}
	if (err == 0 && i->samples) {
		snprintf(text, sizeof(text), "%" PRIu64 " samples, %" PRIu64 " lost", i->samples, i->lost);
		err = add_comment(b, text);
	}
	return err;
}

static int build_header(struct builder *b)
{
	const struct profile_info *i = &b->p->info;
	b->nvalues = profile_has_off_cpu(b->p) ? 4 : 2;
	pb_value_type **types = arena_alloc(&b->arena, b->nvalues, sizeof(*types));
	int err;
	if (!types)
		return -ENOMEM;
	b->msg.sample_type = types;
	b->msg.n_sample_type = b->nvalues;
	if (b->nvalues == 4 && ((err = value_type(b, "off-cpu", "nanoseconds", &types[2])) < 0 ||
				(err = value_type(b, "preempted", "nanoseconds", &types[3])) < 0))
		return err;
	if ((err = value_type(b, "samples", "count", &types[0])) < 0 ||
	    (err = value_type(b, "cpu", "nanoseconds", &types[1])) < 0 ||
	    (err = value_type(b, "cpu", "nanoseconds", &b->msg.period_type)) < 0 ||
	    (err = pb_string(b, "cpu", &b->msg.default_sample_type)) < 0)
		return err;
	b->msg.period = (int64_t)i->period_ns;
	b->msg.time_nanos = (int64_t)i->start_unix_ns;
	b->msg.duration_nanos = (int64_t)i->duration_ns;
	return build_comments(b);
}

static int build(struct builder *b)
{
	int err;
	perftools__profiles__profile__init(&b->msg);
	if ((err = copy_profile_strings(b)) < 0 || (err = mark_used(b)) < 0 || (err = label_keys(b)) < 0 ||
	    (err = build_header(b)) < 0 || (err = build_functions(b)) < 0 || (err = build_mappings(b)) < 0 ||
	    (err = build_locations(b)) < 0 || (err = build_samples(b)) < 0)
		return err;
	b->msg.string_table = b->strings;
	b->msg.n_string_table = b->nstrings;
	return 0;
}

static void builder_free(struct builder *b)
{
	arena_free(&b->arena);
	free(b->strings);
	hindex_free(&b->extra_index);
}

int pprof_encode(const struct profile *p, uint8_t **buf, size_t *len)
{
	struct builder b = { .p = p };
	int err = build(&b);
	*buf = NULL;
	*len = 0;
	if (err == 0) {
		size_t n = perftools__profiles__profile__get_packed_size(&b.msg);
		if (!(*buf = malloc(n ? n : 1)))
			err = -ENOMEM;
		else
			*len = perftools__profiles__profile__pack(&b.msg, *buf);
	}
	builder_free(&b);
	return err;
}

int pprof_write(const struct profile *p, FILE *out)
{
	uint8_t *buf;
	size_t len;
	int err = pprof_encode(p, &buf, &len);
	if (err == 0)
		err = gzip_write(buf, len, out);
	free(buf);
	if (err == 0 && ferror(out))
		err = -EIO;
	return err;
}
