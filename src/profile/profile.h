/*
 * profile.h — the hostprof profile: in-memory model, builder, msgpack writer and reader.
 *
 * The model mirrors the OpenTelemetry profiles data model (profiles/v1development, proto 1.11.0): shared
 * dictionary tables whose element 0 is the zero value, so index 0 means "unset". On disk it is msgpack; the
 * exact schema is man/hostprof-profile.5.
 *
 * Building: profile_new(), then the profile_add_* functions, which intern (deduplicate) what they are given and
 * return its index. Strings passed in are copied. Reading: profile_read_file() decodes a file (one or several
 * top-level maps, merged) into the same model, bound-checking every index.
 *
 * Bounds. A profile's samples never add up past PROFILE_VALUE_MAX in any value (enum profile_value), so that
 * every sum a view, a merge or an export makes of them fits, every share of a whole is at most 100%, and every
 * value fits the int64 of pprof, JSON and OpenTelemetry: profile_add_sample() and profile_merge() refuse, with
 * -EOVERFLOW, what would break it (struct profile_totals), and the reader calls a file that breaks it corrupt.
 * The reader also refuses stacks longer than hostprof writes (PROFILE_MAX_STACK_LOCATIONS).
 *
 * Errors: functions return 0 or a negative errno; profile_read_file() also fills a one-line message.
 * Not thread-safe.
 */
#ifndef HOSTPROF_PROFILE_H
#define HOSTPROF_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#define PROFILE_FORMAT_NAME "hostprof"
#define PROFILE_FORMAT_MAJOR 1
#define PROFILE_FORMAT_MINOR 0
#define PROFILE_OTEL_PROTO "v1development/1.11.0"

/* The most any set of a profile's samples weighs in any value: the int64 that pprof, JSON and OpenTelemetry
 * carry values in. */
#define PROFILE_VALUE_MAX ((uint64_t)INT64_MAX)

/* The most locations a stack hostprof writes has: TRACE_MAX_KERNEL_FRAMES kernel frames, SESSION_MAX_FRAMES_LIMIT
 * user frames and one error frame (src/pipeline/traces.h, src/pipeline/session.h; msgpack_read.c checks the sum). */
#define PROFILE_MAX_STACK_LOCATIONS (255u + 65536u + 1u)

/* Frame kinds, numbered as the OpenTelemetry eBPF profiler numbers them, and one of hostprof's own where that
 * profiler has none (man/hostprof-profile.5). */
enum profile_frame_kind {
	PROFILE_FRAME_UNKNOWN = 0,
	PROFILE_FRAME_PYTHON = 1,	/* CPython code, named by its code object (src/processes/pyframes.h) */
	PROFILE_FRAME_NATIVE = 3,
	PROFILE_FRAME_KERNEL = 4,
	PROFILE_FRAME_GO = 0xB,
	PROFILE_FRAME_JIT = 0x40,	/* code a JIT runtime generated (or an interpreter's trampolines), named by
					 * its perf map or jitdump file (jitinfo.h); hostprof's own number */
	PROFILE_FRAME_ERROR = 0x80,	/* bit: a synthetic frame such as [truncated] or [unknown] */
};

struct profile_mapping {
	uint8_t file_id[16];	/* FileID (src/profile/ids.h); zeros if unknown */
	uint32_t build_id;	/* string index: GNU build-id as lowercase hex, 0 if none */
	uint32_t filename;	/* string index: path as the process saw it */
	uint64_t memory_start, memory_limit, file_offset;
};

struct profile_function {
	uint32_t name;		/* string index */
	uint32_t filename;	/* string index, 0 if unknown */
};

struct profile_line {
	uint32_t function;	/* function index */
	int64_t line;		/* 1-based, 0 if unknown */
};

struct profile_location {
	uint32_t mapping;	/* mapping index, 0 if none */
	uint64_t address;	/* ELF virtual address in the mapping's file (a file read from perf.data that was not
				 * at hand: the offset in the file; kernel: offset from module start;
				 * JIT: offset in the named code, or the runtime address of unnamed code) */
	uint8_t frame_kind;	/* enum profile_frame_kind */
	uint32_t nlines;
	struct profile_line *lines;	/* innermost inlined function first; nlines may be 0 (unsymbolized) */
};

struct profile_stack {
	uint32_t nlocations;
	uint32_t *locations;	/* location indices, leaf first */
	uint8_t trace_id[16];	/* stack-trace ID (src/profile/ids.h) */
};

struct profile_link {
	uint8_t trace_id[16];
	uint8_t span_id[8];	/* APM transaction (local root span) ID */
};

struct profile_sample {
	uint32_t stack;		/* stack index */
	int32_t pid, tid;
	uint32_t comm;		/* string index: process name */
	uint32_t thread_name;	/* string index */
	uint32_t link;		/* link index, 0 = none */
	uint32_t service;	/* string index: APM service name of a correlated sample, 0 = none */
	uint64_t count;		/* number of samples */
	uint64_t cpu_ns;	/* sum of the samples' periods in nanoseconds */
	uint64_t off_cpu_ns;	/* time the thread spent off CPU having switched out with this stack */
	uint64_t preempted_ns;	/* ... of it runnable (preempted, waiting for a CPU), not blocked */
	/* When each CPU sample was taken (CLOCK_REALTIME, ns), in the order recorded: at most count of them, fewer
	 * when the recorder dropped some (info.timestamps_dropped) or none (a file without them). Owned by the
	 * profile that holds the sample: profile_add_sample() copies what it is given. */
	uint32_t ntimestamps;
	uint64_t *timestamps;
};

/* What is known of a process beyond its samples: one per pid. */
struct profile_process {
	int32_t pid;
	uint32_t exe_path;	/* string index: its program's path, 0 if unknown */
	uint32_t container_id;	/* string index: the id of the container it runs in, 0 if none */
};

/* The values a sample carries, as views and exports weigh samples by them. */
enum profile_value {
	PROFILE_VALUE_SAMPLES,	/* count */
	PROFILE_VALUE_CPU,	/* cpu_ns, or count x period_ns when the profile has no cpu_ns */
	PROFILE_VALUE_OFF_CPU,	/* off_cpu_ns */
	PROFILE_VALUE_WALL,	/* CPU + off-CPU: where a thread's wall-clock time went */
};

/* Run-wide facts written in the header. Strings are owned by the profile. */
struct profile_info {
	char *producer;		/* "hostprof 0.1.0" */
	char *hostname, *host_id, *kernel;
	uint32_t cpus_online, cpus_available;	/* the host's CPUs when it was recorded; 0: not known */
	char *cmdline;		/* the recording's command line, its arguments joined by spaces; NULL: not known */
	char *event;		/* "cpu-clock", ... */
	char *unwinder;		/* "libunwind", "deltas", ... */
	uint64_t start_unix_ns, duration_ns;
	uint64_t period_ns;	/* nominal sampling period: 1e9 / frequency */
	uint64_t frequency_hz;
	uint64_t samples;	/* samples taken (== sum of sample counts) */
	uint64_t lost;		/* samples lost, wherever: the kernel's rings (PERF_RECORD_LOST) and the fast lane's */
	uint64_t lost_fast_lane;	/* ... of them lost on the fast lane (its queue full, or its rings) */
	uint64_t unwound_complete;	/* samples whose user stack reached its outermost frame */
	uint64_t truncated;	/* samples ending in a [truncated] frame */
	uint64_t unknown;	/* samples whose IP was in no known mapping */
	/* off-CPU profiling (record --off-cpu; zeros without it) */
	uint64_t off_cpu_threshold_ns;	/* blocks shorter than this were summed per thread, without stacks */
	uint64_t off_cpu_switches;	/* switch-outs seen */
	uint64_t off_cpu_capped;	/* off-CPU intervals whose stacks the rate cap left out */
	uint64_t off_cpu_no_stack;	/* off-CPU intervals without a switch-out sample or a stack read live */
	uint64_t off_cpu_lost;		/* switch-outs not tracked (too many threads) or unmatched switch-ins */
	uint64_t timestamps_dropped;	/* samples counted without their time (struct profile_sample) */
};

/*
 * What a profile's samples add up to, kept by profile_add_sample(). count and count x period_ns + cpu_ns +
 * off_cpu_ns stay at most PROFILE_VALUE_MAX: the second weighs more than any set of the samples does in any
 * value, whichever way each sample's CPU time is taken (its cpu_ns, or count x period_ns). So info.period_ns is
 * set before samples are added (profile_merge() checks a period it takes from the profile merged in).
 */
struct profile_totals {
	uint64_t count, cpu_ns, off_cpu_ns, preempted_ns;
};

/* A dynamic table: count includes element 0. */
#define PROFILE_TABLE(type, name) struct { type *items; uint32_t count, cap; } name

struct profile_index;	/* private interning state of the builder */

struct profile {
	struct profile_info info;
	PROFILE_TABLE(char *, strings);
	PROFILE_TABLE(struct profile_mapping, mappings);
	PROFILE_TABLE(struct profile_function, functions);
	PROFILE_TABLE(struct profile_location, locations);
	PROFILE_TABLE(struct profile_stack, stacks);
	PROFILE_TABLE(struct profile_link, links);
	/* samples start at index 0: they are not a dictionary table */
	PROFILE_TABLE(struct profile_sample, samples);
	/* processes start at index 0 too, one per pid (profile_set_process()) */
	PROFILE_TABLE(struct profile_process, processes);
	struct profile_totals totals;	/* of the samples (profile_add_sample()) */
	struct profile_index *index;
};

/* An empty profile holding the zero element of every table. Returns 0 and *out (free with profile_free()), or
 * -ENOMEM; *out is set only on success. */
int profile_new(struct profile **out);
void profile_free(struct profile *p);

/* Set an info string field (copied). */
int profile_set_info_string(struct profile *p, char **field, const char *value);

/* Interning: each stores the index of an equal existing element, or of a new one, in *index. */
int profile_add_string(struct profile *p, const char *s, uint32_t *index);	/* NULL or "" -> 0 */
int profile_add_mapping(struct profile *p, const struct profile_mapping *m, uint32_t *index);
int profile_add_function(struct profile *p, const struct profile_function *f, uint32_t *index);
/* Locations are keyed by (mapping, address, frame_kind); lines are copied when the location is new. */
int profile_add_location(struct profile *p, const struct profile_location *l, uint32_t *index);
/*
 * Stacks are keyed by trace_id and their location list: the same ID with different locations (e.g. one file
 * mapped under two paths) stays two stacks rather than silently losing one.
 */
int profile_add_stack(struct profile *p, const struct profile_stack *s, uint32_t *index);
int profile_add_link(struct profile *p, const struct profile_link *l, uint32_t *index);
/* The order of threads in views: by pid, tid, then thread name (string index); 0 for the same thread. */
int profile_thread_compare(const struct profile_sample *x, const struct profile_sample *y);

/* The value v of sample s (enum profile_value), from p's period where the sample has no cpu_ns. */
uint64_t profile_sample_value(const struct profile *p, const struct profile_sample *s, enum profile_value v);
/* Whether any sample of p has off-CPU time. */
int profile_has_off_cpu(const struct profile *p);

/* Samples with equal (stack, pid, tid, comm, thread_name, link, service) are merged: counts, cpu_ns, off_cpu_ns
 * and preempted_ns add up, timestamps are appended (copied). -EOVERFLOW, and p unchanged, when s would take the
 * totals past their bound (struct profile_totals); -EINVAL for more timestamps than samples (ntimestamps > count),
 * -ENOMEM with p unchanged. */
int profile_add_sample(struct profile *p, const struct profile_sample *s);

/* Record what is known of process pr->pid: its entry's fields that are 0 take pr's (the first value known wins,
 * as a merge's info does). */
int profile_set_process(struct profile *p, const struct profile_process *pr);
/* The entry of process pid, NULL if none. Valid until the next profile_set_process(). */
const struct profile_process *profile_find_process(const struct profile *p, int32_t pid);

/* The string at index i, "" when out of range. */
const char *profile_string(const struct profile *p, uint32_t i);

/* Look a string up without adding it: 0 and *index set, or -ENOENT. NULL and "" are index 0. */
int profile_find_string(const struct profile *p, const char *s, uint32_t *index);

/*
 * Write p to path atomically (src/base/atomic_file.h: "<path>.tmp.XXXXXX" in the same directory, mode 0666
 * minus the umask, fsync, rename, directory fsync). On failure the temporary file is removed, path is
 * untouched, and a negative errno is returned.
 */
int profile_write_file(const struct profile *p, const char *path);
/* The same for a writer that takes its argument untyped (fallback_file.h's fallback_write_fn): profile is p. */
int profile_write_file_fn(void *profile, const char *path);
/* As profile_write_file(), but a file at path is never replaced (atomic_file_commit_new()): -EEXIST then. The
 * daemon's profiles are written so (profile_dir.h). And its untyped form. */
int profile_write_new_file(const struct profile *p, const char *path);
int profile_write_new_file_fn(void *profile, const char *path);

/* p encoded as profile_write_file() writes it, into a new buffer of the caller's (free()): *data, *size. For a
 * profile that has to wait in memory for its file (a daemon on a full disk). Returns 0 or a negative errno. */
int profile_encode(const struct profile *p, char **data, size_t *size);

/*
 * Read path into a new profile (several top-level maps are merged into one). On failure returns a negative
 * errno and writes a one-line reason into errbuf ("bad.msgpack: not a hostprof profile", ...): -EINVAL for a
 * file that is not a hostprof profile (anything but a regular file too: a FIFO or a device is refused without
 * blocking, src/base/regular_file.h), -EBADMSG for a corrupt or truncated one (a stack longer than
 * PROFILE_MAX_STACK_LOCATIONS, samples adding up past PROFILE_VALUE_MAX), -EPROTONOSUPPORT for another major
 * format version, or the errno of a failed open/read/allocation. The path is escaped in the message (escape.h).
 */
int profile_read_file(const char *path, struct profile **out, char *errbuf, size_t errlen);

/*
 * Merge src into dst, re-interning its tables and adding its samples, processes and counters. Only the strings src's
 * elements reference are carried over. The time span grows to cover both; other info fields keep dst's value
 * when set; the info counters (samples, lost, ...) add up, stopping at UINT64_MAX. src must be a different
 * profile whose indices are valid. -EOVERFLOW, before dst is changed, when the samples of both together would
 * break the totals' bound (struct profile_totals).
 */
int profile_merge(struct profile *dst, const struct profile *src);

#endif
