/*
 * Unit tests for unwind/prologue.c, the analysis of code without CFI, on hand-assembled x86_64 bytes: the rule
 * at each instruction through a frame-pointer prologue and leave, a frameless function with a second path after
 * its ret, a new function after a jump (endbr64), undecodable bytes; direct call targets. Every rule is a guess.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "unwind/prologue.h"

#define BASE 0x401000u

struct rows {
	uint64_t va[32];
	char rule[32][64];
	size_t n;
};

static void collect(void *ctx, uint64_t va, const struct stack_delta_rule *r)
{
	struct rows *rows = ctx;
	assert_true(rows->n < 32);
	assert_true(r->aux & STACK_DELTA_GUESSED);	/* read from code, not CFI */
	rows->va[rows->n] = va;
	stack_delta_rule_format(r, rows->rule[rows->n], sizeof(rows->rule[0]));
	rows->n++;
}

struct want {
	unsigned off;
	const char *rule;
};

static void check_sweep(const uint8_t *code, size_t len, const struct want *want, size_t n)
{
	struct prologue *p;
	struct rows rows = { .n = 0 };
	assert_int_equal(prologue_new(&p), 0);
	prologue_sweep(p, code, BASE, BASE + len, collect, &rows);
	prologue_free(p);
	for (size_t i = 0; i < rows.n && i < n; i++) {
		if (rows.va[i] != BASE + want[i].off || strcmp(rows.rule[i], want[i].rule) != 0)
			fail_msg("row %zu: +%#llx %s, want +%#x %s", i, (unsigned long long)(rows.va[i] - BASE), rows.rule[i],
				 want[i].off, want[i].rule);
	}
	assert_int_equal(rows.n, n);
}

static void test_frame_pointer_function(void **state)
{
	(void)state;
	static const uint8_t code[] = {
		0x55,				/* +0  push %rbp */
		0x48, 0x89, 0xe5,		/* +1  mov %rsp,%rbp */
		0x48, 0x83, 0xec, 0x20,		/* +4  sub $0x20,%rsp */
		0xe8, 0x00, 0x00, 0x00, 0x00,	/* +8  call */
		0xc9,				/* +13 leave */
		0xc3,				/* +14 ret */
	};
	static const struct want want[] = {
		{ 0, "cfa=sp+8" }, { 1, "cfa=sp+16 fp=[cfa-16]" }, { 4, "cfa=fp+16 fp=[cfa-16]" }, { 14, "cfa=sp+8" },
	};
	check_sweep(code, sizeof(code), want, sizeof(want) / sizeof(want[0]));
}

/* After its ret, the code that follows is another path of the function: it runs with the body's frame. */
static void test_frameless_second_path(void **state)
{
	(void)state;
	static const uint8_t code[] = {
		0x53,				/* +0  push %rbx */
		0x48, 0x83, 0xec, 0x10,		/* +1  sub $0x10,%rsp */
		0x48, 0x83, 0xc4, 0x10,		/* +5  add $0x10,%rsp */
		0x5b,				/* +9  pop %rbx */
		0xc3,				/* +10 ret */
		0x48, 0x89, 0xc7,		/* +11 mov %rax,%rdi */
	};
	static const struct want want[] = {
		{ 0, "cfa=sp+8" }, { 1, "cfa=sp+16" }, { 5, "cfa=sp+32" }, { 9, "cfa=sp+16" }, { 10, "cfa=sp+8" },
		{ 11, "cfa=sp+32" },
	};
	check_sweep(code, sizeof(code), want, sizeof(want) / sizeof(want[0]));
}

/* Code after a jump and padding that opens like a function (endbr64) is a new one, entered with a call. */
static void test_new_function_after_jump(void **state)
{
	(void)state;
	static const uint8_t code[] = {
		0x53,				/* +0  push %rbx */
		0x5b,				/* +1  pop %rbx */
		0xc3,				/* +2  ret */
		0x90,				/* +3  nop */
		0xf3, 0x0f, 0x1e, 0xfa,		/* +4  endbr64 */
		0x53,				/* +8  push %rbx */
	};
	static const struct want want[] = {
		{ 0, "cfa=sp+8" }, { 1, "cfa=sp+16" }, { 2, "cfa=sp+8" }, { 3, "cfa=sp+16" }, { 4, "cfa=sp+8" },
	};
	check_sweep(code, sizeof(code), want, sizeof(want) / sizeof(want[0]));
}

/* Bytes that are no instruction (data in code): the frame-pointer convention from there, and the sweep stops. */
static void test_undecodable(void **state)
{
	(void)state;
	static const uint8_t code[] = { 0x53, 0x06, 0x5b, 0xc3 };	/* push %rbx; (push %es: not in 64-bit) */
	static const struct want want[] = { { 0, "cfa=sp+8" }, { 1, "cfa=fp+16 fp=[cfa-16]" } };
	check_sweep(code, sizeof(code), want, sizeof(want) / sizeof(want[0]));
	/* An instruction cut by the end of the code: the same. */
	static const uint8_t cut[] = { 0x53, 0x48, 0x83 };
	check_sweep(cut, sizeof(cut), want, sizeof(want) / sizeof(want[0]));
}

static void test_call_targets(void **state)
{
	(void)state;
	static const uint8_t code[] = {
		0xe8, 0x0b, 0x00, 0x00, 0x00,	/* +0  call +0x10 */
		0x06,				/* +5  undecodable: stepped over */
		0xe8, 0x00, 0x00, 0x00, 0x00,	/* +6  call +0xb */
		0xe8, 0xe0, 0xff, 0xff, 0xff,	/* +11 call -0x10: below the range */
		0xc3,				/* +16 ret */
		0xe8, 0xea, 0xff, 0xff, 0xff,	/* +17 call +0x0: the range's start, not inside it */
	};
	struct prologue *p;
	const uint64_t *t;
	size_t n;
	assert_int_equal(prologue_new(&p), 0);
	assert_int_equal(prologue_call_targets(p, code, BASE, BASE + sizeof(code), &t, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(t[0], BASE + 0xb);
	assert_int_equal(t[1], BASE + 0x10);
	assert_int_equal(prologue_call_targets(p, code, BASE, BASE + 5, &t, &n), 0);
	assert_int_equal(n, 0);	/* +0x10 is past the end */
	prologue_free(p);
	prologue_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_pointer_function),
		cmocka_unit_test(test_frameless_second_path),
		cmocka_unit_test(test_new_function_after_jump),
		cmocka_unit_test(test_undecodable),
		cmocka_unit_test(test_call_targets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
