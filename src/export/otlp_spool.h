/*
 * otlp_spool.h — the profiles waiting to be sent, in order, within a bound, on disk so that they outlive the
 * daemon.
 *
 * An export must lose nothing while its receiver is down, and keep nothing without limit: each request is
 * appended as one file in the spool directory (written whole, atomically: a crash leaves it complete or absent),
 * named by a sequence number so that the directory's order is the sending order, across restarts. Past max_bytes
 * the oldest go first, each said in the log. Without a directory (a one-shot record) the spool lives in memory,
 * with the same bound.
 *
 * Ownership: otlp_spool_push() takes data (malloc'd); otlp_spool_peek() hands out a copy the caller frees.
 * Threads: not thread-safe; the sender serializes its calls. Errors: negative errno; a spool file that vanished
 * or cannot be read is dropped with a log line, never retried for ever.
 */
#ifndef HOSTPROF_OTLP_SPOOL_H
#define HOSTPROF_OTLP_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/log.h"

struct otlp_spool;

/* dir: the spool directory (created 0700 if missing; its files from earlier runs are loaded, oldest first), or
 * NULL for memory only. max_bytes: the bound (0: none). Returns 0 and *out, or a negative errno. */
int otlp_spool_open(const char *dir, uint64_t max_bytes, const struct log_sink *log, struct otlp_spool **out);
void otlp_spool_close(struct otlp_spool *s);

/* Append a request (ownership of data taken, freed on every path). Older ones go first when the bound needs
 * room, but never the one being sent (peeked, not yet popped or released): when only it is left and there is
 * still no room, the new request is refused (-ENOSPC); one larger than the bound by itself too (-EFBIG).
 * Returns 0 or a negative errno. */
int otlp_spool_push(struct otlp_spool *s, uint8_t *data, size_t len);
/* The oldest request, now being sent: 0 and a malloc'd copy in *data (the caller frees), -ENOENT when empty. */
int otlp_spool_peek(struct otlp_spool *s, uint8_t **data, size_t *len);
/* The request being sent is done with (sent, or refused for good): removed. */
void otlp_spool_pop(struct otlp_spool *s);
/* The request being sent was not taken: it stays the oldest, to be sent again. */
void otlp_spool_release(struct otlp_spool *s);
unsigned otlp_spool_count(const struct otlp_spool *s);
uint64_t otlp_spool_bytes(const struct otlp_spool *s);
/* Requests dropped to stay within the bound since the start. */
uint64_t otlp_spool_dropped(const struct otlp_spool *s);

#endif
