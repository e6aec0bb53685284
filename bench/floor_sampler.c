/*
 * floor_sampler — the sampling floor for make bench: the least a profiler can spend on the samples hostprof asks
 * for. It runs a command and opens on it the events hostprof opens in command mode (the same perf_event_attr:
 * cpu-clock, frequency, per CPU, inherited, registers, stack copy, the kernel's frame-pointer chain, mmap, comm
 * and task records), written into one ring per CPU held by a dummy event as hostprof's are, woken half full. It
 * reads every record and discards it, until the command exits; then it prints what it saw and its own CPU time.
 *
 *   floor_sampler [-F HZ] [-s STACK_BYTES] -- COMMAND [ARG...]
 *
 * -s 0 asks for no stack copy at all (no PERF_SAMPLE_STACK_USER). Exit status: the command's, or 2 when the
 * events cannot be opened. Output on stderr:
 *   floor_sampler: N samples, L lost, R records, W wakeups, sampler CPU C s, command CPU D s
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../unwind/unwind.h"	/* UNWIND_SAMPLE_REGS_MASK: the registers hostprof asks for */

#define MAX_CPUS 256

struct ring {
	int fd;
	struct perf_event_mmap_page *meta;
	size_t data_size;
};

struct floor_ctx {
	struct ring rings[MAX_CPUS];
	int ncpus;
	uint64_t samples, lost, records, wakeups;
};

static long perf_open(struct perf_event_attr *a, pid_t pid, int cpu)
{
	return syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* hostprof's attr (src/sampling/sampler.c build_attr, command mode, default options). */
static void build_attr(struct perf_event_attr *a, unsigned hz, unsigned stack)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->freq = 1;
	a->sample_freq = hz;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
			 PERF_SAMPLE_REGS_USER | PERF_SAMPLE_CALLCHAIN;
	if (stack)
		a->sample_type |= PERF_SAMPLE_STACK_USER;
	a->sample_regs_user = UNWIND_SAMPLE_REGS_MASK;
	a->sample_stack_user = stack;
	a->exclude_hv = 1;
	a->mmap = 1;
	a->mmap2 = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->sample_id_all = 1;
	a->disabled = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->watermark = 1;	/* the ring's holder's watermark wakes the reader */
	a->inherit = 1;
	a->enable_on_exec = 1;
}

/* hostprof's ring size as root: room for 200 samples of the copy plus 1 KiB, 2 to 8 MiB. */
static unsigned ring_pages(unsigned stack)
{
	uint64_t want = 200ull * (stack + 1024u), page = (uint64_t)getpagesize();
	unsigned pages = 512;
	while (pages < 2048 && (uint64_t)pages * page < want)
		pages *= 2;
	return pages;
}

static int make_ring(struct ring *r, int cpu, unsigned pages)
{
	struct perf_event_attr h = { .size = sizeof(h), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_DUMMY,
				     .disabled = 1, .exclude_kernel = 1, .exclude_hv = 1, .watermark = 1,
				     .use_clockid = 1, .clockid = CLOCK_MONOTONIC };
	r->fd = (int)perf_open(&h, 0, cpu);
	if (r->fd < 0)
		return -errno;
	size_t page = (size_t)getpagesize();
	void *m = mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	r->meta = m;
	r->data_size = pages * page;
	return 0;
}

/* Reads and discards every record of a ring: each header is looked at, nothing else. */
static void drain(struct floor_ctx *c, struct ring *r)
{
	if (!r->meta)
		return;	/* an offline CPU's */
	uint64_t head = atomic_load_explicit((_Atomic uint64_t *)&r->meta->data_head, memory_order_acquire);
	uint64_t tail = r->meta->data_tail;
	const uint8_t *data = (const uint8_t *)r->meta + r->meta->data_offset;
	while (tail < head) {
		struct perf_event_header hdr;
		size_t off = tail % r->data_size, first = r->data_size - off;
		if (first >= sizeof(hdr)) {
			memcpy(&hdr, data + off, sizeof(hdr));
		} else {
			memcpy(&hdr, data + off, first);
			memcpy((uint8_t *)&hdr + first, data, sizeof(hdr) - first);
		}
		if (hdr.size < sizeof(hdr))
			break;	/* cannot happen with a sane kernel: give up this drain rather than spin */
		c->records++;
		if (hdr.type == PERF_RECORD_SAMPLE)
			c->samples++;
		else if (hdr.type == PERF_RECORD_LOST) {
			uint64_t n = 0;	/* id, lost: the count is the second word after the header */
			size_t at = (off + sizeof(hdr) + 8) % r->data_size;
			if (at + 8 <= r->data_size)
				memcpy(&n, data + at, 8);
			c->lost += n;
		}
		tail += hdr.size;
	}
	atomic_store_explicit((_Atomic uint64_t *)&r->meta->data_tail, head, memory_order_release);
}

static double cpu_seconds(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* As hostprof: a CPU that is offline gets no ring and no event (cpu0 often has no online file: always online). */
static int online(int cpu)
{
	char path[64];
	int on = 1;
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &on) != 1)
			on = 1;
		fclose(f);
	}
	return on;
}

/* Opens the sampling events on pid, one per CPU, each writing into that CPU's ring. */
static int open_events(struct floor_ctx *c, pid_t pid, unsigned hz, unsigned stack)
{
	struct perf_event_attr a;
	build_attr(&a, hz, stack);
	unsigned pages = ring_pages(stack);
	for (int cpu = 0; cpu < c->ncpus; cpu++) {
		c->rings[cpu].fd = -1;
		if (!online(cpu))
			continue;
		int err = make_ring(&c->rings[cpu], cpu, pages);
		if (err < 0) {
			fprintf(stderr, "floor_sampler: ring for CPU %d: %s\n", cpu, strerror(-err));
			return err;
		}
		long fd = perf_open(&a, pid, cpu);
		if (fd < 0 && (errno == EACCES || errno == EPERM)) {
			a.exclude_kernel = 1;	/* as hostprof does without the right to kernel samples */
			fd = perf_open(&a, pid, cpu);
		}
		if (fd < 0 || ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, c->rings[cpu].fd) < 0) {
			fprintf(stderr, "floor_sampler: perf_event_open on CPU %d: %s\n", cpu, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* Polls the rings and the command's pidfd until the command exits; returns its wait status. */
static int run_loop(struct floor_ctx *c, pid_t pid)
{
	struct pollfd p[MAX_CPUS + 1];
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), status = 0;
	for (int i = 0; i < c->ncpus; i++)
		p[i] = (struct pollfd){ .fd = c->rings[i].fd, .events = POLLIN };
	p[c->ncpus] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
	for (;;) {
		/* Without a pidfd (Linux < 5.3) the command's exit is found by a 100 ms timeout. */
		int n = poll(p, (nfds_t)c->ncpus + (pidfd >= 0), pidfd >= 0 ? -1 : 100);
		if (n < 0 && errno != EINTR)
			break;
		c->wakeups++;
		for (int i = 0; i < c->ncpus; i++)
			drain(c, &c->rings[i]);
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
	}
	for (int i = 0; i < c->ncpus; i++)
		drain(c, &c->rings[i]);
	return status;
}

int main(int argc, char **argv)
{
	unsigned hz = 999, stack = 16384;
	int opt;
	while ((opt = getopt(argc, argv, "+F:s:")) != -1) {
		if (opt == 'F')
			hz = (unsigned)strtoul(optarg, NULL, 10);
		else if (opt == 's')
			stack = (unsigned)strtoul(optarg, NULL, 10);
		else
			return 2;
	}
	if (optind >= argc || hz == 0 || stack % 8 || stack > 65528) {
		fprintf(stderr, "usage: floor_sampler [-F HZ] [-s STACK_BYTES (a multiple of 8, <= 65528)] -- COMMAND [ARG...]\n");
		return 2;
	}
	static struct floor_ctx c;
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	c.ncpus = ncpus > MAX_CPUS ? MAX_CPUS : (int)ncpus;
	int go[2];
	if (pipe2(go, O_CLOEXEC) < 0)
		return 2;
	pid_t pid = fork();
	if (pid == 0) {	/* the command: waits for the events, then execs (enable_on_exec starts them there) */
		char b;
		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			_exit(127);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "floor_sampler: cannot run %s: %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	close(go[0]);
	if (pid < 0 || open_events(&c, pid, hz, stack) < 0) {
		if (pid > 0)
			kill(pid, SIGKILL);
		return 2;
	}
	if (write(go[1], "x", 1) != 1)
		return 2;
	close(go[1]);
	int status = run_loop(&c, pid);
	fprintf(stderr, "floor_sampler: %llu samples, %llu lost, %llu records, %llu wakeups, sampler CPU %.3f s, "
		"command CPU %.3f s\n", (unsigned long long)c.samples, (unsigned long long)c.lost,
		(unsigned long long)c.records, (unsigned long long)c.wakeups, cpu_seconds(RUSAGE_SELF),
		cpu_seconds(RUSAGE_CHILDREN));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
