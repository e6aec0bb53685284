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

#define BASE 0x10000000ull		/* the fake process's memory: [BASE, BASE + SIZE) */
#define SIZE (1u << 20)
#define STRIDE 48			/* a VMStructs entry: type, field, type string, static, offset, address */
#define HEAP_OFF 0x80000u		/* the code heap's memory, 1024 segments of 128 bytes */
#define SEGMAP_OFF 0x7f000u
#define LOG2_SEG 7
#define NSEGS 1024

struct jvm {
	uint8_t *mem;
	size_t used;	/* bump allocator for strings and structures */
	uint64_t globals[HOTSPOT_NGLOBALS];
	uint64_t heaps_cell;	/* CodeCache::_heaps */
	uint64_t structs;	/* the struct table */
	unsigned nstructs;
	bool gone;		/* the process exited: every read fails */
};

static ssize_t fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct jvm *j = ctx;
	if (j->gone)
		return -ESRCH;
	if (addr < BASE || addr >= BASE + SIZE)
		return -EFAULT;
	size_t n = BASE + SIZE - addr < len ? (size_t)(BASE + SIZE - addr) : len;
	memcpy(buf, j->mem + (addr - BASE), n);
	return (ssize_t)n;
}

static uint64_t alloc(struct jvm *j, size_t n)
{
	uint64_t at = BASE + j->used;
	j->used += (n + 15) & ~(size_t)15;
	assert_true(j->used < SEGMAP_OFF);
	return at;
}

static void put64(struct jvm *j, uint64_t addr, uint64_t v)
{
	memcpy(j->mem + (addr - BASE), &v, 8);
}

static void put32(struct jvm *j, uint64_t addr, uint32_t v)
{
	memcpy(j->mem + (addr - BASE), &v, 4);
}

static void put16(struct jvm *j, uint64_t addr, uint16_t v)
{
	memcpy(j->mem + (addr - BASE), &v, 2);
}

static uint64_t str(struct jvm *j, const char *s)
{
	uint64_t at = alloc(j, strlen(s) + 1);
	memcpy(j->mem + (at - BASE), s, strlen(s) + 1);
	return at;
}

static void struct_entry(struct jvm *j, const char *type, const char *field, uint64_t offset, uint64_t address)
{
	uint64_t e = j->structs + (uint64_t)j->nstructs++ * STRIDE;
	put64(j, e, type ? str(j, type) : 0);
	put64(j, e + 8, field ? str(j, field) : 0);
	put32(j, e + 24, address != 0);
	put64(j, e + 32, offset);
	put64(j, e + 40, address);
}

/* The globals, each a word of its own holding its value. */
static void globals(struct jvm *j, uint64_t structs, uint64_t types)
{
	const uint64_t values[HOTSPOT_NGLOBALS] = {
		[HOTSPOT_GLOBAL_STRUCTS] = structs, [HOTSPOT_GLOBAL_STRUCT_STRIDE] = STRIDE,
		[HOTSPOT_GLOBAL_STRUCT_TYPE_NAME] = 0, [HOTSPOT_GLOBAL_STRUCT_FIELD_NAME] = 8,
		[HOTSPOT_GLOBAL_STRUCT_OFFSET] = 32, [HOTSPOT_GLOBAL_STRUCT_ADDRESS] = 40,
		[HOTSPOT_GLOBAL_TYPES] = types, [HOTSPOT_GLOBAL_TYPE_STRIDE] = STRIDE,
		[HOTSPOT_GLOBAL_TYPE_NAME] = 0, [HOTSPOT_GLOBAL_TYPE_SIZE] = 32,
	};
	for (unsigned i = 0; i < HOTSPOT_NGLOBALS; i++) {
		j->globals[i] = alloc(j, 8);
		put64(j, j->globals[i], values[i]);
	}
}

/* JDK 17's tables: the fields the reader needs, at JDK 17's offsets, with others around them. */
static void tables(struct jvm *j)
{
	j->structs = alloc(j, 40 * STRIDE);
	j->heaps_cell = alloc(j, 8);
	struct_entry(j, "Universe", "_collectedHeap", 0, alloc(j, 8));	/* not one of the reader's */
	struct_entry(j, "CodeCache", "_heaps", 0, j->heaps_cell);
	struct_entry(j, "GrowableArrayBase", "_len", 0, 0);
	struct_entry(j, "GrowableArrayBase", "_max", 4, 0);
	struct_entry(j, "GrowableArray<int>", "_data", 8, 0);
	struct_entry(j, "CodeHeap", "_memory", 8, 0);
	struct_entry(j, "CodeHeap", "_segmap", 120, 0);
	struct_entry(j, "CodeHeap", "_log2_segment_size", 256, 0);
	struct_entry(j, "VirtualSpace", "_low_boundary", 0, 0);
	struct_entry(j, "VirtualSpace", "_high_boundary", 8, 0);
	struct_entry(j, "VirtualSpace", "_low", 16, 0);
	struct_entry(j, "HeapBlock::Header", "_length", 0, 0);
	struct_entry(j, "HeapBlock::Header", "_used", 8, 0);
	struct_entry(j, "CodeBlob", "_name", 96, 0);
	struct_entry(j, "CodeBlob", "_frame_complete_offset", 20, 0);
	struct_entry(j, "CodeBlob", "_frame_size", 28, 0);
	struct_entry(j, "CodeBlob", "_code_begin", 32, 0);
	struct_entry(j, "CodeBlob", "_code_end", 40, 0);
	struct_entry(j, "CompiledMethod", "_method", 112, 0);
	struct_entry(j, "Method", "_constMethod", 8, 0);
	struct_entry(j, "ConstMethod", "_constants", 8, 0);
	struct_entry(j, "ConstMethod", "_name_index", 34, 0);
	struct_entry(j, "ConstantPool", "_pool_holder", 24, 0);
	struct_entry(j, "ConstantPool", "_length", 48, 0);
	struct_entry(j, "Klass", "_name", 24, 0);
	struct_entry(j, "Symbol", "_length", 4, 0);
	struct_entry(j, "Symbol", "_body", 6, 0);
	struct_entry(j, NULL, NULL, 0, 0);	/* the end */
	uint64_t types = alloc(j, 5 * STRIDE);
	const char *names[] = { "HeapBlock", "CodeBlob", "ConstantPool", "Klass" };
	const uint64_t sizes[] = { 16, 104, 72, 208 };
	for (unsigned i = 0; i < 4; i++) {
		put64(j, types + i * STRIDE, str(j, names[i]));
		put64(j, types + i * STRIDE + 32, sizes[i]);
	}
	put64(j, types + 4 * STRIDE, 0);
	globals(j, j->structs, types);
}

static uint64_t heap_low(void)
{
	return BASE + HEAP_OFF;
}

/* A used block of n segments at segment seg, its segment map bytes counting back to it (254 at most a hop). */
static uint64_t block(struct jvm *j, unsigned seg, unsigned n, bool used)
{
	uint64_t b = heap_low() + ((uint64_t)seg << LOG2_SEG);
	for (unsigned i = 0; i < n; i++)
		j->mem[SEGMAP_OFF + seg + i] = (uint8_t)(i < 254 ? i : 254);
	put64(j, b, n);
	j->mem[b - BASE + 8] = used;
	return b + 16;	/* the blob */
}

static void blob(struct jvm *j, uint64_t b, const char *name, uint64_t code_off, uint64_t code_len, int32_t words,
		 int32_t complete)
{
	put64(j, b + 96, str(j, name));
	put32(j, b + 20, (uint32_t)complete);
	put32(j, b + 28, (uint32_t)words);
	put64(j, b + 32, b + code_off);
	put64(j, b + 40, b + code_off + code_len);
}

static uint64_t symbol(struct jvm *j, const char *text)
{
	uint64_t s = alloc(j, 6 + strlen(text));
	put16(j, s + 4, (uint16_t)strlen(text));
	memcpy(j->mem + (s + 6 - BASE), text, strlen(text));
	return s;
}

/* A compiled method's Method, ConstMethod and constant pool, its class com/example/Work, its name fib. */
static void method(struct jvm *j, uint64_t nmethod)
{
	uint64_t m = alloc(j, 88), cm = alloc(j, 48), pool = alloc(j, 72 + 8 * 8), klass = alloc(j, 208);
	put64(j, nmethod + 112, m);
	put64(j, m + 8, cm);
	put64(j, cm + 8, pool);
	put16(j, cm + 34, 5);
	put64(j, pool + 24, klass);
	put32(j, pool + 48, 8);
	put64(j, pool + 72 + 5 * 8, symbol(j, "fib"));
	put64(j, klass + 24, symbol(j, "com/example/Work"));
}

/* The heap (one of one) and its blobs. */
static void heap(struct jvm *j)
{
	uint64_t array = alloc(j, 16), data = alloc(j, 8), h = alloc(j, 344);
	put64(j, j->heaps_cell, array);
	put32(j, array, 1);
	put64(j, array + 8, data);
	put64(j, data, h);
	put64(j, h + 8 + 16, heap_low());			/* _memory._low */
	put64(j, h + 8 + 8, heap_low() + NSEGS * 128);		/* _memory._high_boundary */
	put64(j, h + 120 + 16, BASE + SEGMAP_OFF);		/* _segmap._low */
	put32(j, h + 256, LOG2_SEG);
	memset(j->mem + SEGMAP_OFF, 0xff, NSEGS);
	uint64_t nm = block(j, 0, 8, true);			/* [0, 1024): a compiled method */
	blob(j, nm, "nmethod", 240, 600, 6, 40);
	method(j, nm);
	blob(j, block(j, 8, 4, true), "Interpreter", 104, 300, 0, -1);
	blob(j, block(j, 12, 2, true), "_new_instance_Java", 104, 100, 2, -1);
	blob(j, block(j, 20, 600, true), "StubRoutines (1)", 104, 600 * 128 - 200, 0, -1);
	block(j, 700, 4, false);				/* a block freed, not yet merged */
}

static int setup(void **state)
{
	struct jvm *j = calloc(1, sizeof(*j));
	j->mem = calloc(1, SIZE);
	tables(j);
	heap(j);
	*state = j;
	return 0;
}

static int teardown(void **state)
{
	struct jvm *j = *state;
	free(j->mem);
	free(j);
	return 0;
}

static struct hotspot *open_jvm(struct jvm *j)
{
	struct unwind_memory mem = { .read = fake_read, .ctx = j };
	struct hotspot *h = NULL;
	assert_int_equal(hotspot_open(&mem, j->globals, &h), 0);
	return h;
}

static uint64_t code(unsigned seg, uint64_t off)
{
	return heap_low() + ((uint64_t)seg << LOG2_SEG) + 16 + off;
}

static void test_compiled_method(void **state)
{
	struct jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	char name[64];
	assert_int_equal(hotspot_frame(h, code(0, 240 + 100), 1, &f), 1);	/* the body, read now */
	assert_int_equal(f.cfa_sp, 48);
	assert_true(f.fp_saved && f.leaf_shapes && !f.sender_sp);
	assert_int_equal(f.start, code(0, 240 + 40));
	assert_int_equal(f.end, code(0, 240 + 600));
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), (int)strlen("com.example.Work.fib"));
	assert_string_equal(name, "com.example.Work.fib");
	assert_int_equal(hotspot_frame(h, code(0, 240), 1, &f), 1);		/* its entry, the prologue */
	assert_int_equal(f.cfa_sp, 8);
	assert_false(f.fp_saved);
	assert_int_equal(f.start, code(0, 240));
	assert_int_equal(f.end, code(0, 240 + 40));
	assert_int_equal(hotspot_blob_name(h, &f, name, 8), -EINVAL);		/* no room for the name */
	assert_int_equal(hotspot_frame(h, code(0, 100), 1, &f), -EINVAL);	/* its header is not code */
	hotspot_free(h);
}

static void test_other_blobs(void **state)
{
	struct jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	char name[64];
	assert_int_equal(hotspot_frame(h, code(8, 104 + 8), 1, &f), 1);
	assert_true(f.cfa_sp == 0 && f.sender_sp && !f.leaf_shapes);
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), 11);
	assert_string_equal(name, "Interpreter");
	assert_int_equal(hotspot_frame(h, code(12, 104), 1, &f), 1);		/* never complete: sized throughout */
	assert_true(f.cfa_sp == 16 && f.fp_saved && f.start == code(12, 104));
	uint64_t far = code(20, 590 * 128);					/* three hops back to its block */
	assert_int_equal(hotspot_frame(h, far, 1, &f), 1);
	assert_true(f.cfa_sp == 0 && !f.sender_sp && f.leaf_shapes && f.start == code(20, 104));
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), 16);
	assert_string_equal(name, "StubRoutines (1)");
	assert_int_equal(hotspot_frame(h, code(700, 200), 1, &f), -ENOENT);	/* an unused block */
	assert_int_equal(hotspot_frame(h, code(900, 0), 1, &f), -ENOENT);	/* free segments */
	assert_int_equal(hotspot_frame(h, heap_low() - 1, 1, &f), -ENOENT);	/* outside the heap */
	hotspot_free(h);
}

/* What a hostile or changing process may give: errors, never a read outside what it laid out. */
static void test_hostile_process(void **state)
{
	struct jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	char name[64];
	j->mem[SEGMAP_OFF + 3] = 200;					/* a hop before the heap */
	assert_int_equal(hotspot_frame(h, code(3, 0), 1, &f), -EINVAL);
	put32(j, code(12, 0) + 28, 1u << 20);				/* a frame over the bound */
	assert_int_equal(hotspot_frame(h, code(12, 104), 1, &f), -EINVAL);
	put32(j, code(12, 0) + 28, 2);
	put64(j, code(12, 0) + 40, code(12, 0) + 4096);			/* code past its block */
	assert_int_equal(hotspot_frame(h, code(12, 120), 1, &f), -EINVAL);
	assert_int_equal(hotspot_frame(h, code(0, 300), 1, &f), 1);
	uint64_t m, cm, pool;
	memcpy(&m, j->mem + (code(0, 0) + 112 - BASE), 8);
	memcpy(&cm, j->mem + (m + 8 - BASE), 8);
	memcpy(&pool, j->mem + (cm + 8 - BASE), 8);
	put16(j, cm + 34, 9);						/* a name index past the pool */
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), -EINVAL);
	put16(j, cm + 34, 5);
	put64(j, pool + 24, 0x1234);					/* a holder nowhere */
	assert_int_equal(hotspot_blob_name(h, &f, name, sizeof(name)), -EFAULT);
	hotspot_free(h);
}

static void test_tables_refused(void **state)
{
	struct jvm *j = *state;
	struct unwind_memory mem = { .read = fake_read, .ctx = j };
	struct hotspot *h = NULL;
	uint64_t stride;
	memcpy(&stride, j->mem + (j->globals[HOTSPOT_GLOBAL_STRUCT_STRIDE] - BASE), 8);
	put64(j, j->globals[HOTSPOT_GLOBAL_STRUCT_STRIDE], 4096);		/* entries too large to be ones */
	assert_int_equal(hotspot_open(&mem, j->globals, &h), -EINVAL);
	put64(j, j->globals[HOTSPOT_GLOBAL_STRUCT_STRIDE], stride);
	uint64_t saved = j->globals[HOTSPOT_GLOBAL_TYPES];
	j->globals[HOTSPOT_GLOBAL_TYPES] = 0x20;				/* a global that cannot be read */
	assert_int_equal(hotspot_open(&mem, j->globals, &h), -EFAULT);
	j->globals[HOTSPOT_GLOBAL_TYPES] = saved;
	put64(j, j->structs + 15 * STRIDE, str(j, "CodeBlob_renamed"));	/* CodeBlob::_frame_size's entry */
	assert_int_equal(hotspot_open(&mem, j->globals, &h), -ENOENT);	/* a layout this reader does not know */
	assert_null(h);
}

/* A JVM still starting has no code heap: -EAGAIN, tried again after a while, then found. */
static void test_heaps_not_made_yet(void **state)
{
	struct jvm *j = *state;
	uint64_t array;
	memcpy(&array, j->mem + (j->heaps_cell - BASE), 8);
	put64(j, j->heaps_cell, 0);
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	assert_int_equal(hotspot_frame(h, code(0, 300), 1000, &f), -EAGAIN);
	put64(j, j->heaps_cell, array);
	assert_int_equal(hotspot_frame(h, code(0, 300), 2000, &f), -EAGAIN);	/* not tried again so soon */
	assert_int_equal(hotspot_frame(h, code(0, 300), 1000 + 200000000ull, &f), 1);
	hotspot_free(h);
}

/* A frame found is believed for HOTSPOT_CACHE_NS over its blob's code, then read again. */
static void test_cache(void **state)
{
	struct jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	assert_int_equal(hotspot_frame(h, code(0, 300), 1, &f), 1);
	put32(j, code(0, 0) + 28, 10);					/* the JVM reused the space */
	assert_int_equal(hotspot_frame(h, code(0, 301), 2, &f), 0);		/* from the cache */
	assert_int_equal(f.cfa_sp, 48);
	assert_int_equal(hotspot_frame(h, code(0, 300), 2 + HOTSPOT_CACHE_NS, &f), 1);
	assert_int_equal(f.cfa_sp, 80);
	hotspot_free(h);
}

/* Once the process is gone, a frame cached for its blob answers for any address in that code, however old. */
static void test_process_gone(void **state)
{
	struct jvm *j = *state;
	struct hotspot *h = open_jvm(j);
	struct hotspot_frame f;
	assert_int_equal(hotspot_frame(h, code(0, 300), 1, &f), 1);
	j->gone = true;
	assert_int_equal(hotspot_frame(h, code(0, 700), 5 * HOTSPOT_CACHE_NS, &f), 0);	/* another line */
	assert_int_equal(f.cfa_sp, 48);
	assert_int_equal(hotspot_frame(h, code(0, 250), 5 * HOTSPOT_CACHE_NS, &f), -ESRCH);	/* the prologue: never seen */
	assert_int_equal(hotspot_frame(h, code(8, 120), 5 * HOTSPOT_CACHE_NS, &f), -ESRCH);
	hotspot_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_compiled_method, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_blobs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_process, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tables_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_heaps_not_made_yet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_process_gone, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
