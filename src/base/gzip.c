/*
 * gzip.c — deflate into a stream, in chunks (gzip.h).
 */
#include "src/base/gzip.h"

#include <errno.h>
#include <zlib.h>

static int deflate_to(z_stream *z, FILE *out, int flush)
{
	unsigned char chunk[65536];
	int rc;
	do {
		z->next_out = chunk;
		z->avail_out = sizeof(chunk);
		rc = deflate(z, flush);
		if (rc == Z_STREAM_ERROR)
			return -EIO;
		size_t n = sizeof(chunk) - z->avail_out;
		if (n && fwrite(chunk, 1, n, out) != n)
			return -EIO;
	} while (z->avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
	return 0;
}

int gzip_write(const uint8_t *data, size_t len, FILE *out)
{
	z_stream z = { 0 };
	int err = 0;
	/* windowBits 15 + 16: a gzip header and trailer, not zlib's. */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	while (len && err == 0) {	/* avail_in is 32 bits wide */
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
		z.next_in = (Bytef *)data;
		z.avail_in = n;
		err = deflate_to(&z, out, Z_NO_FLUSH);
		data += n;
		len -= n;
	}
	if (err == 0)
		err = deflate_to(&z, out, Z_FINISH);
	deflateEnd(&z);
	return err;
}
