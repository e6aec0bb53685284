/*
 * sampler.c — perf_event setup and ring-buffer reading. See sampler.h for the contract.
 */
#include "src/sampler.h"

#include <errno.h>
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

#define SCRATCH_SIZE 65536 /* a perf record's size is a u16 */

struct ring {
	int fd;			/* the event whose buffer this is; -1 until the first event on the CPU */
	struct perf_event_mmap_page *meta;
	uint8_t *data;
	uint64_t size;		/* bytes of data, a power of two */
};

struct sampler {
	struct sampler_options opts;
	struct perf_event_attr attr;
	struct perf_layout layout;
	int ncpus;
	struct ring *rings;	/* one per CPU */
	int *fds;
	unsigned nfds, capfds;
	struct pollfd *pollfds;
	uint8_t *scratch;	/* a record that wraps the end of a ring is copied here */
	char event_name[32];
	char error[256];
	char note[256];
	int attr_settled;	/* the first successful open fixed the attr (event, kernel) */
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
	a->mmap = 1; /* the kernel emits no mmap events at all unless some event sets mmap */
	a->mmap2 = 1;  /* ... and then writes them in the MMAP2 layout */
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->sample_id_all = 1;
	a->disabled = 1;
	/* Sample times on CLOCK_MONOTONIC: comparable with hostprof's own clock (APM read latency, timelines). */
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->watermark = 1;
	a->wakeup_watermark = 0; /* set once the ring size is known */

	s->layout.sample_type = a->sample_type;
	s->layout.regs_mask = a->sample_regs_user;
	s->layout.sample_id_all = 1;
}

static unsigned default_ring_pages(void)
{
	/* Unprivileged users share perf_event_mlock_kb (516 KiB by default) across CPUs; root is not limited.
	 * 16 KiB stacks at ~1 kHz are ~16 MiB/s per CPU: 2 MiB rings drained every 50 ms keep up. */
	if (geteuid() == 0)
		return 512;
	int kb = 516, ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
	read_int_file("/proc/sys/kernel/perf_event_mlock_kb", &kb);
	unsigned pages = 1;
	while ((pages * 2 + 1) * (unsigned)ncpu * 4 <= (unsigned)kb && pages < 512)
		pages *= 2;
	return pages;
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

struct sampler *sampler_new(const struct sampler_options *o, int *err)
{
	uint32_t type;
	uint64_t config;
	struct sampler *s;

	if (o->stack_size == 0 || o->stack_size % 8 || o->stack_size > SAMPLER_MAX_STACK) {
		*err = -EINVAL;
		return NULL;
	}
	if (sampler_parse_event(o->event, &type, &config) < 0) {
		*err = -ENOENT;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	s->opts = *o;
	if (!s->opts.ring_pages)
		s->opts.ring_pages = default_ring_pages();
	s->ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	s->rings = calloc((size_t)s->ncpus, sizeof(*s->rings));
	s->scratch = malloc(SCRATCH_SIZE);
	if (!s->rings || !s->scratch) {
		sampler_free(s);
		*err = -ENOMEM;
		return NULL;
	}
	for (int i = 0; i < s->ncpus; i++)
		s->rings[i].fd = -1;
	snprintf(s->event_name, sizeof(s->event_name), "%s", o->event);
	build_attr(s, type, config);
	raise_fd_limit();
	return s;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	for (int i = 0; s->rings && i < s->ncpus; i++) {
		if (s->rings[i].meta)
			munmap(s->rings[i].meta, (s->rings[i].size + (uint64_t)getpagesize()));
	}
	for (unsigned i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	free(s->fds);
	free(s->rings);
	free(s->pollfds);
	free(s->scratch);
	free(s);
}

static int remember_fd(struct sampler *s, int fd)
{
	if (s->nfds == s->capfds) {
		unsigned cap = s->capfds ? s->capfds * 2 : 16;
		int *fds = realloc(s->fds, cap * sizeof(*fds));
		if (!fds)
			return -ENOMEM;
		s->fds = fds;
		s->capfds = cap;
	}
	s->fds[s->nfds++] = fd;
	return 0;
}

/* Map the ring of cpu on fd, halving its size while the kernel refuses (mlock budget). */
static int ring_map(struct sampler *s, struct ring *r, int fd)
{
	long page = getpagesize();
	for (unsigned pages = s->opts.ring_pages; pages >= 1; pages /= 2) {
		size_t len = (size_t)(pages + 1) * (size_t)page;
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			r->fd = fd;
			r->meta = m;
			r->data = (uint8_t *)m + page;
			r->size = (uint64_t)pages * (uint64_t)page;
			s->opts.ring_pages = pages; /* later CPUs start from what worked */
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

static int attach_to_ring(struct sampler *s, int cpu, int fd)
{
	struct ring *r = &s->rings[cpu];
	if (r->fd < 0)
		return ring_map(s, r, fd);
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

static int open_one(struct sampler *s, pid_t pid, int cpu)
{
	int fd;
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
	return attach_to_ring(s, cpu, fd);
}

static void set_wakeup(struct sampler *s)
{
	if (s->opts.low_latency) {
		s->attr.watermark = 0;
		s->attr.wakeup_events = 1;
		return;
	}
	/* Wake the reader when a quarter of the ring is full: early enough that a burst fits. */
	s->attr.wakeup_watermark = (uint32_t)((uint64_t)s->opts.ring_pages * (uint64_t)getpagesize() / 4);
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
	set_wakeup(s);
	s->attr.inherit = 0;
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
	set_wakeup(s);
	s->attr.inherit = inherit ? 1 : 0;
	s->attr.enable_on_exec = enable_on_exec ? 1 : 0;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (!online_cpu(cpu))
			continue;
		err = open_one(s, tid, cpu);
		if (err < 0)
			return err;
	}
	return 0;
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
	return ioctl_all(s, PERF_EVENT_IOC_ENABLE);
}

int sampler_disable(struct sampler *s)
{
	return ioctl_all(s, PERF_EVENT_IOC_DISABLE);
}

/* Deliver every complete record of one ring, then hand the space back to the kernel. */
static int ring_drain(struct sampler *s, struct ring *r, sampler_record_fn fn, void *ctx)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	uint64_t mask = r->size - 1;
	int delivered = 0, stop = 0;

	while (tail < head && !stop) {
		uint64_t off = tail & mask;
		const struct perf_event_header *h = (const void *)(r->data + off);
		uint16_t size = h->size;
		if (size < sizeof(*h) || size > head - tail) {
			tail = head; /* corrupt ring: skip what is there rather than loop forever */
			break;
		}
		if (off + size > r->size) {
			uint64_t first = r->size - off;
			memcpy(s->scratch, r->data + off, first);
			memcpy(s->scratch + first, r->data, size - first);
			h = (const void *)s->scratch;
		}
		stop = fn(ctx, h);
		tail += size;
		delivered++;
	}
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
	return delivered;
}

static int build_pollfds(struct sampler *s, nfds_t *n)
{
	if (!s->pollfds) {
		s->pollfds = calloc((size_t)s->ncpus, sizeof(*s->pollfds));
		if (!s->pollfds)
			return -ENOMEM;
	}
	*n = 0;
	for (int i = 0; i < s->ncpus; i++) {
		if (s->rings[i].fd < 0)
			continue;
		s->pollfds[*n].fd = s->rings[i].fd;
		s->pollfds[*n].events = POLLIN;
		(*n)++;
	}
	return 0;
}

int sampler_read(struct sampler *s, int timeout_ms, sampler_record_fn fn, void *ctx)
{
	nfds_t n;
	int err = build_pollfds(s, &n), total = 0;
	if (err < 0)
		return err;
	if (timeout_ms > 0 && poll(s->pollfds, n, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	for (int i = 0; i < s->ncpus; i++) {
		if (s->rings[i].meta)
			total += ring_drain(s, &s->rings[i], fn, ctx);
	}
	return total;
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

const char *sampler_error(const struct sampler *s)
{
	return s->error;
}

const char *sampler_note(const struct sampler *s)
{
	return s->note;
}
