/* proc_threads.c — see proc_threads.h. */
#include "proc_threads.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

int proc_list_threads(pid_t pid, pid_t *tids, unsigned max, unsigned *n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	struct dirent *de;
	*n = 0;
	while ((de = readdir(d)) && *n < max) {
		long tid = strtol(de->d_name, NULL, 10);
		if (tid > 0)
			tids[(*n)++] = (pid_t)tid;
	}
	closedir(d);
	return 0;
}

/* The last pid of an "NSpid:" line's list (the innermost namespace's), or fallback. */
static pid_t innermost_pid(const char *list, pid_t fallback)
{
	pid_t last = fallback;
	for (const char *p = list; *p && *p != '\n';) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		last = (pid_t)v;
		p = end;
	}
	return last;
}

int proc_read_identity(pid_t pid, struct proc_identity *out)
{
	char path[64], line[256];
	int have = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	out->nspid = pid;	/* kernels before 4.1 have no NSpid line */
	while (have != 7 && fgets(line, sizeof(line), f)) {
		unsigned r, e, s, fs;
		if (sscanf(line, "State: %c", &out->state) == 1) {
			have |= 1;
		} else if (sscanf(line, "Uid: %u %u %u %u", &r, &e, &s, &fs) == 4) {
			out->ruid = r;
			out->euid = e;
			out->suid = s;
			out->fsuid = fs;
			have |= 2;
		} else if (strncmp(line, "NSpid:", 6) == 0) {
			out->nspid = innermost_pid(line + 6, pid);
			have |= 4;
		}
	}
	fclose(f);
	return (have & 3) == 3 ? 0 : -EINVAL;
}

int proc_read_stat_field(pid_t pid, unsigned field, uint64_t *out)
{
	char path[64], buf[1024], *end;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields 1 and 2 are the pid and "(comm)"; the name may hold blanks and parentheses, so count from its last. */
	const char *p = field > 2 ? strrchr(buf, ')') : NULL;
	for (unsigned i = 2; p && i < field; i++)
		p = strchr(p + 1, ' ');
	if (!p || p[1] < '0' || p[1] > '9')	/* a negative field (nice, tpgid) is not one */
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(p + 1, &end, 10);
	if (errno || (*end != ' ' && *end != '\n'))	/* cut short by the buffer, or not a number */
		return -EINVAL;
	*out = v;
	return 0;
}
