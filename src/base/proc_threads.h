/*
 * proc_threads.h — the thread ids of a live process, from /proc/PID/task.
 *
 * proc_list_threads() fills tids[0..*n) with at most max ids, in the directory's order; a process with more
 * threads than max yields the first max (callers open events per thread and catch later ones by inheritance or
 * a second pass). Nothing is allocated. Errors: negative errno from opendir (-ENOENT once the process is gone).
 */
#ifndef HOSTPROF_BASE_PROC_THREADS_H
#define HOSTPROF_BASE_PROC_THREADS_H

#include <sys/types.h>

int proc_list_threads(pid_t pid, pid_t *tids, unsigned max, unsigned *n);

#endif
