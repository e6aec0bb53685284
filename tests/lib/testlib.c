/* testlib.c — see testlib.h. */
#include "tests/lib/testlib.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_NAMES 4096	/* deeper than any stack a session keeps by default (1024 frames) */

const char *test_build_dir(void)
{
	const char *build = getenv("BUILD");
	return build && *build ? build : "build";
}

const char *test_download_cache(void)
{
	static char dir[512];
	const char *over = getenv("HOSTPROF_TEST_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (!dir[0]) {
		if (over && *over)
			snprintf(dir, sizeof(dir), "%s", over);
		else if (xdg && *xdg)
			snprintf(dir, sizeof(dir), "%s/hostprof-tests", xdg);
		else
			snprintf(dir, sizeof(dir), "%s/.cache/hostprof-tests", home && *home ? home : "/tmp");
	}
	return dir;
}

const char *test_fixture_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/fixtures/%s", test_build_dir(), name);
	return buf;
}

const char *test_hostprof(void)
{
	const char *bin = getenv("HOSTPROF");
	if (!bin || !*bin) {
		setenv("HOSTPROF", "./hostprof", 1);
		bin = getenv("HOSTPROF");
	}
	return bin;
}

char *test_mkdtemp(void)
{
	char *dir = strdup("/tmp/hostprof-test-XXXXXX");
	if (!dir || !mkdtemp(dir)) {
		free(dir);
		return NULL;
	}
	return dir;
}

void test_rmdir_rf(const char *dir)
{
	char cmd[512];
	if (!dir || strncmp(dir, "/tmp/hostprof-test-", 19) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "testlib: could not remove %s\n", dir);
}

int test_run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	test_hostprof(); /* commands refer to "$HOSTPROF" */
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fprintf(stderr, "+ %s\n", cmd);
	int status = system(cmd);
	if (status == -1 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Record cmd with perf and the call graph asked for into dir, and write its --children report there. */
static int perf_record_report(const char *dir, const char *callgraph, const char *cmd)
{
	/* A comparison left out says so: with CI=true that fails the run (tests/run-tests), as perf is a test tool
	 * make deps installs. */
	if (test_run("command -v perf >/dev/null") != 0) {
		test_skip_part("perf is not installed: no comparison with perf (make deps installs linux-perf)");
		return -1;
	}
	if (test_run("perf record -q -F 999 --call-graph %s -o %s/perf.data -- %s >/dev/null 2>&1", callgraph, dir,
		     cmd) != 0 ||
	    test_run("perf report -i %s/perf.data --stdio --children --sort sym -q 2>/dev/null > %s/perf.report", dir,
		     dir) != 0) {
		test_skip_part("perf record or perf report failed: no comparison with perf (see above)");
		return -1;
	}
	return 0;
}

/*
 * The share with children of symbol in dir's report: the first entry named symbol (whole), or the sum over every
 * entry whose name contains it (!whole). -1 when there is no report.
 */
static double report_share(const char *dir, const char *symbol, bool whole)
{
	char out[512], line[4096];
	snprintf(out, sizeof(out), "%s/perf.report", dir);
	FILE *f = fopen(out, "re");
	if (!f)
		return -1;
	double total = 0, share;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		/* "  98.81%     0.60%  [.] name": the first column is the share with children */
		const char *sym = strstr(line, "[.] ");
		if (!sym || sscanf(line, " %lf%%", &share) != 1)
			continue;
		if (whole && strcmp(sym + 4, symbol) == 0) {
			total = share;
			break;
		}
		if (!whole && strstr(sym + 4, symbol))
			total += share;
	}
	fclose(f);
	return total;
}

double test_perf_children_share(const char *dir, const struct test_perf_query *q)
{
	if (q->cmd && perf_record_report(dir, q->callgraph ? q->callgraph : "dwarf,16384", q->cmd) < 0)
		return -1;
	return report_share(dir, q->symbol, !q->contains);
}

/* One line "<prefix>: <reason>" on stderr, which tests/run-tests reads. */
static void print_reason(const char *prefix, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void test_skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	print_reason("SKIP", fmt, ap);
	va_end(ap);
	skip();
	abort();	/* cmocka's skip() does not return */
}

void test_skip_part(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	print_reason("SKIP part", fmt, ap);
	va_end(ap);
}

void test_require_perf(void)
{
	if (!test_perf_available())
		test_skip("the kernel refuses perf_event_open here (%s)", strerror(errno));
}

void test_require_go(void)
{
	test_require_tool("command -v go", "the go tool");
}

void test_require_tool(const char *probe, const char *what)
{
	if (test_run("(%s) >/dev/null 2>&1", probe) != 0)
		test_skip("%s is not installed", what);
}

void test_require_root(const char *why)
{
	if (geteuid() != 0)
		test_skip("needs root: %s", why);
}

void test_require_non_root(const char *why)
{
	if (geteuid() == 0)
		test_skip("needs a non-root user: %s", why);
}

/* The caches are made absolute because go runs from the module directory. */
void test_go_build(const char *dir, const char *pkg, const char *out, int cgo, const char *ldflags)
{
	test_go_build_with("go", dir, pkg, out, cgo, ldflags);
}

void test_go_build_with(const char *go, const char *dir, const char *pkg, const char *out, int cgo,
			const char *ldflags)
{
	assert_int_equal(test_run("b=$(realpath -m '%s') && cd tests/fixtures/go && "
				  "GOCACHE=\"$b/go-cache\" GOPATH=\"$b/go-path\" GOFLAGS=-mod=mod GOTOOLCHAIN=local "
				  "GOPROXY=off CGO_ENABLED=%d '%s' build -ldflags='%s' -o %s/%s ./%s",
				  test_build_dir(), cgo, go, ldflags, dir, out, pkg), 0);
}

void test_write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	if (!f)
		fail_msg("cannot create %s: %s", path, strerror(errno));
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

pid_t test_spawn(char *const argv[], const char *log)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* A test that fails before it stops its daemon must not leave it sampling the machine for the tests after
		 * it (two such daemons made test_apm's agent receive their counts too): it goes with the test binary. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(125);
		if (log && !freopen(log, "a", stderr))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

unsigned test_perf_event_fds(pid_t pid)
{
	char dir[64], path[PATH_MAX], target[128];
	unsigned n = 0;
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ssize_t len = readlink(path, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = '\0';
			n += strcmp(target, "anon_inode:[perf_event]") == 0;
		}
	}
	closedir(d);
	return n;
}

unsigned test_settled_perf_event_fds(pid_t pid)
{
	unsigned last = test_perf_event_fds(pid), now = last;
	for (int i = 0; i < 7; i++) {
		usleep(1500 * 1000);
		now = test_perf_event_fds(pid);
		if (now == last)
			break;
		last = now;
	}
	return now;
}

long long test_last_number_in_log(const char *path, const char *regex)
{
	char cmd[1024], line[64] = "";
	snprintf(cmd, sizeof(cmd), "sed -n 's/%s/\\1/p' '%s' | tail -n 1", regex, path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char *got = fgets(line, sizeof(line), p);
	pclose(p);
	return got && line[0] >= '0' && line[0] <= '9' ? atoll(line) : -1;
}

char *test_read_text(const char *path)
{
	FILE *f = fopen(path, "re");
	char *text = NULL;
	size_t cap = 0;
	if (!f)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	if (getdelim(&text, &cap, '\0', f) < 0) {
		free(text);
		text = strdup("");
	}
	fclose(f);
	assert_non_null(text);
	return text;
}

struct profile *test_read_profile(const char *path)
{
	struct profile *p = NULL;
	char err[256] = "";
	int rc = profile_read_file(path, &p, err, sizeof(err));
	if (rc < 0)
		fail_msg("cannot read profile %s: %s", path, err);
	return p;
}

size_t test_stack_functions(const struct profile *p, uint32_t stack, const char **names, size_t max)
{
	const struct profile_stack *st = &p->stacks.items[stack];
	size_t n = 0;
	for (uint32_t i = st->nlocations; i-- > 0;) {
		const struct profile_location *loc = &p->locations.items[st->locations[i]];
		for (uint32_t j = loc->nlines; j-- > 0 && n < max;) {
			const struct profile_function *f = &p->functions.items[loc->lines[j].function];
			names[n++] = profile_string(p, f->name);
		}
	}
	return n;
}

uint64_t test_total_samples(const struct profile *p)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < p->samples.count; i++)
		total += p->samples.items[i].count;
	return total;
}

static int has_chain(const char **names, size_t n, const char *const *chain, size_t nchain)
{
	for (size_t start = 0; start + nchain <= n; start++) {
		size_t k = 0;
		while (k < nchain && strcmp(names[start + k], chain[k]) == 0)
			k++;
		if (k == nchain)
			return 1;
	}
	return 0;
}

uint64_t test_samples_with_chain(const struct profile *p, const char *const *chain, size_t nchain)
{
	const char *names[MAX_NAMES];
	uint64_t total = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		size_t n = test_stack_functions(p, p->samples.items[i].stack, names, MAX_NAMES);
		if (has_chain(names, n, chain, nchain))
			total += p->samples.items[i].count;
	}
	return total;
}

uint64_t test_samples_with_function(const struct profile *p, const char *name)
{
	return test_samples_with_chain(p, &name, 1);
}

int test_stack_has_error(const struct profile *p, uint32_t stack)
{
	const struct profile_stack *st = &p->stacks.items[stack];
	for (uint32_t i = 0; i < st->nlocations; i++) {
		if (p->locations.items[st->locations[i]].frame_kind & PROFILE_FRAME_ERROR)
			return 1;
	}
	return 0;
}

uint64_t test_samples_complete_to(const struct profile *p, const char *const *roots, size_t nroots)
{
	const char *names[MAX_NAMES];
	uint64_t total = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		if (test_stack_has_error(p, s->stack))
			continue;
		size_t n = test_stack_functions(p, s->stack, names, MAX_NAMES);
		int found = 0;
		for (size_t j = 0; j < n && !found; j++) {
			for (size_t r = 0; r < nroots && !found; r++)
				found = strcmp(names[j], roots[r]) == 0;
		}
		if (found)
			total += s->count;
	}
	return total;
}

size_t test_distinct_tids(const struct profile *p, const char *prefix)
{
	int32_t seen[4096];
	size_t n = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const char *tname = profile_string(p, s->thread_name);
		if (prefix && strncmp(tname, prefix, strlen(prefix)) != 0)
			continue;
		size_t j = 0;
		while (j < n && seen[j] != s->tid)
			j++;
		if (j == n && n < 4096)
			seen[n++] = s->tid;
	}
	return n;
}

bool test_perf_available(void)
{
	struct perf_event_attr a = { 0 };
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.sample_period = 1000000;
	a.sample_type = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = 0xff;
	a.sample_stack_user = 8192;
	a.exclude_kernel = 1;
	a.disabled = 1;
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	if (fd < 0)
		return false;
	close((int)fd);
	return true;
}

int test_workdir_setup(void **state)
{
	struct test_workdir *w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	w->dir = test_mkdtemp();
	snprintf(w->out, sizeof(w->out), "%s/profile.msgpack", w->dir);
	*state = w;
	return w->dir ? 0 : -1;
}

int test_workdir_teardown(void **state)
{
	struct test_workdir *w = *state;
	/* HOSTPROF_TEST_KEEP=1 keeps the directory (its profile, inputs, logs) to look at after a run. */
	const char *keep = getenv("HOSTPROF_TEST_KEEP");
	if (keep && *keep && strcmp(keep, "0") != 0)
		fprintf(stderr, "kept %s\n", w->dir);
	else
		test_rmdir_rf(w->dir);
	free(w->dir);
	free(w);
	return 0;
}

double test_share(uint64_t part, uint64_t total)
{
	return total ? 100.0 * (double)part / (double)total : 0.0;
}

double test_summary_complete(const char *line)
{
	const char *end = strstr(line, "% unwound completely"), *p = end;
	while (p && p > line && (p[-1] == '.' || (p[-1] >= '0' && p[-1] <= '9')))
		p--;
	return p && p < end ? strtod(p, NULL) : -1;
}
