/*
 * Unit tests for the views of src/profile/report.c: the call tree (order, guides, percent limit, depth limit and
 * bounded lines on a deep recursion), shares of counts near 2^63, per-thread tables,
 * the --pid filter, the header's host and start lines, and report_functions_get(), on a small hand-built
 * profile whose every number is known.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/profile.h"
#include "tests/lib/profile_builder.h"
#include "src/profile/report.h"
#include "src/profile/diff.h"



static uint32_t loc(struct profile *p, uint32_t m, uint64_t address, const struct profile_line *lines,
		    uint32_t nlines)
{
	struct profile_location l = { .mapping = m, .address = address, .frame_kind = PROFILE_FRAME_NATIVE,
				      .nlines = nlines, .lines = (struct profile_line *)lines };
	uint32_t i;
	assert_int_equal(profile_add_location(p, &l, &i), 0);
	return i;
}


static void sample(struct profile *p, uint32_t st, int32_t pid, int32_t tid, const char *comm, const char *thread,
		   uint64_t count)
{
	struct profile_sample s = { .stack = st, .pid = pid, .tid = tid, .comm = tp_string(p, comm),
				    .thread_name = tp_string(p, thread), .count = count };
	assert_int_equal(profile_add_sample(p, &s), 0);
}

/*
 * Stacks, root first:
 *   S1  main > work > helper (helper inlined into work)
 *   S2  main > rec > rec
 *   S3  main > work
 * Samples: pid 1 tid 1 "app"    (comm app):   S1 x4, S2 x2
 *          pid 1 tid 2 "worker" (comm app):   S1 x2, S3 x1
 *          pid 2 tid 2 "other"  (comm other): S3 x1
 */
static struct profile *build(void)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.hostname, "vm"), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.kernel, "6.1.0"), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.event, "cpu-clock"), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.unwinder, "deltas"), 0);
	p->info.start_unix_ns = 1700000000ULL * 1000000000ULL;
	p->info.duration_ns = 1500000000;
	p->info.frequency_hz = 999;
	p->info.samples = 10;
	p->info.unwound_complete = 10;

	struct profile_mapping m = { .filename = tp_string(p, "/opt/app/bin/app") };
	uint32_t app;
	assert_int_equal(profile_add_mapping(p, &m, &app), 0);
	uint32_t f_main = tp_function(p, "main", "/src/app.c"), f_work = tp_function(p, "work", "/src/app.c");
	uint32_t f_helper = tp_function(p, "helper", "/src/util.h"), f_rec = tp_function(p, "rec", "/src/app.c");
	struct profile_line l_inl[] = { { f_helper, 3 }, { f_work, 20 } }, l_main[] = { { f_main, 9 } };
	struct profile_line l_work[] = { { f_work, 22 } }, l_rec[] = { { f_rec, 30 } };
	uint32_t main_ = loc(p, app, 0x1000, l_main, 1), inl = loc(p, app, 0x1100, l_inl, 2);
	uint32_t work = loc(p, app, 0x1200, l_work, 1), rec = loc(p, app, 0x1300, l_rec, 1);

	uint32_t s1 = tp_stack(p, 1, (uint32_t[]){ inl, main_ }, 2);
	uint32_t s2 = tp_stack(p, 2, (uint32_t[]){ rec, rec, main_ }, 3);
	uint32_t s3 = tp_stack(p, 3, (uint32_t[]){ work, main_ }, 2);
	sample(p, s1, 1, 1, "app", "app", 4);
	sample(p, s2, 1, 1, "app", "app", 2);
	sample(p, s1, 1, 2, "app", "worker", 2);
	sample(p, s3, 1, 2, "app", "worker", 1);
	sample(p, s3, 2, 2, "other", "other", 1);
	return p;
}

static const char *const summary =
	"Host:               vm (Linux 6.1.0)\n"
	"Start:              2023-11-14 22:13:20 UTC\n"
	"Duration:           1.50 s\n"
	"Samples:            10 (lost 0)\n"
	"Event:              cpu-clock at 999 Hz\n"
	"Unwinder:           deltas\n"
	"Processes:          2\n"
	"Inlined functions:  rows of their own\n"
	"Unwound completely: 100.00%\n"
	"Truncated:          0 (0.00%)\n"
	"Unknown:            0 (0.00%)\n";

static char *run_report(const struct profile *p, const struct report_options *o, int expect_err)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	assert_int_equal(report_print(p, out, o), expect_err);
	assert_int_equal(fclose(out), 0);
	return text;
}

static void assert_report(const struct profile *p, const struct report_options *o, const char *body)
{
	char *text = run_report(p, o, 0), expect[8192];
	snprintf(expect, sizeof(expect), "%s%s", summary, body);
	assert_string_equal(text, expect);
	free(text);
}

/* Processes at the top; children biggest first; recursion nests; inline frames outer first. */
static void test_tree(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options o = { .tree = true, .percent_limit = 0 };
	assert_report(p, &o,
		      "\n"
		      " Total%   Self%  Call tree, root first (nodes under 0.00% hidden)\n"
		      " 90.00%   0.00%  app\n"
		      " 90.00%   0.00%  `- main (app.c)\n"
		      " 70.00%  10.00%     |- work (app.c)\n"
		      " 60.00%  60.00%     |  `- helper (util.h)\n"
		      " 20.00%   0.00%     `- rec (app.c)\n"
		      " 20.00%  20.00%        `- rec (app.c)\n"
		      " 10.00%   0.00%  other\n"
		      " 10.00%   0.00%  `- main (app.c)\n"
		      " 10.00%  10.00%     `- work (app.c)\n");
	profile_free(p);
}

/* Nodes under the limit go with their subtrees; the last visible child gets the closing guide. */
static void test_tree_percent_limit(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options o = { .tree = true, .percent_limit = 25 };
	assert_report(p, &o,
		      "\n"
		      " Total%   Self%  Call tree, root first (nodes under 25.00% hidden)\n"
		      " 90.00%   0.00%  app\n"
		      " 90.00%   0.00%  `- main (app.c)\n"
		      " 70.00%  10.00%     `- work (app.c)\n"
		      " 60.00%  60.00%        `- helper (util.h)\n");
	profile_free(p);
}

/* One table per (pid, tid, thread name), busiest first, percentages of the thread's own samples. */
static void test_per_thread(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options o = { .per_thread = true, .limit = 2, .sort = REPORT_SORT_SELF };
	assert_report(p, &o,
		      "\n"
		      "Thread 1 \"app\" of process 1 \"app\": 6 samples (60.00%)\n"
		      "  Self%  Total%     Self  Library  Function\n"
		      " 66.67%  66.67%        4  app      helper (util.h)\n"
		      " 33.33%  33.33%        2  app      rec (app.c)\n"
		      "\n"
		      "Thread 2 \"worker\" of process 1 \"app\": 3 samples (30.00%)\n"
		      "  Self%  Total%     Self  Library  Function\n"
		      " 66.67%  66.67%        2  app      helper (util.h)\n"
		      " 33.33% 100.00%        1  app      work (app.c)\n"
		      "\n"
		      "Thread 2 \"other\" of process 2 \"other\": 1 sample (10.00%)\n"
		      "  Self%  Total%     Self  Library  Function\n"
		      "100.00% 100.00%        1  app      work (app.c)\n"
		      "  0.00% 100.00%        0  app      main (app.c)\n");
	profile_free(p);
}

static void test_per_thread_tree(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options o = { .per_thread = true, .tree = true, .filter_pid = true, .pid = 2 };
	assert_report(p, &o,
		      "Shown:              pid 2, 1 sample (10.00%)\n"
		      "\n"
		      "Thread 2 \"other\" of process 2 \"other\": 1 sample (100.00%)\n"
		      " Total%   Self%  Call tree, root first (nodes under 0.00% hidden)\n"
		      "100.00%   0.00%  other\n"
		      "100.00%   0.00%  `- main (app.c)\n"
		      "100.00% 100.00%     `- work (app.c)\n");
	profile_free(p);
}

/* --pid keeps that process's samples; percentages are of them. */
static void test_pid_filter(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options o = { .filter_pid = true, .pid = 1, .sort = REPORT_SORT_TOTAL };
	assert_report(p, &o,
		      "Shown:              pid 1, 9 samples (90.00%)\n"
		      "\n"
		      "  Self%  Total%     Self  Library  Function\n"
		      "  0.00% 100.00%        0  app      main (app.c)\n"
		      " 11.11%  77.78%        1  app      work (app.c)\n"
		      " 66.67%  66.67%        6  app      helper (util.h)\n"
		      " 22.22%  22.22%        2  app      rec (app.c)\n");
	profile_free(p);
}

static void test_pid_filter_no_samples(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options o = { .filter_pid = true, .pid = 77 };
	char *text = run_report(p, &o, -ESRCH);
	assert_true(text == NULL || text[0] == '\0');
	free(text);
	profile_free(p);
}

/* Default options print the same table as before the views existed (and the header's new lines only when known). */
static void test_default_view(void **state)
{
	(void)state;
	struct profile *p = build();
	assert_report(p, NULL,
		      "\n"
		      "  Self%  Total%     Self  Library  Function\n"
		      " 60.00%  60.00%        6  app      helper (util.h)\n"
		      " 20.00%  80.00%        2  app      work (app.c)\n"
		      " 20.00%  20.00%        2  app      rec (app.c)\n"
		      "  0.00% 100.00%        0  app      main (app.c)\n");
	profile_free(p);
}

static void test_empty_tree(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	struct report_options o = { .tree = true };
	char *text = run_report(p, &o, 0);
	assert_non_null(strstr(text, "Unknown:            0 (0.00%)\n\nNo samples.\n"));
	assert_null(strstr(text, "Host:"));
	assert_null(strstr(text, "Start:"));
	free(text);
	profile_free(p);
}

static void test_functions_get(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_functions f;
	assert_int_equal(report_functions_get(p, &f), 0);
	assert_int_equal(f.samples, 10);
	assert_int_equal(f.count, 4);
	const char *names[] = { "helper (util.h)", "main (app.c)", "rec (app.c)", "work (app.c)" };
	const uint64_t self[] = { 6, 0, 2, 2 }, total[] = { 6, 10, 2, 8 };
	for (uint32_t i = 0; i < 4; i++) {
		assert_string_equal(f.items[i].name, names[i]);
		assert_string_equal(f.items[i].library, "app");
		assert_int_equal(f.items[i].self, self[i]);
		assert_int_equal(f.items[i].total, total[i]);
	}
	report_functions_free(&f);
	assert_int_equal(f.count, 0);
	profile_free(p);
}

/*
 * A profile is a file anyone may hand over, and its strings come from the processes profiled: a comm, thread,
 * function, source-file or library name, a host name or an event name holding an ESC sequence, a line break,
 * a C1 control, a bidi override or invalid UTF-8 reaches the terminal escaped, in every view and in diff.
 */
#define HOSTILE "x\033[2J\n\r\302\233\342\200\256\377y"

static struct profile *build_hostile(void)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.hostname, "host" HOSTILE), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.kernel, "6" HOSTILE), 0);
	assert_int_equal(profile_set_info_string(p, &p->info.event, "ev" HOSTILE), 0);
	struct profile_mapping m = { .filename = tp_string(p, "/opt/lib" HOSTILE ".so") };
	uint32_t lib;
	assert_int_equal(profile_add_mapping(p, &m, &lib), 0);
	uint32_t f = tp_function(p, "fn" HOSTILE, "/src/file" HOSTILE ".c");
	struct profile_line line[] = { { f, 7 } };
	uint32_t named = loc(p, lib, 0x1000, line, 1), bare = loc(p, lib, 0x2000, NULL, 0);
	struct profile_sample s = { .stack = tp_stack(p, 1, (uint32_t[]){ bare, named }, 2), .pid = 5, .tid = 6,
				    .comm = tp_string(p, "comm" HOSTILE), .thread_name = tp_string(p, "th" HOSTILE),
				    .count = 3, .cpu_ns = 3000000, .off_cpu_ns = 1000000 };
	assert_int_equal(profile_add_sample(p, &s), 0);
	return p;
}

/* No byte of text drives a terminal, and every line break is one the view drew itself (lines: how many). */
static void assert_escaped(const char *text, unsigned lines)
{
	unsigned breaks = 0;
	for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
		breaks += *c == '\n';
		assert_true(*c == '\n' || (*c >= 0x20 && *c < 0x7f));	/* the only non-ASCII bytes were hostile */
	}
	assert_int_equal(breaks, lines);
	assert_non_null(strstr(text, "fnx\\x1b[2J\\n\\r\\xc2\\x9b\\xe2\\x80\\xae\\xffy (filex"));
}

/* A tree stops tree_depth levels below the process; one line under the last level shown says what goes on:
 * the share of the samples and the most levels they go on for. */
static void test_tree_depth_cut(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options o = { .tree = true, .percent_limit = 0, .tree_depth = 2 };
	assert_report(p, &o,
		      "\n"
		      " Total%   Self%  Call tree, root first (nodes under 0.00% hidden)\n"
		      " 90.00%   0.00%  app\n"
		      " 90.00%   0.00%  `- main (app.c)\n"
		      " 70.00%  10.00%     |- work (app.c)\n"
		      " 60.00%             |  `- ... 1 more level\n"
		      " 20.00%   0.00%     `- rec (app.c)\n"
		      " 20.00%                `- ... 1 more level\n"
		      " 10.00%   0.00%  other\n"
		      " 10.00%   0.00%  `- main (app.c)\n"
		      " 10.00%  10.00%     `- work (app.c)\n");
	o.percent_limit = 25;	/* a cut under the limit is hidden as a node would be */
	assert_report(p, &o,
		      "\n"
		      " Total%   Self%  Call tree, root first (nodes under 25.00% hidden)\n"
		      " 90.00%   0.00%  app\n"
		      " 90.00%   0.00%  `- main (app.c)\n"
		      " 70.00%  10.00%     `- work (app.c)\n"
		      " 60.00%                `- ... 1 more level\n");
	profile_free(p);
}

/* A recursion n frames deep, one sample. */
static struct profile *recursion(uint32_t n)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	uint32_t f = tp_function(p, "rec", "/src/rec.c"), *locs = malloc(n * sizeof(*locs));
	struct profile_line line = { f, 7 };
	assert_non_null(locs);
	uint32_t l = loc(p, tp_mapping(p, "/bin/rec"), 0x1000, &line, 1);
	for (uint32_t i = 0; i < n; i++)
		locs[i] = l;
	sample(p, tp_stack(p, 1, locs, n), 1, 1, "rec", "rec", 1);
	free(locs);
	return p;
}

/* The number of lines of text, and the longest. */
static unsigned count_lines(const char *text, size_t *longest)
{
	unsigned n = 0;
	*longest = 0;
	for (const char *line = text, *end; *line; line = end + 1, n++) {
		end = strchr(line, '\n');
		if ((size_t)(end - line) > *longest)
			*longest = (size_t)(end - line);
	}
	return n;
}

/* A recursion 60,000 frames deep prints in lines and bytes that grow with the levels shown, not with the
 * square of its depth (which took gigabytes): 64 levels by default; more when asked, each line's guides
 * drawn for 64 levels at most, deeper nodes showing their level. */
static void test_tree_deep_recursion_bounded(void **state)
{
	(void)state;
	struct profile *p = recursion(60000);
	struct report_options o = { .tree = true, .percent_limit = 0 };
	size_t longest;
	char *text = run_report(p, &o, 0);
	const char *cut = strstr(text, "`- ... 59936 more levels\n");
	assert_non_null(cut);
	assert_string_equal(cut, "`- ... 59936 more levels\n");	/* the last line */
	assert_int_equal(count_lines(text, &longest), 9 + 1 + 1 + 1 + 64 + 1);	/* summary, blank, head, rec, 64, cut */
	assert_int_equal(longest, 17 + 63 * 3 + 3 + strlen("... 59936 more levels"));	/* the cut's */
	assert_true(strlen(text) < 20000);
	free(text);
	o.tree_depth = 100;
	text = run_report(p, &o, 0);
	assert_int_equal(count_lines(text, &longest), 9 + 1 + 1 + 1 + 100 + 1);
	assert_int_equal(longest, 17 + 63 * 3 + 3 + strlen("... 59900 more levels"));	/* no more guides */
	assert_non_null(strstr(text, "   [65] `- rec (rec.c)\n"));
	assert_non_null(strstr(text, "   [100] `- rec (rec.c)\n100.00%"));
	assert_non_null(strstr(text, "   `- ... 59900 more levels\n"));
	free(text);
	profile_free(p);
}

/* Counts near 2^63 (the most a profile holds) give shares of at most 100%, whatever the view. */
static void test_huge_counts_shares(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	uint32_t f = tp_function(p, "work", "/src/w.c");
	struct profile_line line = { f, 1 };
	uint32_t l = loc(p, tp_mapping(p, "/bin/w"), 0x1000, &line, 1), st = tp_stack(p, 1, &l, 1);
	sample(p, st, 1, 1, "w", "a", PROFILE_VALUE_MAX / 2);
	sample(p, st, 1, 2, "w", "b", PROFILE_VALUE_MAX / 2);
	struct report_options table = { .limit = 5 }, tree = { .tree = true }, threads = { .per_thread = true };
	char *text = run_report(p, &table, 0);
	assert_non_null(strstr(text, "Samples:            9223372036854775806 (lost 0)\n"));
	assert_non_null(strstr(text, "100.00% 100.00% 9223372036854775806  w        work (w.c)\n"));
	free(text);
	text = run_report(p, &tree, 0);
	assert_non_null(strstr(text, "100.00%   0.00%  w\n100.00% 100.00%  `- work (w.c)\n"));
	free(text);
	text = run_report(p, &threads, 0);
	assert_non_null(strstr(text, "4611686018427387903 samples (50.00%)\n"));
	free(text);
	profile_free(p);
}

/* The recording's CPUs on the host line (those offline said), its command line (another process's words:
 * escaped) on a line of its own; a profile that does not say shows neither (the summary of the other tests). */
static void test_origin_cpus_and_command(void **state)
{
	(void)state;
	struct profile *p = build();
	struct report_options table = { .limit = 5 };
	assert_int_equal(profile_set_info_string(p, &p->info.cmdline, "perf record -g -- ./app" HOSTILE), 0);
	p->info.cpus_online = 2;
	p->info.cpus_available = 4;
	char *text = run_report(p, &table, 0);
	assert_non_null(strstr(text, "Host:               vm (Linux 6.1.0), 2 of 4 CPUs online\n"
				     "Command:            perf record -g -- ./appx\\x1b[2J"));
	free(text);
	p->info.cpus_available = 2;
	text = run_report(p, &table, 0);
	assert_non_null(strstr(text, "Host:               vm (Linux 6.1.0), 2 CPUs\n"));
	free(text);
	profile_free(p);
}

static void test_hostile_strings_escaped(void **state)
{
	(void)state;
	struct profile *p = build_hostile();
	struct report_options table = { .limit = 5 }, tree = { .tree = true, .percent_limit = 0 };
	struct report_options threads = { .per_thread = true, .tree = true }, wall = { .wall = true };
	char *text = run_report(p, &table, 0);
	assert_escaped(text, 11 + 4);	/* the summary (with its off-CPU line), a blank, the table's head, two rows */
	assert_non_null(strstr(text, "Host:               hostx\\x1b[2J"));
	assert_non_null(strstr(text, "(Linux 6x\\x1b"));
	assert_non_null(strstr(text, "Event:              evx\\x1b"));
	/* Its unnamed code is the library's row, escaped; with --addresses a row per address, escaped too. */
	assert_non_null(strstr(text, "[libx\\x1b[2J\\n\\r\\xc2\\x9b\\xe2\\x80\\xae\\xffy.so]"));
	free(text);
	struct report_options addresses = { .limit = 5, .addresses = true };
	text = run_report(p, &addresses, 0);
	assert_escaped(text, 11 + 4);
	assert_non_null(strstr(text, "libx\\x1b[2J\\n\\r\\xc2\\x9b\\xe2\\x80\\xae\\xffy.so+0x2000"));
	free(text);
	text = run_report(p, &tree, 0);
	assert_escaped(text, 11 + 5);	/* the summary, a blank, the tree's head, three nodes */
	assert_non_null(strstr(text, "commx\\x1b[2J"));
	free(text);
	text = run_report(p, &threads, 0);
	assert_non_null(strstr(text, "Thread 6 \"thx\\x1b[2J\\n\\r\\xc2\\x9b\\xe2\\x80\\xae\\xffy\" of process 5 \"commx\\x1b"));
	assert_escaped(text, 11 + 6);	/* the summary, a blank, the thread's line, the tree's head, three nodes */
	free(text);
	text = run_report(p, &wall, 0);
	assert_non_null(strstr(text, "6 \"thx\\x1b[2J"));
	free(text);

	struct diff d;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	struct profile *base = build();
	assert_non_null(f);
	assert_int_equal(diff_compute(base, p, &d), 0);
	struct diff_options o = { .threshold = 1, .base_name = "a\033]0;title\007.msgpack", .new_name = "b" };
	assert_int_equal(diff_print(&d, f, &o), 0);
	assert_int_equal(diff_regressions(&d, 1), 2);	/* fn and the library frame, new */
	assert_int_equal(fclose(f), 0);
	assert_escaped(out, 4 + 8 + 2);	/* the header and a blank, the table (two heads, six rows), a blank, the verdict */
	assert_non_null(strstr(out, "Base: a\\x1b]0;title\\x07.msgpack"));
	free(out);
	diff_free(&d);
	profile_free(base);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tree),
		cmocka_unit_test(test_origin_cpus_and_command),
		cmocka_unit_test(test_tree_percent_limit),
		cmocka_unit_test(test_tree_depth_cut),
		cmocka_unit_test(test_tree_deep_recursion_bounded),
		cmocka_unit_test(test_huge_counts_shares),
		cmocka_unit_test(test_per_thread),
		cmocka_unit_test(test_per_thread_tree),
		cmocka_unit_test(test_pid_filter),
		cmocka_unit_test(test_pid_filter_no_samples),
		cmocka_unit_test(test_default_view),
		cmocka_unit_test(test_empty_tree),
		cmocka_unit_test(test_functions_get),
		cmocka_unit_test(test_hostile_strings_escaped),
	};
	return cmocka_run_group_tests_name("report views", tests, NULL, NULL);
}
