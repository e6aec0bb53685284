/*
 * stack_deltas.h — an ELF file's call-frame information compiled into a compact stack-delta table.
 *
 * The table maps every ELF virtual address of the file's code to one unwind rule (stack_delta_rule.h: "CFA =
 * SP + 48, return address at CFA - 8, FP saved at CFA - 16"), in the spirit of the OpenTelemetry eBPF profiler's
 * stack deltas.
 * It is built once per file from .eh_frame and .debug_frame (evaluated with libdw's CFI interpreter), for Go code
 * from .gopclntab (gopclntab.h), and for code that has no CFI from its instructions (prologue.h), so that the
 * unwinder (unwind_deltas.h) needs one binary search and a few loads per frame.
 *
 * x86_64 only. The rules assume the System V ABI: the return address is at CFA - 8 and the caller's SP is the
 * CFA. CFI that cannot be expressed that way (CFA in another register, arbitrary DWARF expressions, return
 * address in a register) becomes a FALLBACK rule for exactly the rows it covers, so a general unwinder can be
 * used there and nowhere else.
 *
 * Ownership: stack_deltas_build() allocates the table; stack_deltas_free() releases it. The table does not
 * reference the Elf after the build returns: the caller may close the file. A table may also be read in place
 * from a file of the table cache (stack_deltas_adopt(), stack_deltas_cache.h): it then owns that mapping and
 * stack_deltas_free() unmaps it; callers cannot tell the two apart. A table is immutable, so
 * any number of threads may look up in it concurrently. Building is reentrant (no shared state) but uses the
 * Elf handle, which must not be used by another thread meanwhile; like libdw, it decompresses a compressed
 * .debug_frame inside that handle.
 *
 * Untrusted input: the ELF file may be hostile. Every offset and length is checked, the work spent
 * interpreting CFI is bounded, and a file whose CFI is malformed still yields a table for the parts that
 * parse (the rest is FALLBACK or left to the frame-pointer rule).
 */
#ifndef HOSTPROF_STACK_DELTAS_H
#define HOSTPROF_STACK_DELTAS_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind/stack_delta_rule.h"

/* What a build found and cost; all counts are for one file. */
struct stack_deltas_stats {
	uint64_t build_ns;	/* wall time of stack_deltas_build (of the load, for a table from the cache) */
	bool from_cache;	/* loaded from the table cache (stack_deltas_cache.h): the counts below are those
				 * of the build that stored it */
	size_t rows;		/* rows in the table after merging equal neighbours */
	size_t bytes;		/* memory the table holds (stack_deltas_bytes) */
	size_t rules;		/* distinct rules */
	size_t fdes_eh;		/* FDEs taken from .eh_frame */
	size_t fdes_debug;	/* FDEs taken from .debug_frame (where .eh_frame had none) */
	size_t fdes_skipped;	/* FDEs empty, overlapping, undecodable or over the work budget */
	size_t fallback_rows;	/* rows whose rule is FALLBACK */
	size_t plt_rows;	/* rows whose rule is PLT */
	size_t signal_rows;	/* rows whose rule is SIGNAL */
	size_t stop_rows;	/* rows whose rule is STOP */
	size_t analysed_ranges;	/* code ranges without CFI covered by prologue/epilogue analysis */
	size_t fp_ranges;	/* code ranges without CFI given the plain frame-pointer rule */
	size_t go_rows;		/* rows taken from .gopclntab (Go code) */
};

struct stack_deltas;

/*
 * Build the table for elf (an x86_64 ELF file; any type with code). stats may be NULL. Returns 0 and *out, or
 * -ENOTSUP (not x86_64 ELF64), -ENOENT (no code and no CFI at all), -ENOMEM.
 */
int stack_deltas_build(Elf *elf, struct stack_deltas **out, struct stack_deltas_stats *stats);
void stack_deltas_free(struct stack_deltas *t);

/* Fill st's rows, bytes, rules and *_rows counts from t (the rest is left alone). */
void stack_deltas_count(const struct stack_deltas *t, struct stack_deltas_stats *st);

/*
 * A table's packed form, for the table cache (stack_deltas_cache.h): its rules (12 bytes each), its page
 * index (npages + 1 u32), its rows' address offsets from base (nrows u32) and rule indices (nrows u16),
 * contiguous at data in that order, exactly as the table holds them in memory (x86_64, little-endian).
 */
struct stack_deltas_image {
	uint64_t base;		/* ELF address of the first row */
	uint32_t nrows, npages, nrules;
	const void *data;	/* 8-byte aligned */
	size_t size;		/* bytes at data */
};

/* The packed form of t; data points into t and lives as long as it. */
void stack_deltas_image(const struct stack_deltas *t, struct stack_deltas_image *out);

/*
 * A table that reads img->data in place, made only when the image is one a build makes: sizes consistent with
 * the counts, the first two rules INVALID and FALLBACK, every rule's kind and FP location valid, addresses
 * strictly ascending from offset 0, every rule index in range, the page index exactly the one a build computes
 * — so that an untrusted image (a cache file) can make no lookup read outside it. Walks every row: O(nrows).
 * On success the table owns the mapping map[0..map_len) holding img->data (NULL: nothing to unmap, the caller
 * keeps data alive and unchanged longer than the table); on failure the caller keeps it. Returns 0 and *out,
 * -EINVAL, -ENOMEM.
 */
int stack_deltas_adopt(const struct stack_deltas_image *img, void *map, size_t map_len, struct stack_deltas **out);

/* Bytes of memory held by t. */
size_t stack_deltas_bytes(const struct stack_deltas *t);
/* Rows in t. */
size_t stack_deltas_rows(const struct stack_deltas *t);
/* Row i (< stack_deltas_rows): the rule holds from *elf_va up to the next row's address. For dumps and tests. */
void stack_deltas_row(const struct stack_deltas *t, size_t i, uint64_t *elf_va, struct stack_delta_rule *rule);

/*
 * The rule in effect at ELF virtual address elf_va (for a return address, pass the address minus 1). Returns 0,
 * or -ENOENT with out->kind = STACK_DELTA_INVALID when the address is covered by no code or no information.
 */
int stack_deltas_lookup(const struct stack_deltas *t, uint64_t elf_va, struct stack_delta_rule *out);

/*
 * Whether the avail bytes at p start with the rt_sigreturn trampoline the C library returns from signal handlers
 * through (__restore_rt: mov rax, 15; syscall), which code without CFI gets the SIGNAL rule for.
 */
#define STACK_DELTA_SIGRETURN_LEN 9
bool stack_delta_is_sigreturn(const uint8_t *p, size_t avail);

#endif
