/*
 * perf_record.c — bounds-checked decoding of perf_event records. See perf_record.h.
 *
 * The layouts follow include/uapi/linux/perf_event.h: the fields of a SAMPLE record appear in the fixed order of
 * the PERF_SAMPLE_* bits, and only for the bits that were requested.
 */
#include "src/sampling/perf_record.h"

#include <errno.h>
#include <string.h>

/* A cursor over one record: every read is checked against the end. */
struct cursor {
	const uint8_t *p, *end;
	int bad;
};

static void cursor_init(struct cursor *c, const struct perf_event_header *h, size_t skip)
{
	c->p = (const uint8_t *)h + skip;
	c->end = (const uint8_t *)h + h->size;
	c->bad = h->size < skip;
}

static uint64_t cursor_u64(struct cursor *c)
{
	uint64_t v = 0;
	if (c->bad || c->end - c->p < 8) {
		c->bad = 1;
		return 0;
	}
	memcpy(&v, c->p, 8);
	c->p += 8;
	return v;
}

static void cursor_u32_pair(struct cursor *c, uint32_t *a, uint32_t *b)
{
	uint64_t v = cursor_u64(c);
	/* Two u32 packed in one u64 slot, first field in the low half on little-endian. */
	*a = (uint32_t)v;
	*b = (uint32_t)(v >> 32);
}

/* Reserve n bytes and return where they start, or NULL. */
static const uint8_t *cursor_take(struct cursor *c, uint64_t n)
{
	if (c->bad || (uint64_t)(c->end - c->p) < n) {
		c->bad = 1;
		return NULL;
	}
	const uint8_t *start = c->p;
	c->p += n;
	return start;
}

static void decode_regs(struct cursor *c, uint64_t mask, struct perf_sample *out)
{
	out->regs_abi = cursor_u64(c);
	if (out->regs_abi == PERF_SAMPLE_REGS_ABI_NONE)
		return;
	for (int bit = 0; bit < 64; bit++) {
		if (!(mask & (1ULL << bit)))
			continue;
		uint64_t v = cursor_u64(c);
		if (bit < UNWIND_NREGS)
			out->regs[bit] = v;
	}
}

static void decode_stack(struct cursor *c, struct perf_sample *out)
{
	uint64_t size = cursor_u64(c);
	if (size == 0)
		return; /* no dyn_size follows an empty stack */
	const uint8_t *data = cursor_take(c, size);
	uint64_t dyn = cursor_u64(c);
	if (!data)
		return;
	out->stack = data;
	out->stack_size = dyn < size ? dyn : size;
}

/* The fixed-size fields before the read values, in the kernel's order (IDENTIFIER through PERIOD). */
static void decode_fixed(struct cursor *cur, uint64_t t, struct perf_sample *out)
{
	if (t & PERF_SAMPLE_IDENTIFIER)
		cursor_u64(cur);
	if (t & PERF_SAMPLE_IP)
		out->ip = cursor_u64(cur);
	if (t & PERF_SAMPLE_TID)
		cursor_u32_pair(cur, &out->pid, &out->tid);
	if (t & PERF_SAMPLE_TIME)
		out->time = cursor_u64(cur);
	if (t & PERF_SAMPLE_ADDR)
		cursor_u64(cur);
	if (t & PERF_SAMPLE_ID)
		cursor_u64(cur);
	if (t & PERF_SAMPLE_STREAM_ID)
		cursor_u64(cur);
	if (t & PERF_SAMPLE_CPU) {
		uint32_t res;
		cursor_u32_pair(cur, &out->cpu, &res);
	}
	if (t & PERF_SAMPLE_PERIOD)
		out->period = cursor_u64(cur);
}

int perf_record_time_offset(const struct perf_layout *l, uint32_t type, uint16_t size)
{
	uint64_t t = l->sample_type;
	int off;
	if (!(t & PERF_SAMPLE_TIME))
		return -1;
	if (type == PERF_RECORD_SAMPLE) {
		off = (int)sizeof(struct perf_event_header) + 8 * (!!(t & PERF_SAMPLE_IDENTIFIER) +
								  !!(t & PERF_SAMPLE_IP) + !!(t & PERF_SAMPLE_TID));
		return off + 8 <= size ? off : -1;
	}
	if (!l->sample_id_all)
		return -1;
	/* The sample_id ends the record: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER, as far as asked for. */
	off = (int)size - 8 * (1 + !!(t & PERF_SAMPLE_ID) + !!(t & PERF_SAMPLE_STREAM_ID) + !!(t & PERF_SAMPLE_CPU) +
			       !!(t & PERF_SAMPLE_IDENTIFIER));
	return off >= (int)sizeof(struct perf_event_header) + 8 * !!(t & PERF_SAMPLE_TID) ? off : -1;
}

int perf_decode_sample(const struct perf_layout *l, const struct perf_event_header *h, struct perf_sample *out)
{
	struct cursor c;
	uint64_t t = l->sample_type;

	memset(out, 0, sizeof(*out));
	out->misc = h->misc;
	cursor_init(&c, h, sizeof(*h));
	decode_fixed(&c, t, out);
	if (l->period_in_events)
		out->period = 0;	/* events, not time: the reader's nominal period (perf_layout) */
	if (t & PERF_SAMPLE_READ)
		return -EBADMSG; /* hostprof never asks for it, so the layout is unknown here */
	if (t & PERF_SAMPLE_CALLCHAIN) {
		out->callchain_nr = cursor_u64(&c);
		if (out->callchain_nr > (1u << 16))
			return -EBADMSG;
		out->callchain = (const uint64_t *)cursor_take(&c, out->callchain_nr * 8);
	}
	if (t & PERF_SAMPLE_RAW) {
		uint32_t size, pad;
		const uint8_t *data = c.p + 4;
		cursor_u32_pair(&c, &size, &pad);
		/* The u32 size is followed by the raw data; the pair read consumed the size and 4 data bytes. */
		if (size > 4 && cursor_take(&c, ((size_t)size - 4 + 7) & ~7ULL)) {
			out->raw = data;
			out->raw_size = size;
		}
	}
	if (t & PERF_SAMPLE_BRANCH_STACK)
		return -EBADMSG;
	if (t & PERF_SAMPLE_REGS_USER)
		decode_regs(&c, l->regs_mask, out);
	if (t & PERF_SAMPLE_STACK_USER)
		decode_stack(&c, out);
	return c.bad ? -EBADMSG : 0;
}

/* A NUL-terminated string field followed by the padding to 8 bytes; it must end inside the record. */
static const char *cursor_string(struct cursor *c)
{
	const char *s = (const char *)c->p;
	const uint8_t *nul = c->bad ? NULL : memchr(c->p, '\0', (size_t)(c->end - c->p));
	if (!nul) {
		c->bad = 1;
		return NULL;
	}
	size_t len = (size_t)(nul - c->p) + 1;
	size_t padded = (len + 7) & ~(size_t)7;
	c->p = padded <= (size_t)(c->end - c->p) ? c->p + padded : c->end;
	return s;
}

int perf_decode_mmap2(const struct perf_event_header *h, struct perf_mmap2 *out)
{
	struct cursor c;

	if (h->type != PERF_RECORD_MMAP2)
		return -EINVAL;
	cursor_init(&c, h, sizeof(*h));
	cursor_u32_pair(&c, &out->pid, &out->tid);
	out->addr = cursor_u64(&c);
	out->len = cursor_u64(&c);
	out->pgoff = cursor_u64(&c);
	if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		/* build_id_size u8, 3 reserved, 20 bytes build id: the same 24 bytes as maj..ino_generation. */
		cursor_take(&c, 24);
		out->maj = out->min = 0;
		out->ino = 0;
	} else {
		cursor_u32_pair(&c, &out->maj, &out->min);
		out->ino = cursor_u64(&c);
		cursor_u64(&c); /* ino_generation */
	}
	cursor_u32_pair(&c, &out->prot, &out->flags);
	out->filename = cursor_string(&c);
	return c.bad ? -EBADMSG : 0;
}

int perf_decode_comm(const struct perf_event_header *h, struct perf_comm *out)
{
	struct cursor c;

	if (h->type != PERF_RECORD_COMM)
		return -EINVAL;
	cursor_init(&c, h, sizeof(*h));
	cursor_u32_pair(&c, &out->pid, &out->tid);
	out->exec = !!(h->misc & PERF_RECORD_MISC_COMM_EXEC);
	out->comm = cursor_string(&c);
	return c.bad ? -EBADMSG : 0;
}

int perf_decode_task(const struct perf_event_header *h, struct perf_task *out)
{
	struct cursor c;

	if (h->type != PERF_RECORD_FORK && h->type != PERF_RECORD_EXIT)
		return -EINVAL;
	cursor_init(&c, h, sizeof(*h));
	cursor_u32_pair(&c, &out->pid, &out->ppid);
	cursor_u32_pair(&c, &out->tid, &out->ptid);
	out->time = cursor_u64(&c);
	return c.bad ? -EBADMSG : 0;
}

int perf_decode_switch(const struct perf_layout *l, const struct perf_event_header *h, struct perf_switch *out)
{
	struct cursor c;
	uint64_t t = l->sample_type;
	if (h->type != PERF_RECORD_SWITCH && h->type != PERF_RECORD_SWITCH_CPU_WIDE)
		return -EINVAL;
	int off = perf_record_time_offset(l, h->type, h->size);
	if (off < 0 || !(t & PERF_SAMPLE_TID))
		return -EBADMSG;
	cursor_init(&c, h, (size_t)off - 8);	/* TID, TIME, then ID, STREAM_ID, CPU as asked for */
	cursor_u32_pair(&c, &out->pid, &out->tid);
	out->time = cursor_u64(&c);
	if (t & PERF_SAMPLE_ID)
		cursor_u64(&c);
	if (t & PERF_SAMPLE_STREAM_ID)
		cursor_u64(&c);
	out->cpu = 0;
	if (t & PERF_SAMPLE_CPU) {
		uint32_t res;
		cursor_u32_pair(&c, &out->cpu, &res);
	}
	out->out = !!(h->misc & PERF_RECORD_MISC_SWITCH_OUT);
	out->preempted = !!(h->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
	return c.bad ? -EBADMSG : 0;
}

int perf_decode_lost(const struct perf_event_header *h, struct perf_lost *out)
{
	struct cursor c;

	if (h->type != PERF_RECORD_LOST)
		return -EINVAL;
	cursor_init(&c, h, sizeof(*h));
	out->id = cursor_u64(&c);
	out->lost = cursor_u64(&c);
	return c.bad ? -EBADMSG : 0;
}

int perf_decode_lost_samples(const struct perf_event_header *h, uint64_t *lost)
{
	struct cursor c;

	if (h->type != PERF_RECORD_LOST_SAMPLES)
		return -EINVAL;
	cursor_init(&c, h, sizeof(*h));
	*lost = cursor_u64(&c);
	return c.bad ? -EBADMSG : 0;
}

/* The entries of one context (PERF_CONTEXT_KERNEL or _USER) of a sample's callchain, without the markers. */
static void callchain_part(const struct perf_sample *s, uint64_t context, const uint64_t **part, size_t *npart)
{
	int inside = 0;
	size_t first = 0, n = 0;

	*part = NULL;
	*npart = 0;
	for (uint64_t i = 0; i < s->callchain_nr; i++) {
		uint64_t ip = s->callchain[i];
		if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
			if (inside)
				break; /* each part is contiguous: a new context ends it */
			inside = ip == context;
			first = (size_t)i + 1;
			continue;
		}
		if (inside)
			n++;
	}
	if (n) {
		*part = s->callchain + first;
		*npart = n;
	}
}

void perf_callchain_kernel(const struct perf_sample *s, const uint64_t **kernel, size_t *nkernel)
{
	callchain_part(s, (uint64_t)PERF_CONTEXT_KERNEL, kernel, nkernel);
}

void perf_callchain_user(const struct perf_sample *s, const uint64_t **user, size_t *nuser)
{
	callchain_part(s, (uint64_t)PERF_CONTEXT_USER, user, nuser);
}

static const void *rebased(const void *p, const void *from, const void *to)
{
	return p ? (const uint8_t *)to + ((const uint8_t *)p - (const uint8_t *)from) : NULL;
}

void perf_sample_rebase(struct perf_sample *ps, const void *from, const void *to)
{
	ps->callchain = rebased(ps->callchain, from, to);
	ps->stack = rebased(ps->stack, from, to);
	ps->raw = rebased(ps->raw, from, to);
}
