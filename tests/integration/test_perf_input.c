/*
 * Integration tests of perf.data input (src/sampling/perf_data.h, src/cmd/perf_input.h): the split_paths fixture
 * recorded with the real `perf record` (--call-graph dwarf, the same compressed with -z, --call-graph fp) and read
 * back by hostprof; its shares checked against the fixture's 3:1 split, against hostprof's own `record` of the
 * same fixture, and against `perf report --no-children` on the same file (the same samples: self shares agree
 * within a rounding). Then the commands (report, convert, diff) on perf.data files, the recording's CPU count and
 * command line as `perf report --header-only` reads them, a file cut short (read as far
 * as it goes, said), a corrupt one (an error naming the offset), and the recording's files found under --symfs,
 * missing, or of another build, and a shared library gone or rebuilt (its frames are offsets in it, unnamed). Then JIT
 * code named from the perf map a fixture, and node, wrote, against perf report on the same file.
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

/* perf report --no-children's self share of symbol on dir/name (contains: summed over the symbols containing
 * it), -1 if absent. */
static double perf_self_share_of(const char *dir, const char *name, const char *symbol, bool contains)
{
	char out[700], line[4096];
	snprintf(out, sizeof(out), "%s/%s.report", dir, name);
	if (test_run("perf report -i %s/%s --stdio --no-children --sort sym -q 2>/dev/null > %s", dir, name, out) != 0)
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

static double perf_self_share(const char *dir, const char *name, const char *symbol)
{
	return perf_self_share_of(dir, name, symbol, false);
}

/* The leaves' self shares agree with perf's on the same file. */
static void assert_same_as_perf(const char *dir, const char *name, const struct profile *p)
{
	const char *leaves[] = { "leaf_a", "leaf_b" };
	for (size_t i = 0; i < ARRAY_LEN(leaves); i++) {
		double ours = self_share(p, leaves[i]), perf = perf_self_share(dir, name, leaves[i]);
		fprintf(stderr, "%s: %s self %.2f%%, perf report %.2f%%\n", name, leaves[i], ours, perf);
		/* the same samples; perf rounds to 0.01 and may name a sample or two of a boundary otherwise */
		assert_true(perf >= 0);
		assert_true(fabs(ours - perf) <= 0.5);
	}
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
	char caller[256], lib[256];
	require_perf_tool();
	test_fixture_path("shared_caller", caller, sizeof(caller));
	test_fixture_path("libfixture_shared.so", lib, sizeof(lib));
	assert_int_equal(test_run("mkdir -p %s/bin && cp %s %s %s/bin/", d, caller, lib, d), 0);
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
			double named, from_main, self = self_share(p, funcs[i]), perf = perf_self_share(d, name, funcs[i]);
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
	FILE *js = fopen(script, "we");
	assert_non_null(js);
	fputs(hot_js, js);
	assert_int_equal(fclose(js), 0);
	/* from the work directory: node writes its V8 log (isolate-*.log) where it runs */
	assert_int_equal(test_run("perf record -q -F 999 --call-graph dwarf,16384 -o %s/node.data -- sh -c 'cd %s && "
				  "echo $$ > node.pid && exec node --perf-basic-prof hot.js' >/dev/null 2>&1", d, d), 0);
	char pid_path[600];
	snprintf(pid_path, sizeof(pid_path), "%s/node.pid", d);
	char *pid = test_read_text(pid_path);
	snprintf(jit_map, sizeof(jit_map), "/tmp/perf-%d.map", atoi(pid));
	free(pid);
	struct profile *p = load(d, "node.data");
	double ours = self_share_of(p, "hotLoop", true), perf = perf_self_share_of(d, "node.data", "hotLoop", true);
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
		cmocka_unit_test_setup_teardown(test_jit_perf_map, test_workdir_setup, jit_teardown),
		cmocka_unit_test_setup_teardown(test_node_perf_map, test_workdir_setup, jit_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
