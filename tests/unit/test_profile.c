/*
 * Unit tests for src/profile/profile.c, msgpack_write.c and msgpack_read.c: interning, merge, the msgpack round
 * trip, hostile input (stacks deeper than record writes, counts past int64, FIFOs and devices) and atomic writes. Hand-crafted files are built with msgpack-c, never by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/profile/ids.h"
#include "src/profile/profile.h"
#include "tests/lib/profile_builder.h"
#include "tests/lib/testlib.h"

/* --- fixtures ----------------------------------------------------------------------------------------------- */

struct tmpdir {
	char path[64];
};

static void tmpdir_make(struct tmpdir *d)
{
	snprintf(d->path, sizeof(d->path), "/tmp/hostprof-tprofile-XXXXXX");
	assert_non_null(mkdtemp(d->path));
}

static void tmpdir_file(const struct tmpdir *d, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", d->path, name);
}

static void tmpdir_remove(const struct tmpdir *d)
{
	DIR *dir = opendir(d->path);
	struct dirent *e;
	char path[512];
	assert_non_null(dir);
	while ((e = readdir(dir))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", d->path, e->d_name);
		if (unlink(path) < 0)
			rmdir(path);
	}
	closedir(dir);
	rmdir(d->path);
}

/* Number of directory entries whose name contains ".tmp.". */
static int count_temp_files(const char *dirpath)
{
	DIR *dir = opendir(dirpath);
	struct dirent *e;
	int n = 0;
	assert_non_null(dir);
	while ((e = readdir(dir)))
		n += strstr(e->d_name, ".tmp.") != NULL;
	closedir(dir);
	return n;
}

static void write_bytes(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static uint8_t *read_bytes(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(*len ? *len : 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, *len, f), *len);
	fclose(f);
	return buf;
}





static void sample(struct profile *p, uint32_t st, int32_t pid, int32_t tid, const char *comm, const char *thread,
		   uint32_t link, uint64_t count)
{
	struct profile_sample s = { .stack = st, .pid = pid, .tid = tid, .comm = tp_string(p, comm),
				    .thread_name = tp_string(p, thread), .link = link, .count = count,
				    .cpu_ns = count * 10101010 };
	assert_int_equal(profile_add_sample(p, &s), 0);
}

static void set_info(struct profile *p)
{
	struct profile_info *i = &p->info;
	assert_int_equal(profile_set_info_string(p, &i->producer, "hostprof 0.1.0"), 0);
	assert_int_equal(profile_set_info_string(p, &i->hostname, "box"), 0);
	assert_int_equal(profile_set_info_string(p, &i->host_id, "0123456789abcdef"), 0);
	assert_int_equal(profile_set_info_string(p, &i->kernel, "6.1.0-13-amd64"), 0);
	assert_int_equal(profile_set_info_string(p, &i->event, "cpu-clock"), 0);
	assert_int_equal(profile_set_info_string(p, &i->unwinder, "libunwind"), 0);
	assert_int_equal(profile_set_info_string(p, &i->cmdline, "perf record -g -- ./app --threads 4"), 0);
	i->cpus_online = 6;
	i->cpus_available = 8;
	i->start_unix_ns = 1700000000123456789ULL;
	i->duration_ns = 2000000000;
	i->period_ns = 10101010;
	i->frequency_hz = 99;
	i->samples = 7;
	i->lost = 1;
	i->unwound_complete = 5;
	i->truncated = 1;
	i->unknown = 1;
}

/* A profile using every table and field: inline lines, kernel, Go, JIT, error and unsymbolized frames, links. */
#define CONTAINER "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static struct profile *build_profile(void)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	set_info(p);
	struct profile_mapping libc = { .build_id = tp_string(p, "deadbeef00112233"),
					.filename = tp_string(p, "/usr/lib/libc.so.6"),
					.memory_start = 0x7f0000000000, .memory_limit = 0x7f0000100000,
					.file_offset = 0x1000 };
	struct profile_mapping app = { .filename = tp_string(p, "/opt/app/bin/app") };
	uint32_t m_libc, m_app;
	for (int b = 0; b < 16; b++)
		libc.file_id[b] = (uint8_t)(0x10 + b);
	app.file_id[15] = 1;
	assert_int_equal(profile_add_mapping(p, &libc, &m_libc), 0);
	assert_int_equal(profile_add_mapping(p, &app, &m_app), 0);

	struct profile_line work[] = { { tp_function(p, "helper", "util.h"), 10 }, { tp_function(p, "work", "app.c"), 42 } };
	struct profile_line main_[] = { { tp_function(p, "main", "app.c"), 7 } };
	struct profile_line sched[] = { { tp_function(p, "schedule", NULL), 0 } };
	struct profile_line trunc[] = { { tp_function(p, "[truncated]", NULL), 0 } };
	struct profile_line go[] = { { tp_function(p, "main.loop", "loop.go"), -3 } };
	struct profile_line js[] = { { tp_function(p, "JS:*hot /app/hot.js:1:17", "/app/hot.js"), 3 } };
	struct profile_mapping jit_map = { .filename = tp_string(p, "/tmp/perf-42.map") };
	uint32_t m_jit;
	fileid_from_text("jit:JS:*hot /app/hot.js:1:17", 28, (struct file_id *)jit_map.file_id);
	assert_int_equal(profile_add_mapping(p, &jit_map, &m_jit), 0);
	uint32_t l_work = tp_location(p, m_app, 0x1234, PROFILE_FRAME_NATIVE, work, 2);
	uint32_t l_main = tp_location(p, m_app, 0x1100, PROFILE_FRAME_NATIVE, main_, 1);
	uint32_t l_memcpy = tp_location(p, m_libc, 0x9abc, PROFILE_FRAME_NATIVE, NULL, 0);
	uint32_t l_sched = tp_location(p, 0, 0x5555, PROFILE_FRAME_KERNEL, sched, 1);
	uint32_t l_trunc = tp_location(p, 0, 1, PROFILE_FRAME_ERROR, trunc, 1);
	uint32_t l_go = tp_location(p, m_app, 0x2000, PROFILE_FRAME_GO, go, 1);
	uint32_t l_jit = tp_location(p, m_jit, 0x40, PROFILE_FRAME_JIT, js, 1);

	uint32_t s1 = tp_stack(p, 0xa1, (uint32_t[]){ l_work, l_main }, 2);
	uint32_t s2 = tp_stack(p, 0xb2, (uint32_t[]){ l_sched, l_memcpy, l_trunc }, 3);
	uint32_t s3 = tp_stack(p, 0xc3, (uint32_t[]){ l_jit, l_go, l_main }, 3);

	struct profile_link link = { 0 };
	uint32_t li;
	for (int b = 0; b < 16; b++)
		link.trace_id[b] = (uint8_t)(0xe0 + b);
	memset(link.span_id, 0x5a, 8);
	assert_int_equal(profile_add_link(p, &link, &li), 0);

	sample(p, s1, 100, 100, "app", "app", 0, 3);
	sample(p, s1, 100, 101, "app", "worker-1", li, 2);
	sample(p, s2, 200, 200, "app2", "", 0, 1);
	sample(p, s3, 100, 101, "app", "worker-1", 0, 1);
	tp_process(p, 100, "/opt/app/bin/app", CONTAINER);
	tp_process(p, 200, "/usr/bin/app2", NULL);
	return p;
}

/* --- comparing profiles ------------------------------------------------------------------------------------- */

static void assert_opt_string(const char *a, const char *b)
{
	assert_string_equal(a ? a : "", b ? b : "");
}

static void assert_info_equal(const struct profile_info *a, const struct profile_info *b)
{
	assert_opt_string(a->producer, b->producer);
	assert_opt_string(a->hostname, b->hostname);
	assert_opt_string(a->host_id, b->host_id);
	assert_opt_string(a->kernel, b->kernel);
	assert_opt_string(a->event, b->event);
	assert_opt_string(a->unwinder, b->unwinder);
	assert_opt_string(a->cmdline, b->cmdline);
	assert_int_equal(a->cpus_online, b->cpus_online);
	assert_int_equal(a->cpus_available, b->cpus_available);
	assert_int_equal(a->start_unix_ns, b->start_unix_ns);
	assert_int_equal(a->duration_ns, b->duration_ns);
	assert_int_equal(a->period_ns, b->period_ns);
	assert_int_equal(a->frequency_hz, b->frequency_hz);
	assert_int_equal(a->samples, b->samples);
	assert_int_equal(a->lost, b->lost);
	assert_int_equal(a->lost_fast_lane, b->lost_fast_lane);
	assert_int_equal(a->unwound_complete, b->unwound_complete);
	assert_int_equal(a->truncated, b->truncated);
	assert_int_equal(a->unknown, b->unknown);
}

static void assert_dictionary_equal(const struct profile *a, const struct profile *b)
{
	assert_int_equal(a->strings.count, b->strings.count);
	for (uint32_t i = 0; i < a->strings.count; i++)
		assert_string_equal(profile_string(a, i), profile_string(b, i));
	assert_int_equal(a->mappings.count, b->mappings.count);
	for (uint32_t i = 0; i < a->mappings.count; i++) {
		const struct profile_mapping *x = &a->mappings.items[i], *y = &b->mappings.items[i];
		assert_memory_equal(x->file_id, y->file_id, 16);
		assert_int_equal(x->build_id, y->build_id);
		assert_int_equal(x->filename, y->filename);
		assert_int_equal(x->memory_start, y->memory_start);
		assert_int_equal(x->memory_limit, y->memory_limit);
		assert_int_equal(x->file_offset, y->file_offset);
	}
	assert_int_equal(a->functions.count, b->functions.count);
	assert_memory_equal(a->functions.items, b->functions.items, a->functions.count * sizeof(*a->functions.items));
	assert_int_equal(a->locations.count, b->locations.count);
	for (uint32_t i = 0; i < a->locations.count; i++) {
		const struct profile_location *x = &a->locations.items[i], *y = &b->locations.items[i];
		assert_int_equal(x->mapping, y->mapping);
		assert_int_equal(x->address, y->address);
		assert_int_equal(x->frame_kind, y->frame_kind);
		assert_int_equal(x->nlines, y->nlines);
		for (uint32_t j = 0; j < x->nlines; j++) {
			assert_int_equal(x->lines[j].function, y->lines[j].function);
			assert_int_equal(x->lines[j].line, y->lines[j].line);
		}
	}
	assert_int_equal(a->stacks.count, b->stacks.count);
	for (uint32_t i = 0; i < a->stacks.count; i++) {
		const struct profile_stack *x = &a->stacks.items[i], *y = &b->stacks.items[i];
		assert_memory_equal(x->trace_id, y->trace_id, 16);
		assert_int_equal(x->nlocations, y->nlocations);
		if (x->nlocations)
			assert_memory_equal(x->locations, y->locations, x->nlocations * sizeof(uint32_t));
	}
	assert_int_equal(a->links.count, b->links.count);
	assert_memory_equal(a->links.items, b->links.items, a->links.count * sizeof(*a->links.items));
}

static const struct profile_sample *find_sample(const struct profile *p, const struct profile_sample *k)
{
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		if (s->stack == k->stack && s->pid == k->pid && s->tid == k->tid && s->comm == k->comm &&
		    s->thread_name == k->thread_name && s->link == k->link)
			return s;
	}
	return NULL;
}

/* The same program paths and containers per pid, as strings. */
static void assert_processes_equal(const struct profile *a, const struct profile *b)
{
	assert_int_equal(a->processes.count, b->processes.count);
	for (uint32_t i = 0; i < a->processes.count; i++) {
		const struct profile_process *x = &a->processes.items[i], *y = profile_find_process(b, x->pid);
		assert_non_null(y);
		assert_string_equal(profile_string(a, x->exe_path), profile_string(b, y->exe_path));
		assert_string_equal(profile_string(a, x->container_id), profile_string(b, y->container_id));
	}
}

/* Same dictionary indices; the same samples in any order (the file groups them by process). */
static void assert_profiles_equal(const struct profile *a, const struct profile *b)
{
	assert_info_equal(&a->info, &b->info);
	assert_dictionary_equal(a, b);
	assert_processes_equal(a, b);
	assert_int_equal(a->samples.count, b->samples.count);
	for (uint32_t i = 0; i < a->samples.count; i++) {
		const struct profile_sample *s = find_sample(b, &a->samples.items[i]);
		assert_non_null(s);
		assert_int_equal(s->count, a->samples.items[i].count);
		assert_int_equal(s->cpu_ns, a->samples.items[i].cpu_ns);
		assert_int_equal(s->ntimestamps, a->samples.items[i].ntimestamps);
		if (s->ntimestamps)
			assert_memory_equal(s->timestamps, a->samples.items[i].timestamps,
					    s->ntimestamps * sizeof(uint64_t));
	}
}

static struct profile *read_ok(const char *path)
{
	struct profile *p = NULL;
	char err[256] = "";
	int rc = profile_read_file(path, &p, err, sizeof(err));
	if (rc < 0)
		fail_msg("read %s: %d %s", path, rc, err);
	assert_non_null(p);
	return p;
}

/* Read a file that must fail; returns the errno and leaves the message in err. */
static int read_fails(const char *path, char *err, size_t len)
{
	struct profile *p = (struct profile *)1;
	int rc = profile_read_file(path, &p, err, len);
	assert_true(rc < 0);
	assert_null(p);
	assert_true(strlen(err) > strlen(path));
	assert_memory_equal(err, path, strlen(path));
	assert_null(strchr(err, '\n'));
	return rc;
}

/* --- builder ------------------------------------------------------------------------------------------------ */

static void test_strings_interned_and_copied(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	char buf[16] = "hello";
	uint32_t a, b, c, z;
	assert_int_equal(p->strings.count, 1);
	assert_string_equal(profile_string(p, 0), "");
	assert_int_equal(profile_add_string(p, buf, &a), 0);
	strcpy(buf, "world");
	assert_int_equal(profile_add_string(p, "hello", &b), 0);
	assert_int_equal(profile_add_string(p, buf, &c), 0);
	assert_int_equal(a, 1);
	assert_int_equal(b, 1);
	assert_int_equal(c, 2);
	assert_string_equal(profile_string(p, a), "hello");
	assert_int_equal(profile_add_string(p, NULL, &z), 0);
	assert_int_equal(z, 0);
	assert_int_equal(profile_add_string(p, "", &z), 0);
	assert_int_equal(z, 0);
	assert_string_equal(profile_string(p, 999), "");
	assert_int_equal(profile_find_string(p, "world", &z), 0);
	assert_int_equal(z, 2);
	assert_int_equal(profile_find_string(p, "absent", &z), -ENOENT);
	assert_int_equal(p->strings.count, 3);
	profile_free(p);
}

static void test_tables_interned(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	struct profile_mapping m = { .filename = tp_string(p, "/lib/x.so"), .memory_start = 1 }, zero_m = { 0 };
	uint32_t m1, m2, m0, f1, f2;
	assert_int_equal(profile_add_mapping(p, &m, &m1), 0);
	assert_int_equal(profile_add_mapping(p, &m, &m2), 0);
	assert_int_equal(m1, m2);
	assert_int_equal(profile_add_mapping(p, &zero_m, &m0), 0);
	assert_int_equal(m0, 0);
	m.file_id[3] = 9;
	assert_int_equal(profile_add_mapping(p, &m, &m2), 0);
	assert_int_not_equal(m1, m2);

	f1 = tp_function(p, "f", "a.c");
	f2 = tp_function(p, "f", "b.c");
	assert_int_not_equal(f1, f2);
	assert_int_equal(tp_function(p, "f", "a.c"), f1);

	/* Locations are keyed by (mapping, address, kind); the first lines win. */
	struct profile_line l1[] = { { f1, 3 } }, l2[] = { { f2, 4 }, { f1, 5 } };
	uint32_t a = tp_location(p, m1, 0x10, PROFILE_FRAME_NATIVE, l1, 1);
	assert_int_equal(tp_location(p, m1, 0x10, PROFILE_FRAME_NATIVE, l2, 2), a);
	assert_int_equal(p->locations.items[a].nlines, 1);
	assert_int_equal(p->locations.items[a].lines[0].line, 3);
	l1[0].line = 99;	/* lines were copied */
	assert_int_equal(p->locations.items[a].lines[0].line, 3);
	assert_int_not_equal(tp_location(p, m1, 0x10, PROFILE_FRAME_KERNEL, NULL, 0), a);
	assert_int_not_equal(tp_location(p, m2, 0x10, PROFILE_FRAME_NATIVE, NULL, 0), a);

	uint32_t locs[] = { a, a };
	uint32_t s1 = tp_stack(p, 1, locs, 2);
	assert_int_equal(tp_stack(p, 1, locs, 2), s1);
	assert_int_not_equal(tp_stack(p, 2, locs, 2), s1);
	assert_int_not_equal(tp_stack(p, 1, locs, 1), s1);
	assert_int_equal(tp_stack(p, 0, NULL, 0), 0);

	struct profile_link link = { .trace_id = { 1 }, .span_id = { 2 } }, zero_l = { 0 };
	uint32_t k1, k2;
	assert_int_equal(profile_add_link(p, &link, &k1), 0);
	assert_int_equal(profile_add_link(p, &link, &k2), 0);
	assert_int_equal(k1, k2);
	assert_int_equal(profile_add_link(p, &zero_l, &k2), 0);
	assert_int_equal(k2, 0);
	profile_free(p);
}

static void test_references_checked(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	uint32_t i, bad = 42;
	struct profile_mapping m = { .filename = 7 };
	struct profile_function f = { .name = 7 };
	struct profile_line line = { .function = 7 };
	struct profile_location l = { .mapping = 3 }, l2 = { .nlines = 1, .lines = &line };
	struct profile_stack s = { .nlocations = 1, .locations = &bad };
	struct profile_sample smp = { .stack = 5 };
	assert_int_equal(profile_add_mapping(p, &m, &i), -EINVAL);
	assert_int_equal(profile_add_function(p, &f, &i), -EINVAL);
	assert_int_equal(profile_add_location(p, &l, &i), -EINVAL);
	assert_int_equal(profile_add_location(p, &l2, &i), -EINVAL);
	assert_int_equal(profile_add_stack(p, &s, &i), -EINVAL);
	assert_int_equal(profile_add_sample(p, &smp), -EINVAL);
	profile_free(p);
}

static void test_samples_merged(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	uint32_t s = tp_stack(p, 1, NULL, 0);
	sample(p, s, 1, 1, "a", "t", 0, 2);
	sample(p, s, 1, 1, "a", "t", 0, 3);
	sample(p, s, 1, 2, "a", "t", 0, 1);
	sample(p, s, 1, 1, "a", "u", 0, 1);
	assert_int_equal(p->samples.count, 3);
	assert_int_equal(p->samples.items[0].count, 5);
	assert_int_equal(p->samples.items[0].cpu_ns, 5 * 10101010ULL);
	profile_free(p);
}

/* 1e5 distinct elements of each kind, then all of them again: fast and deduplicated. */
static void test_many_elements(void **state)
{
	(void)state;
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	enum { N = 100000 };
	char name[32];
	for (int round = 0; round < 2; round++) {
		for (uint32_t i = 0; i < N; i++) {
			snprintf(name, sizeof(name), "fn_%u", i);
			struct profile_line line = { tp_function(p, name, "f.c"), i };
			uint32_t l = tp_location(p, 0, 0x1000 + i, PROFILE_FRAME_NATIVE, &line, 1);
			struct profile_stack s = { .nlocations = 1, .locations = &l };
			uint32_t si;
			memcpy(s.trace_id, &i, sizeof(i));
			assert_int_equal(profile_add_stack(p, &s, &si), 0);
			sample(p, si, 1, (int32_t)(i % 7), "comm", "thread", 0, 1);
		}
	}
	assert_int_equal(p->strings.count, N + 4);
	assert_int_equal(p->functions.count, N + 1);
	assert_int_equal(p->locations.count, N + 1);
	assert_int_equal(p->stacks.count, N + 1);
	assert_int_equal(p->samples.count, N);
	assert_int_equal(p->samples.items[N - 1].count, 2);
	profile_free(p);
}

/* --- merge and round trip ----------------------------------------------------------------------------------- */

static void test_round_trip(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128];
	tmpdir_make(&d);
	tmpdir_file(&d, "p.msgpack", path, sizeof(path));
	struct profile *p = build_profile();
	p->info.lost = 5;
	p->info.lost_fast_lane = 3;	/* written only when not zero: the other profiles leave it out */
	assert_int_equal(profile_write_file(p, path), 0);
	assert_int_equal(count_temp_files(d.path), 0);
	struct profile *q = read_ok(path);
	assert_profiles_equal(p, q);
	/* Frame kinds are also written as profile.frame.type attributes, JIT frames' as "jit". */
	char raw[65536];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(raw, 1, sizeof(raw), f) : 0;
	if (f)
		fclose(f);
	assert_non_null(memmem(raw, n, "\xa3jit", 4));
	assert_non_null(memmem(raw, n, "\xa6kernel", 7));
	/* The CPU counts and the command line are there under their keys (the round trip checked their values). */
	assert_non_null(memmem(raw, n, "\xab" "cpus_online", 12));
	assert_non_null(memmem(raw, n, "\xa7" "cmdline", 8));

	/* And again from what was read: the format is stable under re-writing. */
	assert_int_equal(profile_write_file(q, path), 0);
	struct profile *r = read_ok(path);
	assert_profiles_equal(p, r);
	profile_free(p);
	profile_free(q);
	profile_free(r);
	tmpdir_remove(&d);
}

static void test_round_trip_empty(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128];
	tmpdir_make(&d);
	tmpdir_file(&d, "empty.msgpack", path, sizeof(path));
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(profile_write_file(p, path), 0);
	struct profile *q = read_ok(path);
	assert_profiles_equal(p, q);
	assert_null(q->info.producer);
	/* Nothing known of the CPUs or the command line: neither is written, and none is read back. */
	assert_int_equal(q->info.cpus_online + q->info.cpus_available, 0);
	assert_null(q->info.cmdline);
	FILE *f = fopen(path, "rb");
	char raw[4096];
	size_t n = f ? fread(raw, 1, sizeof(raw), f) : 0;
	if (f)
		fclose(f);
	assert_null(memmem(raw, n, "cpus_online", 11));
	assert_null(memmem(raw, n, "cmdline", 7));
	profile_free(p);
	profile_free(q);
	tmpdir_remove(&d);
}

static void test_merge(void **state)
{
	(void)state;
	struct profile *a = build_profile(), *b = build_profile(), *c;
	assert_int_equal(profile_new(&c), 0);
	b->info.start_unix_ns += 3000000000ULL;	/* b runs 1 s after a ends */
	b->info.lost_fast_lane = 1;	/* b's one lost sample was lost on the fast lane */
	assert_int_equal(profile_merge(c, a), 0);
	assert_profiles_equal(a, c);	/* into an empty profile: identical */
	assert_int_equal(profile_merge(c, b), 0);
	assert_int_equal(c->info.samples, 14);
	assert_int_equal(c->info.lost, 2);
	assert_int_equal(c->info.lost_fast_lane, 1);
	assert_int_equal(c->info.start_unix_ns, a->info.start_unix_ns);
	assert_int_equal(c->info.duration_ns, 5000000000ULL);
	assert_int_equal(c->info.cpus_online, 6);	/* descriptive: the first profile's */
	assert_string_equal(c->info.cmdline, a->info.cmdline);
	assert_int_equal(c->stacks.count, a->stacks.count);
	assert_int_equal(c->samples.count, a->samples.count);
	for (uint32_t i = 0; i < c->samples.count; i++)
		assert_int_equal(c->samples.items[i].count, 2 * a->samples.items[i].count);
	assert_int_equal(profile_merge(c, c), -EINVAL);
	profile_free(a);
	/* What is known of a process: the first profile's value wins, a value it lacks comes from the other. */
	struct profile *d;
	assert_int_equal(profile_new(&d), 0);
	tp_process(d, 200, "/usr/bin/renamed", CONTAINER);
	tp_process(d, 300, "/bin/sh", NULL);
	assert_int_equal(profile_merge(c, d), 0);
	assert_int_equal(c->processes.count, 3);
	assert_string_equal(profile_string(c, profile_find_process(c, 100)->exe_path), "/opt/app/bin/app");
	assert_string_equal(profile_string(c, profile_find_process(c, 200)->exe_path), "/usr/bin/app2");
	assert_string_equal(profile_string(c, profile_find_process(c, 200)->container_id), CONTAINER);
	assert_string_equal(profile_string(c, profile_find_process(c, 300)->exe_path), "/bin/sh");
	assert_null(profile_find_process(c, 400));
	profile_free(d);
	profile_free(b);
	profile_free(c);
}

/* Samples' timestamps: copied in, appended when samples merge, written and read back, never more than samples. */
static void test_timestamps(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128], err[256];
	tmpdir_make(&d);
	tmpdir_file(&d, "t.msgpack", path, sizeof(path));
	struct profile *p = build_profile();
	uint64_t t1[] = { 1700000000200000000ULL, 1700000000300000000ULL }, t2[] = { 1700000000100000000ULL };
	struct profile_sample s = { .stack = 1, .pid = 300, .tid = 301, .comm = tp_string(p, "timed"), .count = 2,
				    .cpu_ns = 20202020, .ntimestamps = 2, .timestamps = t1 };
	assert_int_equal(profile_add_sample(p, &s), 0);
	t1[0] = 0;	/* the profile holds its own copy */
	s.count = 1;
	s.cpu_ns = 10101010;
	s.ntimestamps = 1;
	s.timestamps = t2;
	assert_int_equal(profile_add_sample(p, &s), 0);	/* merged: appended */
	s.ntimestamps = 2;	/* more times than samples */
	assert_int_equal(profile_add_sample(p, &s), -EINVAL);
	p->info.timestamps_dropped = 4;
	const struct profile_sample *m = &p->samples.items[p->samples.count - 1];
	assert_int_equal(m->count, 3);
	assert_int_equal(m->ntimestamps, 3);
	assert_int_equal(m->timestamps[0], 1700000000200000000ULL);
	assert_int_equal(m->timestamps[2], 1700000000100000000ULL);

	assert_int_equal(profile_write_file(p, path), 0);
	struct profile *q = read_ok(path);
	assert_profiles_equal(p, q);
	assert_int_equal(q->info.timestamps_dropped, 4);
	/* merged with itself: the times of both, the drops of both */
	assert_int_equal(profile_merge(q, p), 0);
	const struct profile_sample *qm = NULL;
	for (uint32_t i = 0; i < q->samples.count; i++)
		qm = q->samples.items[i].pid == 300 ? &q->samples.items[i] : qm;
	assert_non_null(qm);
	assert_int_equal(qm->count, 6);
	assert_int_equal(qm->ntimestamps, 6);
	assert_int_equal(q->info.timestamps_dropped, 8);
	profile_free(q);

	/* a file with more times than samples is corrupt */
	p->samples.items[p->samples.count - 1].count = 2;
	assert_int_equal(profile_write_file(p, path), 0);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "timestamps"));
	p->samples.items[p->samples.count - 1].count = 3;
	profile_free(p);
	tmpdir_remove(&d);
}

static void test_concatenated_maps_merge(void **state)
{
	(void)state;
	struct tmpdir d;
	char pa[128], pb[128], pc[128];
	size_t la, lb;
	tmpdir_make(&d);
	tmpdir_file(&d, "a.msgpack", pa, sizeof(pa));
	tmpdir_file(&d, "b.msgpack", pb, sizeof(pb));
	tmpdir_file(&d, "c.msgpack", pc, sizeof(pc));

	struct profile *a = build_profile(), *b;
	assert_int_equal(profile_new(&b), 0);
	uint32_t s = tp_stack(b, 0x77, NULL, 0);
	sample(b, s, 300, 300, "other", "", 0, 4);
	sample(b, tp_stack(b, 0x77, NULL, 0), 300, 300, "other", "", 0, 1);
	b->info.samples = 5;
	assert_int_equal(profile_write_file(a, pa), 0);
	assert_int_equal(profile_write_file(b, pb), 0);
	uint8_t *ba = read_bytes(pa, &la), *bb = read_bytes(pb, &lb);
	uint8_t *both = malloc(la + lb);
	memcpy(both, ba, la);
	memcpy(both + la, bb, lb);
	write_bytes(pc, both, la + lb);

	struct profile *expect, *got = read_ok(pc);
	assert_int_equal(profile_new(&expect), 0);
	assert_int_equal(profile_merge(expect, a), 0);
	assert_int_equal(profile_merge(expect, b), 0);
	assert_profiles_equal(expect, got);
	assert_int_equal(got->info.samples, 12);
	assert_int_equal(got->samples.count, 5);

	free(ba);
	free(bb);
	free(both);
	profile_free(a);
	profile_free(b);
	profile_free(expect);
	profile_free(got);
	tmpdir_remove(&d);
}

/* --- hostile input ------------------------------------------------------------------------------------------ */

static void test_truncated_file(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128], cut[128], err[256];
	size_t len;
	tmpdir_make(&d);
	tmpdir_file(&d, "p.msgpack", path, sizeof(path));
	tmpdir_file(&d, "cut.msgpack", cut, sizeof(cut));
	struct profile *p = build_profile();
	assert_int_equal(profile_write_file(p, path), 0);
	uint8_t *buf = read_bytes(path, &len);
	for (size_t n = 0; n < len; n++) {
		write_bytes(cut, buf, n);
		int rc = read_fails(cut, err, sizeof(err));
		assert_true(rc == -EBADMSG || rc == -EINVAL);
	}
	write_bytes(cut, buf, len / 2);
	assert_int_equal(read_fails(cut, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "truncated"));
	free(buf);
	profile_free(p);
	tmpdir_remove(&d);
}

/* Flipped bytes anywhere: an error or a profile, never a crash (run under ASan/UBSan). */
static void test_corrupted_bytes(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128], bad[128], err[256];
	size_t len;
	uint32_t rnd = 12345;
	tmpdir_make(&d);
	tmpdir_file(&d, "p.msgpack", path, sizeof(path));
	tmpdir_file(&d, "bad.msgpack", bad, sizeof(bad));
	struct profile *p = build_profile();
	assert_int_equal(profile_write_file(p, path), 0);
	uint8_t *buf = read_bytes(path, &len);
	for (int iter = 0; iter < 3000; iter++) {
		uint8_t *copy = malloc(len);
		memcpy(copy, buf, len);
		for (int k = 0; k < 1 + iter % 4; k++) {
			rnd = rnd * 1103515245 + 12345;
			copy[(rnd >> 8) % len] = (uint8_t)(rnd >> 20);
		}
		write_bytes(bad, copy, len);
		struct profile *q = NULL;
		if (profile_read_file(bad, &q, err, sizeof(err)) == 0)
			profile_free(q);
		else
			assert_true(err[0] != '\0');
		free(copy);
	}
	free(buf);
	profile_free(p);
	tmpdir_remove(&d);
}

static void test_garbage(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128], err[256], expect[300];
	tmpdir_make(&d);
	tmpdir_file(&d, "garbage.msgpack", path, sizeof(path));

	write_bytes(path, "hello, world\n", 13);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EINVAL);
	snprintf(expect, sizeof(expect), "%s: not a hostprof profile", path);
	assert_string_equal(err, expect);

	write_bytes(path, "", 0);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EINVAL);

	/* An array claiming 4 billion elements must not make anyone allocate them. */
	write_bytes(path, "\x83\x00\xdd\xff\xff\xff\xff\x01", 8);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EBADMSG);
	write_bytes(path, "\xdd\xff\xff\xff\xff\x01", 6);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EINVAL);

	/* Deeply nested arrays. */
	uint8_t nest[200];
	memset(nest, 0x91, sizeof(nest));
	nest[0] = 0x81;
	nest[1] = 0x00;
	nest[sizeof(nest) - 1] = 0x00;
	write_bytes(path, nest, sizeof(nest));
	assert_int_equal(read_fails(path, err, sizeof(err)), -EBADMSG);

	assert_true(read_fails("/nonexistent/hostprof.msgpack", err, sizeof(err)) == -ENOENT);
	tmpdir_remove(&d);
}

/* --- hand-crafted files ------------------------------------------------------------------------------------- */

static void pack_s(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void pack_header(msgpack_packer *pk, unsigned major, bool extra_key, uint64_t cpus)
{
	msgpack_pack_map(pk, 3 + extra_key + (cpus != 0));
	if (cpus) {
		pack_s(pk, "host");
		msgpack_pack_map(pk, 1);
		pack_s(pk, "cpus_online");
		msgpack_pack_uint64(pk, cpus);
	}
	pack_s(pk, "format");
	pack_s(pk, "hostprof");
	pack_s(pk, "version");
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint32(pk, major);
	msgpack_pack_uint32(pk, 7);
	pack_s(pk, "stats");
	msgpack_pack_map(pk, 1);
	pack_s(pk, "samples");
	msgpack_pack_uint32(pk, 1);
	if (extra_key) {
		pack_s(pk, "from the future");
		msgpack_pack_array(pk, 1);
		msgpack_pack_nil(pk);
	}
}

/*
 * A small profile: strings ["", "main", "future"], one function, `nlocs` locations (the last one's mapping index
 * is bad_mapping), one stack listing stack_locs, one sample of stack `sample_stack`. With extras, unknown keys
 * are sprinkled at every level.
 */
struct craft {
	unsigned major;
	uint32_t nlocs, bad_mapping;
	uint32_t stack_locs[3], nstack_locs;
	uint32_t sample_stack;
	bool extras;
	uint64_t cpus;		/* a host map with this cpus_online, if not 0 */
};

static void pack_unknown(msgpack_packer *pk, bool extras)
{
	if (!extras)
		return;
	msgpack_pack_uint32(pk, 99);
	msgpack_pack_map(pk, 1);
	pack_s(pk, "x");
	msgpack_pack_uint32(pk, 1);
}

static void pack_crafted(msgpack_packer *pk, const struct craft *c)
{
	msgpack_pack_map(pk, 3 + c->extras);
	msgpack_pack_uint32(pk, 0);
	pack_header(pk, c->major, c->extras, c->cpus);
	pack_unknown(pk, c->extras);

	msgpack_pack_uint32(pk, 2);	/* dictionary */
	msgpack_pack_map(pk, 4 + c->extras);
	msgpack_pack_uint32(pk, 5);
	msgpack_pack_array(pk, 3);
	pack_s(pk, "");
	pack_s(pk, "main");
	pack_s(pk, "future");
	msgpack_pack_uint32(pk, 3);
	msgpack_pack_array(pk, 2);
	msgpack_pack_map(pk, 0);
	msgpack_pack_map(pk, 1 + c->extras);
	msgpack_pack_uint32(pk, 1);
	msgpack_pack_uint32(pk, 1);
	pack_unknown(pk, c->extras);
	msgpack_pack_uint32(pk, 2);
	msgpack_pack_array(pk, c->nlocs);
	for (uint32_t i = 0; i < c->nlocs; i++) {
		bool last = i + 1 == c->nlocs && i > 0;
		msgpack_pack_map(pk, i ? 3 + c->extras : 0);
		if (!i)
			continue;
		msgpack_pack_uint32(pk, 1);
		msgpack_pack_uint32(pk, last ? c->bad_mapping : 0);
		msgpack_pack_uint32(pk, 2);
		msgpack_pack_uint32(pk, 0x1000 + i);
		msgpack_pack_uint32(pk, 3);
		msgpack_pack_array(pk, 1);
		msgpack_pack_map(pk, 2 + c->extras);
		msgpack_pack_uint32(pk, 1);
		msgpack_pack_uint32(pk, 1);
		msgpack_pack_uint32(pk, 2);
		msgpack_pack_uint32(pk, 12);
		pack_unknown(pk, c->extras);
		pack_unknown(pk, c->extras);
	}
	msgpack_pack_uint32(pk, 7);
	msgpack_pack_array(pk, 2);
	msgpack_pack_map(pk, 0);
	msgpack_pack_map(pk, 1);
	msgpack_pack_uint32(pk, 1);
	msgpack_pack_array(pk, c->nstack_locs);
	for (uint32_t i = 0; i < c->nstack_locs; i++)
		msgpack_pack_uint32(pk, c->stack_locs[i]);
	if (c->extras) {
		msgpack_pack_uint32(pk, 8);	/* a dictionary table from the future */
		msgpack_pack_array(pk, 1);
		msgpack_pack_uint32(pk, 0);
	}

	msgpack_pack_uint32(pk, 1);	/* resource profiles */
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 2);
	msgpack_pack_uint32(pk, 1);
	msgpack_pack_map(pk, 1);
	msgpack_pack_uint32(pk, 1);
	msgpack_pack_map(pk, 2 + c->extras);
	pack_s(pk, "process.pid");
	msgpack_pack_int32(pk, 42);
	pack_s(pk, "process.executable.name");
	pack_s(pk, "crafted");
	if (c->extras) {
		pack_s(pk, "container.id");
		pack_s(pk, "abc");
	}
	msgpack_pack_uint32(pk, 2);
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 1);
	msgpack_pack_uint32(pk, 2);
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 1);
	msgpack_pack_uint32(pk, 2);
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 2 + c->extras);
	msgpack_pack_uint32(pk, 1);
	msgpack_pack_uint32(pk, c->sample_stack);
	msgpack_pack_uint32(pk, 4);
	msgpack_pack_array(pk, 1);
	msgpack_pack_uint32(pk, 6);
	pack_unknown(pk, c->extras);
}

static void write_crafted(const char *path, const struct craft *c)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pack_crafted(&pk, c);
	write_bytes(path, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

static const struct craft good_craft = {
	.major = PROFILE_FORMAT_MAJOR, .nlocs = 3, .stack_locs = { 1, 2 }, .nstack_locs = 2, .sample_stack = 1,
};

static void test_crafted_good_and_unknown_keys(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128];
	tmpdir_make(&d);
	tmpdir_file(&d, "c.msgpack", path, sizeof(path));
	for (int extras = 0; extras < 2; extras++) {
		struct craft c = good_craft;
		c.extras = extras;
		write_crafted(path, &c);
		struct profile *p = read_ok(path);
		assert_int_equal(p->info.samples, 1);
		/* a header without CPU counts or a command line (as earlier versions wrote) reads: none known */
		assert_int_equal(p->info.cpus_online + p->info.cpus_available, 0);
		assert_null(p->info.cmdline);
		assert_int_equal(p->locations.count, 3);
		assert_int_equal(p->locations.items[2].address, 0x1002);
		assert_int_equal(p->locations.items[2].lines[0].line, 12);
		assert_string_equal(profile_string(p, p->functions.items[1].name), "main");
		assert_int_equal(p->samples.count, 1);
		assert_int_equal(p->samples.items[0].pid, 42);
		assert_int_equal(p->samples.items[0].count, 6);
		assert_string_equal(profile_string(p, p->samples.items[0].comm), "crafted");
		assert_int_equal(profile_find_string(p, "future", &(uint32_t){ 0 }), -ENOENT);	/* orphan dropped */
		/* a file without the process's path and container (as earlier versions wrote) has none */
		assert_int_equal(p->processes.count, (uint32_t)extras);
		if (extras) {
			assert_int_equal(p->processes.items[0].pid, 42);
			assert_int_equal(p->processes.items[0].exe_path, 0);
			assert_string_equal(profile_string(p, p->processes.items[0].container_id), "abc");
		}
		profile_free(p);
	}
	tmpdir_remove(&d);
}

static void test_crafted_bad_indices(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128], err[256], expect[300];
	tmpdir_make(&d);
	tmpdir_file(&d, "c.msgpack", path, sizeof(path));

	struct craft c = good_craft;
	c.nlocs = 40;
	c.stack_locs[1] = 99;
	write_crafted(path, &c);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EBADMSG);
	snprintf(expect, sizeof(expect), "%s: corrupt: stack 1 references location 99 of 40", path);
	assert_string_equal(err, expect);

	c = good_craft;
	c.bad_mapping = 5;
	write_crafted(path, &c);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EBADMSG);
	snprintf(expect, sizeof(expect), "%s: corrupt: location 2 references mapping 5 of 1", path);
	assert_string_equal(err, expect);

	c = good_craft;
	c.sample_stack = 2;
	write_crafted(path, &c);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EBADMSG);
	snprintf(expect, sizeof(expect), "%s: corrupt: sample 0 references stack 2 of 2", path);
	assert_string_equal(err, expect);

	/* a CPU count: one that fits is read, one past 32 bits is corrupt */
	c = good_craft;
	c.cpus = 64;
	write_crafted(path, &c);
	struct profile *p = read_ok(path);
	assert_int_equal(p->info.cpus_online, 64);
	assert_int_equal(p->info.cpus_available, 0);
	profile_free(p);
	c.cpus = 1ULL << 32;
	write_crafted(path, &c);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EBADMSG);
	snprintf(expect, sizeof(expect), "%s: corrupt: header field \"cpus_online\" is 4294967296, past 2^32 - 1", path);
	assert_string_equal(err, expect);
	tmpdir_remove(&d);
}

static void test_unknown_major_rejected(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128], err[256], expect[300];
	tmpdir_make(&d);
	tmpdir_file(&d, "c.msgpack", path, sizeof(path));
	struct craft c = good_craft;
	c.major = PROFILE_FORMAT_MAJOR + 1;
	write_crafted(path, &c);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EPROTONOSUPPORT);
	snprintf(expect, sizeof(expect),
		 "%s: profile format version %d.7 is not supported (this hostprof reads version %d.x)", path,
		 PROFILE_FORMAT_MAJOR + 1, PROFILE_FORMAT_MAJOR);
	assert_string_equal(err, expect);

	/* A newer minor version is fine. */
	c.major = PROFILE_FORMAT_MAJOR;
	write_crafted(path, &c);
	profile_free(read_ok(path));
	tmpdir_remove(&d);
}

static void test_other_format_rejected(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128], err[256], expect[300];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	tmpdir_make(&d);
	tmpdir_file(&d, "o.msgpack", path, sizeof(path));
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_map(&pk, 1);
	pack_s(&pk, "format");
	pack_s(&pk, "otelp-msgpack");
	write_bytes(path, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	assert_int_equal(read_fails(path, err, sizeof(err)), -EINVAL);
	snprintf(expect, sizeof(expect), "%s: not a hostprof profile", path);
	assert_string_equal(err, expect);
	tmpdir_remove(&d);
}

/* --- atomic writes ------------------------------------------------------------------------------------------ */

static void test_write_nonexistent_dir(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128];
	tmpdir_make(&d);
	tmpdir_file(&d, "missing/p.msgpack", path, sizeof(path));
	struct profile *p = build_profile();
	assert_int_equal(profile_write_file(p, path), -ENOENT);
	assert_int_equal(count_temp_files(d.path), 0);
	profile_free(p);
	tmpdir_remove(&d);
}

static void test_write_readonly_dir(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128];
	test_require_non_root("root ignores directory permissions");
	tmpdir_make(&d);
	tmpdir_file(&d, "p.msgpack", path, sizeof(path));
	assert_int_equal(chmod(d.path, 0555), 0);
	struct profile *p = build_profile();
	assert_int_equal(profile_write_file(p, path), -EACCES);
	assert_int_equal(count_temp_files(d.path), 0);
	assert_int_equal(chmod(d.path, 0755), 0);
	profile_free(p);
	tmpdir_remove(&d);
}

/* A write that fails half way (file size limit, like ENOSPC) leaves the old file and no temporary. */
static void test_write_fails_midway(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128];
	struct rlimit old, small;
	size_t before, after;
	tmpdir_make(&d);
	tmpdir_file(&d, "p.msgpack", path, sizeof(path));
	struct profile *p = build_profile(), *empty;
	assert_int_equal(profile_new(&empty), 0);
	assert_int_equal(profile_write_file(empty, path), 0);
	free(read_bytes(path, &before));

	/* A big profile, so that stdio flushes while packing and at the end. */
	for (uint32_t i = 0; i < 20000; i++) {
		char name[32];
		snprintf(name, sizeof(name), "function_number_%u", i);
		tp_function(p, name, "file.c");
	}
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = old;
	small.rlim_cur = 4096;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	int rc = profile_write_file(p, path);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(rc, -EFBIG);
	assert_int_equal(count_temp_files(d.path), 0);
	free(read_bytes(path, &after));
	assert_int_equal(before, after);
	profile_free(read_ok(path));
	profile_free(p);
	profile_free(empty);
	tmpdir_remove(&d);
}

static void test_write_over_directory(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128];
	tmpdir_make(&d);
	tmpdir_file(&d, "adir", path, sizeof(path));
	assert_int_equal(mkdir(path, 0755), 0);
	struct profile *p = build_profile();
	int rc = profile_write_file(p, path);
	assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
	assert_int_equal(count_temp_files(d.path), 0);
	profile_free(p);
	tmpdir_remove(&d);
}

static void test_write_replaces_with_umask_mode(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128];
	struct stat st;
	tmpdir_make(&d);
	tmpdir_file(&d, "p.msgpack", path, sizeof(path));
	write_bytes(path, "old", 3);
	mode_t old = umask(022);
	struct profile *p = build_profile();
	assert_int_equal(profile_write_file(p, path), 0);
	umask(old);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	struct profile *q = read_ok(path);
	assert_profiles_equal(p, q);
	profile_free(p);
	profile_free(q);
	tmpdir_remove(&d);
}

/* A /proc/self/status field, KiB. */
static long status_kib(const char *field)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)))
			v = strtol(line + strlen(field), NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* How much reading path (whose result must be expect) grows a fresh child's peak RSS, KiB: its peak, reset at
 * its start, less what it had from the parent then. */
static long read_growth_kib(const char *path, int expect)
{
	int fds[2], status;
	long growth = -1;
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct profile *p = NULL;
		char err[256];
		FILE *clear = fopen("/proc/self/clear_refs", "w");	/* "5": the peak starts again from now */
		if (!clear || fputs("5", clear) < 0 || fclose(clear) != 0)
			_exit(2);
		long base = status_kib("VmRSS:");
		int rc = profile_read_file(path, &p, err, sizeof(err));
		profile_free(p);
		long g = status_kib("VmHWM:") - base;
		_exit(write(fds[1], &g, sizeof(g)) == sizeof(g) && rc == expect ? 0 : 1);
	}
	assert_true(pid > 0);
	close(fds[1]);
	assert_int_equal(read(fds[0], &growth, sizeof(growth)), sizeof(growth));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return growth;
}

/*
 * 4 MB of empty arrays — as the whole file, in a key the reader does not know, as a dictionary table — is
 * refused (or read as an empty profile) in memory proportional to what a profile uses of it: the file's bytes,
 * not msgpack-c's 24 bytes per declared element (over 100 MB before). Measured as the growth of a fresh child's
 * peak RSS, so that what the test process (and a sanitizer) held before does not count.
 */
static void test_empty_arrays_bounded(void **state)
{
	(void)state;
	static const uint8_t header[] = "\x82\xa6" "format\xa8" "hostprof\xa7" "version\x01";
	const uint32_t n = 4u << 20;
	const struct { uint8_t prefix[64]; size_t len; int expect; } shapes[] = {
		{ "", 0, -EINVAL },			/* [[], [], ...] */
		{ "\x83\x00", 2, 0 },			/* {0: header, 1: [], 2: {0: [[], ...]}}: an unknown table */
		{ "\x83\x00", 2, -EBADMSG },		/* ... 2: {7: [[], ...]}: the stacks */
	};
	struct tmpdir d;
	char path[128];
	uint8_t *buf = malloc(n + 128);
	assert_non_null(buf);
	tmpdir_make(&d);
	tmpdir_file(&d, "empty-arrays.msgpack", path, sizeof(path));
	for (int k = 0; k < 3; k++) {
		size_t len = 0;
		if (k > 0) {
			memcpy(buf, shapes[k].prefix, shapes[k].len);
			len = shapes[k].len;
			memcpy(buf + len, header, sizeof(header) - 1);
			len += sizeof(header) - 1;
			memcpy(buf + len, k == 1 ? "\x01\x90\x02\x81\x00" : "\x01\x90\x02\x81\x07", 5);
			len += 5;
		}
		buf[len++] = 0xdd;
		for (int i = 3; i >= 0; i--)
			buf[len++] = (uint8_t)(n >> (8 * i));
		memset(buf + len, 0x90, n);
		write_bytes(path, buf, len + n);
		long kib = read_growth_kib(path, shapes[k].expect);
		fprintf(stderr, "%zu bytes of empty arrays, shape %d: peak RSS grew %ld KiB\n", len + n, k, kib);
		if (kib >= 48 * 1024)
			free(buf);
		assert_true(kib < 48 * 1024);	/* the file's 4 MB and the reader's own: 100 MB and more before */
	}
	free(buf);
	tmpdir_remove(&d);
}

/* --- bounds: stack depth, counts, what a path names ------------------------------------------------------- */

/* A profile with one stack of n distinct frames, one sample of it. */
static struct profile *deep_profile(uint32_t n)
{
	struct profile *p;
	uint32_t *locs = malloc(n * sizeof(*locs));
	assert_non_null(locs);
	assert_int_equal(profile_new(&p), 0);
	uint32_t m = tp_mapping(p, "/bin/app");
	for (uint32_t i = 0; i < n; i++)
		locs[i] = tp_location(p, m, 0x1000 + i, PROFILE_FRAME_NATIVE, NULL, 0);
	tp_sample(p, (struct profile_sample){ .stack = tp_stack(p, 1, locs, n), .pid = 1, .tid = 1, .count = 1 },
		  "app", "");
	free(locs);
	return p;
}

/* No stack longer than record writes (kernel frames, --max-frames at its most, an error frame) is read. */
static void test_deep_stack_refused(void **state)
{
	(void)state;
	struct tmpdir d;
	char path[128], err[256];
	struct profile *p = deep_profile(70000), *back = NULL;
	tmpdir_make(&d);
	tmpdir_file(&d, "deep.msgpack", path, sizeof(path));
	assert_int_equal(profile_write_file(p, path), 0);
	profile_free(p);
	assert_int_equal(profile_read_file(path, &back, err, sizeof(err)), -EBADMSG);
	assert_null(back);
	assert_non_null(strstr(err, "deep.msgpack: corrupt: stack 1 has 70000 frames, more than hostprof records "
				    "(65792)"));
	p = deep_profile(PROFILE_MAX_STACK_LOCATIONS);	/* the longest record writes: read */
	assert_int_equal(profile_write_file(p, path), 0);
	profile_free(p);
	assert_int_equal(profile_read_file(path, &back, err, sizeof(err)), 0);
	assert_int_equal(back->stacks.items[1].nlocations, PROFILE_MAX_STACK_LOCATIONS);
	profile_free(back);
	tmpdir_remove(&d);
}

/* A profile with one stack and, per count given, one sample of it on a thread of its own. */
static struct profile *counted_profile(const uint64_t *counts, int n, bool checked)
{
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	p->info.period_ns = 1;
	uint32_t st = tp_stack(p, 1, NULL, 0), comm = tp_string(p, "app");
	for (int i = 0; i < n; i++) {
		struct profile_sample s = { .stack = st, .pid = 1, .tid = i + 1, .comm = comm, .count = counts[i] };
		if (checked)
			assert_int_equal(profile_add_sample(p, &s), 0);
		else
			tp_sample_unchecked(p, s);
	}
	return p;
}

/* The samples never add up past PROFILE_VALUE_MAX (int64, as pprof carries values): adding or merging what
 * would is refused and changes nothing; the header's counters stop at UINT64_MAX rather than wrap. */
static void test_counts_bounded(void **state)
{
	(void)state;
	const uint64_t half = (PROFILE_VALUE_MAX >> 1) + 1, top[] = { PROFILE_VALUE_MAX - 1 }, halves[] = { half };
	struct profile *p = counted_profile(top, 1, true), *q = counted_profile(halves, 1, true);
	struct profile_sample one = p->samples.items[0];
	one.count = 1;
	assert_int_equal(profile_add_sample(p, &one), 0);	/* exactly PROFILE_VALUE_MAX: still fits */
	assert_int_equal(profile_add_sample(p, &one), -EOVERFLOW);
	assert_int_equal(p->samples.items[0].count, PROFILE_VALUE_MAX);
	one.count = 0;
	one.cpu_ns = 1;		/* count x period + cpu_ns: past the bound too */
	assert_int_equal(profile_add_sample(p, &one), -EOVERFLOW);
	assert_int_equal(p->totals.count, PROFILE_VALUE_MAX);
	assert_int_equal(p->totals.cpu_ns, 0);
	assert_int_equal(profile_merge(q, p), -EOVERFLOW);
	assert_int_equal(q->samples.count, 1);
	assert_int_equal(q->samples.items[0].count, half);
	assert_int_equal(q->strings.count, 2);	/* nothing of p was taken in */
	profile_free(q);
	q = counted_profile(halves, 1, true);
	q->info.samples = UINT64_MAX - 1;
	struct profile *r;
	assert_int_equal(profile_new(&r), 0);
	r->info.samples = 5;
	assert_int_equal(profile_merge(q, r), 0);
	assert_int_equal(q->info.samples, UINT64_MAX);
	profile_free(p);
	profile_free(q);
	profile_free(r);
}

/* A file whose samples add up past the bound is corrupt: two samples of 2^62 in one map, or one of 2^62 in
 * each of two maps, or one of 2^63 alone. Percentages and pprof's int64 values would otherwise go wrong. */
static void test_reader_refuses_overflowing_counts(void **state)
{
	(void)state;
	const uint64_t halves[] = { 1ULL << 62, 1ULL << 62 }, whole[] = { 1ULL << 63 }, fits[] = { 1ULL << 62 };
	struct tmpdir d;
	char path[128], one[128], err[256];
	struct profile *back = NULL, *p;
	tmpdir_make(&d);
	tmpdir_file(&d, "big.msgpack", path, sizeof(path));
	tmpdir_file(&d, "one.msgpack", one, sizeof(one));
	const uint64_t *cases[] = { halves, whole };
	const int n[] = { 2, 1 };
	for (int k = 0; k < 2; k++) {
		p = counted_profile(cases[k], n[k], false);
		assert_int_equal(profile_write_file(p, path), 0);
		profile_free(p);
		assert_int_equal(profile_read_file(path, &back, err, sizeof(err)), -EBADMSG);
		assert_null(back);
		assert_non_null(strstr(err, "big.msgpack: corrupt: the samples add up past 9223372036854775807"));
	}
	p = counted_profile(fits, 1, true);
	assert_int_equal(profile_write_file(p, one), 0);
	profile_free(p);
	size_t len;
	uint8_t *bytes = read_bytes(one, &len), *twice = malloc(2 * len);
	memcpy(twice, bytes, len);
	memcpy(twice + len, bytes, len);
	write_bytes(path, twice, 2 * len);
	assert_int_equal(profile_read_file(path, &back, err, sizeof(err)), -EBADMSG);
	assert_int_equal(profile_read_file(one, &back, err, sizeof(err)), 0);
	assert_int_equal(back->samples.items[0].count, 1ULL << 62);
	profile_free(back);
	free(bytes);
	free(twice);
	tmpdir_remove(&d);
}

/* A FIFO, a device or a directory is no profile: refused at once (an alarm ends a read that would block), named
 * for what it is. A path's control characters are escaped in the message. */
static void test_non_regular_refused(void **state)
{
	(void)state;
	struct tmpdir d;
	char fifo[128], odd[160], err[512];
	struct profile *p = NULL;
	tmpdir_make(&d);
	tmpdir_file(&d, "x.msgpack", fifo, sizeof(fifo));
	assert_int_equal(mkfifo(fifo, 0600), 0);
	alarm(10);
	assert_int_equal(profile_read_file(fifo, &p, err, sizeof(err)), -EINVAL);
	alarm(0);
	assert_null(p);
	assert_non_null(strstr(err, "x.msgpack: not a regular file (a FIFO)"));
	assert_int_equal(profile_read_file("/dev/zero", &p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "/dev/zero: not a regular file (a character device)");
	assert_int_equal(profile_read_file(d.path, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ": not a regular file (a directory)"));
	snprintf(odd, sizeof(odd), "%s/a\033[2Jb\n.msgpack", d.path);
	assert_int_equal(profile_read_file(odd, &p, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/a\\x1b[2Jb\\n.msgpack: No such file or directory"));
	assert_null(strchr(err, '\033'));
	tmpdir_remove(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strings_interned_and_copied),
		cmocka_unit_test(test_tables_interned),
		cmocka_unit_test(test_references_checked),
		cmocka_unit_test(test_samples_merged),
		cmocka_unit_test(test_many_elements),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_round_trip_empty),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_timestamps),
		cmocka_unit_test(test_concatenated_maps_merge),
		cmocka_unit_test(test_truncated_file),
		cmocka_unit_test(test_corrupted_bytes),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_empty_arrays_bounded),
		cmocka_unit_test(test_crafted_good_and_unknown_keys),
		cmocka_unit_test(test_crafted_bad_indices),
		cmocka_unit_test(test_unknown_major_rejected),
		cmocka_unit_test(test_other_format_rejected),
		cmocka_unit_test(test_write_nonexistent_dir),
		cmocka_unit_test(test_write_readonly_dir),
		cmocka_unit_test(test_write_fails_midway),
		cmocka_unit_test(test_write_over_directory),
		cmocka_unit_test(test_write_replaces_with_umask_mode),
		cmocka_unit_test(test_deep_stack_refused),
		cmocka_unit_test(test_counts_bounded),
		cmocka_unit_test(test_reader_refuses_overflowing_counts),
		cmocka_unit_test(test_non_regular_refused),
	};
	return cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}
