/*
 * container_id.c — a process's container id from its cgroup. See container_id.h.
 */
#include "src/processes/container_id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/read_file.h"

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Runtimes' monitors, whose cgroup names the container they watch but which run outside it. */
static bool is_monitor(const char *comp, size_t len)
{
	static const char *const monitors[] = { "libpod-conmon-", "crio-conmon-", "conmon-" };
	for (size_t i = 0; i < sizeof(monitors) / sizeof(monitors[0]); i++) {
		size_t n = strlen(monitors[i]);
		if (len >= n && memcmp(comp, monitors[i], n) == 0)
			return true;
	}
	return false;
}

/*
 * The id a path component comp[0..len) carries: 64 hex digits, alone or after a "<runtime>-" prefix (letters and
 * dashes), followed by the component's end or ".scope". Returns the digits' offset, or -1.
 */
static long component_id(const char *comp, size_t len)
{
	size_t start = 0, rest;
	for (size_t i = 0; i < len && comp[i] != '.'; i++) {
		if (comp[i] == '-')
			start = i + 1;
	}
	for (size_t i = 0; i < start; i++) {
		if (comp[i] != '-' && (comp[i] < 'a' || comp[i] > 'z'))
			return -1;
	}
	if (len - start < CONTAINER_ID_LEN || is_monitor(comp, start))
		return -1;
	for (size_t i = start; i < start + CONTAINER_ID_LEN; i++) {
		if (!is_hex(comp[i]))
			return -1;
	}
	rest = len - start - CONTAINER_ID_LEN;
	if (rest != 0 && !(rest == 6 && memcmp(comp + start + CONTAINER_ID_LEN, ".scope", 6) == 0))
		return -1;
	return (long)start;
}

/* The innermost id of the line's path (after "hierarchy:controllers:"), or -1: its offset in line. */
static long line_id(const char *line, size_t len)
{
	const char *c1 = memchr(line, ':', len), *c2;
	long found = -1;
	if (!c1 || !(c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line))))
		return -1;
	for (size_t pos = (size_t)(c2 + 1 - line); pos < len;) {
		const char *slash = memchr(line + pos, '/', len - pos);
		size_t end = slash ? (size_t)(slash - line) : len;
		long at = component_id(line + pos, end - pos);
		if (at >= 0)
			found = (long)pos + at;
		pos = end + 1;
	}
	return found;
}

bool container_id_parse(const char *text, size_t len, char out[CONTAINER_ID_LEN + 1])
{
	out[0] = '\0';
	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		long at = line_id(text + pos, end - pos);
		if (at >= 0) {
			memcpy(out, text + pos + at, CONTAINER_ID_LEN);
			out[CONTAINER_ID_LEN] = '\0';
			return true;
		}
		pos = end + 1;
	}
	return false;
}

int container_id_read(pid_t pid, char out[CONTAINER_ID_LEN + 1])
{
	char path[64];
	uint8_t *buf;
	size_t len;
	int fd, err;
	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	err = read_fd_all(fd, CONTAINER_ID_CGROUP_MAX, &buf, &len);
	close(fd);
	if (err < 0)
		return err;
	err = container_id_parse((const char *)buf, len, out);
	free(buf);
	return err;
}
