/*
 * speedscope.h — export a profile as a speedscope JSON file (https://www.speedscope.app,
 * schema https://www.speedscope.app/file-format-schema.json), written with json-c.
 *
 * Layout: one "sampled" profile per thread, keyed by (pid, tid) and named "comm pid P / thread-name tid T",
 * ordered by pid then tid; activeProfileIndex is the busiest thread. All profiles share one frame table. A
 * frame is a function: its name (frame_name.h, without suffixes) and file (the function's source file, else
 * the library's basename, omitted when unknown); inlined functions are frames of their own. Samples list frame
 * indices root first (inline frames outer first). Stacks of a thread that print the same frames are merged,
 * and samples are ordered by their frame lists, so the "time order" view draws as a flame graph (the data is
 * aggregated: there is no time order to keep). Weights are CPU nanoseconds (unit "nanoseconds": the samples'
 * cpu_ns, or count x period); when the profile knows neither, sample counts (unit "none"). startValue is 0 and
 * endValue the sum of the weights. activeProfileIndex is left out when there is no profile.
 *
 * Names (frames, files, processes, threads) are escaped as src/base/escape.h says, as for a terminal: the file
 * is a viewer's input, shown and never joined on, and escaping keeps it valid JSON (UTF-8 only: a process name
 * with a stray 0xff byte would make the whole file unreadable) and keeps bidirectional overrides and other
 * controls from disguising a name on screen. pprof (pprof.h) keeps them as they are: its names are data that
 * tools join with symbol tables and sources.
 *
 * Only reads p. Returns 0, -ENOMEM, or -EIO when writing to out fails.
 */
#ifndef HOSTPROF_SPEEDSCOPE_H
#define HOSTPROF_SPEEDSCOPE_H

#include <stdio.h>

#include "src/profile/profile.h"

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

struct speedscope_options {
	const char *name;	/* the file's "name" (e.g. the input file); NULL: "hostprof" */
	const char *exporter;	/* "exporter", e.g. "hostprof 0.1.0"; NULL: left out */
	enum profile_value value;	/* PROFILE_VALUE_OFF_CPU or _WALL: weights are that time in nanoseconds
					 * (a stack weighs what the thread spent off CPU, or in all, there); other
					 * values: CPU time as above */
};

/* o may be NULL for the defaults. */
int speedscope_write(const struct profile *p, FILE *out, const struct speedscope_options *o);

#endif
