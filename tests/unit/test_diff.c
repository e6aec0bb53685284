/*
 * Unit tests for src/profile/diff.c: shares normalized by each profile's samples, functions present on one side only,
 * ordering by the size of the change, the regression count at several thresholds, the noise bound, and the
 * exact printed table and verdict.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/diff.h"
#include "src/profile/profile.h"
#include "tests/lib/profile_builder.h"


/* The location of function name in /bin/app, one per function. */
static uint32_t function_location(struct profile *p, const char *name, uint64_t address)
{
	struct profile_mapping m = { .filename = tp_string(p, "/bin/app") };
	struct profile_function f = { .name = tp_string(p, name), .filename = tp_string(p, "/src/app.c") };
	struct profile_line line = { 0, 1 };
	struct profile_location l = { .address = address, .frame_kind = PROFILE_FRAME_NATIVE, .nlines = 1,
				      .lines = &line };
	uint32_t i;
	assert_int_equal(profile_add_mapping(p, &m, &l.mapping), 0);
	assert_int_equal(profile_add_function(p, &f, &line.function), 0);
	assert_int_equal(profile_add_location(p, &l, &i), 0);
	return i;
}

/* count samples of main > leaf. */
static void add_path(struct profile *p, const char *leaf, uint64_t address, uint64_t count)
{
	uint32_t locs[2] = { function_location(p, leaf, address), function_location(p, "main", 0x100) };
	struct profile_stack st = { .nlocations = 2, .locations = locs };
	struct profile_sample s = { .pid = 1, .tid = 1, .comm = tp_string(p, "app"), .count = count };
	st.trace_id[0] = (uint8_t)address;
	assert_int_equal(profile_add_stack(p, &st, &s.stack), 0);
	assert_int_equal(profile_add_sample(p, &s), 0);
}

struct pair {
	struct profile *base, *new;
};

/* base: main > a 50, main > b 50.  new: main > a 50, main > b 120, main > c 30 (c is new). */
static int setup(void **state)
{
	struct pair *pr = calloc(1, sizeof(*pr));
	assert_int_equal(profile_new(&pr->base), 0);
	assert_int_equal(profile_new(&pr->new), 0);
	add_path(pr->base, "a", 0x200, 50);
	add_path(pr->base, "b", 0x300, 50);
	add_path(pr->new, "c", 0x400, 30);	/* a different insertion order: matching is by name */
	add_path(pr->new, "b", 0x300, 120);
	add_path(pr->new, "a", 0x200, 50);
	*state = pr;
	return 0;
}

static int teardown(void **state)
{
	struct pair *pr = *state;
	profile_free(pr->base);
	profile_free(pr->new);
	free(pr);
	return 0;
}

static void assert_row(const struct diff_row *r, const char *name, double bs, double bt, double ns, double nt)
{
	assert_string_equal(r->name, name);
	assert_string_equal(r->library, "app");
	assert_true(fabs(r->base_self - bs) < 1e-9 && fabs(r->base_total - bt) < 1e-9);
	assert_true(fabs(r->new_self - ns) < 1e-9 && fabs(r->new_total - nt) < 1e-9);
}

static void test_compute(void **state)
{
	struct pair *pr = *state;
	struct diff d;
	assert_int_equal(diff_compute(pr->base, pr->new, &d), 0);
	assert_int_equal(d.base_samples, 100);
	assert_int_equal(d.new_samples, 200);
	assert_int_equal(d.count, 4);
	/* Biggest |total delta| first; main (100% in both) last. */
	assert_row(&d.rows[0], "a (app.c)", 50, 50, 25, 25);
	assert_row(&d.rows[1], "c (app.c)", 0, 0, 15, 15);
	assert_row(&d.rows[2], "b (app.c)", 50, 50, 60, 60);
	assert_row(&d.rows[3], "main (app.c)", 0, 100, 0, 100);
	assert_int_equal(diff_regressions(&d, 5), 2);
	assert_int_equal(diff_regressions(&d, 10), 1);	/* b grew by exactly 10: not more */
	assert_int_equal(diff_regressions(&d, 20), 0);
	diff_free(&d);
}

static char *print_diff(const struct diff *d, const struct diff_options *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	assert_non_null(out);
	assert_int_equal(diff_print(d, out, o), 0);
	assert_int_equal(fclose(out), 0);
	return text;
}

static const char *const header =
	"Base: base.msgpack, 100 samples\n"
	"New:  new.msgpack, 200 samples\n"
	"Shares are percent of each profile's samples; deltas are new - base, in points (sampling noise up to "
	"12.00).\n\n";

static void test_print_fail(void **state)
{
	struct pair *pr = *state;
	struct diff d;
	struct diff_options o = { .threshold = 5, .base_name = "base.msgpack", .new_name = "new.msgpack" };
	char expect[4096];
	assert_int_equal(diff_compute(pr->base, pr->new, &d), 0);
	char *text = print_diff(&d, &o);
	snprintf(expect, sizeof(expect), "%s%s", header,
		 "   Total share (%)          Self share (%)\n"
		 "   base    new    delta     base    new    delta  Library  Function\n"
		 "  50.00  25.00   -25.00    50.00  25.00   -25.00  app      a (app.c)\n"
		 "   0.00  15.00   +15.00     0.00  15.00   +15.00  app      c (app.c)\n"
		 "  50.00  60.00   +10.00    50.00  60.00   +10.00  app      b (app.c)\n"
		 "\n"
		 "FAIL: 2 functions' total share grew by more than 5.00 points: c (app.c) +15.00, b (app.c) +10.00\n");
	assert_string_equal(text, expect);
	free(text);
	diff_free(&d);
}

static void test_print_ok_with_limit(void **state)
{
	struct pair *pr = *state;
	struct diff d;
	struct diff_options o = { .threshold = 20, .limit = 1, .base_name = "base.msgpack",
				  .new_name = "new.msgpack" };
	char expect[4096];
	assert_int_equal(diff_compute(pr->base, pr->new, &d), 0);
	char *text = print_diff(&d, &o);
	snprintf(expect, sizeof(expect), "%s%s", header,
		 "   Total share (%)          Self share (%)\n"
		 "   base    new    delta     base    new    delta  Library  Function\n"
		 "  50.00  25.00   -25.00    50.00  25.00   -25.00  app      a (app.c)\n"
		 "\n"
		 "OK: no function's total share grew by more than 20.00 points (largest growth: c (app.c) +15.00)\n");
	assert_string_equal(text, expect);
	free(text);
	diff_free(&d);
}

/* The same profile on both sides: nothing changed, whatever the sample counts. */
static void test_identical(void **state)
{
	struct pair *pr = *state;
	struct diff d;
	assert_int_equal(diff_compute(pr->new, pr->new, &d), 0);
	assert_int_equal(diff_regressions(&d, 0), 0);
	char *text = print_diff(&d, NULL);
	assert_non_null(strstr(text, "\n\nNo function's share changed.\n"
				     "\nOK: no function's total share grew by more than 5.00 points\n"));
	assert_non_null(strstr(text, "Base: base, 200 samples\nNew:  new, 200 samples\n"));
	free(text);
	diff_free(&d);
}

/* Doubling every count changes no share. */
static void test_normalized(void **state)
{
	struct pair *pr = *state;
	struct profile *twice;
	assert_int_equal(profile_new(&twice), 0);
	struct diff d;
	add_path(twice, "a", 0x200, 100);
	add_path(twice, "b", 0x300, 100);
	assert_int_equal(diff_compute(pr->base, twice, &d), 0);
	for (uint32_t i = 0; i < d.count; i++) {
		assert_true(d.rows[i].new_total == d.rows[i].base_total);
		assert_true(d.rows[i].new_self == d.rows[i].base_self);
	}
	diff_free(&d);
	profile_free(twice);
}

static void test_noise(void **state)
{
	(void)state;
	assert_true(fabs(diff_noise(100, 200) - 196.0 * sqrt(0.0025 + 0.00125)) < 1e-9);
	assert_true(fabs(diff_noise(10000, 10000) - 1.386) < 0.001);
	assert_true(diff_noise(0, 100) == 100.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_compute, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_fail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_ok_with_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_identical, setup, teardown),
		cmocka_unit_test_setup_teardown(test_normalized, setup, teardown),
		cmocka_unit_test(test_noise),
	};
	return cmocka_run_group_tests_name("diff", tests, NULL, NULL);
}
