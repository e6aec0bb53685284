/*
 * perfmap.c — perf map lines into a JIT symbol table. See perfmap.h for the format and the contract.
 */
#include "symbols/perfmap.h"

#include <errno.h>
#include <string.h>

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A hexadecimal number (optional 0x, at most 16 digits) at s[*i..len); *i moves past it. */
static int parse_hex(const char *s, size_t len, size_t *i, uint64_t *v)
{
	size_t at = *i, digits = 0;
	if (len - at >= 2 && s[at] == '0' && (s[at + 1] == 'x' || s[at + 1] == 'X'))
		at += 2;
	*v = 0;
	for (; at < len && hex_digit(s[at]) >= 0; at++, digits++) {
		if (digits == 16)
			return -EINVAL;
		*v = *v << 4 | (uint64_t)hex_digit(s[at]);
	}
	if (!digits)
		return -EINVAL;
	*i = at;
	return 0;
}

/* Skip at least one blank. */
static int skip_blanks(const char *s, size_t len, size_t *i)
{
	size_t at = *i;
	while (at < len && (s[at] == ' ' || s[at] == '\t'))
		at++;
	if (at == *i)
		return -EINVAL;
	*i = at;
	return 0;
}

int perfmap_parse_line(const char *line, size_t len, uint64_t *start, uint64_t *size, const char **name,
		       size_t *name_len)
{
	size_t i = 0;
	if (len && line[len - 1] == '\r')
		len--;
	if (parse_hex(line, len, &i, start) < 0 || skip_blanks(line, len, &i) < 0 ||
	    parse_hex(line, len, &i, size) < 0 || skip_blanks(line, len, &i) < 0 || i == len)
		return -EINVAL;
	if (*size == 0 || *start + *size < *start)
		return -EINVAL;
	*name = line + i;
	*name_len = len - i;
	return 0;
}

static void parse_one(struct perfmap_parser *p, struct jitsyms *t, const char *line, size_t len)
{
	uint64_t start, size;
	const char *name;
	size_t name_len;
	p->stats.lines++;
	if (perfmap_parse_line(line, len, &start, &size, &name, &name_len) < 0)
		p->stats.malformed++;
	else if (jitsyms_add(t, start, size, name, name_len, NULL, 0) < 0)
		p->stats.refused++;
	else
		p->stats.symbols++;
}

size_t perfmap_parse(struct perfmap_parser *p, struct jitsyms *t, const char *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		const char *nl = memchr(buf + done, '\n', len - done);
		size_t line_len = nl ? (size_t)(nl - (buf + done)) : len - done;
		if (p->skipping) {
			/* The rest of a line too long to keep. */
			done += nl ? line_len + 1 : line_len;
			p->skipping = !nl;
			continue;
		}
		if (line_len > PERFMAP_LINE_MAX) {
			p->stats.too_long++;
			p->stats.lines += nl != NULL;
			done += nl ? line_len + 1 : line_len;
			p->skipping = !nl;
			continue;
		}
		if (!nl)
			break;	/* the runtime has not finished writing this line yet */
		parse_one(p, t, buf + done, line_len);
		done += line_len + 1;
	}
	return done;
}
