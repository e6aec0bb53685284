/*
 * symbolizer.h — names, files and lines for addresses in one ELF file.
 *
 * Function names come from .symtab, else .dynsym (libelf, through libdwfl), also from a separate debug file
 * found by build-id or .gnu_debuglink; file:line and inlined frames from DWARF when present (libdw).
 * Addresses are ELF virtual addresses of the file (not runtime addresses). C++ names are demangled when
 * libstdc++ is installed (symbols/demangle.h).
 *
 * Separate debug files: /usr/lib/debug/.build-id/xx/yyyy.debug; else the .gnu_debuglink name (a plain file
 * name, never a path) next to the file, in its .debug/ or under /usr/lib/debug/<its directory>, used only if
 * its build-id matches and no user but root or us can write it. A file without a build-id gets none.
 *
 * Ownership: symbolizer_open() gives a handle that owns its own file descriptor and memory; all strings it
 * returns stay valid until symbolizer_free(). Not thread-safe.
 * Untrusted input: the file may be corrupt or hostile; failures are reported, never fatal. DWARF whose string
 * sections are not NUL-terminated is not used (libdw would read past them): such a file gets symbols only.
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
	int go;			/* 1 if named from the Go function table (.gopclntab): Go code */
};

/*
 * Open path for symbolization. fd, when >= 0, is an open descriptor of the same file (duplicated, the caller
 * keeps its own) and path is then only used to find a .gnu_debuglink file next to it. Returns 0 and *out (free
 * with symbolizer_free()), or a negative errno: -ENOEXEC for a file that is not a usable ELF executable or shared
 * object (corrupt, truncated, relocatable, without loadable segments), -EINVAL (neither path nor fd), -ENOMEM,
 * or open(2)'s error. *out is set only on success.
 */
int symbolizer_open(const char *path, int fd, struct symbolizer **out);
void symbolizer_free(struct symbolizer *s);

/*
 * Keep decompressed copies of compressed separate debug files in dir (debug_cache.h) and read DWARF from them:
 * the same DWARF without decompressing it on every run. Takes effect for DWARF not opened yet (it opens on the
 * first lookup); NULL turns it off. dir is copied. Returns 0 or -ENOMEM.
 */
int symbolizer_set_debug_cache(struct symbolizer *s, const char *dir);

/*
 * Keep the names lookups make in dir (names_cache.h), and answer later runs' lookups of the same addresses from
 * there: the same frames without reading the symbol table or DWARF. Only a file with a GNU build-id has its
 * names kept, and only a file no user but root or us can write has them written (symbolizer_free() writes them).
 * Takes effect before the first lookup; NULL turns it off. dir is copied. Returns 0 or -ENOMEM.
 */
int symbolizer_set_names_cache(struct symbolizer *s, const char *dir);
/* How many lookups were answered from names an earlier run kept (after the per-address memory of this one). */
size_t symbolizer_kept_names(const struct symbolizer *s);

/*
 * Symbolize elf_va. Fills at most max frames, innermost inlined function first and the physical function
 * last, and returns how many (0 when nothing is known: no symbol covers the address). A chain longer than
 * max keeps its innermost frames. The physical function is named by the ELF symbol covering the address, else
 * by DWARF, else by a sizeless symbol (assembly label) before it in the same code section. Of aliases (malloc,
 * __libc_malloc) the plainest name is given, without a symbol version ("@GLIBC_2.2.5"). Results are remembered
 * per address.
 * The first lookup indexes the symbol table (O(n log n), about 50 bytes a symbol); each lookup is then
 * O(log n). Bounds for crafted files: a table of more than 2^22 symbols is not used, and an address inside
 * more than 1024 sized symbols gets no ELF name; in both cases DWARF may still name it.
 */
int symbolizer_lookup(struct symbolizer *s, uint64_t elf_va, struct symbol_frame *frames, size_t max);

/*
 * The ELF symbol called name (exactly, without a version): its address (ELF virtual address) and size. For a
 * runtime's own structures and functions a profiler reads (CPython's _PyRuntime). Reads the symbol table once per
 * call (O(n)): for lookups made once per file. Returns 0, or -ENOENT (no such symbol; the tables' bound as for
 * symbolizer_lookup()).
 */
int symbolizer_find(struct symbolizer *s, const char *name, uint64_t *va, uint64_t *size);

#endif
