/*
 * Unit tests for src/processes/stackext.c: a "thread stack" laid out in this process's own memory, a copy of its first
 * part as the kernel would have taken it, and the rest read back through the live-process reader (procmem.h) on
 * our own pid.
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

#include "src/processes/procmem.h"
#include "src/processes/stackext.h"

#define LIVE_SIZE (256u * 1024u)	/* the whole stack, in our memory */
#define COPY_SIZE (64u * 1024u - 224u)	/* what the kernel copied of it (a 64 KiB record, less its header) */

struct fixture {
	uint8_t *map;		/* LIVE_SIZE readable bytes, then an inaccessible page */
	uint8_t *copy;		/* the first COPY_SIZE bytes, as sampled */
	size_t page;
};

static uint64_t addr(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* This process, through the reader a session gives stackext. */
static pid_t self_pid;
static struct unwind_memory self_mem;

static struct stackext *new_ext(size_t max_bytes)
{
	struct stackext *x = NULL;
	assert_int_equal(stackext_new(max_bytes, &x), 0);
	return x;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->page = (size_t)sysconf(_SC_PAGESIZE);
	f->map = mmap(NULL, LIVE_SIZE + f->page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(f->map != MAP_FAILED);
	assert_int_equal(mprotect(f->map + LIVE_SIZE, f->page, PROT_NONE), 0);
	for (size_t i = 0; i < LIVE_SIZE; i++)
		f->map[i] = (uint8_t)(i * 13 + (i >> 9));
	f->copy = malloc(COPY_SIZE);
	assert_non_null(f->copy);
	memcpy(f->copy, f->map, COPY_SIZE);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	munmap(f->map, LIVE_SIZE + f->page);
	free(f->copy);
	free(f);
	return 0;
}

static struct stackext_stack sampled(const struct fixture *f)
{
	return (struct stackext_stack){ .sp = addr(f->map), .bytes = f->copy, .size = COPY_SIZE, .lo = 0,
					.hi = UINT64_MAX };
}

static void test_reads_on_past_the_copy(void **state)
{
	struct fixture *f = *state;
	struct stackext *x = new_ext(LIVE_SIZE);
	struct stackext_stack have = sampled(f), got;
	uint64_t want = addr(f->map) + COPY_SIZE + 1000;
	assert_int_equal(stackext_read(x, &self_mem, &have, want, &got), 0);
	assert_int_equal(got.sp, have.sp);
	assert_true(got.size >= COPY_SIZE + 1008 && got.size <= LIVE_SIZE);
	assert_memory_equal(got.bytes, f->map, got.size);
	/* Again from the extension itself (its own buffer), further: the bytes already read stay. */
	struct stackext_stack more;
	want = addr(f->map) + got.size + 5000;
	assert_int_equal(stackext_read(x, &self_mem, &got, want, &more), 0);
	assert_true(more.size >= want + 8 - addr(f->map));
	assert_memory_equal(more.bytes, f->map, more.size);
	struct stackext_stats st;
	stackext_get_stats(x, &st);
	assert_int_equal(st.extended, 2);
	stackext_free(x);
}

/* A walk reads on a chunk at a time, each from what the last gave, up to the limit and not past it. */
static void test_reads_on_to_the_limit(void **state)
{
	struct fixture *f = *state;
	struct stackext *x = new_ext(LIVE_SIZE - 4096);
	struct stackext_stack have = sampled(f), got;
	unsigned reads = 0;
	assert_false(stackext_owns(x, have.bytes));
	while (have.size < LIVE_SIZE - 4096) {
		assert_int_equal(stackext_read(x, &self_mem, &have, addr(f->map) + have.size, &got), 0);
		assert_true(stackext_owns(x, got.bytes));
		assert_true(got.size > have.size && got.size <= LIVE_SIZE - 4096);
		assert_memory_equal(got.bytes, f->map, got.size);
		have = got;
		reads++;
	}
	/* Each read takes at least as much again as the walk has: a few, not one per page. */
	assert_true(reads >= 2 && reads <= 3);
	assert_int_equal(stackext_read(x, &self_mem, &have, addr(f->map) + have.size, &got), -E2BIG);
	/* What a read gave is checked against the process too: its end changed, it is stale. */
	have.size = COPY_SIZE + 8192;
	f->map[have.size - 8] ^= 0xff;
	assert_int_equal(stackext_read(x, &self_mem, &have, addr(f->map) + have.size, &got), -ESTALE);
	f->map[have.size - 8] ^= 0xff;
	stackext_free(x);
}

static void test_changed_end_of_copy_is_stale(void **state)
{
	struct fixture *f = *state;
	struct stackext *x = new_ext(LIVE_SIZE);
	struct stackext_stack have = sampled(f), got;
	/* The thread returned past the end of the copy and wrote the frames just below it. */
	f->map[COPY_SIZE - 100] ^= 0xff;
	assert_int_equal(stackext_read(x, &self_mem, &have, addr(f->map) + COPY_SIZE + 8, &got), -ESTALE);
	f->map[COPY_SIZE - 100] ^= 0xff;
	/* A change further down the copy (a frame still running) does not matter. */
	f->map[100] ^= 0xff;
	assert_int_equal(stackext_read(x, &self_mem, &have, addr(f->map) + COPY_SIZE + 8, &got), 0);
	f->map[100] ^= 0xff;
	struct stackext_stats st;
	stackext_get_stats(x, &st);
	assert_int_equal(st.stale, 1);
	assert_int_equal(st.extended, 1);
	stackext_free(x);
}

static void test_limits_and_bounds(void **state)
{
	struct fixture *f = *state;
	struct stackext *x = new_ext(128 * 1024);
	struct stackext_stack have = sampled(f), got;
	uint64_t sp = addr(f->map);
	/* Past --max-stack, counted from the sampled SP. */
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + 200 * 1024, &got), -E2BIG);
	/* Reads stop at the end of the stack as Go knows it, and a stack Go moved is not read at all. */
	have.lo = sp;
	have.hi = sp + COPY_SIZE + 4096;
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + COPY_SIZE + 64, &got), 0);
	assert_int_equal(got.size, COPY_SIZE + 4096);
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + COPY_SIZE + 4096, &got), -E2BIG);
	have.lo = sp + 4096;
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + COPY_SIZE + 64, &got), -ESTALE);
	/* Not past the copy (the caller's mistake, not counted), or too short a copy to witness anything (an empty
	 * one: the sample caught the thread faulting in its stack page), counted. */
	have = sampled(f);
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + 64, &got), -EINVAL);
	have.size = 64;
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + 4096, &got), -ENODATA);
	have.size = 0;
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + 4096, &got), -ENODATA);
	struct stackext_stats st;
	stackext_get_stats(x, &st);
	assert_int_equal(st.too_short, 2);
	assert_int_equal(st.extended, 1);
	assert_int_equal(st.stale, 1);
	assert_int_equal(st.beyond_limit, 2);
	stackext_free(x);
}

static void test_unreadable_memory(void **state)
{
	struct fixture *f = *state;
	struct stackext *x = new_ext(1024 * 1024);
	struct stackext_stack have = sampled(f), got;
	uint64_t sp = addr(f->map);
	/* The read stops at the inaccessible page: enough for an address before it, not for one past it. */
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + LIVE_SIZE - 8, &got), 0);
	assert_int_equal(got.size, LIVE_SIZE);
	assert_int_equal(stackext_read(x, &self_mem, &have, sp + LIVE_SIZE + 8, &got), -EIO);
	/* A process that is gone. */
	pid_t gone = 0x7ffffff0;
	struct unwind_memory gone_mem = procmem_reader(&gone);
	assert_int_equal(stackext_read(x, &gone_mem, &have, sp + COPY_SIZE + 8, &got), -EIO);
	struct stackext_stats st;
	stackext_get_stats(x, &st);
	assert_int_equal(st.unreadable, 2);
	stackext_free(x);
}

int main(void)
{
	self_pid = getpid();
	self_mem = procmem_reader(&self_pid);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reads_on_past_the_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reads_on_to_the_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changed_end_of_copy_is_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits_and_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unreadable_memory, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
