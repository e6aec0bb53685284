/*
 * go_stack.c — Go stack following over injected memory reads. See go_stack.h for the contract.
 */
#include "unwind/go_stack.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

struct go_stack {
	struct go_stack_options o;
	size_t max_stack;
	uint8_t *buf;		/* the goroutine's stack as read (handed out in go_stack_context) */
	uint8_t *old;		/* stack growth: the old stack (handed out), and buf the new one it is checked against */
	uint64_t join_slot;	/* the stack word a join hands over: a grower's return address */
	uint8_t *code;		/* a function's code as read (GO_STACK_CALLER_CODE_MAX bytes) */
	csh cs;			/* its decoder, opened on first use (cs_state) */
	cs_insn *insn;
	int cs_state;		/* 0 not opened yet, 1 open, -1 failed */
	struct go_stack_stats stats;
};

/* Stack growth, as newstack's and copystack's frames on g0 recorded it (see go_stack_read). */
struct go_growth {
	uint64_t caller_sp, caller_pc;	/* morebuf: SP and return address of the grower's caller (old stack) */
	uint64_t grower;		/* the entry of the function that needed more stack */
	uint64_t old_lo, old_hi, delta;	/* adjustinfo: the old stack, and new.hi - old.hi */
};

/* Candidate morebufs checked against the live process at most, per adjustinfo: each costs a read. */
#define GROWTH_MAX_CANDIDATES 8
/* Most bytes between a caller's SP and its frame pointer that a morebuf candidate may have. */
#define MOREBUF_MAX_FRAME (1u << 20)
/* adjustinfo-shaped records tried at most, per sample (copystack keeps the old bounds twice: old and adjinfo). */
#define GROWTH_MAX_RECORDS 4
/* Outermost bytes of the old stack the new one must still hold for the old one to be trusted. */
#define GROWTH_WITNESS 2048
/* Smallest stack Go allocates; x86-64 direct call: E8 and a 32-bit displacement. */
#define GO_MIN_STACK 2048
#define CALL_REL32 0xe8
#define CALL_REL32_LEN 5

int go_stack_new(const struct go_stack_options *o, struct go_stack **out)
{
	struct go_stack *gs = calloc(1, sizeof(*gs));
	if (!gs)
		return -ENOMEM;
	gs->o = *o;
	gs->max_stack = o->max_stack;
	gs->buf = malloc(gs->max_stack ? gs->max_stack : 1);
	gs->old = malloc(gs->max_stack ? gs->max_stack : 1);
	gs->code = malloc(GO_STACK_CALLER_CODE_MAX);
	if (!gs->buf || !gs->old || !gs->code) {
		go_stack_free(gs);
		return -ENOMEM;
	}
	*out = gs;
	return 0;
}

void go_stack_free(struct go_stack *gs)
{
	if (!gs)
		return;
	if (gs->cs_state == 1) {
		cs_free(gs->insn, 1);
		cs_close(&gs->cs);
	}
	free(gs->buf);
	free(gs->old);
	free(gs->code);
	free(gs);
}

void go_stack_get_stats(const struct go_stack *gs, struct go_stack_stats *out)
{
	*out = gs->stats;
}

/* Read len bytes at addr through the caller's reader; 0 or -EIO (whatever the reader said, and a short read). */
static int mem_read(const struct unwind_memory *mem, uint64_t addr, void *buf, size_t len)
{
	return unwind_memory_read_exact(mem, addr, buf, len) == 0 ? 0 : -EIO;
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
static int read_sched(const struct unwind_memory *mem, uint64_t curg, uint64_t m, const struct go_layout *l,
		      uint8_t *g_head, struct go_stack_context *out, uint64_t *hi)
{
	if (mem_read(mem, curg, g_head, G_HEAD) < 0)
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

static int count(struct go_stack *gs, int rc, bool grown)
{
	if (rc == 0) {
		gs->stats.followed++;
		gs->stats.grown += grown;
	} else if (rc == -ESTALE)
		gs->stats.stale++;
	else if (rc == -EIO)
		gs->stats.unreadable++;
	else
		gs->stats.no_goroutine++;
	return rc;
}

bool go_stack_g0_names(const struct go_stack_g0 *g0, uint64_t g)
{
	for (size_t off = 0; off + 8 <= g0->size; off += 8)
		if (word_at(g0->bytes, (uint32_t)off) == g)
			return true;
	return false;
}

/*
 * Whether the saved context of goroutine curg is the one from the switch the sample saw. The frame pointer saved
 * at the switch is the one the unwinder recovered from the sample: same switch (or one at the very same frame,
 * whose callers are the same). Else, for a stack-growth sample only (g0 given), a goroutine still copying its
 * stack is still in the growth that was sampled — its context moved to the new stack, so its frame pointer
 * changed with it — if the sample's g0 frames name it: on one thread, another goroutine may be growing its
 * stack by the time the sample is handled. A systemstack or cgo sample never takes a goroutine by its status:
 * the one now on the thread may be any other.
 */
static bool same_switch(const uint8_t *g_head, uint64_t curg, const struct go_stack_context *ctx, uint64_t switch_bp,
			const struct go_stack_g0 *g0)
{
	if (switch_bp && ctx->bp == switch_bp)
		return true;
	return g0 && running_status(g_head) == G_COPYSTACK && go_stack_g0_names(g0, curg);
}

/* Read the goroutine's stack from its saved SP, then make sure its context did not change meanwhile. */
static int read_stack(struct go_stack *gs, const struct unwind_memory *mem, uint64_t curg, uint64_t hi,
		      struct go_stack_context *out)
{
	uint64_t again[2];
	size_t size = hi - out->sp < gs->max_stack ? (size_t)(hi - out->sp) : gs->max_stack;
	if (mem_read(mem, out->sp, gs->buf, size) < 0 || mem_read(mem, curg + G_SCHED_SP, again, sizeof(again)) < 0)
		return -EIO;
	if (again[0] != out->sp || again[1] != out->pc)
		return -ESTALE;
	out->stack = gs->buf;
	out->size = size;
	return 0;
}

/* Read the g at g and its m (heads only); 0, -ESRCH when they are not plausible, -EIO. */
static int read_g_and_m(const struct unwind_memory *mem, uint64_t g, uint8_t *g_head, uint8_t *m_head, uint64_t *m)
{
	if (!plausible_pointer(g))
		return -ESRCH;
	if (mem_read(mem, g, g_head, G_HEAD) < 0)
		return -EIO;
	*m = word_at(g_head, G_M);
	if (!plausible_pointer(*m))
		return -ESRCH;
	return mem_read(mem, *m, m_head, M_HEAD) < 0 ? -EIO : 0;
}

/* The context g.sched saved at the switch, while the goroutine is still off its stack. */
static int read_switched(struct go_stack *gs, const struct unwind_memory *mem, uint64_t g_reg, uint64_t switch_bp,
			 const struct go_stack_g0 *g0, struct go_stack_context *out)
{
	uint8_t g_head[G_HEAD], m_head[M_HEAD];
	uint64_t m;
	int rc = read_g_and_m(mem, g_reg, g_head, m_head, &m);
	if (rc < 0)
		return rc;
	rc = -ESRCH;
	for (size_t i = 0; i < sizeof(go_layouts) / sizeof(go_layouts[0]) && rc == -ESRCH; i++) {
		const struct go_layout *l = &go_layouts[i];
		uint64_t curg = find_curg(m_head, g_reg, l), hi;
		if (!curg)
			continue;
		/* Twice: copystack may move the goroutine to its new stack while we read. */
		for (int attempt = 0; attempt < 2; attempt++) {
			rc = read_sched(mem, curg, m, l, g_head, out, &hi);
			if (rc == 0 && !same_switch(g_head, curg, out, switch_bp, g0))
				rc = -ESTALE;
			if (rc == 0)
				rc = read_stack(gs, mem, curg, hi, out);
			if (rc != -ESTALE)
				break;
		}
	}
	return rc;
}

/*
 * copystack's adjustinfo in the g0 copy, by its shape: {old.lo, old.hi, delta}, the old stack a power of two in
 * size, clear of the new one, holding switch_bp (when known: Go >= 1.23's morestack clears BP before it calls
 * newstack). Searched from *off on; *off is left past the match, for the next search.
 */
static bool find_adjustinfo(const struct go_stack_g0 *g0, uint64_t switch_bp, size_t *off, struct go_growth *gr)
{
	for (; *off + 24 <= g0->size; *off += 8) {
		uint64_t lo = word_at(g0->bytes, (uint32_t)*off), hi = word_at(g0->bytes, (uint32_t)*off + 8);
		uint64_t size = hi - lo;
		if (lo >= hi || size < GO_MIN_STACK || size > GO_STACK_MAX || (size & (size - 1)) ||
		    (switch_bp && (switch_bp < lo || switch_bp >= hi)))
			continue;
		/* The new stack, twice as large or more, does not overlap the old one. */
		uint64_t delta = word_at(g0->bytes, (uint32_t)*off + 16);
		uint64_t distance = (int64_t)delta < 0 ? -delta : delta;
		if (distance < size || !plausible_pointer(hi + delta))
			continue;
		gr->old_lo = lo;
		gr->old_hi = hi;
		gr->delta = delta;
		*off += 8;
		return true;
	}
	return false;
}

/* The target of the direct call that returns to caller_pc, read from the process, or else from the program's file
 * (rules->code_at, rules may be NULL): the function that needed more stack, or that switched to g0. */
static int call_target(const struct unwind_memory *mem, const struct go_stack_rules *rules, uint64_t caller_pc,
		       uint64_t *entry)
{
	uint8_t call[CALL_REL32_LEN];
	int32_t rel;
	if (caller_pc < GO_MIN_ADDR)
		return -EIO;
	if (mem_read(mem, caller_pc - CALL_REL32_LEN, call, sizeof(call)) < 0 &&
	    !(rules && rules->code_at && rules->code_at(rules->ctx, caller_pc - CALL_REL32_LEN, call, sizeof(call))))
		return -EIO;
	if (call[0] != CALL_REL32)
		return -ESRCH;
	memcpy(&rel, call + 1, sizeof(rel));
	*entry = caller_pc + (uint64_t)(int64_t)rel;
	return 0;
}

/*
 * newstack's copy of m.morebuf in the g0 copy: {sp, pc, g} with sp in the old stack, below switch_bp if known
 * (the caller's frame pointer sits above its SP), g a pointer, pc returning from a direct call (whose target
 * is the function that grew) and still in the old stack's slot just below sp. Whether the goroutine still runs
 * does not matter: it may have exited by now; what its stacks hold is checked after.
 */
static bool find_morebuf(const struct unwind_memory *mem, const struct go_stack_g0 *g0, uint64_t switch_bp,
			 struct go_growth *gr)
{
	unsigned checked = 0;
	for (size_t off = 0; off + 24 <= g0->size && checked < GROWTH_MAX_CANDIDATES; off += 8) {
		uint64_t sp = word_at(g0->bytes, (uint32_t)off), pc = word_at(g0->bytes, (uint32_t)off + 8);
		uint64_t g = word_at(g0->bytes, (uint32_t)off + 16);
		if (sp < gr->old_lo || sp >= gr->old_hi || (switch_bp && sp > switch_bp) || (sp & 7) || pc < GO_MIN_ADDR ||
		    !plausible_pointer(g))
			continue;
		checked++;
		uint64_t slot;
		if (mem_read(mem, sp - 8, &slot, sizeof(slot)) == 0 && slot == pc &&
		    call_target(mem, NULL, pc, &gr->grower) == 0) {
			gr->caller_sp = sp;
			gr->caller_pc = pc;
			return true;
		}
	}
	return false;
}

/*
 * How many bytes at the end (the outermost frames) the old and the new stack agree on, word for word but for
 * pointers into the old stack, which copystack moved by delta.
 */
static size_t agreeing_tail(const uint8_t *old, const uint8_t *cur, size_t len, const struct go_growth *gr)
{
	size_t tail = 0;
	for (size_t off = len & ~(size_t)7; off >= 8; off -= 8, tail += 8) {
		uint64_t o = word_at(old, (uint32_t)(off - 8)), n = word_at(cur, (uint32_t)(off - 8));
		if (n != o && !(o >= gr->old_lo && o < gr->old_hi && n == o + gr->delta))
			break;
	}
	return tail;
}

/* The old stack of growth gr, when both its ends check out (see go_stack.h). */
static int read_old_stack(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
			  const struct go_growth *gr, struct go_stack_context *out)
{
	/* From the grower's return-address slot, just below its caller's SP, to the old stack's end. */
	uint64_t from = gr->caller_sp - 8, len = gr->old_hi - from;
	if (len > gs->max_stack)
		return -ESRCH;
	/* The outermost bytes first: most old stacks are reused by the time a batch is read, and reading both stacks
	 * whole for them was most of a Go program's walking time in batches. */
	size_t witness = len < GROWTH_WITNESS ? (size_t)len : GROWTH_WITNESS, at = (size_t)len - witness;
	if (mem_read(mem, from + at, gs->old + at, witness) < 0 ||
	    mem_read(mem, from + at + gr->delta, gs->buf, witness) < 0)
		return -EIO;
	if (agreeing_tail(gs->old + at, gs->buf, witness, gr) < witness)
		return -ESTALE;
	if (at && mem_read(mem, from, gs->old, at) < 0)
		return -EIO;
	if (word_at(gs->old, 0) != gr->caller_pc)
		return -ESTALE;
	out->pc = gr->grower;
	out->sp = from;
	out->bp = switch_bp;
	out->stack = gs->old;
	out->size = len;
	return 0;
}

/* The stack-growth case of go_stack_read (see go_stack.h): each adjustinfo-shaped record in turn. */
static int read_grown(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
		      const struct go_stack_g0 *g0, struct go_stack_context *out)
{
	struct go_growth gr;
	size_t off = 0;
	int rc = -ESRCH;
	memset(&gr, 0, sizeof(gr));
	for (unsigned tries = 0; rc != 0 && tries < GROWTH_MAX_RECORDS && find_adjustinfo(g0, switch_bp, &off, &gr);
	     tries++) {
		if (find_morebuf(mem, g0, switch_bp, &gr))
			rc = read_old_stack(gs, mem, switch_bp, &gr, out);
	}
	return rc;
}

/* newstack's copy of m.morebuf in a g0 copy: {sp, pc, g}, the caller's SP at most 1 MiB below its frame pointer. */
struct morebuf {
	uint64_t sp, pc, g;
};

/* The words at off in g0, when they have the shape of a morebuf under switch_bp. */
static bool morebuf_at(const struct go_stack_g0 *g0, size_t off, uint64_t switch_bp, struct morebuf *mb)
{
	mb->sp = word_at(g0->bytes, (uint32_t)off);
	mb->pc = word_at(g0->bytes, (uint32_t)off + 8);
	mb->g = word_at(g0->bytes, (uint32_t)off + 16);
	return plausible_pointer(mb->sp) && mb->sp <= switch_bp && switch_bp - mb->sp <= MOREBUF_MAX_FRAME &&
	       mb->pc >= GO_MIN_ADDR && plausible_pointer(mb->g);
}

/*
 * Without a g register (Go < 1.17), the goroutine of a stack growth: morebuf.g in newstack's frame, nearest the
 * top of the g0 copy (newstack's frame is the outermost there). read_switched checks g as thoroughly as one from
 * the g register.
 */
static int read_switched_via_morebuf(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
				     const struct go_stack_g0 *g0, struct go_stack_context *out)
{
	unsigned checked = 0;
	if (!switch_bp || g0->size < 24)
		return -ESRCH;
	for (size_t off = (g0->size - 24) & ~(size_t)7; checked < GROWTH_MAX_CANDIDATES; off -= 8) {
		struct morebuf mb;
		if (morebuf_at(g0, off, switch_bp, &mb)) {
			checked++;
			/* A candidate that is no g (unreadable, or not its m's) is not the one; a g found stale is. */
			int got = read_switched(gs, mem, mb.g, switch_bp, g0, out);
			if (got == 0 || got == -ESTALE)
				return got;
		}
		if (off == 0)
			break;
	}
	return -ESRCH;
}

int go_stack_read(struct go_stack *gs, const struct unwind_memory *mem, uint64_t g_reg, uint64_t switch_bp,
		  const struct go_stack_g0 *g0, struct go_stack_context *out)
{
	int rc = read_switched(gs, mem, g_reg, switch_bp, g0, out);
	if (rc == -ESRCH && g0)
		rc = read_switched_via_morebuf(gs, mem, switch_bp, g0, out);
	if ((rc == -ESTALE || rc == -ESRCH) && g0 && read_grown(gs, mem, switch_bp, g0, out) == 0)
		return count(gs, 0, true);
	return count(gs, rc, false);
}

/* Candidate morebufs whose caller is checked, per sample: each check is a rule lookup, a candidate also a read. */
#define GROWER_MAX_CANDIDATES 32
/* Bytes of goroutine stack below a frame pointer searched for a systemstack caller's return address: more than
 * any frame that calls systemstack in the Go runtime; a smaller window when that much is not readable. */
#define SWITCH_CALLER_WINDOW 4096
#define SWITCH_CALLER_WINDOW_MIN 512

int go_stack_find_grower(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
			 const struct go_stack_g0 *g0, const struct go_stack_rules *rules, struct go_stack_caller *out)
{
	unsigned checked = 0;
	int rc = -ESRCH;
	if (!switch_bp || !g0 || g0->size < 24)
		return -ESRCH;
	for (size_t off = 0; off + 24 <= g0->size && checked < GROWER_MAX_CANDIDATES; off += 8) {
		struct morebuf mb;
		if (!morebuf_at(g0, off, switch_bp, &mb))
			continue;
		checked++;
		if (!rules->caller_keeps_fp(rules->ctx, mb.sp, mb.pc, switch_bp))
			continue;
		rc = call_target(mem, rules, mb.pc, &out->callee);
		if (rc == 0) {
			out->pc = mb.pc;
			out->sp = mb.sp;
			gs->stats.growers++;
			return 0;
		}
	}
	return rc;
}

int go_stack_find_switch_caller(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
				const struct go_stack_rules *rules, struct go_stack_caller *out)
{
	size_t len = SWITCH_CALLER_WINDOW;
	if (!plausible_pointer(switch_bp) || switch_bp < GO_MIN_ADDR + len || len > gs->max_stack)
		return -ESRCH;
	int rc = mem_read(mem, switch_bp - len, gs->buf, len);
	if (rc < 0) {
		len = SWITCH_CALLER_WINDOW_MIN;
		rc = mem_read(mem, switch_bp - len, gs->buf, len);
	}
	if (rc < 0)
		return rc;
	rc = -ESRCH;
	/* From the frame pointer down: the caller's own frame lies between its SP and its frame pointer. */
	for (size_t off = len - 8;; off -= 8) {
		uint64_t pc = word_at(gs->buf, (uint32_t)off), sp = switch_bp - len + off + 8;
		if (pc >= GO_MIN_ADDR && rules->caller_keeps_fp(rules->ctx, sp, pc, switch_bp)) {
			uint64_t callee;
			rc = call_target(mem, rules, pc, &callee);
			if (rc == 0 && rules->is_switch_entry(rules->ctx, callee)) {
				*out = (struct go_stack_caller){ .pc = pc, .sp = sp, .callee = callee };
				gs->stats.switch_callers++;
				return 0;
			}
		}
		if (off == 0)
			break;
	}
	return rc == -EIO ? rc : -ESRCH;
}

/* Bytes of code read from the process at a time while a function's end is not found. */
#define CODE_CHUNK 4096

static bool open_decoder(struct go_stack *gs)
{
	if (gs->cs_state == 0) {
		gs->cs_state = -1;
		if (cs_open(CS_ARCH_X86, CS_MODE_64, &gs->cs) == CS_ERR_OK) {
			if ((gs->insn = cs_malloc(gs->cs)))
				gs->cs_state = 1;
			else
				cs_close(&gs->cs);
		}
	}
	return gs->cs_state == 1;
}

/* The function at entry's code, read piece after piece up to its INT3 padding (*len bytes, ending with it), or
 * -ESRCH past GO_STACK_CALLER_CODE_MAX or at bytes that do not decode, -EIO. */
static int read_function(struct go_stack *gs, const struct unwind_memory *mem, uint64_t entry, size_t *len)
{
	size_t have = 0, at = 0;
	while (have < GO_STACK_CALLER_CODE_MAX) {
		if (mem_read(mem, entry + have, gs->code + have, CODE_CHUNK) < 0)
			return -EIO;
		have += CODE_CHUNK;
		/* Whole instructions only: one may run on into the next piece (15 bytes at most). */
		const uint8_t *p = gs->code + at;
		size_t left = have - at - (have < GO_STACK_CALLER_CODE_MAX ? 15 : 0);
		uint64_t addr = entry + at;
		while (cs_disasm_iter(gs->cs, &p, &left, &addr, gs->insn)) {
			at = (size_t)(p - gs->code);
			if (gs->insn->id == X86_INS_INT3) {
				*len = at;
				return 0;
			}
		}
		if (left >= 15 || have >= GO_STACK_CALLER_CODE_MAX)
			return -ESRCH;	/* not code, or a function longer than we decode */
	}
	return -ESRCH;
}

/* The return address of the one direct call to a g0-switching function in the *len bytes of code at entry. */
static int only_switch_call(struct go_stack *gs, uint64_t entry, size_t len, const struct go_stack_rules *rules,
			    uint64_t *ret)
{
	const uint8_t *p = gs->code;
	uint64_t addr = entry;
	unsigned calls = 0;
	while (cs_disasm_iter(gs->cs, &p, &len, &addr, gs->insn)) {
		int32_t rel;
		if (gs->insn->size != CALL_REL32_LEN || gs->insn->bytes[0] != CALL_REL32)
			continue;
		memcpy(&rel, gs->insn->bytes + 1, sizeof(rel));
		if (rules->is_switch_entry(rules->ctx, addr + (uint64_t)(int64_t)rel)) {
			*ret = addr;	/* addr is past the call now */
			calls++;
		}
	}
	return calls == 1 ? 0 : -ESRCH;
}

int go_stack_find_switch_caller_in_code(struct go_stack *gs, const struct unwind_memory *mem, uint64_t switch_bp,
					uint64_t after_switch, const struct go_stack_rules *rules,
					struct go_stack_caller *out)
{
	uint64_t entry, pc = 0, sp;
	size_t len;
	if (!rules->caller_sp || !plausible_pointer(switch_bp) || after_switch < GO_MIN_ADDR || !open_decoder(gs))
		return -ESRCH;
	int rc = call_target(mem, rules, after_switch, &entry);
	if (rc == 0)
		rc = read_function(gs, mem, entry, &len);
	if (rc == 0)
		rc = only_switch_call(gs, entry, len, rules, &pc);
	if (rc < 0)
		return rc;
	if (!rules->caller_sp(rules->ctx, pc, switch_bp, &sp) || !rules->caller_keeps_fp(rules->ctx, sp, pc, switch_bp) ||
	    call_target(mem, rules, pc, &out->callee) < 0)
		return -ESRCH;
	out->pc = pc;
	out->sp = sp;
	gs->stats.switch_callers++;
	gs->stats.switch_callers_in_code++;
	return 0;
}

/* On g0: the goroutine m switched from, read in full (the reader holds the thread: no staleness check). */
static int snapshot_goroutine(struct go_stack *gs, const struct unwind_memory *mem, uint64_t g_reg, uint64_t m,
			      const uint8_t *m_head, struct go_stack_snapshot *out)
{
	uint8_t g_head[G_HEAD];
	struct go_stack_context ctx;
	int rc = -ESRCH;
	for (size_t i = 0; i < sizeof(go_layouts) / sizeof(go_layouts[0]) && rc == -ESRCH; i++) {
		uint64_t curg = find_curg(m_head, g_reg, &go_layouts[i]), hi;
		if (curg && (rc = read_sched(mem, curg, m, &go_layouts[i], g_head, &ctx, &hi)) == 0) {
			size_t size = hi - ctx.sp < gs->max_stack ? (size_t)(hi - ctx.sp) : gs->max_stack;
			if (mem_read(mem, ctx.sp, gs->buf, size) < 0)
				return -EIO;
			*out = (struct go_stack_snapshot){ .kind = GO_STACK_SNAPSHOT_GOROUTINE, .g = curg, .pc = ctx.pc,
							  .sp = ctx.sp, .bp = ctx.bp, .addr = ctx.sp, .bytes = gs->buf,
							  .size = size };
		}
	}
	/* No goroutine behind g0 (the scheduler's own work) is nothing to read, not an error. */
	return rc == -ESRCH || rc == -ESTALE ? 0 : rc;
}

int go_stack_snapshot(struct go_stack *gs, const struct unwind_memory *mem, uint64_t g_reg, uint64_t copy_end,
		      struct go_stack_snapshot *out)
{
	uint64_t lo, hi;
	uint8_t g_head[G_HEAD], m_head[M_HEAD];
	uint64_t m;
	memset(out, 0, sizeof(*out));
	int rc = read_g_and_m(mem, g_reg, g_head, m_head, &m);
	if (rc < 0)
		return rc;
	if (word_at(m_head, M_G0) == g_reg)
		return snapshot_goroutine(gs, mem, g_reg, m, m_head, out);
	lo = word_at(g_head, G_STACK_LO);
	hi = word_at(g_head, G_STACK_HI);
	bool curg = false;
	for (size_t i = 0; i < sizeof(go_layouts) / sizeof(go_layouts[0]); i++)
		curg |= word_at(m_head, go_layouts[i].m_curg) == g_reg;
	if (!curg || lo >= hi || hi - lo > GO_STACK_MAX)
		return -ESRCH;
	if (copy_end < lo || copy_end >= hi)
		return 0;
	size_t size = hi - copy_end < gs->max_stack ? (size_t)(hi - copy_end) : gs->max_stack;
	if (mem_read(mem, copy_end, gs->buf, size) < 0)
		return -EIO;
	*out = (struct go_stack_snapshot){ .kind = GO_STACK_SNAPSHOT_EXTENSION, .addr = copy_end, .bytes = gs->buf,
					  .size = size };
	return 0;
}

int go_stack_bounds(const struct unwind_memory *mem, uint64_t g_reg, uint64_t *lo, uint64_t *hi)
{
	uint8_t g_head[G_HEAD], m_head[M_HEAD];
	uint64_t m;
	int rc = read_g_and_m(mem, g_reg, g_head, m_head, &m);
	if (rc < 0)
		return rc;
	*lo = word_at(g_head, G_STACK_LO);
	*hi = word_at(g_head, G_STACK_HI);
	if (*lo >= *hi || *hi - *lo > GO_STACK_MAX)
		return -ESRCH;
	for (size_t i = 0; i < sizeof(go_layouts) / sizeof(go_layouts[0]); i++) {
		if (word_at(m_head, M_G0) == g_reg || word_at(m_head, go_layouts[i].m_curg) == g_reg)
			return 0;
	}
	return -ESRCH;
}

/* ---- the delta unwinder's stack-switch hook ---------------------------------------------------------------- */

/* What the rules callbacks of go_stack_follow see: the handle (for its rule_at) and the walk's process. */
struct follow_rules {
	const struct go_stack *gs;
	const struct unwind_process *proc;
};

/* go_stack_rules: the Go frame returned into at pc, with SP sp, keeps its frame pointer at bp (CFA - 16). */
static bool follow_caller_keeps_fp(void *ctx, uint64_t sp, uint64_t pc, uint64_t bp)
{
	const struct follow_rules *fr = ctx;
	struct stack_delta_rule rule;
	uint64_t fp;
	return fr->gs->o.rule_at(fr->gs->o.ctx, fr->proc, pc - 1, &rule) && (rule.aux & STACK_DELTA_GO_FP_FRAME) &&
	       stack_delta_rule_frame_pointer(&rule, sp, &fp) && fp == bp;
}

/* go_stack_rules: code bytes from the program's file (go_stack_options.code_at). */
static bool follow_code_at(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct follow_rules *fr = ctx;
	return fr->gs->o.code_at && fr->gs->o.code_at(fr->gs->o.ctx, fr->proc, addr, buf, len);
}

/* go_stack_rules: the SP at which the Go frame returned into at pc keeps its frame pointer at bp (CFA - 16). */
static bool follow_caller_sp(void *ctx, uint64_t pc, uint64_t bp, uint64_t *sp)
{
	const struct follow_rules *fr = ctx;
	struct stack_delta_rule rule;
	uint64_t fp_at_sp0;
	if (!fr->gs->o.rule_at(fr->gs->o.ctx, fr->proc, pc - 1, &rule) || !(rule.aux & STACK_DELTA_GO_FP_FRAME) ||
	    !stack_delta_rule_frame_pointer(&rule, 0, &fp_at_sp0))
		return false;
	*sp = bp - fp_at_sp0;
	return true;
}

/* The entry of the sample's frame-pointer chain after the switching frame's return address ip: its caller's own
 * return address (the switching function keeps no frame: the chain goes from the g0 frames to the caller's frame
 * pointer). 0 when ip is not in the chain exactly once. */
static uint64_t chain_after(const struct unwind_sample *sample, uint64_t ip)
{
	uint64_t after = 0;
	unsigned found = 0;
	for (size_t i = 0; sample->fp_chain && i + 1 < sample->fp_chain_len; i++) {
		if (sample->fp_chain[i] == ip) {
			after = sample->fp_chain[i + 1];
			found++;
		}
	}
	return found == 1 ? after : 0;
}

/* go_stack_rules: addr is the entry of systemstack or asmcgocall (their rows carry the switch flag). */
static bool follow_is_switch_entry(void *ctx, uint64_t addr)
{
	const struct follow_rules *fr = ctx;
	struct stack_delta_rule rule;
	return fr->gs->o.rule_at(fr->gs->o.ctx, fr->proc, addr, &rule) && rule.kind == STACK_DELTA_CFA_FP &&
	       (rule.aux & STACK_DELTA_GO_STACK_SWITCH);
}

/* The switch a walk reached, as go_stack_follow works on it. */
struct follow_switch {
	enum unwind_deltas_switch kind;
	uint64_t ip, bp;	/* the switching frame's IP, and its frame pointer (0: unknown) */
	struct go_stack_g0 g0;	/* the sample's g0 frames up to the switching frame (stack growth; else empty) */
};

/* Frames to join the sample's frame-pointer chain with (see go_stack_follow), into resumed and stack. */
static int join_chain(struct go_stack *gs, const struct unwind_process *proc, const struct unwind_sample *sample,
		      const struct follow_switch *sw, struct unwind_deltas_regs *resumed, struct unwind_sample *stack)
{
	struct follow_rules fr = { gs, proc };
	const struct go_stack_rules rules = { follow_caller_keeps_fp, follow_is_switch_entry, &fr, follow_caller_sp,
					      follow_code_at };
	struct go_stack_caller caller;
	struct stack_delta_rule rule;
	bool growth = sw->kind == UNWIND_DELTAS_SWITCH_GROWTH;
	/* A switch with a frame of its own is in the chain, and its caller after it: the walk goes on by itself. */
	if (!growth && gs->o.rule_at(gs->o.ctx, proc, sw->ip - 1, &rule) && (rule.aux & STACK_DELTA_GO_FP_FRAME))
		return -ENOENT;
	int rc = growth ? go_stack_find_grower(gs, proc->memory, sw->bp, &sw->g0, &rules, &caller) :
			  go_stack_find_switch_caller(gs, proc->memory, sw->bp, &rules, &caller);
	if (rc == -ESRCH && !growth)
		rc = go_stack_find_switch_caller_in_code(gs, proc->memory, sw->bp, chain_after(sample, sw->ip), &rules,
							 &caller);
	if (rc < 0)
		return rc;
	gs->join_slot = caller.pc;
	resumed->regs[UNWIND_REG_IP] = growth ? caller.callee : caller.pc;
	resumed->regs[UNWIND_REG_SP] = growth ? caller.sp - 8 : caller.sp;
	resumed->regs[UNWIND_REG_BP] = sw->bp;
	resumed->known = UNWIND_DELTAS_REG(UNWIND_REG_IP) | UNWIND_DELTAS_REG(UNWIND_REG_SP) |
			 UNWIND_DELTAS_REG(UNWIND_REG_BP);
	resumed->exact_ip = growth;
	stack->regs[UNWIND_REG_SP] = resumed->regs[UNWIND_REG_SP];
	stack->stack = (const uint8_t *)&gs->join_slot;
	stack->stack_size = growth ? sizeof(gs->join_slot) : 0;
	return UNWIND_DELTAS_SWITCH_JOIN;
}

/*
 * The goroutine the caller read while it held the thread, as long as it is the switch the walk reached: the frame
 * pointer saved there, or, for a stack growth whose frame pointer the walk does not know, a goroutine the
 * sample's g0 frames name (a reader that could not preempt the thread may find another goroutine on it: the
 * rule of go_stack_read, the same here).
 */
static int held_goroutine(struct go_stack *gs, const struct unwind_process *proc, const struct follow_switch *sw,
			  struct go_stack_context *g)
{
	const struct go_stack_snapshot *snap = gs->o.held ? gs->o.held(gs->o.ctx, proc) : NULL;
	if (!snap || snap->kind != GO_STACK_SNAPSHOT_GOROUTINE)
		return -ENOENT;
	if (sw->bp ? snap->bp != sw->bp : !(sw->g0.size && go_stack_g0_names(&sw->g0, snap->g)))
		return -ENOENT;
	*g = (struct go_stack_context){ .pc = snap->pc, .sp = snap->sp, .bp = snap->bp, .stack = snap->bytes,
					.size = snap->size };
	return 0;
}

static void followed(struct go_stack *gs, const struct unwind_process *proc, enum go_stack_source source, int rc)
{
	if (gs->o.followed)
		gs->o.followed(gs->o.ctx, proc, source, rc);
}

/* The goroutine behind the switch, read now. */
static int read_goroutine(struct go_stack *gs, const struct unwind_process *proc, const struct unwind_sample *sample,
			  const struct follow_switch *sw, struct go_stack_context *g)
{
	if (!proc->memory)
		return -ENOENT;
	int rc = go_stack_read(gs, proc->memory, sample->regs[UNWIND_REG_R14], sw->bp, sw->g0.size ? &sw->g0 : NULL,
			       g);
	followed(gs, proc, GO_STACK_READ, rc);
	return rc;
}

int go_stack_follow(void *ctx, const struct unwind_process *proc, const struct unwind_sample *sample,
		    const struct unwind_deltas_regs *frame, enum unwind_deltas_switch kind,
		    struct unwind_deltas_regs *resumed, struct unwind_sample *stack)
{
	struct go_stack *gs = ctx;
	struct go_stack_context g;
	bool bp_known = frame->known & UNWIND_DELTAS_REG(UNWIND_REG_BP);
	struct follow_switch sw = { .kind = kind, .ip = frame->regs[UNWIND_REG_IP],
				    .bp = bp_known ? frame->regs[UNWIND_REG_BP] : 0, .g0 = { sample->stack, 0 } };
	if (!bp_known && kind != UNWIND_DELTAS_SWITCH_GROWTH)
		return -ENOENT;
	uint64_t sp = sample->regs[UNWIND_REG_SP], switch_sp = frame->regs[UNWIND_REG_SP];
	if (kind == UNWIND_DELTAS_SWITCH_GROWTH && switch_sp > sp)
		sw.g0.size = switch_sp - sp < sample->stack_size ? (size_t)(switch_sp - sp) : sample->stack_size;
	bool can_join = sample->fp_chain && sw.bp && proc->memory && gs->o.rule_at;
	bool join_first = can_join && sample->fp_chain_len < GO_STACK_CHAIN_CUT;
	int joined = -ENOENT, rc = held_goroutine(gs, proc, &sw, &g);
	if (rc == 0)
		followed(gs, proc, GO_STACK_HELD, 0);
	if (rc < 0 && join_first && (joined = join_chain(gs, proc, sample, &sw, resumed, stack)) >= 0) {
		followed(gs, proc, GO_STACK_JOINED, 0);
		return joined;
	}
	if (rc < 0)
		rc = read_goroutine(gs, proc, sample, &sw, &g);
	if (rc < 0 && can_join)
		return join_first ? joined : join_chain(gs, proc, sample, &sw, resumed, stack);
	if (rc < 0)
		return rc;
	resumed->regs[UNWIND_REG_IP] = g.pc;
	resumed->regs[UNWIND_REG_SP] = g.sp;
	resumed->regs[UNWIND_REG_BP] = g.bp;
	/* BP is unknown (0) after a stack growth in Go >= 1.23; Go frames restore it from their own frames. */
	resumed->known = UNWIND_DELTAS_REG(UNWIND_REG_IP) | UNWIND_DELTAS_REG(UNWIND_REG_SP) |
			 (g.bp ? UNWIND_DELTAS_REG(UNWIND_REG_BP) : 0);
	resumed->exact_ip = true;
	stack->regs[UNWIND_REG_SP] = g.sp;
	stack->stack = g.stack;
	stack->stack_size = g.size;
	return 0;
}
