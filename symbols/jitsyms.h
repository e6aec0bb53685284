/*
 * jitsyms.h — one process's JIT code: which function each range of generated code belongs to.
 *
 * JIT compilers (V8, HotSpot, CPython's perf trampolines, ...) describe the code they generate in a perf map
 * (perfmap.h) or a jitdump file (jitdump.h); both parsers add what they read to a table like this one. Ranges
 * are added in the order the runtime wrote them, and where a newer range overlaps an older one the newer wins
 * (code memory is reused once the code in it was freed). jitsyms_lookup() sees what was added up to the last
 * jitsyms_commit(), which sorts and flattens all ranges (O(n log n): once per batch, not per range).
 *
 * Names and source file names are copied into the table, control characters replaced by '?', and interned:
 * every distinct string has a small id, stable for the table's life, for callers that keep data per name.
 * A range may carry source lines (jitdump debug information): (offset in the range, line, file) rows.
 *
 * Limits: what would take the table past limits.max_ranges ranges, max_lines line rows or max_bytes bytes of
 * strings is dropped and counted (jitsyms_get_stats), never half-added. Strings longer than JITSYMS_NAME_MAX
 * are refused the same way.
 *
 * Ownership: jitsyms_new() / jitsyms_free(); strings returned stay valid until jitsyms_free(). Not thread-safe.
 */
#ifndef HOSTPROF_JITSYMS_H
#define HOSTPROF_JITSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JITSYMS_NAME_MAX 4096	/* longest name or source file name kept, in bytes */
#define JITSYMS_NO_ID UINT32_MAX

struct jitsyms_limits {
	size_t max_ranges;	/* 0: JITSYMS_DEFAULT_RANGES */
	size_t max_lines;	/* 0: JITSYMS_DEFAULT_LINES */
	size_t max_bytes;	/* of strings; 0: JITSYMS_DEFAULT_BYTES */
};

#define JITSYMS_DEFAULT_RANGES (1u << 20)
#define JITSYMS_DEFAULT_LINES (4u << 20)
#define JITSYMS_DEFAULT_BYTES (64u << 20)

struct jitsyms_stats {
	uint64_t ranges;	/* ranges added */
	uint64_t lines;		/* line rows added */
	uint64_t strings, string_bytes;	/* distinct strings kept */
	uint64_t dropped;	/* ranges (or their lines) refused: over a limit, too long, empty, wrapping */
};

/* A source line of a range: from offset on (up to the next row), the code is for line `line` of file `file`. */
struct jitsym_line {
	uint64_t offset;	/* from the range's start */
	uint32_t line;		/* 1-based, 0 unknown */
	uint32_t file;		/* string id of the source file */
};

/* What the table says about an address. */
struct jitsym_info {
	uint64_t start, end;	/* the range it is in: [start, end) */
	uint32_t name_id;
	const char *name;
	const char *file;	/* source file at the address, "" if unknown */
	uint32_t line;		/* 0 if unknown */
};

struct jitsyms;

/* limits may be NULL (defaults). Returns 0 and *out (free with jitsyms_free()), or -ENOMEM; *out is set only on
 * success. */
int jitsyms_new(const struct jitsyms_limits *limits, struct jitsyms **out);
void jitsyms_free(struct jitsyms *t);

/* The id of string s[0..len) (interned, control characters made '?'), or JITSYMS_NO_ID when it is empty, too
 * long, or over the byte limit (counted as dropped by the range that needed it). */
uint32_t jitsyms_intern(struct jitsyms *t, const char *s, size_t len);
/* The string of an id ("" for an unknown id). */
const char *jitsyms_string(const struct jitsyms *t, uint32_t id);

/*
 * Add the range [start, start + size) named name[0..name_len), with nlines source lines (offsets from start;
 * sorted here; rows whose file id is unknown or whose offset is outside the range are left out). Returns the
 * range's index (>= 0), or -E2BIG (over a limit), -EINVAL (empty name or range, or one that wraps), -ENOMEM;
 * refused ranges are counted as dropped.
 */
int64_t jitsyms_add(struct jitsyms *t, uint64_t start, uint64_t size, const char *name, size_t name_len,
		    const struct jitsym_line *lines, size_t nlines);
/* Add a copy of range `index` (name and lines) moved to new_start (a runtime moved the code). */
int64_t jitsyms_add_moved(struct jitsyms *t, int64_t index, uint64_t new_start);

/* Make everything added so far visible to lookups. Returns 0 or -ENOMEM (lookups then see the previous commit). */
int jitsyms_commit(struct jitsyms *t);
/* Whether ranges were added since the last commit. */
bool jitsyms_dirty(const struct jitsyms *t);

/* The newest range (as of the last commit) containing addr: true and *out filled, else false. O(log n). */
bool jitsyms_lookup(const struct jitsyms *t, uint64_t addr, struct jitsym_info *out);
/* The same, and [*lo, *hi): the addresses around addr named by the same range (its part no newer range covers),
 * or, when nothing names addr, named by nothing. */
bool jitsyms_lookup_span(const struct jitsyms *t, uint64_t addr, struct jitsym_info *out, uint64_t *lo, uint64_t *hi);

/* Ranges visible to lookups. */
size_t jitsyms_count(const struct jitsyms *t);
/* Distinct strings (the ids are 0 .. this - 1). */
uint32_t jitsyms_strings(const struct jitsyms *t);
void jitsyms_get_stats(const struct jitsyms *t, struct jitsyms_stats *out);

#endif
