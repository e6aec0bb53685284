/*
 * kernel_frames.h — the kernel as traces see it: its build id and _text, read once, to hash kernel frames
 * (traces.h); its symbols loaded the first time a profile has kernel frames to name.
 *
 * A trace keeps kernel frames as offsets from _text in the kernel's file ID (from its build id in
 * /sys/kernel/notes), so they are the same across processes and runs of one boot. kallsyms is read late: ~60 ms
 * of kernel time that a run without kernel frames never pays, from this boot's cache when there is one
 * (kallsyms_cache.h), else /proc/kallsyms.
 *
 * Ownership: kernel_frames_new() makes the handle; kernel_frames_trace() is valid while it is (traces keep the
 * pointer); the symbols are the handle's, freed by kernel_frames_free().
 * Errors: kernel_frames_new() returns 0 or -ENOMEM; a build id or _text that cannot be read leaves zeros (frames
 * unsymbolized), and symbols that cannot be loaded leave NULL.
 */
#ifndef HOSTPROF_KERNEL_FRAMES_H
#define HOSTPROF_KERNEL_FRAMES_H

#include <stdbool.h>

#include "src/pipeline/traces.h"

struct kernel_frames;

/* sampled: the sampler takes kernel call chains (else _text is not read). use_cache: the kallsyms cache of the
 * user's cache directory. */
int kernel_frames_new(bool sampled, bool use_cache, struct kernel_frames **out);
void kernel_frames_free(struct kernel_frames *k);
/* What traces hash kernel frames with, and name them from once loaded. */
struct trace_kernel *kernel_frames_trace(struct kernel_frames *k);
/* The kernel's symbols, loaded now if not yet (and set in kernel_frames_trace()); NULL when they cannot be (tried
 * again at the next call). */
struct kallsyms *kernel_frames_symbols(struct kernel_frames *k);

#endif
