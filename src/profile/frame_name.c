/*
 * frame_name.c — display names of frames. See frame_name.h for the conventions.
 */
#include "src/profile/frame_name.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/escape.h"

/* Room for n more bytes and the NUL. */
static int frame_buf_reserve(struct frame_buf *b, size_t n)
{
	if (b->len + n + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->len + n + 1)
		cap *= 2;
	char *ns = realloc(b->s, cap);
	if (!ns)
		return -ENOMEM;
	b->s = ns;
	b->cap = cap;
	return 0;
}

int frame_buf_append(struct frame_buf *b, const char *s, size_t n)
{
	int err = frame_buf_reserve(b, n);
	if (err < 0)
		return err;
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

void frame_buf_free(struct frame_buf *b)
{
	free(b->s);
	*b = (struct frame_buf){ 0 };
}

const char *frame_basename(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* s escaped (escape.h) at the end of b: room for the worst case is made first, so nothing is cut. */
static int append_escaped(struct frame_buf *b, const char *s, size_t n)
{
	int err = frame_buf_reserve(b, ESCAPE_SIZE(n));
	if (err == 0)
		b->len += escape_bytes(b->s + b->len, b->cap - b->len, s, n, 0);
	return err;
}

/* ';' separates frames and '\n' ends the line in collapsed stacks. */
int frame_text_append(struct frame_buf *b, const char *s, unsigned flags)
{
	size_t start = b->len;
	int err = flags & FRAME_NAME_ESCAPED ? append_escaped(b, s, strlen(s)) : frame_buf_append(b, s, strlen(s));
	if (err < 0 || !(flags & FRAME_NAME_COLLAPSED))
		return err;
	size_t out = start;
	for (size_t i = start; i < b->len; i++) {
		char c = b->s[i];
		if (c == '\n' || c == '\r')
			continue;
		b->s[out++] = c == ';' ? ':' : c;
	}
	b->len = out;
	b->s[out] = '\0';
	return 0;
}

static int append_hex_offset(struct frame_buf *b, uint64_t address)
{
	char hex[24];
	int n = snprintf(hex, sizeof(hex), "+0x%" PRIx64, address);
	return frame_buf_append(b, hex, (size_t)n);
}

static const char *error_name(const struct profile_location *l)
{
	return l->address == 2 ? "[unknown]" : "[truncated]";	/* the trace handler's error codes */
}

/* The name of a frame without a function name. */
static int append_unsymbolized(const struct profile *p, const struct profile_location *l, unsigned flags,
			       struct frame_buf *b)
{
	int err;
	if (l->frame_kind & PROFILE_FRAME_ERROR)
		return frame_text_append(b, error_name(l), flags);
	if (l->frame_kind == PROFILE_FRAME_KERNEL) {
		if ((err = frame_buf_append(b, "[kernel]", 8)) < 0)
			return err;
		return append_hex_offset(b, l->address);
	}
	if (!l->mapping || l->mapping >= p->mappings.count)
		return frame_text_append(b, "[unknown]", flags);
	const char *file = frame_basename(profile_string(p, p->mappings.items[l->mapping].filename));
	if ((err = frame_text_append(b, *file ? file : "[unknown]", flags)) < 0)
		return err;
	return append_hex_offset(b, l->address);
}

static const char *line_function_name(const struct profile *p, const struct profile_location *l, uint32_t line)
{
	if (line >= l->nlines || l->lines[line].function >= p->functions.count)
		return "";
	return profile_string(p, p->functions.items[l->lines[line].function].name);
}

int frame_name_append(const struct profile *p, const struct profile_location *l, uint32_t line, unsigned flags,
		      struct frame_buf *b)
{
	const char *name = line_function_name(p, l, line);
	int err = *name ? frame_text_append(b, name, flags) : append_unsymbolized(p, l, flags, b);
	if (err < 0 || !(flags & FRAME_NAME_SUFFIX) || (l->frame_kind & PROFILE_FRAME_ERROR))
		return err;
	if (l->frame_kind == PROFILE_FRAME_KERNEL)
		return frame_buf_append(b, "_[k]", 4);
	if (l->frame_kind == PROFILE_FRAME_JIT)
		return frame_buf_append(b, "_[j]", 4);
	if (l->nlines > 1 && line < l->nlines - 1)
		return frame_buf_append(b, "_[i]", 4);
	return 0;
}

int frame_library_append(const struct profile *p, const struct profile_location *l, unsigned flags,
			 struct frame_buf *b)
{
	int err;
	if (l->frame_kind & PROFILE_FRAME_ERROR)
		return frame_buf_append(b, "", 0);
	if (l->frame_kind == PROFILE_FRAME_KERNEL) {
		/* Kernel functions carry their module as file name; vmlinux has none. */
		uint32_t f = l->nlines ? l->lines[l->nlines - 1].function : 0;
		const char *module = f < p->functions.count ? profile_string(p, p->functions.items[f].filename) : "";
		if (!*module)
			return frame_buf_append(b, "[kernel]", 8);
		if (module[0] == '[')
			return frame_text_append(b, module, flags);
		if ((err = frame_buf_append(b, "[", 1)) < 0 || (err = frame_text_append(b, module, flags)) < 0)
			return err;
		return frame_buf_append(b, "]", 1);
	}
	if (!l->mapping || l->mapping >= p->mappings.count)
		return frame_buf_append(b, "", 0);
	const char *file = frame_basename(profile_string(p, p->mappings.items[l->mapping].filename));
	return frame_text_append(b, file, flags);
}
