/*
 * elf_symbol.h — a named symbol's entry in an ELF file's symbol table (libelf), for the few places that need
 * one symbol by name rather than an index of all of them: the APM agent's TLS variable (correlate/), a JVM's
 * exported VMStructs globals (src/processes/hotspot.h).
 *
 * The file is untrusted: every table is bounded by its section's data, a malformed table is absent. A linear
 * scan per name: callers look up a handful of names once per file. No allocation; the Elf is the caller's.
 */
#ifndef HOSTPROF_BASE_ELF_SYMBOL_H
#define HOSTPROF_BASE_ELF_SYMBOL_H

#include <gelf.h>
#include <stddef.h>

/* The section of the given type (SHT_SYMTAB or SHT_DYNSYM) and its symbol count; NULL if absent or malformed. */
Elf_Scn *elf_symbol_table(Elf *e, Elf64_Word type, size_t *count);

/* Index of the defined symbol called name in a symbol table (*out filled), or 0 (the null symbol) if absent. */
size_t elf_symbol_find(Elf *e, Elf_Scn *symtab, size_t count, const char *name, GElf_Sym *out);

#endif
