/*
 * fuzz_perf_data.c — fuzz target: a perf.data file (src/sampling/perf_data.h), header, attributes, feature
 * sections and data section, read to its end as `hostprof report perf.data` reads it, each record delivered
 * decoded as the session decodes it. perf.data files come from anywhere (another machine, a bug report): every
 * offset, size and count in them must be checked against the file before it is used, the compressed stream's
 * records (perf record -z) as much as the plain ones.
 *
 * Input: the file's bytes. Seeds: small files perf records (tests/fuzz/run-fuzz, test_fuzz_targets).
 */
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>

#include "src/sampling/perf_data.h"
#include "src/sampling/perf_record.h"
#include "tests/fuzz/fuzz_records.h"

static int on_record(void *ctx, const struct perf_event_header *h, const struct record_origin *origin)
{
	(void)ctx;
	fuzz_decode_record(origin->layout, h);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perf_data *pd;
	struct record_source src;
	char err[512], counts[1024];
	if (perf_data_open_mem(data, size, "fuzz", &pd, err, sizeof(err)) < 0)
		return 0;
	perf_data_source(pd, &src);
	for (int i = 0; i < 1000000 && !perf_data_finished(pd); i++)
		if (src.drain(src.impl, on_record, NULL) < 0)
			break;
	perf_data_format_counts(pd, true, counts, sizeof(counts));
	perf_data_format_counts(pd, false, counts, sizeof(counts));
	(void)perf_data_build_id(pd, 1, "/bin/true");
	(void)strlen(perf_data_info(pd)->event);
	(void)strlen(perf_data_error(pd));
	perf_data_free(pd);
	return 0;
}
