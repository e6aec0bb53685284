/*
 * profile_builder.h — hand-built profiles for the unit tests of the profile model and its writers: one call per
 * table entry (strings, functions, mappings, locations, stacks, samples), each asserting success, and the small
 * example profile the report and collapsed-stack tests both print.
 */
#ifndef HOSTPROF_TESTS_PROFILE_BUILDER_H
#define HOSTPROF_TESTS_PROFILE_BUILDER_H

#include <stdint.h>

#include "src/profile/profile.h"

uint32_t tp_string(struct profile *p, const char *s);	/* NULL or "": index 0 */
uint32_t tp_function(struct profile *p, const char *name, const char *file);
uint32_t tp_mapping(struct profile *p, const char *path);
uint32_t tp_location(struct profile *p, uint32_t mapping, uint64_t address, uint8_t kind,
		     const struct profile_line *lines, uint32_t nlines);
/* A stack whose 16-byte trace ID is id repeated. locs: leaf first. */
uint32_t tp_stack(struct profile *p, uint8_t id, const uint32_t *locs, uint32_t n);
/* Add s (stack, pid, tid, count, link, cpu_ns as given) with its comm and thread names. */
void tp_sample(struct profile *p, struct profile_sample s, const char *comm, const char *thread);
/* Record pid's program path and container id (NULL: unknown, none). */
void tp_process(struct profile *p, int32_t pid, const char *exe_path, const char *container_id);
/* Append s as it is, past profile_add_sample()'s checks and merging: a sample no writer makes (counts that add
 * up past PROFILE_VALUE_MAX), for the readers' tests. */
void tp_sample_unchecked(struct profile *p, struct profile_sample s);

/*
 * The example profile, stacks root first (count):
 *   app:     main > work > helper (inlined into work)   6, over two threads
 *   app:     main > rec > rec > rec                     3 (recursion)
 *   app:     main > work > libc.so.6+0x9abc             2 (unsymbolized)
 *   app:     [truncated] > rec > schedule (kernel)      1
 *   app:     main > work > helper, another address      1
 *   other;x: main > work > helper                       1
 * 2 s at 99 Hz of cpu-clock, 14 samples, 1 lost, 13 unwound completely, unwinder libunwind.
 */
struct profile *tp_example_profile(void);

#endif
