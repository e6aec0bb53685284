/*
 * clock.c — the clocks in nanoseconds. See clock.h for the contract.
 */
#include "src/base/clock.h"

uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	if (clock_gettime(id, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * CLOCK_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t clock_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}
