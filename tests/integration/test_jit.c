/*
 * Integration tests on JIT runtimes, run at test time: node with a perf map (--perf-basic-prof) and with a
 * jitdump file (--perf-prof) on a JavaScript hot loop, a JVM that writes its perf map only as it exits
 * (-XX:+DumpPerfMapAtExit) with -XX:+PreserveFramePointer, a JVM without frame pointers or a perf map (walked and
 * named from its code cache), and CPython 3.12+ -X perf (its perf trampolines keep no frame pointer). hostprof
 * must name the JIT frames and walk through them to their native callers. Each is compared with perf on the
 * same program (`perf record --call-graph fp`, which walks JIT code the same way; for CPython, whose interpreter
 * has no frame pointers, --call-graph dwarf), the JVM without frame pointers with the same program with them and
 * with JFR, the JVM's own sampler. They skip, saying why, only where the kernel refuses perf_event_open or node,
 * java or a CPython 3.12+ is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

/* Eight seconds: the first seconds' samples may be lost while hostprof builds the node binary's unwind table
 * (1 s here, 5 s in a sanitizer build on a loaded machine). */
static const char hot_js[] =
	"function hotLoop(n) {\n"
	"  let s = 0;\n"
	"  for (let i = 0; i < n; i++) s = (s + i * i) % 1000003;\n"
	"  return s;\n"
	"}\n"
	"function caller() {\n"
	"  let t = 0;\n"
	"  const end = Date.now() + 8000;\n"
	"  while (Date.now() < end) t += hotLoop(100000);\n"
	"  return t;\n"
	"}\n"
	"console.log(caller());\n";

/* A regular expression run over a text, by CPU time (3 s): V8's built-ins (RegExpPrototypeExec, SubString,
 * ToNumber: code in node's binary without CFI) between the compiled regular expression and JavaScript. */
static const char regex_js[] =
	"const words = [];\n"
	"for (let i = 0; i < 2000; i++) words.push('item' + i + ' value=' + (i * 7919 % 1000) + ' key' + (i % 13));\n"
	"const text = words.join('\\n');\n"
	"const re = /value=(\\d+) key(\\d+)/g;\n"
	"function scan() { let m, s = 0; re.lastIndex = 0; while ((m = re.exec(text)) !== null) s += +m[1]; return s; }\n"
	"function main() {\n"
	"  const end = process.cpuUsage().user + 3e6;\n"
	"  let t = 0;\n"
	"  while (process.cpuUsage().user < end) t += scan();\n"
	"  return t;\n"
	"}\n"
	"console.log(main());\n";

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

static const char hot_py[] =
	"import time\n"
	"def hot_loop(n):\n"
	"    s = 0\n"
	"    for i in range(n):\n"
	"        s = (s + i * i) % 1000003\n"
	"    return s\n"
	"def caller():\n"
	"    end = time.time() + 3\n"
	"    t = 0\n"
	"    while time.time() < end:\n"
	"        t += hot_loop(10000)\n"
	"    return t\n"
	"print(caller())\n";

static void write_text(const char *dir, const char *name, const char *text)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	test_write_text(path, text);
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
	uint64_t with_line;	/* ... of them whose JIT frame, a function of src's file, has a source line */
	uint64_t bad_line;	/* ... of those whose line is not one of src's, or its file not src's */
};

/* The function's source lines, as the jitdump debug information may give them. */
struct jit_source {
	const char *file;
	int64_t first, last;
};

static void count_jit(const struct profile *p, const char *part, const char *root, const struct jit_source *src,
		      struct jit_counts *c)
{
	memset(c, 0, sizeof(*c));
	c->total = test_total_samples(p);
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const struct profile_stack *st = &p->stacks.items[s->stack];
		const struct profile_line *line = NULL;
		int at = -1, rooted = 0;
		for (uint32_t k = 0; k < st->nlocations; k++) {
			const struct profile_location *l = &p->locations.items[st->locations[k]];
			const char *name = location_name(p, st->locations[k]);
			if (at < 0 && l->frame_kind == PROFILE_FRAME_JIT && strstr(name, part)) {
				at = (int)k;
				/* lines checked where the function is src's (its name says where it is from) */
				line = l->nlines && l->lines[0].line && src && strstr(name, src->file) ? &l->lines[0] : NULL;
			}
			rooted |= strcmp(name, root) == 0;
		}
		if (at < 0)
			continue;
		if (line) {
			const char *file = profile_string(p, p->functions.items[line->function].filename);
			c->with_line += s->count;
			if (!strstr(file, src->file) || line->line < src->first || line->line > src->last)
				c->bad_line += s->count;
		}
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
static void compare_with_perf(const char *dir, const char *callgraph, const char *cmd, const struct jit_counts *c,
			      const char *part, const char *root)
{
	double perf = test_perf_children_share(
		dir, &(struct test_perf_query){ .cmd = cmd, .callgraph = callgraph, .symbol = part, .contains = true });
	double perf_root =
		perf >= 0 ? test_perf_children_share(dir, &(struct test_perf_query){ .symbol = root, .contains = true })
			  : -1;
	remove_perf_map(dir);
	fprintf(stderr, "%s: hostprof %.1f%% (%.1f%% of all samples complete to %s), perf record --call-graph %s "
			"%.1f%% (%.1f%% under %s)\n", part, test_share(c->named, c->total),
		test_share(c->complete, c->total), root, callgraph, perf, perf_root, root);
	if (perf >= 0)
		assert_true(perf >= 50.0);	/* the oracle sees the same program (nested JS frames may add past 100) */
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

/*
 * The samples' JavaScript frames: the leaf-most JIT frame a sample has that V8 named as JavaScript ("JS:*f ...").
 * That is hotLoop, or caller once V8 optimized caller with hotLoop inlined into it (after a few seconds: both
 * are the hot loop, and perf sees the same).
 */
static void count_js(const struct profile *p, const struct jit_source *lines, struct jit_counts *js)
{
	struct jit_counts hot;
	count_jit(p, "JS:", "__libc_start_main", lines, js);
	count_jit(p, "hotLoop", "__libc_start_main", NULL, &hot);
	fprintf(stderr, "in hotLoop itself: %.1f%% of samples\n", test_share(hot.named, hot.total));
}

/* node --perf-basic-prof: JavaScript names >= 80% of samples, with their native callers below them. */
static void test_node_perf_map(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000];
	struct jit_counts c;
	test_require_perf();
	test_require_tool("command -v node", "node");
	struct profile *p = record_node(w, "--perf-basic-prof", cmd, sizeof(cmd));
	count_js(p, NULL, &c);
	report("node --perf-basic-prof", &c, "__libc_start_main");
	assert_true(c.total >= 300);	/* a loaded machine gives the command less CPU */
	assert_true(test_share(c.named, c.total) >= 80.0);
	assert_true(test_share(c.complete, c.named) >= 80.0);
	compare_with_perf(w->dir, "fp", cmd, &c, "JS:", "__libc_start_main");
	profile_free(p);
}

/* Samples with a frame named part: how many, how many of them reach root without an error frame, and how many
 * show the frame named twice in a row (a frame no walk should make up: part is not recursive). */
struct builtin_counts {
	uint64_t total, named, complete, doubled;
};

static void count_builtin(const struct profile *p, const char *part, const char *root, struct builtin_counts *c)
{
	memset(c, 0, sizeof(*c));
	c->total = test_total_samples(p);
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const struct profile_stack *st = &p->stacks.items[s->stack];
		bool named = false, rooted = false, doubled = false;
		for (uint32_t k = 0; k < st->nlocations; k++) {
			const char *name = location_name(p, st->locations[k]);
			bool here = strstr(name, part) != NULL;
			doubled |= here && k > 0 && strstr(location_name(p, st->locations[k - 1]), part);
			named |= here;
			rooted |= strcmp(name, root) == 0;
		}
		c->named += named ? s->count : 0;
		c->complete += named && rooted && !test_stack_has_error(p, s->stack) ? s->count : 0;
		c->doubled += named && doubled ? s->count : 0;
	}
}

/*
 * node running a regular expression, its built-ins in the stack: V8's built-ins have no CFI, and the callers a
 * guess of their frames finds (compiled JavaScript, whose bytes no file holds) have nothing to vouch for them
 * but the kernel's frame-pointer chain, which V8's frames keep. Stacks through them are as complete as perf's
 * frame-pointer call graph finds all of the program's (the oracle, recorded alike), and no built-in is shown
 * twice.
 */
static void test_node_regex_builtins(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000];
	struct builtin_counts c;
	test_require_perf();
	test_require_tool("command -v node", "node");
	write_text(w->dir, "regex.js", regex_js);
	command_line(cmd, sizeof(cmd), w->dir, "node --perf-basic-prof regex.js");
	assert_int_equal(test_run("\"$HOSTPROF\" record -o %s -- %s >/dev/null", w->out, cmd), 0);
	remove_perf_map(w->dir);
	struct profile *p = test_read_profile(w->out);
	/* perf's chain ends at __libc_start_call_main: libc's __libc_start_main keeps no frame pointer */
	count_builtin(p, "Builtins_RegExpPrototypeExec", "__libc_start_call_main", &c);
	double perf = test_perf_children_share(
		w->dir, &(struct test_perf_query){ .cmd = cmd, .callgraph = "fp", .symbol = "__libc_start_call_main" });
	remove_perf_map(w->dir);
	fprintf(stderr, "node regex: %llu samples, %.1f%% under RegExpPrototypeExec, %.1f%% of those complete to "
			"__libc_start_call_main, %llu with it doubled; perf record --call-graph fp: %.1f%% of all "
			"samples under __libc_start_call_main\n", (unsigned long long)c.total, test_share(c.named, c.total),
		test_share(c.complete, c.named), (unsigned long long)c.doubled, perf);
	assert_true(c.total >= 300 && test_share(c.named, c.total) >= 20.0);
	assert_true(test_share(c.complete, c.named) >= 90.0);
	assert_true(c.doubled * 100 <= c.named);
	if (perf >= 0)
		assert_true(test_share(c.complete, c.named) >= perf - 5.0);
	profile_free(p);
}

/* node --perf-prof: the names come from the jitdump file node maps, with source lines from its debug records. */
static void test_node_jitdump(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000];
	struct jit_counts c;
	test_require_perf();
	test_require_tool("command -v node", "node");
	struct profile *p = record_node(w, "--perf-prof", cmd, sizeof(cmd));
	const struct jit_source lines = { "/hot.js", 1, 11 };	/* hotLoop's and caller's */
	count_js(p, &lines, &c);
	report("node --perf-prof (jitdump)", &c, "__libc_start_main");
	/* V8 writes the debug information of some compilations wrong (entries that are not entries): those give no
	 * lines, rather than made-up ones. */
	fprintf(stderr, "JavaScript samples with a source line of hot.js: %.1f%%, %llu of them wrong\n",
		test_share(c.with_line, c.named), (unsigned long long)c.bad_line);
	assert_true(c.total >= 300);	/* a loaded machine gives the command less CPU */
	assert_true(test_share(c.named, c.total) >= 80.0);
	assert_true(test_share(c.complete, c.named) >= 80.0);
	assert_int_equal(c.bad_line, 0);
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
 * end (its interpreted frames, which the map does not name, from their Method), and walks the compiled and
 * interpreted frames to the thread's start.
 */
static void test_java_perf_map_at_exit(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000];
	struct jit_counts c;
	test_require_perf();
	test_require_tool("command -v java && command -v javac", "java (a JDK)");
	struct profile *p = record_java(w, "-XX:+PreserveFramePointer", cmd, sizeof(cmd));
	count_jit(p, "Hot.f", "start_thread", NULL, &c);
	report("java -XX:+PreserveFramePointer", &c, "start_thread");
	assert_true(c.total >= 300);	/* a loaded machine gives the command less CPU */
	assert_true(test_share(c.named, c.total) >= 80.0);
	assert_true(test_share(c.complete, c.named) >= 80.0);
	/* compiled, named by the map; interpreted (before it is compiled), by the Method its frame holds */
	uint64_t compiled = test_samples_with_function(p, "long Hot.f(long)"),
		 interpreted = test_samples_with_function(p, "Hot.f");
	fprintf(stderr, "Hot.f: %llu samples compiled, %llu interpreted\n", (unsigned long long)compiled,
		(unsigned long long)interpreted);
	assert_true(compiled + interpreted == c.named && compiled >= interpreted);
	compare_with_perf(w->dir, "fp", cmd, &c, "Hot.f", "start_thread");
	profile_free(p);
}

/* Work in two parts of known weight, driven by the main thread's CPU time: a recursion (compiled Work.fib) and
 * sorting (compiled java.util.ComparableTimSort methods). */
static const char work_java[] =
	"import java.lang.management.ManagementFactory;\n"
	"import java.util.ArrayList;\n"
	"import java.util.Collections;\n"
	"import java.util.List;\n"
	"public class Work {\n"
	"    static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n"
	"    static int sortRound(int r) {\n"
	"        List<String> words = new ArrayList<>();\n"
	"        for (int i = 0; i < 20000; i++) words.add(Long.toHexString((i * 2654435761L + r) & 0xffffffL));\n"
	"        Collections.sort(words);\n"
	"        return words.get(r % words.size()).length();\n"
	"    }\n"
	"    public static void main(String[] a) {\n"
	"        double cpu = Double.parseDouble(a[0]) * 1e9;\n"
	"        long t = 0;\n"
	"        for (int r = 0; ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime() < cpu; r++)\n"
	"            t += fib(30) + sortRound(r);\n"
	"        System.out.println(t);\n"
	"    }\n"
	"}\n";

/* JFR's own execution samples, one every 2 ms of a Java thread's running. */
static const char jfr_settings[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<configuration version=\"2.0\">\n"
	"  <event name=\"jdk.ExecutionSample\"><setting name=\"enabled\">true</setting>"
	"<setting name=\"period\">2 ms</setting></event>\n"
	"</configuration>\n";

/* Samples under Work.fib and under ComparableTimSort, and of those, the ones complete to the thread's start and
 * the ones under Work.main (which the interpreter runs: its loop turns a few times a second). */
struct java_split {
	uint64_t fib, sort, whole, main;
};

static double fib_ratio(const struct java_split *s)
{
	return s->fib + s->sort ? (double)s->fib / (double)(s->fib + s->sort) : -1;
}

static void split_profile(const struct profile *p, struct java_split *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const struct profile_stack *st = &p->stacks.items[s->stack];
		bool fib = false, sort = false, rooted = false, main = false;
		for (uint32_t k = 0; k < st->nlocations; k++) {
			const char *name = location_name(p, st->locations[k]);
			fib |= strcmp(name, "Work.fib") == 0;
			main |= strcmp(name, "Work.main") == 0;
			sort |= strncmp(name, "java.util.ComparableTimSort.", 28) == 0;
			rooted |= strcmp(name, "start_thread") == 0;
		}
		out->fib += fib ? s->count : 0;
		out->sort += sort ? s->count : 0;
		out->whole += (fib || sort) && rooted && !test_stack_has_error(p, s->stack) ? s->count : 0;
		out->main += (fib || sort) && main ? s->count : 0;
	}
}

/* The same split of JFR's samples, from its recording dir/w.jfr (JFR names inlined methods too). */
static void split_jfr(const char *dir, struct java_split *out)
{
	char path[700];
	unsigned long long fib = 0, sort = 0, main = 0;
	assert_int_equal(test_run("cd %s && jfr print --stack-depth 64 --events jdk.ExecutionSample w.jfr | awk '"
				  "/stackTrace = \\[/ { in_stack = 1; f = 0; s = 0; m = 0; next } "
				  "in_stack && /^ *\\]/ { in_stack = 0; nf += f; ns += s; nm += (f || s) && m; next } "
				  "in_stack && /Work\\.fib\\(/ { f = 1 } in_stack && /ComparableTimSort\\./ { s = 1 } "
				  "in_stack && /Work\\.main\\(/ { m = 1 } "
				  "END { print nf + 0, ns + 0, nm + 0 }' > jfr.txt", dir), 0);
	snprintf(path, sizeof(path), "%s/jfr.txt", dir);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu %llu %llu", &fib, &sort, &main), 3);
	fclose(f);
	*out = (struct java_split){ .fib = fib, .sort = sort, .main = main };
}

static void record_work(struct test_workdir *w, const char *flags, struct java_split *h, struct java_split *jfr)
{
	char java[400], cmd[1000];
	snprintf(java, sizeof(java), "java %s -XX:StartFlightRecording=filename=w.jfr,settings=%s/s.jfc -cp . Work 3",
		 flags, w->dir);
	command_line(cmd, sizeof(cmd), w->dir, java);
	assert_int_equal(test_run("\"$HOSTPROF\" record -F 499 -o %s -- %s >/dev/null", w->out, cmd), 0);
	struct profile *p = test_read_profile(w->out);
	split_profile(p, h);
	profile_free(p);
	split_jfr(w->dir, jfr);
	fprintf(stderr, "java %s: hostprof %llu samples under Work.fib, %llu under ComparableTimSort (fib's "
			"share %.3f), %.1f%% of them complete, %.1f%% under Work.main; JFR %llu and %llu (%.3f), "
			"%.1f%% under Work.main\n", flags[0] ? flags : "(no flags)",
		(unsigned long long)h->fib, (unsigned long long)h->sort, fib_ratio(h),
		test_share(h->whole, h->fib + h->sort), test_share(h->main, h->fib + h->sort),
		(unsigned long long)jfr->fib, (unsigned long long)jfr->sort, fib_ratio(jfr),
		test_share(jfr->main, jfr->fib + jfr->sort));
}

/*
 * Without -XX:+PreserveFramePointer the JVM's compiled code uses rbp as it likes, and no perf map names it: its
 * frames are stepped by the sizes its code cache gives (hotspot.h), and named from there. Two oracles in the same
 * test: the same program with frame pointers (walked by them), as complete and split the same; and JFR, the
 * JVM's own sampler, in the same runs, which names Work.fib and ComparableTimSort's methods the same way. JFR
 * samples only where a thread runs Java code, at points of its own: it sees fib's share 5-8 points lower than
 * either walk here, in both runs. Work.main runs in the interpreter, whose code serves every method: it is named
 * from the Method its frame holds, in as many of the stacks as JFR shows it.
 */
static void test_java_without_frame_pointers(void **state)
{
	struct test_workdir *w = *state;
	struct java_split nofp, fp, jfr_nofp, jfr_fp;
	test_require_perf();
	test_require_tool("command -v java && command -v javac && command -v jfr", "java (a JDK)");
	write_text(w->dir, "Work.java", work_java);
	write_text(w->dir, "s.jfc", jfr_settings);
	assert_int_equal(test_run("cd %s && javac Work.java", w->dir), 0);
	record_work(w, "", &nofp, &jfr_nofp);
	record_work(w, "-XX:+PreserveFramePointer", &fp, &jfr_fp);
	assert_true(nofp.fib + nofp.sort >= 300 && fp.fib + fp.sort >= 300);	/* named: from the JVM alone */
	assert_true(jfr_nofp.fib + jfr_nofp.sort >= 100);
	assert_true(test_share(nofp.whole, nofp.fib + nofp.sort) >= test_share(fp.whole, fp.fib + fp.sort) - 3.0);
	assert_true(fabs(fib_ratio(&nofp) - fib_ratio(&fp)) <= 0.08);
	assert_true(fabs(fib_ratio(&nofp) - fib_ratio(&jfr_nofp)) <= 0.15);
	assert_true(fabs(fib_ratio(&fp) - fib_ratio(&jfr_fp)) <= 0.15);
	/* Work.main, interpreted, named from its frame's Method as JFR names it */
	assert_true(test_share(nofp.main, nofp.fib + nofp.sort) >=
		    test_share(jfr_nofp.main, jfr_nofp.fib + jfr_nofp.sort) - 5.0);
	assert_true(test_share(fp.main, fp.fib + fp.sort) >= test_share(jfr_fp.main, jfr_fp.fib + jfr_fp.sort) - 5.0);
}

/* A CPython of 3.12 or later (-X perf) in *path: on PATH, else one pyenv installed; skips the test if none. */
static void find_python(const char *dir, char *path, size_t len)
{
	char file[700];
	snprintf(file, sizeof(file), "%s/python", dir);
	if (test_run("for p in python3 python3.14 python3.13 python3.12 $(pyenv root 2>/dev/null)/versions/*/bin/python3; "
		     "do $p -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && "
		     "command -v $p > %s && exit 0; done; exit 1", file) != 0)
		test_skip("no CPython 3.12 or later (python3.12, python3.13, ...) is installed");
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	assert_non_null(fgets(path, (int)len, f));
	fclose(f);
	path[strcspn(path, "\n")] = '\0';
}

/*
 * CPython 3.12+ -X perf: each Python function runs through a trampoline the perf map names ("py::hot_loop:...");
 * the trampolines keep no frame pointer, hostprof knows their shape: the Python functions are named and the
 * stacks go on through the interpreter to main.
 */
static void test_python_perf_trampolines(void **state)
{
	struct test_workdir *w = *state;
	char cmd[1000], python[600], run[700];
	struct jit_counts c;
	test_require_perf();
	find_python(w->dir, python, sizeof(python));
	write_text(w->dir, "hot.py", hot_py);
	snprintf(run, sizeof(run), "%s -X perf hot.py", python);
	command_line(cmd, sizeof(cmd), w->dir, run);
	fprintf(stderr, "%s\n", run);
	assert_int_equal(test_run("\"$HOSTPROF\" record -F 499 -o %s -- %s >/dev/null", w->out, cmd), 0);
	remove_perf_map(w->dir);
	struct profile *p = test_read_profile(w->out);
	count_jit(p, "py::hot_loop", "__libc_start_main", NULL, &c);
	report("python -X perf", &c, "__libc_start_main");
	struct jit_counts callers;
	count_jit(p, "py::caller", "__libc_start_main", NULL, &callers);
	assert_true(c.total >= 300);	/* a loaded machine gives the command less CPU */
	assert_true(test_share(c.named, c.total) >= 80.0);
	assert_true(test_share(c.complete, c.named) >= 80.0);
	assert_true(test_share(callers.named, c.total) >= 80.0);	/* its caller, through the trampoline */
	/* perf's frame-pointer walk does not get through this interpreter (built without them); its DWARF walk reaches
	 * the trampolines and stops there. */
	compare_with_perf(w->dir, "dwarf,16384", cmd, &c, "py::hot_loop", "__libc_start_main");
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_node_perf_map, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_node_jitdump, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_node_regex_builtins, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_java_perf_map_at_exit, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_java_without_frame_pointers, test_workdir_setup,
						test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_python_perf_trampolines, test_workdir_setup,
						test_workdir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
