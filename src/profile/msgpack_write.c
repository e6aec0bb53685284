/*
 * msgpack_write.c — profile_write_file(): a profile as msgpack (msgpack_schema.h; man/hostprof-profile.5).
 *
 * Writing maps the in-memory model onto OTel: pid and comm become one ResourceProfiles per (pid, comm), tid and
 * thread name become sample attributes, FileID and build-id become mapping attributes. The file is written
 * atomically (src/base/atomic_file.h): a failed write leaves no partial profile. Not thread-safe.
 */
#include "src/profile/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/base/atomic_file.h"
#include "src/profile/msgpack_schema.h"
#include "src/profile/process_groups.h"
#include "src/profile/profile_impl.h"

struct wattr {
	uint8_t key;		/* enum attr_key */
	bool is_int;
	int64_t ival;
	const char *sval;	/* a string of the profile, a frame type name or one of the writer's hex strings */
};

/* Value-type strings the Profile message needs. */
enum { VT_SAMPLES, VT_COUNT, VT_CPU, VT_NANOSECONDS, VT_N };
static const char *const value_type_names[VT_N] = { "samples", "count", "cpu", "nanoseconds" };

struct writer {
	const struct profile *p;
	msgpack_packer pk;
	FILE *f;
	int err;		/* first write error, sticky */

	/* Strings written after the profile's own, for attribute keys and value types it does not hold. */
	const char *extra[ATTR_NKEYS + VT_N];
	uint32_t nextra;
	uint32_t key_str[ATTR_NKEYS], vt_str[VT_N];

	/* The attribute table; element 0 is the zero value and is not indexed. */
	struct wattr *attrs;
	uint32_t nattrs, attrs_cap;
	struct hindex attr_index;
	char (*hex)[33];		/* per mapping: FileID as hex */
	uint32_t (*mapping_attrs)[2];	/* per mapping: htlhash, gnu (0 = absent) */
	uint32_t *location_attr;	/* per location: frame type (0 = absent) */
	uint32_t (*sample_attrs)[3];	/* per sample: thread.id, thread.name, service.name */

	struct process_groups groups;	/* one ResourceProfiles each */
};

static uint64_t hash_wattr(const struct wattr *a)
{
	uint64_t h = hash_u64(hash_u64(HASH_SEED, a->key), a->is_int);
	return a->is_int ? hash_u64(h, (uint64_t)a->ival) : hash_str(h, a->sval);
}

static bool wattr_eq(const void *table, uint64_t i, const void *key)
{
	const struct wattr *a = &((const struct writer *)table)->attrs[i], *b = key;
	return a->key == b->key && a->is_int == b->is_int &&
	       (a->is_int ? a->ival == b->ival : strcmp(a->sval, b->sval) == 0);
}

static int add_attr(struct writer *w, uint8_t key, bool is_int, int64_t ival, const char *sval, uint32_t *index)
{
	struct wattr a = { .key = key, .is_int = is_int, .ival = ival, .sval = sval };
	uint64_t h = hash_wattr(&a);
	int err;
	if (hindex_find_index(&w->attr_index, h, wattr_eq, w, &a, index))
		return 0;
	if ((err = profile_grow((void **)&w->attrs, &w->attrs_cap, (uint64_t)w->nattrs + 1, sizeof(a))) < 0 ||
	    (err = hindex_insert(&w->attr_index, h, w->nattrs)) < 0)
		return err;
	w->attrs[w->nattrs] = a;
	*index = w->nattrs++;
	return 0;
}

static void prepare_strings(struct writer *w)
{
	for (int k = 0; k < ATTR_NKEYS + VT_N; k++) {
		const char *s = k < ATTR_NKEYS ? msgpack_attr_key_name(k) : value_type_names[k - ATTR_NKEYS];
		uint32_t *index = k < ATTR_NKEYS ? &w->key_str[k] : &w->vt_str[k - ATTR_NKEYS];
		if (profile_find_string(w->p, s, index) != 0) {
			*index = w->p->strings.count + w->nextra;
			w->extra[w->nextra++] = s;
		}
	}
}

static int prepare_mapping_attrs(struct writer *w)
{
	static const uint8_t zero_id[16];
	const struct profile *p = w->p;
	int err;
	for (uint32_t i = 1; i < p->mappings.count; i++) {
		const struct profile_mapping *m = &p->mappings.items[i];
		if (memcmp(m->file_id, zero_id, 16) != 0) {
			for (int b = 0; b < 16; b++)
				snprintf(w->hex[i] + 2 * b, 3, "%02x", m->file_id[b]);
			if ((err = add_attr(w, ATTR_HTLHASH, false, 0, w->hex[i], &w->mapping_attrs[i][0])) < 0)
				return err;
		}
		if (m->build_id &&
		    (err = add_attr(w, ATTR_GNU_BUILD_ID, false, 0, profile_string(p, m->build_id),
				    &w->mapping_attrs[i][1])) < 0)
			return err;
	}
	return 0;
}

static int prepare_location_attrs(struct writer *w)
{
	const struct profile *p = w->p;
	for (uint32_t i = 1; i < p->locations.count; i++) {
		const char *type = msgpack_frame_type_name(p->locations.items[i].frame_kind);
		int err = type ? add_attr(w, ATTR_FRAME_TYPE, false, 0, type, &w->location_attr[i]) : 0;
		if (err < 0)
			return err;
	}
	return 0;
}

static int prepare_sample_attrs(struct writer *w)
{
	const struct profile *p = w->p;
	int err;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		if ((err = add_attr(w, ATTR_THREAD_ID, true, s->tid, NULL, &w->sample_attrs[i][0])) < 0)
			return err;
		if (s->thread_name && (err = add_attr(w, ATTR_THREAD_NAME, false, 0, profile_string(p, s->thread_name),
						      &w->sample_attrs[i][1])) < 0)
			return err;
		if (s->service && (err = add_attr(w, ATTR_SERVICE_NAME, false, 0, profile_string(p, s->service),
						  &w->sample_attrs[i][2])) < 0)
			return err;
	}
	return 0;
}

static int writer_prepare(struct writer *w)
{
	const struct profile *p = w->p;
	uint32_t nsamples = p->samples.count ? p->samples.count : 1;
	int err;
	w->hex = calloc(p->mappings.count, sizeof(*w->hex));
	w->mapping_attrs = calloc(p->mappings.count, sizeof(*w->mapping_attrs));
	w->location_attr = calloc(p->locations.count, sizeof(*w->location_attr));
	w->sample_attrs = calloc(nsamples, sizeof(*w->sample_attrs));
	if (!w->hex || !w->mapping_attrs || !w->location_attr || !w->sample_attrs ||
	    profile_grow((void **)&w->attrs, &w->attrs_cap, 1, sizeof(*w->attrs)) < 0)
		return -ENOMEM;
	w->nattrs = 1;
	prepare_strings(w);
	if ((err = prepare_mapping_attrs(w)) < 0 || (err = prepare_location_attrs(w)) < 0 ||
	    (err = prepare_sample_attrs(w)) < 0)
		return err;
	return process_groups_build(p, &w->groups);
}

static void writer_free(struct writer *w)
{
	free(w->attrs);
	hindex_free(&w->attr_index);
	free(w->hex);
	free(w->mapping_attrs);
	free(w->location_attr);
	free(w->sample_attrs);
	process_groups_free(&w->groups);
}

/* --- packing: errors are caught once, by the output callback, so pack calls are not checked one by one --- */

static void pack_str(msgpack_packer *pk, const char *s)
{
	s = s ? s : "";
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void pack_key_uint(msgpack_packer *pk, uint64_t key, uint64_t v)
{
	msgpack_pack_uint64(pk, key);
	msgpack_pack_uint64(pk, v);
}

static void pack_skey_uint(msgpack_packer *pk, const char *key, uint64_t v)
{
	pack_str(pk, key);
	msgpack_pack_uint64(pk, v);
}

static void pack_skey_str(msgpack_packer *pk, const char *key, const char *v)
{
	pack_str(pk, key);
	pack_str(pk, v);
}

static void pack_header(struct writer *w)
{
	msgpack_packer *pk = &w->pk;
	const struct profile_info *i = &w->p->info;
	msgpack_pack_map(pk, 6);
	pack_skey_str(pk, "format", PROFILE_FORMAT_NAME);
	pack_str(pk, "version");
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint64(pk, PROFILE_FORMAT_MAJOR);
	msgpack_pack_uint64(pk, PROFILE_FORMAT_MINOR);
	pack_skey_str(pk, "otel_proto", PROFILE_OTEL_PROTO);
	pack_skey_str(pk, "producer", i->producer);
	pack_str(pk, "host");
	/* the CPU counts and the command line are optional: written when known, absent from older profiles */
	bool cpus = i->cpus_online || i->cpus_available, cmdline = i->cmdline && *i->cmdline;
	msgpack_pack_map(pk, 3 + (cpus ? 2 : 0));
	pack_skey_str(pk, "hostname", i->hostname);
	pack_skey_str(pk, "host.id", i->host_id);
	pack_skey_str(pk, "kernel", i->kernel);
	if (cpus) {
		pack_skey_uint(pk, "cpus_online", i->cpus_online);
		pack_skey_uint(pk, "cpus_available", i->cpus_available);
	}
	pack_str(pk, "stats");
	msgpack_pack_map(pk, 11 + (i->off_cpu_switches ? 5 : 0) + (i->timestamps_dropped != 0) +
			 (i->lost_fast_lane != 0) + cmdline);
	if (cmdline)
		pack_skey_str(pk, "cmdline", i->cmdline);
	if (i->lost_fast_lane)
		pack_skey_uint(pk, "lost_fast_lane", i->lost_fast_lane);
	if (i->timestamps_dropped)
		pack_skey_uint(pk, "timestamps_dropped", i->timestamps_dropped);
	if (i->off_cpu_switches) {
		pack_skey_uint(pk, "off_cpu_switches", i->off_cpu_switches);
		pack_skey_uint(pk, "off_cpu_threshold_ns", i->off_cpu_threshold_ns);
		pack_skey_uint(pk, "off_cpu_capped", i->off_cpu_capped);
		pack_skey_uint(pk, "off_cpu_no_stack", i->off_cpu_no_stack);
		pack_skey_uint(pk, "off_cpu_lost", i->off_cpu_lost);
	}
	pack_skey_uint(pk, "samples", i->samples);
	pack_skey_uint(pk, "lost", i->lost);
	pack_skey_uint(pk, "unwound_complete", i->unwound_complete);
	pack_skey_uint(pk, "truncated", i->truncated);
	pack_skey_uint(pk, "unknown", i->unknown);
	pack_skey_uint(pk, "frequency_hz", i->frequency_hz);
	pack_skey_str(pk, "event", i->event);
	pack_skey_str(pk, "unwinder", i->unwinder);
	pack_skey_uint(pk, "start_unix_ns", i->start_unix_ns);
	pack_skey_uint(pk, "duration_ns", i->duration_ns);
	pack_skey_uint(pk, "period_ns", i->period_ns);
}

static void pack_attr_indices(msgpack_packer *pk, uint64_t key, const uint32_t *idx, int n)
{
	int count = 0;
	for (int i = 0; i < n; i++)
		count += idx[i] != 0;
	if (!count)
		return;
	msgpack_pack_uint64(pk, key);
	msgpack_pack_array(pk, count);
	for (int i = 0; i < n; i++) {
		if (idx[i])
			msgpack_pack_uint64(pk, idx[i]);
	}
}

static void pack_mappings(struct writer *w)
{
	const struct profile *p = w->p;
	msgpack_packer *pk = &w->pk;
	msgpack_pack_array(pk, p->mappings.count);
	msgpack_pack_map(pk, 0);
	for (uint32_t i = 1; i < p->mappings.count; i++) {
		const struct profile_mapping *m = &p->mappings.items[i];
		const uint32_t *a = w->mapping_attrs[i];
		msgpack_pack_map(pk, (m->memory_start != 0) + (m->memory_limit != 0) + (m->file_offset != 0) +
					     (m->filename != 0) + (a[0] || a[1]));
		if (m->memory_start)
			pack_key_uint(pk, 1, m->memory_start);
		if (m->memory_limit)
			pack_key_uint(pk, 2, m->memory_limit);
		if (m->file_offset)
			pack_key_uint(pk, 3, m->file_offset);
		if (m->filename)
			pack_key_uint(pk, 4, m->filename);
		pack_attr_indices(pk, 5, a, 2);
	}
}

static void pack_lines(msgpack_packer *pk, const struct profile_location *l)
{
	msgpack_pack_uint64(pk, 3);
	msgpack_pack_array(pk, l->nlines);
	for (uint32_t j = 0; j < l->nlines; j++) {
		const struct profile_line *line = &l->lines[j];
		msgpack_pack_map(pk, (line->function != 0) + (line->line != 0));
		if (line->function)
			pack_key_uint(pk, 1, line->function);
		if (line->line) {
			msgpack_pack_uint64(pk, 2);
			msgpack_pack_int64(pk, line->line);
		}
	}
}

static void pack_locations(struct writer *w)
{
	const struct profile *p = w->p;
	msgpack_packer *pk = &w->pk;
	msgpack_pack_array(pk, p->locations.count);
	msgpack_pack_map(pk, 0);
	for (uint32_t i = 1; i < p->locations.count; i++) {
		const struct profile_location *l = &p->locations.items[i];
		msgpack_pack_map(pk, (l->mapping != 0) + (l->address != 0) + (l->nlines != 0) +
					     (w->location_attr[i] != 0) + (l->frame_kind != 0));
		if (l->mapping)
			pack_key_uint(pk, 1, l->mapping);
		if (l->address)
			pack_key_uint(pk, 2, l->address);
		if (l->nlines)
			pack_lines(pk, l);
		pack_attr_indices(pk, 4, &w->location_attr[i], 1);
		if (l->frame_kind)
			pack_key_uint(pk, PROFILE_EXT_FRAME_KIND, l->frame_kind);
	}
}

static void pack_functions(struct writer *w)
{
	const struct profile *p = w->p;
	msgpack_packer *pk = &w->pk;
	msgpack_pack_array(pk, p->functions.count);
	msgpack_pack_map(pk, 0);
	for (uint32_t i = 1; i < p->functions.count; i++) {
		const struct profile_function *f = &p->functions.items[i];
		msgpack_pack_map(pk, (f->name != 0) + (f->filename != 0));
		if (f->name)
			pack_key_uint(pk, 1, f->name);
		if (f->filename)
			pack_key_uint(pk, 3, f->filename);
	}
}

static void pack_links(struct writer *w)
{
	const struct profile *p = w->p;
	msgpack_packer *pk = &w->pk;
	msgpack_pack_array(pk, p->links.count);
	for (uint32_t i = 0; i < p->links.count; i++) {
		const struct profile_link *l = &p->links.items[i];
		msgpack_pack_map(pk, 2);
		msgpack_pack_uint64(pk, 1);
		msgpack_pack_bin_with_body(pk, l->trace_id, sizeof(l->trace_id));
		msgpack_pack_uint64(pk, 2);
		msgpack_pack_bin_with_body(pk, l->span_id, sizeof(l->span_id));
	}
}

static void pack_strings(struct writer *w)
{
	const struct profile *p = w->p;
	msgpack_pack_array(&w->pk, (size_t)p->strings.count + w->nextra);
	for (uint32_t i = 0; i < p->strings.count; i++)
		pack_str(&w->pk, i ? profile_string(p, i) : "");
	for (uint32_t i = 0; i < w->nextra; i++)
		pack_str(&w->pk, w->extra[i]);
}

/* Attribute values are native msgpack values (OTel AnyValue), keys are string indices. */
static void pack_attributes(struct writer *w)
{
	msgpack_packer *pk = &w->pk;
	msgpack_pack_array(pk, w->nattrs);
	msgpack_pack_map(pk, 0);
	for (uint32_t i = 1; i < w->nattrs; i++) {
		const struct wattr *a = &w->attrs[i];
		msgpack_pack_map(pk, 2);
		pack_key_uint(pk, 1, w->key_str[a->key]);
		msgpack_pack_uint64(pk, 2);
		if (a->is_int)
			msgpack_pack_int64(pk, a->ival);
		else
			pack_str(pk, a->sval);
	}
}

static void pack_stacks(struct writer *w)
{
	static const uint8_t zero_id[16];
	const struct profile *p = w->p;
	msgpack_packer *pk = &w->pk;
	msgpack_pack_array(pk, p->stacks.count);
	for (uint32_t i = 0; i < p->stacks.count; i++) {
		const struct profile_stack *s = &p->stacks.items[i];
		bool has_id = memcmp(s->trace_id, zero_id, 16) != 0;
		msgpack_pack_map(pk, (s->nlocations != 0) + has_id);
		if (s->nlocations) {
			msgpack_pack_uint64(pk, 1);
			msgpack_pack_array(pk, s->nlocations);
			for (uint32_t j = 0; j < s->nlocations; j++)
				msgpack_pack_uint64(pk, s->locations[j]);
		}
		if (has_id) {
			msgpack_pack_uint64(pk, PROFILE_EXT_TRACE_ID);
			msgpack_pack_bin_with_body(pk, s->trace_id, 16);
		}
	}
}

static void pack_dictionary(struct writer *w)
{
	msgpack_pack_map(&w->pk, 7);
	msgpack_pack_uint64(&w->pk, DICT_MAPPINGS);
	pack_mappings(w);
	msgpack_pack_uint64(&w->pk, DICT_LOCATIONS);
	pack_locations(w);
	msgpack_pack_uint64(&w->pk, DICT_FUNCTIONS);
	pack_functions(w);
	msgpack_pack_uint64(&w->pk, DICT_LINKS);
	pack_links(w);
	msgpack_pack_uint64(&w->pk, DICT_STRINGS);
	pack_strings(w);
	msgpack_pack_uint64(&w->pk, DICT_ATTRIBUTES);
	pack_attributes(w);
	msgpack_pack_uint64(&w->pk, DICT_STACKS);
	pack_stacks(w);
}

static void pack_sample(struct writer *w, uint32_t i)
{
	const struct profile_sample *s = &w->p->samples.items[i];
	msgpack_packer *pk = &w->pk;
	msgpack_pack_map(pk, 4 + (s->link != 0) + (s->off_cpu_ns != 0) + (s->preempted_ns != 0) +
				     (s->ntimestamps != 0));
	pack_key_uint(pk, 1, s->stack);
	pack_attr_indices(pk, 2, w->sample_attrs[i], 3);
	if (s->link)
		pack_key_uint(pk, 3, s->link);
	msgpack_pack_uint64(pk, 4);
	msgpack_pack_array(pk, 1);
	msgpack_pack_uint64(pk, s->count);
	pack_key_uint(pk, PROFILE_EXT_CPU_NS, s->cpu_ns);
	if (s->off_cpu_ns)
		pack_key_uint(pk, PROFILE_EXT_OFF_CPU_NS, s->off_cpu_ns);
	if (s->preempted_ns)
		pack_key_uint(pk, PROFILE_EXT_PREEMPTED_NS, s->preempted_ns);
	if (s->ntimestamps) {
		msgpack_pack_uint64(pk, PROFILE_EXT_TIMESTAMPS);
		msgpack_pack_array(pk, s->ntimestamps);
		for (uint32_t k = 0; k < s->ntimestamps; k++)
			msgpack_pack_uint64(pk, s->timestamps[k]);
	}
}

static void pack_value_type(struct writer *w, uint64_t key, int type, int unit)
{
	msgpack_pack_uint64(&w->pk, key);
	msgpack_pack_map(&w->pk, 2);
	pack_key_uint(&w->pk, 1, w->vt_str[type]);
	pack_key_uint(&w->pk, 2, w->vt_str[unit]);
}

/* One Profile holding the samples of group g. */
static void pack_profile(struct writer *w, uint32_t g)
{
	const struct profile_info *info = &w->p->info;
	msgpack_packer *pk = &w->pk;
	msgpack_pack_map(pk, 6);
	pack_value_type(w, 1, VT_SAMPLES, VT_COUNT);
	msgpack_pack_uint64(pk, 2);
	msgpack_pack_array(pk, w->groups.start[g + 1] - w->groups.start[g]);
	for (uint32_t k = w->groups.start[g]; k < w->groups.start[g + 1]; k++)
		pack_sample(w, w->groups.order[k]);
	pack_key_uint(pk, 3, info->start_unix_ns);
	pack_key_uint(pk, 4, info->duration_ns);
	pack_value_type(w, 5, VT_CPU, VT_NANOSECONDS);
	pack_key_uint(pk, 6, info->period_ns);
}

static void pack_resource_profiles(struct writer *w)
{
	msgpack_packer *pk = &w->pk;
	msgpack_pack_array(pk, w->groups.count);
	for (uint32_t g = 0; g < w->groups.count; g++) {
		const struct profile_sample *rep = process_group_sample(w->p, &w->groups, g);
		msgpack_pack_map(pk, 2);
		msgpack_pack_uint64(pk, 1);	/* Resource */
		msgpack_pack_map(pk, 1);
		msgpack_pack_uint64(pk, 1);	/* attributes, as a map */
		const struct profile_process *proc = profile_find_process(w->p, rep->pid);
		uint32_t exe = proc ? proc->exe_path : 0, container = proc ? proc->container_id : 0;
		msgpack_pack_map(pk, 2 + (exe != 0) + (container != 0));
		pack_str(pk, RESOURCE_PID);
		msgpack_pack_int64(pk, rep->pid);
		pack_skey_str(pk, RESOURCE_COMM, profile_string(w->p, rep->comm));
		if (exe)
			pack_skey_str(pk, RESOURCE_EXE_PATH, profile_string(w->p, exe));
		if (container)
			pack_skey_str(pk, RESOURCE_CONTAINER_ID, profile_string(w->p, container));
		msgpack_pack_uint64(pk, 2);	/* scope_profiles */
		msgpack_pack_array(pk, 1);
		msgpack_pack_map(pk, 2);
		msgpack_pack_uint64(pk, 1);	/* InstrumentationScope {1: name} */
		msgpack_pack_map(pk, 1);
		msgpack_pack_uint64(pk, 1);
		pack_str(pk, PROFILE_FORMAT_NAME);
		msgpack_pack_uint64(pk, 2);	/* profiles */
		msgpack_pack_array(pk, 1);
		pack_profile(w, g);
	}
}

static int write_cb(void *data, const char *buf, size_t len)
{
	struct writer *w = data;
	if (w->err)
		return -1;
	errno = 0;
	if (len && fwrite(buf, 1, len, w->f) != len) {
		w->err = errno ? -errno : -EIO;
		return -1;
	}
	return 0;
}

static void pack_file(struct writer *w)
{
	msgpack_packer_init(&w->pk, w, write_cb);
	msgpack_pack_map(&w->pk, 3);
	msgpack_pack_uint64(&w->pk, KEY_HEADER);
	pack_header(w);
	msgpack_pack_uint64(&w->pk, KEY_RESOURCE_PROFILES);
	pack_resource_profiles(w);
	msgpack_pack_uint64(&w->pk, KEY_DICTIONARY);
	pack_dictionary(w);
}

static int write_file(const struct profile *p, const char *path, bool replace)
{
	struct writer w = { .p = p };
	struct atomic_file *f = NULL;
	int err = writer_prepare(&w);
	if (err == 0)
		err = atomic_file_new(path, &f);
	if (err == 0) {
		w.f = atomic_file_stream(f);
		pack_file(&w);
		err = w.err;
	}
	if (err == 0) {
		err = replace ? atomic_file_commit(f) : atomic_file_commit_new(f);
		f = NULL;
	}
	atomic_file_discard(f);
	writer_free(&w);
	return err;
}

int profile_write_file(const struct profile *p, const char *path)
{
	return write_file(p, path, true);
}

int profile_write_file_fn(void *profile, const char *path)
{
	return profile_write_file(profile, path);
}

int profile_write_new_file(const struct profile *p, const char *path)
{
	return write_file(p, path, false);
}

int profile_write_new_file_fn(void *profile, const char *path)
{
	return profile_write_new_file(profile, path);
}


int profile_encode(const struct profile *p, char **data, size_t *size)
{
	struct writer w = { .p = p };
	char *buf = NULL;
	size_t len = 0;
	int err = writer_prepare(&w);
	if (err == 0 && !(w.f = open_memstream(&buf, &len)))
		err = -errno;
	if (err == 0) {
		pack_file(&w);
		err = w.err;
		if (fclose(w.f) != 0 && err == 0)
			err = -ENOMEM;
	}
	writer_free(&w);
	if (err < 0) {
		free(buf);
		return err;
	}
	*data = buf;
	*size = len;
	return 0;
}
