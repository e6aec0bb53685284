/*
 * thread_times.h — where each thread's wall-clock time went: on CPU, blocked, preempted.
 *
 * A profile recorded with off-CPU time (record --off-cpu) tells, per thread, its CPU time (the CPU samples'
 * periods), its time blocked (off CPU having gone to sleep: I/O, locks, sleeps) and its time preempted (off CPU
 * while still runnable, waiting for a CPU). Their sum is the thread's wall-clock time while it was followed:
 * the shares a user compares with a stopwatch, which `report --wall` prints first.
 *
 * Only reads the profile. Errors: -ENOMEM, or -EIO when writing fails.
 */
#ifndef HOSTPROF_PROFILE_THREAD_TIMES_H
#define HOSTPROF_PROFILE_THREAD_TIMES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "src/profile/profile.h"

struct thread_time {
	int32_t pid, tid;
	uint32_t comm, thread_name;	/* string indices of p */
	uint64_t cpu_ns, off_cpu_ns, preempted_ns;	/* preempted_ns is part of off_cpu_ns */
};

/* The threads of p (of pid only, when filter_pid), by wall time (cpu + off-CPU), largest first. *out is
 * malloc'd (the caller frees it). */
int thread_times_get(const struct profile *p, bool filter_pid, int32_t pid, struct thread_time **out,
		     uint32_t *n);

/* The table: per thread its wall time and the shares of it on CPU, blocked and preempted. */
int thread_times_print(const struct profile *p, const struct thread_time *t, uint32_t n, FILE *out);

#endif
