/*
 * log.c — the log sink. See log.h for the contract.
 */
#include "src/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "src/base/escape.h"

void log_write(const struct log_sink *sink, enum log_level level, const char *fmt, ...)
{
	char msg[LOG_MSG_MAX];
	va_list ap;
	if (!sink || !sink->write)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sink->write(sink->ctx, level, msg);
}

const char *log_level_name(enum log_level level)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	return (unsigned)level < sizeof(names) / sizeof(names[0]) ? names[level] : "debug";
}

void log_stderr_write(void *ctx, enum log_level level, const char *msg)
{
	static const int syslog_priorities[] = { 3, 4, 6, 7 };
	const struct log_stderr *to = ctx;
	char line[ESCAPE_SIZE(LOG_MSG_MAX)];
	if ((unsigned)level > LOG_LEVEL_DEBUG)
		level = LOG_LEVEL_DEBUG;
	if (to && level > to->max_level)
		return;
	escape_bytes(line, sizeof(line), msg, strlen(msg), ESCAPE_KEEP_BACKSLASH);
	/* one call: stderr is unbuffered, and one write keeps concurrent lines whole */
	if (to && to->journal)
		fprintf(stderr, "<%d>hostprof: %s\n", syslog_priorities[level], line);
	else
		fprintf(stderr, "hostprof: %s: %s\n", log_level_name(level), line);
}
