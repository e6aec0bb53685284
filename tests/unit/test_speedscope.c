/*
 * Unit tests for src/profile/speedscope.c: the JSON is parsed back with json-c and checked against the speedscope file
 * format's invariants (schema URL, sampled profiles, samples.length == weights.length, frame indices in range,
 * endValue == sum of weights), then for exact content: one profile per thread, root-first stacks with inline
 * frames outer first, stacks printing the same frames merged, shared frames, weights in nanoseconds or counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/profile.h"
#include "tests/lib/profile_builder.h"
#include "src/profile/speedscope.h"






static void sample(struct profile *p, uint32_t st, int32_t pid, int32_t tid, const char *comm, const char *thread,
		   uint64_t count, uint64_t cpu_ns)
{
	struct profile_sample s = { .stack = st, .pid = pid, .tid = tid, .comm = tp_string(p, comm),
				    .thread_name = tp_string(p, thread), .count = count, .cpu_ns = cpu_ns };
	assert_int_equal(profile_add_sample(p, &s), 0);
}

/*
 * Stacks, root first:
 *   S1  main > work > helper         (helper inlined into work)
 *   S2  main > work > libc.so.6+0x9abc
 *   S3  main > work > helper > schedule (kernel)
 *   S4  main > work > helper         (another address: prints as S1)
 * Samples: pid 10 tid 10 "app":    S1 x3, S4 x1, S2 x2
 *          pid 10 tid 11 "worker": S3 x6, S1 x1
 *          pid 20 tid 20 "other":  S2 x1 with cpu_ns 1234567
 * period 1 ms.
 */
static struct profile *build(uint64_t period_ns)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	p->info.period_ns = period_ns;
	uint32_t app = tp_mapping(p, "/opt/app"), libc = tp_mapping(p, "/usr/lib/libc.so.6");
	uint32_t f_main = tp_function(p, "main", "/src/app.c"), f_work = tp_function(p, "work", "/src/app.c");
	uint32_t f_helper = tp_function(p, "helper", "/src/util.h"), f_sched = tp_function(p, "schedule", NULL);
	struct profile_line l_main[] = { { f_main, 3 } }, l_work[] = { { f_work, 7 } };
	struct profile_line l_inl[] = { { f_helper, 1 }, { f_work, 8 } }, l_inl2[] = { { f_helper, 2 }, { f_work, 9 } };
	struct profile_line l_sched[] = { { f_sched, 0 } };
	uint32_t main_ = tp_location(p, app, 0x100, PROFILE_FRAME_NATIVE, l_main, 1);
	uint32_t work = tp_location(p, app, 0x200, PROFILE_FRAME_NATIVE, l_work, 1);
	uint32_t inl = tp_location(p, app, 0x300, PROFILE_FRAME_NATIVE, l_inl, 2);
	uint32_t inl2 = tp_location(p, app, 0x310, PROFILE_FRAME_NATIVE, l_inl2, 2);
	uint32_t unsym = tp_location(p, libc, 0x9abc, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t sched = tp_location(p, 0, 0x40, PROFILE_FRAME_KERNEL, l_sched, 1);
	uint32_t s1 = tp_stack(p, 1, (uint32_t[]){ inl, main_ }, 2);
	uint32_t s2 = tp_stack(p, 2, (uint32_t[]){ unsym, work, main_ }, 3);
	uint32_t s3 = tp_stack(p, 3, (uint32_t[]){ sched, inl, main_ }, 3);
	uint32_t s4 = tp_stack(p, 4, (uint32_t[]){ inl2, main_ }, 2);
	sample(p, s1, 10, 10, "app", "app", 3, 0);
	sample(p, s4, 10, 10, "app", "app", 1, 0);
	sample(p, s2, 10, 10, "app", "app", 2, 0);
	sample(p, s3, 10, 11, "app", "worker", 6, 0);
	sample(p, s1, 10, 11, "app", "worker", 1, 0);
	sample(p, s2, 20, 20, "other", "other", 1, 1234567);
	return p;
}

static json_object *export(const struct profile *p, const struct speedscope_options *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	assert_int_equal(speedscope_write(p, out, o), 0);
	assert_int_equal(fclose(out), 0);
	assert_true(len > 0 && text[len - 1] == '\n');
	json_object *doc = json_tokener_parse(text);
	free(text);
	assert_non_null(doc);
	return doc;
}

static json_object *member(json_object *obj, const char *key, json_type type)
{
	json_object *v = NULL;
	if (!json_object_object_get_ex(obj, key, &v))
		fail_msg("missing \"%s\"", key);
	assert_int_equal(json_object_get_type(v), type);
	return v;
}

static void assert_profile_valid(json_object *prof, size_t nframes)
{
	json_object *samples = member(prof, "samples", json_type_array);
	json_object *weights = member(prof, "weights", json_type_array);
	int64_t sum = 0;
	assert_string_equal(json_object_get_string(member(prof, "type", json_type_string)), "sampled");
	member(prof, "name", json_type_string);
	const char *unit = json_object_get_string(member(prof, "unit", json_type_string));
	assert_true(strcmp(unit, "nanoseconds") == 0 || strcmp(unit, "none") == 0);
	assert_int_equal(json_object_array_length(samples), json_object_array_length(weights));
	for (size_t i = 0; i < json_object_array_length(samples); i++) {
		json_object *s = json_object_array_get_idx(samples, i), *w = json_object_array_get_idx(weights, i);
		assert_int_equal(json_object_get_type(s), json_type_array);
		for (size_t k = 0; k < json_object_array_length(s); k++) {
			json_object *f = json_object_array_get_idx(s, k);
			assert_int_equal(json_object_get_type(f), json_type_int);
			assert_true(json_object_get_int64(f) >= 0 && (size_t)json_object_get_int64(f) < nframes);
		}
		assert_int_equal(json_object_get_type(w), json_type_int);
		assert_true(json_object_get_int64(w) >= 0);
		sum += json_object_get_int64(w);
	}
	assert_int_equal(json_object_get_int64(member(prof, "startValue", json_type_int)), 0);
	assert_int_equal(json_object_get_int64(member(prof, "endValue", json_type_int)), sum);
}

/* The file format's invariants; returns the number of shared frames. */
static size_t assert_valid(json_object *doc)
{
	assert_string_equal(json_object_get_string(member(doc, "$schema", json_type_string)),
			    "https://www.speedscope.app/file-format-schema.json");
	member(doc, "version", json_type_string);
	json_object *frames = member(member(doc, "shared", json_type_object), "frames", json_type_array);
	json_object *profiles = member(doc, "profiles", json_type_array);
	size_t nframes = json_object_array_length(frames);
	for (size_t i = 0; i < nframes; i++)
		member(json_object_array_get_idx(frames, i), "name", json_type_string);
	for (size_t i = 0; i < json_object_array_length(profiles); i++)
		assert_profile_valid(json_object_array_get_idx(profiles, i), nframes);
	json_object *active = NULL;
	if (json_object_object_get_ex(doc, "activeProfileIndex", &active)) {
		assert_int_equal(json_object_get_type(active), json_type_int);
		assert_true(json_object_get_int64(active) >= 0 &&
			    (size_t)json_object_get_int64(active) < json_object_array_length(profiles));
	}
	return nframes;
}

/* "name@file" of frame i, "name" when it has no file. */
static void frame_text(json_object *doc, int64_t i, char *out, size_t len)
{
	json_object *frames = member(member(doc, "shared", json_type_object), "frames", json_type_array);
	json_object *f = json_object_array_get_idx(frames, (size_t)i), *file = NULL;
	const char *name = json_object_get_string(member(f, "name", json_type_string));
	if (json_object_object_get_ex(f, "file", &file))
		snprintf(out, len, "%s@%s", name, json_object_get_string(file));
	else
		snprintf(out, len, "%s", name);
}

/* Profile i's samples as "frame;frame;... weight" lines. */
static char *profile_text(json_object *doc, size_t i)
{
	json_object *prof = json_object_array_get_idx(member(doc, "profiles", json_type_array), i);
	json_object *samples = member(prof, "samples", json_type_array);
	json_object *weights = member(prof, "weights", json_type_array);
	char *text = NULL, frame[256];
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	fprintf(out, "%s:", json_object_get_string(member(prof, "name", json_type_string)));
	for (size_t k = 0; k < json_object_array_length(samples); k++) {
		json_object *s = json_object_array_get_idx(samples, k);
		fputc(' ', out);
		for (size_t j = 0; j < json_object_array_length(s); j++) {
			frame_text(doc, json_object_get_int64(json_object_array_get_idx(s, j)), frame, sizeof(frame));
			fprintf(out, "%s%s", j ? ";" : "", frame);
		}
		fprintf(out, "=%lld", (long long)json_object_get_int64(json_object_array_get_idx(weights, k)));
	}
	fclose(out);
	return text;
}

static void assert_profile_text(json_object *doc, size_t i, const char *expect)
{
	char *text = profile_text(doc, i);
	assert_string_equal(text, expect);
	free(text);
}

static void test_threads_and_frames(void **state)
{
	(void)state;
	struct profile *p = build(1000000);
	struct speedscope_options o = { .name = "run.msgpack", .exporter = "hostprof test" };
	json_object *doc = export(p, &o);
	assert_int_equal(assert_valid(doc), 5);	/* main, work, helper, libc.so.6+0x9abc, schedule: once each */
	assert_string_equal(json_object_get_string(member(doc, "name", json_type_string)), "run.msgpack");
	assert_string_equal(json_object_get_string(member(doc, "exporter", json_type_string)), "hostprof test");
	assert_int_equal(json_object_array_length(member(doc, "profiles", json_type_array)), 3);
	assert_int_equal(json_object_get_int64(member(doc, "activeProfileIndex", json_type_int)), 1);
	assert_profile_text(doc, 0, "app pid 10 / app tid 10:"
				    " main@/src/app.c;work@/src/app.c;helper@/src/util.h=4000000"
				    " main@/src/app.c;work@/src/app.c;libc.so.6+0x9abc@libc.so.6=2000000");
	assert_profile_text(doc, 1, "app pid 10 / worker tid 11:"
				    " main@/src/app.c;work@/src/app.c;helper@/src/util.h=1000000"
				    " main@/src/app.c;work@/src/app.c;helper@/src/util.h;schedule@[kernel]=6000000");
	assert_profile_text(doc, 2, "other pid 20 / other tid 20:"
				    " main@/src/app.c;work@/src/app.c;libc.so.6+0x9abc@libc.so.6=1234567");
	json_object *prof = json_object_array_get_idx(member(doc, "profiles", json_type_array), 0);
	assert_string_equal(json_object_get_string(member(prof, "unit", json_type_string)), "nanoseconds");
	assert_int_equal(json_object_get_int64(member(prof, "endValue", json_type_int)), 6000000);
	json_object_put(doc);
	profile_free(p);
}

/* Without a period, samples lacking cpu_ns make the weights counts. */
static void test_counts_without_period(void **state)
{
	(void)state;
	struct profile *p = build(0);
	json_object *doc = export(p, NULL);
	assert_valid(doc);
	assert_string_equal(json_object_get_string(member(doc, "name", json_type_string)), "hostprof");
	assert_false(json_object_object_get_ex(doc, "exporter", NULL));
	json_object *prof = json_object_array_get_idx(member(doc, "profiles", json_type_array), 2);
	assert_string_equal(json_object_get_string(member(prof, "unit", json_type_string)), "none");
	assert_profile_text(doc, 0, "app pid 10 / app tid 10:"
				    " main@/src/app.c;work@/src/app.c;helper@/src/util.h=4"
				    " main@/src/app.c;work@/src/app.c;libc.so.6+0x9abc@libc.so.6=2");
	assert_profile_text(doc, 2, "other pid 20 / other tid 20:"
				    " main@/src/app.c;work@/src/app.c;libc.so.6+0x9abc@libc.so.6=1");
	json_object_put(doc);
	profile_free(p);
}

/* Names a hostile process chose (a stray 0xff byte, terminal escapes, a right-to-left override) come out escaped
 * (escape.h): the file is printable ASCII, so valid UTF-8 and JSON however strict the parser, and shows the
 * names as they are, not as the bytes would steer a viewer. */
static void test_hostile_names_escaped(void **state)
{
	(void)state;
	struct profile *p;
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(profile_new(&p), 0);
	uint32_t f = tp_function(p, "fn\033[2J\xe2\x80\xae\xff", "/src/\033]0;x\007.c");
	struct profile_line line = { f, 1 };
	uint32_t l = tp_location(p, tp_mapping(p, "/bin/a"), 0x10, PROFILE_FRAME_NATIVE, &line, 1);
	sample(p, tp_stack(p, 1, &l, 1), 1, 2, "bad\xffname", "t\033[1m", 1, 0);
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	assert_int_equal(speedscope_write(p, out, NULL), 0);
	assert_int_equal(fclose(out), 0);
	for (size_t i = 0; i < len; i++)
		assert_true(text[i] == '\n' || (text[i] >= 0x20 && text[i] < 0x7f));
	free(text);
	json_object *doc = export(p, NULL);
	assert_profile_text(doc, 0, "bad\\xffname pid 1 / t\\x1b[1m tid 2: fn\\x1b[2J\\xe2\\x80\\xae\\xff@"
				    "/src/\\x1b]0;x\\x07.c=1");
	json_object_put(doc);
	profile_free(p);
}

static void test_empty(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	json_object *doc = export(p, NULL);
	assert_int_equal(assert_valid(doc), 0);
	assert_int_equal(json_object_array_length(member(doc, "profiles", json_type_array)), 0);
	assert_false(json_object_object_get_ex(doc, "activeProfileIndex", NULL));
	json_object_put(doc);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_and_frames),
		cmocka_unit_test(test_counts_without_period),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_hostile_names_escaped),
	};
	return cmocka_run_group_tests_name("speedscope", tests, NULL, NULL);
}
