/*
 * session.c — one profiling session. See session.h for the contract.
 */
#include "src/session.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "correlate/correlate.h"
#include "src/base/clock.h"
#include "src/base/hindex.h"
#include "src/base/mem_usage.h"
#include "src/base/host_id.h"
#include "src/execinfo.h"
#include "src/fastlane.h"
#include "src/held_samples.h"
#include "src/jitinfo.h"
#include "src/blocked_stack.h"
#include "src/offcpu.h"
#include "src/procmem.h"
#include "src/procmgr.h"
#include "src/replay.h"
#include "src/stackext.h"
#include "src/traces.h"
#include "symbols/kallsyms.h"
#include "unwind/go_stack.h"
#include "symbols/kallsyms_cache.h"
#include "src/base/cache_dir.h"
#include "unwind/unwind_deltas.h"
#include "unwind/unwind_libunwind.h"

/*
 * Programs (by the FileID of the file the sample's IP was in) one of whose processes took the fast lane for its
 * stacks: their later processes take it from their first sample handled, instead of after a batch's reads came
 * too late. Short-lived processes of one program (a build tool run per file) would otherwise exit before.
 */
#define LANE_PROGRAMS 64
struct lane_program {
	struct file_id file;
	unsigned kinds;		/* FASTLANE_GO, FASTLANE_DEEP */
};

struct session {
	struct sampler *sampler;
	struct execinfo_mgr *execinfo;
	struct procmgr *procs;
	struct traces *traces;
	struct session_options opts;
	struct unwind_libunwind *unwinder;	/* the reference, and the fast unwinder's fallback */
	struct unwind_deltas *deltas;
	struct replay_writer *capture;
	struct correlate *correlate;		/* NULL when APM correlation is off */
	struct fastlane *fastlane;		/* APM samples read at once; NULL until a process is ready */
	int wake_fd;				/* eventfd the fast lane and the table worker write */
	const struct fastlane_entry *fast;	/* the fast-lane sample being handled, or NULL */
	uint8_t *fast_ext;			/* a stack copy and the fast lane's rest of it, joined */
	size_t go_max_stack;			/* most goroutine stack read per sample */
	int paused;				/* the caller's sampler is off (session_pause()) */
	struct hindex live_reads;		/* pid → its reads of the live process so far (live_read()) */
	struct lane_program lane_programs[LANE_PROGRAMS];	/* programs whose stacks took the fast lane */
	unsigned nlane_programs;		/* entries used, then the next one replaced (oldest first) */
	int kernel_frames;			/* a sample had kernel frames: kallsyms is needed to name them */
	struct go_stack *go_stack;		/* NULL when not following goroutines from g0 */
	struct stackext *stackext;		/* NULL when walks see only the kernel's stack copy */
	struct jitinfo_mgr *jit;		/* profiled processes' JIT code (perf maps, jitdump files) */
	char host_id[HOST_ID_MAX];
	struct kallsyms *kallsyms;
	struct trace_kernel kernel;
	pid_t self;
	struct session_stats stats;
	struct session_memory_state mem;	/* the budget, as session_tick() watches it */
	uint64_t mem_next_ns;			/* its next reading */
	struct offcpu *offcpu;			/* NULL unless off-CPU profiling */
	uint8_t *blocked_stack;			/* off-CPU without samples: a waiting thread's stack read live */
	size_t blocked_stack_size;		/* ... up to this (the off-CPU stack copy's size) */
	uint64_t finish_ns;			/* session_finish()'s time: threads still off CPU count up to it */
	uint64_t off_cpu_lost_told;		/* off-CPU samples lost in full rings, as far as in profiles */
	/* Samples whose walk needs a table the worker is building (execinfo_deltas_nowait()) are held until it is
	 * ready, then handled again (rehandle_held()). */
	struct held_samples *held;		/* NULL without a worker (the reference unwinder needs no table) */
	bool may_hold;				/* the sample being handled may be held (room, not the fast lane's) */
	bool walk_pending;			/* its walk met a table being built */
	bool replaying;				/* handling held samples */
	bool hold_off;				/* ... walked with what exists, none held again */
	/* per-sample scratch, sized once by the frame bound so the hot path does not allocate */
	unsigned max_frames;	/* user frames a walk keeps (opts.max_frames, or the default) */
	struct unwind_frame *uframes;	/* max_frames */
	struct trace_frame *frames;	/* kernel frames, max_frames user frames, one error frame */
};

/* A process takes the fast lane (live_read()) after this many of its reads in batches were stale, or after this
 * many reads if they were needed by at least 1 in LIVE_SHARE_FOR_FAST_LANE of its samples meanwhile. */
#define LIVE_LATE_FOR_FAST_LANE 4
#define LIVE_READS_FOR_FAST_LANE 32
#define LIVE_SHARE_FOR_FAST_LANE 4

struct find_ctx {
	struct session *s;
	struct process *proc;
	const struct unwind_sample *sample;	/* as the kernel copied it */
	pid_t pid;				/* proc's, for memory */
	struct unwind_memory memory;		/* the live process (procmem.h) */
	uint64_t now;
	struct jitinfo *jit;	/* the process's JIT code entry, once looked up */
	bool jit_got, jit_found;	/* looked up by process_jit (made if missing), by existing_jit */
};

static void forget_in_unwinders(void *ctx, const struct execinfo *e)
{
	struct session *s = ctx;
	unwind_libunwind_forget(s->unwinder, e);
	unwind_deltas_forget(s->deltas, e);
}

/* The kernel's build-id from /sys/kernel/notes, a sequence of ELF notes. */
static void read_kernel_build_id(char *out)
{
	uint8_t buf[4096];
	FILE *f = fopen("/sys/kernel/notes", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	out[0] = '\0';
	if (f)
		fclose(f);
	for (size_t off = 0; off + 12 <= n;) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		size_t name_off = off + 12, desc_off = name_off + ((namesz + 3) & ~3u);
		if (namesz > n || descsz > n || desc_off + descsz > n)
			return;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 && descsz <= 20) {
			hex_encode(buf + desc_off, descsz, out);
			return;
		}
		off = desc_off + ((descsz + 3) & ~3u);
	}
}

/* Kernel frames are hashed relative to _text, read now; their names wait for a profile (load_kallsyms()). */
static void setup_kernel(struct session *s)
{
	read_kernel_build_id(s->kernel.build_id);
	if (s->kernel.build_id[0])
		fileid_from_build_id_hex(s->kernel.build_id, &s->kernel.file_id);
	if (sampler_kernel_enabled(s->sampler))
		kallsyms_read_text_start("/proc/kallsyms", &s->kernel.text_start);
}

/* Symbolizers read decompressed copies of compressed debug files (debug_cache.h) from the cache directory, and
 * stack-delta tables are loaded from there (stack_deltas_cache.h). */
static void set_cache_dir(struct session *s)
{
	char dir[4096];
	if (s->execinfo && s->opts.use_cache && cache_dir_default(dir, sizeof(dir)) == 0)
		execinfo_mgr_set_cache_dir(s->execinfo, dir);
}

/* The kernel's symbols, the first time a profile has kernel frames to name: from this boot's cache when there
 * is one (kallsyms_cache.h), else /proc/kallsyms (~60 ms of kernel time). */
static void load_kallsyms(struct session *s)
{
	char dir[4096];
	struct kallsyms_cache_paths paths = { .dir = NULL };
	if (s->kallsyms || !s->kernel_frames)
		return;
	if (s->opts.use_cache && cache_dir_default(dir, sizeof(dir)) == 0)
		paths.dir = dir;
	if (kallsyms_cache_open(&paths, &s->kallsyms, NULL) == 0) {
		s->kernel.kallsyms = s->kallsyms;	/* for the tables of later intervals */
		traces_set_kallsyms(s->traces, s->kallsyms);
	}
}

/* The correlation library's log lines go to the session's sink at their level (they begin "apm: "). */
static void correlate_log(void *arg, enum correlate_log_level level, const char *msg)
{
	const struct session *s = arg;
	static const enum log_level levels[] = { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };
	log_write(&s->opts.log, (unsigned)level < 4 ? levels[level] : LOG_LEVEL_ERROR, "%s", msg);
}

/* The eventfd the fast lane and the table worker wake the caller's poll with: made once, for whichever comes first. */
static int make_wake_fd(struct session *s)
{
	if (s->wake_fd < 0 && (s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		return -errno;
	return 0;
}

/* The fast lane, made when a first process needs it. */
static int make_fastlane(struct session *s)
{
	if (s->fastlane)
		return 0;
	int err = make_wake_fd(s);
	if (err < 0)
		return err;
	struct fastlane_options fo = { .reader = s->correlate ? correlate_get_reader(s->correlate) : NULL,
				       .wake_fd = s->wake_fd, .realtime = s->opts.fast_lane_realtime,
				       .max_events = s->opts.fast_lane_max_events,
				       .go_max_stack = s->go_stack ? s->go_max_stack : 0,
				       .deep_max = s->opts.max_stack_bytes };
	sampler_get_options(s->sampler, &fo.sampler);
	err = fastlane_new(&fo, &s->fastlane);
	if (err == 0 && s->paused)
		fastlane_pause(s->fastlane, 1);
	return err;
}

/* pid's samples take the fast lane (for kinds) from now on, if it can have one; why not is said once. */
static void fast_lane_for(struct session *s, pid_t pid, unsigned kinds, const char *what)
{
	uint64_t start;
	unsigned need = kinds & FASTLANE_APM ? SESSION_FAST_LANE_APM : SESSION_FAST_LANE_STACKS;
	int err = s->opts.fast_lane & need ? make_fastlane(s) : -ENOTSUP;
	if (err == 0 && (err = fastlane_add_process(s->fastlane, pid, kinds, &start)) == 0)
		return;
	if (err == -ENOTSUP || err == -EALREADY)
		return;
	const char *why = s->fastlane && fastlane_error(s->fastlane)[0] ? fastlane_error(s->fastlane) : strerror(-err);
	log_write(&s->opts.log, LOG_LEVEL_WARN,
		  "pid %d: no fast lane (%s): its samples are read in batches, too late %s", (int)pid, why, what);
}

/* Correlation says pid is ready: its samples take the fast lane from now on. */
static void on_apm_ready(void *arg, pid_t pid)
{
	fast_lane_for(arg, pid, FASTLANE_APM, "to be correlated");
}

/* live_reads values: samples since the first read, reads, reads that came too late, the kinds of read needed
 * (FASTLANE_GO, FASTLANE_DEEP) and whether they took the process to the fast lane, packed. */
#define LIVE_SAMPLES(v) ((v) & 0xffffff)
#define LIVE_READS(v) (((v) >> 24) & 0xfffff)
#define LIVE_LATE(v) (((v) >> 44) & 0x1ffff)
#define LIVE_LATE_MAX 0x1ffff
#define LIVE_KIND(kind) ((uint64_t)((kind) & (FASTLANE_GO | FASTLANE_DEEP)) << 61)
#define LIVE_KINDS(v) ((unsigned)((v) >> 61) & (FASTLANE_GO | FASTLANE_DEEP))
#define LIVE_LANE (1ull << 61)

/* A sample of a process that read its live memory before (live_read()): counted, for the share of them. */
static void count_live_sample(struct session *s, pid_t pid)
{
	uint64_t v;
	if (hindex_count(&s->live_reads) && hindex_u32_get(&s->live_reads, (uint32_t)pid, &v) && LIVE_SAMPLES(v) < 0xffffff)
		hindex_u32_put(&s->live_reads, (uint32_t)pid, v + 1);
}

/* The FileID of p's program (its lowest file mapping: the executable, below its libraries), for lane_programs;
 * false when unknown. */
static bool process_program(struct session *s, struct process *p, struct file_id *out)
{
	for (unsigned i = 0; i < p->nmaps && i < 4; i++) {
		struct execinfo *e = procmgr_mapping_exe(s->procs, p, &p->maps[i]);
		if (e) {
			*out = *execinfo_file_id(e);
			return true;
		}
	}
	return false;
}

static struct lane_program *find_lane_program(struct session *s, const struct file_id *id)
{
	for (unsigned i = 0; i < s->nlane_programs && i < LANE_PROGRAMS; i++)
		if (!memcmp(s->lane_programs[i].file.bytes, id->bytes, sizeof(id->bytes)))
			return &s->lane_programs[i];
	return NULL;
}

static void learn_lane_program(struct session *s, const struct find_ctx *c, unsigned kind)
{
	struct file_id id;
	struct lane_program *known;
	if (!process_program(s, c->proc, &id))
		return;
	if ((known = find_lane_program(s, &id)))
		known->kinds |= kind;
	else
		s->lane_programs[s->nlane_programs++ % LANE_PROGRAMS] = (struct lane_program){ id, kind };
}

/* A process's first sample: if its program took the fast lane for its stacks before, so does it, at once. */
static void lane_by_program(struct session *s, struct process *p)
{
	struct file_id id;
	if (p->lane_checked || !s->nlane_programs || !(s->opts.fast_lane & SESSION_FAST_LANE_STACKS) ||
	    !process_program(s, p, &id))
		return;
	p->lane_checked = 1;
	const struct lane_program *known = find_lane_program(s, &id);
	if (known)
		fast_lane_for(s, p->pid, known->kinds, "for their stacks to be read as the sample saw them");
}

/*
 * A walk read pid's live memory in a batch: its goroutine (Go, with a g register: kind FASTLANE_GO) or its stack
 * past the copy (kind FASTLANE_DEEP). What it read may have moved on meanwhile (rc -ESTALE), and a process's last
 * batch is read after it exited, when nothing can be. A process that needs such reads for a good share of its
 * samples (deep recursion, busy Go code), or found LIVE_LATE_FOR_FAST_LANE of them stale, takes the fast lane,
 * whose readers read them while they hold the thread; programs that seldom need them stay in the batches.
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
static void live_read(struct session *s, const struct find_ctx *c, unsigned kind, int rc)
{
	uint64_t v = 0;
	pid_t pid = c->proc->pid;
	hindex_u32_get(&s->live_reads, (uint32_t)pid, &v);
	bool new_kind = !(LIVE_KINDS(v) & kind);
	v |= LIVE_KIND(kind);
	if (s->fast || (v & LIVE_LANE)) {
		hindex_u32_put(&s->live_reads, (uint32_t)pid, v);
		if (new_kind) {
			fast_lane_for(s, pid, kind, "for their stacks to be read as the sample saw them");
			learn_lane_program(s, c, kind);
		}
		return;
	}
	if (LIVE_READS(v) < 0xfffff)
		v += 1ull << 24;
	if (rc == -ESTALE && !s->replaying && LIVE_LATE(v) < LIVE_LATE_MAX)
		v += 1ull << 44;
	int busy = LIVE_READS(v) == LIVE_READS_FOR_FAST_LANE && LIVE_READS(v) * LIVE_SHARE_FOR_FAST_LANE >= LIVE_SAMPLES(v);
	if (busy || (rc == -ESTALE && !s->replaying && LIVE_LATE(v) == LIVE_LATE_FOR_FAST_LANE))
		v |= LIVE_LANE;
	hindex_u32_put(&s->live_reads, (uint32_t)pid, v);
	if (v & LIVE_LANE) {
		fast_lane_for(s, pid, LIVE_KINDS(v), "for their stacks to be read as the sample saw them");
		learn_lane_program(s, c, LIVE_KINDS(v));
	}
}

static int setup_correlation(struct session *s)
{
	if (!s->opts.apm)
		return 0;
	host_id_get(s->opts.host_id, s->host_id, sizeof(s->host_id));
	struct correlate_options co = { .host_id = s->host_id, .delay_ms = s->opts.apm_delay_ms,
					.log = correlate_log, .log_arg = s, .ready = on_apm_ready, .ready_arg = s };
	return correlate_new(&co, &s->correlate);
}

/*
 * go_stack_options.rule_at: the delta-table rule at addr (a return address minus 1, or an entry) of the sampled
 * process. addr is a guess being checked: a miss does not re-read the process's mappings (which would release files
 * the walk still uses).
 */
static bool rule_at(void *ctx, const struct unwind_process *proc, uint64_t addr, struct stack_delta_rule *rule)
{
	const struct find_ctx *c = proc->ctx;
	struct mapping *m = procmgr_lookup_mapping(c->proc, addr);
	struct execinfo *e = m ? procmgr_mapping_exe(c->s->procs, c->proc, m) : NULL;
	bool pending;	/* a guess, not a walk: a table not ready yet is no reason to hold the sample */
	const struct stack_deltas *t = e ? execinfo_deltas_nowait(e, &pending) : NULL;
	(void)ctx;
	return t && addr >= m->bias && stack_deltas_lookup(t, addr - m->bias, rule) == 0;
}

/* go_stack_options.held: the goroutine the fast lane's reader read while it held the thread (fastlane.h). */
static const struct go_stack_snapshot *held_goroutine(void *ctx, const struct unwind_process *proc)
{
	const struct session *s = ctx;
	(void)proc;
	return s->fast ? s->fast->go : NULL;
}

/* go_stack_options.followed: counted, and a read of the live process weighs on taking the fast lane. */
static void followed_goroutine(void *ctx, const struct unwind_process *proc, enum go_stack_source source, int rc)
{
	struct session *s = ctx;
	const struct find_ctx *c = proc->ctx;
	if (source == GO_STACK_HELD)
		s->stats.fast_goroutines++;
	else
		live_read(s, c, FASTLANE_GO, rc);
}

/*
 * The rest of the stack past the sample's copy (a goroutine's, or a deep one's), as the fast lane's reader read it
 * while it held the thread: exactly what the sample saw, so it needs no witness (stackext.h). At most
 * max_stack_bytes from the sampled SP, as for stack read later.
 */
static int fast_extension(struct session *s, const struct unwind_sample *stack, uint64_t addr,
			  struct unwind_sample *longer)
{
	const struct go_stack_snapshot *snap = s->fast ? s->fast->go : NULL;
	uint64_t end = stack->regs[UNWIND_REG_SP] + stack->stack_size;
	if (!snap || snap->kind != GO_STACK_SNAPSHOT_EXTENSION || snap->addr != end || addr < end ||
	    addr + 8 - end > snap->size || stack->stack_size >= s->opts.max_stack_bytes)
		return -ENOENT;
	size_t most = s->go_max_stack > s->opts.max_stack_bytes ? s->go_max_stack : s->opts.max_stack_bytes;
	most = most > FASTLANE_DEEP_READ ? most : FASTLANE_DEEP_READ;
	if (!s->fast_ext && !(s->fast_ext = malloc(SAMPLER_MAX_STACK + most)))
		return -ENOMEM;
	/* Whole words: a read that ended mid-word, or a length the lane chose, leaves its last bytes to stackext. */
	size_t room = s->opts.max_stack_bytes - stack->stack_size;
	size_t take = (snap->size < room ? snap->size : room) & ~(size_t)7;
	if (addr + 8 - end > take)
		return -ENOENT;
	memcpy(s->fast_ext, stack->stack, stack->stack_size);
	memcpy(s->fast_ext + stack->stack_size, snap->bytes, take);
	*longer = *stack;
	longer->stack = s->fast_ext;
	longer->stack_size = stack->stack_size + take;
	s->stats.fast_extensions++;
	return 0;
}

/*
 * The delta unwinder's stack-extension hook: the walk needs stack past the sample's copy. A fast-lane sample
 * brings what its reader read past the copy while it held the thread (fast_extension); past that, or without it,
 * read on from the process (stackext.h), piece after piece, each checked against the end of the one before (the
 * fast lane's bytes being the first such end). The kernel's copy may also have ended early, at a page it could
 * not read from its interrupt (not present in the page tables yet): the process can still read it. In Go, whose g
 * register names the goroutine (or g0) the sample ran on, reads stop at that stack's end, and a stack Go has
 * since moved is not read at all (its old memory is free for reuse). A goroutine's stack that follow_goroutine
 * read is not extended: it was read up to its end, or max_stack_bytes.
 */
static int extend_stack(void *ctx, const struct unwind_process *proc, const struct unwind_sample *stack,
			uint64_t addr, struct unwind_sample *longer)
{
	struct session *s = ctx;
	const struct find_ctx *c = proc->ctx;
	struct stackext_stack have = { .sp = stack->regs[UNWIND_REG_SP], .bytes = stack->stack,
				       .size = stack->stack_size, .lo = 0, .hi = UINT64_MAX },
			      got;
	bool first = stack->stack == c->sample->stack;
	if (!first && !(s->fast_ext && stack->stack == s->fast_ext) && !stackext_owns(s->stackext, stack->stack))
		return -ENOENT;
	if (first && fast_extension(s, stack, addr, longer) == 0)
		return 0;
	/* Past what the fast lane read: its reader reads as far for this process's next samples. */
	if (s->fast)
		fastlane_read_deeper(s->fastlane, c->proc->pid, (size_t)(addr - (c->sample->regs[UNWIND_REG_SP] +
									c->sample->stack_size)) * 5 / 4 + 4096);
	int go = go_stack_bounds(proc->memory, c->sample->regs[UNWIND_REG_R14], &have.lo, &have.hi) == 0;
	if (!go) {
		have.lo = 0;
		have.hi = UINT64_MAX;
	}
	int rc = stackext_read(s->stackext, proc->memory, &have, addr, &got);
	/* A walk's reads count once for the fast lane's decision (a deep one takes several), and each time late. */
	if (first || rc == -ESTALE)
		live_read(s, c, go ? FASTLANE_GO : FASTLANE_DEEP, rc);
	if (rc < 0)
		return rc;
	longer->regs[UNWIND_REG_SP] = got.sp;
	longer->stack = got.bytes;
	longer->stack_size = got.size;
	return 0;
}

int session_stackext_stats(const struct session *s, struct stackext_stats *out)
{
	if (!s->stackext)
		return -ENOENT;
	stackext_get_stats(s->stackext, out);
	return 0;
}

void session_jit_stats(const struct session *s, struct jitinfo_stats *out)
{
	jitinfo_mgr_get_stats(s->jit, out);
}

int session_go_stack_stats(const struct session *s, struct go_stack_stats *out)
{
	if (!s->go_stack)
		return -ENOENT;
	go_stack_get_stats(s->go_stack, out);
	return 0;
}

/*
 * The unwinders: libunwind, and the delta unwinder with its hooks. Rows the delta tables cannot express are stepped
 * by libunwind, for that frame only; Go samples on g0 go on with their goroutine (go_stack.h), walks past the copy
 * with the stack read on (stackext.h).
 */
/*
 * Tables are built by a worker and the samples that wait for one held, so that sampling never waits for a build;
 * the worker wakes the caller's poll through the session's eventfd. The reference unwinder needs no table.
 */
static bool room_for_build(void *ctx, uint64_t bytes);

static int setup_worker(struct session *s)
{
	if (s->opts.unwinder != SESSION_UNWIND_DELTAS || !s->execinfo || !s->sampler)
		return 0;
	int err = make_wake_fd(s);
	/* Held records within an eighth of the memory budget: the tables they wait for need room too. */
	size_t held_bytes = s->opts.memory_budget ? s->opts.memory_budget / 8 : 0;
	if (held_bytes && held_bytes > HELD_SAMPLES_MAX_BYTES)
		held_bytes = HELD_SAMPLES_MAX_BYTES;
	if (err == 0)
		err = held_samples_new(0, held_bytes ? held_bytes : 0, &s->held);
	if (err == 0 && s->opts.memory_budget)
		execinfo_mgr_set_room(s->execinfo, room_for_build, s);
	return err < 0 ? err : execinfo_mgr_start_worker(s->execinfo, s->wake_fd);
}

static int setup_unwinders(struct session *s)
{
	struct go_stack_options go = { .rule_at = rule_at, .held = held_goroutine, .followed = followed_goroutine,
				       .ctx = s };
	int err = unwind_libunwind_new(&s->unwinder);
	struct unwind_deltas_options dopts = { .fallback = unwind_libunwind_deltas_fallback,
					       .fallback_ctx = s->unwinder };
	if (err == 0 && s->opts.go_stacks) {
		/* The goroutine's stack is read up to its end, as far as a walk may go (max_stack_bytes). */
		unsigned go_bytes = s->opts.go_stack_bytes ? s->opts.go_stack_bytes : 16384;
		s->go_max_stack = s->opts.max_stack_bytes > go_bytes ? s->opts.max_stack_bytes : go_bytes;
		go.max_stack = s->go_max_stack;
		err = go_stack_new(&go, &s->go_stack);
		dopts.stack_switch = go_stack_follow;
		dopts.stack_switch_ctx = s->go_stack;
	}
	if (err == 0 && s->opts.max_stack_bytes > s->opts.stack_copy_bytes) {
		err = stackext_new(s->opts.max_stack_bytes, &s->stackext);
		dopts.stack_extend = extend_stack;
		dopts.stack_extend_ctx = s;
	}
	return err < 0 ? err : unwind_deltas_new(&dopts, &s->deltas);
}

int session_new(struct sampler *sampler, const struct session_options *o, struct session **out)
{
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (o)
		s->opts = *o;
	s->sampler = sampler;
	s->self = getpid();
	s->wake_fd = -1;
	setup_kernel(s);
	if (execinfo_mgr_new(&s->execinfo) == 0) {	/* each NULL on failure: checked with the rest below */
		set_cache_dir(s);
		procmgr_new(s->execinfo, &s->procs);
		traces_new(s->execinfo, &s->kernel, &s->traces);
	}
	s->max_frames = s->opts.max_frames ? s->opts.max_frames : SESSION_DEFAULT_MAX_FRAMES;
	s->uframes = calloc(s->max_frames, sizeof(*s->uframes));
	s->frames = calloc(TRACE_MAX_KERNEL_FRAMES + s->max_frames + 1, sizeof(*s->frames));
	jitinfo_mgr_new(NULL, &s->jit);	/* each NULL on failure: checked below */
	if (s->opts.capture_path)
		replay_writer_new(&s->capture);
	int err = setup_unwinders(s);
	struct offcpu_options oo = { .threshold_ns = s->opts.off_cpu_threshold_ns,
				     .max_rate = s->opts.off_cpu_max_rate };
	if (err == 0 && s->opts.off_cpu)
		err = offcpu_new(&oo, &s->offcpu);
	if (err == 0)
		err = setup_worker(s);
	if (err == 0 && (!s->procs || !s->traces || !s->jit || !s->uframes || !s->frames ||
			 (s->opts.capture_path && !s->capture) || setup_correlation(s) < 0 ||
			 execinfo_mgr_add_release_hook(s->execinfo, forget_in_unwinders, s) < 0))
		err = -ENOMEM;
	if (err < 0) {
		session_free(s);
		return err;
	}
	*out = s;
	return 0;
}

void session_free(struct session *s)
{
	if (!s)
		return;
	/* The fast lane's readers use the correlation's reader. */
	fastlane_free(s->fastlane);
	offcpu_free(s->offcpu);
	free(s->blocked_stack);
	/* The worker's references go before the entries' last holders do. */
	if (s->execinfo)
		execinfo_mgr_stop(s->execinfo);
	held_samples_free(s->held);
	/* Traces and mappings hold execinfo references; the unwinder must outlive their release hooks. Traces hold
	 * jitinfo references too: the manager goes after them. */
	traces_free(s->traces);
	jitinfo_mgr_free(s->jit);
	procmgr_free(s->procs);
	execinfo_mgr_free(s->execinfo);
	unwind_libunwind_free(s->unwinder);
	unwind_deltas_free(s->deltas);
	go_stack_free(s->go_stack);
	stackext_free(s->stackext);
	replay_writer_free(s->capture);
	correlate_free(s->correlate);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	kallsyms_free(s->kallsyms);
	free(s->uframes);
	free(s->frames);
	free(s->fast_ext);
	hindex_free(&s->live_reads);
	free(s);
}

const struct session_stats *session_stats(const struct session *s)
{
	return &s->stats;
}

void session_unwind_stats(const struct session *s, struct unwind_deltas_stats *out)
{
	unwind_deltas_get_stats(s->deltas, out);
}

unsigned session_processes(const struct session *s)
{
	return procmgr_seen(s->procs);
}

uint64_t session_dropped_mappings(const struct session *s)
{
	return procmgr_dropped(s->procs);
}

void session_track_pid(struct session *s, pid_t pid)
{
	procmgr_get(s->procs, pid);
	/* What only a living process tells (its root, for the JIT maps it writes) is read now, for it and its children:
	 * its samples may be handled after it exited. */
	jitinfo_mgr_track(s->jit, pid, clock_mono_ns());
}

static int handle_sample(struct session *s, const struct perf_event_header *rec, const struct perf_layout *layout,
			 const struct fastlane_entry *fe, enum sampler_ring_kind kind);

static void handle_switch(struct session *s, const struct perf_event_header *rec, const struct perf_layout *layout,
			  int fast);

/* A fast-lane entry: a sample (CPU or off-CPU) with what its reader read, or a switch record (fastlane.h). */
static void handle_fast_sample(void *ctx, const struct fastlane_entry *e)
{
	struct session *s = ctx;
	if (e->rec->type == PERF_RECORD_SAMPLE)
		handle_sample(s, e->rec, fastlane_layout(s->fastlane), e,
			      e->off_cpu ? SAMPLER_OFF_CPU_RING : SAMPLER_CPU_RING);
	else
		handle_switch(s, e->rec, fastlane_layout(s->fastlane), 1);
}

int session_wake_fd(const struct session *s)
{
	return s->wake_fd;
}

/*
 * Handle the held samples again: those of pid only (0: every one; the others are held again, in order). hold: a
 * walk that meets a table still being built holds its sample again; else it walks on with what exists.
 */
static void rehandle_held(struct session *s, pid_t pid, bool hold)
{
	const struct perf_layout *layout = sampler_layout(s->sampler);
	const struct perf_event_header *rec;
	struct perf_sample ps;
	struct held_batch b;
	held_samples_take(s->held, &b);
	s->replaying = true;
	s->hold_off = !hold;
	while ((rec = held_batch_next(&b))) {
		if (pid && perf_decode_sample(layout, rec, &ps) == 0 && (pid_t)ps.pid != pid &&
		    held_samples_add(s->held, rec) == 0)
			continue;
		handle_sample(s, rec, layout, NULL, SAMPLER_CPU_RING);	/* only CPU samples are held */
	}
	s->hold_off = false;
	s->replaying = false;
	held_samples_done(s->held, &b);
}

/*
 * Walk now, with what exists, the held samples of pid, before a record changes its address space (an exec, a
 * mapping over one it had, a new process under its pid): walked later, they would meet the new one. The others
 * stay held, in order. An exit changes nothing: the process is kept until its held samples are walked.
 */
/* Whether samples of pid are held (jitinfo_mgr_reap_but()'s keep). */
static bool has_held(void *ctx, pid_t pid)
{
	struct session *s = ctx;
	struct process *p = s->held ? procmgr_find(s->procs, pid) : NULL;
	return p && p->held;
}

static void settle_held(struct session *s, pid_t pid)
{
	if (has_held(s, pid))
		rehandle_held(s, pid, false);
}

/* Where switch-outs come without samples, the stacks of threads that have waited long enough are read live, as
 * they wait, every tick this long at most (blocked_stack.h): blocks this long and longer all get their stack. */
#define OFF_CPU_LIVE_TICK_MS 2

/* offcpu_read_fn: tid's stack, read while it waits. */
static void read_blocked(void *ctx, pid_t pid, pid_t tid)
{
	struct session *s = ctx;
	struct blocked_stack bs;
	if (blocked_stack_read(pid, tid, s->blocked_stack, s->blocked_stack_size, &bs) < 0)
		return;	/* running again, gone, or not permitted: the interval stays without a stack (counted) */
	struct offcpu_live live = { .ip = bs.ip, .sp = bs.sp, .bytes = s->blocked_stack, .size = bs.size };
	offcpu_set_live(s->offcpu, tid, &live, bs.done_ns);
}

/* The live reads of waiting threads, where the sampler's switch-outs come without samples. 1 if it does them. */
static int read_blocked_stacks(struct session *s, uint64_t now)
{
	if (!s->offcpu || sampler_off_cpu_samples(s->sampler))
		return 0;
	if (!s->blocked_stack) {
		struct sampler_options so;
		sampler_get_options(s->sampler, &so);
		s->blocked_stack_size = so.off_cpu_stack_size ? so.off_cpu_stack_size : so.stack_size;
		if (!(s->blocked_stack = malloc(s->blocked_stack_size)))
			return 0;
	}
	offcpu_want_live(s->offcpu, now, read_blocked, s);
	return 1;
}

/* Resident memory now (VmRSS: anonymous and file-backed), 0 when it cannot be read. */
static uint64_t resident(void)
{
	struct mem_usage u;
	return mem_usage_read(0, &u) == 0 ? u.rss : 0;
}

/* session_tick() reads the resident memory this often while it is past half the sampling budget, else once a second
 * (the daemon's drain timer wakes it then anyway): a wakeup costs what the reading does. */
#define MEMORY_WATCH_NS 250000000ULL
#define MEMORY_WATCH_IDLE_NS 1000000000ULL

/* The part of the memory budget sampling may fill: a quarter is left to naming a profile on the reporter's
 * thread, which holds one file's symbols at a time when memory is short (a large library's: ~30 MiB for LLVM). */
uint64_t session_sampling_budget(const struct session *s)
{
	return s->opts.memory_budget / 4 * 3;
}

/* The memory budget between profiles (session.h, session_memory_state): give back, then make new work wait. */
static void watch_memory(struct session *s, uint64_t now)
{
	uint64_t budget = session_sampling_budget(s), rss;
	if (!budget || now < s->mem_next_ns || !(rss = resident()))
		return;
	s->mem_next_ns = now + (rss * 2 > budget || s->mem.over ? MEMORY_WATCH_NS : MEMORY_WATCH_IDLE_NS);
	s->mem.peak_rss = rss > s->mem.peak_rss ? rss : s->mem.peak_rss;
	if (rss > budget) {
		struct execinfo_evicted ev;
		execinfo_mgr_trim_files(s->execinfo);
		malloc_trim(0);
		if ((rss = resident()) > budget) {
			execinfo_mgr_evict(s->execinfo, false, &ev);
			malloc_trim(0);
			rss = resident();
		}
	}
	bool over = s->mem.over ? rss * 10 > budget * 9 : rss > budget;
	if (over == s->mem.over)
		return;
	s->mem.over = over;
	s->mem.episodes += over;
	execinfo_mgr_defer_builds(s->execinfo, over);
	if (over)
		log_write(&s->opts.log, LOG_LEVEL_WARN, "memory: %.1f MiB resident, over the %.0f MiB of the budget "
			  "sampling may use: no new table is built and no sample held until it is back under %.0f MiB",
			  rss / 1048576.0, budget / 1048576.0, budget * 0.9 / 1048576.0);
	else
		log_write(&s->opts.log, LOG_LEVEL_INFO, "memory: %.1f MiB resident, back under the budget: %llu tables "
			  "waited and %llu samples were walked without being held meanwhile", rss / 1048576.0,
			  (unsigned long long)execinfo_mgr_builds_deferred(s->execinfo),
			  (unsigned long long)s->mem.holds_refused);
}

/* execinfo_room_fn: a table build of bytes fits in the budget now. Over it, watch_memory() lifts the deferral
 * once memory is back under nine tenths of the budget. */
static bool room_for_build(void *ctx, uint64_t bytes)
{
	struct session *s = ctx;
	uint64_t rss = resident(), budget = session_sampling_budget(s);
	if (!rss || rss + bytes <= budget)
		return true;
	if (!s->mem.over) {
		s->mem.over = true;
		s->mem.episodes++;
		log_write(&s->opts.log, LOG_LEVEL_WARN, "memory: %.1f MiB resident, a table of %.1f MiB more would pass "
			  "the %.0f MiB of the budget sampling may use: no new table is built and no sample held until it "
			  "is back under %.0f MiB", rss / 1048576.0, bytes / 1048576.0, budget / 1048576.0,
			  budget * 0.9 / 1048576.0);
	}
	return false;
}

void session_memory_state(const struct session *s, struct session_memory_state *out)
{
	*out = s->mem;
	out->builds_deferred = execinfo_mgr_builds_deferred(s->execinfo);
}

int session_tick(struct session *s)
{
	int ms = CORRELATE_IDLE_MS;
	uint64_t now = clock_mono_ns(), n;
	/* The fast lane and the table worker write the eventfd: read it (reset) before looking at their work. */
	if (s->wake_fd >= 0 && read(s->wake_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		n = 0;
	if (s->held && execinfo_mgr_collect(s->execinfo) && held_samples_count(s->held))
		rehandle_held(s, 0, true);	/* tables they waited for are ready (some may be held again) */
	if (s->fastlane) {
		fastlane_drain(s->fastlane, handle_fast_sample, s);
		fastlane_reap(s->fastlane, now);
	}
	if (s->correlate)
		ms = correlate_tick(s->correlate, now);
	/* While APM processes are covered, their queued samples are counted and sent every flush interval. */
	if (s->fastlane && ms > CORRELATE_DEFAULT_FLUSH_MS)
		ms = CORRELATE_DEFAULT_FLUSH_MS;
	/* A capture records every process's mappings at the end: keep exited processes until then. */
	if (!s->capture)
		procmgr_reap(s->procs);
	jitinfo_mgr_reap_but(s->jit, has_held, s);	/* held samples may be in an exited process's JIT code */
	watch_memory(s, now);
	if (ms < 0)
		ms = CORRELATE_DEFAULT_FLUSH_MS;
	if (s->opts.memory_budget && s->mem_next_ns > now && ms > (int)((s->mem_next_ns - now) / 1000000) + 1)
		ms = (int)((s->mem_next_ns - now) / 1000000) + 1;
	return read_blocked_stacks(s, now) && ms > OFF_CPU_LIVE_TICK_MS ? OFF_CPU_LIVE_TICK_MS : ms;
}

/* Wait for every table the held samples need and handle them; a few rounds, as a replayed walk may meet another
 * new file, then whatever is left is walked with what exists. */
static void finish_held(struct session *s)
{
	for (int round = 0; s->held && held_samples_count(s->held) && round < 8; round++) {
		execinfo_mgr_wait(s->execinfo);
		rehandle_held(s, 0, true);
	}
	if (s->held && held_samples_count(s->held))
		rehandle_held(s, 0, false);
}

void session_finish(struct session *s)
{
	if (s->fastlane) {
		fastlane_stop(s->fastlane);
		fastlane_drain(s->fastlane, handle_fast_sample, s);
	}
	finish_held(s);
	if (s->correlate) {
		correlate_tick(s->correlate, clock_mono_ns());
		correlate_finish(s->correlate, correlate_delay_ms(s->correlate));
	}
	s->finish_ns = clock_mono_ns();
}

void session_pause(struct session *s, int paused)
{
	s->paused = paused;
	if (s->offcpu && paused)
		offcpu_cancel(s->offcpu);
	if (s->fastlane)
		fastlane_pause(s->fastlane, paused);
}

int session_fastlane_stats(const struct session *s, struct fastlane_stats *out)
{
	if (!s->fastlane)
		return -ENOENT;
	fastlane_get_stats(s->fastlane, out);
	return 0;
}

static void fill_module(struct session *s, const struct mapping *m, struct execinfo *e, struct unwind_module *mod)
{
	mod->start = m->start;
	mod->end = m->end;
	mod->pgoff = m->pgoff;
	mod->bias = m->bias;
	mod->elf = execinfo_elf(e);
	mod->cache_key = e;
	/* Built once per file, on the first sample that needs it, by the worker; the reference unwinder has no use
	 * for it. While it is built, the sample is held (handle_sample()), or walked with the fallback. */
	bool pending = false;
	mod->deltas = s->opts.unwinder == SESSION_UNWIND_DELTAS ? execinfo_deltas_nowait(e, &pending) : NULL;
	mod->table_pending = pending;
	/* Over the memory budget (watch_memory()): walks stop at files without a table, none is made. */
	mod->table_refused = !mod->deltas && !pending && s->opts.unwinder == SESSION_UNWIND_DELTAS &&
			     execinfo_mgr_deferring(e);
	s->walk_pending |= pending;
}

/*
 * perf reports only executable mappings after attach, but unwinders also read a file's read-only parts
 * (.eh_frame_hdr): an address in no mapping still belongs to a file whose image, placed by a known mapping's
 * bias, covers it.
 */
static int find_in_neighbour(struct find_ctx *c, uint64_t addr, struct unwind_module *mod)
{
	struct process *p = c->proc;
	for (unsigned i = 0; i < p->nmaps; i++) {
		struct mapping *m = &p->maps[i];
		if (!m->exe || addr < m->bias || !execinfo_contains_va(m->exe, addr - m->bias))
			continue;
		fill_module(c->s, m, m->exe, mod);
		mod->start = addr;
		mod->end = addr + 1;
		return 0;
	}
	return -ENOENT;
}

/* ---- JIT code (jitinfo.h) ---- */

/* The sampled process's JIT code entry, looked up once per sample. */
static struct jitinfo *process_jit(struct find_ctx *c)
{
	if (!c->jit_got) {
		c->jit = jitinfo_get(c->s->jit, c->proc, c->now);
		c->jit_got = c->jit_found = true;
	}
	return c->jit;
}

/* The sampled process's JIT code entry if it has one already (none is made for processes without JIT code). */
static struct jitinfo *existing_jit(struct find_ctx *c)
{
	if (!c->jit_found) {
		c->jit = jitinfo_find(c->s->jit, c->proc->pid);
		c->jit_found = true;
	}
	return c->jit;
}

/* The unwinder's module for addr in JIT code, or false (jitinfo_module): only the delta unwinder walks it. */
static bool jit_module(struct find_ctx *c, const struct mapping *m, uint64_t addr, struct unwind_module *mod)
{
	struct jitinfo *j = c->s->opts.unwinder == SESSION_UNWIND_DELTAS ? process_jit(c) : NULL;
	return j && jitinfo_module(j, m, addr, mod);
}

/* File code the runtime calls its own (V8's embedded builtins) is JIT code to the delta unwinder too. */
static void jit_in_file(struct find_ctx *c, uint64_t addr, struct unwind_module *mod)
{
	struct jitinfo *j = c->s->opts.unwinder == SESSION_UNWIND_DELTAS ? existing_jit(c) : NULL;
	if (j)
		jitinfo_file_module(j, addr, mod);
}

/* JIT code in no mapping hostprof knows (its record was lost, the process is gone), which its map names. */
static struct jitinfo *unmapped_jit(struct find_ctx *c, uint64_t addr)
{
	struct jitinfo *j = existing_jit(c);
	return j && jitinfo_names(j, addr, c->now) ? j : NULL;
}

/* A frame in JIT code, named when the profile is built; a name missing now has the map read again if it grew. */
static int jit_frame(struct find_ctx *c, struct jitinfo *j, uint64_t addr, struct trace_frame *out)
{
	if (!j)
		return 0;
	jitinfo_names(j, addr, c->now);
	out->exe = NULL;
	out->jit = j;
	out->address = addr;
	out->kind = PROFILE_FRAME_JIT;
	return 1;
}

/* ---- */

static int find_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	struct find_ctx *c = ctx;
	struct mapping *m = procmgr_find_mapping(c->s->procs, c->proc, addr, c->now);
	struct execinfo *e = m ? procmgr_mapping_exe(c->s->procs, c->proc, m) : NULL;
	if (!e && m && m->anon && jit_module(c, m, addr, mod))
		return 0;
	struct jitinfo *j = !m && c->s->opts.unwinder == SESSION_UNWIND_DELTAS ? unmapped_jit(c, addr) : NULL;
	if (j && jitinfo_module_unmapped(j, addr, mod))
		return 0;
	if (!e)
		return find_in_neighbour(c, addr, mod);
	fill_module(c->s, m, e, mod);
	if (c->s->walk_pending && c->s->may_hold)
		return -EAGAIN;	/* the sample will be held and walked again: the walk need not go on */
	jit_in_file(c, addr, mod);
	return 0;
}

static unsigned add_kernel_frames(struct session *s, const struct perf_sample *ps, struct trace_frame *out)
{
	const uint64_t *ips;
	size_t n;
	perf_callchain_kernel(ps, &ips, &n);
	if (n > TRACE_MAX_KERNEL_FRAMES)
		n = TRACE_MAX_KERNEL_FRAMES;
	for (size_t i = 0; i < n; i++) {
		out[i].exe = NULL;
		out[i].address = ips[i];
		out[i].kind = PROFILE_FRAME_KERNEL;
	}
	s->kernel_frames |= n > 0;
	return (unsigned)n;
}

/* Convert one unwound user frame to (file, ELF address); returns 0 if it is in no known file. */
static int user_frame(struct find_ctx *c, const struct unwind_frame *uf, int is_return, struct trace_frame *out)
{
	/* A return address may be the first byte after the caller's mapping (a call ending a function). */
	uint64_t lookup = is_return ? uf->ip - 1 : uf->ip;
	struct mapping *m = procmgr_find_mapping(c->s->procs, c->proc, lookup, c->now);
	/* Code runs only from executable mappings: an address in a file's data is no frame (prot 0: unknown). */
	bool code = m && (m->prot == 0 || (m->prot & PROT_EXEC));
	struct execinfo *e = code ? procmgr_mapping_exe(c->s->procs, c->proc, m) : NULL;
	if (!e)
		return jit_frame(c, m && m->anon ? process_jit(c) : !m ? unmapped_jit(c, lookup) : NULL, lookup, out);
	out->exe = e;
	out->address = lookup - m->bias;
	out->kind = PROFILE_FRAME_NATIVE;
	return 1;
}

static void count_status(struct session_walks *w, enum unwind_status st)
{
	if (st == UNWIND_COMPLETE)
		w->complete++;
	else if (st == UNWIND_UNKNOWN_LEAF)
		w->unknown++;
	else
		w->truncated++;
}

static unsigned add_user_frames(struct session *s, struct process *p, const struct perf_sample *ps,
				struct session_walks *w, struct trace_frame *out)
{
	struct unwind_sample us;
	struct find_ctx c = { .s = s, .proc = p, .sample = &us, .now = ps->time, .pid = p->pid };
	c.memory = procmem_reader(&c.pid);
	struct unwind_process up = { .find_module = find_module, .ctx = &c, .memory = &c.memory };
	enum unwind_status st = UNWIND_TRUNCATED;
	unsigned n = 0;

	memcpy(us.regs, ps->regs, sizeof(us.regs));
	us.stack = ps->stack;
	us.stack_size = ps->stack ? ps->stack_size : 0;
	perf_callchain_user(ps, &us.fp_chain, &us.fp_chain_len);
	uint64_t t0 = clock_mono_ns();
	int nu = s->opts.unwinder == SESSION_UNWIND_DELTAS ?
			 unwind_deltas_unwind(s->deltas, &up, &us, s->uframes, s->max_frames, &st) :
			 unwind_libunwind_unwind(s->unwinder, &up, &us, s->uframes, s->max_frames, &st);
	s->stats.unwind_ns += clock_mono_ns() - t0;
	if (s->walk_pending && s->may_hold)
		return 0;	/* held: counted when it is walked again */
	s->stats.table_pending += s->walk_pending && !s->replaying;	/* a held one is counted as settled */
	if (s->capture && replay_writer_add_sample(s->capture, p->pid, (pid_t)ps->tid, &us) < 0)
		s->stats.capture_errors++;
	for (int i = 0; i < nu; i++) {
		/* Every caller frame holds a return address, except one a signal interrupted: its IP is exact. */
		int is_return = i > 0 && !(s->uframes[i].flags & UNWIND_FRAME_SIGNAL);
		if (!user_frame(&c, &s->uframes[i], is_return, &out[n])) {
			/* Code in no mapping hostprof knows (a vanished one): the stack cannot be named past it. */
			st = i == 0 ? UNWIND_UNKNOWN_LEAF : UNWIND_TRUNCATED;
			break;
		}
		n++;
	}
	if (nu <= 0)
		st = UNWIND_UNKNOWN_LEAF;
	else if (st == UNWIND_UNKNOWN_LEAF && n)
		st = UNWIND_TRUNCATED;	/* a leaf in JIT code no unwinder could walk: known, not followed */
	/* Cut by the frame bound: every frame the walk could keep was taken and named. */
	if (nu == (int)s->max_frames && n == (unsigned)nu && st == UNWIND_TRUNCATED)
		w->frame_limited++;
	count_status(w, st);
	if (st != UNWIND_COMPLETE) {
		out[n].exe = NULL;
		out[n].kind = PROFILE_FRAME_ERROR;
		out[n].address = st == UNWIND_UNKNOWN_LEAF ? TRACE_ERROR_UNKNOWN : TRACE_ERROR_TRUNCATED;
		n++;
	}
	return n;
}

/* Tell the correlation library about the APM agent libraries a process mapped before hostprof saw it. */
static void find_apm_agent(struct session *s, struct process *p)
{
	p->apm_checked = 1;
	for (unsigned i = 0; i < p->nmaps; i++) {
		const struct mapping *m = &p->maps[i];
		if (m->path && correlate_is_apm_library(m->path))
			correlate_on_mapping(s->correlate, p->pid, m->start, m->end, m->pgoff, m->path);
	}
}

/*
 * The APM trace context of a sample's thread, when its process runs an agent with a transaction active: read
 * by the fast lane right after the sample (fe), or now. A thread may switch transactions between the sample
 * and the read: a read long after the sample is not trusted, the sample stays uncorrelated (counted).
 */
static int correlated(struct session *s, struct process *p, const struct perf_sample *ps, uint64_t valid_from,
		      const struct fastlane_entry *fe, const struct trace_id *id, struct correlate_context *ctx,
		      struct trace_link *link)
{
	if (!p->apm_checked)
		find_apm_agent(s, p);
	if (!correlate_is_ready(s->correlate, p->pid))
		return 0;
	uint64_t read_ns = fe ? fe->read_ns : clock_mono_ns();
	/* valid_from: the sample's time, or for off-CPU time its switch-in (the context held still until then). */
	uint64_t lat_us = read_ns > valid_from ? (read_ns - valid_from) / 1000 : 0;
	s->stats.apm_read_hist[lat_us < 64 ? lat_us / 8 : lat_us < 1024 ? 8 + lat_us / 128 : 15]++;
	if (lat_us > (s->opts.apm_max_staleness_us ? s->opts.apm_max_staleness_us : SESSION_APM_MAX_STALENESS_US)) {
		s->stats.apm_stale++;
		return 0;
	}
	int r = fe ? correlate_on_read(s->correlate, p->pid, (pid_t)ps->tid, fe->ctx, id->bytes, ps->time, ctx) :
		     correlate_on_sample(s->correlate, p->pid, (pid_t)ps->tid, id->bytes, ps->time, ctx);
	if (r != 1)
		return 0;
	memcpy(link->trace_id, ctx->trace_id, 16);
	memcpy(link->transaction_id, ctx->transaction_id, 8);
	link->service = ctx->service_name;
	return 1;
}

/* A sample of a process over the tracking limit still counts, under one visible frame. */
static int count_untracked(struct session *s, const struct perf_sample *ps)
{
	struct trace_frame f = { .kind = PROFILE_FRAME_ERROR, .address = TRACE_ERROR_TOO_MANY };
	if (traces_add(s->traces, (pid_t)ps->pid, (pid_t)ps->tid, "", "", &f, 1, ps->period) == 0) {
		s->stats.samples++;
		s->stats.untracked++;
	}
	return 0;
}

/* Count a walked sample's frames into the traces, with its trace context when it has one. */
static void add_trace(struct session *s, struct process *p, const struct perf_sample *ps,
		      const struct fastlane_entry *fe, unsigned n)
{
	const char *tname = ps->pid ? procmgr_thread_name(s->procs, p, (pid_t)ps->tid) : "swapper";
	struct trace_id id;
	struct trace_link link;
	struct correlate_context ctx;
	traces_hash(s->traces, s->frames, n, &id);
	int linked = s->correlate && ps->pid && correlated(s, p, ps, ps->time, fe, &id, &ctx, &link);
	if (traces_add_linked(s->traces, &id, (pid_t)ps->pid, (pid_t)ps->tid, ps->pid ? p->comm : "swapper", tname,
			      s->frames, n, ps->period, linked ? &link : NULL) == 0)
		s->stats.samples++;
}

/*
 * A sample the kernel took inside an exec, after the exec record: until the kernel sets the new program's
 * registers, the user registers are those the old program entered exec with, in the image the exec replaced
 * (procmgr.h), while the stack it copies at their stack pointer is of the new address space (nothing, or the new
 * program's bytes). The leaf is named in the replaced image; nothing past it can be walked. Returns its frames (the
 * leaf and a truncation), or 0 when the sample is not one: a sample with the new image's registers (taken in user
 * mode, or its IP in the new image) shows the exec returned, and the replaced image goes.
 */
static unsigned in_exec_frames(struct session *s, struct process *p, const struct perf_sample *ps,
			       struct session_walks *w, struct trace_frame *out)
{
	uint64_t ip = ps->regs[UNWIND_REG_IP];
	if ((ps->misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_KERNEL || procmgr_lookup_mapping(p, ip)) {
		procmgr_drop_replaced(s->procs, p);
		return 0;
	}
	struct mapping *m = procmgr_replaced_mapping(p, ip);
	bool code = m && (m->prot == 0 || (m->prot & PROT_EXEC));
	struct execinfo *e = code ? procmgr_mapping_exe(s->procs, p, m) : NULL;
	if (!e || ip < m->bias)
		return 0;
	out[0] = (struct trace_frame){ .exe = e, .address = ip - m->bias, .kind = PROFILE_FRAME_NATIVE };
	out[1] = (struct trace_frame){ .kind = PROFILE_FRAME_ERROR, .address = TRACE_ERROR_TRUNCATED };
	count_status(w, UNWIND_TRUNCATED);
	return 2;
}

/* The sample's kernel and user frames into s->frames, how its walk ended counted in w; s->walk_pending tells
 * whether a table was not ready. */
static unsigned sample_frames(struct session *s, struct process *p, const struct perf_sample *ps,
			      const struct fastlane_entry *fe, struct session_walks *w)
{
	s->walk_pending = false;
	unsigned n = add_kernel_frames(s, ps, s->frames);
	s->fast = fe; /* for the walk's hooks: what the fast lane read of this sample's process */
	if (ps->regs_abi != PERF_SAMPLE_REGS_ABI_NONE && ps->pid != 0) {
		unsigned in_exec = p->nreplaced ? in_exec_frames(s, p, ps, w, s->frames + n) : 0;
		n += in_exec ? in_exec : add_user_frames(s, p, ps, w, s->frames + n);
	} else {
		w->kernel_only++;
	}
	s->fast = NULL;
	return n;
}

static int handle_off_cpu_sample(struct session *s, const struct perf_event_header *rec,
				 const struct perf_sample *ps, const struct fastlane_entry *fe);
/*
 * The frames of a sample, or true when it was held because a table its walk needs is being built. A sample the
 * queue has no room for (or a fast-lane sample, whose trace context is read for now) is walked at once with what
 * exists: the fallback unwinder through the module without a table (counted: table_pending).
 */
static bool walk_or_hold(struct session *s, struct process *p, const struct perf_sample *ps,
			 const struct perf_event_header *rec, const struct fastlane_entry *fe, unsigned *n)
{
	/* Over the memory budget, a sample is held no more (one held already may stay so: in place). */
	s->may_hold = !fe && s->held && !s->hold_off && held_samples_room(s->held, rec) &&
		      (!s->mem.over || s->replaying);
	*n = sample_frames(s, p, ps, fe, &s->stats.walks);
	s->mem.holds_refused += s->walk_pending && !s->may_hold && s->mem.over && !s->replaying && !fe;
	if (s->walk_pending && s->may_hold && held_samples_add(s->held, rec) == 0) {
		if (!s->replaying) {	/* held again while replayed: still the same one */
			s->stats.held++;
			p->held++;
		}
		return true;
	}
	if (s->walk_pending && s->may_hold) {
		s->may_hold = false;
		*n = sample_frames(s, p, ps, fe, &s->stats.walks);
	}
	if (s->replaying) {	/* a held sample walked at last: with its table, or settled without */
		p->held -= p->held > 0;
		if (s->walk_pending)
			s->stats.settled++;
		else
			s->stats.replayed++;
	}
	return false;
}

/* A sample from the main rings, or from the fast lane (fe: with its trace context read); from an off-CPU ring, a
 * switch-out. */
static int handle_sample(struct session *s, const struct perf_event_header *rec, const struct perf_layout *layout,
			 const struct fastlane_entry *fe, enum sampler_ring_kind kind)
{
	struct perf_sample ps;
	unsigned n;
	if (perf_decode_sample(layout, rec, &ps) < 0) {
		s->stats.bad_records++;
		return 0;
	}
	if ((pid_t)ps.pid == s->self)
		return 0; /* hostprof's own work is not what the user asked about */
	if (!fe && !s->replaying && s->fastlane && fastlane_covers(s->fastlane, (pid_t)ps.pid, ps.time)) {
		s->stats.fast_dropped++; /* the fast lane has this process's samples, off-CPU ones too */
		return 0;
	}
	if (kind == SAMPLER_OFF_CPU_RING)
		return s->offcpu ? handle_off_cpu_sample(s, rec, &ps, fe) : 0;
	s->stats.fast_samples += fe != NULL;
	uint64_t t0 = clock_mono_ns();
	struct process *p = procmgr_get(s->procs, (pid_t)ps.pid);
	if (!p)
		return count_untracked(s, &ps);
	p->last_sample_ns = t0;
	if (!fe && !s->replaying)
		lane_by_program(s, p);
	if (!walk_or_hold(s, p, &ps, rec, fe, &n)) {
		/* Once, when walked (a held sample when walked again), as its reads are (live_read()). */
		if (!fe)
			count_live_sample(s, p->pid);
		add_trace(s, p, &ps, fe, n);
	}
	/* The sample's frames hold their own references now: files its walk found replaced can go. */
	procmgr_release_deferred(s->procs);
	s->stats.handle_ns += clock_mono_ns() - t0;
	return 0;
}

/* ---- off-CPU time (offcpu.h) ---- */

/* What the fast lane's reader read of an APM thread as it switched out, kept with the switch-out (offcpu.h). */
struct off_cpu_note {
	struct correlate_read ctx;
	uint64_t read_ns;
};

/*
 * A switch-out's sample: the thread switching out (the kernel takes it in that thread), kept until its switch-in,
 * with the trace context the fast lane read (fe) while it was switched out. Its switch record, which follows,
 * says whether it was preempted. Idle and hostprof's own threads are left out.
 */
static int handle_off_cpu_sample(struct session *s, const struct perf_event_header *rec,
				 const struct perf_sample *ps, const struct fastlane_entry *fe)
{
	if (ps->pid == 0)
		return 0;	/* the idle task */
	if (offcpu_sample_out(s->offcpu, (pid_t)ps->pid, (pid_t)ps->tid, ps->time, rec) == 0 && fe) {
		struct off_cpu_note note = { .ctx = *fe->ctx, .read_ns = fe->read_ns };
		offcpu_set_note(s->offcpu, (pid_t)ps->tid, &note, sizeof(note));
	}
	return 0;
}

/* Time off CPU without a stack (a short block, over the rate cap, or no sample): summed per thread under one frame. */
static void count_off_cpu_alone(struct session *s, struct process *p, const struct offcpu_interval *iv)
{
	struct trace_frame f = { .kind = PROFILE_FRAME_ERROR, .address = iv->why == OFFCPU_SHORT ?
				 TRACE_ERROR_OFFCPU_SHORT : iv->why == OFFCPU_CAPPED ? TRACE_ERROR_OFFCPU_CAPPED :
				 TRACE_ERROR_OFFCPU_NO_SAMPLE };
	const char *tname = p ? procmgr_thread_name(s->procs, p, iv->tid) : "";
	traces_add_off_cpu(s->traces, NULL, iv->pid, iv->tid, p ? p->comm : "", tname, &f, 1, iv->ns, iv->preempted,
			   NULL);
}

/* The stack of an interval off CPU, unwound from its switch-out sample; its unwinding counted apart from the CPU
 * samples'. Returns the frames in s->frames. */
static unsigned off_cpu_frames(struct session *s, struct process *p, const struct perf_sample *ps)
{
	s->may_hold = false; /* its record is the off-CPU tracker's copy, walked now with what exists */
	s->stats.off_cpu_stacks++;
	return sample_frames(s, p, ps, NULL, &s->stats.off_cpu_walks);
}

/* The sample an interval's stack is unwound from: its switch-out sample decoded, or the registers and stack read
 * live as it waited (blocked_stack.h), which are IP and SP only. 0, or -EBADMSG. */
static int off_cpu_sample(const struct offcpu_interval *iv, const struct perf_layout *layout, struct perf_sample *ps)
{
	if (iv->rec)
		return perf_decode_sample(layout, iv->rec, ps);
	*ps = (struct perf_sample){ .pid = (uint32_t)iv->pid, .tid = (uint32_t)iv->tid, .time = iv->start_ns,
				    .regs_abi = PERF_SAMPLE_REGS_ABI_64, .stack = iv->live->bytes,
				    .stack_size = iv->live->size, .misc = PERF_RECORD_MISC_USER };
	ps->ip = ps->regs[UNWIND_REG_IP] = iv->live->ip;
	ps->regs[UNWIND_REG_SP] = iv->live->sp;
	return 0;
}

/*
 * An interval off CPU (offcpu_fn): unwound from its switch-out sample (or the stack read as it waited) and
 * counted, or summed per thread. Its trace context is the one the fast lane read at the switch-out (its note),
 * valid until the switch-in.
 */
static void count_off_cpu(void *arg, const struct offcpu_interval *iv)
{
	struct session *s = arg;
	struct process *p = procmgr_get(s->procs, iv->pid);
	const struct off_cpu_note *note = iv->note_len == sizeof(*note) ? iv->note : NULL;
	const struct perf_layout *layout = note ? fastlane_layout(s->fastlane) : sampler_layout(s->sampler);
	struct perf_sample ps;
	if ((!iv->rec && !iv->live) || !p || off_cpu_sample(iv, layout, &ps) < 0) {
		count_off_cpu_alone(s, p, iv);
		return;
	}
	uint64_t t0 = clock_mono_ns();
	p->last_sample_ns = t0;
	unsigned n = off_cpu_frames(s, p, &ps);
	struct trace_id id;
	struct trace_link link;
	struct correlate_context ctx;
	struct fastlane_entry fe = { .rec = iv->rec, .ctx = note ? &note->ctx : NULL, .read_ns = note ? note->read_ns : 0 };
	traces_hash(s->traces, s->frames, n, &id);
	int linked = s->correlate && correlated(s, p, &ps, ps.time + iv->ns, note ? &fe : NULL, &id, &ctx, &link);
	traces_add_off_cpu(s->traces, &id, iv->pid, iv->tid, p->comm, procmgr_thread_name(s->procs, p, iv->tid),
			   s->frames, n, iv->ns, iv->preempted, linked ? &link : NULL);
	procmgr_release_deferred(s->procs);
	s->stats.handle_ns += clock_mono_ns() - t0;
}

/* A switch record: a switch-out completes its sample (preempted or blocked), or starts an interval without one; a
 * switch-in ends the thread's interval off CPU. A process the fast lane covers has its switch records there
 * (fast), not from the main rings. The idle task and hostprof's own threads are left out. */
static void handle_switch(struct session *s, const struct perf_event_header *rec, const struct perf_layout *layout,
			  int fast)
{
	struct perf_switch sw;
	struct offcpu_interval iv;
	if (!s->offcpu)
		return;
	if (perf_decode_switch(layout, rec, &sw) < 0) {
		s->stats.bad_records++;
		return;
	}
	if (sw.pid == 0 || (pid_t)sw.pid == s->self)
		return;
	if (!fast && s->fastlane && fastlane_covers(s->fastlane, (pid_t)sw.pid, sw.time))
		return;
	if (sw.out)
		offcpu_switch_out(s->offcpu, (pid_t)sw.pid, (pid_t)sw.tid, sw.time, sw.preempted);
	else if (offcpu_switch_in(s->offcpu, (pid_t)sw.tid, sw.time, &iv))
		count_off_cpu(s, &iv);
}

uint64_t session_off_cpu_lost(const struct session *s)
{
	struct fastlane_stats fs = { 0 };
	if (s->fastlane)
		fastlane_get_stats(s->fastlane, &fs);
	return sampler_off_cpu_lost(s->sampler) + fs.off_cpu_lost;
}

int session_offcpu_stats(const struct session *s, struct offcpu_stats *out)
{
	if (!s->offcpu)
		return -ENOENT;
	offcpu_get_stats(s->offcpu, out);
	return 0;
}

static void handle_lost(struct session *s, const struct perf_event_header *rec)
{
	struct perf_lost l;
	uint64_t n;
	if (rec->type == PERF_RECORD_LOST && perf_decode_lost(rec, &l) == 0)
		s->stats.lost += l.lost;
	else if (rec->type == PERF_RECORD_LOST_SAMPLES && perf_decode_lost_samples(rec, &n) == 0)
		s->stats.lost += n;
	else
		s->stats.bad_records++;
}

/* A mapping: the process manager, the JIT maps, and correlation when it is an APM agent's library. */
static void handle_mmap2(struct session *s, const struct perf_event_header *rec)
{
	struct perf_mmap2 m;
	if (perf_decode_mmap2(rec, &m) < 0)
		return;
	struct process *p = s->held ? procmgr_find(s->procs, (pid_t)m.pid) : NULL;
	if (p && p->held && procmgr_overlaps(p, m.addr, m.addr + m.len))
		settle_held(s, (pid_t)m.pid);
	procmgr_on_mmap2(s->procs, &m);
	jitinfo_mgr_on_mapping(s->jit, (pid_t)m.pid, m.filename);
	if (s->correlate && m.filename && correlate_is_apm_library(m.filename))
		correlate_on_mapping(s->correlate, (pid_t)m.pid, m.addr, m.addr + m.len, m.pgoff, m.filename);
}

static void handle_comm(struct session *s, const struct perf_event_header *rec)
{
	struct perf_comm c;
	if (perf_decode_comm(rec, &c) < 0)
		return;
	if (c.exec)
		settle_held(s, (pid_t)c.pid);
	procmgr_on_comm(s->procs, &c);
	if (c.exec)
		jitinfo_mgr_on_exec(s->jit, (pid_t)c.pid, clock_mono_ns());
	if (s->correlate && c.exec)
		correlate_on_exec(s->correlate, (pid_t)c.pid);
}

/* A fork or an exit, of a process (pid == tid) or of a thread. */
static void handle_task(struct session *s, const struct perf_event_header *rec)
{
	struct perf_task t;
	if (perf_decode_task(rec, &t) < 0)
		return;
	bool process = t.pid == t.tid;
	if (rec->type == PERF_RECORD_FORK) {
		if (process)
			settle_held(s, (pid_t)t.pid);	/* a pid reused: the exited one's held samples first */
		procmgr_on_fork(s->procs, &t);
		if (process && t.pid != t.ppid)
			jitinfo_mgr_on_fork(s->jit, (pid_t)t.ppid, (pid_t)t.pid, clock_mono_ns());
		return;
	}
	procmgr_on_exit(s->procs, &t);	/* kept, mappings and all, while samples of its are held */
	if (s->offcpu)
		offcpu_forget(s->offcpu, (pid_t)t.tid);
	if (process)
		jitinfo_mgr_on_exit(s->jit, (pid_t)t.pid);
	if (s->fastlane && process)
		fastlane_on_exit(s->fastlane, (pid_t)t.pid, t.time);
	if (s->correlate && process)
		correlate_on_process_exit(s->correlate, (pid_t)t.pid);
	else if (s->correlate)
		correlate_on_thread_exit(s->correlate, (pid_t)t.pid, (pid_t)t.tid);
}

int session_handle_record(void *ctx, const struct perf_event_header *rec, enum sampler_ring_kind kind)
{
	struct session *s = ctx;
	switch (rec->type) {
	case PERF_RECORD_SAMPLE:
		return handle_sample(s, rec, sampler_layout(s->sampler), NULL, kind);
	case PERF_RECORD_MMAP2:
		handle_mmap2(s, rec);
		break;
	case PERF_RECORD_COMM:
		handle_comm(s, rec);
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		handle_task(s, rec);
		break;
	case PERF_RECORD_LOST:
	case PERF_RECORD_LOST_SAMPLES:
		handle_lost(s, rec);
		break;
	case PERF_RECORD_SWITCH:
	case PERF_RECORD_SWITCH_CPU_WIDE:
		handle_switch(s, rec, sampler_layout(s->sampler), 0);
		break;
	default:
		break; /* throttling and other records carry nothing hostprof uses */
	}
	return 0;
}

/* The mappings of p whose files can be opened, as a replay records them. */
static int capture_process(void *ctx, struct process *p)
{
	struct session *s = ctx;
	struct replay_mapping *maps = calloc(p->nmaps + 1, sizeof(*maps));
	uint32_t n = 0;
	int err = maps ? 0 : -ENOMEM;
	for (unsigned i = 0; i < p->nmaps && !err; i++) {
		struct execinfo *e = procmgr_mapping_exe(s->procs, p, &p->maps[i]);
		if (!e)
			continue;
		maps[n] = (struct replay_mapping){ .start = p->maps[i].start, .end = p->maps[i].end,
						   .pgoff = p->maps[i].pgoff, .prot = p->maps[i].prot };
		err = replay_writer_add_file(s->capture, e, &maps[n].file);
		n++;
	}
	if (!err)
		err = replay_writer_set_process(s->capture, p->pid, maps, n);
	free(maps);
	return err;
}

int session_save_capture(struct session *s)
{
	if (!s->capture)
		return 0;
	int err = procmgr_for_each(s->procs, capture_process, s);
	return err < 0 ? err : replay_writer_save(s->capture, s->opts.capture_path);
}

void session_table_totals(const struct session *s, unsigned *tables, unsigned *cached, uint64_t *rows,
			  uint64_t *bytes, uint64_t *build_ns)
{
	struct execinfo_totals t;
	execinfo_mgr_totals(s->execinfo, &t);
	*tables = t.tables;
	*cached = t.tables_cached;
	*rows = t.rows;
	*bytes = t.bytes;
	*build_ns = t.build_ns;
}

/* Threads still off CPU count up to the end of the run (or now, for a daemon's interval); the profile says what
 * the switches came to. */
static void off_cpu_to_profile(struct session *s, struct profile *p)
{
	struct offcpu_stats st;
	if (!s->offcpu)
		return;
	offcpu_flush(s->offcpu, s->finish_ns ? s->finish_ns : clock_mono_ns(), count_off_cpu, s);
	offcpu_get_stats(s->offcpu, &st);
	p->info.off_cpu_threshold_ns = s->opts.off_cpu_threshold_ns;
	p->info.off_cpu_switches += st.switch_outs;
	p->info.off_cpu_capped += st.capped;
	p->info.off_cpu_no_stack += st.no_sample;
	/* Off-CPU samples lost in full off-CPU rings (the main ones and the fast lane's), apart from CPU samples. */
	uint64_t lost = session_off_cpu_lost(s);
	p->info.off_cpu_lost += st.untracked + (lost - s->off_cpu_lost_told);
	s->off_cpu_lost_told = lost;
}

/* The interval's counters into p->info, and what naming its traces needs made ready on this thread: the JIT
 * maps read again and its JIT frames named, kallsyms loaded if kernel frames need it. */
static int prepare_profile(struct session *s, struct profile *p)
{
	off_cpu_to_profile(s, p);
	p->info.samples += s->stats.samples;
	p->info.lost += s->stats.lost;
	p->info.unwound_complete += s->stats.walks.complete;
	p->info.truncated += s->stats.walks.truncated;
	p->info.unknown += s->stats.walks.unknown;
	/* A map written since the last read, even as its process exited, names the JIT frames. */
	jitinfo_mgr_refresh(s->jit);
	load_kallsyms(s);
	return traces_name_jit(s->traces);
}

int session_build_profile(struct session *s, struct profile *p)
{
	int err = prepare_profile(s, p);
	return err < 0 ? err : traces_build_profile(s->traces, p, NULL, NULL);
}

int session_detach_interval(struct session *s, struct profile *p, struct traces **out)
{
	struct traces *next;
	int err = traces_new(s->execinfo, &s->kernel, &next);
	if (err == 0 && (err = prepare_profile(s, p)) < 0)
		traces_free(next);
	if (err < 0)
		return err;
	*out = s->traces;
	s->traces = next;
	session_reset_counts(s);
	execinfo_mgr_naming(s->execinfo, true);
	return 0;
}

void session_release_interval(struct session *s, struct traces *t)
{
	traces_free(t);
	execinfo_mgr_naming(s->execinfo, false);
}

int session_correlate_stats(const struct session *s, struct correlate_stats *out)
{
	return s->correlate ? correlate_stats(s->correlate, out) : -ENOENT;
}

void session_set_limits(struct session *s, unsigned max_processes)
{
	procmgr_set_limit(s->procs, max_processes);
}

unsigned session_forget_idle(struct session *s, uint64_t idle_ns)
{
	uint64_t now = clock_mono_ns();
	if (now > idle_ns)
		jitinfo_mgr_forget_idle(s->jit, now - idle_ns);
	return now > idle_ns ? procmgr_forget_idle(s->procs, now - idle_ns) : 0;
}

void session_reset_counts(struct session *s)
{
	traces_reset(s->traces);
	memset(&s->stats, 0, sizeof(s->stats));
	if (s->offcpu)
		offcpu_reset_stats(s->offcpu);
}

/* Give the heap's free pages and the files' mapped pages back to the kernel, and read what is left resident. */
static uint64_t trimmed_rss(struct session *s)
{
	malloc_trim(0);
	execinfo_mgr_trim_files(s->execinfo);
	return resident();
}

static void add_evicted(struct session_memory *out, const struct execinfo_evicted *ev)
{
	out->tables += ev->tables;
	out->table_bytes += ev->table_bytes;
	out->symbolizers += ev->symbolizers;
}

void session_enforce_budget(struct session *s, uint64_t budget, struct session_memory *out)
{
	struct execinfo_evicted ev;
	memset(out, 0, sizeof(*out));
	execinfo_mgr_evict(s->execinfo, false, &ev);
	add_evicted(out, &ev);
	out->rss = trimmed_rss(s);
	if (budget && out->rss > budget) {
		/* Still over: the files in use give up their tables and symbolizers too (back when asked). */
		out->over = true;
		execinfo_mgr_evict(s->execinfo, true, &ev);
		add_evicted(out, &ev);
		out->rss = trimmed_rss(s);
	}
	out->files = execinfo_mgr_count(s->execinfo);
}
