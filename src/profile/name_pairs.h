/*
 * name_pairs.h — a table of interned pairs of strings, numbered in the order first seen: the report's rows
 * (function, library) and speedscope's frames (name, file) are one such table each.
 *
 * name_pairs_intern() returns the number of an equal pair already there or copies the pair in as the next one.
 * The strings belong to the table until name_pairs_free() (name_pairs_take() hands one pair's strings to the
 * caller, leaving NULLs: the pair then matches nothing). A zeroed struct name_pairs is empty. Errors: negative
 * errno (-ENOMEM). Not thread-safe.
 */
#ifndef HOSTPROF_PROFILE_NAME_PAIRS_H
#define HOSTPROF_PROFILE_NAME_PAIRS_H

#include <stdint.h>

#include "src/base/hindex.h"

struct name_pair {
	char *first, *second;
};

struct name_pairs {
	struct name_pair *items;
	uint32_t count, cap;
	struct hindex index;
};

int name_pairs_intern(struct name_pairs *t, const char *first, const char *second, uint32_t *index);
/* Move pair i's strings to *first and *second (the caller frees them). */
void name_pairs_take(struct name_pairs *t, uint32_t i, char **first, char **second);
void name_pairs_free(struct name_pairs *t);

#endif
