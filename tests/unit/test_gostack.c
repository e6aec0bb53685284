/*
 * Unit tests for src/gostack.c: Go runtime structures (g0, m, the current goroutine, its stack) laid out in this
 * process's own memory as the Go runtime lays them out, read back through process_vm_readv on our own pid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/gostack.h"

#define STACK_SIZE 8192

/* A fake Go thread: g0 and the goroutine (g), the m they share, the goroutine's stack. */
struct go_thread {
	uint64_t g0[32], g[32], m[32];
	uint8_t stack[STACK_SIZE] __attribute__((aligned(16)));
	/* layout: 7-field gobuf (bp at g+104, m.curg at m+192, status at g+144) or 6-field (g+96, m+184) */
	int six_fields;
};

static uint64_t addr(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* g.sched = {sp, pc, bp} with the stack's top 256 bytes in use; status is atomicstatus. */
static void go_thread_init(struct go_thread *t, int six_fields, uint32_t status)
{
	memset(t, 0, sizeof(*t));
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
		struct gostack *gs = gostack_new(4096);
		struct gostack_context ctx;
		struct gostack_stats st;
		go_thread_init(t, six, 2);
		assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t), &ctx), 0);
		assert_int_equal(ctx.sp, t->g[7]);
		assert_int_equal(ctx.pc, 0x401234);
		assert_int_equal(ctx.bp, sched_bp(t));
		assert_int_equal(ctx.size, 256); /* up to stack.hi */
		assert_memory_equal(ctx.stack, t->stack + STACK_SIZE - 256, 256);
		/* The g register may hold the goroutine itself (cgo: C code keeps Go's R14). */
		assert_int_equal(gostack_read(gs, getpid(), addr(t->g), sched_bp(t), &ctx), 0);
		gostack_get_stats(gs, &st);
		assert_int_equal(st.followed, 2);
		gostack_free(gs);
		free(t);
	}
}

static void test_stack_read_is_bounded(void **state)
{
	(void)state;
	struct go_thread *t = malloc(sizeof(*t));
	struct gostack *gs = gostack_new(64);
	struct gostack_context ctx;
	go_thread_init(t, 0, 2);
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t), &ctx), 0);
	assert_int_equal(ctx.size, 64);
	gostack_free(gs);
	free(t);
}

/* A context saved at another switch than the sampled one is refused, unless the goroutine is copying its stack. */
static void test_stale_context(void **state)
{
	(void)state;
	struct go_thread *t = malloc(sizeof(*t));
	struct gostack *gs = gostack_new(4096);
	struct gostack_context ctx;
	struct gostack_stats st;
	go_thread_init(t, 0, 2);
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t) + 16, &ctx), -ESTALE);
	go_thread_init(t, 0, 8 | 0x1000);	/* _Gcopystack, with the GC's scan bit */
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t) + 16, &ctx), 0);
	go_thread_init(t, 0, 2);
	t->g[7] = 0;				/* gogo cleared sched.sp: the goroutine runs again */
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t), &ctx), -ESTALE);
	gostack_get_stats(gs, &st);
	assert_int_equal(st.stale, 2);
	assert_int_equal(st.followed, 1);
	gostack_free(gs);
	free(t);
}

/* Structures that do not check out are refused, never followed. */
static void test_bad_structures(void **state)
{
	(void)state;
	struct go_thread *t = malloc(sizeof(*t));
	struct gostack *gs = gostack_new(4096);
	struct gostack_context ctx;
	struct gostack_stats st;

	go_thread_init(t, 0, 2);
	t->g[6] = addr(t->g0);			/* curg.m is not this m */
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t), &ctx), -ESRCH);
	go_thread_init(t, 0, 2);
	t->m[0] = addr(t->g);			/* m.g0 is not g0, and g is not m.curg either */
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t), &ctx), -ESRCH);
	go_thread_init(t, 0, 2);
	t->g[7] = addr(t->stack) - 8;		/* sched.sp below the goroutine's stack */
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t), &ctx), -ESRCH);
	go_thread_init(t, 0, 2);
	t->g[1] = t->g[0] + (2ull << 30);	/* a 2 GiB goroutine stack */
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0), sched_bp(t), &ctx), -ESRCH);
	assert_int_equal(gostack_read(gs, getpid(), 0, 0, &ctx), -ESRCH);		/* no g register */
	assert_int_equal(gostack_read(gs, getpid(), addr(t->g0) + 3, 0, &ctx), -ESRCH); /* misaligned */

	/* A g register pointing at memory that is gone. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *gone = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(gone != MAP_FAILED);
	assert_int_equal(munmap(gone, page), 0);
	assert_int_equal(gostack_read(gs, getpid(), addr(gone), 0, &ctx), -EIO);
	gostack_get_stats(gs, &st);
	assert_int_equal(st.no_goroutine, 6);
	assert_int_equal(st.unreadable, 1);
	assert_int_equal(st.followed, 0);
	gostack_free(gs);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follows_from_g0),
		cmocka_unit_test(test_stack_read_is_bounded),
		cmocka_unit_test(test_stale_context),
		cmocka_unit_test(test_bad_structures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
