/*
 * jitsyms.c — a process's JIT code ranges and their names. See jitsyms.h for the contract.
 *
 * Ranges are kept in the order they were added (a range's index is its age). A commit flattens them into
 * sorted segments, each owned by the newest range covering it, by a sweep over the ranges' ends with a heap
 * of the ranges open at each point (newest on top; a range that has ended leaves the heap when it reaches the
 * top). Lookups binary-search the segments.
 */
#include "symbols/jitsyms.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/bsearch.h"
#include "src/base/hindex.h"

struct js_range {
	uint64_t start, end;
	uint32_t name;
	uint32_t first_line, nlines;
};

/* From start up to the next segment's start, the code belongs to range `range` (JITSYMS_NO_ID: to none). */
struct js_segment {
	uint64_t start;
	uint32_t range;
};

struct jitsyms {
	struct jitsyms_limits lim;
	struct js_range *ranges;
	size_t nranges, cap_ranges;
	struct jitsym_line *lines;
	size_t nlines, cap_lines;
	char *bytes;			/* the strings, each NUL-terminated */
	size_t nbytes, cap_bytes;
	uint32_t *str_off;		/* string id -> offset in bytes */
	uint32_t nstrings, cap_strings;
	struct hindex string_ids;	/* by content: string id */
	struct js_segment *segs;	/* the committed view */
	size_t nsegs, committed;	/* committed: ranges the view includes */
	struct jitsyms_stats stats;
};

int jitsyms_new(const struct jitsyms_limits *limits, struct jitsyms **out)
{
	struct jitsyms *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	if (limits)
		t->lim = *limits;
	if (!t->lim.max_ranges || t->lim.max_ranges > UINT32_MAX / 2)
		t->lim.max_ranges = JITSYMS_DEFAULT_RANGES;
	if (!t->lim.max_lines || t->lim.max_lines > UINT32_MAX / 2)
		t->lim.max_lines = JITSYMS_DEFAULT_LINES;
	if (!t->lim.max_bytes || t->lim.max_bytes > UINT32_MAX / 2)
		t->lim.max_bytes = JITSYMS_DEFAULT_BYTES;
	*out = t;
	return 0;
}

void jitsyms_free(struct jitsyms *t)
{
	if (!t)
		return;
	free(t->ranges);
	free(t->lines);
	free(t->bytes);
	free(t->str_off);
	hindex_free(&t->string_ids);
	free(t->segs);
	free(t);
}

/* Make room for n elements of size in *items (capacity *cap). */
static int grow(void **items, size_t *cap, size_t n, size_t size)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap : 64;
	while (c < n)
		c *= 2;
	void *p = realloc(*items, c * size);
	if (!p)
		return -ENOMEM;
	*items = p;
	*cap = c;
	return 0;
}

/* ---- strings -------------------------------------------------------------------------------------------- */

/* A string being interned: len bytes, not NUL-terminated. */
struct js_text {
	const char *s;
	size_t len;
};

static bool string_is(const void *ctx, uint64_t id, const void *key)
{
	const struct jitsyms *t = ctx;
	const struct js_text *k = key;
	const char *have = t->bytes + t->str_off[id];
	return strncmp(have, k->s, k->len) == 0 && have[k->len] == '\0';
}

/* Append the string (already cleaned) as a new id, indexed under hash. */
static uint32_t add_string(struct jitsyms *t, const char *s, size_t len, uint64_t hash)
{
	size_t cap_strings = t->cap_strings;
	if (grow((void **)&t->bytes, &t->cap_bytes, t->nbytes + len + 1, 1) < 0 ||
	    grow((void **)&t->str_off, &cap_strings, (size_t)t->nstrings + 1, sizeof(*t->str_off)) < 0)
		return JITSYMS_NO_ID;
	t->cap_strings = (uint32_t)cap_strings;
	if (hindex_insert(&t->string_ids, hash, t->nstrings) < 0)
		return JITSYMS_NO_ID;
	memcpy(t->bytes + t->nbytes, s, len);
	t->bytes[t->nbytes + len] = '\0';
	t->str_off[t->nstrings] = (uint32_t)t->nbytes;
	t->nbytes += len + 1;
	t->stats.strings++;
	t->stats.string_bytes += len + 1;
	return t->nstrings++;
}

uint32_t jitsyms_intern(struct jitsyms *t, const char *s, size_t len)
{
	char clean[JITSYMS_NAME_MAX];
	uint64_t id;
	if (len == 0 || len > JITSYMS_NAME_MAX)
		return JITSYMS_NO_ID;
	/* Names come from the profiled process: no control characters reach a report or a log. */
	for (size_t i = 0; i < len; i++)
		clean[i] = (uint8_t)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	uint64_t hash = hash_bytes(HASH_SEED, clean, len);
	if (hindex_find(&t->string_ids, hash, string_is, t, &(struct js_text){ clean, len }, &id))
		return (uint32_t)id;
	if (t->nbytes + len + 1 > t->lim.max_bytes)
		return JITSYMS_NO_ID;
	return add_string(t, clean, len, hash);
}

const char *jitsyms_string(const struct jitsyms *t, uint32_t id)
{
	return id < t->nstrings ? t->bytes + t->str_off[id] : "";
}

uint32_t jitsyms_strings(const struct jitsyms *t)
{
	return t->nstrings;
}

/* ---- ranges --------------------------------------------------------------------------------------------- */

static int cmp_line(const void *a, const void *b)
{
	const struct jitsym_line *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Copy the usable rows of lines[] into the table, sorted; *first and *n say where. */
static int add_lines(struct jitsyms *t, uint64_t size, const struct jitsym_line *lines, size_t nlines,
		     uint32_t *first, uint32_t *n)
{
	*first = (uint32_t)t->nlines;
	*n = 0;
	if (!nlines)
		return 0;
	if (nlines > t->lim.max_lines - t->nlines)
		return -E2BIG;
	if (grow((void **)&t->lines, &t->cap_lines, t->nlines + nlines, sizeof(*t->lines)) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < nlines; i++) {
		if (lines[i].offset < size && lines[i].file < t->nstrings)
			t->lines[t->nlines + (*n)++] = lines[i];
	}
	qsort(t->lines + t->nlines, *n, sizeof(*t->lines), cmp_line);
	t->nlines += *n;
	t->stats.lines += *n;
	return 0;
}

static int64_t add_range(struct jitsyms *t, const struct js_range *r)
{
	if (t->nranges >= t->lim.max_ranges)
		return -E2BIG;
	if (grow((void **)&t->ranges, &t->cap_ranges, t->nranges + 1, sizeof(*t->ranges)) < 0)
		return -ENOMEM;
	t->ranges[t->nranges] = *r;
	t->stats.ranges++;
	return (int64_t)t->nranges++;
}

int64_t jitsyms_add(struct jitsyms *t, uint64_t start, uint64_t size, const char *name, size_t name_len,
		    const struct jitsym_line *lines, size_t nlines)
{
	struct js_range r = { .start = start, .end = start + size };
	int64_t rc = -EINVAL;
	if (!size || r.end <= start || !name_len)
		goto refused;
	rc = -E2BIG;
	if ((r.name = jitsyms_intern(t, name, name_len)) == JITSYMS_NO_ID)
		goto refused;
	/* Without its lines the range is still worth having: it names the code. */
	if (add_lines(t, size, lines, nlines, &r.first_line, &r.nlines) < 0) {
		r.first_line = r.nlines = 0;
		t->stats.dropped++;
	}
	if ((rc = add_range(t, &r)) >= 0)
		return rc;
refused:
	t->stats.dropped++;
	return rc;
}

int64_t jitsyms_add_moved(struct jitsyms *t, int64_t index, uint64_t new_start)
{
	if (index < 0 || (size_t)index >= t->nranges)
		return -EINVAL;
	struct js_range r = t->ranges[index];
	uint64_t size = r.end - r.start;
	r.start = new_start;
	r.end = new_start + size;
	int64_t rc = r.end > r.start ? add_range(t, &r) : -EINVAL;
	if (rc < 0)
		t->stats.dropped++;
	return rc;
}

/* ---- commit: flatten to segments, the newest range winning --------------------------------------------- */

struct js_event {
	uint64_t addr;
	uint32_t range;
	uint32_t is_start;
};

static int cmp_event(const void *a, const void *b)
{
	const struct js_event *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Max-heap of range indices: the newest range on top. */
static void heap_push(uint32_t *h, size_t *n, uint32_t v)
{
	size_t i = (*n)++;
	for (; i > 0 && h[(i - 1) / 2] < v; i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = v;
}

static void heap_pop(uint32_t *h, size_t *n)
{
	uint32_t v = h[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1] > h[c])
			c++;
		if (h[c] <= v)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = v;
}

/* Sweep the sorted events into segs (room for nev): returns the segment count. */
static size_t sweep(const struct jitsyms *t, const struct js_event *ev, size_t nev, uint32_t *heap,
		    struct js_segment *segs)
{
	size_t nheap = 0, nsegs = 0;
	for (size_t i = 0; i < nev;) {
		uint64_t x = ev[i].addr;
		for (; i < nev && ev[i].addr == x; i++)
			if (ev[i].is_start)
				heap_push(heap, &nheap, ev[i].range);
		while (nheap && t->ranges[heap[0]].end <= x)
			heap_pop(heap, &nheap);
		uint32_t owner = nheap ? heap[0] : JITSYMS_NO_ID;
		if (nsegs ? segs[nsegs - 1].range != owner : owner != JITSYMS_NO_ID)
			segs[nsegs++] = (struct js_segment){ .start = x, .range = owner };
	}
	return nsegs;
}

int jitsyms_commit(struct jitsyms *t)
{
	if (t->committed == t->nranges)
		return 0;
	size_t nev = 2 * t->nranges;
	struct js_event *ev = malloc(nev * sizeof(*ev));
	uint32_t *heap = malloc(t->nranges * sizeof(*heap));
	struct js_segment *segs = malloc(nev * sizeof(*segs));
	if (!ev || !heap || !segs) {
		free(ev);
		free(heap);
		free(segs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->nranges; i++) {
		ev[2 * i] = (struct js_event){ t->ranges[i].start, (uint32_t)i, 1 };
		ev[2 * i + 1] = (struct js_event){ t->ranges[i].end, (uint32_t)i, 0 };
	}
	qsort(ev, nev, sizeof(*ev), cmp_event);
	size_t nsegs = sweep(t, ev, nev, heap, segs);
	free(ev);
	free(heap);
	free(t->segs);
	t->segs = segs;
	t->nsegs = nsegs;
	t->committed = t->nranges;
	return 0;
}

bool jitsyms_dirty(const struct jitsyms *t)
{
	return t->committed != t->nranges;
}

size_t jitsyms_count(const struct jitsyms *t)
{
	return t->committed;
}

static bool line_after(const void *rows, size_t i, const void *off)
{
	return ((const struct jitsym_line *)rows)[i].offset > *(const uint64_t *)off;
}

/* The line row of r in effect at offset off (the last one at or before it), or NULL. */
static const struct jitsym_line *line_at(const struct jitsyms *t, const struct js_range *r, uint64_t off)
{
	const struct jitsym_line *rows = t->lines + r->first_line;
	size_t after = bsearch_first(rows, r->nlines, line_after, &off);
	return after ? &rows[after - 1] : NULL;
}

static bool seg_after(const void *segs, size_t i, const void *addr)
{
	return ((const struct js_segment *)segs)[i].start > *(const uint64_t *)addr;
}

bool jitsyms_lookup(const struct jitsyms *t, uint64_t addr, struct jitsym_info *out)
{
	uint64_t lo, hi;
	return jitsyms_lookup_span(t, addr, out, &lo, &hi);
}

bool jitsyms_lookup_span(const struct jitsyms *t, uint64_t addr, struct jitsym_info *out, uint64_t *span_lo,
			 uint64_t *span_hi)
{
	size_t lo = bsearch_first(t->segs, t->nsegs, seg_after, &addr);
	/* segs[lo - 1] holds addr, up to where segs[lo] starts. */
	*span_lo = lo ? t->segs[lo - 1].start : 0;
	*span_hi = lo < t->nsegs ? t->segs[lo].start : UINT64_MAX;
	if (!lo || t->segs[lo - 1].range == JITSYMS_NO_ID)
		return false;
	const struct js_range *r = &t->ranges[t->segs[lo - 1].range];
	const struct jitsym_line *l = line_at(t, r, addr - r->start);
	*out = (struct jitsym_info){
		.start = r->start,
		.end = r->end,
		.name_id = r->name,
		.name = jitsyms_string(t, r->name),
		.file = l ? jitsyms_string(t, l->file) : "",
		.line = l ? l->line : 0,
	};
	return true;
}

void jitsyms_get_stats(const struct jitsyms *t, struct jitsyms_stats *out)
{
	*out = t->stats;
}
