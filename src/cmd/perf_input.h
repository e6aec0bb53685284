/*
 * perf_input.h — a perf.data file read as a profile: what `report`, `convert` and `diff` do with an argument that
 * starts with perf's magic (profile_inputs.h).
 *
 * The file's records (src/sampling/perf_data.h) feed an offline session (session.h: session_options.offline) through
 * the event loop `record` uses, so its samples are unwound by the same walk as live ones (dwarf samples: their
 * registers and stack copy; frame-pointer samples: the kernel's chain); then the session's traces become the
 * profile, its info from the file's header (host, kernel, event, frequency, times). Nothing is read of the
 * processes, which are gone: mappings come from the file's MMAP and MMAP2 records, and each mapped file is
 * opened by its path checked against the build-id the file recorded for it, then from perf's build-id cache
 * (~/.debug/.build-id/xx/yyyy/elf), then under --symfs DIR first when given. A file missing or of another build
 * is said once, on stderr, with the samples taken in it; its frames are located in it by their offsets in the file
 * (procmgr.h: execinfo_acquire_unread()), unnamed, never another build's names. A file's sched:sched_switch
 * samples are off-CPU samples (perf_data.h): the session counts them as record --off-cpu does, with its default
 * threshold and no rate cap, into each sample's off-CPU value.
 *
 * What is said on stderr, unless quiet: one line of what was read (samples of which event, from which perf and host,
 * the switch-outs read as off-CPU time and where their switch-ins came from, records used and not used by type), a
 * truncated file's warning. A corrupt file is an error naming its offset.
 */
#ifndef HOSTPROF_CMD_PERF_INPUT_H
#define HOSTPROF_CMD_PERF_INPUT_H

#include <stdbool.h>

#include "src/profile/profile.h"

struct perf_input_options {
	const char *symfs;	/* look for the mapped files under this directory first; NULL or "": not */
	bool quiet;		/* no summary line (warnings and errors still) */
};

/* Whether path starts with perf.data's magic ("PERFILE2"). */
bool perf_input_is_perf_data(const char *path);

/* Read path into a new profile. Returns 0 and *out, or a negative errno with a line on stderr. */
int perf_input_load(const char *path, const struct perf_input_options *o, struct profile **out);

#endif
