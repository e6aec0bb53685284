/*
 * frame_name.h — how hostprof names a frame when it prints one (report, collapsed stacks).
 *
 * A location holds one line per function inlined at that address (innermost first) or none when unsymbolized.
 * The name of line j is:
 *   - error frames (frame_kind & PROFILE_FRAME_ERROR): their function name, "[truncated]" or "[unknown]";
 *   - symbolized frames: the function name;
 *   - unsymbolized native frames: "libname+0xADDR", the basename of the mapping's file and the ELF virtual
 *     address in hex; kernel frames "[kernel]+0xOFFSET"; JIT code nothing names "[jit]+0xADDR" (its runtime
 *     address); frames in no mapping "[unknown]".
 * With FRAME_NAME_SUFFIX, kernel frames get "_[k]", JIT frames "_[j]" and inlined lines (all but a location's
 * last, physical one) get "_[i]", the annotations flamegraph.pl and stackcollapse-perf.pl use. With
 * FRAME_NAME_COLLAPSED, ';' becomes ':' and line breaks are dropped so a name fits a collapsed-stack line. With
 * FRAME_NAME_ESCAPED, text a profile holds (names, files) is escaped for a terminal as escape.h says: a profile
 * is read from a file, and its names come from the processes profiled.
 *
 * Names are appended to a frame_buf, which grows as needed (-ENOMEM on failure). Not thread-safe per buffer.
 */
#ifndef HOSTPROF_FRAME_NAME_H
#define HOSTPROF_FRAME_NAME_H

#include <stddef.h>
#include <stdint.h>

#include "src/profile/profile.h"

enum frame_name_flags {
	FRAME_NAME_SUFFIX = 1,		/* _[k] kernel, _[i] inlined */
	FRAME_NAME_COLLAPSED = 2,	/* no ';' and no line breaks */
	FRAME_NAME_ESCAPED = 4,		/* no terminal control, valid UTF-8, one line (escape.h) */
};

/* A growable, always NUL-terminated string. Zero-initialise; frame_buf_free() when done. */
struct frame_buf {
	char *s;
	size_t len, cap;
};

int frame_buf_append(struct frame_buf *b, const char *s, size_t n);
void frame_buf_free(struct frame_buf *b);

/* Append arbitrary text (a process name, say), made safe as FRAME_NAME_COLLAPSED and FRAME_NAME_ESCAPED ask when
 * flags has them. */
int frame_text_append(struct frame_buf *b, const char *s, unsigned flags);

/* Append the name of line `line` of location l (line is ignored when l has no lines). */
int frame_name_append(const struct profile *p, const struct profile_location *l, uint32_t line, unsigned flags,
		      struct frame_buf *b);

/* Append the basename of the file l is in: the mapping's file, "[kernel]" (or "[module]"), or "" for error
 * frames and frames in no mapping; escaped when flags has FRAME_NAME_ESCAPED. */
int frame_library_append(const struct profile *p, const struct profile_location *l, unsigned flags,
			 struct frame_buf *b);

/* The part of path after its last '/'. */
const char *frame_basename(const char *path);

#endif
