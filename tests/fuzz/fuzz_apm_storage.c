/*
 * fuzz_apm_storage.c — fuzz target: an APM agent's process storage as hostprof reads it from the process's
 * memory (man/hostprof-correlation.7): a hostile process controls every byte, so every length, string and
 * pointer is checked.
 * The input stands for the process's memory, read through a file descriptor as /proc/PID/mem is; the storage
 * pointer is the input's first 8 bytes (wrapping into the input), the rest its memory.
 */
#include <stdint.h>
#include <string.h>

#include "correlate/correlate_impl.h"
#include "tests/fuzz/fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t ptr;
	char why[256];
	struct corr_storage st;
	if (size < sizeof(ptr))
		return 0;
	memcpy(&ptr, data, sizeof(ptr));
	int fd = fuzz_input_fd(data, size);
	if (fd < 0)
		return 0;
	/* Mostly inside the input, so that the reads find data; now and then anywhere. */
	if (!(ptr >> 63))
		ptr = 1 + ptr % size;
	corr_storage_read(fd, ptr, &st, why, sizeof(why));
	close(fd);
	return 0;
}
