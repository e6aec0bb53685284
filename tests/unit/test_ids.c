/* Unit tests for src/profile/ids.c against known FileID and stack-trace ID vectors (ids.h gives the definitions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/profile/ids.h"

static void assert_hex(const uint8_t *bytes, const char *expect)
{
	char hex[33];
	hex_encode(bytes, 16, hex);
	assert_string_equal(hex, expect);
}

static void test_fileid_vector(void **state)
{
	(void)state;
	const uint8_t file[9] = { 0x7f, 0x45, 0x4c, 0x46, 0x00, 0x01, 0x02, 0x03, 0x04 };
	struct file_id id;
	fileid_from_buffer(file, sizeof(file), &id);
	assert_hex(id.bytes, "caf6e5907166ac76eef618e5f7f59cd9");
}

static void test_fileid_fd_matches_buffer(void **state)
{
	(void)state;
	char path[] = "/tmp/hostprof-ids-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t size = 3 * 4096 + 123; /* head and tail do not overlap */
	uint8_t *data = malloc(size);
	for (size_t i = 0; i < size; i++)
		data[i] = (uint8_t)(i * 7 + (i >> 9));
	assert_int_equal(write(fd, data, size), (ssize_t)size);

	struct file_id a, b;
	fileid_from_buffer(data, size, &a);
	assert_int_equal(fileid_from_fd(fd, &b), 0);
	assert_memory_equal(a.bytes, b.bytes, 16);

	/* A byte in the middle is not hashed; one in the tail is. */
	data[5000] ^= 1;
	fileid_from_buffer(data, size, &b);
	assert_memory_equal(a.bytes, b.bytes, 16);
	data[size - 1] ^= 1;
	fileid_from_buffer(data, size, &b);
	assert_memory_not_equal(a.bytes, b.bytes, 16);
	close(fd);
	unlink(path);
	free(data);
}

static void test_kernel_fileid_vector(void **state)
{
	(void)state;
	struct file_id id;
	fileid_from_build_id_hex("f8e1cf0f60558098edaec164ac7749df", &id);
	assert_hex(id.bytes, "026a2d6a60ee6b4eb8ec85adf2e76f4d");
}

static void test_trace_id_vectors(void **state)
{
	(void)state;
	struct trace_hasher h;
	struct trace_id id;

	trace_hash_init(&h);
	trace_hash_finish(&h, &id);
	assert_hex(id.bytes, "6c62272e07bb014262b821756295c58d");

	trace_hash_init(&h);
	for (uint64_t i = 0; i < 3; i++) {
		struct file_id f;
		for (int b = 0; b < 8; b++)
			f.bytes[b] = f.bytes[8 + b] = (uint8_t)(i >> (56 - 8 * b));
		trace_hash_frame(&h, &f, i);
	}
	trace_hash_finish(&h, &id);
	assert_hex(id.bytes, "21c6fe4c62868856cf510596eab68dc8");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fileid_vector),
		cmocka_unit_test(test_fileid_fd_matches_buffer),
		cmocka_unit_test(test_kernel_fileid_vector),
		cmocka_unit_test(test_trace_id_vectors),
	};
	return cmocka_run_group_tests_name("ids", tests, NULL, NULL);
}
