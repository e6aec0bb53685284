/*
 * Integration tests on binaries of other toolchains, built at test time: a C program linked by lld (clang
 * -fuse-ld=lld), whose PT_LOAD segments share file pages so that file offsets are not ELF addresses, and a Rust
 * program from rustc's defaults (lld as well since rustc 1.90; forced for older ones), with legacy and v0 symbol
 * manglings. Each is profiled with hostprof and, as the independent oracle, with `perf record --call-graph dwarf`
 * in the same test. They skip, saying why, only where the kernel refuses perf_event_open or the compiler is absent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testlib.h"

/* rustup's rustc where there is one (current, lld by default), else the one on PATH. */
#define RUSTC "$( [ -x \"$HOME/.cargo/bin/rustc\" ] && echo \"$HOME/.cargo/bin/rustc\" || command -v rustc)"

static void assert_complete_to_main(const struct profile *p, const char *what)
{
	const char *roots[] = { "main" };
	uint64_t total = test_total_samples(p), complete = test_samples_complete_to(p, roots, 1);
	fprintf(stderr, "%s: %llu samples, %.2f%% complete to main\n", what, (unsigned long long)total,
		test_share(complete, total));
	assert_true(total >= 500);
	assert_true(test_share(complete, total) >= 95.0);
}

/* Compares hostprof's share of samples under function with perf's, within 10 percentage points. */
static void compare_with_perf(const struct profile *p, const char *dir, const char *cmd, const char *function)
{
	double ours = test_share(test_samples_with_function(p, function), test_total_samples(p));
	double perf = test_perf_children_share(dir, &(struct test_perf_query){ .cmd = cmd, .symbol = function });
	fprintf(stderr, "%s: hostprof %.1f%%, perf record --call-graph dwarf %.1f%%\n", function, ours, perf);
	if (perf >= 0)
		assert_true(fabs(ours - perf) <= 10.0);
}

static void test_clang_lld(void **state)
{
	struct test_workdir *w = *state;
	char bin[600], cmd[700];
	test_require_perf();
	test_require_tool("command -v clang && command -v ld.lld", "clang with lld");
	snprintf(bin, sizeof(bin), "%s/paths_lld", w->dir);
	assert_int_equal(test_run("clang -O2 -g -fomit-frame-pointer -fuse-ld=lld -o %s "
				  "tests/fixtures/toolchains/paths.c", bin), 0);
	/* The layout this is about: the text segment's file offset is not its virtual address. */
	assert_int_equal(test_run("readelf -lW %s | awk '$1 == \"LOAD\" && / E / { print $2, $3 }' | "
				  "{ read off va && [ $((off)) -ne $((va)) ]; }", bin), 0);
	snprintf(cmd, sizeof(cmd), "%s 2", bin);
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- %s", w->out, cmd), 0);
	struct profile *p = test_read_profile(w->out);
	assert_complete_to_main(p, "clang/lld");
	const char *a[] = { "main", "path_a", "leaf_a" };
	double pa = test_share(test_samples_with_chain(p, a, 3), test_total_samples(p));
	fprintf(stderr, "main;path_a;leaf_a: %.1f%%\n", pa);
	assert_true(pa > 75.0 - 8.0 && pa < 75.0 + 8.0);
	compare_with_perf(p, w->dir, cmd, "leaf_a");
	profile_free(p);
}

/* A function name still (partly) mangled: a Rust v0 or Itanium prefix, legacy escapes, or a legacy hash. */
static int looks_mangled(const char *name)
{
	if (strncmp(name, "_R", 2) == 0 || strncmp(name, "_ZN", 3) == 0 || strstr(name, "$LT$") ||
	    strstr(name, "$GT$") || strstr(name, "$u20$"))
		return 1;
	const char *h = strstr(name, "::h");
	if (!h)
		return 0;
	size_t n = 0;
	while (isxdigit((unsigned char)h[3 + n]))
		n++;
	return n == 16 && h[3 + n] == '\0';
}

static void assert_all_demangled(const struct profile *p)
{
	for (uint32_t i = 0; i < p->functions.count; i++) {
		const char *name = profile_string(p, p->functions.items[i].name);
		if (looks_mangled(name))
			fail_msg("function name not demangled: %s", name);
	}
}

/* mangling: "" for rustc's default (legacy), else a -C symbol-mangling-version value. */
static void profile_rust(struct test_workdir *w, const char *mangling, const char *dot)
{
	char bin[600], cmd[700];
	test_require_perf();
	test_require_tool(RUSTC " --version", "rustc");
	snprintf(bin, sizeof(bin), "%s/geometry_%s", w->dir, *mangling ? mangling : "default");
	/* rustc's defaults (opt-level and debug info aside); lld named so that older rustc links with it too. */
	assert_int_equal(test_run(RUSTC " -O -g %s%s -C link-arg=-fuse-ld=lld -o %s tests/fixtures/toolchains/geometry.rs",
				  *mangling ? "-C symbol-mangling-version=" : "", mangling, bin), 0);
	snprintf(cmd, sizeof(cmd), "%s 2", bin);
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- %s", w->out, cmd), 0);
	struct profile *p = test_read_profile(w->out);
	assert_complete_to_main(p, *mangling ? mangling : "rustc defaults");
	assert_all_demangled(p);
	const char *chain[] = { "geometry::geometry::crunch", dot };
	double share = test_share(test_samples_with_chain(p, chain, 2), test_total_samples(p));
	fprintf(stderr, "crunch;dot: %.1f%%\n", share);
	assert_true(share >= 90.0);
	compare_with_perf(p, w->dir, cmd, "geometry::geometry::crunch");
	profile_free(p);
}

static void test_rust_default_mangling(void **state)
{
	profile_rust(*state, "", "geometry::geometry::Pt<u64>::dot");
}

static void test_rust_v0_mangling(void **state)
{
	profile_rust(*state, "v0", "<geometry::geometry::Pt<u64>>::dot");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_clang_lld, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_rust_default_mangling, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_rust_v0_mangling, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
