/*
 * Integration tests on JIT runtimes, run at test time: node with a perf map (--perf-basic-prof) and with a
 * jitdump file (--perf-prof) on a JavaScript hot loop, and a JVM that writes its perf map only as it exits
 * (-XX:+DumpPerfMapAtExit), with and without -XX:+PreserveFramePointer. hostprof must name the JIT frames and
 * walk through them to their native callers, and must not walk through JIT code that keeps no frame pointers.
 * Each is compared with perf on the same program (`perf record --call-graph fp`, which walks JIT code the same
 * way). They skip, saying why, only where the kernel refuses perf_event_open or node / java is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

/* Five seconds: the first seconds' samples may be lost while hostprof builds the node binary's unwind table. */
static const char hot_js[] =
	"function hotLoop(n) {\n"
	"  let s = 0;\n"
	"  for (let i = 0; i < n; i++) s = (s + i * i) % 1000003;\n"
	"  return s;\n"
	"}\n"
	"function caller() {\n"
	"  let t = 0;\n"
	"  const end = Date.now() + 5000;\n"
	"  while (Date.now() < end) t += hotLoop(100000);\n"
	"  return t;\n"
	"}\n"
	"console.log(caller());\n";

static const char hot_java[] =
	"public class Hot {\n"
	"    static long f(long n) {\n"
	"        long s = 0;\n"
	"        for (long i = 0; i < n; i++) s = (s * 31 + i) % 1000003;\n"
	"        return s;\n"
	"    }\n"
	"    public static void main(String[] a) {\n"
	"        long end = System.currentTimeMillis() + 3000, t = 0;\n"
	"        while (System.currentTimeMillis() < end) t += f(100000);\n"
	"        System.out.println(t);\n"
	"    }\n"
	"}\n";

static int have_tool(const char *probe, const char *what)
{
	if (test_run("%s >/dev/null 2>&1", probe) == 0)
		return 1;
	fprintf(stderr, "SKIP: %s is not installed\n", what);
	return 0;
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* cmd run so that its pid is in <dir>/pid (it execs), from dir; its perf map is removed afterwards. */
static void command_line(char *out, size_t len, const char *dir, const char *cmd)
{
	snprintf(out, len, "sh -c 'cd %s && echo $$ > pid && exec %s'", dir, cmd);
}

static void remove_perf_map(const char *dir)
{
	test_run("rm -f /tmp/perf-$(cat %s/pid).map", dir);
}

/* The name of a location's (physical) function, "" if none. */
static const char *location_name(const struct profile *p, uint32_t loc)
{
	const struct profile_location *l = &p->locations.items[loc];
	if (!l->nlines)
		return "";
	return profile_string(p, p->functions.items[l->lines[l->nlines - 1].function].name);
}

struct jit_counts {
	uint64_t total;
	uint64_t named;		/* samples with a JIT frame whose name contains the part asked for */
	uint64_t complete;	/* ... of them without an error frame and reaching the root asked for */
	uint64_t after_leaf;	/* ... of them with a frame above the JIT function's leaf frame other than an error */
	uint32_t source_line;	/* a line the JIT frame carried (jitdump debug information), 0 if none */
	const char *source;
};

static void count_jit(const struct profile *p, const char *part, const char *root, struct jit_counts *c)
{
	memset(c, 0, sizeof(*c));
	c->total = test_total_samples(p);
	c->source = "";
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const struct profile_stack *st = &p->stacks.items[s->stack];
		int at = -1, rooted = 0;
		for (uint32_t k = 0; k < st->nlocations; k++) {
			const struct profile_location *l = &p->locations.items[st->locations[k]];
			const char *name = location_name(p, st->locations[k]);
			if (at < 0 && l->frame_kind == PROFILE_FRAME_JIT && strstr(name, part)) {
				at = (int)k;
				if (l->nlines && l->lines[0].line) {
					c->source_line = (uint32_t)l->lines[0].line;
					c->source = profile_string(p, p->functions.items[l->lines[0].function].filename);
				}
			}
			rooted |= strcmp(name, root) == 0;
		}
		if (at < 0)
			continue;
		c->named += s->count;
		if (rooted && !test_stack_has_error(p, s->stack))
			c->complete += s->count;
		const struct profile_location *next =
			(uint32_t)at + 1 < st->nlocations ? &p->locations.items[st->locations[at + 1]] : NULL;
		if (next && !(next->frame_kind & PROFILE_FRAME_ERROR))
			c->after_leaf += s->count;
	}
}

static void report(const char *what, const struct jit_counts *c, const char *root)
{
	fprintf(stderr, "%s: %llu samples, %.1f%% in the JIT function, %.1f%% of those complete to %s\n", what,
		(unsigned long long)c->total, test_share(c->named, c->total), test_share(c->complete, c->named), root);
}

/* Our share of the JIT function (and of complete stacks) next to perf's, recorded the way JIT code is walked. */
static void compare_with_perf(const char *dir, const char *cmd, const struct jit_counts *c, const char *part,
			      const char *root)
{
	double perf = test_perf_children_share_like(dir, "fp", cmd, part);
	double perf_root = perf >= 0 ? test_perf_children_share_like(dir, NULL, NULL, root) : -1;
	remove_perf_map(dir);
	fprintf(stderr, "%s: hostprof %.1f%% (%.1f%% of all samples complete to %s), perf record --call-graph fp "
			"%.1f%% (%.1f%% under %s)\n", part, test_share(c->named, c->total),
		test_share(c->complete, c->total), root, perf, perf_root, root);
	if (perf >= 0)
		assert_true(perf >= 50.0);	/* the oracle sees the same program */
}

static struct profile *record_node(struct test_workdir *w, const char *flags, char *cmd, size_t len)
{
	char node[200];
	write_text(w->dir, "hot.js", hot_js);
	snprintf(node, sizeof(node), "node %s hot.js", flags);
	command_line(cmd, len, w->dir, node);
	assert_int_equal(test_run("\"$HOSTPROF\" record -F 499 -o %s -- %s >/dev/null", w->out, cmd), 0);
	remove_perf_map(w->dir);
	return test_read_profile(w->out);
}

/* node --perf-basic-prof: the JS hot loop is named in >= 80% of samples, with its native callers below it. */
static void test_node_perf_map(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000];
	struct jit_counts c;
	if (!test_perf_available() || !have_tool("command -v node", "node"))
		skip();
	struct profile *p = record_node(w, "--perf-basic-prof", cmd, sizeof(cmd));
	count_jit(p, "hotLoop", "__libc_start_main", &c);
	report("node --perf-basic-prof", &c, "__libc_start_main");
	assert_true(c.total >= 500);
	assert_true(test_share(c.named, c.total) >= 80.0);
	assert_true(test_share(c.complete, c.named) >= 80.0);
	compare_with_perf(w->dir, cmd, &c, "hotLoop", "__libc_start_main");
	profile_free(p);
}

/* node --perf-prof: the names come from the jitdump file node maps, with source lines from its debug records. */
static void test_node_jitdump(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000];
	struct jit_counts c;
	if (!test_perf_available() || !have_tool("command -v node", "node"))
		skip();
	struct profile *p = record_node(w, "--perf-prof", cmd, sizeof(cmd));
	count_jit(p, "hotLoop", "__libc_start_main", &c);
	report("node --perf-prof (jitdump)", &c, "__libc_start_main");
	fprintf(stderr, "source line of the hot loop: %s:%u\n", c.source, c.source_line);
	assert_true(c.total >= 500);
	assert_true(test_share(c.named, c.total) >= 80.0);
	assert_true(test_share(c.complete, c.named) >= 80.0);
	assert_true(c.source_line >= 1 && c.source_line <= 4);	/* hotLoop's lines */
	assert_non_null(strstr(c.source, "hot.js"));
	profile_free(p);
}

static struct profile *record_java(struct test_workdir *w, const char *flags, char *cmd, size_t len)
{
	char java[300];
	write_text(w->dir, "Hot.java", hot_java);
	assert_int_equal(test_run("cd %s && javac Hot.java", w->dir), 0);
	snprintf(java, sizeof(java), "java %s -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit -cp . Hot", flags);
	command_line(cmd, len, w->dir, java);
	assert_int_equal(test_run("\"$HOSTPROF\" record -F 499 -o %s -- %s >/dev/null", w->out, cmd), 0);
	remove_perf_map(w->dir);
	return test_read_profile(w->out);
}

/*
 * A JVM with -XX:+PreserveFramePointer writes its perf map as it exits: hostprof names Hot.f from it at the
 * end, and walks the compiled and interpreted frames to the thread's start.
 */
static void test_java_perf_map_at_exit(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000];
	struct jit_counts c;
	if (!test_perf_available() || !have_tool("command -v java && command -v javac", "java (a JDK)"))
		skip();
	struct profile *p = record_java(w, "-XX:+PreserveFramePointer", cmd, sizeof(cmd));
	count_jit(p, "Hot.f", "start_thread", &c);
	report("java -XX:+PreserveFramePointer", &c, "start_thread");
	assert_true(c.total >= 500);
	assert_true(test_share(c.named, c.total) >= 80.0);
	assert_true(test_share(c.complete, c.named) >= 80.0);
	assert_true(test_samples_with_function(p, "long Hot.f(long)") == c.named);
	compare_with_perf(w->dir, cmd, &c, "Hot.f", "start_thread");
	profile_free(p);
}

/* Without -XX:+PreserveFramePointer the JVM's compiled code uses rbp as it likes: Hot.f is still named, and no
 * caller is made up from it — the stack ends right after it. */
static void test_java_without_frame_pointers(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000];
	struct jit_counts c;
	if (!test_perf_available() || !have_tool("command -v java && command -v javac", "java (a JDK)"))
		skip();
	struct profile *p = record_java(w, "", cmd, sizeof(cmd));
	count_jit(p, "Hot.f", "start_thread", &c);
	report("java without frame pointers", &c, "start_thread");
	assert_true(test_share(c.named, c.total) >= 80.0);
	assert_int_equal(c.after_leaf, 0);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_node_perf_map, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_node_jitdump, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_java_perf_map_at_exit, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_java_without_frame_pointers, test_workdir_setup,
						test_workdir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
