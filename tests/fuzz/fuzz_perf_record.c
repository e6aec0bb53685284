/*
 * fuzz_perf_record.c — fuzz target: the records of a perf ring buffer, decoded as the sampler decodes them.
 * The kernel writes them, but a decoder that trusts sizes and counts is one bad layout away from reading past a
 * record: every field must be bounded by the record's own size.
 *
 * Input: 8 bytes choosing the sample layout (sample_type bits and sample_id_all), then records back to back,
 * each starting with its perf_event_header (misaligned or oversized headers end the input).
 */
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>

#include "src/sampling/perf_record.h"

/* The sample fields hostprof asks for; the fuzzer picks any subset. */
#define FUZZ_SAMPLE_BITS                                                                                            \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |                \
	 PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER | PERF_SAMPLE_ID |                 \
	 PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_IDENTIFIER)

static void decode_one(const struct perf_layout *l, const struct perf_event_header *h)
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
			const uint64_t *k;
			size_t nk;
			perf_callchain_kernel(&s, &k, &nk);
			volatile uint64_t sink = nk ? k[nk - 1] : 0;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Records in the ring are 8-aligned; the decoders may rely on it, so copy each into aligned memory. */
	static uint64_t record[65536 / 8];
	uint64_t choice;
	if (size < sizeof(choice))
		return 0;
	memcpy(&choice, data, sizeof(choice));
	struct perf_layout l = { .sample_type = choice & FUZZ_SAMPLE_BITS, .regs_mask = UNWIND_SAMPLE_REGS_MASK,
				 .sample_id_all = (int)(choice >> 63) };
	size_t off = sizeof(choice);
	while (size - off >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		memcpy(&h, data + off, sizeof(h));
		if (h.size < sizeof(h) || h.size > size - off)
			break;
		memcpy(record, data + off, h.size);
		decode_one(&l, (const struct perf_event_header *)record);
		off += h.size;
	}
	return 0;
}
