/*
 * lanes.c — the fast lane's policy. See lanes.h for the contract.
 */
#include "src/pipeline/lanes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hindex.h"

/* A process takes the fast lane (lanes_live_read()) once its reads in batches found 1 in LIVE_LATE_SHARE of a
 * window of LIVE_WINDOW samples stale, or were needed by 1 in LIVE_SHARE of such a window (its last batch is read
 * after it exits, when nothing can be), or its walks lost 1 in LIVE_GO_LOST_SHARE of a window's stacks for want of
 * the goroutine behind g0. A window counts from a first read; ~1 s at 999 Hz: a start-up's burst of deep stacks
 * does not say how the process goes on. */
#define LIVE_WINDOW 1024
#define LIVE_LATE_SHARE 10
#define LIVE_SHARE 4
#define LIVE_GO_LOST_SHARE 50

/* Per-process state, packed in one hindex value: in the window, samples since the first read, reads past the copy,
 * those that came too late, goroutines lost; the kinds of read needed (FASTLANE_GO, FASTLANE_DEEP), whether they
 * took the process to the lane, and what was looked at once. Counts saturate (count()). */
#define LIVE_FIELD_MAX 0x3fff
#define LIVE_FIELD(v, shift) ((unsigned)((v) >> (shift)) & LIVE_FIELD_MAX)
#define LIVE_READS_AT 14
#define LIVE_LATE_AT 28
#define LIVE_LOST_AT 42
#define LIVE_SAMPLES(v) LIVE_FIELD(v, 0)
#define LIVE_READS(v) LIVE_FIELD(v, LIVE_READS_AT)
#define LIVE_LATE(v) LIVE_FIELD(v, LIVE_LATE_AT)
#define LIVE_LOST(v) LIVE_FIELD(v, LIVE_LOST_AT)
#define LIVE_COUNTS ((1ull << 56) - 1)
#define PROGRAM_CHECKED (1ull << 58)
#define APM_CHECKED (1ull << 59)
#define LIVE_LANE (1ull << 60)
#define LIVE_KIND(kind) ((uint64_t)((kind) & (FASTLANE_GO | FASTLANE_DEEP)) << 60)
#define LIVE_KINDS(v) ((unsigned)((v) >> 60) & (FASTLANE_GO | FASTLANE_DEEP))

struct lane_program {
	struct file_id file;
	unsigned kinds;		/* FASTLANE_GO, FASTLANE_DEEP */
};

struct lanes {
	struct lanes_options o;
	struct fastlane *fastlane;	/* made by the first process that takes it */
	int paused;
	struct hindex procs;		/* pid → the packed state above */
	struct lane_program programs[LANES_PROGRAMS];	/* programs whose stacks took the lane */
	unsigned nprograms;		/* entries used, then the next one replaced (oldest first) */
};

int lanes_new(const struct lanes_options *o, struct lanes **out)
{
	struct lanes *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->o = *o;
	*out = l;
	return 0;
}

void lanes_free(struct lanes *l)
{
	if (!l)
		return;
	fastlane_free(l->fastlane);
	hindex_free(&l->procs);
	free(l);
}

static uint64_t state(const struct lanes *l, pid_t pid)
{
	uint64_t v = 0;
	hindex_u32_get(&l->procs, (uint32_t)pid, &v);
	return v;
}

/* v with the count at shift one more, if yes (saturating). */
static uint64_t count(uint64_t v, unsigned shift, bool yes)
{
	return yes && LIVE_FIELD(v, shift) < LIVE_FIELD_MAX ? v + (1ull << shift) : v;
}

static void set_state(struct lanes *l, pid_t pid, uint64_t v)
{
	hindex_u32_put(&l->procs, (uint32_t)pid, v);	/* out of memory: looked at again, no harm */
}

/* The fast lane, made when a first process needs it. */
static int make_fastlane(struct lanes *l)
{
	if (l->fastlane)
		return 0;
	struct fastlane_options fo = { .reader = l->o.reader, .wake_fd = l->o.wake_fd, .realtime = l->o.realtime,
				       .max_events = l->o.max_events, .go_max_stack = l->o.go_max_stack,
				       .deep_max = l->o.deep_max, .py = l->o.py };
	sampler_get_options(l->o.sampler, &fo.sampler);
	int err = fastlane_new(&fo, &l->fastlane);
	if (err == 0 && l->paused)
		fastlane_pause(l->fastlane, 1);
	return err;
}

/* pid's samples take the fast lane (for kinds) from now on, if it can have one; why not is said once. */
static void take_lane(struct lanes *l, pid_t pid, unsigned kinds, const char *what)
{
	uint64_t start;
	unsigned need = kinds & FASTLANE_APM ? LANES_APM : LANES_STACKS;
	int err = l->o.which & need ? make_fastlane(l) : -ENOTSUP;
	if (err == 0 && (err = fastlane_add_process(l->fastlane, pid, kinds, &start)) == 0)
		return;
	if (err == -ENOTSUP || err == -EALREADY)
		return;
	/* Gone before its events were open: a short-lived process, nothing to say but at debug level (its samples
	 * are in the main rings, and the lane counts it refused). */
	enum log_level level = err == -ESRCH ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARN;
	const char *why = l->fastlane && fastlane_error(l->fastlane)[0] ? fastlane_error(l->fastlane) : strerror(-err);
	log_write(&l->o.log, level, "pid %d: no fast lane (%s): its samples are read in batches, too late %s",
		  (int)pid, why, what);
}

/* The FileID of p's program (its lowest file mapping: the executable, below its libraries); false when unknown. */
static bool process_program(struct lanes *l, struct process *p, struct file_id *out)
{
	for (unsigned i = 0; i < p->nmaps && i < 4; i++) {
		struct execinfo *e = procmgr_mapping_exe(l->o.procs, p, &p->maps[i]);
		if (e) {
			*out = *execinfo_file_id(e);
			return true;
		}
	}
	return false;
}

static struct lane_program *find_program(struct lanes *l, const struct file_id *id)
{
	for (unsigned i = 0; i < l->nprograms && i < LANES_PROGRAMS; i++)
		if (!memcmp(l->programs[i].file.bytes, id->bytes, sizeof(id->bytes)))
			return &l->programs[i];
	return NULL;
}

static void learn_program(struct lanes *l, struct process *p, unsigned kinds)
{
	struct file_id id;
	struct lane_program *known;
	if (!process_program(l, p, &id))
		return;
	if ((known = find_program(l, &id)))
		known->kinds |= kinds;
	else
		l->programs[l->nprograms++ % LANES_PROGRAMS] = (struct lane_program){ id, kinds };
}

void lanes_first_sample(struct lanes *l, struct process *p)
{
	struct file_id id;
	if (!l->nprograms || !(l->o.which & LANES_STACKS))
		return;
	uint64_t v = state(l, p->pid);
	if ((v & PROGRAM_CHECKED) || !process_program(l, p, &id))
		return;
	set_state(l, p->pid, v | PROGRAM_CHECKED);
	const struct lane_program *known = find_program(l, &id);
	if (known)
		take_lane(l, p->pid, known->kinds, "for their stacks to be read as the sample saw them");
}

void lanes_count_sample(struct lanes *l, pid_t pid)
{
	uint64_t v;
	if (!hindex_count(&l->procs) || !hindex_u32_get(&l->procs, (uint32_t)pid, &v) ||
	    !(LIVE_READS(v) | LIVE_LOST(v)))
		return;
	if (LIVE_SAMPLES(v) + 1 >= LIVE_WINDOW)	/* a new window */
		v &= ~LIVE_COUNTS;
	else
		v++;
	set_state(l, pid, v);
}

/*
 * A walk read p's live memory in a batch: its stack past the copy (kind FASTLANE_DEEP, or FASTLANE_GO for a
 * goroutine's), or it lost the goroutine behind g0 (FASTLANE_GO, not past_copy). What it read may have moved on
 * meanwhile (rc -ESTALE), and a process's last batch is read after it exited, when nothing can be. A process that
 * needs reads past the copy for a good share of its samples, or found enough of them stale to lose 1 in
 * LIVE_LATE_SHARE of its stacks, takes the fast lane, whose readers read them while they hold the thread; programs
 * whose batches do well enough stay in them. The lane costs a wakeup and a read per sample (45-65 us of hostprof's
 * CPU a sample, against 3-25 in batches); taken at the first 4 stale reads of a process, as it was, it bought a JVM
 * (PreserveFramePointer, whose stacks run past the copy now and then, changing while it starts) 1.4 points of
 * completeness for 75 us a sample. A held sample's read counts as a need but never as late: its lateness is
 * hostprof's (the table it waited for), not the program's, while its need is the program's.
 *
 * Go: a sample on g0 (systemstack, cgo, stack growth) needs its goroutine, which a batch reads too late: it has
 * resumed. Before Go 1.23 the kernel's frame-pointer chain at the sample went on through the goroutine's callers
 * (walk.h), so nothing is lost in batches (esbuild built by Go 1.19: 1022 of its 1025 g0 walks joined the chain).
 * From Go 1.23, runtime.morestack clears the frame pointer: a stack growth's goroutine can be had only while the
 * thread is held, and each one lost is a stack cut at morestack. Only those losses count, and a process takes the
 * lane once they reach 1 in LIVE_GO_LOST_SHARE of a window (held samples' too: a new program's first batch is
 * held while its tables are built). Measured on esbuild built by Go 1.26, 13% of whose samples are stack growths:
 * in batches 87% of its stacks were whole, at 15 us a sample and a context switch per 40 samples; in the lane
 * 99-100%, at 53 us and one per sample. Nothing cheaper reads a growth in time: a uprobe on morestack cost 13 us
 * of the workload's CPU per growth, a hardware breakpoint 17 us, and esbuild grows a stack 34,000 times a second.
 * The lane reads every kind its process needed so far, and gains one it turns out to need later (a read its
 * reader did not spare a fast-lane walk).
 */
void lanes_live_read(struct lanes *l, struct process *p, const struct walk_live_read *r)
{
	uint64_t v = state(l, p->pid);
	bool new_kind = !(LIVE_KINDS(v) & r->kind);
	v |= LIVE_KIND(r->kind);
	if (r->fast || (v & LIVE_LANE)) {
		set_state(l, p->pid, v);
		if (new_kind) {
			take_lane(l, p->pid, r->kind, "for their stacks to be read as the sample saw them");
			learn_program(l, p, r->kind);
		}
		return;
	}
	bool stale = r->past_copy && r->rc == -ESTALE && !r->replaying;
	v = count(v, LIVE_READS_AT, r->past_copy);
	v = count(v, LIVE_LATE_AT, stale);
	v = count(v, LIVE_LOST_AT, !r->past_copy);	/* a held sample's too */
	bool busy = r->past_copy && LIVE_READS(v) >= LIVE_WINDOW / LIVE_SHARE;
	bool late = (stale && LIVE_LATE(v) >= LIVE_WINDOW / LIVE_LATE_SHARE) ||
		    (!r->past_copy && LIVE_LOST(v) >= LIVE_WINDOW / LIVE_GO_LOST_SHARE);
	if ((busy || late) && (l->o.which & LANES_STACKS))
		log_write(&l->o.log, LOG_LEVEL_INFO, "pid %d takes the fast lane for its stacks: of its last %u samples "
			  "walked in batches, %u needed their stack past the copy read (%u found it changed), %u lost their "
			  "goroutine behind g0", (int)p->pid, LIVE_SAMPLES(v), LIVE_READS(v), LIVE_LATE(v), LIVE_LOST(v));
	if (busy || late)
		v |= LIVE_LANE;
	set_state(l, p->pid, v);
	if (v & LIVE_LANE) {
		take_lane(l, p->pid, LIVE_KINDS(v), "for their stacks to be read as the sample saw them");
		learn_program(l, p, LIVE_KINDS(v));
	}
}

void lanes_python(struct lanes *l, pid_t pid)
{
	take_lane(l, pid, FASTLANE_PYTHON, "for their Python frames to be read as the sample saw them");
}

void lanes_apm_ready(struct lanes *l, pid_t pid)
{
	take_lane(l, pid, FASTLANE_APM, "to be correlated");
}

bool lanes_apm_checked(struct lanes *l, pid_t pid)
{
	uint64_t v = state(l, pid);
	if (v & APM_CHECKED)
		return true;
	set_state(l, pid, v | APM_CHECKED);
	return false;
}

void lanes_on_exec(struct lanes *l, pid_t pid)
{
	uint64_t v;
	if (hindex_u32_get(&l->procs, (uint32_t)pid, &v))
		set_state(l, pid, v & ~(PROGRAM_CHECKED | APM_CHECKED));
}

void lanes_on_exit(struct lanes *l, pid_t pid, uint64_t time_ns)
{
	hindex_u32_del(&l->procs, (uint32_t)pid);
	if (l->fastlane)
		fastlane_on_exit(l->fastlane, pid, time_ns);
}

void lanes_pause(struct lanes *l, int paused)
{
	l->paused = paused;
	if (l->fastlane)
		fastlane_pause(l->fastlane, paused);
}

struct fastlane *lanes_fastlane(const struct lanes *l)
{
	return l->fastlane;
}
