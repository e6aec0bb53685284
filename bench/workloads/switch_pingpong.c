/*
 * switch_pingpong — a context-switch-heavy workload for the off-CPU benchmark (bench/run-bench, section 10).
 * Usage: switch_pingpong ROUNDTRIPS [WORK_US]
 * Two threads pass a byte back and forth through two pipes ROUNDTRIPS times, each doing WORK_US microseconds of
 * work (default 10) before it answers: every hand-over blocks one thread in read and wakes the other, some 50 000
 * switches a second on a 2-CPU machine. At the end it prints on stdout
 *   switches=N wall=SECONDS cpu=SECONDS
 * (its context switches, voluntary and not, from getrusage; its wall and CPU time), so a profiler's cost can be
 * told apart from the workload's.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int ping[2], pong[2];
static long roundtrips;
static uint64_t work_ns = 10000;
static volatile uint64_t sink;

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noipa)) static void work(void)
{
	uint64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + work_ns, x = sink;
	while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end)
		for (int i = 0; i < 100; i++)
			x = x * 2862933555777941757ULL + 3037000493ULL;
	sink = x;
}

__attribute__((noipa)) static void *answer(void *arg)
{
	char c;
	(void)arg;
	for (long i = 0; i < roundtrips; i++) {
		if (read(ping[0], &c, 1) != 1)
			break;
		work();
		if (write(pong[1], &c, 1) != 1)
			break;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	char c = 'x';
	roundtrips = argc > 1 ? atol(argv[1]) : 50000;
	if (argc > 2)
		work_ns = (uint64_t)atol(argv[2]) * 1000;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	if (pipe(ping) < 0 || pipe(pong) < 0 || pthread_create(&t, NULL, answer, NULL) != 0)
		return 1;
	for (long i = 0; i < roundtrips; i++) {
		work();
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
			break;
	}
	pthread_join(t, NULL);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("switches=%ld wall=%.3f cpu=%.3f\n", ru.ru_nvcsw + ru.ru_nivcsw,
	       (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9,
	       ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	return 0;
}
