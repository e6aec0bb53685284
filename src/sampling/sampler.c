/*
 * sampler.c — perf_event setup and ring-buffer reading. See sampler.h for the contract.
 */
#include "src/sampling/sampler.h"

#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SCRATCH_SIZE SAMPLER_SCRATCH_SIZE /* a perf record's size is a u16 */

struct ring {
	int fd;			/* the holder whose buffer this is; -1 if the CPU has none */
	struct perf_event_mmap_page *meta;
	uint8_t *data;
	uint64_t size;		/* bytes of data, a power of two */
	uint64_t head, tail;	/* during a drain: the records [tail, head) not yet delivered */
	uint64_t next_time;	/* during a merged drain: the time of the record at tail */
	uint64_t *lost;		/* an off-CPU ring: where its PERF_RECORD_LOST counts go (not delivered) */
	struct record_origin origin;	/* its layout is the sampler's */
};

struct sampler {
	struct sampler_options opts;
	struct perf_event_attr attr;
	struct perf_layout layout;
	int ncpus;
	struct ring *rings;	/* one per CPU, then (off_cpu) one off-CPU ring per CPU, then (once a thread copy is
				 * opened) one thread-copy ring per CPU */
	int nrings;		/* ncpus, or 2 × ncpus with off_cpu: the rings sampler_ring_fd() gives */
	int nall;		/* nrings, + ncpus once the thread-copy rings exist */
	unsigned thread_ring_pages;	/* data pages per thread-copy ring */
	int stopped;		/* sampler_disable() last: thread copies open disabled */
	uint64_t off_cpu_lost;	/* off-CPU samples the kernel could not write into an off-CPU ring */
	int *fds;		/* sampling events (the rings' holders are in rings[]) */
	pid_t *fd_tids;		/* for each of fds: the thread a thread copy's event samples, 0 for the others */
	unsigned nfds, capfds;
	int rings_made;		/* make_rings() ran */
	struct pollfd *pollfds;
	unsigned cap_pollfds;
	uint8_t *scratch;	/* a record that wraps the end of a ring is copied here */
	char event_name[32];
	char error[256];
	char note[256];
	int attr_settled;	/* the first successful open fixed the attr (event, kernel) */
	int off_cpu_records_only;	/* off_cpu: kernel sampling refused, switch records only (sampler.h) */
};

static const struct {
	const char *name;
	uint32_t type;
	uint64_t config;
} known_events[] = {
	{ "cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK },
	{ "task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
	{ "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
	{ "cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
	{ "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
	{ "cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
	{ "branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES },
	{ "ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES },
};

int sampler_parse_event(const char *name, uint32_t *type, uint64_t *config)
{
	for (size_t i = 0; i < sizeof(known_events) / sizeof(known_events[0]); i++) {
		if (strcmp(name, known_events[i].name) == 0) {
			*type = known_events[i].type;
			*config = known_events[i].config;
			return 0;
		}
	}
	return -ENOENT;
}

static long perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group, unsigned long flags)
{
	return syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

static int read_int_file(const char *path, int *out)
{
	FILE *f = fopen(path, "r");
	int ok = f && fscanf(f, "%d", out) == 1;
	if (f)
		fclose(f);
	return ok ? 0 : -ENOENT;
}

static void build_attr(struct sampler *s, uint32_t type, uint64_t config)
{
	struct perf_event_attr *a = &s->attr;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = type;
	a->config = config;
	a->freq = 1;
	a->sample_freq = s->opts.freq_hz;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			 PERF_SAMPLE_PERIOD | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	if (s->opts.kernel || s->opts.fp_chain)
		a->sample_type |= PERF_SAMPLE_CALLCHAIN;
	a->sample_regs_user = UNWIND_SAMPLE_REGS_MASK;
	a->sample_stack_user = s->opts.stack_size;
	a->exclude_kernel = !s->opts.kernel;
	a->exclude_hv = 1;
	/* User stacks are unwound here, from the copy; the kernel's frame-pointer walk only when asked for. */
	a->exclude_callchain_user = !s->opts.fp_chain;
	a->exclude_callchain_kernel = !s->opts.kernel;
	if (!s->opts.samples_only) {
		a->mmap = 1; /* the kernel emits no mmap events at all unless some event sets mmap */
		a->mmap2 = 1;  /* ... and then writes them in the MMAP2 layout */
		a->comm = 1;
		a->comm_exec = 1;
		a->task = 1;
	}
	a->sample_id_all = 1;
	a->disabled = 1;
	/* Sample times on CLOCK_MONOTONIC: comparable with hostprof's own clock (APM read latency, timelines). */
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	if (s->opts.low_latency) {
		a->wakeup_events = 1;	/* every sample wakes the reader */
	} else {
		a->watermark = 1;	/* events wake no one: the ring's holder's watermark does (make_rings) */
		a->wakeup_watermark = 0;
	}

	s->layout.sample_type = a->sample_type;
	s->layout.regs_mask = a->sample_regs_user;
	s->layout.sample_id_all = 1;
}

/* Samples a ring holds by default (root): woken half full, it is read once per ~100 samples (a context switch
 * per 100 at most), with as many again of room for a burst while the reader gets scheduled (~100 ms at 999 Hz). */
#define RING_SAMPLES 200
#define RING_PAGES_MIN 512	/* 2 MiB */
#define RING_PAGES_MAX 2048	/* 8 MiB */

/* Pages of a ring for samples samples of stack_size bytes of stack each. */
static unsigned default_ring_pages(uint32_t stack_size, unsigned samples)
{
	/* Unprivileged users share perf_event_mlock_kb (516 KiB by default) across CPUs; root is not limited. A
	 * sample is its stack copy plus ~1 KiB (registers, frame-pointer chain): 16 KiB stacks take 4 MiB rings. */
	if (geteuid() == 0) {
		uint64_t want = (uint64_t)samples * (stack_size + 1024u), page = (uint64_t)getpagesize();
		unsigned pages = RING_PAGES_MIN;
		while (pages < RING_PAGES_MAX && (uint64_t)pages * page < want)
			pages *= 2;
		return pages;
	}
	int kb = 516, ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
	read_int_file("/proc/sys/kernel/perf_event_mlock_kb", &kb);
	unsigned pages = 1;
	while ((pages * 2 + 1) * (unsigned)ncpu * 4 <= (unsigned)kb && pages < RING_PAGES_MIN)
		pages *= 2;
	return pages;
}

/* Off-CPU samples a ring holds by default (root): a switch flood (50k/s) fills it in ~10 ms per CPU, and what the
 * reader is too late for is lost from this ring only, counted (sampler_off_cpu_lost()). */
#define OFF_CPU_RING_SAMPLES 512

static unsigned default_off_cpu_ring_pages(const struct sampler_options *o)
{
	uint32_t stack = o->off_cpu_stack_size ? o->off_cpu_stack_size : o->stack_size;
	return default_ring_pages(stack, OFF_CPU_RING_SAMPLES);
}

/* Samples of the largest copy a thread-copy ring holds by default (root): 8 MiB, woken half full, a wakeup per
 * ~60 samples of the threads that have one; but no more than a second's worth at the sampler's frequency (the
 * threads of one CPU make at most that many), 2 MiB at the least: the daemon's 19 Hz needs no 8 MiB per CPU. */
#define THREAD_RING_SAMPLES 128
#define THREAD_RING_MIN_SAMPLES 16	/* fewer: no thread copies (sampler_open_thread_copy()) */

static unsigned thread_ring_samples(const struct sampler_options *o)
{
	return o->freq_hz < THREAD_RING_SAMPLES ? o->freq_hz : THREAD_RING_SAMPLES;
}

static void raise_fd_limit(void)
{
	/* -p on a process with many threads opens threads x CPUs events. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int sampler_new(const struct sampler_options *o, struct sampler **out)
{
	uint32_t type;
	uint64_t config;
	struct sampler *s;

	if (o->stack_size == 0 || o->stack_size % 8 || o->stack_size > SAMPLER_MAX_STACK ||
	    o->off_cpu_stack_size % 8 || o->off_cpu_stack_size > SAMPLER_MAX_STACK)
		return -EINVAL;
	if (sampler_parse_event(o->event, &type, &config) < 0)
		return -ENOENT;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->opts = *o;
	if (!s->opts.ring_pages)
		s->opts.ring_pages = default_ring_pages(o->stack_size, RING_SAMPLES);
	if (!s->opts.off_cpu_ring_pages)
		s->opts.off_cpu_ring_pages = default_off_cpu_ring_pages(o);
	s->ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	s->nrings = s->nall = o->off_cpu ? 2 * s->ncpus : s->ncpus;
	s->rings = calloc((size_t)(s->nrings + s->ncpus), sizeof(*s->rings));
	s->scratch = malloc(SCRATCH_SIZE);
	if (!s->rings || !s->scratch) {
		sampler_free(s);
		return -ENOMEM;
	}
	for (int i = 0; i < s->nrings + s->ncpus; i++) {
		bool off_cpu = i >= s->ncpus && i < s->nrings;
		s->rings[i].fd = -1;
		s->rings[i].lost = off_cpu ? &s->off_cpu_lost : NULL;
		s->rings[i].origin = (struct record_origin){ .layout = &s->layout,
							    .kind = off_cpu ? RECORD_OFF_CPU : RECORD_CPU,
							    .thread_copy = i >= s->nrings };
	}
	s->thread_ring_pages = default_ring_pages(SAMPLER_MAX_STACK, thread_ring_samples(o));
	snprintf(s->event_name, sizeof(s->event_name), "%s", o->event);
	build_attr(s, type, config);
	raise_fd_limit();
	*out = s;
	return 0;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	for (int i = 0; s->rings && i < s->nall; i++) {
		if (s->rings[i].meta)
			munmap(s->rings[i].meta, (s->rings[i].size + (uint64_t)getpagesize()));
		if (s->rings[i].fd >= 0)
			close(s->rings[i].fd);
	}
	for (unsigned i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	free(s->fds);
	free(s->fd_tids);
	free(s->rings);
	free(s->pollfds);
	free(s->scratch);
	free(s);
}

/* Room for n more descriptors in s->fds. */
static int reserve_fds(struct sampler *s, unsigned n)
{
	if (s->nfds + n <= s->capfds)
		return 0;
	unsigned cap = s->capfds ? s->capfds : 16;
	while (cap < s->nfds + n)
		cap *= 2;
	int *fds = realloc(s->fds, cap * sizeof(*fds));
	if (fds)
		s->fds = fds;
	pid_t *tids = fds ? realloc(s->fd_tids, cap * sizeof(*tids)) : NULL;
	if (!tids)
		return -ENOMEM;
	s->fd_tids = tids;
	s->capfds = cap;
	return 0;
}

/* fd into s->fds (room reserved): a thread copy's event on tid, or 0. */
static void add_fd(struct sampler *s, int fd, pid_t tid)
{
	s->fd_tids[s->nfds] = tid;
	s->fds[s->nfds++] = fd;
}

static int remember_fd(struct sampler *s, int fd)
{
	int err = reserve_fds(s, 1);
	if (err == 0)
		add_fd(s, fd, 0);
	return err;
}

/* Map a ring on fd, of *pages data pages, halving them while the kernel refuses (mlock budget): later rings of
 * the kind start from what worked. */
static int ring_map(struct sampler *s, struct ring *r, int fd, unsigned *pages_io)
{
	long page = getpagesize();
	for (unsigned pages = *pages_io; pages >= 1; pages /= 2) {
		size_t len = (size_t)(pages + 1) * (size_t)page;
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			r->fd = fd;
			r->meta = m;
			r->data = (uint8_t *)m + page;
			r->size = (uint64_t)pages * (uint64_t)page;
			*pages_io = pages;
			return 0;
		}
		if (errno != EPERM && errno != ENOMEM)
			break;
	}
	snprintf(s->error, sizeof(s->error),
		 "cannot map the perf ring buffer: %s (raise kernel.perf_event_mlock_kb or run as root)",
		 strerror(errno));
	return -errno;
}

static int online_cpu(int cpu);

/*
 * A ring that holds few samples (an unprivileged user's share of perf_event_mlock_kb: ~7 samples of a 16 KiB
 * copy) wakes the reader a quarter full, at least a sample in, instead of half full: half of such a ring is
 * ~3 ms of room at 999 Hz, which a reader on a loaded machine overruns, and a full ring wakes no one (the
 * kernel writes nothing more into it) until the caller's drain timer. 0: the kernel's half.
 */
#define RING_SMALL_SAMPLES 32

static uint32_t small_ring_watermark(const struct sampler *s)
{
	uint64_t ring = (uint64_t)s->opts.ring_pages * (uint64_t)getpagesize(), sample = s->opts.stack_size + 1024u;
	if (ring >= RING_SMALL_SAMPLES * sample)
		return 0;
	return (uint32_t)(ring / 4 > sample ? ring / 4 : sample);
}

/*
 * One ring per online CPU, each held by a dummy event on this thread (never enabled, never sampling) in the
 * sampler's clock: sampling events write into it through PERF_EVENT_IOC_SET_OUTPUT, which the kernel allows
 * between events of one CPU. The holder outlives any profiled task, so its descriptor can be polled for the
 * whole run. Its watermark decides when a batched ring wakes the reader: 0 lets the kernel take half of the
 * ring as mapped (halved, if the mlock budget refused the size asked for).
 */
/* A holder on this thread for cpu, whose buffer becomes ring r (wakeup_watermark 0: half of it). */
static int make_ring(struct sampler *s, int cpu, struct ring *r, uint32_t wakeup_watermark, unsigned *pages)
{
	struct perf_event_attr h = { .size = sizeof(h), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_DUMMY,
				     .disabled = 1, .exclude_kernel = 1, .exclude_hv = 1, .watermark = 1,
				     .wakeup_watermark = wakeup_watermark, .use_clockid = 1,
				     .clockid = s->attr.clockid };
	long fd = perf_event_open(&h, 0, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		snprintf(s->error, sizeof(s->error), "perf_event_open(ring holder): %s", strerror(errno));
		return -errno;
	}
	int err = ring_map(s, r, (int)fd, pages);
	if (err < 0)
		close((int)fd);
	return err;
}

static int make_rings(struct sampler *s)
{
	s->rings_made = 1;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (!online_cpu(cpu))
			continue;
		int err = make_ring(s, cpu, &s->rings[cpu], small_ring_watermark(s), &s->opts.ring_pages);
		/* Off-CPU events write into rings of their own (sampler.h): a flood of switches fills those. */
		if (!err && s->opts.off_cpu)
			err = make_ring(s, cpu, &s->rings[s->ncpus + cpu], 0, &s->opts.off_cpu_ring_pages);
		if (err < 0)
			return err;
	}
	return 0;
}

static int attach_to_ring(struct sampler *s, int ring, int fd)
{
	int cpu = ring % s->ncpus;
	struct ring *r = &s->rings[ring];
	if (r->fd < 0) {
		snprintf(s->error, sizeof(s->error), "no ring buffer for CPU %d (it came online after the start)", cpu);
		return -ENODEV;
	}
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) < 0) {
		snprintf(s->error, sizeof(s->error), "PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

static int paranoid_level(void)
{
	int level = 2;
	read_int_file("/proc/sys/kernel/perf_event_paranoid", &level);
	return level;
}

static void explain_open_error(struct sampler *s, int err, pid_t pid)
{
	if (err == EACCES || err == EPERM) {
		snprintf(s->error, sizeof(s->error),
			 "perf_event_open: permission denied (kernel.perf_event_paranoid is %d; "
			 "profiling %s needs root or kernel.perf_event_paranoid <= %d)",
			 paranoid_level(), pid < 0 ? "the whole system" : "this process",
			 pid < 0 ? 0 : 2);
	} else if (err == ESRCH) {
		snprintf(s->error, sizeof(s->error), "perf_event_open: no such process %d", (int)pid);
	} else if (err == EMFILE) {
		snprintf(s->error, sizeof(s->error), "perf_event_open: too many open files (raise ulimit -n)");
	} else {
		snprintf(s->error, sizeof(s->error), "perf_event_open(%s): %s", s->event_name, strerror(err));
	}
}

/*
 * The first open decides the attr: a hardware event the machine lacks falls back to cpu-clock, and kernel
 * sampling that is not permitted falls back to user-only sampling. Both are noted for the user.
 */
static int open_settling(struct sampler *s, pid_t pid, int cpu)
{
	for (;;) {
		long fd = perf_event_open(&s->attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd >= 0) {
			s->attr_settled = 1;
			return (int)fd;
		}
		int err = errno;
		if (s->attr.type == PERF_TYPE_HARDWARE && (err == ENOENT || err == EOPNOTSUPP || err == ENODEV)) {
			snprintf(s->note, sizeof(s->note),
				 "event '%s' is not supported on this machine (%s); falling back to cpu-clock",
				 s->event_name, strerror(err));
			snprintf(s->event_name, sizeof(s->event_name), "cpu-clock");
			s->attr.type = PERF_TYPE_SOFTWARE;
			s->attr.config = PERF_COUNT_SW_CPU_CLOCK;
			continue;
		}
		if ((err == EACCES || err == EPERM) && !s->attr.exclude_kernel) {
			snprintf(s->note, sizeof(s->note),
				 "kernel sampling not permitted (kernel.perf_event_paranoid is %d): user-space samples only",
				 paranoid_level());
			s->opts.kernel = 0;
			s->attr.exclude_kernel = 1;
			s->attr.exclude_callchain_kernel = 1;
			if (!s->opts.fp_chain)
				s->attr.sample_type &= ~(uint64_t)PERF_SAMPLE_CALLCHAIN;
			s->layout.sample_type = s->attr.sample_type;
			continue;
		}
		return -err;
	}
}

/*
 * The off-CPU event beside the sampling event attr: a sample at every switch, with switch records. The kernel
 * takes the sample with its own registers (in the scheduler): exclude_kernel would drop every one (sampler.h).
 * Records only: a dummy event that asks for the switch records alone.
 */
static void off_cpu_attr(const struct sampler *s, struct perf_event_attr *a)
{
	*a = s->attr;
	a->type = PERF_TYPE_SOFTWARE;
	a->config = s->off_cpu_records_only ? PERF_COUNT_SW_DUMMY : PERF_COUNT_SW_CONTEXT_SWITCHES;
	a->freq = 0;
	a->sample_period = 1;
	a->exclude_kernel = s->off_cpu_records_only;
	a->exclude_callchain_kernel = s->attr.exclude_kernel;	/* kernel frames only where CPU samples have them */
	a->mmap = a->mmap2 = a->comm = a->comm_exec = a->task = 0;	/* the sampling event has those */
	a->context_switch = 1;
	a->sample_stack_user = s->opts.off_cpu_stack_size ? s->opts.off_cpu_stack_size : s->opts.stack_size;
}

/* The first off-CPU open refused for want of kernel sampling: switch records only from then on, noted. */
static int off_cpu_records_only(struct sampler *s, int err)
{
	if ((err != EACCES && err != EPERM) || s->off_cpu_records_only)
		return 0;
	s->off_cpu_records_only = 1;
	size_t len = strlen(s->note);
	snprintf(s->note + len, sizeof(s->note) - len,
		 "%soff-CPU: switch records without samples (the kernel takes switch-out samples in kernel mode, "
		 "which kernel.perf_event_paranoid %d refuses this user): stacks are read as threads wait",
		 len ? "; " : "", paranoid_level());
	return 1;
}

static int open_off_cpu(struct sampler *s, pid_t pid, int cpu)
{
	struct perf_event_attr a;
	long fd;
	for (;;) {
		off_cpu_attr(s, &a);
		if ((fd = perf_event_open(&a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC)) >= 0)
			break;
		int err = errno;
		if (off_cpu_records_only(s, err))
			continue;
		if (err == ESRCH)
			explain_open_error(s, err, pid);
		else
			snprintf(s->error, sizeof(s->error), "perf_event_open(off-CPU, context-switches): %s",
				 strerror(err));
		return -err;
	}
	int err = remember_fd(s, (int)fd);
	if (err < 0) {
		close((int)fd);
		return err;
	}
	return attach_to_ring(s, s->ncpus + cpu, (int)fd);
}

static int open_one(struct sampler *s, pid_t pid, int cpu)
{
	int fd;
	if (!s->rings_made && (fd = make_rings(s)) < 0)
		return fd;
	if (!s->attr_settled) {
		fd = open_settling(s, pid, cpu);
	} else {
		long r = perf_event_open(&s->attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		fd = r >= 0 ? (int)r : -errno;
	}
	if (fd < 0) {
		explain_open_error(s, -fd, pid);
		return fd;
	}
	int err = remember_fd(s, fd);
	if (err < 0) {
		close(fd);
		return err;
	}
	if ((err = attach_to_ring(s, cpu, fd)) < 0 || !s->opts.off_cpu)
		return err;
	return open_off_cpu(s, pid, cpu);
}

static int online_cpu(int cpu)
{
	char path[64];
	int online = 1;
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	read_int_file(path, &online); /* cpu0 often has no such file: it is always online */
	return online;
}

int sampler_open_system(struct sampler *s)
{
	int opened = 0, err = 0;
	s->attr.inherit = 0;
	s->attr.inherit_thread = 0;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (!online_cpu(cpu))
			continue;
		err = open_one(s, -1, cpu);
		if (err < 0)
			return err;
		opened++;
	}
	return opened ? 0 : -ENODEV;
}

int sampler_open_task(struct sampler *s, pid_t tid, int inherit, int enable_on_exec)
{
	int err = 0;
	s->attr.inherit = inherit != SAMPLER_INHERIT_NONE;
	s->attr.inherit_thread = inherit == SAMPLER_INHERIT_THREADS;
	s->attr.enable_on_exec = enable_on_exec ? 1 : 0;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (!online_cpu(cpu))
			continue;
		err = open_one(s, tid, cpu);
		if (err == -EINVAL && inherit == SAMPLER_INHERIT_THREADS) {
			snprintf(s->error, sizeof(s->error), "perf_event_open: this kernel cannot follow threads "
				 "without child processes (inherit_thread needs Linux 5.13)");
			return -EOPNOTSUPP;
		}
		if (err < 0)
			return err;
	}
	return 0;
}

/* The thread-copy rings, made at the first thread copy: one per online CPU, woken half full like the CPU rings.
 * nall covers them from the start, so that sampler_free() unmaps any made before a failure. */
static int make_thread_rings(struct sampler *s)
{
	s->nall = s->nrings + s->ncpus;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		int err = online_cpu(cpu) ? make_ring(s, cpu, &s->rings[s->nrings + cpu], 0, &s->thread_ring_pages) : 0;
		if (err < 0)
			return err;
	}
	return 0;
}

/* The sampling event's attr for a thread copy of tid: no inheritance, no side-band records, its own copy size. */
static void thread_copy_attr(const struct sampler *s, uint32_t stack_size, struct perf_event_attr *a)
{
	*a = s->attr;
	a->inherit = a->inherit_thread = a->enable_on_exec = 0;
	a->mmap = a->mmap2 = a->comm = a->comm_exec = a->task = 0;
	a->sample_stack_user = stack_size;
	a->disabled = s->stopped;
}

int sampler_open_thread_copy(struct sampler *s, pid_t tid, uint32_t stack_size)
{
	int fds[s->ncpus > 0 ? s->ncpus : 1], n = 0, err = 0;
	struct perf_event_attr a;
	if (!s->attr_settled || stack_size == 0 || stack_size % 8 || stack_size > SAMPLER_MAX_STACK)
		return -EINVAL;
	/* An unprivileged user's share of perf_event_mlock_kb holds a sample or two of such a copy: a wakeup per
	 * sample, and samples lost in a full ring. */
	uint64_t ring_bytes = (uint64_t)s->thread_ring_pages * (uint64_t)getpagesize();
	if (ring_bytes < THREAD_RING_MIN_SAMPLES * (stack_size + 1024ull)) {
		snprintf(s->error, sizeof(s->error), "a ring of %llu KiB (kernel.perf_event_mlock_kb) holds too few "
			 "samples of a %u-byte stack copy", (unsigned long long)(ring_bytes >> 10), stack_size);
		return -ENOSPC;
	}
	if (s->nall == s->nrings && (err = make_thread_rings(s)) < 0)
		return err;
	thread_copy_attr(s, stack_size, &a);
	for (int cpu = 0; cpu < s->ncpus && err == 0; cpu++) {
		if (!online_cpu(cpu))
			continue;
		long fd = perf_event_open(&a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			explain_open_error(s, errno, tid);
			break;
		}
		fds[n++] = (int)fd;
		err = attach_to_ring(s, s->nrings + cpu, (int)fd);
	}
	if (err == 0 && (err = reserve_fds(s, (unsigned)n)) == 0) {
		for (int i = 0; i < n; i++)
			add_fd(s, fds[i], tid);
		return 0;
	}
	for (int i = 0; i < n; i++)	/* all or none: a thread copy on some CPUs only would lose samples */
		close(fds[i]);
	return err;
}

unsigned sampler_close_exited(struct sampler *s)
{
	struct pollfd p[256];
	unsigned kept = 0, closed = 0;
	for (unsigned i = 0, n; i < s->nfds; i += n) {
		n = s->nfds - i < 256 ? s->nfds - i : 256;
		for (unsigned j = 0; j < n; j++)
			p[j] = (struct pollfd){ .fd = s->fds[i + j], .events = POLLIN };
		if (poll(p, n, 0) < 0)
			for (unsigned j = 0; j < n; j++)
				p[j].revents = 0;	/* nothing known: all kept */
		for (unsigned j = 0; j < n; j++) {
			if (p[j].revents & POLLHUP) {
				close(p[j].fd);
				closed++;
			} else {	/* kept <= i + j: nothing unread is overwritten */
				s->fd_tids[kept] = s->fd_tids[i + j];
				s->fds[kept++] = p[j].fd;
			}
		}
	}
	s->nfds = kept;
	return closed;
}

unsigned sampler_close_thread_copy(struct sampler *s, pid_t tid)
{
	unsigned kept = 0, closed = 0;
	for (unsigned i = 0; i < s->nfds; i++) {
		if (tid > 0 && s->fd_tids[i] == tid) {
			close(s->fds[i]);
			closed++;
			continue;
		}
		s->fd_tids[kept] = s->fd_tids[i];
		s->fds[kept++] = s->fds[i];
	}
	s->nfds = kept;
	return closed;
}

static int ioctl_all(struct sampler *s, unsigned long request)
{
	for (unsigned i = 0; i < s->nfds; i++) {
		if (ioctl(s->fds[i], request, 0) < 0) {
			snprintf(s->error, sizeof(s->error), "perf ioctl: %s", strerror(errno));
			return -errno;
		}
	}
	return 0;
}

int sampler_enable(struct sampler *s)
{
	s->stopped = 0;
	return ioctl_all(s, PERF_EVENT_IOC_ENABLE);
}

int sampler_disable(struct sampler *s)
{
	s->stopped = 1;
	return ioctl_all(s, PERF_EVENT_IOC_DISABLE);
}

/* Copy len bytes from ring position pos, which may wrap the end of the ring, into dst. */
static void ring_copy(const struct ring *r, uint64_t pos, void *dst, size_t len)
{
	uint64_t off = pos & (r->size - 1), first = r->size - off;
	if (first >= len) {
		memcpy(dst, r->data + off, len);
		return;
	}
	memcpy(dst, r->data + off, first);
	memcpy((uint8_t *)dst + first, r->data, len - first);
}

static void ring_begin(struct ring *r)
{
	r->head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	r->tail = r->meta->data_tail;
}

/* An off-CPU ring's loss record: counted apart (sampler_off_cpu_lost()), not delivered, so that the caller's
 * count of lost samples stays that of CPU samples. 1 if h was one. */
static int count_off_cpu_lost(struct ring *r, const struct perf_event_header *h)
{
	struct perf_lost l;
	uint64_t n;
	if (h->type == PERF_RECORD_LOST && perf_decode_lost(h, &l) == 0)
		__atomic_fetch_add(r->lost, l.lost, __ATOMIC_RELAXED);
	else if (h->type == PERF_RECORD_LOST_SAMPLES && perf_decode_lost_samples(h, &n) == 0)
		__atomic_fetch_add(r->lost, n, __ATOMIC_RELAXED);
	else
		return 0;
	return 1;
}

/*
 * Deliver the record at r->tail (a record that wraps the end of the ring is copied to scratch first), then hand
 * its space back to the kernel. Returns fn's result (nonzero: stop), or -1 for a corrupt ring, whose records are
 * skipped rather than looped over forever.
 */
static int ring_deliver(struct ring *r, uint8_t *scratch, record_fn fn, void *ctx)
{
	uint64_t off = r->tail & (r->size - 1);
	const struct perf_event_header *h = (const void *)(r->data + off);	/* 8-aligned: never wraps */
	uint16_t size = h->size;
	int stop = -1;
	if (size >= sizeof(*h) && size <= r->head - r->tail) {
		if (off + size > r->size) {
			ring_copy(r, r->tail, scratch, size);
			h = (const void *)scratch;
		}
		stop = r->lost && count_off_cpu_lost(r, h) ? 0 : fn(ctx, h, &r->origin);
		r->tail += size;
	} else {
		r->tail = r->head;
	}
	__atomic_store_n(&r->meta->data_tail, r->tail, __ATOMIC_RELEASE);
	return stop;
}

/* Deliver every complete record of one ring. */
static int ring_drain(struct ring *r, uint8_t *scratch, record_fn fn, void *ctx)
{
	int delivered = 0, stop = 0;
	ring_begin(r);
	while (r->tail < r->head && !stop) {
		if ((stop = ring_deliver(r, scratch, fn, ctx)) < 0)
			break;
		delivered++;
	}
	return delivered;
}

/* The time of r's next record, UINT64_MAX when it has none left; a record without a time sorts first. */
static void ring_peek(struct ring *r, const struct perf_layout *l)
{
	struct perf_event_header h;
	int off = -1;
	r->next_time = UINT64_MAX;
	if (r->tail >= r->head)
		return;
	ring_copy(r, r->tail, &h, sizeof(h));
	if (h.size >= sizeof(h) && h.size <= r->head - r->tail)
		off = perf_record_time_offset(l, h.type, h.size);
	r->next_time = 0;
	if (off >= 0)
		ring_copy(r, r->tail + (uint64_t)off, &r->next_time, sizeof(r->next_time));
}

static int build_pollfds(struct sampler *s, const struct pollfd *extra, unsigned nextra, nfds_t *n)
{
	unsigned want = (unsigned)s->nall + nextra;
	if (want > s->cap_pollfds) {
		struct pollfd *p = realloc(s->pollfds, want * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->pollfds = p;
		s->cap_pollfds = want;
	}
	*n = 0;
	for (int i = 0; i < s->nall; i++) {
		if (s->rings[i].fd < 0)
			continue;
		s->pollfds[*n] = (struct pollfd){ .fd = s->rings[i].fd, .events = POLLIN };
		(*n)++;
	}
	for (unsigned i = 0; i < nextra; i++) {
		s->pollfds[*n] = extra[i];
		s->pollfds[*n].revents = 0;
		(*n)++;
	}
	return 0;
}

int sampler_wait(struct sampler *s, int timeout_ms, struct pollfd *extra, unsigned nextra)
{
	nfds_t n;
	int err = build_pollfds(s, extra, nextra, &n);
	if (err < 0)
		return err;
	if (poll(s->pollfds, n, timeout_ms) < 0)
		return errno == EINTR ? 0 : -errno;
	int woke = 0;
	for (nfds_t i = 0; i < n - nextra; i++)
		woke |= s->pollfds[i].revents != 0;
	for (unsigned i = 0; i < nextra; i++)
		extra[i].revents = s->pollfds[n - nextra + i].revents;
	return woke;
}

/* The ring whose next record is the oldest, NULL when every ring is drained. */
static struct ring *oldest_ring(struct sampler *s)
{
	struct ring *oldest = NULL;
	for (int i = 0; i < s->nall; i++) {
		struct ring *r = &s->rings[i];
		if (r->meta && r->tail < r->head && (!oldest || r->next_time < oldest->next_time))
			oldest = r;
	}
	return oldest;
}

/*
 * The rings merged in time order, as far as each held records when the drain began. A batch holds hundreds of
 * records per CPU: drained ring after ring, a process's exec (COMM) or mmap on one CPU would be handled after
 * its samples on another, which would then carry the name it had before the exec.
 */
int sampler_drain(struct sampler *s, record_fn fn, void *ctx)
{
	int total = 0, stop = 0;
	struct ring *r;
	/* The thread-copy rings last: a sample there that came before a record of the CPU rings (its thread's
	 * exit) was written before it, so it is in this drain if that record is. */
	for (int i = 0; i < s->nall; i++) {
		if (s->rings[i].meta) {
			ring_begin(&s->rings[i]);
			ring_peek(&s->rings[i], &s->layout);
		}
	}
	while (!stop && (r = oldest_ring(s))) {
		if ((stop = ring_deliver(r, s->scratch, fn, ctx)) >= 0)
			total++;
		else
			stop = 0;
		ring_peek(r, &s->layout);
	}
	return total;
}

int sampler_read(struct sampler *s, int timeout_ms, record_fn fn, void *ctx)
{
	if (timeout_ms > 0) {
		int err = sampler_wait(s, timeout_ms, NULL, 0);
		if (err < 0)
			return err;
	}
	return sampler_drain(s, fn, ctx);
}

static int source_drain(void *impl, record_fn fn, void *ctx)
{
	return sampler_drain(impl, fn, ctx);
}

static int source_wait(void *impl, int timeout_ms, struct pollfd *extra, unsigned n)
{
	return sampler_wait(impl, timeout_ms, extra, n);
}

static void source_stop(void *impl)
{
	sampler_disable(impl);
}

void sampler_source(struct sampler *s, struct record_source *out)
{
	*out = (struct record_source){ .impl = s, .drain = source_drain, .wait = source_wait, .stop = source_stop };
}

int sampler_ncpus(const struct sampler *s)
{
	return s->ncpus;
}

int sampler_nrings(const struct sampler *s)
{
	return s->nrings;
}

int sampler_ring_fd(const struct sampler *s, int ring)
{
	return ring >= 0 && ring < s->nrings ? s->rings[ring].fd : -1;
}

int sampler_drain_ring(struct sampler *s, int ring, uint8_t *scratch, record_fn fn, void *ctx)
{
	if (ring < 0 || ring >= s->nrings || !s->rings[ring].meta)
		return 0;
	return ring_drain(&s->rings[ring], scratch, fn, ctx);
}

uint64_t sampler_off_cpu_lost(const struct sampler *s)
{
	return __atomic_load_n(&s->off_cpu_lost, __ATOMIC_RELAXED);
}

const struct perf_layout *sampler_layout(const struct sampler *s)
{
	return &s->layout;
}

const char *sampler_event(const struct sampler *s)
{
	return s->event_name;
}

int sampler_kernel_enabled(const struct sampler *s)
{
	return !s->attr.exclude_kernel;
}

void sampler_get_options(const struct sampler *s, struct sampler_options *out)
{
	*out = s->opts;
	out->event = s->event_name;
	out->kernel = !s->attr.exclude_kernel;
}

const char *sampler_error(const struct sampler *s)
{
	return s->error;
}

const char *sampler_note(const struct sampler *s)
{
	return s->note;
}

uint64_t sampler_ring_bytes(const struct sampler *s)
{
	for (int i = 0; i < s->ncpus; i++)
		if (s->rings[i].meta)
			return s->rings[i].size;
	return 0;
}

int sampler_off_cpu_samples(const struct sampler *s)
{
	return s->opts.off_cpu && !s->off_cpu_records_only;
}

unsigned sampler_nevents(const struct sampler *s)
{
	return s->nfds;
}
