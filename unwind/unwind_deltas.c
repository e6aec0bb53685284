/*
 * unwind_deltas.c — the fast unwinder over a copied stack. See unwind_deltas.h.
 */
#include "unwind/unwind_deltas.h"

#include "unwind/call_site.h"
#include "unwind/file_cache.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ucontext.h>

/* Two-way set-associative cache of (file key, ELF address) -> rule: 2048 x 32 bytes. Return addresses repeat a
 * lot from sample to sample, so most frames skip the binary search. */
#define UD_CACHE_BITS 11
#define UD_CACHE_SIZE (1u << UD_CACHE_BITS)

/* Where the kernel's rt_sigframe keeps the interrupted registers, relative to the SP of the __restore_rt frame
 * (the handler returned into it, popping the pretcode slot, so SP points at the ucontext): uc_flags, uc_link,
 * uc_stack (24 bytes), then mcontext gregs[]. glibc's ucontext_t mirrors the kernel's layout. */
#define UD_SIGFRAME_GREGS 40
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == UD_SIGFRAME_GREGS, "x86_64 ucontext layout");

struct ud_cache_entry {
	const void *key;		/* NULL: empty */
	uint64_t va;
	struct stack_delta_rule rule;
};

/* A table the unwinder built itself (standalone mode; unwind/file_cache.h). t is NULL when the build failed: not
 * retried. */
struct ud_table {
	struct stack_deltas *t;
};

struct unwind_deltas {
	struct unwind_deltas_options opts;
	struct unwind_deltas_stats stats;
	struct file_cache *tables;	/* file key -> struct ud_table */
	struct call_site *calls;	/* checks callers found by guessed rules */
	struct ud_cache_entry cache[UD_CACHE_SIZE];
};

/* How one step ended. */
enum ud_step {
	UD_STEP_OK, UD_STEP_END, UD_STEP_NO_MODULE, UD_STEP_FAIL,
	UD_STEP_BOGUS,	/* the frame being stepped is no frame: a return address into guessed code after no call */
};

/* One walk: the sample, the frame being unwound, and the module it is in. */
struct ud_walk {
	struct unwind_deltas *u;
	const struct unwind_process *proc;
	const struct unwind_sample *s;	/* the stack the walk is on */
	const struct unwind_sample *sample;	/* the sample as given (its registers and frame-pointer chain) */
	struct unwind_module mod;
	bool have_mod;
	struct unwind_deltas_regs r;
	int err;			/* internal error (-ENOMEM) */
	bool at_go_switch;		/* the last step's rule was a Go stack switch (STACK_DELTA_GO_STACK_SWITCH) */
	enum unwind_deltas_switch go_switch;	/* which one */
	bool switched;			/* the walk continues on the stack the switch hook gave */
	bool joining;			/* ... which holds only frames that must join the frame-pointer chain */
	size_t switch_frame;		/* frames[] index of the switching frame */
	uint64_t switch_bp;		/* its FP (known when joining) */
	enum ud_step switch_ended;	/* how the walk would have ended there without the hook */
	struct unwind_sample switched_stack;
	bool extend_failed;		/* the extension hook said no: not asked again */
	struct unwind_sample extended_stack;
	const void *step_module;	/* the last step's frame's module (unwind_frame.module), NULL: unknown */
	uint64_t step_bias;
	uint64_t step_frame_word;	/* ... and its unwind_frame.frame_word */
	const struct unwind_frame *frames;	/* the frames so far, the last the one being stepped */
	size_t nframes;
};

/* The module unwind_frame.module names for a frame in w->mod: a file's code, not JIT code nor a file's data. */
static const void *ud_frame_module(const struct ud_walk *w)
{
	return w->have_mod && !w->mod.jit && !w->mod.not_code ? w->mod.cache_key : NULL;
}

/* file_cache hook: the table of a file the caller gave none for. */
static int ud_table_make(void *ctx, const void *key, Elf *elf, void **value)
{
	struct unwind_deltas *u = ctx;
	struct ud_table *e = calloc(1, sizeof(*e));
	(void)key;
	if (!e)
		return -ENOMEM;
	int err = stack_deltas_build(elf, &e->t, NULL);
	if (err == -ENOMEM) {
		free(e);
		return err;
	}
	if (err < 0)
		u->stats.table_failures++;
	else
		u->stats.tables_built++;
	*value = e;
	return 0;
}

static void ud_table_release(void *ctx, void *value)
{
	struct ud_table *e = value;
	(void)ctx;
	stack_deltas_free(e->t);
	free(e);
}

int unwind_deltas_new(const struct unwind_deltas_options *opts, struct unwind_deltas **out)
{
	struct unwind_deltas *u = calloc(1, sizeof(*u));
	*out = NULL;
	if (!u)
		return -ENOMEM;
	struct file_cache_hooks hooks = { ud_table_make, ud_table_release, u };
	if (opts)
		u->opts = *opts;
	int err = call_site_new(&u->calls);
	if (err == 0 && (err = file_cache_new(&hooks, &u->tables)) < 0)
		call_site_free(u->calls);
	if (err < 0) {
		free(u);
		return err;
	}
	*out = u;
	return 0;
}

void unwind_deltas_free(struct unwind_deltas *u)
{
	if (!u)
		return;
	file_cache_free(u->tables);
	call_site_free(u->calls);
	free(u);
}

void unwind_deltas_forget(struct unwind_deltas *u, const void *cache_key)
{
	call_site_forget(u->calls, cache_key);
	for (size_t i = 0; i < UD_CACHE_SIZE; i++)
		if (u->cache[i].key == cache_key)
			u->cache[i].key = NULL;
	file_cache_forget(u->tables, cache_key);
}

void unwind_deltas_get_stats(const struct unwind_deltas *u, struct unwind_deltas_stats *st)
{
	*st = u->stats;
}

/* ---- rules ---------------------------------------------------------------------------------------------- */

/* The table of a module the caller gave no table for: built on first use and kept (standalone mode). */
static const struct stack_deltas *ud_own_table(struct ud_walk *w)
{
	void *e;
	int err = file_cache_get(w->u->tables, &w->mod, &e);
	if (err == -ENOMEM)
		w->err = err;
	return err < 0 ? NULL : ((struct ud_table *)e)->t;
}

static size_t ud_cache_slot(const void *key, uint64_t va)
{
	uint64_t h = ((uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull) ^ (va * 0xff51afd7ed558ccdull);
	return (size_t)(h >> (64 - UD_CACHE_BITS));
}

/* The rule at ELF address va of the current module; false when the module has no table at all. */
static bool ud_rule(struct ud_walk *w, uint64_t va, struct stack_delta_rule *rule)
{
	const void *key = file_cache_key(&w->mod);
	/* Two ways per set (slots s and s ^ 1, the most recent first): two hot frames that hash alike do not
	 * evict each other on every sample. */
	struct ud_cache_entry *e = key ? &w->u->cache[ud_cache_slot(key, va) & ~(size_t)1] : NULL;
	for (int way = 0; e && way < 2; way++) {
		if (e[way].key == key && e[way].va == va) {
			w->u->stats.cache_hits++;
			*rule = e[way].rule;
			if (way == 1) {
				struct ud_cache_entry hit = e[1];
				e[1] = e[0];
				e[0] = hit;
			}
			return true;
		}
	}
	w->u->stats.cache_misses++;
	const struct stack_deltas *t = w->mod.deltas;
	if (!t && key && !w->mod.table_pending && !w->mod.table_refused)
		t = ud_own_table(w);
	if (!t)
		return false;
	stack_deltas_lookup(t, va, rule);
	if (e) {
		e[1] = e[0];
		e[0] = (struct ud_cache_entry){ .key = key, .va = va, .rule = *rule };
	}
	return true;
}

/* ---- steps ---------------------------------------------------------------------------------------------- */

/* Load 8 bytes at addr from the stack copy; false outside it. */
static bool ud_read(const struct unwind_sample *s, uint64_t addr, uint64_t *v)
{
	uint64_t off = addr - s->regs[UNWIND_REG_SP];
	if (addr < s->regs[UNWIND_REG_SP] || s->stack_size < 8 || off > s->stack_size - 8)
		return false;
	memcpy(v, s->stack + off, sizeof(*v));
	return true;
}

/* Past the end of the stack the walk is on: ask the extension hook for a longer copy. */
static bool ud_extend(struct ud_walk *w, uint64_t addr)
{
	struct unwind_deltas *u = w->u;
	struct unwind_sample longer;
	uint64_t sp = w->s->regs[UNWIND_REG_SP];
	/* Frames given for joining the chain end where their stack does: that is where the join is. */
	if (!u->opts.stack_extend || w->extend_failed || w->joining || addr < sp || addr - sp < w->s->stack_size)
		return false;
	memset(&longer, 0, sizeof(longer));
	int rc = u->opts.stack_extend(u->opts.stack_extend_ctx, w->proc, w->s, addr, &longer);
	w->have_mod = false;	/* a hook may have changed what find_module gives (and freed what it gave) */
	if (rc < 0 || !longer.stack || longer.regs[UNWIND_REG_SP] != sp || longer.stack_size <= w->s->stack_size) {
		u->stats.stack_extension_failures++;
		w->extend_failed = true;
		return false;
	}
	u->stats.stack_extensions++;
	/* The sample's other registers and its chain stay what they were (the switch hook reads Go's g register and
	 * whether there is a chain to join from the stack it is given). */
	memcpy(longer.regs, w->s->regs, sizeof(longer.regs));
	longer.fp_chain = w->s->fp_chain;
	longer.fp_chain_len = w->s->fp_chain_len;
	w->extended_stack = longer;
	w->s = &w->extended_stack;
	return true;
}

/* Load 8 bytes at addr from the stack the walk is on, extended past its end when the hook can. */
static bool ud_load(struct ud_walk *w, uint64_t addr, uint64_t *v)
{
	return ud_read(w->s, addr, v) || (ud_extend(w, addr) && ud_read(w->s, addr, v));
}

static bool ud_known(const struct unwind_deltas_regs *r, enum unwind_reg reg)
{
	return r->known & UNWIND_DELTAS_REG(reg);
}

static bool ud_cfa(struct ud_walk *w, const struct stack_delta_rule *rule, uint64_t *cfa)
{
	const struct unwind_deltas_regs *r = &w->r;
	uint64_t sp = r->regs[UNWIND_REG_SP], fp = r->regs[UNWIND_REG_BP], v;
	bool fp_ok = ud_known(r, UNWIND_REG_BP);
	switch (rule->kind) {
	case STACK_DELTA_CFA_SP:
		*cfa = sp + (uint64_t)(int64_t)rule->cfa_off;
		return true;
	case STACK_DELTA_CFA_FP:
		*cfa = fp + (uint64_t)(int64_t)rule->cfa_off;
		return fp_ok;
	case STACK_DELTA_CFA_SP_DEREF:
	case STACK_DELTA_CFA_FP_DEREF:
		if (rule->kind == STACK_DELTA_CFA_FP_DEREF && !fp_ok)
			return false;
		if (!ud_load(w, (rule->kind == STACK_DELTA_CFA_SP_DEREF ? sp : fp) + (uint64_t)(int64_t)rule->cfa_off, &v))
			return false;
		*cfa = v + (uint64_t)(int64_t)rule->aux;
		return true;
	case STACK_DELTA_PLT:
		/* The IP is exact here: a PLT stub calls nothing, so it is only ever the interrupted frame. */
		*cfa = sp + (uint64_t)(int64_t)rule->cfa_off + ((r->regs[UNWIND_REG_IP] & 15) >= (uint64_t)rule->aux ? 8 : 0);
		return true;
	default:
		return false;
	}
}

/* CFA-based step: SP = CFA, IP = *(CFA - 8), FP per the rule. */
static enum ud_step ud_step_cfa(struct ud_walk *w, const struct stack_delta_rule *rule)
{
	struct unwind_deltas_regs *r = &w->r;
	uint64_t cfa, ra, fp = r->regs[UNWIND_REG_BP];
	bool fp_ok = ud_known(r, UNWIND_REG_BP);
	if (!ud_cfa(w, rule, &cfa) || cfa <= r->regs[UNWIND_REG_SP] || !ud_load(w, cfa - 8, &ra))
		return UD_STEP_FAIL;
	if (rule->fp == STACK_DELTA_FP_AT_CFA)
		fp_ok = ud_load(w, cfa + (uint64_t)(int64_t)rule->fp_off, &fp);
	else if (rule->fp == STACK_DELTA_FP_AT_FP)
		fp_ok = fp_ok && ud_load(w, fp + (uint64_t)(int64_t)rule->fp_off, &fp);
	r->regs[UNWIND_REG_SP] = cfa;
	r->regs[UNWIND_REG_IP] = ra;
	r->regs[UNWIND_REG_BP] = fp;
	r->known = UNWIND_DELTAS_REG(UNWIND_REG_SP) | UNWIND_DELTAS_REG(UNWIND_REG_IP) |
		   (fp_ok ? UNWIND_DELTAS_REG(UNWIND_REG_BP) : 0);
	r->exact_ip = false;
	/* A zero return address ends a stack, except in memory read past the copy, which may have been reused. */
	if (ra == 0)
		return w->s == &w->extended_stack ? UD_STEP_FAIL : UD_STEP_END;
	return UD_STEP_OK;
}

/* Signal trampoline: every register comes back from the ucontext's mcontext. */
static enum ud_step ud_step_signal(struct ud_walk *w)
{
	static const uint8_t map[][2] = {
		{ REG_R8, UNWIND_REG_R8 }, { REG_R9, UNWIND_REG_R9 }, { REG_R10, UNWIND_REG_R10 },
		{ REG_R11, UNWIND_REG_R11 }, { REG_R12, UNWIND_REG_R12 }, { REG_R13, UNWIND_REG_R13 },
		{ REG_R14, UNWIND_REG_R14 }, { REG_R15, UNWIND_REG_R15 }, { REG_RDI, UNWIND_REG_DI },
		{ REG_RSI, UNWIND_REG_SI }, { REG_RBP, UNWIND_REG_BP }, { REG_RBX, UNWIND_REG_BX },
		{ REG_RDX, UNWIND_REG_DX }, { REG_RAX, UNWIND_REG_AX }, { REG_RCX, UNWIND_REG_CX },
		{ REG_RSP, UNWIND_REG_SP }, { REG_RIP, UNWIND_REG_IP },
	};
	uint64_t gregs = w->r.regs[UNWIND_REG_SP] + UD_SIGFRAME_GREGS, v[sizeof(map) / sizeof(map[0])];
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!ud_load(w, gregs + 8u * map[i][0], &v[i]))
			return UD_STEP_FAIL;
	if (v[15] <= w->r.regs[UNWIND_REG_SP])
		return UD_STEP_FAIL;	/* the interrupted SP is above the signal frame */
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		w->r.regs[map[i][1]] = v[i];
	w->r.known = UNWIND_DELTAS_ALL_REGS;
	w->r.exact_ip = true;
	return UD_STEP_OK;
}

static enum ud_step ud_step_fallback(struct ud_walk *w)
{
	struct unwind_deltas *u = w->u;
	if (!u->opts.fallback)
		return UD_STEP_FAIL;
	struct unwind_deltas_regs caller;
	memset(&caller, 0, sizeof(caller));
	u->stats.fallback_calls++;
	int rc = u->opts.fallback(u->opts.fallback_ctx, w->proc, w->s, &w->mod, &w->r, &caller);
	w->have_mod = false;
	if (rc == UNWIND_DELTAS_FALLBACK_END)
		return UD_STEP_END;
	uint32_t need = UNWIND_DELTAS_REG(UNWIND_REG_SP) | UNWIND_DELTAS_REG(UNWIND_REG_IP);
	if (rc < 0 || (caller.known & need) != need || caller.regs[UNWIND_REG_SP] <= w->r.regs[UNWIND_REG_SP]) {
		u->stats.fallback_failures++;
		return UD_STEP_FAIL;
	}
	w->r = caller;
	return caller.regs[UNWIND_REG_IP] == 0 ? UD_STEP_END : UD_STEP_OK;
}

/* Find the module of addr, reusing the previous frame's when it still covers it; probe: addr is only checked
 * (unwind_process.probe_module). */
static bool ud_find_module_as(struct ud_walk *w, uint64_t addr, bool probe)
{
	if (w->have_mod && addr >= w->mod.start && addr < w->mod.end)
		return true;
	memset(&w->mod, 0, sizeof(w->mod));	/* fields the caller does not fill (deltas) stay NULL */
	int (*find)(void *, uint64_t, struct unwind_module *) =
		probe && w->proc->probe_module ? w->proc->probe_module : w->proc->find_module;
	w->have_mod = find(w->proc->ctx, addr, &w->mod) == 0;
	return w->have_mod;
}

static bool ud_find_module(struct ud_walk *w, uint64_t addr)
{
	return ud_find_module_as(w, addr, false);
}

/* ---- guessed frames ------------------------------------------------------------------------------------- */

/* Whether a frame under r was guessed (no CFI, no .gopclntab, or a general unwinder's step): the callers it
 * leads to, and return addresses into it, are checked. */
static bool ud_rule_guessed(const struct stack_delta_rule *r)
{
	return r->kind == STACK_DELTA_FALLBACK ||
	       ((r->kind == STACK_DELTA_CFA_SP || r->kind == STACK_DELTA_CFA_FP) && (r->aux & STACK_DELTA_GUESSED));
}

/* Whether ra, a return address in w->mod, follows a call instruction in its file's executable code
 * (call_site.h). Never in JIT code: no image holds its bytes. */
static bool ud_call_before(struct ud_walk *w, uint64_t ra)
{
	return call_site_follows_call(w->u->calls, w->mod.elf, w->mod.cache_key, ra - w->mod.bias);
}

static bool ud_chain_vouches(struct ud_walk *w, uint64_t ra);

/* Whether ra, a caller a guess found, follows a call instruction (ud_call_before), or the sample's frame-pointer
 * chain says the same (ud_chain_vouches: the only witness for a caller in JIT code, whose bytes no image holds);
 * refusals counted. */
static bool ud_follows_call(struct ud_walk *w, uint64_t ra)
{
	if (ra == 0 || !ud_find_module(w, ra - 1))
		return false;
	if ((!w->mod.jit && ud_call_before(w, ra)) || ud_chain_vouches(w, ra))
		return true;
	w->u->stats.implausible_callers++;
	return false;
}

/*
 * A step under a guessed rule (or the fallback, asked where no rule is known) recovered w->r from callee: keep
 * it only if its IP is a plausible return address. The end of a stack is believed only where CFI says so
 * (end_trusted: a FALLBACK row's CFI); a zero return address read where a guess pointed ends nothing.
 */
static enum ud_step ud_check_guess(struct ud_walk *w, enum ud_step st, const struct unwind_deltas_regs *callee,
				   bool end_trusted)
{
	if (st == UD_STEP_END && end_trusted)
		return st;
	if (st != UD_STEP_END &&
	    (st != UD_STEP_OK || w->r.exact_ip || ud_follows_call(w, w->r.regs[UNWIND_REG_IP])))
		return st;
	w->r = *callee;	/* the walk ends at the last frame it can vouch for */
	return UD_STEP_FAIL;
}

/* ---- JIT code ------------------------------------------------------------------------------------------ */

/* Most stack one JIT frame may span, from its SP to its frame pointer. */
#define UD_JIT_FRAME_MAX (1u << 20)

/*
 * Whether ra is a return address a JIT frame may have: in JIT code (whose bytes the unwinder does not have), or in
 * a file where its table has a rule (not in a gap between functions) and a call instruction ends right before it
 * (call_site.h). A JIT step's caller in a file is checked as a guessed caller is.
 */
static bool ud_jit_return_ok(struct ud_walk *w, uint64_t ra)
{
	struct stack_delta_rule rule;
	if (ra == 0 || !ud_find_module_as(w, ra - 1, true))
		return false;
	if (w->mod.jit)
		return true;
	return ud_rule(w, ra - 1 - w->mod.bias, &rule) && rule.kind != STACK_DELTA_INVALID && ud_call_before(w, ra);
}

/* The step CFA = SP + cfa_off (the caller's FP at CFA - 16 if fp_saved, else FP's), taken if its return address
 * passes the check above. */
static bool ud_jit_try(struct ud_walk *w, uint32_t cfa_off, bool fp_saved)
{
	struct stack_delta_rule rule = { .kind = STACK_DELTA_CFA_SP, .fp = STACK_DELTA_FP_SAME,
					 .cfa_off = (int32_t)cfa_off };
	uint64_t sp = w->r.regs[UNWIND_REG_SP], cfa = sp + cfa_off, ra;
	if (fp_saved) {
		rule.fp = STACK_DELTA_FP_AT_CFA;
		rule.fp_off = -16;
	}
	if (cfa <= sp || !ud_load(w, cfa - 8, &ra) || !ud_jit_return_ok(w, ra) || ud_step_cfa(w, &rule) != UD_STEP_OK)
		return false;
	w->u->stats.jit_steps++;
	return true;
}

/*
 * Where a JVM's code was sampled (the leaf; unwind_module.jit_leaf_shapes), its frame may not be the one its rule
 * gives: the code is in an epilogue or a prologue (the return address on top of the stack with FP the caller's,
 * or under the caller's FP pushed there), or an intrinsic pushed a word (string comparison saves a register
 * around its loop). Tried in that order, each kept only if its return address passes the check: the epilogue's
 * first, since the frame popped there puts its caller's own words where the other shapes look (a recursion's
 * caller, of the same size, has its return address where the pushed word's shape reads one).
 */
static bool ud_jit_leaf_shapes(struct ud_walk *w, uint32_t size, bool fp_saved)
{
	return (size != 8 && ud_jit_try(w, 8, false)) || (size != 16 && ud_jit_try(w, 16, true)) ||
	       (fp_saved && size && ud_jit_try(w, size + 8, true));
}

/* JIT code of a known shape (unwind_module.jit_cfa_sp, and jit_fp_saved: where the caller's FP is): its rule, the
 * return address checked as above; at the leaf, the other shapes it may have. */
static enum ud_step ud_step_jit_shaped(struct ud_walk *w)
{
	const uint32_t size = w->mod.jit_cfa_sp;
	const bool fp_saved = w->mod.jit_fp_saved, shapes = w->mod.jit_leaf_shapes && w->r.exact_ip;
	if (ud_jit_try(w, size, fp_saved) || (shapes && ud_jit_leaf_shapes(w, size, fp_saved)))
		return UD_STEP_OK;
	w->u->stats.jit_step_failures++;
	return UD_STEP_FAIL;
}

/* The caller's SP a JVM interpreter frame saved at FP - 8 (unwind_module.jit_sender_sp): at or above FP + 16,
 * where its arguments and locals end, and within a JIT frame's bound of it. */
static bool ud_jit_sender_sp(struct ud_walk *w, uint64_t fp, uint64_t *sp)
{
	uint64_t v;
	if (!ud_load(w, fp - 8, &v) || (v & 7) || v < fp + 16 || v - (fp + 16) > UD_JIT_FRAME_MAX)
		return false;
	*sp = v;
	return true;
}

/*
 * A frame in JIT code (unwind_module.jit): no table describes it, its frame pointer does. The runtime pushed
 * its caller's FP and pointed FP there: the return address is at FP + 8, the caller's FP at FP, the caller's SP
 * is FP + 16 (or, in a JVM's interpreter, saved at FP - 8: jit_sender_sp). The step is taken only where that is
 * plausible: FP known, 8-aligned, at or above SP and at most UD_JIT_FRAME_MAX above it (so SP grows with every
 * step, and a JIT caller's FP, at or above its SP, lies above this one), both words in the stack, and the return
 * address in code (ud_jit_return_ok). Otherwise the walk ends there, truncated (a frame pointer the code does not
 * keep must not make up callers), unless the leaf's other shapes (jit_leaf_shapes) find it. A step taken reads
 * the word the module says the frame keeps (jit_frame_word_at: a JVM interpreter's Method) for the frame.
 */
static enum ud_step ud_step_jit(struct ud_walk *w)
{
	struct unwind_deltas_regs *r = &w->r;
	uint64_t sp = r->regs[UNWIND_REG_SP], fp = r->regs[UNWIND_REG_BP], caller_fp, ra, caller_sp = fp + 16;
	const bool sender_sp = w->mod.jit_sender_sp, shapes = w->mod.jit_leaf_shapes && r->exact_ip;
	if (w->mod.jit_cfa_sp)
		return ud_step_jit_shaped(w);
	const uint64_t code = r->exact_ip ? r->regs[UNWIND_REG_IP] : r->regs[UNWIND_REG_IP] - 1;
	/* read now: the checks below look up other modules */
	const uint64_t word_at = code >= w->mod.jit_word_start && code < w->mod.jit_word_end ?
					 w->mod.jit_frame_word_at : 0;
	/* A JVM's stub sampled where it runs may keep no frame: FP is then its caller's, or any frame's above it
	 * (compiled code leaves in FP what it likes), and would skip the frames between; its return address on top
	 * of the stack is looked for first. */
	if (shapes && ud_jit_try(w, 8, false))
		return UD_STEP_OK;
	if (!ud_known(r, UNWIND_REG_BP) || (fp & 7) || fp < sp || fp - sp > UD_JIT_FRAME_MAX || fp > UINT64_MAX - 16 ||
	    !ud_load(w, fp, &caller_fp) || !ud_load(w, fp + 8, &ra) ||
	    (sender_sp && !ud_jit_sender_sp(w, fp, &caller_sp)) || !ud_jit_return_ok(w, ra)) {
		if (shapes && ud_jit_try(w, 16, true))
			return UD_STEP_OK;
		w->u->stats.jit_step_failures++;
		return UD_STEP_FAIL;
	}
	uint64_t word;
	if (word_at && word_at <= fp - sp && ud_load(w, fp - word_at, &word))
		w->step_frame_word = word;
	r->regs[UNWIND_REG_SP] = caller_sp;
	r->regs[UNWIND_REG_IP] = ra;
	r->regs[UNWIND_REG_BP] = caller_fp;
	r->known = UNWIND_DELTAS_REG(UNWIND_REG_SP) | UNWIND_DELTAS_REG(UNWIND_REG_IP) |
		   UNWIND_DELTAS_REG(UNWIND_REG_BP);
	r->exact_ip = false;
	w->u->stats.jit_steps++;
	return UD_STEP_OK;
}

/* ---- one step ------------------------------------------------------------------------------------------- */

static bool ud_step_by_chain(struct ud_walk *w, const struct unwind_frame *frames, size_t n, bool before);

/* Replace w->r, the current frame, by its caller. */
static enum ud_step ud_step(struct ud_walk *w)
{
	uint64_t ip = w->r.regs[UNWIND_REG_IP];
	uint64_t addr = w->r.exact_ip ? ip : ip - 1;	/* a return address may follow a call ending a function */
	w->step_module = NULL;
	w->step_frame_word = 0;
	if (!ud_find_module(w, addr))
		return UD_STEP_NO_MODULE;
	w->step_module = ud_frame_module(w);	/* before other lookups move w->mod */
	w->step_bias = w->mod.bias;
	struct stack_delta_rule rule;
	const struct unwind_deltas_regs callee = w->r;
	w->at_go_switch = false;
	/* JIT code has no table and is no guess: its frame-pointer step is checked on its own terms. */
	if (w->mod.jit)
		return ud_step_jit(w);
	bool have_rule = ud_rule(w, addr - w->mod.bias, &rule);
	/* Code without CFI: the sample's frame-pointer chain first, where it vouches for the frame (asked here, once
	 * the rule is known, rather than before every step: that lookup was an eighth of a C++ compiler's walks). */
	if ((!have_rule || ud_rule_guessed(&rule)) && ud_step_by_chain(w, w->frames, w->nframes, true))
		return UD_STEP_OK;
	if (!have_rule)
		return w->err || w->mod.table_refused ? UD_STEP_FAIL :
							ud_check_guess(w, ud_step_fallback(w), &callee, false);
	if (ud_rule_guessed(&rule)) {
		/* A return address into code without CFI: the frame is real only if a call put it there. */
		if (!w->r.exact_ip && !ud_follows_call(w, ip))
			return UD_STEP_BOGUS;
		enum ud_step st = rule.kind == STACK_DELTA_FALLBACK ? ud_step_fallback(w) : ud_step_cfa(w, &rule);
		return ud_check_guess(w, st, &callee, rule.kind == STACK_DELTA_FALLBACK);
	}
	w->at_go_switch = (rule.kind == STACK_DELTA_CFA_FP || rule.kind == STACK_DELTA_STOP) &&
			  (rule.aux & STACK_DELTA_GO_STACK_SWITCH);
	w->go_switch = rule.kind == STACK_DELTA_STOP ? UNWIND_DELTAS_SWITCH_GROWTH : UNWIND_DELTAS_SWITCH_CALL;
	switch (rule.kind) {
	case STACK_DELTA_CFA_SP:
	case STACK_DELTA_CFA_FP:
	case STACK_DELTA_CFA_SP_DEREF:
	case STACK_DELTA_CFA_FP_DEREF:
	case STACK_DELTA_PLT:
		return ud_step_cfa(w, &rule);
	case STACK_DELTA_SIGNAL:
		return ud_step_signal(w);
	case STACK_DELTA_STOP:
		return UD_STEP_END;
	case STACK_DELTA_FALLBACK:
		return ud_step_fallback(w);
	default:
		return UD_STEP_FAIL;
	}
}

/* At a Go stack switch where the walk would end: ask the hook for the goroutine's stack and go on there. */
static enum ud_step ud_switch_stack(struct ud_walk *w, enum ud_step ended)
{
	struct unwind_deltas *u = w->u;
	struct unwind_deltas_regs resumed;
	uint32_t need = UNWIND_DELTAS_REG(UNWIND_REG_SP) | UNWIND_DELTAS_REG(UNWIND_REG_IP);
	/* morestack's STOP rule ends the g0 stack, not the goroutine's: a walk that cannot go on from there lost the
	 * goroutine's frames (all of them, in Go >= 1.23), so it is truncated, not complete. */
	if (w->go_switch == UNWIND_DELTAS_SWITCH_GROWTH && ended == UD_STEP_END)
		ended = UD_STEP_FAIL;
	if (!u->opts.stack_switch || w->switched)
		return ended;
	memset(&resumed, 0, sizeof(resumed));
	memset(&w->switched_stack, 0, sizeof(w->switched_stack));
	int rc = u->opts.stack_switch(u->opts.stack_switch_ctx, w->proc, w->s, &w->r, w->go_switch, &resumed,
				      &w->switched_stack);
	w->have_mod = false;
	/* Joining the chain needs one, and the FP from which it went on past the switching frame. */
	bool join = rc == UNWIND_DELTAS_SWITCH_JOIN;
	if (rc < 0 || rc > UNWIND_DELTAS_SWITCH_JOIN || (resumed.known & need) != need ||
	    w->switched_stack.regs[UNWIND_REG_SP] != resumed.regs[UNWIND_REG_SP] || !w->switched_stack.stack ||
	    (join && (!w->sample->fp_chain || !ud_known(&w->r, UNWIND_REG_BP)))) {
		u->stats.stack_switch_failures++;
		return ended;
	}
	u->stats.stack_switches++;
	w->switched = true;
	w->joining = join;
	w->switch_bp = w->r.regs[UNWIND_REG_BP];
	w->switch_ended = ended;
	w->extend_failed = false;
	w->s = &w->switched_stack;
	w->r = resumed;
	return resumed.regs[UNWIND_REG_IP] == 0 ? UD_STEP_END : UD_STEP_OK;
}

/* ---- the sample's frame-pointer chain --------------------------------------------------------------------- */

/*
 * Whether a frame under rule keeps its own frame pointer in FP wherever the rule holds, so that a frame-pointer
 * chain through it leads to its caller: a standard rbp frame (CFA = FP + 16) — but for a Go stack switch that
 * keeps no frame of its own (its "frame" is its caller's) — or a Go frame past its prologue.
 */
static bool ud_rule_keeps_fp(const struct stack_delta_rule *r)
{
	if (r->fp != STACK_DELTA_FP_AT_CFA || r->fp_off != -16)
		return false;
	if (r->kind == STACK_DELTA_CFA_FP)
		return r->cfa_off == 16 && (!(r->aux & STACK_DELTA_GO_STACK_SWITCH) || (r->aux & STACK_DELTA_GO_FP_FRAME));
	return r->kind == STACK_DELTA_CFA_SP && (r->aux & STACK_DELTA_GO_FP_FRAME);
}

/*
 * Whether the frame whose registers are r holds its own frame pointer in FP right now: its rule saved the
 * caller's FP at CFA - 16, and FP is that address (checked by value where the CFA comes from SP: a leaf still in
 * its prologue or already past its epilogue does not).
 */
static bool ud_frame_owns_fp(struct ud_walk *w, const struct unwind_deltas_regs *r)
{
	struct stack_delta_rule rule;
	uint64_t ip = r->regs[UNWIND_REG_IP], addr = r->exact_ip ? ip : ip - 1, fp;
	if (!ud_known(r, UNWIND_REG_BP) || !ud_find_module(w, addr))
		return false;
	if (w->mod.jit)
		return !w->mod.jit_cfa_sp;	/* JIT code keeps frame pointers (ud_step_jit), but a shaped trampoline */
	if (!ud_rule(w, addr - w->mod.bias, &rule))
		return false;
	if (rule.kind == STACK_DELTA_CFA_SP)
		return stack_delta_rule_frame_pointer(&rule, r->regs[UNWIND_REG_SP], &fp) && fp == r->regs[UNWIND_REG_BP];
	return ud_rule_keeps_fp(&rule);
}

/*
 * Where frames[k] is in the sample's frame-pointer chain, when the chain agrees with frames[0..k]; -1 if not.
 * The chain holds the sampled IP, then one return address per saved frame pointer: entry i is frame i, or frame
 * i + 1 when the leaf has no frame of its own (FP is still its caller's, whose caller comes next). A signal frame
 * breaks the chain.
 */
static ptrdiff_t ud_chain_position(struct ud_walk *w, const struct unwind_frame *frames, size_t k)
{
	const uint64_t *chain = w->sample->fp_chain;
	size_t len = w->sample->fp_chain_len;
	if (!chain || len == 0 || chain[0] != frames[0].ip)
		return -1;
	if (k == 0)
		return 0;
	struct unwind_deltas_regs leaf = { .known = UNWIND_DELTAS_ALL_REGS, .exact_ip = true };
	memcpy(leaf.regs, w->sample->regs, sizeof(leaf.regs));
	size_t skip = ud_frame_owns_fp(w, &leaf) ? 0 : 1;
	if (k - skip >= len)
		return -1;
	for (size_t i = 1 + skip; i <= k; i++)
		if (frames[i].flags || chain[i - skip] != frames[i].ip)
			return -1;
	return (ptrdiff_t)(k - skip);
}

/*
 * Whether the sample's frame-pointer chain names ra as the caller of the frame being stepped: the chain agrees
 * with every frame so far, and its next entry is ra. The kernel took the chain at the sample, from the registers
 * and the stack as they were, independently of any guess: a guess that lands on the same return address at the
 * same depth found the frame the code's own frame pointers describe (V8's built-ins and JIT code keep them).
 */
static bool ud_chain_vouches(struct ud_walk *w, uint64_t ra)
{
	if (!w->frames || w->nframes == 0 || w->s != w->sample)
		return false;
	ptrdiff_t pos = ud_chain_position(w, w->frames, w->nframes - 1);
	return pos >= 0 && (size_t)pos + 1 < w->sample->fp_chain_len && w->sample->fp_chain[pos + 1] == ra;
}

/* Whether the frame whose registers are r runs under a guessed rule (or none is known). */
static bool ud_frame_guessed(struct ud_walk *w, const struct unwind_deltas_regs *r)
{
	struct stack_delta_rule rule;
	uint64_t ip = r->regs[UNWIND_REG_IP], addr = r->exact_ip ? ip : ip - 1;
	return !ud_find_module(w, addr) || !ud_rule(w, addr - w->mod.bias, &rule) || ud_rule_guessed(&rule);
}

/*
 * Append the chain's entries from index from: each is the caller of the one before as long as that one kept its
 * own frame pointer (past a frame without, the next entry would skip a caller: the walk ends there, truncated).
 * Ends complete at an outermost frame (STOP rule). The kernel follows frame pointers wherever they lead: an
 * entry after a guessed frame (after_guess for the first), or into guessed code, must follow a call. Code without
 * CFI may or may not keep its frame pointer (V8's built-ins do): past it, the next entry must be plausible in the
 * same way. JIT code keeps its frame pointer (ud_step_jit) but for a shaped trampoline, whose caller the chain
 * skips; an entry in JIT code after a guessed frame has nothing but the chain to vouch for it, as in a JIT step.
 */
static size_t ud_append_chain(struct ud_walk *w, size_t from, struct unwind_frame *frames, size_t n, size_t max,
			      bool after_guess, enum unwind_status *status)
{
	const uint64_t *chain = w->sample->fp_chain;
	*status = UNWIND_TRUNCATED;
	for (size_t i = from; i < w->sample->fp_chain_len && n < max; i++) {
		struct stack_delta_rule rule;
		uint64_t ra = chain[i];
		if (ra == 0 || !ud_find_module(w, ra - 1))
			break;
		if (w->mod.jit) {
			frames[n++] = (struct unwind_frame){ .ip = ra, .flags = 0 };
			if (w->mod.jit_cfa_sp)
				break;
			after_guess = false;
			continue;
		}
		if (!ud_rule(w, ra - 1 - w->mod.bias, &rule) || rule.kind == STACK_DELTA_INVALID)
			break;
		bool guessed = ud_rule_guessed(&rule);
		if ((after_guess || guessed) && !ud_follows_call(w, ra))
			break;
		after_guess = guessed;
		const void *module = ud_frame_module(w);
		frames[n++] = (struct unwind_frame){ .ip = ra, .flags = 0, .module = module,
						     .bias = module ? w->mod.bias : 0 };
		if (rule.kind == STACK_DELTA_STOP) {
			*status = UNWIND_COMPLETE;
			break;
		}
		if (!guessed && !ud_rule_keeps_fp(&rule))
			break;
	}
	return n;
}

/*
 * A walk on the sample's own stack failed at frames[n - 1] (the copy ran out or was empty, a Go stack switch was
 * not followed): when that frame owns its frame pointer and the chain agrees with every frame so far, the chain
 * says who its callers were at the sample. Returns the new frame count; *status set when frames were added.
 */
static size_t ud_follow_chain(struct ud_walk *w, struct unwind_frame *frames, size_t n, size_t max,
			      enum unwind_status *status)
{
	ptrdiff_t pos = ud_chain_position(w, frames, n - 1);
	bool guessed = ud_frame_guessed(w, &w->r);
	if (pos < 0 || (size_t)pos + 1 >= w->sample->fp_chain_len || (!guessed && !ud_frame_owns_fp(w, &w->r)))
		return n;
	size_t added = ud_append_chain(w, (size_t)pos + 1, frames, n, max, guessed, status);
	if (added > n)
		w->u->stats.fp_chain_walks++;
	return added;
}

/* A caller the chain names after a frame without CFI: in JIT code (nothing else can vouch for it, as in a JIT step),
 * or in a file right after a call instruction. For the leaf the chain is no second opinion (the kernel read the
 * word the step reads): the call instruction is what keeps a frame pointer the code does not keep from making up a
 * caller. */
static bool ud_plausible_caller(struct ud_walk *w, uint64_t ra)
{
	return ra && ud_find_module(w, ra - 1) && (w->mod.jit || ud_call_before(w, ra));
}

/*
 * A step by frame pointer for a frame in code without CFI (frames[n - 1], its registers w->r) on the sample's own
 * stack, taken where the sample's frame-pointer chain vouches for it: the chain agrees with every frame so far,
 * and the return address at FP + 8 in the stack is the chain's next entry. Code without CFI that keeps a frame
 * pointer (V8's built-ins) moves SP by amounts a prologue sweep cannot know, while its frame pointer is right;
 * and unlike the chain alone, the step gives the caller's SP and FP, so the walk goes on under the caller's CFI.
 * before: asked before the guess, which it replaces only where the guessed rule says the frame owns its frame
 * pointer (a frame that has not pushed one yet would skip its caller); else asked after the guess failed.
 */
static bool ud_step_by_chain(struct ud_walk *w, const struct unwind_frame *frames, size_t n, bool before)
{
	struct unwind_deltas_regs *r = &w->r;
	uint64_t ip = r->regs[UNWIND_REG_IP], addr = r->exact_ip ? ip : ip - 1;
	uint64_t sp = r->regs[UNWIND_REG_SP], fp = r->regs[UNWIND_REG_BP], caller_fp, ra;
	if (!w->sample->fp_chain || w->s != w->sample || w->switched || !ud_known(r, UNWIND_REG_BP) ||
	    !ud_find_module(w, addr) || w->mod.jit || !ud_frame_guessed(w, r) || (before && !ud_frame_owns_fp(w, r)))
		return false;
	ptrdiff_t pos = ud_chain_position(w, frames, n - 1);
	if (pos < 0 || (size_t)pos + 1 >= w->sample->fp_chain_len || (fp & 7) || fp < sp ||
	    fp - sp > UD_JIT_FRAME_MAX || fp > UINT64_MAX - 16 || !ud_load(w, fp, &caller_fp) ||
	    !ud_load(w, fp + 8, &ra) || ra != w->sample->fp_chain[pos + 1] || !ud_plausible_caller(w, ra) ||
	    !ud_find_module(w, addr))
		return false;
	w->step_module = ud_frame_module(w);
	w->step_bias = w->mod.bias;
	w->at_go_switch = false;
	r->regs[UNWIND_REG_SP] = fp + 16;
	r->regs[UNWIND_REG_IP] = ra;
	r->regs[UNWIND_REG_BP] = caller_fp;
	r->known = UNWIND_DELTAS_REG(UNWIND_REG_SP) | UNWIND_DELTAS_REG(UNWIND_REG_IP) |
		   UNWIND_DELTAS_REG(UNWIND_REG_BP);
	r->exact_ip = false;
	w->u->stats.fp_chain_steps++;
	return true;
}

/*
 * The walk over the frames a stack-switch hook gave for joining (UNWIND_DELTAS_SWITCH_JOIN) ended at frames[n - 1].
 * It joins the chain if that frame owns the frame pointer the walk had at the switching frame: the chain went on
 * from that frame pointer, right after the switching frame's entry. Else those frames are dropped and the walk
 * ends at the switching frame as it would have without the hook.
 */
static size_t ud_join_chain(struct ud_walk *w, struct unwind_frame *frames, size_t n, size_t max,
			    enum unwind_status *status)
{
	ptrdiff_t pos = ud_chain_position(w, frames, w->switch_frame);
	if (pos >= 0 && (size_t)pos + 1 < w->sample->fp_chain_len && w->r.regs[UNWIND_REG_BP] == w->switch_bp &&
	    ud_frame_owns_fp(w, &w->r)) {
		w->u->stats.fp_chain_joins++;
		return ud_append_chain(w, (size_t)pos + 1, frames, n, max, ud_frame_guessed(w, &w->r), status);
	}
	w->u->stats.fp_chain_join_failures++;
	*status = w->switch_ended == UD_STEP_END ? UNWIND_COMPLETE : UNWIND_TRUNCATED;
	return w->switch_frame + 1;
}

/*
 * The copy is read long after the kernel wrote it (a batch is drained when its ring is half full), so its lines
 * are no longer cached, and a walk's loads go up it a frame at a time, each waiting for memory. Asking for its
 * first UD_PREFETCH_BYTES at once overlaps those misses: a C++ compiler's ~100-frame walks took 10 us instead of
 * 12.4 (the whole 64 KiB: no better).
 */
#define UD_PREFETCH_BYTES 16384
static void ud_prefetch(const struct unwind_sample *s)
{
	size_t n = s->stack_size < UD_PREFETCH_BYTES ? s->stack_size : UD_PREFETCH_BYTES;
	for (size_t off = 0; off < n; off += 64)
		__builtin_prefetch(s->stack + off);
}

int unwind_deltas_unwind(struct unwind_deltas *u, const struct unwind_process *proc,
			 const struct unwind_sample *sample, struct unwind_frame *frames, size_t max,
			 enum unwind_status *status)
{
	struct ud_walk w = { .u = u, .proc = proc, .s = sample, .sample = sample };
	memcpy(w.r.regs, sample->regs, sizeof(w.r.regs));
	w.r.known = UNWIND_DELTAS_ALL_REGS;
	w.r.exact_ip = true;
	*status = UNWIND_TRUNCATED;
	u->stats.samples++;
	if (max == 0)
		return 0;
	frames[0] = (struct unwind_frame){ .ip = w.r.regs[UNWIND_REG_IP], .flags = 0 };
	ud_prefetch(sample);
	size_t n = 1;
	for (;;) {
		w.frames = frames;
		w.nframes = n;
		enum ud_step st = ud_step(&w);
		frames[n - 1].module = w.step_module;
		if (w.step_module)
			frames[n - 1].bias = w.step_bias;
		else
			frames[n - 1].frame_word = w.step_frame_word;
		bool bogus = st == UD_STEP_BOGUS;
		if (bogus) {
			n--;	/* the last frame taken was no frame: no call put its return address there */
			st = UD_STEP_FAIL;
		}
		if ((st == UD_STEP_END || st == UD_STEP_FAIL) && w.at_go_switch && !w.switched) {
			w.switch_frame = n - 1;
			st = ud_switch_stack(&w, st);
		}
		if (w.joining && (st != UD_STEP_OK || n == max)) {
			n = ud_join_chain(&w, frames, n, max, status);
			break;
		}
		if (st == UD_STEP_END)
			*status = UNWIND_COMPLETE;
		else if (st == UD_STEP_NO_MODULE && n == 1)
			*status = UNWIND_UNKNOWN_LEAF;
		else if (st == UD_STEP_FAIL && !w.switched && !w.err && !bogus) {
			if (ud_step_by_chain(&w, frames, n, false))
				st = UD_STEP_OK;
			else
				n = ud_follow_chain(&w, frames, n, max, status);
		}
		if (st != UD_STEP_OK || n == max)
			break;
		frames[n] = (struct unwind_frame){ .ip = w.r.regs[UNWIND_REG_IP],
						   .flags = w.r.exact_ip ? UNWIND_FRAME_SIGNAL : 0 };
		n++;
	}
	u->stats.frames += n;
	return w.err ? w.err : (int)n;
}
