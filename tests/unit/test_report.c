/*
 * Unit tests for src/profile/report.c and src/profile/frame_name.c: exact report lines for a small hand-built profile
 * (self/total percentages, recursion counted once, inline functions, libname+0xOFFSET, [truncated], ordering).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/frame_name.h"
#include "src/profile/profile.h"
#include "tests/lib/profile_builder.h"
#include "src/profile/report.h"







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
	"Inlined functions:  rows of their own\n"
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
	struct profile *p = tp_example_profile();
	assert_report(p, NULL,
		      "  Self%  Total%     Self  Library    Function\n"
		      " 57.14%  57.14%        8  app        helper (util.h)\n"
		      " 21.43%  28.57%        3  app        rec (app.c)\n"
		      " 14.29%  14.29%        2  libc.so.6  [libc.so.6]\n"
		      "  7.14%   7.14%        1  [kernel]   schedule\n"
		      "  0.00%  92.86%        0  app        main (app.c)\n"
		      "  0.00%  71.43%        0  app        work (app.c)\n"
		      "  0.00%   7.14%        0             [truncated]\n");
	profile_free(p);
}

/* The header says where samples were lost when the fast lane lost some: every one is in the total. */
static void test_report_lost_where(void **state)
{
	(void)state;
	struct profile *p = tp_example_profile();
	struct report_options o = { .sort = REPORT_SORT_SELF };
	p->info.lost = 7;
	p->info.lost_fast_lane = 5;
	char *text = run_report(p, &o);
	assert_non_null(strstr(text, "(lost 7: 2 by the kernel's rings, 5 on the fast lane)\n"));
	free(text);
	profile_free(p);
}

/* --no-inline: helper's samples are work's, its self ones too, as perf counts them; the header says so. */
static void test_report_no_inline(void **state)
{
	(void)state;
	struct profile *p = tp_example_profile();
	char *text = run_report(p, &(struct report_options){ .no_inline = true });
	assert_non_null(strstr(text, "Processes:          2\nInlined functions:  folded into their callers\n"));
	assert_non_null(strstr(text, "\n\n"
				     "  Self%  Total%     Self  Library    Function\n"
				     " 57.14%  71.43%        8  app        work (app.c)\n"
				     " 21.43%  28.57%        3  app        rec (app.c)\n"
				     " 14.29%  14.29%        2  libc.so.6  [libc.so.6]\n"
				     "  7.14%   7.14%        1  [kernel]   schedule\n"
				     "  0.00%  92.86%        0  app        main (app.c)\n"
				     "  0.00%   7.14%        0             [truncated]\n"));
	free(text);
	/* In the tree, work ends the path: no helper node below it. */
	text = run_report(p, &(struct report_options){ .no_inline = true, .tree = true, .percent_limit = 0 });
	assert_null(strstr(text, "helper"));
	assert_non_null(strstr(text, "work (app.c)"));
	free(text);
	profile_free(p);
}

/* A width cuts long names to fit ("..." at the end), in the table and the tree; without one they are whole. */
static void test_report_width(void **state)
{
	(void)state;
	char name[400];
	memset(name, 'x', sizeof(name) - 1);
	memcpy(name, "ns::Long<", 9);
	name[sizeof(name) - 1] = '\0';
	struct profile *p = tp_example_profile();
	uint32_t fn = tp_function(p, name, "long.cc");
	uint32_t loc = tp_location(p, tp_mapping(p, "/bin/app"), 0x77, PROFILE_FRAME_NATIVE,
				   &(struct profile_line){ .function = fn }, 1);
	uint32_t st = tp_stack(p, 0x77, (uint32_t[]){ loc }, 1);
	tp_sample(p, (struct profile_sample){ .stack = st, .pid = 1, .tid = 1, .count = 1 }, "app", NULL);
	for (int tree = 0; tree < 2; tree++) {
		char *text = run_report(p, &(struct report_options){ .width = 80, .tree = tree, .percent_limit = 0 });
		for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
			assert_true(strlen(line) <= 80);
		free(text);
		text = run_report(p, &(struct report_options){ .width = 80, .tree = tree, .percent_limit = 0 });
		assert_non_null(strstr(text, "ns::Long<xxx"));
		assert_non_null(strstr(text, "xx...\n"));
		free(text);
		text = run_report(p, &(struct report_options){ .tree = tree, .percent_limit = 0 });
		assert_non_null(strstr(text, name));	/* whole */
		free(text);
	}
	profile_free(p);
}

/* Samples counted without their time are said in the summary, which says nothing of times otherwise. */
static void test_report_without_time(void **state)
{
	(void)state;
	struct profile *p = tp_example_profile();
	p->info.timestamps_dropped = 3;
	char *text = run_report(p, NULL);
	assert_non_null(strstr(text, "Unknown:            0 (0.00%)\nWithout time:       3 samples\n\n"));
	free(text);
	profile_free(p);
}

/* Samples without a user stack (-a: kernel threads, idle CPUs) are left out of the shares of user stacks: 20 more
 * samples in the kernel alone leave the 14 walked 92.86% complete, not 38.24% of all 34. */
static void test_report_kernel_only_samples(void **state)
{
	(void)state;
	struct profile *p = tp_example_profile();
	p->info.samples += 20;
	char *text = run_report(p, NULL);
	assert_non_null(strstr(text, "Samples:            34 (lost 1)\n"));
	assert_non_null(strstr(text, "Unwound completely: 92.86% of the 14 user stacks walked (the others were not: "
				     "kernel threads' and idle CPUs' samples have none)\n"
				     "Truncated:          1 (7.14%)\n"));
	free(text);
	/* None walked at all (an idle machine's -a): said, not given as 0% of the samples. */
	p->info.unwound_complete = p->info.truncated = p->info.unknown = 0;
	text = run_report(p, NULL);
	assert_non_null(strstr(text, "Unwound completely: no user stack walked (kernel threads' and idle CPUs' "
				     "samples have none)\nTruncated:          0 (0.00%)\n"));
	free(text);
	profile_free(p);
}

/* --lines: a row per source line, the line of each frame (an inlined frame's own, the call site in its caller). */
static void test_report_lines(void **state)
{
	(void)state;
	struct profile *p = tp_example_profile();
	struct report_options o = { .sort = REPORT_SORT_SELF, .lines = true };
	assert_report(p, &o,
		      "  Self%  Total%     Self  Library    Function\n"
		      " 50.00%  50.00%        7  app        helper (util.h:3)\n"
		      " 21.43%  28.57%        3  app        rec (app.c:30)\n"
		      " 14.29%  14.29%        2  libc.so.6  [libc.so.6]\n"
		      "  7.14%   7.14%        1  app        helper (util.h:4)\n"
		      "  7.14%   7.14%        1  [kernel]   schedule\n"
		      "  0.00%  92.86%        0  app        main (app.c:9)\n"
		      "  0.00%  50.00%        0  app        work (app.c:20)\n"
		      "  0.00%  21.43%        0  app        rec (app.c:31)\n"
		      "  0.00%  14.29%        0  app        work (app.c:22)\n"
		      "  0.00%   7.14%        0             [truncated]\n"
		      "  0.00%   7.14%        0  app        work (app.c:21)\n");
	profile_free(p);
}

/* Code without a function name: one row per library by default (a stripped library's samples spread over many
 * addresses would each stay below the top rows), a row per address with addresses. */
static void test_report_unnamed_code_grouped(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	p->info.period_ns = 1000000;
	uint32_t lib = tp_mapping(p, "/usr/lib/libLLVM-14.so.1"), app = tp_mapping(p, "/bin/app");
	struct profile_line mainl = { tp_function(p, "main", "app.c"), 1 };
	uint32_t lm = tp_location(p, app, 0x100, PROFILE_FRAME_NATIVE, &mainl, 1);
	for (uint32_t i = 0; i < 5; i++) {
		uint32_t lu = tp_location(p, lib, 0x1000 + 0x40 * i, PROFILE_FRAME_NATIVE, NULL, 0);
		uint32_t locs[] = { lu, lm }, st = tp_stack(p, (uint8_t)(10 + i), locs, 2);
		tp_sample(p, (struct profile_sample){ .stack = st, .pid = 7, .tid = 7, .count = 2 }, "app", "app");
	}
	struct profile_line hot = { tp_function(p, "hot", "app.c"), 2 };
	uint32_t lh = tp_location(p, app, 0x200, PROFILE_FRAME_NATIVE, &hot, 1), locs[] = { lh, lm };
	tp_sample(p, (struct profile_sample){ .stack = tp_stack(p, 2, locs, 2), .pid = 7, .tid = 7, .count = 3 }, "app",
		  "app");
	struct report_options o = { .sort = REPORT_SORT_SELF };
	char *text = run_report(p, &o);
	assert_non_null(strstr(text, " 76.92%  76.92%       10  libLLVM-14.so.1  [libLLVM-14.so.1]\n"));
	assert_null(strstr(text, "+0x"));
	free(text);
	o.addresses = true;
	text = run_report(p, &o);
	assert_null(strstr(text, "[libLLVM-14.so.1]"));
	assert_non_null(strstr(text, "libLLVM-14.so.1+0x1000\n"));
	assert_non_null(strstr(text, "libLLVM-14.so.1+0x1100\n"));
	free(text);
	profile_free(p);
}

static void test_report_by_total_with_limit(void **state)
{
	(void)state;
	struct profile *p = tp_example_profile();
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
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	uint32_t m = tp_mapping(p, "/bin/x");
	const char *names[] = { "zeta", "alpha", "mid" };
	for (int i = 0; i < 3; i++) {
		struct profile_line line = { tp_function(p, names[i], NULL), 0 };
		uint32_t l = tp_location(p, m, 0x100 + (uint64_t)i, PROFILE_FRAME_NATIVE, &line, 1);
		uint32_t st = tp_stack(p, (uint8_t)(i + 1), &l, 1);
		tp_sample(p, (struct profile_sample){ .stack = st, .pid = 5, .tid = 5, .count = 1 }, "x", NULL);
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
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	char *text = run_report(p, NULL);
	assert_string_equal(text, "Duration:           0.00 s\n"
				  "Samples:            0 (lost 0)\n"
				  "Event:              unknown\n"
				  "Unwinder:           unknown\n"
				  "Processes:          0\n"
				  "Inlined functions:  rows of their own\n"
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
	assert_int_equal(frame_library_append(p, &p->locations.items[l], 0, &b), 0);
	assert_string_equal(b.s, expect);
	frame_buf_free(&b);
}

static void test_frame_names(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	struct profile_mapping anon_map = { .memory_start = 0x1000 };	/* anonymous memory: no file name */
	uint32_t lib = tp_mapping(p, "/usr/lib/libz.so.1"), anon;
	assert_int_equal(profile_add_mapping(p, &anon_map, &anon), 0);
	struct profile_line inl[] = { { tp_function(p, "inner;x\ny", NULL), 0 }, { tp_function(p, "outer", NULL), 0 } };
	struct profile_line kmod[] = { { tp_function(p, "ext4_read", "ext4"), 0 } };
	struct profile_line unknown[] = { { tp_function(p, "[unknown]", NULL), 0 } };
	uint32_t l_unsym = tp_location(p, lib, 0x2f0a, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t l_anon = tp_location(p, anon, 0x10, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t l_unmapped = tp_location(p, 0, 0x7f0012345678, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t l_inl = tp_location(p, lib, 0x100, PROFILE_FRAME_NATIVE, inl, 2);
	uint32_t l_kmod = tp_location(p, 0, 0x40, PROFILE_FRAME_KERNEL, kmod, 1);
	uint32_t l_kunsym = tp_location(p, 0, 0x5555, PROFILE_FRAME_KERNEL, NULL, 0);
	uint32_t l_err = tp_location(p, 0, 2, PROFILE_FRAME_ERROR, unknown, 1);
	uint32_t l_err_bare = tp_location(p, 0, 1, PROFILE_FRAME_ERROR | PROFILE_FRAME_NATIVE, NULL, 0);
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
		cmocka_unit_test(test_report_lost_where),
		cmocka_unit_test(test_report_no_inline),
		cmocka_unit_test(test_report_width),
		cmocka_unit_test(test_report_without_time),
		cmocka_unit_test(test_report_kernel_only_samples),
		cmocka_unit_test(test_report_lines),
		cmocka_unit_test(test_report_unnamed_code_grouped),
		cmocka_unit_test(test_report_by_total_with_limit),
		cmocka_unit_test(test_report_ties_by_name),
		cmocka_unit_test(test_report_empty),
		cmocka_unit_test(test_frame_names),
	};
	return cmocka_run_group_tests_name("report", tests, NULL, NULL);
}
