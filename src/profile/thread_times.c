/*
 * thread_times.c — wall-clock time per thread. See thread_times.h.
 */
#include "src/profile/thread_times.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "src/base/escape.h"

static int compare_by_thread(const void *a, const void *b)
{
	const struct thread_time *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return (x->thread_name > y->thread_name) - (x->thread_name < y->thread_name);
}

static int compare_by_wall(const void *a, const void *b)
{
	const struct thread_time *x = a, *y = b;
	uint64_t wx = x->cpu_ns + x->off_cpu_ns, wy = y->cpu_ns + y->off_cpu_ns;
	if (wx != wy)
		return wx > wy ? -1 : 1;
	return compare_by_thread(a, b);
}

int thread_times_get(const struct profile *p, bool filter_pid, int32_t pid, struct thread_time **out,
		     uint32_t *n)
{
	struct thread_time *t = malloc((p->samples.count ? p->samples.count : 1) * sizeof(*t));
	uint32_t k = 0;
	if (!t)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		if (filter_pid && s->pid != pid)
			continue;
		t[k++] = (struct thread_time){ s->pid, s->tid, s->comm, s->thread_name,
					       profile_sample_value(p, s, PROFILE_VALUE_CPU), s->off_cpu_ns,
					       s->preempted_ns };
	}
	qsort(t, k, sizeof(*t), compare_by_thread);
	uint32_t m = 0;
	for (uint32_t i = 0; i < k; i++) {
		if (m && compare_by_thread(&t[m - 1], &t[i]) == 0) {
			t[m - 1].cpu_ns += t[i].cpu_ns;
			t[m - 1].off_cpu_ns += t[i].off_cpu_ns;
			t[m - 1].preempted_ns += t[i].preempted_ns;
		} else {
			t[m++] = t[i];
		}
	}
	qsort(t, m, sizeof(*t), compare_by_wall);
	*out = t;
	*n = m;
	return 0;
}

static double share(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

int thread_times_print(const struct profile *p, const struct thread_time *t, uint32_t n, FILE *out)
{
	fprintf(out, "Wall time per thread (on CPU + off CPU):\n");
	fprintf(out, "     Wall ms     CPU%%  Blocked%%  Preempted%%  Thread\n");
	char name[ESCAPE_SHOWN_MAX], comm[ESCAPE_SHOWN_MAX];
	for (uint32_t i = 0; i < n; i++) {
		uint64_t wall = t[i].cpu_ns + t[i].off_cpu_ns, blocked = t[i].off_cpu_ns - t[i].preempted_ns;
		fprintf(out, "%12.1f  %6.2f%%   %6.2f%%     %6.2f%%  %" PRId32 " \"%s\" of process %" PRId32 " \"%s\"\n",
			(double)wall / 1e6, share(t[i].cpu_ns, wall), share(blocked, wall),
			share(t[i].preempted_ns, wall), t[i].tid,
			escape_str(name, sizeof(name), profile_string(p, t[i].thread_name)), t[i].pid,
			escape_str(comm, sizeof(comm), profile_string(p, t[i].comm)));
	}
	return ferror(out) ? -EIO : 0;
}
