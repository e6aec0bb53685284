/*
 * profile_inputs.h — the profiles `report`, `convert` and `diff` read.
 *
 * Each argument is a profile file or a directory; a directory stands for its *.msgpack files in name order (a
 * daemon's output directory, say). profile_inputs_load() reads them all and merges them into one profile, which
 * the caller frees with profile_free(); no argument means PROFILE_INPUTS_DEFAULT. On any error it prints one line
 * "hostprof: ..." on stderr (the file and why) and returns a negative errno: a command exits 1 or 2 then, as its
 * man page says.
 */
#ifndef HOSTPROF_CMD_PROFILE_INPUTS_H
#define HOSTPROF_CMD_PROFILE_INPUTS_H

#include "src/profile/profile.h"

#define PROFILE_INPUTS_DEFAULT "hostprof.msgpack"

/* Returns 0 and *out, or a negative errno (-ENOENT: a file or directory missing, or a directory without profiles;
 * profile_read_file()'s and profile_merge()'s errors; -ENOMEM). *out is set only on success. */
int profile_inputs_load(char *const *args, int n, struct profile **out);

#endif
