/*
 * byte_reader.h — a bounded cursor over the bytes of a table hostprof parses by hand: fixed-width integers in
 * either byte order, LEB128, and the DW_EH_PE pointer encodings of .eh_frame and .eh_frame_hdr.
 *
 * unwind/ reads the CFI sections' entry headers (CIE augmentations, FDE address ranges), .eh_frame_hdr and Go's
 * function table (.gopclntab) through it; libdw and libelf remain the DWARF and ELF library for everything
 * else. Neither exports a decoder for these encodings (libdw's LEB128 and DW_EH_PE readers are internal to it),
 * so this is the one copy of them in hostprof.
 *
 * Contract: a reader covers [start, end) of memory the caller owns and keeps alive; no read looks past end.
 * Every read returns true and moves the cursor past what it read, or returns false and leaves the cursor where it
 * was: a truncated, over-long or invalid value consumes nothing. The *_at reads take an offset from start and do
 * not move the cursor. A reader is a plain value: it allocates nothing, copy it to remember a position.
 *
 * Untrusted input: the bytes may be hostile. LEB128 values are at most 10 bytes and must fit 64 bits (the
 * 32-bit form, 32 bits); a longer or larger encoding is refused, never truncated. Only the pointer encodings
 * unwind tables use on x86_64 are decoded (see byte_reader_eh_pointer); any other is refused.
 */
#ifndef HOSTPROF_UNWIND_BYTE_READER_H
#define HOSTPROF_UNWIND_BYTE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A LEB128 value of 64 bits takes at most 10 bytes: the 10th starts at bit 63. */
#define BYTE_READER_LEB128_LAST_SHIFT 63

struct byte_reader {
	const uint8_t *start, *pos, *end;
	uint64_t va;		/* ELF virtual address of start: the base of pc-relative pointers (0: not loaded) */
	bool big_endian;	/* byte order of the fixed-width reads (ELF files say theirs) */
};

/* A little-endian reader over [data, data + size) at address 0; set va and big_endian after, as needed. */
void byte_reader_init(struct byte_reader *r, const void *data, size_t size);

/* Bytes left after the cursor; the cursor's offset from start; its ELF virtual address (va + offset). */
static inline size_t byte_reader_left(const struct byte_reader *r);
static inline size_t byte_reader_offset(const struct byte_reader *r);
uint64_t byte_reader_address(const struct byte_reader *r);

/* Move the cursor to offset (at most the reader's size), or n bytes on. */
bool byte_reader_seek(struct byte_reader *r, size_t offset);
bool byte_reader_skip(struct byte_reader *r, size_t n);

/* The next n bytes, in place (*out points into the reader's memory). */
bool byte_reader_bytes(struct byte_reader *r, size_t n, const uint8_t **out);

/* An unsigned integer of size bytes (1 to 8) in the reader's byte order; byte_reader_sint sign-extends it. */
static inline bool byte_reader_uint(struct byte_reader *r, unsigned size, uint64_t *v);
bool byte_reader_sint(struct byte_reader *r, unsigned size, int64_t *v);
static inline bool byte_reader_u8(struct byte_reader *r, uint8_t *v);
static inline bool byte_reader_u32(struct byte_reader *r, uint32_t *v);
/* The next byte, without moving the cursor. */
static inline bool byte_reader_peek_u8(const struct byte_reader *r, uint8_t *v);

/* The same at offset from start, leaving the cursor alone. */
static inline bool byte_reader_uint_at(const struct byte_reader *r, size_t offset, unsigned size, uint64_t *v);
static inline bool byte_reader_u32_at(const struct byte_reader *r, size_t offset, uint32_t *v);

/* LEB128 (DWARF's variable-length integers; Go's varints are the unsigned form). */
static inline bool byte_reader_uleb128(struct byte_reader *r, uint64_t *v);
bool byte_reader_sleb128(struct byte_reader *r, int64_t *v);
/* An unsigned LEB128 whose value fits 32 bits. */
static inline bool byte_reader_uleb128_32(struct byte_reader *r, uint32_t *v);

/*
 * The value of a DW_EH_PE_* encoded field, by the format in enc's low nibble only (absptr and udata8 are 8
 * bytes; sdata* are sign-extended); no base is added. False for the formats that are no encoding (0x05-0x08,
 * 0x0d-0x0f).
 */
bool byte_reader_eh_value(struct byte_reader *r, uint8_t enc, uint64_t *v);

/*
 * A DW_EH_PE_* encoded pointer: its value (byte_reader_eh_value) plus its base by enc's application bits:
 * absptr none, pcrel the field's own address (byte_reader_address before the read), datarel datarel_base (the
 * start of .eh_frame_hdr, in that table). False for DW_EH_PE_omit, indirect pointers, and the text-, function-
 * relative and aligned applications, which x86_64 unwind tables never use.
 */
bool byte_reader_eh_pointer(struct byte_reader *r, uint8_t enc, uint64_t datarel_base, uint64_t *v);

/*
 * The encoding of an .eh_frame CIE's FDE pointers, from its augmentation string and augmentation data ('z'
 * sizes the data: 'R' gives the encoding, 'L' and 'P' are skipped, 'S' and 'B' have no data). DW_EH_PE_absptr
 * when the CIE has no augmentation or no 'R'. False when the encoding cannot be known: the string does not start
 * with 'z', the data is cut short, the personality pointer's encoding is invalid, or an unknown letter comes
 * before 'R' (after 'R' one does not matter: 'z' says where the data ends).
 */
bool byte_reader_cie_fde_encoding(const char *augmentation, const uint8_t *data, size_t size, uint8_t *enc);

/* ---- the reads on hot paths (Go's pc-value tables, the function table's binary search), inline -------------- */

static inline size_t byte_reader_left(const struct byte_reader *r)
{
	return (size_t)(r->end - r->pos);
}

static inline size_t byte_reader_offset(const struct byte_reader *r)
{
	return (size_t)(r->pos - r->start);
}

static inline bool byte_reader_uint_at(const struct byte_reader *r, size_t offset, unsigned size, uint64_t *v)
{
	size_t have = (size_t)(r->end - r->start);
	const uint8_t *p = r->start + offset;
	uint64_t x = 0;
	if (size == 0 || size > 8 || offset > have || have - offset < size)
		return false;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (!r->big_endian) {
		memcpy(&x, p, size);	/* one load for the common sizes */
		*v = x;
		return true;
	}
#endif
	for (unsigned i = 0; i < size; i++)
		x |= (uint64_t)p[r->big_endian ? size - 1 - i : i] << (8 * i);
	*v = x;
	return true;
}

static inline bool byte_reader_u32_at(const struct byte_reader *r, size_t offset, uint32_t *v)
{
	uint64_t x;
	if (!byte_reader_uint_at(r, offset, 4, &x))
		return false;
	*v = (uint32_t)x;
	return true;
}

static inline bool byte_reader_uint(struct byte_reader *r, unsigned size, uint64_t *v)
{
	if (!byte_reader_uint_at(r, byte_reader_offset(r), size, v))
		return false;
	r->pos += size;
	return true;
}

static inline bool byte_reader_u32(struct byte_reader *r, uint32_t *v)
{
	uint64_t x;
	if (!byte_reader_uint(r, 4, &x))
		return false;
	*v = (uint32_t)x;
	return true;
}

static inline bool byte_reader_u8(struct byte_reader *r, uint8_t *v)
{
	if (r->pos >= r->end)
		return false;
	*v = *r->pos++;
	return true;
}

static inline bool byte_reader_peek_u8(const struct byte_reader *r, uint8_t *v)
{
	if (r->pos >= r->end)
		return false;
	*v = *r->pos;
	return true;
}

static inline bool byte_reader_uleb128(struct byte_reader *r, uint64_t *v)
{
	const uint8_t *p = r->pos;
	uint64_t x = 0;
	for (unsigned shift = 0; p < r->end; shift += 7) {
		uint8_t b = *p++;
		if (shift == BYTE_READER_LEB128_LAST_SHIFT && b > 1)
			return false;	/* more than 64 bits, or more than 10 bytes */
		x |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80) {
			r->pos = p;
			*v = x;
			return true;
		}
	}
	return false;
}

static inline bool byte_reader_uleb128_32(struct byte_reader *r, uint32_t *v)
{
	const uint8_t *pos = r->pos;
	uint64_t x;
	if (!byte_reader_uleb128(r, &x))
		return false;
	if (x > UINT32_MAX) {
		r->pos = pos;
		return false;
	}
	*v = (uint32_t)x;
	return true;
}

#endif
