/*
 * test_pyframes.c — CPython 3.11 location tables decoded (pycode_line()): a table CPython 3.11.2 wrote, every
 * instruction's line as its co_lines() gives it, and hostile tables (cut short, endless varints) bounded.
 * Reading a live interpreter is tests/integration/test_python.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/processes/pyframes.h"

/* def f(n):\n t = 0\n for i in range(n):\n  if i % 3:\n   t += i * i\n  else:\n   t -= 1\n\n return t */
static const uint8_t table[] = {
	0x80, 0x00, 0xd8, 0x08, 0x09, 0x80, 0x41, 0xdd, 0x0d, 0x12, 0x90, 0x31, 0x89, 0x58, 0x8c, 0x58, 0xf0, 0x00,
	0x04, 0x05, 0x13, 0xf0, 0x00, 0x04, 0x05, 0x13, 0x88, 0x01, 0xd8, 0x0b, 0x0c, 0x88, 0x71, 0x89, 0x35, 0xf0,
	0x00, 0x03, 0x09, 0x13, 0xd8, 0x0c, 0x0d, 0x90, 0x11, 0x90, 0x51, 0x91, 0x15, 0x89, 0x4a, 0x88, 0x41, 0x88,
	0x41, 0xe0, 0x0c, 0x0d, 0x90, 0x11, 0x89, 0x46, 0x88, 0x41, 0x88, 0x41, 0xe0, 0x0b, 0x0c, 0x80, 0x48,
};
static struct pycode code(const uint8_t *lt, size_t len)
{
	return (struct pycode){ .firstlineno = 1, .linetable = (uint8_t *)lt, .linetable_len = (uint32_t)len };
}

static void test_lines_as_cpython_gives_them(void **state)
{
	(void)state;
	struct pycode c = code(table, sizeof(table));
	/* lines[] as co_lines() spans them, one entry per code unit: 42 units, the first in line 1 (RESUME). */
	static const int32_t expect[] = { 1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4,
					  5, 5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 9, 9 };
	for (uint32_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++)
		assert_int_equal(pycode_line(&c, i), expect[i]);
	assert_int_equal(pycode_line(&c, 42), 0);	/* past the code: unknown */
	assert_int_equal(pycode_line(&c, UINT32_MAX), 0);
}

static void test_hostile_tables(void **state)
{
	(void)state;
	/* Cut anywhere: never read past the table, an instruction past the cut unknown. */
	for (size_t cut = 0; cut < sizeof(table); cut++) {
		struct pycode c = code(table, cut);
		for (uint32_t i = 0; i < 44; i++)
			assert_true(pycode_line(&c, i) >= 0);
	}
	/* A long form whose varint never ends, and a byte that starts no entry. */
	static const uint8_t endless[] = { 0xf0, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f };
	struct pycode c = code(endless, sizeof(endless));
	assert_int_equal(pycode_line(&c, 0), 0);
	static const uint8_t not_entry[] = { 0x01, 0x02 };
	c = code(not_entry, sizeof(not_entry));
	assert_int_equal(pycode_line(&c, 0), 0);
	/* A line delta taking the line below 0 or past INT32_MAX: unknown. */
	static const uint8_t down[] = { 0xe8, 0x05 };	/* no-column form, delta -2 from line 1 */
	c = code(down, sizeof(down));
	assert_int_equal(pycode_line(&c, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_as_cpython_gives_them),
		cmocka_unit_test(test_hostile_tables),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
