/*
 * Unit tests for unwind/go_stack.c: Go runtime structures (g0, m, the current goroutine, its stack) laid out as
 * the Go runtime lays them out, in buffers of the test that a fake process-memory reader shows at addresses of
 * their own (a buffer-backed struct unwind_memory: a read outside the buffers fails with -EFAULT, one that runs
 * past a buffer's end is short), as the session's reader shows a live process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind/go_stack.h"

#define STACK_SIZE 8192

/* A fake Go thread: g0 and the goroutine (g), the m they share, the goroutine's stack. */
struct go_thread {
	uint64_t g0[32], g[32], m[32];
	uint8_t stack[STACK_SIZE] __attribute__((aligned(16)));
	/* layout: 7-field gobuf (bp at g+104, m.curg at m+192, status at g+144) or 6-field (g+96, m+184) */
	int six_fields;
};

/* ---- the fake process: the test's buffers, each at an address of its own ------------------------------------ */

#define FAKE_BASE 0x7f0000000000ull	/* where the first buffer is, in the fake process */
#define FAKE_STRIDE 0x100000000ull	/* and the next ones: far apart, nothing in between */
#define FAKE_MAX_REGIONS 4

static struct fake_process {
	struct {
		const uint8_t *bytes;
		size_t size;
	} regions[FAKE_MAX_REGIONS];
	unsigned n;
	unsigned reads;
} fake;

static ssize_t fake_read(void *ctx, uint64_t at, void *buf, size_t len)
{
	struct fake_process *fp = ctx;
	fp->reads++;
	for (unsigned i = 0; i < fp->n; i++) {
		uint64_t lo = FAKE_BASE + i * FAKE_STRIDE, hi = lo + fp->regions[i].size;
		if (at < lo || at >= hi)
			continue;
		size_t n = hi - at < len ? (size_t)(hi - at) : len;
		memcpy(buf, fp->regions[i].bytes + (at - lo), n);
		return (ssize_t)n;
	}
	return -EFAULT;
}

static const struct unwind_memory mem = { fake_read, &fake };

/* The fake process shows nothing; then buffer p, of size bytes, at the next address. */
static void fake_clear(void)
{
	fake.n = 0;
}

static void fake_map(const void *p, size_t size)
{
	assert_true(fake.n < FAKE_MAX_REGIONS);
	fake.regions[fake.n].bytes = p;
	fake.regions[fake.n].size = size;
	fake.n++;
}

/* Where the fake process has the byte at p (or one past a buffer's end). */
static uint64_t addr(const void *p)
{
	const uint8_t *b = p;
	for (unsigned i = 0; i < fake.n; i++) {
		if (b >= fake.regions[i].bytes && b <= fake.regions[i].bytes + fake.regions[i].size)
			return FAKE_BASE + i * FAKE_STRIDE + (uint64_t)(b - fake.regions[i].bytes);
	}
	fail_msg("%p is in no buffer of the fake process", p);
	return 0;
}

static struct go_stack *new_go_stack(size_t max_stack)
{
	struct go_stack_options o = { .max_stack = max_stack };
	struct go_stack *gs = NULL;
	assert_int_equal(go_stack_new(&o, &gs), 0);
	return gs;
}

/* ---- */

/* g.sched = {sp, pc, bp} with the stack's top 256 bytes in use; status is atomicstatus. */
static void go_thread_init(struct go_thread *t, int six_fields, uint32_t status)
{
	memset(t, 0, sizeof(*t));
	fake_clear();
	fake_map(t, sizeof(*t));
	t->six_fields = six_fields;
	for (size_t i = 0; i < STACK_SIZE; i++)
		t->stack[i] = (uint8_t)(i * 7);
	t->g0[6] = addr(t->m);				/* g0.m */
	t->g[0] = addr(t->stack);			/* stack.lo */
	t->g[1] = addr(t->stack) + STACK_SIZE;		/* stack.hi */
	t->g[6] = addr(t->m);				/* g.m */
	t->g[7] = addr(t->stack) + STACK_SIZE - 256;	/* sched.sp */
	t->g[8] = 0x401234;				/* sched.pc */
	t->g[six_fields ? 12 : 13] = addr(t->stack) + STACK_SIZE - 64; /* sched.bp */
	memcpy((uint8_t *)t->g + (six_fields ? 136 : 144), &status, sizeof(status));
	t->m[0] = addr(t->g0);				/* m.g0 */
	t->m[six_fields ? 23 : 24] = addr(t->g);	/* m.curg */
}

static uint64_t sched_bp(const struct go_thread *t)
{
	return t->g[t->six_fields ? 12 : 13];
}

static void test_follows_from_g0(void **state)
{
	(void)state;
	for (int six = 0; six < 2; six++) {
		struct go_thread *t = malloc(sizeof(*t));
		struct go_stack *gs = new_go_stack(4096);
		struct go_stack_context ctx;
		struct go_stack_stats st;
		go_thread_init(t, six, 2);
		assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t), NULL, &ctx), 0);
		assert_int_equal(ctx.sp, t->g[7]);
		assert_int_equal(ctx.pc, 0x401234);
		assert_int_equal(ctx.bp, sched_bp(t));
		assert_int_equal(ctx.size, 256); /* up to stack.hi */
		assert_memory_equal(ctx.stack, t->stack + STACK_SIZE - 256, 256);
		/* The g register may hold the goroutine itself (cgo: C code keeps Go's R14). */
		assert_int_equal(go_stack_read(gs, &mem, addr(t->g), sched_bp(t), NULL, &ctx), 0);
		go_stack_get_stats(gs, &st);
		assert_int_equal(st.followed, 2);
		go_stack_free(gs);
		free(t);
	}
}

/* Go < 1.17 has no g register: during a stack growth, newstack's copy of m.morebuf in the g0 frames names g. */
static void test_follows_via_morebuf_without_g_register(void **state)
{
	(void)state;
	struct go_thread *t = malloc(sizeof(*t));
	struct go_stack *gs = new_go_stack(4096);
	struct go_stack_context ctx;
	uint64_t copy[32];
	go_thread_init(t, 0, 2);
	for (size_t i = 0; i < 32; i++)
		copy[i] = 0x2000 * i + 0x10008;			/* pointer-like noise */
	copy[26] = sched_bp(t) - 48;				/* morebuf.sp: the grower's caller's SP */
	copy[27] = 0x401300;					/* morebuf.pc */
	copy[28] = addr(t->g);					/* morebuf.g */
	struct go_stack_g0 g0 = { .bytes = (const uint8_t *)copy, .size = sizeof(copy) };
	assert_int_equal(go_stack_read(gs, &mem, 0, sched_bp(t), &g0, &ctx), 0);
	assert_int_equal(ctx.sp, t->g[7]);
	assert_int_equal(ctx.pc, 0x401234);
	/* The g it names must check out like one from the g register: here, another switch than the sampled one. */
	assert_int_equal(go_stack_read(gs, &mem, 0, sched_bp(t) + 16, &g0, &ctx), -ESTALE);
	copy[28] = addr(t->g0) + 8;				/* no g there */
	assert_int_equal(go_stack_read(gs, &mem, 0, sched_bp(t), &g0, &ctx), -ESRCH);
	go_stack_free(gs);
	free(t);
}

static void test_stack_read_is_bounded(void **state)
{
	(void)state;
	struct go_thread *t = malloc(sizeof(*t));
	struct go_stack *gs = new_go_stack(64);
	struct go_stack_context ctx;
	go_thread_init(t, 0, 2);
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t), NULL, &ctx), 0);
	assert_int_equal(ctx.size, 64);
	go_stack_free(gs);
	free(t);
}

/*
 * A context saved at another switch than the sampled one is refused, unless the sample is a stack growth whose
 * g0 frames name the goroutine, and that goroutine is still copying its stack. A goroutine copying its stack is
 * never taken for a systemstack or cgo sample (no g0 copy given): on one thread it may be any other goroutine.
 */
static void test_stale_context(void **state)
{
	(void)state;
	struct go_thread *t = malloc(sizeof(*t));
	struct go_stack *gs = new_go_stack(4096);
	struct go_stack_context ctx;
	struct go_stack_stats st;
	uint64_t frames[16];
	for (size_t i = 0; i < 16; i++)
		frames[i] = 0x2000 * i + 0x10008;		/* pointer-like noise, no adjustinfo shape */
	struct go_stack_g0 g0 = { .bytes = (const uint8_t *)frames, .size = sizeof(frames) };
	go_thread_init(t, 0, 2);
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t) + 16, NULL, &ctx), -ESTALE);
	go_thread_init(t, 0, 8 | 0x1000);	/* _Gcopystack, with the GC's scan bit */
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t) + 16, NULL, &ctx), -ESTALE);
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t) + 16, &g0, &ctx), -ESTALE);
	frames[5] = addr(t->g);			/* newstack's frame holds the goroutine it grows */
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t) + 16, &g0, &ctx), 0);
	go_thread_init(t, 0, 2);
	t->g[7] = 0;				/* gogo cleared sched.sp: the goroutine runs again */
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t), NULL, &ctx), -ESTALE);
	go_stack_get_stats(gs, &st);
	assert_int_equal(st.stale, 4);
	assert_int_equal(st.followed, 1);
	go_stack_free(gs);
	free(t);
}

static void test_bad_structures(void **state)
{
	(void)state;
	struct go_thread *t = malloc(sizeof(*t));
	struct go_stack *gs = new_go_stack(4096);
	struct go_stack_context ctx;
	struct go_stack_stats st;

	go_thread_init(t, 0, 2);
	t->g[6] = addr(t->g0);			/* curg.m is not this m */
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t), NULL, &ctx), -ESRCH);
	go_thread_init(t, 0, 2);
	t->m[0] = addr(t->g);			/* m.g0 is not g0, and g is not m.curg either */
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t), NULL, &ctx), -ESRCH);
	go_thread_init(t, 0, 2);
	t->g[7] = addr(t->stack) - 8;		/* sched.sp below the goroutine's stack */
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t), NULL, &ctx), -ESRCH);
	go_thread_init(t, 0, 2);
	t->g[1] = t->g[0] + (2ull << 30);	/* a 2 GiB goroutine stack */
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0), sched_bp(t), NULL, &ctx), -ESRCH);
	assert_int_equal(go_stack_read(gs, &mem, 0, 0, NULL, &ctx), -ESRCH);		/* no g register */
	assert_int_equal(go_stack_read(gs, &mem, addr(t->g0) + 3, 0, NULL, &ctx), -ESRCH); /* misaligned */

	/* A g register pointing at memory the process does not have. */
	uint64_t gone = FAKE_BASE + FAKE_MAX_REGIONS * FAKE_STRIDE;
	assert_int_equal(go_stack_read(gs, &mem, gone, 0, NULL, &ctx), -EIO);
	go_stack_get_stats(gs, &st);
	assert_int_equal(st.no_goroutine, 6);
	assert_int_equal(st.unreadable, 1);
	assert_int_equal(st.followed, 0);
	go_stack_free(gs);
	free(t);
}

/*
 * A stack growth that is over: the goroutine's old stack (freed, still intact) and its new one (where it runs
 * now, its frames near the leaf already different), and the sample's g0 copy with newstack's morebuf and
 * copystack's adjustinfo among other words. The goroutine itself (its g) is not needed: by the time a sample is
 * handled it may have exited.
 */
#define OLD_STACK 8192
#define NEW_STACK 16384
#define USED 4096	/* bytes of the old stack in use above the grower's return-address slot */

struct growth {
	uint64_t old_stack[OLD_STACK / 8], new_stack[NEW_STACK / 8];
	uint64_t g[32];
	uint8_t code[32];	/* the caller's direct call of the grower: E8 rel32, then the return address */
	uint64_t g0[64];	/* the sample's g0 copy */
	uint64_t caller_pc, caller_sp, switch_bp, delta, grower;
};

static void growth_init(struct growth *gr, uint64_t bp_known)
{
	memset(gr, 0, sizeof(*gr));
	fake_clear();
	fake_map(gr, sizeof(*gr));
	uint64_t old_lo = addr(gr->old_stack), old_hi = old_lo + OLD_STACK;
	uint64_t new_lo = addr(gr->new_stack), new_hi = new_lo + NEW_STACK;
	gr->delta = new_hi - old_hi;
	gr->caller_sp = old_hi - USED;
	gr->switch_bp = bp_known ? gr->caller_sp + 64 : 0;
	/* The caller's CALL rel32 at code+8; it returns to code+13. */
	gr->caller_pc = addr(gr->code) + 13;
	gr->grower = addr(gr->code) + 24;
	int32_t rel = (int32_t)(gr->grower - gr->caller_pc);
	gr->code[8] = 0xe8;
	memcpy(gr->code + 9, &rel, sizeof(rel));
	/* Old stack: the grower's return address into the caller, then frames; one saved frame pointer. */
	size_t slot = (OLD_STACK - USED) / 8 - 1;
	for (size_t i = slot; i < OLD_STACK / 8; i++)
		gr->old_stack[i] = 0x5151000000000000ull + i;
	gr->old_stack[slot] = gr->caller_pc;
	gr->old_stack[slot + 100] = gr->switch_bp ? gr->switch_bp + 32 : old_hi - 512;
	/* New stack: the same words moved up by delta, pointers into the old stack adjusted; the goroutine has run
	 * on since, rewriting its innermost frames. */
	for (size_t i = slot; i < OLD_STACK / 8; i++)
		gr->new_stack[i + (NEW_STACK - OLD_STACK) / 8] = gr->old_stack[i];
	gr->new_stack[slot + 100 + (NEW_STACK - OLD_STACK) / 8] = gr->old_stack[slot + 100] + gr->delta;
	for (size_t i = slot; i < slot + 16; i++)
		gr->new_stack[i + (NEW_STACK - OLD_STACK) / 8] ^= 0xabcdef;
	gr->g[0] = new_lo;
	gr->g[1] = new_hi;
	/* g0: noise, adjustinfo {old.lo, old.hi, delta} at word 10, morebuf {sp, pc, g} at word 40. */
	for (size_t i = 0; i < 64; i++)
		gr->g0[i] = 0x1000 * i + 8;
	gr->g0[4] = old_lo;			/* the old bounds, kept twice by copystack: first with */
	gr->g0[5] = old_hi;			/* a word after them that is no delta (unmapped there) */
	gr->g0[6] = 0x100000000000ull - old_hi;
	gr->g0[8] = old_lo - 4096;		/* a range that does not hold the caller */
	gr->g0[9] = old_lo;
	gr->g0[10] = old_lo;
	gr->g0[11] = old_hi;
	gr->g0[12] = gr->delta;
	gr->g0[40] = gr->caller_sp;
	gr->g0[41] = gr->caller_pc;
	gr->g0[42] = addr(gr->g);
}

static int read_growth(struct go_stack *gs, const struct growth *gr, struct go_stack_context *ctx)
{
	struct go_stack_g0 g0 = { .bytes = (const uint8_t *)gr->g0, .size = sizeof(gr->g0) };
	/* No g register: the growth is found from the g0 copy alone. */
	return go_stack_read(gs, &mem, 0, gr->switch_bp, &g0, ctx);
}

static void test_follows_finished_growth(void **state)
{
	(void)state;
	struct growth *gr = malloc(sizeof(*gr));
	struct go_stack *gs = new_go_stack(OLD_STACK);
	struct go_stack_context ctx;
	struct go_stack_stats st;
	assert_non_null(gr);
	for (int bp_known = 1; bp_known >= 0; bp_known--) {
		growth_init(gr, (uint64_t)bp_known);
		assert_int_equal(read_growth(gs, gr, &ctx), 0);
		assert_int_equal(ctx.pc, gr->grower);		/* the callee of the caller's direct call */
		assert_int_equal(ctx.sp, gr->caller_sp - 8);	/* at its return-address slot, on the old stack */
		assert_int_equal(ctx.bp, gr->switch_bp);
		assert_int_equal(ctx.size, USED + 8);
		assert_memory_equal(ctx.stack, (const uint8_t *)gr->old_stack + OLD_STACK - USED - 8, USED + 8);
	}
	go_stack_get_stats(gs, &st);
	assert_int_equal(st.followed, 2);
	assert_int_equal(st.grown, 2);
	go_stack_free(gs);
	free(gr);
}

/* What does not check out is refused: never a stack the sample did not see. */
static void test_refuses_unproven_growth(void **state)
{
	(void)state;
	struct growth *gr = malloc(sizeof(*gr));
	struct go_stack *gs = new_go_stack(OLD_STACK);
	struct go_stack_context ctx;
	struct go_stack_stats st;
	assert_non_null(gr);
	size_t top = NEW_STACK / 8 - 4;

	growth_init(gr, 1);
	gr->new_stack[top] ^= 1;		/* the outermost frames changed: the old memory was reused */
	assert_int_not_equal(read_growth(gs, gr, &ctx), 0);
	growth_init(gr, 1);
	gr->old_stack[(OLD_STACK - USED) / 8 - 1] = 0;	/* the grower's return address is gone */
	assert_int_not_equal(read_growth(gs, gr, &ctx), 0);
	growth_init(gr, 1);
	gr->code[8] = 0xff;			/* an indirect call: which function grew is unknown */
	assert_int_not_equal(read_growth(gs, gr, &ctx), 0);
	growth_init(gr, 1);
	gr->g0[12] += 4096;			/* a delta that does not lead to where the stack moved */
	assert_int_not_equal(read_growth(gs, gr, &ctx), 0);
	growth_init(gr, 1);
	gr->g0[12] = 4096;			/* a "new" stack overlapping the old one */
	assert_int_not_equal(read_growth(gs, gr, &ctx), 0);
	growth_init(gr, 1);
	gr->g0[11] = gr->g0[10] + 6000;		/* old bounds not a power of two */
	assert_int_not_equal(read_growth(gs, gr, &ctx), 0);
	growth_init(gr, 1);
	gr->switch_bp = gr->caller_sp - 64;	/* the caller's frame pointer below its SP */
	assert_int_not_equal(read_growth(gs, gr, &ctx), 0);
	go_stack_get_stats(gs, &st);
	assert_int_equal(st.followed, 0);
	assert_int_equal(st.grown, 0);
	go_stack_free(gs);
	free(gr);
}

/* ---- frames named for joining the sample's frame-pointer chain --------------------------------------------- */

/* The unwind rules as the test states them: one caller frame (its return address and frame size) and one
 * g0-switching function entry. */
struct rules_env {
	uint64_t caller_pc, switch_entry;
	uint64_t frame;		/* the caller's CFA - SP at caller_pc: frame pointer at SP + frame - 16 */
	unsigned checks;
};

static bool env_caller_keeps_fp(void *ctx, uint64_t sp, uint64_t pc, uint64_t bp)
{
	struct rules_env *r = ctx;
	r->checks++;
	return pc == r->caller_pc && sp + r->frame - 16 == bp;
}

static bool env_is_switch_entry(void *ctx, uint64_t entry)
{
	const struct rules_env *r = ctx;
	return entry == r->switch_entry;
}

static bool env_caller_sp(void *ctx, uint64_t pc, uint64_t bp, uint64_t *sp)
{
	const struct rules_env *r = ctx;
	*sp = bp + 16 - r->frame;
	return pc == r->caller_pc;
}

/*
 * A stack growth named from the sample alone: newstack's morebuf in the g0 copy, its caller keeping its frame
 * pointer where the g0 frames say (switch_bp), the grower the target of the caller's direct call. Neither stack
 * is read: they may be gone.
 */
/* rules_env's rules, and the program's code as a file would give it (go_stack_rules.code_at). */
struct code_env {
	struct rules_env *env;
	const uint8_t *code;
	uint64_t at;	/* the address code is at in the process */
	size_t len;
};

static bool code_env_caller_keeps_fp(void *ctx, uint64_t sp, uint64_t pc, uint64_t bp)
{
	return env_caller_keeps_fp(((struct code_env *)ctx)->env, sp, pc, bp);
}

static bool code_env_is_switch_entry(void *ctx, uint64_t addr)
{
	return env_is_switch_entry(((struct code_env *)ctx)->env, addr);
}

static bool code_env_caller_sp(void *ctx, uint64_t pc, uint64_t bp, uint64_t *sp)
{
	return env_caller_sp(((struct code_env *)ctx)->env, pc, bp, sp);
}

static bool code_env_code_at(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct code_env *ce = ctx;
	if (addr < ce->at || addr - ce->at > ce->len || len > ce->len - (addr - ce->at))
		return false;
	memcpy(buf, ce->code + (addr - ce->at), len);
	return true;
}

static void test_grower_from_sample(void **state)
{
	(void)state;
	struct growth *gr = malloc(sizeof(*gr));
	struct go_stack *gs = new_go_stack(OLD_STACK);
	struct go_stack_caller c;
	struct go_stack_stats st;
	assert_non_null(gr);
	growth_init(gr, 1);
	memset(gr->old_stack, 0, sizeof(gr->old_stack));
	memset(gr->new_stack, 0, sizeof(gr->new_stack));
	struct rules_env env = { .caller_pc = gr->caller_pc, .frame = 80 };	/* switch_bp = caller_sp + 64 */
	const struct go_stack_rules rules = { env_caller_keeps_fp, env_is_switch_entry, &env, env_caller_sp, NULL };
	struct go_stack_g0 g0 = { .bytes = (const uint8_t *)gr->g0, .size = sizeof(gr->g0) };
	assert_int_equal(go_stack_find_grower(gs, &mem, gr->switch_bp, &g0, &rules, &c), 0);
	assert_int_equal(c.pc, gr->caller_pc);
	assert_int_equal(c.sp, gr->caller_sp);
	assert_int_equal(c.callee, gr->grower);

	/* The process is gone (its code unreadable): the call is read from the program's file, if a file holds it. */
	struct code_env ce = { .env = &env, .code = gr->code, .at = addr(gr->code), .len = sizeof(gr->code) };
	fake_clear();
	assert_int_equal(go_stack_find_grower(gs, &mem, gr->switch_bp, &g0, &rules, &c), -EIO);
	const struct go_stack_rules from_file = { code_env_caller_keeps_fp, code_env_is_switch_entry, &ce,
						  code_env_caller_sp, code_env_code_at };
	assert_int_equal(go_stack_find_grower(gs, &mem, gr->switch_bp, &g0, &from_file, &c), 0);
	assert_int_equal(c.callee, gr->grower);
	fake_map(gr, sizeof(*gr));

	/* The caller's frame pointer is not where the g0 frames say: refused. So is an unknown one (Go >= 1.23). */
	assert_int_equal(go_stack_find_grower(gs, &mem, gr->switch_bp + 8, &g0, &rules, &c), -ESRCH);
	assert_int_equal(go_stack_find_grower(gs, &mem, 0, &g0, &rules, &c), -ESRCH);
	/* An indirect call: which function grew is unknown. */
	gr->code[8] = 0xff;
	assert_int_equal(go_stack_find_grower(gs, &mem, gr->switch_bp, &g0, &rules, &c), -ESRCH);
	gr->code[8] = 0xe8;
	/* No morebuf-shaped words (g not a pointer). */
	gr->g0[42] = 3;
	assert_int_equal(go_stack_find_grower(gs, &mem, gr->switch_bp, &g0, &rules, &c), -ESRCH);
	go_stack_get_stats(gs, &st);
	assert_int_equal(st.growers, 2);	/* the process's, then the file's */
	go_stack_free(gs);
	free(gr);
}

/* The goroutine stack of a systemstack call that is over: its caller's frame, and below it the call's slot. */
struct switch_frame {
	uint8_t code[32];	/* the caller's CALL rel32 at 8, returning to 13; the switching function at 24 */
	uint64_t *stack;	/* 512 words; the caller's frame pointer at word 400 */
	uint64_t bp, slot;
};

/* The code: the caller calls the switching function directly; the caller's frame is 64 bytes. */
static void switch_code_init(struct switch_frame *sf, struct rules_env *env)
{
	memset(sf->code, 0xcc, sizeof(sf->code));
	fake_clear();
	fake_map(sf->code, sizeof(sf->code));
	*env = (struct rules_env){ .caller_pc = addr(sf->code) + 13, .switch_entry = addr(sf->code) + 24, .frame = 64 };
	int32_t rel = 24 - 13;
	sf->code[8] = 0xe8;
	memcpy(sf->code + 9, &rel, sizeof(rel));
}

static void switch_frame_init(struct switch_frame *sf, uint64_t *stack, struct rules_env *env)
{
	switch_code_init(sf, env);
	fake_map(stack, 512 * 8);
	sf->stack = stack;
	for (size_t i = 0; i < 512; i++)
		stack[i] = 0x7700000000000000ull + i;
	sf->bp = addr(&stack[400]);
	sf->slot = sf->bp - 56;		/* the caller's SP is bp - 48 with a 64-byte frame */
	stack[(sf->slot - addr(stack)) / 8] = env->caller_pc;
	stack[(sf->slot - addr(stack)) / 8 - 8] = env->caller_pc;	/* an older call from deeper down */
}

static void test_switch_caller_found(void **state)
{
	(void)state;
	struct go_stack *gs = new_go_stack(8192);
	uint64_t *stack = calloc(512, 8);
	struct switch_frame sf;
	struct rules_env env;
	struct go_stack_caller c;
	const struct go_stack_rules rules = { env_caller_keeps_fp, env_is_switch_entry, &env, env_caller_sp, NULL };
	switch_frame_init(&sf, stack, &env);
	assert_int_equal(go_stack_find_switch_caller(gs, &mem, sf.bp, &rules, &c), 0);
	assert_int_equal(c.pc, env.caller_pc);
	assert_int_equal(c.sp, sf.slot + 8);
	assert_int_equal(c.callee, env.switch_entry);

	/* The slot now holds the return of a call elsewhere (the caller went on): refused. */
	env.switch_entry += 1;
	assert_int_equal(go_stack_find_switch_caller(gs, &mem, sf.bp, &rules, &c), -ESRCH);
	switch_frame_init(&sf, stack, &env);
	stack[(sf.slot - addr(stack)) / 8] = 0x7700000000000000ull;
	assert_int_equal(go_stack_find_switch_caller(gs, &mem, sf.bp, &rules, &c), -ESRCH);
	/* Another frame pointer than the sample's: nothing fits. */
	switch_frame_init(&sf, stack, &env);
	assert_int_equal(go_stack_find_switch_caller(gs, &mem, sf.bp + 16, &rules, &c), -ESRCH);
	struct go_stack_stats st;
	go_stack_get_stats(gs, &st);
	assert_int_equal(st.switch_callers, 1);
	go_stack_free(gs);
	free(stack);
}

/* Code for the caller found in code: its caller's call to it, the caller (a 64-byte frame keeping its frame pointer,
 * calls to the switching function at call_sites of its bytes), the switching function, INT3 padding between. */
#define CODE_BYTES (5 * 4096)	/* more than GO_STACK_CALLER_CODE_MAX past the caller */
#define OUTER_AT 0
#define CALLER_AT 64
#define SWITCH_AT 256

static void put_call(uint8_t *code, size_t at, size_t target)
{
	int32_t rel = (int32_t)target - (int32_t)(at + 5);
	code[at] = 0xe8;
	memcpy(code + at + 1, &rel, sizeof(rel));
}

static void code_init(uint8_t *code, struct rules_env *env, bool twice)
{
	static const uint8_t prologue[] = { 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x30 };	/* push, mov, sub */
	static const uint8_t epilogue[] = { 0x48, 0x83, 0xc4, 0x30, 0x5d, 0xc3 };		/* add, pop, ret */
	memset(code, 0xcc, CODE_BYTES);
	put_call(code, OUTER_AT, CALLER_AT);
	memcpy(code + CALLER_AT, prologue, sizeof(prologue));
	put_call(code, CALLER_AT + 8, SWITCH_AT);
	size_t end = CALLER_AT + 13;
	if (twice) {
		put_call(code, end, SWITCH_AT);
		end += 5;
	}
	memcpy(code + end, epilogue, sizeof(epilogue));
	code[SWITCH_AT] = 0xc3;
	fake_clear();
	fake_map(code, CODE_BYTES);
	*env = (struct rules_env){ .caller_pc = addr(code) + CALLER_AT + 13, .switch_entry = addr(code) + SWITCH_AT,
				   .frame = 64 };
}

/*
 * The caller of a systemstack call that is over, whose slot the goroutine wrote over: its function named by the
 * chain's next return address (its caller's direct call), its one call to the switching function found in its
 * code. No stack is read.
 */
static void test_switch_caller_in_code(void **state)
{
	(void)state;
	struct go_stack *gs = new_go_stack(8192);
	uint8_t *code = malloc(CODE_BYTES);
	struct rules_env env;
	struct go_stack_caller c;
	const struct go_stack_rules rules = { env_caller_keeps_fp, env_is_switch_entry, &env, env_caller_sp, NULL };
	uint64_t bp = 0x7e0000001000ull, after;
	assert_non_null(code);
	code_init(code, &env, false);
	after = addr(code) + OUTER_AT + 5;
	assert_int_equal(go_stack_find_switch_caller_in_code(gs, &mem, bp, after, &rules, &c), 0);
	assert_int_equal(c.pc, env.caller_pc);
	assert_int_equal(c.sp, bp + 16 - 64);
	assert_int_equal(c.callee, env.switch_entry);
	struct go_stack_stats st;
	go_stack_get_stats(gs, &st);
	assert_int_equal(st.switch_callers_in_code, 1);

	/* Two calls to the switching function: which one the sample was in is unknown. */
	code_init(code, &env, true);
	assert_int_equal(go_stack_find_switch_caller_in_code(gs, &mem, bp, after, &rules, &c), -ESRCH);
	/* No direct call before the chain's return address; no chain entry. */
	code_init(code, &env, false);
	code[OUTER_AT] = 0xff;
	assert_int_equal(go_stack_find_switch_caller_in_code(gs, &mem, bp, after, &rules, &c), -ESRCH);
	code[OUTER_AT] = 0xe8;
	assert_int_equal(go_stack_find_switch_caller_in_code(gs, &mem, bp, 0, &rules, &c), -ESRCH);
	/* A caller without a frame pointer of its own there (the rules say so), or rules that cannot tell. */
	env.caller_pc++;
	assert_int_equal(go_stack_find_switch_caller_in_code(gs, &mem, bp, after, &rules, &c), -ESRCH);
	env.caller_pc--;
	const struct go_stack_rules no_sp = { env_caller_keeps_fp, env_is_switch_entry, &env, NULL, NULL };
	assert_int_equal(go_stack_find_switch_caller_in_code(gs, &mem, bp, after, &no_sp, &c), -ESRCH);
	/* A function whose end is not found within the bound (no INT3 padding): not decoded further. */
	memset(code + CALLER_AT + 19, 0x90, CODE_BYTES - CALLER_AT - 19);
	assert_int_equal(go_stack_find_switch_caller_in_code(gs, &mem, bp, after, &rules, &c), -ESRCH);
	go_stack_get_stats(gs, &st);
	assert_int_equal(st.switch_callers_in_code, 1);
	go_stack_free(gs);
	free(code);
}

/* The words below the frame pointer are read with bounds: a stack with nothing mapped below, memory that is gone. */
static void test_switch_caller_bounded(void **state)
{
	(void)state;
	struct go_stack *gs = new_go_stack(8192);
	uint64_t *frame = calloc(1024, 8);	/* 8 KiB of stack, nothing below it in the fake process */
	struct switch_frame sf;
	struct rules_env env;
	struct go_stack_caller c;
	const struct go_stack_rules rules = { env_caller_keeps_fp, env_is_switch_entry, &env, env_caller_sp, NULL };
	assert_non_null(frame);
	switch_code_init(&sf, &env);
	fake_map(frame, 1024 * 8);
	/* The frame pointer 1 KiB into the stack: the 4 KiB window is not readable, the smaller one is. */
	uint64_t bp = addr((uint8_t *)frame + 1024);
	for (size_t i = 0; i < 256; i++)
		frame[i] = 0x7700000000000000ull + i;
	assert_int_equal(go_stack_find_switch_caller(gs, &mem, bp, &rules, &c), -ESRCH);
	frame[(1024 - 56) / 8] = env.caller_pc;
	unsigned reads = fake.reads;
	assert_int_equal(go_stack_find_switch_caller(gs, &mem, bp, &rules, &c), 0);
	assert_int_equal(c.sp, bp - 48);
	/* The 4 KiB window, the 512-byte one, then the caller's call instruction. */
	assert_int_equal(fake.reads - reads, 3);
	/* All of it gone. */
	fake_clear();
	assert_int_equal(go_stack_find_switch_caller(gs, &mem, bp, &rules, &c), -EIO);
	assert_int_equal(go_stack_find_switch_caller(gs, &mem, 0x1000, &rules, &c), -ESRCH);
	go_stack_free(gs);
	free(frame);
}

/* ---- the stack-switch hook (go_stack_follow), as the delta unwinder calls it ------------------------------- */

/* What the hook's caller gives it and is told: the goroutine it holds, the rules of the sample's code. */
struct follow_env {
	const struct go_stack_snapshot *held;
	const struct rules_env *rules;	/* NULL: no rule anywhere */
	unsigned told;
	enum go_stack_source source;
	int rc;
};

static const struct go_stack_snapshot *env_held(void *ctx, const struct unwind_process *proc)
{
	(void)proc;
	return ((const struct follow_env *)ctx)->held;
}

static void env_followed(void *ctx, const struct unwind_process *proc, enum go_stack_source source, int rc)
{
	struct follow_env *fe = ctx;
	(void)proc;
	fe->told++;
	fe->source = source;
	fe->rc = rc;
}

/* The rules of rules_env as delta-table rows: the caller's Go frame (CFA = SP + frame, its frame pointer at
 * CFA - 16) and the switching function's entry (a frame-pointer rule carrying the switch flag). */
static bool env_rule_at(void *ctx, const struct unwind_process *proc, uint64_t at, struct stack_delta_rule *rule)
{
	const struct follow_env *fe = ctx;
	(void)proc;
	if (fe->rules && at == fe->rules->caller_pc - 1) {
		*rule = (struct stack_delta_rule){ .kind = STACK_DELTA_CFA_SP, .fp = STACK_DELTA_FP_AT_CFA,
						   .fp_off = -16, .cfa_off = (int32_t)fe->rules->frame,
						   .aux = STACK_DELTA_GO_FP_FRAME };
		return true;
	}
	if (fe->rules && at == fe->rules->switch_entry) {
		*rule = (struct stack_delta_rule){ .kind = STACK_DELTA_CFA_FP, .fp = STACK_DELTA_FP_AT_CFA,
						   .fp_off = -16, .cfa_off = 16, .aux = STACK_DELTA_GO_STACK_SWITCH };
		return true;
	}
	return false;
}

static struct go_stack *new_follower(struct follow_env *fe)
{
	struct go_stack_options o = { .max_stack = 4096, .rule_at = env_rule_at, .held = env_held,
				      .followed = env_followed, .ctx = fe };
	struct go_stack *gs = NULL;
	assert_int_equal(go_stack_new(&o, &gs), 0);
	return gs;
}

/* A sample on g0 under a systemstack switch whose frame pointer the walk recovered as bp. */
static void switch_sample(struct unwind_sample *sample, struct unwind_deltas_regs *frame, uint64_t g_reg,
			  uint64_t bp)
{
	static const uint8_t g0_copy[256];
	memset(sample, 0, sizeof(*sample));
	memset(frame, 0, sizeof(*frame));
	sample->regs[UNWIND_REG_R14] = g_reg;
	sample->regs[UNWIND_REG_SP] = 0x7e0000001000ull;
	sample->stack = g0_copy;
	sample->stack_size = sizeof(g0_copy);
	frame->regs[UNWIND_REG_IP] = 0x402000;
	frame->regs[UNWIND_REG_SP] = sample->regs[UNWIND_REG_SP] + 128;
	frame->regs[UNWIND_REG_BP] = bp;
	frame->known = UNWIND_DELTAS_REG(UNWIND_REG_IP) | UNWIND_DELTAS_REG(UNWIND_REG_SP) |
		       UNWIND_DELTAS_REG(UNWIND_REG_BP);
}

static void test_follow_hook(void **state)
{
	(void)state;
	struct go_thread *t = malloc(sizeof(*t));
	struct follow_env fe = { 0 };
	struct go_stack *gs = new_follower(&fe);
	struct unwind_process proc = { .memory = &mem };
	struct unwind_sample sample, stack;
	struct unwind_deltas_regs frame, resumed;
	go_thread_init(t, 0, 2);
	switch_sample(&sample, &frame, addr(t->g0), sched_bp(t));
	/* Read through the reader: the goroutine's saved context, its stack up to its end. */
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack), 0);
	assert_int_equal(resumed.regs[UNWIND_REG_IP], 0x401234);
	assert_int_equal(resumed.regs[UNWIND_REG_SP], t->g[7]);
	assert_int_equal(resumed.regs[UNWIND_REG_BP], sched_bp(t));
	assert_true(resumed.exact_ip);
	assert_int_equal(stack.regs[UNWIND_REG_SP], t->g[7]);
	assert_int_equal(stack.stack_size, 256);
	assert_memory_equal(stack.stack, t->stack + STACK_SIZE - 256, 256);
	assert_int_equal(fe.source, GO_STACK_READ);
	assert_int_equal(fe.rc, 0);

	/* What the caller holds for this very switch is taken as it is: nothing is read. */
	static const uint8_t held_stack[64] = { 1, 2, 3 };
	struct go_stack_snapshot held = { .kind = GO_STACK_SNAPSHOT_GOROUTINE, .g = addr(t->g), .pc = 0x405555,
					  .sp = t->g[7] - 64, .bp = sched_bp(t), .addr = t->g[7] - 64,
					  .bytes = held_stack, .size = sizeof(held_stack) };
	fe.held = &held;
	unsigned reads = fake.reads;
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack), 0);
	assert_int_equal(resumed.regs[UNWIND_REG_IP], 0x405555);
	assert_ptr_equal(stack.stack, held_stack);
	assert_int_equal(fake.reads, reads);
	assert_int_equal(fe.source, GO_STACK_HELD);
	/* Held for another switch (another frame pointer): read instead. */
	held.bp += 16;
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack), 0);
	assert_int_equal(resumed.regs[UNWIND_REG_IP], 0x401234);
	assert_int_equal(fe.source, GO_STACK_READ);

	/* A systemstack switch whose frame pointer is unknown has nothing to check a goroutine against. */
	frame.known &= ~UNWIND_DELTAS_REG(UNWIND_REG_BP);
	fe.told = 0;
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack),
			 -ENOENT);
	/* Without a reader nothing is read: the walk ends at the switch. */
	frame.known |= UNWIND_DELTAS_REG(UNWIND_REG_BP);
	proc.memory = NULL;
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack),
			 -ENOENT);
	assert_int_equal(fe.told, 0);
	go_stack_free(gs);
	free(t);
}

/*
 * No goroutine to read (no g register), but the sample carries the kernel's frame-pointer chain: the hook names
 * the systemstack call's caller, below the frame pointer the g0 frames saved, for the walk to join the chain.
 */
static void test_follow_hook_joins_chain(void **state)
{
	(void)state;
	uint64_t *words = calloc(512, 8);
	static const uint64_t chain[2] = { 0x402000, 0x403000 };
	struct switch_frame sf;
	struct rules_env env;
	struct follow_env fe = { .rules = &env };
	struct go_stack *gs = new_follower(&fe);
	struct unwind_process proc = { .memory = &mem };
	struct unwind_sample sample, stack;
	struct unwind_deltas_regs frame, resumed;
	switch_frame_init(&sf, words, &env);
	switch_sample(&sample, &frame, 0, sf.bp);
	/* Without the chain there is nothing to join. */
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack),
			 -ESRCH);
	assert_int_equal(fe.rc, -ESRCH);
	sample.fp_chain = chain;
	sample.fp_chain_len = 2;
	unsigned told = fe.told;
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack),
			 UNWIND_DELTAS_SWITCH_JOIN);
	/* Joined before any read of the goroutine: told once, as joined. */
	assert_int_equal(fe.told, told + 1);
	assert_int_equal(fe.source, GO_STACK_JOINED);
	assert_int_equal(resumed.regs[UNWIND_REG_IP], env.caller_pc);
	assert_int_equal(resumed.regs[UNWIND_REG_SP], sf.slot + 8);
	assert_int_equal(resumed.regs[UNWIND_REG_BP], sf.bp);
	assert_false(resumed.exact_ip);
	assert_int_equal(stack.regs[UNWIND_REG_SP], sf.slot + 8);
	assert_int_equal(stack.stack_size, 0);
	/* A chain as long as the kernel's bound may have been cut there: the goroutine is read first (none here), and
	 * the chain joined only then. */
	static uint64_t long_chain[GO_STACK_CHAIN_CUT] = { 0x402000, 0x403000 };
	sample.fp_chain = long_chain;
	sample.fp_chain_len = GO_STACK_CHAIN_CUT;
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack),
			 UNWIND_DELTAS_SWITCH_JOIN);
	assert_int_equal(fe.source, GO_STACK_READ);
	assert_int_equal(fe.rc, -ESRCH);
	/* A switching function with a frame of its own is in the chain already: no join. */
	env.caller_pc = frame.regs[UNWIND_REG_IP];
	assert_int_equal(go_stack_follow(gs, &proc, &sample, &frame, UNWIND_DELTAS_SWITCH_CALL, &resumed, &stack),
			 -ENOENT);
	go_stack_free(gs);
	free(words);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follows_from_g0),
		cmocka_unit_test(test_follows_via_morebuf_without_g_register),
		cmocka_unit_test(test_stack_read_is_bounded),
		cmocka_unit_test(test_stale_context),
		cmocka_unit_test(test_bad_structures),
		cmocka_unit_test(test_follows_finished_growth),
		cmocka_unit_test(test_refuses_unproven_growth),
		cmocka_unit_test(test_grower_from_sample),
		cmocka_unit_test(test_switch_caller_found),
		cmocka_unit_test(test_switch_caller_bounded),
		cmocka_unit_test(test_switch_caller_in_code),
		cmocka_unit_test(test_follow_hook),
		cmocka_unit_test(test_follow_hook_joins_chain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
