/*
 * symbolizer.h — names, files and lines for addresses in one ELF file.
 *
 * Function names come from .symtab, else .dynsym (libelf, through libdwfl), also from a separate debug file
 * found by build-id or .gnu_debuglink; file:line and inlined frames from DWARF when present (libdw).
 * Addresses are ELF virtual addresses of the file (not runtime addresses).
 *
 * Ownership: symbolizer_open() returns a handle that owns its own file descriptor and memory; all strings it
 * returns stay valid until symbolizer_free(). Not thread-safe.
 * Untrusted input: the file may be corrupt or hostile; failures are reported, never fatal.
 */
#ifndef HOSTPROF_SYMBOLIZER_H
#define HOSTPROF_SYMBOLIZER_H

#include <stddef.h>
#include <stdint.h>

struct symbolizer;

/* One source-level frame at an address. */
struct symbol_frame {
	const char *function;	/* demangled when possible; NULL if no symbol covers the address */
	const char *file;	/* source file, NULL if unknown */
	int line;		/* 1-based, 0 if unknown */
	int inlined;		/* 1 if this frame was inlined into the next one */
};

/*
 * Open path for symbolization. display_name is used in messages. fd, when >= 0, is an open descriptor of the
 * same file (duplicated, the caller keeps its own). Returns NULL and sets *err to a negative errno (or
 * -ENOEXEC for a file that is not a usable ELF).
 */
struct symbolizer *symbolizer_open(const char *path, int fd, int *err);
void symbolizer_free(struct symbolizer *s);

/*
 * Symbolize elf_va. Fills at most max frames, innermost inlined function first and the physical function
 * last, and returns how many (0 when nothing is known: no symbol covers the address).
 */
int symbolizer_lookup(struct symbolizer *s, uint64_t elf_va, struct symbol_frame *frames, size_t max);

#endif
