/*
 * Unit tests of the flame graph page's writer (src/profile/flame_html.h): the data put into the template reads
 * back as the profile, and names a process chose cannot end the script element, open a comment or reach the
 * page unescaped. The page's script is tested in a browser (tests/integration/test_flame_browser.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/flame_html.h"
#include "tests/lib/profile_builder.h"

#define DATA_START "<script id=\"data\" type=\"application/json\">"

static char *page_of(const struct profile *p, const struct flame_html_options *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	assert_non_null(m);
	assert_int_equal(flame_html_write(p, m, o), 0);
	assert_int_equal(fclose(m), 0);
	return text;
}

static unsigned count(const char *text, const char *what)
{
	unsigned n = 0;
	for (const char *at = text; (at = strstr(at, what)); at += strlen(what))
		n++;
	return n;
}

/* The JSON between the data element's tags. */
static json_object *data_of(const char *page)
{
	const char *start = strstr(page, DATA_START);
	assert_non_null(start);
	start += strlen(DATA_START);
	const char *end = strstr(start, "</script>");
	assert_non_null(end);
	char *text = strndup(start, (size_t)(end - start));
	json_object *d = json_tokener_parse(text);
	free(text);
	assert_non_null(d);
	return d;
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;
	assert_true(json_object_object_get_ex(o, key, &v));
	return v;
}

/* The frames' names, the nodes' parents and the samples' counts read back as the example profile has them. */
static void test_data_reads_back(void **state)
{
	(void)state;
	struct profile *p = tp_example_profile();
	char *page = page_of(p, &(struct flame_html_options){ .title = "example.msgpack" });
	json_object *d = data_of(page), *frames = get(d, "frames"), *nodes = get(d, "nodes");
	assert_string_equal(json_object_get_string(get(d, "title")), "example.msgpack");
	assert_string_equal(json_object_get_string(get(d, "value")), "samples");
	bool main_seen = false;
	for (size_t i = 0; i < json_object_array_length(frames); i++)
		main_seen |= strcmp(json_object_get_string(json_object_array_get_idx(
					    json_object_array_get_idx(frames, i), 0)), "main") == 0;
	assert_true(main_seen);
	size_t nn = json_object_array_length(nodes) / 3;
	int64_t parents[64], node_frames[64];
	assert_int_equal(json_object_array_length(nodes) % 3, 0);
	assert_true(nn > 5 && nn <= 64);
	for (size_t i = 0; i < nn; i++) {	/* (distance back to the parent, frame, line): a parent comes first */
		parents[i] = (int64_t)i - json_object_get_int64(json_object_array_get_idx(nodes, 3 * i));
		node_frames[i] = json_object_get_int64(json_object_array_get_idx(nodes, 3 * i + 1));
		assert_true(parents[i] >= -1 && parents[i] < (int64_t)i);
		for (size_t k = 0; k < i; k++)	/* one node per path: no sibling has the same frame */
			assert_false(parents[k] == parents[i] && node_frames[k] == node_frames[i]);
	}
	assert_int_equal(json_object_array_length(get(d, "lines")) % 2, 0);	/* (node, line) pairs */
	json_object *prof = json_object_array_get_idx(get(d, "profiles"), 0), *samples = get(prof, "samples");
	int64_t total = 0;
	for (size_t i = 0; i + 4 < json_object_array_length(samples); i += 5)
		total += json_object_get_int64(json_object_array_get_idx(samples, i + 2));
	assert_int_equal(total, 14);	/* the example's samples */
	assert_true(json_object_array_length(get(prof, "threads")) >= 3);
	json_object_put(d);
	free(page);
	profile_free(p);
}

/* A name with "</script>", "<!--", a terminal escape and a stray byte changes nothing of the page around it. */
static void test_names_cannot_break_out(void **state)
{
	(void)state;
	const char *hostile = "</script><!--<script>alert(1)</script>\x1b[31m\xff";
	struct profile *p = tp_example_profile();
	char *plain = page_of(p, NULL);
	uint32_t fn = tp_function(p, hostile, "</script>.c");
	uint32_t loc = tp_location(p, tp_mapping(p, "/lib/x.so"), 0x10, PROFILE_FRAME_NATIVE,
				   &(struct profile_line){ .function = fn, .line = 3 }, 1);
	uint32_t st = tp_stack(p, 0x77, (uint32_t[]){ loc }, 1);
	tp_sample(p, (struct profile_sample){ .stack = st, .pid = 9, .tid = 9, .count = 1 }, hostile, hostile);
	char *page = page_of(p, &(struct flame_html_options){ .title = hostile });
	/* The element's tags, the comment and the page's own scripts are those of the page without the name. */
	assert_int_equal(count(page, "</script"), count(plain, "</script"));
	assert_int_equal(count(page, "<!--"), count(plain, "<!--"));
	assert_int_equal(count(page, "<script"), count(plain, "<script"));
	assert_null(strchr(page, '\x1b'));
	json_object *d = data_of(page);
	const char *title = json_object_get_string(get(d, "title"));
	assert_non_null(strstr(title, "</script><!--<script>alert(1)</script>"));	/* decoded, and shown */
	assert_null(strchr(title, '\x1b'));	/* escape.h's "\x1b" instead */
	assert_non_null(strstr(title, "\\x1b[31m\\xff"));
	json_object_put(d);
	free(page);
	free(plain);
	profile_free(p);
}

/* A differential page holds both profiles, the base's title and the verdict. */
static void test_differential(void **state)
{
	(void)state;
	struct profile *p = tp_example_profile(), *base = tp_example_profile();
	char *page = page_of(p, &(struct flame_html_options){ .title = "new", .base = base, .base_title = "old",
							      .verdict = "OK: <none>", .value = PROFILE_VALUE_CPU });
	json_object *d = data_of(page);
	assert_int_equal(json_object_array_length(get(d, "profiles")), 2);
	assert_string_equal(json_object_get_string(get(d, "baseTitle")), "old");
	assert_string_equal(json_object_get_string(get(d, "verdict")), "OK: <none>");
	assert_string_equal(json_object_get_string(get(d, "value")), "cpu");
	json_object_put(d);
	free(page);
	profile_free(p);
	profile_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_data_reads_back),
		cmocka_unit_test(test_names_cannot_break_out),
		cmocka_unit_test(test_differential),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
