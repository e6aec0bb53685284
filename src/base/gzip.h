/*
 * gzip.h — bytes written gzip'd (zlib's deflate with a gzip header and trailer), for the files and requests that
 * are gzip on the wire: pprof profiles on disk (pprof.h), OTLP/HTTP request bodies (otlp_sender.h).
 *
 * Errors: 0, -ENOMEM (zlib's state), or -EIO (a write failed: see ferror(out)). The input may be of any length.
 */
#ifndef HOSTPROF_BASE_GZIP_H
#define HOSTPROF_BASE_GZIP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int gzip_write(const uint8_t *data, size_t len, FILE *out);

#endif
