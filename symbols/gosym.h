/*
 * gosym.h — names, files and lines of Go code from the binary's own function table (unwind/gopclntab.h), which
 * survives stripping: "main.hotLoop" at main.go:12, with the functions the compiler inlined there.
 *
 * Addresses are ELF virtual addresses of the file. For a return address pass the address minus 1, as for
 * symbolizer_lookup(), so that the call, not the instruction after it, is described.
 *
 * Ownership: the strings in the frames belong to the table (and so to its Elf) and stay valid until
 * gopclntab_free(). Like lookups in the table, not thread-safe.
 * Untrusted input: a corrupt table yields fewer frames (down to none), never a crash; inline chains are bounded.
 */
#ifndef HOSTPROF_GOSYM_H
#define HOSTPROF_GOSYM_H

#include <stddef.h>
#include <stdint.h>

#include "symbols/symbolizer.h"
#include "unwind/gopclntab.h"

/*
 * Symbolize elf_va. Fills at most max frames, innermost inlined function first (inlined = 1) and the physical
 * function last (inlined = 0), and returns how many: 0 when no Go function covers the address. A chain longer
 * than max keeps its innermost frames. Inline frames need a Go >= 1.16 table; older tables give the physical
 * function with the file:line of the innermost inlined code.
 */
int gosym_lookup(const struct gopclntab *t, uint64_t elf_va, struct symbol_frame *frames, size_t max);

#endif
