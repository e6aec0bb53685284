/*
 * test_python.c — Python frames of CPython 3.11 processes (src/processes/pyframes.h, src/pipeline/python_stack.h).
 *
 * The fixture tests/fixtures/python/split.py burns its CPU 2:1 (by its own CPU time) in two call paths under a few
 * levels of Python calls, one of them through json's C encoder; tests/fixtures/python/threads.py burns CPU in four
 * threads, each in a function of its own. The split runs under every CPython with a verified row on the machine:
 * Debian's /usr/bin/python3.11 (statically linked), pyenv's 3.11, 3.12 and 3.13 builds (libpython3.1X.so); one
 * that is not installed is left out, saying so.
 *
 * The oracle is py-spy (from PyPI, fetched once into the download cache: testlib.h), attached to the same process
 * as hostprof in the same run, without pausing it (--nonblocking) and without native frames: the two paths' shares
 * must agree within 3 points.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/profile/profile.h"
#include "tests/lib/testlib.h"

#define SPLIT_PY "tests/fixtures/python/split.py"
#define THREADS_PY "tests/fixtures/python/threads.py"

/* The CPython builds to try: Debian's 3.11 (which 0), pyenv's first 3.11 (1), 3.12 (2) and 3.13 (3: read through
 * the offsets the runtime describes itself with). */
static const char *const pythons[] = { "Debian's python3.11", "a pyenv CPython 3.11", "a pyenv CPython 3.12",
				       "a pyenv CPython 3.13" };

static int find_python(int which, const char *dir, char *path, size_t len)
{
	char file[700];
	int minor = which >= 2 ? 10 + which : 11;
	snprintf(file, sizeof(file), "%s/python", dir);
	char probe[300];
	if (which == 0)
		snprintf(probe, sizeof(probe), "p=/usr/bin/python3.11");
	else
		snprintf(probe, sizeof(probe), "p=$(ls -d $(pyenv root 2>/dev/null || echo /root/.pyenv)/versions/3.%d*/bin/"
			 "python3.%d 2>/dev/null | head -1)", minor, minor);
	if (test_run("%s; [ -x \"$p\" ] && \"$p\" -c 'import sys; sys.exit(sys.version_info[:2] != (3, %d))' && "
		     "echo \"$p\" > %s", probe, minor, file) != 0)
		return -1;
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	assert_non_null(fgets(path, (int)len, f));
	fclose(f);
	path[strcspn(path, "\n")] = '\0';
	return 0;
}

/* The line of file holding marker (1-based). */
static int64_t line_of(const char *file, const char *marker)
{
	char buf[512];
	int64_t n = 0;
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	while (fgets(buf, sizeof(buf), f)) {
		n++;
		if (strstr(buf, marker)) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	fail_msg("no %s in %s", marker, file);
	return 0;
}

static const char *fn_name(const struct profile *p, const struct profile_location *l, uint32_t j)
{
	return profile_string(p, p->functions.items[l->lines[j].function].name);
}

/* What the samples of a profile show of the fixture's Python frames. */
struct py_counts {
	uint64_t total;		/* samples */
	uint64_t to_module;	/* ... whose Python frames go down to the script's <module> */
	uint64_t a, b;		/* ... with split.burn_a, split.burn_b */
	uint64_t a_lines, a_burn;	/* burn_a frames, and of them at the burning line */
	uint64_t mixed;		/* samples with a native frame above split.burn_b (its C-extension call) */
};

static void count_split(const struct profile *p, int64_t burn_line, struct py_counts *c)
{
	memset(c, 0, sizeof(*c));
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const struct profile_stack *st = &p->stacks.items[s->stack];
		bool module = false, a = false, b = false, native_above_b = false, leafward_native = false;
		for (uint32_t k = 0; k < st->nlocations; k++) {	/* leaf first */
			const struct profile_location *l = &p->locations.items[st->locations[k]];
			if (l->frame_kind != PROFILE_FRAME_PYTHON) {
				leafward_native |= l->frame_kind == PROFILE_FRAME_NATIVE;
				continue;
			}
			for (uint32_t j = 0; j < l->nlines; j++) {
				const char *name = fn_name(p, l, j);
				module |= strcmp(name, "split.<module>") == 0;
				if (strcmp(name, "split.burn_a") == 0 && !a) {
					a = true;
					c->a_lines += s->count;
					c->a_burn += l->lines[j].line == burn_line ? s->count : 0;
				}
				if (strcmp(name, "split.burn_b") == 0) {
					b = true;
					native_above_b |= leafward_native;
				}
			}
		}
		c->total += s->count;
		c->to_module += module ? s->count : 0;
		c->a += a ? s->count : 0;
		c->b += b ? s->count : 0;
		c->mixed += native_above_b ? s->count : 0;
	}
}

/* "hostprof: python: N samples ..., U (X%) Python frames not trusted, R (Y%) not read in the fast lane": X (nth
 * 0) or Y (nth 1) from record's output in file. */
static double python_share(const char *file, int nth)
{
	char line[1024];
	double share = -1;
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		const char *at = strstr(line, "hostprof: python: ");
		const char *open = at ? strstr(at, "(") : NULL;
		if (open && nth)
			open = strstr(open + 1, "(");
		if (open)
			share = strtod(open + 1, NULL);
	}
	fclose(f);
	return share;
}

/* The fixture's "split: a A s b B s" line (in file.split): A's share of A + B. */
static double own_share(const char *log)
{
	char file[800], line[256];
	double a = 0, b = 0;
	snprintf(file, sizeof(file), "%s.split", log);
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "split: a %lf s b %lf s", &a, &b) == 2)
			break;
	fclose(f);
	assert_true(a + b > 0);
	return 100.0 * a / (a + b);
}

/* py-spy, fetched once from PyPI into the download cache; its path in path, or -1 saying why not. */
static int fetch_py_spy(char *path, size_t len)
{
	snprintf(path, len, "%s/pypi/py-spy/bin/py-spy", test_download_cache());
	if (access(path, X_OK) == 0)
		return 0;
	if (test_run("command -v pip3 >/dev/null || command -v pip >/dev/null") != 0) {
		test_skip_part("pip is not installed, cannot fetch py-spy from PyPI");
		return -1;
	}
	if (test_run("mkdir -p '%s/pypi' && t=$(mktemp -d '%s/pypi/py-spy.XXXXXX') && "
		     "{ timeout 300 $(command -v pip3 || command -v pip) install -q --disable-pip-version-check "
		     "--target \"$t\" py-spy 2>&1 | tail -3 >&2; [ -x \"$t/bin/py-spy\" ]; } && "
		     "{ mv -T \"$t\" '%s/pypi/py-spy' 2>/dev/null || rm -rf \"$t\"; }", test_download_cache(),
		     test_download_cache(), test_download_cache()) != 0 || access(path, X_OK) != 0) {
		test_skip_part("cannot fetch py-spy from PyPI (pip's message above)");
		return -1;
	}
	return 0;
}

/* py-spy's share of burn_a among burn_a and burn_b, from its raw (collapsed) output; -1 without samples. */
static double py_spy_share(const char *file)
{
	char line[8192];
	uint64_t a = 0, b = 0;
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		const char *sp = strrchr(line, ' ');
		uint64_t n = sp ? strtoull(sp + 1, NULL, 10) : 0;
		a += strstr(line, "burn_a (") ? n : 0;
		b += strstr(line, "burn_b (") ? n : 0;
	}
	fclose(f);
	fprintf(stderr, "py-spy: burn_a %llu, burn_b %llu samples\n", (unsigned long long)a, (unsigned long long)b);
	return a + b ? test_share(a, a + b) : -1;
}

/*
 * The split fixture under one interpreter: hostprof records it by pid while py-spy samples it too. Shares within
 * 6 points of 2:1 and within 3 of py-spy's, >= 95% of samples with Python frames down to <module>, burn_a's frames
 * at its loop, the C extension's native frames above Python ones, <= 2% not trusted.
 */
static void split_under(struct test_workdir *w, int which)
{
	char python[600], spy[700], log[700], spy_out[700];
	if (find_python(which, w->dir, python, sizeof(python)) < 0) {
		test_skip_part("%s is not installed", pythons[which]);
		return;
	}
	bool oracle = fetch_py_spy(spy, sizeof(spy)) == 0;
	snprintf(log, sizeof(log), "%s/record.log", w->dir);
	snprintf(spy_out, sizeof(spy_out), "%s/py-spy.txt", w->dir);
	fprintf(stderr, "%s\n", python);
	/* Recorded from its start (by pid: the same process for both); py-spy attaches as soon as it can. */
	char spy_cmd[1500] = "true";
	if (oracle)
		snprintf(spy_cmd, sizeof(spy_cmd), "%s record --nonblocking -r 799 -f raw -o %s -p $P >/dev/null 2>&1", spy,
			 spy_out);
	assert_int_equal(test_run("%s %s 8 2>%s.split & P=$!; \"$HOSTPROF\" record -v -F 799 -p $P -o %s 2>%s & H=$!; %s; "
				  "wait $P; wait $H; cat %s %s.split >&2", python, SPLIT_PY, log, w->out, log, spy_cmd, log,
				  log), 0);
	struct profile *p = test_read_profile(w->out);
	int64_t burn = line_of(SPLIT_PY, "# burn_a line");
	struct py_counts c;
	count_split(p, burn, &c);
	double share = test_share(c.a, c.a + c.b), untrusted = python_share(log, 0), unread = python_share(log, 1);
	fprintf(stderr, "hostprof: %llu samples, %.1f%% to <module>, burn_a %.1f%% of the two paths, burn_a at line "
			"%lld %.1f%%, %llu with native frames above burn_b, %.2f%% not trusted, %.2f%% not read\n",
		(unsigned long long)c.total, test_share(c.to_module, c.total), share, (long long)burn,
		test_share(c.a_burn, c.a_lines), (unsigned long long)c.mixed, untrusted, unread);
	assert_true(c.total >= 500);
	assert_true(test_share(c.to_module, c.total) >= 95.0);
	assert_true(share >= 66.7 - 6 && share <= 66.7 + 6);
	assert_true(test_share(c.a_burn, c.a_lines) >= 50.0);
	assert_true(c.mixed > 0);
	assert_true(untrusted >= 0 && untrusted <= 2.0);
	assert_true(unread >= 0 && unread <= 2.0);	/* attached to: in the fast lane from the first sample */
	/* The fixture's own account of its CPU time (time.thread_time() around each call): deterministic. */
	double own = own_share(log);
	fprintf(stderr, "fixture: burn_a %.1f%% of the two paths by its own CPU time\n", own);
	assert_true(share >= own - 6 && share <= own + 6);
	/* Every output names the frames, OTLP with their frame type. */
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s --to collapsed | grep -q "
				  "'split.<module>;split.main;split.path_a;split.step_a;split.burn_a' && "
				  "\"$HOSTPROF\" convert %s --to otlp -o %s/p.otlp && grep -aq cpython %s/p.otlp && "
				  "grep -aq split.burn_b %s/p.otlp && \"$HOSTPROF\" convert %s --to pprof -o %s/p.pb.gz && "
				  "zcat %s/p.pb.gz | grep -aq split.step_b && "
				  "\"$HOSTPROF\" convert %s --to speedscope -o %s/p.json && "
				  "grep -q '\"name\":\"split.burn_a\",\"file\":\"[^\"]*split.py\"' %s/p.json",
				  w->out, w->out, w->dir, w->dir, w->dir, w->out, w->dir, w->dir, w->out, w->dir, w->dir), 0);
	if (oracle) {
		double spy_share = py_spy_share(spy_out);
		fprintf(stderr, "py-spy: burn_a %.1f%% of the two paths (hostprof %.1f%%)\n", spy_share, share);
		assert_true(spy_share >= 0);
		/* Within 3 points of py-spy, unless py-spy is the one off: it samples wall time, and on this fixture
		 * alone (no hostprof) it gave burn_a 68.7% where the fixture's CPU-time account said 66.6%; in the
		 * test it ran 66.3-69.2% against 66.7%, and 2 runs of 5 fell 3.1-3.4 points from hostprof's
		 * 65.7-66.1%. A larger gap passes only when the deterministic account says hostprof is within
		 * 1.5 points of the truth and nearer to it than py-spy. */
		bool near = spy_share >= share - 3 && spy_share <= share + 3;
		bool spy_off = fabs(share - own) <= 1.5 && fabs(share - own) < fabs(spy_share - own);
		if (!near)
			fprintf(stderr, "py-spy %.1f points from hostprof; the fixture's account: hostprof %.1f points off, "
					"py-spy %.1f\n", fabs(spy_share - share), fabs(share - own), fabs(spy_share - own));
		assert_true(near || spy_off);
		assert_true(spy_share >= share - 5 && spy_share <= share + 5);
	}
	profile_free(p);
}

static void test_split_debian(void **state)
{
	test_require_perf();
	split_under(*state, 0);
}

static void test_split_pyenv(void **state)
{
	test_require_perf();
	split_under(*state, 1);
}

static void test_split_312(void **state)
{
	test_require_perf();
	split_under(*state, 2);
}

static void test_split_313(void **state)
{
	test_require_perf();
	split_under(*state, 3);
}

/*
 * A command that execs the interpreter from a shell (as pyenv's shims do), whose libpython the dynamic loader maps
 * after the exec: the process's first samples, taken before libpython was mapped, find no CPython; it is looked
 * at again once it maps code, and its Python frames are read from then on (it once stayed "no CPython" for its
 * life). Its samples before it took the fast lane are those taken before its first ones were handled, which
 * record drains every few ms while a run starts.
 */
static void test_command_through_shell(void **state)
{
	struct test_workdir *w = *state;
	char python[600], log[600];
	test_require_perf();
	if (find_python(1, w->dir, python, sizeof(python)) < 0)
		test_skip("no CPython 3.11 with a shared libpython (pyenv's) is installed");
	if (test_run("ldd '%s' | grep -q libpython", python) != 0)
		test_skip("this CPython 3.11 has no shared libpython");
	snprintf(log, sizeof(log), "%s/record.log", w->dir);
	assert_int_equal(test_run("\"$HOSTPROF\" record -v -F 499 -o %s -- sh -c 'exec \"$0\" \"$1\" 2' '%s' %s 2>%s",
				  w->out, python, SPLIT_PY, log), 0);
	double unread = python_share(log, 1);
	fprintf(stderr, "python through a shell's exec: %.2f%% of its samples not read in the fast lane\n", unread);
	assert_true(unread >= 0 && unread <= 5.0);	/* a run's first samples are handled within ms (record.c) */
	struct profile *p = test_read_profile(w->out);
	struct py_counts c;
	count_split(p, line_of(SPLIT_PY, "# burn_a line"), &c);
	profile_free(p);
	fprintf(stderr, "python through a shell's exec: %.1f%% of %llu samples to <module>\n",
		test_share(c.to_module, c.total), (unsigned long long)c.total);
	assert_true(c.a > 0 && test_share(c.to_module, c.total) >= 80.0);
}

/* Four threads: each thread's samples show its own worker function, and only it. */
static void test_threads(void **state)
{
	struct test_workdir *w = *state;
	char python[600];
	test_require_perf();
	if (find_python(0, w->dir, python, sizeof(python)) < 0 && find_python(1, w->dir, python, sizeof(python)) < 0)
		test_skip("no CPython 3.11 is installed");
	/* Attached to (-p), as the split test: a command's first batch is read before it takes the fast lane. */
	assert_int_equal(test_run("%s %s 1 & P=$!; \"$HOSTPROF\" record -F 499 -p $P -o %s; wait $P", python, THREADS_PY,
				  w->out), 0);
	struct profile *p = test_read_profile(w->out);
	/* tid -> worker seen (bits), and its samples with a worker and with another one. */
	struct { int32_t tid; unsigned workers; uint64_t with, samples; } t[16] = { 0 };
	unsigned nt = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const struct profile_stack *st = &p->stacks.items[s->stack];
		unsigned seen = 0;
		for (uint32_t k = 0; k < st->nlocations; k++) {
			const struct profile_location *l = &p->locations.items[st->locations[k]];
			for (uint32_t j = 0; j < l->nlines && l->frame_kind == PROFILE_FRAME_PYTHON; j++) {
				const char *name = fn_name(p, l, j);
				if (strncmp(name, "threads.worker_", 15) == 0 && name[15] >= '0' && name[15] <= '3')
					seen |= 1u << (name[15] - '0');
			}
		}
		unsigned k = 0;
		while (k < nt && t[k].tid != s->tid)
			k++;
		if (k == nt && nt < 16)
			t[nt++].tid = s->tid;
		if (k < 16) {
			t[k].samples += s->count;
			if (seen) {
				t[k].workers |= seen;
				t[k].with += s->count;
			}
		}
	}
	unsigned all = 0, workers = 0;
	for (unsigned k = 0; k < nt; k++) {
		if (!t[k].with)
			continue;
		fprintf(stderr, "tid %d: %llu of %llu samples in workers %#x\n", (int)t[k].tid,
			(unsigned long long)t[k].with, (unsigned long long)t[k].samples, t[k].workers);
		assert_int_equal(__builtin_popcount(t[k].workers), 1);	/* one worker per thread, never another's */
		assert_true(t[k].with >= 100);
		assert_true(test_share(t[k].with, t[k].samples) >= 95.0);
		all |= t[k].workers;
		workers++;
	}
	assert_int_equal(workers, 4);
	assert_int_equal(all, 0xf);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_split_debian, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_split_pyenv, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_split_312, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_split_313, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_command_through_shell, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_threads, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
