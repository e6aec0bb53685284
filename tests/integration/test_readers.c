/*
 * The reading commands (report, convert, diff) on hand-built hostile inputs, as a user runs them: a FIFO among a
 * directory's profiles or given as one, a stack deeper than record writes, a recursion that used to print
 * gigabytes as a tree, counts that add up past 2^63, a process name with terminal escapes. Each command runs
 * under timeout(1), so one that blocks fails the test instead of hanging it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/profile/profile.h"
#include "tests/lib/profile_builder.h"
#include "tests/lib/testlib.h"

/* What a command may take on a busy machine before it counts as hung. */
#define HANG "timeout 60"

/* A profile of one stack: a recursion depth frames deep under comm, count samples on thread tid. */
static struct profile *recursion(uint32_t depth, const char *comm, uint64_t count, int tid)
{
	struct profile *p;
	uint32_t *locs = malloc(depth * sizeof(*locs));
	assert_non_null(locs);
	assert_int_equal(profile_new(&p), 0);
	p->info.period_ns = 1;
	uint32_t f = tp_function(p, "rec", "/src/rec.c");
	struct profile_line line = { f, 3 };
	uint32_t l = tp_location(p, tp_mapping(p, "/bin/rec"), 0x1000, PROFILE_FRAME_NATIVE, &line, 1);
	for (uint32_t i = 0; i < depth; i++)
		locs[i] = l;
	uint32_t st = tp_stack(p, 1, locs, depth);
	if (count)
		tp_sample(p, (struct profile_sample){ .stack = st, .pid = 1, .tid = tid, .count = count }, comm, "");
	free(locs);
	return p;
}

static void write_profile(struct profile *p, const char *dir, const char *name)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(profile_write_file(p, path), 0);
	profile_free(p);
}

/* A FIFO named like a profile in a directory is skipped with a warning, the others read; given itself, it is an
 * error. Opening it used to wait for a writer forever. */
static void test_fifo_not_read(void **state)
{
	struct test_workdir *w = *state;
	write_profile(recursion(3, "app", 5, 1), w->dir, "a.msgpack");
	assert_int_equal(test_run("mkfifo %s/x.msgpack", w->dir), 0);
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" report %s > %s/out 2> %s/err", w->dir, w->dir, w->dir), 0);
	assert_int_equal(test_run("grep -qx 'hostprof: warning: skipping %s/x.msgpack: not a regular file (a FIFO)' "
				  "%s/err", w->dir, w->dir), 0);
	assert_int_equal(test_run("grep -q 'rec (rec.c)' %s/out", w->dir), 0);
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" report %s/x.msgpack 2> %s/err; test $? = 1", w->dir, w->dir), 0);
	assert_int_equal(test_run("grep -qx 'hostprof: %s/x.msgpack: not a regular file (a FIFO)' %s/err", w->dir,
				  w->dir), 0);
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" diff %s/a.msgpack %s/x.msgpack 2> /dev/null; test $? = 2", w->dir,
				  w->dir), 0);
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" convert --to collapsed /dev/zero 2> %s/err; test $? = 1", w->dir),
			 0);
	assert_int_equal(test_run("grep -qx 'hostprof: /dev/zero: not a regular file (a character device)' %s/err",
				  w->dir), 0);
}

/* A stack longer than record writes (70,000 frames) is corrupt; a recursion as deep as record goes prints a
 * tree of 64 levels and one line for the rest, not the square of its depth (6.4 GB at 100,000 deep). */
static void test_deep_stacks(void **state)
{
	struct test_workdir *w = *state;
	write_profile(recursion(70000, "app", 1, 1), w->dir, "deeper.msgpack");
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" report %s/deeper.msgpack 2> %s/err; test $? = 1", w->dir, w->dir),
			 0);
	assert_int_equal(test_run("grep -q 'deeper.msgpack: corrupt: stack 1 has 70000 frames, more than hostprof "
				  "records (65792)' %s/err", w->dir), 0);
	write_profile(recursion(65000, "app", 1, 1), w->dir, "deep.msgpack");
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" report --tree %s/deep.msgpack > %s/tree", w->dir, w->dir), 0);
	assert_int_equal(test_run("tail -1 %s/tree | grep -q '`- \\.\\.\\. 64936 more levels$'", w->dir), 0);
	assert_int_equal(test_run("test $(wc -c < %s/tree) -lt 20000 && test $(wc -L < %s/tree) -le 240", w->dir,
				  w->dir), 0);
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" report --tree --tree-depth 1000 %s/deep.msgpack > %s/tree",
				  w->dir, w->dir), 0);
	assert_int_equal(test_run("grep -q '\\[1000\\] `- rec (rec.c)$' %s/tree && test $(wc -L < %s/tree) -le 240",
				  w->dir, w->dir), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" report --tree --tree-depth 5000 %s/deep.msgpack 2> /dev/null; "
				  "test $? = 2", w->dir), 0);
}

/* Counts past what a profile holds (int64): a file whose samples add up past it is corrupt, profiles that would
 * together are not merged; no share is printed past 100% (two samples of 2^63 printed as
 * 1720778365084846336.00%). */
static void test_huge_counts(void **state)
{
	struct test_workdir *w = *state;
	struct profile *p = recursion(2, "app", 0, 1);
	tp_sample_unchecked(p, (struct profile_sample){ .stack = 1, .pid = 1, .tid = 1, .count = 1ULL << 63 });
	tp_sample_unchecked(p, (struct profile_sample){ .stack = 1, .pid = 1, .tid = 2, .count = 1ULL << 63 });
	write_profile(p, w->dir, "two.msgpack");
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" report %s/two.msgpack 2> %s/err; test $? = 1", w->dir, w->dir),
			 0);
	assert_int_equal(test_run("grep -q 'two.msgpack: corrupt: the samples add up past 9223372036854775807' %s/err",
				  w->dir), 0);
	assert_int_equal(test_run("mkdir %s/d", w->dir), 0);
	char sub[600];
	snprintf(sub, sizeof(sub), "%s/d", w->dir);
	write_profile(recursion(2, "app", 1ULL << 62, 1), sub, "a.msgpack");
	write_profile(recursion(2, "app", 1ULL << 62, 1), sub, "b.msgpack");
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" report %s 2> %s/err; test $? = 1", sub, w->dir), 0);
	assert_int_equal(test_run("grep -qx 'hostprof: cannot merge %s/b.msgpack: the profiles. samples add up past "
				  "9223372036854775807 (sample counts, or times in ns)' %s/err", sub, w->dir), 0);
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" report %s/a.msgpack > %s/out", sub, w->dir), 0);
	assert_int_equal(test_run("grep -q '^100.00%% 100.00%% 4611686018427387904 ' %s/out", w->dir), 0);
}

/* A process name with terminal escapes comes out of convert --to collapsed escaped (';' as ':', which would
 * start a frame): no control byte at all. It used to keep the raw ESC. */
static void test_collapsed_escaped(void **state)
{
	struct test_workdir *w = *state;
	write_profile(recursion(2, "main\033[1mBOLD\033]0;title\007", 4, 1), w->dir, "esc.msgpack");
	assert_int_equal(test_run(HANG " \"$HOSTPROF\" convert --to collapsed %s/esc.msgpack > %s/out", w->dir, w->dir),
			 0);
	assert_int_equal(test_run("test \"$(cat %s/out)\" = 'main\\x1b[1mBOLD\\x1b]0:title\\x07;rec;rec 4'", w->dir), 0);
	assert_int_equal(test_run("test $(tr -d '\\n' < %s/out | LC_ALL=C tr -d '[:print:]' | wc -c) = 0", w->dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fifo_not_read, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_deep_stacks, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_huge_counts, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_collapsed_escaped, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("readers (integration)", tests, NULL, NULL);
}
