/*
 * Unit tests of src/pipeline/walk.c without a kernel event: each sample is taken by the test itself, in the test's own
 * thread (its registers and a copy of its stack, as perf would copy them), so that every walk is deterministic and
 * independent of the machine's load. The walks must name the functions the test called, in order, down to main:
 * - through the stack-delta tables, each frame named by the module the unwinder found it in, and the same frames
 *   through the reference unwinder (libunwind, which names none: the walker looks each one up);
 * - a walk that meets a table still being built stops when the sample may be held, and is whole once it is built;
 * - over the memory budget (no table to be built), a walk stops at the first file without its table;
 * - the kernel's part of a call chain comes first, as kernel frames;
 * - JIT code its runtime's perf map names (a trampoline the test writes) is walked through by frame pointer;
 * - a walk is added to a replay capture, which reads back with the same registers and stack.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/processes/procmem.h"
#include "src/pipeline/walk.h"
#include "symbols/symbolizer.h"

#define STACK_COPY 8192

/* A sample of this thread, as perf would take it: registers and the stack from SP. */
struct taken {
	struct perf_sample ps;
	uint8_t stack[STACK_COPY];
	uint64_t chain[8];
};

/* The registers where the capture is, and the stack from its SP up (the copy is made below that SP). */
__attribute__((noinline)) static void capture(struct taken *t)
{
	uint64_t ip, sp, bp, bx, r12, r13, r14, r15;
	__asm__ volatile("lea 0(%%rip), %0\n\t"
			 "mov %%rsp, %1\n\t"
			 "mov %%rbp, %2\n\t"
			 "mov %%rbx, %3\n\t"
			 "mov %%r12, %4\n\t"
			 "mov %%r13, %5\n\t"
			 "mov %%r14, %6\n\t"
			 "mov %%r15, %7\n\t"
			 : "=r"(ip), "=r"(sp), "=r"(bp), "=r"(bx), "=r"(r12), "=r"(r13), "=r"(r14), "=r"(r15));
	memset(&t->ps, 0, sizeof(t->ps));
	t->ps.ip = t->ps.regs[UNWIND_REG_IP] = ip;
	t->ps.regs[UNWIND_REG_SP] = sp;
	t->ps.regs[UNWIND_REG_BP] = bp;
	t->ps.regs[UNWIND_REG_BX] = bx;
	t->ps.regs[UNWIND_REG_R12] = r12;
	t->ps.regs[UNWIND_REG_R13] = r13;
	t->ps.regs[UNWIND_REG_R14] = r14;
	t->ps.regs[UNWIND_REG_R15] = r15;
	t->ps.regs_abi = PERF_SAMPLE_REGS_ABI_64;
	t->ps.pid = t->ps.tid = (uint32_t)getpid();
	t->ps.misc = PERF_RECORD_MISC_USER;
	/* As the kernel copies it: up to where the stack's mapping ends (process_vm_readv stops there too). */
	ssize_t n = procmem_read(getpid(), sp, t->stack, STACK_COPY);
	t->ps.stack = t->stack;
	t->ps.stack_size = n > 0 ? (uint64_t)n : 0;
}

/* The chain of calls each sample is taken in: take_outer -> take_middle -> take_inner -> capture. */
__attribute__((noinline)) static void take_inner(struct taken *t)
{
	capture(t);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void take_middle(struct taken *t)
{
	take_inner(t);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void take_outer(struct taken *t)
{
	take_middle(t);
	__asm__ volatile("" ::: "memory");
}

/* JIT code as a runtime writes it: a trampoline that keeps a frame pointer and calls fn(t), named in the perf map
 * of this process. */
static const uint8_t trampoline_code[] = {
	0x55,			/* push %rbp */
	0x48, 0x89, 0xe5,	/* mov %rsp, %rbp */
	0xff, 0xd6,		/* call *%rsi */
	0x5d,			/* pop %rbp */
	0xc3,			/* ret */
};

typedef void (*trampoline_fn)(struct taken *t, void (*fn)(struct taken *));

__attribute__((noinline)) static void take_through_jit(trampoline_fn jit, struct taken *t)
{
	jit(t, take_inner);
	__asm__ volatile("" ::: "memory");
}

struct fixture {
	struct execinfo_mgr *em;
	struct procmgr *pm;
	struct jitinfo_mgr *jit;
	struct walk *w;
	struct walk_counts counts;
	unsigned live_reads;
};

static void count_live_read(void *ctx, struct process *p, unsigned kind, int rc, bool fast, bool replaying)
{
	(void)p, (void)kind, (void)rc, (void)fast, (void)replaying;
	((struct fixture *)ctx)->live_reads++;
}

static struct fixture *make_with(bool reference, bool worker, struct replay_writer *capture)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(execinfo_mgr_new(&f->em), 0);
	assert_int_equal(procmgr_new(f->em, &f->pm), 0);
	assert_int_equal(jitinfo_mgr_new(NULL, &f->jit), 0);
	if (worker)
		assert_int_equal(execinfo_mgr_start_worker(f->em, -1), 0);
	struct walk_options o = { .reference = reference, .max_stack_bytes = STACK_COPY,
				  .stack_copy_bytes = STACK_COPY };
	struct walk_deps d = { .procs = f->pm, .execinfo = f->em, .jit = f->jit, .capture = capture,
			       .live_read = count_live_read, .ctx = f };
	assert_int_equal(walk_new(&o, &d, &f->w), 0);
	return f;
}

static struct fixture *make(bool reference, bool worker)
{
	return make_with(reference, worker, NULL);
}

static void destroy(struct fixture *f)
{
	execinfo_mgr_stop(f->em);
	jitinfo_mgr_free(f->jit);
	procmgr_free(f->pm);
	execinfo_mgr_free(f->em);
	walk_free(f->w);
	free(f);
}

static void walk(struct fixture *f, const struct taken *t, bool may_hold, struct walk_out *out)
{
	struct walk_in in = { .proc = procmgr_get(f->pm, getpid()), .ps = &t->ps, .may_hold = may_hold,
			      .counts = &f->counts };
	assert_non_null(in.proc);
	walk_sample(f->w, &in, out);
}

/* The function name of frame i (its symbolizer's first answer), or "" for none. */
static const char *frame_name(const struct trace_frame *fr, char *buf, size_t len)
{
	struct symbol_frame sf[8];
	struct symbolizer *s = fr->exe ? execinfo_symbolizer(fr->exe) : NULL;
	int n = s ? symbolizer_lookup(s, fr->address, sf, 8) : 0;
	snprintf(buf, len, "%s", n > 0 && sf[n - 1].function ? sf[n - 1].function : "");
	return buf;
}

/* Whether the walk's frames begin with capture, take_inner, take_middle, take_outer (the test's own frames;
 * each function's name as its innermost inlined frame says), and go on to main. */
static void expect_taken(struct fixture *f, const struct walk_out *out)
{
	static const char *const want[] = { "capture", "take_inner", "take_middle", "take_outer" };
	const struct trace_frame *fr = walk_frames(f->w);
	char name[256];
	assert_true(out->n >= 5);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(fr[i].kind, PROFILE_FRAME_NATIVE);
		assert_string_equal(frame_name(&fr[i], name, sizeof(name)), want[i]);
	}
	bool main_seen = false;
	for (unsigned i = 4; i < out->n; i++)
		main_seen |= fr[i].exe && !strcmp(frame_name(&fr[i], name, sizeof(name)), "main");
	assert_true(main_seen);
}

/* The delta unwinder and the reference name the same frames: the one by the modules its walk found, the other
 * by looking each frame up. */
static void test_walk_names_own_frames(void **state)
{
	(void)state;
	struct taken *t = malloc(sizeof(*t));
	struct walk_out deltas, ref;
	take_outer(t);
	struct fixture *f = make(false, false), *g = make(true, false);
	walk(f, t, false, &deltas);
	walk(g, t, false, &ref);
	expect_taken(f, &deltas);
	expect_taken(g, &ref);
	assert_int_equal(deltas.n, ref.n);
	const struct trace_frame *a = walk_frames(f->w), *b = walk_frames(g->w);
	for (unsigned i = 0; i < deltas.n; i++) {
		assert_int_equal(a[i].kind, b[i].kind);
		assert_int_equal(a[i].address, b[i].address);
	}
	assert_int_equal(f->counts.complete + f->counts.truncated, 1);
	assert_false(deltas.pending);
	destroy(f);
	destroy(g);
	free(t);
}

/* A table being built stops a walk that may be held; built, the same sample walks whole. */
static void test_pending_table_stops_held_walk(void **state)
{
	(void)state;
	struct taken *t = malloc(sizeof(*t));
	struct walk_out out;
	take_outer(t);
	struct fixture *f = make(false, true);
	walk(f, t, true, &out);
	assert_true(out.pending);
	assert_true(out.stopped);
	for (int i = 0; i < 8 && out.pending; i++) {
		execinfo_mgr_wait(f->em);
		walk(f, t, true, &out);
	}
	assert_false(out.pending);
	expect_taken(f, &out);
	destroy(f);
	free(t);
}

/* Over the memory budget no table is built: the walk stops at the first file without one, truncated, and no
 * fallback reads the file. */
static void test_deferred_table_ends_walk(void **state)
{
	(void)state;
	struct taken *t = malloc(sizeof(*t));
	struct walk_out out;
	take_outer(t);
	struct fixture *f = make(false, true);
	execinfo_mgr_defer_builds(f->em, true);
	walk(f, t, false, &out);
	assert_false(out.pending);
	assert_int_equal(out.n, 2);	/* the leaf, and [truncated] */
	assert_int_equal(walk_frames(f->w)[1].kind, PROFILE_FRAME_ERROR);
	assert_int_equal(f->counts.truncated, 1);
	assert_true(execinfo_mgr_builds_deferred(f->em) >= 1);
	destroy(f);
	free(t);
}

/* The kernel's call chain comes first, as kernel frames, leaf first; the user frames after it. */
static void test_kernel_frames_first(void **state)
{
	(void)state;
	struct taken *t = malloc(sizeof(*t));
	struct walk_out out;
	take_outer(t);
	t->chain[0] = PERF_CONTEXT_KERNEL;
	t->chain[1] = 0xffffffff81000100ull;
	t->chain[2] = 0xffffffff81000200ull;
	t->ps.callchain = t->chain;
	t->ps.callchain_nr = 3;
	struct fixture *f = make(false, false);
	walk(f, t, false, &out);
	const struct trace_frame *fr = walk_frames(f->w);
	assert_int_equal(fr[0].kind, PROFILE_FRAME_KERNEL);
	assert_int_equal(fr[0].address, 0xffffffff81000100ull);
	assert_int_equal(fr[1].kind, PROFILE_FRAME_KERNEL);
	assert_int_equal(fr[2].kind, PROFILE_FRAME_NATIVE);
	assert_true(walk_get_stats(f->w)->kernel_frames);
	destroy(f);
	free(t);
}

/* A walk's input goes into the replay capture: saved and read back, the sample is there as it was taken. */
static void test_walk_captured(void **state)
{
	(void)state;
	struct taken *t = malloc(sizeof(*t));
	struct walk_out out;
	struct replay_writer *rw;
	struct replay *r;
	char path[] = "/tmp/hostprof-test-walk-XXXXXX", err[256];
	take_outer(t);
	assert_int_equal(replay_writer_new(&rw), 0);
	struct fixture *f = make_with(false, false, rw);
	walk(f, t, false, &out);
	assert_int_equal(walk_get_stats(f->w)->capture_errors, 0);
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(replay_writer_save(rw, path), 0);
	assert_int_equal(replay_read(path, &r, err, sizeof(err)), 0);
	assert_int_equal(r->nsamples, 1);
	assert_int_equal(r->samples[0].regs[UNWIND_REG_IP], t->ps.regs[UNWIND_REG_IP]);
	assert_int_equal(r->samples[0].regs[UNWIND_REG_SP], t->ps.regs[UNWIND_REG_SP]);
	assert_int_equal(r->samples[0].stack_size, t->ps.stack_size);
	assert_memory_equal(r->samples[0].stack, t->stack, t->ps.stack_size);
	replay_free(r);
	unlink(path);
	destroy(f);
	replay_writer_free(rw);
	free(t);
}

/* JIT code its runtime's perf map names (and so keeps frame pointers in) is walked through by its frame pointer:
 * the trampoline is a JIT frame between take_inner and its caller. */
static void test_walk_through_jit_code(void **state)
{
	(void)state;
	struct taken *t = malloc(sizeof(*t));
	struct walk_out out;
	char map[64], name[256];
	uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(code != MAP_FAILED);
	memcpy(code, trampoline_code, sizeof(trampoline_code));
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)getpid());
	FILE *m = fopen(map, "w");
	assert_non_null(m);
	fprintf(m, "%llx %zx jit_trampoline\n", (unsigned long long)(uintptr_t)code, sizeof(trampoline_code));
	fclose(m);
	take_through_jit((trampoline_fn)(uintptr_t)code, t);
	struct fixture *f = make(false, false);
	walk(f, t, false, &out);
	const struct trace_frame *fr = walk_frames(f->w);
	assert_true(out.n >= 5);
	assert_string_equal(frame_name(&fr[0], name, sizeof(name)), "capture");
	assert_string_equal(frame_name(&fr[1], name, sizeof(name)), "take_inner");
	assert_int_equal(fr[2].kind, PROFILE_FRAME_JIT);
	assert_non_null(fr[2].jit);
	assert_true(fr[2].address >= (uintptr_t)code && fr[2].address < (uintptr_t)code + sizeof(trampoline_code));
	assert_string_equal(frame_name(&fr[3], name, sizeof(name)), "take_through_jit");
	destroy(f);
	unlink(map);
	munmap(code, 4096);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_names_own_frames),
		cmocka_unit_test(test_pending_table_stops_held_walk),
		cmocka_unit_test(test_deferred_table_ends_walk),
		cmocka_unit_test(test_kernel_frames_first),
		cmocka_unit_test(test_walk_captured),
		cmocka_unit_test(test_walk_through_jit_code),
	};
	return cmocka_run_group_tests_name("walk", tests, NULL, NULL);
}
