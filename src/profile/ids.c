/*
 * ids.c — FileID and stack-trace ID. See ids.h for the contract.
 */
#include "src/profile/ids.h"

#include <errno.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILEID_CHUNK 4096

static const unsigned __int128 FNV128_PRIME = ((unsigned __int128)1 << 88) + 0x13b;

static unsigned __int128 fnv128_offset_basis(void)
{
	return ((unsigned __int128)0x6c62272e07bb0142ULL << 64) | 0x62b821756295c58dULL;
}

static unsigned __int128 fnv128_update(unsigned __int128 h, const void *data, size_t n)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= FNV128_PRIME;
	}
	return h;
}

static void u128_to_be_bytes(unsigned __int128 v, uint8_t out[16])
{
	for (int i = 15; i >= 0; i--) {
		out[i] = (uint8_t)v;
		v >>= 8;
	}
}

/*
 * SHA-256 of the head, the tail and the size (big-endian), cut to 128 bits. Nettle's SHA-256 rather than
 * OpenSSL's: loading libcrypto and fetching its digest cost ~3 ms of every hostprof command's start.
 */
static void fileid_digest(const uint8_t *head, const uint8_t *tail, size_t n, uint64_t size, struct file_id *out)
{
	struct sha256_ctx ctx;
	uint8_t len_be[8], digest[SHA256_DIGEST_SIZE];

	for (int i = 0; i < 8; i++)
		len_be[i] = (uint8_t)(size >> (56 - 8 * i));
	sha256_init(&ctx);
	sha256_update(&ctx, n, head);
	sha256_update(&ctx, n, tail);
	sha256_update(&ctx, sizeof(len_be), len_be);
	sha256_digest(&ctx, sizeof(digest), digest);
	memcpy(out->bytes, digest, sizeof(out->bytes));
}

void fileid_from_buffer(const uint8_t *data, size_t size, struct file_id *out)
{
	size_t n = size < FILEID_CHUNK ? size : FILEID_CHUNK;
	fileid_digest(data, data + size - n, n, size, out);
}

static int pread_full(int fd, uint8_t *buf, size_t n, off_t off)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(fd, buf + done, n - done, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO; /* file shrank under us */
		done += (size_t)r;
	}
	return 0;
}

int fileid_from_fd(int fd, struct file_id *out)
{
	uint8_t head[FILEID_CHUNK], tail[FILEID_CHUNK];
	struct stat st;
	int err;

	if (fstat(fd, &st) < 0)
		return -errno;
	uint64_t size = (uint64_t)st.st_size;
	size_t n = size < FILEID_CHUNK ? (size_t)size : FILEID_CHUNK;
	if ((err = pread_full(fd, head, n, 0)) < 0 || (err = pread_full(fd, tail, n, (off_t)(size - n))) < 0)
		return err;

	fileid_digest(head, tail, n, size, out);
	return 0;
}

void fileid_from_text(const void *text, size_t n, struct file_id *out)
{
	u128_to_be_bytes(fnv128_update(fnv128_offset_basis(), text, n), out->bytes);
}

void fileid_from_build_id_hex(const char *hex, struct file_id *out)
{
	fileid_from_text(hex, strlen(hex), out);
}

void trace_hash_init(struct trace_hasher *h)
{
	h->state = fnv128_offset_basis();
}

/* The decimal digits of v at the end of buf (20 bytes); returns where they start. snprintf() took ~150 ns per
 * frame here, a third of a sample's handling. */
static const char *u64_decimal(uint64_t v, char buf[20])
{
	char *p = buf + 20;
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return p;
}

void trace_hash_frame(struct trace_hasher *h, const struct file_id *file, uint64_t address)
{
	char dec[20];
	const char *digits = u64_decimal(address, dec);

	h->state = fnv128_update(h->state, file->bytes, sizeof(file->bytes));
	h->state = fnv128_update(h->state, digits, (size_t)(dec + sizeof(dec) - digits));
}

void trace_hash_finish(const struct trace_hasher *h, struct trace_id *out)
{
	u128_to_be_bytes(h->state, out->bytes);
}

void hex_encode(const uint8_t *bytes, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * n] = '\0';
}
