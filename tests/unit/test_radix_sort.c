/*
 * Unit tests for src/base/radix_sort.c against qsort(3) by (key, index): random keys over the whole 64 bits,
 * keys that share their high bytes (a file's addresses) with many repeats, keys all equal, and the smallest
 * sizes. Values are the pairs' first indices, so an unstable sort, or one that loses or repeats a pair, fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/radix_sort.h"

static uint64_t next_random(uint64_t *state)
{
	/* splitmix64: a fixed sequence, so a failure repeats */
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int by_key_then_value(const void *a, const void *b)
{
	const struct radix_pair *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->value < y->value ? -1 : x->value > y->value;
}

/* n pairs with keys made by key_of, sorted both ways: the same pairs in the same order. */
static void check(size_t n, uint64_t (*key_of)(uint64_t *state))
{
	struct radix_pair *pairs = malloc((n + 1) * sizeof(*pairs)), *scratch = malloc((n + 1) * sizeof(*pairs));
	struct radix_pair *expected = malloc((n + 1) * sizeof(*pairs));
	uint64_t state = n;
	assert_non_null(pairs);
	assert_non_null(scratch);
	assert_non_null(expected);
	for (size_t i = 0; i < n; i++)
		pairs[i] = (struct radix_pair){ key_of(&state), i };
	memcpy(expected, pairs, n * sizeof(*pairs));
	qsort(expected, n, sizeof(*expected), by_key_then_value);
	radix_sort_pairs(pairs, scratch, n);
	if (n)	/* none: it must only not touch them */
		assert_memory_equal(pairs, expected, n * sizeof(*pairs));
	free(pairs);
	free(scratch);
	free(expected);
}

static uint64_t any_key(uint64_t *state)
{
	return next_random(state);
}

static uint64_t address_key(uint64_t *state)
{
	return 0x7f0000400000ull + (next_random(state) % 5000) * 16;	/* repeats: aliases at one address */
}

static uint64_t same_key(uint64_t *state)
{
	(void)state;
	return 42;
}

static uint64_t low_byte_key(uint64_t *state)
{
	return next_random(state) & 0xff00;	/* one byte differs: one pass */
}

static void test_random_keys(void **state)
{
	(void)state;
	check(100000, any_key);
	check(3, any_key);
}

static void test_addresses_with_repeats(void **state)
{
	(void)state;
	check(60000, address_key);
	check(60000, low_byte_key);
}

static void test_equal_keys_and_small_sizes(void **state)
{
	(void)state;
	check(1000, same_key);
	check(0, any_key);
	check(1, any_key);
	check(2, address_key);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_keys),
		cmocka_unit_test(test_addresses_with_repeats),
		cmocka_unit_test(test_equal_keys_and_small_sizes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
