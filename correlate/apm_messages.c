/*
 * apm_messages.c — the datagrams of the correlation protocol (man/hostprof-correlation.7) and the per-process
 * table of counts waiting to be sent.
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

static uint64_t key_hash(const struct corr_key *k)
{
	return hash_bytes(HASH_SEED, k, sizeof(*k));
}

static bool entry_has_key(const void *ctx, uint64_t value, const void *key)
{
	const struct corr_pending *p = ctx;
	return memcmp(&p->entries[value].key, key, sizeof(struct corr_key)) == 0;
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
	return 0;
}

int corr_pending_add(struct corr_pending *p, const struct corr_key *k, uint64_t sample_ns)
{
	uint64_t h = key_hash(k), i;
	if (hindex_find(&p->index, h, entry_has_key, p, k, &i)) {
		struct corr_pending_entry *e = &p->entries[i];
		if (e->count == 0 || sample_ns < e->oldest_ns)
			e->oldest_ns = sample_ns;
		e->count++;
		p->total++;
		return 0;
	}
	if (p->max && p->n >= p->max)
		return -ENOSPC;
	int err = p->n == p->cap ? grow_entries(p) : 0;
	if (err || (err = hindex_insert(&p->index, h, p->n)) < 0)
		return err;
	struct corr_pending_entry *e = &p->entries[p->n++];
	e->key = *k;
	e->count = 1;
	e->oldest_ns = sample_ns;
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
	/* Fewer entries than the index held: re-adding them cannot fail (hindex.h, hindex_clear). */
	hindex_clear(&p->index);
	for (uint32_t e = 0; e < p->n; e++)
		(void)hindex_insert(&p->index, key_hash(&p->entries[e].key), e);
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
	hindex_clear(&p->index);
	return dropped;
}

void corr_pending_free(struct corr_pending *p)
{
	free(p->entries);
	hindex_free(&p->index);
	p->entries = NULL;
	p->n = p->cap = 0;
	p->total = 0;
}
