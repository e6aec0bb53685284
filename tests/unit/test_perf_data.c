/*
 * Unit tests for src/sampling/perf_data.c: perf.data files built byte by byte as perf lays them out (header,
 * attribute with its ids, data section, feature sections), read through the record source: perf's round order,
 * MMAP delivered as MMAP2, two events told apart by id, feature strings and build-ids, a zstd stream whose records
 * straddle COMPRESSED records, many rounds of such a stream read by a consumer that stops drains early, periods
 * kept (time) or read as 0 (events), sched:sched_switch samples as off-CPU samples with their switch records (made
 * by the reader, or the file's own), and the errors (a corrupt record named by offset, sched_switch raw data too
 * short, a file cut short read as far as it goes, not a perf.data file).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zstd.h>

#include "src/sampling/perf_data.h"

#define SAMPLE_TYPE (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD)
#define SAMPLE_TYPE_ID (SAMPLE_TYPE | PERF_SAMPLE_IDENTIFIER)

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static void put_bytes(struct buf *b, const void *v, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 1024;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->n, v, n);
	b->n += n;
}

static void put64(struct buf *b, uint64_t v)
{
	put_bytes(b, &v, 8);
}

static void put_pair(struct buf *b, uint32_t lo, uint32_t hi)
{
	put64(b, (uint64_t)hi << 32 | lo);
}

static void put_header(struct buf *b, uint32_t type, uint16_t misc, uint16_t size)
{
	struct perf_event_header h = { .type = type, .misc = misc, .size = size };
	put_bytes(b, &h, sizeof(h));
}

static void set64(struct buf *b, size_t at, uint64_t v)
{
	memcpy(b->p + at, &v, 8);
}

/* A sample of layout SAMPLE_TYPE (id: SAMPLE_TYPE_ID, the id first) at time t. */
static void put_sample(struct buf *b, uint64_t t, uint64_t ip, const uint64_t *id)
{
	put_header(b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, (uint16_t)(8 + 32 + (id ? 8 : 0)));
	if (id)
		put64(b, *id);
	put64(b, ip);
	put_pair(b, 7, 7);
	put64(b, t);
	put64(b, 1000000);	/* period */
}

/* A COMM record with its sample_id (TID, TIME; IDENTIFIER last when id). */
static void put_comm(struct buf *b, uint64_t t, const char *comm, const uint64_t *id)
{
	put_header(b, PERF_RECORD_COMM, 0, (uint16_t)(8 + 8 + 16 + 16 + (id ? 8 : 0)));
	put_pair(b, 7, 7);
	char name[16] = "";
	strncpy(name, comm, sizeof(name) - 1);
	put_bytes(b, name, 16);
	put_pair(b, 7, 7);	/* sample_id: tid */
	put64(b, t);		/* ... time */
	if (id)
		put64(b, *id);
}

static void put_round(struct buf *b)
{
	put_header(b, 68, 0, 8);	/* FINISHED_ROUND */
}

/*
 * A file: header, one attribute per sample type given (freq 999, sample_id_all, ids[i] its id when ids), the data
 * data[0..n), then the hostname feature "testhost".
 */
static struct buf make_file(const uint64_t *types, unsigned nattrs, const uint64_t *ids, const struct buf *data,
			    bool features)
{
	struct buf f = { 0 };
	const size_t attr_size = sizeof(struct perf_event_attr), entry = attr_size + 16;
	put_bytes(&f, "PERFILE2", 8);
	put64(&f, 104);
	put64(&f, entry);
	put64(&f, 104);		/* attrs */
	put64(&f, entry * nattrs);
	size_t data_at = 104 + entry * nattrs + (ids ? 8 * nattrs : 0);
	put64(&f, data_at);
	put64(&f, data->n);
	put64(&f, 0);
	put64(&f, 0);
	uint64_t bits[4] = { features ? 1ULL << 3 : 0, 0, 0, 0 };	/* HOSTNAME */
	put_bytes(&f, bits, sizeof(bits));
	for (unsigned i = 0; i < nattrs; i++) {
		struct perf_event_attr a = { .type = PERF_TYPE_SOFTWARE, .size = (uint32_t)attr_size,
					     .config = PERF_COUNT_SW_CPU_CLOCK, .sample_freq = 999, .freq = 1,
					     .sample_type = types[i], .sample_id_all = 1 };
		put_bytes(&f, &a, sizeof(a));
		put64(&f, ids ? 104 + entry * nattrs + 8 * i : 0);
		put64(&f, ids ? 8 : 0);
	}
	for (unsigned i = 0; ids && i < nattrs; i++)
		put64(&f, ids[i]);
	assert_int_equal(f.n, data_at);
	put_bytes(&f, data->p, data->n);
	if (features) {
		size_t sec = f.n;
		put64(&f, sec + 16);
		put64(&f, 4 + 16);
		uint32_t len = 16;
		char host[16] = "testhost";
		put_bytes(&f, &len, 4);
		put_bytes(&f, host, 16);
	}
	return f;
}

struct seen {
	uint64_t times[64];
	uint32_t types[64];
	struct perf_mmap2 mmap;
	char mmap_name[64];
	unsigned n;
};

static int on_record(void *ctx, const struct perf_event_header *h, const struct record_origin *o)
{
	struct seen *s = ctx;
	struct perf_sample ps;
	assert_true(s->n < 64);
	s->types[s->n] = h->type;
	s->times[s->n] = 0;
	if (h->type == PERF_RECORD_SAMPLE) {
		assert_int_equal(perf_decode_sample(o->layout, h, &ps), 0);
		s->times[s->n] = ps.time;
	} else if (h->type == PERF_RECORD_MMAP2) {
		assert_int_equal(perf_decode_mmap2(h, &s->mmap), 0);
		strncpy(s->mmap_name, s->mmap.filename, sizeof(s->mmap_name) - 1);
	}
	s->n++;
	return 0;
}

/* Drain pd to its end; returns the last drain's result (-ENODATA at a clean end). */
static int drain_all(struct perf_data *pd, struct seen *s)
{
	struct record_source src;
	int rc = 0;
	perf_data_source(pd, &src);
	for (int i = 0; i < 100 && (rc = src.drain(src.impl, on_record, s)) >= 0; i++)
		;
	return rc;
}

static struct perf_data *open_buf(const struct buf *f)
{
	struct perf_data *pd = NULL;
	char err[512] = "";
	int rc = perf_data_open_mem(f->p, f->n, "test.data", &pd, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(rc, 0);
	return pd;
}

/* perf's rule: a round's records go out once the next round is read, those past the previous round's last time
 * wait; every record in time order. */
static void test_round_order(void **state)
{
	(void)state;
	struct buf d = { 0 };
	uint64_t type = SAMPLE_TYPE;
	put_sample(&d, 30, 0x1000, NULL);
	put_sample(&d, 10, 0x1000, NULL);
	put_round(&d);
	put_sample(&d, 20, 0x1000, NULL);
	put_comm(&d, 40, "fixture", NULL);
	put_round(&d);
	put_sample(&d, 35, 0x1000, NULL);
	struct buf f = make_file(&type, 1, NULL, &d, true);
	struct perf_data *pd = open_buf(&f);
	assert_string_equal(perf_data_info(pd)->hostname, "testhost");
	assert_int_equal(perf_data_info(pd)->frequency_hz, 999);
	assert_true(perf_data_info(pd)->period_is_ns);
	struct seen s = { 0 };
	assert_int_equal(drain_all(pd, &s), -ENODATA);
	assert_int_equal(s.n, 5);
	const uint64_t want[] = { 10, 20, 30, 35 };	/* then the COMM of time 40 */
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(s.times[i], want[i]);
	assert_int_equal(s.types[4], PERF_RECORD_COMM);
	const struct perf_data_counts *c = perf_data_counts(pd);
	assert_int_equal(c->records[PERF_RECORD_SAMPLE], 4);
	assert_int_equal(c->records[68], 2);
	assert_int_equal(c->first_time, 10);
	assert_int_equal(c->last_time, 35);
	assert_false(c->truncated);
	char counts[256];
	perf_data_format_counts(pd, true, counts, sizeof(counts));
	assert_string_equal(counts, "4 SAMPLE, 2 FINISHED_ROUND, 1 COMM");
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

/* An MMAP record reaches the consumer as an MMAP2 record: same addresses and name, no device or inode. */
static void test_mmap_as_mmap2(void **state)
{
	(void)state;
	struct buf d = { 0 };
	uint64_t type = SAMPLE_TYPE;
	const char name[16] = "/usr/bin/prog";
	put_header(&d, PERF_RECORD_MMAP, PERF_RECORD_MISC_USER, 40 + 16 + 16);
	put_pair(&d, 7, 7);
	put64(&d, 0x400000);
	put64(&d, 0x2000);
	put64(&d, 0x1000);
	put_bytes(&d, name, 16);
	put_pair(&d, 7, 7);	/* sample_id */
	put64(&d, 5);
	/* the kernel's (pid -1): not delivered */
	put_header(&d, PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL, 40 + 16 + 16);
	put_pair(&d, UINT32_MAX, 0);
	put64(&d, 0xffffffff81000000ULL);
	put64(&d, 0x1000000);
	put64(&d, 0);
	put_bytes(&d, "[kernel.kallsyms", 16);
	put_pair(&d, UINT32_MAX, 0);
	put64(&d, 1);
	struct buf f = make_file(&type, 1, NULL, &d, false);
	struct perf_data *pd = open_buf(&f);
	struct seen s = { 0 };
	assert_int_equal(drain_all(pd, &s), -ENODATA);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.types[0], PERF_RECORD_MMAP2);
	assert_int_equal(s.mmap.pid, 7);
	assert_int_equal(s.mmap.addr, 0x400000);
	assert_int_equal(s.mmap.len, 0x2000);
	assert_int_equal(s.mmap.pgoff, 0x1000);
	assert_int_equal(s.mmap.ino, 0);
	assert_true(s.mmap.prot & PROT_EXEC);
	assert_string_equal(s.mmap_name, "/usr/bin/prog");
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

/* Two events with ids: the first one's samples are delivered, the second's counted. */
static void test_two_events(void **state)
{
	(void)state;
	struct buf d = { 0 };
	const uint64_t types[2] = { SAMPLE_TYPE_ID, SAMPLE_TYPE_ID }, ids[2] = { 1001, 2002 };
	put_comm(&d, 1, "fixture", &ids[0]);
	put_sample(&d, 2, 0x1000, &ids[1]);
	put_sample(&d, 3, 0x1000, &ids[0]);
	put_sample(&d, 4, 0x1000, &ids[1]);
	struct buf f = make_file(types, 2, ids, &d, false);
	struct perf_data *pd = open_buf(&f);
	struct seen s = { 0 };
	assert_int_equal(drain_all(pd, &s), -ENODATA);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.types[0], PERF_RECORD_COMM);
	assert_int_equal(s.times[1], 3);
	assert_int_equal(perf_data_counts(pd)->samples_other, 2);
	assert_int_equal(perf_data_info(pd)->nattrs, 2);
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

/* perf record -z: one zstd stream over COMPRESSED (and COMPRESSED2) records; a record may start in one and end
 * in the next. */
static void test_compressed(void **state)
{
	(void)state;
	struct buf plain = { 0 }, d = { 0 };
	uint64_t type = SAMPLE_TYPE;
	for (int i = 0; i < 6; i++)
		put_sample(&plain, 100 + (uint64_t)i, 0x1000, NULL);
	ZSTD_CCtx *z = ZSTD_createCCtx();
	assert_non_null(z);
	size_t cut[] = { 0, 60, plain.n };	/* the second sample straddles the two records */
	for (int k = 0; k < 2; k++) {
		uint8_t out[4096];
		ZSTD_inBuffer in = { plain.p + cut[k], cut[k + 1] - cut[k], 0 };
		ZSTD_outBuffer o = { out, sizeof(out), 0 };
		size_t left;
		do {
			left = ZSTD_compressStream2(z, &o, &in, ZSTD_e_flush);
			assert_false(ZSTD_isError(left));
		} while (left);
		if (k == 0) {	/* COMPRESSED: the stream's bytes to the record's end, unpadded (perf before 6.x) */
			put_header(&d, 81, 0, (uint16_t)(8 + o.pos));
			put_bytes(&d, out, o.pos);
		} else {	/* COMPRESSED2: their size, then the bytes padded to 8 */
			size_t padded = (o.pos + 7) & ~(size_t)7;
			put_header(&d, 83, 0, (uint16_t)(16 + padded));
			put64(&d, o.pos);
			put_bytes(&d, out, o.pos);
			put_bytes(&d, "\0\0\0\0\0\0\0", padded - o.pos);
		}
	}
	ZSTD_freeCCtx(z);
	struct buf f = make_file(&type, 1, NULL, &d, false);
	struct perf_data *pd = open_buf(&f);
	struct seen s = { 0 };
	assert_int_equal(drain_all(pd, &s), -ENODATA);
	assert_int_equal(s.n, 6);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(s.times[i], 100 + i);
	assert_true(perf_data_info(pd)->compressed);
	assert_int_equal(perf_data_counts(pd)->records[81], 1);
	assert_int_equal(perf_data_counts(pd)->records[83], 1);
	assert_int_equal(perf_data_counts(pd)->decompressed_bytes, plain.n);
	perf_data_free(pd);
	free(f.p);
	free(d.p);
	free(plain.p);
}

/* What a consumer that stops the drain every so often saw: every record once, with its bytes, in time order. */
struct checked {
	uint8_t *seen;		/* by the sample's IP: its number */
	uint64_t n, last_time, nrec, max;
	bool ordered, intact;
};

static int on_checked(void *ctx, const struct perf_event_header *h, const struct record_origin *o)
{
	struct checked *c = ctx;
	struct perf_sample ps;
	if (h->type != PERF_RECORD_SAMPLE || perf_decode_sample(o->layout, h, &ps) < 0)
		return 0;
	c->ordered &= ps.time >= c->last_time;
	c->last_time = ps.time;
	/* the IP numbers the sample; its time was made from it */
	c->intact &= ps.ip < c->max && !c->seen[ps.ip] && ps.time == 1000 * (ps.ip / 2000) + (ps.ip * 7919) % 1500;
	if (ps.ip < c->max)
		c->seen[ps.ip] = 1;
	c->n++;
	return ++c->nrec % 997 == 0;	/* stop the drain now and then: the rest of the round waits */
}

/* Many rounds in a zstd stream, more than the reader's memory for copies holds at once (its chunks are used again
 * as their records go out), each round's times overlapping the next's: every record delivered once, intact, in
 * time order, with a consumer that stops drains early. */
static void test_rounds_in_chunks(void **state)
{
	(void)state;
	enum { ROUNDS = 40, PER = 2000 };
	struct buf plain = { 0 }, d = { 0 };
	uint64_t type = SAMPLE_TYPE;
	for (uint64_t r = 0; r < ROUNDS; r++) {
		for (uint64_t i = 0; i < PER; i++) {
			uint64_t ip = r * PER + i;
			put_sample(&plain, 1000 * r + (ip * 7919) % 1500, ip, NULL);
		}
		put_round(&plain);
	}
	ZSTD_CCtx *z = ZSTD_createCCtx();
	assert_non_null(z);
	static uint8_t out[65536];
	for (size_t at = 0; at < plain.n;) {
		size_t take = plain.n - at < 40000 ? plain.n - at : 40000;
		ZSTD_inBuffer in = { plain.p + at, take, 0 };
		ZSTD_outBuffer o = { out, 60000, 0 };
		size_t left;
		do {
			left = ZSTD_compressStream2(z, &o, &in, ZSTD_e_flush);
			assert_false(ZSTD_isError(left));
		} while (left);
		size_t padded = (o.pos + 7) & ~(size_t)7;
		put_header(&d, 83, 0, (uint16_t)(16 + padded));
		put64(&d, o.pos);
		put_bytes(&d, out, o.pos);
		put_bytes(&d, "\0\0\0\0\0\0\0", padded - o.pos);
		at += take;
	}
	ZSTD_freeCCtx(z);
	assert_true(plain.n > 3u << 20);	/* more than the reader's 1 MiB chunks */
	struct buf f = make_file(&type, 1, NULL, &d, false);
	struct perf_data *pd = open_buf(&f);
	struct checked c = { .seen = calloc(ROUNDS * PER, 1), .max = ROUNDS * PER, .ordered = true, .intact = true };
	assert_non_null(c.seen);
	struct record_source src;
	perf_data_source(pd, &src);
	int rc;
	while ((rc = src.drain(src.impl, on_checked, &c)) >= 0)
		;
	assert_int_equal(rc, -ENODATA);
	assert_int_equal(c.n, ROUNDS * PER);
	assert_true(c.ordered);
	assert_true(c.intact);
	perf_data_free(pd);
	free(c.seen);
	free(f.p);
	free(d.p);
	free(plain.p);
}

static int on_period(void *ctx, const struct perf_event_header *h, const struct record_origin *o)
{
	struct perf_sample ps;
	assert_int_equal(perf_decode_sample(o->layout, h, &ps), 0);
	*(uint64_t *)ctx = ps.period;
	return 0;
}

/* A sample's PERIOD is kept when it is time (cpu-clock), read as 0 when it counts events (cycles): the sample
 * then weighs one nominal period. */
static void test_periods(void **state)
{
	(void)state;
	for (int cycles = 0; cycles < 2; cycles++) {
		struct buf d = { 0 };
		uint64_t type = SAMPLE_TYPE, period = 1;
		put_sample(&d, 10, 0x1000, NULL);
		struct buf f = make_file(&type, 1, NULL, &d, false);
		if (cycles) {	/* the attribute (at 104): type, size, config */
			uint32_t hw = PERF_TYPE_HARDWARE;
			memcpy(f.p + 104, &hw, 4);
			set64(&f, 112, PERF_COUNT_HW_CPU_CYCLES);
		}
		struct perf_data *pd = open_buf(&f);
		struct record_source src;
		perf_data_source(pd, &src);
		while (src.drain(src.impl, on_period, &period) >= 0)
			;
		assert_int_equal(perf_data_info(pd)->period_is_ns, !cycles);
		assert_int_equal(period, cycles ? 0 : 1000000);
		assert_int_equal(f.p[104 + sizeof(struct perf_event_attr) + 16 + 32], 0x40);	/* the file as it was */
		perf_data_free(pd);
		free(f.p);
		free(d.p);
	}
}

/* A record of impossible size: an error naming its file offset. */
static void test_corrupt_record(void **state)
{
	(void)state;
	struct buf d = { 0 };
	uint64_t type = SAMPLE_TYPE;
	put_sample(&d, 1, 0x1000, NULL);
	size_t bad = d.n;
	put_sample(&d, 2, 0x1000, NULL);
	struct buf f = make_file(&type, 1, NULL, &d, false);
	size_t data_at = f.n - d.n;
	uint16_t four = 4;
	memcpy(f.p + data_at + bad + 6, &four, 2);
	struct perf_data *pd = open_buf(&f);
	struct seen s = { 0 };
	assert_int_equal(drain_all(pd, &s), -EBADMSG);
	char want[128];
	snprintf(want, sizeof(want), "corrupt perf.data at offset %zu: a record of 4 bytes", data_at + bad);
	assert_non_null(strstr(perf_data_error(pd), want));
	assert_true(perf_data_finished(pd));
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

/* A file cut inside a record: the records before it, and the cut said. */
static void test_truncated(void **state)
{
	(void)state;
	struct buf d = { 0 };
	uint64_t type = SAMPLE_TYPE;
	for (int i = 0; i < 4; i++)
		put_sample(&d, 10 + (uint64_t)i, 0x1000, NULL);
	struct buf f = make_file(&type, 1, NULL, &d, false);
	size_t cut = f.n - 20;	/* inside the last sample */
	struct perf_data *pd = NULL;
	char err[256];
	assert_int_equal(perf_data_open_mem(f.p, cut, "cut.data", &pd, err, sizeof(err)), 0);
	struct seen s = { 0 };
	assert_int_equal(drain_all(pd, &s), -ENODATA);
	assert_int_equal(s.n, 3);
	assert_true(perf_data_counts(pd)->truncated);
	assert_int_equal(perf_data_counts(pd)->truncated_at, f.n - 40);
	perf_data_free(pd);
	/* a header perf never finished: data size 0, read to the end of the file */
	set64(&f, 48, 0);
	assert_int_equal(perf_data_open_mem(f.p, f.n, "unfinished.data", &pd, err, sizeof(err)), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(drain_all(pd, &s), -ENODATA);
	assert_int_equal(s.n, 4);
	assert_true(perf_data_counts(pd)->truncated);
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

static void test_not_perf_data(void **state)
{
	(void)state;
	struct perf_data *pd = NULL;
	char err[256];
	assert_int_equal(perf_data_open_mem("hello world, not a perf file", 28, "x", &pd, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "not a perf.data file"));
	uint8_t pipe[16] = "PERFILE2";
	pipe[8] = 16;
	assert_int_equal(perf_data_open_mem(pipe, sizeof(pipe), "p", &pd, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "pipe mode"));
	uint8_t shortf[64] = "PERFILE2";
	shortf[8] = 104;
	assert_int_equal(perf_data_open_mem(shortf, sizeof(shortf), "s", &pd, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "corrupt perf.data at offset 8"));
	assert_true(perf_data_is_perf_data("PERFILE2", 8));
	assert_false(perf_data_is_perf_data("PERFILE", 7));
}

static int on_aligned(void *ctx, const struct perf_event_header *h, const struct record_origin *o)
{
	(void)o;
	assert_int_equal((uintptr_t)h & 7, 0);
	return on_record(ctx, h, o);
}

/* perf before 6.x sizes a COMPRESSED record by its stream, unpadded: the records after it in the file are not
 * 8-aligned, and are handed over aligned all the same (copied). */
static void test_after_unpadded(void **state)
{
	(void)state;
	struct buf d = { 0 };
	uint64_t type = SAMPLE_TYPE;
	uint8_t out[4096];
	size_t len = 0;
	for (int n = 1; n < 16 && len % 8 == 0; n++) {	/* a stream whose size is not a multiple of 8 */
		struct buf plain = { 0 };
		for (int i = 0; i < n; i++)
			put_sample(&plain, 100 + (uint64_t)i, 0x1000, NULL);
		len = ZSTD_compress(out, sizeof(out), plain.p, plain.n, 1);
		assert_false(ZSTD_isError(len));
		free(plain.p);
	}
	assert_int_not_equal(len % 8, 0);
	put_header(&d, 81, 0, (uint16_t)(8 + len));
	put_bytes(&d, out, len);
	put_comm(&d, 200, "fixture", NULL);
	put_sample(&d, 201, 0x1000, NULL);
	struct buf f = make_file(&type, 1, NULL, &d, false);
	struct perf_data *pd = open_buf(&f);
	struct record_source src;
	struct seen s = { 0 };
	int rc = 0;
	perf_data_source(pd, &src);
	for (int i = 0; i < 100 && (rc = src.drain(src.impl, on_aligned, &s)) >= 0; i++)
		;
	assert_int_equal(rc, -ENODATA);
	assert_true(s.n >= 3);
	assert_int_equal(s.types[s.n - 2], PERF_RECORD_COMM);
	assert_int_equal(s.times[s.n - 1], 201);
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

/* ---- sched:sched_switch samples as off-CPU samples ---- */
#define SWITCH_ID 2002
#define CLOCK_ID 1001
#define SWITCH_CONFIG 372
#define SWITCH_TYPE (SAMPLE_TYPE_ID | PERF_SAMPLE_RAW)

/* A sched_switch sample of tid (pid 7) at t: raw data of raw_size bytes (64: the kernel's), prev_state at 32
 * (8 bytes), next_pid at 56. */
static void put_switch_sample(struct buf *b, uint64_t t, uint32_t tid, uint64_t prev_state, uint32_t next_pid,
			      uint32_t raw_size)
{
	uint8_t raw[64] = { 0 };
	uint64_t id = SWITCH_ID;
	memcpy(raw + 24, &tid, 4);
	memcpy(raw + 32, &prev_state, 8);
	memcpy(raw + 56, &next_pid, 4);
	size_t padded = (4 + raw_size + 7) & ~(size_t)7;
	put_header(b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL, (uint16_t)(8 + 40 + padded));
	put64(b, id);
	put64(b, 0xffffffff81000000ULL);
	put_pair(b, 7, tid);
	put64(b, t);
	put64(b, 1);	/* period */
	uint8_t field[72] = { 0 };
	memcpy(field, &raw_size, 4);
	memcpy(field + 4, raw, raw_size < 64 ? raw_size : 64);
	put_bytes(b, field, padded);
}

static void put_clock_sample(struct buf *b, uint64_t t, uint32_t tid)
{
	uint64_t id = CLOCK_ID;
	put_header(b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, 8 + 40);
	put64(b, id);
	put64(b, 0x1000);
	put_pair(b, 7, tid);
	put64(b, t);
	put64(b, 1000000);
}

/* A PERF_RECORD_SWITCH of --switch-events, of the clock's attribute (its sample_id: TID, TIME, IDENTIFIER). */
static void put_switch_record(struct buf *b, uint64_t t, uint32_t tid, uint16_t misc)
{
	put_header(b, PERF_RECORD_SWITCH, misc, 8 + 24);
	put_pair(b, 7, tid);
	put64(b, t);
	put64(b, CLOCK_ID);
}

/* A FORK or EXIT record of tid (pid 7) with the clock's sample_id. */
static void put_task(struct buf *b, uint32_t type, uint64_t t, uint32_t tid)
{
	put_header(b, type, 0, 8 + 24 + 24);
	put_pair(b, 7, 7);	/* pid, ppid */
	put_pair(b, tid, 7);	/* tid, ptid */
	put64(b, t);
	put_pair(b, 7, tid);
	put64(b, t);
	put64(b, CLOCK_ID);
}

static void put_string(struct buf *b, const char *str)
{
	char padded[64] = { 0 };
	uint32_t len = (uint32_t)((strlen(str) + 1 + 7) & ~(size_t)7);
	strcpy(padded, str);
	put_bytes(b, &len, 4);
	put_bytes(b, padded, len);
}

/*
 * A file of a cpu-clock event (id CLOCK_ID) and the sched_switch tracepoint (SWITCH_ID, config SWITCH_CONFIG),
 * the clock recording switch records when switch_events. The tracepoint is told by the format in TRACING_DATA
 * (format: its text, among other bytes) or, without one, by its name in EVENT_DESC.
 */
static struct buf make_switch_file(const struct buf *data, const char *format, bool switch_events)
{
	struct buf f = { 0 };
	const size_t attr_size = sizeof(struct perf_event_attr), entry = attr_size + 16;
	const uint64_t ids[2] = { CLOCK_ID, SWITCH_ID };
	struct perf_event_attr a[2] = {
		{ .type = PERF_TYPE_SOFTWARE, .size = (uint32_t)attr_size, .config = PERF_COUNT_SW_CPU_CLOCK,
		  .sample_freq = 999, .freq = 1, .sample_type = SAMPLE_TYPE_ID, .sample_id_all = 1,
		  .context_switch = switch_events },
		{ .type = PERF_TYPE_TRACEPOINT, .size = (uint32_t)attr_size, .config = SWITCH_CONFIG,
		  .sample_period = 1, .sample_type = SWITCH_TYPE, .sample_id_all = 1 },
	};
	size_t data_at = 104 + 2 * entry + 16;
	put_bytes(&f, "PERFILE2", 8);
	put64(&f, 104);
	put64(&f, entry);
	put64(&f, 104);
	put64(&f, 2 * entry);
	put64(&f, data_at);
	put64(&f, data->n);
	put64(&f, 0);
	put64(&f, 0);
	uint64_t bits[4] = { format ? 1ULL << 1 : 1ULL << 12, 0, 0, 0 };	/* TRACING_DATA, or EVENT_DESC */
	put_bytes(&f, bits, sizeof(bits));
	for (unsigned i = 0; i < 2; i++) {
		put_bytes(&f, &a[i], sizeof(a[i]));
		put64(&f, 104 + 2 * entry + 8 * i);
		put64(&f, 8);
	}
	put64(&f, ids[0]);
	put64(&f, ids[1]);
	assert_int_equal(f.n, data_at);
	put_bytes(&f, data->p, data->n);
	size_t table = f.n;
	put64(&f, 0);
	put64(&f, 0);
	size_t sec = f.n;
	if (format) {	/* what comes before the formats in perf's tracing data, then other events' formats */
		put_bytes(&f, "\x17\x08\x44tracing0.6\0\0\x08\0\0\0", 17);
		put_bytes(&f, "name: sched_wakeup\nID: 300\nformat:\n\tfield:pid_t pid;\toffset:8;\tsize:4;\n\n", 70);
		put_bytes(&f, format, strlen(format));
	} else {
		uint32_t nr = 2, sz = (uint32_t)attr_size, nids = 1;
		const char *names[2] = { "cpu-clock", "sched:sched_switch" };
		put_bytes(&f, &nr, 4);
		put_bytes(&f, &sz, 4);
		for (unsigned i = 0; i < 2; i++) {	/* every event, in the attributes' order */
			put_bytes(&f, &a[i], sizeof(a[i]));
			put_bytes(&f, &nids, 4);
			put_string(&f, names[i]);
			put64(&f, ids[i]);
		}
	}
	set64(&f, table, sec);
	set64(&f, table + 8, f.n - sec);
	return f;
}

static const char switch_format[] =
	"name: sched_switch\nID: 372\nformat:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
	"\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
	"\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n"
	"print fmt: \"prev_comm=%s prev_pid=%d next_pid=%d\", REC->prev_comm, REC->prev_pid, REC->next_pid\n";

/* What a consumer saw: each record's type, kind, tid, time and switch flags. */
struct switch_seen {
	struct {
		uint32_t type, tid;
		uint64_t time;
		enum record_kind kind;
		int out, preempted;
	} r[32];
	unsigned n;
};

static int on_switch_record(void *ctx, const struct perf_event_header *h, const struct record_origin *o)
{
	struct switch_seen *s = ctx;
	struct perf_sample ps;
	struct perf_switch sw;
	assert_true(s->n < 32);
	s->r[s->n].type = h->type;
	s->r[s->n].kind = o->kind;
	if (h->type == PERF_RECORD_SAMPLE) {
		assert_int_equal(perf_decode_sample(o->layout, h, &ps), 0);
		s->r[s->n].tid = ps.tid;
		s->r[s->n].time = ps.time;
	} else if (h->type == PERF_RECORD_SWITCH) {
		assert_int_equal(perf_decode_switch(o->layout, h, &sw), 0);
		s->r[s->n].tid = sw.tid;
		s->r[s->n].time = sw.time;
		s->r[s->n].out = sw.out;
		s->r[s->n].preempted = sw.preempted;
	}
	s->n++;
	return 0;
}

static int drain_switches(struct perf_data *pd, struct switch_seen *s)
{
	struct record_source src;
	int rc = 0;
	perf_data_source(pd, &src);
	for (int i = 0; i < 100 && (rc = src.drain(src.impl, on_switch_record, s)) >= 0; i++)
		;
	return rc;
}

static void assert_seen(const struct switch_seen *s, unsigned i, uint32_t type, uint32_t tid, uint64_t time,
			int out, int preempted)
{
	assert_true(i < s->n);
	assert_int_equal(s->r[i].type, type);
	assert_int_equal(s->r[i].tid, tid);
	assert_int_equal(s->r[i].time, time);
	if (type == PERF_RECORD_SWITCH) {
		assert_int_equal(s->r[i].out, out);
		assert_int_equal(s->r[i].preempted, preempted);
	}
}

/*
 * Without switch records, the reader makes them: a switch-out after each sched_switch sample (S: blocked; R and
 * R+: preempted), a switch-in at next_pid's switch, or at the waiting thread's next sample; an exiting thread's
 * switch-out (Z) is not delivered.
 */
static void test_switch_inferred(void **state)
{
	(void)state;
	struct buf d = { 0 };
	put_switch_sample(&d, 10, 7, 0x1, 100, 64);	/* 7 sleeps (S) */
	put_clock_sample(&d, 20, 7);			/* 7 runs again */
	put_switch_sample(&d, 30, 8, 0x0, 0, 64);	/* 8 preempted (R) */
	put_switch_sample(&d, 40, 7, 0x100, 8, 64);	/* 7 preempted (R+), 8 runs */
	put_switch_sample(&d, 50, 7, 0x20, 0, 64);	/* 7 runs (a sample of it), exits (Z) */
	struct buf f = make_switch_file(&d, switch_format, false);
	struct perf_data *pd = open_buf(&f);
	assert_true(perf_data_info(pd)->off_cpu);
	assert_false(perf_data_info(pd)->switch_records);
	assert_non_null(perf_data_off_cpu_layout(pd));
	struct switch_seen s = { 0 };
	assert_int_equal(drain_switches(pd, &s), -ENODATA);
	assert_int_equal(s.n, 10);
	assert_seen(&s, 0, PERF_RECORD_SAMPLE, 7, 10, 0, 0);
	assert_int_equal(s.r[0].kind, RECORD_OFF_CPU);
	assert_seen(&s, 1, PERF_RECORD_SWITCH, 7, 10, 1, 0);
	assert_seen(&s, 2, PERF_RECORD_SWITCH, 7, 20, 0, 0);
	assert_seen(&s, 3, PERF_RECORD_SAMPLE, 7, 20, 0, 0);
	assert_int_equal(s.r[3].kind, RECORD_CPU);
	assert_seen(&s, 4, PERF_RECORD_SAMPLE, 8, 30, 0, 0);
	assert_seen(&s, 5, PERF_RECORD_SWITCH, 8, 30, 1, 1);
	assert_seen(&s, 6, PERF_RECORD_SAMPLE, 7, 40, 0, 0);
	assert_seen(&s, 7, PERF_RECORD_SWITCH, 7, 40, 1, 1);
	assert_seen(&s, 8, PERF_RECORD_SWITCH, 8, 40, 0, 0);
	assert_seen(&s, 9, PERF_RECORD_SWITCH, 7, 50, 0, 0);
	const struct perf_data_counts *c = perf_data_counts(pd);
	assert_int_equal(c->switch_outs, 3);
	assert_int_equal(c->switch_outs_exiting, 1);
	assert_int_equal(c->samples_other, 0);
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

/* With --switch-events the file's switch records are delivered as they are, and none made, those of a thread
 * after its exit too (the session leaves them out: offcpu_time_forget()); the tracepoint is told by its name
 * (EVENT_DESC), its raw data read in the kernel's usual layout. */
static void test_switch_records(void **state)
{
	(void)state;
	struct buf d = { 0 };
	put_switch_sample(&d, 10, 7, 0x1, 0, 64);
	put_switch_record(&d, 11, 7, PERF_RECORD_MISC_SWITCH_OUT);
	put_switch_record(&d, 30, 7, 0);
	put_clock_sample(&d, 31, 7);
	/* 9 exits, and a CPU-wide event sees it preempted on its way out: those switches never end */
	put_task(&d, PERF_RECORD_EXIT, 40, 9);
	put_switch_record(&d, 41, 9, PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
	put_switch_record(&d, 42, 9, 0);
	put_switch_record(&d, 43, 9, PERF_RECORD_MISC_SWITCH_OUT);
	/* a new thread takes tid 9 */
	put_task(&d, PERF_RECORD_FORK, 50, 9);
	put_switch_record(&d, 51, 9, PERF_RECORD_MISC_SWITCH_OUT);
	struct buf f = make_switch_file(&d, NULL, true);
	struct perf_data *pd = open_buf(&f);
	assert_true(perf_data_info(pd)->off_cpu);
	assert_true(perf_data_info(pd)->switch_records);
	struct switch_seen s = { 0 };
	assert_int_equal(drain_switches(pd, &s), -ENODATA);
	assert_int_equal(s.n, 10);
	assert_seen(&s, 0, PERF_RECORD_SAMPLE, 7, 10, 0, 0);
	assert_int_equal(s.r[0].kind, RECORD_OFF_CPU);
	assert_seen(&s, 1, PERF_RECORD_SWITCH, 7, 11, 1, 0);
	assert_seen(&s, 2, PERF_RECORD_SWITCH, 7, 30, 0, 0);
	assert_seen(&s, 3, PERF_RECORD_SAMPLE, 7, 31, 0, 0);
	assert_int_equal(s.r[4].type, PERF_RECORD_EXIT);
	assert_seen(&s, 5, PERF_RECORD_SWITCH, 9, 41, 1, 1);
	assert_seen(&s, 6, PERF_RECORD_SWITCH, 9, 42, 0, 0);
	assert_seen(&s, 7, PERF_RECORD_SWITCH, 9, 43, 1, 0);
	assert_int_equal(s.r[8].type, PERF_RECORD_FORK);
	assert_seen(&s, 9, PERF_RECORD_SWITCH, 9, 51, 1, 0);
	assert_int_equal(perf_data_counts(pd)->switches_made, 0);
	assert_int_equal(perf_data_counts(pd)->switch_outs_exiting, 0);
	char counts[256];
	perf_data_format_counts(pd, true, counts, sizeof(counts));
	assert_string_equal(counts, "6 SWITCH, 2 SAMPLE, 1 EXIT, 1 FORK");
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

/* Raw data too short for prev_state and next_pid: an error naming the sample's offset. */
static void test_switch_raw_too_short(void **state)
{
	(void)state;
	struct buf d = { 0 };
	put_clock_sample(&d, 5, 7);
	size_t bad = d.n;
	put_switch_sample(&d, 10, 7, 0x1, 0, 20);
	struct buf f = make_switch_file(&d, switch_format, false);
	struct perf_data *pd = open_buf(&f);
	struct switch_seen s = { 0 };
	assert_int_equal(drain_switches(pd, &s), -EBADMSG);
	char want[128];
	snprintf(want, sizeof(want), "corrupt perf.data at offset %zu: a sched:sched_switch sample with 20 bytes of raw "
		 "data", 104 + 2 * (sizeof(struct perf_event_attr) + 16) + 16 + bad);
	fprintf(stderr, "%s\n", perf_data_error(pd));
	assert_non_null(strstr(perf_data_error(pd), want));
	perf_data_free(pd);
	free(f.p);
	free(d.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_order),  cmocka_unit_test(test_mmap_as_mmap2),
		cmocka_unit_test(test_two_events),   cmocka_unit_test(test_compressed),
		cmocka_unit_test(test_corrupt_record), cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_not_perf_data), cmocka_unit_test(test_rounds_in_chunks),
		cmocka_unit_test(test_periods),      cmocka_unit_test(test_switch_inferred),
		cmocka_unit_test(test_switch_records), cmocka_unit_test(test_switch_raw_too_short),
		cmocka_unit_test(test_after_unpadded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
