/*
 * perf_record.h — decoding of perf_event ring-buffer records.
 *
 * Pure functions over one record's bytes, which stay owned by the caller (usually the ring buffer itself):
 * decoded structs point into them, so they are valid only until the record is released. Every length is
 * checked against the record size; a malformed record yields -EBADMSG, never an out-of-bounds read.
 */
#ifndef HOSTPROF_PERF_RECORD_H
#define HOSTPROF_PERF_RECORD_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

/* What the sampler asked the kernel for; needed to know the layout of each record. */
struct perf_layout {
	uint64_t sample_type;	/* PERF_SAMPLE_* */
	uint64_t regs_mask;	/* sample_regs_user */
	int sample_id_all;	/* side-band records carry a trailing sample_id */
	bool period_in_events;	/* PERIOD counts events (cycles, ...), not ns: decoded as 0, a sample then weighing
				 * its reader's nominal period (a perf.data file's, perf_data.h) */
};

struct perf_sample {
	uint64_t ip;
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu;
	uint64_t period;
	uint64_t callchain_nr;
	const uint64_t *callchain;	/* callchain_nr entries, unaligned-safe copy not needed: records are 8-aligned */
	uint64_t regs_abi;		/* PERF_SAMPLE_REGS_ABI_*; 0 when the sample has no user registers */
	uint64_t regs[UNWIND_NREGS];	/* by enum unwind_reg; registers outside regs_mask are 0 */
	const uint8_t *stack;		/* user stack copy starting at regs[UNWIND_REG_SP] */
	uint64_t stack_size;		/* bytes valid in stack (dyn_size) */
	uint16_t misc;			/* header misc: PERF_RECORD_MISC_USER / _KERNEL ... */
	const uint8_t *raw;		/* PERF_SAMPLE_RAW: a tracepoint's record (raw_size bytes), NULL if none */
	uint32_t raw_size;		/* 0 for other events' samples (whose raw data the kernel leaves empty) */
};

/* Trailing sample_id of side-band records (only the fields hostprof asks for). */
struct perf_sample_id {
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu;
};

struct perf_mmap2 {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino;
	uint32_t prot, flags;
	const char *filename;	/* NUL-terminated within the record */
};

struct perf_comm {
	uint32_t pid, tid;
	int exec;		/* PERF_RECORD_MISC_COMM_EXEC: the process called exec */
	const char *comm;
};

struct perf_task {		/* PERF_RECORD_FORK and PERF_RECORD_EXIT */
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
};

/* PERF_RECORD_SWITCH and PERF_RECORD_SWITCH_CPU_WIDE (attr.context_switch): the task of the sample_id switched
 * out (out, preempted: it was still runnable) or in, at time. */
struct perf_switch {
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu;
	int out, preempted;
};

struct perf_lost {
	uint64_t id, lost;
};

/*
 * Where a record's time is, in bytes from the start of its header: in a sample after the fields that precede
 * TIME, in a side-band record in its trailing sample_id (sample_id_all). -1 when the record carries no time
 * (no PERF_SAMPLE_TIME, no sample_id, or a size too small to hold one). Only the header's type and size are read,
 * so a caller can find the time of a record that wraps the end of a ring before copying it.
 */
int perf_record_time_offset(const struct perf_layout *l, uint32_t type, uint16_t size);

int perf_decode_sample(const struct perf_layout *l, const struct perf_event_header *h, struct perf_sample *out);
/* The pointers of ps into a record at from (stack, callchain, raw) moved to the same offsets in its copy at to:
 * a sample decoded once stays valid with the record copied elsewhere. */
void perf_sample_rebase(struct perf_sample *ps, const void *from, const void *to);
int perf_decode_mmap2(const struct perf_event_header *h, struct perf_mmap2 *out);
int perf_decode_comm(const struct perf_event_header *h, struct perf_comm *out);
int perf_decode_task(const struct perf_event_header *h, struct perf_task *out);
/* A switch record of l's layout (its trailing sample_id must carry TID and TIME). */
int perf_decode_switch(const struct perf_layout *l, const struct perf_event_header *h, struct perf_switch *out);
int perf_decode_lost(const struct perf_event_header *h, struct perf_lost *out);
/* PERF_RECORD_LOST_SAMPLES: number of samples lost. */
int perf_decode_lost_samples(const struct perf_event_header *h, uint64_t *lost);

/* Split a sample callchain: kernel and nkernel receive the kernel part, without the PERF_CONTEXT_* markers. */
void perf_callchain_kernel(const struct perf_sample *s, const uint64_t **kernel, size_t *nkernel);
/* The user part likewise (the kernel's frame-pointer walk: the sampled IP, then return addresses). */
void perf_callchain_user(const struct perf_sample *s, const uint64_t **user, size_t *nuser);

#endif
