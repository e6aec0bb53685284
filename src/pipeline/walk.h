/*
 * walk.h — the frames of one sample: its kernel call chain, then its user stack unwound from the kernel's copy.
 *
 * The walker owns the unwinders (the stack-delta unwinder, libunwind for the rows its tables cannot express, or
 * libunwind alone) and what they reach past the sample: Go samples on g0 followed onto their goroutine's stack
 * (unwind/go_stack.h), stacks deeper than the copy read on from the process (stackext.h), JIT code walked by frame
 * pointer or by the shape its runtime declares (jitinfo.h). Each walk gets a context of its own (struct walk_in:
 * the sample, its process, what the fast lane read with it, whether it may stop at a table still being built)
 * and gives a result (struct walk_out); nothing about one walk is kept for the next but the counters.
 *
 * A walk names every user frame by its file and ELF address (trace_frame), through the module the unwinder found
 * the frame in on its way (unwind_frame.module), or the process's mappings where it has none (JIT code, the
 * reference unwinder). Frames are the walker's scratch, valid until the next walk.
 *
 * A walk that needs a read of the live process (the goroutine behind g0, the stack past the copy) says so
 * through the caller's live_read callback: that decides which processes take the fast lane (lanes.h). The
 * stack-table cache of a file is the executable-info manager's (execinfo.h): a table being built stops a walk
 * that may be held (walk_in.may_hold) at once; over the memory budget none is built, and walks stop at a file
 * without its table.
 *
 * Ownership: the managers and the replay writer are borrowed and must outlive the walker; it registers a release
 * hook on the executable-info manager (its unwinders' per-file caches). Not thread-safe. Errors: negative errno.
 */
#ifndef HOSTPROF_WALK_H
#define HOSTPROF_WALK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/processes/execinfo.h"
#include "src/processes/jitinfo.h"
#include "src/sampling/perf_record.h"
#include "src/processes/procmgr.h"
#include "src/pipeline/replay.h"
#include "src/processes/stackext.h"
#include "src/pipeline/traces.h"
#include "unwind/go_stack.h"
#include "unwind/unwind_deltas.h"

/* How walks of stacks ended: each walk counts in exactly one of complete, truncated, unknown, kernel_only. */
struct walk_counts {
	uint64_t complete;	/* user stacks unwound to their outermost frame */
	uint64_t truncated;	/* user stacks that ended early */
	uint64_t frame_limited;	/* ... of them: cut at the frame bound (walk_options.max_frames) */
	uint64_t unknown;	/* samples whose user IP was in no known mapping */
	uint64_t kernel_only;	/* samples without user registers (kernel threads, idle) */
};

/* The walker's own counters. */
struct walk_stats {
	uint64_t unwind_ns;		/* time spent unwinding user stacks */
	uint64_t capture_errors;	/* walks that could not be added to the replay file */
	uint64_t fast_goroutines;	/* Go samples on g0 followed with the goroutine the fast lane read */
	uint64_t fast_extensions;	/* walks past the copy that went on with the stack the fast lane read */
	bool kernel_frames;		/* a walk had kernel frames: kallsyms is needed to name them */
};

struct walk_options {
	bool reference;			/* libunwind alone, no stack-delta tables (hostprof record --unwinder) */
	unsigned max_frames;		/* user frames a walk keeps (it ends [truncated] past them); 0: 1024 */
	bool go_stacks;			/* follow samples on Go's g0 stack onto their goroutine's (go_stack.h) */
	unsigned go_stack_bytes;	/* most goroutine stack read per such sample; 0: 16 KiB (at least max_stack) */
	unsigned max_stack_bytes;	/* most stack a walk may see from the sampled SP (stackext.h) */
	unsigned stack_copy_bytes;	/* the kernel's copy: stack past it is read on when max_stack_bytes is more */
	bool offline;			/* the samples come from a file: no process is read (no memory reader, no
					 * stack past the copy, no goroutine); JIT code is known from perf maps alone
					 * (jitinfo_mgr_set_offline) */
};

/* A walk's read of the live process, as walk_live_read_fn is told of it. */
struct walk_live_read {
	pid_t tid;		/* the sample's thread */
	uint64_t time;		/* the sample's time (perf_sample.time: CLOCK_MONOTONIC ns, the sampler's clock) */
	unsigned kind;		/* FASTLANE_GO (a goroutine's stack) or FASTLANE_DEEP (a thread's) */
	bool past_copy;		/* the stack past the sample's copy; false: the goroutine behind g0, lost to the
				 * walk (not read in time, nor joined to the kernel's frame-pointer chain) */
	int rc;			/* the read's result (-ESTALE: it had moved on since the sample) */
	bool fast;		/* a fast-lane sample's */
	bool replaying;		/* a held sample's, walked again */
};
/* Called when a walk of a sample of p needed a read of the live process. A goroutine behind g0 read in time (or
 * whose callers the frame-pointer chain gave) is not told of: nothing was lost without a live read. */
typedef void (*walk_live_read_fn)(void *ctx, struct process *p, const struct walk_live_read *r);
/* Called when a fast-lane walk went past what the fast lane's reader read: it reads that far from now on. */
typedef void (*walk_read_deeper_fn)(void *ctx, pid_t pid, size_t bytes);

struct walk_deps {
	struct procmgr *procs;
	struct execinfo_mgr *execinfo;
	struct jitinfo_mgr *jit;
	struct replay_writer *capture;	/* each walk's input is added to it, or NULL */
	walk_live_read_fn live_read;	/* may be NULL */
	walk_read_deeper_fn read_deeper;	/* may be NULL */
	void *ctx;			/* the callbacks' */
};

/* One walk's context. */
struct walk_in {
	struct process *proc;
	const struct perf_sample *ps;
	const struct go_stack_snapshot *fast_go;	/* what the fast lane's reader read past the copy or of the
							 * goroutine as it held the thread (fastlane.h), or NULL */
	bool may_hold;			/* a table still being built stops the walk (the caller holds the sample) */
	bool replaying;			/* a held sample walked again */
	/* The walk sees the copy's first view bytes, and the rest only once it needs them (walk_out.past_view):
	 * how a thread copy's sample says whether the sampler's smaller copy would have done. 0: all of it. */
	size_t view;
	struct walk_counts *counts;	/* how the walk ended is counted there */
};

struct walk_out {
	unsigned n;		/* frames (walk_frames()): kernel ones leaf first, user ones, at most one error frame */
	bool pending;		/* the walk met a file whose table is being built */
	bool stopped;		/* ... and stopped there (may_hold): n and the counts are not to be used */
	bool past_view;		/* the walk needed the copy past walk_in.view */
};

struct walk;

int walk_new(const struct walk_options *o, const struct walk_deps *d, struct walk **out);
void walk_free(struct walk *w);

/* Walk in's sample into the walker's frames. */
void walk_sample(struct walk *w, const struct walk_in *in, struct walk_out *out);
/* The frames of the last walk (walk_out.n of them), valid until the next. */
const struct trace_frame *walk_frames(const struct walk *w);

const struct walk_stats *walk_get_stats(const struct walk *w);
void walk_reset_stats(struct walk *w);
void walk_unwind_stats(const struct walk *w, struct unwind_deltas_stats *out);
/* -ENOENT when that part is off. */
int walk_stackext_stats(const struct walk *w, struct stackext_stats *out);
int walk_go_stack_stats(const struct walk *w, struct go_stack_stats *out);
/* The most goroutine stack a walk reads (0 without Go stacks): what the fast lane's readers read too. */
size_t walk_go_max_stack(const struct walk *w);

#endif
