/*
 * status_line.c — the live status line. See status_line.h.
 */
#include "src/cmd/status_line.h"

#include <stdarg.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Erase from the cursor to the end of the line (ECMA-48 EL). */
#define ERASE_LINE "\033[K"

void status_line_init(struct status_line *s, FILE *out, bool wanted)
{
	*s = (struct status_line){ .out = out, .on = wanted && out && isatty(fileno(out)) };
}

bool status_line_due(const struct status_line *s, uint64_t now_ns)
{
	/* A little early is fine: the loop that asks wakes about every interval, not exactly at it. */
	return s->on && (!s->last_ns || now_ns - s->last_ns >= (uint64_t)STATUS_LINE_INTERVAL_MS * 900000);
}

int status_line_columns(FILE *out)
{
	struct winsize w;
	if (isatty(fileno(out)) && ioctl(fileno(out), TIOCGWINSZ, &w) == 0)
		return w.ws_col;
	return 0;
}

void status_line_show(struct status_line *s, uint64_t now_ns, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	if (!s->on)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	int cols = status_line_columns(s->out);
	int width = (cols > 0 ? cols : 80) - 1;	/* the last column would wrap on some terminals */
	fprintf(s->out, "\r%.*s" ERASE_LINE, width > 0 ? width : 0, text);
	fflush(s->out);
	s->shown = true;
	s->last_ns = now_ns;
}

void status_line_clear(struct status_line *s)
{
	if (!s->shown)
		return;
	fputs("\r" ERASE_LINE, s->out);
	fflush(s->out);
	s->shown = false;
}
