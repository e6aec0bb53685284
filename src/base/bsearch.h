/*
 * bsearch.h — the one binary search: the first index of a sorted set at which a predicate holds.
 *
 * bsearch(3) answers only whether an equal element is there, but hostprof's lookups ask for a place: the rule in
 * effect at an address is the last row starting at or before it, the mapping holding an address is the first one
 * ending past it, a new range overlaps the one before the first that starts past its end. Each is the partition
 * point of a predicate that is false on a prefix of the set and true on the rest, which bsearch_first() returns:
 *   lower bound, the first element >= key:	holds(i) is a[i] >= key;
 *   upper bound, the first element > key:	holds(i) is a[i] > key;
 *   the last element <= key:			the upper bound minus 1, when the upper bound is not 0;
 *   an equal element:				the lower bound, when it is < n and a[it] == key.
 *
 * The set is anything indexed from 0 to n - 1, passed through untouched as `set`: an array, or a table whose
 * elements are computed or read unaligned; the key likewise, so a call site needs no context struct. To search
 * part of an array, pass its first element and its length: indices are then relative to it.
 *
 * Cost: the function is static inline so that, called with a predicate the compiler sees (a static function
 * named at the call), it compiles to the loop one would write by hand with the predicate inlined. So the
 * per-sample lookups use it too: a frame's mapping (procmgr.c) and its delta-table row (stack_deltas_lookup(),
 * which says what was measured there).
 *
 * Contract: holds must be monotone over [0, n): once true, true up to n - 1. It is called only for indices below
 * n, at most floor(log2(n)) + 1 times, and never when n is 0. Returns the partition point, n when the predicate
 * holds nowhere. On a set that is not sorted (a hostile file's table) the result is still an index in [0, n],
 * just not a meaningful one. No state, no allocation: thread-safe.
 */
#ifndef HOSTPROF_BASE_BSEARCH_H
#define HOSTPROF_BASE_BSEARCH_H

#include <stdbool.h>
#include <stddef.h>

/* Whether element i of set is past the key: false for a prefix of the set, true for the rest. */
typedef bool (*bsearch_holds_fn)(const void *set, size_t i, const void *key);

static inline size_t bsearch_first(const void *set, size_t n, bsearch_holds_fn holds, const void *key)
{
	size_t lo = 0, hi = n;	/* holds is false below lo and true from hi on */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (holds(set, mid, key))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

#endif
