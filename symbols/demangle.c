/*
 * demangle.c — libiberty's demangler behind one call (see demangle.h).
 */
#include "symbols/demangle.h"

#include <libiberty/demangle.h>
#include <string.h>

char *demangle(const char *name)
{
	/* Itanium C++ and Rust legacy names start with _Z, Rust v0 names with _R. */
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R') ||
	    strnlen(name, DEMANGLE_INPUT_MAX + 1) > DEMANGLE_INPUT_MAX)
		return NULL;
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}
