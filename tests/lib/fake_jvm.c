/*
 * fake_jvm.c — a JVM laid out in memory for the tests of src/processes/hotspot.c (fake_jvm.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/fake_jvm.h"

#define BASE FAKE_JVM_BASE
#define SIZE FAKE_JVM_SIZE
#define STRIDE FAKE_JVM_STRIDE
#define HEAP_OFF 0x2400u		/* the code heap's memory, 1024 segments of 128 bytes, after its segment map */
#define SEGMAP_OFF FAKE_JVM_SEGMAP_OFF
#define LOG2_SEG FAKE_JVM_LOG2_SEG
#define NSEGS 1024


ssize_t fake_jvm_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct fake_jvm *j = ctx;
	j->reads++;
	if (j->gone)
		return -ESRCH;
	if (addr < BASE || addr >= BASE + SIZE)
		return -EFAULT;
	size_t n = BASE + SIZE - addr < len ? (size_t)(BASE + SIZE - addr) : len;
	memcpy(buf, j->mem + (addr - BASE), n);
	return (ssize_t)n;
}

static uint64_t alloc(struct fake_jvm *j, size_t n)
{
	uint64_t at = BASE + j->used;
	j->used += (n + 15) & ~(size_t)15;
	assert_true(j->used < SEGMAP_OFF);
	return at;
}

void fake_jvm_put64(struct fake_jvm *j, uint64_t addr, uint64_t v)
{
	memcpy(j->mem + (addr - BASE), &v, 8);
}

void fake_jvm_put32(struct fake_jvm *j, uint64_t addr, uint32_t v)
{
	memcpy(j->mem + (addr - BASE), &v, 4);
}

void fake_jvm_put16(struct fake_jvm *j, uint64_t addr, uint16_t v)
{
	memcpy(j->mem + (addr - BASE), &v, 2);
}

uint64_t fake_jvm_str(struct fake_jvm *j, const char *s)
{
	uint64_t at = alloc(j, strlen(s) + 1);
	memcpy(j->mem + (at - BASE), s, strlen(s) + 1);
	return at;
}

static void struct_entry(struct fake_jvm *j, const char *type, const char *field, uint64_t offset, uint64_t address)
{
	uint64_t e = j->structs + (uint64_t)j->nstructs++ * STRIDE;
	fake_jvm_put64(j, e, type ? fake_jvm_str(j, type) : 0);
	fake_jvm_put64(j, e + 8, field ? fake_jvm_str(j, field) : 0);
	fake_jvm_put32(j, e + 24, address != 0);
	fake_jvm_put64(j, e + 32, offset);
	fake_jvm_put64(j, e + 40, address);
}

/* The globals, each a word of its own holding its value. */
static void globals(struct fake_jvm *j, uint64_t structs, uint64_t types)
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
		fake_jvm_put64(j, j->globals[i], values[i]);
	}
}

/* JDK 17's tables: the fields the reader needs, at JDK 17's offsets, with others around them. */
static void tables(struct fake_jvm *j)
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
		fake_jvm_put64(j, types + i * STRIDE, fake_jvm_str(j, names[i]));
		fake_jvm_put64(j, types + i * STRIDE + 32, sizes[i]);
	}
	fake_jvm_put64(j, types + 4 * STRIDE, 0);
	globals(j, j->structs, types);
}

uint64_t fake_jvm_heap_low(void)
{
	return BASE + HEAP_OFF;
}

/* A used block of n segments at segment seg, its segment map bytes counting back to it (254 at most a hop). */
static uint64_t block(struct fake_jvm *j, unsigned seg, unsigned n, bool used)
{
	uint64_t b = fake_jvm_heap_low() + ((uint64_t)seg << LOG2_SEG);
	for (unsigned i = 0; i < n; i++)
		j->mem[SEGMAP_OFF + seg + i] = (uint8_t)(i < 254 ? i : 254);
	fake_jvm_put64(j, b, n);
	j->mem[b - BASE + 8] = used;
	return b + 16;	/* the blob */
}

static void blob(struct fake_jvm *j, uint64_t b, const char *name, uint64_t code_off, uint64_t code_len, int32_t words,
		 int32_t complete)
{
	fake_jvm_put64(j, b + 96, fake_jvm_str(j, name));
	fake_jvm_put32(j, b + 20, (uint32_t)complete);
	fake_jvm_put32(j, b + 28, (uint32_t)words);
	fake_jvm_put64(j, b + 32, b + code_off);
	fake_jvm_put64(j, b + 40, b + code_off + code_len);
}

static uint64_t symbol(struct fake_jvm *j, const char *text)
{
	uint64_t s = alloc(j, 6 + strlen(text));
	fake_jvm_put16(j, s + 4, (uint16_t)strlen(text));
	memcpy(j->mem + (s + 6 - BASE), text, strlen(text));
	return s;
}

/* A compiled method's Method, ConstMethod and constant pool, its class com/example/Work, its name fib. */
static void method(struct fake_jvm *j, uint64_t nmethod)
{
	uint64_t m = alloc(j, 88), cm = alloc(j, 48), pool = alloc(j, 72 + 8 * 8), klass = alloc(j, 208);
	fake_jvm_put64(j, nmethod + 112, m);
	fake_jvm_put64(j, m + 8, cm);
	fake_jvm_put64(j, cm + 8, pool);
	fake_jvm_put16(j, cm + 34, 5);
	fake_jvm_put64(j, pool + 24, klass);
	fake_jvm_put32(j, pool + 48, 8);
	fake_jvm_put64(j, pool + 72 + 5 * 8, symbol(j, "fib"));
	fake_jvm_put64(j, klass + 24, symbol(j, "com/example/Work"));
}

/* The heap (one of one) and its blobs. */
static void heap(struct fake_jvm *j)
{
	uint64_t array = alloc(j, 16), data = alloc(j, 8), h = alloc(j, 344);
	fake_jvm_put64(j, j->heaps_cell, array);
	fake_jvm_put32(j, array, 1);
	fake_jvm_put64(j, array + 8, data);
	fake_jvm_put64(j, data, h);
	fake_jvm_put64(j, h + 8 + 16, fake_jvm_heap_low());			/* _memory._low */
	fake_jvm_put64(j, h + 8 + 8, fake_jvm_heap_low() + NSEGS * 128);		/* _memory._high_boundary */
	fake_jvm_put64(j, h + 120 + 16, BASE + SEGMAP_OFF);		/* _segmap._low */
	fake_jvm_put32(j, h + 256, LOG2_SEG);
	memset(j->mem + SEGMAP_OFF, 0xff, NSEGS);
	uint64_t nm = block(j, 0, 8, true);			/* [0, 1024): a compiled method */
	blob(j, nm, "nmethod", 240, 600, 6, 40);
	method(j, nm);
	blob(j, block(j, 8, 4, true), "Interpreter", 104, 300, 0, -1);
	blob(j, block(j, 12, 2, true), "_new_instance_Java", 104, 100, 2, -1);
	blob(j, block(j, 20, 600, true), "StubRoutines (1)", 104, 600 * 128 - 200, 0, -1);
	block(j, 700, 4, false);				/* a block freed, not yet merged */
}

struct fake_jvm *fake_jvm_new(void)
{
	struct fake_jvm *j = calloc(1, sizeof(*j));
	assert_non_null(j);
	j->mem = calloc(1, SIZE);
	assert_non_null(j->mem);
	tables(j);
	heap(j);
	return j;
}

void fake_jvm_free(struct fake_jvm *j)
{
	free(j->mem);
	free(j);
}

uint64_t fake_jvm_add_blob(struct fake_jvm *j, unsigned seg, unsigned nsegs, const char *name, uint64_t code_off,
			   uint64_t code_len, int32_t words, int32_t complete)
{
	uint64_t b = block(j, seg, nsegs, true);
	blob(j, b, name, code_off, code_len, words, complete);
	return b;
}

uint64_t fake_jvm_code(unsigned seg, uint64_t off)
{
	return fake_jvm_heap_low() + ((uint64_t)seg << LOG2_SEG) + 16 + off;
}

void fake_jvm_write_input(const struct fake_jvm *j, const char *path, const uint64_t addrs[FAKE_JVM_INPUT_ADDRS])
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(j->globals, sizeof(j->globals), 1, f), 1);
	assert_int_equal(fwrite(addrs, 8, FAKE_JVM_INPUT_ADDRS, f), FAKE_JVM_INPUT_ADDRS);
	assert_int_equal(fwrite(j->mem, HEAP_OFF + (14u << LOG2_SEG), 1, f), 1);	/* up to block 12's end */
	assert_int_equal(fclose(f), 0);
}
