/* proc_threads.c — see proc_threads.h. */
#include "proc_threads.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
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
