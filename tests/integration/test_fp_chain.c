/*
 * Integration tests of the kernel's frame-pointer chain (unwind_deltas.h): real samples, taken with the chain,
 * unwound again with their stack copy cut short so that only the chain can finish the walk. Wherever the chain
 * is used, the walk must give exactly the frames the whole copy gives: the chain may end a walk early, never
 * make one up. Go code keeps frame pointers, and so does C built with -fno-omit-frame-pointer: there the chain
 * must finish many cut walks; C code built without them (the fixtures, distro programs) must never be continued
 * wrongly from whatever rbp held.
 *
 * Samples come from `hostprof record --save-samples` (replay files keep each sample's chain); --no-fp-chain
 * must leave them without one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/processes/execinfo.h"
#include "src/pipeline/replay.h"
#include "tests/lib/testlib.h"
#include "unwind/unwind_deltas.h"

struct chain_counts {
	unsigned samples, with_chain;
	unsigned reference;	/* samples the whole copy unwinds completely */
	unsigned cut_walks;	/* walks of those with the copy cut short */
	unsigned used;		/* ... that the chain continued */
	unsigned differ;	/* ... whose frames differ from the whole copy's */
};

static int same_frames(const struct unwind_frame *a, int na, const struct unwind_frame *b, int nb)
{
	if (na > nb)
		return 0;
	for (int i = 0; i < na; i++)
		if (a[i].ip != b[i].ip || a[i].flags != b[i].flags)
			return 0;
	return 1;
}

/* Unwind the sample again with only cut bytes of its copy and its chain; compare with the whole walk. */
static void cut_walk(struct unwind_deltas *u, const struct unwind_process *proc, const struct replay_sample *rs,
		     size_t cut, const struct unwind_frame *whole, int nwhole, struct chain_counts *c)
{
	struct unwind_frame fr[UNWIND_MAX_FRAMES];
	struct unwind_deltas_stats before, after;
	enum unwind_status st;
	struct unwind_sample us = { .stack = rs->stack, .stack_size = cut, .fp_chain = rs->fp_chain,
				    .fp_chain_len = rs->fp_chain_len };
	memcpy(us.regs, rs->regs, sizeof(us.regs));
	unwind_deltas_get_stats(u, &before);
	int n = unwind_deltas_unwind(u, proc, &us, fr, UNWIND_MAX_FRAMES, &st);
	unwind_deltas_get_stats(u, &after);
	c->cut_walks++;
	if (after.fp_chain_walks == before.fp_chain_walks)
		return;
	c->used++;
	/* A complete walk must be the whole one; a truncated one a prefix of it. */
	if (!same_frames(fr, n, whole, nwhole) || (st == UNWIND_COMPLETE && n != nwhole)) {
		c->differ++;
		fprintf(stderr, "tid %d: with %zu of %u bytes copied, the chain gave %d frames (%s), the whole copy %d\n",
			rs->tid, cut, rs->stack_size, n, st == UNWIND_COMPLETE ? "complete" : "truncated", nwhole);
	}
}

static struct chain_counts check_replay(const char *path)
{
	struct chain_counts c = { 0 };
	struct replay *r = NULL;
	struct replay_env *env = NULL;
	char err[256];
	if (replay_read(path, &r, err, sizeof(err)) != 0)
		fail_msg("%s: %s", path, err);
	struct execinfo_mgr *em;
	assert_int_equal(execinfo_mgr_new(&em), 0);
	assert_int_equal(replay_env_new(r, em, &env), 0);
	struct unwind_deltas *u;
	assert_int_equal(unwind_deltas_new(NULL, &u), 0);
	for (uint32_t i = 0; i < r->nsamples; i++) {
		const struct replay_sample *rs = &r->samples[i];
		struct unwind_process proc;
		struct unwind_frame whole[UNWIND_MAX_FRAMES];
		enum unwind_status st;
		c.samples++;
		if (!rs->fp_chain_len || replay_env_process(env, rs->pid, &proc) < 0)
			continue;
		c.with_chain++;
		struct unwind_sample us = { .stack = rs->stack, .stack_size = rs->stack_size };
		memcpy(us.regs, rs->regs, sizeof(us.regs));
		int n = unwind_deltas_unwind(u, &proc, &us, whole, UNWIND_MAX_FRAMES, &st);
		if (st != UNWIND_COMPLETE || n < 2)
			continue;
		c.reference++;
		/* Nothing copied (a sample in a page fault on the stack), then 8, 16, 32, ... bytes: walks that run out
		 * of copy at every depth. */
		cut_walk(u, &proc, rs, 0, whole, n, &c);
		for (size_t cut = 8; cut < rs->stack_size; cut *= 2)
			cut_walk(u, &proc, rs, cut, whole, n, &c);
	}
	unwind_deltas_free(u);
	replay_env_free(env);
	execinfo_mgr_free(em);
	replay_free(r);
	fprintf(stderr, "%s: %u samples, %u with a chain, %u unwound completely from the copy; of %u walks with the "
		"copy cut, %u continued with the chain, %u of them differing\n", path, c.samples, c.with_chain,
		c.reference, c.cut_walks, c.used, c.differ);
	return c;
}

/* Record command at 299 Hz with --save-samples into <dir>/<name>.replay (extra: more record flags). */
static void record_replay(const struct test_workdir *f, const char *name, const char *extra, const char *command,
			  char *replay, size_t len)
{
	snprintf(replay, len, "%s/%s.replay", f->dir, name);
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -F 299 %s --save-samples %s -o %s -- %s", extra, replay,
				  f->out, command), 0);
}

/* Go keeps frame pointers: the chain finishes nearly every cut walk, each exactly as the whole copy does. */
static void test_go_chain_matches_copy(void **state)
{
	struct test_workdir *f = *state;
	char cmd[600], replay[600];
	test_require_perf();
	test_require_go();
	test_go_build(f->dir, "hot", "hot", 0, "");
	snprintf(cmd, sizeof(cmd), "%s/hot 1", f->dir);
	record_replay(f, "go", "", cmd, replay, sizeof(replay));
	struct chain_counts c = check_replay(replay);
	assert_true(c.with_chain * 10 >= c.samples * 9);
	assert_true(c.reference >= 100);
	/* Cuts past the outermost frame need no chain; the chain cannot help a frameless leaf with nothing copied. */
	if (c.used * 4 < c.cut_walks)
		fail_msg("the chain continued only %u of %u cut walks of Go samples", c.used, c.cut_walks);
	assert_int_equal(c.differ, 0);

	/* --no-fp-chain: samples without one. */
	record_replay(f, "go-nochain", "--no-fp-chain", cmd, replay, sizeof(replay));
	c = check_replay(replay);
	assert_true(c.samples >= 100);
	assert_int_equal(c.with_chain, 0);
}

/* C built with frame pointers: rbp frames (CFA = rbp + 16) carry the chain as Go frames do. */
static void test_c_frame_pointers(void **state)
{
	struct test_workdir *f = *state;
	char cmd[600], replay[600];
	test_require_perf();
	assert_int_equal(test_run("cc -O2 -g -fno-omit-frame-pointer -o %s/split_fp tests/fixtures/split_paths.c -lm",
				  f->dir), 0);
	snprintf(cmd, sizeof(cmd), "%s/split_fp 1", f->dir);
	record_replay(f, "split_fp", "", cmd, replay, sizeof(replay));
	struct chain_counts c = check_replay(replay);
	assert_true(c.reference >= 100);
	if (c.used * 4 < c.cut_walks)
		fail_msg("the chain continued only %u of %u cut walks of samples in rbp frames", c.used, c.cut_walks);
	assert_int_equal(c.differ, 0);
}

/* Code without frame pointers: whatever rbp holds, the chain never continues a walk with wrong frames. */
static void test_no_frame_pointers_never_misleads(void **state)
{
	struct test_workdir *f = *state;
	char path[512], replay[600];
	test_require_perf();
	record_replay(f, "split_paths", "", test_fixture_path("split_paths", path, sizeof(path)), replay,
		      sizeof(replay));
	struct chain_counts c = check_replay(replay);
	assert_true(c.reference >= 100);
	assert_int_equal(c.differ, 0);
	if (test_run("command -v xz >/dev/null") == 0) {
		char cmd[700];
		assert_int_equal(test_run("head -c 2000000 /dev/urandom | base64 > %s/input.txt", f->dir), 0);
		snprintf(cmd, sizeof(cmd), "xz -6 -T1 -k -f %s/input.txt", f->dir);
		record_replay(f, "xz", "", cmd, replay, sizeof(replay));
		c = check_replay(replay);
		assert_true(c.reference >= 50);
		assert_int_equal(c.differ, 0);
	} else {
		test_skip_part("xz is not installed");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_go_chain_matches_copy, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_c_frame_pointers, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_no_frame_pointers_never_misleads, test_workdir_setup,
						test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("frame-pointer chain (integration)", tests, NULL, NULL);
}
