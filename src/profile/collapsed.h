/*
 * collapsed.h — Brendan Gregg's collapsed ("folded") stacks, for flamegraph.pl, inferno, speedscope and the
 * Firefox Profiler.
 *
 * One line per distinct (process name, stack text): "comm;root;...;leaf COUNT", root first, inlined functions
 * expanded outer before inner, frame names as frame_name.h gives them with the _[k]/_[i] suffixes. Process and
 * frame names are escaped as src/base/escape.h says (FRAME_NAME_ESCAPED: no control byte, valid UTF-8, "\" as
 * "\\"): the output is text a terminal may show, and those names come from the processes profiled. Samples of
 * different threads (and different stacks that print the same) are merged. Lines are sorted bytewise, so the
 * output is deterministic. With stack_ids, each line starts with the stack-trace ID, base64url without padding
 * (22 characters, as Elastic shows it), and a space: "ID comm;...;leaf COUNT".
 *
 * collapsed_write() only reads p. Returns 0, -ENOMEM, or -EIO when writing to out fails.
 */
#ifndef HOSTPROF_COLLAPSED_H
#define HOSTPROF_COLLAPSED_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "src/profile/profile.h"

struct collapsed_options {
	bool stack_ids;		/* prefix each line with its stack-trace ID */
	enum profile_value value;	/* what a line counts: samples (the default), or a time (enum profile_value)
					 * in whole microseconds, so a flame graph of wall time reads as wall time */
};

/* o may be NULL for the defaults. */
int collapsed_write(const struct profile *p, FILE *out, const struct collapsed_options *o);

/* The 16-byte ID as base64url without padding into out (at least 23 bytes). */
void collapsed_stack_id(const uint8_t id[16], char *out);

#endif
