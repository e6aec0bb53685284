/* Unit tests for src/sampling/perf_record.c: records built byte by byte as the kernel lays them out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "src/sampling/perf_record.h"

struct builder {
	uint64_t words[2048];
	size_t n;
};

static void put(struct builder *b, uint64_t v)
{
	b->words[b->n++] = v;
}

static void put_pair(struct builder *b, uint32_t lo, uint32_t hi)
{
	put(b, (uint64_t)hi << 32 | lo);
}

static void put_string(struct builder *b, const char *s)
{
	size_t len = strlen(s) + 1, words = (len + 7) / 8;
	memset(&b->words[b->n], 0, words * 8);
	memcpy(&b->words[b->n], s, len);
	b->n += words;
}

static struct perf_event_header *finish(struct builder *b, uint32_t type, uint16_t misc)
{
	struct perf_event_header *h = (void *)b->words;
	h->type = type;
	h->misc = misc;
	h->size = (uint16_t)(b->n * 8);
	return h;
}

static const struct perf_layout layout = {
	.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
		       PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
	.regs_mask = UNWIND_SAMPLE_REGS_MASK,
	.sample_id_all = 1,
};

static void build_sample(struct builder *b, uint64_t stack_size, uint64_t dyn_size)
{
	b->n = 1; /* header */
	put(b, 0x401000);		/* ip */
	put_pair(b, 42, 43);		/* pid, tid */
	put(b, 123456789);		/* time */
	put_pair(b, 1, 0);		/* cpu, res */
	put(b, 1001000);		/* period */
	put(b, 6);			/* callchain nr */
	put(b, (uint64_t)PERF_CONTEXT_KERNEL);
	put(b, 0xffffffff81000010ULL);
	put(b, 0xffffffff81000020ULL);
	put(b, (uint64_t)PERF_CONTEXT_USER);
	put(b, 0x401000);		/* the user frame-pointer chain: the IP, a return address */
	put(b, 0x402345);
	put(b, PERF_SAMPLE_REGS_ABI_64);
	for (int bit = 0; bit < 64; bit++) {
		if (layout.regs_mask & (1ULL << bit))
			put(b, 0x1000 + (uint64_t)bit);
	}
	put(b, stack_size);
	for (uint64_t i = 0; i < stack_size / 8; i++)
		put(b, 0xabc0 + i);
	if (stack_size)
		put(b, dyn_size);
}

static void test_sample_fields(void **state)
{
	(void)state;
	struct builder b;
	struct perf_sample s;
	build_sample(&b, 64, 40);
	assert_int_equal(perf_decode_sample(&layout, finish(&b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER), &s), 0);
	assert_int_equal(s.ip, 0x401000);
	assert_int_equal(s.pid, 42);
	assert_int_equal(s.tid, 43);
	assert_int_equal(s.time, 123456789);
	assert_int_equal(s.cpu, 1);
	assert_int_equal(s.period, 1001000);
	assert_int_equal(s.regs_abi, PERF_SAMPLE_REGS_ABI_64);
	assert_int_equal(s.regs[UNWIND_REG_IP], 0x1000 + UNWIND_REG_IP);
	assert_int_equal(s.regs[UNWIND_REG_SP], 0x1000 + UNWIND_REG_SP);
	assert_int_equal(s.regs[UNWIND_REG_R15], 0x1000 + UNWIND_REG_R15);
	assert_int_equal(s.regs[UNWIND_REG_FLAGS], 0); /* not requested */
	assert_int_equal(s.stack_size, 40);		/* dyn_size bounds the valid part */
	uint64_t first;
	memcpy(&first, s.stack, 8);
	assert_int_equal(first, 0xabc0);

	const uint64_t *k;
	size_t nk;
	perf_callchain_kernel(&s, &k, &nk);
	assert_int_equal(nk, 2);
	assert_int_equal(k[0], 0xffffffff81000010ULL);
	assert_int_equal(k[1], 0xffffffff81000020ULL);
	const uint64_t *u;
	size_t nu;
	perf_callchain_user(&s, &u, &nu);
	assert_int_equal(nu, 2);
	assert_int_equal(u[0], 0x401000);
	assert_int_equal(u[1], 0x402345);
	/* Without a user context, no user part. */
	s.callchain_nr = 3;
	perf_callchain_user(&s, &u, &nu);
	assert_int_equal(nu, 0);
	assert_null(u);
	perf_callchain_kernel(&s, &k, &nk);
	assert_int_equal(nk, 2);
}

/* A sample decoded once stays right with its record copied: the copy's fields, the original overwritten. */
static void test_sample_rebased_to_copy(void **state)
{
	(void)state;
	struct builder b, copy;
	struct perf_sample s, again;
	build_sample(&b, 64, 40);
	const struct perf_event_header *h = finish(&b, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	assert_int_equal(perf_decode_sample(&layout, h, &s), 0);
	memcpy(copy.words, b.words, h->size);
	perf_sample_rebase(&s, b.words, copy.words);
	memset(b.words, 0xee, h->size);
	assert_int_equal(perf_decode_sample(&layout, (const void *)copy.words, &again), 0);
	assert_ptr_equal(s.stack, again.stack);
	assert_ptr_equal(s.callchain, again.callchain);
	assert_null(s.raw);
	uint64_t first;
	memcpy(&first, s.stack, 8);
	assert_int_equal(first, 0xabc0);
	assert_int_equal(s.callchain[5], 0x402345);
}

static void test_sample_empty_stack_and_truncation(void **state)
{
	(void)state;
	struct builder b;
	struct perf_sample s;
	build_sample(&b, 0, 0);
	assert_int_equal(perf_decode_sample(&layout, finish(&b, PERF_RECORD_SAMPLE, 0), &s), 0);
	assert_null(s.stack);
	assert_int_equal(s.stack_size, 0);

	build_sample(&b, 64, 64);
	struct perf_event_header *h = finish(&b, PERF_RECORD_SAMPLE, 0);
	/* Every shorter size must be refused, never read past the end. */
	for (uint16_t size = 8; size < h->size; size += 8) {
		struct perf_event_header *cut = h;
		uint16_t keep = cut->size;
		cut->size = size;
		assert_int_equal(perf_decode_sample(&layout, cut, &s), -EBADMSG);
		cut->size = keep;
	}
}

static void test_sample_absurd_callchain(void **state)
{
	(void)state;
	struct builder b;
	struct perf_sample s;
	build_sample(&b, 8, 8);
	b.words[6] = 1ULL << 40; /* callchain nr */
	assert_int_equal(perf_decode_sample(&layout, finish(&b, PERF_RECORD_SAMPLE, 0), &s), -EBADMSG);
}

static void test_mmap2(void **state)
{
	(void)state;
	struct builder b = { .n = 1 };
	struct perf_mmap2 m;
	put_pair(&b, 7, 8);
	put(&b, 0x7f0000001000);
	put(&b, 0x2000);
	put(&b, 0x1000);
	put_pair(&b, 8, 1);
	put(&b, 424242);
	put(&b, 0);
	put_pair(&b, 5, 2);
	put_string(&b, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	put_pair(&b, 7, 8); /* sample_id: pid, tid */
	assert_int_equal(perf_decode_mmap2(finish(&b, PERF_RECORD_MMAP2, 0), &m), 0);
	assert_int_equal(m.pid, 7);
	assert_int_equal(m.addr, 0x7f0000001000);
	assert_int_equal(m.len, 0x2000);
	assert_int_equal(m.pgoff, 0x1000);
	assert_int_equal(m.maj, 8);
	assert_int_equal(m.min, 1);
	assert_int_equal(m.ino, 424242);
	assert_string_equal(m.filename, "/usr/lib/x86_64-linux-gnu/libc.so.6");

	/* A filename without its NUL inside the record is refused. */
	struct perf_event_header *h = finish(&b, PERF_RECORD_MMAP2, 0);
	memset((char *)h + 64, 'x', (size_t)h->size - 64);
	assert_int_equal(perf_decode_mmap2(h, &m), -EBADMSG);
}

static void test_comm_task_lost(void **state)
{
	(void)state;
	struct builder b = { .n = 1 };
	struct perf_comm c;
	put_pair(&b, 9, 10);
	put_string(&b, "worker-1");
	assert_int_equal(perf_decode_comm(finish(&b, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC), &c), 0);
	assert_int_equal(c.pid, 9);
	assert_int_equal(c.tid, 10);
	assert_true(c.exec);
	assert_string_equal(c.comm, "worker-1");

	struct perf_task t;
	b.n = 1;
	put_pair(&b, 20, 1);
	put_pair(&b, 21, 1);
	put(&b, 555);
	assert_int_equal(perf_decode_task(finish(&b, PERF_RECORD_FORK, 0), &t), 0);
	assert_int_equal(t.pid, 20);
	assert_int_equal(t.ppid, 1);
	assert_int_equal(t.tid, 21);
	assert_int_equal(t.time, 555);
	assert_int_equal(perf_decode_task(finish(&b, PERF_RECORD_COMM, 0), &t), -EINVAL);

	struct perf_lost l;
	b.n = 1;
	put(&b, 3);
	put(&b, 77);
	assert_int_equal(perf_decode_lost(finish(&b, PERF_RECORD_LOST, 0), &l), 0);
	assert_int_equal(l.lost, 77);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_fields),
		cmocka_unit_test(test_sample_rebased_to_copy),
		cmocka_unit_test(test_sample_empty_stack_and_truncation),
		cmocka_unit_test(test_sample_absurd_callchain),
		cmocka_unit_test(test_mmap2),
		cmocka_unit_test(test_comm_task_lost),
	};
	return cmocka_run_group_tests_name("perf_record", tests, NULL, NULL);
}
