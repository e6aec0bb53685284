/*
 * demangle.c — __cxa_demangle through dlopen (see demangle.h).
 */
#include "symbols/demangle.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

struct demangler {
	bool tried;		/* the library is looked for once, on the first mangled name */
	void *handle;		/* our reference on libstdc++, NULL if it was already loaded or is missing */
	cxa_demangle_fn fn;
};

struct demangler *demangler_new(void)
{
	return calloc(1, sizeof(struct demangler));
}

void demangler_free(struct demangler *d)
{
	if (!d)
		return;
	if (d->handle)
		dlclose(d->handle);
	free(d);
}

static void load(struct demangler *d)
{
	d->tried = true;
	/* A process that already has libstdc++ loaded needs no extra reference. */
	d->fn = (cxa_demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
	if (d->fn)
		return;
	d->handle = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
	if (d->handle)
		d->fn = (cxa_demangle_fn)dlsym(d->handle, "__cxa_demangle");
}

char *demangle(struct demangler *d, const char *name)
{
	if (!d || !name || strncmp(name, "_Z", 2) != 0 || strnlen(name, DEMANGLE_INPUT_MAX + 1) > DEMANGLE_INPUT_MAX)
		return NULL;
	if (!d->tried)
		load(d);
	if (!d->fn)
		return NULL;
	int status = -1;
	char *out = d->fn(name, NULL, NULL, &status);
	if (status != 0) {
		free(out);
		return NULL;
	}
	return out;
}
