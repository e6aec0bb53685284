/*
 * traces.h — the trace handler: stack-trace IDs, the known-trace cache and sample counts.
 *
 * A trace is the list of frames of one sample: kernel frames leaf first, then user frames leaf first, then at
 * most one synthetic error frame ([truncated], [unknown]). Its 128-bit ID is computed as src/profile/ids.h says.
 * Each distinct trace is stored once (the known-trace cache); counts are kept per (pid, tid, trace), with the
 * process and thread names seen at sampling time. Turning traces into a profile (symbolizing each location
 * once) happens only in traces_build_profile(), off the sampling path.
 *
 * JIT frames are named when the profile is built, from what their process's JIT map says then (jitinfo.h), and
 * their stacks' IDs are computed again then: a map written after the sample (or at exit) still names them.
 *
 * Frames hold references on their execinfo and jitinfo entries until traces_free(). Not thread-safe: one thread
 * makes, fills, names (traces_name_jit()) and frees a table; in between, traces_build_profile() may run on
 * another (the daemon builds an interval's profile on a thread of its own while sampling goes on into a new
 * table): it touches nothing the sampling thread changes (the files' symbolizers, which only builds use, under
 * execinfo_mgr_naming(); kallsyms, read only; JIT names copied by traces_name_jit()).
 */
#ifndef HOSTPROF_TRACES_H
#define HOSTPROF_TRACES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/processes/execinfo.h"
#include "src/profile/ids.h"
#include "src/processes/jitinfo.h"
#include "src/processes/pyframes.h"
#include "src/profile/profile.h"
#include "symbols/kallsyms.h"
#include "unwind/unwind.h"

/* Kernel frames a trace keeps (before its user frames, at most the session's --max-frames, and one error frame). */
#define TRACE_MAX_KERNEL_FRAMES 255
/* The longest program path or container id traces_note_process() keeps: the kernel's path limit. */
#define TRACE_PROCESS_STRING_MAX 4096

enum trace_error {
	TRACE_ERROR_TRUNCATED = 1,	/* the unwinder stopped before the outermost frame */
	TRACE_ERROR_UNKNOWN = 2,	/* an address in no known mapping */
	TRACE_ERROR_TOO_MANY = 3,	/* the process was not tracked: too many processes */
	TRACE_ERROR_OFFCPU_SHORT = 4,	/* off-CPU time of blocks under the threshold, summed per thread (offcpu.h) */
	TRACE_ERROR_OFFCPU_CAPPED = 5,	/* off-CPU time whose stacks the rate cap left out, summed per thread */
	TRACE_ERROR_OFFCPU_NO_SAMPLE = 6,	/* off-CPU time of switch-outs without a sample, summed per thread */
};

struct trace_frame {
	struct execinfo *exe;	/* native frames: the file; NULL for kernel and error frames */
	struct jitinfo *jit;	/* JIT frames (kind PROFILE_FRAME_JIT): the process's JIT code; else unused */
	struct pycode *py;	/* Python frames (kind PROFILE_FRAME_PYTHON): the code; NULL for every other kind */
	uint64_t address;	/* native: ELF VA (minus 1 for return addresses); kernel: absolute address;
				 * JIT: runtime address (minus 1 for return addresses), or a JVM's
				 * interpreted frame's Method (jitinfo_names_method); Python: the line;
				 * error: enum trace_error */
	uint8_t kind;		/* enum profile_frame_kind */
};

/* Kernel identity used for kernel frames' FileID and addresses. */
struct trace_kernel {
	struct file_id file_id;	/* FNV-1a-128 of the vmlinux build-id (zeros if unknown) */
	uint64_t text_start;	/* _text */
	char build_id[41];
	struct kallsyms *kallsyms;	/* may be NULL: kernel frames stay unsymbolized */
};

struct traces;

/* execinfo is borrowed and must outlive the table; kernel (may be NULL) is copied. Returns 0 and *out (free with
 * traces_free()), or -ENOMEM; *out is set only on success. */
int traces_new(struct execinfo_mgr *execinfo, const struct trace_kernel *kernel, struct traces **out);
void traces_free(struct traces *t);
/* Forget all traces and counts (after a profile was built from them). */
void traces_reset(struct traces *t);

/* Compute the stack-trace ID of n frames. */
void traces_hash(struct traces *t, const struct trace_frame *frames, unsigned n, struct trace_id *out);

/* APM trace context of a correlated sample (correlate.h): counted apart, written as the sample's link. */
struct trace_link {
	uint8_t trace_id[16];
	uint8_t transaction_id[8];
	const char *service;	/* copied; may be NULL */
};

/*
 * As traces_add(), with the stack-trace ID already computed by traces_hash() (NULL: computed here), the time the
 * sample was taken (CLOCK_REALTIME ns; 0: unknown) and the APM context of a correlated sample (NULL: none).
 * The time is kept with the count, in the order given, while the table holds fewer than its limit of times
 * (traces_set_timestamp_limit()); past it, or without memory for it, or unknown, the sample still counts and
 * its time is dropped, counted (the profile's info.timestamps_dropped).
 */
int traces_add_linked(struct traces *t, const struct trace_id *id, pid_t pid, pid_t tid, const char *comm,
		      const char *thread_name, const struct trace_frame *frames, unsigned n, uint64_t period_ns,
		      uint64_t time_ns, const struct trace_link *link);

/* The most sample times the table keeps until its reset (TRACES_MAX_TIMESTAMPS unless set): 8 bytes each. */
#define TRACES_MAX_TIMESTAMPS 1000000u
void traces_set_timestamp_limit(struct traces *t, uint64_t max);

/*
 * Count one sample of frames[0..n) for (pid, tid), its time unknown. comm and thread_name are copied the first
 * time the key is seen. period_ns is the sample's period. Returns 0 or -ENOMEM.
 */
int traces_add(struct traces *t, pid_t pid, pid_t tid, const char *comm, const char *thread_name,
	       const struct trace_frame *frames, unsigned n, uint64_t period_ns);

/*
 * Count off_ns of time off CPU (offcpu.h) for (pid, tid) under frames, the stack the thread switched out with,
 * as traces_add_linked() counts a sample, into the same key's off-CPU time (and its preempted time when
 * preempted: the thread was runnable, waiting for a CPU); its sample count is left alone. Returns 0 or -ENOMEM.
 */
int traces_add_off_cpu(struct traces *t, const struct trace_id *id, pid_t pid, pid_t tid, const char *comm,
		       const char *thread_name, const struct trace_frame *frames, unsigned n, uint64_t off_ns,
		       int preempted, const struct trace_link *link);

/*
 * What is known of process pid beyond its samples, for the profile (struct profile_process): its program's path
 * and its container's id (each copied, at most TRACE_PROCESS_STRING_MAX bytes, a longer one unknown rather than cut;
 * NULL or "": unknown). The first
 * note of a pid since the last reset is kept: a caller notes a process once, when traces_knows_process() says it
 * is new. Returns 0 or -ENOMEM (nothing kept: the next note may succeed).
 */
int traces_note_process(struct traces *t, pid_t pid, const char *exe_path, const char *container_id);
bool traces_knows_process(const struct traces *t, pid_t pid);

/* Name kernel frames with k from now on (the table is loaded lazily, when a profile needs it); borrowed. */
void traces_set_kallsyms(struct traces *t, struct kallsyms *k);

/* Distinct traces and (pid, tid, trace) keys. */
unsigned traces_count(const struct traces *t);
unsigned traces_keys(const struct traces *t);

/* Name every JIT frame from its process's map as it is now (copied into t) and give the traces with JIT frames
 * their IDs by those names: before traces_build_profile(), on the thread that fills t. Returns 0 or -ENOMEM. */
int traces_name_jit(struct traces *t);

/* How a profile is built: memory_budget (bytes of VmRSS, 0: none): past it, each file's symbolizer is closed once
 * its frames are named (execinfo_naming_close_symbolizer()), rather than kept for the next profile. */
struct traces_build_options {
	uint64_t memory_budget;
};

struct traces_build_stats {
	unsigned symbolizers_closed;	/* closed for the budget while naming */
};

/* Symbolize every distinct location once, file after file, and add all traces and counts to p; after
 * traces_name_jit() (-EINVAL if not), on any one thread (see above). o and stats may be NULL. Returns 0 or a
 * negative errno. */
int traces_build_profile(struct traces *t, struct profile *p, const struct traces_build_options *o,
			 struct traces_build_stats *stats);

#endif
