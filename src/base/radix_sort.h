/*
 * radix_sort.h — a stable sort of (key, value) pairs by key, for the large tables built once per file.
 *
 * qsort(3) calls its comparison through a pointer n log n times, and glibc's merge sort moves elements larger
 * than 32 bytes through pointers, each comparison two cache misses: sorting libjvm's 58k symbols whole by
 * address took 8 ms of every run that named a new address in it, 2.5-4 ms as pairs here. A table sorts its rows
 * as pairs instead, the key what it sorts by and the value the row's index, and then reorders its rows by the
 * values: a byte of the key per pass over the pairs, and no pass for a byte every key shares (the high bytes of
 * a file's addresses).
 *
 * Contract: stable (pairs with equal keys keep their order), so pairs whose values are their indices come out
 * ordered by (key, index). scratch holds n pairs, its contents lost; the result is in pairs. No state, no
 * allocation (16 KiB of counts on the stack), thread-safe.
 */
#ifndef HOSTPROF_BASE_RADIX_SORT_H
#define HOSTPROF_BASE_RADIX_SORT_H

#include <stddef.h>
#include <stdint.h>

struct radix_pair {
	uint64_t key;
	uint64_t value;
};

void radix_sort_pairs(struct radix_pair *pairs, struct radix_pair *scratch, size_t n);

#endif
