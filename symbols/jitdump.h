/*
 * jitdump.h — the jitdump file a JIT runtime writes for profilers (jit-PID.dump).
 *
 * The format (Linux perf's tools/perf/Documentation/jitdump-specification.txt): a file header (magic "JiTD",
 * version 1, its own size, the ELF machine, the pid, a timestamp, flags), then records, each a 16-byte header
 * (id, total size, timestamp) and a payload:
 *   JIT_CODE_LOAD (0)        pid, tid, vma, code_addr, code_size, code_index, NUL-terminated name, code bytes
 *   JIT_CODE_MOVE (1)        pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index
 *   JIT_CODE_DEBUG_INFO (2)  code_addr, nr_entry, entries (addr, line, discriminator, NUL-terminated file name;
 *                            the name "\xff" means the previous entry's) for the next load of code_addr
 *   JIT_CODE_CLOSE (3)       nothing: the runtime is done
 *   JIT_CODE_UNWINDING_INFO (4) eh_frame data for the code (not used: JIT code is walked by frame pointer)
 * A runtime announces the file by mapping it (V8 --perf-prof, perf's JVMTI agent): that mapping is how
 * profilers find it. Code is named at vma for code_size bytes.
 *
 * Runtimes append as they compile, so the file is parsed incrementally: jitdump_parse() is given the file
 * from the parser's position on, as much as the caller read, and consumes the records complete in the file.
 * It needs only the start of each record in memory (the code bytes of a load can be skipped unread).
 *
 * Untrusted input: only the host's byte order and machine are read. A record whose size is below its own
 * 16-byte header stops the parse (nothing says where the next one starts); a record too short for its fields,
 * with an unterminated string or a name over JITSYMS_NAME_MAX, a debug-information record over
 * JITDUMP_RECORD_PREFIX_MAX bytes or with more than JITDUMP_LINES_MAX entries, and unknown record types are
 * skipped by their size; debug information whose entries do not fill their record (up to its padding) or point
 * outside the code it is for is not used; everything skipped is counted.
 *
 * Ownership: the caller owns the parser (jitdump_parser_init / jitdump_parser_free). Not thread-safe.
 */
#ifndef HOSTPROF_JITDUMP_H
#define HOSTPROF_JITDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/jitsyms.h"

#include "src/base/hindex.h"

#define JITDUMP_MAGIC 0x4A695444u
#define JITDUMP_HEADER_MAX 4096		/* a larger file header is refused */
#define JITDUMP_RECORD_PREFIX_MAX (256u << 10)	/* most of one record jitdump_parse needs in memory */
#define JITDUMP_LINES_MAX 65536		/* debug entries kept for one piece of code */

enum jitdump_record {
	JITDUMP_CODE_LOAD = 0,
	JITDUMP_CODE_MOVE = 1,
	JITDUMP_CODE_DEBUG_INFO = 2,
	JITDUMP_CODE_CLOSE = 3,
	JITDUMP_CODE_UNWINDING_INFO = 4,
};

struct jitdump_stats {
	uint64_t records;	/* records read */
	uint64_t loads, moves;	/* code loads and moves added to the table */
	uint64_t debug_infos;	/* debug-information records used */
	uint64_t skipped;	/* records skipped: unknown type, oversized, debug information no load used */
	uint64_t refused;	/* loads and moves the table did not take (its limits), moves of unknown code */
};

struct jitdump_code;	/* private: code_index -> range */

struct jitdump_parser {
	bool have_header;
	bool closed;		/* JIT_CODE_CLOSE seen: nothing follows */
	int error;		/* the negative errno that stopped the parse, 0 while it goes on */
	uint32_t pid;		/* from the file header */
	/* the latest debug information, waiting for its code load */
	uint64_t debug_addr;
	struct jitsym_line *debug_lines;
	size_t ndebug;
	struct jitdump_code *codes;	/* code_index -> range index, in the order first loaded */
	size_t ncodes, cap_codes;
	struct hindex code_index;	/* by code_index: position in codes */
	struct jitdump_stats stats;
};

void jitdump_parser_init(struct jitdump_parser *p);
void jitdump_parser_free(struct jitdump_parser *p);

/*
 * Parse buf[0..len), the file from the parser's position on (the first call: from offset 0); file_left is how
 * many bytes the file holds from that position (>= len). Returns the bytes to advance the position by (a
 * record may end past len: its tail need not be read) — 0 when the next record is not complete in the file yet,
 * or its start is not all in buf (the caller reads from the new position and calls again; with at least
 * JITDUMP_RECORD_PREFIX_MAX bytes, or what is left of the file, in buf, the parse always moves on) — or a
 * negative errno when the file cannot be read further (-EINVAL not a jitdump file, -EPROTONOSUPPORT another
 * version, byte order or machine, -EBADMSG a corrupt record); p->error keeps it and later calls return it.
 */
int64_t jitdump_parse(struct jitdump_parser *p, struct jitsyms *t, const uint8_t *buf, size_t len,
		      uint64_t file_left);

#endif
