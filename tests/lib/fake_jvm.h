/*
 * fake_jvm.h — a JVM laid out in the memory of a test, as src/processes/hotspot.c reads one: libjvm.so's exported
 * VMStructs globals, their struct and type tables with JDK 17's offsets (and entries the reader has no use for),
 * one code heap of 1024 segments of 128 bytes with its segment map, and in it:
 *   - block 0 (8 segments): a compiled method, com/example/Work.fib, its code at 240 into its blob, 600 bytes,
 *     a frame of 6 words complete 40 bytes into its code;
 *   - block 8 (4 segments): the interpreter, no frame size;
 *   - block 12 (2 segments): a runtime stub, _new_instance_Java, 2 words, never complete;
 *   - block 20 (600 segments): StubRoutines (1), no frame size: more than two hops of the segment map;
 *   - block 700 (4 segments): a block freed; the rest free segments.
 * The reader (fake_jvm_read, an unwind_memory read) reads exactly what was laid out, -EFAULT elsewhere, -ESRCH
 * for every read once gone is set. Helpers assert with cmocka; memory is the caller's to free (fake_jvm_free).
 */
#ifndef HOSTPROF_TESTS_FAKE_JVM_H
#define HOSTPROF_TESTS_FAKE_JVM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/processes/hotspot.h"

#define FAKE_JVM_BASE 0x10000000ull	/* the fake process's memory: [BASE, BASE + SIZE) */
#define FAKE_JVM_SIZE (1u << 20)
#define FAKE_JVM_STRIDE 48		/* a VMStructs entry: type, field, type string, static, offset, address */
#define FAKE_JVM_SEGMAP_OFF 0x2000u
#define FAKE_JVM_LOG2_SEG 7

struct fake_jvm {
	uint8_t *mem;
	size_t used;		/* bump allocator for strings and structures */
	uint64_t globals[HOTSPOT_NGLOBALS];
	uint64_t heaps_cell;	/* CodeCache::_heaps */
	uint64_t structs;	/* the struct table */
	unsigned nstructs;
	bool gone;		/* the process exited: every read fails */
	unsigned reads;		/* fake_jvm_read() calls */
};

struct fake_jvm *fake_jvm_new(void);
void fake_jvm_free(struct fake_jvm *j);
/* unwind_memory.read over the fake process (ctx: the struct fake_jvm). */
ssize_t fake_jvm_read(void *ctx, uint64_t addr, void *buf, size_t len);
/* The code heap's first byte; an address off bytes into the blob of the block at segment seg. */
uint64_t fake_jvm_heap_low(void);
uint64_t fake_jvm_code(unsigned seg, uint64_t off);
/* Writes into the fake process's memory, and a string allocated in it. */
void fake_jvm_put64(struct fake_jvm *j, uint64_t addr, uint64_t v);
void fake_jvm_put32(struct fake_jvm *j, uint64_t addr, uint32_t v);
void fake_jvm_put16(struct fake_jvm *j, uint64_t addr, uint16_t v);
uint64_t fake_jvm_str(struct fake_jvm *j, const char *s);
/* A block of nsegs segments at segment seg (the segment map rewritten), holding a blob whose code is code_len bytes
 * from code_off into it, of frame size words (0: none) and frame-complete offset complete; the blob's address. */
uint64_t fake_jvm_add_blob(struct fake_jvm *j, unsigned seg, unsigned nsegs, const char *name, uint64_t code_off,
			   uint64_t code_len, int32_t words, int32_t complete);

/* The input of tests/fuzz/fuzz_hotspot.c: the globals' addresses, FAKE_JVM_INPUT_ADDRS addresses to look up, then
 * the memory from FAKE_JVM_BASE to the end of block 12 (11 KiB: a fuzzer's mutations land in what is read). */
#define FAKE_JVM_INPUT_ADDRS 4
void fake_jvm_write_input(const struct fake_jvm *j, const char *path, const uint64_t addrs[FAKE_JVM_INPUT_ADDRS]);

#endif
