/*
 * Unit tests for the JIT symbol table (symbols/jitsyms.c) and the two files that fill it: perf maps
 * (symbols/perfmap.c) and jitdump files (symbols/jitdump.c), written here byte by byte, read whole and in
 * every split a runtime still writing them could leave, and corrupted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/jitdump.h"
#include "symbols/jitsyms.h"
#include "symbols/perfmap.h"

static const char *name_at(struct jitsyms *t, uint64_t addr)
{
	struct jitsym_info info;
	return jitsyms_lookup(t, addr, &info) ? info.name : NULL;
}

/* ---- the table ------------------------------------------------------------------------------------------ */

static void test_lookup_and_gaps(void **state)
{
	(void)state;
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	assert_true(jitsyms_add(t, 0x1000, 0x100, "a", 1, NULL, 0) >= 0);
	assert_true(jitsyms_add(t, 0x3000, 0x10, "b", 1, NULL, 0) >= 0);
	assert_null(name_at(t, 0x1000));	/* not committed yet */
	assert_true(jitsyms_dirty(t));
	assert_int_equal(jitsyms_commit(t), 0);
	assert_false(jitsyms_dirty(t));
	assert_string_equal(name_at(t, 0x1000), "a");
	assert_string_equal(name_at(t, 0x10ff), "a");
	assert_null(name_at(t, 0x1100));
	assert_null(name_at(t, 0xfff));
	assert_string_equal(name_at(t, 0x300f), "b");
	assert_null(name_at(t, 0x3010));
	assert_null(name_at(t, UINT64_MAX));
	assert_int_equal(jitsyms_count(t), 2);
	jitsyms_free(t);
}

/* Code memory is reused: the newest range wins where ranges overlap, the older shows where it does not. */
static void test_newest_wins(void **state)
{
	(void)state;
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	jitsyms_add(t, 0x1000, 0x1000, "old", 3, NULL, 0);
	jitsyms_add(t, 0x1400, 0x100, "new", 3, NULL, 0);
	jitsyms_add(t, 0x1f00, 0x200, "tail", 4, NULL, 0);
	assert_int_equal(jitsyms_commit(t), 0);
	assert_string_equal(name_at(t, 0x13ff), "old");
	assert_string_equal(name_at(t, 0x1400), "new");
	assert_string_equal(name_at(t, 0x14ff), "new");
	assert_string_equal(name_at(t, 0x1500), "old");
	assert_string_equal(name_at(t, 0x1eff), "old");
	assert_string_equal(name_at(t, 0x1f00), "tail");
	assert_string_equal(name_at(t, 0x20ff), "tail");
	/* An older range added later is newer: it wins. */
	jitsyms_add(t, 0x1000, 0x1000, "again", 5, NULL, 0);
	assert_int_equal(jitsyms_commit(t), 0);
	assert_string_equal(name_at(t, 0x1450), "again");
	assert_string_equal(name_at(t, 0x2050), "tail");
	struct jitsym_info info;
	assert_true(jitsyms_lookup(t, 0x1450, &info));
	assert_int_equal(info.start, 0x1000);	/* the range's own start, not where its visible part starts */
	assert_int_equal(info.end, 0x2000);
	jitsyms_free(t);
}

static void test_strings_interned_and_cleaned(void **state)
{
	(void)state;
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	uint32_t a = jitsyms_intern(t, "JS:*f", 5), b = jitsyms_intern(t, "JS:*f", 5);
	assert_int_equal(a, b);
	assert_int_not_equal(jitsyms_intern(t, "JS:*g", 5), a);
	assert_int_equal(jitsyms_intern(t, "", 0), JITSYMS_NO_ID);
	uint32_t c = jitsyms_intern(t, "x\ty\033[31m\x7f", 9);
	assert_string_equal(jitsyms_string(t, c), "x?y?[31m?");
	assert_string_equal(jitsyms_string(t, 12345), "");
	/* Many strings: the set grows and every id stays right. */
	char buf[32];
	for (int i = 0; i < 5000; i++) {
		int n = snprintf(buf, sizeof(buf), "name%d", i);
		uint32_t id = jitsyms_intern(t, buf, (size_t)n);
		assert_string_equal(jitsyms_string(t, id), buf);
	}
	assert_int_equal(jitsyms_intern(t, "name17", 6), jitsyms_intern(t, "name17", 6));
	jitsyms_free(t);
}

static void test_limits_and_bad_ranges(void **state)
{
	(void)state;
	struct jitsyms_limits lim = { .max_ranges = 2, .max_bytes = 16 };
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(&lim, &t), 0);
	struct jitsyms_stats st;
	assert_int_equal(jitsyms_add(t, 0x1000, 0, "zero", 4, NULL, 0), -EINVAL);
	assert_int_equal(jitsyms_add(t, UINT64_MAX - 4, 0x10, "wraps", 5, NULL, 0), -EINVAL);
	assert_int_equal(jitsyms_add(t, 0x1000, 0x10, "", 0, NULL, 0), -EINVAL);
	assert_int_equal(jitsyms_add(t, 0x1000, 0x10, "a-name-over-16-bytes", 20, NULL, 0), -E2BIG);
	assert_true(jitsyms_add(t, 0x1000, 0x10, "one", 3, NULL, 0) >= 0);
	assert_true(jitsyms_add(t, 0x2000, 0x10, "two", 3, NULL, 0) >= 0);
	assert_int_equal(jitsyms_add(t, 0x3000, 0x10, "one", 3, NULL, 0), -E2BIG);
	jitsyms_get_stats(t, &st);
	assert_int_equal(st.ranges, 2);
	assert_int_equal(st.dropped, 5);
	char big[JITSYMS_NAME_MAX + 1];
	memset(big, 'x', sizeof(big));
	assert_int_equal(jitsyms_intern(t, big, sizeof(big)), JITSYMS_NO_ID);
	jitsyms_free(t);
}

static void test_lines_and_moves(void **state)
{
	(void)state;
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	uint32_t js = jitsyms_intern(t, "hot.js", 6);
	struct jitsym_line lines[] = {
		{ .offset = 0x40, .line = 3, .file = js },
		{ .offset = 0x0, .line = 1, .file = js },
		{ .offset = 0x90, .line = 7, .file = js },
		{ .offset = 0x500, .line = 9, .file = js },	/* past the range: left out */
		{ .offset = 0x10, .line = 2, .file = 999 },	/* unknown file: left out */
	};
	int64_t r = jitsyms_add(t, 0x7000, 0x100, "JS:*hot", 7, lines, 5);
	assert_true(r >= 0);
	assert_true(jitsyms_add_moved(t, r, 0x9000) >= 0);
	assert_int_equal(jitsyms_add_moved(t, 77, 0x9000), -EINVAL);
	assert_int_equal(jitsyms_commit(t), 0);
	struct jitsym_info info;
	assert_true(jitsyms_lookup(t, 0x7000, &info));
	assert_int_equal(info.line, 1);
	assert_string_equal(info.file, "hot.js");
	assert_true(jitsyms_lookup(t, 0x703f, &info));
	assert_int_equal(info.line, 1);
	assert_true(jitsyms_lookup(t, 0x7040, &info));
	assert_int_equal(info.line, 3);
	assert_true(jitsyms_lookup(t, 0x70ff, &info));
	assert_int_equal(info.line, 7);
	assert_true(jitsyms_lookup(t, 0x9041, &info));	/* the moved copy keeps names and lines */
	assert_string_equal(info.name, "JS:*hot");
	assert_int_equal(info.line, 3);
	assert_int_equal(info.start, 0x9000);
	struct jitsyms_stats st;
	jitsyms_get_stats(t, &st);
	assert_int_equal(st.lines, 3);
	jitsyms_free(t);
}

/* ---- perf maps ------------------------------------------------------------------------------------------ */

static const char perf_map[] =
	"7efdd8005b80 2c8 JS:*hotLoop /tmp/hot.js:1:17\n"
	"0x00007ff3c8ec7620 0x00000000000000d8 long Hot.f(long)\n"
	"18c4680\taa0\tBuiltin:RecordWriteSaveFP\r\n"
	"zz 10 bad_number\n"
	"1000 0 zero_size\n"
	"1000 10\n"
	"1000 10 \n"
	"ffffffffffffff00 200 wraps\n"
	"12345678901234567 10 seventeen_digits\n"
	"\n"
	"5000 40 py::f:/x.py\n";

static void parse_all(struct perfmap_parser *p, struct jitsyms *t, const char *text, size_t len)
{
	memset(p, 0, sizeof(*p));
	assert_int_equal(perfmap_parse(p, t, text, len), len);
	assert_int_equal(jitsyms_commit(t), 0);
}

static void test_perfmap_lines(void **state)
{
	(void)state;
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	struct perfmap_parser p;
	parse_all(&p, t, perf_map, sizeof(perf_map) - 1);
	assert_string_equal(name_at(t, 0x7efdd8005b80), "JS:*hotLoop /tmp/hot.js:1:17");
	assert_string_equal(name_at(t, 0x7ff3c8ec7620 + 0xd7), "long Hot.f(long)");
	assert_string_equal(name_at(t, 0x18c4680), "Builtin:RecordWriteSaveFP");	/* no '\r' kept */
	assert_string_equal(name_at(t, 0x5000), "py::f:/x.py");
	assert_null(name_at(t, 0x1000));
	assert_int_equal(p.stats.lines, 11);
	assert_int_equal(p.stats.symbols, 4);
	assert_int_equal(p.stats.malformed, 7);
	jitsyms_free(t);
}

/* A runtime still writing: every split of the file parses to the same table, partial lines waiting. */
static void test_perfmap_incremental(void **state)
{
	(void)state;
	size_t len = sizeof(perf_map) - 1;
	for (size_t split = 0; split <= len; split++) {
		struct jitsyms *t;
		assert_int_equal(jitsyms_new(NULL, &t), 0);
		struct perfmap_parser p = { 0 };
		size_t done = perfmap_parse(&p, t, perf_map, split);
		assert_true(done <= split);
		assert_true(done == 0 || perf_map[done - 1] == '\n');
		assert_int_equal(perfmap_parse(&p, t, perf_map + done, len - done), len - done);
		assert_int_equal(p.stats.symbols, 4);
		assert_int_equal(jitsyms_commit(t), 0);
		assert_string_equal(name_at(t, 0x5010), "py::f:/x.py");
		jitsyms_free(t);
	}
}

static void test_perfmap_long_lines(void **state)
{
	(void)state;
	size_t n = 3 * PERFMAP_LINE_MAX;
	char *text = malloc(n + 64);
	memset(text, 'a', n);
	memcpy(text, "1000 10 ", 8);
	strcpy(text + n, "\n2000 10 after\n");
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	struct perfmap_parser p = { 0 };
	/* Fed in pieces the size of one line: the long line is skipped, the next one read. */
	size_t total = strlen(text), done = 0;
	while (done < total) {
		size_t chunk = total - done < PERFMAP_LINE_MAX + 1 ? total - done : PERFMAP_LINE_MAX + 1;
		size_t used = perfmap_parse(&p, t, text + done, chunk);
		assert_true(used > 0);
		done += used;
	}
	assert_int_equal(jitsyms_commit(t), 0);
	assert_null(name_at(t, 0x1000));
	assert_string_equal(name_at(t, 0x2000), "after");
	assert_int_equal(p.stats.too_long, 1);
	assert_int_equal(p.stats.symbols, 1);
	jitsyms_free(t);
	free(text);
}

/* ---- jitdump -------------------------------------------------------------------------------------------- */

struct dump {
	uint8_t *b;
	size_t n, cap;
};

static void put(struct dump *d, const void *p, size_t n)
{
	if (d->n + n > d->cap) {
		d->cap = (d->n + n) * 2;
		d->b = realloc(d->b, d->cap);
	}
	memcpy(d->b + d->n, p, n);
	d->n += n;
}

static void put32(struct dump *d, uint32_t v) { put(d, &v, 4); }
static void put64(struct dump *d, uint64_t v) { put(d, &v, 8); }

static void put_header(struct dump *d, uint32_t magic, uint32_t version, uint32_t mach)
{
	put32(d, magic);
	put32(d, version);
	put32(d, 40);
	put32(d, mach);
	put32(d, 0);
	put32(d, 4242);
	put64(d, 1);
	put64(d, 0);
}

static void put_load(struct dump *d, uint64_t addr, uint64_t size, uint64_t index, const char *name)
{
	size_t total = 16 + 40 + strlen(name) + 1 + size;
	put32(d, JITDUMP_CODE_LOAD);
	put32(d, (uint32_t)total);
	put64(d, 2);
	put32(d, 4242);
	put32(d, 4243);
	put64(d, addr);
	put64(d, addr);
	put64(d, size);
	put64(d, index);
	put(d, name, strlen(name) + 1);
	for (uint64_t i = 0; i < size; i++)
		put(d, "\xcc", 1);	/* the code */
}

static void put_move(struct dump *d, uint64_t from, uint64_t to, uint64_t size, uint64_t index)
{
	put32(d, JITDUMP_CODE_MOVE);
	put32(d, 16 + 48);
	put64(d, 3);
	put32(d, 4242);
	put32(d, 4243);
	put64(d, to);
	put64(d, from);
	put64(d, to);
	put64(d, size);
	put64(d, index);
}

struct debug_row {
	uint64_t addr;
	int32_t line;
	const char *file;
};

static void put_debug(struct dump *d, uint64_t code_addr, const struct debug_row *rows, size_t n)
{
	size_t total = 16 + 16;
	for (size_t i = 0; i < n; i++)
		total += 16 + strlen(rows[i].file) + 1;
	put32(d, JITDUMP_CODE_DEBUG_INFO);
	put32(d, (uint32_t)total);
	put64(d, 4);
	put64(d, code_addr);
	put64(d, n);
	for (size_t i = 0; i < n; i++) {
		put64(d, rows[i].addr);
		put32(d, (uint32_t)rows[i].line);
		put32(d, 0);
		put(d, rows[i].file, strlen(rows[i].file) + 1);
	}
}

static void put_bare(struct dump *d, uint32_t id, uint32_t size)
{
	put32(d, id);
	put32(d, size);
	put64(d, 5);
	for (uint32_t i = 16; i < size; i++)
		put(d, "", 1);
}

/* A dump as V8 writes one: debug information before each load, code moved, unwinding info, a close. */
static void make_dump(struct dump *d)
{
	static const struct debug_row rows[] = {
		{ 0x7000, 1, "/app/hot.js" }, { 0x7020, 3, "\xff" }, { 0x7040, -5, "/app/other.js" },
	};
	memset(d, 0, sizeof(*d));
	put_header(d, JITDUMP_MAGIC, 1, EM_X86_64);
	put_debug(d, 0x7000, rows, 3);
	put_load(d, 0x7000, 0x80, 1, "JS:*hot /app/hot.js:1");
	put_bare(d, JITDUMP_CODE_UNWINDING_INFO, 40);
	put_load(d, 0x8000, 0x40, 2, "Builtin:Stub");
	put_debug(d, 0x1234, rows, 1);	/* for code never loaded */
	put_bare(d, 77, 24);		/* unknown record type */
	put_move(d, 0x8000, 0x9000, 0x40, 2);
	put_move(d, 0x5000, 0x6000, 0x40, 99);	/* unknown code */
	put_load(d, 0xa000, 0x20, 3, "late");
	put_bare(d, JITDUMP_CODE_CLOSE, 16);
	put_load(d, 0xb000, 0x20, 4, "after the close");
}

static void check_dump_table(struct jitsyms *t, const struct jitdump_parser *p)
{
	struct jitsym_info info;
	assert_int_equal(jitsyms_commit(t), 0);
	assert_true(jitsyms_lookup(t, 0x7021, &info));
	assert_string_equal(info.name, "JS:*hot /app/hot.js:1");
	assert_string_equal(info.file, "/app/hot.js");
	assert_int_equal(info.line, 3);
	assert_true(jitsyms_lookup(t, 0x707f, &info));
	assert_string_equal(info.file, "/app/other.js");
	assert_int_equal(info.line, 0);
	assert_string_equal(name_at(t, 0x9010), "Builtin:Stub");
	assert_string_equal(name_at(t, 0x8010), "Builtin:Stub");	/* moved code: the old place is not reused yet */
	assert_string_equal(name_at(t, 0xa000), "late");
	assert_null(name_at(t, 0xb000));
	assert_null(name_at(t, 0x6000));
	assert_true(p->closed);
	assert_int_equal(p->pid, 4242);
	assert_int_equal(p->stats.loads, 3);
	assert_int_equal(p->stats.moves, 1);
	assert_int_equal(p->stats.debug_infos, 1);
	assert_int_equal(p->stats.skipped, 2);
	assert_int_equal(p->stats.refused, 1);
}

static void test_jitdump_whole(void **state)
{
	(void)state;
	struct dump d;
	make_dump(&d);
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	struct jitdump_parser p;
	jitdump_parser_init(&p);
	int64_t used = jitdump_parse(&p, t, d.b, d.n, d.n);
	assert_true(used > 0 && (size_t)used < d.n);	/* up to the close */
	check_dump_table(t, &p);
	jitdump_parser_free(&p);
	jitsyms_free(t);
	free(d.b);
}

/*
 * The file as a runtime still writing it leaves it (cut at every byte), and read in small pieces: the parse
 * waits at incomplete records and ends with the same table.
 */
static void test_jitdump_incremental(void **state)
{
	(void)state;
	struct dump d;
	make_dump(&d);
	for (size_t cut = 0; cut <= d.n; cut += 7) {
		struct jitsyms *t;
		assert_int_equal(jitsyms_new(NULL, &t), 0);
		struct jitdump_parser p;
		jitdump_parser_init(&p);
		uint64_t pos = 0;
		for (size_t file = cut;; file = d.n) {
			int64_t used;
			/* Pieces of 128 bytes (more than any record needs in memory): the code of a load is skipped
			 * without having been read. */
			while ((used = jitdump_parse(&p, t, d.b + pos, file - pos < 128 ? file - pos : 128, file - pos)) > 0)
				pos += (uint64_t)used;
			assert_int_equal(used, 0);
			if (file == d.n)
				break;
		}
		check_dump_table(t, &p);
		jitdump_parser_free(&p);
		jitsyms_free(t);
	}
	free(d.b);
}

/*
 * Only the first bytes of a debug-information record in memory (16 to 31: its header, not yet its entry count):
 * the parse waits for the rest without reading past what it was given (each piece is its own allocation, so
 * ASan sees a read past it), then takes the record whole.
 */
static void test_jitdump_record_prefix(void **state)
{
	(void)state;
	static const struct debug_row rows[] = { { 0x7000, 7, "/app/a.js" } };
	struct dump d = { 0 };
	put_header(&d, JITDUMP_MAGIC, 1, EM_X86_64);
	size_t header = d.n;
	put_debug(&d, 0x7000, rows, 1);
	put_load(&d, 0x7000, 0x10, 1, "f");
	for (size_t have = 16; have < 32; have++) {
		struct jitsyms *t;
		assert_int_equal(jitsyms_new(NULL, &t), 0);
		struct jitdump_parser p;
		struct jitsym_info info;
		uint8_t *piece = malloc(header + have);
		assert_non_null(piece);
		memcpy(piece, d.b, header + have);
		jitdump_parser_init(&p);
		assert_int_equal(jitdump_parse(&p, t, piece, header + have, d.n), (int64_t)header);
		free(piece);
		assert_int_equal(jitdump_parse(&p, t, d.b + header, d.n - header, d.n - header), (int64_t)(d.n - header));
		assert_int_equal(jitsyms_commit(t), 0);
		assert_true(jitsyms_lookup(t, 0x7001, &info));
		assert_int_equal(info.line, 7);
		assert_int_equal(p.stats.debug_infos, 1);
		jitdump_parser_free(&p);
		jitsyms_free(t);
	}
	free(d.b);
}

static void test_jitdump_refused(void **state)
{
	(void)state;
	struct { uint32_t magic, version, mach; int err; } cases[] = {
		{ 0x12345678, 1, EM_X86_64, -EINVAL },
		{ __builtin_bswap32(JITDUMP_MAGIC), 1, EM_X86_64, -EPROTONOSUPPORT },
		{ JITDUMP_MAGIC, 2, EM_X86_64, -EPROTONOSUPPORT },
		{ JITDUMP_MAGIC, 1, EM_AARCH64, -EPROTONOSUPPORT },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dump d = { 0 };
		put_header(&d, cases[i].magic, cases[i].version, cases[i].mach);
		struct jitsyms *t;
		assert_int_equal(jitsyms_new(NULL, &t), 0);
		struct jitdump_parser p;
		jitdump_parser_init(&p);
		assert_int_equal(jitdump_parse(&p, t, d.b, d.n, d.n), cases[i].err);
		assert_int_equal(jitdump_parse(&p, t, d.b, d.n, d.n), cases[i].err);	/* and stays so */
		jitdump_parser_free(&p);
		jitsyms_free(t);
		free(d.b);
	}
}

/* Debug information that does not describe the code it comes before is not used: entries outside the code,
 * or entries that do not fill their record (V8 has written such records, their "file names" code bytes). */
static void test_jitdump_bad_debug_info(void **state)
{
	(void)state;
	static const struct debug_row outside[] = { { 0x7000, 1, "/app/a.js" }, { 0x9000, 2, "/app/a.js" } };
	static const struct debug_row inside[] = { { 0x8000, 5, "/app/b.js" } };
	struct dump d = { 0 };
	put_header(&d, JITDUMP_MAGIC, 1, EM_X86_64);
	put_debug(&d, 0x7000, outside, 2);
	put_load(&d, 0x7000, 0x80, 1, "outside");
	size_t start = d.n;
	put_debug(&d, 0x8000, inside, 1);
	uint32_t size;
	memcpy(&size, d.b + start + 4, 4);
	size += 24;				/* 24 more bytes than its entries: not padding */
	memcpy(d.b + start + 4, &size, 4);
	put(&d, "junk-junk-junk-junk-j", 24);
	put_load(&d, 0x8000, 0x80, 2, "overlong");
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	struct jitdump_parser p;
	jitdump_parser_init(&p);
	assert_int_equal(jitdump_parse(&p, t, d.b, d.n, d.n), (int64_t)d.n);
	assert_int_equal(jitsyms_commit(t), 0);
	struct jitsym_info info;
	assert_true(jitsyms_lookup(t, 0x7010, &info));
	assert_string_equal(info.name, "outside");
	assert_int_equal(info.line, 0);
	assert_string_equal(info.file, "");
	assert_true(jitsyms_lookup(t, 0x8010, &info));
	assert_string_equal(info.name, "overlong");
	assert_int_equal(info.line, 0);
	assert_int_equal(p.stats.loads, 2);
	assert_int_equal(p.stats.debug_infos, 0);
	assert_int_equal(p.stats.skipped, 2);
	jitdump_parser_free(&p);
	jitsyms_free(t);
	free(d.b);
}

/* A record whose size is below its own header: nothing after it can be found, what came before stays. */
static void test_jitdump_corrupt(void **state)
{
	(void)state;
	struct dump d = { 0 };
	put_header(&d, JITDUMP_MAGIC, 1, EM_X86_64);
	put_load(&d, 0x7000, 0x10, 1, "kept");
	put_bare(&d, JITDUMP_CODE_LOAD, 40);	/* too short for a load: skipped by its size */
	put32(&d, JITDUMP_CODE_LOAD);
	put32(&d, 8);
	put64(&d, 0);
	put_load(&d, 0x8000, 0x10, 2, "lost");
	struct jitsyms *t;
	assert_int_equal(jitsyms_new(NULL, &t), 0);
	struct jitdump_parser p;
	jitdump_parser_init(&p);
	assert_int_equal(jitdump_parse(&p, t, d.b, d.n, d.n), -EBADMSG);
	assert_int_equal(jitsyms_commit(t), 0);
	assert_string_equal(name_at(t, 0x7000), "kept");
	assert_null(name_at(t, 0x8000));
	assert_int_equal(p.stats.skipped, 1);
	jitdump_parser_free(&p);
	jitsyms_free(t);
	free(d.b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup_and_gaps),
		cmocka_unit_test(test_newest_wins),
		cmocka_unit_test(test_strings_interned_and_cleaned),
		cmocka_unit_test(test_limits_and_bad_ranges),
		cmocka_unit_test(test_lines_and_moves),
		cmocka_unit_test(test_perfmap_lines),
		cmocka_unit_test(test_perfmap_incremental),
		cmocka_unit_test(test_perfmap_long_lines),
		cmocka_unit_test(test_jitdump_whole),
		cmocka_unit_test(test_jitdump_incremental),
		cmocka_unit_test(test_jitdump_record_prefix),
		cmocka_unit_test(test_jitdump_refused),
		cmocka_unit_test(test_jitdump_bad_debug_info),
		cmocka_unit_test(test_jitdump_corrupt),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
