/*
 * held_samples.c — samples kept until their table is ready. See held_samples.h for the contract.
 *
 * Each entry is a small header (the sample's pid) followed by the record, both 8-byte aligned, so that the
 * records stay aligned for the decoder and the per-process counts need no decoding.
 */
#include "src/pipeline/held_samples.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/base/hindex.h"

struct entry_head {
	uint32_t pid;
	uint32_t size;	/* bytes of the whole entry */
};

struct held_samples {
	struct held_batch cur;
	struct held_batch *replay;	/* the batch taken and being walked again, NULL: none */
	struct hindex per_pid;		/* pid → records of its held, in either generation */
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
	hindex_free(&h->per_pid);
	free(h);
}

/* Bytes an entry takes: its header and the record, 8-byte aligned. */
static size_t entry_size(const struct perf_event_header *rec)
{
	return sizeof(struct entry_head) + ((rec->size + 7u) & ~(size_t)7);
}

static void count_pid(struct held_samples *h, uint32_t pid, int delta)
{
	uint64_t n = 0;
	hindex_u32_get(&h->per_pid, pid, &n);
	if (delta < 0 && n <= 1)
		hindex_u32_del(&h->per_pid, pid);
	else if (hindex_u32_put(&h->per_pid, pid, delta < 0 ? n - 1 : n + 1) < 0) {
		/* out of memory: this pid is not kept for its held samples, which are walked all the same */
	}
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
		(b->count + kept_count < h->max_count && b->len + kept + entry_size(rec) <= h->max_bytes));
}

/* rec, the batch's record walked last, held again: down over the entries handled before it (kept <= its
 * offset), no new page touched. Its pid's count stays. */
static void keep_in_place(struct held_batch *r, const struct perf_event_header *rec)
{
	const struct entry_head *head = (const struct entry_head *)rec - 1;
	size_t size = head->size;
	memmove(r->base + r->kept, head, size);
	r->kept += size;
	r->kept_count++;
	r->last_kept = true;
}

int held_samples_add(struct held_samples *h, const struct perf_event_header *rec, pid_t pid)
{
	size_t size = entry_size(rec);
	struct held_batch *b = &h->cur;
	if (!held_samples_room(h, rec))
		return -ENOSPC;
	if (in_replay(h, rec)) {
		keep_in_place(h->replay, rec);
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
	struct entry_head head = { .pid = (uint32_t)pid, .size = (uint32_t)size };
	memcpy(b->base + b->len, &head, sizeof(head));
	memcpy(b->base + b->len + sizeof(head), rec, rec->size);
	b->len += size;
	b->count++;
	count_pid(h, (uint32_t)pid, +1);
	return 0;
}

unsigned held_samples_count(const struct held_samples *h)
{
	return h->cur.count;
}

unsigned held_samples_of(const struct held_samples *h, pid_t pid)
{
	uint64_t n = 0;
	hindex_u32_get(&h->per_pid, (uint32_t)pid, &n);
	return (unsigned)n;
}

void held_samples_take(struct held_samples *h, struct held_batch *out)
{
	*out = h->cur;
	out->pos = out->kept = 0;
	out->kept_count = 0;
	out->walked = NULL;
	out->last_kept = false;
	memset(&h->cur, 0, sizeof(h->cur));
	h->replay = out;
}

/* The record walked last, unless held again, is no longer its process's. */
static void release_walked(struct held_samples *h, struct held_batch *b)
{
	if (b->walked && !b->last_kept)
		count_pid(h, ((const struct entry_head *)b->walked)->pid, -1);
	b->walked = NULL;
	b->last_kept = false;
}

const struct perf_event_header *held_batch_next(struct held_samples *h, struct held_batch *b)
{
	release_walked(h, b);
	if (!b->base || b->pos >= b->len)
		return NULL;
	const struct entry_head *head = (const void *)(b->base + b->pos);
	b->walked = head;
	b->pos += head->size;
	return (const struct perf_event_header *)(head + 1);
}

void held_samples_done(struct held_samples *h, struct held_batch *b)
{
	release_walked(h, b);
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
