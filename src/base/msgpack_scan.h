/*
 * msgpack_scan.h — check a msgpack object's bytes before msgpack-c decodes them.
 *
 * msgpack-c allocates a container's elements as soon as it reads the count: without a check, a 5-byte header
 * can make it allocate gigabytes. msgpack_scan_object() walks the object at buf[*pos] without decoding it
 * (msgpack-c does the decoding afterwards): it checks that the object is complete and that no array or map
 * declares more elements than bytes remain (each element takes at least one), so decoding allocates at most a
 * small multiple of the object's size. Every reader of an untrusted msgpack file (profiles, replay files) runs
 * it before msgpack_unpack_next().
 *
 * Pure function, no allocation; thread-safe.
 */
#ifndef HOSTPROF_BASE_MSGPACK_SCAN_H
#define HOSTPROF_BASE_MSGPACK_SCAN_H

#include <stddef.h>
#include <stdint.h>

enum msgpack_scan_result { MSGPACK_SCAN_OK, MSGPACK_SCAN_TRUNCATED, MSGPACK_SCAN_INVALID };

/* On MSGPACK_SCAN_OK, *pos is advanced past the object; otherwise it is unchanged. */
enum msgpack_scan_result msgpack_scan_object(const uint8_t *buf, size_t len, size_t *pos);

#endif
