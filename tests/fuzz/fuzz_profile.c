/*
 * fuzz_profile.c — fuzz target: a profile file someone hands to `hostprof report/convert/diff`. The reader must
 * reject anything malformed (indices out of range, bad lengths, wrong types) so that every writer after it can
 * trust the model: the target reads the input, then renders it every way hostprof can.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/profile/collapsed.h"
#include "src/profile/pprof.h"
#include "src/profile/profile.h"
#include "src/profile/report.h"
#include "src/profile/speedscope.h"
#include "tests/fuzz/fuzz_input.h"

static void render(const struct profile *p)
{
	FILE *null = fopen("/dev/null", "w");
	if (!null)
		return;
	struct report_options tree = { .tree = true, .per_thread = true, .sort = REPORT_SORT_TOTAL,
				       .percent_limit = 0.0 };
	struct collapsed_options ids = { .stack_ids = true };
	report_print(p, null, NULL);
	report_print(p, null, &tree);
	collapsed_write(p, null, &ids);
	speedscope_write(p, null, NULL);
	uint8_t *buf = NULL;
	size_t len = 0;
	if (pprof_encode(p, &buf, &len) == 0)
		free(buf);
	fclose(null);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	struct profile *p = NULL;
	int fd = fuzz_input_fd(data, size);
	if (fd < 0)
		return 0;
	fuzz_input_path(fd, path, sizeof(path));
	if (profile_read_file(path, &p, err, sizeof(err)) == 0) {
		render(p);
		profile_free(p);
	}
	close(fd);
	return 0;
}
