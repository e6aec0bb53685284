/*
 * otlp.h — a profile as an OpenTelemetry (OTLP) profiles export request: the binary protobuf
 * ExportProfilesServiceRequest a collector takes at /v1development/profiles, for `hostprof convert --to otlp` and
 * for the OTLP sender (src/export/otlp_sender.h).
 *
 * The message is built with protobuf-c code generated from src/profile/proto/otlp_*.proto (package
 * opentelemetry.proto.*, release OTLP_PROFILES_PROTO_VERSION; man/hostprof-profile.5, OTLP EXPORT, is the
 * reference). The mapping:
 *   - One ResourceProfiles per process (pid and process name, as the profile groups them), its resource
 *     attributes host.id, host.name, host.arch, os.type "linux", process.pid, process.executable.name (the
 *     process name, when known), process.executable.path and container.id (struct profile_process, when known)
 *     and service.name (the service an APM agent in the process published, when its
 *     samples carry one; a sample of another service carries its own as a sample attribute).
 *   - One ScopeProfiles per resource, scope "hostprof" and the options' version, holding one Profile per kind of
 *     value, each with the samples that have some of it: cpu/nanoseconds (each sample's CPU time; period_type
 *     cpu/nanoseconds, period the nominal sampling period), samples/count (the number of samples) and, in a
 *     profile with off-CPU time, off-cpu/nanoseconds and preempted/nanoseconds (the part of it the thread was
 *     runnable). A Profile holds a single sample type: that is why each kind is a Profile of its own. Each Profile
 *     has the profile's start time and duration.
 *   - Samples are aggregated: one value each, attributes thread.id and thread.name, link_index to the APM trace and
 *     transaction (span) of a correlated sample. In the samples/count Profile of a process all of whose CPU
 *     samples have their time (struct profile_sample), each sample has instead values and timestamps_unix_nano
 *     in parallel, one sample (value 1) at each time, so that the values still add up to the count; times are
 *     held within the Profile's [time_unix_nano, time_unix_nano + duration_nano). A process some of whose
 *     samples lost their time (the profile's info.timestamps_dropped) gets no timestamps, rather than some.
 *   - One ProfilesDictionary for the whole request with only what the samples reach: element 0 of every table the
 *     zero value, strings and attributes unique. Mappings keep the profile's ranges and file name, with the
 *     attributes process.executable.build_id.gnu (GNU build ID, hex) and process.executable.build_id.htlhash (the
 *     FileID, 32 hex digits). Locations keep hostprof's ELF virtual addresses (kernel: offset in the kernel's
 *     text) and their lines, innermost inlined function first, and carry profile.frame.type ("native", "kernel",
 *     "go", "jit", "abort" for hostprof's [truncated] and [unknown] frames). Functions: name and source file.
 * Strings are written as the profile holds them (protobuf strings are meant to be UTF-8; names a process made
 * may not be, and a backend joins them with symbol files as they are).
 *
 * Bounds: every table and the message itself must fit protobuf's limits (indices are int32, a message is under
 * 2 GiB); a larger profile is refused with -EOVERFLOW, before anything is packed.
 */
#ifndef HOSTPROF_PROFILE_OTLP_H
#define HOSTPROF_PROFILE_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "src/profile/profile.h"

/* The opentelemetry-proto release whose profiles messages hostprof writes (v1development: still Alpha, so each
 * release may change the wire format; v1.10.0 renumbered Sample and v1.11.0 kept it). */
#define OTLP_PROFILES_PROTO_VERSION "v1.11.0"

/*
 * The development revision of the profiles format that release is: what a sender announces in the HTTP header
 * OTLP-Profiles-Development-Version (gRPC metadata otlp-profiles-development-version). The OTLP sender
 * (src/export/otlp_sender.h) sends it as its dev_version, to OTLP_PROFILES_PATH. A receiver that knows revisions
 * answers one it does not take with HTTP 400 or gRPC INVALID_ARGUMENT, which is final: the request is dropped, not
 * retried. A request without the header is read as revision 1.
 */
#define OTLP_PROFILES_DEVELOPMENT_VERSION "1"

/* The instrumentation scope's name. */
#define OTLP_SCOPE_NAME "hostprof"

/* What the profile does not say itself. Every field may be NULL (or the whole struct): then the default. */
struct otlp_encode_options {
	const char *host_id;		/* host.id; NULL or "": the profile's (info.host_id), left out if it has none */
	const char *host_name;		/* host.name; NULL or "": the profile's (info.hostname), likewise */
	const char *host_arch;		/* host.arch, OpenTelemetry's name ("amd64"); NULL: the architecture hostprof
					 * was built for, which is the one it records on */
	const char *scope_version;	/* the scope's version (hostprof's); NULL: none */
};

/*
 * p as an ExportProfilesServiceRequest, packed into a new buffer of the caller's (*buf, *len; free() it; a
 * request with nothing in it is a few bytes, never NULL). Only reads p, whose indices must be valid (as
 * profile_read_file() and the builder leave them). Returns 0, or -ENOMEM, or -EOVERFLOW (more elements in a
 * table than an int32 index reaches, or a message of 2 GiB or more); then *buf is NULL and *len 0.
 */
int otlp_encode_profile(const struct profile *p, const struct otlp_encode_options *o, uint8_t **buf, size_t *len);

#endif
