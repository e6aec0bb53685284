/*
 * Unit tests for symbols/names_cache.c, alone and through the symbolizer: a program built here with inlined
 * functions and a separate debug file, and libc. Every lookup (names, files, lines, inlined frames) is the same
 * from a names file as made afresh; a file of another key (the debug file removed), a damaged file, a file past
 * a bound and the names of a file others can write are never used or kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "symbols/names_cache.h"
#include "symbols/symbolizer.h"
#include "tests/lib/symbol_checks.h"
#include "tests/lib/testlib.h"

#define BUILD_ID "0123456789abcdef0123456789abcdef01234567"

struct env {
	char *root;
	char prog[512], debug[512], cache[512], names[700];
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	e->root = test_mkdtemp();
	snprintf(e->prog, sizeof(e->prog), "%s/prog", e->root);
	snprintf(e->debug, sizeof(e->debug), "%s/prog.debug", e->root);
	snprintf(e->cache, sizeof(e->cache), "%s/cache/hostprof", e->root);
	snprintf(e->names, sizeof(e->names), "%s/" BUILD_ID NAMES_CACHE_SUFFIX, e->cache);
	symcheck_build_program(e->root, "-Wl,--build-id=0x" BUILD_ID, 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	test_rmdir_rf(e->root);
	free(e->root);
	free(e);
	return 0;
}

static struct symbolizer *open_sym(const char *path, const char *names_dir)
{
	struct symbolizer *s = NULL;
	assert_int_equal(symbolizer_open(path, -1, &s), 0);
	if (names_dir)
		assert_int_equal(symbolizer_set_names_cache(s, names_dir), 0);
	return s;
}

/* Lookups at every address in [lo, hi) stepping by step give the same frames in a and b; returns how many had an
 * inlined frame in a (DWARF was read). */
static size_t assert_same_lookups(struct symbolizer *a, struct symbolizer *b, uint64_t lo, uint64_t hi, uint64_t step)
{
	size_t inlined;
	symcheck_same_lookups(a, b, lo, hi, step, &inlined);
	return inlined;
}

/* Every byte of the program's code named by a cold symbolizer (which writes the file when freed), then by a
 * warm one from the file alone: the same frames as a symbolizer without names kept. */
static void test_program_identical(void **state)
{
	struct env *e = *state;
	uint64_t lo, hi;
	symcheck_text_range(e->prog, &lo, &hi);
	struct symbolizer *plain = open_sym(e->prog, NULL), *cold = open_sym(e->prog, e->cache);
	assert_true(assert_same_lookups(plain, cold, lo, hi, 1) > 0);
	assert_int_equal(symbolizer_kept_names(cold), 0);
	assert_int_not_equal(access(e->names, F_OK), 0);	/* written when freed */
	symbolizer_free(cold);
	assert_int_equal(access(e->names, R_OK), 0);
	struct symbolizer *warm = open_sym(e->prog, e->cache);
	assert_true(assert_same_lookups(plain, warm, lo, hi, 1) > 0);
	assert_int_equal(symbolizer_kept_names(warm), hi - lo);
	symbolizer_free(warm);
	symbolizer_free(plain);
}

/* A lookup not in the file is made and added; the next run has both. */
static void test_added_to_file(void **state)
{
	struct env *e = *state;
	uint64_t lo, hi;
	symcheck_text_range(e->prog, &lo, &hi);
	uint64_t mid = lo + (hi - lo) / 2;
	struct symbolizer *plain = open_sym(e->prog, NULL), *first = open_sym(e->prog, e->cache);
	assert_same_lookups(plain, first, lo, mid, 1);
	symbolizer_free(first);
	struct symbolizer *second = open_sym(e->prog, e->cache);
	assert_same_lookups(plain, second, lo, hi, 1);
	assert_int_equal(symbolizer_kept_names(second), mid - lo);
	symbolizer_free(second);
	struct symbolizer *third = open_sym(e->prog, e->cache);
	assert_same_lookups(plain, third, lo, hi, 1);
	assert_int_equal(symbolizer_kept_names(third), hi - lo);
	symbolizer_free(third);
	symbolizer_free(plain);
}

/* Names made with the debug file are not given once it is gone (its lines and inlined frames went with it). */
static void test_debug_file_removed(void **state)
{
	struct env *e = *state;
	uint64_t lo, hi;
	symcheck_text_range(e->prog, &lo, &hi);
	struct symbolizer *cold = open_sym(e->prog, e->cache);
	for (uint64_t va = lo; va < hi; va++)
		symbolizer_lookup(cold, va, (struct symbol_frame[64]){ 0 }, 64);
	symbolizer_free(cold);
	assert_int_equal(unlink(e->debug), 0);
	struct symbolizer *plain = open_sym(e->prog, NULL), *after = open_sym(e->prog, e->cache);
	assert_int_equal(assert_same_lookups(plain, after, lo, hi, 1), 0);	/* no inlined frames without DWARF */
	assert_int_equal(symbolizer_kept_names(after), 0);
	symbolizer_free(after);
	symbolizer_free(plain);
}

/* A program others may write could claim any build-id: its names are not kept. */
static void test_writable_file_not_kept(void **state)
{
	struct env *e = *state;
	uint64_t lo, hi;
	symcheck_text_range(e->prog, &lo, &hi);
	assert_int_equal(chmod(e->prog, 0666), 0);
	struct symbolizer *s = open_sym(e->prog, e->cache);
	symbolizer_lookup(s, lo, (struct symbol_frame[64]){ 0 }, 64);
	symbolizer_free(s);
	assert_int_not_equal(access(e->names, F_OK), 0);
}

/* libc (with its debug file where installed): a sample of its code, every 97th byte, cold then warm. */
static void test_libc_identical(void **state)
{
	struct env *e = *state;
	const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
	uint64_t lo, hi;
	if (access(libc, R_OK) != 0)
		test_skip("no %s on this machine", libc);
	symcheck_text_range(libc, &lo, &hi);
	struct symbolizer *plain = open_sym(libc, NULL), *cold = open_sym(libc, e->cache);
	assert_same_lookups(plain, cold, lo, hi, 97);
	symbolizer_free(cold);
	struct symbolizer *warm = open_sym(libc, e->cache);
	assert_same_lookups(plain, warm, lo, hi, 97);
	assert_int_equal(symbolizer_kept_names(warm), (hi - lo + 96) / 97);
	symbolizer_free(warm);
	symbolizer_free(plain);
}

/* ---- the file itself ---- */

static struct names_cache *open_cache(const struct env *e, const char *key, enum names_cache_state want)
{
	struct names_cache *c = NULL;
	assert_int_equal(names_cache_open(e->cache, BUILD_ID, key, &c), 0);
	assert_int_equal(names_cache_state(c), want);
	return c;
}

static const struct symbol_frame sample_chain[] = {
	{ .function = "square", .file = "prog.c", .line = 2, .inlined = 1 },
	{ .function = "work", .file = "prog.c", .line = 4 },
};

/* Three addresses: one named by a chain, one by Go, one without a name. */
static void write_sample(const struct env *e)
{
	struct names_cache *c = open_cache(e, "k1", NAMES_CACHE_ABSENT);
	static const struct symbol_frame go = { .function = "main.main", .file = "main.go", .line = 7, .go = 1 };
	assert_int_equal(names_cache_add(c, 0x2000, sample_chain, 2), 0);
	assert_int_equal(names_cache_add(c, 0x1000, &go, 1), 0);
	assert_int_equal(names_cache_add(c, 0x3000, NULL, 0), 0);
	assert_int_equal(names_cache_add(c, 0x1000, sample_chain, 1), 0);	/* the first for an address is kept */
	assert_int_equal(names_cache_get(c, 0x2000, (struct symbol_frame[2]){ 0 }, 2), -ENOENT);
	assert_int_equal(names_cache_save(c), 0);
	names_cache_free(c);
}

static void test_file_round_trip(void **state)
{
	struct env *e = *state;
	struct symbol_frame f[4];
	write_sample(e);
	struct names_cache *c = open_cache(e, "k1", NAMES_CACHE_USED);
	assert_int_equal(names_cache_get(c, 0x2000, f, 4), 2);
	symcheck_same_frames(f, sample_chain, 2);
	assert_int_equal(names_cache_get(c, 0x2000, f, 1), 1);	/* the innermost */
	assert_string_equal(f[0].function, "square");
	assert_int_equal(names_cache_get(c, 0x1000, f, 4), 1);
	assert_string_equal(f[0].function, "main.main");
	assert_int_equal(f[0].go, 1);
	assert_int_equal(names_cache_get(c, 0x3000, f, 4), 0);
	assert_int_equal(names_cache_get(c, 0x1001, f, 4), -ENOENT);
	assert_int_equal(names_cache_get(c, 0x4000, f, 4), -ENOENT);
	assert_int_equal(names_cache_save(c), 0);	/* nothing added: not rewritten */
	names_cache_free(c);
	names_cache_free(open_cache(e, "k2", NAMES_CACHE_STALE));
}

static long file_size(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return (long)st.st_size;
}

/*
 * A save to a file in use keeps its addresses (over an address added again) and adds the new ones; an added
 * frame whose strings the file holds shares them: the file grows by the entry and the frame alone.
 */
static void test_save_adds_to_file(void **state)
{
	struct env *e = *state;
	struct symbol_frame f[4];
	static const struct symbol_frame held_strings = { .function = "work", .file = "prog.c", .line = 9 };
	static const struct symbol_frame new_string = { .function = "helper", .file = "prog.c", .line = 11 };
	write_sample(e);
	long before = file_size(e->names);
	struct names_cache *c = open_cache(e, "k1", NAMES_CACHE_USED);
	assert_int_equal(names_cache_add(c, 0x2800, &held_strings, 1), 0);
	assert_int_equal(names_cache_add(c, 0x1000, sample_chain, 2), 0);	/* held: the held chain stays */
	assert_int_equal(names_cache_save(c), 0);
	names_cache_free(c);
	long shared = file_size(e->names);
	assert_int_equal(shared - before, sizeof(struct names_cache_entry) + sizeof(struct names_cache_frame));
	c = open_cache(e, "k1", NAMES_CACHE_USED);
	assert_int_equal(names_cache_add(c, 0x0800, &new_string, 1), 0);
	assert_int_equal(names_cache_save(c), 0);
	names_cache_free(c);
	assert_int_equal(file_size(e->names) - shared,
			 sizeof(struct names_cache_entry) + sizeof(struct names_cache_frame) + sizeof("helper"));
	c = open_cache(e, "k1", NAMES_CACHE_USED);
	assert_int_equal(names_cache_get(c, 0x2000, f, 4), 2);
	symcheck_same_frames(f, sample_chain, 2);
	assert_int_equal(names_cache_get(c, 0x1000, f, 4), 1);
	assert_string_equal(f[0].function, "main.main");
	assert_int_equal(names_cache_get(c, 0x3000, f, 4), 0);
	assert_int_equal(names_cache_get(c, 0x2800, f, 4), 1);
	symcheck_same_frames(f, &held_strings, 1);
	assert_int_equal(names_cache_get(c, 0x0800, f, 4), 1);
	symcheck_same_frames(f, &new_string, 1);
	names_cache_free(c);
}

/* The file's bytes, to damage. */
static unsigned char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	unsigned char *buf = malloc(1 << 20);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

static void write_all(const char *path, const unsigned char *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0644), 0);
}

/* The hash as the writer computes it, so that the checks after it are reached. */
static void fix_hash(unsigned char *buf, size_t len)
{
	struct names_cache_head *h = (void *)buf;
	h->hash = 0;
	h->hash = XXH3_64bits_withSeed(buf + sizeof(*h), len - sizeof(*h), XXH3_64bits(h, sizeof(*h)));
}

enum damage { TRUNCATED, FLIPPED, BAD_STRING, BAD_FIRST, LONG_CHAIN, UNSORTED, STRINGS_UNTERMINATED, BAD_FLAG,
	      NDAMAGE };

static void damage(unsigned char *buf, size_t *len, enum damage d)
{
	struct names_cache_head *h = (void *)buf;
	struct names_cache_entry *en = (void *)(h + 1);
	struct names_cache_frame *fr = (void *)(en + h->nentries);
	switch (d) {
	case TRUNCATED: *len -= 1; return;
	case FLIPPED: buf[*len - 3] ^= 0x20; return;
	case BAD_STRING: fr[0].function = (uint32_t)h->strings_size + 1; break;
	case BAD_FIRST: en[1].first = h->nframes; break;
	case LONG_CHAIN: en[0].n = NAMES_CACHE_CHAIN_MAX + 1; break;
	case UNSORTED: en[1].addr = en[0].addr; break;
	case STRINGS_UNTERMINATED: buf[*len - 1] = 'x'; break;
	case BAD_FLAG: fr[0].inlined = 2; break;
	case NDAMAGE: break;
	}
	fix_hash(buf, *len);
}

/* Each damage, even with the hash made right again, makes the file unused; the next save replaces it whole. */
static void test_damaged_files(void **state)
{
	struct env *e = *state;
	size_t len;
	write_sample(e);
	unsigned char *good = read_all(e->names, &len);
	for (int d = 0; d < NDAMAGE; d++) {
		unsigned char *buf = malloc(len);
		size_t n = len;
		memcpy(buf, good, len);
		damage(buf, &n, (enum damage)d);
		write_all(e->names, buf, n);
		struct names_cache *c = open_cache(e, "k1", NAMES_CACHE_DAMAGED);
		assert_int_equal(names_cache_get(c, 0x2000, (struct symbol_frame[2]){ 0 }, 2), -ENOENT);
		assert_int_equal(names_cache_add(c, 0x5000, sample_chain, 2), 0);
		assert_int_equal(names_cache_save(c), 0);
		names_cache_free(c);
		c = open_cache(e, "k1", NAMES_CACHE_USED);
		assert_int_equal(names_cache_get(c, 0x5000, (struct symbol_frame[2]){ 0 }, 2), 2);
		assert_int_equal(names_cache_get(c, 0x2000, (struct symbol_frame[2]){ 0 }, 2), -ENOENT);
		names_cache_free(c);
		free(buf);
	}
	free(good);
}

/* A file others may write, or a link, is not read. */
static void test_untrusted_file(void **state)
{
	struct env *e = *state;
	char link[800];
	write_sample(e);
	assert_int_equal(chmod(e->names, 0666), 0);
	names_cache_free(open_cache(e, "k1", NAMES_CACHE_DAMAGED));
	assert_int_equal(chmod(e->names, 0644), 0);
	snprintf(link, sizeof(link), "%s.real", e->names);
	assert_int_equal(rename(e->names, link), 0);
	assert_int_equal(symlink(link, e->names), 0);
	names_cache_free(open_cache(e, "k1", NAMES_CACHE_DAMAGED));
}

static void test_bounds(void **state)
{
	struct env *e = *state;
	struct names_cache *c = NULL;
	struct symbol_frame chain[NAMES_CACHE_CHAIN_MAX + 1] = { 0 };
	assert_int_equal(names_cache_open(e->cache, "0123X", "k", &c), -EINVAL);
	assert_int_equal(names_cache_open(e->cache, "abc", "k", &c), -EINVAL);
	char key[NAMES_CACHE_KEY_MAX + 1];
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	assert_int_equal(names_cache_open(e->cache, BUILD_ID, key, &c), -EINVAL);
	c = open_cache(e, "k1", NAMES_CACHE_ABSENT);
	assert_int_equal(names_cache_add(c, 1, chain, NAMES_CACHE_CHAIN_MAX + 1), -EINVAL);
	assert_int_equal(names_cache_add(c, 1, chain, -1), -EINVAL);
	names_cache_free(c);
	/* A handle adds at most NAMES_CACHE_ADDED_MAX; runs after it add more, up to NAMES_CACHE_ENTRIES_MAX. */
	uint32_t next = 0;
	for (int run = 0; next < NAMES_CACHE_ENTRIES_MAX; run++) {
		c = open_cache(e, "k1", run ? NAMES_CACHE_USED : NAMES_CACHE_ABSENT);
		for (uint32_t i = 0; i < NAMES_CACHE_ADDED_MAX && next < NAMES_CACHE_ENTRIES_MAX; i++)
			assert_int_equal(names_cache_add(c, next++, NULL, 0), 0);
		assert_int_equal(names_cache_add(c, next, NULL, 0), -E2BIG);
		assert_int_equal(names_cache_save(c), 0);
		names_cache_free(c);
	}
	c = open_cache(e, "k1", NAMES_CACHE_USED);
	assert_int_equal(names_cache_get(c, 0, chain, 1), 0);
	assert_int_equal(names_cache_get(c, NAMES_CACHE_ENTRIES_MAX - 1, chain, 1), 0);
	assert_int_equal(names_cache_add(c, NAMES_CACHE_ENTRIES_MAX, NULL, 0), -E2BIG);	/* full already */
	names_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_program_identical, setup, teardown),
		cmocka_unit_test_setup_teardown(test_added_to_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debug_file_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writable_file_not_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_libc_identical, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_adds_to_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untrusted_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
	};
	return cmocka_run_group_tests_name("names_cache", tests, NULL, NULL);
}
