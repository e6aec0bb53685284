/*
 * perf_data.h — perf.data files (perf record's output) as a record source.
 *
 * A perf.data file ("PERFILE2", little-endian, file mode: not perf record -o - 's pipe mode) holds the attributes
 * of its events with their ids, a data section of perf records and feature sections after it. perf_data_open()
 * checks the header, attributes and feature sections; perf_data_source() then hands the data section's records
 * to a consumer as a record_source (record_source.h), as the sampler's rings do: the same session unwinds a
 * file's dwarf samples (REGS_USER, STACK_USER) exactly like live ones.
 *
 * What a drain delivers. The samples of the first sampling event (not a tracepoint, not perf's dummy tracking
 * event; a file of sched:sched_switch samples alone has none, and its info describes that event), each with its
 * attribute's layout, sched:sched_switch samples as off-CPU samples (below), and the side-band
 * records a session uses: MMAP2 (MMAP records are delivered as MMAP2 records without device and inode), COMM, FORK,
 * EXIT, LOST, LOST_SAMPLES, and with off-CPU samples SWITCH and SWITCH_CPU_WIDE. Everything else
 * is counted by type (perf_data_counts()) and not delivered: samples of other events, and the records a session
 * has no use for. Order: records are kept between perf's FINISHED_ROUND records and delivered in time order,
 * perf's own rule (a round's records go out once the next round has been read, those later than the previous
 * round's last time are kept for the next); each drain delivers at least one round. COMPRESSED and COMPRESSED2
 * records (perf record -z) are decompressed with one zstd stream for the whole file, records split across them
 * put back together.
 *
 * Off-CPU. A file with sched:sched_switch samples (perf record -e sched:sched_switch, hotspot's recipe) has each
 * of them delivered as an off-CPU sample (record_origin.kind RECORD_OFF_CPU, its attribute's layout): a switch-out,
 * taken in the thread leaving the CPU, as the sampler's off-CPU events deliver them (offcpu.h), then its switch
 * records: the file's own PERF_RECORD_SWITCH records (perf record --switch-events) where an event recorded them,
 * else records the reader makes (PERF_RECORD_SWITCH, a layout of their own: pid, tid and time as sample_id): a switch-out after
 * the sample, preempted when the raw data's prev_state says runnable (R, R+), and a switch-in of its next_pid at
 * the same time, or at the waiting thread's next sample of any event or its EXIT record (it is running then: at
 * most one sampling period late). Switch-outs of an exiting thread (prev_state X or Z), and switch records after
 * its EXIT (a CPU-wide event has them for its last moments), are not delivered: it never runs again. The event is the
 * tracepoint whose id is sched_switch's in the file's copy of tracefs's formats (TRACING_DATA), or that
 * EVENT_DESC names "sched:sched_switch"; where prev_state and next_pid are in its raw data comes from that format,
 * else the kernel's usual layout. A sample whose raw data is too short for them is a corrupt record (-EBADMSG).
 * Reading needs no tracefs.
 *
 * Periods: a sample's PERIOD is kept where it is time (the cpu-clock and task-clock events: ns); for other
 * events (cycles, ...) their layout says so (perf_layout.period_in_events) and it decodes as 0, each sample then
 * weighing one nominal period (perf_data_info.period_ns), as hostprof's own samples do.
 *
 * Errors. Every length is checked against its section and the file. A record whose size is impossible, or that
 * overruns its section, stops the reading: the drain returns -EBADMSG and perf_data_error() says what is wrong at
 * which file offset (in a compressed record's stream: the offset of that record). A file that ends inside the
 * data section (perf killed before writing its header: data size 0, or a size past the end) is read as far as it
 * goes, and perf_data_counts() says truncated.
 *
 * Ownership: the file is mapped read-only for the reader's life (the pages of the records delivered given back as
 * it goes: it stays resident for about a round's records); records delivered are the reader's (in the file
 * itself where they are delivered as they are there, 8-aligned, else copies), valid during the callback. Not
 * thread-safe.
 */
#ifndef HOSTPROF_PERF_DATA_H
#define HOSTPROF_PERF_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/sampling/record_source.h"

#define PERF_DATA_MAGIC "PERFILE2"
/* Record types counted apart: the kernel's (1..63) and perf's own (64..), every one below this. */
#define PERF_DATA_TYPES 128

/* What the header and feature sections say; strings are "" when the file has no such section. */
struct perf_data_info {
	const char *hostname, *osrelease, *perf_version, *arch, *cmdline;
	const char *event;		/* the event whose samples are delivered: its name (EVENT_DESC), or "" */
	uint32_t nrcpus_online, nrcpus_avail;
	uint64_t frequency_hz;		/* its sampling frequency, 0 if it samples every sample_period events */
	uint64_t sample_period;		/* ... else that period */
	uint64_t period_ns;		/* the nominal period in ns: 1e9 / frequency, or the period of a clock event */
	bool period_is_ns;		/* its samples' PERIOD is ns (cpu-clock, task-clock): kept as it is */
	bool exclude_kernel;		/* it sampled user space only */
	bool has_clock_data;		/* CLOCK_DATA: the records' clock against the wall clock at one moment */
	uint64_t clock_wall_ns, clock_ns;
	bool compressed;		/* the data section has COMPRESSED records */
	unsigned nattrs;		/* events in the file */
	bool off_cpu;			/* it has sched:sched_switch samples: delivered as off-CPU samples */
	bool switch_records;		/* an event recorded PERF_RECORD_SWITCH records (perf record --switch-events) */
};

struct perf_data_counts {
	uint64_t records[PERF_DATA_TYPES];	/* records read, by type (other types counted in records_other) */
	uint64_t records_other;
	uint64_t delivered;		/* records handed to the consumer */
	uint64_t samples_other;		/* samples of the other events (not delivered) */
	uint64_t switch_outs;		/* sched:sched_switch samples delivered as off-CPU samples */
	uint64_t switch_outs_exiting;	/* ... of them not delivered: the thread was exiting (prev_state X or Z) */
	uint64_t switches_made;		/* switch records the reader made (no --switch-events) */
	uint64_t first_time, last_time;	/* the first and last sample's time (or switch record's, delivered with
					 * off-CPU samples), in the records' clock */
	uint64_t compressed_bytes, decompressed_bytes;
	bool truncated;			/* the file ends inside its data section */
	uint64_t truncated_at;		/* ... at this file offset */
};

/* A GNU build-id of a file the records map, as the BUILD_ID feature section or an MMAP2 record gives it. */
struct perf_data_build_id {
	int32_t pid;			/* -1: the kernel's, or any process's */
	uint8_t size;			/* bytes of id, at most 20 */
	uint8_t id[20];
	const char *path;
};

struct perf_data;

/*
 * Open path (a regular file) and check its header, attributes and feature sections. Returns 0 and *out (free with
 * perf_data_free()), or a negative errno with a line in err ("PATH: ..."): -ENOENT and the like from open,
 * -EPROTO for a file that is not a perf.data file perf_data can read (another magic, big-endian, pipe mode), -EBADMSG
 * for a corrupt header (the offset named), -ENOMEM.
 */
int perf_data_open(const char *path, struct perf_data **out, char *err, size_t errlen);
/* The same over bytes in memory (borrowed: they must outlive the reader); name is used in messages. */
int perf_data_open_mem(const void *data, size_t size, const char *name, struct perf_data **out, char *err,
		       size_t errlen);
void perf_data_free(struct perf_data *pd);

/* Whether the first bytes of a file are a perf.data file's magic (n: how many there are). */
bool perf_data_is_perf_data(const void *head, size_t n);

/* The reader as a record source: drain delivers the next rounds (record_source.h), -ENODATA after the last,
 * -EBADMSG on a corrupt record (perf_data_error()). No wait, no stop. */
void perf_data_source(struct perf_data *pd, struct record_source *out);

const struct perf_data_info *perf_data_info(const struct perf_data *pd);
/* The layout of the off-CPU samples (the sched:sched_switch event's), NULL when the file has none. */
const struct perf_layout *perf_data_off_cpu_layout(const struct perf_data *pd);
const struct perf_data_counts *perf_data_counts(const struct perf_data *pd);
/* How far the reading is through the data section, 0 to 1. */
double perf_data_progress(const struct perf_data *pd);
/* Whether every record was delivered, or a corrupt one stopped the reading: drains have nothing more. */
bool perf_data_finished(const struct perf_data *pd);
/* Why the last drain returned -EBADMSG (or "" ). */
const char *perf_data_error(const struct perf_data *pd);

/* The build-id the file gives for path (a process's own for pid first, then any); NULL if none. */
const struct perf_data_build_id *perf_data_build_id(const struct perf_data *pd, int32_t pid, const char *path);

/* A record type's name as perf prints it without "PERF_RECORD_" ("SAMPLE", "MMAP2", "FINISHED_ROUND"), or NULL. */
const char *perf_data_type_name(uint32_t type);

/* "N SAMPLE, M MMAP2, ..." of the counted types for which used(type) is as asked, most first; into buf. */
void perf_data_format_counts(const struct perf_data *pd, bool delivered_types, char *buf, size_t len);

#endif
