/*
 * stackext.h — the rest of a sampled stack, past the kernel's copy, read from the live process.
 *
 * The kernel copies at most 64 KiB of user stack per sample (PERF_SAMPLE_STACK_USER: the whole record must fit
 * in 64 KiB). Deep recursion — a recursive-descent parser with multi-KiB frames, a Go goroutine thousands of
 * frames down — leaves its outer callers beyond that copy, and the walk would end [truncated] there. When a walk
 * needs an address past the copy, stackext reads on from the process's memory, through the reader its caller
 * passes (unwind.h, struct unwind_memory; for the live process src/processes/procmem.h), in chunks, up to a limit.
 *
 * Correctness: the read happens when the sample is handled, after it was taken, so the thread has moved on. A
 * caller's return address and saved frame pointer change only when that caller returns; a thread that returned
 * past the end of the copy and called again would, in all likelihood, have rewritten the frames just below it.
 * So the extension is used only if the last STACKEXT_WITNESS bytes of the copy (the frames just below its end)
 * are still byte-for-byte the same in the process, read in the same read as the extension. A thread that
 * changed them (returned, or wrote its callers' locals) is refused and counted as stale; the walk then ends
 * where it did without stackext. The kernel's copy can also end early, at a page its interrupt-time copy could
 * not read (not present in the page tables): the same rule reads on from there. A copy shorter than
 * STACKEXT_MIN_WITNESS (or empty: a sample taken while the thread faulted in its stack page) has no witness and
 * is not extended.
 *
 * Untrusted input: the address to read comes from the sampled stack. Reads are bounded by the limit given to
 * stackext_new(), counted from the sampled SP; a pid that vanished or memory that is unmapped is reported, not
 * fatal. Not thread-safe.
 */
#ifndef HOSTPROF_STACKEXT_H
#define HOSTPROF_STACKEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

/* Bytes at the end of a copy that must be unchanged in the process for an extension to be used: this many, or
 * the whole copy when shorter, but no fewer than STACKEXT_MIN_WITNESS. */
#define STACKEXT_WITNESS 512
#define STACKEXT_MIN_WITNESS 128

struct stackext_stats {
	uint64_t extended;	/* extensions handed to the unwinder */
	uint64_t stale;		/* refused: the end of the copy had changed in the process */
	uint64_t unreadable;	/* the process's memory there could not be read (gone, unmapped) */
	uint64_t beyond_limit;	/* the walk needed more than the limit, or past the end of a Go stack */
	uint64_t too_short;	/* the copy was shorter than STACKEXT_MIN_WITNESS: nothing to check the process by */
};

/* A stack: bytes from sp up, as the unwinder reads them (unwind.h's unwind_sample.stack). */
struct stackext_stack {
	uint64_t sp;
	const uint8_t *bytes;
	size_t size;
	/* Where the thread's stack is now, when known (Go: the goroutine's bounds); else 0 and UINT64_MAX. A stack
	 * whose sp is no longer inside moved (Go copies a goroutine's stack to grow it, and frees the old one). */
	uint64_t lo, hi;
};

struct stackext;

/* max_bytes: most stack bytes a walk may see, from the sampled SP (>= the copy size to be of any use). The buffer
 * for them is allocated here, once: reads allocate nothing. Returns 0 and *out, or -ENOMEM. */
int stackext_new(size_t max_bytes, struct stackext **out);
void stackext_free(struct stackext *x);

/*
 * A longer copy of stack (same sp) that covers [addr, addr + 8): stack's bytes then the process's (read through
 * mem), from the end of stack on, in a buffer owned by x and valid until the next call. addr must lie past the
 * end of stack.
 * stack may be what an earlier call gave (a walk reading on, a chunk at a time, up to the limit): its end, read
 * by that call, is then the witness, so each piece is checked against the one before it.
 * Reads stop at stack->hi. Returns 0 and fills *out; -ESTALE (the end of stack changed in the process, or the
 * stack moved), -EIO (unreadable), -E2BIG (addr beyond the limit or stack->hi), -ENODATA (stack shorter than
 * STACKEXT_MIN_WITNESS) or -EINVAL (addr not past stack). Each but -EINVAL is counted in stackext_stats.
 */
int stackext_read(struct stackext *x, const struct unwind_memory *mem, const struct stackext_stack *stack,
		  uint64_t addr, struct stackext_stack *out);

void stackext_get_stats(const struct stackext *x, struct stackext_stats *out);

/* Whether bytes is the buffer stackext_read() gives its stacks in (a stack it may read on from). */
bool stackext_owns(const struct stackext *x, const uint8_t *bytes);

#endif
