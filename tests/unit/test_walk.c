/*
 * Unit tests of src/pipeline/walk.c without a kernel event: each sample is taken by the test itself, in the test's own
 * thread (its registers and a copy of its stack, as perf would copy them), or by a program the test runs, of itself,
 * so that every walk is deterministic and independent of the machine's load. The walks must name the functions the
 * sampled code called, in order, down to its root:
 * - through the stack-delta tables, each frame named by the module the unwinder found it in, and the same frames
 *   through the reference unwinder (libunwind, which names none: the walker looks each one up);
 * - a walk that meets a table still being built stops when the sample may be held, and is whole once it is built;
 * - over the memory budget (no table to be built), a walk stops at the first file without its table;
 * - the kernel's part of a call chain comes first, as kernel frames;
 * - a sample without registers (perf's frame-pointer call graph) takes its user call chain as its frames;
 * - JIT code its runtime's perf map names (a trampoline the test writes) is walked through by frame pointer;
 * - a walk is added to a replay capture, which reads back with the same registers and stack;
 * - a Go sample taken on g0 (C code called through cgo, tests/fixtures/go/g0sample) goes on with its goroutine, as
 *   the fast lane's reader read it, to the goroutine's outermost frame, each frame checked against the program's
 *   own symbol table; the walk reads no live process (the sample's pid is no process's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/pipeline/fastlane.h"
#include "src/processes/procmem.h"
#include "src/pipeline/walk.h"
#include "symbols/symbolizer.h"
#include "tests/lib/testlib.h"

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
	unsigned live_kind;	/* the last live read's */
	bool live_past_copy;
	int live_rc;
};

static void count_live_read(void *ctx, struct process *p, const struct walk_live_read *r)
{
	struct fixture *f = ctx;
	(void)p;
	f->live_reads++;
	f->live_kind = r->kind;
	f->live_past_copy = r->past_copy;
	f->live_rc = r->rc;
}

static struct fixture *make_opts(const struct walk_options *o, bool worker, struct replay_writer *capture)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(execinfo_mgr_new(&f->em), 0);
	assert_int_equal(procmgr_new(f->em, &f->pm), 0);
	assert_int_equal(jitinfo_mgr_new(NULL, &f->jit), 0);
	if (worker)
		assert_int_equal(execinfo_mgr_start_worker(f->em, -1), 0);
	struct walk_deps d = { .procs = f->pm, .execinfo = f->em, .jit = f->jit, .capture = capture,
			       .live_read = count_live_read, .ctx = f };
	assert_int_equal(walk_new(o, &d, &f->w), 0);
	return f;
}

static struct fixture *make_with(bool reference, bool worker, struct replay_writer *capture)
{
	struct walk_options o = { .reference = reference, .max_stack_bytes = STACK_COPY,
				  .stack_copy_bytes = STACK_COPY };
	return make_opts(&o, worker, capture);
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

/* A walk shown the first view bytes of the copy gets the rest once it needs it, with no read of the process: the
 * same frames, and past_view says so. One that needs no more says it did not. */
static void test_walk_view_of_the_copy(void **state)
{
	(void)state;
	struct taken *t = malloc(sizeof(*t));
	struct walk_out whole, viewed;
	take_outer(t);
	struct walk_options o = { .max_stack_bytes = 2 * STACK_COPY, .stack_copy_bytes = STACK_COPY };
	struct fixture *f = make_opts(&o, false, NULL);
	struct walk_in in = { .proc = procmgr_get(f->pm, getpid()), .ps = &t->ps, .counts = &f->counts };
	walk_sample(f->w, &in, &whole);
	expect_taken(f, &whole);
	assert_false(whole.past_view);
	struct trace_frame first[64];
	unsigned n = whole.n < 64 ? whole.n : 64;
	memcpy(first, walk_frames(f->w), n * sizeof(first[0]));
	in.view = 64;
	walk_sample(f->w, &in, &viewed);
	assert_true(viewed.past_view);
	assert_int_equal(viewed.n, whole.n);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(walk_frames(f->w)[i].address, first[i].address);
	assert_int_equal(f->live_reads, 0);
	in.view = t->ps.stack_size;
	walk_sample(f->w, &in, &viewed);
	assert_false(viewed.past_view);
	assert_int_equal(viewed.n, whole.n);
	destroy(f);
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

/* A frame-pointer chain as the kernel takes it for perf record --call-graph fp: the sampled IP, then return
 * addresses, chain_leaf <- chain_mid <- chain_top <- the test. */
struct chained {
	uint64_t chain[8];
};

__attribute__((noinline)) static void chain_leaf(struct chained *c)
{
	c->chain[0] = PERF_CONTEXT_USER;
	c->chain[1] = (uint64_t)(uintptr_t)&chain_leaf + 4;	/* an IP inside it */
	c->chain[2] = (uint64_t)(uintptr_t)__builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void chain_mid(struct chained *c)
{
	chain_leaf(c);
	c->chain[3] = (uint64_t)(uintptr_t)__builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void chain_top(struct chained *c)
{
	chain_mid(c);
	c->chain[4] = (uint64_t)(uintptr_t)__builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

/* A sample without user registers or stack (a perf.data file's frame-pointer sample): its user frames are the
 * call chain's, named in the process's mappings, the walk complete where the chain ends. */
static void test_walk_chain_without_registers(void **state)
{
	(void)state;
	struct chained c;
	struct perf_sample ps = { .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid(), .misc = PERF_RECORD_MISC_USER,
				  .callchain = c.chain, .callchain_nr = 5 };
	chain_top(&c);
	struct fixture *f = make(false, false);
	struct walk_in in = { .proc = procmgr_get(f->pm, getpid()), .ps = &ps, .counts = &f->counts };
	struct walk_out out;
	walk_sample(f->w, &in, &out);
	static const char *const want[] = { "chain_leaf", "chain_mid", "chain_top", "test_walk_chain_without_registers" };
	const struct trace_frame *fr = walk_frames(f->w);
	char name[256];
	assert_int_equal(out.n, 4);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(fr[i].kind, PROFILE_FRAME_NATIVE);
		assert_string_equal(frame_name(&fr[i], name, sizeof(name)), want[i]);
	}
	assert_int_equal(f->counts.complete, 1);
	assert_int_equal(f->counts.kernel_only, 0);
	destroy(f);
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

/* ---- a Go sample on g0 (tests/fixtures/go/g0sample) ---- */

/* Most of the stack the fixture copies (its G0_COPY): the walk sees as much, and reads no more. */
#define GO_STACK_COPY 16384
/* Above the kernel's PID_MAX_LIMIT: no live process has it, so whatever a walk of it needs from memory comes from
 * the sample and what the fast lane held, never from a process that happens to run under that pid. */
#define GO_PID ((1 << 22) + 1)
#define GO_MAX_MEM 8

/* The fixture's file, read back: its sample, the memory a reader holding the thread would see, its mappings. */
struct go_sample {
	uint8_t *file;
	struct {
		uint64_t ip, sp, bp, bx, r12, r13, r14, r15;	/* as the fixture writes them */
	} regs;
	const uint8_t *stack;
	uint64_t stack_size;
	uint64_t g0, g;
	struct {
		uint64_t addr;
		const uint8_t *bytes;
		uint64_t size;
	} mem[GO_MAX_MEM];
	unsigned nmem;
	char exe[4096];
	char *maps;
};

static void go_sample_read(const char *path, struct go_sample *s)
{
	FILE *f = fopen(path, "rb");
	long size;
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	assert_true((size = ftell(f)) > 0);
	rewind(f);
	memset(s, 0, sizeof(*s));
	s->file = malloc((size_t)size);
	assert_non_null(s->file);
	assert_int_equal(fread(s->file, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	bool regs = false;
	for (size_t at = 0; at < (size_t)size;) {
		char tag[9] = { 0 };
		uint64_t addr, len;
		assert_true(at + 24 <= (size_t)size);
		memcpy(tag, s->file + at, 8);
		memcpy(&addr, s->file + at + 8, 8);
		memcpy(&len, s->file + at + 16, 8);
		const uint8_t *bytes = s->file + at + 24;
		assert_true(len <= (size_t)size - at - 24);
		at += 24 + len;
		if (!strcmp(tag, "regs") && len == sizeof(s->regs)) {
			memcpy(&s->regs, bytes, sizeof(s->regs));
			regs = true;
		} else if (!strcmp(tag, "stack")) {
			s->stack = bytes;
			s->stack_size = len;
		} else if (!strcmp(tag, "g0")) {
			s->g0 = addr;
		} else if (!strcmp(tag, "g")) {
			s->g = addr;
		} else if (!strcmp(tag, "mem")) {
			assert_true(s->nmem < GO_MAX_MEM);
			s->mem[s->nmem].addr = addr;
			s->mem[s->nmem].bytes = bytes;
			s->mem[s->nmem++].size = len;
		} else if (!strcmp(tag, "exe")) {
			assert_true(len < sizeof(s->exe));
			memcpy(s->exe, bytes, len);
		} else if (!strcmp(tag, "maps")) {
			s->maps = strndup((const char *)bytes, len);
		} else {
			fail_msg("unknown record %s in %s", tag, path);
		}
	}
	assert_true(regs);
	assert_non_null(s->stack);
	assert_true(s->g0 && s->g && s->exe[0] && s->maps);
}

static void go_sample_free(struct go_sample *s)
{
	free(s->file);
	free(s->maps);
}

/* unwind_memory over the fixture's memory records: what a reader of the process saw while it held the thread
 * (short where a record ends, -EFAULT outside them, as process_vm_readv). */
static ssize_t go_sample_memory(void *ctx, uint64_t at, void *buf, size_t len)
{
	const struct go_sample *s = ctx;
	for (unsigned i = 0; i < s->nmem; i++) {
		if (at < s->mem[i].addr || at - s->mem[i].addr >= s->mem[i].size)
			continue;
		size_t n = s->mem[i].size - (at - s->mem[i].addr);
		n = n < len ? n : len;
		memcpy(buf, s->mem[i].bytes + (at - s->mem[i].addr), n);
		return (ssize_t)n;
	}
	return -EFAULT;
}

/* The process the sample is of, known only by its program's mappings (as perf's MMAP2 records would give them). */
static struct process *go_process(struct fixture *f, const struct go_sample *s)
{
	struct process *p = procmgr_get(f->pm, GO_PID);
	struct stat st;
	char *maps = strdup(s->maps), *save = NULL;
	unsigned n = 0;
	assert_non_null(p);
	assert_non_null(maps);
	assert_int_equal(p->nmaps, 0);	/* nothing from a live process */
	assert_int_equal(stat(s->exe, &st), 0);
	for (char *line = strtok_r(maps, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct mapping m;
		int exec;
		const char *path;
		if (procmgr_parse_maps_line(line, &m, &exec, &path) < 0 || strcmp(path, s->exe) != 0)
			continue;
		struct perf_mmap2 rec = { .pid = GO_PID, .tid = GO_PID, .addr = m.start, .len = m.end - m.start,
					  .pgoff = m.pgoff, .ino = st.st_ino, .prot = (uint32_t)m.prot,
					  .filename = path };
		procmgr_on_mmap2(f->pm, &rec);
		n++;
	}
	free(maps);
	assert_true(n > 0);
	return p;
}

/* The fixture's sample as perf would have given it: user registers and the copy of the g0 stack from SP up. */
static void go_perf_sample(const struct go_sample *s, struct perf_sample *ps)
{
	memset(ps, 0, sizeof(*ps));
	ps->ip = ps->regs[UNWIND_REG_IP] = s->regs.ip;
	ps->regs[UNWIND_REG_SP] = s->regs.sp;
	ps->regs[UNWIND_REG_BP] = s->regs.bp;
	ps->regs[UNWIND_REG_BX] = s->regs.bx;
	ps->regs[UNWIND_REG_R12] = s->regs.r12;
	ps->regs[UNWIND_REG_R13] = s->regs.r13;
	ps->regs[UNWIND_REG_R14] = s->regs.r14;
	ps->regs[UNWIND_REG_R15] = s->regs.r15;
	ps->regs_abi = PERF_SAMPLE_REGS_ABI_64;
	ps->pid = ps->tid = GO_PID;
	ps->time = 1;
	ps->misc = PERF_RECORD_MISC_USER;
	ps->stack = s->stack;
	ps->stack_size = s->stack_size < GO_STACK_COPY ? s->stack_size : GO_STACK_COPY;
}

/* The oracle: the function of the binary's own ELF symbol table (libelf, not hostprof's symbolizer nor its Go
 * tables) that holds addr, without the ABI suffix Go's linker gives assembly functions; "" for none. */
static const char *elf_function(const char *exe, uint64_t addr, char *buf, size_t len)
{
	int fd = open(exe, O_RDONLY);
	assert_true(fd >= 0);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	buf[0] = '\0';
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn && !buf[0]; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;
			if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    addr < sym.st_value || addr - sym.st_value >= sym.st_size ||
			    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)))
				continue;
			snprintf(buf, len, "%s", name);
			size_t n = strlen(buf);
			if (n > 5 && !strcmp(buf + n - 5, ".abi0"))
				buf[n - 5] = '\0';
			break;
		}
	}
	elf_end(elf);
	close(fd);
	return buf;
}

/* The fixture built by the go command go_cmd, with cgo, and run: its sample of itself on g0, in s. */
static void take_go_sample(const char *dir, const char *go_cmd, struct go_sample *s)
{
	char out[512], cc[512];
	snprintf(cc, sizeof(cc), "command -v \"$('%s' env CC)\"", go_cmd);
	test_require_tool(cc, "a C compiler for cgo");
	test_go_build_with(go_cmd, dir, "g0sample", "g0sample", 1, "");
	snprintf(out, sizeof(out), "%s/sample", dir);
	assert_int_equal(test_run("'%s/g0sample' '%s'", dir, out), 0);
	go_sample_read(out, s);
}

/* The last walk had n frames; if not, which it had, by the oracle. */
static void expect_frame_count(const struct fixture *f, const struct walk_out *out, unsigned n, const char *exe)
{
	const struct trace_frame *fr = walk_frames(f->w);
	char name[256];
	if (out->n == n)
		return;
	for (unsigned i = 0; i < out->n; i++)
		print_message("  #%u kind %u %#llx %s\n", i, (unsigned)fr[i].kind, (unsigned long long)fr[i].address,
			      fr[i].exe ? elf_function(exe, fr[i].address, name, sizeof(name)) : "");
	fail_msg("the walk has %u frames, want %u", out->n, n);
}

/*
 * The frames of the fixture's sample, leaf first, by the program's symbol table: the C code on g0 (the capture,
 * the function Go called and cgo's wrapper of it), runtime.asmcgocall that switched to g0, then the goroutine from
 * where asmcgocall saved it (runtime.systemstack_switch, Go's marker of a switched goroutine) through the cgo call
 * to main.sampleOnG0 and main.main, up to runtime.goexit, where every goroutine starts.
 */
static const char *const go_g0_frames[] = { "g0_capture", "g0_sample", "_cgo_*_Cfunc_g0_sample",
					    "runtime.asmcgocall" };
static const char *const go_goroutine_frames[] = { "runtime.systemstack_switch", "runtime.cgocall",
						   "main._Cfunc_g0_sample", "main.sampleOnG0", "main.main",
						   "runtime.main", "runtime.goexit" };
#define GO_G0_FRAMES (sizeof(go_g0_frames) / sizeof(go_g0_frames[0]))
#define GO_GOROUTINE_FRAMES (sizeof(go_goroutine_frames) / sizeof(go_goroutine_frames[0]))

/* Frames [0, n) of the last walk are the program's, in file exe, named as want says (fnmatch patterns). */
static void expect_go_frames(const struct fixture *f, const struct go_sample *s, unsigned first,
			     const char *const *want, unsigned n)
{
	const struct trace_frame *fr = walk_frames(f->w);
	char name[256];
	for (unsigned i = 0; i < n; i++) {
		const struct trace_frame *t = &fr[first + i];
		if (t->kind != PROFILE_FRAME_NATIVE || !t->exe || strcmp(execinfo_path(t->exe), s->exe) != 0)
			fail_msg("frame %u: kind %u in %s, want a frame of %s", first + i, (unsigned)t->kind,
				 t->exe ? execinfo_path(t->exe) : "no file", s->exe);
		elf_function(s->exe, t->address, name, sizeof(name));
		if (fnmatch(want[i], name, 0) != 0)
			fail_msg("frame %u at %#llx is in %s, want %s", first + i, (unsigned long long)t->address,
				 name[0] ? name : "no function", want[i]);
	}
}

/*
 * A Go sample on g0: the walk goes through the C frames to runtime.asmcgocall, where the thread switched from the
 * goroutine, and on with the goroutine the fast lane's reader read as it held the thread (go_stack_snapshot over
 * the memory the fixture saw), to runtime.goexit: complete, and nothing read from a live process. A reader's
 * goroutine of another switch (another frame pointer) is not taken, and without one the walk asks the process,
 * which it cannot read (no process has its pid): it ends at the switch. With Go stacks off, it ends there too.
 */
static void walk_go_sample_on_g0(struct test_workdir *wd, const char *go_cmd)
{
	struct go_sample s;
	struct go_stack *gs;
	struct go_stack_snapshot snap;
	struct perf_sample ps;
	struct walk_out out;
	take_go_sample(wd->dir, go_cmd, &s);
	elf_version(EV_CURRENT);
	struct walk_options o = { .go_stacks = true, .max_stack_bytes = GO_STACK_COPY,
				  .stack_copy_bytes = GO_STACK_COPY };
	struct fixture *f = make_opts(&o, false, NULL);
	struct walk_in in = { .proc = go_process(f, &s), .ps = &ps, .counts = &f->counts };
	go_perf_sample(&s, &ps);

	/* What the fast lane's reader reads of a thread on g0 (go_stack_snapshot, as fastlane.c calls it), here from
	 * the fixture's memory. It is given g0, as the g register names it on g0 in Go code (systemstack); C code
	 * called through cgo still has the goroutine there, which go_stack_snapshot takes for a sample on the
	 * goroutine's own stack, with nothing past the copy to read. */
	struct go_stack_options go = { .max_stack = walk_go_max_stack(f->w) };
	const struct unwind_memory image = { go_sample_memory, &s };
	assert_int_equal(go_stack_new(&go, &gs), 0);
	assert_int_equal(go_stack_snapshot(gs, &image, s.g0, s.regs.sp + ps.stack_size, &snap), 0);
	assert_int_equal(snap.kind, GO_STACK_SNAPSHOT_GOROUTINE);
	assert_int_equal(snap.g, s.g);

	in.fast_go = &snap;
	walk_sample(f->w, &in, &out);
	expect_frame_count(f, &out, GO_G0_FRAMES + GO_GOROUTINE_FRAMES, s.exe);
	expect_go_frames(f, &s, 0, go_g0_frames, GO_G0_FRAMES);
	expect_go_frames(f, &s, GO_G0_FRAMES, go_goroutine_frames, GO_GOROUTINE_FRAMES);
	assert_int_equal(f->counts.complete, 1);
	assert_int_equal(walk_get_stats(f->w)->fast_goroutines, 1);
	assert_int_equal(f->live_reads, 0);

	/* The reader's goroutine left another switch (its saved frame pointer is not the one the walk recovered at
	 * asmcgocall): not this sample's. The walk asks the process instead, and no live process has that pid: the
	 * walk ends at the switch. */
	struct go_stack_snapshot other = snap;
	other.bp += 16;
	in.fast_go = &other;
	walk_sample(f->w, &in, &out);
	expect_frame_count(f, &out, GO_G0_FRAMES + 1, s.exe);
	expect_go_frames(f, &s, 0, go_g0_frames, GO_G0_FRAMES);
	assert_int_equal(walk_frames(f->w)[GO_G0_FRAMES].kind, PROFILE_FRAME_ERROR);
	assert_int_equal(walk_frames(f->w)[GO_G0_FRAMES].address, TRACE_ERROR_TRUNCATED);
	assert_int_equal(f->counts.truncated, 1);
	assert_int_equal(walk_get_stats(f->w)->fast_goroutines, 1);
	assert_int_equal(f->live_reads, 1);
	assert_int_equal(f->live_kind, FASTLANE_GO);
	assert_false(f->live_past_copy);	/* the goroutine behind g0, lost to the walk */
	assert_true(f->live_rc < 0);

	/* No reader's goroutine at all: the same. */
	in.fast_go = NULL;
	walk_sample(f->w, &in, &out);
	expect_frame_count(f, &out, GO_G0_FRAMES + 1, s.exe);
	assert_int_equal(f->counts.truncated, 2);
	assert_int_equal(f->live_reads, 2);
	destroy(f);

	/* Go stacks off (record --no-go-stacks): the walk ends at the switch, though the goroutine is held for it,
	 * and reads nothing. */
	struct go_stack_stats st;
	o.go_stacks = false;
	f = make_opts(&o, false, NULL);
	in = (struct walk_in){ .proc = go_process(f, &s), .ps = &ps, .fast_go = &snap, .counts = &f->counts };
	walk_sample(f->w, &in, &out);
	expect_frame_count(f, &out, GO_G0_FRAMES + 1, s.exe);
	expect_go_frames(f, &s, 0, go_g0_frames, GO_G0_FRAMES);
	assert_int_equal(walk_frames(f->w)[GO_G0_FRAMES].kind, PROFILE_FRAME_ERROR);
	assert_int_equal(f->counts.truncated, 1);
	assert_int_equal(walk_get_stats(f->w)->fast_goroutines, 0);
	assert_int_equal(walk_go_stack_stats(f->w, &st), -ENOENT);
	assert_int_equal(f->live_reads, 0);
	destroy(f);

	go_stack_free(gs);
	go_sample_free(&s);
}

/* With the go on PATH. */
static void test_walk_go_sample_on_g0(void **state)
{
	test_require_go();
	walk_go_sample_on_g0(*state, "go");
}

/* With Debian's Go (golang-go, which make deps installs: 1.19 on Debian 12), whose runtime saves a goroutine in a
 * gobuf of 7 words, not 6, and whose asmcgocall calls C itself. */
static void test_walk_go_sample_on_g0_debian_go(void **state)
{
	test_require_tool("test -x /usr/lib/go/bin/go", "Debian's Go (golang-go)");
	walk_go_sample_on_g0(*state, "/usr/lib/go/bin/go");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_names_own_frames),
		cmocka_unit_test(test_walk_view_of_the_copy),
		cmocka_unit_test(test_walk_chain_without_registers),
		cmocka_unit_test(test_pending_table_stops_held_walk),
		cmocka_unit_test(test_deferred_table_ends_walk),
		cmocka_unit_test(test_kernel_frames_first),
		cmocka_unit_test(test_walk_captured),
		cmocka_unit_test(test_walk_through_jit_code),
		cmocka_unit_test_setup_teardown(test_walk_go_sample_on_g0, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_walk_go_sample_on_g0_debian_go, test_workdir_setup,
						test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("walk", tests, NULL, NULL);
}
