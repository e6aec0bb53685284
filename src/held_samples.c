/*
 * held_samples.c — samples kept until their table is ready. See held_samples.h for the contract.
 */
#include "src/held_samples.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct held_samples {
	struct held_batch cur;
	unsigned max_count;
	size_t max_bytes;
};

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
	held_batch_free(&h->cur);
	free(h);
}

/* Bytes a record takes: records stay 8-byte aligned for the decoder. */
static size_t held_size(const struct perf_event_header *rec)
{
	return (rec->size + 7u) & ~(size_t)7;
}

bool held_samples_room(const struct held_samples *h, const struct perf_event_header *rec)
{
	const struct held_batch *b = &h->cur;
	return rec->size >= sizeof(*rec) && b->count < h->max_count && b->len + held_size(rec) <= h->max_bytes;
}

int held_samples_add(struct held_samples *h, const struct perf_event_header *rec)
{
	size_t size = held_size(rec);
	struct held_batch *b = &h->cur;
	if (!held_samples_room(h, rec))
		return -ENOSPC;
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
	out->pos = 0;
	memset(&h->cur, 0, sizeof(h->cur));
}

const struct perf_event_header *held_batch_next(struct held_batch *b)
{
	if (!b->base || b->pos >= b->len)
		return NULL;
	const struct perf_event_header *rec = (const void *)(b->base + b->pos);
	b->pos += (rec->size + 7u) & ~(size_t)7;
	return rec;
}

void held_batch_free(struct held_batch *b)
{
	if (b->base)
		munmap(b->base, b->cap);
	memset(b, 0, sizeof(*b));
}
