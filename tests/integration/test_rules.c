/*
 * The project's rules as `make check` enforces them: the layering rule (tests/check-layers: ARCHITECTURE.md's
 * folder table, each folder including only what its row allows) holds for this tree and catches violations, and
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

/* The folder table of this tree's ARCHITECTURE.md over a copy of the layout with files that keep it, then one file
 * at a time that breaks it: each named, with the rule of its folder. */
static void expect_violation(const char *d, const char *file, const char *include, const char *said)
{
	assert_int_equal(test_run("printf '#include \"%s\"\\n' > %s/%s", include, d, file), 0);
	assert_int_equal(test_run("tests/check-layers %s 2> %s/err", d, d), 1);
	assert_int_equal(test_run("grep -F -q '%s:1: includes %s, of %s' %s/err", file, include, said, d), 0);
	assert_int_equal(test_run("rm %s/%s", d, file), 0);
	assert_int_equal(test_run("tests/check-layers %s", d), 0);
}

static void test_layering_violations_named(void **state)
{
	struct test_workdir *w = *state;
	const char *d = w->dir;
	assert_int_equal(test_run("mkdir -p %s/unwind %s/symbols %s/correlate %s/src/base %s/src/profile "
				  "%s/src/pipeline %s/src/cmd && cp ARCHITECTURE.md %s/ && "
				  "printf '#include \"src/base/hindex.h\"\\n#include \"unwind/unwind.h\"\\n#include <stdio.h>\\n'"
				  " > %s/unwind/ok.c && printf '#include \"src/base/clock.h\"\\n' > %s/src/base/ok.c && "
				  "printf '#include \"src/cmd/commands.h\"\\n' > %s/src/cmd/ok.c && "
				  "printf '#include \"src/profile/proto/profile.pb-c.h\"\\n' > %s/src/profile/ok.c",
				  d, d, d, d, d, d, d, d, d, d, d, d), 0);
	assert_int_equal(test_run("tests/check-layers %s", d), 0);
	expect_violation(d, "correlate/bad.h", "src/pipeline/session.h", "src/pipeline/: correlate/ may include");
	expect_violation(d, "correlate/bad.c", "unwind/unwind.h", "unwind/: correlate/ may include");
	expect_violation(d, "unwind/bad.c", "symbols/symbolizer.h", "symbols/: unwind/ may include");
	expect_violation(d, "src/base/bad.c", "src/profile/profile.h", "src/profile/: src/base/ may include itself only");
	expect_violation(d, "src/profile/bad.c", "src/pipeline/session.h", "src/pipeline/: src/profile/ may include");
	expect_violation(d, "src/pipeline/bad.c", "src/cmd/options.h", "src/cmd/: src/pipeline/ may include anything but");
	/* Without the table there is no rule to check: said, not passed. */
	assert_int_equal(test_run("rm %s/ARCHITECTURE.md && tests/check-layers %s 2> %s/err", d, d, d), 2);
	assert_int_equal(test_run("grep -q 'no folder table' %s/err", d), 0);
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
