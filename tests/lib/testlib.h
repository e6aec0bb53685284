/*
 * testlib.h — helpers for hostprof's integration tests: running commands and querying a profile.
 *
 * Paths: tests run from the repository root; fixtures live in $BUILD/fixtures (BUILD defaults to "build").
 * Function names in queries are compared against each location line's function name; stacks are walked from
 * the root (outermost frame) to the leaf, inline frames expanded outer first.
 */
#ifndef HOSTPROF_TESTLIB_H
#define HOSTPROF_TESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/profile/profile.h"

/* The build tree: $BUILD, else "build". */
const char *test_build_dir(void);
/* "$BUILD/fixtures/name" in a static buffer of the caller's. */
/* Where test subjects fetched from registries (npm packages) are kept between runs, outside the clone:
 * $HOSTPROF_TEST_CACHE, else $XDG_CACHE_HOME/hostprof-tests, else ~/.cache/hostprof-tests (bench/run-bench reads
 * the same place). */
const char *test_download_cache(void);
const char *test_fixture_path(const char *name, char *buf, size_t len);
/* The hostprof binary under test: $HOSTPROF, else ./hostprof (exported so commands can use "$HOSTPROF"). */
const char *test_hostprof(void);
/* A fresh temporary directory (removed by test_rmdir_rf). */
char *test_mkdtemp(void);
void test_rmdir_rf(const char *dir);

/*
 * Skipping. A test that cannot run on this machine says why, and only through these functions: each skipped test
 * prints exactly one line "SKIP: <reason>" (a part of a test left out, the rest still checked: "SKIP part:
 * <reason>"). tests/run-tests fails a test program whose cmocka skips outnumber or fall short of its reasons,
 * and, with CI=true, any reason that does not begin with a line of tests/allowed-skips: a CI machine has every
 * tool `make deps` installs, so only what its kernel or user decides may skip a test there.
 */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void test_skip_part(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Requirements: each returns when it holds and skips the test, with the reason given here, when it does not. */
void test_require_perf(void);		/* "the kernel refuses perf_event_open here (<errno text>)" */
void test_require_go(void);		/* "the go tool is not installed" */
/* probe: a shell command that succeeds when the tool is there; "<what> is not installed". */
void test_require_tool(const char *probe, const char *what);
void test_require_root(const char *why);	/* "needs root: <why>" */
void test_require_non_root(const char *why);	/* "needs a non-root user: <why>" */

/* Whether the kernel lets this process sample itself with user stacks (errno says why not). Prints nothing. */
bool test_perf_available(void);
/* Build tests/fixtures/go/<pkg> into <dir>/<out> (cgo on or off, -ldflags ldflags), caches under $BUILD, no
 * network; fails the test if the build fails. With the go on PATH, or (test_go_build_with) the go command given. */
void test_go_build(const char *dir, const char *pkg, const char *out, int cgo, const char *ldflags);
void test_go_build_with(const char *go, const char *dir, const char *pkg, const char *out, int cgo,
			const char *ldflags);

/* What test_perf_children_share() asks perf. */
struct test_perf_query {
	const char *cmd;	/* shell command line recorded into dir; NULL: nothing is recorded, the report the
				 * last query with a command wrote in dir is read again */
	const char *callgraph;	/* perf's --call-graph: NULL for "dwarf,16384"; "fp" for code without unwind
				 * tables (JIT code) */
	const char *symbol;	/* the symbol whose share is returned */
	bool contains;		/* sum over every symbol that contains symbol (a JIT function has one symbol per
				 * compilation: "JS:*f a.js:1:2", "JS:^f a.js:1:2"); false: the one named symbol */
};
/*
 * The independent oracle: record q->cmd with `perf record --call-graph` into dir and return the share of samples
 * (0..100) whose stack holds q->symbol, as `perf report --children` shows it (perf demangles C++ and Rust
 * itself); 0 when perf shows no such symbol. Returns -1, saying why, where perf is missing or refuses (and when
 * a query without a command finds no report).
 */
double test_perf_children_share(const char *dir, const struct test_perf_query *q);

/* Run a shell command line; returns its exit status (or -1). Output goes to the test's output. */
int test_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Start argv[0] (a path) with argv in a child, its stderr appended to log (NULL: left as it is): its pid, for the
 * caller to wait for (126: log could not be opened, 127: not executed). The child is killed when the test binary
 * exits, if it has not exited by then. */
pid_t test_spawn(char *const argv[], const char *log);

/* The perf-event descriptors process pid holds (/proc/PID/fd). */
unsigned test_perf_event_fds(pid_t pid);
/* The same once the count has held for two reads 1.5 s apart (a profiler closes exited threads' events once a
 * second), at most ~10 s. */
unsigned test_settled_perf_event_fds(pid_t pid);

/* The number that regex's first group (a sed basic regular expression matching a whole line) captures in the last
 * line of the file at path that it matches: a log's latest count. -1 if no line matches. */
long long test_last_number_in_log(const char *path, const char *regex);

/* A whole text file as a malloc'd string ("" when it is empty); fails the test when it cannot be opened. */
char *test_read_text(const char *path);
/* Write text as the whole of the file at path (created or truncated); fails the test when it cannot. */
void test_write_text(const char *path, const char *text);

/* Read a profile or fail the test with the reader's message. */
struct profile *test_read_profile(const char *path);

/* A test's own temporary directory and the profile path in it ("<dir>/profile.msgpack"). */
struct test_workdir {
	char *dir;
	char out[512];
};
/* cmocka setup/teardown: *state becomes a fresh struct test_workdir; teardown removes the directory. */
int test_workdir_setup(void **state);
int test_workdir_teardown(void **state);

/* part as a percentage of total (0 when total is 0). */
double test_share(uint64_t part, uint64_t total);
/* The share record's summary line gives ("..., 98.6% unwound completely; ..."), or -1 if line gives none. */
double test_summary_complete(const char *line);

/* Root-first function names of a stack (inline frames expanded, outer first); returns the count. */
size_t test_stack_functions(const struct profile *p, uint32_t stack, const char **names, size_t max);

/* Whether a stack has an error frame ([truncated], [unknown], ...). */
int test_stack_has_error(const struct profile *p, uint32_t stack);

/* Sum of counts over all samples, or over samples matching (pid == 0 means any). */
uint64_t test_total_samples(const struct profile *p);
/* Samples whose stack contains the names as a contiguous root-to-leaf call chain. */
uint64_t test_samples_with_chain(const struct profile *p, const char *const *chain, size_t n);
/* Samples whose stack contains function name anywhere. */
uint64_t test_samples_with_function(const struct profile *p, const char *name);
/* Samples whose stack has no error frame and reaches one of the root names (e.g. "main", "start_thread"). */
uint64_t test_samples_complete_to(const struct profile *p, const char *const *roots, size_t nroots);
/* Distinct tids (and thread names containing prefix) seen in samples. */
size_t test_distinct_tids(const struct profile *p, const char *thread_name_prefix);

#endif
