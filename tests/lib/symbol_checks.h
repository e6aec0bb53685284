/*
 * symbol_checks.h — what the symbolizer's cache tests share: a program with inlined functions and a separate
 * debug file, built in a test's directory, the span of a file's code, and lookups compared frame by frame
 * between two symbolizers of the same file (one with a cache, one without). Each call asserts (cmocka).
 */
#ifndef HOSTPROF_TESTS_SYMBOL_CHECKS_H
#define HOSTPROF_TESTS_SYMBOL_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "symbols/symbolizer.h"

/*
 * Build dir/prog (cc -O2 -g, with ld_flags, e.g. a build-id) from a source whose functions are inlined into
 * each other, its DWARF moved to dir/prog.debug (compressed with zlib when compress) and linked by
 * .gnu_debuglink; both files mode 0644.
 */
void symcheck_build_program(const char *dir, const char *ld_flags, int compress);

/* The span of path's .text section. */
void symcheck_text_range(const char *path, uint64_t *lo, uint64_t *hi);

/* Frames a[0..n) and b[0..n) are the same: names, files, lines, inlined and Go marks. */
void symcheck_same_frames(const struct symbol_frame *a, const struct symbol_frame *b, int n);

/* Lookups at every address in [lo, hi) stepping by step give the same frames in a and b. Returns how many had
 * a source line in a, and in *inlined (if not NULL) how many had an inlined frame. */
size_t symcheck_same_lookups(struct symbolizer *a, struct symbolizer *b, uint64_t lo, uint64_t hi, uint64_t step,
			     size_t *inlined);

#endif
