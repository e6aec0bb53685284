/*
 * event_loop.c — wait, drain, tick: the loop both commands share (event_loop.h).
 */
#include "src/pipeline/event_loop.h"

int event_loop_turn(const struct record_source *src, struct session *s, int timeout_ms, struct pollfd *extra,
		    unsigned n)
{
	if (src->wait && timeout_ms > 0)
		src->wait(src->impl, timeout_ms, extra, n);
	else if (n && timeout_ms > 0)
		poll(extra, n, timeout_ms);	/* a source always ready: only the caller's descriptors wait */
	src->drain(src->impl, session_handle_record, s);
	return session_tick(s);
}

void event_loop_end(const struct record_source *src, struct session *s)
{
	if (src->stop)
		src->stop(src->impl);
	src->drain(src->impl, session_handle_record, s);
	session_finish(s);
}
