/*
 * record's live status line (src/cmd/status_line.h): on a terminal (a pseudo-terminal from script(1)) it is
 * written and rewritten in place with the samples, and erased before the summary; under a pipe, or with -q on a
 * terminal, not a byte of it. Under a pipe record says one summary line, and its details with -v. The fixture is diff_work (tests/fixtures/diff_work.c), about a second of CPU.
 * Skips, saying why, where the kernel refuses perf_event_open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testlib.h"

/* The run's standard error: on a terminal (script -q, its typescript) or into a file. */
static char *record(const struct test_workdir *w, const char *flags, int terminal)
{
	char fixture[256], out[600];
	test_require_perf();
	test_require_tool("command -v script", "script (bsdutils)");
	test_fixture_path("diff_work", fixture, sizeof(fixture));
	snprintf(out, sizeof(out), "%s/stderr.txt", w->dir);
	if (terminal)
		assert_int_equal(test_run("script -q -e -c '\"$HOSTPROF\" record %s -o %s -- %s base 60' %s > /dev/null",
					  flags, w->out, fixture, out), 0);
	else
		assert_int_equal(test_run("\"$HOSTPROF\" record %s -o %s -- %s base 60 2> %s | cat", flags, w->out,
					  fixture, out), 0);
	char *text = test_read_text(out);
	fprintf(stderr, "%s\n", text);
	return text;
}

static void test_terminal_shows_status(void **state)
{
	char *text = record(*state, "", 1);
	/* At least two lines in place (the run takes over a second), each erasing the rest of the last. */
	char *first = strstr(text, "\rhostprof: "), *second = first ? strstr(first + 1, "\rhostprof: ") : NULL;
	assert_non_null(first);
	assert_non_null(second);
	assert_non_null(strstr(first, " samples, "));
	assert_non_null(strstr(first, " lost, 1 processes, hostprof CPU "));
	assert_non_null(strstr(first, "\033[K"));
	/* Erased before the summary, which starts a clean line. */
	assert_non_null(strstr(text, "\r\033[Khostprof: "));
	assert_non_null(strstr(text, " samples in "));
	free(text);
}

static void test_pipe_and_quiet_show_none(void **state)
{
	char *text = record(*state, "", 0);
	/* Under a pipe: the one summary line and nothing else (no errors here). */
	assert_non_null(strstr(text, "hostprof: "));
	assert_true(strstr(text, "hostprof: ") == text && strchr(text, '\n') == text + strlen(text) - 1);
	assert_non_null(strstr(text, " samples in "));
	assert_non_null(strstr(text, " unwound completely; wrote "));
	assert_null(strchr(text, '\r'));
	assert_null(strchr(text, '\033'));
	free(text);
	/* -v: the details follow it. */
	text = record(*state, "-v", 0);
	assert_non_null(strstr(text, "hostprof: recording at "));
	assert_non_null(strstr(text, " context switches"));
	assert_non_null(strstr(text, "stack-delta tables"));
	free(text);
	text = record(*state, "-q", 1);
	assert_null(strstr(text, "\rhostprof: "));
	assert_null(strchr(text, '\033'));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_terminal_shows_status, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_pipe_and_quiet_show_none, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
