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
#include "tests/fuzz/fuzz_records.h"

/* The sample fields hostprof asks for; the fuzzer picks any subset. */
#define FUZZ_SAMPLE_BITS                                                                                            \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |                \
	 PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER | PERF_SAMPLE_ID |                 \
	 PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_IDENTIFIER)

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
		fuzz_decode_record(&l, (const struct perf_event_header *)record);
		off += h.size;
	}
	return 0;
}
