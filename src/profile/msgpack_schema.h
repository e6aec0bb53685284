/*
 * msgpack_schema.h — the keys and names of the profile's msgpack encoding, shared by its writer
 * (msgpack_write.c) and reader (msgpack_read.c). man/hostprof-profile.5 specifies the schema. In short: every
 * message is a msgpack map keyed by the OpenTelemetry protobuf field numbers (profiles/v1development 1.11.0); the
 * top level is {0: header, 1: resource profiles, 2: dictionary}; hostprof's own fields use keys >= 100
 * (PROFILE_EXT_*). Pure functions over constant tables.
 */
#ifndef HOSTPROF_PROFILE_MSGPACK_SCHEMA_H
#define HOSTPROF_PROFILE_MSGPACK_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Top level (ProfilesData plus the header) and ProfilesDictionary keys. */
#define KEY_HEADER 0
#define KEY_RESOURCE_PROFILES 1
#define KEY_DICTIONARY 2
#define DICT_MAPPINGS 1
#define DICT_LOCATIONS 2
#define DICT_FUNCTIONS 3
#define DICT_LINKS 4
#define DICT_STRINGS 5
#define DICT_ATTRIBUTES 6
#define DICT_STACKS 7

/* hostprof extensions: keys >= 100, never OTel field numbers. */
#define PROFILE_EXT_FRAME_KIND 100	/* Location: enum profile_frame_kind */
#define PROFILE_EXT_TRACE_ID 100	/* Stack: 16-byte stack-trace ID (bin) */
#define PROFILE_EXT_CPU_NS 100		/* Sample: sum of the samples' periods, ns */
#define PROFILE_EXT_OFF_CPU_NS 101	/* Sample: time off CPU, ns (written when not 0) */
#define PROFILE_EXT_PREEMPTED_NS 102	/* Sample: ... of it preempted (runnable), ns (written when not 0) */
#define PROFILE_EXT_TIMESTAMPS 103	/* Sample: array of its CPU samples' CLOCK_REALTIME times, ns (when any) */

/* Attribute keys hostprof writes into the attribute table (OTel semantic conventions). */
enum attr_key {
	ATTR_HTLHASH,
	ATTR_GNU_BUILD_ID,
	ATTR_FRAME_TYPE,
	ATTR_THREAD_ID,
	ATTR_THREAD_NAME,
	ATTR_SERVICE_NAME,
	ATTR_NKEYS,	/* also: a key hostprof does not use */
};


/* Resource attributes: one ResourceProfiles per (pid, comm). */
#define RESOURCE_PID "process.pid"
#define RESOURCE_COMM "process.executable.name"
/* ... and, when known (struct profile_process), the program's path and the process's container. */
#define RESOURCE_EXE_PATH "process.executable.path"
#define RESOURCE_CONTAINER_ID "container.id"

/* The attribute key's name ("thread.id"), NULL for ATTR_NKEYS and beyond. */
const char *msgpack_attr_key_name(unsigned key);
/* The profile.frame.type name of a frame kind ("native", "go", ... "abort" for error frames); NULL if none. */
const char *msgpack_frame_type_name(uint8_t kind);
/* The frame kind a profile.frame.type name (len bytes, not NUL-terminated) stands for; false if unknown. */
bool msgpack_frame_type_kind(const char *name, size_t len, uint8_t *kind);

#endif
