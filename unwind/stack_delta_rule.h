/*
 * stack_delta_rule.h — the vocabulary of stack deltas: one unwind rule ("CFA = SP + 48, return address at
 * CFA - 8, FP saved at CFA - 16"), its kinds and flags, and the few functions that make, read and print one.
 *
 * It is its own module so that the table (stack_deltas.h) and the sources a table is built from (Go's table,
 * gopclntab.h; the prologue analysis, prologue.h) all speak it without including each other: the builder uses
 * its sources, the sources only make rules.
 *
 * x86_64 only. The rules assume the System V ABI: the return address is at CFA - 8 and the caller's SP is the
 * CFA. CFI that cannot be expressed that way becomes a FALLBACK rule, so a general unwinder can be used there.
 *
 * A rule is a plain value (12 bytes, no pointers): copy it freely. The table cache (stack_deltas_cache.h)
 * stores rules as they are in memory, so this layout and these numbers are part of the builder's identity (the
 * Makefile hashes this file into the cache key). No state: every function is thread-safe.
 */
#ifndef HOSTPROF_UNWIND_STACK_DELTA_RULE_H
#define HOSTPROF_UNWIND_STACK_DELTA_RULE_H

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

/* A rule of kind whose other fields are all 0. */
struct stack_delta_rule stack_delta_rule_make(enum stack_delta_kind kind);

/*
 * A standard frame-pointer frame (push %rbp; mov %rsp, %rbp): CFA = FP + 16, the caller's FP saved at CFA - 16,
 * with the aux flags given (STACK_DELTA_GUESSED where only the convention says so; Go's flags).
 */
struct stack_delta_rule stack_delta_rule_rbp_frame(int32_t aux);

/*
 * For a rule whose CFA comes from SP and that saved the caller's FP at CFA - 16: true, and *fp = CFA - 16 for a
 * frame whose SP is sp — the value FP holds in that frame if the frame keeps a frame pointer of its own (a check
 * by value of whether it does). False for any other rule.
 */
bool stack_delta_rule_frame_pointer(const struct stack_delta_rule *r, uint64_t sp, uint64_t *fp);

/* Human-readable form of a rule ("cfa=sp+16 fp=cfa-16"), for tests and diagnostics. */
void stack_delta_rule_format(const struct stack_delta_rule *r, char *buf, size_t len);

#endif
