/*
 * mem_usage.c — a process's memory from /proc/PID/status. See mem_usage.h for the contract.
 */
#include "src/base/mem_usage.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* "Name:   123 kB" lines: the value in bytes into *out when the line is name's. */
static void field(const char *line, const char *name, uint64_t *out, unsigned *found)
{
	size_t n = strlen(name);
	unsigned long long kb;
	if (strncmp(line, name, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%llu", &kb) == 1) {
		*out = (uint64_t)kb * 1024;
		(*found)++;
	}
}

int mem_usage_read(pid_t pid, struct mem_usage *out)
{
	char path[64], line[256];
	unsigned found = 0;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	memset(out, 0, sizeof(*out));
	while (fgets(line, sizeof(line), f)) {
		field(line, "VmRSS", &out->rss, &found);
		field(line, "RssAnon", &out->rss_anon, &found);
		field(line, "VmHWM", &out->hwm, &found);
	}
	fclose(f);
	return found == 3 ? 0 : -EPROTO;
}
