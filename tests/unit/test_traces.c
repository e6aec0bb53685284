/* Unit tests for src/pipeline/traces.c: known-trace cache, counts per (pid, tid, trace), stack-trace IDs, profile build, JIT
 * frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/pipeline/traces.h"

struct tr_state {
	struct execinfo_mgr *em;
	struct execinfo *self;
	struct traces *t;
};

static int setup(void **state)
{
	struct tr_state *s = calloc(1, sizeof(*s));
	struct trace_kernel k = { .text_start = 0xffffffff81000000ULL };
	fileid_from_build_id_hex("f8e1cf0f60558098edaec164ac7749df", &k.file_id);
	assert_int_equal(execinfo_mgr_new(&s->em), 0);
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_int_equal(execinfo_acquire_fd(s->em, fd, "/proc/self/exe", &s->self), 0);
	assert_int_equal(traces_new(s->em, &k, &s->t), 0);
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct tr_state *s = *state;
	traces_free(s->t);
	execinfo_release(s->em, s->self);
	assert_int_equal(execinfo_mgr_count(s->em), 0);
	execinfo_mgr_free(s->em);
	free(s);
	return 0;
}

static void test_counts_and_dedup(void **state)
{
	struct tr_state *s = *state;
	struct trace_frame f[3] = {
		{ .exe = s->self, .address = 0x1234, .kind = PROFILE_FRAME_NATIVE },
		{ .exe = s->self, .address = 0x2000, .kind = PROFILE_FRAME_NATIVE },
		{ .exe = NULL, .address = TRACE_ERROR_TRUNCATED, .kind = PROFILE_FRAME_ERROR },
	};
	assert_int_equal(traces_add(s->t, 10, 11, "prog", "t1", f, 3, 1000), 0);
	assert_int_equal(traces_add(s->t, 10, 11, "prog", "t1", f, 3, 1000), 0);
	assert_int_equal(traces_add(s->t, 10, 12, "prog", "t2", f, 3, 1000), 0);
	assert_int_equal(traces_add(s->t, 10, 12, "prog", "t2", f, 2, 1000), 0);
	assert_int_equal(traces_count(s->t), 2);
	assert_int_equal(traces_keys(s->t), 3);

	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(traces_name_jit(s->t), 0);
	assert_int_equal(traces_build_profile(s->t, p, NULL, NULL), 0);
	uint64_t total = 0, ns = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		total += p->samples.items[i].count;
		ns += p->samples.items[i].cpu_ns;
	}
	assert_int_equal(total, 4);
	assert_int_equal(ns, 4000);
	/* Each stack carries the ID the trace handler computed for its frames. */
	struct trace_id id3, id2;
	traces_hash(s->t, f, 3, &id3);
	traces_hash(s->t, f, 2, &id2);
	int found3 = 0, found2 = 0;
	for (uint32_t i = 1; i < p->stacks.count; i++) {
		const struct profile_stack *st = &p->stacks.items[i];
		found3 |= st->nlocations == 3 && memcmp(st->trace_id, id3.bytes, 16) == 0;
		found2 |= st->nlocations == 2 && memcmp(st->trace_id, id2.bytes, 16) == 0;
		if (st->nlocations == 3) {
			const struct profile_location *err = &p->locations.items[st->locations[2]];
			assert_true(err->frame_kind & PROFILE_FRAME_ERROR);
			assert_string_equal(profile_string(p, p->functions.items[err->lines[0].function].name),
					    "[truncated]");
			const struct profile_location *leaf = &p->locations.items[st->locations[0]];
			assert_int_equal(leaf->address, 0x1234);
			const struct profile_mapping *m = &p->mappings.items[leaf->mapping];
			assert_memory_equal(m->file_id, execinfo_file_id(s->self)->bytes, 16);
		}
	}
	assert_true(found3 && found2);
	profile_free(p);
}

/* Each count keeps its samples' times, in order, up to the table's limit; past it the samples count without
 * them, and the profile says how many. A reset starts over. */
static void test_sample_times(void **state)
{
	struct tr_state *s = *state;
	struct trace_frame f[2] = {
		{ .exe = s->self, .address = 0x1234, .kind = PROFILE_FRAME_NATIVE },
		{ .exe = s->self, .address = 0x2000, .kind = PROFILE_FRAME_NATIVE },
	};
	const uint64_t t0 = 1700000000000000000ULL;
	traces_set_timestamp_limit(s->t, 10);
	for (uint64_t i = 0; i < 8; i++)	/* one thread, two stacks, alternating */
		assert_int_equal(traces_add_linked(s->t, NULL, 10, 11, "p", "t", f, 1 + i % 2, 1000, t0 + i, NULL), 0);
	for (uint64_t i = 0; i < 5; i++)	/* another thread: its last three past the limit */
		assert_int_equal(traces_add_linked(s->t, NULL, 10, 12, "p", "t", f, 2, 1000, t0 + 100 + i, NULL), 0);
	assert_int_equal(traces_add_linked(s->t, NULL, 10, 11, "p", "t", f, 1, 1000, 0, NULL), 0);	/* no time */
	assert_int_equal(traces_add_off_cpu(s->t, NULL, 10, 13, "p", "t", f, 1, 5000, 0, NULL), 0);

	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(traces_name_jit(s->t), 0);
	assert_int_equal(traces_build_profile(s->t, p, NULL, NULL), 0);
	uint64_t counted = 0, timed = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *x = &p->samples.items[i];
		counted += x->count;
		timed += x->ntimestamps;
		assert_true(x->ntimestamps <= x->count);
		for (uint32_t k = 1; k < x->ntimestamps; k++)
			assert_true(x->timestamps[k] > x->timestamps[k - 1]);	/* in the order taken */
		if (x->tid == 11 && p->stacks.items[x->stack].nlocations == 1) {
			assert_int_equal(x->count, 5);
			assert_int_equal(x->ntimestamps, 4);
			assert_int_equal(x->timestamps[0], t0);
			assert_int_equal(x->timestamps[3], t0 + 6);
		}
		if (x->tid == 12) {
			assert_int_equal(x->count, 5);
			assert_int_equal(x->ntimestamps, 2);
			assert_int_equal(x->timestamps[1], t0 + 101);
		}
		if (x->tid == 13)
			assert_int_equal(x->ntimestamps, 0);
	}
	assert_int_equal(counted, 14);
	assert_int_equal(timed, 10);
	assert_int_equal(p->info.timestamps_dropped, 4);
	profile_free(p);

	traces_reset(s->t);
	assert_int_equal(traces_add_linked(s->t, NULL, 10, 11, "p", "t", f, 1, 1000, t0, NULL), 0);
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(traces_name_jit(s->t), 0);
	assert_int_equal(traces_build_profile(s->t, p, NULL, NULL), 0);
	assert_int_equal(p->samples.items[0].ntimestamps, 1);
	assert_int_equal(p->info.timestamps_dropped, 0);
	profile_free(p);
}

/* What was noted of each process reaches the profile: the first note per process, until a reset. */
static void test_process_notes(void **state)
{
	struct tr_state *s = *state;
	static const char id[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct trace_frame f = { .exe = s->self, .address = 0x1234, .kind = PROFILE_FRAME_NATIVE };
	char *long_path = malloc(TRACE_PROCESS_STRING_MAX + 1);
	assert_non_null(long_path);
	memset(long_path, 'a', TRACE_PROCESS_STRING_MAX);
	long_path[0] = '/';
	long_path[TRACE_PROCESS_STRING_MAX] = '\0';
	assert_int_equal(traces_add(s->t, 10, 10, "prog", "prog", &f, 1, 1000), 0);
	assert_int_equal(traces_add(s->t, 20, 20, "other", "other", &f, 1, 1000), 0);
	assert_int_equal(traces_add(s->t, 30, 30, "long", "long", &f, 1, 1000), 0);
	assert_false(traces_knows_process(s->t, 10));
	assert_int_equal(traces_note_process(s->t, 10, "/usr/bin/prog", id), 0);
	assert_int_equal(traces_note_process(s->t, 10, "/usr/bin/later", NULL), 0);	/* the first note stays */
	assert_int_equal(traces_note_process(s->t, 20, "", NULL), 0);	/* nothing known */
	assert_int_equal(traces_note_process(s->t, 30, long_path, NULL), 0);	/* too long: not known, not cut */
	assert_true(traces_knows_process(s->t, 10) && traces_knows_process(s->t, 20));

	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(traces_name_jit(s->t), 0);
	assert_int_equal(traces_build_profile(s->t, p, NULL, NULL), 0);
	assert_int_equal(p->processes.count, 1);
	const struct profile_process *pr = profile_find_process(p, 10);
	assert_non_null(pr);
	assert_string_equal(profile_string(p, pr->exe_path), "/usr/bin/prog");
	assert_string_equal(profile_string(p, pr->container_id), id);
	assert_null(profile_find_process(p, 20));
	assert_null(profile_find_process(p, 30));
	profile_free(p);

	traces_reset(s->t);
	assert_false(traces_knows_process(s->t, 10));
	free(long_path);
}

/*
 * A known trace's ID is found again from its frames (the file object, address and kind) without hashing them:
 * those IDs must be the ones a handler that has never seen the traces computes, for native, kernel and error
 * frames, before and after a reset; and stacks that differ in one frame keep different IDs.
 */
static void test_known_trace_ids_match(void **state)
{
	struct tr_state *s = *state;
	struct traces *fresh;
	struct trace_kernel k = { .text_start = 0xffffffff81000000ULL };
	fileid_from_build_id_hex("f8e1cf0f60558098edaec164ac7749df", &k.file_id);
	assert_int_equal(traces_new(s->em, &k, &fresh), 0);
	struct trace_frame f[3] = {
		{ .exe = NULL, .kind = PROFILE_FRAME_KERNEL },
		{ .exe = s->self, .kind = PROFILE_FRAME_NATIVE },
		{ .exe = NULL, .address = TRACE_ERROR_TRUNCATED, .kind = PROFILE_FRAME_ERROR },
	};
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < 500; i++) {
			f[0].address = 0xffffffff81001000ULL + (i % 7);
			f[1].address = 0x4000 + i;
			assert_int_equal(traces_add(s->t, 1, 1, "p", "t", f, 1 + i % 3, 1), 0);
		}
		for (unsigned i = 0; i < 500; i++) {
			struct trace_id known, computed;
			f[0].address = 0xffffffff81001000ULL + (i % 7);
			f[1].address = 0x4000 + i;
			traces_hash(s->t, f, 1 + i % 3, &known);
			traces_hash(fresh, f, 1 + i % 3, &computed);
			assert_memory_equal(known.bytes, computed.bytes, 16);
			f[1].address++;
			traces_hash(s->t, f, 1 + i % 3, &computed);
			if (i % 3)
				assert_memory_not_equal(known.bytes, computed.bytes, 16);
		}
		traces_reset(s->t);
	}
	traces_free(fresh);
}

/*
 * Past the sizes fixed bucket arrays had (8192 traces and keys): 20000 distinct traces counted for 3000 threads
 * twice over, each count kept apart and right; after a reset the handler counts again from nothing, in a
 * daemon's next interval, also with APM links that differ only by transaction.
 */
static void test_many_traces_and_reset(void **state)
{
	struct tr_state *s = *state;
	struct trace_frame f[2] = {
		{ .exe = s->self, .kind = PROFILE_FRAME_NATIVE },
		{ .exe = s->self, .address = 0x2000, .kind = PROFILE_FRAME_NATIVE },
	};
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < 20000; i++) {
			f[0].address = 0x10000 + i;
			pid_t pid = 100 + (pid_t)(i % 3000);
			assert_int_equal(traces_add(s->t, pid, pid + 1, "prog", "t", f, 2, 10), 0);
		}
	}
	assert_int_equal(traces_count(s->t), 20000);
	assert_int_equal(traces_keys(s->t), 20000);
	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(traces_name_jit(s->t), 0);
	assert_int_equal(traces_build_profile(s->t, p, NULL, NULL), 0);
	assert_int_equal(p->samples.count, 20000);
	for (uint32_t i = 0; i < p->samples.count; i++)
		assert_int_equal(p->samples.items[i].count, 2);
	profile_free(p);

	traces_reset(s->t);
	assert_int_equal(traces_count(s->t), 0);
	assert_int_equal(traces_keys(s->t), 0);
	struct trace_link a = { .trace_id = { 1 }, .transaction_id = { 7 } }, b = a;
	b.transaction_id[7] = 9;
	assert_int_equal(traces_add_linked(s->t, NULL, 5, 6, "prog", "t", f, 2, 10, 0, &a), 0);
	assert_int_equal(traces_add_linked(s->t, NULL, 5, 6, "prog", "t", f, 2, 10, 0, &b), 0);
	assert_int_equal(traces_add_linked(s->t, NULL, 5, 6, "prog", "t", f, 2, 10, 0, &a), 0);
	assert_int_equal(traces_add(s->t, 5, 6, "prog", "t", f, 2, 10), 0);
	assert_int_equal(traces_count(s->t), 1);
	assert_int_equal(traces_keys(s->t), 3);
}

static void test_trace_id_rules(void **state)
{
	struct tr_state *s = *state;
	/* A kernel frame hashes as the kernel FileID and its address - 1 - _text. */
	struct trace_frame k = { .address = 0xffffffff81000000ULL + 0x101, .kind = PROFILE_FRAME_KERNEL };
	struct trace_id got, want;
	traces_hash(s->t, &k, 1, &got);
	struct trace_hasher h;
	struct file_id kid;
	fileid_from_build_id_hex("f8e1cf0f60558098edaec164ac7749df", &kid);
	trace_hash_init(&h);
	trace_hash_frame(&h, &kid, 0x100);
	trace_hash_finish(&h, &want);
	assert_memory_equal(got.bytes, want.bytes, 16);

	/* Order matters and the frame kind does not. */
	struct trace_frame a[2] = { { .exe = s->self, .address = 1, .kind = PROFILE_FRAME_NATIVE },
				    { .exe = s->self, .address = 2, .kind = PROFILE_FRAME_NATIVE } };
	struct trace_frame b[2] = { a[1], a[0] };
	struct trace_id ia, ib;
	traces_hash(s->t, a, 2, &ia);
	traces_hash(s->t, b, 2, &ib);
	assert_memory_not_equal(ia.bytes, ib.bytes, 16);
	a[0].kind = PROFILE_FRAME_GO;
	traces_hash(s->t, a, 2, &ib);
	assert_memory_equal(ia.bytes, ib.bytes, 16);
}

static const struct profile_location *only_location(const struct profile *p, uint32_t stack)
{
	assert_int_equal(p->stacks.items[stack].nlocations, 1);
	return &p->locations.items[p->stacks.items[stack].locations[0]];
}

/* This process's own perf map at map (naming JS:*early at 0x7f0000001000), its JIT entry from a new manager *m. */
static struct jitinfo *own_perf_map(char map[64], struct jitinfo_mgr **m)
{
	snprintf(map, 64, "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(map, "w");
	assert_non_null(f);
	fputs("7f0000001000 100 JS:*early\n", f);
	fclose(f);
	assert_int_equal(jitinfo_mgr_new(NULL, m), 0);
	struct process self = { .pid = getpid() };
	return jitinfo_get(*m, &self, 1);
}

/* A line added to the perf map at map. */
static void map_gains(const char *map, const char *line)
{
	FILE *f = fopen(map, "a");
	assert_non_null(f);
	fputs(line, f);
	fclose(f);
}

/*
 * JIT frames (this process's own perf map): named when the profile is built, even by lines the map gained after
 * the sample; their identity is the name's FileID and the offset in the named code, whichever process and address
 * they ran at, and the stack's ID is computed again from it. Unnamed JIT code keeps its runtime address.
 */
static void test_jit_frames(void **state)
{
	struct tr_state *s = *state;
	char map[64];
	struct jitinfo_mgr *m;
	struct jitinfo *j = own_perf_map(map, &m);
	struct trace_frame early = { .jit = j, .address = 0x7f0000001010, .kind = PROFILE_FRAME_JIT };
	struct trace_frame late = { .jit = j, .address = 0x7f0000005020, .kind = PROFILE_FRAME_JIT };
	struct trace_frame unnamed = { .jit = j, .address = 0x7f0000009000, .kind = PROFILE_FRAME_JIT };
	struct trace_id late_then, late_now;
	traces_hash(s->t, &late, 1, &late_then);
	assert_int_equal(traces_add(s->t, 1, 1, "node", "node", &early, 1, 1), 0);
	assert_int_equal(traces_add(s->t, 1, 1, "node", "node", &late, 1, 1), 0);
	assert_int_equal(traces_add(s->t, 1, 1, "node", "node", &unnamed, 1, 1), 0);
	jitinfo_mgr_detach(m, getpid());	/* the process is gone: its frames keep the entry */
	map_gains(map, "7f0000005000 100 JS:*late\n");
	jitinfo_mgr_refresh(m);
	traces_hash(s->t, &late, 1, &late_now);
	assert_memory_not_equal(late_then.bytes, late_now.bytes, 16);

	struct profile *p;
	assert_int_equal(profile_new(&p), 0);
	assert_int_equal(traces_name_jit(s->t), 0);
	assert_int_equal(traces_build_profile(s->t, p, NULL, NULL), 0);
	struct trace_hasher h;
	struct trace_id want;
	struct file_id fid;
	fileid_from_text("jit:JS:*late", 12, &fid);
	trace_hash_init(&h);
	trace_hash_frame(&h, &fid, 0x20);
	trace_hash_finish(&h, &want);
	int named = 0, anon = 0;
	for (uint32_t i = 1; i < p->stacks.count; i++) {
		const struct profile_location *l = only_location(p, i);
		const struct profile_mapping *pm = &p->mappings.items[l->mapping];
		assert_int_equal(l->frame_kind, PROFILE_FRAME_JIT);
		if (!l->nlines) {
			anon++;
			assert_int_equal(l->address, 0x7f0000009000);
			assert_string_equal(profile_string(p, pm->filename), "[jit]");
			continue;
		}
		const char *name = profile_string(p, p->functions.items[l->lines[0].function].name);
		assert_string_equal(profile_string(p, pm->filename), map);
		assert_int_equal(l->address, strcmp(name, "JS:*late") == 0 ? 0x20 : 0x10);
		if (strcmp(name, "JS:*late") == 0) {
			named++;
			assert_memory_equal(pm->file_id, fid.bytes, 16);
			assert_memory_equal(p->stacks.items[i].trace_id, want.bytes, 16);
		}
	}
	assert_int_equal(named, 1);
	assert_int_equal(anon, 1);
	profile_free(p);
	traces_reset(s->t);	/* the last references: the entry goes */
	unlink(map);
	jitinfo_mgr_free(m);
}

/*
 * A stack with JIT frames is found again by its frames (no hash) only while its entry's names are as they were:
 * in each generation of the perf map, its ID is the one a table that never saw it computes from nothing.
 */
static void test_jit_ids_across_commits(void **state)
{
	struct tr_state *s = *state;
	char map[64];
	struct jitinfo_mgr *m;
	struct jitinfo *j = own_perf_map(map, &m);
	struct trace_frame stacks[3][2] = {
		{ { .jit = j, .address = 0x7f0000001010, .kind = PROFILE_FRAME_JIT },
		  { .exe = s->self, .address = 0x4000, .kind = PROFILE_FRAME_NATIVE } },
		{ { .jit = j, .address = 0x7f0000005020, .kind = PROFILE_FRAME_JIT },
		  { .exe = s->self, .address = 0x4000, .kind = PROFILE_FRAME_NATIVE } },
		{ { .jit = j, .address = 0x7f0000009000, .kind = PROFILE_FRAME_JIT },
		  { .exe = s->self, .address = 0x4000, .kind = PROFILE_FRAME_NATIVE } },
	};
	struct trace_id ids[2][3];
	for (int round = 0; round < 2; round++) {
		for (int rep = 0; rep < 3; rep++)
			for (int i = 0; i < 3; i++)
				assert_int_equal(traces_add(s->t, 1, 1, "node", "node", stacks[i], 2, 1), 0);
		struct traces *fresh;
		struct trace_kernel k = { .text_start = 0xffffffff81000000ULL };
		assert_int_equal(traces_new(s->em, &k, &fresh), 0);
		for (int i = 0; i < 3; i++) {
			struct trace_id computed;
			traces_hash(s->t, stacks[i], 2, &ids[round][i]);
			traces_hash(fresh, stacks[i], 2, &computed);
			assert_memory_equal(ids[round][i].bytes, computed.bytes, 16);
		}
		traces_free(fresh);
		map_gains(map, "7f0000005000 100 JS:*late\n");
		jitinfo_mgr_refresh(m);
	}
	assert_memory_equal(ids[0][0].bytes, ids[1][0].bytes, 16);	/* its name did not change */
	assert_memory_not_equal(ids[0][1].bytes, ids[1][1].bytes, 16);	/* named in between */
	assert_int_equal(traces_count(s->t), 4);
	jitinfo_mgr_detach(m, getpid());
	traces_reset(s->t);
	unlink(map);
	jitinfo_mgr_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_counts_and_dedup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_traces_and_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_known_trace_ids_match, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_id_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jit_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jit_ids_across_commits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_process_notes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample_times, setup, teardown),
	};
	return cmocka_run_group_tests_name("traces", tests, NULL, NULL);
}
