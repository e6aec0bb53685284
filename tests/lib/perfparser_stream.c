/* perfparser_stream.c — see perfparser_stream.h. */
#include "tests/lib/perfparser_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/read_file.h"
#include "unwind/byte_reader.h"

#define MAGIC "QPERFSTREAM"
#define MAX_FILE (1UL << 30)
#define MAX_ID (1U << 24)	/* ids are dense from 0: a larger one is a corrupt stream, not a big profile */
#define MAX_INLINE_STEPS 64

enum { EV_LOCATION = 3, EV_SYMBOL = 4, EV_STRING = 5, EV_SAMPLE = 13 };

/* A table indexed by id, of int32 values (-1: none). */
struct id_table {
	int32_t *v;
	uint32_t len;
};

struct perfparser_stream {
	uint8_t *data;		/* the file's bytes */
	char **strings;		/* by string id, owned (NULL: undefined) */
	uint32_t nstrings;
	struct id_table parent;	/* location id -> parent location id */
	struct id_table symbol;	/* location id -> symbol name's string id */
	uint32_t *frames;	/* every sample's frames, one after another */
	size_t nframes, cap_frames;
	size_t *first;		/* sample i's frames: [first[i], first[i + 1]) */
	size_t nsamples, cap_samples;
};

/* Per-read state: the cursor over the event and where errors are told. */
struct read_ctx {
	struct perfparser_stream *s;
	struct byte_reader r;
	size_t event_off;	/* the event's offset in the file */
	char *err;
	size_t errlen;
};

static int fail(struct read_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct read_ctx *c, const char *fmt, ...)
{
	char what[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "perfparser stream: %s (event at offset %zu)", what, c->event_off);
	return -EINVAL;
}

/* Grow *p (of *cap elements of size) to hold need; new bytes zeroed. */
static int grow(void *p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *q = realloc(*(void **)p, n * size);
	if (!q)
		return -ENOMEM;
	memset((char *)q + *cap * size, 0, (n - *cap) * size);
	*(void **)p = q;
	*cap = n;
	return 0;
}

static int id_set(struct id_table *t, uint32_t id, int32_t value)
{
	if (id >= t->len) {
		size_t cap = t->len, old = t->len;
		int rc = grow(&t->v, &cap, (size_t)id + 1, sizeof(*t->v));
		if (rc)
			return rc;
		for (size_t i = old; i < cap; i++)
			t->v[i] = -1;
		t->len = (uint32_t)cap;
	}
	t->v[id] = value;
	return 0;
}

static int32_t id_get(const struct id_table *t, int64_t id)
{
	return id >= 0 && id < t->len ? t->v[id] : -1;
}

static bool read_i32(struct read_ctx *c, int32_t *v)
{
	int64_t x;
	if (!byte_reader_sint(&c->r, 4, &x))
		return false;
	*v = (int32_t)x;
	return true;
}

/* An id of a definition: 0 <= id < MAX_ID. */
static int read_id(struct read_ctx *c, const char *what, uint32_t *id)
{
	int32_t v;
	if (!read_i32(c, &v))
		return fail(c, "%s definition cut short", what);
	if (v < 0 || (uint32_t)v >= MAX_ID)
		return fail(c, "%s id %d out of range", what, v);
	*id = (uint32_t)v;
	return 0;
}

static int read_location(struct read_ctx *c)
{
	uint32_t id;
	int32_t parent;
	int rc = read_id(c, "location", &id);
	/* address (8), file, pid, line, column (4 each), then the parent */
	if (rc)
		return rc;
	if (!byte_reader_skip(&c->r, 8 + 4 * 4) || !read_i32(c, &parent))
		return fail(c, "location definition cut short");
	return id_set(&c->s->parent, id, parent);
}

static int read_symbol(struct read_ctx *c)
{
	uint32_t id;
	int32_t name;
	int rc = read_id(c, "symbol", &id);
	if (rc)
		return rc;
	if (!read_i32(c, &name))
		return fail(c, "symbol definition cut short");
	return id_set(&c->s->symbol, id, name);
}

static int read_string(struct read_ctx *c)
{
	struct perfparser_stream *s = c->s;
	uint32_t id, len;
	const uint8_t *bytes;
	int rc = read_id(c, "string", &id);
	if (rc)
		return rc;
	if (!byte_reader_u32(&c->r, &len))
		return fail(c, "string definition cut short");
	if (len == UINT32_MAX)	/* a null QByteArray */
		return 0;
	if (!byte_reader_bytes(&c->r, len, &bytes))
		return fail(c, "string %u of %u bytes past the event's end", id, len);
	size_t cap = s->nstrings;
	if ((rc = grow(&s->strings, &cap, (size_t)id + 1, sizeof(*s->strings))))
		return rc;
	s->nstrings = (uint32_t)cap;
	free(s->strings[id]);
	if (!(s->strings[id] = strndup((const char *)bytes, len)))
		return -ENOMEM;
	return 0;
}

static int read_sample(struct read_ctx *c)
{
	struct perfparser_stream *s = c->s;
	uint32_t n, nvalues;
	int rc;
	/* pid, tid (4 each), time (8), cpu (4), then the frames */
	if (!byte_reader_skip(&c->r, 4 + 4 + 8 + 4) || !byte_reader_u32(&c->r, &n))
		return fail(c, "sample cut short");
	if (n > byte_reader_left(&c->r) / 4)
		return fail(c, "sample of %u frames past the event's end", n);
	if ((rc = grow(&s->frames, &s->cap_frames, s->nframes + n, sizeof(*s->frames))) ||
	    (rc = grow(&s->first, &s->cap_samples, s->nsamples + 2, sizeof(*s->first))))
		return rc;
	for (uint32_t i = 0; i < n; i++)
		byte_reader_u32(&c->r, &s->frames[s->nframes + i]);
	/* the guessed frames' count, then (attribute id, value) pairs */
	if (!byte_reader_skip(&c->r, 1) || !byte_reader_u32(&c->r, &nvalues) ||
	    nvalues > byte_reader_left(&c->r) / 12 || !byte_reader_skip(&c->r, (size_t)nvalues * 12))
		return fail(c, "sample's values cut short");
	if (byte_reader_left(&c->r))
		return fail(c, "sample with %zu bytes more than perfparser 4.12 writes: another stream layout",
			    byte_reader_left(&c->r));
	s->first[s->nsamples] = s->nframes;
	s->nframes += n;
	s->first[++s->nsamples] = s->nframes;
	return 0;
}

static int read_event(struct read_ctx *c)
{
	uint8_t type;
	if (!byte_reader_u8(&c->r, &type))
		return fail(c, "an empty event");
	switch (type) {
	case EV_LOCATION:
		return read_location(c);
	case EV_SYMBOL:
		return read_symbol(c);
	case EV_STRING:
		return read_string(c);
	case EV_SAMPLE:
		return read_sample(c);
	default:
		return 0;	/* not needed by the comparisons */
	}
}

static int parse(struct read_ctx *c, size_t size)
{
	struct byte_reader file;
	uint32_t len;
	const uint8_t *ev;
	byte_reader_init(&file, c->s->data, size);
	if (size < sizeof(MAGIC) + 4 || memcmp(c->s->data, MAGIC, sizeof(MAGIC)) != 0)
		return fail(c, "no QPERFSTREAM magic: not perfparser's output");
	byte_reader_skip(&file, sizeof(MAGIC) + 4);
	while (byte_reader_left(&file)) {
		c->event_off = byte_reader_offset(&file);
		if (!byte_reader_u32(&file, &len) || !byte_reader_bytes(&file, len, &ev))
			return fail(c, "the stream ends inside an event");
		byte_reader_init(&c->r, ev, len);
		c->r.big_endian = true;
		int rc = read_event(c);
		if (rc)
			return rc;
	}
	return 0;
}

int perfparser_stream_read(const char *path, struct perfparser_stream **out, char *err, size_t errlen)
{
	struct perfparser_stream *s = calloc(1, sizeof(*s));
	struct read_ctx c = { .s = s, .err = err, .errlen = errlen };
	size_t size = 0;
	int rc, fd = open(path, O_RDONLY | O_CLOEXEC);
	*out = NULL;
	if (!s || fd < 0) {
		rc = s ? -errno : -ENOMEM;
		snprintf(err, errlen, "perfparser stream: cannot open %s: %s", path, strerror(-rc));
		free(s);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	rc = read_fd_all(fd, MAX_FILE, &s->data, &size);
	close(fd);
	if (rc) {
		snprintf(err, errlen, "perfparser stream: cannot read %s: %s", path, strerror(-rc));
		perfparser_stream_free(s);
		return rc;
	}
	if ((rc = parse(&c, size)) == -ENOMEM)
		snprintf(err, errlen, "perfparser stream: out of memory reading %s", path);
	if (rc) {
		perfparser_stream_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void perfparser_stream_free(struct perfparser_stream *s)
{
	if (!s)
		return;
	free(s->data);
	for (uint32_t i = 0; i < s->nstrings; i++)
		free(s->strings[i]);
	free(s->strings);
	free(s->parent.v);
	free(s->symbol.v);
	free(s->frames);
	free(s->first);
	free(s);
}

size_t perfparser_stream_samples(const struct perfparser_stream *s)
{
	return s->nsamples;
}

static const char *string_of(const struct perfparser_stream *s, int32_t id)
{
	return id >= 0 && (uint32_t)id < s->nstrings && s->strings[id] ? s->strings[id] : "??";
}

size_t perfparser_stream_functions(const struct perfparser_stream *s, size_t i, const char **names, size_t max)
{
	size_t n = 0;
	if (i >= s->nsamples)
		return 0;
	for (size_t f = s->first[i]; f < s->first[i + 1]; f++) {
		/* the frame's location has no symbol; its parent (the function's location) has one; an inlined
		 * function's location leads, through its call site, to its caller's */
		int64_t loc = s->frames[f];
		size_t named = 0;
		for (int step = 0; loc >= 0 && step < MAX_INLINE_STEPS; step++, loc = id_get(&s->parent, loc)) {
			int32_t name = id_get(&s->symbol, loc);
			if (name < 0)
				continue;
			if (n < max)
				names[n] = string_of(s, name);
			n++, named++;
		}
		if (!named) {
			if (n < max)
				names[n] = "??";
			n++;
		}
	}
	return n;
}
