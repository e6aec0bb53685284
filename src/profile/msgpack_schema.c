/*
 * msgpack_schema.c — names of the profile's msgpack encoding. See msgpack_schema.h.
 */
#include <string.h>

#include "src/profile/msgpack_schema.h"
#include "src/profile/profile.h"

static const char *const attr_key_names[ATTR_NKEYS] = {
	[ATTR_HTLHASH] = "process.executable.build_id.htlhash",
	[ATTR_GNU_BUILD_ID] = "process.executable.build_id.gnu",
	[ATTR_FRAME_TYPE] = "profile.frame.type",
	[ATTR_THREAD_ID] = "thread.id",
	[ATTR_THREAD_NAME] = "thread.name",
	[ATTR_SERVICE_NAME] = "service.name",
};


static const struct {
	const char *name;
	uint8_t kind;
} frame_types[] = {
	{ "native", PROFILE_FRAME_NATIVE },
	{ "kernel", PROFILE_FRAME_KERNEL },
	{ "go", PROFILE_FRAME_GO },
	{ "cpython", PROFILE_FRAME_PYTHON },
	{ "jit", PROFILE_FRAME_JIT },	/* hostprof's own: no OpenTelemetry name covers every runtime's JIT code */
	{ "abort", PROFILE_FRAME_ERROR },	/* the ebpf-profiler's name for error frames */
};

const char *msgpack_frame_type_name(uint8_t kind)
{
	if (kind & PROFILE_FRAME_ERROR)
		return "abort";
	for (size_t i = 0; i < sizeof(frame_types) / sizeof(frame_types[0]); i++) {
		if (frame_types[i].kind == kind)
			return frame_types[i].name;
	}
	return NULL;
}


bool msgpack_frame_type_kind(const char *name, size_t len, uint8_t *kind)
{
	for (size_t i = 0; i < sizeof(frame_types) / sizeof(frame_types[0]); i++) {
		if (strlen(frame_types[i].name) == len && memcmp(frame_types[i].name, name, len) == 0) {
			*kind = frame_types[i].kind;
			return true;
		}
	}
	return false;
}

const char *msgpack_attr_key_name(unsigned key)
{
	return key < ATTR_NKEYS ? attr_key_names[key] : NULL;
}
