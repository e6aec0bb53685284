/*
 * Unit tests for src/report.c and src/frame_name.c: exact report lines for a small hand-built profile
 * (self/total percentages, recursion counted once, inline functions, libname+0xOFFSET, [truncated], ordering).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/frame_name.h"
#include "src/profile.h"
#include "src/report.h"

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

static char *run_report(const struct profile *p, const struct report_options *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	assert_int_equal(report_print(p, out, o), 0);
	assert_int_equal(fclose(out), 0);
	return text;
}

static const char *const summary =
	"Duration:           2.00 s\n"
	"Samples:            14 (lost 1)\n"
	"Event:              cpu-clock at 99 Hz\n"
	"Unwinder:           libunwind\n"
	"Processes:          2\n"
	"Unwound completely: 92.86%\n"
	"Truncated:          1 (7.14%)\n"
	"Unknown:            0 (0.00%)\n"
	"\n";

static void assert_report(const struct profile *p, const struct report_options *o, const char *table)
{
	char *text = run_report(p, o), expect[4096];
	snprintf(expect, sizeof(expect), "%s%s", summary, table);
	assert_string_equal(text, expect);
	free(text);
}

/* helper: self in both inlined locations; rec: three frames in one stack count once in total (3 + 1). */
static void test_report_by_self(void **state)
{
	(void)state;
	struct profile *p = build();
	assert_report(p, NULL,
		      "  Self%  Total%     Self  Library    Function\n"
		      " 57.14%  57.14%        8  app        helper (util.h)\n"
		      " 21.43%  28.57%        3  app        rec (app.c)\n"
		      " 14.29%  14.29%        2  libc.so.6  libc.so.6+0x9abc\n"
		      "  7.14%   7.14%        1  [kernel]   schedule\n"
		      "  0.00%  92.86%        0  app        main (app.c)\n"
		      "  0.00%  71.43%        0  app        work (app.c)\n"
		      "  0.00%   7.14%        0             [truncated]\n");
	profile_free(p);
}

static void test_report_by_total_with_limit(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options o = { .limit = 4, .sort = REPORT_SORT_TOTAL };
	assert_report(p, &o,
		      "  Self%  Total%     Self  Library  Function\n"
		      "  0.00%  92.86%        0  app      main (app.c)\n"
		      "  0.00%  71.43%        0  app      work (app.c)\n"
		      " 57.14%  57.14%        8  app      helper (util.h)\n"
		      " 21.43%  28.57%        3  app      rec (app.c)\n");
	profile_free(p);
}

/* Equal counts order by name, whatever order the functions were added in. */
static void test_report_ties_by_name(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	uint32_t m = mapping(p, "/bin/x");
	const char *names[] = { "zeta", "alpha", "mid" };
	for (int i = 0; i < 3; i++) {
		struct profile_line line = { func(p, names[i], NULL), 0 };
		uint32_t l = loc(p, m, 0x100 + (uint64_t)i, PROFILE_FRAME_NATIVE, &line, 1);
		sample(p, stack(p, (uint8_t)(i + 1), &l, 1), 5, 5, "x", 1);
	}
	char *text = run_report(p, NULL);
	const char *table = strstr(text, "\n\n");
	assert_non_null(table);
	assert_string_equal(table, "\n\n"
				   "  Self%  Total%     Self  Library  Function\n"
				   " 33.33%  33.33%        1  x        alpha\n"
				   " 33.33%  33.33%        1  x        mid\n"
				   " 33.33%  33.33%        1  x        zeta\n");
	assert_non_null(strstr(text, "Samples:            3 (lost 0)\n"));
	free(text);
	profile_free(p);
}

static void test_report_empty(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	char *text = run_report(p, NULL);
	assert_string_equal(text, "Duration:           0.00 s\n"
				  "Samples:            0 (lost 0)\n"
				  "Event:              unknown\n"
				  "Unwinder:           unknown\n"
				  "Processes:          0\n"
				  "Unwound completely: 0.00%\n"
				  "Truncated:          0 (0.00%)\n"
				  "Unknown:            0 (0.00%)\n"
				  "\n"
				  "No samples.\n");
	free(text);
	profile_free(p);
}

static void assert_name(const struct profile *p, uint32_t l, uint32_t line, unsigned flags, const char *expect)
{
	struct frame_buf b = { 0 };
	assert_int_equal(frame_name_append(p, &p->locations.items[l], line, flags, &b), 0);
	assert_string_equal(b.s, expect);
	frame_buf_free(&b);
}

static void assert_library(const struct profile *p, uint32_t l, const char *expect)
{
	struct frame_buf b = { 0 };
	assert_int_equal(frame_library_append(p, &p->locations.items[l], &b), 0);
	assert_string_equal(b.s, expect);
	frame_buf_free(&b);
}

static void test_frame_names(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	struct profile_mapping anon_map = { .memory_start = 0x1000 };	/* anonymous memory: no file name */
	uint32_t lib = mapping(p, "/usr/lib/libz.so.1"), anon;
	assert_int_equal(profile_add_mapping(p, &anon_map, &anon), 0);
	struct profile_line inl[] = { { func(p, "inner;x\ny", NULL), 0 }, { func(p, "outer", NULL), 0 } };
	struct profile_line kmod[] = { { func(p, "ext4_read", "ext4"), 0 } };
	struct profile_line unknown[] = { { func(p, "[unknown]", NULL), 0 } };
	uint32_t l_unsym = loc(p, lib, 0x2f0a, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t l_anon = loc(p, anon, 0x10, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t l_unmapped = loc(p, 0, 0x7f0012345678, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t l_inl = loc(p, lib, 0x100, PROFILE_FRAME_NATIVE, inl, 2);
	uint32_t l_kmod = loc(p, 0, 0x40, PROFILE_FRAME_KERNEL, kmod, 1);
	uint32_t l_kunsym = loc(p, 0, 0x5555, PROFILE_FRAME_KERNEL, NULL, 0);
	uint32_t l_err = loc(p, 0, 2, PROFILE_FRAME_ERROR, unknown, 1);
	uint32_t l_err_bare = loc(p, 0, 1, PROFILE_FRAME_ERROR | PROFILE_FRAME_NATIVE, NULL, 0);
	const unsigned both = FRAME_NAME_SUFFIX | FRAME_NAME_COLLAPSED;

	assert_name(p, l_unsym, 0, both, "libz.so.1+0x2f0a");
	assert_name(p, l_anon, 0, 0, "[unknown]+0x10");
	assert_name(p, l_unmapped, 0, both, "[unknown]");
	assert_name(p, l_inl, 0, 0, "inner;x\ny");
	assert_name(p, l_inl, 0, both, "inner:xy_[i]");
	assert_name(p, l_inl, 1, both, "outer");
	assert_name(p, l_kmod, 0, both, "ext4_read_[k]");
	assert_name(p, l_kmod, 0, 0, "ext4_read");
	assert_name(p, l_kunsym, 0, both, "[kernel]+0x5555_[k]");
	assert_name(p, l_err, 0, both, "[unknown]");
	assert_name(p, l_err_bare, 0, both, "[truncated]");

	assert_library(p, l_unsym, "libz.so.1");
	assert_library(p, l_kmod, "[ext4]");
	assert_library(p, l_kunsym, "[kernel]");
	assert_library(p, l_err, "");
	assert_library(p, l_unmapped, "");
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_by_self),
		cmocka_unit_test(test_report_by_total_with_limit),
		cmocka_unit_test(test_report_ties_by_name),
		cmocka_unit_test(test_report_empty),
		cmocka_unit_test(test_frame_names),
	};
	return cmocka_run_group_tests_name("report", tests, NULL, NULL);
}
