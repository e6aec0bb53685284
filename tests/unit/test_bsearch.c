/*
 * Unit tests for src/base/bsearch.h: the one binary search every sorted lookup uses (mappings, delta-table rows,
 * symbols, kallsyms, JIT code, Go's function table). It returns the partition point of a monotone predicate,
 * which gives the lower and upper bounds and the last element at or below a key, agreeing with a linear scan on
 * every sorted array up to 64 elements with duplicates; it asks only for indices in the set, and no more often
 * than log2, searches part of an array, sets that are computed rather than stored and sets near SIZE_MAX
 * elements, and stays in range on an unsorted set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdlib.h>

#include "src/base/bsearch.h"

static bool at_least(const void *set, size_t i, const void *key)
{
	return ((const int *)set)[i] >= *(const int *)key;
}

static bool above(const void *set, size_t i, const void *key)
{
	return ((const int *)set)[i] > *(const int *)key;
}

static size_t scan_first(const int *a, size_t n, bsearch_holds_fn holds, int key)
{
	size_t i = 0;
	while (i < n && !holds(a, i, &key))
		i++;
	return i;
}

/* A sorted array of n values with duplicates and gaps: 0 0 1 3 3 4 6 6 7 ... */
static void fill_sorted(int *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = (int)(i / 3 * 3 + (i % 3 == 2));
}

/* Lower and upper bound agree with a linear scan for every length and every key, present or not, below or above. */
static void test_bounds_match_scan(void **state)
{
	(void)state;
	int a[64];
	for (size_t n = 0; n <= 64; n++) {
		fill_sorted(a, n);
		for (int key = -2; key <= 66; key++) {
			assert_int_equal(bsearch_first(a, n, at_least, &key), scan_first(a, n, at_least, key));
			assert_int_equal(bsearch_first(a, n, above, &key), scan_first(a, n, above, key));
		}
	}
}

/* The last element at or below a key is the upper bound minus 1; an equal element is found at the lower bound. */
static void test_last_at_or_below_and_equal(void **state)
{
	(void)state;
	const int a[] = { 10, 20, 20, 30 };
	const size_t n = sizeof(a) / sizeof(a[0]);
	int key = 5;
	assert_int_equal(bsearch_first(a, n, above, &key), 0);	/* nothing at or below 5 */
	key = 20;
	assert_int_equal(bsearch_first(a, n, above, &key) - 1, 2);	/* the last 20 */
	assert_int_equal(bsearch_first(a, n, at_least, &key), 1);	/* the first 20 */
	key = 25;
	assert_int_equal(bsearch_first(a, n, above, &key) - 1, 2);
	size_t i = bsearch_first(a, n, at_least, &key);
	assert_false(i < n && a[i] == key);
	key = 99;
	assert_int_equal(bsearch_first(a, n, above, &key), n);
}

struct counted {
	const int *a;
	size_t n;
	unsigned calls;
};

static bool counted_above(const void *set, size_t i, const void *key)
{
	struct counted *c = (struct counted *)set;
	assert_true(i < c->n);
	c->calls++;
	return c->a[i] > *(const int *)key;
}

/* The predicate sees only indices below n, never for an empty set, and at most floor(log2(n)) + 1 times. */
static void test_calls_bounded(void **state)
{
	(void)state;
	static int a[1000];
	fill_sorted(a, 1000);
	for (size_t n = 0; n <= 1000; n += 37) {
		unsigned bound = 0;
		for (size_t m = n; m; m >>= 1)
			bound++;
		for (int key = -1; key <= 700; key += 13) {
			struct counted c = { a, n, 0 };
			bsearch_first(&c, n, counted_above, &key);
			assert_true(c.calls <= bound);
		}
	}
}

/* Part of an array: indices are relative to the part, and elements outside it are never looked at. */
static void test_sub_range(void **state)
{
	(void)state;
	const int a[] = { 99, 1, 3, 5, 7, -99 };
	int key = 4;
	assert_int_equal(bsearch_first(a + 1, 4, above, &key), 2);
	key = 100;
	assert_int_equal(bsearch_first(a + 1, 4, above, &key), 4);
}

/* Element i of a computed set: i squared. No array, the set argument unused. */
static bool square_at_least(const void *set, size_t i, const void *key)
{
	(void)set;
	return (uint64_t)i * i >= *(const uint64_t *)key;
}

static bool index_at_least(const void *set, size_t i, const void *key)
{
	(void)set;
	return i >= *(const size_t *)key;
}

/* A set that is computed, not stored; and one of SIZE_MAX elements, where lo + hi would overflow. */
static void test_computed_and_huge_sets(void **state)
{
	(void)state;
	uint64_t sq = 1000000;
	assert_int_equal(bsearch_first(NULL, 1u << 20, square_at_least, &sq), 1000);
	sq = 1000001;
	assert_int_equal(bsearch_first(NULL, 1u << 20, square_at_least, &sq), 1001);
	size_t keys[] = { 0, 1, SIZE_MAX / 2, SIZE_MAX / 2 + 1, SIZE_MAX - 1, SIZE_MAX };
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		assert_int_equal(bsearch_first(NULL, SIZE_MAX, index_at_least, &keys[k]), keys[k]);
}

/* An unsorted set (a hostile file's table) gives some index in [0, n], never one outside. */
static void test_unsorted_stays_in_range(void **state)
{
	(void)state;
	int a[97];
	srand(7);
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < 97; i++)
			a[i] = rand() % 50;
		int key = rand() % 50;
		struct counted c = { a, 97, 0 };
		assert_true(bsearch_first(&c, 97, counted_above, &key) <= 97);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounds_match_scan),
		cmocka_unit_test(test_last_at_or_below_and_equal),
		cmocka_unit_test(test_calls_bounded),
		cmocka_unit_test(test_sub_range),
		cmocka_unit_test(test_computed_and_huge_sets),
		cmocka_unit_test(test_unsorted_stays_in_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
