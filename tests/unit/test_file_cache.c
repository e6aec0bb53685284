/*
 * Unit tests for unwind/file_cache.c, the per-file data of the reference unwinders: a value is made once per key
 * and found again; forgetting releases exactly that key's value and leaves every other findable (checked against
 * a plain array through thousands of random adds and forgets, so that the index grows, leaves removed entries'
 * slots behind and reuses them in every probe-run shape); a failed make caches nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "unwind/file_cache.h"

#define NKEYS 3000
#define SPREAD (1u << 20)

struct fc_test {
	char bytes[SPREAD];		/* the keys are addresses of these bytes, picked at random: */
	char *keys[NKEYS];		/* key i, so that their hashes collide as often as chance makes them */
	int value_of[NKEYS];		/* the value made for key i; what a value points to */
	bool cached[NKEYS];		/* the model */
	unsigned makes, releases;
	int fail_next;			/* make's result when not 0 */
	char elf_stand_in;		/* what modules pass as their Elf: never opened by the cache */
};

static int fc_make(void *ctx, const void *key, Elf *elf, void **value)
{
	struct fc_test *t = ctx;
	size_t i = 0;
	assert_ptr_equal(elf, (Elf *)&t->elf_stand_in);
	if (t->fail_next)
		return t->fail_next;
	while (i < NKEYS && t->keys[i] != key)
		i++;
	assert_true(i < NKEYS);
	assert_false(t->cached[i]);	/* made once per key */
	t->makes++;
	t->value_of[i] = (int)i;
	*value = &t->value_of[i];
	return 0;
}

static void fc_release(void *ctx, void *value)
{
	struct fc_test *t = ctx;
	size_t i = (size_t)((int *)value - t->value_of);
	assert_true(i < NKEYS && t->cached[i]);
	t->releases++;
	t->cached[i] = false;
}

static struct fc_test *fc_test_new(unsigned seed)
{
	struct fc_test *t = calloc(1, sizeof(*t));
	assert_non_null(t);
	srand(seed);
	for (size_t i = 0; i < NKEYS; i++) {
		size_t at;
		do
			at = (size_t)rand() % SPREAD;
		while (t->bytes[at]);
		t->bytes[at] = 1;
		t->keys[i] = &t->bytes[at];
	}
	return t;
}

static struct unwind_module fc_module(struct fc_test *t, size_t i)
{
	return (struct unwind_module){ .elf = (Elf *)&t->elf_stand_in, .cache_key = t->keys[i] };
}

static void fc_get(struct file_cache *c, struct fc_test *t, size_t i)
{
	struct unwind_module mod = fc_module(t, i);
	void *v = NULL;
	assert_int_equal(file_cache_get(c, &mod, &v), 0);
	assert_ptr_equal(v, &t->value_of[i]);
	t->cached[i] = true;
}

static void fc_check_model(const struct file_cache *c, struct fc_test *t)
{
	for (size_t i = 0; i < NKEYS; i++)
		assert_ptr_equal(file_cache_find(c, t->keys[i]), t->cached[i] ? &t->value_of[i] : NULL);
}

/* Random gets and forgets of keys [0, nkeys): few keys make short tables whose probe runs often wrap around. */
static void fc_random(size_t nkeys, unsigned seed)
{
	struct fc_test *t = fc_test_new(seed);
	struct file_cache_hooks hooks = { fc_make, fc_release, t };
	struct file_cache *c;
	assert_int_equal(file_cache_new(&hooks, &c), 0);
	for (unsigned round = 0; round < 20000; round++) {
		size_t i = (size_t)rand() % nkeys;
		if (rand() % 3)
			fc_get(c, t, i);
		else
			file_cache_forget(c, t->keys[i]);	/* an unknown key too */
		if (round % 2000 == 0)
			fc_check_model(c, t);
	}
	fc_check_model(c, t);
	unsigned left = 0;
	for (size_t i = 0; i < NKEYS; i++)
		left += t->cached[i];
	assert_int_equal(t->makes - t->releases, left);
	file_cache_free(c);	/* releases the rest */
	assert_int_equal(t->makes, t->releases);
	free(t);
}

static void test_random_adds_and_forgets(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 20; seed++)
		fc_random(40, seed);
	fc_random(NKEYS, 42);
}

static void test_keys_and_errors(void **state)
{
	(void)state;
	struct fc_test *t = fc_test_new(7);
	struct file_cache_hooks hooks = { fc_make, fc_release, t };
	struct file_cache *c;
	void *v;
	assert_int_equal(file_cache_new(&hooks, &c), 0);
	/* Without a cache_key a module's file is its Elf. */
	struct unwind_module mod = { .elf = (Elf *)&t->elf_stand_in };
	assert_ptr_equal(file_cache_key(&mod), &t->elf_stand_in);
	mod.cache_key = t->keys[7];
	assert_ptr_equal(file_cache_key(&mod), t->keys[7]);
	/* No Elf: nothing to read, nothing made. */
	struct unwind_module none = { .cache_key = t->keys[1] };
	assert_int_equal(file_cache_get(c, &none, &v), -ENOENT);
	/* A make that fails caches nothing; the next get makes again. */
	t->fail_next = -ENOMEM;
	assert_int_equal(file_cache_get(c, &mod, &v), -ENOMEM);
	assert_null(file_cache_find(c, t->keys[7]));
	t->fail_next = 0;
	fc_get(c, t, 7);
	fc_get(c, t, 7);
	assert_int_equal(t->makes, 1);
	file_cache_forget(c, NULL);
	file_cache_forget(c, t->keys[7]);
	assert_int_equal(t->releases, 1);
	assert_null(file_cache_find(c, t->keys[7]));
	file_cache_free(c);
	file_cache_free(NULL);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_adds_and_forgets),
		cmocka_unit_test(test_keys_and_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
