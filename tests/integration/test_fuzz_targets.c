/*
 * Replays seed inputs and deterministic mutants of them through every fuzz target (tests/fuzz/), built as
 * standalone runners: real ELF files, a profile hostprof recorded, a committed replay file, perf records, perf.data
 * files perf records, an
 * APM process storage block written here, a JVM's memory as the unit tests lay it out, stack-delta table cache
 * files written here, and JIT maps (committed seeds, and what node writes where it is
 * installed), and a CPython location table. Each mutant is hostile input (bytes overwritten, lengths set to zero or 0xff.., files cut short);
 * the parsers must reject it without crashing, and under `make check-asan` without a sanitizer report.
 * `make fuzz` runs the same targets under libFuzzer for longer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/fake_jvm.h"
#include "tests/lib/testlib.h"
#include "unwind/stack_deltas_cache.h"
#include "unwind/unwind.h"

struct fuzz_state {
	char *dir;
};

static int setup(void **state)
{
	struct fuzz_state *f = calloc(1, sizeof(*f));
	f->dir = test_mkdtemp();
	test_hostprof();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fuzz_state *f = *state;
	test_rmdir_rf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/*
 * Run target over the inputs (a shell word list) with mutants of each; assert it finished. msgpack-c allocates an
 * array's declared size before reading it (a mutant can ask for 32 GiB): the runners' sanitizer defaults
 * (tests/fuzz/standalone_main.c) let that malloc fail, as it would outside a sanitizer build, rather than abort.
 */
static void run_target(const char *target, unsigned mutants, const char *inputs)
{
	assert_int_equal(test_run("'%s/fuzz/%s' -m %u %s", test_build_dir(), target, mutants, inputs), 0);
}

static void test_fuzz_elf(void **state)
{
	struct fuzz_state *f = *state;
	char a[512], b[512], c[512];
	char inputs[1700];
	/* And what the fuzzer found: a .debug_line_str without its final NUL, which libdw read past. */
	snprintf(inputs, sizeof(inputs), "'%s' '%s' '%s' tests/data/fuzz/elf-debug-line-str-unterminated",
		 test_fixture_path("split_paths", a, sizeof(a)), test_fixture_path("libfixture_shared.so", b, sizeof(b)),
		 test_fixture_path("elastic-jvmti-linux-x86_64.so", c, sizeof(c)));
	run_target("fuzz_elf", 150, inputs);
	/* A Go program: its .gopclntab, read by hand (unwind/gopclntab.c), and the delta rules made from it. */
	if (system("command -v go >/dev/null 2>&1") != 0) {
		test_skip_part("the go tool is not installed");
		return;
	}
	test_go_build(f->dir, "hot", "hot", 0, "");
	snprintf(inputs, sizeof(inputs), "'%s/hot'", f->dir);
	run_target("fuzz_elf", 100, inputs);
}

static void test_fuzz_profile(void **state)
{
	struct fuzz_state *f = *state;
	char fixture[512];
	test_require_perf();
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -F 499 -o %s/seed.msgpack -- %s 1 >/dev/null", f->dir,
				  test_fixture_path("threads", fixture, sizeof(fixture))), 0);
	char input[600];
	snprintf(input, sizeof(input), "'%s/seed.msgpack'", f->dir);
	run_target("fuzz_profile", 1000, input);
}

static void test_fuzz_replay(void **state)
{
	struct fuzz_state *f = *state;
	char fixture[512], inputs[700];
	snprintf(inputs, sizeof(inputs), "tests/data/vdso_clock.replay");
	/* A fresh one too: its samples carry the kernel's frame-pointer chain. */
	if (test_perf_available()) {
		assert_int_equal(test_run("\"$HOSTPROF\" record -q -F 99 --save-samples %s/seed.replay -o %s/seed.msgpack "
					  "-- %s 0.3 >/dev/null", f->dir, f->dir,
					  test_fixture_path("vdso_clock", fixture, sizeof(fixture))), 0);
		snprintf(inputs, sizeof(inputs), "tests/data/vdso_clock.replay '%s/seed.replay'", f->dir);
	} else {
		test_skip_part("the kernel refuses perf_event_open here (%s): no fresh replay", strerror(errno));
	}
	run_target("fuzz_replay", 60, inputs);
}

/* Append n 64-bit words. */
static void put_words(FILE *fp, const uint64_t *w, size_t n)
{
	assert_int_equal(fwrite(w, sizeof(*w), n, fp), n);
}

static void put_header(FILE *fp, uint32_t type, size_t size)
{
	struct perf_event_header h = { .type = type, .misc = PERF_RECORD_MISC_USER, .size = (uint16_t)size };
	assert_int_equal(fwrite(&h, sizeof(h), 1, fp), 1);
}

/* A sample as the sampler asks for it: IP, TID, TIME, CPU, PERIOD, a callchain, user registers and stack. */
static void put_sample(FILE *fp)
{
	enum { CHAIN = 3, STACK = 64 };
	size_t nregs = (size_t)__builtin_popcountll(UNWIND_SAMPLE_REGS_MASK);
	uint64_t w[64] = { 0 };
	size_t n = 0;
	w[n++] = 0x401000;			/* ip */
	w[n++] = 42ull << 32 | 42;		/* pid, tid */
	w[n++] = 123456789;			/* time */
	w[n++] = 1;				/* cpu, reserved */
	w[n++] = 1000000;			/* period */
	w[n++] = CHAIN;				/* callchain */
	w[n++] = PERF_CONTEXT_KERNEL;
	w[n++] = 0xffffffff81000000ull;
	w[n++] = PERF_CONTEXT_USER;
	w[n++] = PERF_SAMPLE_REGS_ABI_64;	/* regs_user */
	for (size_t i = 0; i < nregs; i++)
		w[n++] = 0x7ffd0000 + i * 8;
	w[n++] = STACK;				/* stack_user: size, data, dyn_size */
	for (size_t i = 0; i < STACK / 8; i++)
		w[n++] = 0x401100 + i;
	w[n++] = STACK;
	put_header(fp, PERF_RECORD_SAMPLE, sizeof(struct perf_event_header) + n * 8);
	put_words(fp, w, n);
}

static void put_side_band(FILE *fp)
{
	/* MMAP2: pid tid addr len pgoff maj min ino ino_generation prot flags filename (8-aligned). */
	const char name[16] = "/usr/bin/true";
	uint64_t mm[] = { 42ull << 32 | 42, 0x400000, 0x1000, 0, 8ull << 32 | 1, 1234, 0, 5ull << 32 | 2 };
	put_header(fp, PERF_RECORD_MMAP2, sizeof(struct perf_event_header) + sizeof(mm) + sizeof(name));
	put_words(fp, mm, sizeof(mm) / 8);
	assert_int_equal(fwrite(name, sizeof(name), 1, fp), 1);
	/* COMM: pid tid comm. */
	const char comm[8] = "worker";
	uint64_t pt = 42ull << 32 | 42;
	put_header(fp, PERF_RECORD_COMM, sizeof(struct perf_event_header) + 8 + sizeof(comm));
	put_words(fp, &pt, 1);
	assert_int_equal(fwrite(comm, sizeof(comm), 1, fp), 1);
	/* FORK and EXIT: pid ppid tid ptid time. */
	uint64_t task[] = { 43ull << 32 | 42, 43ull << 32 | 42, 99 };
	put_header(fp, PERF_RECORD_FORK, sizeof(struct perf_event_header) + sizeof(task));
	put_words(fp, task, 3);
	put_header(fp, PERF_RECORD_EXIT, sizeof(struct perf_event_header) + sizeof(task));
	put_words(fp, task, 3);
	uint64_t lost[] = { 7, 3 };
	put_header(fp, PERF_RECORD_LOST, sizeof(struct perf_event_header) + sizeof(lost));
	put_words(fp, lost, 2);
}

static void test_fuzz_perf_record(void **state)
{
	struct fuzz_state *f = *state;
	char path[600];
	snprintf(path, sizeof(path), "%s/records", f->dir);
	FILE *fp = fopen(path, "wb");
	assert_non_null(fp);
	uint64_t layout = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
			  PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	put_words(fp, &layout, 1);
	put_sample(fp);
	put_side_band(fp);
	put_sample(fp);
	assert_int_equal(fclose(fp), 0);
	char input[620];
	snprintf(input, sizeof(input), "'%s'", path);
	run_target("fuzz_perf_record", 3000, input);
}

/* perf.data files perf records here, small: dwarf samples, compressed (-z), frame-pointer chains, sched_switch. */
static void test_fuzz_perf_data(void **state)
{
	struct fuzz_state *f = *state;
	char fixture[256], input[2048] = "";
	static const char *const variants[][2] = { { "dwarf", "--call-graph dwarf,1024" },
						   { "z", "-z --call-graph dwarf,1024" },
						   { "fp", "--call-graph fp" } };
	test_require_perf();
	test_require_tool("perf --version", "perf (make deps installs linux-perf)");
	test_fixture_path("split_paths", fixture, sizeof(fixture));
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		assert_int_equal(test_run("perf record -q -F 999 %s -o %s/%s.data -- %s 0.05 >/dev/null 2>&1",
					  variants[i][1], f->dir, variants[i][0], fixture), 0);
		size_t at = strlen(input);
		snprintf(input + at, sizeof(input) - at, " '%s/%s.data'", f->dir, variants[i][0]);
	}
	/* hotspot's recipe, with and without switch records: the fixture burns, then sleep sleeps (tracefs is mounted
	 * for perf where it is not, and unmounted after) */
	bool mounted = access("/sys/kernel/tracing/events/sched/sched_switch", F_OK) != 0 &&
		       test_run("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null") == 0;
	static const char *const sched[][2] = { { "sched", "" }, { "sched-sw", "--switch-events" } };
	for (size_t i = 0; i < sizeof(sched) / sizeof(sched[0]); i++) {
		int rc = test_run("perf record -q --call-graph dwarf,1024 -e cpu-clock/freq=999/ -e sched:sched_switch "
				  "%s -o %s/%s.data -- sh -c '%s 0.03; sleep 0.02' >/dev/null 2>&1", sched[i][1], f->dir,
				  sched[i][0], fixture);
		size_t at = strlen(input);
		if (rc == 0)
			snprintf(input + at, sizeof(input) - at, " '%s/%s.data'", f->dir, sched[i][0]);
		else
			test_skip_part("no %s seed: perf record -e sched:sched_switch failed (tracefs?)", sched[i][0]);
	}
	if (mounted)
		assert_int_equal(test_run("umount /sys/kernel/tracing"), 0);
	run_target("fuzz_perf_data", 1000, input);
}

static void test_fuzz_apm_storage(void **state)
{
	struct fuzz_state *f = *state;
	/* Pointer 7 (the target reads at 1 + 7 % size = 8), minor 1, service, environment, socket path. */
	static const uint8_t storage[] = "\7\0\0\0\0\0\0\0\1\0\3\0\0\0svc\4\0\0\0prod\11\0\0\0/tmp/sock";
	char path[600];
	snprintf(path, sizeof(path), "%s/storage", f->dir);
	FILE *fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(storage, sizeof(storage) - 1, 1, fp), 1);
	assert_int_equal(fclose(fp), 0);
	char input[620];
	snprintf(input, sizeof(input), "'%s'", path);
	run_target("fuzz_apm_storage", 3000, input);
}

/* A JVM's code cache as read from its memory: the fake JVM of the unit tests (tests/data/fuzz/hotspot-seed.bin is
 * the same input, make fuzz's seed), and JIT addresses in a compiled method's body and prologue, the interpreter
 * and a runtime stub. */
static void test_fuzz_hotspot(void **state)
{
	struct fuzz_state *f = *state;
	struct fake_jvm *j = fake_jvm_new();
	const uint64_t addrs[FAKE_JVM_INPUT_ADDRS] = { fake_jvm_code(0, 340), fake_jvm_code(0, 250),
						       fake_jvm_code(8, 120), fake_jvm_code(12, 110) };
	char path[600], input[620];
	snprintf(path, sizeof(path), "%s/jvm", f->dir);
	fake_jvm_write_input(j, path, addrs);
	fake_jvm_free(j);
	snprintf(input, sizeof(input), "'%s'", path);
	run_target("fuzz_hotspot", 3000, input);
}

/* JIT maps the profiled process writes (perf maps, jitdump files): a seed of each, and what a real runtime wrote
 * when one is installed (node --perf-basic-prof and --perf-prof write both). */
static void test_fuzz_jit_maps(void **state)
{
	struct fuzz_state *f = *state;
	char maps[700] = "tests/data/fuzz/perfmap-seed.map", dumps[700] = "tests/data/fuzz/jitdump-seed.dump";
	if (test_run("command -v node >/dev/null") == 0 &&
	    test_run("cd %s && echo 'function f(n){let s=0;for(let i=0;i<n;i++)s+=i%%7;return s}"
		     "for(let k=0;k<200;k++)f(1e4)' > t.js && { node --perf-basic-prof --perf-prof t.js & p=$!; "
		     "wait $p; } && mv /tmp/perf-$p.map %s/real.map && mv %s/jit-$p.dump %s/real.dump",
		     f->dir, f->dir, f->dir, f->dir) == 0) {
		snprintf(maps, sizeof(maps), "tests/data/fuzz/perfmap-seed.map '%s/real.map'", f->dir);
		snprintf(dumps, sizeof(dumps), "tests/data/fuzz/jitdump-seed.dump '%s/real.dump'", f->dir);
	} else {
		fprintf(stderr, "node is not installed: the JIT map targets replay their seeds only\n");
	}
	run_target("fuzz_perfmap", 2000, maps);
	run_target("fuzz_jitdump", 300, dumps);
}

/* CPython 3.11 location tables: the table CPython wrote for a small function (tests/unit/test_pyframes.c's). */
static void test_fuzz_pylinetable(void **state)
{
	(void)state;
	run_target("fuzz_pylinetable", 3000, "tests/data/fuzz/pylinetable-seed.bin");
}

/* The cache file of path's table, stored in dir's cache under the key name (the loader's checks of the key are
 * not what the target fuzzes); its path into out. */
static void store_table(const char *dir, const char *path, const char *name, char *out, size_t len)
{
	struct stack_deltas_cache *c;
	struct stack_deltas *t;
	struct stack_deltas_key key = { .build_id = name };
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_int_equal(stack_deltas_cache_open(dir, &c), 0);
	assert_int_equal(stack_deltas_cache_get(c, &key, elf, &t, NULL), 0);
	char file[256];
	assert_int_equal(stack_deltas_cache_file_name(c, &key, file, sizeof(file)), 0);
	snprintf(out, len, "'%s/%s'", dir, file);
	stack_deltas_free(t);
	stack_deltas_cache_free(c);
	elf_end(elf);
	close(fd);
}

/* Stack-delta table cache files: a small program's and the C library's tables as this build writes them. */
static void test_fuzz_table_cache(void **state)
{
	struct fuzz_state *f = *state;
	char dir[600], fixture[512], a[900], b[900], inputs[1900];
	snprintf(dir, sizeof(dir), "%s/cache", f->dir);
	store_table(dir, test_fixture_path("split_paths", fixture, sizeof(fixture)), "aa", a, sizeof(a));
	store_table(dir, "/usr/lib/x86_64-linux-gnu/libc.so.6", "bb", b, sizeof(b));
	snprintf(inputs, sizeof(inputs), "%s %s", a, b);
	run_target("fuzz_table_cache", 400, inputs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fuzz_elf),
		cmocka_unit_test(test_fuzz_profile),
		cmocka_unit_test(test_fuzz_replay),
		cmocka_unit_test(test_fuzz_perf_record),
		cmocka_unit_test(test_fuzz_perf_data),
		cmocka_unit_test(test_fuzz_apm_storage),
		cmocka_unit_test(test_fuzz_hotspot),
		cmocka_unit_test(test_fuzz_jit_maps),
		cmocka_unit_test(test_fuzz_table_cache),
		cmocka_unit_test(test_fuzz_pylinetable),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
