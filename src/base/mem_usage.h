/*
 * mem_usage.h — how much memory a process holds, as the kernel counts it (/proc/PID/status).
 *
 * For memory budgets and for tests that check memory comes back. Errors: negative errno (-ENOENT: the process is
 * gone, -EPROTO: the field is missing, as on kernels before 4.5 for RssAnon).
 */
#ifndef HOSTPROF_MEM_USAGE_H
#define HOSTPROF_MEM_USAGE_H

#include <stdint.h>
#include <sys/types.h>

struct mem_usage {
	uint64_t rss;		/* VmRSS: resident bytes */
	uint64_t rss_anon;	/* RssAnon: resident anonymous bytes (the heap and private mappings: what is ours) */
	uint64_t hwm;		/* VmHWM: the peak of rss */
};

/* pid's usage (0: this process). Returns 0 or a negative errno. */
int mem_usage_read(pid_t pid, struct mem_usage *out);

#endif
