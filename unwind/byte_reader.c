/*
 * byte_reader.c — bounded reads of fixed-width integers, LEB128 and DW_EH_PE pointers. See byte_reader.h.
 */
#include "unwind/byte_reader.h"

#include <dwarf.h>
#include <string.h>

void byte_reader_init(struct byte_reader *r, const void *data, size_t size)
{
	const uint8_t *p = data;
	*r = (struct byte_reader){ .start = p, .pos = p, .end = p ? p + size : p };
}

uint64_t byte_reader_address(const struct byte_reader *r)
{
	return r->va + byte_reader_offset(r);
}

bool byte_reader_seek(struct byte_reader *r, size_t offset)
{
	if (offset > (size_t)(r->end - r->start))
		return false;
	r->pos = r->start + offset;
	return true;
}

bool byte_reader_skip(struct byte_reader *r, size_t n)
{
	if (n > byte_reader_left(r))
		return false;
	r->pos += n;
	return true;
}

bool byte_reader_bytes(struct byte_reader *r, size_t n, const uint8_t **out)
{
	if (n > byte_reader_left(r))
		return false;
	*out = r->pos;
	r->pos += n;
	return true;
}

bool byte_reader_sint(struct byte_reader *r, unsigned size, int64_t *v)
{
	uint64_t x;
	if (!byte_reader_uint(r, size, &x))
		return false;
	if (size < 8 && (x >> (8 * size - 1)) & 1)
		x |= ~0ull << (8 * size);
	*v = (int64_t)x;
	return true;
}

bool byte_reader_sleb128(struct byte_reader *r, int64_t *v)
{
	const uint8_t *p = r->pos;
	uint64_t x = 0;
	for (unsigned shift = 0; p < r->end; shift += 7) {
		uint8_t b = *p++;
		/* The 10th byte holds bit 63 and its sign extension: all zeros or all ones. */
		if (shift == BYTE_READER_LEB128_LAST_SHIFT && b != 0 && b != 0x7f)
			return false;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80) {
			if (shift + 7 < 64 && (b & 0x40))
				x |= ~0ull << (shift + 7);
			r->pos = p;
			*v = (int64_t)x;
			return true;
		}
	}
	return false;
}

/* Size of a fixed-size DW_EH_PE format (enc's low nibble), 0 for LEB128 and the formats that are none. */
static unsigned br_eh_fixed_size(uint8_t format)
{
	switch (format) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8: return 8;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4: return 4;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2: return 2;
	default: return 0;
	}
}

bool byte_reader_eh_value(struct byte_reader *r, uint8_t enc, uint64_t *v)
{
	uint8_t format = enc & 0x0f;
	unsigned size = br_eh_fixed_size(format);
	int64_t s;
	bool ok;
	if (size && !(format & DW_EH_PE_signed))
		return byte_reader_uint(r, size, v);
	if (format == DW_EH_PE_uleb128)
		return byte_reader_uleb128(r, v);
	if (size)
		ok = byte_reader_sint(r, size, &s);
	else
		ok = format == DW_EH_PE_sleb128 && byte_reader_sleb128(r, &s);
	if (ok)
		*v = (uint64_t)s;
	return ok;
}

bool byte_reader_eh_pointer(struct byte_reader *r, uint8_t enc, uint64_t datarel_base, uint64_t *v)
{
	uint64_t base, val;
	if (enc == DW_EH_PE_omit || (enc & DW_EH_PE_indirect))
		return false;
	switch (enc & 0x70) {
	case DW_EH_PE_absptr: base = 0; break;
	case DW_EH_PE_pcrel: base = byte_reader_address(r); break;
	case DW_EH_PE_datarel: base = datarel_base; break;
	default: return false;
	}
	if (!byte_reader_eh_value(r, enc, &val))
		return false;
	*v = base + val;
	return true;
}

bool byte_reader_cie_fde_encoding(const char *augmentation, const uint8_t *data, size_t size, uint8_t *enc)
{
	struct byte_reader r;
	uint64_t skip;
	uint8_t e;
	*enc = DW_EH_PE_absptr;
	if (!augmentation || augmentation[0] == '\0')
		return true;
	if (augmentation[0] != 'z')
		return false;
	byte_reader_init(&r, data, data ? size : 0);
	for (const char *c = augmentation + 1; *c; c++) {
		if (*c == 'S' || *c == 'B')
			continue;
		if (*c != 'L' && *c != 'R' && *c != 'P')
			return strchr(c, 'R') == NULL;
		if (!byte_reader_u8(&r, &e))
			return false;
		if (*c == 'R')
			*enc = e;
		else if (*c == 'P' && (e == DW_EH_PE_omit || !byte_reader_eh_value(&r, e, &skip)))
			return false;	/* the personality pointer: only its size matters */
	}
	return true;
}
