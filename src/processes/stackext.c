/*
 * stackext.c — the rest of a sampled stack, read from the live process. See stackext.h for the contract.
 */
#include "src/processes/stackext.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Read at least this much more per extension, and at least as much as the walk already has (a deep stack takes
 * a few system calls, not one per chunk): one read covers more frames than the walk needs right now. */
#define STACKEXT_CHUNK (64u * 1024u)

struct stackext {
	size_t max_bytes;
	uint8_t *buf;
	size_t cap;
	struct stackext_stats stats;
};

int stackext_new(size_t max_bytes, struct stackext **out)
{
	struct stackext *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->max_bytes = max_bytes;
	x->cap = max_bytes ? max_bytes : 1;
	/* Untouched pages cost no memory: only as much as walks read is ever committed. */
	if (!(x->buf = malloc(x->cap))) {
		free(x);
		return -ENOMEM;
	}
	*out = x;
	return 0;
}

void stackext_free(struct stackext *x)
{
	if (!x)
		return;
	free(x->buf);
	free(x);
}

void stackext_get_stats(const struct stackext *x, struct stackext_stats *out)
{
	*out = x->stats;
}

static int count(struct stackext *x, int rc)
{
	if (rc == 0)
		x->stats.extended++;
	else if (rc == -ESTALE)
		x->stats.stale++;
	else if (rc == -EIO)
		x->stats.unreadable++;
	else if (rc == -E2BIG)
		x->stats.beyond_limit++;
	else if (rc == -ENODATA)
		x->stats.too_short++;
	return rc;
}

bool stackext_owns(const struct stackext *x, const uint8_t *bytes)
{
	return x && bytes == x->buf;
}

/* Make x->buf start with stack's bytes (already there when stack is x's own buffer). want <= max_bytes. */
static int hold(struct stackext *x, const struct stackext_stack *stack, size_t want)
{
	if (want > x->cap || stack->size > want)
		return -E2BIG;
	if (stack->bytes != x->buf)
		memcpy(x->buf, stack->bytes, stack->size);
	return 0;
}

/* Bytes of stack a walk needing addr should see: a chunk more than it has, at least through addr, at most max. */
static size_t wanted_size(const struct stackext *x, const struct stackext_stack *stack, uint64_t addr)
{
	uint64_t need = addr + 8 - stack->sp;
	uint64_t want = stack->size + (stack->size > STACKEXT_CHUNK ? stack->size : STACKEXT_CHUNK);
	if (want < need)
		want = need;
	if (want > stack->hi - stack->sp)
		want = stack->hi - stack->sp;
	return want > x->max_bytes ? x->max_bytes : (size_t)want;
}

/*
 * One read: the witness (the copy's last wlen bytes, as the process has them now) and the extension after it, into
 * x->buf over the witness's place (put back when the read fails). It must reach need bytes past the copy: a short
 * read ends where the stack's mapping does. Returns the extension's length, -EIO or -ESTALE.
 */
static ssize_t read_on(struct stackext *x, const struct unwind_memory *mem, const struct stackext_stack *stack,
		       size_t wlen, size_t want, uint64_t need)
{
	uint8_t witness[STACKEXT_WITNESS];
	uint8_t *at = x->buf + stack->size - wlen;
	memcpy(witness, at, wlen);
	ssize_t n = mem->read(mem->ctx, stack->sp + stack->size - wlen, at, wlen + want - stack->size);
	if (n >= 0 && (uint64_t)n >= wlen + need && memcmp(witness, at, wlen) == 0)
		return n - (ssize_t)wlen;
	memcpy(at, witness, wlen);
	return n < 0 || (uint64_t)n < wlen + need ? -EIO : -ESTALE;
}

int stackext_read(struct stackext *x, const struct unwind_memory *mem, const struct stackext_stack *stack,
		  uint64_t addr, struct stackext_stack *out)
{
	uint64_t end = stack->sp + stack->size;
	size_t wlen = stack->size < STACKEXT_WITNESS ? stack->size : STACKEXT_WITNESS;
	if (end < stack->sp || addr < end || addr > UINT64_MAX - 8)
		return -EINVAL;
	if (wlen < STACKEXT_MIN_WITNESS)
		return count(x, -ENODATA);
	if (stack->sp < stack->lo || stack->sp >= stack->hi)
		return count(x, -ESTALE);
	if (addr + 8 - stack->sp > x->max_bytes || addr + 8 > stack->hi)
		return count(x, -E2BIG);
	size_t want = wanted_size(x, stack, addr);
	int rc = hold(x, stack, want);
	if (rc < 0)
		return count(x, rc);
	ssize_t got = read_on(x, mem, stack, wlen, want, addr + 8 - end);
	if (got < 0)
		return count(x, (int)got);
	out->sp = stack->sp;
	out->lo = stack->lo;
	out->hi = stack->hi;
	out->bytes = x->buf;
	out->size = stack->size + (size_t)got;
	return count(x, 0);
}
