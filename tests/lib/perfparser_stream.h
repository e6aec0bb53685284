/*
 * perfparser_stream.h — a test-only reader of the stream hotspot's perfparser writes (`hotspot-perfparser --input
 * perf.data --output FILE`), so that tests can compare hostprof's reading of a perf.data file with perfparser's.
 * It is an oracle reader, not a product feature: only what the comparisons need is decoded (samples' frames and
 * the locations, symbols and strings that name them); every other event is skipped by its length.
 *
 * The format, as perfparser 4.12 (Debian 12's hotspot 1.3.0) writes it: the 12 bytes "QPERFSTREAM\0", a
 * little-endian int32 (the Qt data stream version), then events, each a little-endian uint32 length and that many
 * bytes serialized big-endian by QDataStream, starting with a uint8 event type. Decoded here:
 *   3 LocationDefinition: int32 id, uint64 address, int32 file, uint32 pid, int32 line, int32 column,
 *                         int32 parent (the location of the frame's function; an inlined function's location has
 *                         the call site's as its parent, whose parent is the caller's function), ...
 *   4 SymbolDefinition:   int32 location id, int32 name (a string id), int32 binary, int32 path, bool kernel, ...
 *   5 StringDefinition:   int32 id, QByteArray (uint32 length, 0xffffffff for null, then the bytes)
 *  13 Sample:             int32 pid, int32 tid, uint64 time, uint32 cpu, QVector<int32> frames (location ids,
 *                         leaf first), uint8 guessed frames, QVector<QPair<int32, uint64>> values
 * Definitions precede their use. Later perfparser versions append fields to definitions (tolerated: the rest of
 * the event is skipped); a sample must be exactly the layout above, else the read fails saying so.
 *
 * Ownership: perfparser_stream_read() returns a handle the caller frees with perfparser_stream_free(); names
 * returned by perfparser_stream_functions() live as long as the handle. Errors: -errno, with a one-line message
 * in err naming the offset (-EINVAL for a malformed or over-large stream, -EFBIG for a file over 1 GiB).
 * Untrusted input: every length and count is checked against the bytes left; ids are bounded (2^24) before any
 * table grows; a frame's inline chain is followed at most 64 steps.
 */
#ifndef HOSTPROF_TESTS_PERFPARSER_STREAM_H
#define HOSTPROF_TESTS_PERFPARSER_STREAM_H

#include <stddef.h>

struct perfparser_stream;

int perfparser_stream_read(const char *path, struct perfparser_stream **out, char *err, size_t errlen);
void perfparser_stream_free(struct perfparser_stream *s);

/* The number of samples in the stream. */
size_t perfparser_stream_samples(const struct perfparser_stream *s);
/*
 * The function names of sample i, leaf first, inline frames expanded (the inlined function before its caller); a
 * frame perfparser could not name is "??". Names are perfparser's: an inlined function's is qualified by the
 * scope perfparser found it in ("caller::inlined"). Fills at most max names; returns how many the stack has.
 */
size_t perfparser_stream_functions(const struct perfparser_stream *s, size_t i, const char **names, size_t max);

#endif
