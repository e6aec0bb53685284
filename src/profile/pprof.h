/*
 * pprof.h — export a profile in pprof's format (gzipped profile.proto), for `go tool pprof` and the tools that
 * read it (Pyroscope, Parca, Datadog, Cloud Profiler, speedscope, ...).
 *
 * The message is built with protobuf-c code generated from src/profile/proto/profile.proto. The mapping:
 *   - sample_type [samples/count, cpu/nanoseconds]; values [count, cpu_ns] (cpu_ns = count x period when a
 *     sample has none); a profile with off-CPU time adds off-cpu/nanoseconds and preempted/nanoseconds
 *     (off_cpu_ns, preempted_ns: `go tool pprof -sample_index=off-cpu`); period_type cpu/nanoseconds, period, time_nanos, duration_nanos from the header;
 *     default_sample_type "cpu"; comments name the producer, host, event and lost samples.
 *   - One pprof sample per profile sample (they are already aggregated per stack, process, thread and link),
 *     labels: "pid" (num), "process name" (str), "thread id" (num), "thread name" (str), and with an APM link
 *     "trace id" (str, 32 lowercase hex digits), "local root span id" (num: the 8-byte transaction ID read
 *     big-endian as a 64-bit integer, Datadog's type for that label name; IDs >= 2^63 read as negative) and
 *     "transaction id" (str, the same ID as 16 hex digits, as Elastic APM shows it: exact where pprof prints
 *     numbers above 2^53 rounded). Empty names are left out.
 *   - Locations keep hostprof's ELF virtual addresses. So that pprof takes them as they are, every mapping
 *     spans the whole address space: memory_start 0, memory_limit 2^64-1, file_offset 0 (pprof's convention
 *     for addresses already adjusted). build_id is the GNU build ID, else the FileID in hex. has_functions
 *     (and the other has_*) are set when hostprof symbolized any location of the mapping; pprof symbolizes
 *     the others, from the binary when it finds it (and would otherwise replace hostprof's lines). The main
 *     program (the first mapping that is no shared library) comes first, as pprof expects. Kernel frames
 *     share one mapping "[kernel.kallsyms]", JIT frames one mapping "[jit]" (their addresses: offsets in
 *     the named JIT code).
 *   - Location lines are innermost inlined function first; functions carry name, system_name (= name) and
 *     source file. Ids are the profile's table indices (locations: index + 1).
 * Only what the samples reach is written. Strings are written as the profile holds them, not escaped: pprof is
 * data that tools join with symbol tables and source files (a function's name, a file's path), and protobuf's
 * bytes carry anything; what shows them escapes them (speedscope.h escapes, being only ever shown).
 *
 * Only reads p. Returns 0, -ENOMEM, -EOVERFLOW (a profile too large for one message), or -EIO.
 */
#ifndef HOSTPROF_PPROF_H
#define HOSTPROF_PPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "src/profile/profile.h"

/* The gzipped profile, written to out. */
int pprof_write(const struct profile *p, FILE *out);

/* The packed, uncompressed protobuf message in a malloc'd buffer (*buf, *len); the caller frees it. */
int pprof_encode(const struct profile *p, uint8_t **buf, size_t *len);

#endif
