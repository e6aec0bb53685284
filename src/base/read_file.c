/*
 * read_file.c — a whole file read into memory, bounded. See read_file.h.
 */
#include "src/base/read_file.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room for at least one more byte in *buf (capacity *cap), up to max + 1 bytes: -EFBIG past it. */
static int make_room(uint8_t **buf, size_t *cap, size_t len, size_t max)
{
	if (len < *cap)
		return 0;
	if (*cap > max)
		return -EFBIG;
	size_t ncap = *cap > (max + 1) / 2 ? max + 1 : *cap * 2;
	uint8_t *n = realloc(*buf, ncap);
	if (!n)
		return -ENOMEM;
	*buf = n;
	*cap = ncap;
	return 0;
}

/* One read at the end of the data: pread at len, or read where a pipe stands (no pread: ESPIPE). */
static ssize_t read_more(int fd, uint8_t *dst, size_t room, size_t len, int *seekable)
{
	for (;;) {
		ssize_t got = *seekable ? pread(fd, dst, room, (off_t)len) : read(fd, dst, room);
		if (got >= 0 || (errno != EINTR && !(errno == ESPIPE && *seekable)))
			return got;
		if (errno == ESPIPE)
			*seekable = 0;
	}
}

int read_fd_all(int fd, size_t max, uint8_t **out, size_t *len)
{
	struct stat st;
	int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode), seekable = 1, err = 0;
	if (regular && (uint64_t)st.st_size > max)
		return -EFBIG;
	size_t cap = regular && st.st_size > 0 ? (size_t)st.st_size + 1 : 65536;
	if (cap > max + 1)
		cap = max + 1;
	uint8_t *buf = malloc(cap);
	*len = 0;
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if ((err = make_room(&buf, &cap, *len, max)) < 0)
			break;
		ssize_t got = read_more(fd, buf + *len, cap - *len, *len, &seekable);
		if (got <= 0) {
			err = got < 0 ? -errno : 0;
			break;
		}
		*len += (size_t)got;
	}
	if (err < 0) {
		free(buf);
		return err;
	}
	*out = buf;
	return 0;
}
