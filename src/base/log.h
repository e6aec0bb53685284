/*
 * log.h — the log sink: where a library or the engine sends its log lines, supplied by the command.
 *
 * No library and no part of the engine prints to stderr by itself: what it has to say goes to the struct log_sink
 * its caller passed in, with a level, and the command decides what to print and how (the daemon filters by its
 * --log-level and prefixes journald priorities; record prints warnings, and the rest unless --quiet). A sink
 * whose write is NULL drops everything.
 *
 * Messages are one line, without the program name or a trailing newline; strings a process supplied are escaped
 * by whoever puts them into a message (escape.h). log_write() formats into a bounded buffer (a longer message is
 * cut). Thread-safe as far as the sink's write is.
 *
 * The program's one printing sink is log_stderr_write(): every command's log lines go through it, so they all
 * have the same form and the same guarantee — the whole message is escaped once more (escape.h,
 * ESCAPE_KEEP_BACKSLASH) before it is printed, so nothing in it can end the line, forge a journald priority or
 * reach the terminal as a control sequence, whatever a caller forgot to escape.
 */
#ifndef HOSTPROF_BASE_LOG_H
#define HOSTPROF_BASE_LOG_H

enum log_level { LOG_LEVEL_ERROR, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

struct log_sink {
	void (*write)(void *ctx, enum log_level level, const char *msg);
	void *ctx;
};

/* Most bytes of one message, its terminating NUL included. */
#define LOG_MSG_MAX 1024

/* Format a message and hand it to sink (NULL, or a NULL write: nothing). */
__attribute__((format(printf, 3, 4))) void log_write(const struct log_sink *sink, enum log_level level,
						     const char *fmt, ...);

/* "error", "warning", "info" or "debug". */
const char *log_level_name(enum log_level level);

/* Where log_stderr_write() prints, and what. */
struct log_stderr {
	enum log_level max_level;	/* lines of a higher (more verbose) level are dropped */
	int journal;			/* stderr goes to journald: "<N>hostprof: msg" with N the syslog priority
					 * (3 error, 4 warning, 6 info, 7 debug) instead of "hostprof: level: msg" */
};

/* A struct log_sink write for ctx = a struct log_stderr: the message escaped, as one line on stderr. */
void log_stderr_write(void *ctx, enum log_level level, const char *msg);

#endif
