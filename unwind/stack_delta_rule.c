/*
 * stack_delta_rule.c — making, reading and printing one stack-delta rule. See stack_delta_rule.h.
 */
#include "unwind/stack_delta_rule.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct stack_delta_rule stack_delta_rule_make(enum stack_delta_kind kind)
{
	struct stack_delta_rule r;
	memset(&r, 0, sizeof(r));
	r.kind = (uint8_t)kind;
	return r;
}

struct stack_delta_rule stack_delta_rule_rbp_frame(int32_t aux)
{
	struct stack_delta_rule r = stack_delta_rule_make(STACK_DELTA_CFA_FP);
	r.cfa_off = 16;
	r.fp = STACK_DELTA_FP_AT_CFA;
	r.fp_off = -16;
	r.aux = aux;
	return r;
}

bool stack_delta_rule_frame_pointer(const struct stack_delta_rule *r, uint64_t sp, uint64_t *fp)
{
	if (r->kind != STACK_DELTA_CFA_SP || r->fp != STACK_DELTA_FP_AT_CFA || r->fp_off != -16)
		return false;
	*fp = sp + (uint64_t)(int64_t)r->cfa_off - 16;
	return true;
}

void stack_delta_rule_format(const struct stack_delta_rule *r, char *buf, size_t len)
{
	static const char *const kinds[] = { "invalid", "cfa=sp", "cfa=fp", "cfa=*(sp", "cfa=*(fp", "plt",
					     "signal", "stop", "fallback" };
	const char *k = r->kind < sizeof(kinds) / sizeof(kinds[0]) ? kinds[r->kind] : "?";
	int n;
	switch (r->kind) {
	case STACK_DELTA_CFA_SP:
	case STACK_DELTA_CFA_FP:
		n = snprintf(buf, len, "%s%+" PRId32, k, r->cfa_off);
		break;
	case STACK_DELTA_CFA_SP_DEREF:
	case STACK_DELTA_CFA_FP_DEREF:
		n = snprintf(buf, len, "%s%+" PRId32 ")%+" PRId32, k, r->cfa_off, r->aux);
		break;
	case STACK_DELTA_PLT:
		n = snprintf(buf, len, "plt sp%+" PRId32 " ip&15>=%" PRId32, r->cfa_off, r->aux);
		break;
	default:
		n = snprintf(buf, len, "%s%s", k,
			     r->kind == STACK_DELTA_STOP && (r->aux & STACK_DELTA_GO_STACK_SWITCH) ? " go-switch" : "");
		return;
	}
	if (n < 0 || (size_t)n >= len)
		return;
	if (r->kind == STACK_DELTA_CFA_FP && (r->aux & STACK_DELTA_GO_STACK_SWITCH)) {
		int m = snprintf(buf + n, len - (size_t)n, " go-switch");
		if (m < 0 || (size_t)m >= len - (size_t)n)
			return;
		n += m;
	}
	if (r->fp == STACK_DELTA_FP_AT_CFA)
		snprintf(buf + n, len - (size_t)n, " fp=[cfa%+d]", r->fp_off);
	else if (r->fp == STACK_DELTA_FP_AT_FP)
		snprintf(buf + n, len - (size_t)n, " fp=[fp%+d]", r->fp_off);
}
