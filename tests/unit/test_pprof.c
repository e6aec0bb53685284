/*
 * Unit tests for src/profile/pprof.c: the gzipped output is inflated and decoded with the protobuf-c unpacker, then
 * every field hostprof maps is checked (sample types, period, times, comments, mappings with the whole-range
 * ELF-address convention and build IDs, locations with inline lines, functions, values, labels including the
 * APM link's trace id and local root span id). Where `go` is installed, `go tool pprof -top` reads the file and
 * names the functions, and symbolizes an unsymbolized ELF address from this test binary; otherwise those parts
 * skip with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <link.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "src/profile/pprof.h"
#include "src/profile/profile.h"
#include "tests/lib/profile_builder.h"
#include "src/profile/proto/profile.pb-c.h"
#include "tests/lib/testlib.h"

typedef Perftools__Profiles__Profile pb_profile;





static uint32_t link_(struct profile *p, const uint8_t span_id[8])
{
	struct profile_link l;
	uint32_t i;
	for (int k = 0; k < 16; k++)
		l.trace_id[k] = (uint8_t)k;
	memcpy(l.span_id, span_id, sizeof(l.span_id));
	assert_int_equal(profile_add_link(p, &l, &i), 0);
	return i;
}

static void sample(struct profile *p, uint32_t st, int32_t pid, int32_t tid, const char *comm, const char *thread,
		   uint32_t link, uint64_t count, uint64_t cpu_ns)
{
	struct profile_sample s = { .stack = st, .pid = pid, .tid = tid, .comm = tp_string(p, comm),
				    .thread_name = tp_string(p, thread), .link = link, .count = count, .cpu_ns = cpu_ns };
	assert_int_equal(profile_add_sample(p, &s), 0);
}

/*
 * Stacks, root first: S1 main > work > helper (inlined), S2 main > libz.so.1+0x2f0a, S3 main > work > helper >
 * schedule (kernel), S4 /unused+0x10 (only in a sample of count 0: not exported).
 * Samples: S1 pid 7 tid 8 "worker" x4; S2 pid 7 tid 7 "app" x2 (cpu_ns 2.5 ms, link 1); S3 pid 7 tid 8 x3
 * (link 2); S4 x0; S1 pid 9 tid 9, no names, x1.
 */
static struct profile *build(void)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	struct profile_info *i = &p->info;
	assert_non_null(p);
	assert_int_equal(profile_set_info_string(p, &i->producer, "hostprof 0.1.0"), 0);
	assert_int_equal(profile_set_info_string(p, &i->hostname, "vm"), 0);
	assert_int_equal(profile_set_info_string(p, &i->kernel, "6.1.0"), 0);
	assert_int_equal(profile_set_info_string(p, &i->event, "cpu-clock"), 0);
	i->start_unix_ns = 1700000000ULL * 1000000000ULL;
	i->duration_ns = 2000000000;
	i->period_ns = 1000000;
	i->frequency_hz = 999;
	i->samples = 10;
	i->lost = 1;

	struct profile_mapping m_lib = { .filename = tp_string(p, "/usr/lib/libz.so.1") };
	struct profile_mapping m_app = { .filename = tp_string(p, "/opt/app/bin/app"),
					 .build_id = tp_string(p, "abcdef0123") };
	struct profile_mapping m_unused = { .filename = tp_string(p, "/unused") };
	uint32_t lib, app, unused;
	for (int k = 0; k < 16; k++)
		m_lib.file_id[k] = (uint8_t)(k + 1);
	assert_int_equal(profile_add_mapping(p, &m_lib, &lib), 0);	/* first: the program must be moved up */
	assert_int_equal(profile_add_mapping(p, &m_app, &app), 0);
	assert_int_equal(profile_add_mapping(p, &m_unused, &unused), 0);

	uint32_t f_main = tp_function(p, "main", "/src/app.c"), f_work = tp_function(p, "work", "/src/app.c");
	uint32_t f_helper = tp_function(p, "helper", "/src/util.h"), f_sched = tp_function(p, "schedule", NULL);
	struct profile_line l_main[] = { { f_main, 9 } }, l_inl[] = { { f_helper, 3 }, { f_work, 20 } };
	struct profile_line l_sched[] = { { f_sched, 0 } };
	uint32_t main_ = tp_location(p, app, 0x1000, PROFILE_FRAME_NATIVE, l_main, 1);
	uint32_t inl = tp_location(p, app, 0x1100, PROFILE_FRAME_NATIVE, l_inl, 2);
	uint32_t unsym = tp_location(p, lib, 0x2f0a, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t sched = tp_location(p, 0, 0x40, PROFILE_FRAME_KERNEL, l_sched, 1);
	uint32_t gone = tp_location(p, unused, 0x10, PROFILE_FRAME_NATIVE, NULL, 0);

	const uint8_t span1[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	const uint8_t span2[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint32_t s1 = tp_stack(p, 1, (uint32_t[]){ inl, main_ }, 2);
	sample(p, s1, 7, 8, "app", "worker", 0, 4, 0);
	sample(p, tp_stack(p, 2, (uint32_t[]){ unsym, main_ }, 2), 7, 7, "app", "app", link_(p, span1), 2, 2500000);
	sample(p, tp_stack(p, 3, (uint32_t[]){ sched, inl, main_ }, 3), 7, 8, "app", "worker", link_(p, span2), 3, 0);
	sample(p, tp_stack(p, 4, &gone, 1), 7, 7, "app", "app", 0, 0, 0);
	sample(p, s1, 9, 9, "", "", 0, 1, 0);
	return p;
}

/* --- decoding ------------------------------------------------------------------------------------------ */

static unsigned char *gunzip(const unsigned char *in, size_t len, size_t *out_len)
{
	size_t cap = 1 << 16;
	unsigned char *out = malloc(cap);
	z_stream z = { .next_in = (Bytef *)in, .avail_in = (uInt)len };
	int rc;
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	do {
		if (z.total_out == cap)
			out = realloc(out, cap *= 2);
		z.next_out = out + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		rc = inflate(&z, Z_NO_FLUSH);
		assert_true(rc == Z_OK || rc == Z_STREAM_END);
	} while (rc != Z_STREAM_END);
	*out_len = z.total_out;
	inflateEnd(&z);
	return out;
}

static unsigned char *write_gz(const struct profile *p, size_t *len)
{
	char *buf = NULL;
	FILE *out = open_memstream(&buf, len);
	assert_non_null(out);
	assert_int_equal(pprof_write(p, out), 0);
	assert_int_equal(fclose(out), 0);
	return (unsigned char *)buf;
}

/* Write, check the gzip framing and that it holds what pprof_encode() gives, and unpack. */
static pb_profile *roundtrip(const struct profile *p)
{
	size_t gz_len, raw_len, enc_len;
	unsigned char *gz = write_gz(p, &gz_len), *enc;
	assert_true(gz_len > 18 && gz[0] == 0x1f && gz[1] == 0x8b);
	unsigned char *raw = gunzip(gz, gz_len, &raw_len);
	assert_int_equal(pprof_encode(p, &enc, &enc_len), 0);
	assert_int_equal(raw_len, enc_len);
	assert_memory_equal(raw, enc, raw_len);
	pb_profile *pb = perftools__profiles__profile__unpack(NULL, raw_len, raw);
	assert_non_null(pb);
	free(gz);
	free(raw);
	free(enc);
	return pb;
}

static const char *s_(const pb_profile *pb, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < pb->n_string_table);
	return pb->string_table[i];
}

static const Perftools__Profiles__Location *location(const pb_profile *pb, uint64_t id)
{
	for (size_t i = 0; i < pb->n_location; i++)
		if (pb->location[i]->id == id)
			return pb->location[i];
	fail_msg("no location %llu", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Function *function(const pb_profile *pb, uint64_t id)
{
	for (size_t i = 0; i < pb->n_function; i++)
		if (pb->function[i]->id == id)
			return pb->function[i];
	fail_msg("no function %llu", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Mapping *mapping(const pb_profile *pb, uint64_t id)
{
	for (size_t i = 0; i < pb->n_mapping; i++)
		if (pb->mapping[i]->id == id)
			return pb->mapping[i];
	fail_msg("no mapping %llu", (unsigned long long)id);
	return NULL;
}

/* "fn:line" of a location's lines, innermost first, joined by "|". */
static void lines_text(const pb_profile *pb, const Perftools__Profiles__Location *l, char *out, size_t len)
{
	size_t n = 0;
	out[0] = '\0';
	for (size_t i = 0; i < l->n_line; i++)
		n += (size_t)snprintf(out + n, len - n, "%s%s:%lld", i ? "|" : "",
				      s_(pb, function(pb, l->line[i]->function_id)->name), (long long)l->line[i]->line);
}

/* A sample's stack as "frames leaf first" and labels as "key=value" text. */
static void sample_text(const pb_profile *pb, const Perftools__Profiles__Sample *s, char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "[%lld %lld]", (long long)s->value[0], (long long)s->value[1]);
	char lines[256];
	assert_int_equal(s->n_value, 2);
	for (size_t i = 0; i < s->n_location_id; i++) {
		const Perftools__Profiles__Location *l = location(pb, s->location_id[i]);
		lines_text(pb, l, lines, sizeof(lines));
		n += (size_t)snprintf(out + n, len - n, " %s@%#llx", lines[0] ? lines : "?",
				      (unsigned long long)l->address);
	}
	for (size_t i = 0; i < s->n_label; i++) {
		const Perftools__Profiles__Label *l = s->label[i];
		if (l->str)
			n += (size_t)snprintf(out + n, len - n, " %s=%s", s_(pb, l->key), s_(pb, l->str));
		else
			n += (size_t)snprintf(out + n, len - n, " %s=%lld", s_(pb, l->key), (long long)l->num);
	}
}

/* --- tests --------------------------------------------------------------------------------------------- */

static void test_header(void **state)
{
	(void)state;
	struct profile *p = build();
	pb_profile *pb = roundtrip(p);
	assert_string_equal(pb->string_table[0], "");
	assert_int_equal(pb->n_sample_type, 2);
	assert_string_equal(s_(pb, pb->sample_type[0]->type), "samples");
	assert_string_equal(s_(pb, pb->sample_type[0]->unit), "count");
	assert_string_equal(s_(pb, pb->sample_type[1]->type), "cpu");
	assert_string_equal(s_(pb, pb->sample_type[1]->unit), "nanoseconds");
	assert_non_null(pb->period_type);
	assert_string_equal(s_(pb, pb->period_type->type), "cpu");
	assert_string_equal(s_(pb, pb->period_type->unit), "nanoseconds");
	assert_string_equal(s_(pb, pb->default_sample_type), "cpu");
	assert_int_equal(pb->period, 1000000);
	assert_int_equal(pb->time_nanos, 1700000000LL * 1000000000LL);
	assert_int_equal(pb->duration_nanos, 2000000000);
	assert_int_equal(pb->n_comment, 4);
	assert_string_equal(s_(pb, pb->comment[0]), "hostprof 0.1.0");
	assert_string_equal(s_(pb, pb->comment[1]), "host vm, Linux 6.1.0");
	assert_string_equal(s_(pb, pb->comment[2]), "event cpu-clock at 999 Hz");
	assert_string_equal(s_(pb, pb->comment[3]), "10 samples, 1 lost");
	perftools__profiles__profile__free_unpacked(pb, NULL);
	/* The recording's CPUs and command line, where the profile has them */
	p->info.cpus_online = 2;
	assert_int_equal(profile_set_info_string(p, &p->info.cmdline, "perf record -g ./app"), 0);
	pb = roundtrip(p);
	assert_int_equal(pb->n_comment, 5);
	assert_string_equal(s_(pb, pb->comment[1]), "host vm, Linux 6.1.0, 2 CPUs");
	assert_string_equal(s_(pb, pb->comment[2]), "command perf record -g ./app");
	perftools__profiles__profile__free_unpacked(pb, NULL);
	profile_free(p);
}

static void test_dictionary(void **state)
{
	(void)state;
	struct profile *p = build();
	pb_profile *pb = roundtrip(p);
	char text[256];
	/* The program first (pprof's "main binary"), the library, the kernel; /unused is not reached. */
	assert_int_equal(pb->n_mapping, 3);
	const char *names[] = { "/opt/app/bin/app", "/usr/lib/libz.so.1", "[kernel.kallsyms]" };
	const char *build_ids[] = { "abcdef0123", "0102030405060708090a0b0c0d0e0f10", "" };
	const int symbolized[] = { 1, 0, 1 };
	for (size_t i = 0; i < 3; i++) {
		const Perftools__Profiles__Mapping *m = pb->mapping[i];
		assert_string_equal(s_(pb, m->filename), names[i]);
		assert_string_equal(s_(pb, m->build_id), build_ids[i]);
		assert_true(m->id != 0 && m->memory_start == 0 && m->memory_limit == UINT64_MAX && m->file_offset == 0);
		assert_int_equal(m->has_functions, symbolized[i]);
		assert_int_equal(m->has_line_numbers, symbolized[i]);
		assert_int_equal(m->has_inline_frames, symbolized[i]);
		for (size_t k = 0; k < i; k++)
			assert_true(pb->mapping[k]->id != m->id);
	}
	assert_int_equal(pb->n_location, 4);
	assert_int_equal(pb->n_function, 4);
	for (size_t i = 0; i < pb->n_function; i++) {
		assert_true(pb->function[i]->id != 0);
		assert_int_equal(pb->function[i]->name, pb->function[i]->system_name);
	}
	for (size_t i = 0; i < pb->n_location; i++) {
		const Perftools__Profiles__Location *l = pb->location[i];
		assert_true(l->id != 0);
		lines_text(pb, l, text, sizeof(text));
		if (l->address == 0x1100) {
			assert_string_equal(text, "helper:3|work:20");	/* innermost first */
			assert_string_equal(s_(pb, mapping(pb, l->mapping_id)->filename), "/opt/app/bin/app");
			assert_string_equal(s_(pb, function(pb, l->line[0]->function_id)->filename), "/src/util.h");
		} else if (l->address == 0x40) {
			assert_string_equal(text, "schedule:0");
			assert_string_equal(s_(pb, mapping(pb, l->mapping_id)->filename), "[kernel.kallsyms]");
		} else if (l->address == 0x2f0a) {
			assert_string_equal(text, "");
			assert_string_equal(s_(pb, mapping(pb, l->mapping_id)->filename), "/usr/lib/libz.so.1");
		} else {
			assert_int_equal(l->address, 0x1000);
			assert_string_equal(text, "main:9");
		}
	}
	perftools__profiles__profile__free_unpacked(pb, NULL);
	profile_free(p);
}

static void test_samples(void **state)
{
	(void)state;
	struct profile *p = build();
	pb_profile *pb = roundtrip(p);
	const char *expect[] = {
		"[4 4000000] helper:3|work:20@0x1100 main:9@0x1000"
		" pid=7 process name=app thread id=8 thread name=worker",
		"[2 2500000] ?@0x2f0a main:9@0x1000"
		" pid=7 process name=app thread id=7 thread name=app"
		" trace id=000102030405060708090a0b0c0d0e0f local root span id=72623859790382856"
		" transaction id=0102030405060708",
		"[3 3000000] schedule:0@0x40 helper:3|work:20@0x1100 main:9@0x1000"
		" pid=7 process name=app thread id=8 thread name=worker"
		" trace id=000102030405060708090a0b0c0d0e0f local root span id=-1 transaction id=ffffffffffffffff",
		"[1 1000000] helper:3|work:20@0x1100 main:9@0x1000 pid=9 thread id=9",
	};
	char text[1024];
	assert_int_equal(pb->n_sample, 4);	/* the count-0 sample is left out */
	for (size_t i = 0; i < 4; i++) {
		sample_text(pb, pb->sample[i], text, sizeof(text));
		assert_string_equal(text, expect[i]);
	}
	perftools__profiles__profile__free_unpacked(pb, NULL);
	profile_free(p);
}

static void test_empty(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	pb_profile *pb = roundtrip(p);
	assert_int_equal(pb->n_sample, 0);
	assert_int_equal(pb->n_mapping, 0);
	assert_int_equal(pb->n_location, 0);
	assert_int_equal(pb->n_sample_type, 2);
	perftools__profiles__profile__free_unpacked(pb, NULL);
	profile_free(p);
}

/*
 * JIT frames: hostprof keeps one mapping per JIT function (its identity); pprof gets one "[jit]" mapping for all
 * of them, as it gets one for the kernel, marked symbolized when any JIT frame is named.
 */
static void test_jit_mapping(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	struct profile_mapping m_app = { .filename = tp_string(p, "/opt/app/bin/node") };
	struct profile_mapping m_f = { .filename = tp_string(p, "/tmp/perf-7.map"), .file_id = { 1 } };
	struct profile_mapping m_g = { .filename = tp_string(p, "/tmp/perf-7.map"), .file_id = { 2 } };
	struct profile_mapping m_anon = { .filename = tp_string(p, "[jit]"), .file_id = { 3 } };
	uint32_t app, mf, mg, manon;
	assert_int_equal(profile_add_mapping(p, &m_app, &app), 0);
	assert_int_equal(profile_add_mapping(p, &m_f, &mf), 0);
	assert_int_equal(profile_add_mapping(p, &m_g, &mg), 0);
	assert_int_equal(profile_add_mapping(p, &m_anon, &manon), 0);
	struct profile_line l_main[] = { { tp_function(p, "main", NULL), 0 } };
	struct profile_line l_f[] = { { tp_function(p, "JS:*f /a.js:1:1", "/a.js"), 2 } };
	struct profile_line l_g[] = { { tp_function(p, "JS:*g /a.js:5:1", NULL), 0 } };
	uint32_t main_ = tp_location(p, app, 0x1000, PROFILE_FRAME_NATIVE, l_main, 1);
	uint32_t f = tp_location(p, mf, 0x10, PROFILE_FRAME_JIT, l_f, 1);
	uint32_t g = tp_location(p, mg, 0x20, PROFILE_FRAME_JIT, l_g, 1);
	uint32_t anon = tp_location(p, manon, 0x7f0000001234, PROFILE_FRAME_JIT, NULL, 0);
	sample(p, tp_stack(p, 1, (uint32_t[]){ f, g, main_ }, 3), 7, 7, "node", "node", 0, 5, 0);
	sample(p, tp_stack(p, 2, (uint32_t[]){ anon, g, main_ }, 3), 7, 7, "node", "node", 0, 1, 0);
	pb_profile *pb = roundtrip(p);
	char text[256];
	assert_int_equal(pb->n_mapping, 2);
	assert_string_equal(s_(pb, pb->mapping[0]->filename), "/opt/app/bin/node");
	assert_string_equal(s_(pb, pb->mapping[1]->filename), "[jit]");
	assert_true(pb->mapping[1]->has_functions);
	assert_int_equal(pb->n_location, 4);
	for (size_t i = 0; i < pb->n_location; i++) {
		const Perftools__Profiles__Location *l = pb->location[i];
		lines_text(pb, l, text, sizeof(text));
		if (l->address == 0x1000)
			continue;
		assert_int_equal(l->mapping_id, pb->mapping[1]->id);
		if (l->address == 0x10)
			assert_string_equal(text, "JS:*f /a.js:1:1:2");
		else if (l->address == 0x20)
			assert_string_equal(text, "JS:*g /a.js:5:1:0");
		else
			assert_string_equal(text, "");
	}
	perftools__profiles__profile__free_unpacked(pb, NULL);
	profile_free(p);
}

/* --- go tool pprof ------------------------------------------------------------------------------------- */

static void require_go(void)
{
	test_require_tool("command -v go", "go (for `go tool pprof`)");
}

static void write_file(const char *path, const struct profile *p)
{
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(pprof_write(p, f), 0);
	assert_int_equal(fclose(f), 0);
}

/* The output of `go tool pprof ARGS` (stdout and stderr), malloc'd. */
static char *run_pprof(const char *args)
{
	char cmd[1024], *text = NULL;
	size_t len = 0;
	snprintf(cmd, sizeof(cmd), "go tool pprof %s 2>&1", args);
	FILE *pipe = popen(cmd, "r"), *out = open_memstream(&text, &len);
	char buf[4096];
	size_t n;
	assert_non_null(pipe);
	while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0)
		fwrite(buf, 1, n, out);
	int status = pclose(pipe);
	fclose(out);
	fprintf(stderr, "+ %s\n%s", cmd, text);
	assert_int_equal(status, 0);
	return text;
}

static void test_go_pprof_top(void **state)
{
	(void)state;
	require_go();
	struct profile *p = build();
	char path[] = "/tmp/hostprof-test-pprof-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, p);
	char args[256];
	snprintf(args, sizeof(args), "-top -symbolize=none %s", path);
	char *text = run_pprof(args);
	assert_non_null(strstr(text, "Type: cpu"));
	assert_non_null(strstr(text, "Duration: 2s"));
	/* Flat cpu of 10.5 ms: helper 4 + 1 ms, schedule 3 ms, the unsymbolized libz frame 2.5 ms. */
	assert_non_null(strstr(text, "Total samples = 10.50ms"));
	assert_non_null(strstr(text, "5ms 47.62% 47.62%        8ms 76.19%  helper (inline)\n"));
	assert_non_null(strstr(text, "3ms 28.57% 76.19%        3ms 28.57%  schedule\n"));
	assert_non_null(strstr(text, " [libz.so.1]\n"));
	assert_non_null(strstr(text, " main\n"));
	assert_non_null(strstr(text, " work\n"));
	free(text);
	/* Labels select samples: only the one of transaction ffffffffffffffff (main > work > helper > schedule). */
	snprintf(args, sizeof(args), "-traces -tagfocus='transaction id=ffffffffffffffff' %s", path);
	text = run_pprof(args);
	assert_non_null(strstr(text, "schedule"));
	assert_non_null(strstr(text, "trace id:  000102030405060708090a0b0c0d0e0f"));
	assert_null(strstr(text, "[libz.so.1]"));
	free(text);
	unlink(path);
	profile_free(p);
}

__attribute__((noinline, noipa)) int pprof_test_marker(int x);
__attribute__((noinline, noipa)) int pprof_test_marker(int x)
{
	return x * 3 + 1;
}

static int main_object_bias(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uintptr_t *)data = info->dlpi_addr;
	return 1;	/* the first object is the program */
}

/* An address hostprof could not symbolize is an ELF address pprof resolves from the binary itself. */
static void test_go_pprof_symbolizes_elf_address(void **state)
{
	(void)state;
	require_go();
	test_require_tool("command -v addr2line", "binutils' addr2line (pprof symbolizes with it)");
	uintptr_t bias = 0;
	char exe[PATH_MAX], path[] = "/tmp/hostprof-test-pprof-XXXXXX";
	assert_non_null(realpath("/proc/self/exe", exe));
	dl_iterate_phdr(main_object_bias, &bias);
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	struct profile_mapping m = { .filename = tp_string(p, exe) };
	uint32_t mi, li, si;
	assert_int_equal(profile_add_mapping(p, &m, &mi), 0);
	li = tp_location(p, mi, (uintptr_t)&pprof_test_marker - bias + 4, PROFILE_FRAME_NATIVE, NULL, 0);
	si = tp_stack(p, 1, &li, 1);
	sample(p, si, 1, 1, "t", "t", 0, 5, 5000000);
	assert_int_equal(pprof_test_marker(1), 4);
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, p);
	char args[256];
	snprintf(args, sizeof(args), "-top %s", path);
	char *text = run_pprof(args);
	assert_non_null(strstr(text, "pprof_test_marker"));
	free(text);
	unlink(path);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_dictionary),
		cmocka_unit_test(test_samples),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_jit_mapping),
		cmocka_unit_test(test_go_pprof_top),
		cmocka_unit_test(test_go_pprof_symbolizes_elf_address),
	};
	return cmocka_run_group_tests_name("pprof", tests, NULL, NULL);
}
