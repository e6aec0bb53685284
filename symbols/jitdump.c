/*
 * jitdump.c — jitdump records into a JIT symbol table. See jitdump.h for the format and the contract.
 *
 * A record handler is given a reader over the record's bytes that are in memory (at least its 16-byte header) and
 * its total size; it returns 0 when done with it (used or skipped), 1 when it needs more of it in memory.
 */
#include "symbols/jitdump.h"

#include "unwind/byte_reader.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_SIZE 40		/* the file header's fixed part */
#define RECORD_HEADER 16
#define LOAD_FIXED (RECORD_HEADER + 40)	/* pid, tid, vma, code_addr, code_size, code_index */
#define MOVE_SIZE (RECORD_HEADER + 48)	/* pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index */
#define DEBUG_FIXED (RECORD_HEADER + 16)	/* code_addr, nr_entry */
#define DEBUG_ENTRY_FIXED 16	/* addr, line, discriminator */

struct jitdump_code {
	uint64_t index;
	int64_t range;
};

/*
 * The field of size bytes at offset off of a record (or the file header), in the host's byte order (the only one
 * parse_header accepts). Each caller checked first that the record holds its fields: a field past the bytes in
 * memory reads as 0, a bound kept anyway.
 */
static uint64_t field(const struct byte_reader *rec, size_t off, unsigned size)
{
	uint64_t v = 0;
	byte_reader_uint_at(rec, off, size, &v);
	return v;
}

static uint32_t get32(const struct byte_reader *rec, size_t off)
{
	return (uint32_t)field(rec, off, 4);
}

static uint64_t get64(const struct byte_reader *rec, size_t off)
{
	return field(rec, off, 8);
}

void jitdump_parser_init(struct jitdump_parser *p)
{
	memset(p, 0, sizeof(*p));
}

void jitdump_parser_free(struct jitdump_parser *p)
{
	free(p->debug_lines);
	free(p->codes);
	hindex_free(&p->code_index);
	memset(p, 0, sizeof(*p));
}

/* ---- code_index -> range ------------------------------------------------------------------------------- */

static bool code_is(const void *ctx, uint64_t value, const void *key)
{
	const struct jitdump_parser *p = ctx;
	return p->codes[value].index == *(const uint64_t *)key;
}

static struct jitdump_code *find_code(const struct jitdump_parser *p, uint64_t index)
{
	uint64_t at;
	if (!hindex_find(&p->code_index, hash_u64(HASH_SEED, index), code_is, p, &index, &at))
		return NULL;
	return &p->codes[at];
}

/* code_index now names range (a load, or a move of it). */
static int remember_code(struct jitdump_parser *p, uint64_t index, int64_t range)
{
	struct jitdump_code *c = find_code(p, index);
	if (c) {
		c->range = range;
		return 0;
	}
	if (p->ncodes == p->cap_codes) {
		size_t cap = p->cap_codes ? p->cap_codes * 2 : 1024;
		struct jitdump_code *codes = realloc(p->codes, cap * sizeof(*codes));
		if (!codes)
			return -ENOMEM;
		p->codes = codes;
		p->cap_codes = cap;
	}
	int err = hindex_insert(&p->code_index, hash_u64(HASH_SEED, index), p->ncodes);
	if (err < 0)
		return err;
	p->codes[p->ncodes++] = (struct jitdump_code){ .index = index, .range = range };
	return 0;
}

static int64_t known_code(const struct jitdump_parser *p, uint64_t index)
{
	const struct jitdump_code *c = find_code(p, index);
	return c ? c->range : -1;
}

/* ---- records -------------------------------------------------------------------------------------------- */

/* The debug lines waiting for the code at code_addr, as offsets into it; none if they are for other code or
 * any of them is outside it (then they describe something else). */
static size_t take_debug_lines(struct jitdump_parser *p, uint64_t code_addr, uint64_t code_size)
{
	size_t n = p->ndebug;
	for (size_t i = 0; i < n && p->debug_addr == code_addr; i++) {
		if (p->debug_lines[i].offset < code_addr || p->debug_lines[i].offset - code_addr > code_size)
			n = 0;
	}
	if (p->ndebug && (p->debug_addr != code_addr || !n)) {
		p->stats.skipped++;	/* for code never loaded, or not for this code */
		n = 0;
	}
	for (size_t i = 0; i < n; i++)
		p->debug_lines[i].offset -= code_addr;
	p->ndebug = 0;
	return n;
}

static int on_load(struct jitdump_parser *p, struct jitsyms *t, const struct byte_reader *r, uint64_t size)
{
	size_t avail = byte_reader_left(r);
	if (size < LOAD_FIXED + 1) {
		p->stats.skipped++;
		return 0;
	}
	/* The name ends within the record, and within what a kept name may be. */
	size_t name_room = size - LOAD_FIXED < JITSYMS_NAME_MAX + 1 ? (size_t)(size - LOAD_FIXED) : JITSYMS_NAME_MAX + 1;
	size_t have = avail > LOAD_FIXED ? avail - LOAD_FIXED : 0;
	const uint8_t *name = r->start + LOAD_FIXED, *nul = memchr(name, '\0', have < name_room ? have : name_room);
	if (!nul && have < name_room)
		return 1;
	if (!nul) {	/* unterminated, or a name too long to keep */
		p->stats.skipped++;
		return 0;
	}
	uint64_t vma = get64(r, 24), code_addr = get64(r, 32), code_size = get64(r, 40), index = get64(r, 48);
	size_t nlines = take_debug_lines(p, code_addr, code_size);
	int64_t range = jitsyms_add(t, vma, code_size, (const char *)name, (size_t)(nul - name), p->debug_lines, nlines);
	if (range < 0 || remember_code(p, index, range) < 0) {
		p->stats.refused++;
		return 0;
	}
	p->stats.loads++;
	p->stats.debug_infos += nlines > 0;
	return 0;
}

static int on_move(struct jitdump_parser *p, struct jitsyms *t, const struct byte_reader *r, uint64_t size)
{
	if (size < MOVE_SIZE) {
		p->stats.skipped++;
		return 0;
	}
	if (byte_reader_left(r) < MOVE_SIZE)
		return 1;
	uint64_t index = get64(r, 56);
	int64_t from = known_code(p, index), range;
	if (from < 0 || (range = jitsyms_add_moved(t, from, get64(r, 24))) < 0 || remember_code(p, index, range) < 0) {
		p->stats.refused++;
		return 0;
	}
	p->stats.moves++;
	return 0;
}

/* The debug entry at offset at of record r (all in memory): its row in *row, its size in *used; -EBADMSG if cut. */
static int debug_entry(struct jitsyms *t, const struct byte_reader *r, size_t at, uint32_t prev_file,
		       struct jitsym_line *row, size_t *used)
{
	size_t room = byte_reader_left(r) - at;
	if (room < DEBUG_ENTRY_FIXED + 1)
		return -EBADMSG;
	const uint8_t *name = r->start + at + DEBUG_ENTRY_FIXED;
	const uint8_t *nul = memchr(name, '\0', room - DEBUG_ENTRY_FIXED);
	if (!nul)
		return -EBADMSG;
	size_t len = (size_t)(nul - name);
	int32_t line = (int32_t)get32(r, at + 8);
	row->offset = get64(r, at);	/* an address until its load says where the code starts */
	row->line = line > 0 ? (uint32_t)line : 0;
	/* "\xff" repeats the previous entry's file (perf's JVMTI agent writes it so). */
	row->file = len == 1 && name[0] == 0xff ? prev_file : jitsyms_intern(t, (const char *)name, len);
	*used = DEBUG_ENTRY_FIXED + len + 1;
	return 0;
}

static int on_debug_info(struct jitdump_parser *p, struct jitsyms *t, const struct byte_reader *r, uint64_t size)
{
	if (size < DEBUG_FIXED || size > JITDUMP_RECORD_PREFIX_MAX) {
		p->stats.skipped++;
		return 0;
	}
	if (byte_reader_left(r) < size)
		return 1;	/* the entry count too may not be in memory yet */
	uint64_t n = get64(r, 24);
	if (n > JITDUMP_LINES_MAX) {
		p->stats.skipped++;
		return 0;
	}
	struct jitsym_line *rows = realloc(p->debug_lines, (n ? n : 1) * sizeof(*rows));
	if (!rows) {
		p->stats.skipped++;
		return 0;
	}
	p->debug_lines = rows;
	p->ndebug = 0;
	size_t at = DEBUG_FIXED, used;
	uint32_t file = JITSYMS_NO_ID;
	for (uint64_t i = 0; i < n; i++, at += used) {
		if (debug_entry(t, r, at, file, &rows[i], &used) < 0) {
			p->stats.skipped++;	/* cut short: none of it is trusted */
			return 0;
		}
		file = rows[i].file;
	}
	/* Writers pad records to 8 bytes; more left over means the entries are not what the record holds (V8 has
	 * written such records for baseline code): none of it is trusted. */
	if (size - at >= 8) {
		p->stats.skipped++;
		return 0;
	}
	p->debug_addr = get64(r, 16);
	p->ndebug = (size_t)n;
	return 0;
}

static int on_record(struct jitdump_parser *p, struct jitsyms *t, const struct byte_reader *r, uint64_t size)
{
	switch (get32(r, 0)) {
	case JITDUMP_CODE_LOAD:
		return on_load(p, t, r, size);
	case JITDUMP_CODE_MOVE:
		return on_move(p, t, r, size);
	case JITDUMP_CODE_DEBUG_INFO:
		return on_debug_info(p, t, r, size);
	case JITDUMP_CODE_CLOSE:
		p->closed = true;
		return 0;
	case JITDUMP_CODE_UNWINDING_INFO:
		return 0;	/* JIT code is walked by frame pointer */
	default:
		p->stats.skipped++;
		return 0;
	}
}

/* The file header: its size, 0 if not all there yet, or a negative errno. */
static int64_t parse_header(struct jitdump_parser *p, const uint8_t *buf, size_t len, uint64_t file_left)
{
	struct byte_reader h;
	if (file_left < HEADER_SIZE || len < HEADER_SIZE)
		return 0;
	byte_reader_init(&h, buf, len);
	uint32_t magic = get32(&h, 0), version = get32(&h, 4), size = get32(&h, 8), mach = get32(&h, 12);
	if (magic != JITDUMP_MAGIC)
		return magic == __builtin_bswap32(JITDUMP_MAGIC) ? -EPROTONOSUPPORT : -EINVAL;
	if (version != 1 || mach != EM_X86_64)
		return -EPROTONOSUPPORT;
	if (size < HEADER_SIZE || size > JITDUMP_HEADER_MAX)
		return -EBADMSG;
	if (file_left < size)
		return 0;
	p->pid = get32(&h, 20);
	p->have_header = true;
	return size;
}

int64_t jitdump_parse(struct jitdump_parser *p, struct jitsyms *t, const uint8_t *buf, size_t len,
		      uint64_t file_left)
{
	uint64_t done = 0;
	if (p->error)
		return p->error;
	if (!p->have_header) {
		int64_t rc = parse_header(p, buf, len, file_left);
		if (rc <= 0)
			return rc < 0 ? (p->error = (int)rc) : 0;
		done = (uint64_t)rc;
	}
	while (!p->closed && file_left - done >= RECORD_HEADER && len > done && len - done >= RECORD_HEADER) {
		struct byte_reader r;
		byte_reader_init(&r, buf + done, len - done);
		uint64_t size = get32(&r, 4);
		if (size < RECORD_HEADER)
			return p->error = -EBADMSG;	/* no way to find the next record */
		if (size > file_left - done)
			break;	/* still being written */
		byte_reader_init(&r, buf + done, len - done < size ? (size_t)(len - done) : (size_t)size);
		if (on_record(p, t, &r, size))
			break;	/* the caller reads on from here */
		p->stats.records++;
		done += size;
	}
	return (int64_t)done;
}
