/*
 * unwind_libunwind.h — the reference unwinder: libunwind remote unwinding over a copied stack.
 *
 * libunwind is driven through custom accessors, as perf does: registers come from the sample, memory from the
 * stack copy and, outside it, from the mapped ELF files; unwind information is located in the module's
 * .eh_frame_hdr (or a table built from .eh_frame when the header is missing), and in .debug_frame. It is correct
 * rather than fast, and has two uses: the step the stack-delta unwinder takes where its tables cannot express a
 * row (unwind_libunwind_deltas_fallback), and the oracle `hostprof replay --compare` checks that unwinder against.
 *
 * Ownership: an unwind_libunwind is created by unwind_libunwind_new() and freed by unwind_libunwind_free().
 * It caches per-file data keyed by unwind_module.cache_key; call unwind_libunwind_forget() before such a key's
 * Elf is closed. Not thread-safe: use one instance per thread.
 */
#ifndef HOSTPROF_UNWIND_LIBUNWIND_H
#define HOSTPROF_UNWIND_LIBUNWIND_H

#include <stdbool.h>

#include "unwind/unwind.h"
#include "unwind/unwind_deltas.h"

struct unwind_libunwind;

/* Returns 0 and *out, or -ENOMEM. */
int unwind_libunwind_new(struct unwind_libunwind **out);
void unwind_libunwind_free(struct unwind_libunwind *u);

/* Drop everything cached for this file key. */
void unwind_libunwind_forget(struct unwind_libunwind *u, const void *cache_key);

/*
 * Unwind one sample. Writes at most max frames into frames[], leaf first (frames[0].ip is the sampled IP),
 * stores how the walk ended in *status, and returns the number of frames written (>= 0). A negative return is
 * an internal error (-ENOMEM); a stack that merely cannot be unwound further is not an error.
 */
int unwind_libunwind_unwind(struct unwind_libunwind *u, const struct unwind_process *proc,
			    const struct unwind_sample *sample, struct unwind_frame *frames, size_t max,
			    enum unwind_status *status);

/*
 * An unwind_deltas fallback hook (unwind_deltas.h): one libunwind step from a frame in the middle of a sample.
 * Pass it with the struct unwind_libunwind as fallback_ctx, so rows the delta tables cannot express are unwound by
 * libunwind. libunwind walks from the sampled frame to the frame at that frame's (IP, SP), so it knows every
 * callee-saved register there, and steps once; if its walk never reaches that frame, it starts from the frame's
 * IP, SP and BP alone. Memory comes from sample->stack and the modules' files.
 */
int unwind_libunwind_deltas_fallback(void *ctx, const struct unwind_process *proc, const struct unwind_sample *sample,
				     const struct unwind_module *mod, const struct unwind_deltas_regs *frame,
				     struct unwind_deltas_regs *caller);

#endif
