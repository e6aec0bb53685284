/*
 * escape.c — escaping of process-supplied strings. See escape.h for the contract.
 */
#include "src/base/escape.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s[0..left), with its code point; 0 if there is none. */
static size_t utf8_sequence(const uint8_t *s, size_t left, uint32_t *cp)
{
	uint8_t b = s[0];
	size_t n = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
	if (n == 0 || n > left)
		return 0;
	uint32_t c = b & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* overlong 3- and 4-byte forms, UTF-16 surrogates, past U+10FFFF (2-byte overlongs: the lead check) */
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/* Valid UTF-8 that steers text instead of showing it: C1 controls, line/paragraph separators, bidi controls. */
static int is_format_control(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

/* The output for the unit (a byte, or a whole UTF-8 character) at s[0..left) into unit[]; returns its length,
 * and how many input bytes it consumed in *used. */
static size_t escape_unit(const uint8_t *s, size_t left, unsigned flags, char unit[16], size_t *used)
{
	uint8_t b = s[0];
	uint32_t cp;
	size_t n;
	*used = 1;
	if (b == '\\')
		return flags & ESCAPE_KEEP_BACKSLASH ? (unit[0] = '\\', 1) : (memcpy(unit, "\\\\", 2), 2);
	if (b >= 0x20 && b < 0x7f)
		return unit[0] = (char)b, 1;
	if (b == '\n' || b == '\r' || b == '\t') {
		unit[0] = '\\';
		unit[1] = b == '\n' ? 'n' : b == '\r' ? 'r' : 't';
		return 2;
	}
	if (b >= 0x80 && (n = utf8_sequence(s, left, &cp)) > 0) {
		*used = n;
		if (!is_format_control(cp))
			return memcpy(unit, s, n), n;
		for (size_t i = 0; i < n; i++)
			snprintf(unit + 4 * i, 5, "\\x%02x", s[i]);
		return 4 * n;
	}
	snprintf(unit, 5, "\\x%02x", b);
	return 4;
}

size_t escape_bytes(char *out, size_t size, const void *s, size_t len, unsigned flags)
{
	static const char cut[] = "...";
	const uint8_t *in = s;
	size_t o = 0, mark = 0, i = 0;
	if (size == 0)
		return 0;
	while (i < len) {
		char unit[16];
		size_t used, n = escape_unit(in + i, len - i, flags, unit, &used);
		if (o + n > size - 1) {
			/* cut short: back to the last unit that leaves room for the marker */
			if (size > sizeof(cut)) {
				memcpy(out + mark, cut, sizeof(cut) - 1);
				o = mark + sizeof(cut) - 1;
			}
			break;
		}
		memcpy(out + o, unit, n);
		o += n;
		i += used;
		if (o + sizeof(cut) - 1 <= size - 1)
			mark = o;
	}
	out[o] = '\0';
	return o;
}

const char *escape_str(char *buf, size_t size, const char *s)
{
	if (!s)
		s = "(null)";
	escape_bytes(buf, size, s, strlen(s), 0);
	return buf;
}
