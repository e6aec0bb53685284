/*
 * Differential test of the unwinders: real samples captured to replay files (fixtures, and distro programs
 * doing real work: xz, python3, sqlite3), then unwound again by the stack-delta unwinder and by libunwind, the
 * reference, through `hostprof replay --compare`. They must agree frame for frame on >= 99.5 % of samples;
 * every disagreement is listed in the test output with the frame where the walks part.
 * Also: the committed replay files under tests/data/ (made here from the fixtures) give the same agreement,
 * and fixtures with signal frames, vdso calls and recursion deeper than the stack copy unwind as they must.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

#define MIN_AGREEMENT 99.5

struct diff_state {
	char *dir;
};

static int setup(void **state)
{
	struct diff_state *s = calloc(1, sizeof(*s));
	s->dir = test_mkdtemp();
	*state = s;
	return s->dir ? 0 : -1;
}

static int teardown(void **state)
{
	struct diff_state *s = *state;
	test_rmdir_rf(s->dir);
	free(s->dir);
	free(s);
	return 0;
}

/* Run `hostprof replay --compare` on path; returns the agreement in percent and the samples compared. */
static double compare_replay(const char *dir, const char *path, unsigned *compared)
{
	char out[512], line[1024];
	snprintf(out, sizeof(out), "%s/compare.txt", dir);
	assert_int_equal(test_run("\"$HOSTPROF\" replay %s --compare --show 50 > %s", path, out), 0);
	FILE *f = fopen(out, "r");
	assert_non_null(f);
	double pct = -1;
	unsigned total = 0, skipped = 0, agree = 0, differ = 0;
	while (fgets(line, sizeof(line), f)) {
		fputs(line, stderr); /* disagreements and the summary belong in the test log */
		if (sscanf(line, "replay: %u samples, %u skipped (files missing or different here); deltas vs "
				 "libunwind: %u agree (%lf%%), %u differ",
			   &total, &skipped, &agree, &pct, &differ) == 5)
			*compared = agree + differ;
	}
	fclose(f);
	assert_true(pct >= 0);
	return pct;
}

static void record_and_compare(struct diff_state *s, const char *name, const char *command, unsigned min_samples)
{
	char replay[512];
	unsigned compared = 0;
	snprintf(replay, sizeof(replay), "%s/%s.replay", s->dir, name);
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -F 499 --save-samples %s -o %s/%s.msgpack -- %s", replay,
				  s->dir, name, command), 0);
	double pct = compare_replay(s->dir, replay, &compared);
	fprintf(stderr, "%s: deltas and libunwind agree on %.2f%% of %u samples\n", name, pct, compared);
	assert_true(compared >= min_samples);
	assert_true(pct >= MIN_AGREEMENT);
}

static void test_fixtures_agree(void **state)
{
	struct diff_state *s = *state;
	char cmd[512], path[256];
	static const char *const fixtures[][2] = {
		{ "split_paths", "1" }, { "threads", "1 3" }, { "shared_caller", "1" },
		{ "signal_handler", "1" }, { "vdso_clock", "1" }, { "deep_recursion", "1" },
	};
	test_require_perf();
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s %s", test_fixture_path(fixtures[i][0], path, sizeof(path)),
			 fixtures[i][1]);
		record_and_compare(s, fixtures[i][0], cmd, 200);
	}
}

static void test_distro_programs_agree(void **state)
{
	struct diff_state *s = *state;
	char cmd[1024];
	test_require_perf();
	assert_int_equal(test_run("head -c 3000000 /dev/urandom | base64 > %s/input.txt", s->dir), 0);
	if (test_run("command -v xz >/dev/null") == 0) {
		snprintf(cmd, sizeof(cmd), "xz -6 -T1 -k -f %s/input.txt", s->dir);
		record_and_compare(s, "xz", cmd, 200);
	} else {
		test_skip_part("xz is not installed");
	}
	if (access("/usr/bin/python3", X_OK) == 0) {
		record_and_compare(s, "python3",
				   "/usr/bin/python3 -c 'import json,re; d=[{\"k\":i,\"v\":str(i)*5} for i in "
				   "range(400000)]; s=json.dumps(d); print(len(re.findall(\"[0-9]+\", s)), "
				   "sum(len(json.loads(s)) for _ in range(3)))'",
				   200);
	} else {
		test_skip_part("/usr/bin/python3 is not installed");
	}
	if (test_run("command -v sqlite3 >/dev/null") == 0) {
		snprintf(cmd, sizeof(cmd),
			 "sqlite3 %s/db.sqlite 'CREATE TABLE t(a INTEGER, b TEXT); "
			 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 600000) "
			 "INSERT INTO t SELECT x, hex(randomblob(16)) FROM c; CREATE INDEX ib ON t(b); "
			 "SELECT count(*), sum(length(b)) FROM t a JOIN t b2 USING (b) WHERE a.a %% 7 = 3;'",
			 s->dir);
		record_and_compare(s, "sqlite3", cmd, 200);
	} else {
		test_skip_part("sqlite3 is not installed");
	}
}

static void test_committed_replays_agree(void **state)
{
	struct diff_state *s = *state;
	static const char *const files[] = { "tests/data/split_paths.replay", "tests/data/signal_handler.replay",
					     "tests/data/vdso_clock.replay" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		unsigned compared = 0;
		double pct = compare_replay(s->dir, files[i], &compared);
		fprintf(stderr, "%s: %.2f%% of %u samples agree\n", files[i], pct, compared);
		/* Their own program is embedded; a libc other than the one they were made with makes samples
		 * unusable, which the replay reports rather than comparing them. */
		if (compared == 0) {
			test_skip_part("%s needs the Debian 12 libc it was recorded with", files[i]);
			continue;
		}
		assert_true(pct >= MIN_AGREEMENT);
	}
}

static uint64_t samples_through(const struct profile *p, const char *const *chain, size_t n)
{
	return test_samples_with_chain(p, chain, n);
}

static void test_special_frames(void **state)
{
	struct diff_state *s = *state;
	char path[256], out[512];
	test_require_perf();
	snprintf(out, sizeof(out), "%s/p.msgpack", s->dir);

	/* Signal frames: the handler's stack continues through the trampoline into the interrupted loop. */
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- %s 1", out,
				  test_fixture_path("signal_handler", path, sizeof(path))), 0);
	struct profile *p = test_read_profile(out);
	const char *through_signal[] = { "main", "interrupted_loop" };
	const char *handler[] = { "on_signal", "handler_work" };
	const char *roots[] = { "main" };
	uint64_t in_handler = test_samples_with_chain(p, handler, 2);
	uint64_t both = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const char *names[512];
		size_t n = test_stack_functions(p, p->samples.items[i].stack, names, 512);
		int h = 0, m = 0;
		for (size_t j = 0; j < n; j++) {
			h |= strcmp(names[j], "on_signal") == 0;
			m |= strcmp(names[j], "interrupted_loop") == 0;
		}
		if (h && m)
			both += p->samples.items[i].count;
	}
	fprintf(stderr, "signal: %llu samples in the handler, %llu of them unwound through the signal frame\n",
		(unsigned long long)in_handler, (unsigned long long)both);
	assert_true(in_handler > 20);
	assert_true(both >= in_handler * 98 / 100);
	assert_true(samples_through(p, through_signal, 2) > 0);
	assert_true(test_samples_complete_to(p, roots, 1) * 100 >= test_total_samples(p) * 98);
	profile_free(p);

	/* The vdso: named, and unwound through into main. */
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- %s 1", out,
				  test_fixture_path("vdso_clock", path, sizeof(path))), 0);
	p = test_read_profile(out);
	/* glibc's clock_gettime is also __clock_gettime, at the same address: either name may be the one shown. */
	const char *vdso[] = { "main", "read_clock", "clock_gettime", "__vdso_clock_gettime" };
	const char *vdso_alias[] = { "main", "read_clock", "__clock_gettime", "__vdso_clock_gettime" };
	uint64_t in_vdso = test_samples_with_chain(p, vdso, 4) + test_samples_with_chain(p, vdso_alias, 4);
	fprintf(stderr, "vdso: %llu of %llu samples in main->read_clock->clock_gettime->__vdso_clock_gettime\n",
		(unsigned long long)in_vdso, (unsigned long long)test_total_samples(p));
	assert_true(in_vdso * 100 >= test_total_samples(p) * 30);
	assert_true(test_samples_complete_to(p, roots, 1) * 100 >= test_total_samples(p) * 98);
	profile_free(p);

	/* More frames than --max-frames keeps: kept, ending in [truncated], with the leaf right. */
	assert_int_equal(test_run("\"$HOSTPROF\" record -q --max-frames 256 -o %s -- %s 1", out,
				  test_fixture_path("deep_recursion", path, sizeof(path))), 0);
	p = test_read_profile(out);
	const char *trunc[] = { "[truncated]", "recurse" };
	const char *leaf[] = { "recurse", "spin_at_bottom" };
	uint64_t total = test_total_samples(p);
	fprintf(stderr, "deep recursion, --max-frames 256: %llu of %llu samples end in [truncated]\n",
		(unsigned long long)test_samples_with_chain(p, trunc, 2), (unsigned long long)total);
	assert_true(test_samples_with_chain(p, trunc, 2) * 100 >= total * 95);
	assert_true(test_samples_with_chain(p, leaf, 2) * 100 >= total * 90);
	assert_int_equal(p->info.samples, total);
	profile_free(p);

	/*
	 * Deeper than the largest stack copy, but within the frames kept: the rest of the stack is read from the
	 * process (--max-stack, default 1 MiB), so samples reach main; with --max-stack 0 they end in [truncated].
	 */
	const char *const deep_roots[] = { "main" };
	for (int extend = 1; extend >= 0; extend--) {
		assert_int_equal(test_run("\"$HOSTPROF\" record -q --stack-size 65528 %s -o %s -- %s 1 240",
					  extend ? "" : "--max-stack 0", out,
					  test_fixture_path("deep_recursion", path, sizeof(path))), 0);
		p = test_read_profile(out);
		total = test_total_samples(p);
		uint64_t complete = test_samples_complete_to(p, deep_roots, 1);
		fprintf(stderr, "deep recursion, 240 levels, %s: %llu of %llu samples complete to main\n",
			extend ? "stack read past the copy" : "--max-stack 0", (unsigned long long)complete,
			(unsigned long long)total);
		assert_true(total >= 200);
		if (extend)
			assert_true(complete * 100 >= total * 90);
		else
			assert_true(complete * 100 <= total * 5);
		assert_true(test_samples_with_chain(p, leaf, 2) * 100 >= total * 90);
		profile_free(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fixtures_agree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_distro_programs_agree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_committed_replays_agree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_special_frames, setup, teardown),
	};
	return cmocka_run_group_tests_name("unwinders (differential)", tests, NULL, NULL);
}
