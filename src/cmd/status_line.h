/*
 * status_line.h — one line of live status on a terminal, rewritten in place: record's progress while it runs,
 * and report's and convert's while they read long inputs (profile_inputs.h).
 *
 * The line is shown only where a person watches it: when the stream is a terminal and the command was not asked
 * to be quiet. It is written as "\r" + text + erase-to-end-of-line, cut to the terminal's width (a line that
 * wrapped could not be rewritten in place), at most every STATUS_LINE_INTERVAL_MS, and erased by
 * status_line_clear() before the command prints anything else. The text is the caller's own (numbers), never
 * a string a process supplied.
 *
 * A zeroed or status_line_init()'ed struct is ready; nothing to free. Write errors are ignored: the status is a
 * courtesy, and the command's real output reports its own. Not thread-safe.
 */
#ifndef HOSTPROF_STATUS_LINE_H
#define HOSTPROF_STATUS_LINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define STATUS_LINE_INTERVAL_MS 500

struct status_line {
	FILE *out;
	bool on;		/* out is a terminal and the status is wanted */
	bool shown;		/* a line is on the screen, to erase */
	uint64_t last_ns;	/* CLOCK_MONOTONIC of the last line written */
};

void status_line_init(struct status_line *s, FILE *out, bool wanted);
/* Whether a new line is due at now_ns (CLOCK_MONOTONIC): the status is on and the interval has passed. */
bool status_line_due(const struct status_line *s, uint64_t now_ns);
/* Write text as the line (printf format), replacing the one shown. */
void status_line_show(struct status_line *s, uint64_t now_ns, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Erase the line, if one is shown. */
void status_line_clear(struct status_line *s);

/* The width of the terminal out is, in columns; 0 when out is not a terminal (or does not say). */
int status_line_columns(FILE *out);

#endif
