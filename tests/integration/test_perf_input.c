/*
 * Integration tests of perf.data input (src/sampling/perf_data.h, src/cmd/perf_input.h): the split_paths fixture
 * recorded with the real `perf record` (--call-graph dwarf, the same compressed with -z, --call-graph fp) and read
 * back by hostprof; its shares checked against the fixture's 3:1 split, against hostprof's own `record` of the
 * same fixture, and against `perf report --no-children` on the same file (the same samples: self shares agree
 * within a rounding). Then the commands (report, convert, diff) on perf.data files, the recording's CPU count and
 * command line as `perf report --header-only` reads them, a file cut short (read as far
 * as it goes, said), a corrupt one (an error naming the offset), and the recording's files found under --symfs,
 * missing, or of another build, and a shared library gone or rebuilt (its frames are offsets in it, unnamed).
 * JIT code named from the perf map a fixture, and node, wrote, against perf report on the same file.
 * On xz, perf's dwarf file read by both tools: each library's and the top 20 named functions' self shares, and
 * the stacks reaching __libc_start_call_main (perf script's count). The dwarf and fp files are also read by
 * hotspot's perfparser (Debian's hotspot package), a second reader of the same samples: the leaves' self shares
 * compared, and the dwarf stacks reaching main (perfparser 4.12, Debian 12's, reads no COMPRESSED records: the -z
 * file is not given to it). Files of a newer perf (6.12) read as 6.1's. Last, sched:sched_switch samples (hotspot's
 * recipe, with and without --switch-events) as off-CPU time, against the offcpu_split fixture's own stopwatch.
 * They skip, saying why, only where perf is missing or the kernel refuses perf_event_open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/cmd/perf_input.h"
#include "tests/lib/perfparser_stream.h"
#include "tests/lib/testlib.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static void require_perf_tool(void)
{
	test_require_perf();
	test_require_tool("perf --version", "perf (make deps installs linux-perf)");
}

/* perf record of split_paths (2 s of its CPU) with perf's options opts into dir/name. */
static void perf_record(const char *dir, const char *name, const char *opts)
{
	char fixture[256];
	test_fixture_path("split_paths", fixture, sizeof(fixture));
	assert_int_equal(test_run("perf record -q -F 999 %s -o %s/%s -- %s 2 >/dev/null 2>&1", opts, dir, name,
				  fixture), 0);
}

static struct profile *load(const char *dir, const char *name)
{
	char path[600];
	struct profile *p = NULL;
	struct perf_input_options o = { .quiet = false };
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(perf_input_load(path, &o, &p), 0);
	return p;
}

/* The share of samples whose leaf function is name (contains: whose leaf function's name contains it). */
static double self_share_of(const struct profile *p, const char *name, bool contains)
{
	uint64_t self = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const char *names[4096];
		size_t n = test_stack_functions(p, p->samples.items[i].stack, names, ARRAY_LEN(names));
		if (n && (contains ? strstr(names[n - 1], name) != NULL : strcmp(names[n - 1], name) == 0))
			self += p->samples.items[i].count;
	}
	return test_share(self, test_total_samples(p));
}

static double self_share(const struct profile *p, const char *name)
{
	return self_share_of(p, name, false);
}

/* perf's (the command perf) report --no-children self share of symbol on dir/name (contains: summed over the
 * symbols containing it), -1 if absent. */
static double perf_self_share_of(const char *perf, const char *dir, const char *name, const char *symbol,
				 bool contains)
{
	char out[700], line[4096];
	snprintf(out, sizeof(out), "%s/%s.report", dir, name);
	if (test_run("%s report -i %s/%s --stdio --no-children --sort sym -q 2>/dev/null > %s", perf, dir, name, out) != 0)
		return -1;
	FILE *f = fopen(out, "re");
	double share = -1, s;
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		const char *sym = strstr(line, "[.] ");
		if (!sym || sscanf(line, " %lf%%", &s) != 1)
			continue;
		if (contains && strstr(sym + 4, symbol)) {
			share = (share < 0 ? 0 : share) + s;
		} else if (!contains && strcmp(sym + 4, symbol) == 0) {
			share = s;
			break;
		}
	}
	if (f)
		fclose(f);
	return share;
}

static double perf_self_share(const char *perf, const char *dir, const char *name, const char *symbol)
{
	return perf_self_share_of(perf, dir, name, symbol, false);
}

/* The leaves' self shares agree with perf's on the same file. */
static void assert_same_as_perf_of(const char *perf_cmd, const char *dir, const char *name, const struct profile *p)
{
	const char *leaves[] = { "leaf_a", "leaf_b" };
	for (size_t i = 0; i < ARRAY_LEN(leaves); i++) {
		double ours = self_share(p, leaves[i]), perf = perf_self_share(perf_cmd, dir, name, leaves[i]);
		fprintf(stderr, "%s: %s self %.2f%%, perf report %.2f%%\n", name, leaves[i], ours, perf);
		/* the same samples; perf rounds to 0.01 and may name a sample or two of a boundary otherwise */
		assert_true(perf >= 0);
		assert_true(fabs(ours - perf) <= 0.5);
	}
}

static void assert_same_as_perf(const char *dir, const char *name, const struct profile *p)
{
	assert_same_as_perf_of("perf", dir, name, p);
}

#define PERFPARSER "/usr/lib/x86_64-linux-gnu/libexec/hotspot-perfparser"

/* The share of perfparser's samples (tests/lib/perfparser_stream.h) with leaf as their leaf, and reaching main. */
static void perfparser_shares(const struct perfparser_stream *s, const char *leaf, double *self, double *to_main)
{
	size_t n = perfparser_stream_samples(s), leaves = 0, complete = 0;
	for (size_t i = 0; i < n; i++) {
		const char *names[512];
		size_t k = perfparser_stream_functions(s, i, names, ARRAY_LEN(names));
		k = k < ARRAY_LEN(names) ? k : ARRAY_LEN(names);
		leaves += k && strcmp(names[0], leaf) == 0;
		for (size_t j = 0; j < k; j++)
			if (strcmp(names[j], "main") == 0) {
				complete++;
				break;
			}
	}
	*self = test_share(leaves, n);
	*to_main = test_share(complete, n);
}

/* hotspot's perfparser on the same file: its own unwinding (libdw) of the same samples gives the same leaves'
 * self shares, and (dwarf: complete) hostprof's stacks reach main at least as often as its do. */
static void assert_same_as_perfparser(const char *dir, const char *name, const struct profile *p, bool complete)
{
	struct perfparser_stream *s;
	char err[300];
	if (test_run("test -x " PERFPARSER) != 0) {
		test_skip_part("hotspot's perfparser is not installed: no comparison with it (make deps installs hotspot)");
		return;
	}
	/* --max-frames -1: every frame it can unwind (its default stops at 64) */
	assert_int_equal(test_run(PERFPARSER " --input %s/%s --output %s/%s.qps --max-frames -1 2>%s/%s.qps.err", dir,
				  name, dir, name, dir, name), 0);
	snprintf(err, sizeof(err), "%s/%s.qps", dir, name);
	if (perfparser_stream_read(err, &s, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	const char *roots[] = { "main" };
	double whole = test_share(test_samples_complete_to(p, roots, 1), test_total_samples(p)), self, to_main = 0;
	fprintf(stderr, "%s: perfparser %zu samples, hostprof %llu\n", name, perfparser_stream_samples(s),
		(unsigned long long)test_total_samples(p));
	assert_int_equal(perfparser_stream_samples(s), test_total_samples(p));
	const char *leaves[] = { "leaf_a", "leaf_b" };
	for (size_t i = 0; i < ARRAY_LEN(leaves); i++) {
		double ours = self_share(p, leaves[i]);
		perfparser_shares(s, leaves[i], &self, &to_main);
		fprintf(stderr, "%s: %s self %.2f%%, perfparser %.2f%%\n", name, leaves[i], ours, self);
		/* the same samples unwound by two unwinders: a boundary sample or two may differ */
		assert_true(fabs(ours - self) <= 0.5);
	}
	fprintf(stderr, "%s: unwound to main: hostprof %.2f%%, perfparser %.2f%%\n", name, whole, to_main);
	if (complete) {
		assert_true(to_main > 50.0);	/* perfparser did unwind: the comparison means something */
		assert_true(whole >= to_main - 0.5);
	}
	perfparser_stream_free(s);
	/* the stream cut inside its last event: the reader refuses it, naming where */
	assert_int_equal(test_run("head -c -3 %s/%s.qps > %s/cut.qps", dir, name, dir), 0);
	snprintf(err, sizeof(err), "%s/cut.qps", dir);
	assert_int_equal(perfparser_stream_read(err, &s, err, sizeof(err)), -EINVAL);
	fprintf(stderr, "%s\n", err);
	assert_non_null(strstr(err, "ends inside an event (event at offset"));
}

static void assert_split(const char *name, const struct profile *p, bool complete)
{
	uint64_t total = test_total_samples(p);
	const char *a[] = { "main", "path_a", "leaf_a" };
	const char *b[] = { "main", "path_b", "mid_b", "leaf_b" };
	double pa = test_share(test_samples_with_chain(p, a, ARRAY_LEN(a)), total);
	double pb = test_share(test_samples_with_chain(p, b, ARRAY_LEN(b)), total);
	const char *roots[] = { "main" };
	double whole = test_share(test_samples_complete_to(p, roots, 1), total);
	fprintf(stderr, "%s: %llu samples, path_a %.1f%%, path_b %.1f%%, unwound to main %.1f%%\n", name,
		(unsigned long long)total, pa, pb, whole);
	assert_true(total >= 1000);
	assert_true(p->info.samples == total);
	if (!complete)
		return;
	/* 3 units of work against 1 (test_record's test_split_paths_shares says why 8 points) */
	assert_true(pa > 75.0 - 8.0 && pa < 75.0 + 8.0);
	assert_true(pb > 25.0 - 8.0 && pb < 25.0 + 8.0);
	assert_true(whole >= 98.0);
}

/* --call-graph dwarf: unwound like hostprof's own samples, and agreeing with hostprof record's shares. */
static void test_dwarf(void **state)
{
	struct test_workdir *f = *state;
	char fixture[256];
	require_perf_tool();
	perf_record(f->dir, "dwarf.data", "--call-graph dwarf,16384");
	struct profile *p = load(f->dir, "dwarf.data");
	assert_split("perf.data (dwarf)", p, true);
	assert_same_as_perf(f->dir, "dwarf.data", p);
	assert_same_as_perfparser(f->dir, "dwarf.data", p, true);
	assert_true(p->info.event && p->info.event[0]);	/* the event's name, from EVENT_DESC */
	assert_true(p->info.frequency_hz == 999);
	/* hostprof's own recording of the same fixture: shares within noise (two runs of ~2000 samples) */
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- %s 2", f->out,
				  test_fixture_path("split_paths", fixture, sizeof(fixture))), 0);
	struct profile *q = test_read_profile(f->out);
	/* record says the host's CPUs and its own command line, as perf does in its file */
	assert_int_equal(q->info.cpus_online, sysconf(_SC_NPROCESSORS_ONLN));
	assert_int_equal(q->info.cpus_available, sysconf(_SC_NPROCESSORS_CONF));
	assert_non_null(q->info.cmdline);
	assert_int_equal(strncmp(q->info.cmdline, "hostprof record -q -o ", 22), 0);
	double da = self_share(p, "leaf_a") - self_share(q, "leaf_a");
	double db = self_share(p, "leaf_b") - self_share(q, "leaf_b");
	fprintf(stderr, "perf.data vs hostprof record: leaf_a %+.1f, leaf_b %+.1f points\n", da, db);
	assert_true(fabs(da) < 8.0 && fabs(db) < 8.0);
	profile_free(q);
	profile_free(p);
}

/* perf record -z: COMPRESSED records, the same samples as without. */
static void test_compressed(void **state)
{
	struct test_workdir *f = *state;
	require_perf_tool();
	perf_record(f->dir, "z.data", "-z --call-graph dwarf,16384");
	struct profile *p = load(f->dir, "z.data");
	assert_split("perf.data (dwarf, -z)", p, true);
	assert_same_as_perf(f->dir, "z.data", p);
	profile_free(p);
}

/* --call-graph fp: no registers, no stack copy; the kernel's chain is the stack (split_paths omits frame
 * pointers, so it stops early, as perf's does): the leaves still agree with perf's. */
static void test_frame_pointers(void **state)
{
	struct test_workdir *f = *state;
	require_perf_tool();
	perf_record(f->dir, "fp.data", "--call-graph fp");
	struct profile *p = load(f->dir, "fp.data");
	assert_split("perf.data (fp)", p, false);
	assert_same_as_perf(f->dir, "fp.data", p);
	assert_same_as_perfparser(f->dir, "fp.data", p, false);
	profile_free(p);
}

/* The value of a "# key : value" line of `perf report --header-only`, its trailing blanks cut, into buf ("" if
 * there is no such line). */
static void perf_header_value(const char *text, const char *key, char *buf, size_t len)
{
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "# %s : ", key);
	buf[0] = '\0';
	for (const char *at = text; (at = strstr(at, prefix)); at++) {
		if (at != text && at[-1] != '\n')
			continue;
		at += strlen(prefix);
		size_t n = strcspn(at, "\n");
		while (n && at[n - 1] == ' ')
			n--;
		snprintf(buf, len, "%.*s", (int)n, at);
		return;
	}
}

/* The recording's CPU count and command line: hostprof's report and profile say what perf itself reads from the
 * file's header (NRCPUS, CMDLINE). */
static void assert_header_as_perf(const char *d, const char *name, const char *report_path)
{
	char path[600], online[32], avail[32], cmdline[4096], want[4200];
	snprintf(path, sizeof(path), "%s/header.txt", d);
	assert_int_equal(test_run("perf report -i %s/%s --header-only > %s 2>/dev/null", d, name, path), 0);
	char *header = test_read_text(path), *report = test_read_text(report_path);
	perf_header_value(header, "nrcpus online", online, sizeof(online));
	perf_header_value(header, "nrcpus avail", avail, sizeof(avail));
	perf_header_value(header, "cmdline", cmdline, sizeof(cmdline));
	fprintf(stderr, "perf --header-only: nrcpus online %s, avail %s, cmdline \"%s\"\n", online, avail, cmdline);
	assert_true(atoi(online) > 0 && atoi(avail) > 0 && strstr(cmdline, "record -q -F 999"));
	if (strcmp(online, avail) == 0)
		snprintf(want, sizeof(want), ", %s CPUs\n", online);
	else
		snprintf(want, sizeof(want), ", %s of %s CPUs online\n", online, avail);
	assert_non_null(strstr(report, want));
	snprintf(want, sizeof(want), "\nCommand:            %s\n", cmdline);
	assert_non_null(strstr(report, want));
	struct profile *p = load(d, name);
	assert_int_equal(p->info.cpus_online, atoi(online));
	assert_int_equal(p->info.cpus_available, atoi(avail));
	assert_string_equal(p->info.cmdline, cmdline);
	profile_free(p);
	free(header);
	free(report);
}

/* Patch the u16 size of the data section's first record to 4 (impossible); returns the data offset. */
static long corrupt_first_record(const char *path)
{
	FILE *fp = fopen(path, "r+b");
	assert_non_null(fp);
	uint64_t off = 0;
	uint16_t four = 4;
	assert_int_equal(fseek(fp, 40, SEEK_SET), 0);
	assert_int_equal(fread(&off, 8, 1, fp), 1);
	assert_int_equal(fseek(fp, (long)off + 6, SEEK_SET), 0);
	assert_int_equal(fwrite(&four, 2, 1, fp), 1);
	assert_int_equal(fclose(fp), 0);
	return (long)off;
}

/* The commands take perf.data files where they take profiles; a cut file is read as far as it goes, a corrupt
 * one is an error naming its offset. */
static void test_commands(void **state)
{
	struct test_workdir *f = *state;
	const char *d = f->dir;
	require_perf_tool();
	perf_record(d, "a.data", "--call-graph dwarf,8192");
	perf_record(d, "b.data", "-z --call-graph dwarf,8192");
	assert_int_equal(test_run("\"$HOSTPROF\" report %s/a.data > %s/report.txt 2> %s/report.err", d, d, d), 0);
	assert_int_equal(test_run("grep -q 'leaf_a (split_paths.c)' %s/report.txt", d), 0);
	assert_int_equal(test_run("grep -q 'records used: .*SAMPLE' %s/report.err", d), 0);
	assert_header_as_perf(d, "a.data", strcat(strcpy((char[600]){ 0 }, d), "/report.txt"));
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s/a.data --to collapsed -o %s/a.folded", d, d), 0);
	assert_int_equal(test_run("grep -q 'main;path_a;leaf_a' %s/a.folded", d), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s/b.data --to pprof -o %s/b.pb.gz", d, d), 0);
	/* the same workload twice: no function's share grew past the threshold */
	assert_int_equal(test_run("\"$HOSTPROF\" diff %s/a.data %s/b.data -t 10", d, d), 0);
	/* cut at two thirds: what was read is used, and said */
	assert_int_equal(test_run("head -c $(( $(stat -c %%s %s/a.data) * 2 / 3 )) %s/a.data > %s/cut.data", d, d, d),
			 0);
	assert_int_equal(test_run("\"$HOSTPROF\" report %s/cut.data > %s/cut.txt 2> %s/cut.err", d, d, d), 0);
	assert_int_equal(test_run("grep -q 'perf did not finish it' %s/cut.err", d), 0);
	assert_int_equal(test_run("grep -q leaf_a %s/cut.txt", d), 0);
	/* corrupt: exit 1, one line naming the offset */
	assert_int_equal(test_run("cp %s/a.data %s/bad.data", d, d), 0);
	long off = corrupt_first_record(strcat(strcpy((char[600]){ 0 }, d), "/bad.data"));
	assert_int_equal(test_run("\"$HOSTPROF\" report %s/bad.data > /dev/null 2> %s/bad.err", d, d), 1);
	assert_int_equal(test_run("grep -q 'corrupt perf.data at offset %ld: a record of 4 bytes' %s/bad.err", off, d),
			 0);
	/* another kernel's recording (its release in the file changed): its kernel frames are not named from this
	 * machine's kallsyms */
	assert_int_equal(test_run("python3 -c \"import os, sys; d = open(sys.argv[1], 'rb').read(); r = os.uname().release"
				  ".encode(); i = d.rfind(r); assert i > 0; open(sys.argv[2], 'wb').write(d[:i] + b'X' * "
				  "len(r) + d[i + len(r):])\" %s/a.data %s/otherkernel.data", d, d), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" report %s/otherkernel.data > %s/ok.txt 2>/dev/null", d, d), 0);
	assert_int_equal(test_run("grep -q 'leaf_a (split_paths.c)' %s/ok.txt", d), 0);
	assert_int_equal(test_run("grep -E '\\[kernel\\] +[a-z_]' %s/ok.txt", d), 1);
	/* two events: the first one's samples are used (told apart by their ids), the other's counted */
	perf_record(d, "two.data", "-e cpu-clock,task-clock --call-graph dwarf,8192");
	assert_int_equal(test_run("\"$HOSTPROF\" report %s/two.data > %s/two.txt 2> %s/two.err", d, d, d), 0);
	assert_int_equal(test_run("grep -q 'samples of cpu-clock .* samples of other events not used' %s/two.err", d), 0);
	assert_int_equal(test_run("grep -q 'leaf_a (split_paths.c)' %s/two.txt", d), 0);
	/* not a profile, not a perf.data file: the profile reader's error, as before */
	assert_int_equal(test_run("printf 'PERFILE1xxxxxxxx' > %s/other.data", d), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" report %s/other.data > /dev/null 2>&1", d), 1);
}

/* The recording's files found elsewhere: not at their path (said once, frames offsets in it), under --symfs, and at
 * their path but of another build (said, not used). perf's build-id cache is kept out (--no-buildid-cache, an
 * empty HOME). */
static void test_symfs(void **state)
{
	struct test_workdir *f = *state;
	const char *d = f->dir;
	char fixture[256], other[256];
	require_perf_tool();
	test_fixture_path("split_paths", fixture, sizeof(fixture));
	test_fixture_path("threads", other, sizeof(other));
	assert_int_equal(test_run("mkdir -p %s/bin %s/root%s/bin && cp %s %s/bin/split_paths", d, d, d, fixture, d), 0);
	assert_int_equal(test_run("perf record -q -F 999 --no-buildid-cache --call-graph dwarf,8192 -o %s/s.data -- "
				  "%s/bin/split_paths 1 >/dev/null 2>&1", d, d), 0);
	assert_int_equal(test_run("mv %s/bin/split_paths %s/root%s/bin/split_paths", d, d, d), 0);
	assert_int_equal(test_run("HOME=%s \"$HOSTPROF\" report %s/s.data > %s/gone.txt 2> %s/gone.err", d, d, d, d), 0);
	assert_int_equal(test_run("grep -q 'split_paths: not found here, [0-9]* samples in it' %s/gone.err", d), 0);
	assert_int_equal(test_run("grep -q leaf_a %s/gone.txt", d), 1);
	assert_int_equal(test_run("HOME=%s \"$HOSTPROF\" report --symfs %s/root %s/s.data > %s/symfs.txt", d, d, d, d), 0);
	assert_int_equal(test_run("grep -q 'leaf_a (split_paths.c)' %s/symfs.txt", d), 0);
	assert_int_equal(test_run("cp %s %s/bin/split_paths", other, d), 0);
	assert_int_equal(test_run("HOME=%s \"$HOSTPROF\" report %s/s.data > %s/other.txt 2> %s/other.err", d, d, d, d),
			 0);
	assert_int_equal(test_run("grep -q 'split_paths: not the build perf recorded (build-id [0-9a-f]*, here [0-9a-f]*), [0-9]* samples' %s/other.err", d), 0);
	assert_int_equal(test_run("grep -q worker_spin %s/other.txt", d), 1);
}

/* The offset in the file path of function name's first byte, and its size (from its symbol table). */
static void function_offset(const char *path, const char *name, uint64_t *offset, uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(elf_version(EV_CURRENT) != EV_NONE);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(e);
	bool found = false;
	for (Elf_Scn *scn = NULL; !found && (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; !found && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			GElf_Shdr text;
			const char *n = gelf_getsym(d, (int)i, &sym) ? elf_strptr(e, sh.sh_link, sym.st_name) : NULL;
			if (!n || strcmp(n, name) != 0 || !gelf_getshdr(elf_getscn(e, sym.st_shndx), &text))
				continue;
			*offset = sym.st_value - text.sh_addr + text.sh_offset;
			*size = sym.st_size;
			found = true;
		}
	}
	elf_end(e);
	close(fd);
	assert_true(found);
}

/* What the report said of the library not used: the samples in it, and the build-id perf recorded ("" if the
 * file was missing rather than another build). */
static uint64_t said_samples(const char *err_path, char *recorded, size_t len)
{
	char line[4096], want[41];
	unsigned long long n;
	FILE *f = fopen(err_path, "re");
	assert_non_null(f);
	bool found = false;
	recorded[0] = '\0';
	while (!found && fgets(line, sizeof(line), f)) {
		const char *at = strstr(line, "libfixture_shared.so: ");
		if (!at)
			continue;
		if (sscanf(at, "libfixture_shared.so: not found here, %llu samples in it", &n) == 1)
			found = true;
		else if (sscanf(at, "libfixture_shared.so: not the build perf recorded (build-id %40[0-9a-f], here "
				"%*[0-9a-f]), %llu samples in it", want, &n) == 2) {
			snprintf(recorded, len, "%s", want);
			found = true;
		}
	}
	fclose(f);
	assert_true(found);
	return n;
}

/* The samples whose user leaf is in lib (a mapping of that name): each unnamed, with its mapping's build-id
 * recorded (when given), and how many of them fall in [lo, hi) of the file. */
static uint64_t leaves_in_library(const struct profile *p, const char *recorded, uint64_t lo, uint64_t hi,
				  uint64_t *in_range)
{
	uint64_t n = 0;
	*in_range = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_stack *st = &p->stacks.items[p->samples.items[i].stack];
		const struct profile_location *leaf = NULL;
		for (uint32_t k = 0; k < st->nlocations && !leaf; k++) {
			const struct profile_location *l = &p->locations.items[st->locations[k]];
			if (l->frame_kind != PROFILE_FRAME_KERNEL)
				leaf = l;
		}
		if (!leaf || !leaf->mapping)
			continue;
		const struct profile_mapping *m = &p->mappings.items[leaf->mapping];
		const char *file = profile_string(p, m->filename);
		size_t len = strlen(file), tail = strlen("/libfixture_shared.so");
		if (len < tail || strcmp(file + len - tail, "/libfixture_shared.so") != 0)
			continue;
		assert_int_equal(leaf->nlines, 0);	/* never another build's names */
		if (recorded[0])
			assert_string_equal(profile_string(p, m->build_id), recorded);
		n += p->samples.items[i].count;
		if (leaf->address >= lo && leaf->address < hi)
			*in_range += p->samples.items[i].count;
	}
	return n;
}

/* The shared_caller fixture and its library copied into dir/bin, where a test may take the library away. */
static void copy_shared_caller(const char *dir)
{
	char caller[256], lib[256];
	test_fixture_path("shared_caller", caller, sizeof(caller));
	test_fixture_path("libfixture_shared.so", lib, sizeof(lib));
	assert_int_equal(test_run("mkdir -p %s/bin && cp %s %s %s/bin/", dir, caller, lib, dir), 0);
}

/* Checks a report of lib.data in dir whose library is not used (what) against its file as recorded (orig). */
static void assert_library_offsets(const char *d, const char *what, const char *orig)
{
	char err[600], recorded[41], *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	uint64_t lo, size, hot, hot_size, in_range;
	function_offset(orig, "lib_inner_mix", &lo, &size);
	function_offset(orig, "lib_hot_function", &hot, &hot_size);
	uint64_t hi = (hot + hot_size > lo + size ? hot + hot_size : lo + size), said;
	lo = hot < lo ? hot : lo;
	assert_int_equal(test_run("HOME=%s \"$HOSTPROF\" report %s/lib.data > %s/%s.txt 2> %s/%s.err", d, d, d, what,
				  d, what), 0);
	snprintf(err, sizeof(err), "%s/%s.err", d, what);
	said = said_samples(err, recorded, sizeof(recorded));
	/* report's table groups its code as [libfixture_shared.so]; --addresses and collapsed stacks show offsets (its
	 * leaves: without the file's unwind tables the walk ends there, as perf's does) */
	assert_int_equal(test_run("grep -Eq ' libfixture_shared.so +\\[libfixture_shared.so\\]' %s/%s.txt", d, what), 0);
	assert_int_equal(test_run("grep -Eq 'lib_inner_mix|lib_hot_function|\\[unknown\\]' %s/%s.txt", d, what), 1);
	assert_int_equal(test_run("HOME=%s \"$HOSTPROF\" report --addresses %s/lib.data 2>/dev/null | grep -q "
				  "'libfixture_shared.so+0x'", d, d), 0);
	assert_int_equal(test_run("HOME=%s \"$HOSTPROF\" convert %s/lib.data --to collapsed -o %s/%s.folded && "
				  "grep -q ';libfixture_shared.so+0x[0-9a-f]* [0-9]' %s/%s.folded", d, d, d, what, d, what),
			 0);
	/* in-process: every sample of it located in the file, where its functions are */
	assert_int_equal(setenv("HOME", d, 1), 0);
	struct profile *p = load(d, "lib.data");
	uint64_t n = leaves_in_library(p, recorded, lo, hi, &in_range);
	fprintf(stderr, "%s: %" PRIu64 " samples said, %" PRIu64 " with their leaf in the library, %" PRIu64
		" of them in its functions' bytes [0x%" PRIx64 ", 0x%" PRIx64 ")\n", what, said, n, in_range, lo, hi);
	assert_true(said >= 500);	/* 1 s of CPU at 999 Hz, nearly all of it in the library */
	assert_true(n == said);
	assert_true(in_range == n);
	profile_free(p);
	if (home)
		setenv("HOME", home, 1);
	else
		unsetenv("HOME");
	free(home);
}

/* A shared library the recording used, gone and then rebuilt: its frames are its code at offsets in the file,
 * never [unknown] and never the names of another build, counted as the report says. */
static void test_library_not_here(void **state)
{
	struct test_workdir *f = *state;
	const char *d = f->dir;
	require_perf_tool();
	copy_shared_caller(d);
	assert_int_equal(test_run("perf record -q -F 999 --no-buildid-cache --call-graph dwarf,8192 -o %s/lib.data -- "
				  "%s/bin/shared_caller 1 >/dev/null 2>&1", d, d), 0);
	assert_int_equal(test_run("mv %s/bin/libfixture_shared.so %s/orig.so", d, d), 0);
	char orig[600];
	snprintf(orig, sizeof(orig), "%s/orig.so", d);
	assert_library_offsets(d, "gone", orig);
	/* another build at its path: -O0 of the same source (other code, other build-id, the same names) */
	assert_int_equal(test_run("cc -O0 -g -fPIC -shared -o %s/bin/libfixture_shared.so "
				  "tests/fixtures/libfixture_shared.c", d), 0);
	assert_library_offsets(d, "rebuilt", orig);
	assert_int_equal(test_run("grep -q 'not the build perf recorded' %s/rebuilt.err", d), 0);
}

/* Self shares by a column of `perf report --no-children --sort key -q` on file: up to max rows of "share%  name". */
static size_t perf_shares(const char *file, const char *key, char names[][128], double *shares, size_t max)
{
	char cmd[800], line[4096];
	snprintf(cmd, sizeof(cmd), "perf report -i %s --stdio --no-children --sort %s -q -g none 2>/dev/null", file,
		 key);
	FILE *f = popen(cmd, "r");
	size_t n = 0;
	double s;
	int used;
	while (f && n < max && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, " %lf%%%n", &s, &used) != 1)
			continue;
		const char *name = line + used;
		while (*name == ' ')
			name++;
		if (strncmp(name, "[.] ", 4) == 0 || strncmp(name, "[k] ", 4) == 0)
			name += 4;
		snprintf(names[n], 128, "%.*s", (int)strcspn(name, " "), name);
		shares[n++] = s;
	}
	if (f)
		pclose(f);
	return n;
}

/* name without its leading underscores */
static const char *plain_name(const char *name)
{
	while (*name == '_')
		name++;
	return name;
}

/* hostprof report's self share of the rows whose column col (3 library, 4 function) is name; plain: a function's
 * names compared without their leading underscores. */
static double report_share_of(const char *report, int col, const char *name, bool plain)
{
	FILE *f = fopen(report, "re");
	char line[4096];
	double sum = 0;
	while (f && fgets(line, sizeof(line), f)) {
		double self, total;
		unsigned long long count;
		char lib[512], fn[2048];
		if (sscanf(line, " %lf%% %lf%% %llu %511s %2047s", &self, &total, &count, lib, fn) != 5)
			continue;
		if (plain ? strcmp(plain_name(fn), plain_name(name)) == 0 : strcmp(col == 3 ? lib : fn, name) == 0)
			sum += self;
	}
	if (f)
		fclose(f);
	return sum;
}

static double report_share(const char *report, int col, const char *name)
{
	return report_share_of(report, col, name, false);
}

/*
 * The share of the function libc names name under any of its aliases (same address and size): where two
 * names are as plain, perf takes the longer (__memmove_avx_unaligned_erms), hostprof the first in the table, as
 * libdwfl does (__memcpy_avx_unaligned_erms). 0 when libc has no such name.
 */
static double libc_alias_share(const char *report, const char *name)
{
	char list[700];
	double best = 0;
	if (snprintf(list, sizeof(list), "%s.aliases", report) >= (int)sizeof(list))
		return 0;
	/* libc's symbol table is in its separate debug file (libc6-dbg), where perf and hostprof find these names */
	if (test_run("f=/usr/lib/x86_64-linux-gnu/libc.so.6; b=$(readelf -n $f | awk '/Build ID/ { print $3 }'); "
		     "d=/usr/lib/debug/.build-id/$(echo $b | cut -c1-2)/$(echo $b | cut -c3-).debug; [ -f $d ] && f=$d; "
		     "nm --defined-only -S $f | awk -v n='%s' "
		     "'{ sub(/@.*/, \"\", $4); key[$4] = $1 \" \" $2; all[NR] = $1 \" \" $2 \" \" $4 } "
		     "END { for (i in all) { split(all[i], f, \" \"); if (f[1] \" \" f[2] == key[n]) print f[3] } }' "
		     "> %s", name, list) != 0)
		return 0;
	char *text = test_read_text(list), *save = NULL;
	for (char *alias = text ? strtok_r(text, "\n", &save) : NULL; alias; alias = strtok_r(NULL, "\n", &save)) {
		double share = strcmp(alias, name) ? report_share_of(report, 4, alias, false) : 0;
		best = share > best ? share : best;
	}
	free(text);
	return best;
}

/* A function's self share under perf's name for it, or, where hostprof shows another of its aliases (the plainest:
 * brk where perf says __brk, same address and size), under that one. */
static double function_share(const char *report, const char *name)
{
	double exact = report_share_of(report, 4, name, false);
	if (exact > 0)
		return exact;
	double plain = report_share_of(report, 4, name, true);
	/* glibc's __GI_ names are hidden aliases of its public ones, at the same address (__GI___sysinfo is
	 * sysinfo): perf may name one, hostprof another. */
	if (plain <= 0 && strncmp(name, "__GI_", 5) == 0)
		plain = report_share_of(report, 4, name + 5, true);
	return plain > 0 ? plain : libc_alias_share(report, name);
}

/* A library gone from its path is found in the build-id cache perf record filled (perf's buildid.dir, given as
 * $PERF_BUILDID_DIR as perf gives it to its scripts), named as if it were still there; without that cache it is
 * unnamed. */
static void test_buildid_dir(void **state)
{
	struct test_workdir *f = *state;
	const char *d = f->dir;
	require_perf_tool();
	copy_shared_caller(d);
	assert_int_equal(test_run("mkdir -p %s/cache", d), 0);
	/* perf's cache directory is its buildid.dir setting; it exports it to its scripts as $PERF_BUILDID_DIR */
	assert_int_equal(test_run("printf '[buildid]\\n\\tdir = %s/cache\\n' > %s/perfconfig && PERF_CONFIG=%s/perfconfig "
				  "perf record -q -F 999 --call-graph dwarf,8192 -o %s/lib.data -- %s/bin/shared_caller 1 "
				  ">/dev/null 2>&1", d, d, d, d, d), 0);
	assert_int_equal(test_run("ls %s/cache/.build-id/*/*/elf >/dev/null", d), 0);	/* perf filled it */
	assert_int_equal(test_run("rm %s/bin/libfixture_shared.so", d), 0);
	assert_int_equal(test_run("PERF_BUILDID_DIR=%s/cache HOME=%s \"$HOSTPROF\" report %s/lib.data > %s/found.txt "
				  "2> %s/found.err", d, d, d, d, d), 0);
	assert_int_equal(test_run("grep -q lib_hot_function %s/found.txt", d), 0);
	assert_int_equal(test_run("grep -q 'libfixture_shared.so:' %s/found.err", d), 1);	/* nothing said missing */
	assert_int_equal(test_run("PERF_BUILDID_DIR=%s/elsewhere HOME=%s \"$HOSTPROF\" report %s/lib.data > "
				  "%s/missing.txt 2> %s/missing.err", d, d, d, d, d), 0);
	assert_int_equal(test_run("grep -q lib_hot_function %s/missing.txt", d), 1);
	assert_int_equal(test_run("grep -q 'libfixture_shared.so' %s/missing.err", d), 0);
}

/*
 * A newer perf than Debian 12's (bookworm-backports' linux-perf, fetched into the download cache and run from
 * there: tests/newer_perf/fetch): its dwarf and -z files read as perf 6.1's are, agreeing with its own report.
 */
static void test_newer_perf(void **state)
{
	struct test_workdir *f = *state;
	char perf[600] = "", cmd[700], fixture[256];
	require_perf_tool();
	snprintf(cmd, sizeof(cmd), "tests/newer_perf/fetch '%s'", test_download_cache());
	FILE *fetch = popen(cmd, "r");
	if (!fetch || !fgets(perf, sizeof(perf), fetch) || pclose(fetch) != 0) {
		test_skip_part("no newer perf: bookworm-backports' linux-perf could not be fetched");
		return;
	}
	perf[strcspn(perf, "\n")] = '\0';
	test_fixture_path("split_paths", fixture, sizeof(fixture));
	assert_int_equal(test_run("%s --version", perf), 0);
	const char *names[] = { "new.data", "new-z.data" }, *opts[] = { "", "-z" };
	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		assert_int_equal(test_run("%s record -q -F 999 %s --call-graph dwarf,16384 -o %s/%s -- %s 2 >/dev/null "
					  "2>&1", perf, opts[i], f->dir, names[i], fixture), 0);
		struct profile *p = load(f->dir, names[i]);
		assert_split(names[i], p, true);
		assert_same_as_perf_of(perf, f->dir, names[i], p);
		profile_free(p);
	}
}

/*
 * xz, a real program without symbols in its library: perf's dwarf file read by both tools. The same share in each
 * library and in each named function perf puts first (the same samples, so within rounding), and at least as many
 * stacks reaching __libc_start_call_main as perf script shows.
 */
static void test_xz_agrees_with_perf(void **state)
{
	struct test_workdir *f = *state;
	const char *d = f->dir;
	require_perf_tool();
	test_require_tool("xz --version", "xz (make deps installs xz-utils)");
	assert_int_equal(test_run("seq 1 600000 > %s/in.txt && perf record -q -F 999 --call-graph dwarf,16384 -o "
				  "%s/xz.data -- xz -6 -T1 -c %s/in.txt > /dev/null 2>&1", d, d, d), 0);
	char file[600], report[700];
	snprintf(file, sizeof(file), "%s/xz.data", d);
	snprintf(report, sizeof(report), "%s/xz.report", d);
	assert_int_equal(test_run("\"$HOSTPROF\" report --wide -n 100000 %s > %s 2>/dev/null", file, report), 0);
	char names[20][128];
	double shares[20];
	size_t n = perf_shares(file, "dso", names, shares, 20);
	assert_true(n >= 1);
	for (size_t i = 0; i < n && shares[i] >= 0.5; i++) {
		/* perf's [kernel.kallsyms] is hostprof's [kernel] */
		double ours = report_share(report, 3, strcmp(names[i], "[kernel.kallsyms]") ? names[i] : "[kernel]");
		fprintf(stderr, "xz: library %s self %.2f%%, perf %.2f%%\n", names[i], ours, shares[i]);
		assert_true(fabs(ours - shares[i]) <= 0.5);
	}
	/* the top 20 named functions (liblzma's own are addresses in a stripped file: a library's row in hostprof) */
	static char syms[400][128];
	static double sym_shares[400];
	n = perf_shares(file, "sym", syms, sym_shares, 400);
	size_t named = 0;
	for (size_t i = 0; i < n && named < 20; i++) {
		if (strncmp(syms[i], "0x", 2) == 0)
			continue;
		double ours = function_share(report, syms[i]);
		fprintf(stderr, "xz: %s self %.2f%%, perf %.2f%%\n", syms[i], ours, sym_shares[i]);
		assert_true(ours > 0 && fabs(ours - sym_shares[i]) <= 0.3);
		named++;
	}
	assert_true(named >= 10);
	struct profile *p = load(d, "xz.data");
	const char *roots[] = { "__libc_start_call_main" };
	uint64_t total = test_total_samples(p), ours = test_samples_complete_to(p, roots, 1);
	char count[64] = "";
	assert_int_equal(setenv("PERF_FILE", file, 1), 0);
	FILE *ps = popen("perf script -i \"$PERF_FILE\" -F ip,sym 2>/dev/null | awk 'BEGIN { RS = \"\" } "
		   "/__libc_start_call_main/ { c++ } END { print c + 0 }'", "r");
	assert_non_null(ps);
	assert_non_null(fgets(count, sizeof(count), ps));
	pclose(ps);
	uint64_t theirs = strtoull(count, NULL, 10);
	fprintf(stderr, "xz: %llu samples, %llu reach __libc_start_call_main, perf script %llu\n",
		(unsigned long long)total, (unsigned long long)ours, (unsigned long long)theirs);
	assert_true(total >= 1000);
	assert_true(ours >= theirs);
	profile_free(p);
}

/*
 * sched:sched_switch samples become off-CPU time. Where tracefs is not mounted (perf record needs it for the
 * tracepoint; hostprof does not, to read the file) it is mounted for the recording and unmounted after.
 */
static bool tracefs_mount(void)
{
	if (access("/sys/kernel/tracing/events/sched/sched_switch", F_OK) == 0)
		return false;
	if (test_run("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null") != 0 ||
	    access("/sys/kernel/tracing/events/sched/sched_switch", F_OK) != 0)
		test_skip("tracefs is not mounted and cannot be (perf record -e sched:sched_switch needs it)");
	return true;
}

/* hotspot's recipe (cpu-clock for the hardware cycles this machine lacks; without clock the tracepoint alone) of
 * offcpu_split pipe, with perf's options opts: perf's -F would sample the tracepoint too, so the clock's frequency
 * is its own. The fixture's stopwatch lines go to dir/name.stopwatch. */
static void record_switches(const char *dir, const char *name, bool clock, const char *opts)
{
	char fixture[256];
	bool mounted = tracefs_mount();
	int rc = test_run("perf record -q --call-graph dwarf,8192 %s -e sched:sched_switch %s -o %s/%s -- %s pipe "
			  ">/dev/null 2>%s/%s.stopwatch", clock ? "-e cpu-clock/freq=999/" : "", opts, dir, name,
			  test_fixture_path("offcpu_split", fixture, sizeof(fixture)), dir, name);
	if (mounted)
		assert_int_equal(test_run("umount /sys/kernel/tracing"), 0);
	assert_int_equal(rc, 0);
}

/* The same of offcpu_split mode system-wide (perf record -a: CPU-wide switch records, every thread's switches),
 * after eight short-lived processes (/bin/true) came and went. */
static void record_switches_all(const char *dir, const char *name, const char *mode)
{
	char fixture[256];
	bool mounted = tracefs_mount();
	int rc = test_run("perf record -q -a --call-graph dwarf,1024 -e cpu-clock/freq=99/ -e sched:sched_switch "
			  "--switch-events -o %s/%s -- sh -c 'for i in 1 2 3 4 5 6 7 8; do /bin/true; done; "
			  "echo \"offcpu_split: pid $$\" >&2; exec %s %s' "
			  ">/dev/null 2>%s/%s.stopwatch", dir, name,
			  test_fixture_path("offcpu_split", fixture, sizeof(fixture)), mode, dir, name);
	if (mounted)
		assert_int_equal(test_run("umount /sys/kernel/tracing"), 0);
	assert_int_equal(rc, 0);
}

/* The pid the fixture of a system-wide recording runs as (its shell says it before the exec). */
static int32_t stopwatch_pid(const char *dir, const char *name)
{
	char path[600], line[256];
	int pid = -1;
	snprintf(path, sizeof(path), "%s/%s.stopwatch", dir, name);
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	while (fgets(line, sizeof(line), in))
		if (sscanf(line, "offcpu_split: pid %d", &pid) == 1)
			break;
	fclose(in);
	assert_true(pid > 0);
	return pid;
}

/* The main thread's time inside its waiting call, by its own stopwatch (ns). */
static double stopwatch_waited(const char *dir, const char *name)
{
	char path[600], line[256];
	double wall, waited = -1, cpu;
	snprintf(path, sizeof(path), "%s/%s.stopwatch", dir, name);
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	while (fgets(line, sizeof(line), in))
		if (sscanf(line, "offcpu_split: main wall=%lf waited=%lf cpu=%lf", &wall, &waited, &cpu) == 3)
			break;
	fclose(in);
	assert_true(waited > 0);
	return waited;
}

/* The main thread's blocked time (off CPU, not preempted), and of it what is under main -> wait_pipe -> read,
 * complete to its root (no error frame). */
static void main_blocked(const struct profile *p, uint64_t *all, uint64_t *under)
{
	*all = *under = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		const char *names[512];
		uint64_t ns = s->off_cpu_ns - s->preempted_ns;
		if (!ns || strcmp(profile_string(p, s->thread_name), "offcpu_split") != 0)
			continue;
		*all += ns;
		size_t n = test_stack_functions(p, s->stack, names, ARRAY_LEN(names)), k = 0;
		if (test_stack_has_error(p, s->stack))
			continue;
		while (k < n && strcmp(names[k], "main") != 0)
			k++;
		while (k < n && strcmp(names[k], "wait_pipe") != 0)
			k++;
		while (k < n && !strstr(names[k], "read"))
			k++;
		*under += k < n ? ns : 0;
	}
}

/* The off-CPU microseconds of convert --to collapsed --value off-cpu on stacks through wait_pipe. */
static double collapsed_wait_pipe_us(const char *dir, const char *name)
{
	char path[600], line[65536];
	double sum = 0;
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s/%s --to collapsed --value off-cpu -o %s/%s.folded "
				  "2>/dev/null", dir, name, dir, name), 0);
	snprintf(path, sizeof(path), "%s/%s.folded", dir, name);
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	while (fgets(line, sizeof(line), in)) {
		char *sp = strrchr(line, ' ');
		if (sp && strstr(line, ";main;") && strstr(line, ";wait_pipe;"))
			sum += strtod(sp + 1, NULL);
	}
	fclose(in);
	return sum;
}

/*
 * offcpu_split pipe: main blocks in wait_pipe -> read about half its 2 s, 200 times, by its own stopwatch. With
 * --switch-events (hotspot's recipe) each block's end is the kernel's switch-in record: the blocked time agrees
 * with the stopwatch within 5% and 20 ms. Without, a block ends at the thread's next sample at the latest: after at
 * most one cpu-clock period (1.001 ms) of its CPU time, for each of at most 201 blocks (200 bytes, then the end).
 * Either way it lies under main -> wait_pipe -> read, complete, and convert gives the same time.
 */
static void check_switches(const char *dir, const char *name, bool clock, double late_ns)
{
	struct profile *p = load(dir, name);
	uint64_t all, under;
	main_blocked(p, &all, &under);
	double waited = stopwatch_waited(dir, name), folded = collapsed_wait_pipe_us(dir, name);
	fprintf(stderr, "%s: main blocked %.1f ms (%.1f%% under main -> wait_pipe -> read), stopwatch %.1f ms, "
		"collapsed %.1f ms\n", name, all / 1e6, test_share(under, all), waited / 1e6, folded / 1e3);
	assert_true(test_share(under, all) >= 90.0);
	assert_true(all >= waited * 0.95 - 20e6);
	assert_true(all <= waited * 1.05 + 20e6 + late_ns);
	assert_true(fabs(folded * 1e3 - (double)under) <= 0.01 * (double)under + 1e6);
	/* the CPU samples are still there: main burns the other half */
	const char *burn[] = { "main", "run_pipe", "burn" };
	if (clock)
		assert_true(test_samples_with_chain(p, burn, ARRAY_LEN(burn)) >= 500);
	else
		assert_int_equal(test_total_samples(p), 0);
	profile_free(p);
}

/*
 * The sum of perf sched timehist's wait times (ms, the column after the task) of thread tid (a task "comm[tid]",
 * whatever its comm) on dir/name, in ns. A wait there ends at the previous sched_switch sample timehist saw on the
 * CPU the task ran on next: its switch-in when that sample is in the file. *lost says whether timehist reported
 * records lost within the task's waits and runs, which can make it a sample before the switch-in.
 */
static double timehist_wait_ns(const char *dir, const char *name, int32_t tid, bool *lost)
{
	char path[600], line[1024], who[256], task[32];
	double sum = 0, t, wait, delay, run, from = 0, to = 0;
	unsigned long long n;
	unsigned cpu;
	size_t nlost = 0, cap = 64;
	double *losses = malloc(cap * sizeof(*losses));
	assert_non_null(losses);
	size_t tlen = (size_t)snprintf(task, sizeof(task), "[%d]", (int)tid);
	assert_int_equal(test_run("perf sched timehist -i %s/%s >%s/%s.timehist 2>/dev/null", dir, name, dir, name), 0);
	snprintf(path, sizeof(path), "%s/%s.timehist", dir, name);
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	while (fgets(line, sizeof(line), in)) {
		if (sscanf(line, " %lf lost %llu events on cpu %u", &t, &n, &cpu) == 3) {
			if (nlost == cap) {
				double *more = realloc(losses, (cap *= 2) * sizeof(*losses));
				assert_non_null(more);
				losses = more;
			}
			losses[nlost++] = t;
		} else if (sscanf(line, " %lf [%u] %255s %lf %lf %lf", &t, &cpu, who, &wait, &delay, &run) == 6 &&
			   strlen(who) > tlen && !strcmp(who + strlen(who) - tlen, task)) {
			sum += wait * 1e6;
			from = from == 0 || t - (wait + run) / 1e3 < from ? t - (wait + run) / 1e3 : from;
			to = t;
		}
	}
	fclose(in);
	*lost = false;
	for (size_t i = 0; i < nlost; i++)
		*lost |= losses[i] >= from && losses[i] <= to;
	free(losses);
	assert_true(sum > 0);
	return sum;
}

/*
 * The time thread tid was off CPU, in ns, from the file's switch records as perf script reads them: from each
 * switch-out to the next switch-in (hostprof's own rule, read by another reader). *unsampled: the part of it in
 * waits whose switch-in has no sched_switch sample just before its record; timehist ends such a wait at the
 * sample before on that CPU, anywhere from the switch-in back to the wait's start.
 */
static double switch_records_off_cpu_ns(const char *dir, const char *name, int32_t tid, double *unsampled)
{
	char cmd[1200], out[128] = "";
	double ns = -1;
	snprintf(cmd, sizeof(cmd), "perf script -i %s/%s --show-switch-events -F tid,time,event,trace 2>/dev/null | "
		 "awk -v t=%d '/ sched:sched_switch: / { in_ = index($0, \"next_pid=\" t \" \") > 0 } $1 == t && "
		 "/SWITCH_CPU_WIDE OUT/ { o = $2 + 0 } $1 == t && /SWITCH_CPU_WIDE IN/ { if (o) { s += $2 - o; if "
		 "(!in_) u += $2 - o } o = 0 } END { printf \"%%.0f %%.0f\\n\", s * 1e9, u * 1e9 }'", dir, name,
		 (int)tid);
	FILE *ps = popen(cmd, "r");
	assert_non_null(ps);
	assert_non_null(fgets(out, sizeof(out), ps));
	assert_int_equal(pclose(ps), 0);
	assert_int_equal(sscanf(out, "%lf %lf", &ns, unsampled), 2);
	assert_true(ns > 0);
	return ns;
}

/* Whether some sample of pid is of a process named comm (a process's time past its exit would be counted without
 * its name: it was forgotten). */
static bool is_pid_of(const struct profile *p, int32_t pid, const char *comm)
{
	for (uint32_t i = 0; i < p->samples.count; i++)
		if (p->samples.items[i].pid == pid && !strcmp(profile_string(p, p->samples.items[i].comm), comm))
			return true;
	return false;
}

/*
 * System-wide: every thread of the machine switches, threads come and go (a CPU-wide event sees a thread's last
 * switches after its exit: none of them may start a wait that never ends; eight /bin/true come and go before the
 * fixture). No thread is off CPU longer than the recording lasted, nor the short-lived ones past their exit, and
 * offcpu_split sleep's main is blocked as long as its stopwatch says (5% and 20 ms), on main -> wait_sleep ->
 * nanosleep, and off CPU as long as the file's switch records and perf sched timehist say (2% and 5 ms). Only the
 * fixture this recording started counts: another offcpu_split on the machine (a test run beside this one) waits
 * across the recording's ends, where the tools differ by design (hostprof counts a wait still running at the end up
 * to the end, timehist does not count it).
 */
static void test_sched_switch_system_wide(void **state)
{
	const struct test_workdir *f = *state;
	require_perf_tool();
	record_switches_all(f->dir, "all.data", "sleep");
	struct profile *p = load(f->dir, "all.data");
	double waited = stopwatch_waited(f->dir, "all.data");
	int32_t pid = stopwatch_pid(f->dir, "all.data");
	uint64_t span = p->info.duration_ns, main_ns = 0, fixture = 0, main_under = 0, worst = 0, short_lived = 0;
	struct { int32_t tid; uint64_t ns; } *per = calloc(p->samples.count + 1, sizeof(*per));
	size_t nper = 0;
	assert_non_null(per);
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		size_t k = 0;
		while (k < nper && per[k].tid != s->tid)
			k++;
		if (k == nper)
			per[nper++].tid = s->tid;
		per[k].ns += s->off_cpu_ns;
		short_lived += is_pid_of(p, s->pid, "true") ? s->off_cpu_ns : 0;
		fixture += s->pid == pid ? s->off_cpu_ns : 0;
		/* the fixture this recording ran: the machine's other programs (another test's offcpu_split) are its
		 * background */
		if (s->pid != pid || strcmp(profile_string(p, s->comm), "offcpu_split") != 0 || !s->off_cpu_ns)
			continue;
		const char *names[512], *chain[] = { "main", "wait_sleep", "nanosleep" };
		size_t n = test_stack_functions(p, s->stack, names, ARRAY_LEN(names)), at = 0;
		main_ns += s->off_cpu_ns - s->preempted_ns;
		for (size_t c = 0; c < n && at < ARRAY_LEN(chain); c++)	/* the last one in libc's name for it */
			at += at + 1 < ARRAY_LEN(chain) ? !strcmp(names[c], chain[at]) : strstr(names[c], chain[at]) != NULL;
		main_under += at == ARRAY_LEN(chain) && !test_stack_has_error(p, s->stack) ? s->off_cpu_ns - s->preempted_ns
											    : 0;
	}
	for (size_t k = 0; k < nper; k++)
		worst = per[k].ns > worst ? per[k].ns : worst;
	fprintf(stderr, "all.data: %zu threads over %.1f ms, the longest off CPU %.1f ms; main blocked %.1f ms (%.1f%% "
		"under main -> wait_sleep -> nanosleep), stopwatch %.1f ms; the short-lived processes off CPU %.1f ms\n",
		nper, span / 1e6, worst / 1e6, main_ns / 1e6, test_share(main_under, main_ns), waited / 1e6,
		short_lived / 1e6);
	assert_true(nper > 1);
	/* each lives a few ms: counted past its exit, each would be off CPU to the end (about 2 s) */
	assert_true(short_lived <= 8 * 50000000ULL);
	assert_true(worst <= span + 50000000);
	assert_true(main_ns >= waited * 0.95 - 20e6 && main_ns <= waited * 1.05 + 20e6);
	assert_true(test_share(main_under, main_ns) >= 90.0);
	/* The fixture's thread under each of its names (sh, then offcpu_split: which one a wait next to the exec is
	 * counted under is no part of this): off CPU as long as the file's switch records say, as perf script reads
	 * them, and as perf sched timehist's wait times say (blocked and preempted: no sched_wakeup recorded to tell
	 * the delay apart), short by at most the waits it cannot end: timehist ends a wait at the sched_switch
	 * sample that switches the thread in, and lacking it, at the sample before on that CPU. That sample can be
	 * missing without a record lost, where a CPU leaves its idle task: in one recording 26 of 91 such switches
	 * had their switch-in record but neither the idle task's switch-out record nor its sample, and timehist made
	 * the fixture's 1 s sleep 826.5 ms (CI once: 845.9 ms). Where timehist reports records lost, only the
	 * switch records count. */
	double unsampled;
	bool lost;
	double records = switch_records_off_cpu_ns(f->dir, "all.data", pid, &unsampled);
	double timehist = timehist_wait_ns(f->dir, "all.data", pid, &lost);
	fprintf(stderr, "all.data: the fixture's thread %d off CPU %.1f ms, perf script's switch records %.1f ms (%.1f "
		"ms in waits whose switch-in has no sample), perf sched timehist %.1f ms%s\n", (int)pid, fixture / 1e6,
		records / 1e6, unsampled / 1e6, timehist / 1e6, lost ? " (records lost: not compared)" : "");
	assert_true(fabs((double)fixture - records) <= 0.02 * records + 5e6);
	/* timehist is held to the switch records' bound from above only: from below it was seen short by 3.4% more
	 * than its unsampled waits on a loaded machine (1405.5 ms against 1455.1 ms, 12.0 ms unsampled), so it gets
	 * 10% there; the switch records above are the tight check. */
	if (!lost) {
		assert_true(timehist <= fixture + 0.02 * fixture + 5e6);
		assert_true(timehist >= fixture - unsampled - 0.10 * fixture - 5e6);
	}
	free(per);
	profile_free(p);
}

static void test_sched_switch(void **state)
{
	const struct test_workdir *f = *state;
	require_perf_tool();
	record_switches(f->dir, "switches.data", true, "--switch-events");
	check_switches(f->dir, "switches.data", true, 0);
	record_switches(f->dir, "inferred.data", true, "");
	check_switches(f->dir, "inferred.data", true, 201 * 1001001.0);
}

/* A file of the tracepoint alone (no sampling event: off-CPU time only), with switch records: as exact. */
static void test_sched_switch_only(void **state)
{
	const struct test_workdir *f = *state;
	require_perf_tool();
	record_switches(f->dir, "only.data", false, "--switch-events");
	check_switches(f->dir, "only.data", false, 0);
}

/* The JIT fixture's perf map (/tmp/perf-PID.map): perf report and hostprof read it after the fixture exited; the
 * teardown removes it, whatever the test's end. */
static char jit_map[64];

static int jit_teardown(void **state)
{
	if (jit_map[0])
		unlink(jit_map);
	jit_map[0] = '\0';
	return test_workdir_teardown(state);
}

/* perf record of jit_split (2 s of its CPU) with perf's options opts into dir/name; its map's path into jit_map. */
static void perf_record_jit(const char *dir, const char *name, const char *opts)
{
	char fixture[256], out[600];
	test_fixture_path("jit_split", fixture, sizeof(fixture));
	snprintf(out, sizeof(out), "%s/%s.out", dir, name);
	assert_int_equal(test_run("perf record -q -F 999 %s -o %s/%s -- %s 2 > %s 2>/dev/null", opts, dir, name, fixture,
				  out), 0);
	char *text = test_read_text(out);
	int pid = 0;
	assert_int_equal(sscanf(text, "pid %d", &pid), 1);
	free(text);
	snprintf(jit_map, sizeof(jit_map), "/tmp/perf-%d.map", pid);
}

/* Samples (as a share of all) with a JIT frame named name, and of them those whose stack goes main -> name. */
static void jit_shares(const struct profile *p, const char *name, double *named, double *from_main)
{
	uint64_t n = 0, total = test_total_samples(p);
	const char *chain[] = { "main", name };
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_stack *st = &p->stacks.items[p->samples.items[i].stack];
		for (uint32_t k = 0; k < st->nlocations; k++) {
			const struct profile_location *l = &p->locations.items[st->locations[k]];
			const struct profile_line *line = l->nlines ? &l->lines[l->nlines - 1] : NULL;
			if (line && l->frame_kind == PROFILE_FRAME_JIT &&
			    strcmp(profile_string(p, p->functions.items[line->function].name), name) == 0) {
				n += p->samples.items[i].count;
				break;
			}
		}
	}
	*named = test_share(n, total);
	*from_main = test_share(test_samples_with_chain(p, chain, ARRAY_LEN(chain)), total);
}

/* hostprof's report of dir/name with the options given: its exit status; stdout and stderr in dir/<out>.txt,
 * dir/<out>.err. */
static int report_to(const char *d, const char *name, const char *opts, const char *out)
{
	return test_run("\"$HOSTPROF\" report %s %s/%s > %s/%s.txt 2> %s/%s.err", opts, d, name, d, out, d, out);
}

/*
 * JIT code named from its perf map, as perf report names it: jit_split copies two functions into anonymous memory,
 * names them in /tmp/perf-PID.map and splits its time 2:1 between them. On the same file, hostprof's self shares of
 * the two are perf report's, and its stacks go on through the JIT code's frame pointers to main (perf's dwarf
 * unwinding, without unwind tables for JIT code, stops in it). The map is found under --symfs first, and only
 * there when moved; one reached through a symbolic link, or of another user, is not read, and said.
 */
static void test_jit_perf_map(void **state)
{
	struct test_workdir *f = *state;
	const char *d = f->dir;
	require_perf_tool();
#if !defined(__x86_64__)
	test_skip("the JIT fixture's code is x86-64 machine code");
#endif
	const char *funcs[] = { "jit_hot_a", "jit_hot_b" };
	const double want[] = { 200.0 / 3, 100.0 / 3 };
	const char *graphs[][2] = { { "dwarf", "--call-graph dwarf,8192" }, { "fp", "--call-graph fp" } };
	for (size_t g = 0; g < ARRAY_LEN(graphs); g++) {
		char name[64];
		snprintf(name, sizeof(name), "jit-%s.data", graphs[g][0]);
		perf_record_jit(d, name, graphs[g][1]);
		struct profile *p = load(d, name);
		for (size_t i = 0; i < ARRAY_LEN(funcs); i++) {
			double named, from_main, self = self_share(p, funcs[i]), perf = perf_self_share("perf", d, name, funcs[i]);
			jit_shares(p, funcs[i], &named, &from_main);
			fprintf(stderr, "%s: %s self %.2f%% (perf report %.2f%%), a JIT frame in %.2f%%, under main %.2f%%\n",
				name, funcs[i], self, perf, named, from_main);
			assert_true(perf >= 0 && fabs(self - perf) <= 0.5);	/* the same samples, the same map */
			assert_true(fabs(named - want[i]) < 8.0);	/* 2 units of work against 1, by CPU time */
			/* out of the JIT code by its frame pointer: dwarf samples (a -g chain is the kernel's, and
			 * stops where main, built without frame pointers, breaks it) */
			if (g == 0)
				assert_true(from_main >= named - 1.0);
		}
		profile_free(p);
		if (g == 0)
			unlink(jit_map);	/* the next recording has its own map */
	}
	/* the report says where the names came from */
	assert_int_equal(report_to(d, "jit-fp.data", "", "fp"), 0);
	assert_int_equal(test_run("grep -q 'JIT code named from 1 perf map' %s/fp.err", d), 0);
	assert_int_equal(test_run("grep -q ' jit_hot_a$' %s/fp.txt", d), 0);
	/* moved under a --symfs directory: found there, and only with --symfs */
	assert_int_equal(test_run("mkdir -p %s/symfs/tmp && mv %s %s/symfs%s", d, jit_map, d, jit_map), 0);
	assert_int_equal(report_to(d, "jit-fp.data", "", "moved"), 0);
	assert_int_equal(test_run("grep -q jit_hot_a %s/moved.txt", d), 1);
	char symfs[700];
	snprintf(symfs, sizeof(symfs), "--symfs %s/symfs", d);
	assert_int_equal(report_to(d, "jit-fp.data", symfs, "symfs"), 0);
	assert_int_equal(test_run("grep -q ' jit_hot_a$' %s/symfs.txt", d), 0);
	/* another process's file: never through a symbolic link */
	assert_int_equal(test_run("ln -s %s/symfs%s %s", d, jit_map, jit_map), 0);
	assert_int_equal(report_to(d, "jit-fp.data", "", "link"), 0);
	assert_int_equal(test_run("grep -q jit_hot_a %s/link.txt", d), 1);
	assert_int_equal(test_run("grep -q '1 perf map not read' %s/link.err", d), 0);
	unlink(jit_map);
	/* ... nor of a user other than root, the reader or the recording's owner */
	if (geteuid() != 0) {
		test_skip_part("needs root: a map of another user is made with chown");
		return;
	}
	assert_int_equal(test_run("cp %s/symfs%s %s && chown 65534 %s", d, jit_map, jit_map, jit_map), 0);
	assert_int_equal(report_to(d, "jit-fp.data", "", "owner"), 0);
	assert_int_equal(test_run("grep -q jit_hot_a %s/owner.txt", d), 1);
	assert_int_equal(test_run("grep -q '1 perf map not read' %s/owner.err", d), 0);
}

/* A JavaScript hot loop, by CPU time (3 s). */
static const char hot_js[] =
	"function hotLoop(n) {\n"
	"  let s = 0;\n"
	"  for (let i = 0; i < n; i++) s = (s + i * i) % 1000003;\n"
	"  return s;\n"
	"}\n"
	"function caller() {\n"
	"  const end = process.cpuUsage().user + 3e6;\n"
	"  let t = 0;\n"
	"  while (process.cpuUsage().user < end) t += hotLoop(100000);\n"
	"  return t;\n"
	"}\n"
	"console.log(caller());\n";

/*
 * A real runtime's map: node --perf-basic-prof recorded with perf record --call-graph dwarf. V8 names hotLoop in
 * the map once per compilation ("JS:~hotLoop ...", "JS:*hotLoop ..."): its self share, summed over them, is perf
 * report's on the same file, and the stacks through V8's JIT code and node's built-ins are complete.
 */
static void test_node_perf_map(void **state)
{
	struct test_workdir *f = *state;
	const char *d = f->dir;
	char script[600];
	require_perf_tool();
	test_require_tool("command -v node", "node");
	snprintf(script, sizeof(script), "%s/hot.js", d);
	test_write_text(script, hot_js);
	/* from the work directory: node writes its V8 log (isolate-*.log) where it runs */
	assert_int_equal(test_run("perf record -q -F 999 --call-graph dwarf,16384 -o %s/node.data -- sh -c 'cd %s && "
				  "echo $$ > node.pid && exec node --perf-basic-prof hot.js' >/dev/null 2>&1", d, d), 0);
	char pid_path[600];
	snprintf(pid_path, sizeof(pid_path), "%s/node.pid", d);
	char *pid = test_read_text(pid_path);
	snprintf(jit_map, sizeof(jit_map), "/tmp/perf-%d.map", atoi(pid));
	free(pid);
	struct profile *p = load(d, "node.data");
	double ours = self_share_of(p, "hotLoop", true);
	double perf = perf_self_share_of("perf", d, "node.data", "hotLoop", true);
	const char *roots[] = { "__libc_start_main", "start_thread" };	/* no "main" frame in node; its threads */
	double complete = test_share(test_samples_complete_to(p, roots, ARRAY_LEN(roots)), test_total_samples(p));
	fprintf(stderr, "node --perf-basic-prof: hotLoop self %.2f%% (perf report %.2f%%), complete %.1f%%\n",
		ours, perf, complete);
	assert_true(ours >= 50.0);	/* the hot loop is the program */
	assert_true(perf >= 0 && fabs(ours - perf) <= 1.0);
	assert_true(complete >= 90.0);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dwarf, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_compressed, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_frame_pointers, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_commands, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_symfs, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_library_not_here, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_buildid_dir, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_newer_perf, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_xz_agrees_with_perf, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_sched_switch, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_sched_switch_only, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_sched_switch_system_wide, test_workdir_setup,
						test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_jit_perf_map, test_workdir_setup, jit_teardown),
		cmocka_unit_test_setup_teardown(test_node_perf_map, test_workdir_setup, jit_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
