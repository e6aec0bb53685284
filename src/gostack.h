/*
 * gostack.h — the goroutine behind a sample taken on a Go g0 stack.
 *
 * Go runs stack growth (runtime.morestack -> newstack -> copystack), runtime.systemstack(fn) and cgo calls
 * (runtime.asmcgocall) on the thread's g0 stack. A sample taken there holds the g0 stack only; the goroutine
 * that switched, with all its callers, is on its own stack elsewhere in memory. Go saved that goroutine's
 * context (g.sched: PC, SP, BP) when it switched, so it can be found and read from the live process:
 * the g register (R14, Go >= 1.17) gives g0 or the goroutine; g.m, m.g0 and m.curg lead to the goroutine;
 * its g.sched and the stack from g.sched.sp up are read with process_vm_readv.
 *
 * Correctness: the read happens when the sample is handled, after it was taken, so the goroutine may have moved
 * on. The context is used only when it provably is the one the sample saw: the frame pointer the goroutine saved
 * at the switch equals the one the unwinder recovered at the switching frame from the sample's own stack copy,
 * and g.sched is unchanged after its stack was read. Anything else — no g register (Go < 1.17, or C code that
 * reused R14), a layout that does not check out (m.g0 == g0, curg.m == m, SP inside the goroutine's stack), an
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

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gostack_stats {
	uint64_t followed;	/* contexts handed over */
	uint64_t no_goroutine;	/* the g register led to no goroutine (layout checks failed, no g) */
	uint64_t stale;		/* the goroutine had moved on by the time it was read */
	uint64_t unreadable;	/* process memory could not be read (gone, unmapped, permission) */
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
 * frame pointer the unwinder recovered as switch_bp. Returns 0, -ESRCH (no goroutine found), -ESTALE (it moved
 * on) or -EIO (unreadable memory).
 */
int gostack_read(struct gostack *gs, pid_t pid, uint64_t g_reg, uint64_t switch_bp, struct gostack_context *out);

void gostack_get_stats(const struct gostack *gs, struct gostack_stats *out);

#endif
