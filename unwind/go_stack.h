/*
 * go_stack.h — Go stack following: the goroutine behind a sample taken on a Go g0 stack.
 *
 * Go runs stack growth (runtime.morestack -> newstack -> copystack), runtime.systemstack(fn) and cgo calls
 * (runtime.asmcgocall) on the thread's g0 stack. A sample taken there holds the g0 stack only; the goroutine
 * that switched, with all its callers, is on its own stack elsewhere in memory. Go saved that goroutine's
 * context (g.sched: PC, SP, BP) when it switched, so it can be found and read from the process's memory:
 * the g register (R14, Go >= 1.17) gives g0 or the goroutine; g.m, m.g0 and m.curg lead to the goroutine;
 * its g.sched and the stack from g.sched.sp up are read. Without a g register (Go < 1.17),
 * a stack growth still names its goroutine: newstack's copy of m.morebuf, in the g0 frames the sample copied,
 * holds it (morebuf.g), and it is checked the same way.
 *
 * Correctness: the read happens when the sample is handled, after it was taken, so the goroutine may have moved
 * on. The context is used only when it provably is the one the sample saw: the frame pointer the goroutine saved
 * at the switch equals the one the unwinder recovered at the switching frame from the sample's own stack copy,
 * and g.sched is unchanged after its stack was read (or, for a stack growth already over, what go_stack_read
 * below describes). Anything else — no goroutine found (C code that reused R14; Go < 1.17 outside a stack
 * growth), a layout that does not check out (m.g0 == g0, curg.m == m, SP inside the goroutine's stack), an
 * unreadable address, a stale context — is refused and counted; the stack then ends where it did without this.
 *
 * Runtime layout used (amd64, stable since Go 1.5 through at least 1.26): g.stack at 0, g.m at 48, g.sched
 * (gobuf: sp, pc, then bp as its last field) at 56; m.g0 at 0, m.morebuf (a gobuf) at 8, m.curg right after
 * m.mstartfn. The gobuf has 7 fields (bp at +48, m.curg at 192) or 6 (bp at +40, m.curg at 184); each is tried
 * and must pass the checks above.
 *
 * Process memory: read only through the struct unwind_memory the caller passes (unwind.h) — the live process
 * (src/processes/procmem.h), what a reader read while it held the thread, or recorded bytes — never by this module itself.
 * A read that returns fewer bytes than asked counts as unreadable (-EIO).
 *
 * The stack-switch hook go_stack_follow() puts it together for the delta unwinder (unwind_deltas.h): the
 * goroutine the caller already holds for the sample, else the one read now, else the frames that join the
 * sample's frame-pointer chain (go_stack_find_grower, go_stack_find_switch_caller).
 *
 * Untrusted input: the process may be hostile. Every pointer is checked for alignment and range before use;
 * reads are bounded (the goroutine's own stack bounds, then max_stack bytes). Ownership: go_stack_new() makes a
 * handle, go_stack_free() frees it and what it handed out. Not thread-safe: one handle per thread.
 */
#ifndef HOSTPROF_GO_STACK_H
#define HOSTPROF_GO_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind/stack_delta_rule.h"
#include "unwind/unwind.h"
#include "unwind/unwind_deltas.h"

struct go_stack_stats {
	uint64_t followed;	/* contexts handed over (grown included) */
	uint64_t grown;		/* of which rebuilt after stack growth (see go_stack_read) */
	uint64_t no_goroutine;	/* the g register led to no goroutine (layout checks failed, no g) */
	uint64_t stale;		/* the goroutine had moved on by the time it was read */
	uint64_t unreadable;	/* process memory could not be read (gone, unmapped, permission) */
	uint64_t growers;	/* stack growths named from the sample alone (go_stack_find_grower) */
	uint64_t switch_callers;	/* systemstack callers found (go_stack_find_switch_caller) */
	uint64_t switch_callers_in_code;	/* ... of them found in the caller's code (..._in_code) */
};

/* The sample's copy of the g0 stack, from its sampled SP up to the switching frame (newstack's frames and
 * those it called), where a stack growth keeps its bookkeeping. */
struct go_stack_g0 {
	const uint8_t *bytes;
	size_t size;
};

/* What a goroutine was doing when it switched to g0: resume unwinding at pc with sp and bp, over stack. */
struct go_stack_context {
	uint64_t pc, sp, bp;
	const uint8_t *stack;	/* copy of [sp, sp + size): owned by the go_stack, valid until its next read */
	size_t size;
};

struct go_stack;
struct go_stack_snapshot;

/* Where the goroutine a walk went on with came from (go_stack_options.followed). */
enum go_stack_source {
	GO_STACK_HELD,	/* what the caller read while it held the thread (go_stack_options.held) */
	GO_STACK_READ,	/* read from the process's memory now (go_stack_read) */
	GO_STACK_JOINED,	/* not read: frames given for joining the sample's frame-pointer chain */
};

struct go_stack_options {
	size_t max_stack;	/* most bytes of goroutine stack read per sample (e.g. the stack-copy size) */
	/* For go_stack_follow() only (NULL otherwise). The delta-table rule at addr (a return address minus 1, or an
	 * entry) in the walk's process, proc as the walk has it: addr is a guess being checked, so a miss must
	 * change nothing the walk uses (no re-read of the process's mappings). */
	bool (*rule_at)(void *ctx, const struct unwind_process *proc, uint64_t addr, struct stack_delta_rule *rule);
	/* Optional, under the same terms: len bytes of code at addr in the walk's process, from the file mapped there
	 * (go_stack_rules.code_at). */
	bool (*code_at)(void *ctx, const struct unwind_process *proc, uint64_t addr, void *buf, size_t len);
	/* Optional: what the caller read of the sample's goroutine while it held the thread (go_stack_snapshot()),
	 * or NULL. Used only when it is the switch the walk reached (see go_stack_follow). */
	const struct go_stack_snapshot *(*held)(void *ctx, const struct unwind_process *proc);
	/* Optional: told where each goroutine came from and how its read went (rc: 0 or the -errno of
	 * go_stack_read; 0 for JOINED), e.g. to read a process that needs it often while the thread is held
	 * instead. */
	void (*followed)(void *ctx, const struct unwind_process *proc, enum go_stack_source source, int rc);
	void *ctx;
};

/* Returns 0 and *out, or -ENOMEM. o is copied. */
int go_stack_new(const struct go_stack_options *o, struct go_stack **out);
void go_stack_free(struct go_stack *gs);

/*
 * The goroutine context, in the process mem reads, for a sample whose g register held g_reg, taken under a
 * switching frame whose frame pointer the unwinder recovered as switch_bp. g0 (may be NULL) is the sample's g0
 * stack copy, for the stack-growth case below. Returns 0, -ESRCH (no goroutine found), -ESTALE (it moved on) or
 * -EIO (unreadable memory).
 *
 * Stack growth (runtime.copystack) is usually over, and the goroutine running again on its new stack (or gone),
 * before the sample is handled: g.sched is gone. The sample's own g0 copy still says what the goroutine's stack
 * was: newstack keeps m.morebuf (the SP and return address of the caller of the function that needed more
 * stack) in its frame, and copystack its adjustinfo (the old stack's bounds and how far it moved). Both are found
 * by their shape: old bounds a power of two holding morebuf.sp and switch_bp, the new stack as far away as the
 * old one is large, morebuf.pc returning from a direct call (whose target is the function that grew; an indirect
 * call is refused). The old stack is then what the sample saw: copystack copied it and freed it, and nothing
 * writes it but a reuse of its memory. It is read from morebuf.sp up and used only if both its ends check out:
 * its lowest word is still the return address morebuf names (taken from the sample itself), and its outermost
 * 2 KiB agree with the new stack's, but for copystack's pointer adjustment (old + delta) — a goroutine reusing
 * that memory as its stack writes from the top, heap objects from the bottom, and a goroutine that has since
 * returned from its outermost frames rewrote the new stack's top. The walk resumes at the entry of the function
 * that grew, on the old copy. No g register is needed (Go 1.16 too); in Go >= 1.23, whose morestack clears BP,
 * switch_bp is 0 (unknown).
 */
int go_stack_read(struct go_stack *gs, const struct unwind_memory *mem, uint64_t g_reg, uint64_t switch_bp,
		  const struct go_stack_g0 *g0, struct go_stack_context *out);

/* What go_stack cannot tell by itself, answered by its user from the unwind rules (stack_deltas.h). */
struct go_stack_rules {
	/* Whether the Go frame that pc returns into, with SP sp there, keeps its own frame pointer at bp. */
	bool (*caller_keeps_fp)(void *ctx, uint64_t sp, uint64_t pc, uint64_t bp);
	/* Whether addr is the entry of a function that switches to g0 for a call (systemstack, asmcgocall). */
	bool (*is_switch_entry)(void *ctx, uint64_t addr);
	void *ctx;
	/* Optional (go_stack_find_switch_caller_in_code): the SP at which the Go frame that pc returns into keeps
	 * its own frame pointer at bp (its rule: CFA = SP + N, FP saved at CFA - 16); false if it keeps none. */
	bool (*caller_sp)(void *ctx, uint64_t pc, uint64_t bp, uint64_t *sp);
	/* Optional: len bytes of the program's code at addr from its file, where the process cannot be read (it
	 * exited before its last batch was walked); false if no file holds them. */
	bool (*code_at)(void *ctx, uint64_t addr, void *buf, size_t len);
};

/* A goroutine frame named from the sample, for joining the sample's frame-pointer chain. */
struct go_stack_caller {
	uint64_t pc;		/* the return address into it */
	uint64_t sp;		/* its SP at that call */
	uint64_t callee;	/* the target of that call (a direct call) */
};

/*
 * The stack growth behind a sample on g0, from the sample alone, for joining the sample's frame-pointer chain
 * (unwind_deltas.h, UNWIND_DELTAS_SWITCH_JOIN): morestack leaves FP as the function that grew found it — its
 * caller's frame pointer, switch_bp, which newstack saved on g0 — so the kernel's walk of the chain at the sample
 * went on through the caller's callers, and only the grower and its caller are missing. newstack's copy of
 * m.morebuf in g0 (the sample's copy) names them: {sp, pc, g} shaped words whose caller keeps its frame pointer
 * exactly at switch_bp (rules) and whose pc returns from a direct call, to the grower (out->callee; the call is
 * read from the process's code). No stack is read. Returns 0, -ESRCH (none checks out) or -EIO. Go < 1.23
 * only: later morestacks clear FP (switch_bp 0: -ESRCH).
 */
int go_stack_find_grower(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
			 const struct go_stack_g0 *g0, const struct go_stack_rules *rules, struct go_stack_caller *out);

/*
 * The caller of a runtime.systemstack (or asmcgocall) call that is over by the time the sample is handled, for
 * joining the sample's frame-pointer chain. systemstack keeps no frame: the g0 frames saved its caller's frame
 * pointer, switch_bp, and the chain went on from there, so only the caller itself is missing; its return address
 * is in the goroutine's stack just below that frame. The words below switch_bp are read from the process (one
 * read) and a word is taken only if it is the return address of a direct call to a g0-switching function
 * (rules->is_switch_entry) from a frame whose own frame pointer is exactly switch_bp (rules->caller_keeps_fp):
 * the frame pointer is the sample's, so the frame is where the sample saw it; what is read can only be a later
 * call from that same frame to the same kind of function. Returns 0, -ESRCH or -EIO.
 */
int go_stack_find_switch_caller(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
				const struct go_stack_rules *rules, struct go_stack_caller *out);

/*
 * The caller of a runtime.systemstack (or asmcgocall) call that is over, from the sample and the program's code
 * alone, where go_stack_find_switch_caller() finds nothing: the caller went on, and a later call from its frame
 * wrote over the slot the switch's return address was in (measured: most systemstack samples of a Go <= 1.16
 * program read in a batch, whose g register does not name the goroutine). The kernel's frame-pointer chain at
 * the sample went from the g0 frames on through switch_bp, the caller's frame pointer: after_switch, the chain's
 * entry after the switching frame's return address, is the caller's own return address, into its caller, whose
 * direct call there names the caller's function. That function's code is read from the process and decoded from
 * its entry to its end (the INT3 padding Go's linker leaves between functions, at most
 * GO_STACK_CALLER_CODE_MAX bytes): its one direct call to a g0-switching function (rules->is_switch_entry) is
 * the call the sample was in; with none, or several (which one is unknown), nothing is returned. The caller's SP
 * there is the one at which its frame pointer is switch_bp (rules->caller_sp). Returns 0, -ESRCH or -EIO.
 */
#define GO_STACK_CALLER_CODE_MAX 16384
int go_stack_find_switch_caller_in_code(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
					uint64_t after_switch, const struct go_stack_rules *rules,
					struct go_stack_caller *out);

/*
 * The stack bounds [*lo, *hi) of the goroutine (or g0) that the g register g_reg names in mem's process, now:
 * g_reg must be its m's g0 or current goroutine. Returns 0, -ESRCH when g_reg names no g (not Go, Go < 1.17, C
 * code that reused R14) or -EIO.
 */
int go_stack_bounds(const struct unwind_memory *mem, uint64_t g_reg, uint64_t *lo, uint64_t *hi);

/*
 * What a reader that holds a Go thread right after a sample reads of it (the thread has not run since, so
 * nothing read can have moved on; hostprof's fast lane is such a reader): on g0, the goroutine it switched from
 * (g.sched and its stack from g.sched.sp up); on a goroutine, its stack past the sample's copy (from copy_end up).
 * Either is read up to the stack's end, at most max_stack bytes (go_stack_options).
 */
enum go_stack_snapshot_kind {
	GO_STACK_SNAPSHOT_NONE,
	GO_STACK_SNAPSHOT_GOROUTINE,	/* the sample ran on g0: context = the goroutine's, bytes its stack at sp */
	GO_STACK_SNAPSHOT_EXTENSION,	/* the sample ran on a goroutine: bytes = its stack from copy_end on */
};

struct go_stack_snapshot {
	enum go_stack_snapshot_kind kind;
	uint64_t g;		/* GOROUTINE: the goroutine's address (its g) */
	uint64_t pc, sp, bp;	/* GOROUTINE: its saved context */
	uint64_t addr;		/* where bytes start: sp (GOROUTINE) or copy_end (EXTENSION) */
	const uint8_t *bytes;	/* owned by gs, valid until its next read */
	size_t size;
};

/* Returns 0 (kind NONE when there is nothing to read: no goroutine, or the copy reached the stack's end),
 * -ESRCH when g_reg names no g (not Go, Go < 1.17, C code that reused R14), -EIO. */
int go_stack_snapshot(struct go_stack *gs, const struct unwind_memory *mem, uint64_t g_reg, uint64_t copy_end,
		      struct go_stack_snapshot *out);

/* Whether the sample's g0 copy holds the address of goroutine g: newstack, growing g's stack there, keeps it
 * (its gp, morebuf.g, copystack's argument). How a stack-growth sample names the goroutine it was taken on. */
bool go_stack_g0_names(const struct go_stack_g0 *g0, uint64_t g);

void go_stack_get_stats(const struct go_stack *gs, struct go_stack_stats *out);

/*
 * The delta unwinder's stack-switch hook (unwind_deltas_switch_fn; ctx: the go_stack, made with rule_at): a
 * sample on Go's g0 stack reached the function that switched there; go on with the goroutine that switched.
 * First what the caller holds (options.held), if it is that switch: the frame pointer saved there, or, for a
 * stack growth whose frame pointer the walk does not know, a goroutine the sample's g0 frames name. Else, when
 * the sample's frame-pointer chain can be joined and was not cut by the kernel's bound (GO_STACK_CHAIN_CUT
 * entries), the frames that join it: a goroutine read after the sample has almost always resumed (esbuild read in
 * batches: 4% of its g0 samples' goroutines read in time), and a join reads a word or an instruction, not a
 * stack. Else the goroutine read now through proc->memory (go_stack_read; -ENOENT without a reader). Its first
 * PC is exact (a saved PC, or the entry of the function that needed more stack). For stack growth, the g0 frames
 * newstack runs in (the sample's copy up to morestack's frame) say what the goroutine's stack was. When the
 * goroutine cannot be read as it was and the sample carries the kernel's frame-pointer chain, the frames missing
 * from the chain are given for joining it instead (UNWIND_DELTAS_SWITCH_JOIN): a stack growth's grower, at its
 * entry, and its caller, from the sample's g0 copy; a systemstack call's caller, found below the frame pointer the
 * g0 frames saved, or else in its code (go_stack_find_switch_caller_in_code). The stack handed over for a join
 * is the one word the grower's return address was in (or nothing), owned by gs.
 */
#define GO_STACK_CHAIN_CUT 120
int go_stack_follow(void *ctx, const struct unwind_process *proc, const struct unwind_sample *sample,
		    const struct unwind_deltas_regs *frame, enum unwind_deltas_switch kind,
		    struct unwind_deltas_regs *resumed, struct unwind_sample *stack);

#endif
