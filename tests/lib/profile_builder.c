/*
 * profile_builder.c — hand-built profiles for unit tests. See profile_builder.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "src/profile/profile_impl.h"
#include "tests/lib/profile_builder.h"

uint32_t tp_string(struct profile *p, const char *s)
{
	uint32_t i;
	assert_int_equal(profile_add_string(p, s, &i), 0);
	return i;
}

uint32_t tp_function(struct profile *p, const char *name, const char *file)
{
	struct profile_function f = { .name = tp_string(p, name), .filename = tp_string(p, file) };
	uint32_t i;
	assert_int_equal(profile_add_function(p, &f, &i), 0);
	return i;
}

uint32_t tp_mapping(struct profile *p, const char *path)
{
	struct profile_mapping m = { .filename = tp_string(p, path) };
	uint32_t i;
	assert_int_equal(profile_add_mapping(p, &m, &i), 0);
	return i;
}

uint32_t tp_location(struct profile *p, uint32_t mapping, uint64_t address, uint8_t kind,
		     const struct profile_line *lines, uint32_t nlines)
{
	struct profile_location l = { .mapping = mapping, .address = address, .frame_kind = kind, .nlines = nlines,
				      .lines = (struct profile_line *)lines };
	uint32_t i;
	assert_int_equal(profile_add_location(p, &l, &i), 0);
	return i;
}

uint32_t tp_stack(struct profile *p, uint8_t id, const uint32_t *locs, uint32_t n)
{
	struct profile_stack s = { .nlocations = n, .locations = (uint32_t *)locs };
	uint32_t i;
	memset(s.trace_id, id, sizeof(s.trace_id));
	assert_int_equal(profile_add_stack(p, &s, &i), 0);
	return i;
}

void tp_sample(struct profile *p, struct profile_sample s, const char *comm, const char *thread)
{
	s.comm = tp_string(p, comm);
	s.thread_name = tp_string(p, thread);
	assert_int_equal(profile_add_sample(p, &s), 0);
}

void tp_process(struct profile *p, int32_t pid, const char *exe_path, const char *container_id)
{
	struct profile_process pr = { .pid = pid, .exe_path = tp_string(p, exe_path),
				      .container_id = tp_string(p, container_id) };
	assert_int_equal(profile_set_process(p, &pr), 0);
}

void tp_sample_unchecked(struct profile *p, struct profile_sample s)
{
	assert_int_equal(PROFILE_TABLE_RESERVE(p->samples, (uint64_t)p->samples.count + 1), 0);
	p->samples.items[p->samples.count++] = s;
}

struct profile *tp_example_profile(void)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.event, "cpu-clock"), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.unwinder, "libunwind"), 0);
	p->info.duration_ns = 2000000000;
	p->info.frequency_hz = 99;
	p->info.samples = 14;
	p->info.lost = 1;
	p->info.unwound_complete = 13;
	p->info.truncated = 1;

	uint32_t app = tp_mapping(p, "/opt/app/bin/app");
	uint32_t libc = tp_mapping(p, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	uint32_t f_main = tp_function(p, "main", "/src/app.c"), f_work = tp_function(p, "work", "/src/app.c");
	uint32_t f_helper = tp_function(p, "helper", "/src/util.h"), f_rec = tp_function(p, "rec", "/src/app.c");
	struct profile_line l_inl[] = { { f_helper, 3 }, { f_work, 20 } };
	struct profile_line l_inl2[] = { { f_helper, 4 }, { f_work, 21 } };
	struct profile_line l_main[] = { { f_main, 9 } }, l_rec1[] = { { f_rec, 30 } }, l_rec2[] = { { f_rec, 31 } };
	struct profile_line l_work[] = { { f_work, 22 } }, l_sched[] = { { tp_function(p, "schedule", NULL), 0 } };
	struct profile_line l_trunc[] = { { tp_function(p, "[truncated]", NULL), 0 } };
	uint32_t main_ = tp_location(p, app, 0x1000, PROFILE_FRAME_NATIVE, l_main, 1);
	uint32_t inl = tp_location(p, app, 0x1100, PROFILE_FRAME_NATIVE, l_inl, 2);
	uint32_t inl2 = tp_location(p, app, 0x1110, PROFILE_FRAME_NATIVE, l_inl2, 2);
	uint32_t work = tp_location(p, app, 0x1200, PROFILE_FRAME_NATIVE, l_work, 1);
	uint32_t rec1 = tp_location(p, app, 0x1300, PROFILE_FRAME_NATIVE, l_rec1, 1);
	uint32_t rec2 = tp_location(p, app, 0x1310, PROFILE_FRAME_NATIVE, l_rec2, 1);
	uint32_t memcpy_ = tp_location(p, libc, 0x9abc, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t sched = tp_location(p, 0, 0x5555, PROFILE_FRAME_KERNEL, l_sched, 1);
	uint32_t trunc = tp_location(p, 0, 1, PROFILE_FRAME_ERROR, l_trunc, 1);

	uint32_t s1 = tp_stack(p, 0x11, (uint32_t[]){ inl, main_ }, 2);
	tp_sample(p, (struct profile_sample){ .stack = s1, .pid = 1, .tid = 1, .count = 4 }, "app", NULL);
	tp_sample(p, (struct profile_sample){ .stack = s1, .pid = 1, .tid = 2, .count = 2 }, "app", NULL);
	uint32_t s2 = tp_stack(p, 0x22, (uint32_t[]){ rec1, rec2, rec2, main_ }, 4);
	uint32_t s3 = tp_stack(p, 0x33, (uint32_t[]){ memcpy_, work, main_ }, 3);
	uint32_t s4 = tp_stack(p, 0x44, (uint32_t[]){ sched, rec1, trunc }, 3);
	uint32_t s5 = tp_stack(p, 0x55, (uint32_t[]){ inl2, main_ }, 2);
	tp_sample(p, (struct profile_sample){ .stack = s2, .pid = 1, .tid = 1, .count = 3 }, "app", NULL);
	tp_sample(p, (struct profile_sample){ .stack = s3, .pid = 1, .tid = 1, .count = 2 }, "app", NULL);
	tp_sample(p, (struct profile_sample){ .stack = s4, .pid = 1, .tid = 1, .count = 1 }, "app", NULL);
	tp_sample(p, (struct profile_sample){ .stack = s5, .pid = 1, .tid = 1, .count = 1 }, "app", NULL);
	tp_sample(p, (struct profile_sample){ .stack = s1, .pid = 2, .tid = 2, .count = 1 }, "other;x", NULL);
	return p;
}

