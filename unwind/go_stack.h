/*
 * gostack.h — the goroutine behind a sample taken on a Go g0 stack.
 *
 * Go runs stack growth (runtime.morestack -> newstack -> copystack), runtime.systemstack(fn) and cgo calls
 * (runtime.asmcgocall) on the thread's g0 stack. A sample taken there holds the g0 stack only; the goroutine
 * that switched, with all its callers, is on its own stack elsewhere in memory. Go saved that goroutine's
 * context (g.sched: PC, SP, BP) when it switched, so it can be found and read from the live process:
 * the g register (R14, Go >= 1.17) gives g0 or the goroutine; g.m, m.g0 and m.curg lead to the goroutine;
 * its g.sched and the stack from g.sched.sp up are read with process_vm_readv. Without a g register (Go < 1.17),
 * a stack growth still names its goroutine: newstack's copy of m.morebuf, in the g0 frames the sample copied,
 * holds it (morebuf.g), and it is checked the same way.
 *
 * Correctness: the read happens when the sample is handled, after it was taken, so the goroutine may have moved
 * on. The context is used only when it provably is the one the sample saw: the frame pointer the goroutine saved
 * at the switch equals the one the unwinder recovered at the switching frame from the sample's own stack copy,
 * and g.sched is unchanged after its stack was read (or, for a stack growth already over, what gostack_read
 * below describes). Anything else — no goroutine found (C code that reused R14; Go < 1.17 outside a stack
 * growth), a layout that does not check out (m.g0 == g0, curg.m == m, SP inside the goroutine's stack), an
 * unreadable address, a stale context — is refused and counted; the stack then ends where it did without this.
 *
 * Runtime layout used (amd64, stable since Go 1.5 through at least 1.26): g.stack at 0, g.m at 48, g.sched
 * (gobuf: sp, pc, then bp as its last field) at 56; m.g0 at 0, m.morebuf (a gobuf) at 8, m.curg right after
 * m.mstartfn. The gobuf has 7 fields (bp at +48, m.curg at 192) or 6 (bp at +40, m.curg at 184); each is tried
 * and must pass the checks above.
 *
 * Untrusted input: the process may be hostile. Every pointer is checked for alignment and range before use;
 * reads are bounded (the goroutine's own stack bounds, then max_stack bytes). Not thread-safe.
 */
#ifndef HOSTPROF_GOSTACK_H
#define HOSTPROF_GOSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gostack_stats {
	uint64_t followed;	/* contexts handed over (grown included) */
	uint64_t grown;		/* of which rebuilt after stack growth (see gostack_read) */
	uint64_t no_goroutine;	/* the g register led to no goroutine (layout checks failed, no g) */
	uint64_t stale;		/* the goroutine had moved on by the time it was read */
	uint64_t unreadable;	/* process memory could not be read (gone, unmapped, permission) */
	uint64_t growers;	/* stack growths named from the sample alone (gostack_find_grower) */
	uint64_t switch_callers;	/* systemstack callers found (gostack_find_switch_caller) */
};

/* The sample's copy of the g0 stack, from its sampled SP up to the switching frame (newstack's frames and
 * those it called), where a stack growth keeps its bookkeeping. */
struct gostack_g0 {
	const uint8_t *bytes;
	size_t size;
};

/* What a goroutine was doing when it switched to g0: resume unwinding at pc with sp and bp, over stack. */
struct gostack_context {
	uint64_t pc, sp, bp;
	const uint8_t *stack;	/* copy of [sp, sp + size): owned by the gostack, valid until the next read */
	size_t size;
};

struct gostack;

/* max_stack: most bytes of goroutine stack to read per sample (e.g. the sampler's stack-copy size). */
struct gostack *gostack_new(size_t max_stack);
void gostack_free(struct gostack *gs);

/*
 * The goroutine context of pid for a sample whose g register held g_reg, taken under a switching frame whose
 * frame pointer the unwinder recovered as switch_bp. g0 (may be NULL) is the sample's g0 stack copy, for the
 * stack-growth case below. Returns 0, -ESRCH (no goroutine found), -ESTALE (it moved on) or -EIO (unreadable
 * memory).
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
int gostack_read(struct gostack *gs, pid_t pid, uint64_t g_reg, uint64_t switch_bp, const struct gostack_g0 *g0,
		 struct gostack_context *out);

/* What gostack cannot tell by itself, answered by its user from the unwind rules (stack_deltas.h). */
struct gostack_rules {
	/* Whether the Go frame that pc returns into, with SP sp there, keeps its own frame pointer at bp. */
	bool (*caller_keeps_fp)(void *ctx, uint64_t sp, uint64_t pc, uint64_t bp);
	/* Whether addr is the entry of a function that switches to g0 for a call (systemstack, asmcgocall). */
	bool (*is_switch_entry)(void *ctx, uint64_t addr);
	void *ctx;
};

/* A goroutine frame named from the sample, for joining the sample's frame-pointer chain. */
struct gostack_caller {
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
int gostack_find_grower(struct gostack *gs, pid_t pid, uint64_t switch_bp, const struct gostack_g0 *g0,
			const struct gostack_rules *rules, struct gostack_caller *out);

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
int gostack_find_switch_caller(struct gostack *gs, pid_t pid, uint64_t switch_bp, const struct gostack_rules *rules,
			       struct gostack_caller *out);

/*
 * The stack bounds [*lo, *hi) of the goroutine (or g0) that the g register g_reg names in pid, now: g_reg must
 * be its m's g0 or current goroutine. Returns 0, -ESRCH when g_reg names no g (not Go, Go < 1.17, C code that
 * reused R14) or -EIO.
 */
int gostack_bounds(pid_t pid, uint64_t g_reg, uint64_t *lo, uint64_t *hi);

/*
 * What the fast lane's reader (fastlane.h) reads of a Go thread it holds right after a sample (the thread has
 * not run since, so nothing read can have moved on): on g0, the goroutine it switched from (g.sched and its
 * stack from g.sched.sp up); on a goroutine, its stack past the sample's copy (from copy_end up). Either is
 * read up to the stack's end, at most max_stack bytes (gostack_new()).
 */
enum gostack_snapshot_kind {
	GOSTACK_SNAPSHOT_NONE,
	GOSTACK_SNAPSHOT_GOROUTINE,	/* the sample ran on g0: context = the goroutine's, bytes its stack at sp */
	GOSTACK_SNAPSHOT_EXTENSION,	/* the sample ran on a goroutine: bytes = its stack from copy_end on */
};

struct gostack_snapshot {
	enum gostack_snapshot_kind kind;
	uint64_t g;		/* GOROUTINE: the goroutine's address (its g) */
	uint64_t pc, sp, bp;	/* GOROUTINE: its saved context */
	uint64_t addr;		/* where bytes start: sp (GOROUTINE) or copy_end (EXTENSION) */
	const uint8_t *bytes;	/* owned by gs, valid until its next read */
	size_t size;
};

/* Returns 0 (kind NONE when there is nothing to read: no goroutine, or the copy reached the stack's end),
 * -ESRCH when g_reg names no g (not Go, Go < 1.17, C code that reused R14), -EIO. */
int gostack_snapshot(struct gostack *gs, pid_t pid, uint64_t g_reg, uint64_t copy_end, struct gostack_snapshot *out);

/* Whether the sample's g0 copy holds the address of goroutine g: newstack, growing g's stack there, keeps it
 * (its gp, morebuf.g, copystack's argument). How a stack-growth sample names the goroutine it was taken on. */
bool gostack_g0_names(const struct gostack_g0 *g0, uint64_t g);

void gostack_get_stats(const struct gostack *gs, struct gostack_stats *out);

#endif
