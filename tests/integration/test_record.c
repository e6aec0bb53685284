/*
 * Integration tests of `hostprof record`: real fixture programs profiled with real perf_event_open, the
 * resulting profile read back and checked for call paths, shares and unwinding completeness.
 * They skip, saying why, only where the kernel refuses perf_event_open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/base/cache_dir.h"
#include "src/base/clock.h"
#include "tests/lib/testlib.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static void assert_complete_share(const struct profile *p, const char *const *roots, size_t nroots, double min_pct)
{
	uint64_t total = test_total_samples(p);
	uint64_t complete = test_samples_complete_to(p, roots, nroots);
	fprintf(stderr, "unwound to %s: %.2f%% of %llu samples\n", roots[0], test_share(complete, total),
		(unsigned long long)total);
	assert_true(test_share(complete, total) >= min_pct);
}

static void test_split_paths_shares(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	test_require_perf();
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- %s 2", f->out,
				  test_fixture_path("split_paths", fixture, sizeof(fixture))), 0);
	struct profile *p = test_read_profile(f->out);
	uint64_t total = test_total_samples(p);
	const char *a[] = { "main", "path_a", "leaf_a" };
	const char *b[] = { "main", "path_b", "mid_b", "leaf_b" };
	double pa = test_share(test_samples_with_chain(p, a, ARRAY_LEN(a)), total);
	double pb = test_share(test_samples_with_chain(p, b, ARRAY_LEN(b)), total);
	fprintf(stderr, "split_paths: %llu samples (%llu lost; ~1998 expected), path_a %.1f%%, path_b %.1f%%\n",
		(unsigned long long)total, (unsigned long long)p->info.lost, pa, pb);
	/* split_paths runs 2 s of its own CPU time and cpu-clock samples that time at 999 Hz: ~1998 samples on a busy
	 * machine as on an idle one. Half of them is the floor: only samples lost in full rings (counted, printed
	 * above) while hostprof itself waits for a CPU take it lower. */
	assert_true(total >= 1000);
	assert_true(p->info.samples == total);
	/* The leaves run the same loop (a multiply and an add per step), 3 units against 1: CPU time, and so samples,
	 * split 75/25 whatever the clock speed or the load (samples count the fixture's own CPU time). Over 1000
	 * samples a share's standard deviation is under 1.4 points: 8 points is more than 5 of them. */
	assert_true(pa > 75.0 - 8.0 && pa < 75.0 + 8.0);
	assert_true(pb > 25.0 - 8.0 && pb < 25.0 + 8.0);
	const char *roots[] = { "main" };
	assert_complete_share(p, roots, 1, 98.0);
	profile_free(p);
}

static void test_threads_all_seen(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	test_require_perf();
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- %s 2 4", f->out,
				  test_fixture_path("threads", fixture, sizeof(fixture))), 0);
	struct profile *p = test_read_profile(f->out);
	size_t tids = test_distinct_tids(p, "worker-");
	fprintf(stderr, "threads: %zu worker threads sampled\n", tids);
	assert_int_equal(tids, 4);
	const char *chain[] = { "worker_main", "worker_spin" };
	assert_true(test_share(test_samples_with_chain(p, chain, 2), test_total_samples(p)) > 90.0);
	const char *roots[] = { "worker_main", "main" };
	assert_complete_share(p, roots, 2, 98.0);
	profile_free(p);
}

static void test_shared_library(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	test_require_perf();
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- %s 2", f->out,
				  test_fixture_path("shared_caller", fixture, sizeof(fixture))), 0);
	struct profile *p = test_read_profile(f->out);
	const char *chain[] = { "main", "call_library", "lib_hot_function", "lib_inner_mix" };
	double pct = test_share(test_samples_with_chain(p, chain, ARRAY_LEN(chain)), test_total_samples(p));
	fprintf(stderr, "shared_caller: %.1f%% in main->call_library->lib_hot_function->lib_inner_mix\n", pct);
	assert_true(pct > 85.0);
	const char *roots[] = { "main" };
	assert_complete_share(p, roots, 1, 98.0);
	profile_free(p);
}

static pid_t spawn_fixture(char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static void test_attach_running_process(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	test_require_perf();
	char *argv[] = { (char *)test_fixture_path("threads", fixture, sizeof(fixture)), "0", "3", NULL };
	pid_t pid = spawn_fixture(argv);
	assert_true(pid > 0);
	usleep(300 * 1000); /* its threads exist before hostprof attaches */
	int rc = test_run("\"$HOSTPROF\" record -q -d 1.5 -o %s -p %d", f->out, (int)pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(rc, 0);
	struct profile *p = test_read_profile(f->out);
	size_t tids = test_distinct_tids(p, "worker-");
	fprintf(stderr, "-p: %zu of 3 worker threads sampled\n", tids);
	assert_int_equal(tids, 3);
	const char *roots[] = { "worker_main", "main" };
	assert_complete_share(p, roots, 2, 98.0);
	profile_free(p);
}


static int count_kernel_samples(const struct profile *p)
{
	int n = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_stack *st = &p->stacks.items[p->samples.items[i].stack];
		if (st->nlocations && p->locations.items[st->locations[0]].frame_kind == PROFILE_FRAME_KERNEL)
			n += (int)p->samples.items[i].count;
	}
	return n;
}

static void test_system_wide(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	test_require_perf();
	test_require_root("-a samples every CPU");
	char *argv[] = { (char *)test_fixture_path("split_paths", fixture, sizeof(fixture)), "6", NULL };
	pid_t pid = spawn_fixture(argv);
	/* 3 s: the first moments go to reading every running program's tables (slow under sanitizers). */
	int rc = test_run("\"$HOSTPROF\" record -a -d 3 -o %s 2> %s/err", f->out, f->dir);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(rc, 0);
	struct profile *p = test_read_profile(f->out);
	const char *a[] = { "main", "path_a", "leaf_a" };
	uint64_t in_fixture = test_samples_with_chain(p, a, ARRAY_LEN(a));
	fprintf(stderr, "-a: %llu samples, %llu in main->path_a->leaf_a, %d with kernel frames\n",
		(unsigned long long)test_total_samples(p), (unsigned long long)in_fixture, count_kernel_samples(p));
	assert_true(in_fixture > 500); /* about 75 percent of up to 3 s at 999 Hz */
	/* The summary's completeness is that of the user stacks walked, as the profile counts them, and the samples
	 * with none (an idle CPU's: the other CPU here) are counted apart: counted in, they made a whole run look
	 * half unwound. */
	char line[1024] = "", path[600];
	unsigned long long kernel = 0;
	snprintf(path, sizeof(path), "%s/err", f->dir);
	FILE *err = fopen(path, "re");
	assert_non_null(err);
	while (fgets(line, sizeof(line), err) && !strstr(line, " unwound completely; wrote "))
		;
	fclose(err);
	fprintf(stderr, "%s", line);
	double said = test_summary_complete(line);
	const char *apart = strstr(line, " processes (");
	if (apart)
		assert_int_equal(sscanf(apart, " processes (%llu samples in the kernel alone", &kernel), 1);
	uint64_t walked = p->info.unwound_complete + p->info.truncated + p->info.unknown;
	assert_true(walked > 0 && walked + kernel == p->info.samples);
	assert_true(fabs(said - test_share(p->info.unwound_complete, walked)) < 0.06);
	profile_free(p);
}

static void test_kernel_frames_symbolized(void **state)
{
	struct test_workdir *f = *state;
	test_require_perf();
	test_require_root("kernel call chains");
	/* dd spends most of its time in read/write system calls. */
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- dd if=/dev/zero of=/dev/null bs=512 count=2000000 "
				  "status=none", f->out), 0);
	struct profile *p = test_read_profile(f->out);
	int kernel = count_kernel_samples(p);
	uint64_t total = test_total_samples(p);
	fprintf(stderr, "dd: %d of %llu samples have kernel frames\n", kernel, (unsigned long long)total);
	assert_true(kernel > (int)(total / 4));
	/* Kernel locations are named from kallsyms: some frame must be a read or write syscall path. */
	int named = 0;
	for (uint32_t i = 1; i < p->locations.count; i++) {
		const struct profile_location *l = &p->locations.items[i];
		if (l->frame_kind != PROFILE_FRAME_KERNEL || !l->nlines)
			continue;
		const char *name = profile_string(p, p->functions.items[l->lines[0].function].name);
		named += strstr(name, "read") != NULL || strstr(name, "write") != NULL;
	}
	assert_true(named > 0);
	profile_free(p);
}

static void test_sigint_still_writes(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	test_require_perf();
	char *fargv[] = { (char *)test_fixture_path("threads", fixture, sizeof(fixture)), "0", "2", NULL };
	pid_t target = spawn_fixture(fargv);
	usleep(200 * 1000);
	char pidarg[32];
	snprintf(pidarg, sizeof(pidarg), "%d", (int)target);
	char *hargv[] = { (char *)test_hostprof(), "record", "-q", "-o", f->out, "-p", pidarg, NULL };
	pid_t prof = spawn_fixture(hargv);
	sleep(1);
	kill(prof, SIGINT);
	int status = 0;
	waitpid(prof, &status, 0);
	kill(target, SIGKILL);
	waitpid(target, NULL, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct profile *p = test_read_profile(f->out);
	/* Two busy threads for about a second, less hostprof's start-up (slow under sanitizers). */
	assert_true(test_total_samples(p) > 100);
	profile_free(p);
}

static void test_unprivileged_own_command(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	int paranoid = 2;
	FILE *pf = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	if (pf) {
		if (fscanf(pf, "%d", &paranoid) != 1)
			paranoid = 2;
		fclose(pf);
	}
	test_require_root("to run hostprof as an unprivileged user");
	test_require_tool("command -v setpriv", "setpriv");
	if (paranoid > 2)
		test_skip("the kernel refuses perf_event_open to unprivileged users (kernel.perf_event_paranoid %d)",
			  paranoid);
	assert_int_equal(test_run("chmod 777 %s", f->dir), 0);
	assert_int_equal(test_run("setpriv --reuid=65534 --regid=65534 --clear-groups \"$HOSTPROF\" record -q -o %s "
				  "-- %s 1", f->out,
				  test_fixture_path("split_paths", fixture, sizeof(fixture))), 0);
	struct profile *p = test_read_profile(f->out);
	const char *a[] = { "main", "path_a", "leaf_a" };
	uint64_t chain = test_samples_with_chain(p, a, ARRAY_LEN(a));
	fprintf(stderr, "unprivileged: %llu of %llu samples in main->path_a->leaf_a (%llu lost; ~750 expected)\n",
		(unsigned long long)chain, (unsigned long long)test_total_samples(p), (unsigned long long)p->info.lost);
	/* 1 s of the fixture's own CPU time at 999 Hz, 75 % of it in path_a: ~750 samples on a busy machine as on an
	 * idle one. An unprivileged user's rings hold a few samples each (perf_event_mlock_kb): 300 leaves room for
	 * those lost (counted) while hostprof waits for a CPU, not for a run whose stacks do not reach main. */
	assert_true(chain > 300);
	assert_int_equal(count_kernel_samples(p), 0);
	profile_free(p);
}

static void test_distro_binary_xz(void **state)
{
	struct test_workdir *f = *state;
	test_require_perf();
	test_require_tool("command -v xz", "xz");
	assert_int_equal(test_run("head -c 6000000 /dev/urandom | base64 > %s/input.txt", f->dir), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- xz -6 -T1 -k -f %s/input.txt", f->out, f->dir), 0);
	struct profile *p = test_read_profile(f->out);
	uint64_t total = test_total_samples(p);
	/* Stripped: names come from .dynsym only. liblzma's exported entry points and libc's start-up must be on
	 * the stacks, below them frames without symbols named lib+0xOFFSET. */
	uint64_t through_lzma = test_samples_with_function(p, "lzma_code");
	const char *roots[] = { "__libc_start_main" };
	uint64_t complete = test_samples_complete_to(p, roots, 1);
	fprintf(stderr, "xz: %llu samples, %.1f%% through lzma_code, %.1f%% complete to __libc_start_main\n",
		(unsigned long long)total, test_share(through_lzma, total), test_share(complete, total));
	assert_true(total > 100);
	assert_true(test_share(through_lzma, total) > 80.0);
	assert_true(test_share(complete, total) > 95.0);
	profile_free(p);
}

/* The summary line "steady state ...: ... context switches for N samples (...; W of them waits, ...)". */
static int steady_state_waits(const char *path, unsigned long *samples, unsigned long *waits)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "context switches for ");
		const char *w = p ? strstr(p, "; ") : NULL;
		found = p && w && strstr(line, "steady state") &&
			sscanf(p, "context switches for %lu samples", samples) == 1 && sscanf(w, "; %lu of them waits", waits) == 1;
	}
	if (f)
		fclose(f);
	return found ? 0 : -1;
}

/*
 * Samples are read in batches: hostprof sleeps until a ring is half full or its drain timer fires, not once per
 * sample. Its waits (voluntary context switches) in steady state are counted, not timed: fewer than one per 20
 * samples (measured ~1 per 100 at 999 Hz), where waking per sample would give one per sample. A plain C program
 * takes no fast lane.
 *
 * The bound under load: split_paths runs 3 s of its own CPU time, so the steady state has ~2500 samples (3 s at
 * 999 Hz, less the 500 of the warm-up) however busy the machine. Waits are one per ~100 samples per ring (its
 * watermark), plus at most 2 per second of wall time from the 500 ms drain timer (RECORD_DRAIN_MS in
 * src/cmd/record.c): those stay under 2500 / 20 - 25 = 100 unless the run takes over 50 s, that is unless the
 * fixture gets under 6 % of a CPU. The run's wall time is printed to tell the two apart.
 */
static void test_batched_reads(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	unsigned long samples = 0, waits = 0;
	test_require_perf();
	uint64_t t0 = clock_mono_ns();
	assert_int_equal(test_run("\"$HOSTPROF\" record -v -F 999 -o %s -- %s 3 2> %s/err", f->out,
				  test_fixture_path("split_paths", fixture, sizeof(fixture)), f->dir), 0);
	double wall_s = (double)(clock_mono_ns() - t0) / 1e9;
	char err[512];
	snprintf(err, sizeof(err), "%s/err", f->dir);
	test_run("cat %s", err);
	assert_int_equal(steady_state_waits(err, &samples, &waits), 0);
	fprintf(stderr, "batched: %lu waits for %lu samples in steady state (at most %lu allowed); the run took %.1f s, "
			"of which the drain timer makes at most %.0f waits\n", waits, samples, samples / 20, wall_s,
		wall_s * 2 + 1);
	assert_true(samples >= 500); /* ~2500 expected: only samples lost in full rings take it lower */
	assert_true(waits * 20 <= samples);
	assert_int_not_equal(test_run("grep -q 'fast lane:' %s", err), 0);
}

static void test_errors_are_one_line(void **state)
{
	struct test_workdir *f = *state;
	assert_int_not_equal(test_run("\"$HOSTPROF\" record -q -o %s -p 2147483646 2>%s/err", f->out, f->dir), 0);
	assert_int_equal(test_run("grep -q 'no such process' %s/err", f->dir), 0);
	assert_int_not_equal(test_run("\"$HOSTPROF\" report %s/missing.msgpack 2>%s/err", f->dir, f->dir), 0);
	assert_int_equal(test_run("test $(wc -l < %s/err) -eq 1", f->dir), 0);
	assert_int_not_equal(test_run("\"$HOSTPROF\" record --stack-size 100 -- true 2>%s/err", f->dir), 0);
	assert_int_equal(test_run("grep -q 'multiple of 8' %s/err", f->dir), 0);
	assert_int_not_equal(test_run("\"$HOSTPROF\" record -q -o %s -- /nonexistent/cmd 2>%s/err", f->out, f->dir), 0);
	assert_int_equal(test_run("grep -q 'cannot run' %s/err", f->dir), 0);
}

/* The summary line "N stack-delta tables (K from cache), ...". */
static int table_summary(const char *path, unsigned *tables, unsigned *cached)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "hostprof: %u stack-delta tables (%u from cache)", tables, cached) == 2;
	if (f)
		fclose(f);
	return found ? 0 : -1;
}

/* The root-to-leaf names of a sample's stack, joined by ';'. */
static void stack_key(const struct profile *p, uint32_t stack, char *buf, size_t len)
{
	const char *names[128];
	size_t n = test_stack_functions(p, stack, names, 128), used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ";" : "", names[i]);
}

/* Share of p's samples whose stack is key. */
static double stack_share(const struct profile *p, const char *key)
{
	char k[4096];
	uint64_t n = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		stack_key(p, p->samples.items[i].stack, k, sizeof(k));
		n += strcmp(k, key) == 0 ? p->samples.items[i].count : 0;
	}
	return test_share(n, test_total_samples(p));
}

/* Every stack holding at least 2 % of a's samples holds a share of b's within 8 points of it. */
static void assert_same_stacks(const struct profile *a, const struct profile *b)
{
	char k[4096];
	for (uint32_t i = 0; i < a->samples.count; i++) {
		uint32_t first = 0;
		while (a->samples.items[first].stack != a->samples.items[i].stack)
			first++;
		if (first < i)
			continue;	/* the same stack in another thread's sample: weighed already */
		stack_key(a, a->samples.items[i].stack, k, sizeof(k));
		double sa = stack_share(a, k), sb = stack_share(b, k);
		if (sa < 2.0)
			continue;
		fprintf(stderr, "%.1f%% / %.1f%%: %s\n", sa, sb, k);
		assert_true(sb > sa - 8.0 && sb < sa + 8.0);
	}
}

/* Whether the cache directory holds a table file of the build-id id. */
static bool table_file_exists(const char *dir, const char *id)
{
	return test_run("ls '%s' 2>/dev/null | grep -q '^%s\\..*\\.sdt$'", dir, id) == 0;
}

/* The status of the table file of the build-id id in the cache directory (the one there must be). */
static struct stat table_file_stat(const char *dir, const char *id)
{
	char cmd[4400], name[300] = "";
	struct stat st;
	snprintf(cmd, sizeof(cmd), "ls '%s' | grep '^%s\\..*\\.sdt$'", dir, id);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(name, sizeof(name), p));
	pclose(p);
	name[strcspn(name, "\n")] = '\0';
	snprintf(cmd, sizeof(cmd), "%s/%s", dir, name);
	assert_int_equal(stat(cmd, &st), 0);
	return st;
}

static void record_program(const struct test_workdir *f, const char *flags, const char *prog, int run,
			   unsigned *tables, unsigned *cached)
{
	char err[600];
	snprintf(err, sizeof(err), "%s/err%d", f->dir, run);
	assert_int_equal(test_run("\"$HOSTPROF\" record -v %s -o %s/p%d.msgpack -- %s 1 2> %s", flags, f->dir, run,
				  prog, err), 0);
	test_run("grep stack-delta %s", err);
	assert_int_equal(table_summary(err, tables, cached), 0);
}

/*
 * Stack-delta tables come from the cache on the second run (man/hostprof.1, FILES): a program with a build-id
 * of its own (random: no earlier run can have cached it) is not cached under --no-cache, its table is stored by
 * the first run with the cache and loaded by the next, whose stacks are those of the run that built it.
 */
static void test_tables_from_cache(void **state)
{
	struct test_workdir *f = *state;
	char dir[4096], id[33], prog[600];
	unsigned tables[3], cached[3];
	uint8_t rnd[16];
	test_require_perf();
	assert_int_equal(cache_dir_default(dir, sizeof(dir)), 0);
	FILE *u = fopen("/dev/urandom", "rb");
	assert_non_null(u);
	assert_int_equal(fread(rnd, 1, sizeof(rnd), u), sizeof(rnd));
	fclose(u);
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", rnd[i]);
	snprintf(prog, sizeof(prog), "%s/split_paths", f->dir);
	assert_int_equal(test_run("cc -O2 -fomit-frame-pointer -Wl,--build-id=0x%s -o %s tests/fixtures/split_paths.c",
				  id, prog), 0);
	record_program(f, "--no-cache", prog, 0, &tables[0], &cached[0]);
	assert_int_equal(cached[0], 0);
	assert_false(table_file_exists(dir, id));
	record_program(f, "", prog, 1, &tables[1], &cached[1]);
	assert_true(table_file_exists(dir, id));
	struct stat stored = table_file_stat(dir, id);
	record_program(f, "", prog, 2, &tables[2], &cached[2]);
	/* The program's table was loaded, not built and stored again: the same file (a store replaces it by
	 * rename), marked used by the load. The counts alone cannot say: which other files get samples varies
	 * (the vdso's table, never cached, in some runs only). */
	struct stat loaded = table_file_stat(dir, id);
	assert_true(cached[2] >= 1);
	assert_true(loaded.st_ino == stored.st_ino);
	assert_true(loaded.st_mtim.tv_sec > stored.st_mtim.tv_sec ||
		    (loaded.st_mtim.tv_sec == stored.st_mtim.tv_sec && loaded.st_mtim.tv_nsec > stored.st_mtim.tv_nsec));
	char p1[600], p2[600];
	snprintf(p1, sizeof(p1), "%s/p1.msgpack", f->dir);
	snprintf(p2, sizeof(p2), "%s/p2.msgpack", f->dir);
	struct profile *a = test_read_profile(p1), *b = test_read_profile(p2);
	const char *roots[] = { "main" };
	assert_complete_share(a, roots, 1, 98.0);
	assert_complete_share(b, roots, 1, 98.0);
	assert_same_stacks(a, b);
	assert_same_stacks(b, a);
	profile_free(a);
	profile_free(b);
	test_run("rm -f '%s'/%s.*.sdt", dir, id);
}

/*
 * Targets that cannot be recorded get words, at once, and leave no profile: a command that does not exist, a
 * zombie, a pid that is gone, another user's process (not blamed on perf_event_paranoid).
 */
static void test_unrecordable_targets(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	test_require_perf();
	/* a missing command: exit 127, the reason, and no empty profile */
	assert_int_equal(test_run("\"$HOSTPROF\" record -o %s -- /nonexistent/cmd 2>%s/err", f->out, f->dir), 127);
	assert_int_equal(test_run("grep -qx \"hostprof: cannot run '/nonexistent/cmd': No such file or directory "
				  "(nothing recorded)\" %s/err", f->dir), 0);
	assert_int_equal(test_run("test $(wc -l < %s/err) -eq 1", f->dir), 0);
	assert_int_not_equal(test_run("test -e %s", f->out), 0);
	/* a zombie: a child that exited, its parent never reaps it; refused at once, not recorded until -d */
	assert_int_equal(test_run("python3 -c 'import os, sys, time\npid = os.fork()\nif pid == 0: os._exit(0)\n"
				  "print(pid, flush=True); time.sleep(5)' > %s/zombie & sleep 0.5", f->dir), 0);
	assert_int_equal(test_run("grep -q '^State:.*Z' /proc/$(cat %s/zombie)/status", f->dir), 0);
	assert_int_equal(test_run("timeout 2 \"$HOSTPROF\" record -d 10 -o %s -p $(cat %s/zombie) 2>%s/err", f->out,
				  f->dir, f->dir), 1);
	assert_int_equal(test_run("grep -q 'process [0-9]* is a zombie: it has exited' %s/err", f->dir), 0);
	assert_int_not_equal(test_run("test -e %s", f->out), 0);
	/* a pid that is gone */
	assert_int_equal(test_run("sh -c 'echo $$' > %s/gone", f->dir), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" record -o %s -p $(cat %s/gone) 2>%s/err", f->out, f->dir, f->dir), 1);
	assert_int_equal(test_run("grep -q 'no such process [0-9]* (it has exited, or never existed)' %s/err",
				  f->dir), 0);
	/* another user's process, from an unprivileged hostprof */
	test_require_root("to run hostprof as an unprivileged user next to root's process");
	test_require_tool("command -v setpriv", "setpriv");
	char *argv[] = { (char *)test_fixture_path("split_paths", fixture, sizeof(fixture)), "3", NULL };
	pid_t pid = spawn_fixture(argv);
	assert_int_equal(test_run("chmod 777 %s", f->dir), 0);
	int rc = test_run("setpriv --reuid=65534 --regid=65534 --clear-groups \"$HOSTPROF\" record -d 1 -o %s -p %d "
			  "2>%s/err", f->out, (int)pid, f->dir);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	test_run("cat %s/err", f->dir);
	assert_int_equal(rc, 1);
	assert_int_equal(test_run("grep -q 'process %d runs as another user (uid 0): profiling it needs root' %s/err",
				  (int)pid, f->dir), 0);
	assert_int_not_equal(test_run("grep -q paranoid %s/err", f->dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_split_paths_shares, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_threads_all_seen, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_shared_library, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_attach_running_process, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_system_wide, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_kernel_frames_symbolized, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_sigint_still_writes, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_unprivileged_own_command, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_distro_binary_xz, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_batched_reads, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_errors_are_one_line, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_tables_from_cache, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_unrecordable_targets, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("record (integration)", tests, NULL, NULL);
}
