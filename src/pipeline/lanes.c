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
 * after it exits, when nothing can be). A window counts from a first read; ~1 s at 999 Hz: a start-up's burst of
 * deep stacks does not say how the process goes on. Go's goroutine reads take it after LIVE_READS_FOR_LANE reads
 * needed by 1 in LIVE_SHARE samples: a growth sample's goroutine is gone within microseconds, and a run's first
 * second of them would be lost. */
#define LIVE_WINDOW 1024
#define LIVE_LATE_SHARE 10
#define LIVE_READS_FOR_LANE 32
#define LIVE_SHARE 4

/* Per-process state, packed in one hindex value: samples since the first read, reads, reads that came too late,
 * the kinds of read needed (FASTLANE_GO, FASTLANE_DEEP), whether they took the process to the lane, and what was
 * looked at once. */
#define LIVE_SAMPLES(v) ((v) & 0xffffff)
#define LIVE_READS(v) (((v) >> 24) & 0xfffff)
#define LIVE_LATE(v) (((v) >> 44) & 0x3fff)
#define LIVE_LATE_MAX 0x3fff
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
	if (!hindex_count(&l->procs) || !hindex_u32_get(&l->procs, (uint32_t)pid, &v) || !LIVE_READS(v))
		return;
	if (LIVE_SAMPLES(v) + 1 >= LIVE_WINDOW && (LIVE_KINDS(v) & FASTLANE_DEEP))	/* a new window */
		v &= ~((uint64_t)LIVE_LATE_MAX << 44 | 0xfffffull << 24 | 0xffffff);
	else if (LIVE_SAMPLES(v) < 0xffffff)
		v++;
	set_state(l, pid, v);
}

/*
 * A walk read p's live memory in a batch: its goroutine (Go, with a g register: kind FASTLANE_GO) or its stack past
 * the copy (kind FASTLANE_DEEP). What it read may have moved on meanwhile (rc -ESTALE), and a process's last batch
 * is read after it exited, when nothing can be. A process that needs such reads for a good share of its samples
 * (deep recursion, busy Go code), or found enough of them stale to lose 1 in LIVE_LATE_SHARE of its stacks, takes
 * the fast lane, whose readers read them while they hold the thread; programs whose batches do well enough stay in
 * them. The lane costs a wakeup and a read per sample (70-85 us of hostprof's CPU a sample, against 3-25 in
 * batches); taken at the first 4 stale reads of a process, as it was, it bought a JVM (PreserveFramePointer, whose
 * stacks run past the copy now and then, changing while it starts) 1.4 points of completeness for 75 us a sample.
 * A held sample's read counts as a need but never as late: its lateness is hostprof's (the table it waited for),
 * not the program's, while its need is the program's. Not counting it left a new program, whose first batch is
 * all held while its tables are built, in the batches for one more batch: in Go >= 1.23, whose stack growth
 * leaves no frame pointer to join, that batch's growth samples were lost (130-170 of a 2 s run's 1800 samples).
 * The lane reads every kind its process needed so far, and gains one it turns out to need later (a read its
 * reader did not spare a fast-lane walk). Taken for the kind of the one read that crossed the bar, a Go program
 * whose late stack extension read was counted as deep (its g register no longer names its goroutine once read
 * late) had its stacks read past the copy and none of its goroutines: 2 of 16 runs of the grow fixture, whose
 * stack-growth samples were then 24-29% complete instead of 90%.
 */
void lanes_live_read(struct lanes *l, struct process *p, unsigned kind, int rc, bool fast, bool replaying)
{
	uint64_t v = state(l, p->pid);
	bool new_kind = !(LIVE_KINDS(v) & kind);
	v |= LIVE_KIND(kind);
	if (fast || (v & LIVE_LANE)) {
		set_state(l, p->pid, v);
		if (new_kind) {
			take_lane(l, p->pid, kind, "for their stacks to be read as the sample saw them");
			learn_program(l, p, kind);
		}
		return;
	}
	if (LIVE_READS(v) < 0xfffff)
		v += 1ull << 24;
	if (rc == -ESTALE && !replaying && LIVE_LATE(v) < LIVE_LATE_MAX)
		v += 1ull << 44;
	bool busy = (LIVE_KINDS(v) & FASTLANE_GO) ?
			    LIVE_READS(v) == LIVE_READS_FOR_LANE && LIVE_READS(v) * LIVE_SHARE >= LIVE_SAMPLES(v) :
			    LIVE_READS(v) == LIVE_WINDOW / LIVE_SHARE;
	bool late = rc == -ESTALE && !replaying && LIVE_LATE(v) == LIVE_WINDOW / LIVE_LATE_SHARE;
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
