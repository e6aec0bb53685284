/*
 * Unit tests for src/profile/name_pairs.c: each distinct pair once, numbered in first-seen order, pairs that
 * differ only in where the strings split apart, taking a pair's strings out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/name_pairs.h"

static void test_interned_once_in_order(void **state)
{
	(void)state;
	struct name_pairs t = { 0 };
	char name[32], lib[32];
	uint32_t i;
	for (int round = 0; round < 2; round++) {
		for (uint32_t k = 0; k < 3000; k++) {
			snprintf(name, sizeof(name), "f%u", k);
			snprintf(lib, sizeof(lib), "lib%u.so", k % 7);
			assert_int_equal(name_pairs_intern(&t, name, lib, &i), 0);
			assert_int_equal(i, k);	/* the second round finds the first round's numbers */
		}
	}
	assert_int_equal(t.count, 3000);
	assert_string_equal(t.items[42].first, "f42");
	assert_string_equal(t.items[42].second, "lib0.so");
	/* ("ab", "c") and ("a", "bc") are two pairs. */
	uint32_t a, b;
	assert_int_equal(name_pairs_intern(&t, "ab", "c", &a), 0);
	assert_int_equal(name_pairs_intern(&t, "a", "bc", &b), 0);
	assert_int_not_equal(a, b);
	name_pairs_free(&t);
	assert_int_equal(t.count, 0);
}

static void test_take(void **state)
{
	(void)state;
	struct name_pairs t = { 0 };
	uint32_t i, j;
	char *first, *second;
	assert_int_equal(name_pairs_intern(&t, "main", "prog", &i), 0);
	name_pairs_take(&t, i, &first, &second);
	assert_string_equal(first, "main");
	assert_string_equal(second, "prog");
	assert_null(t.items[i].first);
	/* A taken pair matches nothing: the same names get a new number. */
	assert_int_equal(name_pairs_intern(&t, "main", "prog", &j), 0);
	assert_int_not_equal(i, j);
	free(first);
	free(second);
	name_pairs_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interned_once_in_order),
		cmocka_unit_test(test_take),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
