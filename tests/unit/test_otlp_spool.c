/*
 * The OTLP spool: requests come back in order, from memory or from the directory an earlier run left; the bound
 * drops the oldest, said, but never the one being sent; files a kill cut short are removed, files not the
 * spool's are left alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/export/otlp_spool.h"
#include "tests/lib/testlib.h"

struct said {
	unsigned lines;
	char last[512];
};

static void note(void *ctx, enum log_level level, const char *msg)
{
	struct said *s = ctx;
	(void)level;
	s->lines++;
	snprintf(s->last, sizeof(s->last), "%s", msg);
}

static void push(struct otlp_spool *s, char c, size_t len)
{
	uint8_t *d = malloc(len);
	assert_non_null(d);
	memset(d, c, len);
	assert_int_equal(otlp_spool_push(s, d, len), 0);
}

/* The oldest request's first byte (and its length), taken as being sent. */
static char peek(struct otlp_spool *s, size_t *len)
{
	uint8_t *d;
	assert_int_equal(otlp_spool_peek(s, &d, len), 0);
	char c = (char)d[0];
	free(d);
	return c;
}

static void check_in_order(const char *dir)
{
	struct said said = { 0 };
	struct log_sink log = { .write = note, .ctx = &said };
	struct otlp_spool *s;
	size_t len;
	assert_int_equal(otlp_spool_open(dir, 0, &log, &s), 0);
	push(s, 'a', 10);
	push(s, 'b', 20);
	assert_int_equal(otlp_spool_count(s), 2);
	assert_int_equal(otlp_spool_bytes(s), 30);
	assert_int_equal(peek(s, &len), 'a');
	assert_int_equal(len, 10);
	otlp_spool_release(s);	/* not taken: still the oldest */
	assert_int_equal(peek(s, &len), 'a');
	otlp_spool_pop(s);
	assert_int_equal(peek(s, &len), 'b');
	otlp_spool_pop(s);
	uint8_t *d;
	assert_int_equal(otlp_spool_peek(s, &d, &len), -ENOENT);
	otlp_spool_close(s);
}

static void test_in_order_memory_and_disk(void **state)
{
	(void)state;
	char *dir = test_mkdtemp(), spool[600];
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	check_in_order(NULL);
	check_in_order(spool);
	test_rmdir_rf(dir);
	free(dir);
}

/* Past the bound the oldest waiting goes, said; the one being sent stays (the receiver may have it already). */
static void test_bound_spares_the_request_in_flight(void **state)
{
	(void)state;
	struct said said = { 0 };
	struct log_sink log = { .write = note, .ctx = &said };
	struct otlp_spool *s;
	size_t len;
	assert_int_equal(otlp_spool_open(NULL, 2500, &log, &s), 0);
	push(s, 'a', 1000);
	assert_int_equal(peek(s, &len), 'a');	/* being sent */
	push(s, 'b', 900);
	push(s, 'c', 1000);	/* no room: b goes, not a */
	assert_int_equal(otlp_spool_dropped(s), 1);
	assert_int_equal(otlp_spool_bytes(s), 2000);	/* a and c */
	assert_non_null(strstr(said.last, "spool full"));
	otlp_spool_pop(s);	/* a was taken */
	assert_int_equal(peek(s, &len), 'c');
	/* Only the request in flight left and still no room: the new one is refused. */
	uint8_t *big = malloc(2000);
	assert_non_null(big);
	assert_int_equal(otlp_spool_push(s, big, 2000), -ENOSPC);
	assert_int_equal(otlp_spool_count(s), 1);
	uint8_t *huge = malloc(3000);
	assert_non_null(huge);
	assert_int_equal(otlp_spool_push(s, huge, 3000), -EFBIG);
	otlp_spool_close(s);
}

/* What an earlier run left is sent first, in order; a write a kill cut short is removed; other files stay. */
static void test_directory_from_before(void **state)
{
	(void)state;
	struct said said = { 0 };
	struct log_sink log = { .write = note, .ctx = &said };
	char *dir = test_mkdtemp();
	struct otlp_spool *s;
	size_t len;
	assert_int_equal(otlp_spool_open(dir, 0, &log, &s), 0);
	push(s, 'x', 5);
	push(s, 'y', 6);
	otlp_spool_close(s);
	assert_int_equal(test_run("cd %s && : > 0000000000000007.otlp.tmp.AbC123 && echo keep > notes.txt", dir), 0);
	assert_int_equal(otlp_spool_open(dir, 0, &log, &s), 0);
	assert_non_null(strstr(said.last, "2 profiles"));
	assert_int_equal(otlp_spool_count(s), 2);
	push(s, 'z', 7);
	assert_int_equal(peek(s, &len), 'x');
	otlp_spool_pop(s);
	assert_int_equal(peek(s, &len), 'y');
	otlp_spool_pop(s);
	assert_int_equal(peek(s, &len), 'z');
	otlp_spool_pop(s);
	otlp_spool_close(s);
	assert_int_equal(test_run("cd %s && test ! -e 0000000000000007.otlp.tmp.AbC123 && test -e notes.txt && "
				  "test $(ls | wc -l) -eq 1", dir), 0);
	test_rmdir_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_order_memory_and_disk),
		cmocka_unit_test(test_bound_spares_the_request_in_flight),
		cmocka_unit_test(test_directory_from_before),
	};
	return cmocka_run_group_tests_name("otlp spool", tests, NULL, NULL);
}
