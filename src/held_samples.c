/*
 * held_samples.c — samples kept until their table is ready. See held_samples.h for the contract.
 */
#include "src/held_samples.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct held_samples {
	struct held_batch cur;
	struct held_batch *replay;	/* the batch taken and being walked again, NULL: none */
	unsigned max_count;
	size_t max_bytes;
};

static void batch_unmap(struct held_batch *b)
{
	if (b->base)
		munmap(b->base, b->cap);
	memset(b, 0, sizeof(*b));
}

int held_samples_new(unsigned max_count, size_t max_bytes, struct held_samples **out)
{
	struct held_samples *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->max_count = max_count ? max_count : HELD_SAMPLES_MAX_COUNT;
	h->max_bytes = max_bytes ? max_bytes : HELD_SAMPLES_MAX_BYTES;
	*out = h;
	return 0;
}

void held_samples_free(struct held_samples *h)
{
	if (!h)
		return;
	batch_unmap(&h->cur);
	free(h);
}

/* Bytes a record takes: records stay 8-byte aligned for the decoder. */
static size_t held_size(const struct perf_event_header *rec)
{
	return (rec->size + 7u) & ~(size_t)7;
}

/* Whether rec is a record of the batch being walked again (it is then kept in place). */
static bool in_replay(const struct held_samples *h, const struct perf_event_header *rec)
{
	const struct held_batch *r = h->replay;
	return r && (const uint8_t *)rec >= r->base && (const uint8_t *)rec < r->base + r->len;
}

bool held_samples_room(const struct held_samples *h, const struct perf_event_header *rec)
{
	const struct held_batch *b = &h->cur, *r = h->replay;
	size_t kept = r ? r->kept : 0;
	unsigned kept_count = r ? r->kept_count : 0;
	/* Both generations become one (held_samples_done()): the bounds are of the two together. */
	return rec->size >= sizeof(*rec) && (in_replay(h, rec) ||
		(b->count + kept_count < h->max_count && b->len + kept + held_size(rec) <= h->max_bytes));
}

int held_samples_add(struct held_samples *h, const struct perf_event_header *rec)
{
	size_t size = held_size(rec);
	struct held_batch *b = &h->cur;
	if (!held_samples_room(h, rec))
		return -ENOSPC;
	if (in_replay(h, rec)) {
		/* Down over the records handled before it (kept <= its offset): no new page touched. */
		memmove(h->replay->base + h->replay->kept, rec, rec->size);
		h->replay->kept += size;
		h->replay->kept_count++;
		return 0;
	}
	if (!b->base) {
		/* Reserved, not committed: only the pages records are written to count. */
		void *p = mmap(NULL, h->max_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);
		if (p == MAP_FAILED)
			return -ENOMEM;
		b->base = p;
		b->cap = h->max_bytes;
	}
	memcpy(b->base + b->len, rec, rec->size);
	b->len += size;
	b->count++;
	return 0;
}

unsigned held_samples_count(const struct held_samples *h)
{
	return h->cur.count;
}

void held_samples_take(struct held_samples *h, struct held_batch *out)
{
	*out = h->cur;
	out->pos = out->kept = 0;
	out->kept_count = 0;
	memset(&h->cur, 0, sizeof(h->cur));
	h->replay = out;
}

void held_samples_done(struct held_samples *h, struct held_batch *b)
{
	h->replay = NULL;
	if (!b->kept) {
		batch_unmap(b);
		return;
	}
	/* The records held meanwhile after the kept ones (the bounds were of both together), in b's mapping. */
	if (h->cur.len)
		memcpy(b->base + b->kept, h->cur.base, h->cur.len);
	b->len = b->kept + h->cur.len;
	b->count = b->kept_count + h->cur.count;
	batch_unmap(&h->cur);
	/* The pages past the records go back to the kernel; the mapping stays reserved. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE), used = (b->len + page - 1) & ~(page - 1);
	if (used < b->cap)
		madvise(b->base + used, b->cap - used, MADV_DONTNEED);
	b->pos = b->kept = 0;
	b->kept_count = 0;
	h->cur = *b;
	memset(b, 0, sizeof(*b));
}

const struct perf_event_header *held_batch_next(struct held_batch *b)
{
	if (!b->base || b->pos >= b->len)
		return NULL;
	const struct perf_event_header *rec = (const void *)(b->base + b->pos);
	b->pos += (rec->size + 7u) & ~(size_t)7;
	return rec;
}


