/*
 * unwind_libdw.h — a second reference unwinder: elfutils' libdwfl (dwfl_getthread_frames) over a copied stack,
 * the way perf unwinds with libdw.
 *
 * libdwfl is driven through custom thread callbacks: registers come from the sample, memory from the stack copy
 * and, outside it, from the mapped ELF files; never from the live process. Modules are reported to libdwfl as the
 * walk reaches them (found with unwind_process.find_module), and libdwfl reads their CFI (.eh_frame, then
 * .debug_frame) from the caller's ELF images. Like the libunwind oracle it trusts CFI only: where no CFI covers a
 * frame, libdw's frame-pointer guess is discarded and the walk ends as UNWIND_TRUNCATED.
 *
 * Caching: one Dwfl per address space, keyed by unwind_process.ctx, kept across samples (up to a fixed number
 * of address spaces, least recently used dropped first). Every frame's module is checked against find_module,
 * so a reused ctx or a remapped library is re-reported, never trusted stale. Give each process a ctx of its own
 * that outlives its samples: one ctx shared by all processes still unwinds correctly, but re-reports modules
 * whenever the process changes. Per-file data is keyed by unwind_module.cache_key.
 *
 * Ownership: an unwind_libdw is created by unwind_libdw_new() and freed by unwind_libdw_free(). It reads the
 * images of the caller's Elf handles (elf_rawfile) until unwind_libdw_forget() is called for their cache_key:
 * call it before such an Elf is closed. unwind_libdw_forget_process() releases the Dwfl of a process the caller
 * no longer tracks (optional: the cache is bounded either way). Not thread-safe: one instance per thread; the
 * caller's Elf handles are read (headers, elf_rawfile) when a file is first met, as the other unwinders do.
 */
#ifndef HOSTPROF_UNWIND_LIBDW_H
#define HOSTPROF_UNWIND_LIBDW_H

#include "unwind/unwind.h"

struct unwind_libdw;

/* Returns 0 and *out, -ENOMEM, or -EINVAL when libelf cannot be initialised. */
int unwind_libdw_new(struct unwind_libdw **out);
void unwind_libdw_free(struct unwind_libdw *u);

/* Drop everything cached for this file key, including every Dwfl that reported the file. */
void unwind_libdw_forget(struct unwind_libdw *u, const void *cache_key);

/* Drop the Dwfl cached for the address space whose unwind_process.ctx is proc_ctx. */
void unwind_libdw_forget_process(struct unwind_libdw *u, const void *proc_ctx);

/*
 * Unwind one sample. Writes at most max frames into frames[], leaf first (frames[0].ip is the sampled IP),
 * stores how the walk ended in *status, and returns the number of frames written (>= 0). A negative return is
 * an internal error (-ENOMEM); a stack that merely cannot be unwound further is not an error. *status: COMPLETE
 * at the outermost frame (CFI leaves its return address undefined, or the return address is zero);
 * UNKNOWN_LEAF when the sampled IP is in no module (1 frame returned); TRUNCATED otherwise (stack copy
 * exhausted, no module or no CFI for a frame, SP not advancing, max frames reached).
 */
int unwind_libdw_unwind(struct unwind_libdw *u, const struct unwind_process *proc,
			const struct unwind_sample *sample, struct unwind_frame *frames, size_t max,
			enum unwind_status *status);

#endif
