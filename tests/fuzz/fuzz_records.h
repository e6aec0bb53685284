/*
 * fuzz_records.h — what the perf-record fuzz targets share: one record decoded as the session decodes it, every
 * field the decoders hand out touched, so that a bound one of them misses shows under the sanitizers. Header-only
 * so that each target stays one file.
 */
#ifndef HOSTPROF_FUZZ_RECORDS_H
#define HOSTPROF_FUZZ_RECORDS_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>

#include "src/sampling/perf_record.h"

static inline void fuzz_decode_record(const struct perf_layout *l, const struct perf_event_header *h)
{
	struct perf_sample s;
	struct perf_mmap2 m;
	struct perf_comm c;
	struct perf_task t;
	struct perf_lost lost;
	uint64_t n;
	switch (h->type) {
	case PERF_RECORD_SAMPLE:
		if (perf_decode_sample(l, h, &s) == 0) {
			const uint64_t *k, *u;
			size_t nk, nu;
			perf_callchain_kernel(&s, &k, &nk);
			perf_callchain_user(&s, &u, &nu);
			volatile uint64_t sink = nk ? k[nk - 1] : 0;
			sink = nu ? u[nu - 1] : 0;
			if (s.stack && s.stack_size)
				sink = s.stack[s.stack_size - 1];
			(void)sink;
		}
		break;
	case PERF_RECORD_MMAP2:
		if (perf_decode_mmap2(h, &m) == 0)
			(void)strlen(m.filename);
		break;
	case PERF_RECORD_COMM:
		if (perf_decode_comm(h, &c) == 0)
			(void)strlen(c.comm);
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		perf_decode_task(h, &t);
		break;
	case PERF_RECORD_LOST:
		perf_decode_lost(h, &lost);
		break;
	case PERF_RECORD_LOST_SAMPLES:
		perf_decode_lost_samples(h, &n);
		break;
	}
}

#endif
