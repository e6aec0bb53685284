/*
 * demangle.h — C++ (Itanium ABI, also legacy Rust) symbol demangling, when the system can do it.
 *
 * The demangler is libstdc++'s __cxa_demangle, loaded with dlopen on first use so that hostprof itself stays
 * a C program with no C++ runtime dependency. Without libstdc++ every name is left as it is.
 *
 * Ownership: demangler_new() returns a handle owned by the caller (demangler_free()); demangle() returns a
 * malloc'd string the caller frees. Not thread-safe (one handle per thread).
 * Untrusted input: names longer than DEMANGLE_INPUT_MAX are not demangled (the demangler recurses).
 */
#ifndef HOSTPROF_DEMANGLE_H
#define HOSTPROF_DEMANGLE_H

#define DEMANGLE_INPUT_MAX 4096

struct demangler;

/* Never fails for lack of libstdc++: lookups then just return NULL. Returns NULL only when out of memory. */
struct demangler *demangler_new(void);
void demangler_free(struct demangler *d);

/* Demangled form of a "_Z..." name, or NULL if name is not mangled, is invalid, or no demangler exists. */
char *demangle(struct demangler *d, const char *name);

#endif
