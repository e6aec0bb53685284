/*
 * apm_messages.c — the datagrams of seed 000 and the per-process table of counts waiting to be sent.
 *
 * Messages are native-endian (x86_64: little-endian), one message per datagram because the Java agent
 * decodes one message per recv() and ignores trailing bytes. A correlation message carries at most
 * CORR_MAX_COUNT: the agent reads the count as a signed 16-bit value and adds nothing for negative ones.
 *
 * The pending table aggregates counts per (trace-id, transaction-id, stack-trace ID) key. Entries keep
 * first-seen order, so a flush interrupted by a full receiver queue resumes with the oldest key; a flush
 * compacts the table and rebuilds its index. The table is bounded (max keys): past it, add() refuses and the
 * caller counts the sample as dropped. Not thread-safe.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "correlate/correlate_impl.h"

static void put_u16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

static void put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

size_t corr_encode_correlation(uint8_t out[CORR_CORRELATION_LEN], const struct corr_key *k, uint16_t count)
{
	put_u16(out, CORR_MSG_CORRELATION);
	put_u16(out + 2, CORR_MSG_CORRELATION_MINOR);
	memcpy(out + 4, k->trace_id, CORRELATE_TRACE_ID_LEN);
	memcpy(out + 20, k->transaction_id, CORRELATE_TRANSACTION_ID_LEN);
	memcpy(out + 28, k->stack_id, CORRELATE_STACK_ID_LEN);
	put_u16(out + 44, count);
	return CORR_CORRELATION_LEN;
}

ssize_t corr_encode_registration(uint8_t *out, size_t cap, uint32_t delay_ms, const char *host_id,
				 size_t host_id_len)
{
	size_t len = 12 + host_id_len;
	if (host_id_len > CORRELATE_HOST_ID_MAX || len > cap)
		return -EMSGSIZE;
	put_u16(out, CORR_MSG_REGISTRATION);
	put_u16(out + 2, CORR_MSG_REGISTRATION_MINOR);
	put_u32(out + 4, delay_ms);
	put_u32(out + 8, (uint32_t)host_id_len);
	if (host_id_len)
		memcpy(out + 12, host_id, host_id_len);
	return (ssize_t)len;
}

/* FNV-1a over the key: cheap, and the stack-trace IDs in it are already hashes. */
static uint32_t key_hash(const struct corr_key *k)
{
	const uint8_t *b = (const uint8_t *)k;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static void index_insert(struct corr_pending *p, uint32_t entry)
{
	uint32_t i = key_hash(&p->entries[entry].key) & p->index_mask;
	while (p->index[i])
		i = (i + 1) & p->index_mask;
	p->index[i] = entry + 1;
}

/* Index capacity: a power of two at least twice the entry capacity, so probes stay short. */
static int rebuild_index(struct corr_pending *p, uint32_t min_entries)
{
	uint32_t cap = 64;
	while (cap < 2 * min_entries)
		cap *= 2;
	if (!p->index || cap != p->index_mask + 1) {
		uint32_t *idx = calloc(cap, sizeof(*idx));
		if (!idx)
			return -ENOMEM;
		free(p->index);
		p->index = idx;
		p->index_mask = cap - 1;
	} else {
		memset(p->index, 0, (size_t)cap * sizeof(*p->index));
	}
	for (uint32_t e = 0; e < p->n; e++)
		index_insert(p, e);
	return 0;
}

static int grow_entries(struct corr_pending *p)
{
	uint32_t cap = p->cap ? p->cap * 2 : 32;
	if (p->max && cap > p->max)
		cap = p->max;
	struct corr_pending_entry *e = realloc(p->entries, (size_t)cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	p->entries = e;
	p->cap = cap;
	return rebuild_index(p, cap);
}

int corr_pending_add(struct corr_pending *p, const struct corr_key *k, uint64_t sample_ns)
{
	if (p->index) {
		for (uint32_t i = key_hash(k) & p->index_mask; p->index[i]; i = (i + 1) & p->index_mask) {
			struct corr_pending_entry *e = &p->entries[p->index[i] - 1];
			if (memcmp(&e->key, k, sizeof(*k)) == 0) {
				if (e->count == 0 || sample_ns < e->oldest_ns)
					e->oldest_ns = sample_ns;
				e->count++;
				p->total++;
				return 0;
			}
		}
	}
	if (p->max && p->n >= p->max)
		return -ENOSPC;
	if (p->n == p->cap) {
		int err = grow_entries(p);
		if (err)
			return err;
	}
	struct corr_pending_entry *e = &p->entries[p->n];
	e->key = *k;
	e->count = 1;
	e->oldest_ns = sample_ns;
	index_insert(p, p->n++);
	p->total++;
	return 0;
}

static void record_latency(uint64_t *hist, uint64_t now_ns, uint64_t oldest_ns, uint64_t count)
{
	uint64_t ms = now_ns > oldest_ns ? (now_ns - oldest_ns) / 1000000 : 0;
	uint64_t b = ms / CORRELATE_LATENCY_BUCKET_MS;
	hist[b < CORRELATE_LATENCY_BUCKETS ? b : CORRELATE_LATENCY_BUCKETS - 1] += count;
}

/* Drop fully sent entries, keeping order, and re-index. */
static void compact(struct corr_pending *p)
{
	uint32_t w = 0;
	for (uint32_t r = 0; r < p->n; r++)
		if (p->entries[r].count)
			p->entries[w++] = p->entries[r];
	if (w == p->n)
		return;
	p->n = w;
	/* Only shrinking the entry count: the index keeps its size, so this cannot fail. */
	memset(p->index, 0, (size_t)(p->index_mask + 1) * sizeof(*p->index));
	for (uint32_t e = 0; e < p->n; e++)
		index_insert(p, e);
}

int corr_pending_flush(struct corr_pending *p, corr_send_fn send, void *arg, uint64_t now_ns, uint64_t *hist,
		       struct corr_flush_result *res)
{
	uint8_t msg[CORR_CORRELATION_LEN];
	int err = 0;
	res->messages = res->counts = 0;
	for (uint32_t i = 0; i < p->n && !err; i++) {
		struct corr_pending_entry *e = &p->entries[i];
		while (e->count) {
			uint16_t n = e->count > CORR_MAX_COUNT ? CORR_MAX_COUNT : (uint16_t)e->count;
			corr_encode_correlation(msg, &e->key, n);
			err = send(arg, msg, sizeof(msg));
			if (err)
				break;
			e->count -= n;
			p->total -= n;
			res->messages++;
			res->counts += n;
			if (hist)
				record_latency(hist, now_ns, e->oldest_ns, n);
		}
	}
	if (p->n)
		compact(p);
	return err;
}

uint64_t corr_pending_clear(struct corr_pending *p)
{
	uint64_t dropped = p->total;
	p->n = 0;
	p->total = 0;
	if (p->index)
		memset(p->index, 0, (size_t)(p->index_mask + 1) * sizeof(*p->index));
	return dropped;
}

void corr_pending_free(struct corr_pending *p)
{
	free(p->entries);
	free(p->index);
	p->entries = NULL;
	p->index = NULL;
	p->n = p->cap = 0;
	p->index_mask = 0;
	p->total = 0;
}
