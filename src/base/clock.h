/*
 * clock.h — the clocks hostprof reads, in nanoseconds.
 *
 * The one place that turns a struct timespec into a count of nanoseconds: intervals and rate limits use the
 * monotonic clock, profile headers the real-time clock, and JIT map ages the boot-time clock (jitinfo.h).
 *
 * clock_gettime() can fail only for a clock the kernel does not have (CLOCK_BOOTTIME before Linux 2.6.39):
 * clock_ns() then returns 0, which callers treat as "unknown". Pure functions, thread-safe, no allocation;
 * on x86_64 Linux the read goes through the vDSO, no system call.
 */
#ifndef HOSTPROF_BASE_CLOCK_H
#define HOSTPROF_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define CLOCK_NS_PER_SEC 1000000000ULL

/* The clock id (CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, ...) now, in ns; 0 if it cannot be read. */
uint64_t clock_ns(clockid_t id);

/* clock_ns(CLOCK_MONOTONIC). */
uint64_t clock_mono_ns(void);

#endif
