/*
 * tracepoint.c — the sched:sched_switch tracepoint's id and format from tracefs. See tracepoint.h.
 */
#include "src/tracepoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/read_file.h"

#define FORMAT_MAX (64u << 10)	/* a format file is ~2 KiB */
#define RAW_MAX 4096u		/* no tracepoint record is larger */

static const char *const tracefs_roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

/* "NAME;\toffset:N;\tsize:N;" right after a field's type: the field named name, if this line is it. */
static int parse_field_line(const char *line, const char *end, const char *name, struct tracepoint_field *f)
{
	char buf[256];
	size_t n = (size_t)(end - line);
	if (n >= sizeof(buf))
		return 0;
	memcpy(buf, line, n);
	buf[n] = '\0';
	char *semi = strchr(buf, ';'), *sp;
	if (!semi || strncmp(buf, "\tfield:", 7) != 0)
		return 0;
	*semi = '\0';
	sp = strrchr(buf, ' ');	/* the name is the last word before the ';' ("unsigned short common_type") */
	if (!sp || strcmp(sp + 1, name) != 0)
		return 0;
	unsigned off, size;
	const char *o = strstr(semi + 1, "offset:"), *s = strstr(semi + 1, "size:");
	if (!o || !s || sscanf(o, "offset:%u;", &off) != 1 || sscanf(s, "size:%u;", &size) != 1)
		return 0;
	if (off >= RAW_MAX || (size != 1 && size != 2 && size != 4 && size != 8))
		return -1;
	*f = (struct tracepoint_field){ (uint16_t)off, (uint16_t)size };
	return 1;
}

/* The field named name in text, or size 0; -1 when the line is there but out of range. */
static int find_field(const char *text, size_t len, const char *name, struct tracepoint_field *f)
{
	const char *p = text, *end = text + len;
	*f = (struct tracepoint_field){ 0, 0 };
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;
		int r = parse_field_line(p, line_end, name, f);
		if (r)
			return r < 0 ? -1 : 0;
		p = line_end + 1;
	}
	return 0;
}

int sched_switch_format_parse(const char *text, size_t len, struct sched_switch_format *out)
{
	if (find_field(text, len, "common_type", &out->common_type) < 0 ||
	    find_field(text, len, "prev_pid", &out->prev_pid) < 0 ||
	    find_field(text, len, "prev_state", &out->prev_state) < 0 ||
	    find_field(text, len, "next_pid", &out->next_pid) < 0)
		return -EBADMSG;
	if (out->common_type.size != 2 || !out->prev_pid.size || !out->prev_state.size)
		return -EBADMSG;
	return 0;
}

static int read_small(const char *path, uint8_t **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = read_fd_all(fd, FORMAT_MAX, buf, len);
	close(fd);
	return err;
}

static void explain(int err, const char *root, char *why, size_t whylen)
{
	if (err == -EACCES || err == -EPERM)
		snprintf(why, whylen, "cannot read %s/events/sched/sched_switch (off-CPU profiling needs root, or "
			 "CAP_PERFMON with read access to tracefs and kernel.perf_event_paranoid <= -1 for the "
			 "tracepoint's raw data)", root);
	else if (err == -ENOENT)
		snprintf(why, whylen, "no sched:sched_switch tracepoint: tracefs is not mounted at /sys/kernel/tracing "
			 "or /sys/kernel/debug/tracing, or the kernel was built without it");
	else
		snprintf(why, whylen, "cannot read %s/events/sched/sched_switch: %s", root, strerror(-err));
}

/* The id and format under one tracefs root. */
static int read_under(const char *root, struct sched_switch_format *out)
{
	char path[128];
	uint8_t *buf = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/events/sched/sched_switch/id", root);
	int err = read_small(path, &buf, &len);
	if (err < 0)
		return err;
	char num[32] = "";
	memcpy(num, buf, len < sizeof(num) - 1 ? len : sizeof(num) - 1);
	free(buf);
	char *e;
	unsigned long long id = strtoull(num, &e, 10);
	if (e == num || id > UINT32_MAX)
		return -EBADMSG;
	out->id = id;
	snprintf(path, sizeof(path), "%s/events/sched/sched_switch/format", root);
	if ((err = read_small(path, &buf, &len)) < 0)
		return err;
	err = sched_switch_format_parse((const char *)buf, len, out);
	free(buf);
	return err;
}

int sched_switch_format_read(struct sched_switch_format *out, char *why, size_t whylen)
{
	int err = -ENOENT;
	const char *root = tracefs_roots[0];
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < sizeof(tracefs_roots) / sizeof(tracefs_roots[0]); i++) {
		int e = read_under(tracefs_roots[i], out);
		if (e == 0)
			return 0;
		if (err == -ENOENT) {	/* the first root that exists explains best */
			err = e;
			root = tracefs_roots[i];
		}
	}
	if (err == -EBADMSG)
		snprintf(why, whylen, "%s/events/sched/sched_switch/format lacks common_type, prev_pid or prev_state",
			 root);
	else
		explain(err, root, why, whylen);
	return err;
}

int tracepoint_field_get(const uint8_t *raw, size_t raw_size, struct tracepoint_field f, uint64_t *out)
{
	*out = 0;
	if (!f.size || (size_t)f.offset + f.size > raw_size)
		return 0;
	switch (f.size) {
	case 1: *out = raw[f.offset]; break;
	case 2: { uint16_t v; memcpy(&v, raw + f.offset, 2); *out = v; break; }
	case 4: { uint32_t v; memcpy(&v, raw + f.offset, 4); *out = v; break; }
	default: memcpy(out, raw + f.offset, 8); break;
	}
	return 1;
}
