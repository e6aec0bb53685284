/*
 * Unit tests for src/profile/otlp.c: a hand-built profile is encoded, decoded with the protobuf-c unpacker
 * generated from the same schema, and every field hostprof maps is checked: resources per process with the host,
 * process and service attributes, the scope, one Profile per kind of value (cpu, samples, off-cpu, preempted)
 * with its period and times, samples with their stacks, thread attributes and APM links, and the dictionary (element
 * 0 of every table the zero value, no duplicate strings or attributes, nothing the samples do not reach, mappings
 * with their build IDs, locations with inline lines and frame types). tests/integration/test_otlp_export.c checks
 * the same bytes against decoders that are not hostprof's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/otlp.h"
#include "src/profile/profile.h"
#include "src/profile/proto/otlp_profiles_service.pb-c.h"
#include "tests/lib/profile_builder.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles pb_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any_value;

#define START_NS (1700000000ULL * 1000000000ULL)

static const uint8_t app_file_id[16] = { 0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff };
static const uint8_t span1[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
static const uint8_t span2[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe };

static uint32_t link_(struct profile *p, const uint8_t span_id[8])
{
	struct profile_link l;
	uint32_t i;
	for (int k = 0; k < 16; k++)
		l.trace_id[k] = (uint8_t)(0x10 + k);
	memcpy(l.span_id, span_id, sizeof(l.span_id));
	assert_int_equal(profile_add_link(p, &l, &i), 0);
	return i;
}

struct sample_spec {
	uint32_t stack;
	int32_t pid, tid;
	const char *comm, *thread, *service;
	uint32_t link;
	uint64_t count, cpu_ns, off_cpu_ns, preempted_ns;
};

static void sample(struct profile *p, struct sample_spec s)
{
	struct profile_sample ps = { .stack = s.stack, .pid = s.pid, .tid = s.tid, .service = tp_string(p, s.service),
				     .link = s.link, .count = s.count, .cpu_ns = s.cpu_ns, .off_cpu_ns = s.off_cpu_ns,
				     .preempted_ns = s.preempted_ns };
	tp_sample(p, ps, s.comm, s.thread);
}

static void info(struct profile *p)
{
	struct profile_info *i = &p->info;
	assert_int_equal(profile_set_info_string(p, &i->producer, "hostprof 0.1.0"), 0);
	assert_int_equal(profile_set_info_string(p, &i->hostname, "vm"), 0);
	assert_int_equal(profile_set_info_string(p, &i->host_id, "0123456789abcdef0123456789abcdef"), 0);
	i->start_unix_ns = START_NS;
	i->duration_ns = 2000000000;
	i->period_ns = 1000000;
	i->frequency_hz = 1000;
}

/*
 * Stacks, leaf first: S1 helper:3|work:20 (inlined) > main:9; S2 libz+0x2f0a (unsymbolized) > main:9; S3 schedule
 * (kernel) > S1; S4 /unused+0x10 (only in a sample with nothing to write); S5 JS:*hot (JIT) > main.loop (Go) >
 * [truncated].
 * Process 7 "app" (its agent's service "checkout"): S1 tid 8 "worker" x4; S2 tid 7 "app" x2, 2.5 ms, link 1; S3
 * tid 8 x3, link 2, 5 us off CPU of which 1 us preempted; S4 tid 7 x0; S1 tid 9 "io" off CPU only, 7 us; S1 tid 7
 * x1 of service "other". Process 9, no names: S5 x1.
 */
static struct profile *build(void)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	info(p);
	struct profile_mapping m_app = { .filename = tp_string(p, "/opt/app/bin/app"),
					 .build_id = tp_string(p, "abcdef0123"), .memory_start = 0x400000,
					 .memory_limit = 0x500000, .file_offset = 0x1000 };
	struct profile_mapping m_lib = { .filename = tp_string(p, "/usr/lib/libz.so.1") };
	struct profile_mapping m_jit = { .filename = tp_string(p, "/tmp/perf-9.map"), .file_id = { 7 } };
	uint32_t app, lib, jit, unused = tp_mapping(p, "/unused");
	memcpy(m_app.file_id, app_file_id, 16);
	for (int k = 0; k < 16; k++)
		m_lib.file_id[k] = (uint8_t)(k + 1);
	assert_int_equal(profile_add_mapping(p, &m_app, &app), 0);
	assert_int_equal(profile_add_mapping(p, &m_lib, &lib), 0);
	assert_int_equal(profile_add_mapping(p, &m_jit, &jit), 0);
	tp_function(p, "unused_function", "/src/unused.c");	/* in no location */

	uint32_t f_main = tp_function(p, "main", "/src/app.c"), f_work = tp_function(p, "work", "/src/app.c");
	struct profile_line l_main[] = { { f_main, 9 } };
	struct profile_line l_inl[] = { { tp_function(p, "helper", "/src/util.h"), 3 }, { f_work, 20 } };
	struct profile_line l_sched[] = { { tp_function(p, "schedule", NULL), 0 } };
	struct profile_line l_go[] = { { tp_function(p, "main.loop", "/go/src/app/main.go"), 12 } };
	struct profile_line l_jit[] = { { tp_function(p, "JS:*hot /a.js:1:1", "/a.js"), 2 } };
	struct profile_line l_trunc[] = { { tp_function(p, "[truncated]", NULL), 0 } };
	uint32_t main_ = tp_location(p, app, 0x1000, PROFILE_FRAME_NATIVE, l_main, 1);
	uint32_t inl = tp_location(p, app, 0x1100, PROFILE_FRAME_NATIVE, l_inl, 2);
	uint32_t unsym = tp_location(p, lib, 0x2f0a, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t sched = tp_location(p, 0, 0x40, PROFILE_FRAME_KERNEL, l_sched, 1);
	uint32_t gone = tp_location(p, unused, 0x10, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t go = tp_location(p, app, 0x3000, PROFILE_FRAME_GO, l_go, 1);
	uint32_t js = tp_location(p, jit, 0x20, PROFILE_FRAME_JIT, l_jit, 1);
	uint32_t trunc = tp_location(p, 0, 1, PROFILE_FRAME_ERROR, l_trunc, 1);

	uint32_t s1 = tp_stack(p, 1, (uint32_t[]){ inl, main_ }, 2);
	sample(p, (struct sample_spec){ s1, 7, 8, "app", "worker", NULL, 0, 4, 0, 0, 0 });
	sample(p, (struct sample_spec){ tp_stack(p, 2, (uint32_t[]){ unsym, main_ }, 2), 7, 7, "app", "app", "checkout",
					link_(p, span1), 2, 2500000, 0, 0 });
	sample(p, (struct sample_spec){ tp_stack(p, 3, (uint32_t[]){ sched, inl, main_ }, 3), 7, 8, "app", "worker",
					"checkout", link_(p, span2), 3, 0, 5000, 1000 });
	sample(p, (struct sample_spec){ tp_stack(p, 4, &gone, 1), 7, 7, "app", "app", NULL, 0, 0, 0, 0, 0 });
	sample(p, (struct sample_spec){ s1, 7, 9, "app", "io", NULL, 0, 0, 0, 7000, 0 });
	sample(p, (struct sample_spec){ s1, 7, 7, "app", "app", "other", 0, 1, 0, 0, 0 });
	sample(p, (struct sample_spec){ tp_stack(p, 5, (uint32_t[]){ js, go, trunc }, 3), 9, 9, "", "", NULL, 0, 1,
					0, 0, 0 });
	return p;
}

/* --- decoding ------------------------------------------------------------------------------------------ */

static pb_request *roundtrip(const struct profile *p, const struct otlp_encode_options *o)
{
	uint8_t *buf;
	size_t len;
	assert_int_equal(otlp_encode_profile(p, o, &buf, &len), 0);
	assert_non_null(buf);
	pb_request *req =
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(NULL, len,
														    buf);
	assert_non_null(req);
	assert_non_null(req->dictionary);
	free(buf);
	return req;
}

static void request_free(pb_request *req)
{
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(req,
														 NULL);
}

static const char *s_(const pb_dictionary *d, int32_t i)
{
	assert_true(i >= 0 && (size_t)i < d->n_string_table);
	return d->string_table[i];
}

/* An AnyValue as text: the string, or the integer in decimal. */
static void value_text(const pb_any_value *v, char *out, size_t len)
{
	assert_non_null(v);
	if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
		snprintf(out, len, "%s", v->string_value);
	else if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE)
		snprintf(out, len, "%lld", (long long)v->int_value);
	else
		fail_msg("attribute value of case %d", (int)v->value_case);
}

/* Attributes of the dictionary's table as "key=value,key=value". */
static void attrs_text(const pb_dictionary *d, const int32_t *idx, size_t n, char *out, size_t len)
{
	size_t k = 0;
	char value[256];
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		assert_true(idx[i] > 0 && (size_t)idx[i] < d->n_attribute_table);
		value_text(d->attribute_table[idx[i]]->value, value, sizeof(value));
		k += (size_t)snprintf(out + k, len - k, "%s%s=%s", i ? "," : "",
				      s_(d, d->attribute_table[idx[i]]->key_strindex), value);
	}
}

/* A location as "fn:line|fn:line@0xaddr[mapping file](frame type)", lines innermost first. */
static size_t location_text(const pb_dictionary *d, int32_t index, char *out, size_t len)
{
	assert_true(index > 0 && (size_t)index < d->n_location_table);
	const pb_location *l = d->location_table[index];
	char attrs[128];
	size_t k = 0;
	for (size_t i = 0; i < l->n_lines; i++) {
		int32_t f = l->lines[i]->function_index;
		assert_true(f > 0 && (size_t)f < d->n_function_table);
		k += (size_t)snprintf(out + k, len - k, "%s%s:%lld", i ? "|" : "", s_(d, d->function_table[f]->name_strindex),
				      (long long)l->lines[i]->line);
	}
	assert_true(l->mapping_index >= 0 && (size_t)l->mapping_index < d->n_mapping_table);
	attrs_text(d, l->attribute_indices, l->n_attribute_indices, attrs, sizeof(attrs));
	return k + (size_t)snprintf(out + k, len - k, "@%#llx[%s](%s)", (unsigned long long)l->address,
				    s_(d, d->mapping_table[l->mapping_index]->filename_strindex), attrs);
}

/* A sample as "value: frames leaf first; attributes; link trace/span (hex tail)". */
static void sample_text(const pb_dictionary *d, const pb_sample *s, char *out, size_t len)
{
	assert_int_equal(s->n_values, 1);
	assert_int_equal(s->n_timestamps_unix_nano, 0);
	assert_true(s->stack_index > 0 && (size_t)s->stack_index < d->n_stack_table);
	size_t k = (size_t)snprintf(out, len, "%lld:", (long long)s->values[0]);
	const Opentelemetry__Proto__Profiles__V1development__Stack *st = d->stack_table[s->stack_index];
	for (size_t i = 0; i < st->n_location_indices; i++) {
		k += (size_t)snprintf(out + k, len - k, " ");
		k += location_text(d, st->location_indices[i], out + k, len - k);
	}
	k += (size_t)snprintf(out + k, len - k, "; ");
	attrs_text(d, s->attribute_indices, s->n_attribute_indices, out + k, len - k);
	k = strlen(out);
	if (s->link_index) {
		const Opentelemetry__Proto__Profiles__V1development__Link *l = d->link_table[s->link_index];
		assert_int_equal(l->trace_id.len, 16);
		assert_int_equal(l->span_id.len, 8);
		snprintf(out + k, len - k, "; link %02x..%02x/%02x..%02x", l->trace_id.data[0], l->trace_id.data[15],
			 l->span_id.data[0], l->span_id.data[7]);
	}
}

/* A resource's attributes as "key=value,...". */
static void resource_text(const pb_resource_profiles *rp, char *out, size_t len)
{
	size_t k = 0;
	char value[256];
	assert_non_null(rp->resource);
	out[0] = '\0';
	for (size_t i = 0; i < rp->resource->n_attributes; i++) {
		value_text(rp->resource->attributes[i]->value, value, sizeof(value));
		k += (size_t)snprintf(out + k, len - k, "%s%s=%s", i ? "," : "", rp->resource->attributes[i]->key, value);
	}
}

/* The Profile's "type/unit". */
static void type_text(const pb_dictionary *d, const pb_profile *prof, char *out, size_t len)
{
	assert_non_null(prof->sample_type);
	snprintf(out, len, "%s/%s", s_(d, prof->sample_type->type_strindex), s_(d, prof->sample_type->unit_strindex));
}

/* --- tests --------------------------------------------------------------------------------------------- */

static const char *const host = "host.id=0123456789abcdef0123456789abcdef,host.name=vm,host.arch=amd64,os.type=linux";

/* One resource per process, host and process attributes; the service of the process's agent. */
static void test_resources(void **state)
{
	(void)state;
	struct profile *p = build();
	/* the program's path and container of the process that has them; the other has neither */
	tp_process(p, 7, "/opt/app/bin/app", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	tp_process(p, 9, NULL, NULL);
	pb_request *req = roundtrip(p, &(struct otlp_encode_options){ .host_arch = "amd64", .scope_version = "9.9" });
	char text[1024], expect[1024];
	assert_int_equal(req->n_resource_profiles, 2);
	resource_text(req->resource_profiles[0], text, sizeof(text));
	snprintf(expect, sizeof(expect), "%s,process.pid=7,process.executable.name=app,"
		 "process.executable.path=/opt/app/bin/app,"
		 "container.id=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,service.name=checkout",
		 host);
	assert_string_equal(text, expect);
	resource_text(req->resource_profiles[1], text, sizeof(text));
	snprintf(expect, sizeof(expect), "%s,process.pid=9", host);
	assert_string_equal(text, expect);
	for (size_t r = 0; r < 2; r++) {
		const pb_resource_profiles *rp = req->resource_profiles[r];
		assert_int_equal(rp->n_scope_profiles, 1);
		assert_string_equal(rp->scope_profiles[0]->scope->name, "hostprof");
		assert_string_equal(rp->scope_profiles[0]->scope->version, "9.9");
	}
	request_free(req);
	profile_free(p);
}

/* A Profile per kind of value with the samples that have some; sampled kinds carry the period. */
static void test_profiles(void **state)
{
	(void)state;
	struct profile *p = build();
	pb_request *req = roundtrip(p, NULL);
	const pb_dictionary *d = req->dictionary;
	const char *types[] = { "cpu/nanoseconds", "samples/count", "off-cpu/nanoseconds", "preempted/nanoseconds" };
	const size_t nsamples[2][4] = { { 4, 4, 2, 1 }, { 1, 1, 0, 0 } };
	char text[128];
	for (size_t r = 0; r < 2; r++) {
		const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
			req->resource_profiles[r]->scope_profiles[0];
		assert_int_equal(sp->n_profiles, r == 0 ? 4 : 2);
		for (size_t k = 0; k < sp->n_profiles; k++) {
			const pb_profile *prof = sp->profiles[k];
			type_text(d, prof, text, sizeof(text));
			assert_string_equal(text, types[k]);
			assert_int_equal(prof->n_samples, nsamples[r][k]);
			assert_int_equal(prof->time_unix_nano, START_NS);
			assert_int_equal(prof->duration_nano, 2000000000);
			assert_int_equal(prof->profile_id.len, 0);
			if (k < 2) {
				assert_non_null(prof->period_type);
				assert_string_equal(s_(d, prof->period_type->type_strindex), "cpu");
				assert_string_equal(s_(d, prof->period_type->unit_strindex), "nanoseconds");
				assert_int_equal(prof->period, 1000000);
			} else {
				assert_null(prof->period_type);	/* every switch is seen: no sampling period */
				assert_int_equal(prof->period, 0);
			}
		}
	}
	request_free(req);
	profile_free(p);
}

/* Each sample's stack (inline lines innermost first, frame types), value, thread attributes and link. */
static void test_samples(void **state)
{
	(void)state;
	struct profile *p = build();
	pb_request *req = roundtrip(p, NULL);
	const pb_dictionary *d = req->dictionary;
	const char *s1 = " helper:3|work:20@0x1100[/opt/app/bin/app](profile.frame.type=native)"
			 " main:9@0x1000[/opt/app/bin/app](profile.frame.type=native)";
	char s2[256], s3[256], text[1024];
	snprintf(s2, sizeof(s2), " @0x2f0a[/usr/lib/libz.so.1](profile.frame.type=native)%s", strchr(s1 + 1, ' '));
	snprintf(s3, sizeof(s3), " schedule:0@0x40[](profile.frame.type=kernel)%s", s1);
	const char *threads[] = { "thread.id=8,thread.name=worker", "thread.id=7,thread.name=app",
				  "thread.id=8,thread.name=worker", "thread.id=7,thread.name=app,service.name=other" };
	const char *stacks[] = { s1, s2, s3, s1 }, *links[] = { "", "; link 10..1f/01..08", "; link 10..1f/ff..fe", "" };
	const uint64_t cpu[] = { 4000000, 2500000, 3000000, 1000000 }, counts[] = { 4, 2, 3, 1 };
	char expect[1024];
	/* Process 7: cpu and samples over the same four samples, then off-cpu and preempted. */
	const pb_profile *const *profs = (const pb_profile *const *)req->resource_profiles[0]->scope_profiles[0]->profiles;
	for (size_t i = 0; i < 4; i++) {
		sample_text(d, profs[0]->samples[i], text, sizeof(text));
		snprintf(expect, sizeof(expect), "%llu:%s; %s%s", (unsigned long long)cpu[i], stacks[i], threads[i],
			 links[i]);
		assert_string_equal(text, expect);
		sample_text(d, profs[1]->samples[i], text, sizeof(text));
		snprintf(expect, sizeof(expect), "%llu:%s; %s%s", (unsigned long long)counts[i], stacks[i], threads[i],
			 links[i]);
		assert_string_equal(text, expect);
	}
	sample_text(d, profs[2]->samples[0], text, sizeof(text));
	snprintf(expect, sizeof(expect), "5000:%s; %s%s", s3, threads[2], links[2]);
	assert_string_equal(text, expect);
	sample_text(d, profs[2]->samples[1], text, sizeof(text));	/* off CPU only: in no CPU Profile */
	snprintf(expect, sizeof(expect), "7000:%s; thread.id=9,thread.name=io", s1);
	assert_string_equal(text, expect);
	sample_text(d, profs[3]->samples[0], text, sizeof(text));
	snprintf(expect, sizeof(expect), "1000:%s; %s%s", s3, threads[2], links[2]);
	assert_string_equal(text, expect);
	/* Process 9: JIT, Go and the truncation frame; no names, so no thread.name. */
	const pb_profile *cpu9 = req->resource_profiles[1]->scope_profiles[0]->profiles[0];
	sample_text(d, cpu9->samples[0], text, sizeof(text));
	assert_string_equal(text, "1000000: JS:*hot /a.js:1:1:2@0x20[/tmp/perf-9.map](profile.frame.type=jit)"
				  " main.loop:12@0x3000[/opt/app/bin/app](profile.frame.type=go)"
				  " [truncated]:0@0x1[](profile.frame.type=abort); thread.id=9");
	request_free(req);
	profile_free(p);
}

/* Mappings: ranges, file names, FileID and GNU build ID attributes; functions with their files. */
static void test_mappings_functions(void **state)
{
	(void)state;
	struct profile *p = build();
	pb_request *req = roundtrip(p, NULL);
	const pb_dictionary *d = req->dictionary;
	char text[512];
	assert_int_equal(d->n_mapping_table, 4);	/* zero, app, libz, JIT code; /unused is not reached */
	const Opentelemetry__Proto__Profiles__V1development__Mapping *app = d->mapping_table[1];
	assert_string_equal(s_(d, app->filename_strindex), "/opt/app/bin/app");
	assert_int_equal(app->memory_start, 0x400000);
	assert_int_equal(app->memory_limit, 0x500000);
	assert_int_equal(app->file_offset, 0x1000);
	attrs_text(d, app->attribute_indices, app->n_attribute_indices, text, sizeof(text));
	assert_string_equal(text, "process.executable.build_id.htlhash=a00102030405060708090a0b0c0d0eff,"
				  "process.executable.build_id.gnu=abcdef0123");
	attrs_text(d, d->mapping_table[2]->attribute_indices, d->mapping_table[2]->n_attribute_indices, text,
		   sizeof(text));
	assert_string_equal(text, "process.executable.build_id.htlhash=0102030405060708090a0b0c0d0e0f10");
	assert_string_equal(s_(d, d->mapping_table[3]->filename_strindex), "/tmp/perf-9.map");
	/* Functions in the profile's order, those of no exported location left out. */
	const char *names[] = { "", "main", "work", "helper", "schedule", "main.loop", "JS:*hot /a.js:1:1", "[truncated]" };
	const char *files[] = { "", "/src/app.c", "/src/app.c", "/src/util.h", "", "/go/src/app/main.go", "/a.js", "" };
	assert_int_equal(d->n_function_table, 8);
	for (size_t f = 0; f < 8; f++) {
		assert_string_equal(s_(d, d->function_table[f]->name_strindex), names[f]);
		assert_string_equal(s_(d, d->function_table[f]->filename_strindex), files[f]);
		assert_int_equal(d->function_table[f]->system_name_strindex, 0);
		assert_int_equal(d->function_table[f]->start_line, 0);
	}
	request_free(req);
	profile_free(p);
}

/* --- the dictionary's rules ------------------------------------------------------------------------------ */

/* How often each element of each table is referenced, from every place the request references one. */
struct uses {
	unsigned *strings, *attrs, *mappings, *locations, *functions, *stacks, *links;
};

static void use(unsigned *counts, size_t n, int32_t i)
{
	assert_true(i >= 0 && (size_t)i < n);
	counts[i]++;
}

static void use_attrs(const pb_dictionary *d, struct uses *u, const int32_t *idx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		use(u->attrs, d->n_attribute_table, idx[i]);
}

static void count_dictionary_uses(const pb_dictionary *d, struct uses *u)
{
	for (size_t i = 1; i < d->n_mapping_table; i++) {
		use(u->strings, d->n_string_table, d->mapping_table[i]->filename_strindex);
		use_attrs(d, u, d->mapping_table[i]->attribute_indices, d->mapping_table[i]->n_attribute_indices);
	}
	for (size_t i = 1; i < d->n_location_table; i++) {
		const pb_location *l = d->location_table[i];
		use(u->mappings, d->n_mapping_table, l->mapping_index);
		use_attrs(d, u, l->attribute_indices, l->n_attribute_indices);
		for (size_t j = 0; j < l->n_lines; j++)
			use(u->functions, d->n_function_table, l->lines[j]->function_index);
	}
	for (size_t i = 1; i < d->n_function_table; i++) {
		use(u->strings, d->n_string_table, d->function_table[i]->name_strindex);
		use(u->strings, d->n_string_table, d->function_table[i]->filename_strindex);
	}
	for (size_t i = 1; i < d->n_stack_table; i++) {
		for (size_t j = 0; j < d->stack_table[i]->n_location_indices; j++)
			use(u->locations, d->n_location_table, d->stack_table[i]->location_indices[j]);
	}
	for (size_t i = 1; i < d->n_attribute_table; i++)
		use(u->strings, d->n_string_table, d->attribute_table[i]->key_strindex);
}

static void count_profile_uses(const pb_dictionary *d, const pb_profile *prof, struct uses *u)
{
	use(u->strings, d->n_string_table, prof->sample_type->type_strindex);
	use(u->strings, d->n_string_table, prof->sample_type->unit_strindex);
	if (prof->period_type) {
		use(u->strings, d->n_string_table, prof->period_type->type_strindex);
		use(u->strings, d->n_string_table, prof->period_type->unit_strindex);
	}
	for (size_t i = 0; i < prof->n_samples; i++) {
		use(u->stacks, d->n_stack_table, prof->samples[i]->stack_index);
		use(u->links, d->n_link_table, prof->samples[i]->link_index);
		use_attrs(d, u, prof->samples[i]->attribute_indices, prof->samples[i]->n_attribute_indices);
	}
}

/* Every element but element 0 is referenced somewhere. */
static void assert_all_used(const unsigned *counts, size_t n, const char *table)
{
	for (size_t i = 1; i < n; i++) {
		if (!counts[i])
			fail_msg("%s[%zu] is referenced nowhere", table, i);
	}
}

static void check_dictionary_rules(const pb_request *req)
{
	const pb_dictionary *d = req->dictionary;
	struct uses u = {
		calloc(d->n_string_table, sizeof(unsigned)), calloc(d->n_attribute_table, sizeof(unsigned)),
		calloc(d->n_mapping_table, sizeof(unsigned)), calloc(d->n_location_table, sizeof(unsigned)),
		calloc(d->n_function_table, sizeof(unsigned)), calloc(d->n_stack_table, sizeof(unsigned)),
		calloc(d->n_link_table, sizeof(unsigned)),
	};
	count_dictionary_uses(d, &u);
	for (size_t r = 0; r < req->n_resource_profiles; r++) {
		const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
			req->resource_profiles[r]->scope_profiles[0];
		for (size_t k = 0; k < sp->n_profiles; k++)
			count_profile_uses(d, sp->profiles[k], &u);
	}
	assert_all_used(u.strings, d->n_string_table, "string_table");
	assert_all_used(u.attrs, d->n_attribute_table, "attribute_table");
	assert_all_used(u.mappings, d->n_mapping_table, "mapping_table");
	assert_all_used(u.locations, d->n_location_table, "location_table");
	assert_all_used(u.functions, d->n_function_table, "function_table");
	assert_all_used(u.stacks, d->n_stack_table, "stack_table");
	assert_all_used(u.links, d->n_link_table, "link_table");
	free(u.strings), free(u.attrs), free(u.mappings), free(u.locations), free(u.functions), free(u.stacks);
	free(u.links);
}

/* Element 0 of every table is the zero value; strings and attributes are unique. */
static void check_dictionary_zeros(const pb_dictionary *d)
{
	char a[512], b[512];
	assert_true(d->n_string_table >= 1 && d->n_mapping_table >= 1 && d->n_location_table >= 1 &&
		    d->n_function_table >= 1 && d->n_link_table >= 1 && d->n_attribute_table >= 1 &&
		    d->n_stack_table >= 1);
	assert_string_equal(d->string_table[0], "");
	assert_true(d->mapping_table[0]->memory_start == 0 && d->mapping_table[0]->memory_limit == 0 &&
		    d->mapping_table[0]->file_offset == 0 && d->mapping_table[0]->filename_strindex == 0 &&
		    d->mapping_table[0]->n_attribute_indices == 0);
	assert_true(d->location_table[0]->mapping_index == 0 && d->location_table[0]->address == 0 &&
		    d->location_table[0]->n_lines == 0 && d->location_table[0]->n_attribute_indices == 0);
	assert_true(d->function_table[0]->name_strindex == 0 && d->function_table[0]->filename_strindex == 0);
	assert_true(d->attribute_table[0]->key_strindex == 0 && d->attribute_table[0]->value == NULL);
	assert_int_equal(d->stack_table[0]->n_location_indices, 0);
	const uint8_t zeros[16] = { 0 };
	assert_int_equal(d->link_table[0]->trace_id.len, 16);
	assert_int_equal(d->link_table[0]->span_id.len, 8);
	assert_memory_equal(d->link_table[0]->trace_id.data, zeros, 16);
	assert_memory_equal(d->link_table[0]->span_id.data, zeros, 8);
	for (size_t i = 0; i < d->n_string_table; i++) {
		for (size_t j = i + 1; j < d->n_string_table; j++)
			assert_string_not_equal(d->string_table[i], d->string_table[j]);
	}
	for (size_t i = 1; i < d->n_attribute_table; i++) {
		attrs_text(d, (int32_t[]){ (int32_t)i }, 1, a, sizeof(a));
		for (size_t j = i + 1; j < d->n_attribute_table; j++) {
			attrs_text(d, (int32_t[]){ (int32_t)j }, 1, b, sizeof(b));
			assert_string_not_equal(a, b);
		}
	}
}

static void test_dictionary_rules(void **state)
{
	(void)state;
	struct profile *p = build();
	pb_request *req = roundtrip(p, NULL);
	check_dictionary_zeros(req->dictionary);
	check_dictionary_rules(req);
	/* What the samples reach, no more: 2 links, 5 stacks, 7 locations (not /unused+0x10). */
	assert_int_equal(req->dictionary->n_link_table, 3);
	assert_int_equal(req->dictionary->n_stack_table, 5);
	assert_int_equal(req->dictionary->n_location_table, 8);
	request_free(req);
	profile_free(p);
}

/* Without options the host is the profile's and the architecture the build's; options override the profile. */
static void test_options(void **state)
{
	(void)state;
	struct profile *p = build();
	pb_request *req = roundtrip(p, NULL);
	char text[1024];
	resource_text(req->resource_profiles[1], text, sizeof(text));
#if defined(__x86_64__)
	assert_string_equal(text, "host.id=0123456789abcdef0123456789abcdef,host.name=vm,host.arch=amd64,"
				  "os.type=linux,process.pid=9");
#endif
	assert_string_equal(req->resource_profiles[1]->scope_profiles[0]->scope->version, "");	/* none given */
	request_free(req);
	req = roundtrip(p, &(struct otlp_encode_options){ .host_id = "feed", .host_name = "box", .host_arch = "arm64" });
	resource_text(req->resource_profiles[1], text, sizeof(text));
	assert_string_equal(text, "host.id=feed,host.name=box,host.arch=arm64,os.type=linux,process.pid=9");
	request_free(req);
	/* A profile that names no host: no host attributes but the ones hostprof knows. */
	assert_int_equal(profile_set_info_string(p, &p->info.hostname, ""), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.host_id, NULL), 0);
	req = roundtrip(p, &(struct otlp_encode_options){ .host_arch = "amd64" });
	resource_text(req->resource_profiles[1], text, sizeof(text));
	assert_string_equal(text, "host.arch=amd64,os.type=linux,process.pid=9");
	request_free(req);
	profile_free(p);
}

/* No off-CPU time: two Profiles per process, no off-cpu strings in the table. */
static void test_cpu_only(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	info(p);
	struct profile_line l[] = { { tp_function(p, "main", NULL), 0 } };
	uint32_t loc = tp_location(p, tp_mapping(p, "/bin/x"), 0x10, PROFILE_FRAME_NATIVE, l, 1);
	sample(p, (struct sample_spec){ tp_stack(p, 1, &loc, 1), 5, 5, "x", "x", NULL, 0, 3, 0, 0, 0 });
	pb_request *req = roundtrip(p, NULL);
	const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
		req->resource_profiles[0]->scope_profiles[0];
	assert_int_equal(sp->n_profiles, 2);
	assert_int_equal(sp->profiles[0]->samples[0]->values[0], 3000000);	/* count x period */
	assert_int_equal(sp->profiles[1]->samples[0]->values[0], 3);
	for (size_t i = 0; i < req->dictionary->n_string_table; i++)
		assert_null(strstr(req->dictionary->string_table[i], "off-cpu"));
	check_dictionary_zeros(req->dictionary);
	check_dictionary_rules(req);
	request_free(req);
	profile_free(p);
}

/* A sample with its times, added as traces_build_profile() does. */
static void timed_sample(struct profile *p, uint32_t stack, int32_t pid, uint64_t count, const uint64_t *times,
			 uint32_t ntimes)
{
	struct profile_sample s = { .stack = stack, .pid = pid, .tid = pid, .comm = tp_string(p, "t"), .count = count,
				    .ntimestamps = ntimes, .timestamps = (uint64_t *)times };
	assert_int_equal(profile_add_sample(p, &s), 0);
}

/* The samples/count Profile of a process whose samples all have their times: values and timestamps in parallel,
 * one sample at each time, within the Profile's interval; a process that lost some times has none. */
static void test_timestamps(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	info(p);
	struct profile_line l[] = { { tp_function(p, "main", NULL), 0 } };
	uint32_t loc = tp_location(p, tp_mapping(p, "/bin/x"), 0x10, PROFILE_FRAME_NATIVE, l, 1);
	uint32_t loc2 = tp_location(p, tp_mapping(p, "/bin/x"), 0x20, PROFILE_FRAME_NATIVE, l, 1);
	uint32_t a = tp_stack(p, 1, &loc, 1), b = tp_stack(p, 2, &loc2, 1);
	const uint64_t end = START_NS + 2000000000;
	timed_sample(p, a, 5, 3, (uint64_t[]){ START_NS + 5, START_NS - 7, end }, 3);	/* two outside */
	timed_sample(p, b, 5, 1, (uint64_t[]){ START_NS + 1000 }, 1);
	timed_sample(p, a, 6, 2, (uint64_t[]){ START_NS + 9 }, 1);	/* one time dropped */
	p->info.timestamps_dropped = 1;
	pb_request *req = roundtrip(p, NULL);
	assert_int_equal(req->n_resource_profiles, 2);
	for (size_t r = 0; r < 2; r++) {
		const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
			req->resource_profiles[r]->scope_profiles[0];
		assert_int_equal(sp->n_profiles, 2);
		char type[64];
		type_text(req->dictionary, sp->profiles[1], type, sizeof(type));
		assert_string_equal(type, "samples/count");
		for (size_t i = 0; i < sp->profiles[0]->n_samples; i++)	/* cpu/nanoseconds: aggregated */
			assert_int_equal(sp->profiles[0]->samples[i]->n_timestamps_unix_nano, 0);
		const pb_profile *prof = sp->profiles[1];
		int64_t total = 0;
		for (size_t i = 0; i < prof->n_samples; i++) {
			const pb_sample *x = prof->samples[i];
			if (r == 1) {	/* pid 6 */
				assert_int_equal(x->n_timestamps_unix_nano, 0);
				assert_int_equal(x->n_values, 1);
				total += x->values[0];
				continue;
			}
			assert_int_equal(x->n_values, x->n_timestamps_unix_nano);
			for (size_t k = 0; k < x->n_values; k++) {
				assert_int_equal(x->values[k], 1);
				total += x->values[k];
				assert_true(x->timestamps_unix_nano[k] >= prof->time_unix_nano);
				assert_true(x->timestamps_unix_nano[k] < prof->time_unix_nano + prof->duration_nano);
			}
			if (x->n_values == 3) {
				assert_int_equal(x->timestamps_unix_nano[0], START_NS + 5);
				assert_int_equal(x->timestamps_unix_nano[1], START_NS);
				assert_int_equal(x->timestamps_unix_nano[2], end - 1);
			}
		}
		assert_int_equal(total, r == 0 ? 4 : 2);
	}
	request_free(req);
	profile_free(p);
}

/* An empty profile is a request with no resources and a dictionary of zero elements. */
static void test_empty(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	pb_request *req = roundtrip(p, NULL);
	assert_int_equal(req->n_resource_profiles, 0);
	check_dictionary_zeros(req->dictionary);
	assert_int_equal(req->dictionary->n_string_table, 1);
	assert_int_equal(req->dictionary->n_attribute_table, 1);
	assert_int_equal(req->dictionary->n_stack_table, 1);
	request_free(req);
	profile_free(p);
}

/* Encoding only reads the profile: twice gives the same bytes. */
static void test_deterministic(void **state)
{
	(void)state;
	struct profile *p = build();
	uint8_t *a, *b;
	size_t alen, blen;
	assert_int_equal(otlp_encode_profile(p, NULL, &a, &alen), 0);
	assert_int_equal(otlp_encode_profile(p, NULL, &b, &blen), 0);
	assert_int_equal(alen, blen);
	assert_memory_equal(a, b, alen);
	free(a);
	free(b);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resources),
		cmocka_unit_test(test_profiles),
		cmocka_unit_test(test_samples),
		cmocka_unit_test(test_mappings_functions),
		cmocka_unit_test(test_dictionary_rules),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_cpu_only),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_timestamps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
