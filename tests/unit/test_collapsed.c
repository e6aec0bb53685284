/*
 * Unit tests for src/collapsed.c: exact collapsed-stack lines for a small hand-built profile (root first, inline
 * expansion outer before inner, kernel/inline suffixes, libname+0xOFFSET, [truncated], threads and equal texts
 * merged, sorted output, stack-ID prefixes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/collapsed.h"
#include "src/profile.h"

static uint32_t str(struct profile *p, const char *s)
{
	uint32_t i;
	assert_int_equal(profile_add_string(p, s, &i), 0);
	return i;
}

static uint32_t func(struct profile *p, const char *name, const char *file)
{
	struct profile_function f = { .name = str(p, name), .filename = str(p, file) };
	uint32_t i;
	assert_int_equal(profile_add_function(p, &f, &i), 0);
	return i;
}

static uint32_t mapping(struct profile *p, const char *path)
{
	struct profile_mapping m = { .filename = str(p, path) };
	uint32_t i;
	assert_int_equal(profile_add_mapping(p, &m, &i), 0);
	return i;
}

static uint32_t loc(struct profile *p, uint32_t m, uint64_t address, uint8_t kind, const struct profile_line *lines,
		    uint32_t nlines)
{
	struct profile_location l = { .mapping = m, .address = address, .frame_kind = kind, .nlines = nlines,
				      .lines = (struct profile_line *)lines };
	uint32_t i;
	assert_int_equal(profile_add_location(p, &l, &i), 0);
	return i;
}

static uint32_t stack(struct profile *p, uint8_t id, const uint32_t *locs, uint32_t n)
{
	struct profile_stack s = { .nlocations = n, .locations = (uint32_t *)locs };
	uint32_t i;
	memset(s.trace_id, id, sizeof(s.trace_id));
	assert_int_equal(profile_add_stack(p, &s, &i), 0);
	return i;
}

static void sample(struct profile *p, uint32_t st, int32_t pid, int32_t tid, const char *comm, uint64_t count)
{
	struct profile_sample s = { .stack = st, .pid = pid, .tid = tid, .comm = str(p, comm), .count = count };
	assert_int_equal(profile_add_sample(p, &s), 0);
}

/*
 * Stacks, root first (count):
 *   app:     main > work > helper (inlined into work)   6, over two threads
 *   app:     main > rec > rec > rec                     3 (recursion)
 *   app:     main > work > libc.so.6+0x9abc             2 (unsymbolized)
 *   app:     [truncated] > rec > schedule (kernel)      1
 *   app:     main > work > helper, another address      1
 *   other;x: main > work > helper                       1
 */
static struct profile *build(void)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	assert_int_equal(profile_set_info_string(p, &p->info.event, "cpu-clock"), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.unwinder, "libunwind"), 0);
	p->info.duration_ns = 2000000000;
	p->info.frequency_hz = 99;
	p->info.samples = 14;
	p->info.lost = 1;
	p->info.unwound_complete = 13;
	p->info.truncated = 1;

	uint32_t app = mapping(p, "/opt/app/bin/app"), libc = mapping(p, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	uint32_t f_main = func(p, "main", "/src/app.c"), f_work = func(p, "work", "/src/app.c");
	uint32_t f_helper = func(p, "helper", "/src/util.h"), f_rec = func(p, "rec", "/src/app.c");
	struct profile_line l_inl[] = { { f_helper, 3 }, { f_work, 20 } };
	struct profile_line l_inl2[] = { { f_helper, 4 }, { f_work, 21 } };
	struct profile_line l_main[] = { { f_main, 9 } }, l_rec1[] = { { f_rec, 30 } }, l_rec2[] = { { f_rec, 31 } };
	struct profile_line l_work[] = { { f_work, 22 } }, l_sched[] = { { func(p, "schedule", NULL), 0 } };
	struct profile_line l_trunc[] = { { func(p, "[truncated]", NULL), 0 } };
	uint32_t main_ = loc(p, app, 0x1000, PROFILE_FRAME_NATIVE, l_main, 1);
	uint32_t inl = loc(p, app, 0x1100, PROFILE_FRAME_NATIVE, l_inl, 2);
	uint32_t inl2 = loc(p, app, 0x1110, PROFILE_FRAME_NATIVE, l_inl2, 2);
	uint32_t work = loc(p, app, 0x1200, PROFILE_FRAME_NATIVE, l_work, 1);
	uint32_t rec1 = loc(p, app, 0x1300, PROFILE_FRAME_NATIVE, l_rec1, 1);
	uint32_t rec2 = loc(p, app, 0x1310, PROFILE_FRAME_NATIVE, l_rec2, 1);
	uint32_t memcpy_ = loc(p, libc, 0x9abc, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t sched = loc(p, 0, 0x5555, PROFILE_FRAME_KERNEL, l_sched, 1);
	uint32_t trunc = loc(p, 0, 1, PROFILE_FRAME_ERROR, l_trunc, 1);

	uint32_t s1 = stack(p, 0x11, (uint32_t[]){ inl, main_ }, 2);
	sample(p, s1, 1, 1, "app", 4);
	sample(p, s1, 1, 2, "app", 2);
	sample(p, stack(p, 0x22, (uint32_t[]){ rec1, rec2, rec2, main_ }, 4), 1, 1, "app", 3);
	sample(p, stack(p, 0x33, (uint32_t[]){ memcpy_, work, main_ }, 3), 1, 1, "app", 2);
	sample(p, stack(p, 0x44, (uint32_t[]){ sched, rec1, trunc }, 3), 1, 1, "app", 1);
	sample(p, stack(p, 0x55, (uint32_t[]){ inl2, main_ }, 2), 1, 1, "app", 1);
	sample(p, s1, 2, 2, "other;x", 1);
	return p;
}

static char *run_collapsed(const struct profile *p, const struct collapsed_options *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	assert_int_equal(collapsed_write(p, out, o), 0);
	assert_int_equal(fclose(out), 0);
	return text;
}

static void test_collapsed_lines(void **state)
{
	(void)state;
	struct profile *p = build();
	char *text = run_collapsed(p, NULL);
	assert_string_equal(text, "app;[truncated];rec;schedule_[k] 1\n"
				  "app;main;rec;rec;rec 3\n"
				  "app;main;work;helper_[i] 7\n"
				  "app;main;work;libc.so.6+0x9abc 2\n"
				  "other:x;main;work;helper_[i] 1\n");
	free(text);
	profile_free(p);
}

/* With IDs, stacks that print alike stay apart; threads of one process still merge. */
static void test_collapsed_stack_ids(void **state)
{
	(void)state;
	struct profile *p = build();
	struct collapsed_options o = { .stack_ids = true };
	char *text = run_collapsed(p, &o);
	assert_string_equal(text, "EREREREREREREREREREREQ app;main;work;helper_[i] 6\n"
				  "EREREREREREREREREREREQ other:x;main;work;helper_[i] 1\n"
				  "IiIiIiIiIiIiIiIiIiIiIg app;main;rec;rec;rec 3\n"
				  "MzMzMzMzMzMzMzMzMzMzMw app;main;work;libc.so.6+0x9abc 2\n"
				  "RERERERERERERERERERERA app;[truncated];rec;schedule_[k] 1\n"
				  "VVVVVVVVVVVVVVVVVVVVVQ app;main;work;helper_[i] 1\n");
	free(text);
	profile_free(p);
}

static void test_stack_id_base64url(void **state)
{
	(void)state;
	const uint8_t id[16] = { 0xfb, 0xef, 0xbe, 0xfb, 0xef, 0xbe, 0xfb, 0xef,
				 0xbe, 0xfb, 0xef, 0xbe, 0xfb, 0xef, 0xbe, 0xff };
	char out[24];
	collapsed_stack_id(id, out);
	assert_string_equal(out, "--------------------_w");
}

static void test_collapsed_empty_comm_and_profile(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	char *text = run_collapsed(p, NULL);
	assert_string_equal(text, "");
	free(text);
	struct profile_line line = { func(p, "f", NULL), 0 };
	uint32_t l = loc(p, 0, 0x10, PROFILE_FRAME_GO, &line, 1);
	sample(p, stack(p, 1, &l, 1), 9, 9, "", 2);
	text = run_collapsed(p, NULL);
	assert_string_equal(text, "[unknown];f 2\n");
	free(text);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collapsed_lines),
		cmocka_unit_test(test_collapsed_stack_ids),
		cmocka_unit_test(test_stack_id_base64url),
		cmocka_unit_test(test_collapsed_empty_comm_and_profile),
	};
	return cmocka_run_group_tests_name("collapsed", tests, NULL, NULL);
}
