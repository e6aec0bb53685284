/*
 * gostack.c — the goroutine behind a sample taken on a Go g0 stack. See gostack.h for the contract.
 */
#include "src/gostack.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* Offsets in the Go runtime's g and m (amd64). */
#define G_STACK_LO 0
#define G_STACK_HI 8
#define G_M 48
#define G_SCHED_SP 56
#define G_SCHED_PC 64
/* g.atomicstatus: after g.sched and four words until Go 1.22, five since Go 1.23 (syscallbp). */
#define G_STATUS_OLD 144
#define G_STATUS_NEW 152
#define G_HEAD 160		/* bytes of g read: up to and including atomicstatus in either layout */
#define G_RUNNING 2
#define G_SYSCALL 3
#define G_COPYSTACK 8
#define G_SCAN 0x1000
#define M_G0 0
#define M_HEAD 200		/* bytes of m read: up to and including m.curg in the 7-field layout */
/* No goroutine stack is larger than Go's default maximum (1 GB); no runtime pointer is below 64 KiB. */
#define GO_STACK_MAX (1ull << 30)
#define GO_MIN_ADDR 0x10000ull

/* The two gobuf sizes Go has had: the offset of sched.bp in g and of curg in m for each. */
static const struct go_layout {
	uint32_t sched_bp, m_curg;
} go_layouts[] = {
	{ G_SCHED_SP + 48, 192 },	/* gobuf {sp, pc, g, ctxt, ret, lr, bp} */
	{ G_SCHED_SP + 40, 184 },	/* gobuf without one of its middle fields */
};

struct gostack {
	size_t max_stack;
	uint8_t *buf;
	struct gostack_stats stats;
};

struct gostack *gostack_new(size_t max_stack)
{
	struct gostack *gs = calloc(1, sizeof(*gs));
	if (!gs)
		return NULL;
	gs->max_stack = max_stack;
	gs->buf = malloc(max_stack ? max_stack : 1);
	if (!gs->buf) {
		free(gs);
		return NULL;
	}
	return gs;
}

void gostack_free(struct gostack *gs)
{
	if (!gs)
		return;
	free(gs->buf);
	free(gs);
}

void gostack_get_stats(const struct gostack *gs, struct gostack_stats *out)
{
	*out = gs->stats;
}

/* Read len bytes at addr of pid; 0 or -EIO (also for a short read). */
static int mem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	return n == (ssize_t)len ? 0 : -EIO;
}

static uint64_t word_at(const uint8_t *base, uint32_t off)
{
	uint64_t v;
	memcpy(&v, base + off, sizeof(v));
	return v;
}

static bool plausible_pointer(uint64_t p)
{
	return p >= GO_MIN_ADDR && p < (1ull << 47) && (p & 7) == 0;
}

/* The goroutine m is running for, given the g register (g0 or that goroutine itself); 0 if none checks out. */
static uint64_t find_curg(const uint8_t *m_head, uint64_t g_reg, const struct go_layout *l)
{
	uint64_t g0 = word_at(m_head, M_G0), curg = word_at(m_head, l->m_curg);
	if (!plausible_pointer(curg) || curg == g0)
		return 0;
	return g_reg == g0 || g_reg == curg ? curg : 0;
}

/*
 * The status of m's current goroutine, whose g head is g_head: atomicstatus is where a running goroutine's status
 * (running, in a system call, copying its stack; perhaps with the GC's scan bit) is found. 0 if neither place.
 */
static uint32_t running_status(const uint8_t *g_head)
{
	static const uint32_t offsets[] = { G_STATUS_OLD, G_STATUS_NEW };
	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		uint32_t st;
		memcpy(&st, g_head + offsets[i], sizeof(st));
		st &= ~(uint32_t)G_SCAN;
		if (st == G_RUNNING || st == G_SYSCALL || st == G_COPYSTACK)
			return st;
	}
	return 0;
}

/* The goroutine's saved context under layout l; -ESRCH when it does not check out. */
static int read_sched(pid_t pid, uint64_t curg, uint64_t m, const struct go_layout *l, uint8_t *g_head,
		      struct gostack_context *out, uint64_t *hi)
{
	if (mem_read(pid, curg, g_head, G_HEAD) < 0)
		return -EIO;
	uint64_t lo = word_at(g_head, G_STACK_LO);
	*hi = word_at(g_head, G_STACK_HI);
	out->sp = word_at(g_head, G_SCHED_SP);
	out->pc = word_at(g_head, G_SCHED_PC);
	out->bp = word_at(g_head, l->sched_bp);
	if (word_at(g_head, G_M) != m || lo >= *hi || *hi - lo > GO_STACK_MAX)
		return -ESRCH;
	/* gogo clears sched.sp when it resumes the goroutine: it has gone back to its own stack. */
	if (out->sp == 0)
		return -ESTALE;
	if (out->sp < lo || out->sp >= *hi || out->pc == 0)
		return -ESRCH;
	return 0;
}

static int count(struct gostack *gs, int rc)
{
	if (rc == 0)
		gs->stats.followed++;
	else if (rc == -ESTALE)
		gs->stats.stale++;
	else if (rc == -EIO)
		gs->stats.unreadable++;
	else
		gs->stats.no_goroutine++;
	return rc;
}

/*
 * Whether the saved context is the one from the switch the sample saw. The frame pointer saved at the switch is
 * the one the unwinder recovered from the sample: same switch (or one at the very same frame, whose callers are
 * the same). Else, a goroutine still copying its stack is still in the stack growth that was sampled — its
 * context moved to the new stack, so its frame pointer changed with it — unless it grew again within the
 * moments between sample and read, which a doubling of its stack makes unlikely.
 */
static bool same_switch(const uint8_t *g_head, const struct gostack_context *ctx, uint64_t switch_bp)
{
	return ctx->bp == switch_bp || running_status(g_head) == G_COPYSTACK;
}

/* Read the goroutine's stack from its saved SP, then make sure its context did not change meanwhile. */
static int read_stack(struct gostack *gs, pid_t pid, uint64_t curg, uint64_t hi, struct gostack_context *out)
{
	uint64_t again[2];
	size_t size = hi - out->sp < gs->max_stack ? (size_t)(hi - out->sp) : gs->max_stack;
	if (mem_read(pid, out->sp, gs->buf, size) < 0 || mem_read(pid, curg + G_SCHED_SP, again, sizeof(again)) < 0)
		return -EIO;
	if (again[0] != out->sp || again[1] != out->pc)
		return -ESTALE;
	out->stack = gs->buf;
	out->size = size;
	return 0;
}

int gostack_read(struct gostack *gs, pid_t pid, uint64_t g_reg, uint64_t switch_bp, struct gostack_context *out)
{
	uint8_t g_head[G_HEAD], m_head[M_HEAD];
	if (!plausible_pointer(g_reg))
		return count(gs, -ESRCH);
	if (mem_read(pid, g_reg, g_head, G_HEAD) < 0)
		return count(gs, -EIO);
	uint64_t m = word_at(g_head, G_M);
	if (!plausible_pointer(m))
		return count(gs, -ESRCH);
	if (mem_read(pid, m, m_head, M_HEAD) < 0)
		return count(gs, -EIO);
	int rc = -ESRCH;
	for (size_t i = 0; i < sizeof(go_layouts) / sizeof(go_layouts[0]) && rc == -ESRCH; i++) {
		const struct go_layout *l = &go_layouts[i];
		uint64_t curg = find_curg(m_head, g_reg, l), hi;
		if (!curg)
			continue;
		/* Twice: copystack may move the goroutine to its new stack while we read. */
		for (int attempt = 0; attempt < 2; attempt++) {
			rc = read_sched(pid, curg, m, l, g_head, out, &hi);
			if (rc == 0 && !same_switch(g_head, out, switch_bp))
				rc = -ESTALE;
			if (rc == 0)
				rc = read_stack(gs, pid, curg, hi, out);
			if (rc != -ESTALE)
				break;
		}
	}
	return count(gs, rc);
}
