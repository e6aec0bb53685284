/*
 * The flame graph pages of `convert --to html` and `diff --html`, opened in a real browser: Debian's chromium,
 * headless, with every network request sent to a closed port (a proxy at 127.0.0.1:9, names resolving to
 * nothing). Profiles are of the diff_work fixture (tests/fixtures/diff_work.c): a base run, and one where
 * variable_leaf does three times the work.
 *
 * The page is driven from a harness page the test writes next to it, which loads it in a frame (chromium's
 * --allow-file-access-from-files lets the harness reach into it), clicks a frame and the reset button, types a
 * search, reads what the page shows, counts the resources the page loaded, and writes it all into its own DOM,
 * which `chromium --dump-dom` prints. One screenshot of each page is kept in $BUILD/artifacts.
 * Skips, saying why, where the kernel refuses perf_event_open; a missing chromium fails (make deps installs it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tests/lib/profile_builder.h"
#include "tests/lib/testlib.h"

#define RECORD "\"$HOSTPROF\" record -q -F 1999"
#define WIDTH 1200
/* Headless, no network: a proxy nothing listens on, and no name resolves. A profile directory of its own. */
#define CHROMIUM "timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run " \
		 "--proxy-server=127.0.0.1:9 --host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir=%s/chromium"

struct pages {
	char *dir;
	bool recorded;
	char base[512], slow[512];
};

static int setup(void **state)
{
	struct pages *o = calloc(1, sizeof(*o));
	if (!o || !(o->dir = test_mkdtemp()))
		return -1;
	snprintf(o->base, sizeof(o->base), "%s/base.msgpack", o->dir);
	snprintf(o->slow, sizeof(o->slow), "%s/slow.msgpack", o->dir);
	*state = o;
	return 0;
}

static int teardown(void **state)
{
	struct pages *o = *state;
	test_rmdir_rf(o->dir);
	free(o->dir);
	free(o);
	return 0;
}

static void require_profiles(struct pages *o)
{
	char fixture[256];
	test_require_perf();
	test_require_tool("command -v chromium", "chromium");
	if (o->recorded)
		return;
	test_fixture_path("diff_work", fixture, sizeof(fixture));
	assert_int_equal(test_run(RECORD " -o %s -- %s base 40", o->base, fixture), 0);
	assert_int_equal(test_run(RECORD " -o %s -- %s slow 40 3", o->slow, fixture), 0);
	o->recorded = true;
}

/* The harness: loads page in a frame, clicks the first frame named target, then the reset button, searches for
 * search, and writes "key=value" lines into <pre id="result">, ending with "end". */
static void write_harness(const char *dir, const char *page, const char *target, const char *search)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/harness.html", dir);
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	fprintf(f,
		"<!DOCTYPE html><html><body><pre id=\"result\">pending</pre>\n"
		"<iframe id=\"page\" src=\"%s\" style=\"width:%dpx;height:700px;border:0\"></iframe>\n"
		"<script>\n"
		"const out = [], TARGET = '%s', SEARCH = '%s';\n"
		"const frames = (doc) => [...doc.querySelectorAll('#flame .f')];\n"
		"const named = (doc, n) => frames(doc).find((e) => e.textContent === n);\n"
		"const width = (doc, n) => { const e = named(doc, n); return e ? parseFloat(e.style.width) : -1; };\n"
		"function red(e) {\n"
		"  const m = /rgb\\(255, (\\d+), (\\d+)\\)/.exec(e.style.backgroundColor);\n"
		"  return m ? 255 - Number(m[1]) : -1;\n"
		"}\n"
		"function blue(e) {\n"
		"  const m = /rgb\\((\\d+), (\\d+), 255\\)/.exec(e.style.backgroundColor);\n"
		"  return m && m[1] !== '255' ? 255 - Number(m[1]) : -1;\n"
		"}\n"
		"document.getElementById('page').addEventListener('load', () => {\n"
		"  const w = document.getElementById('page').contentWindow, doc = w.document;\n"
		"  try {\n"
		"    out.push('opened=' + w.performance.now().toFixed(0));\n"
		"    out.push('elements=' + frames(doc).length);\n"
		"    out.push('merged=' + doc.querySelectorAll('#flame .merged').length);\n"
		"    out.push('names=|' + [...new Set(frames(doc).map((e) => e.textContent))].join('|') + '|');\n"
		"    out.push('kinds=|' + frames(doc).map((e) => e.textContent + ':' + e.dataset.kind).join('|') + '|');\n"
		"    const wide = (n) => { const e = named(doc, n); return e ? (parseFloat(e.style.width) / "
		"doc.getElementById('flame').clientWidth * 100).toFixed(2) : -1; };\n"
		"    out.push('offcpu=' + wide('[off-CPU]'));\n"
		"    out.push('full=' + doc.getElementById('flame').clientWidth);\n"
		"    const by = (f) => frames(doc).map((e) => [f(e), e.textContent]).sort((a, b) => b[0] - a[0])[0];\n"
		"    out.push('reddest=' + by(red)[1]);\n"
		"    out.push('bluest=' + by(blue)[1]);\n"
		"    out.push('verdict=' + doc.getElementById('verdict').textContent);\n"
		"    if (!TARGET) throw 'done';\n"
		"    out.push('before=' + width(doc, TARGET));\n"
		"    named(doc, TARGET).dispatchEvent(new w.MouseEvent('click', { bubbles: true }));\n"
		"    out.push('zoomed=' + width(doc, TARGET));\n"
		"    doc.getElementById('reset').click();\n"
		"    out.push('back=' + width(doc, TARGET));\n"
		"    const s = doc.getElementById('search');\n"
		"    s.value = '^' + SEARCH + '$';\n"
		"    s.dispatchEvent(new w.Event('input'));\n"
		"    out.push('match=' + doc.getElementById('match').textContent);\n"
		"    const pick = (id, v) => { const e = doc.getElementById(id); e.value = v; e.dispatchEvent(new w.Event('change')); };\n"
		"    pick('value', 'cpu');\n"
		"    out.push('cpu=' + doc.getElementById('match').textContent);\n"
		"    pick('roots', 'thread');\n"
		"    out.push('threads=' + doc.getElementById('match').textContent + ' ' + width(doc, SEARCH));\n"
		"    out.push('resources=' + w.performance.getEntriesByType('resource').length);\n"
		"  } catch (e) { if (e !== 'done') out.push('error=' + e); }\n"
		"  document.getElementById('result').textContent = out.join('\\n') + '\\nend\\n';\n"
		"});\n"
		"</script></body></html>\n",
		page, WIDTH + 16, target, search);
	assert_int_equal(fclose(f), 0);
}

/* Run the harness on dir/page; returns the result lines (to free). */
static char *run_harness(const char *dir, const char *page, const char *target, const char *search)
{
	char path[600];
	write_harness(dir, page, target, search);
	/* The DOM is dumped after the harness's load event, which waits for the frame's (its handler included). */
	assert_int_equal(test_run(CHROMIUM " --allow-file-access-from-files "
					   "--dump-dom file://%s/harness.html > %s/dom.html 2> %s/chromium.log",
				  dir, dir, dir, dir), 0);
	snprintf(path, sizeof(path), "%s/dom.html", dir);
	char *dom = test_read_text(path);
	const char *res = strstr(dom, "<pre id=\"result\">");
	fprintf(stderr, "%.3000s\n", res ? res : dom);	/* what the page showed, not the whole page again */
	assert_non_null(strstr(dom, "\nend\n"));
	return dom;
}

/* The value of "key=" in the result lines, copied into buf. */
static const char *result(const char *dom, const char *key, char *buf, size_t size)
{
	char k[64];
	snprintf(k, sizeof(k), "\n%s=", key);
	const char *at = strstr(dom, k);
	if (!at) {	/* the first line follows the element's start tag */
		snprintf(k, sizeof(k), ">%s=", key);
		at = strstr(dom, k);
	}
	assert_non_null(at);
	at += strlen(k);
	size_t n = strcspn(at, "\n");
	snprintf(buf, size, "%.*s", (int)(n < size ? n : size - 1), at);
	return buf;
}

static double result_number(const char *dom, const char *key)
{
	char buf[256];
	return strtod(result(dom, key, buf, sizeof(buf)), NULL);
}

/* report's Total share of function (its row "name (file)"), in percent. */
static double report_total(const struct pages *o, const char *profile, const char *function)
{
	char path[600], row[256];
	snprintf(path, sizeof(path), "%s/report.txt", o->dir);
	assert_int_equal(test_run("\"$HOSTPROF\" report --sort total -n 100 %s > %s", profile, path), 0);
	char *text = test_read_text(path);
	snprintf(row, sizeof(row), " %s (", function);
	double self = -1, total = -1;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (strstr(line, row) && sscanf(line, "%lf%% %lf%%", &self, &total) == 2)
			break;
	}
	free(text);
	assert_true(total >= 0);
	return total;
}

/* What the page holds names no resource: no URL, no src or href attribute. */
static void assert_self_contained(const char *path)
{
	char *html = test_read_text(path);
	assert_null(strstr(html, "://"));
	assert_null(strstr(html, "src="));
	assert_null(strstr(html, "href="));
	assert_null(strstr(html, "@import"));
	free(html);
}

static void screenshot(const struct pages *o, const char *page, const char *name)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/artifacts", test_build_dir());
	mkdir(dir, 0755);
	assert_int_equal(test_run(CHROMIUM " --window-size=%d,600 --screenshot=%s/%s file://%s/%s 2>> %s/chromium.log",
				  o->dir, WIDTH, dir, name, o->dir, page, o->dir), 0);
	char path[600];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 1000);
	fprintf(stderr, "screenshot: %s\n", path);
}

static void test_flame_page(void **state)
{
	struct pages *o = *state;
	char page[600], buf[4096];
	require_profiles(o);
	snprintf(page, sizeof(page), "%s/flame.html", o->dir);
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s --to html -o %s", o->base, page), 0);
	assert_self_contained(page);
	char *dom = run_harness(o->dir, "flame.html", "variable_part", "variable_leaf");
	assert_null(strstr(dom, "\nerror="));
	/* The fixture's functions are on the page, as text. */
	result(dom, "names", buf, sizeof(buf));
	for (const char *const *f = (const char *const[]){ "main", "steady_part", "steady_leaf", "variable_part",
							     "variable_leaf", NULL }; *f; f++) {
		char bar[64];
		snprintf(bar, sizeof(bar), "|%s|", *f);
		assert_non_null(strstr(buf, bar));
	}
	/* A click zooms: the frame takes the whole width; reset gives its width back. */
	double full = result_number(dom, "full"), before = result_number(dom, "before");
	fprintf(stderr, "full %.2f, variable_part before %.2f, zoomed %.2f, back %.2f\n", full, before,
		result_number(dom, "zoomed"), result_number(dom, "back"));
	assert_true(full > WIDTH - 50);
	assert_true(before > 0.3 * full && before < 0.7 * full);
	assert_true(result_number(dom, "zoomed") > full - 0.5 && result_number(dom, "zoomed") < full + 0.5);
	assert_true(result_number(dom, "back") > before - 0.5 && result_number(dom, "back") < before + 0.5);
	/* Search gives report's Total share. */
	result(dom, "match", buf, sizeof(buf));
	double shown = strtod(buf + strcspn(buf, "0123456789"), NULL), want = report_total(o, o->base, "variable_leaf");
	fprintf(stderr, "variable_leaf: page %.2f%%, report %.2f%%\n", shown, want);
	assert_true(shown > 30 && shown > want - 0.1 && shown < want + 0.1);
	/* Weighed by CPU time, per thread, the share stays (cpu-clock samples are of one period each). */
	double cpu = strtod(strchr(result(dom, "cpu", buf, sizeof(buf)), ':') + 1, NULL);
	double threads = strtod(strchr(result(dom, "threads", buf, sizeof(buf)), ':') + 1, NULL);
	fprintf(stderr, "variable_leaf: CPU time %.2f%%, per thread %.2f%%\n", cpu, threads);
	assert_true(cpu > want - 1 && cpu < want + 1 && threads > cpu - 0.01 && threads < cpu + 0.01);
	/* Nothing was loaded: no resource entry, and the proxy refused all anyway. */
	assert_int_equal((int)result_number(dom, "resources"), 0);
	free(dom);
	screenshot(o, "flame.html", "flame.png");
}

static void test_diff_page(void **state)
{
	struct pages *o = *state;
	char page[600], buf[1024];
	require_profiles(o);
	snprintf(page, sizeof(page), "%s/diff.html", o->dir);
	/* diff's exit status stays: 1, the regression; the page is written all the same. */
	assert_int_equal(test_run("\"$HOSTPROF\" diff --html %s %s %s > /dev/null", page, o->base, o->slow), 1);
	assert_self_contained(page);
	char *dom = run_harness(o->dir, "diff.html", "variable_leaf", "variable_leaf");
	assert_null(strstr(dom, "\nerror="));
	assert_string_equal(result(dom, "reddest", buf, sizeof(buf)), "variable_leaf");
	assert_string_equal(result(dom, "bluest", buf, sizeof(buf)), "steady_leaf");
	assert_non_null(strstr(result(dom, "verdict", buf, sizeof(buf)), "FAIL: "));
	assert_int_equal((int)result_number(dom, "resources"), 0);
	free(dom);
	screenshot(o, "diff.html", "diff.png");
	/* Past the change, the status is 0 and the page says OK. */
	assert_int_equal(test_run("\"$HOSTPROF\" diff --threshold 40 --html %s %s %s > /dev/null", page, o->base,
				  o->slow), 0);
	char *html = test_read_text(page);
	assert_non_null(strstr(html, "\"verdict\":\"OK: "));
	free(html);
}

/* A profile of 100,000 distinct stacks, 12 to 35 frames deep, over 2000 C++-like functions of four processes: the
 * outer levels shared by many stacks, the inner ones by few, as in a large program's profile. */
#define LARGE_STACKS 100000
#define LARGE_FUNCTIONS 2000
static void write_large_profile(const char *path)
{
	struct profile *p;
	uint32_t locs[LARGE_FUNCTIONS], stack[40];
	char name[160], file[64];
	assert_int_equal(profile_new(&p), 0);
	uint32_t map = tp_mapping(p, "/usr/lib/libserver.so");
	for (uint32_t i = 0; i < LARGE_FUNCTIONS; i++) {
		snprintf(name, sizeof(name), "server::module%u::Handler<std::string>::step%u(int, std::vector<int> const&)",
			 i % 37, i);
		snprintf(file, sizeof(file), "src/module%u.cc", i % 37);
		uint32_t fn = tp_function(p, name, file);
		locs[i] = tp_location(p, map, 0x1000 + 16 * i, PROFILE_FRAME_NATIVE,
				      &(struct profile_line){ .function = fn, .line = 10 + i % 90 }, 1);
	}
	for (uint32_t s = 0; s < LARGE_STACKS; s++) {
		uint32_t depth = 12 + s % 24;
		struct profile_stack st = { .nlocations = depth, .locations = stack };
		for (uint32_t level = 0; level < depth; level++) {	/* level 0 is the root, stack[] is leaf first */
			uint32_t shared = s >> (level < 17 ? 17 - level : 0);
			stack[depth - 1 - level] = locs[(shared * 2654435761u + level * 40503u) % LARGE_FUNCTIONS];
		}
		memcpy(st.trace_id, &s, sizeof(s));
		uint32_t index;
		assert_int_equal(profile_add_stack(p, &st, &index), 0);
		tp_sample(p, (struct profile_sample){ .stack = index, .pid = 1000 + s % 4, .tid = 1000 + s % 16,
						      .count = 1 + s % 7, .cpu_ns = (1 + s % 7) * 1000000ull },
			  "server", "worker");
	}
	assert_int_equal(profile_write_file(p, path), 0);
	profile_free(p);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* 100,000 stacks: the page opens, draws a bounded number of frames (the narrow ones merged) and stays usable. The
 * times are printed, not checked: this machine's other load decides them. */
static void test_large_page(void **state)
{
	struct pages *o = *state;
	char profile[600], page[600], buf[256];
	struct timespec t0;
	test_require_tool("command -v chromium", "chromium");
	snprintf(profile, sizeof(profile), "%s/large.msgpack", o->dir);
	snprintf(page, sizeof(page), "%s/large.html", o->dir);
	write_large_profile(profile);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s --to html -o %s", profile, page), 0);
	double convert = seconds_since(&t0);
	struct stat st;
	assert_int_equal(stat(page, &st), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	char *dom = run_harness(o->dir, "large.html", "", "");
	double browser = seconds_since(&t0);
	assert_null(strstr(dom, "\nerror="));
	double opened = result_number(dom, "opened"), elements = result_number(dom, "elements");
	fprintf(stderr, "100000 stacks: convert %.2f s, page %.1f MB, opened (read, parsed, drawn) in %.0f ms, %.0f "
			"frames drawn, chromium run %.2f s\n",
		convert, (double)st.st_size / 1e6, opened, elements, browser);
	assert_true(elements > 100 && elements < 20000);
	assert_true(result_number(dom, "merged") > 0);	/* runs of narrow frames drawn as one */
	assert_non_null(strstr(result(dom, "names", buf, sizeof(buf)), "|server [100"));	/* a process root */
	free(dom);
}

/* Frames of every kind, and off-CPU time: main > runtime.main (Go) > JS:handler (JIT) > schedule (kernel), 10
 * samples, 10 ms on CPU and 30 ms off it; main > work, 10 samples, 10 ms. */
static void write_kinds_profile(const char *path)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	uint32_t map = tp_mapping(p, "/bin/app"), loc[5];
	const char *names[] = { "main", "runtime.main", "JS:handler", "schedule", "work" };
	const uint8_t kinds[] = { PROFILE_FRAME_NATIVE, PROFILE_FRAME_GO, PROFILE_FRAME_JIT, PROFILE_FRAME_KERNEL,
				  PROFILE_FRAME_NATIVE };
	for (int i = 0; i < 5; i++)
		loc[i] = tp_location(p, map, 0x100 * (i + 1), kinds[i],
				     &(struct profile_line){ .function = tp_function(p, names[i], "app.c"), .line = i + 1 },
				     1);
	uint32_t waits = tp_stack(p, 1, (uint32_t[]){ loc[3], loc[2], loc[1], loc[0] }, 4);
	uint32_t works = tp_stack(p, 2, (uint32_t[]){ loc[4], loc[0] }, 2);
	tp_sample(p, (struct profile_sample){ .stack = waits, .pid = 7, .tid = 7, .count = 10, .cpu_ns = 10000000,
					      .off_cpu_ns = 30000000 }, "app", "app");
	tp_sample(p, (struct profile_sample){ .stack = works, .pid = 7, .tid = 7, .count = 10, .cpu_ns = 10000000 },
		  "app", "app");
	assert_int_equal(profile_write_file(p, path), 0);
	profile_free(p);
}

/* Each kind of frame is drawn as its kind; weighed by wall time, off-CPU time is an [off-CPU] frame over the stack
 * that waited, and search counts it with the stack. */
static void test_kinds_and_off_cpu(void **state)
{
	struct pages *o = *state;
	char profile[600], buf[4096];
	test_require_tool("command -v chromium", "chromium");
	snprintf(profile, sizeof(profile), "%s/kinds.msgpack", o->dir);
	write_kinds_profile(profile);
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s --to html --value wall -o %s/kinds.html", profile,
				  o->dir), 0);
	char *dom = run_harness(o->dir, "kinds.html", "", "");
	assert_null(strstr(dom, "\nerror="));
	result(dom, "kinds", buf, sizeof(buf));
	for (const char *const *k = (const char *const[]){ "|main:native|", "|runtime.main:Go|", "|JS:handler:JIT|",
							     "|schedule:kernel|", "|[off-CPU]:off-CPU|", "|work:native|",
							     NULL }; *k; k++)
		assert_non_null(strstr(buf, *k));
	double off = result_number(dom, "offcpu");
	fprintf(stderr, "[off-CPU]: %.2f%% of the width (want 60)\n", off);
	assert_true(off > 59.9 && off < 60.1);
	free(dom);
	/* Search share, weighed by wall time: schedule's stack, its off-CPU time included, is 40 of 50 ms. */
	dom = run_harness(o->dir, "kinds.html", "work", "schedule");
	double share = strtod(strchr(result(dom, "match", buf, sizeof(buf)), ':') + 1, NULL);
	assert_true(share > 79.99 && share < 80.01);
	free(dom);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flame_page),
		cmocka_unit_test(test_diff_page),
		cmocka_unit_test(test_large_page),
		cmocka_unit_test(test_kinds_and_off_cpu),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
