/*
 * Unit tests for src/base/hindex.c: the hash index every content-keyed table uses (profile dictionaries, the
 * trace handler, the process and executable-info managers, JIT names, symbol names, APM counts). Entries are
 * found by content through the caller's equality, survive growth, removal leaves the others findable (also
 * during iteration), integer keys need no equality, and hashes that collide still find their own entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hindex.h"

#define NWORDS 5000

struct words {
	char text[NWORDS][16];
	struct hindex index;
};

static bool word_is(const void *ctx, uint64_t value, const void *key)
{
	const struct words *w = ctx;
	return strcmp(w->text[value], key) == 0;
}

static bool find_word(const struct words *w, const char *s, uint32_t *at)
{
	return hindex_find_index(&w->index, hash_str(HASH_SEED, s), word_is, w, s, at);
}

static struct words *words_new(unsigned n)
{
	struct words *w = calloc(1, sizeof(*w));
	assert_non_null(w);
	for (unsigned i = 0; i < n; i++) {
		snprintf(w->text[i], sizeof(w->text[i]), "word-%u", i * 7919);
		assert_false(find_word(w, w->text[i], &(uint32_t){ 0 }));
		assert_int_equal(hindex_insert(&w->index, hash_str(HASH_SEED, w->text[i]), i), 0);
	}
	return w;
}

static void words_free(struct words *w)
{
	hindex_free(&w->index);
	free(w);
}

/* Thousands of strings: each found at its own index after many growths, absent ones not found. */
static void test_find_after_growth(void **state)
{
	(void)state;
	struct words *w = words_new(NWORDS);
	assert_int_equal(hindex_count(&w->index), NWORDS);
	for (uint32_t i = 0, at; i < NWORDS; i++) {
		assert_true(find_word(w, w->text[i], &at));
		assert_int_equal(at, i);
	}
	assert_false(find_word(w, "word-1", &(uint32_t){ 0 }));
	assert_false(find_word(w, "", &(uint32_t){ 0 }));
	/* At most half full, whatever the growth steps were. */
	assert_true((uint64_t)hindex_count(&w->index) * 2 <= (uint64_t)w->index.mask + 1);
	words_free(w);
}

/* Removing every other entry leaves the rest findable; removed ones are gone, and adding them back works. */
static void test_remove_and_reinsert(void **state)
{
	(void)state;
	struct words *w = words_new(NWORDS);
	for (uint32_t i = 0; i < NWORDS; i += 2)
		assert_true(hindex_remove(&w->index, hash_str(HASH_SEED, w->text[i]), i));
	assert_false(hindex_remove(&w->index, hash_str(HASH_SEED, w->text[0]), 0));
	assert_false(hindex_remove(&w->index, hash_str(HASH_SEED, w->text[1]), 3));	/* right hash, wrong value */
	assert_int_equal(hindex_count(&w->index), NWORDS / 2);
	for (uint32_t i = 0, at; i < NWORDS; i++)
		assert_int_equal(find_word(w, w->text[i], &at), i % 2 == 1);
	for (uint32_t i = 0; i < NWORDS; i += 2)
		assert_int_equal(hindex_insert(&w->index, hash_str(HASH_SEED, w->text[i]), i), 0);
	for (uint32_t i = 0, at; i < NWORDS; i++) {
		assert_true(find_word(w, w->text[i], &at));
		assert_int_equal(at, i);
	}
	words_free(w);
}

/* Churn (a process table over a day): insertions and removals of ever new keys keep the index small. */
static void test_churn_stays_bounded(void **state)
{
	(void)state;
	struct hindex h = { 0 };
	for (uint32_t pid = 1; pid < 200000; pid++) {
		assert_int_equal(hindex_insert(&h, hindex_u32(pid), pid * 3), 0);
		if (pid > 100)
			assert_true(hindex_remove(&h, hindex_u32(pid - 100), (pid - 100) * 3));
	}
	assert_int_equal(hindex_count(&h), 100);
	assert_true(h.mask + 1 <= 1024);
	uint64_t v;
	assert_true(hindex_find(&h, hindex_u32(199999), NULL, NULL, NULL, &v));
	assert_int_equal(v, 199999 * 3);
	assert_false(hindex_find(&h, hindex_u32(5), NULL, NULL, NULL, &v));
	hindex_free(&h);
}

/* Iteration sees every entry once, also when it removes entries as it goes (as the reap loops do). */
static void test_iterate_while_removing(void **state)
{
	(void)state;
	struct hindex h = { 0 };
	static uint8_t seen[3000];
	for (uint32_t k = 0; k < 3000; k++)
		assert_int_equal(hindex_insert(&h, hindex_u32(k), k), 0);
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&h, &pos, &v);) {
		seen[v]++;
		if (v % 3 == 0)
			assert_true(hindex_remove(&h, hindex_u32((uint32_t)v), v));
	}
	for (uint32_t k = 0; k < 3000; k++)
		assert_int_equal(seen[k], 1);
	assert_int_equal(hindex_count(&h), 2000);
	unsigned left = 0;
	for (uint32_t pos = 0; hindex_next(&h, &pos, &v);)
		left += v % 3 != 0;
	assert_int_equal(left, 2000);
	hindex_free(&h);
}

/* Hashes that collide (here: all the same, and the reserved 0 and 1) still find each entry by its key. */
static void test_colliding_hashes(void **state)
{
	(void)state;
	struct words *w = calloc(1, sizeof(*w));
	assert_non_null(w);
	for (uint32_t i = 0; i < 300; i++) {
		snprintf(w->text[i], sizeof(w->text[i]), "c%u", i);
		assert_int_equal(hindex_insert(&w->index, i % 3, i), 0);	/* hashes 0, 1, 2 */
	}
	for (uint32_t i = 0, at; i < 300; i++) {
		assert_true(hindex_find_index(&w->index, i % 3, word_is, w, w->text[i], &at));
		assert_int_equal(at, i);
	}
	assert_true(hindex_remove(&w->index, 0, 0));
	assert_false(hindex_find_index(&w->index, 0, word_is, w, "c0", &(uint32_t){ 0 }));
	assert_true(hindex_find_index(&w->index, 0, word_is, w, "c3", &(uint32_t){ 0 }));
	words_free(w);
}

/* clear empties but keeps the memory; as many entries as before go back in without growing. */
static void test_clear_keeps_room(void **state)
{
	(void)state;
	struct hindex h = { 0 };
	for (uint32_t k = 1; k <= 1000; k++)
		assert_int_equal(hindex_insert(&h, hindex_u32(k), k), 0);
	struct hindex_slot *slots = h.slots;
	uint32_t mask = h.mask;
	hindex_clear(&h);
	assert_int_equal(hindex_count(&h), 0);
	assert_false(hindex_find(&h, hindex_u32(1), NULL, NULL, NULL, &(uint64_t){ 0 }));
	for (uint32_t k = 1; k <= 1000; k++)
		assert_int_equal(hindex_insert(&h, hindex_u32(k + 5000), k), 0);
	assert_ptr_equal(h.slots, slots);
	assert_int_equal(h.mask, mask);
	hindex_free(&h);
	assert_null(h.slots);
	assert_false(hindex_next(&h, &(uint32_t){ 0 }, &(uint64_t){ 0 }));
}

/* The hashes are the profile's: combinable, injective in the value combined, byte order matters. */
/* Integer keys (pids, tids): get, put replacing in place, delete, and iteration with the keys. */
static void test_u32_keys(void **state)
{
	(void)state;
	struct hindex m = { 0 };
	uint64_t v;
	assert_false(hindex_u32_get(&m, 5, &v));
	for (uint32_t k = 1; k <= 5000; k++)
		assert_int_equal(hindex_u32_put(&m, k * 16, k), 0);
	assert_int_equal(hindex_count(&m), 5000);
	for (uint32_t k = 1; k <= 5000; k += 2)
		assert_true(hindex_u32_del(&m, k * 16));
	assert_false(hindex_u32_del(&m, 16));
	for (uint32_t k = 1; k <= 5000; k++) {
		bool found = hindex_u32_get(&m, k * 16, &v);
		assert_int_equal(found, k % 2 == 0);
		if (found)
			assert_int_equal(v, k);
	}
	assert_int_equal(hindex_u32_put(&m, 32, 7), 0);	/* replaces: no second entry */
	assert_true(hindex_u32_get(&m, 32, &v));
	assert_int_equal(v, 7);
	assert_int_equal(hindex_count(&m), 2500);
	uint32_t key, seen = 0;
	for (uint32_t pos = 0; hindex_u32_next(&m, &pos, &key, &v);) {
		assert_int_equal(key % 32, 0);
		assert_int_equal(v, key == 32 ? 7 : key / 16);
		seen++;
	}
	assert_int_equal(seen, 2500);
	assert_int_equal(hindex_u32_put(&m, UINT32_MAX, 9), 0);	/* the largest key is its own */
	assert_true(hindex_u32_get(&m, UINT32_MAX, &v));
	assert_int_equal(v, 9);
	hindex_free(&m);
}

static void test_hashes(void **state)
{
	(void)state;
	assert_int_equal(hash_str(HASH_SEED, "abc"), hash_bytes(HASH_SEED, "abc", 3));
	assert_int_not_equal(hash_str(HASH_SEED, "ab"), hash_str(HASH_SEED, "ba"));
	assert_int_not_equal(hash_bytes(HASH_SEED, "", 0), hash_bytes(HASH_SEED, "\0", 1));
	for (uint64_t v = 0; v < 1000; v++)
		assert_int_not_equal(hash_u64(HASH_SEED, v), hash_u64(HASH_SEED, v + 1));
	assert_int_not_equal(hash_u64(hash_u64(HASH_SEED, 1), 2), hash_u64(hash_u64(HASH_SEED, 2), 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_after_growth),
		cmocka_unit_test(test_remove_and_reinsert),
		cmocka_unit_test(test_churn_stays_bounded),
		cmocka_unit_test(test_iterate_while_removing),
		cmocka_unit_test(test_colliding_hashes),
		cmocka_unit_test(test_clear_keeps_room),
		cmocka_unit_test(test_u32_keys),
		cmocka_unit_test(test_hashes),
	};
	return cmocka_run_group_tests_name("hindex", tests, NULL, NULL);
}
