/*
 * Unit tests for symbols/debug_cache.c through the symbolizer: a program built here whose separate debug file has
 * compressed DWARF (objcopy --compress-debug-sections), and libc with libc6-dbg's debug file when installed. Every
 * lookup (names, files, lines, inlined frames) is the same with the cache of decompressed copies, cold and warm,
 * as without it; copies that must not be trusted are not used.
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

#include "symbols/debug_cache.h"
#include "symbols/symbolizer.h"
#include "tests/lib/symbol_checks.h"
#include "tests/lib/testlib.h"

struct env {
	char *root;
	char prog[512], cache[512];
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	e->root = test_mkdtemp();
	snprintf(e->prog, sizeof(e->prog), "%s/prog", e->root);
	snprintf(e->cache, sizeof(e->cache), "%s/cache/hostprof", e->root);
	symcheck_build_program(e->root, "-Wl,--build-id", 1);
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

static struct symbolizer *open_sym(const char *path, const char *cache)
{
	struct symbolizer *s = NULL;
	assert_int_equal(symbolizer_open(path, -1, &s), 0);
	if (cache)
		assert_int_equal(symbolizer_set_debug_cache(s, cache), 0);
	return s;
}

static size_t count_copies(const char *dir)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "ls '%s' 2>/dev/null | grep -c '\\.debug$'", dir);
	FILE *p = popen(cmd, "r");
	size_t n = 0;
	assert_non_null(p);
	if (fscanf(p, "%zu", &n) != 1)
		n = 0;
	pclose(p);
	return n;
}

/* Every byte of the program's code: the same frames without the cache, with it cold (writes the copy), warm. */
static void test_program_identical(void **state)
{
	struct env *e = *state;
	uint64_t lo, hi;
	symcheck_text_range(e->prog, &lo, &hi);
	struct symbolizer *plain = open_sym(e->prog, NULL), *cold = open_sym(e->prog, e->cache);
	assert_true(symcheck_same_lookups(plain, cold, lo, hi, 1, NULL) > 0);
	assert_int_equal(count_copies(e->cache), 1);
	struct symbolizer *warm = open_sym(e->prog, e->cache);
	assert_true(symcheck_same_lookups(plain, warm, lo, hi, 1, NULL) > 0);
	symbolizer_free(warm);
	symbolizer_free(cold);
	symbolizer_free(plain);
}

/* libc with libc6-dbg's compressed DWARF, when installed: a sample of its code, every 61st byte. */
static void test_libc_identical(void **state)
{
	struct env *e = *state;
	const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
	uint64_t lo, hi;
	if (access(libc, R_OK) != 0)
		test_skip("no %s on this machine", libc);
	symcheck_text_range(libc, &lo, &hi);
	struct symbolizer *plain = open_sym(libc, NULL), *cached = open_sym(libc, e->cache);
	size_t lines = symcheck_same_lookups(plain, cached, lo, hi, 61, NULL);
	if (count_copies(e->cache) == 0)
		test_skip_part("libc has no separate debug file with compressed DWARF here (libc6-dbg)");
	else
		assert_true(lines > 0);
	symbolizer_free(cached);
	symbolizer_free(plain);
}

static int open_debug(const struct env *e)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/prog.debug", e->root);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	return fd;
}

/* The build-id of the program, from its debug file. */
static int build_id(const struct env *e, unsigned char *id)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "readelf -n '%s/prog.debug' | sed -n 's/.*Build ID: //p'", e->root);
	FILE *p = popen(cmd, "r");
	int n = 0;
	unsigned v;
	while (n < 64 && fscanf(p, "%2x", &v) == 1)
		id[n++] = (unsigned char)v;
	pclose(p);
	assert_true(n >= 8);
	return n;
}

/* Copies are used only where they may be trusted; files with nothing to decompress are not copied. */
static void test_untrusted_refused(void **state)
{
	struct env *e = *state;
	unsigned char id[64], other[64];
	int n = build_id(e, id), fd = open_debug(e);
	int copy = debug_cache_open(e->cache, fd, id, n);
	assert_true(copy >= 0);
	close(copy);
	/* A copy that is another file's (a build-id that is not its own) is replaced. */
	memcpy(other, id, (size_t)n);
	other[0] ^= 1;
	char name[200], path[800];
	for (int i = 0; i < n; i++)
		sprintf(name + 2 * i, "%02x", other[i]);
	snprintf(path, sizeof(path), "%s/%s.debug", e->cache, name);
	assert_int_equal(test_run("cp '%s'/*.debug '%s'", e->cache, path), 0);
	copy = debug_cache_open(e->cache, fd, other, n);
	assert_int_equal(copy, -EINVAL);	/* written anew, its build-id is still not the one asked for */
	assert_int_equal(access(path, F_OK), 0);
	if (geteuid() == 0) {
		assert_int_equal(chmod(e->cache, 0755), 0);
		assert_int_equal(debug_cache_open(e->cache, fd, id, n), -EPERM);
		assert_int_equal(chmod(e->cache, 0700), 0);
	}
	close(fd);
	/* The program itself has no compressed section left (strip-debug): nothing to copy. */
	fd = open(e->prog, O_RDONLY);
	assert_int_equal(debug_cache_open(e->cache, fd, id, n), -ENOTSUP);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_program_identical, setup, teardown),
		cmocka_unit_test_setup_teardown(test_libc_identical, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untrusted_refused, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
