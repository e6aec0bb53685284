/*
 * profile_inputs.h — the profiles `report`, `convert` and `diff` read.
 *
 * Each argument is a profile file, a perf.data file (recognised by its magic, "PERFILE2", read through
 * perf_input.h with po's options; po may be NULL) or a directory; a directory stands for its *.msgpack files in name order (a
 * daemon's output directory, say), those that are no regular file (a FIFO, a device) left out with a warning on
 * stderr; a file argument that is no regular file is an error (profile_read_file() refuses it without
 * blocking). profile_inputs_load() reads them all and merges them into one profile, which
 * the caller frees with profile_free(); no argument means PROFILE_INPUTS_DEFAULT. With progress, when stderr is
a terminal and reading takes over PROFILE_INPUTS_PROGRESS_AFTER_MS, a status line (status_line.h) says how far
it is: profiles merged of how many, bytes read of the total; erased before the function returns. On any error it prints one line
 * "hostprof: ..." on stderr (the file and why) and returns a negative errno: a command exits 1 or 2 then, as its
 * man page says.
 */
#ifndef HOSTPROF_CMD_PROFILE_INPUTS_H
#define HOSTPROF_CMD_PROFILE_INPUTS_H

#include <stdbool.h>

#include "src/cmd/perf_input.h"
#include "src/profile/profile.h"

#define PROFILE_INPUTS_DEFAULT "hostprof.msgpack"
/* Inputs read faster than this show no progress: a line that flashes by tells nothing. */
#define PROFILE_INPUTS_PROGRESS_AFTER_MS 1000

/* Returns 0 and *out, or a negative errno (-ENOENT: a file or directory missing, or a directory without profiles;
 * profile_read_file()'s and profile_merge()'s errors, -EOVERFLOW when the samples of all add up past
 * PROFILE_VALUE_MAX; -ENOMEM). *out is set only on success. */
int profile_inputs_load(char *const *args, int n, const struct perf_input_options *po, bool progress,
			struct profile **out);

#endif
