/*
 * read_file.h — a whole file (or pipe) read into memory, bounded.
 *
 * read_fd_all() reads fd from offset 0 to its end with pread, so the descriptor's offset stays where it was and
 * other users of the same descriptor are not disturbed; a pipe or terminal (no pread) is read with read from where
 * it stands. The buffer is sized from fstat for regular files and doubled otherwise; a file larger than max bytes
 * fails with -EFBIG before more than max + 1 bytes are held, so a hostile /dev/zero or a file growing under the
 * read cannot take unbounded memory (max must be below SIZE_MAX). EINTR is retried.
 *
 * Ownership: on success *out is malloc'd (never NULL, even for an empty file) and the caller frees it. Errors:
 * negative errno (-EFBIG, -ENOMEM, or the read's); nothing is allocated then.
 */
#ifndef HOSTPROF_BASE_READ_FILE_H
#define HOSTPROF_BASE_READ_FILE_H

#include <stddef.h>
#include <stdint.h>

int read_fd_all(int fd, size_t max, uint8_t **out, size_t *len);

#endif
