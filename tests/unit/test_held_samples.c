/*
 * test_held_samples — the queue of samples waiting for a table (src/pipeline/held_samples.h): records come back whole and in
 * order, the bounds refuse what is past them, a batch taken leaves the queue empty for records held meanwhile, and
 * records of a batch held again stay where they are and come back first, in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "src/pipeline/held_samples.h"

/* A record of size bytes (a multiple of 8 or not) whose payload bytes are all tag. */
static struct perf_event_header *record(uint8_t *buf, uint16_t size, uint8_t tag)
{
	struct perf_event_header *h = (struct perf_event_header *)buf;
	memset(buf, tag, size);
	h->type = PERF_RECORD_SAMPLE;
	h->misc = 0;
	h->size = size;
	return h;
}

static void test_order_and_contents(void **state)
{
	(void)state;
	struct held_samples *h;
	_Alignas(8) uint8_t buf[256];
	assert_int_equal(held_samples_new(0, 0, &h), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(held_samples_add(h, record(buf, (uint16_t)(16 + 12 * i), (uint8_t)i), 7), 0);
	assert_int_equal(held_samples_count(h), 10);
	struct held_batch b;
	held_samples_take(h, &b);
	assert_int_equal(held_samples_count(h), 0);
	/* Held again while the batch is walked: into the queue, not the batch. */
	assert_int_equal(held_samples_add(h, record(buf, 24, 99), 7), 0);
	const struct perf_event_header *r;
	int i = 0;
	while ((r = held_batch_next(h, &b))) {
		assert_int_equal(r->size, 16 + 12 * i);
		assert_int_equal((uintptr_t)r % 8, 0);
		const uint8_t *p = (const uint8_t *)(r + 1);
		for (size_t k = 0; k < r->size - sizeof(*r); k++)
			assert_int_equal(p[k], i);
		i++;
	}
	assert_int_equal(i, 10);
	held_samples_done(h, &b);
	assert_int_equal(held_samples_count(h), 1);
	held_samples_free(h);
}

/* The records of each payload tag i, in order, as the queue holds them now (after a take and done). */
static void expect_tags(struct held_samples *h, const uint8_t *tags, unsigned n)
{
	struct held_batch b;
	const struct perf_event_header *r;
	unsigned i = 0;
	held_samples_take(h, &b);
	while ((r = held_batch_next(h, &b))) {
		assert_true(i < n);
		assert_int_equal(((const uint8_t *)(r + 1))[0], tags[i]);
		assert_int_equal(((const uint8_t *)r)[r->size - 1], tags[i]);
		i++;
	}
	assert_int_equal(i, n);
	held_samples_done(h, &b);
}

/* Walked again, the records held again (1, 3, 4) stay in their batch, moved down over those handled (0, 2), whole
 * and in order; those held meanwhile (7, 8) follow them. The bounds count both. */
static void test_held_again_in_place(void **state)
{
	(void)state;
	struct held_samples *h;
	_Alignas(8) uint8_t buf[512];
	struct held_batch b;
	const struct perf_event_header *r;
	assert_int_equal(held_samples_new(7, 1 << 20, &h), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(held_samples_add(h, record(buf, (uint16_t)(100 + 40 * i), (uint8_t)i), 7), 0);
	held_samples_take(h, &b);
	const uint8_t *base = b.base;
	for (int i = 0; (r = held_batch_next(h, &b)); i++) {
		if (i == 1 || i == 3 || i == 4)
			assert_int_equal(held_samples_add(h, r, 7), 0);
		if (i == 2) {
			assert_int_equal(held_samples_add(h, record(buf, 64, 7), 7), 0);
			assert_int_equal(held_samples_add(h, record(buf, 72, 8), 7), 0);
			/* 1 kept so far and 2 new, of 7 */
			assert_true(held_samples_room(h, record(buf, 64, 9)));
		}
	}
	held_samples_done(h, &b);
	assert_int_equal(held_samples_count(h), 5);
	assert_int_equal(held_samples_add(h, record(buf, 64, 9), 7), 0);
	assert_int_equal(held_samples_add(h, record(buf, 64, 9), 7), 0);
	assert_int_equal(held_samples_add(h, record(buf, 64, 9), 7), -ENOSPC);	/* the count of 7 */
	struct held_batch peek;
	held_samples_take(h, &peek);
	assert_ptr_equal(peek.base, base);	/* the same mapping: nothing copied to a new one */
	held_samples_done(h, &peek);	/* none held again: all given back (the mapping freed) */
	assert_int_equal(held_samples_count(h), 0);
	held_samples_free(h);
}

static void test_order_after_replays(void **state)
{
	(void)state;
	struct held_samples *h;
	_Alignas(8) uint8_t buf[512];
	struct held_batch b;
	const struct perf_event_header *r;
	assert_int_equal(held_samples_new(0, 0, &h), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(held_samples_add(h, record(buf, (uint16_t)(100 + 40 * i), (uint8_t)i), 7), 0);
	held_samples_take(h, &b);
	for (int i = 0; (r = held_batch_next(h, &b)); i++) {
		if (i == 1 || i == 3 || i == 4)
			assert_int_equal(held_samples_add(h, r, 7), 0);
		if (i == 2)
			assert_int_equal(held_samples_add(h, record(buf, 64, 7), 7), 0);
	}
	held_samples_done(h, &b);
	static const uint8_t want[] = { 1, 3, 4, 7 };
	expect_tags(h, want, 4);
	held_samples_free(h);
}

static void test_bounds(void **state)
{
	(void)state;
	struct held_samples *h;
	_Alignas(8) uint8_t buf[4096];
	assert_int_equal(held_samples_new(3, 1 << 20, &h), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(held_samples_add(h, record(buf, 64, 1), 7), 0);
	assert_int_equal(held_samples_add(h, record(buf, 64, 1), 7), -ENOSPC);	/* the count */
	held_samples_free(h);
	assert_int_equal(held_samples_new(1000, 8192, &h), 0);
	assert_int_equal(held_samples_add(h, record(buf, 4, 2), 7), -ENOSPC);	/* shorter than a header */
	/* Each entry is the record and 8 bytes of its own (the pid): two of 4088 fill 8192. */
	assert_int_equal(held_samples_add(h, record(buf, 4088, 2), 7), 0);
	assert_int_equal(held_samples_add(h, record(buf, 4088, 2), 7), 0);
	assert_int_equal(held_samples_add(h, record(buf, 8, 2), 7), -ENOSPC);	/* the bytes */
	assert_int_equal(held_samples_count(h), 2);
	held_samples_free(h);
}

/* Each record counts for its pid while held, in the queue or in a batch walked again, and stops counting once
 * walked and not held again. */
static void test_counts_per_pid(void **state)
{
	(void)state;
	struct held_samples *h;
	_Alignas(8) uint8_t buf[256];
	struct held_batch b;
	const struct perf_event_header *r;
	assert_int_equal(held_samples_new(0, 0, &h), 0);
	assert_int_equal(held_samples_add(h, record(buf, 64, 1), 10), 0);
	assert_int_equal(held_samples_add(h, record(buf, 64, 2), 20), 0);
	assert_int_equal(held_samples_add(h, record(buf, 64, 3), 10), 0);
	assert_int_equal(held_samples_of(h, 10), 2);
	assert_int_equal(held_samples_of(h, 20), 1);
	assert_int_equal(held_samples_of(h, 30), 0);
	held_samples_take(h, &b);
	assert_int_equal(held_samples_of(h, 10), 2);	/* still held while walked again */
	while ((r = held_batch_next(h, &b)))
		if (((const uint8_t *)(r + 1))[0] == 3)
			assert_int_equal(held_samples_add(h, r, 10), 0);	/* held again */
	held_samples_done(h, &b);
	assert_int_equal(held_samples_of(h, 10), 1);
	assert_int_equal(held_samples_of(h, 20), 0);
	held_samples_take(h, &b);
	while (held_batch_next(h, &b))
		;
	held_samples_done(h, &b);
	assert_int_equal(held_samples_of(h, 10), 0);
	held_samples_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_contents),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_held_again_in_place),
		cmocka_unit_test(test_order_after_replays),
		cmocka_unit_test(test_counts_per_pid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
