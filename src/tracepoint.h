/*
 * tracepoint.h — the sched:sched_switch tracepoint as the running kernel describes it.
 *
 * An off-CPU sample is a sample of the sched:sched_switch tracepoint (sampler.h, offcpu.h); its raw data
 * (PERF_SAMPLE_RAW) is the tracepoint's record, whose layout the kernel publishes in tracefs:
 * events/sched/sched_switch/id (the perf config of the event) and .../format (one line per field, "field:TYPE
 * NAME;\toffset:N;\tsize:N;\tsigned:N;"). The offsets are read from there rather than assumed: they changed
 * between kernel versions (prev_state went from long to unsigned int and back).
 *
 * tracefs is looked for at /sys/kernel/tracing, then /sys/kernel/debug/tracing. Both are the kernel's own files
 * (only root can change them), read once; lengths are still bounded and every parsed number range-checked.
 *
 * Errors: negative errno with a one-line explanation in the caller's buffer: -EACCES when tracefs cannot be
 * read (not root: the message names what would allow it), -ENOENT when the kernel has no such tracepoint (or
 * tracefs is not mounted), -EBADMSG when its format lacks a field hostprof needs.
 */
#ifndef HOSTPROF_TRACEPOINT_H
#define HOSTPROF_TRACEPOINT_H

#include <stddef.h>
#include <stdint.h>

/* Where a field of the tracepoint's raw record is: offset and size in bytes (size 0: absent). */
struct tracepoint_field {
	uint16_t offset, size;
};

struct sched_switch_format {
	uint64_t id;			/* the event's config (PERF_TYPE_TRACEPOINT) */
	struct tracepoint_field common_type;	/* the record's first field: the event's id, u16 */
	struct tracepoint_field prev_pid, prev_state, next_pid;
};

/*
 * prev_state as the tracepoint reports it: the task's state bits in the low byte (S, D, T, t, X, Z, P, I);
 * none of them (0, "R", or the preemption bit above them, "R+") means the task was still runnable: preempted,
 * not blocked.
 */
#define SCHED_SWITCH_STATE_MASK 0xffu

/* Read the tracepoint's id and field layout. Returns 0, or a negative errno with why (see above). */
int sched_switch_format_read(struct sched_switch_format *out, char *why, size_t whylen);

/* Parse a format file's text (len bytes, need not end in NUL) into out's fields; out->id is left alone.
 * Returns 0, or -EBADMSG when common_type, prev_pid or prev_state is missing or out of range. */
int sched_switch_format_parse(const char *text, size_t len, struct sched_switch_format *out);

/* A raw record's field as an unsigned number (sizes 1, 2, 4 or 8, little-endian as the host); 0 and false
 * when the field is absent or does not fit in the raw_size bytes of raw. */
int tracepoint_field_get(const uint8_t *raw, size_t raw_size, struct tracepoint_field f, uint64_t *out);

#endif
