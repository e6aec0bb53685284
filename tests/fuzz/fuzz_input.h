/*
 * fuzz_input.h — what the fuzz targets share: the fuzzer's bytes as a file, for parsers that take a path or a
 * file descriptor. Header-only so that each target stays one file.
 */
#ifndef HOSTPROF_FUZZ_INPUT_H
#define HOSTPROF_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* An anonymous file holding data[0..size), or -1; its path is "/proc/self/fd/FD" (see fuzz_input_path). */
static inline int fuzz_input_fd(const uint8_t *data, size_t size)
{
	int fd = memfd_create("hostprof-fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	return fd;
}

static inline void fuzz_input_path(int fd, char *path, size_t len)
{
	snprintf(path, len, "/proc/self/fd/%d", fd);
}

#endif
