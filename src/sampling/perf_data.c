/*
 * perf_data.c — perf.data files as a record source. See perf_data.h.
 *
 * The layouts are perf's (tools/perf/util/header.h, tools/lib/perf/include/perf/event.h): a 104-byte file header
 * with the attribute, data and event-type sections and a 256-bit feature mask; one section (offset, size) per
 * feature set, in bit order, right after the data section; strings there as a u32 length and that many bytes.
 */
#include "src/sampling/perf_data.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "src/base/escape.h"
#include "src/base/hindex.h"
#include "src/base/regular_file.h"

/* perf's own record types (tools/lib/perf/include/perf/event.h). */
enum {
	PD_HEADER_ATTR = 64,
	PD_FINISHED_ROUND = 68,
	PD_AUXTRACE = 71,
	PD_COMPRESSED = 81,
	PD_FINISHED_INIT = 82,
	PD_COMPRESSED2 = 83,
};

/* Feature bits (tools/perf/util/header.h). */
enum {
	FEAT_TRACING_DATA = 1,
	FEAT_BUILD_ID = 2,
	FEAT_HOSTNAME = 3,
	FEAT_OSRELEASE = 4,
	FEAT_VERSION = 5,
	FEAT_ARCH = 6,
	FEAT_NRCPUS = 7,
	FEAT_CMDLINE = 11,
	FEAT_EVENT_DESC = 12,
	FEAT_CLOCK_DATA = 29,
	FEAT_BITS = 256,
};

#define HEADER_SIZE 104
#define MISC_BUILD_ID_SIZE (1u << 15)
#define PD_STRING_MAX 4096
#define PD_MAX_ATTRS 4096
#define NO_ATTR UINT32_MAX
/* Threads waiting for a switch-in the reader infers (no switch records in the file): at most this many at once. */
#define PD_MAX_WAITING 65536
/* prev_state's bits of a task that was not runnable (S, D, T, t, X, Z, P, I: the kernel's TASK_REPORT and
 * TASK_REPORT_IDLE); without any, it was preempted (R, or R+: TASK_REPORT_MAX). */
#define SWITCH_STATE_BLOCKED 0xffu
#define SWITCH_STATE_EXIT_DEAD 0x10u
#define SWITCH_STATE_EXIT_ZOMBIE 0x20u

struct pd_attr {
	struct perf_event_attr attr;
	struct perf_layout layout;
	char *name;
};

/* Where sched:sched_switch's fields are in its raw data (tracefs's format of it, or the kernel's usual one). */
struct switch_format {
	uint32_t prev_state, prev_state_size, next_pid;
	uint32_t need;		/* bytes of raw data the fields need */
	uint64_t id;		/* the tracepoint's id in the format perf copied, 0 if none */
};

struct pd_id {
	uint64_t id;
	uint32_t attr;
};

struct pending {
	uint64_t time, seq;
	const uint8_t *rec;	/* in the file, or in a chunk */
	uint32_t attr;
	uint32_t chunk;		/* the chunk holding it, NO_CHUNK: the file */
};

#define NO_CHUNK UINT32_MAX
#define CHUNK_BYTES (1u << 20)

/* Memory for the records that cannot be delivered from the file itself (rewritten MMAPs, the decompressed
 * stream's): a chunk is filled, then used again once every record in it has been delivered. */
struct chunk {
	uint8_t *mem;
	size_t cap, len;
	size_t live;		/* its records not delivered yet */
};

struct perf_data {
	char *name;
	const uint8_t *base;
	size_t size;
	void *map;		/* perf_data_open()'s mapping, else NULL */
	size_t map_len;
	uint64_t released;	/* the mapping's bytes before this offset were given back (release_read()) */
	struct pd_attr *attrs;
	unsigned nattrs, used;	/* used: the attribute whose samples are delivered */
	struct pd_id *ids;
	size_t nids;
	uint64_t data_off, data_end, pos;
	struct perf_data_info info;
	char *hostname, *osrelease, *version, *arch, *cmdline;
	struct perf_data_build_id *bids;
	size_t nbids, capbids;
	struct perf_data_counts counts;
	char err[512];
	bool failed, eof, done;
	/* the records read, kept until their time comes: where they are in the file, or their copies' chunks */
	struct chunk *chunks;
	uint32_t nchunks, cur;	/* cur: the chunk being filled, NO_CHUNK: none */
	struct pending *pend;
	size_t npend, cappend;
	uint64_t seq, last_time, round_max, flush_limit;
	/* perf record -z: one stream for the whole file, what it gave not yet parsed */
	ZSTD_DStream *zs;
	uint8_t *zbuf;
	size_t zlen, zcap;
	bool in_stream;
	uint64_t stream_rec_off;	/* file offset of the compressed record being parsed */
	/* off-CPU: the sched:sched_switch event's samples are switch-outs */
	uint32_t off_attr;		/* its attribute, NO_ATTR if none */
	struct switch_format swf;
	bool switch_records;		/* an event records PERF_RECORD_SWITCH (perf record --switch-events) */
	struct perf_layout switch_layout;	/* of the switch records the reader makes (no switch records) */
	struct hindex waiting;		/* no switch records: tid -> pid of the threads switched out, until they run */
};

static int fail(struct perf_data *pd, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct perf_data *pd, uint64_t off, const char *fmt, ...)
{
	char what[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(pd->err, sizeof(pd->err), "%s: corrupt perf.data at offset %" PRIu64 "%s: %s", pd->name, off,
		 pd->in_stream ? " (in the compressed record there)" : "", what);
	pd->failed = true;
	return -EBADMSG;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

bool perf_data_is_perf_data(const void *head, size_t n)
{
	return n >= 8 && memcmp(head, PERF_DATA_MAGIC, 8) == 0;
}

const char *perf_data_type_name(uint32_t type)
{
	static const char *const kernel[] = {
		[PERF_RECORD_MMAP] = "MMAP", [PERF_RECORD_LOST] = "LOST", [PERF_RECORD_COMM] = "COMM",
		[PERF_RECORD_EXIT] = "EXIT", [PERF_RECORD_THROTTLE] = "THROTTLE",
		[PERF_RECORD_UNTHROTTLE] = "UNTHROTTLE", [PERF_RECORD_FORK] = "FORK", [PERF_RECORD_READ] = "READ",
		[PERF_RECORD_SAMPLE] = "SAMPLE", [PERF_RECORD_MMAP2] = "MMAP2", [PERF_RECORD_AUX] = "AUX",
		[PERF_RECORD_ITRACE_START] = "ITRACE_START", [PERF_RECORD_LOST_SAMPLES] = "LOST_SAMPLES",
		[PERF_RECORD_SWITCH] = "SWITCH", [PERF_RECORD_SWITCH_CPU_WIDE] = "SWITCH_CPU_WIDE",
		[PERF_RECORD_NAMESPACES] = "NAMESPACES", [PERF_RECORD_KSYMBOL] = "KSYMBOL",
		[PERF_RECORD_BPF_EVENT] = "BPF_EVENT", [PERF_RECORD_CGROUP] = "CGROUP",
		[PERF_RECORD_TEXT_POKE] = "TEXT_POKE", [21] = "AUX_OUTPUT_HW_ID",
	};
	static const char *const user[] = {
		"HEADER_ATTR", "HEADER_EVENT_TYPE", "HEADER_TRACING_DATA", "HEADER_BUILD_ID", "FINISHED_ROUND",
		"ID_INDEX", "AUXTRACE_INFO", "AUXTRACE", "AUXTRACE_ERROR", "THREAD_MAP", "CPU_MAP", "STAT_CONFIG",
		"STAT", "STAT_ROUND", "EVENT_UPDATE", "TIME_CONV", "HEADER_FEATURE", "COMPRESSED", "FINISHED_INIT",
		"COMPRESSED2",
	};
	if (type < sizeof(kernel) / sizeof(kernel[0]))
		return kernel[type];
	if (type >= 64 && type - 64 < sizeof(user) / sizeof(user[0]))
		return user[type - 64];
	return NULL;
}

/* A feature section's string (u32 length, then the bytes), copied and NUL-terminated; *at moves past it. */
static char *feature_string(const uint8_t *p, uint64_t len, uint64_t *at)
{
	if (*at + 4 > len)
		return NULL;
	uint32_t n = rd32(p + *at);
	if (n > len - *at - 4 || n > PD_STRING_MAX)
		return NULL;
	char *s = strndup((const char *)p + *at + 4, n);
	*at += 4 + (uint64_t)n;
	return s;
}

static int add_build_id(struct perf_data *pd, int32_t pid, const uint8_t *id, uint8_t size, const char *path,
			size_t pathlen)
{
	if (pd->nbids == pd->capbids) {
		size_t cap = pd->capbids ? 2 * pd->capbids : 16;
		struct perf_data_build_id *b = realloc(pd->bids, cap * sizeof(*b));
		if (!b)
			return -ENOMEM;
		pd->bids = b;
		pd->capbids = cap;
	}
	struct perf_data_build_id *b = &pd->bids[pd->nbids];
	memset(b, 0, sizeof(*b));
	b->pid = pid;
	b->size = size > 20 ? 20 : size;
	memcpy(b->id, id, b->size);
	if (!(b->path = strndup(path, pathlen)))
		return -ENOMEM;
	pd->nbids++;
	return 0;
}

/* BUILD_ID: records of header, pid, 24 bytes of id (20, size, 3 reserved), NUL-terminated file name. */
static int read_build_ids(struct perf_data *pd, uint64_t off, uint64_t len)
{
	const uint8_t *p = pd->base + off;
	uint64_t at = 0;
	while (at + 36 <= len) {
		uint16_t size;
		uint16_t misc;
		memcpy(&misc, p + at + 4, 2);
		memcpy(&size, p + at + 6, 2);
		if (size < 36 || size > len - at)
			return fail(pd, off + at, "a build-id entry of %u bytes", size);
		uint8_t idsize = misc & MISC_BUILD_ID_SIZE ? p[at + 32] : 20;
		const char *name = (const char *)p + at + 36;
		int err = add_build_id(pd, (int32_t)rd32(p + at + 8), p + at + 12, idsize, name,
				       strnlen(name, size - 36));
		if (err < 0)
			return err;
		at += size;
	}
	return 0;
}

/* EVENT_DESC: u32 events, u32 attribute size, then per event its attribute, u32 ids, name, ids. */
static void read_event_desc(struct perf_data *pd, uint64_t off, uint64_t len)
{
	const uint8_t *p = pd->base + off;
	if (len < 8)
		return;
	uint32_t nre = rd32(p), sz = rd32(p + 4);
	uint64_t at = 8;
	for (uint32_t i = 0; i < nre && i < pd->nattrs; i++) {
		if (sz > len - at || len - at - sz < 4)
			return;
		at += sz;
		uint32_t nids = rd32(p + at);
		at += 4;
		char *name = feature_string(p, len, &at);
		if (!name || (uint64_t)nids * 8 > len - at) {
			free(name);
			return;
		}
		at += (uint64_t)nids * 8;
		free(pd->attrs[i].name);
		pd->attrs[i].name = name;
	}
}

/* The field called name in a tracepoint's format text ("field:long prev_state;\toffset:32;\tsize:8;..."): its
 * offset and size, 0 when found. */
static int format_field(const char *text, const char *name, uint32_t *offset, uint32_t *size)
{
	char key[32];
	snprintf(key, sizeof(key), " %s;", name);
	const char *at = strstr(text, key);
	unsigned o, n;
	if (!at || sscanf(at + strlen(key), " offset:%u; size:%u;", &o, &n) != 2 || o > 4096 || n > 8)
		return -1;
	*offset = o;
	*size = n;
	return 0;
}

/*
 * TRACING_DATA: tracefs's files as perf copied them, the event formats among them as text. sched_switch's
 * ("name: sched_switch", "ID: n", then a line per field) says which attribute it is (its config is that id) and
 * where prev_state and next_pid are in its raw data. A format that does not read leaves the kernel's usual one.
 */
static void read_switch_format(struct perf_data *pd, const uint8_t *p, uint64_t len)
{
	static const char key[] = "name: sched_switch\nID: ";
	const uint8_t *at = memmem(p, len, key, sizeof(key) - 1);
	if (!at)
		return;
	char text[4096];
	size_t n = (size_t)(p + len - at);
	n = n < sizeof(text) - 1 ? n : sizeof(text) - 1;
	memcpy(text, at, n);
	text[n] = '\0';
	char *end = strstr(text, "print fmt:");	/* the fields are before it */
	if (end)
		*end = '\0';
	struct switch_format f = { 0 };
	uint32_t prev_pid, pid_size, next_size;
	unsigned long long id;
	if (sscanf(text + sizeof(key) - 1, "%llu", &id) != 1 || format_field(text, "prev_pid", &prev_pid, &pid_size) ||
	    format_field(text, "prev_state", &f.prev_state, &f.prev_state_size) ||
	    format_field(text, "next_pid", &f.next_pid, &next_size) || next_size != 4 ||
	    (f.prev_state_size != 4 && f.prev_state_size != 8))
		return;
	f.id = id;
	f.need = f.prev_state + f.prev_state_size > f.next_pid + 4 ? f.prev_state + f.prev_state_size : f.next_pid + 4;
	pd->swf = f;
}

static int read_feature(struct perf_data *pd, int bit, uint64_t off, uint64_t len)
{
	const uint8_t *p = pd->base + off;
	uint64_t at = 0;
	switch (bit) {
	case FEAT_TRACING_DATA:
		read_switch_format(pd, p, len);
		break;
	case FEAT_BUILD_ID:
		return read_build_ids(pd, off, len);
	case FEAT_HOSTNAME:
		pd->hostname = feature_string(p, len, &at);
		break;
	case FEAT_OSRELEASE:
		pd->osrelease = feature_string(p, len, &at);
		break;
	case FEAT_VERSION:
		pd->version = feature_string(p, len, &at);
		break;
	case FEAT_ARCH:
		pd->arch = feature_string(p, len, &at);
		break;
	case FEAT_NRCPUS:
		if (len >= 8) {
			pd->info.nrcpus_avail = rd32(p);
			pd->info.nrcpus_online = rd32(p + 4);
		}
		break;
	case FEAT_CMDLINE: {
		uint32_t n = len >= 4 ? rd32(p) : 0;
		size_t total = 0;
		at = 4;
		for (uint32_t i = 0; i < n && i < 1024; i++) {
			char *arg = feature_string(p, len, &at);
			if (!arg)
				break;
			size_t l = strlen(arg);
			char *c = realloc(pd->cmdline, total + l + 2);
			if (!c) {
				free(arg);
				return -ENOMEM;
			}
			pd->cmdline = c;
			if (total)
				c[total++] = ' ';
			memcpy(c + total, arg, l + 1);
			total += l;
			free(arg);
		}
		break;
	}
	case FEAT_EVENT_DESC:
		read_event_desc(pd, off, len);
		break;
	case FEAT_CLOCK_DATA:
		if (len >= 24) {
			pd->info.has_clock_data = true;
			pd->info.clock_wall_ns = rd64(p + 8);
			pd->info.clock_ns = rd64(p + 16);
		}
		break;
	default:
		break;
	}
	return 0;
}

static int read_features(struct perf_data *pd, const uint64_t *bits)
{
	uint64_t at = pd->data_end;
	for (int bit = 0; bit < FEAT_BITS; bit++) {
		if (!(bits[bit / 64] & (1ULL << (bit % 64))))
			continue;
		if (at + 16 > pd->size)
			return fail(pd, at, "the feature sections' table runs past the end of the file");
		uint64_t off = rd64(pd->base + at), len = rd64(pd->base + at + 8);
		if (off > pd->size || len > pd->size - off)
			return fail(pd, at, "feature %d's section (offset %" PRIu64 ", %" PRIu64 " bytes) is outside the "
				    "file", bit, off, len);
		int err = read_feature(pd, bit, off, len);
		if (err < 0)
			return err;
		at += 16;
	}
	return 0;
}

static int compare_ids(const void *a, const void *b)
{
	const struct pd_id *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Whether an attribute's samples are what a profile counts: not a tracepoint's, not perf's dummy event's. */
static bool sampling_attr(const struct perf_event_attr *a)
{
	return a->type != PERF_TYPE_TRACEPOINT && !(a->type == PERF_TYPE_SOFTWARE && a->config == PERF_COUNT_SW_DUMMY);
}

/* Whether an attribute's PERIOD is time (ns): the cpu-clock and task-clock events. */
static bool clock_attr(const struct perf_event_attr *a)
{
	return a->type == PERF_TYPE_SOFTWARE &&
	       (a->config == PERF_COUNT_SW_CPU_CLOCK || a->config == PERF_COUNT_SW_TASK_CLOCK);
}

/* The attribute section: entries of entry bytes, an attribute and the section of its ids (perf_file_attr). */
static int read_attrs(struct perf_data *pd, uint64_t entry, uint64_t off, uint64_t len)
{
	if (entry < PERF_ATTR_SIZE_VER0 + 16 || entry > 4096 || entry % 8)
		return fail(pd, 16, "an attribute entry of %" PRIu64 " bytes", entry);
	uint64_t attr_size = entry - 16;
	if (off > pd->size || len > pd->size - off || len % entry || len / entry > PD_MAX_ATTRS || !len)
		return fail(pd, 24, "the attribute section (offset %" PRIu64 ", %" PRIu64 " bytes) does not hold "
			    "whole attributes inside the file", off, len);
	pd->nattrs = (unsigned)(len / entry);
	if (!(pd->attrs = calloc(pd->nattrs, sizeof(*pd->attrs))))
		return -ENOMEM;
	size_t total_ids = 0;
	for (unsigned i = 0; i < pd->nattrs; i++) {
		const uint8_t *p = pd->base + off + i * entry;
		struct pd_attr *a = &pd->attrs[i];
		memcpy(&a->attr, p, attr_size < sizeof(a->attr) ? attr_size : sizeof(a->attr));
		a->layout = (struct perf_layout){ .sample_type = a->attr.sample_type,
						  .regs_mask = a->attr.sample_regs_user,
						  .sample_id_all = a->attr.sample_id_all,
						  .period_in_events = !clock_attr(&a->attr) };
		uint64_t ioff = rd64(p + attr_size), ilen = rd64(p + attr_size + 8);
		if (ioff > pd->size || ilen > pd->size - ioff || ilen % 8)
			return fail(pd, off + i * entry + attr_size, "attribute %u's ids are outside the file", i);
		total_ids += ilen / 8;
	}
	if (total_ids && !(pd->ids = calloc(total_ids, sizeof(*pd->ids))))
		return -ENOMEM;
	for (unsigned i = 0; i < pd->nattrs; i++) {
		const uint8_t *p = pd->base + off + i * entry;
		uint64_t ioff = rd64(p + attr_size), ilen = rd64(p + attr_size + 8);
		for (uint64_t k = 0; k < ilen / 8; k++)
			pd->ids[pd->nids++] = (struct pd_id){ .id = rd64(pd->base + ioff + 8 * k), .attr = i };
	}
	if (pd->nids)
		qsort(pd->ids, pd->nids, sizeof(*pd->ids), compare_ids);
	/* nattrs: none (an error, unless the file has sched:sched_switch samples: parse_header(), once the feature
	 * sections named the events) */
	for (pd->used = 0; pd->used < pd->nattrs && !sampling_attr(&pd->attrs[pd->used].attr); pd->used++)
		;
	/* Records of different layouts must say which event they are of. */
	for (unsigned i = 1; i < pd->nattrs; i++) {
		const struct perf_layout *l = &pd->attrs[i].layout, *f = &pd->attrs[0].layout;
		if ((l->sample_type != f->sample_type || l->regs_mask != f->regs_mask) &&
		    !(f->sample_type & (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_ID))) {
			snprintf(pd->err, sizeof(pd->err), "%s: its events lay out their samples differently and "
				 "carry no id to tell them apart", pd->name);
			return -EPROTO;
		}
	}
	return 0;
}

static void fill_info(struct perf_data *pd)
{
	const struct pd_attr *a = &pd->attrs[pd->used];
	struct perf_data_info *i = &pd->info;
	i->hostname = pd->hostname ? pd->hostname : "";
	i->osrelease = pd->osrelease ? pd->osrelease : "";
	i->perf_version = pd->version ? pd->version : "";
	i->arch = pd->arch ? pd->arch : "";
	i->cmdline = pd->cmdline ? pd->cmdline : "";
	i->event = a->name ? a->name : "";
	i->nattrs = pd->nattrs;
	i->exclude_kernel = a->attr.exclude_kernel;
	i->period_is_ns = clock_attr(&a->attr);
	if (a->attr.freq) {
		i->frequency_hz = a->attr.sample_freq;
		i->period_ns = a->attr.sample_freq ? 1000000000ULL / a->attr.sample_freq : 0;
	} else {
		i->sample_period = a->attr.sample_period;
		i->period_ns = i->period_is_ns ? a->attr.sample_period : 1000000;	/* nominal: 1 ms a sample */
	}
}

/*
 * The sched:sched_switch event, if the file has it: a tracepoint whose id is the one its format gave, or named so
 * (EVENT_DESC). Its raw data is laid out as the format says, else as every 64-bit kernel since 4.x lays it out.
 */
static void find_switch_attr(struct perf_data *pd)
{
	static const struct switch_format usual = { .prev_state = 32, .prev_state_size = 8, .next_pid = 56,
						    .need = 60 };
	pd->off_attr = NO_ATTR;
	for (unsigned i = 0; i < pd->nattrs; i++) {
		const struct pd_attr *a = &pd->attrs[i];
		pd->switch_records |= a->attr.context_switch;
		if (a->attr.type != PERF_TYPE_TRACEPOINT || pd->off_attr != NO_ATTR)
			continue;
		if ((pd->swf.id && a->attr.config == pd->swf.id) || (a->name && !strcmp(a->name, "sched:sched_switch")))
			pd->off_attr = i;
	}
	if (pd->off_attr != NO_ATTR && !pd->swf.need)
		pd->swf = usual;
	pd->switch_layout = (struct perf_layout){ .sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
						  .sample_id_all = 1 };
	pd->info.off_cpu = pd->off_attr != NO_ATTR;
	pd->info.switch_records = pd->switch_records;
}

static int parse_header(struct perf_data *pd)
{
	if (pd->size < 16 || !perf_data_is_perf_data(pd->base, pd->size)) {
		bool swapped = pd->size >= 8 && memcmp(pd->base, "2ELIFREP", 8) == 0;
		snprintf(pd->err, sizeof(pd->err), "%s: %s", pd->name,
			 swapped ? "a big-endian perf.data file: not supported" : "not a perf.data file (no PERFILE2 magic)");
		return -EPROTO;
	}
	uint64_t hsize = rd64(pd->base + 8);
	if (hsize == 16) {
		snprintf(pd->err, sizeof(pd->err), "%s: a perf.data stream of perf record -o - (pipe mode): not "
			 "supported, record to a file", pd->name);
		return -EPROTO;
	}
	if (hsize < HEADER_SIZE || pd->size < HEADER_SIZE)
		return fail(pd, 8, "a header of %" PRIu64 " bytes (the file has %zu)", hsize, pd->size);
	const uint8_t *h = pd->base;
	int err = read_attrs(pd, rd64(h + 16), rd64(h + 24), rd64(h + 32));
	if (err < 0)
		return err;
	uint64_t doff = rd64(h + 40), dsize = rd64(h + 48);
	if (doff < HEADER_SIZE || doff > pd->size)
		return fail(pd, 40, "the data section starts at %" PRIu64 ", outside the file", doff);
	pd->data_off = pd->pos = doff;
	if (dsize == 0 || dsize > pd->size - doff) {
		/* perf did not finish the file (killed, disk full): read what there is */
		pd->data_end = pd->size;
		pd->counts.truncated = true;
		pd->counts.truncated_at = pd->size;
	} else {
		pd->data_end = doff + dsize;
		uint64_t bits[4];
		memcpy(bits, h + 72, sizeof(bits));
		if ((err = read_features(pd, bits)) < 0)
			return err;
	}
	find_switch_attr(pd);
	if (pd->used == pd->nattrs && pd->off_attr == NO_ATTR) {
		snprintf(pd->err, sizeof(pd->err), "%s: no sampling event in this perf.data file (only tracepoints "
			 "other than sched:sched_switch, or perf's dummy event)", pd->name);
		return -EPROTO;
	}
	if (pd->used == pd->nattrs)	/* off-CPU samples only (perf record -e sched:sched_switch): the header's */
		pd->used = pd->off_attr;
	fill_info(pd);
	return 0;
}

void perf_data_free(struct perf_data *pd)
{
	if (!pd)
		return;
	for (unsigned i = 0; i < pd->nattrs; i++)
		free(pd->attrs[i].name);
	free(pd->attrs);
	free(pd->ids);
	for (size_t i = 0; i < pd->nbids; i++)
		free((char *)pd->bids[i].path);
	free(pd->bids);
	free(pd->hostname);
	free(pd->osrelease);
	free(pd->version);
	free(pd->arch);
	free(pd->cmdline);
	for (uint32_t i = 0; i < pd->nchunks; i++)
		free(pd->chunks[i].mem);
	free(pd->chunks);
	free(pd->pend);
	free(pd->zbuf);
	hindex_free(&pd->waiting);
	if (pd->zs)
		ZSTD_freeDStream(pd->zs);
	if (pd->map)
		munmap(pd->map, pd->map_len);
	free(pd->name);
	free(pd);
}

int perf_data_open_mem(const void *data, size_t size, const char *name, struct perf_data **out, char *err,
		       size_t errlen)
{
	struct perf_data *pd = calloc(1, sizeof(*pd));
	char shown[ESCAPE_SHOWN_MAX];
	if (!pd || !(pd->name = strdup(escape_str(shown, sizeof(shown), name)))) {
		free(pd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pd->base = data;
	pd->size = size;
	pd->cur = NO_CHUNK;
	pd->off_attr = NO_ATTR;
	int rc = parse_header(pd);
	if (rc < 0) {
		snprintf(err, errlen, "%s", rc == -ENOMEM ? "out of memory" : pd->err);
		perf_data_free(pd);
		return rc;
	}
	pd->failed = false;
	*out = pd;
	return 0;
}

int perf_data_open(const char *path, struct perf_data **out, char *err, size_t errlen)
{
	char shown[ESCAPE_SHOWN_MAX];
	struct stat st;
	int fd = regular_file_open(AT_FDCWD, path, 0, &st);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", escape_str(shown, sizeof(shown), path), strerror(-fd));
		return fd;
	}
	size_t len = (size_t)st.st_size;
	void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	int e = errno;
	close(fd);
	if (len && map == MAP_FAILED) {
		snprintf(err, errlen, "cannot read %s: %s", escape_str(shown, sizeof(shown), path), strerror(e));
		return -e;
	}
	int rc = perf_data_open_mem(len ? map : "", len, path, out, err, errlen);
	if (rc < 0) {
		if (len)
			munmap(map, len);
		return rc;
	}
	(*out)->map = len ? map : NULL;
	(*out)->map_len = len;
	return 0;
}

/* The attribute of a record: by its id when the events carry one, else the first. */
static uint32_t attr_of(const struct perf_data *pd, const uint8_t *rec, uint32_t type, uint16_t size)
{
	if (pd->nattrs == 1 || !pd->nids)
		return 0;
	uint64_t t = pd->attrs[0].layout.sample_type;
	int off = -1;
	if (type == PERF_RECORD_SAMPLE) {
		if (t & PERF_SAMPLE_IDENTIFIER)
			off = 8;
		else if (t & PERF_SAMPLE_ID)
			off = 8 + 8 * (!!(t & PERF_SAMPLE_IP) + !!(t & PERF_SAMPLE_TID) + !!(t & PERF_SAMPLE_TIME) +
				       !!(t & PERF_SAMPLE_ADDR));
	} else if (pd->attrs[0].layout.sample_id_all) {
		if (t & PERF_SAMPLE_IDENTIFIER)
			off = size - 8;
		else if (t & PERF_SAMPLE_ID)
			off = size - 8 * (1 + !!(t & PERF_SAMPLE_STREAM_ID) + !!(t & PERF_SAMPLE_CPU));
	}
	if (off < 8 || off + 8 > size)
		return 0;
	uint64_t id = rd64(rec + off);
	size_t lo = 0, hi = pd->nids;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (pd->ids[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < pd->nids && pd->ids[lo].id == id ? pd->ids[lo].attr : 0;
}

/* Room for n bytes (8-aligned) for a copied record: in the chunk being filled, else in a chunk whose records have
 * all been delivered, else in a new one. *chunk and *out say where. */
static int reserve(struct perf_data *pd, size_t n, uint32_t *chunk, uint8_t **out)
{
	n = (n + 7) & ~(size_t)7;
	struct chunk *c = pd->cur != NO_CHUNK ? &pd->chunks[pd->cur] : NULL;
	if (c && !c->live)
		c->len = 0;
	if (!c || c->cap - c->len < n) {
		uint32_t i = 0;
		while (i < pd->nchunks && (pd->chunks[i].live || pd->chunks[i].cap < n))
			i++;
		if (i == pd->nchunks) {
			struct chunk *cs = realloc(pd->chunks, (pd->nchunks + 1) * sizeof(*cs));
			if (!cs)
				return -ENOMEM;
			pd->chunks = cs;
			size_t cap = n > CHUNK_BYTES ? n : CHUNK_BYTES;
			if (!(cs[i].mem = malloc(cap)))
				return -ENOMEM;
			cs[i].cap = cap;
			cs[i].live = 0;
			pd->nchunks++;
		}
		pd->cur = i;
		c = &pd->chunks[i];
		c->len = 0;
	}
	*chunk = pd->cur;
	*out = c->mem + c->len;
	c->len += n;
	c->live++;
	return 0;
}

static int push(struct perf_data *pd, const uint8_t *rec, uint32_t chunk, uint64_t time, uint32_t attr)
{
	if (pd->npend == pd->cappend) {
		size_t cap = pd->cappend ? 2 * pd->cappend : 4096;
		struct pending *p = realloc(pd->pend, cap * sizeof(*p));
		if (!p) {
			if (chunk != NO_CHUNK)
				pd->chunks[chunk].live--;
			return -ENOMEM;
		}
		pd->pend = p;
		pd->cappend = cap;
	}
	pd->pend[pd->npend++] = (struct pending){ .time = time, .seq = pd->seq++, .rec = rec, .attr = attr,
						  .chunk = chunk };
	if (time > pd->round_max)
		pd->round_max = time;
	return 0;
}

/* A record's time by its layout, or the last one seen (kept in place among its neighbours). */
static uint64_t record_time(struct perf_data *pd, const uint8_t *rec, uint32_t type, uint16_t size, uint32_t attr)
{
	int off = perf_record_time_offset(&pd->attrs[attr].layout, type, size);
	if (off >= 0 && (unsigned)off + 8 <= size)
		pd->last_time = rd64(rec + off);
	return pd->last_time;
}

/* A sched:sched_switch sample's raw data must hold the fields read of it (a sample that does not decode at all is
 * delivered, and counted by the session as other such records are). */
static int check_switch(struct perf_data *pd, const uint8_t *rec, uint64_t off)
{
	struct perf_sample ps;
	if (perf_decode_sample(&pd->attrs[pd->off_attr].layout, (const struct perf_event_header *)rec, &ps) < 0)
		return 0;
	if (!ps.raw || ps.raw_size < pd->swf.need)
		return fail(pd, off, "a sched:sched_switch sample with %u bytes of raw data: its fields (prev_state at %u, "
			    "next_pid at %u) need %u", ps.raw ? ps.raw_size : 0, pd->swf.prev_state, pd->swf.next_pid,
			    pd->swf.need);
	return 0;
}

/* A record to deliver, kept where it is in the file, else copied (an MMAP rewritten as an MMAP2, a record of the
 * decompressed stream). */
static int keep(struct perf_data *pd, const uint8_t *rec, uint32_t type, uint16_t size, uint64_t off)
{
	uint32_t attr = attr_of(pd, rec, type, size);
	uint64_t time = record_time(pd, rec, type, size, attr);
	uint32_t chunk;
	uint8_t *d;
	int err;
	if (type == PERF_RECORD_SAMPLE) {
		if (attr == pd->off_attr) {
			if ((err = check_switch(pd, rec, off)) < 0)
				return err;
		} else if (attr != pd->used) {
			pd->counts.samples_other++;
			return 0;
		}
	}
	/* the time the profile covers: its samples', and with off-CPU samples its switches' (a wait may start with one) */
	if (type == PERF_RECORD_SAMPLE || type == PERF_RECORD_SWITCH || type == PERF_RECORD_SWITCH_CPU_WIDE) {
		if (!pd->counts.first_time || time < pd->counts.first_time)
			pd->counts.first_time = time;
		if (time > pd->counts.last_time)
			pd->counts.last_time = time;
	}
	if ((type == PERF_RECORD_MMAP || type == PERF_RECORD_MMAP2) && size >= 16 && rd32(rec + 8) == UINT32_MAX)
		return 0;	/* the kernel's and its modules' mappings: its frames come from the call chain */
	if (type == PERF_RECORD_MMAP) {
		/* pid, tid, addr, len, pgoff (40 bytes with the header), then the name: MMAP2 adds 32 bytes there */
		if (size < 40 || size > UINT16_MAX - 32)
			return 0;
		if ((err = reserve(pd, (size_t)size + 32, &chunk, &d)) < 0)
			return err;
		struct perf_event_header h = { .type = PERF_RECORD_MMAP2, .size = (uint16_t)(size + 32) };
		memcpy(&h.misc, rec + 4, 2);
		h.misc &= (uint16_t)~PERF_RECORD_MISC_MMAP_BUILD_ID;
		memcpy(d, &h, sizeof(h));
		memcpy(d + 8, rec + 8, 32);
		memset(d + 40, 0, 32);
		uint32_t prot = h.misc & PERF_RECORD_MISC_MMAP_DATA ? PROT_READ : PROT_READ | PROT_EXEC, flags = MAP_PRIVATE;
		memcpy(d + 64, &prot, 4);
		memcpy(d + 68, &flags, 4);
		memcpy(d + 72, rec + 40, size - 40);
		return push(pd, d, chunk, time, attr);
	}
	uint16_t misc;
	memcpy(&misc, rec + 4, 2);
	if (type == PERF_RECORD_MMAP2 && size >= 72 && (misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) {
		/* build_id_size u8, 3 reserved, 20 bytes of id in place of maj..ino_generation */
		const char *name = (const char *)rec + 72;
		add_build_id(pd, (int32_t)rd32(rec + 8), rec + 44, rec[40], name, strnlen(name, size - 72));
	}
	/* Records are 8-aligned in the file, but for those after a COMPRESSED record of perf before 6.x, whose size is
	 * its stream's, unpadded: those are copied as the stream's are, for the decoders' aligned reads. */
	if (!pd->in_stream && !((uintptr_t)rec & 7))
		return push(pd, rec, NO_CHUNK, time, attr);
	if ((err = reserve(pd, size, &chunk, &d)) < 0)
		return err;
	memcpy(d, rec, size);
	return push(pd, d, chunk, time, attr);
}

static int compare_pending(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * The records are cold: read once from the page cache. Their first bytes (the header, the registers, the top of
 * the stack copy where unwinding starts) are asked for a few records ahead, so that the memory is there when the
 * record's turn comes.
 */
#define PREFETCH_AHEAD 2
#define PREFETCH_BYTES 1536
static void prefetch_record(const uint8_t *rec)
{
	for (unsigned i = 0; i < PREFETCH_BYTES; i += 64)
		__builtin_prefetch(rec + i);
}

/* Whether the kept records are in time order already: a round of one CPU's records and what the last flush
 * left usually are, and a sort of them is a cost per record that buys nothing. */
static bool pending_sorted(const struct perf_data *pd)
{
	for (size_t i = 1; i < pd->npend; i++)
		if (compare_pending(&pd->pend[i - 1], &pd->pend[i]) > 0)
			return false;
	return true;
}

/* A switch record as the kernel writes one for --switch-events (the task's pid and tid, the time), handed over. */
static void make_switch(struct perf_data *pd, bool out, bool preempted, uint32_t pid, uint32_t tid, uint64_t time,
			record_fn fn, void *ctx)
{
	struct {
		struct perf_event_header h;
		uint32_t pid, tid;
		uint64_t time;
	} r = { .h = { .type = PERF_RECORD_SWITCH, .size = sizeof(r) }, .pid = pid, .tid = tid, .time = time };
	if (out)
		r.h.misc = PERF_RECORD_MISC_SWITCH_OUT | (preempted ? PERF_RECORD_MISC_SWITCH_OUT_PREEMPT : 0);
	struct record_origin origin = { .layout = &pd->switch_layout, .kind = RECORD_CPU };
	fn(ctx, &r.h, &origin);
	pd->counts.switches_made++;
}

/* tid runs at time: its switch-in, if it was waiting for one. */
static void switch_in(struct perf_data *pd, uint32_t tid, uint64_t time, record_fn fn, void *ctx)
{
	uint64_t pid;
	if (hindex_u32_get(&pd->waiting, tid, &pid)) {
		hindex_u32_del(&pd->waiting, tid);
		make_switch(pd, false, false, (uint32_t)pid, tid, time, fn, ctx);
	}
}

/*
 * A side-band record of a file with sched:sched_switch samples: a thread's exit is its switch-in at the latest
 * (switch records made). With the file's own switch records, those of a thread's last moments, after its exit
 * record, are the session's to leave out (offcpu_time_forget()), as for live records.
 */
static void off_cpu_side_band(struct perf_data *pd, const struct perf_event_header *h, record_fn fn, void *ctx)
{
	struct perf_task t;
	if (h->type == PERF_RECORD_EXIT && !pd->switch_records && perf_decode_task(h, &t) == 0)
		switch_in(pd, t.tid, t.time, fn, ctx);
}

/*
 * A record of a file with sched:sched_switch samples. Each of them is a switch-out, delivered as an off-CPU sample
 * (record_source.h) unless its thread was exiting (prev_state X or Z: it will not run again; the kernel's own
 * switch events have no such switch-out either). Without switch records in the file the reader makes them as the
 * kernel would have: a switch-out after each such sample (preempted when prev_state says runnable), and a switch-in
 * of the thread it switched to (next_pid), or, at the latest, at the next sample or the exit of a thread waiting
 * for one (it is running then).
 */
static int deliver_off_cpu(struct perf_data *pd, const struct pending *p, record_fn fn, void *ctx)
{
	const struct perf_event_header *h = (const struct perf_event_header *)p->rec;
	bool off = p->attr == pd->off_attr && h->type == PERF_RECORD_SAMPLE;
	struct record_origin origin = { .layout = &pd->attrs[p->attr].layout, .kind = off ? RECORD_OFF_CPU : RECORD_CPU };
	struct perf_sample ps;
	bool make = !pd->switch_records;
	if (h->type != PERF_RECORD_SAMPLE) {
		off_cpu_side_band(pd, h, fn, ctx);
		return fn(ctx, h, &origin);
	}
	if ((!off && (!make || !hindex_count(&pd->waiting))) || perf_decode_sample(origin.layout, h, &ps) < 0)
		return fn(ctx, h, &origin);	/* one that does not decode is counted by the session */
	if (make)
		switch_in(pd, ps.tid, ps.time, fn, ctx);
	if (!off)
		return fn(ctx, h, &origin);
	/* check_switch() made sure the raw data holds the fields */
	uint64_t state = pd->swf.prev_state_size == 8 ? rd64(ps.raw + pd->swf.prev_state)
						     : rd32(ps.raw + pd->swf.prev_state);
	int32_t next = (int32_t)rd32(ps.raw + pd->swf.next_pid);
	if (state & (SWITCH_STATE_EXIT_DEAD | SWITCH_STATE_EXIT_ZOMBIE)) {
		pd->counts.switch_outs_exiting++;
		return 0;
	}
	pd->counts.switch_outs++;
	int stop = fn(ctx, h, &origin);
	if (make && ps.pid) {
		make_switch(pd, true, !(state & SWITCH_STATE_BLOCKED), ps.pid, ps.tid, ps.time, fn, ctx);
		if (hindex_count(&pd->waiting) < PD_MAX_WAITING)
			hindex_u32_put(&pd->waiting, ps.tid, ps.pid);
	}
	if (make && next > 0)
		switch_in(pd, (uint32_t)next, ps.time, fn, ctx);
	return stop;
}

/* Deliver the kept records up to time limit (all: UINT64_MAX), in time order; the rest stay. */
static int flush(struct perf_data *pd, uint64_t limit, record_fn fn, void *ctx)
{
	if (!pending_sorted(pd))
		qsort(pd->pend, pd->npend, sizeof(*pd->pend), compare_pending);
	size_t n = 0;
	int stop = 0;
	while (n < pd->npend && pd->pend[n].time <= limit && !stop) {
		if (n + PREFETCH_AHEAD < pd->npend)
			prefetch_record(pd->pend[n + PREFETCH_AHEAD].rec);
		const struct pending *p = &pd->pend[n++];
		struct record_origin origin = { .layout = &pd->attrs[p->attr].layout, .kind = RECORD_CPU };
		if (pd->off_attr != NO_ATTR)
			stop = deliver_off_cpu(pd, p, fn, ctx);
		else
			stop = fn(ctx, (const struct perf_event_header *)p->rec, &origin);
		if (p->chunk != NO_CHUNK)
			pd->chunks[p->chunk].live--;
	}
	pd->counts.delivered += n;
	pd->npend -= n;
	if (n && pd->npend)
		memmove(pd->pend, pd->pend + n, pd->npend * sizeof(*pd->pend));
	return (int)n;
}

static int take(struct perf_data *pd, const uint8_t *rec, uint64_t off, bool *round_end);

/* The records of the decompressed stream that are whole; a record cut at the end waits for the next. */
static int take_stream(struct perf_data *pd, bool *round_end)
{
	size_t at = 0;
	int err = 0;
	pd->in_stream = true;
	while (err == 0 && pd->zlen - at >= 8) {
		uint16_t size;
		uint32_t type = rd32(pd->zbuf + at);
		memcpy(&size, pd->zbuf + at + 6, 2);
		if (size < 8 || type == PD_COMPRESSED || type == PD_COMPRESSED2) {
			err = fail(pd, pd->stream_rec_off, "a record of %u bytes, type %u, in the decompressed stream",
				   size, type);
			break;
		}
		if (pd->zlen - at < size)
			break;
		err = take(pd, pd->zbuf + at, pd->stream_rec_off, round_end);
		at += size;
	}
	pd->in_stream = false;
	if (at)
		memmove(pd->zbuf, pd->zbuf + at, pd->zlen - at);
	pd->zlen -= at;
	return err;
}

static int decompress(struct perf_data *pd, const uint8_t *src, size_t len, uint64_t off, bool *round_end)
{
	if (!pd->zs && (!(pd->zs = ZSTD_createDStream()) || ZSTD_isError(ZSTD_initDStream(pd->zs))))
		return -ENOMEM;
	pd->info.compressed = true;
	pd->counts.compressed_bytes += len;
	pd->stream_rec_off = off;
	ZSTD_inBuffer in = { src, len, 0 };
	for (;;) {
		if (pd->zcap - pd->zlen < (1u << 16)) {
			size_t cap = pd->zcap ? 2 * pd->zcap : 1 << 20;
			if (cap > (256u << 20) + pd->zlen)
				return fail(pd, off, "a record larger than 256 MiB in the compressed stream");
			uint8_t *b = realloc(pd->zbuf, cap);
			if (!b)
				return -ENOMEM;
			pd->zbuf = b;
			pd->zcap = cap;
		}
		ZSTD_outBuffer out = { pd->zbuf, pd->zcap, pd->zlen };
		size_t rc = ZSTD_decompressStream(pd->zs, &out, &in);
		if (ZSTD_isError(rc))
			return fail(pd, off, "zstd: %s", ZSTD_getErrorName(rc));
		pd->counts.decompressed_bytes += out.pos - pd->zlen;
		pd->zlen = out.pos;
		bool full = out.pos == out.size;
		int err = take_stream(pd, round_end);
		if (err < 0)
			return err;
		if (in.pos == in.size && !full)
			return 0;	/* all in, and zstd had room for all it had to give */
	}
}

/* One record of the data section (off: its file offset) or of the decompressed stream. */
static int take(struct perf_data *pd, const uint8_t *rec, uint64_t off, bool *round_end)
{
	uint32_t type = rd32(rec);
	uint16_t size;
	memcpy(&size, rec + 6, 2);
	if (type < PERF_DATA_TYPES)
		pd->counts.records[type]++;
	else
		pd->counts.records_other++;
	switch (type) {
	case PERF_RECORD_SAMPLE:
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2:
	case PERF_RECORD_COMM:
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
	case PERF_RECORD_LOST:
	case PERF_RECORD_LOST_SAMPLES:
		return keep(pd, rec, type, size, off);
	case PERF_RECORD_SWITCH:
	case PERF_RECORD_SWITCH_CPU_WIDE:
		return pd->off_attr != NO_ATTR ? keep(pd, rec, type, size, off) : 0;
	case PD_FINISHED_ROUND:
		*round_end = true;
		return 0;
	case PD_COMPRESSED:
		if (pd->in_stream)
			return fail(pd, off, "a compressed record inside a compressed record");
		return decompress(pd, rec + 8, size - 8u, off, round_end);
	case PD_COMPRESSED2: {
		uint64_t dsize = size >= 16 ? rd64(rec + 8) : UINT64_MAX;
		if (pd->in_stream || dsize > size - 16u)
			return fail(pd, off, "a COMPRESSED2 record of %u bytes says it holds %" PRIu64, size, dsize);
		return decompress(pd, rec + 16, dsize, off, round_end);
	}
	default:
		return 0;	/* counted, not used */
	}
}

/* Read records up to the end of the next round (or of the data). */
static int read_round(struct perf_data *pd)
{
	bool round_end = false;
	while (!round_end) {
		uint64_t at = pd->pos;
		if (pd->data_end - at < 8) {
			if (pd->data_end != at || pd->zlen) {
				pd->counts.truncated = true;
				pd->counts.truncated_at = at;
			}
			pd->eof = true;
			return 0;
		}
		const uint8_t *rec = pd->base + at;
		uint16_t size;
		memcpy(&size, rec + 6, 2);
		uint32_t type = rd32(rec);
		if (size < 8)
			return fail(pd, at, "a record of %u bytes (type %u)", size, type);
		if (size > pd->data_end - at) {
			if (pd->data_end == pd->size) {	/* the file ends inside this record */
				pd->counts.truncated = true;
				pd->counts.truncated_at = at;
				pd->eof = true;
				return 0;
			}
			return fail(pd, at, "a record of %u bytes (type %u) runs past the data section's end at %" PRIu64,
				    size, type, pd->data_end);
		}
		uint64_t next = at + size;
		if (type == PD_AUXTRACE && size >= 16) {	/* its trace data follows the record */
			uint64_t aux = rd64(rec + 8);
			if (aux > pd->data_end - next)
				return fail(pd, at, "an AUXTRACE record's %" PRIu64 " bytes run past the data", aux);
			next += aux;
		}
		if (type == PD_HEADER_ATTR)
			return fail(pd, at, "a HEADER_ATTR record: a pipe-mode stream");
		pd->pos = next;
		int err = take(pd, rec, at, &round_end);
		if (err < 0)
			return err;
	}
	return 0;
}

/*
 * The pages of the mapping that no kept record needs any more are given back (they stay in the page cache): the
 * file counts in the process's resident memory for about a round's records, not for all it has read. In steps of
 * RELEASE_BYTES, a call each.
 */
#define RELEASE_BYTES (16u << 20)
static void release_read(struct perf_data *pd)
{
	if (!pd->map)
		return;
	uint64_t low = pd->pos;
	for (size_t i = 0; i < pd->npend; i++) {
		uint64_t at = (uint64_t)(pd->pend[i].rec - pd->base);
		if (pd->pend[i].chunk == NO_CHUNK && at < low)
			low = at;
	}
	low &= ~((uint64_t)sysconf(_SC_PAGESIZE) - 1);
	if (low < pd->released + RELEASE_BYTES)
		return;
	madvise((uint8_t *)pd->map + pd->released, low - pd->released, MADV_DONTNEED);
	pd->released = low;
}

static int drain(void *impl, record_fn fn, void *ctx)
{
	struct perf_data *pd = impl;
	if (pd->failed)
		return -EBADMSG;
	if (pd->done)
		return -ENODATA;
	int delivered = 0;
	while (delivered == 0) {
		if (pd->eof) {
			int n = flush(pd, UINT64_MAX, fn, ctx);
			if (n < 0)
				return n;
			if (pd->npend == 0)
				pd->done = true;
			return n ? n : -ENODATA;
		}
		int err = read_round(pd);
		if (err < 0)
			return err;
		if (pd->eof)
			continue;
		uint64_t limit = pd->flush_limit;
		pd->flush_limit = pd->round_max;
		int n = flush(pd, limit, fn, ctx);
		if (n < 0)
			return n;
		release_read(pd);
		delivered += n;
	}
	return delivered;
}

void perf_data_source(struct perf_data *pd, struct record_source *out)
{
	*out = (struct record_source){ .impl = pd, .drain = drain };
}

const struct perf_data_info *perf_data_info(const struct perf_data *pd)
{
	return &pd->info;
}

const struct perf_layout *perf_data_off_cpu_layout(const struct perf_data *pd)
{
	return pd->off_attr != NO_ATTR ? &pd->attrs[pd->off_attr].layout : NULL;
}

const struct perf_data_counts *perf_data_counts(const struct perf_data *pd)
{
	return &pd->counts;
}

double perf_data_progress(const struct perf_data *pd)
{
	uint64_t total = pd->data_end - pd->data_off;
	return total ? (double)(pd->pos - pd->data_off) / (double)total : 1.0;
}

bool perf_data_finished(const struct perf_data *pd)
{
	return pd->done || pd->failed;
}

const char *perf_data_error(const struct perf_data *pd)
{
	return pd->failed ? pd->err : "";
}

const struct perf_data_build_id *perf_data_build_id(const struct perf_data *pd, int32_t pid, const char *path)
{
	const struct perf_data_build_id *any = NULL;
	for (size_t i = 0; i < pd->nbids; i++) {
		if (strcmp(pd->bids[i].path, path) != 0)
			continue;
		if (pd->bids[i].pid == pid)
			return &pd->bids[i];
		if (!any)
			any = &pd->bids[i];
	}
	return any;
}

/* Types a session is handed (SAMPLE: those of the event used; switch records with off-CPU samples) or the reader
 * itself uses. */
static bool used_type(const struct perf_data *pd, uint32_t t)
{
	if (t == PERF_RECORD_SWITCH || t == PERF_RECORD_SWITCH_CPU_WIDE)
		return pd->off_attr != NO_ATTR;
	return t == PERF_RECORD_SAMPLE || t == PERF_RECORD_MMAP || t == PERF_RECORD_MMAP2 || t == PERF_RECORD_COMM ||
	       t == PERF_RECORD_FORK || t == PERF_RECORD_EXIT || t == PERF_RECORD_LOST ||
	       t == PERF_RECORD_LOST_SAMPLES || t == PD_FINISHED_ROUND || t == PD_COMPRESSED || t == PD_COMPRESSED2;
}

void perf_data_format_counts(const struct perf_data *pd, bool delivered_types, char *buf, size_t len)
{
	bool done[PERF_DATA_TYPES] = { false };
	size_t at = 0;
	buf[0] = '\0';
	for (;;) {
		uint32_t best = 0;
		uint64_t most = 0;
		for (uint32_t t = 0; t < PERF_DATA_TYPES; t++) {
			if (!done[t] && used_type(pd, t) == delivered_types && pd->counts.records[t] > most) {
				most = pd->counts.records[t];
				best = t;
			}
		}
		if (!most)
			break;
		done[best] = true;
		const char *name = perf_data_type_name(best);
		char unnamed[24];
		if (!name) {
			snprintf(unnamed, sizeof(unnamed), "type %u", best);
			name = unnamed;
		}
		int n = snprintf(buf + at, len - at, "%s%" PRIu64 " %s", at ? ", " : "", most, name);
		if (n < 0 || (size_t)n >= len - at)
			break;
		at += (size_t)n;
	}
	if (!delivered_types && pd->counts.records_other && at < len)
		snprintf(buf + at, len - at, "%s%" PRIu64 " of unknown types", at ? ", " : "", pd->counts.records_other);
}
