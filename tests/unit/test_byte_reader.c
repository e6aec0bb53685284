/*
 * Unit tests for unwind/byte_reader.c, the bounded reader of the hand-parsed tables (.eh_frame entry headers,
 * .eh_frame_hdr, .gopclntab): every read stays inside the reader and a failed read consumes nothing; LEB128 at
 * its limits (truncated, over-long, too large); every DW_EH_PE encoding, valid or not, with its pc-relative and
 * data-relative bases; CIE augmentations.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dwarf.h>
#include <stdint.h>
#include <string.h>

#include "unwind/byte_reader.h"

#define READER(name, ...)                                                                                   \
	static const uint8_t name##_bytes[] = { __VA_ARGS__ };                                             \
	struct byte_reader name;                                                                            \
	byte_reader_init(&name, name##_bytes, sizeof(name##_bytes))

/* A failed read leaves the cursor where it was. */
#define ASSERT_REFUSED(call, r, at)                                                                         \
	do {                                                                                                \
		assert_false(call);                                                                         \
		assert_int_equal(byte_reader_offset(r), (at));                                              \
	} while (0)

static void test_fixed_width(void **state)
{
	(void)state;
	READER(r, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xff);
	uint64_t v;
	int64_t s;
	uint32_t u32;
	assert_true(byte_reader_uint(&r, 2, &v));
	assert_int_equal(v, 0x0201);
	assert_true(byte_reader_u32(&r, &u32));
	assert_int_equal(u32, 0x06050403);
	ASSERT_REFUSED(byte_reader_uint(&r, 4, &v), &r, 6);	/* 3 bytes left */
	assert_true(byte_reader_uint(&r, 3, &v));
	assert_int_equal(v, 0xff0807);
	assert_int_equal(byte_reader_left(&r), 0);
	ASSERT_REFUSED(byte_reader_uint(&r, 1, &v), &r, 9);
	/* Sizes outside 1..8 are no integer. */
	assert_true(byte_reader_seek(&r, 0));
	ASSERT_REFUSED(byte_reader_uint(&r, 0, &v), &r, 0);
	ASSERT_REFUSED(byte_reader_uint(&r, 9, &v), &r, 0);
	/* The same bytes big-endian. */
	r.big_endian = true;
	assert_true(byte_reader_uint(&r, 8, &v));
	assert_int_equal(v, 0x0102030405060708ull);
	/* Sign extension. */
	assert_true(byte_reader_sint(&r, 1, &s));
	assert_int_equal(s, -1);
	r.big_endian = false;
	assert_true(byte_reader_seek(&r, 7));
	assert_true(byte_reader_sint(&r, 2, &s));	/* 0xff08 */
	assert_int_equal(s, -248);
	assert_true(byte_reader_seek(&r, 0));
	assert_true(byte_reader_sint(&r, 8, &s));
	assert_int_equal(s, 0x0807060504030201ll);
}

static void test_positioned_reads(void **state)
{
	(void)state;
	READER(r, 0x10, 0x20, 0x30, 0x40, 0x50);
	uint64_t v;
	uint32_t u32;
	assert_true(byte_reader_u32_at(&r, 1, &u32));
	assert_int_equal(u32, 0x50403020);
	assert_int_equal(byte_reader_offset(&r), 0);	/* the cursor did not move */
	assert_false(byte_reader_u32_at(&r, 2, &u32));
	assert_false(byte_reader_uint_at(&r, 5, 1, &v));
	assert_false(byte_reader_uint_at(&r, SIZE_MAX, 4, &v));
	assert_false(byte_reader_uint_at(&r, SIZE_MAX - 2, 4, &v));	/* offset + size wraps */
	assert_true(byte_reader_uint_at(&r, 4, 1, &v));
	assert_int_equal(v, 0x50);
}

static void test_cursor_moves(void **state)
{
	(void)state;
	READER(r, 1, 2, 3, 4);
	const uint8_t *p;
	uint8_t b;
	assert_true(byte_reader_skip(&r, 1));
	assert_true(byte_reader_bytes(&r, 2, &p));
	assert_int_equal(p[0], 2);
	assert_int_equal(p[1], 3);
	ASSERT_REFUSED(byte_reader_bytes(&r, 2, &p), &r, 3);
	ASSERT_REFUSED(byte_reader_skip(&r, 2), &r, 3);
	assert_false(byte_reader_skip(&r, SIZE_MAX));
	assert_true(byte_reader_u8(&r, &b));
	assert_int_equal(b, 4);
	ASSERT_REFUSED(byte_reader_u8(&r, &b), &r, 4);
	assert_true(byte_reader_seek(&r, 4));	/* the end is a position */
	ASSERT_REFUSED(byte_reader_seek(&r, 5), &r, 4);
	r.va = 0x1000;
	assert_int_equal(byte_reader_address(&r), 0x1004);
	/* A reader over nothing refuses everything. */
	struct byte_reader empty;
	uint64_t v;
	byte_reader_init(&empty, NULL, 0);
	assert_false(byte_reader_u8(&empty, &b));
	assert_false(byte_reader_uleb128(&empty, &v));
	assert_false(byte_reader_uint_at(&empty, 0, 1, &v));
	assert_true(byte_reader_seek(&empty, 0));
}

struct leb_case {
	uint8_t bytes[12];
	size_t len;
	bool ok;
	uint64_t value;
};

static void check_uleb(const struct leb_case *c)
{
	struct byte_reader r;
	uint64_t v = 0xdead;
	byte_reader_init(&r, c->bytes, c->len);
	assert_int_equal(byte_reader_uleb128(&r, &v), c->ok);
	assert_int_equal(byte_reader_offset(&r), c->ok ? c->len : 0);
	if (c->ok)
		assert_int_equal(v, c->value);
}

static void test_uleb128(void **state)
{
	(void)state;
	static const struct leb_case cases[] = {
		/* DWARF 5, 7.6's examples. */
		{ { 0x02 }, 1, true, 2 },
		{ { 0x7f }, 1, true, 127 },
		{ { 0x80, 0x01 }, 2, true, 128 },
		{ { 0x81, 0x01 }, 2, true, 129 },
		{ { 0x82, 0x01 }, 2, true, 130 },
		{ { 0xb9, 0x64 }, 2, true, 12857 },
		/* Padding within 10 bytes is a valid encoding. */
		{ { 0x80, 0x80, 0x00 }, 3, true, 0 },
		{ { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 10, true, 0 },
		/* The largest value: 10 bytes, the last holding bit 63. */
		{ { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 10, true, UINT64_MAX },
		{ { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 }, 10, true, 1ull << 63 },
		/* Truncated: the last byte read says more follow. */
		{ { 0x80 }, 1, false, 0 },
		{ { 0xff, 0xff, 0xff }, 3, false, 0 },
		{ { 0 }, 0, false, 0 },
		/* Too large for 64 bits, or over-long (an 11th byte). */
		{ { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 }, 10, false, 0 },
		{ { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 11, false, 0 },
		{ { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x00 }, 11, false, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_uleb(&cases[i]);
}

static void check_sleb(const struct leb_case *c)
{
	struct byte_reader r;
	int64_t v = 0xdead;
	byte_reader_init(&r, c->bytes, c->len);
	assert_int_equal(byte_reader_sleb128(&r, &v), c->ok);
	assert_int_equal(byte_reader_offset(&r), c->ok ? c->len : 0);
	if (c->ok)
		assert_int_equal(v, (int64_t)c->value);
}

static void test_sleb128(void **state)
{
	(void)state;
	static const struct leb_case cases[] = {
		/* DWARF 5, 7.6's examples. */
		{ { 0x02 }, 1, true, 2 },
		{ { 0x7e }, 1, true, (uint64_t)-2 },
		{ { 0xff, 0x00 }, 2, true, 127 },
		{ { 0x81, 0x7f }, 2, true, (uint64_t)-127 },
		{ { 0x80, 0x01 }, 2, true, 128 },
		{ { 0x80, 0x7f }, 2, true, (uint64_t)-128 },
		{ { 0x81, 0x01 }, 2, true, 129 },
		{ { 0xff, 0x7e }, 2, true, (uint64_t)-129 },
		/* The extremes: 10 bytes, the last all zeros or all ones. */
		{ { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00 }, 10, true, (uint64_t)INT64_MAX },
		{ { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f }, 10, true, (uint64_t)INT64_MIN },
		{ { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f }, 9, true, (uint64_t)-1 },
		{ { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f }, 10, true, (uint64_t)-1 },
		/* Truncated. */
		{ { 0x80 }, 1, false, 0 },
		{ { 0 }, 0, false, 0 },
		/* Too large for 64 bits, or over-long. */
		{ { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 10, false, 0 },
		{ { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7e }, 10, false, 0 },
		{ { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 11, false, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_sleb(&cases[i]);
}

static void test_uleb128_32(void **state)
{
	(void)state;
	READER(r, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x80, 0x80, 0x80, 0x80, 0x10);
	uint32_t v;
	assert_true(byte_reader_uleb128_32(&r, &v));
	assert_int_equal(v, UINT32_MAX);
	ASSERT_REFUSED(byte_reader_uleb128_32(&r, &v), &r, 5);	/* 2^32 */
	READER(cut, 0x80, 0x80);
	ASSERT_REFUSED(byte_reader_uleb128_32(&cut, &v), &cut, 0);
}

/* The formats (low nibble) that are an encoding, and their sizes in the 10-byte field below; 0: none. */
static size_t format_size(unsigned format)
{
	static const size_t size[16] = { [DW_EH_PE_absptr] = 8, [DW_EH_PE_uleb128] = 2, [DW_EH_PE_udata2] = 2,
					 [DW_EH_PE_udata4] = 4, [DW_EH_PE_udata8] = 8, [DW_EH_PE_sleb128] = 2,
					 [DW_EH_PE_sdata2] = 2, [DW_EH_PE_sdata4] = 4, [DW_EH_PE_sdata8] = 8 };
	return size[format];
}

/* What the field below holds in each format, before any base. */
static uint64_t format_value(unsigned format)
{
	switch (format) {
	case DW_EH_PE_uleb128: return 0x3ff;			/* 0xff 0x07 */
	case DW_EH_PE_sleb128: return (uint64_t)-1;		/* 0xff 0x7f */
	case DW_EH_PE_udata2: return 0xffff;
	case DW_EH_PE_sdata2: return (uint64_t)-1;
	case DW_EH_PE_udata4: return 0x7fffffff;
	case DW_EH_PE_sdata4: return 0x7fffffff;
	default: return 0x7fffffff7fffffffull;
	}
}

/* Every one of the 256 encodings, over a field at address 0x1004 (offset 4 of a reader at 0x1000). */
static void check_encoding(unsigned enc)
{
	static const uint8_t lebs[] = { 0xff, 0x07 }, slebs[] = { 0xff, 0x7f };
	static const uint8_t fixed[] = { 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f };
	uint8_t buf[4 + 8] = { 0 };
	unsigned format = enc & 0x0f, app = enc & 0x70;
	size_t size = format_size(format);
	memcpy(buf + 4, format == DW_EH_PE_uleb128 ? lebs : format == DW_EH_PE_sleb128 ? slebs : fixed,
	       format == DW_EH_PE_uleb128 || format == DW_EH_PE_sleb128 ? 2 : 8);
	struct byte_reader r;
	uint64_t v = 0;
	byte_reader_init(&r, buf, sizeof(buf));
	r.va = 0x1000;
	assert_true(byte_reader_skip(&r, 4));
	struct byte_reader value = r;
	assert_int_equal(byte_reader_eh_value(&value, (uint8_t)enc, &v), size != 0);
	if (size) {
		assert_int_equal(v, format_value(format));
		assert_int_equal(byte_reader_offset(&value), 4 + size);
	}
	bool ok = size && enc != DW_EH_PE_omit && !(enc & DW_EH_PE_indirect) &&
		  (app == DW_EH_PE_absptr || app == DW_EH_PE_pcrel || app == DW_EH_PE_datarel);
	uint64_t base = app == DW_EH_PE_pcrel ? 0x1004 : app == DW_EH_PE_datarel ? 0x2000 : 0;
	if (!ok) {
		ASSERT_REFUSED(byte_reader_eh_pointer(&r, (uint8_t)enc, 0x2000, &v), &r, 4);
		return;
	}
	assert_true(byte_reader_eh_pointer(&r, (uint8_t)enc, 0x2000, &v));
	assert_int_equal(v, base + format_value(format));
	assert_int_equal(byte_reader_offset(&r), 4 + size);
}

static void test_eh_encodings(void **state)
{
	(void)state;
	for (unsigned enc = 0; enc < 256; enc++)
		check_encoding(enc);
}

/* The encodings found in real files: .eh_frame_hdr's pointers and FDEs' pc-relative starts. */
static void test_eh_bases(void **state)
{
	(void)state;
	/* An FDE's initial location, pcrel|sdata4 -0x100, then its range, udata4 0x40. */
	READER(r, 0, 0, 0, 0, 0x00, 0xff, 0xff, 0xff, 0x40, 0x00, 0x00, 0x00);
	uint64_t start, len;
	r.va = 0x401000;
	assert_true(byte_reader_skip(&r, 4));
	assert_true(byte_reader_eh_pointer(&r, DW_EH_PE_pcrel | DW_EH_PE_sdata4, 0, &start));
	assert_int_equal(start, 0x401004 - 0x100);
	assert_true(byte_reader_eh_value(&r, DW_EH_PE_pcrel | DW_EH_PE_udata4, &len));
	assert_int_equal(len, 0x40);
	/* .eh_frame_hdr's table entries: datarel|sdata4 from the header's address. */
	READER(h, 0x10, 0x00, 0x00, 0x00, 0xf0, 0xff, 0xff, 0xff);
	uint64_t a, b;
	h.va = 0x500000;
	assert_true(byte_reader_eh_pointer(&h, DW_EH_PE_datarel | DW_EH_PE_sdata4, 0x500000, &a));
	assert_true(byte_reader_eh_pointer(&h, DW_EH_PE_datarel | DW_EH_PE_sdata4, 0x500000, &b));
	assert_int_equal(a, 0x500010);
	assert_int_equal(b, 0x500000 - 0x10);
	/* A truncated field consumes nothing, whatever the encoding. */
	READER(cut, 0x01, 0x02, 0x03);
	ASSERT_REFUSED(byte_reader_eh_pointer(&cut, DW_EH_PE_pcrel | DW_EH_PE_sdata4, 0, &a), &cut, 0);
	ASSERT_REFUSED(byte_reader_eh_pointer(&cut, DW_EH_PE_udata8, 0, &a), &cut, 0);
}

struct aug_case {
	const char *aug;
	uint8_t data[16];
	size_t size;
	bool ok;
	uint8_t enc;
};

static void test_cie_augmentation(void **state)
{
	(void)state;
	static const struct aug_case cases[] = {
		{ "", { 0 }, 0, true, DW_EH_PE_absptr },
		{ NULL, { 0 }, 0, true, DW_EH_PE_absptr },
		{ "zR", { 0x1b }, 1, true, 0x1b },
		{ "z", { 0 }, 0, true, DW_EH_PE_absptr },
		/* gcc's C++ CIE: personality pcrel|sdata4|indirect, LSDA encoding, FDE encoding. */
		{ "zPLR", { 0x9b, 1, 2, 3, 4, 0x1b, 0x1b }, 7, true, 0x1b },
		/* A personality in uleb128: its size is the encoding's. */
		{ "zPR", { DW_EH_PE_uleb128, 0x80, 0x01, 0x03 }, 4, true, 0x03 },
		{ "zPR", { DW_EH_PE_uleb128, 0x80, 0x80 }, 3, false, 0 },
		{ "zPR", { DW_EH_PE_omit, 0x1b }, 2, false, 0 },
		{ "zPR", { 0x07, 0x1b }, 2, false, 0 },	/* no such format */
		{ "zPR", { 0x9b, 1, 2 }, 3, false, 0 },	/* personality cut short */
		{ "zR", { 0 }, 0, false, 0 },
		{ "zSR", { 0x1b }, 1, true, 0x1b },	/* signal frame: no data */
		{ "zBR", { 0x1b }, 1, true, 0x1b },
		{ "zRX", { 0x1b }, 1, true, 0x1b },	/* unknown after 'R': 'z' sizes the data */
		{ "zXR", { 0x1b }, 1, false, 0 },
		{ "zX", { 0 }, 0, true, DW_EH_PE_absptr },
		{ "eh", { 0 }, 0, false, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t enc = 0xee;
		const struct aug_case *c = &cases[i];
		assert_int_equal(byte_reader_cie_fde_encoding(c->aug, c->size ? c->data : NULL, c->size, &enc), c->ok);
		if (c->ok)
			assert_int_equal(enc, c->enc);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_width),
		cmocka_unit_test(test_positioned_reads),
		cmocka_unit_test(test_cursor_moves),
		cmocka_unit_test(test_uleb128),
		cmocka_unit_test(test_sleb128),
		cmocka_unit_test(test_uleb128_32),
		cmocka_unit_test(test_eh_encodings),
		cmocka_unit_test(test_eh_bases),
		cmocka_unit_test(test_cie_augmentation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
