/*
 * log.c — the log sink. See log.h for the contract.
 */
#include "src/base/log.h"

#include <stdarg.h>
#include <stdio.h>

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
