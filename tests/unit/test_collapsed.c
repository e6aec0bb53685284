/*
 * Unit tests for src/profile/collapsed.c: exact collapsed-stack lines for a small hand-built profile (root first, inline
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

#include "src/profile/collapsed.h"
#include "src/profile/profile.h"
#include "tests/lib/profile_builder.h"







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
	struct profile *p = tp_example_profile();
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
	struct profile *p = tp_example_profile();
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
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	char *text = run_collapsed(p, NULL);
	assert_string_equal(text, "");
	free(text);
	struct profile_line line = { tp_function(p, "f", NULL), 0 };
	uint32_t l = tp_location(p, 0, 0x10, PROFILE_FRAME_GO, &line, 1);
	tp_sample(p, (struct profile_sample){ .stack = tp_stack(p, 1, &l, 1), .pid = 9, .tid = 9, .count = 2 }, "", NULL);
	text = run_collapsed(p, NULL);
	assert_string_equal(text, "[unknown];f 2\n");
	free(text);
	profile_free(p);
}

/* JIT frames carry stackcollapse-perf.pl's _[j]; unnamed JIT code shows its runtime address. */
static void test_collapsed_jit_frames(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	uint32_t node = tp_mapping(p, "/usr/bin/node"), anon = tp_mapping(p, "[jit]");
	struct profile_line js = { tp_function(p, "JS:*hot /a.js:1:1", NULL), 0 };
	struct profile_line main_ = { tp_function(p, "main", NULL), 0 };
	uint32_t locs[] = { tp_location(p, anon, 0x7f00001234, PROFILE_FRAME_JIT, NULL, 0),
			    tp_location(p, tp_mapping(p, "/tmp/perf-9.map"), 0x40, PROFILE_FRAME_JIT, &js, 1),
			    tp_location(p, node, 0x10, PROFILE_FRAME_NATIVE, &main_, 1) };
	tp_sample(p, (struct profile_sample){ .stack = tp_stack(p, 1, locs, 3), .pid = 9, .tid = 9, .count = 3 },
		  "node", NULL);
	char *text = run_collapsed(p, NULL);
	assert_string_equal(text, "node;main;JS:*hot /a.js:1:1_[j];[jit]+0x7f00001234_[j] 3\n");
	free(text);
	profile_free(p);
}

/* No byte but printable ASCII and the line ends: what a hostile process named itself or its functions cannot
 * drive the terminal that shows the stacks, nor add a line or a frame. */
static void assert_printable(const char *text, unsigned lines)
{
	unsigned breaks = 0;
	for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
		breaks += *c == '\n';
		assert_true(*c == '\n' || (*c >= 0x20 && *c < 0x7f));
	}
	assert_int_equal(breaks, lines);
}

static void test_collapsed_escapes_names(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	uint32_t f = tp_function(p, "fn\033]0;title\007\xe2\x80\xae\xff", "/src/a.c");
	struct profile_line line = { f, 1 };
	uint32_t m = tp_mapping(p, "/opt/lib\033[2J.so");
	uint32_t named = tp_location(p, m, 0x10, PROFILE_FRAME_NATIVE, &line, 1);
	uint32_t unnamed = tp_location(p, m, 0x20, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t st = tp_stack(p, 1, (uint32_t[]){ unnamed, named }, 2);
	tp_sample(p, (struct profile_sample){ .stack = st, .pid = 1, .tid = 1, .count = 3 }, "main\033[1mBOLD\n<0>x",
		  "");
	char *text = run_collapsed(p, NULL);
	assert_printable(text, 1);
	assert_string_equal(text, "main\\x1b[1mBOLD\\n<0>x;fn\\x1b]0:title\\x07\\xe2\\x80\\xae\\xff;"
				  "lib\\x1b[2J.so+0x20 3\n");
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
		cmocka_unit_test(test_collapsed_jit_frames),
		cmocka_unit_test(test_collapsed_escapes_names),
	};
	return cmocka_run_group_tests_name("collapsed", tests, NULL, NULL);
}
