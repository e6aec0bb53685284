/*
 * The project's rules as `make check` enforces them: the layering rule (tests/check-layers: unwind/, symbols/ and
 * correlate/ include src/base/ and nothing else of src/) holds for this tree and catches a violation, and
 * tests/run-tests fails a test that skips without saying why and, with CI=true, one that skips for a reason
 * tests/allowed-skips does not list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "tests/lib/testlib.h"

static void test_layering_holds_here(void **state)
{
	(void)state;
	assert_int_equal(test_run("tests/check-layers"), 0);
}

/* A copy of the libraries' layout with one file each that breaks the rule, and files that keep it. */
static void test_layering_violations_named(void **state)
{
	struct test_workdir *w = *state;
	const char *d = w->dir;
	assert_int_equal(test_run("mkdir -p %s/unwind %s/symbols %s/correlate %s/src/base && "
				  "printf '#include \"src/base/hindex.h\"\\n#include \"unwind/unwind.h\"\\n#include <stdio.h>\\n'"
				  " > %s/unwind/ok.c && printf '#include \"src/base/clock.h\"\\n' > %s/src/base/ok.c",
				  d, d, d, d, d, d), 0);
	assert_int_equal(test_run("tests/check-layers %s", d), 0);
	assert_int_equal(test_run("printf '  # include <src/session.h>\\n' > %s/correlate/bad.h", d), 0);
	assert_int_equal(test_run("tests/check-layers %s 2> %s/err", d, d), 1);
	assert_int_equal(test_run("grep -q 'correlate/bad.h:1: includes src/session.h: unwind/, symbols/ and "
				  "correlate/ may include src/base/ and nothing else of src/' %s/err", d), 0);
	assert_int_equal(test_run("rm %s/correlate/bad.h && printf '#include \"src/profile/profile.h\"\\n' > %s/src/base/bad.c",
				  d, d), 0);
	assert_int_equal(test_run("tests/check-layers %s 2> %s/err", d, d), 1);
	assert_int_equal(test_run("grep -q 'src/base/bad.c:1: includes src/profile/profile.h' %s/err", d), 0);
}

/*
 * A stand-in test binary: cmocka's summary with `skipped` skips, and the reason lines given on stderr. Written
 * with stdio, not a shell command: test_run() echoes its commands, and a reason in this test's own output would
 * count as one of its own skips.
 */
static void fake_test(const char *dir, unsigned skipped, const char *lines)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/fake", dir);
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\necho '[  PASSED  ] 1 test(s).'\n");
	if (skipped)
		fprintf(f, "echo '[  SKIPPED ] %u test(s).'\n", skipped);
	fprintf(f, "printf '%%s' '%s' >&2\n", lines);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0755), 0);
}

/* tests/run-tests over the fake with CI set to ci, its output in <dir>/out; returns its exit status. */
static int run_fake(const char *dir, const char *ci)
{
	return test_run("CI=%s tests/run-tests %s/fake > %s/out 2>&1", ci, dir, dir);
}

static void test_skip_reasons(void **state)
{
	struct test_workdir *w = *state;
	const char *d = w->dir;
	/* A skip with its reason passes; with CI=true only if tests/allowed-skips lists the reason. */
	fake_test(d, 1, "SKIP: xz is not installed\n");
	assert_int_equal(run_fake(d, ""), 0);
	assert_int_equal(run_fake(d, "true"), 1);
	assert_int_equal(test_run("grep -q 'skipped for a reason tests/allowed-skips does not list: xz is not "
				  "installed' %s/out", d), 0);
	fake_test(d, 1, "SKIP: the kernel refuses perf_event_open here (Permission denied)\n");
	assert_int_equal(run_fake(d, "true"), 0);
	/* Parts of a test left out count the same in CI. */
	fake_test(d, 0, "SKIP part: sqlite3 is not installed\n");
	assert_int_equal(run_fake(d, ""), 0);
	assert_int_equal(run_fake(d, "true"), 1);
	/* A skip that gives no reason, or a reason without a skip, fails everywhere. */
	fake_test(d, 1, "");
	assert_int_equal(run_fake(d, ""), 1);
	assert_int_equal(test_run("grep -q '1 tests skipped, 0 said why' %s/out", d), 0);
	fake_test(d, 0, "SKIP: the kernel refuses perf_event_open here\n");
	assert_int_equal(run_fake(d, "true"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layering_holds_here),
		cmocka_unit_test_setup_teardown(test_layering_violations_named, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_skip_reasons, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("rules", tests, NULL, NULL);
}
