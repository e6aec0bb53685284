/*
 * msgpack_scan.c — bound check of msgpack bytes before decoding. See msgpack_scan.h for the contract.
 */
#include "src/base/msgpack_scan.h"

#include <stdbool.h>

static bool read_be(const uint8_t *buf, size_t len, size_t *pos, int n, uint64_t *v)
{
	if (len - *pos < (size_t)n)
		return false;
	*v = 0;
	for (int i = 0; i < n; i++)
		*v = *v << 8 | buf[(*pos)++];
	return true;
}

/* For one header byte: bytes of length prefix (str/bin/ext), of fixed payload, of element count. */
static enum msgpack_scan_result classify(uint8_t b, int *len_bytes, int *fixed, int *count_bytes, int *count_mult)
{
	static const int8_t fixed_after_c0[32] = {
		[0x0a] = 4, [0x0b] = 8, [0x0c] = 1, [0x0d] = 2, [0x0e] = 4, [0x0f] = 8,		/* float, uint */
		[0x10] = 1, [0x11] = 2, [0x12] = 4, [0x13] = 8,					/* int */
		[0x14] = 2, [0x15] = 3, [0x16] = 5, [0x17] = 9, [0x18] = 17,			/* fixext */
	};
	*len_bytes = *fixed = *count_bytes = 0;
	*count_mult = 1;
	switch (b) {
	case 0xc1:
		return MSGPACK_SCAN_INVALID;
	case 0xc4: case 0xd9: *len_bytes = 1; break;
	case 0xc5: case 0xda: *len_bytes = 2; break;
	case 0xc6: case 0xdb: *len_bytes = 4; break;
	case 0xc7: *len_bytes = 1; *fixed = 1; break;	/* ext: length, then a type byte */
	case 0xc8: *len_bytes = 2; *fixed = 1; break;
	case 0xc9: *len_bytes = 4; *fixed = 1; break;
	case 0xdc: *count_bytes = 2; break;
	case 0xdd: *count_bytes = 4; break;
	case 0xde: *count_bytes = 2; *count_mult = 2; break;
	case 0xdf: *count_bytes = 4; *count_mult = 2; break;
	default:
		if (b >= 0xc0 && b <= 0xdf)
			*fixed = fixed_after_c0[b - 0xc0];
	}
	return MSGPACK_SCAN_OK;
}

enum msgpack_scan_result msgpack_scan_object(const uint8_t *buf, size_t len, size_t *pos)
{
	uint64_t pending = 1, v;
	size_t p = *pos;
	while (pending) {
		int len_bytes, fixed, count_bytes, mult;
		uint64_t skip = 0, add = 0;
		if (p >= len)
			return MSGPACK_SCAN_TRUNCATED;
		uint8_t b = buf[p++];
		pending--;
		if (b >= 0x80 && b <= 0x8f) {
			add = 2u * (b & 0x0f);
		} else if (b >= 0x90 && b <= 0x9f) {
			add = b & 0x0f;
		} else if (b >= 0xa0 && b <= 0xbf) {
			skip = b & 0x1f;
		} else if (b >= 0xc0 && b <= 0xdf) {
			if (classify(b, &len_bytes, &fixed, &count_bytes, &mult) != MSGPACK_SCAN_OK)
				return MSGPACK_SCAN_INVALID;
			skip = (uint64_t)fixed;
			if (len_bytes && !read_be(buf, len, &p, len_bytes, &v))
				return MSGPACK_SCAN_TRUNCATED;
			skip += len_bytes ? v : 0;
			if (count_bytes && !read_be(buf, len, &p, count_bytes, &v))
				return MSGPACK_SCAN_TRUNCATED;
			add = count_bytes ? v * (uint64_t)mult : 0;
		}
		if (skip > len - p)
			return MSGPACK_SCAN_TRUNCATED;
		p += skip;
		pending += add;
		if (pending > len - p)
			return MSGPACK_SCAN_TRUNCATED;
	}
	*pos = p;
	return MSGPACK_SCAN_OK;
}

