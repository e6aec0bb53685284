/*
 * name_pairs.c — interned pairs of strings. See name_pairs.h.
 */
#include "src/profile/name_pairs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/profile_impl.h"

struct pair_key {
	const char *first, *second;
};

static bool pair_eq(const void *table, uint64_t i, const void *key)
{
	const struct name_pair *p = &((const struct name_pairs *)table)->items[i];
	const struct pair_key *k = key;
	return p->first && strcmp(p->first, k->first) == 0 && strcmp(p->second, k->second) == 0;
}

int name_pairs_intern(struct name_pairs *t, const char *first, const char *second, uint32_t *index)
{
	const struct pair_key k = { first, second };
	uint64_t h = hash_str(hash_str(HASH_SEED, first), second);
	int err;
	if (hindex_find_index(&t->index, h, pair_eq, t, &k, index))
		return 0;
	if ((err = PROFILE_TABLE_RESERVE(*t, (uint64_t)t->count + 1)) < 0)
		return err;
	struct name_pair *p = &t->items[t->count];
	*p = (struct name_pair){ strdup(first), strdup(second) };
	if (!p->first || !p->second || (err = hindex_insert(&t->index, h, t->count)) < 0) {
		free(p->first);
		free(p->second);
		return err ? err : -ENOMEM;
	}
	*index = t->count++;
	return 0;
}

void name_pairs_take(struct name_pairs *t, uint32_t i, char **first, char **second)
{
	*first = t->items[i].first;
	*second = t->items[i].second;
	t->items[i] = (struct name_pair){ NULL, NULL };
}

void name_pairs_free(struct name_pairs *t)
{
	for (uint32_t i = 0; i < t->count; i++) {
		free(t->items[i].first);
		free(t->items[i].second);
	}
	free(t->items);
	hindex_free(&t->index);
	*t = (struct name_pairs){ 0 };
}
