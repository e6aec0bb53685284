/*
 * event_loop.h — one turn of the pipeline: wait for a record source, drain it into the session, let the session
 * do its due work.
 *
 * Both commands run the same loop (record: one program, until it exits or -d passes; daemon: for ever, with its
 * profile and reload timers), and so does a perf.data file read as a profile (src/cmd/perf_input.h: a source always
 * ready, turned until it has delivered its last record): each asks event_loop_turn() to wait at most until its own next due time, with its
 * own descriptors (a target's pidfd, the reporter's eventfd) woken alongside the source's, then looks at those.
 * event_loop_end() stops the source and hands its last records to the session before session_finish().
 *
 * Nothing here costs a system call per sample: a turn is one wait (none for a source always ready) and one
 * drain of every record ready.
 *
 * Ownership: the source and the session are the caller's; extra is read and its revents written.
 * Errors: a turn returns the session's next due time in ms (-1: none), never an error: a source that cannot be
 * waited on (-EINTR: a signal) is drained all the same, the caller's stop flag deciding what comes next.
 */
#ifndef HOSTPROF_EVENT_LOOP_H
#define HOSTPROF_EVENT_LOOP_H

#include <poll.h>

#include "src/sampling/record_source.h"
#include "src/pipeline/session.h"

/* Wait up to timeout_ms (0: not at all) for src or one of extra[0..n), drain src into s, then session_tick().
 * Returns the ms until the session's next due work (-1: nothing due). */
int event_loop_turn(const struct record_source *src, struct session *s, int timeout_ms, struct pollfd *extra,
		    unsigned n);
/* No more records taken: stop src, drain what it has left into s, session_finish(). */
void event_loop_end(const struct record_source *src, struct session *s);

#endif
