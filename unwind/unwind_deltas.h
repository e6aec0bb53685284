/*
 * unwind_deltas.h — the fast unwinder: stack-delta tables (stack_deltas.h) applied to a copied stack.
 *
 * Per frame: find the module of the IP, look the rule up (a two-way cache of recent (file, address)
 * lookups in front of the table's binary search), compute the CFA from SP or FP, load the return address and
 * perhaps the saved FP from the stack copy. Only SP, FP and IP are tracked between frames (all registers in
 * frame 0 and right after a signal frame). Memory outside the stack copy is never read, and the live process is
 * never touched, except through the optional hooks below (stack switch, stack extension). Return addresses are
 * looked up at address - 1, except right after a signal frame, whose interrupted IP is exact.
 *
 * Frame-pointer chain: when the sample carries the kernel's frame-pointer walk (unwind_sample.fp_chain, taken at
 * the sample like the copy), a walk that would end truncated — the copy ran out or was empty, a Go stack switch
 * was not followed — goes on with the chain, if the chain agrees with every frame walked so far and the last of
 * them owns its frame pointer (FP == CFA - 16, checked by value where possible). Chain entries are taken while
 * each one's frame keeps its own frame pointer (an rbp frame, or a Go frame: STACK_DELTA_GO_FP_FRAME): past a
 * frame without one the chain skips its caller, so the walk ends there, truncated. The chain is also how a Go
 * stack growth joins its goroutine's callers (UNWIND_DELTAS_SWITCH_JOIN).
 *
 * JIT code (unwind_module.jit: executable memory no file backs, whose runtime keeps frame pointers) has no
 * table: its frames are walked by frame pointer, each step checked (FP at or above SP and within 1 MiB of it,
 * the return address in JIT code, or in a file inside a function its table knows and right after a call
 * instruction, call_site.h), and the walk ends truncated where a step is not plausible. JIT code whose shape
 * the caller knows (unwind_module.jit_cfa_sp: a runtime's trampoline without a frame) is stepped by that rule,
 * its return address checked the same way; a JVM's compiled code by its frame size with the caller's FP saved
 * below the return address (jit_fp_saved), its interpreter by FP with the caller's SP it saved (jit_sender_sp),
 * and where such code was sampled, the shapes of an epilogue, a prologue or a pushed word as well
 * (jit_leaf_shapes). These steps are not guesses in the sense below: they have their own checks. A return
 * address they check is looked up through unwind_process.probe_module where the caller gives one.
 *
 * Tables: the caller normally owns one table per file, built once with stack_deltas_build() or loaded from the
 * table cache (stack_deltas_cache.h) and shared by every process that maps the file, and passes it in
 * unwind_module.deltas. When deltas is NULL the unwinder builds the table from unwind_module.elf itself on the
 * file's first frame and keeps it, keyed by cache_key, until unwind_deltas_forget() (standalone use: tests,
 * tools; never cached: the unwinder knows neither the file's identity nor a cache directory).
 *
 * Rows the tables cannot express (FALLBACK) are handed to an optional fallback hook, e.g. libunwind, for that
 * frame only; without a hook the walk ends there as UNWIND_TRUNCATED.
 *
 * Guessed frames: a rule read from code without CFI (STACK_DELTA_GUESSED), a fallback step, or a chain entry past
 * such a frame may take any word for a return address. Their callers, and return addresses into guessed code,
 * are kept only where a call instruction ends right before them in the file's executable code (call_site.h,
 * over unwind_module.elf); otherwise the walk ends at the last frame it can vouch for, TRUNCATED (counted in
 * implausible_callers). A guessed caller in JIT code is refused the same way: no image holds its bytes. A zero
 * return address or a fallback's "outermost" after a guess ends nothing either.
 *
 * Go stack switches: where Go switched from a goroutine's stack to the g0 stack, an optional stack-switch hook
 * may hand over a copy of the goroutine's stack, and the walk continues there (the one place a walk leaves the
 * sample's stack copy; what the hook reads is its business: go_stack_follow() in go_stack.h is the hook, over the
 * process memory the caller injects).
 *
 * Ownership: created by unwind_deltas_new(), freed by unwind_deltas_free(). Call unwind_deltas_forget(key) before
 * the file behind a cache_key is closed or the key reused. Not thread-safe: one instance per thread (the
 * tables themselves may be shared). In steady state (tables built) unwinding allocates nothing and makes no
 * system calls; the fallback hook and find_module are the caller's.
 */
#ifndef HOSTPROF_UNWIND_DELTAS_H
#define HOSTPROF_UNWIND_DELTAS_H

#include <stdbool.h>

#include "unwind/stack_deltas.h"
#include "unwind/unwind.h"

/* One frame's registers as the fast unwinder knows them. */
struct unwind_deltas_regs {
	uint64_t regs[UNWIND_NREGS];	/* by enum unwind_reg */
	uint32_t known;			/* bit (1u << reg) set when regs[reg] holds this frame's real value */
	bool exact_ip;			/* IP is where the frame was interrupted (the sampled frame, or one restored
					 * from a signal frame), not a return address */
};

/* Bits of unwind_deltas_regs.known. */
#define UNWIND_DELTAS_REG(r) (1u << (r))
#define UNWIND_DELTAS_ALL_REGS \
	((uint32_t)(((1ull << (UNWIND_REG_IP + 1)) - 1) | (0xffull << UNWIND_REG_R8)))

/* A fallback hook's return value for "frame is the outermost one". */
#define UNWIND_DELTAS_FALLBACK_END 1

/*
 * Fallback for frames whose rule is FALLBACK. frame->regs[UNWIND_REG_IP] lies in mod (found at the lookup
 * address: IP, or IP - 1 unless frame->exact_ip). Fill *caller with the caller's registers: IP and SP at least,
 * set in caller->known; caller->exact_ip when the caller was interrupted by a signal. Read memory only from
 * sample->stack and the ELF files of proc's modules. Returns 0, UNWIND_DELTAS_FALLBACK_END when frame is the
 * outermost frame, or a negative errno when it cannot unwind (the walk ends TRUNCATED).
 */
typedef int (*unwind_deltas_fallback_fn)(void *ctx, const struct unwind_process *proc,
					 const struct unwind_sample *sample, const struct unwind_module *mod,
					 const struct unwind_deltas_regs *frame, struct unwind_deltas_regs *caller);

/* Which Go stack switch a walk reached. */
enum unwind_deltas_switch {
	UNWIND_DELTAS_SWITCH_GROWTH,	/* runtime.morestack: the goroutine's stack is being grown (a STOP rule) */
	UNWIND_DELTAS_SWITCH_CALL,	/* runtime.systemstack or asmcgocall: a call on g0 (a frame-pointer rule) */
};

/*
 * Stack switch, for frames whose rule carries STACK_DELTA_GO_STACK_SWITCH (Go's morestack, systemstack and
 * asmcgocall moved from a goroutine's stack to the g0 stack; the goroutine's frames are on its own stack, not in
 * the copy). The hook may give that goroutine's context: resumed's IP, SP and BP (known bits set; IP is looked up
 * as a return address unless exact_ip) and *stack, a copy of the goroutine's stack that starts at resumed's SP
 * (stack->regs[UNWIND_REG_SP] == that SP), owned by the hook and valid until the walk ends. frame is the switching
 * function's frame as the walk recovered it, kind which switch it is; sample is the one being unwound (its
 * registers may say which goroutine, e.g. Go's g register R14; its copy, from its SP up to frame's SP, holds the
 * g0 frames the switch led to). Return 0 to continue on that stack, UNWIND_DELTAS_SWITCH_JOIN (below), or a
 * negative errno to end the walk there: truncated (a morestack STOP rule ends the g0 stack, not the goroutine's,
 * whose frames are then missing; a CFA_FP whose CFA is outside the copy), or complete where the rule's step
 * ended the walk at a real outermost frame. At most once per walk.
 */
/*
 * A stack-switch hook's return value for "stack holds only the frames from the switch up to a frame whose own frame
 * pointer is the FP the walk recovered at the switching frame (frame->regs[UNWIND_REG_BP])": Go's morestack does
 * not touch FP, so the sample's frame-pointer chain (unwind_sample.fp_chain) went on from there, past the
 * switching frame's entry, through the goroutine's callers as they were at the sample. The walk takes those
 * frames and then the rest of the chain; if its last frame does not own that frame pointer (or the chain does not
 * agree with the frames up to the switch), the frames are dropped and the walk ends at the switch.
 */
#define UNWIND_DELTAS_SWITCH_JOIN 1

typedef int (*unwind_deltas_switch_fn)(void *ctx, const struct unwind_process *proc,
				       const struct unwind_sample *sample, const struct unwind_deltas_regs *frame,
				       enum unwind_deltas_switch kind, struct unwind_deltas_regs *resumed,
				       struct unwind_sample *stack);

/*
 * Stack extension, for a walk that needs memory past the end of the stack it runs on (the kernel copies at most
 * 64 KiB of a sampled stack; deep recursion runs further). stack is that stack (the sample's copy, or one a hook
 * gave); addr, the first address the walk needs past its end. The hook may fill *longer with a copy of the same
 * stack (same SP, the same bytes first) that covers [addr, addr + 8), owned by the hook and valid until the walk
 * ends or the hook is called again. Return 0 to go on, or a negative errno: the walk ends TRUNCATED as it would
 * without the hook, and the hook is not called again in that walk. A zero return address read from an extended
 * stack ends the walk TRUNCATED, not COMPLETE: that memory may have been reused since the sample.
 */
typedef int (*unwind_deltas_extend_fn)(void *ctx, const struct unwind_process *proc, const struct unwind_sample *stack,
				       uint64_t addr, struct unwind_sample *longer);

struct unwind_deltas_options {
	unwind_deltas_fallback_fn fallback;	/* NULL: FALLBACK rows end the walk (TRUNCATED) */
	void *fallback_ctx;
	unwind_deltas_switch_fn stack_switch;	/* NULL: walks end at Go's stack switches */
	void *stack_switch_ctx;
	unwind_deltas_extend_fn stack_extend;	/* NULL: walks end where the stack copy does */
	void *stack_extend_ctx;
};

/* Counters since unwind_deltas_new(). */
struct unwind_deltas_stats {
	uint64_t samples, frames;
	uint64_t cache_hits, cache_misses;	/* rule lookups */
	uint64_t fallback_calls, fallback_failures;
	uint64_t stack_switches, stack_switch_failures;	/* stack-switch hook calls that continued / did not */
	uint64_t stack_extensions, stack_extension_failures;	/* the same for the stack-extension hook */
	uint64_t fp_chain_walks;	/* walks that would have ended truncated, continued with the sample's chain */
	uint64_t fp_chain_steps;	/* frames in code without CFI stepped by frame pointer, the chain vouching */
	uint64_t implausible_callers;	/* guessed callers refused: no call instruction ends at them */
	uint64_t fp_chain_joins, fp_chain_join_failures;	/* switches given for joining the chain (JOIN) */
	uint64_t jit_steps, jit_step_failures;	/* frames in JIT code walked by frame pointer, or not (implausible) */
	uint64_t tables_built, table_failures;	/* standalone mode only */
};

struct unwind_deltas;

/* opts may be NULL (no hooks). Returns 0 and *out, -ENOMEM, or -ENOTSUP when capstone cannot be opened. */
int unwind_deltas_new(const struct unwind_deltas_options *opts, struct unwind_deltas **out);
void unwind_deltas_free(struct unwind_deltas *u);

/* Drop everything cached for this file key (cached rules, and the table if the unwinder built it). */
void unwind_deltas_forget(struct unwind_deltas *u, const void *cache_key);

/*
 * Unwind one sample. Writes at most max frames into frames[], leaf first (frames[0].ip is the sampled IP),
 * stores how the walk ended in *status, and returns the number of frames written (>= 0). A negative return is
 * an internal error (-ENOMEM while building a table in standalone mode); a stack that merely cannot be unwound
 * further is not an error. *status: COMPLETE at an outermost frame (STOP rule, undefined return address, or a
 * zero return address); UNKNOWN_LEAF when the sampled IP is in no module (1 frame returned); TRUNCATED
 * otherwise (stack copy exhausted, SP not advancing, no rule, max frames reached).
 */
int unwind_deltas_unwind(struct unwind_deltas *u, const struct unwind_process *proc,
			 const struct unwind_sample *sample, struct unwind_frame *frames, size_t max,
			 enum unwind_status *status);

void unwind_deltas_get_stats(const struct unwind_deltas *u, struct unwind_deltas_stats *st);

#endif
