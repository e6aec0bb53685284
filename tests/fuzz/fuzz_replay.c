/*
 * fuzz_replay.c — fuzz target: a replay file (captured samples and the files they ran in, hostprof-profile(5)
 * REPLAY FILES), as `hostprof replay` and the differential tests read it. A replay file may come from another
 * machine: the reader bounds every count and length, and the environment built from it (in-memory ELF images,
 * processes, mappings) must reject what does not fit.
 */
#include <stdint.h>

#include "src/processes/execinfo.h"
#include "src/pipeline/replay.h"
#include "tests/fuzz/fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	struct replay *r = NULL;
	int fd = fuzz_input_fd(data, size);
	if (fd < 0)
		return 0;
	fuzz_input_path(fd, path, sizeof(path));
	if (replay_read(path, &r, err, sizeof(err)) == 0) {
		struct execinfo_mgr *em = NULL;
		struct replay_env *env = NULL;
		if (execinfo_mgr_new(&em) == 0 && replay_env_new(r, em, &env) == 0)
			replay_env_free(env);
		execinfo_mgr_free(em);
		replay_free(r);
	}
	close(fd);
	return 0;
}
