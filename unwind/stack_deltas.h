/*
 * stack_deltas.h — an ELF file's call-frame information compiled into a compact stack-delta table.
 *
 * The table maps every ELF virtual address of the file's code to one unwind rule ("CFA = SP + 48, return
 * address at CFA - 8, FP saved at CFA - 16"), in the spirit of the OpenTelemetry eBPF profiler's stack deltas.
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

/* How to find the caller's frame (the CFA) at an address. */
enum stack_delta_kind {
	STACK_DELTA_INVALID,	/* no code or no unwind information at this address */
	STACK_DELTA_CFA_SP,	/* CFA = SP + cfa_off */
	STACK_DELTA_CFA_FP,	/* CFA = FP + cfa_off */
	STACK_DELTA_CFA_SP_DEREF, /* CFA = *(SP + cfa_off) + aux (stack realignment, DRAP) */
	STACK_DELTA_CFA_FP_DEREF, /* CFA = *(FP + cfa_off) + aux */
	STACK_DELTA_PLT,	/* CFA = SP + cfa_off + ((IP & 15) >= aux ? 8 : 0): the linker's .plt expression */
	STACK_DELTA_SIGNAL,	/* signal trampoline (__restore_rt): the interrupted registers are in the
				 * ucontext at SP (mcontext gregs at SP + 40) */
	STACK_DELTA_STOP,	/* outermost frame: the return address is undefined (_start, thread entry) */
	STACK_DELTA_FALLBACK,	/* CFI exists but does not fit these rules: ask a general unwinder */
};

/* Where the caller's frame pointer (rbp) is, for the CFA kinds. */
enum stack_delta_fp {
	STACK_DELTA_FP_SAME,	/* unchanged: the caller's FP is the current FP */
	STACK_DELTA_FP_AT_CFA,	/* saved at CFA + fp_off (fp_off < 0) */
	STACK_DELTA_FP_AT_FP,	/* saved at FP + fp_off (DRAP frames: DW_CFA_expression rbp, breg6) */
};

/* One unwind rule. For the CFA kinds the return address is at CFA - 8 and the caller's SP is the CFA. */
struct stack_delta_rule {
	uint8_t kind;		/* enum stack_delta_kind */
	uint8_t fp;		/* enum stack_delta_fp */
	int16_t fp_off;
	int32_t cfa_off;
	int32_t aux;		/* DEREF kinds: added after the load; PLT: the (IP & 15) threshold;
				 * CFA_SP, CFA_FP and STOP: flags (STACK_DELTA_GO_*, STACK_DELTA_GUESSED) */
};

/*
 * aux flag of CFA_FP and STOP rules: the function switched from a goroutine's stack to the g0 (system) stack
 * (Go's runtime.morestack, runtime.systemstack, runtime.asmcgocall). The frames of the goroutine that called it
 * are on that goroutine's own stack, not below on this one: the unwinder may continue there through its
 * stack-switch hook (unwind_deltas.h).
 */
#define STACK_DELTA_GO_STACK_SWITCH 1

/*
 * aux flag of CFA_SP rules: FP holds this frame's own frame pointer here (FP == CFA - 16, where the caller's FP
 * is saved), as in every Go function past its prologue. A frame-pointer chain through such a frame leads to its
 * caller. (C code may save rbp at CFA - 16 as a plain callee-saved register: without the flag nothing says rbp
 * is a frame pointer there. Plain CFA_FP rules need no flag: their CFA is computed from it.) On a CFA_FP rule
 * with STACK_DELTA_GO_STACK_SWITCH: the switching function keeps a frame of its own (newer Go runtimes), rather
 * than leaving its caller's FP in place.
 */
#define STACK_DELTA_GO_FP_FRAME 2

/*
 * aux flag of CFA_SP and CFA_FP rules: no CFI and no .gopclntab says this, the prologue analysis or the
 * frame-pointer convention guessed it. A caller found with such a rule, or a return address into such code, may
 * be a value that is no return address at all: the unwinder accepts it only where a call instruction ends
 * right before it (call_site.h).
 */
#define STACK_DELTA_GUESSED 4

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
 * For a rule whose CFA comes from SP and that saved the caller's FP at CFA - 16: true, and *fp = CFA - 16 for a
 * frame whose SP is sp — the value FP holds in that frame if the frame keeps a frame pointer of its own (a check
 * by value of whether it does). False for any other rule.
 */
bool stack_delta_rule_frame_pointer(const struct stack_delta_rule *r, uint64_t sp, uint64_t *fp);

/*
 * Whether the avail bytes at p start with the rt_sigreturn trampoline the C library returns from signal handlers
 * through (__restore_rt: mov rax, 15; syscall), which code without CFI gets the SIGNAL rule for.
 */
#define STACK_DELTA_SIGRETURN_LEN 9
bool stack_delta_is_sigreturn(const uint8_t *p, size_t avail);

/* A rule of kind whose other fields are all 0. */
struct stack_delta_rule stack_delta_rule_make(enum stack_delta_kind kind);

/*
 * A standard frame-pointer frame (push %rbp; mov %rsp, %rbp): CFA = FP + 16, the caller's FP saved at CFA - 16,
 * with the aux flags given (STACK_DELTA_GUESSED where only the convention says so; Go's flags).
 */
struct stack_delta_rule stack_delta_rule_rbp_frame(int32_t aux);

/* Human-readable form of a rule ("cfa=sp+16 fp=cfa-16"), for tests and diagnostics. */
void stack_delta_rule_format(const struct stack_delta_rule *r, char *buf, size_t len);

#endif
