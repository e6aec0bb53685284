/*
 * test_python_stack.c — mixed stacks (python_stack_merge()): each eval frame replaced in place by its Python frames
 * up to the next entry frame, native frames kept; a disagreement (too few or too many Python frames, a chain
 * without its entry frame) merges nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "src/pipeline/python_stack.h"

/* The walk's frames: only pointer identity of the file matters here. */
static struct execinfo *const PY = (struct execinfo *)0x1000, *const EXT = (struct execinfo *)0x2000;
static const struct pyproc pp = { .python = true, .eval_exe = PY, .eval_start = 0x500, .eval_end = 0x900 };

static struct trace_frame native(struct execinfo *e, uint64_t va)
{
	return (struct trace_frame){ .exe = e, .address = va, .kind = PROFILE_FRAME_NATIVE };
}

static struct pycode codes[4];

static struct pyframe pyf(int i, int line, bool entry)
{
	return (struct pyframe){ .code = &codes[i], .line = line, .entry = entry };
}

/* kernel, C extension, eval (leaf loop: 2 frames), C call, eval (outer loop: 2 frames), main */
static void test_merged_in_place(void **state)
{
	(void)state;
	struct trace_frame in[] = {
		{ .address = 0xffff1, .kind = PROFILE_FRAME_KERNEL }, native(EXT, 0x10), native(PY, 0x600),
		native(PY, 0x100), native(PY, 0x8ff), native(PY, 0x50),
	};
	struct pyframe py[] = { pyf(0, 13, false), pyf(1, 20, true), pyf(2, 30, false), pyf(3, 1, true) };
	struct trace_frame out[16];
	unsigned evals, n = python_stack_merge(&pp, in, 6, py, 4, out, 16, &evals);
	assert_int_equal(evals, 2);
	assert_int_equal(n, 8);
	assert_int_equal(out[0].kind, PROFILE_FRAME_KERNEL);
	assert_ptr_equal(out[1].exe, EXT);
	assert_int_equal(out[2].kind, PROFILE_FRAME_PYTHON);
	assert_ptr_equal(out[2].py, &codes[0]);
	assert_int_equal(out[2].address, 13);
	assert_ptr_equal(out[3].py, &codes[1]);
	assert_int_equal(out[4].address, 0x100);	/* the C code between the two loops stays */
	assert_ptr_equal(out[5].py, &codes[2]);
	assert_ptr_equal(out[6].py, &codes[3]);
	assert_int_equal(out[7].address, 0x50);
	assert_null(out[7].py);
	/* Too small an output: nothing. */
	assert_int_equal(python_stack_merge(&pp, in, 6, py, 4, out, 7, &evals), 0);
}

static void test_disagreement_merges_nothing(void **state)
{
	(void)state;
	struct trace_frame in[] = { native(PY, 0x600), native(PY, 0x100), native(PY, 0x700) };
	struct trace_frame out[16];
	unsigned evals;
	/* One entry frame for two eval frames. */
	struct pyframe one[] = { pyf(0, 1, false), pyf(1, 2, true) };
	assert_int_equal(python_stack_merge(&pp, in, 3, one, 2, out, 16, &evals), 0);
	/* Three entry frames for two eval frames: one left over. */
	struct pyframe three[] = { pyf(0, 1, true), pyf(1, 2, true), pyf(2, 3, true) };
	assert_int_equal(python_stack_merge(&pp, in, 3, three, 3, out, 16, &evals), 0);
	/* A chain without its entry frame. */
	struct pyframe open[] = { pyf(0, 1, true), pyf(1, 2, false) };
	assert_int_equal(python_stack_merge(&pp, in, 3, open, 2, out, 16, &evals), 0);
	/* Python frames but no eval frame (a native stack cut short). */
	struct trace_frame cut[] = { native(EXT, 0x10) };
	assert_int_equal(python_stack_merge(&pp, cut, 1, one, 2, out, 16, &evals), 0);
	/* Matching: two entry frames. */
	struct pyframe two[] = { pyf(0, 1, true), pyf(1, 2, true) };
	assert_int_equal(python_stack_merge(&pp, in, 3, two, 2, out, 16, &evals), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merged_in_place),
		cmocka_unit_test(test_disagreement_merges_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
