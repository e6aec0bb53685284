/*
 * report's and convert's progress while they read long inputs (src/cmd/profile_inputs.h): on a terminal (a
 * pseudo-terminal from script(1)) a status line says how many profiles are merged and how many bytes read, and
 * is erased before the command ends; under a pipe, with -q, or on an input read in well under a second, not a
 * byte of it. The long input is a directory of thousands of profiles (hard links to one recorded profile of the
 * diff_work fixture, as a daemon's directory of a few days): how many is worked out from the CPU time one read of
 * 2000 of them takes here, so that reading them all takes about 3 s of CPU, over the 1 s after which progress is
 * shown however idle or busy the machine is. Skips, saying why, where the kernel refuses perf_event_open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

#define CALIBRATION_FILES 2000
#define TARGET_CPU_S 3.0
#define MAX_FILES 100000

/* A file holds at most 65000 links (ext4): a copy of src serves each LINKS_PER_COPY of them. */
#define LINKS_PER_COPY 50000

/* Hard links dir/profile-NNNNNN.msgpack for n in [from, to) to src, or to a copy of it (src.K) past the first
 * LINKS_PER_COPY. */
static void link_copies(const char *src, const char *dir, unsigned from, unsigned to)
{
	for (unsigned n = from; n < to; n++) {
		char path[700], copy[700];
		const char *target = src;
		if (n >= LINKS_PER_COPY) {
			snprintf(copy, sizeof(copy), "%s.%u", src, n / LINKS_PER_COPY);
			if (access(copy, F_OK) != 0)
				assert_int_equal(test_run("cp '%s' '%s'", src, copy), 0);
			target = copy;
		}
		snprintf(path, sizeof(path), "%s/profile-%06u.msgpack", dir, n);
		assert_int_equal(link(target, path), 0);
	}
}

static double children_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct inputs {
	char work[512], one[600], many[600];
	unsigned files;
};

static struct inputs in;

/* A recorded profile, and a directory of as many copies as take TARGET_CPU_S of CPU to report. */
static int setup(void **state)
{
	char fixture[256];
	(void)state;
	if (!test_perf_available() || test_run("command -v script > /dev/null") != 0)
		return 0;	/* each test skips, saying why */
	char *dir = test_mkdtemp();
	snprintf(in.work, sizeof(in.work), "%s", dir);
	free(dir);
	snprintf(in.one, sizeof(in.one), "%s/one.msgpack", in.work);
	snprintf(in.many, sizeof(in.many), "%s/many", in.work);
	test_fixture_path("diff_work", fixture, sizeof(fixture));
	if (test_run("\"$HOSTPROF\" record -q -o %s -- %s base 20", in.one, fixture) != 0 || mkdir(in.many, 0755) != 0)
		return -1;
	link_copies(in.one, in.many, 0, CALIBRATION_FILES);
	double before = children_cpu_s();
	if (test_run("\"$HOSTPROF\" report -q %s > /dev/null", in.many) != 0)
		return -1;
	double per_file = (children_cpu_s() - before) / CALIBRATION_FILES;
	double want = TARGET_CPU_S / (per_file > 1e-6 ? per_file : 1e-6);
	in.files = want > MAX_FILES ? MAX_FILES : want < CALIBRATION_FILES ? CALIBRATION_FILES : (unsigned)want;
	link_copies(in.one, in.many, CALIBRATION_FILES, in.files);
	fprintf(stderr, "%.2f ms of CPU a profile: %u profiles\n", per_file * 1e3, in.files);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (in.work[0])
		test_rmdir_rf(in.work);
	return 0;
}

static void require_inputs(void)
{
	test_require_perf();
	test_require_tool("command -v script", "script (bsdutils)");
	assert_true(in.files > 0);
}

/* command (report ... or convert ...) on a terminal (1) or under a pipe (0): what it wrote to stderr. */
static char *run(const char *command, int terminal)
{
	char err[700];
	snprintf(err, sizeof(err), "%s/stderr.txt", in.work);
	if (terminal)
		assert_int_equal(test_run("script -q -e -c '\"$HOSTPROF\" %s > /dev/null' %s > /dev/null", command, err), 0);
	else
		assert_int_equal(test_run("\"$HOSTPROF\" %s 2> %s | cat > /dev/null", command, err), 0);
	char *text = test_read_text(err);
	fprintf(stderr, "%.400s\n", text);
	return text;
}

static void check_progress(const char *text)
{
	char total[64];
	snprintf(total, sizeof(total), " of %u merged, ", in.files);
	char *first = strstr(text, "\rhostprof: reading profiles: ");
	assert_non_null(first);
	assert_non_null(strstr(first, total));
	assert_non_null(strstr(first, " MiB ("));
	assert_non_null(strstr(first, "\033[K"));
	/* erased at the end: the last thing on the terminal is the erase */
	char *last = strstr(text, "\r\033[K");
	assert_non_null(last);
	assert_null(strstr(last + 1, "reading profiles"));
}

static void test_terminal_shows_progress(void **state)
{
	char command[1400];
	(void)state;
	require_inputs();
	snprintf(command, sizeof(command), "report %s", in.many);
	char *text = run(command, 1);
	check_progress(text);
	free(text);
	snprintf(command, sizeof(command), "convert %s --to collapsed -o %s/out.txt", in.many, in.work);
	text = run(command, 1);
	check_progress(text);
	free(text);
}

static void test_pipe_quiet_and_short_show_none(void **state)
{
	char command[1400];
	(void)state;
	require_inputs();
	snprintf(command, sizeof(command), "report %s", in.many);
	char *text = run(command, 0);
	assert_string_equal(text, "");
	free(text);
	snprintf(command, sizeof(command), "convert -q %s --to collapsed", in.many);
	text = run(command, 1);
	assert_null(strstr(text, "reading profiles"));
	assert_null(strchr(text, '\033'));
	free(text);
	snprintf(command, sizeof(command), "report -q %s", in.many);
	text = run(command, 1);
	assert_null(strstr(text, "reading profiles"));
	free(text);
	/* One profile, read in milliseconds: nothing flashes by. */
	snprintf(command, sizeof(command), "report %s", in.one);
	text = run(command, 1);
	assert_null(strstr(text, "reading profiles"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_terminal_shows_progress),
		cmocka_unit_test(test_pipe_quiet_and_short_show_none),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
