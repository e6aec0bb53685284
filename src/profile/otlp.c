/*
 * otlp.c — the OTLP profiles export request. See otlp.h for the mapping from hostprof's model.
 *
 * protobuf-c packs a tree of C structs linked by pointer arrays, so the whole request is built first, its parts
 * from one arena (src/base/arena.h) freed at once. The dictionary is made anew rather than copied: only what
 * the samples reach goes in (a profile's tables may hold what no exported sample uses, and OTLP asks for no
 * orphans), each table renumbered in the profile's order. Strings are interned into the request's own string
 * table, attributes into its attribute table, so neither has duplicates.
 */
#include "src/profile/otlp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/arena.h"
#include "src/profile/ids.h"
#include "src/profile/msgpack_schema.h"
#include "src/profile/process_groups.h"
#include "src/profile/profile_impl.h"
#include "src/profile/proto/otlp_profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles pb_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles pb_scope_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType pb_value_type;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pb_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__Line pb_line;
typedef Opentelemetry__Proto__Profiles__V1development__Function pb_function;
typedef Opentelemetry__Proto__Profiles__V1development__Link pb_link;
typedef Opentelemetry__Proto__Profiles__V1development__Stack pb_stack;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_attribute;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_key_value;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any_value;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pb_scope;

/* The architecture hostprof records on is the one it was built for, in OpenTelemetry's names (host.arch). */
#if defined(__x86_64__)
#define BUILD_ARCH "amd64"
#elif defined(__aarch64__)
#define BUILD_ARCH "arm64"
#else
#define BUILD_ARCH NULL
#endif

/* Protobuf's limits: indices are int32, and readers refuse a message of 2 GiB or more. */
#define OTLP_MAX_INDEX ((uint32_t)INT32_MAX)
#define OTLP_MAX_MESSAGE ((size_t)INT32_MAX)

/* The resource attributes of a process: host.id, host.name, host.arch, os.type, process.pid,
 * process.executable.name, process.executable.path, container.id, service.name. */
#define MAX_RESOURCE_ATTRS 9
/* A sample's attributes: thread.id, thread.name, service.name. */
#define MAX_SAMPLE_ATTRS 3

/* The kinds of value, one Profile each (a Profile has a single sample type). */
enum value_kind { VK_CPU, VK_SAMPLES, VK_OFF_CPU, VK_PREEMPTED, VK_N };

static const struct {
	const char *type, *unit;
	bool sampled;		/* taken every period: the Profile has period_type cpu/nanoseconds and the period */
} value_kinds[VK_N] = {
	[VK_CPU] = { "cpu", "nanoseconds", true },
	[VK_SAMPLES] = { "samples", "count", true },
	[VK_OFF_CPU] = { "off-cpu", "nanoseconds", false },
	[VK_PREEMPTED] = { "preempted", "nanoseconds", false },
};

/* An attribute of the attribute table: key as a string index, value an integer or a string (inline). */
struct attr {
	int32_t key;
	bool is_int;
	int64_t ival;
	const char *sval;	/* the profile's, or the arena's */
};

/* New indices of a profile table's elements in the request: 0 for element 0 and for what no sample reaches. */
struct renumbering {
	uint32_t *index;
	uint32_t count;		/* elements in the request's table, element 0 included */
};

struct builder {
	const struct profile *p;
	struct otlp_encode_options o;	/* with the defaults filled in */
	struct arena arena;
	char **strings;			/* the request's string table */
	uint32_t nstrings, strings_cap;
	struct hindex string_index;
	struct attr *attrs;		/* the request's attribute table */
	uint32_t nattrs, attrs_cap;
	struct hindex attr_index;
	struct renumbering mappings, locations, functions, stacks, links;
	unsigned nkinds;		/* VK_CPU .. VK_SAMPLES, or .. VK_PREEMPTED with off-CPU time */
	pb_value_type *value_types[VK_N], *period_type;	/* made on first use */
	pb_key_value **host_attrs;	/* the attributes every resource shares */
	size_t nhost_attrs;
	pb_dictionary dict;
	pb_request msg;
};

/* A sample worth writing: with CPU samples, or with time off CPU. */
static bool sample_used(const struct profile_sample *s)
{
	return s->count || s->off_cpu_ns;
}

/* --- the string and attribute tables ---------------------------------------------------------------------- */

static bool string_eq(const void *table, uint64_t i, const void *key)
{
	return strcmp(((const struct builder *)table)->strings[i], key) == 0;
}

/* The string table index of s (NULL and "" are 0), added when new. s must outlive the builder. */
static int str(struct builder *b, const char *s, int32_t *index)
{
	uint64_t h;
	uint32_t i;
	int err;
	if (!s || !*s) {
		*index = 0;
		return 0;
	}
	h = hash_str(HASH_SEED, s);
	if (!hindex_find_index(&b->string_index, h, string_eq, b, s, &i)) {
		if (b->nstrings >= OTLP_MAX_INDEX)
			return -EOVERFLOW;
		if ((err = profile_grow((void **)&b->strings, &b->strings_cap, (uint64_t)b->nstrings + 1,
					sizeof(*b->strings))) < 0 ||
		    (err = hindex_insert(&b->string_index, h, b->nstrings)) < 0)
			return err;
		b->strings[b->nstrings] = (char *)s;	/* packing only reads it */
		i = b->nstrings++;
	}
	*index = (int32_t)i;
	return 0;
}

static uint64_t hash_attr(const struct attr *a)
{
	uint64_t h = hash_u64(hash_u64(HASH_SEED, (uint32_t)a->key), a->is_int);
	return a->is_int ? hash_u64(h, (uint64_t)a->ival) : hash_str(h, a->sval);
}

static bool attr_eq(const void *table, uint64_t i, const void *key)
{
	const struct attr *a = &((const struct builder *)table)->attrs[i], *k = key;
	return a->key == k->key && a->is_int == k->is_int &&
	       (a->is_int ? a->ival == k->ival : strcmp(a->sval, k->sval) == 0);
}

/* The attribute table index of (key, value), added when new; an integer value when sval is NULL. */
static int attr(struct builder *b, const char *key, int64_t ival, const char *sval, int32_t *index)
{
	struct attr a = { .is_int = !sval, .ival = ival, .sval = sval };
	uint64_t h;
	uint32_t i;
	int err = str(b, key, &a.key);
	if (err < 0)
		return err;
	h = hash_attr(&a);
	if (!hindex_find_index(&b->attr_index, h, attr_eq, b, &a, &i)) {
		if (b->nattrs >= OTLP_MAX_INDEX)
			return -EOVERFLOW;
		if ((err = profile_grow((void **)&b->attrs, &b->attrs_cap, (uint64_t)b->nattrs + 1, sizeof(a))) < 0 ||
		    (err = hindex_insert(&b->attr_index, h, b->nattrs)) < 0)
			return err;
		b->attrs[b->nattrs] = a;
		i = b->nattrs++;
	}
	*index = (int32_t)i;
	return 0;
}

/* A string attribute when the value is there: appended to list (n entries so far). */
static int add_str_attr(struct builder *b, const char *key, const char *value, int32_t *list, size_t *n)
{
	int err = 0;
	if (value && *value && (err = attr(b, key, 0, value, &list[*n])) == 0)
		(*n)++;
	return err;
}

static pb_any_value *any_value(struct builder *b, int64_t ival, const char *sval)
{
	pb_any_value *v = arena_alloc(&b->arena, 1, sizeof(*v));
	if (!v)
		return NULL;
	opentelemetry__proto__common__v1__any_value__init(v);
	if (sval) {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		v->string_value = (char *)sval;
	} else {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		v->int_value = ival;
	}
	return v;
}

/* The attribute table as the dictionary holds it; element 0 is the empty KeyValueAndUnit. */
static int build_attribute_table(struct builder *b)
{
	pb_attribute *as = arena_alloc(&b->arena, b->nattrs, sizeof(*as));
	pb_attribute **ptrs = arena_alloc(&b->arena, b->nattrs, sizeof(*ptrs));
	if (!as || !ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->nattrs; i++) {
		opentelemetry__proto__profiles__v1development__key_value_and_unit__init(&as[i]);
		ptrs[i] = &as[i];
		if (i == 0)
			continue;
		as[i].key_strindex = b->attrs[i].key;
		if (!(as[i].value = any_value(b, b->attrs[i].ival, b->attrs[i].is_int ? NULL : b->attrs[i].sval)))
			return -ENOMEM;
	}
	b->dict.attribute_table = ptrs;
	b->dict.n_attribute_table = b->nattrs;
	return 0;
}

/* --- what the samples reach, renumbered ------------------------------------------------------------------- */

static int renumbering_new(struct builder *b, struct renumbering *r, uint32_t n)
{
	r->index = arena_alloc(&b->arena, n ? n : 1, sizeof(*r->index));
	r->count = 1;
	return r->index ? 0 : -ENOMEM;
}

/* Mark element i as reached (index 1 until numbered). */
static void reach(struct renumbering *r, uint32_t i)
{
	if (i)
		r->index[i] = 1;
}

/* Number the reached elements 1, 2, ... in the profile's order. */
static int number(struct renumbering *r, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		if (!r->index[i])
			continue;
		if (r->count >= OTLP_MAX_INDEX)
			return -EOVERFLOW;
		r->index[i] = r->count++;
	}
	return 0;
}

static void reach_stack(struct builder *b, uint32_t s)
{
	const struct profile *p = b->p;
	const struct profile_stack *st = &p->stacks.items[s];
	reach(&b->stacks, s);
	for (uint32_t k = 0; k < st->nlocations; k++) {
		const struct profile_location *l = &p->locations.items[st->locations[k]];
		reach(&b->locations, st->locations[k]);
		reach(&b->mappings, l->mapping);
		for (uint32_t j = 0; j < l->nlines; j++)
			reach(&b->functions, l->lines[j].function);
	}
}

static int renumber(struct builder *b)
{
	const struct profile *p = b->p;
	int err;
	if ((err = renumbering_new(b, &b->mappings, p->mappings.count)) < 0 ||
	    (err = renumbering_new(b, &b->locations, p->locations.count)) < 0 ||
	    (err = renumbering_new(b, &b->functions, p->functions.count)) < 0 ||
	    (err = renumbering_new(b, &b->stacks, p->stacks.count)) < 0 ||
	    (err = renumbering_new(b, &b->links, p->links.count)) < 0)
		return err;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		if (!sample_used(s))
			continue;
		reach(&b->links, s->link);
		if (!b->stacks.index[s->stack])	/* each stack's locations once */
			reach_stack(b, s->stack);
	}
	if ((err = number(&b->mappings, p->mappings.count)) < 0 || (err = number(&b->locations, p->locations.count)) < 0 ||
	    (err = number(&b->functions, p->functions.count)) < 0 || (err = number(&b->stacks, p->stacks.count)) < 0)
		return err;
	return number(&b->links, p->links.count);
}

/* n structs of size bytes (*items, zeroed: the caller inits them) and the array of pointers to them that
 * protobuf-c takes for a repeated message field; NULL when memory runs out. */
static void **table(struct builder *b, uint32_t n, size_t size, void **items)
{
	void **ptrs = arena_alloc(&b->arena, n, sizeof(*ptrs));
	*items = arena_alloc(&b->arena, n, size);
	if (!ptrs || !*items)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		ptrs[i] = (char *)*items + i * size;
	return ptrs;
}

/* --- the dictionary --------------------------------------------------------------------------------------- */

static int build_functions(struct builder *b)
{
	const struct profile *p = b->p;
	pb_function *fs;
	pb_function **ptrs = (pb_function **)table(b, b->functions.count, sizeof(*fs), (void **)&fs);
	int err;
	if (!ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->functions.count; i++)
		opentelemetry__proto__profiles__v1development__function__init(&fs[i]);
	for (uint32_t f = 1; f < p->functions.count; f++) {
		pb_function *out = &fs[b->functions.index[f]];
		if (!b->functions.index[f])
			continue;
		/* The profile holds demangled names only: system_name (the mangled one) stays unset. */
		if ((err = str(b, profile_string(p, p->functions.items[f].name), &out->name_strindex)) < 0 ||
		    (err = str(b, profile_string(p, p->functions.items[f].filename), &out->filename_strindex)) < 0)
			return err;
	}
	b->dict.function_table = ptrs;
	b->dict.n_function_table = b->functions.count;
	return 0;
}

/* The mapping's identity: its FileID and GNU build ID, as the semantic conventions name them. */
static int mapping_attrs(struct builder *b, const struct profile_mapping *m, pb_mapping *out)
{
	static const uint8_t zero_id[16];
	char *hex = arena_alloc(&b->arena, 2 * sizeof(m->file_id) + 1, 1);
	int err;
	if (!hex || !(out->attribute_indices = arena_alloc(&b->arena, 2, sizeof(int32_t))))
		return -ENOMEM;
	if (memcmp(m->file_id, zero_id, sizeof(zero_id)) != 0) {
		hex_encode(m->file_id, sizeof(m->file_id), hex);
		if ((err = add_str_attr(b, msgpack_attr_key_name(ATTR_HTLHASH), hex, out->attribute_indices,
					&out->n_attribute_indices)) < 0)
			return err;
	}
	return add_str_attr(b, msgpack_attr_key_name(ATTR_GNU_BUILD_ID), profile_string(b->p, m->build_id),
			    out->attribute_indices, &out->n_attribute_indices);
}

static int build_mappings(struct builder *b)
{
	const struct profile *p = b->p;
	pb_mapping *ms;
	pb_mapping **ptrs = (pb_mapping **)table(b, b->mappings.count, sizeof(*ms), (void **)&ms);
	int err;
	if (!ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->mappings.count; i++)
		opentelemetry__proto__profiles__v1development__mapping__init(&ms[i]);
	for (uint32_t m = 1; m < p->mappings.count; m++) {
		const struct profile_mapping *pm = &p->mappings.items[m];
		pb_mapping *out = &ms[b->mappings.index[m]];
		if (!b->mappings.index[m])
			continue;
		out->memory_start = pm->memory_start;
		out->memory_limit = pm->memory_limit;
		out->file_offset = pm->file_offset;
		if ((err = str(b, profile_string(p, pm->filename), &out->filename_strindex)) < 0 ||
		    (err = mapping_attrs(b, pm, out)) < 0)
			return err;
	}
	b->dict.mapping_table = ptrs;
	b->dict.n_mapping_table = b->mappings.count;
	return 0;
}

/* Lines innermost first, as the profile has them; a line without a function says nothing and is left out. */
static int location_lines(struct builder *b, const struct profile_location *l, pb_location *out)
{
	pb_line *lines;
	if (!l->nlines)
		return 0;
	if (!(out->lines = (pb_line **)table(b, l->nlines, sizeof(*lines), (void **)&lines)))
		return -ENOMEM;
	for (uint32_t j = 0; j < l->nlines; j++) {
		if (!b->functions.index[l->lines[j].function])
			continue;
		pb_line *line = out->lines[out->n_lines++];
		opentelemetry__proto__profiles__v1development__line__init(line);
		line->function_index = (int32_t)b->functions.index[l->lines[j].function];
		line->line = l->lines[j].line;
	}
	return 0;
}

static int build_location(struct builder *b, const struct profile_location *l, pb_location *out)
{
	int err;
	out->mapping_index = (int32_t)b->mappings.index[l->mapping];
	out->address = l->address;
	if ((err = location_lines(b, l, out)) < 0)
		return err;
	if (!(out->attribute_indices = arena_alloc(&b->arena, 1, sizeof(int32_t))))
		return -ENOMEM;
	return add_str_attr(b, msgpack_attr_key_name(ATTR_FRAME_TYPE), msgpack_frame_type_name(l->frame_kind),
			    out->attribute_indices, &out->n_attribute_indices);
}

static int build_locations(struct builder *b)
{
	const struct profile *p = b->p;
	pb_location *ls;
	pb_location **ptrs = (pb_location **)table(b, b->locations.count, sizeof(*ls), (void **)&ls);
	int err;
	if (!ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->locations.count; i++)
		opentelemetry__proto__profiles__v1development__location__init(&ls[i]);
	for (uint32_t i = 1; i < p->locations.count; i++) {
		if (b->locations.index[i] &&
		    (err = build_location(b, &p->locations.items[i], &ls[b->locations.index[i]])) < 0)
			return err;
	}
	b->dict.location_table = ptrs;
	b->dict.n_location_table = b->locations.count;
	return 0;
}

static int build_stacks(struct builder *b)
{
	const struct profile *p = b->p;
	pb_stack *ss;
	pb_stack **ptrs = (pb_stack **)table(b, b->stacks.count, sizeof(*ss), (void **)&ss);
	if (!ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->stacks.count; i++)
		opentelemetry__proto__profiles__v1development__stack__init(&ss[i]);
	for (uint32_t s = 1; s < p->stacks.count; s++) {
		const struct profile_stack *st = &p->stacks.items[s];
		pb_stack *out = &ss[b->stacks.index[s]];
		if (!b->stacks.index[s])
			continue;
		if (!(out->location_indices = arena_alloc(&b->arena, st->nlocations, sizeof(int32_t))))
			return -ENOMEM;
		out->n_location_indices = st->nlocations;
		for (uint32_t k = 0; k < st->nlocations; k++)
			out->location_indices[k] = (int32_t)b->locations.index[st->locations[k]];
	}
	b->dict.stack_table = ptrs;
	b->dict.n_stack_table = b->stacks.count;
	return 0;
}

/* Links: element 0 is 16 and 8 zero bytes, as OTLP asks of "no link". */
static int build_links(struct builder *b)
{
	static const uint8_t zero_trace[16], zero_span[8];
	const struct profile *p = b->p;
	pb_link *ls;
	pb_link **ptrs = (pb_link **)table(b, b->links.count, sizeof(*ls), (void **)&ls);
	if (!ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->links.count; i++) {
		opentelemetry__proto__profiles__v1development__link__init(&ls[i]);
		ls[i].trace_id = (ProtobufCBinaryData){ sizeof(zero_trace), (uint8_t *)zero_trace };
		ls[i].span_id = (ProtobufCBinaryData){ sizeof(zero_span), (uint8_t *)zero_span };
	}
	for (uint32_t l = 1; l < p->links.count; l++) {
		const struct profile_link *pl = &p->links.items[l];
		if (!b->links.index[l])
			continue;
		ls[b->links.index[l]].trace_id.data = (uint8_t *)pl->trace_id;
		ls[b->links.index[l]].span_id.data = (uint8_t *)pl->span_id;
	}
	b->dict.link_table = ptrs;
	b->dict.n_link_table = b->links.count;
	return 0;
}

/* --- samples and profiles --------------------------------------------------------------------------------- */

static uint64_t sample_value(const struct profile *p, const struct profile_sample *s, enum value_kind k)
{
	switch (k) {
	case VK_CPU:
		return profile_sample_value(p, s, PROFILE_VALUE_CPU);
	case VK_SAMPLES:
		return s->count;
	case VK_OFF_CPU:
		return s->off_cpu_ns;
	case VK_PREEMPTED:
		return s->preempted_ns;
	case VK_N:
		break;
	}
	return 0;
}

/* One process's samples as the Profiles share them: stack, attributes and link, made once per sample. */
struct group_samples {
	uint32_t *order;	/* the indices of its samples that are written */
	uint32_t n;
	pb_sample *identity;	/* per sample: stack_index, attribute_indices, link_index (no values) */
	const char *service;	/* the process's service.name, NULL if none */
};

static int sample_identity(struct builder *b, const struct profile_sample *s, const char *service, pb_sample *out)
{
	const struct profile *p = b->p;
	int32_t *list = arena_alloc(&b->arena, MAX_SAMPLE_ATTRS, sizeof(*list));
	size_t n = 0;
	int err;
	if (!list)
		return -ENOMEM;
	if ((err = attr(b, msgpack_attr_key_name(ATTR_THREAD_ID), s->tid, NULL, &list[n++])) < 0 ||
	    (err = add_str_attr(b, msgpack_attr_key_name(ATTR_THREAD_NAME), profile_string(p, s->thread_name), list,
				&n)) < 0)
		return err;
	/* A sample of another service than its process's (the resource's) says so itself. */
	if (s->service && strcmp(profile_string(p, s->service), service ? service : "") != 0 &&
	    (err = add_str_attr(b, msgpack_attr_key_name(ATTR_SERVICE_NAME), profile_string(p, s->service), list,
				&n)) < 0)
		return err;
	opentelemetry__proto__profiles__v1development__sample__init(out);
	out->stack_index = (int32_t)b->stacks.index[s->stack];
	out->link_index = (int32_t)b->links.index[s->link];
	out->attribute_indices = list;
	out->n_attribute_indices = n;
	return 0;
}

/* The ValueType (type, unit), made on first use into *v so that its strings are in the table only if used. */
static int value_type(struct builder *b, const char *type, const char *unit, pb_value_type **v)
{
	int err;
	if (*v)
		return 0;
	if (!(*v = arena_alloc(&b->arena, 1, sizeof(**v))))
		return -ENOMEM;
	opentelemetry__proto__profiles__v1development__value_type__init(*v);
	if ((err = str(b, type, &(*v)->type_strindex)) < 0 || (err = str(b, unit, &(*v)->unit_strindex)) < 0)
		return err;
	return 0;
}

/* Whether every sample of g counted on CPU has the time of each of its samples: then the samples/count Profile
 * gives them (one shape per Profile: all its samples timed, or none). */
static bool group_timed(const struct profile *p, const struct group_samples *g)
{
	bool any = false;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct profile_sample *s = &p->samples.items[g->order[i]];
		if (s->count && s->ntimestamps != s->count)
			return false;
		any |= s->count != 0;
	}
	return any;
}

/* t within the Profile's [time_unix_nano, time_unix_nano + duration_nano), as OTLP requires: a sample taken just
 * before the interval began and read after it (the daemon's next interval) is stamped at its start. */
static uint64_t within_profile(const struct profile_info *i, uint64_t t)
{
	uint64_t last;
	if (__builtin_add_overflow(i->start_unix_ns, i->duration_ns ? i->duration_ns - 1 : 0, &last))
		last = UINT64_MAX;
	return t < i->start_unix_ns ? i->start_unix_ns : t > last ? last : t;
}

/* A timed sample's values and timestamps, parallel: one sample each, at its time. */
static int timed_values(struct builder *b, const struct profile_sample *s, pb_sample *out)
{
	int64_t *values = arena_alloc(&b->arena, s->ntimestamps, sizeof(*values));
	uint64_t *times = arena_alloc(&b->arena, s->ntimestamps, sizeof(*times));
	if (!values || !times)
		return -ENOMEM;
	for (uint32_t k = 0; k < s->ntimestamps; k++) {
		values[k] = 1;
		times[k] = within_profile(&b->p->info, s->timestamps[k]);
	}
	out->values = values;
	out->n_values = s->ntimestamps;
	out->timestamps_unix_nano = times;
	out->n_timestamps_unix_nano = s->ntimestamps;
	return 0;
}

/* The Profile of value kind k over g's samples that have some of it; NULL in *out when none has. */
static int build_profile(struct builder *b, const struct group_samples *g, enum value_kind k, pb_profile **out)
{
	const struct profile *p = b->p;
	size_t n = 0;
	*out = NULL;
	for (uint32_t i = 0; i < g->n; i++)
		n += sample_value(p, &p->samples.items[g->order[i]], k) != 0;
	if (!n)
		return 0;
	pb_profile *prof = arena_alloc(&b->arena, 1, sizeof(*prof));
	pb_sample *ss;
	pb_sample **ptrs = (pb_sample **)table(b, n, sizeof(*ss), (void **)&ss);
	int64_t *values = arena_alloc(&b->arena, n, sizeof(*values));
	int err;
	if (!prof || !ptrs || !values)
		return -ENOMEM;
	if ((err = value_type(b, value_kinds[k].type, value_kinds[k].unit, &b->value_types[k])) < 0 ||
	    (value_kinds[k].sampled && (err = value_type(b, "cpu", "nanoseconds", &b->period_type)) < 0))
		return err;
	opentelemetry__proto__profiles__v1development__profile__init(prof);
	prof->sample_type = b->value_types[k];
	prof->time_unix_nano = p->info.start_unix_ns;
	prof->duration_nano = p->info.duration_ns;
	if (value_kinds[k].sampled) {
		prof->period_type = b->period_type;
		prof->period = (int64_t)p->info.period_ns;
	}
	bool timed = k == VK_SAMPLES && group_timed(p, g);
	for (uint32_t i = 0, j = 0; i < g->n; i++) {
		uint64_t v = sample_value(p, &p->samples.items[g->order[i]], k);
		if (!v)
			continue;
		ss[j] = g->identity[i];
		values[j] = (int64_t)v;	/* at most PROFILE_VALUE_MAX (profile.h) */
		ss[j].values = &values[j];
		ss[j].n_values = 1;
		if (timed && (err = timed_values(b, &p->samples.items[g->order[i]], &ss[j])) < 0)
			return err;
		j++;
	}
	prof->samples = ptrs;
	prof->n_samples = n;
	*out = prof;
	return 0;
}

/* --- resources -------------------------------------------------------------------------------------------- */

static pb_key_value *key_value(struct builder *b, const char *key, int64_t ival, const char *sval)
{
	pb_key_value *kv = arena_alloc(&b->arena, 1, sizeof(*kv));
	if (!kv)
		return NULL;
	opentelemetry__proto__common__v1__key_value__init(kv);
	kv->key = (char *)key;
	return (kv->value = any_value(b, ival, sval)) ? kv : NULL;
}

/* A string resource attribute when the value is there. */
static int add_str_kv(struct builder *b, pb_key_value **list, size_t *n, const char *key, const char *value)
{
	if (!value || !*value)
		return 0;
	return (list[(*n)++] = key_value(b, key, 0, value)) ? 0 : -ENOMEM;
}

/* The attributes of the host, the same in every resource. */
static int build_host_attrs(struct builder *b)
{
	const struct otlp_encode_options *o = &b->o;
	pb_key_value **list = arena_alloc(&b->arena, MAX_RESOURCE_ATTRS, sizeof(*list));
	size_t n = 0;
	int err;
	if (!list)
		return -ENOMEM;
	if ((err = add_str_kv(b, list, &n, "host.id", o->host_id)) < 0 ||
	    (err = add_str_kv(b, list, &n, "host.name", o->host_name)) < 0 ||
	    (err = add_str_kv(b, list, &n, "host.arch", o->host_arch)) < 0 ||
	    (err = add_str_kv(b, list, &n, "os.type", "linux")) < 0)
		return err;
	b->host_attrs = list;
	b->nhost_attrs = n;
	return 0;
}

/* The process's service: the first its samples name (an APM agent publishes one per process). */
static const char *group_service(const struct profile *p, const uint32_t *order, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct profile_sample *s = &p->samples.items[order[i]];
		if (sample_used(s) && s->service)
			return profile_string(p, s->service);
	}
	return NULL;
}

static int build_resource(struct builder *b, const struct profile_sample *rep, const char *service,
			  pb_resource **out)
{
	pb_resource *r = arena_alloc(&b->arena, 1, sizeof(*r));
	pb_key_value **list = arena_alloc(&b->arena, MAX_RESOURCE_ATTRS, sizeof(*list));
	size_t n = b->nhost_attrs;
	int err;
	if (!r || !list)
		return -ENOMEM;
	opentelemetry__proto__resource__v1__resource__init(r);
	memcpy(list, b->host_attrs, n * sizeof(*list));
	if (!(list[n++] = key_value(b, RESOURCE_PID, rep->pid, NULL)))
		return -ENOMEM;
	const struct profile_process *proc = profile_find_process(b->p, rep->pid);
	if ((err = add_str_kv(b, list, &n, RESOURCE_COMM, profile_string(b->p, rep->comm))) < 0 ||
	    (proc && (err = add_str_kv(b, list, &n, RESOURCE_EXE_PATH, profile_string(b->p, proc->exe_path))) < 0) ||
	    (proc && (err = add_str_kv(b, list, &n, RESOURCE_CONTAINER_ID,
				       profile_string(b->p, proc->container_id))) < 0) ||
	    (err = add_str_kv(b, list, &n, msgpack_attr_key_name(ATTR_SERVICE_NAME), service)) < 0)
		return err;
	r->attributes = list;
	r->n_attributes = n;
	*out = r;
	return 0;
}

/* The scope and its Profiles, one per kind of value the samples have. */
static int build_scope(struct builder *b, const struct group_samples *g, pb_scope_profiles **out)
{
	pb_scope_profiles *sp = arena_alloc(&b->arena, 1, sizeof(*sp));
	pb_scope *scope = arena_alloc(&b->arena, 1, sizeof(*scope));
	pb_profile **profiles = arena_alloc(&b->arena, VK_N, sizeof(*profiles));
	int err;
	if (!sp || !scope || !profiles)
		return -ENOMEM;
	opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
	opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
	scope->name = OTLP_SCOPE_NAME;
	if (b->o.scope_version)
		scope->version = (char *)b->o.scope_version;
	sp->scope = scope;
	sp->profiles = profiles;
	for (unsigned k = 0; k < b->nkinds; k++) {
		if ((err = build_profile(b, g, (enum value_kind)k, &profiles[sp->n_profiles])) < 0)
			return err;
		sp->n_profiles += profiles[sp->n_profiles] != NULL;
	}
	*out = sp;
	return 0;
}

/* The ResourceProfiles of one process; NULL in *out when none of its samples is written. */
static int build_resource_profiles(struct builder *b, const struct process_groups *groups, uint32_t group,
				   pb_resource_profiles **out)
{
	const struct profile *p = b->p;
	const uint32_t *all = &groups->order[groups->start[group]];
	uint32_t n = groups->start[group + 1] - groups->start[group];
	struct group_samples g = { .service = group_service(p, all, n) };
	pb_resource_profiles *rp;
	pb_scope_profiles **scopes;
	int err;
	*out = NULL;
	g.identity = arena_alloc(&b->arena, n, sizeof(*g.identity));
	if (!g.identity || !(g.order = arena_alloc(&b->arena, n, sizeof(*g.order))))
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		if (!sample_used(&p->samples.items[all[i]]))
			continue;
		if ((err = sample_identity(b, &p->samples.items[all[i]], g.service, &g.identity[g.n])) < 0)
			return err;
		g.order[g.n++] = all[i];
	}
	if (!g.n)
		return 0;
	rp = arena_alloc(&b->arena, 1, sizeof(*rp));
	scopes = arena_alloc(&b->arena, 1, sizeof(*scopes));
	if (!rp || !scopes)
		return -ENOMEM;
	opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
	if ((err = build_resource(b, process_group_sample(p, groups, group), g.service, &rp->resource)) < 0 ||
	    (err = build_scope(b, &g, &scopes[0])) < 0)
		return err;
	rp->scope_profiles = scopes;
	rp->n_scope_profiles = 1;
	*out = rp;
	return 0;
}

/* --- the request ------------------------------------------------------------------------------------------ */

static int build_resources(struct builder *b)
{
	struct process_groups groups;
	int err = process_groups_build(b->p, &groups);
	if (err < 0)
		return err;
	b->msg.resource_profiles = arena_alloc(&b->arena, groups.count, sizeof(*b->msg.resource_profiles));
	if (!b->msg.resource_profiles)
		err = -ENOMEM;
	for (uint32_t g = 0; g < groups.count && err == 0; g++) {
		pb_resource_profiles **slot = &b->msg.resource_profiles[b->msg.n_resource_profiles];
		if ((err = build_resource_profiles(b, &groups, g, slot)) == 0)
			b->msg.n_resource_profiles += *slot != NULL;
	}
	process_groups_free(&groups);
	return err;
}

/* The dictionary after the resources: they add the strings and attributes of samples and value types. */
static int build(struct builder *b)
{
	int err;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(&b->msg);
	opentelemetry__proto__profiles__v1development__profiles_dictionary__init(&b->dict);
	b->msg.dictionary = &b->dict;
	if ((err = profile_grow((void **)&b->strings, &b->strings_cap, 1, sizeof(*b->strings))) < 0 ||
	    (err = profile_grow((void **)&b->attrs, &b->attrs_cap, 1, sizeof(*b->attrs))) < 0)
		return err;
	b->strings[0] = "";
	b->nstrings = b->nattrs = 1;
	b->nkinds = profile_has_off_cpu(b->p) ? VK_N : VK_SAMPLES + 1;
	if ((err = renumber(b)) < 0 || (err = build_host_attrs(b)) < 0 ||
	    (err = build_resources(b)) < 0 || (err = build_functions(b)) < 0 || (err = build_mappings(b)) < 0 ||
	    (err = build_locations(b)) < 0 || (err = build_stacks(b)) < 0 || (err = build_links(b)) < 0 ||
	    (err = build_attribute_table(b)) < 0)
		return err;
	b->dict.string_table = b->strings;
	b->dict.n_string_table = b->nstrings;
	return 0;
}

/* The options with their defaults: the profile's host, the build's architecture. */
static void resolve_options(struct builder *b, const struct otlp_encode_options *o)
{
	const struct profile_info *i = &b->p->info;
	if (o)
		b->o = *o;
	if (!b->o.host_id || !*b->o.host_id)
		b->o.host_id = i->host_id;
	if (!b->o.host_name || !*b->o.host_name)
		b->o.host_name = i->hostname;
	if (!b->o.host_arch)
		b->o.host_arch = BUILD_ARCH;
}

static void builder_free(struct builder *b)
{
	arena_free(&b->arena);
	free(b->strings);
	hindex_free(&b->string_index);
	free(b->attrs);
	hindex_free(&b->attr_index);
}

int otlp_encode_profile(const struct profile *p, const struct otlp_encode_options *o, uint8_t **buf, size_t *len)
{
	struct builder b = { .p = p };
	int err;
	*buf = NULL;
	*len = 0;
	resolve_options(&b, o);
	if ((err = build(&b)) == 0) {
		size_t n = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(
			&b.msg);
		if (n >= OTLP_MAX_MESSAGE)
			err = -EOVERFLOW;
		else if (!(*buf = malloc(n ? n : 1)))
			err = -ENOMEM;
		else
			*len = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(
				&b.msg, *buf);
	}
	builder_free(&b);
	return err;
}
