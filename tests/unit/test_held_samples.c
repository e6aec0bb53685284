/*
 * test_held_samples — the queue of samples waiting for a table (src/held_samples.h): records come back whole and in
 * order, the bounds refuse what is past them, and a batch taken leaves the queue empty for records held again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "src/held_samples.h"

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
		assert_int_equal(held_samples_add(h, record(buf, (uint16_t)(16 + 12 * i), (uint8_t)i)), 0);
	assert_int_equal(held_samples_count(h), 10);
	struct held_batch b;
	held_samples_take(h, &b);
	assert_int_equal(held_samples_count(h), 0);
	/* Held again while the batch is walked: into the queue, not the batch. */
	assert_int_equal(held_samples_add(h, record(buf, 24, 99)), 0);
	const struct perf_event_header *r;
	int i = 0;
	while ((r = held_batch_next(&b))) {
		assert_int_equal(r->size, 16 + 12 * i);
		assert_int_equal((uintptr_t)r % 8, 0);
		const uint8_t *p = (const uint8_t *)(r + 1);
		for (size_t k = 0; k < r->size - sizeof(*r); k++)
			assert_int_equal(p[k], i);
		i++;
	}
	assert_int_equal(i, 10);
	held_batch_free(&b);
	assert_int_equal(held_samples_count(h), 1);
	held_samples_free(h);
}

static void test_bounds(void **state)
{
	(void)state;
	struct held_samples *h;
	_Alignas(8) uint8_t buf[4096];
	assert_int_equal(held_samples_new(3, 1 << 20, &h), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(held_samples_add(h, record(buf, 64, 1)), 0);
	assert_int_equal(held_samples_add(h, record(buf, 64, 1)), -ENOSPC);	/* the count */
	held_samples_free(h);
	assert_int_equal(held_samples_new(1000, 8192, &h), 0);
	assert_int_equal(held_samples_add(h, record(buf, 4, 2)), -ENOSPC);	/* shorter than a header */
	assert_int_equal(held_samples_add(h, record(buf, 4096, 2)), 0);
	assert_int_equal(held_samples_add(h, record(buf, 4096, 2)), 0);
	assert_int_equal(held_samples_add(h, record(buf, 8, 2)), -ENOSPC);	/* the bytes */
	assert_int_equal(held_samples_count(h), 2);
	held_samples_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_contents),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
