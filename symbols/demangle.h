/*
 * demangle.h — symbol names as people read them: C++ (Itanium ABI) and Rust (legacy and v0 manglings).
 *
 * The demangler is libiberty's cplus_demangle (the one binutils and gdb use), linked statically: it knows
 * C++, Rust legacy names (whose trailing "::h<hash>" it drops, as perf and rustfilt do) and Rust v0 names
 * ("_R..."), and bounds its own recursion. Stateless and thread-safe.
 *
 * Untrusted input: names longer than DEMANGLE_INPUT_MAX are not demangled.
 */
#ifndef HOSTPROF_DEMANGLE_H
#define HOSTPROF_DEMANGLE_H

#define DEMANGLE_INPUT_MAX 4096

/* Demangled form of a mangled name as a malloc'd string the caller frees, or NULL if name is not mangled
 * ("_Z..." or "_R..."), is invalid, or too long. */
char *demangle(const char *name);

#endif
