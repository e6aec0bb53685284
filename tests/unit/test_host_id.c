/*
 * Unit tests for src/base/host_id.c: the configured id wins, else the first line of the machine-id file,
 * cut to HOST_ID_MAX - 1 bytes and without its line break; an unreadable file gives "" and its error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "src/base/host_id.h"
#include "tests/lib/testlib.h"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void test_configured_wins(void **state)
{
	struct test_workdir *w = *state;
	char path[600], out[HOST_ID_MAX];
	snprintf(path, sizeof(path), "%s/machine-id", w->dir);
	write_file(path, "0123456789abcdef0123456789abcdef\n");
	assert_int_equal(host_id_from("rack-7", path, out, sizeof(out)), 0);
	assert_string_equal(out, "rack-7");
	assert_int_equal(host_id_from("", path, out, sizeof(out)), 0);
	assert_string_equal(out, "0123456789abcdef0123456789abcdef");
	assert_int_equal(host_id_from(NULL, path, out, sizeof(out)), 0);
	assert_string_equal(out, "0123456789abcdef0123456789abcdef");
	/* Line breaks never get into a header or a registration message. */
	assert_int_equal(host_id_from("a\nb", path, out, sizeof(out)), 0);
	assert_string_equal(out, "a");
}

static void test_bounds_and_errors(void **state)
{
	struct test_workdir *w = *state;
	char path[600], out[HOST_ID_MAX], small[8], long_id[400];
	memset(long_id, 'x', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	snprintf(path, sizeof(path), "%s/machine-id", w->dir);
	write_file(path, long_id);
	assert_int_equal(host_id_from(NULL, path, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), HOST_ID_MAX - 1);
	assert_int_equal(host_id_from(long_id, path, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), HOST_ID_MAX - 1);
	assert_int_equal(host_id_from(NULL, path, small, sizeof(small)), 0);
	assert_string_equal(small, "xxxxxxx");
	write_file(path, "");
	assert_int_equal(host_id_from(NULL, path, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	snprintf(path, sizeof(path), "%s/absent", w->dir);
	assert_int_equal(host_id_from(NULL, path, out, sizeof(out)), -ENOENT);
	assert_string_equal(out, "");
}

/* The host's own: what /etc/machine-id says, as record and the daemon write it. */
static void test_this_host(void **state)
{
	(void)state;
	char out[HOST_ID_MAX], line[HOST_ID_MAX] = "";
	FILE *f = fopen(HOST_ID_MACHINE_ID, "re");
	bool readable = f != NULL;
	if (f) {
		if (fgets(line, sizeof(line), f))
			line[strcspn(line, "\n")] = '\0';
		fclose(f);
	}
	assert_int_equal(host_id_get(NULL, out, sizeof(out)) == 0, readable);
	assert_string_equal(out, line);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_configured_wins, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_bounds_and_errors, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test(test_this_host),
	};
	return cmocka_run_group_tests_name("host_id", tests, NULL, NULL);
}
