/*
 * Unit tests for src/processes/hotspot.c over a JVM laid out in memory by the test: the exported VMStructs
 * globals, their struct and type tables (with JDK 17's offsets, entries the reader has no use for among them),
 * a code heap with its segment map, and blobs in it: a compiled method (its prologue and its body), the
 * interpreter, a runtime stub whose frame is never complete for the JVM, a blob longer than one hop of the
 * segment map can cross, and free space. The reader is the test's: what it may read is exactly what was laid out.
 * Then what a hostile or changing process may give: a segment map that points before the heap, a frame size
 * past the bound, unused blocks, missing or oversized table entries, code heaps not made yet, a method's name
 * too long; and the cache, which sees a change only after HOTSPOT_CACHE_NS, and answers for the code of a process
 * that is gone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/processes/hotspot.h"
#include "tests/lib/fake_jvm.h"

#define BASE FAKE_JVM_BASE
#define SEGMAP_OFF FAKE_JVM_SEGMAP_OFF
#define STRIDE FAKE_JVM_STRIDE

static int setup(void **state)
{
	*state = fake_jvm_new();
	return 0;
}

static int teardown(void **state)
{
	fake_jvm_free(*state);
	return 0;
}

static struct hotspot *open_jvm(struct fake_jvm *j)
{
	struct unwind_memory mem = { .read = fake_jvm_read, .ctx = j };
	struct hotspot *h = NULL;
	assert_int_equal(hotspot_open(&mem, j->globals, &h), 0);
	return h;
}

static void test_compiled_method(void **state)
{
	struct fake_jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	char name[64];
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 240 + 100), 1, &f), 1);	/* the body, read now */
	assert_int_equal(f.cfa_sp, 48);
	assert_true(f.fp_saved && f.leaf_shapes && !f.sender_sp);
	assert_int_equal(f.start, fake_jvm_code(0, 240 + 40));
	assert_int_equal(f.end, fake_jvm_code(0, 240 + 600));
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), (int)strlen("com.example.Work.fib"));
	assert_string_equal(name, "com.example.Work.fib");
	unsigned reads = j->reads;
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 240), 1, &f), 0);	/* its entry, the prologue: no read */
	assert_int_equal(j->reads, reads);
	assert_int_equal(f.cfa_sp, 8);
	assert_false(f.fp_saved);
	assert_int_equal(f.start, fake_jvm_code(0, 240));
	assert_int_equal(f.end, fake_jvm_code(0, 240 + 40));
	assert_int_equal(hotspot_blob_name(h, &f, name, 8), -EINVAL);		/* no room for the name */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 100), 1, &f), -EINVAL);	/* its header is not code */
	hotspot_free(h);
}

static void test_other_blobs(void **state)
{
	struct fake_jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	char name[64];
	assert_int_equal(hotspot_frame(h, fake_jvm_code(8, 104 + 8), 1, &f), 1);
	assert_true(f.cfa_sp == 0 && f.sender_sp && !f.leaf_shapes);
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), 11);
	assert_string_equal(name, "Interpreter");
	/* a runtime stub, never complete: sized throughout */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(12, 104), 1, &f), 1);
	assert_true(f.cfa_sp == 16 && f.fp_saved && f.start == fake_jvm_code(12, 104));
	uint64_t far = fake_jvm_code(20, 590 * 128);	/* three hops back to its block */
	assert_int_equal(hotspot_frame(h, far, 1, &f), 1);
	assert_true(f.cfa_sp == 0 && !f.sender_sp && f.leaf_shapes && f.start == fake_jvm_code(20, 104));
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), 16);
	assert_string_equal(name, "StubRoutines (1)");
	assert_int_equal(hotspot_frame(h, fake_jvm_code(700, 200), 1, &f), -ENOENT);	/* an unused block */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(900, 0), 1, &f), -ENOENT);	/* free segments */
	assert_int_equal(hotspot_frame(h, fake_jvm_heap_low() - 1, 1, &f), -ENOENT);	/* outside the heap */
	hotspot_free(h);
}

/* What a hostile or changing process may give: errors, never a read outside what it laid out. */
static void test_hostile_process(void **state)
{
	struct fake_jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	char name[64];
	j->mem[SEGMAP_OFF + 3] = 200;					/* a hop before the heap */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(3, 0), 1, &f), -EINVAL);
	fake_jvm_put32(j, fake_jvm_code(12, 0) + 28, 1u << 20);				/* a frame over the bound */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(12, 104), 1, &f), -EINVAL);
	fake_jvm_put32(j, fake_jvm_code(12, 0) + 28, 2);
	fake_jvm_put64(j, fake_jvm_code(12, 0) + 40, fake_jvm_code(12, 0) + 4096);	/* code past its block */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(12, 120), 1, &f), -EINVAL);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 300), 1, &f), 1);
	uint64_t m, cm, pool;
	memcpy(&m, j->mem + (fake_jvm_code(0, 0) + 112 - BASE), 8);
	memcpy(&cm, j->mem + (m + 8 - BASE), 8);
	memcpy(&pool, j->mem + (cm + 8 - BASE), 8);
	fake_jvm_put16(j, cm + 34, 9);						/* a name index past the pool */
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), -EINVAL);
	fake_jvm_put16(j, cm + 34, 5);
	fake_jvm_put64(j, pool + 24, 0x1234);					/* a holder nowhere */
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), -EFAULT);
	hotspot_free(h);
}

/* An interpreted frame's Method, a word from the stack: named when it leads to names, else refused. */
static void test_interpreted_method(void **state)
{
	struct fake_jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	char name[64];
	uint64_t m, cm, pool, klass, sym;
	memcpy(&m, j->mem + (fake_jvm_code(0, 0) + 112 - BASE), 8);
	assert_int_equal(hotspot_method_name(h, m, name, sizeof(name)), (int)strlen("com.example.Work.fib"));
	assert_string_equal(name, "com.example.Work.fib");
	assert_int_equal(hotspot_method_name(h, 0, name, sizeof(name)), -EINVAL);
	assert_int_equal(hotspot_method_name(h, m + 4, name, sizeof(name)), -EINVAL);	/* not 8-aligned */
	assert_int_equal(hotspot_method_name(h, 0x1230, name, sizeof(name)), -EFAULT);	/* nowhere */
	assert_true(hotspot_method_name(h, fake_jvm_code(8, 0), name, sizeof(name)) < 0);	/* a blob's header */
	memcpy(&cm, j->mem + (m + 8 - BASE), 8);
	memcpy(&pool, j->mem + (cm + 8 - BASE), 8);
	memcpy(&klass, j->mem + (pool + 24 - BASE), 8);
	memcpy(&sym, j->mem + (klass + 24 - BASE), 8);
	j->mem[sym + 6 + 3 - BASE] = 1;						/* no name holds a control byte */
	assert_int_equal(hotspot_method_name(h, m, name, sizeof(name)), -EINVAL);
	j->mem[sym + 6 + 3 - BASE] = 'e';
	j->gone = true;
	assert_int_equal(hotspot_method_name(h, m, name, sizeof(name)), -ESRCH);
	hotspot_process_gone(h);
	j->gone = false;
	assert_int_equal(hotspot_method_name(h, m, name, sizeof(name)), -ESRCH);	/* nothing read once gone */
	hotspot_free(h);
}

static void test_tables_refused(void **state)
{
	struct fake_jvm *j = *state;
	struct unwind_memory mem = { .read = fake_jvm_read, .ctx = j };
	struct hotspot *h = NULL;
	uint64_t stride;
	memcpy(&stride, j->mem + (j->globals[HOTSPOT_GLOBAL_STRUCT_STRIDE] - BASE), 8);
	fake_jvm_put64(j, j->globals[HOTSPOT_GLOBAL_STRUCT_STRIDE], 4096);	/* entries too large to be ones */
	assert_int_equal(hotspot_open(&mem, j->globals, &h), -EINVAL);
	fake_jvm_put64(j, j->globals[HOTSPOT_GLOBAL_STRUCT_STRIDE], stride);
	uint64_t saved = j->globals[HOTSPOT_GLOBAL_TYPES];
	j->globals[HOTSPOT_GLOBAL_TYPES] = 0x20;				/* a global that cannot be read */
	assert_int_equal(hotspot_open(&mem, j->globals, &h), -EFAULT);
	j->globals[HOTSPOT_GLOBAL_TYPES] = saved;
	/* CodeBlob::_frame_size's entry renamed: a layout this reader does not know */
	fake_jvm_put64(j, j->structs + 15 * STRIDE, fake_jvm_str(j, "CodeBlob_renamed"));
	assert_int_equal(hotspot_open(&mem, j->globals, &h), -ENOENT);	/* a layout this reader does not know */
	assert_null(h);
}

/* A JVM still starting has no code heap: -EAGAIN, tried again after a while, then found. */
static void test_heaps_not_made_yet(void **state)
{
	struct fake_jvm *j = *state;
	uint64_t array;
	memcpy(&array, j->mem + (j->heaps_cell - BASE), 8);
	fake_jvm_put64(j, j->heaps_cell, 0);
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 300), 1000, &f), -EAGAIN);
	fake_jvm_put64(j, j->heaps_cell, array);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 300), 2000, &f), -EAGAIN);	/* not tried again so soon */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 300), 1000 + 200000000ull, &f), 1);
	hotspot_free(h);
}

/* A frame found is believed for HOTSPOT_CACHE_NS over its blob's code, then read again. */
static void test_cache(void **state)
{
	struct fake_jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 300), 1, &f), 1);
	fake_jvm_put32(j, fake_jvm_code(0, 0) + 28, 10);	/* the JVM reused the space */
	unsigned reads = j->reads;
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 301), 2, &f), 0);		/* from the cache */
	assert_int_equal(f.cfa_sp, 48);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 500), 2, &f), 0);		/* another line: the blob's */
	assert_int_equal(f.cfa_sp, 48);
	assert_int_equal(j->reads, reads);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 300), 2 + HOTSPOT_CACHE_NS, &f), 1);
	assert_int_equal(f.cfa_sp, 80);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 600), 2 + HOTSPOT_CACHE_NS, &f), 0);
	assert_int_equal(f.cfa_sp, 80);
	/* blobs met in any order are each found again, each by its own code */
	uint64_t at[] = { fake_jvm_code(20, 590 * 128), fake_jvm_code(8, 112), fake_jvm_code(12, 104) };
	uint32_t cfa[] = { 0, 0, 16 };
	for (int i = 0; i < 3; i++)
		assert_int_equal(hotspot_frame(h, at[i], 3 + HOTSPOT_CACHE_NS, &f), 1);
	reads = j->reads;
	for (int i = 2; i >= 0; i--) {
		assert_int_equal(hotspot_frame(h, at[i] + 1, 4 + HOTSPOT_CACHE_NS, &f), 0);
		assert_int_equal(f.cfa_sp, cfa[i]);
		assert_true(at[i] >= f.code_begin && at[i] < f.code_end);
	}
	assert_int_equal(j->reads, reads);
	hotspot_free(h);
}

/* A frame found from a blob met is believed for as long as the blob, from when it was read; code the JVM laid out
 * anew replaces the blobs it overlaps, each address then answered by the blob that holds it now. */
static void test_blobs_replaced(void **state)
{
	struct fake_jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	const uint64_t t = 1, later = 2 + HOTSPOT_CACHE_NS;
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 300), t, &f), 1);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(8, 200), t, &f), 1);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 500), t + HOTSPOT_CACHE_NS - 1, &f), 0);	/* its blob's */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 500), later, &f), 1);	/* as old as its blob: read */
	/* freed and laid out anew: A2 in segments 0-1, B2 over the rest of the old method and the interpreter */
	fake_jvm_add_blob(j, 0, 2, "A2", 104, 96, 2, -1);
	fake_jvm_add_blob(j, 2, 10, "B2", 104, 1000, 4, -1);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(2, 500), 2 * later, &f), 1);
	assert_int_equal(f.cfa_sp, 32);
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 150), 2 * later, &f), 1);
	assert_int_equal(f.cfa_sp, 16);
	unsigned reads = j->reads;
	struct { uint64_t addr; uint32_t cfa; } now[] = {
		{ fake_jvm_code(0, 120), 16 }, { fake_jvm_code(2, 200), 32 }, { fake_jvm_code(2, 1100), 32 },
		{ fake_jvm_code(8, 200), 32 },	/* where the interpreter was: B2's now */
	};
	for (size_t i = 0; i < sizeof(now) / sizeof(now[0]); i++) {
		assert_int_equal(hotspot_frame(h, now[i].addr, 2 * later, &f), 0);
		assert_int_equal(f.cfa_sp, now[i].cfa);
		assert_false(f.sender_sp);
	}
	assert_int_equal(j->reads, reads);
	hotspot_free(h);
}

/* Once the process is gone, a frame cached for its blob answers for any address in that code, however old. */
static void test_process_gone(void **state)
{
	struct fake_jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 300), 1, &f), 1);
	j->gone = true;
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 700), 5 * HOTSPOT_CACHE_NS, &f), 0);	/* another line */
	assert_int_equal(f.cfa_sp, 48);
	/* the prologue, of the blob met */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(0, 250), 5 * HOTSPOT_CACHE_NS, &f), 0);
	assert_int_equal(f.cfa_sp, 8);
	/* a blob never met */
	assert_int_equal(hotspot_frame(h, fake_jvm_code(8, 120), 5 * HOTSPOT_CACHE_NS, &f), -ESRCH);
	hotspot_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_compiled_method, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_blobs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_process, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interpreted_method, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tables_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_heaps_not_made_yet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blobs_replaced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_process_gone, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
