/*
 * escape.h — make a string a process supplied safe to print: one line, no terminal control, valid UTF-8.
 *
 * Service names, environments, comm, paths, mapping names and socket paths come from processes hostprof does
 * not trust (the daemon runs as root and reads hostile processes). Printed as they are, a "\n<0>" in one forges
 * an emergency-priority journal line, and an ESC sequence drives the terminal that reads the log. Every such
 * string goes through escape_bytes() (or escape_str()) before it is put into a log message or printed, and the
 * log sinks pass each whole message through escape_bytes(ESCAPE_KEEP_BACKSLASH) once more (log.h), so a string
 * a caller forgot to escape still cannot break a line.
 *
 * What is escaped, byte for byte of the input:
 *   - "\n", "\r", "\t" as those two characters; other C0 controls, DEL as "\xNN"
 *   - "\" as "\\" (so an escaped string reads back unambiguously), unless ESCAPE_KEEP_BACKSLASH
 *   - a byte that does not start a valid UTF-8 sequence (overlong forms, surrogates and code points past
 *     U+10FFFF are not valid) as "\xNN"
 *   - valid UTF-8 sequences that control text rather than show it — C1 controls (U+0080..U+009F: U+009B is a
 *     CSI on some terminals), the line and paragraph separators U+2028/U+2029 and the bidirectional overrides
 *     and isolates (U+202A..U+202E, U+2066..U+2069) — each of their bytes as "\xNN"
 * Everything else (printable ASCII, other valid multi-byte UTF-8) is copied unchanged.
 *
 * Output is bounded: at most size - 1 bytes and a NUL; an escape sequence or a UTF-8 character is never cut,
 * and output cut short ends in "..." (when size is at least 4). Pure functions: no allocation, thread-safe.
 */
#ifndef HOSTPROF_BASE_ESCAPE_H
#define HOSTPROF_BASE_ESCAPE_H

#include <stddef.h>

/* Leave backslashes alone: for a whole message whose process-supplied parts were escaped already. */
#define ESCAPE_KEEP_BACKSLASH 1u

/* Escape s[0..len) into out[0..size) (see above). Returns the length written, without the NUL; 0 when size is
 * 0 (out untouched then). */
size_t escape_bytes(char *out, size_t size, const void *s, size_t len, unsigned flags);

/* The NUL-terminated s escaped into buf[0..size), for use as a printf argument: returns buf. NULL prints as
 * "(null)". */
const char *escape_str(char *buf, size_t size, const char *s);

/* Room for a string of up to n bytes escaped whole: the worst case is 4 output bytes per input byte. */
#define ESCAPE_SIZE(n) (4 * (n) + 1)

/* A buffer for one short string escaped to be shown (a thread or host name): longer ones end in "...". */
#define ESCAPE_SHOWN_MAX 1024

#endif
