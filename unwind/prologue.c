/*
 * prologue.c — rules for code without CFI from a linear sweep of its instructions. See prologue.h.
 */
#include "unwind/prologue.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Largest stack frame the analysis believes in. */
#define PL_MAX_FRAME (1 << 24)

struct prologue {
	csh cs;
	cs_insn *insn;		/* capstone's decoding buffer */
	uint64_t *targets;	/* prologue_call_targets' answer */
	size_t ntargets, targets_cap;
};

int prologue_new(struct prologue **out)
{
	struct prologue *p = calloc(1, sizeof(*p));
	*out = NULL;
	if (!p)
		return -ENOMEM;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &p->cs) != CS_ERR_OK) {
		free(p);
		return -ENOTSUP;
	}
	if (cs_option(p->cs, CS_OPT_DETAIL, CS_OPT_ON) != CS_ERR_OK || !(p->insn = cs_malloc(p->cs))) {
		cs_close(&p->cs);
		free(p);
		return -ENOTSUP;
	}
	*out = p;
	return 0;
}

void prologue_free(struct prologue *p)
{
	if (!p)
		return;
	cs_free(p->insn, 1);
	cs_close(&p->cs);
	free(p->targets);
	free(p);
}

/* ---- the frame as the sweep knows it ---------------------------------------------------------------------- */

/* What the prologue analysis knows about the frame at an instruction. */
struct pl_frame_state {
	bool known;
	bool cfa_fp;		/* CFA = FP + cfa_off, else SP + cfa_off */
	bool fp_saved;		/* the caller's FP is at CFA + fp_off */
	int32_t cfa_off, fp_off;
};

static const struct pl_frame_state pl_entry_state = { .known = true, .cfa_off = 8 };

static struct stack_delta_rule pl_state_rule(const struct pl_frame_state *s)
{
	if (!s->known)
		return stack_delta_rule_rbp_frame(STACK_DELTA_GUESSED);
	struct stack_delta_rule r = stack_delta_rule_make(s->cfa_fp ? STACK_DELTA_CFA_FP : STACK_DELTA_CFA_SP);
	r.cfa_off = s->cfa_off;
	r.aux = STACK_DELTA_GUESSED;	/* the analysis reads code, not CFI: its callers are checked */
	if (s->fp_saved) {
		r.fp = STACK_DELTA_FP_AT_CFA;
		r.fp_off = (int16_t)s->fp_off;
	}
	return r;
}

static bool pl_op_is_reg(const cs_x86_op *op, x86_reg reg)
{
	return op->type == X86_OP_REG && op->reg == reg;
}

/* Grow (d > 0) or shrink an SP-based frame by d bytes. */
static void pl_state_adjust(struct pl_frame_state *s, int64_t d)
{
	if (s->cfa_fp)
		return;		/* SP moves do not affect an FP-based CFA */
	int64_t off = (int64_t)s->cfa_off + d;
	if (off < 8 || off > PL_MAX_FRAME)
		s->known = false;
	else
		s->cfa_off = (int32_t)off;
}

static void pl_state_push(struct pl_frame_state *s, const cs_x86 *x)
{
	unsigned size = x->op_count == 1 && x->operands[0].type == X86_OP_REG && x->operands[0].size ?
			x->operands[0].size : 8;
	pl_state_adjust(s, size);
	if (x->op_count == 1 && pl_op_is_reg(&x->operands[0], X86_REG_RBP) && !s->fp_saved && !s->cfa_fp &&
	    s->known && s->cfa_off <= -INT16_MIN) {
		s->fp_saved = true;
		s->fp_off = -s->cfa_off;
	}
}

static void pl_state_pop(struct pl_frame_state *s, const cs_x86 *x)
{
	bool rbp = x->op_count == 1 && pl_op_is_reg(&x->operands[0], X86_REG_RBP);
	if (rbp && s->cfa_fp) {
		s->known = false;	/* the CFA's base register is being replaced */
		return;
	}
	pl_state_adjust(s, -8);
	if (rbp)
		s->fp_saved = false;
}

/* Whether the instruction writes reg, explicitly or implicitly. */
static bool pl_writes(const cs_insn *insn, x86_reg reg)
{
	const cs_detail *d = insn->detail;
	for (uint8_t i = 0; i < d->regs_write_count; i++)
		if (d->regs_write[i] == reg)
			return true;
	for (uint8_t i = 0; i < d->x86.op_count; i++) {
		const cs_x86_op *op = &d->x86.operands[i];
		if (op->type == X86_OP_REG && op->reg == reg && (op->access & CS_AC_WRITE))
			return true;
	}
	return false;
}

/* mov/lea/add/sub on rsp or rbp. Returns false if the instruction is not one of the known forms. */
static bool pl_state_arith(struct pl_frame_state *s, const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	if (x->op_count != 2)
		return false;
	const cs_x86_op *dst = &x->operands[0], *src = &x->operands[1];
	switch (insn->id) {
	case X86_INS_MOV:
		/* mov rbp, rsp sets up a frame only right on top of the saved rbp; elsewhere rbp is a general
		 * register taking a stack address. */
		if (pl_op_is_reg(dst, X86_REG_RBP) && pl_op_is_reg(src, X86_REG_RSP) && !s->cfa_fp && s->fp_saved &&
		    s->fp_off == -s->cfa_off) {
			s->cfa_fp = true;	/* CFA = rbp + the same offset */
			return true;
		}
		if (pl_op_is_reg(dst, X86_REG_RSP) && pl_op_is_reg(src, X86_REG_RBP) && s->cfa_fp) {
			s->cfa_fp = false;	/* mov rsp, rbp: back to SP, same offset */
			return true;
		}
		return false;
	case X86_INS_SUB:
	case X86_INS_ADD:
		if (!pl_op_is_reg(dst, X86_REG_RSP) || src->type != X86_OP_IMM)
			return false;
		pl_state_adjust(s, insn->id == X86_INS_SUB ? src->imm : -src->imm);
		return true;
	case X86_INS_LEA:
		if (!pl_op_is_reg(dst, X86_REG_RSP) || src->type != X86_OP_MEM || src->mem.index != X86_REG_INVALID)
			return false;
		if (src->mem.base == X86_REG_RSP) {
			pl_state_adjust(s, -src->mem.disp);
			return true;
		}
		if (src->mem.base == X86_REG_RBP && s->cfa_fp) {
			s->cfa_fp = false;	/* rsp = rbp + disp, so CFA = rsp - disp + off */
			pl_state_adjust(s, -src->mem.disp);
			return true;
		}
		return false;
	default:
		return false;
	}
}

/* Apply one instruction; returns true for ret and unconditional jumps (control does not fall through). */
static bool pl_state_step(struct pl_frame_state *s, const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	switch (insn->id) {
	case X86_INS_PUSH: pl_state_push(s, x); return false;
	case X86_INS_PUSHFQ: pl_state_adjust(s, 8); return false;
	case X86_INS_POP: pl_state_pop(s, x); return false;
	case X86_INS_POPFQ: pl_state_adjust(s, -8); return false;
	case X86_INS_LEAVE:
		if (!s->cfa_fp || s->cfa_off < 16) {
			s->known = false;
			return false;
		}
		s->cfa_fp = false;	/* mov rsp, rbp; pop rbp */
		s->cfa_off -= 8;
		s->fp_saved = false;
		return false;
	case X86_INS_RET:
	case X86_INS_RETF:
	case X86_INS_JMP:
	case X86_INS_LJMP:
	case X86_INS_HLT:
	case X86_INS_UD2:
		return true;
	case X86_INS_CALL:
		return false;	/* the callee pops what the call pushes */
	default:
		break;
	}
	if (pl_state_arith(s, insn))
		return false;
	if ((!s->cfa_fp && pl_writes(insn, X86_REG_RSP)) || (s->cfa_fp && pl_writes(insn, X86_REG_RBP)))
		s->known = false;
	return false;
}

static bool pl_is_padding(const cs_insn *insn)
{
	return insn->id == X86_INS_NOP || insn->id == X86_INS_INT3;
}

/* Whether the instruction typically opens a function: endbr64, push of a register, sub rsp. Code after a jump
 * that starts this way is a new function (reached by a tail call or a pointer) rather than another path of the
 * current one, whose other paths do not set up a frame again. */
static bool pl_starts_frame(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	switch (insn->id) {
	case X86_INS_ENDBR64:
		return true;
	case X86_INS_PUSH:
		return x->op_count == 1 && x->operands[0].type == X86_OP_REG;
	case X86_INS_SUB:
		return x->op_count == 2 && pl_op_is_reg(&x->operands[0], X86_REG_RSP);
	default:
		return false;
	}
}

/* Whether the instruction shrinks the frame: the start of an epilogue. */
static bool pl_shrinks(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	if (insn->id == X86_INS_POP || insn->id == X86_INS_POPFQ || insn->id == X86_INS_LEAVE)
		return true;
	if (x->op_count != 2 || !pl_op_is_reg(&x->operands[0], X86_REG_RSP))
		return false;
	const cs_x86_op *src = &x->operands[1];
	switch (insn->id) {
	case X86_INS_ADD: return src->type == X86_OP_IMM && src->imm > 0;
	case X86_INS_LEA: return src->type == X86_OP_MEM && (src->mem.base != X86_REG_RSP || src->mem.disp > 0);
	case X86_INS_MOV: return true;
	default: return false;
	}
}

/* ---- the sweep -------------------------------------------------------------------------------------------- */

/* Passes a rule on only where it changes. */
struct pl_emitter {
	prologue_rule_fn fn;
	void *ctx;
	bool have_last;
	struct stack_delta_rule last;
};

static void pl_emit(struct pl_emitter *em, uint64_t va, const struct stack_delta_rule *r)
{
	if (em->have_last && memcmp(&em->last, r, sizeof(*r)) == 0)
		return;
	em->fn(em->ctx, va, r);
	em->last = *r;
	em->have_last = true;
}

/*
 * Linear sweep over [start, end) tracking the CFA through push/pop/sub/add/mov rbp,rsp/leave. After a ret or
 * jmp, code continues either a new function (after padding) or another path of the same one, which runs with
 * the frame as it was before the epilogue began ("body").
 */
void prologue_sweep(struct prologue *p, const uint8_t *code, uint64_t start, uint64_t end, prologue_rule_fn fn,
		    void *ctx)
{
	struct pl_emitter em = { fn, ctx, false, { 0 } };
	struct pl_frame_state s = pl_entry_state, body = pl_entry_state;
	bool epilogue = false, after_jump = false;
	size_t size = (size_t)(end - start);
	uint64_t addr = start;
	while (addr < end) {
		uint64_t here = addr;
		if (!cs_disasm_iter(p->cs, &code, &size, &addr, p->insn)) {
			struct stack_delta_rule fp = stack_delta_rule_rbp_frame(STACK_DELTA_GUESSED);
			pl_emit(&em, here, &fp);	/* undecodable: data in code, or a truncated instruction */
			break;
		}
		if (after_jump && pl_starts_frame(p->insn)) {
			s = body = pl_entry_state;	/* a prologue right after a jump: a new function */
			epilogue = false;
		}
		struct stack_delta_rule r = pl_state_rule(&s);
		pl_emit(&em, here, &r);
		bool shrinks = pl_shrinks(p->insn);
		if (!epilogue && shrinks) {
			body = s;
			epilogue = true;
		}
		struct pl_frame_state before = s;
		bool jumped = pl_state_step(&s, p->insn);
		after_jump = jumped || (after_jump && pl_is_padding(p->insn));
		if (s.known && !shrinks && (s.cfa_off > before.cfa_off || s.cfa_fp != before.cfa_fp)) {
			body = s;
			epilogue = false;
		}
		if (jumped) {
			s = body;
			epilogue = false;
		}
	}
}

static int pl_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int prologue_call_targets(struct prologue *p, const uint8_t *code, uint64_t start, uint64_t end,
			  const uint64_t **targets, size_t *n)
{
	size_t size = (size_t)(end - start);
	uint64_t addr = start;
	p->ntargets = 0;
	while (addr < end) {
		if (!cs_disasm_iter(p->cs, &code, &size, &addr, p->insn)) {
			code++;		/* resynchronise a byte later */
			size--;
			addr++;
			continue;
		}
		const cs_x86 *x = &p->insn->detail->x86;
		if (p->insn->id != X86_INS_CALL || x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
			continue;
		uint64_t t = (uint64_t)x->operands[0].imm;
		if (t <= start || t >= end)
			continue;
		if (p->ntargets == p->targets_cap) {
			size_t cap = p->targets_cap ? p->targets_cap * 2 : 256;
			uint64_t *n = realloc(p->targets, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			p->targets = n;
			p->targets_cap = cap;
		}
		p->targets[p->ntargets++] = t;
	}
	if (p->ntargets > 1)
		qsort(p->targets, p->ntargets, sizeof(*p->targets), pl_u64_cmp);
	*targets = p->targets;
	*n = p->ntargets;
	return 0;
}
