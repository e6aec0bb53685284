/*
 * perfmap.h — the perf map a JIT runtime writes for profilers: /tmp/perf-PID.map.
 *
 * One text line per piece of generated code, "START SIZE NAME": START and SIZE in hexadecimal (an optional
 * "0x", as HotSpot writes them), separated by spaces or tabs, NAME the rest of the line. V8 (node
 * --perf-basic-prof), HotSpot (-XX:+DumpPerfMapAtExit, jcmd Compiler.perfmap), CPython 3.12+ (-X perf) and
 * others write it; perf reads the same file. Runtimes append as they compile, so the file is parsed
 * incrementally: perfmap_parse() takes the bytes read so far and consumes the complete lines among them.
 *
 * Untrusted input (the profiled process writes the file): lines longer than PERFMAP_LINE_MAX are skipped
 * whole, malformed lines (bad numbers, zero size, a range that wraps, no name) are skipped, and both are
 * counted. Names go through jitsyms_add(), which bounds what the table keeps.
 *
 * Stateless but for the parser state, which the caller owns (zero-initialise it). Not thread-safe per state.
 */
#ifndef HOSTPROF_PERFMAP_H
#define HOSTPROF_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/jitsyms.h"

#define PERFMAP_LINE_MAX 4200	/* longest line read: a name of JITSYMS_NAME_MAX bytes and two numbers */

struct perfmap_stats {
	uint64_t lines;		/* complete lines seen */
	uint64_t symbols;	/* ranges added to the table */
	uint64_t malformed;	/* lines skipped: not START SIZE NAME, zero size, wrapping */
	uint64_t too_long;	/* lines skipped for being longer than PERFMAP_LINE_MAX */
	uint64_t refused;	/* well-formed lines the table did not take (its limits) */
};

struct perfmap_parser {
	bool skipping;		/* inside a line too long to keep: skip up to its end */
	struct perfmap_stats stats;
};

/*
 * Parse the complete lines at the start of buf[0..len) (the file from the position after what was consumed
 * before) into t. Returns the bytes consumed: up to and including the last '\n' — or, of a line longer than
 * PERFMAP_LINE_MAX that has no end yet, what was seen of it (the rest is skipped on the next calls). A caller
 * that passes at least PERFMAP_LINE_MAX bytes whenever the file has that many always makes progress.
 */
size_t perfmap_parse(struct perfmap_parser *p, struct jitsyms *t, const char *buf, size_t len);

/* Parse one line (without its '\n'): 0 and start, size, name (pointing into line), or -EINVAL. Exposed for tests. */
int perfmap_parse_line(const char *line, size_t len, uint64_t *start, uint64_t *size, const char **name,
		       size_t *name_len);

#endif
