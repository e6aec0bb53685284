/*
 * proc_threads.h — the thread ids of a live process, from /proc/PID/task.
 *
 * proc_list_threads() fills tids[0..*n) with at most max ids, in the directory's order; a process with more
 * threads than max yields the first max (callers open events per thread and catch later ones by inheritance or
 * a second pass). Nothing is allocated. Errors: negative errno from opendir (-ENOENT once the process is gone).
 *
 * proc_read_identity() reads what a command needs to say why a process cannot be profiled: its state (a zombie
 * has exited and only waits for its parent), its four uids and its pid in its own namespace, from
 * /proc/PID/status: one parser for the commands' words, the APM correlation's owner checks and the JIT files'
 * names. Errors: negative errno (-ENOENT once the process is
 * gone, -EINVAL for a status without those lines).
 *
 * proc_read_stat_field() reads one unsigned numeric field of /proc/PID/stat, numbered as proc(5) numbers them
 * (22: the start time in clock ticks, 28: the address the initial stack starts at), from 3 on: counted after the
 * command name, whose parentheses may hold anything. Errors: negative errno (-ENOENT once the process is gone,
 * -EINVAL for fields 1 and 2, a line without that field, or one that is not an unsigned number). A field the
 * kernel hides from the reader reads as 0.
 */
#ifndef HOSTPROF_BASE_PROC_THREADS_H
#define HOSTPROF_BASE_PROC_THREADS_H

#include <stdint.h>
#include <sys/types.h>

int proc_list_threads(pid_t pid, pid_t *tids, unsigned max, unsigned *n);

struct proc_identity {
	char state;		/* 'R', 'S', 'Z' (zombie), 'X' (dead), ... as in /proc/PID/status */
	uid_t ruid, euid, suid, fsuid;	/* real, effective, saved set, filesystem */
	pid_t nspid;		/* its pid in its own pid namespace (the last of NSpid), or pid */
};

int proc_read_identity(pid_t pid, struct proc_identity *out);

int proc_read_stat_field(pid_t pid, unsigned field, uint64_t *out);

#endif
