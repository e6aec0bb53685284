/* Unit tests for symbols/kallsyms.c: a fake kallsyms written here, then the real one when we may read it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/kallsyms.h"
#include "tests/lib/testlib.h"

/* Writes text to a fresh temporary file; the caller unlinks path. */
static void write_temp(char *path, size_t len, const char *text)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, len, "%s/hostprof-kallsyms-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t n = strlen(text);
	assert_int_equal(write(fd, text, n), (ssize_t)n);
	close(fd);
}

static int load_text(const char *text, struct kallsyms **out)
{
	char path[256];
	write_temp(path, sizeof(path), text);
	int err = kallsyms_load(path, out);
	unlink(path);
	return err;
}

static const char fake[] =
	"ffffffff81000000 T _text\n"
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 T srso_alias_untrain_ret\n"
	"ffffffff81001000 t do_one_initcall\n"
	"ffffffff81002000 T schedule\n"
	"ffffffff81002800 D some_data\n"
	"ffffffff81002900 r some_rodata\n"
	"ffffffff81003000 W weak_func\n"
	"ffffffff81004000 t __pfx_foo\n"
	"ffffffff81004010 t foo\n"
	/* malformed lines, all at 0xffffffff81005000: none may appear */
	"zzzzzzzzzzzzzzzz T bad_address\n"
	"ffffffff81005000 T\n"
	"ffffffff81005000Tx no_spaces\n"
	"ffffffff81005000 T two words\n"
	"ffffffff81005000 T unterminated\t[mod\n"
	"ffffffff81005000 T empty_module\t[]\n"
	"ffffffff81005000 T junk_after\t[mod] x\n"
	"0ffffffff81005000 T seventeen_digits\n"
	"0xffffffff8100500 T hex_prefix\n"
	"\n"
	"ffffffff81005000 \n"
	"ffffffff81006000 T after_long\n"
	"ffffffffc0001000 t mod_fn\t[mymod]\n"
	"ffffffffc0001100 T mod_fn2\t[mymod]\n"
	"ffffffffc0002000 t other_fn\t[other]\n";

/* The fake table plus a line far longer than any real one, which must be skipped without losing the next. */
static char *fake_with_long_line(void)
{
	size_t long_len = 5000;
	char *text = malloc(sizeof(fake) + long_len + 64);
	assert_non_null(text);
	strcpy(text, fake);
	char *p = text + strlen(text);
	p += sprintf(p, "ffffffff81005000 T ");
	memset(p, 'x', long_len);
	strcpy(p + long_len, "\nffffffff81007000 T after_very_long\n");
	return text;
}

static int setup_fake(void **state)
{
	struct kallsyms *k = NULL;
	char *text = fake_with_long_line();
	int err = load_text(text, &k);
	free(text);
	*state = k;
	return err == 0 ? 0 : -1;
}

static int teardown_fake(void **state)
{
	kallsyms_free(*state);
	return 0;
}

static void assert_lookup(struct kallsyms *k, uint64_t addr, const char *name, uint64_t offset,
			  const char *module)
{
	uint64_t off = 12345;
	const char *mod = "unset";
	const char *got = kallsyms_lookup(k, addr, &off, &mod);
	assert_non_null(got);
	assert_string_equal(got, name);
	assert_int_equal(off, offset);
	if (module)
		assert_string_equal(mod, module);
	else
		assert_null(mod);
}

static void test_text_start(void **state)
{
	assert_int_equal(kallsyms_text_start(*state), 0xffffffff81000000ull);
}

static void test_lookups(void **state)
{
	struct kallsyms *k = *state;
	/* Aliases at one address: the name without leading underscores wins. */
	assert_lookup(k, 0xffffffff81000000ull, "srso_alias_untrain_ret", 0, NULL);
	assert_lookup(k, 0xffffffff81000fffull, "srso_alias_untrain_ret", 0xfff, NULL);
	assert_lookup(k, 0xffffffff81001000ull, "do_one_initcall", 0, NULL);
	/* Data symbols are not kept: they would steal the end of schedule. */
	assert_lookup(k, 0xffffffff81002900ull, "schedule", 0x900, NULL);
	assert_lookup(k, 0xffffffff81003004ull, "weak_func", 4, NULL);
	assert_lookup(k, 0xffffffff81004008ull, "__pfx_foo", 8, NULL);
	assert_lookup(k, 0xffffffff81004010ull, "foo", 0, NULL);
	assert_lookup(k, 0xffffffff81006010ull, "after_long", 0x10, NULL);
	assert_lookup(k, 0xffffffff81007000ull, "after_very_long", 0, NULL);
}

static void test_modules(void **state)
{
	struct kallsyms *k = *state;
	assert_lookup(k, 0xffffffffc0001010ull, "mod_fn", 0x10, "mymod");
	assert_lookup(k, 0xffffffffc0001100ull, "mod_fn2", 0, "mymod");
	assert_lookup(k, 0xffffffffc0002004ull, "other_fn", 4, "other");
	assert_lookup(k, UINT64_MAX, "other_fn", UINT64_MAX - 0xffffffffc0002000ull, "other");
}

/* Modules listed out of address order, one below a vmlinux symbol, aliases apart: sorted and merged all the same. */
static void test_unsorted_modules(void **state)
{
	(void)state;
	const char *text = "ffffffff81000000 T _text\n"
			   "ffffffff81001000 T schedule\n"
			   "ffffffff81001000 t __schedule\n"
			   "ffffffff81002000 T do_exit\n"
			   "ffffffffc0003000 t late_fn\t[mymod]\n"
			   "ffffffffc0001000 t __mod_alias\t[mymod]\n"
			   "ffffffffc0002000 t mid_fn\t[mymod]\n"
			   "ffffffffc0001000 T mod_alias\t[mymod]\n"
			   "ffffffff81001800 t odd_fn\t[odd]\n"
			   "ffffffffc0000800 t first_fn\t[other]\n";
	struct kallsyms *k;
	assert_int_equal(load_text(text, &k), 0);
	assert_lookup(k, 0xffffffff81001004ull, "schedule", 4, NULL);
	assert_lookup(k, 0xffffffff81001804ull, "odd_fn", 4, "odd");
	assert_lookup(k, 0xffffffff81002010ull, "do_exit", 0x10, NULL);
	assert_lookup(k, 0xffffffffc0000900ull, "first_fn", 0x100, "other");
	assert_lookup(k, 0xffffffffc0001008ull, "mod_alias", 8, "mymod");
	assert_lookup(k, 0xffffffffc0002000ull, "mid_fn", 0, "mymod");
	assert_lookup(k, 0xffffffffc0003001ull, "late_fn", 1, "mymod");
	kallsyms_free(k);
}

static void test_below_first_symbol(void **state)
{
	uint64_t off = 1;
	const char *mod = "unset";
	assert_null(kallsyms_lookup(*state, 0xffffffff80ffffffull, &off, &mod));
	assert_null(mod);
	assert_int_equal(off, 0);
	assert_null(kallsyms_lookup(*state, 0, NULL, NULL));
}

static void test_malformed_lines_ignored(void **state)
{
	/* Every malformed line sits at ...5000, between foo (...4010) and after_long (...6000). */
	assert_lookup(*state, 0xffffffff81005000ull, "foo", 0xff0, NULL);
}

static void test_all_zero_is_eperm(void **state)
{
	(void)state;
	struct kallsyms *k = NULL;
	const char *text = "0000000000000000 T _text\n"
			   "0000000000000000 T schedule\n"
			   "0000000000000000 D some_data\n"
			   "0000000000000000 t mod_fn\t[mymod]\n";
	assert_int_equal(load_text(text, &k), -EPERM);
	assert_null(k);	/* *out is set only on success */
}

static void test_empty_and_missing(void **state)
{
	(void)state;
	struct kallsyms *k = NULL;
	assert_int_equal(load_text("", &k), -ENODATA);
	assert_int_equal(load_text("garbage\nmore garbage\n", &k), -ENODATA);
	assert_int_equal(kallsyms_load("/nonexistent/hostprof/kallsyms", &k), -ENOENT);
	assert_int_equal(kallsyms_load(NULL, &k), -EINVAL);
	assert_null(k);
}

static void test_real_kallsyms(void **state)
{
	(void)state;
	struct kallsyms *k;
	int err = kallsyms_load("/proc/kallsyms", &k);
	if (err == -EPERM || err == -ENOENT || err == -EACCES)
		test_skip("the kernel hides /proc/kallsyms from this user (%s)", strerror(-err));
	assert_int_equal(err, 0);
	uint64_t text = kallsyms_text_start(k);
	assert_true(text != 0);
	uint64_t off = 1;
	const char *mod = "unset";
	const char *name = kallsyms_lookup(k, text, &off, &mod);
	assert_non_null(name);
	assert_int_equal(off, 0);
	assert_null(mod);
	assert_null(kallsyms_lookup(k, 0, NULL, NULL));
	kallsyms_free(k);
}

static int read_text(const char *text, uint64_t *addr)
{
	char path[256];
	write_temp(path, sizeof(path), text);
	int err = kallsyms_read_text_start(path, addr);
	unlink(path);
	return err;
}

/* _text alone, without loading the table: after the per-CPU symbols, never a module's, zeros refused. */
static void test_read_text_start(void **state)
{
	(void)state;
	uint64_t addr = 0;
	assert_int_equal(read_text(fake, &addr), 0);
	assert_int_equal(addr, 0xffffffff81000000ull);
	assert_int_equal(read_text("0000000000000000 A fixed_percpu_data\n0000000000001000 A cpu_number\n"
				   "ffffffffc0a00000 T _text\t[fake]\nffffffff82000000 t _text\n"
				   "ffffffff81200000 T _text\n", &addr), 0);
	assert_int_equal(addr, 0xffffffff81200000ull);
	assert_int_equal(read_text("0000000000000000 T _text\n", &addr), -EPERM);
	assert_int_equal(read_text("ffffffff81000000 T _stext\n", &addr), -ENOENT);
	assert_int_equal(kallsyms_read_text_start("/nonexistent/kallsyms", &addr), -ENOENT);
	/* The real one agrees with the full table where the kernel shows addresses. */
	struct kallsyms *k;
	if (kallsyms_load("/proc/kallsyms", &k) == 0) {
		assert_int_equal(kallsyms_read_text_start("/proc/kallsyms", &addr), 0);
		assert_int_equal(addr, kallsyms_text_start(k));
		kallsyms_free(k);
	} else {
		assert_int_not_equal(kallsyms_read_text_start("/proc/kallsyms", &addr), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_text_start, setup_fake, teardown_fake),
		cmocka_unit_test_setup_teardown(test_lookups, setup_fake, teardown_fake),
		cmocka_unit_test_setup_teardown(test_modules, setup_fake, teardown_fake),
		cmocka_unit_test_setup_teardown(test_below_first_symbol, setup_fake, teardown_fake),
		cmocka_unit_test_setup_teardown(test_malformed_lines_ignored, setup_fake, teardown_fake),
		cmocka_unit_test(test_unsorted_modules),
		cmocka_unit_test(test_all_zero_is_eperm),
		cmocka_unit_test(test_read_text_start),
		cmocka_unit_test(test_empty_and_missing),
		cmocka_unit_test(test_real_kallsyms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
