/*
 * prologue.h — stack-delta rules for x86_64 code that has no CFI, read from the code itself.
 *
 * A linear sweep with capstone over one function's bytes tracks where the CFA is through its prologue and
 * epilogues: push/pop (and pushfq/popfq), sub/add/lea on rsp, mov %rsp,%rbp right on top of the saved rbp, mov
 * %rbp,%rsp, leave. After a ret or an unconditional jump, the code that follows is either another path of the
 * same function, which runs with the frame it had before its epilogue began, or (when it opens like one:
 * endbr64, a register push, sub rsp) a new function reached by a tail call or a pointer. Where the sweep loses
 * track (an instruction writes rsp, or rbp while it holds the CFA, in a way it does not model) or cannot decode
 * (data in code), the rule is the frame-pointer convention. Every rule it gives is STACK_DELTA_GUESSED: read
 * from code, not from CFI, so the unwinder checks the callers it finds (call_site.h).
 *
 * Splitting code into functions is the caller's: at symbols, and at the targets of direct calls
 * (prologue_call_targets), which start functions in code without symbols.
 *
 * Ownership: prologue_new() opens a capstone handle, prologue_free() closes it. Not thread-safe: one per table
 * build. Untrusted input: the bytes may be anything; frames over 16 MiB are not believed (the rule becomes the
 * frame-pointer convention), and the work is linear in the bytes given (the caller bounds them).
 */
#ifndef HOSTPROF_UNWIND_PROLOGUE_H
#define HOSTPROF_UNWIND_PROLOGUE_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/stack_delta_rule.h"

struct prologue;

/* Returns 0 and *out, -ENOMEM, or -ENOTSUP when capstone cannot decode x86_64 with details here. */
int prologue_new(struct prologue **out);
void prologue_free(struct prologue *p);

/* Called with the rule in effect from ELF address va on, each time it changes (the first at the sweep's start). */
typedef void (*prologue_rule_fn)(void *ctx, uint64_t va, const struct stack_delta_rule *rule);

/*
 * The rules of one function: code holds the bytes of [start, end) (ELF addresses), and execution enters at start
 * with the return address just pushed (CFA = SP + 8).
 */
void prologue_sweep(struct prologue *p, const uint8_t *code, uint64_t start, uint64_t end, prologue_rule_fn fn,
		    void *ctx);

/*
 * The targets of direct calls strictly inside (start, end), sorted (duplicates kept): where functions start in
 * code without symbols. code holds the bytes of [start, end); an undecodable byte is stepped over. Returns 0 with
 * *targets and *n (owned by p, valid until its next call), or -ENOMEM.
 */
int prologue_call_targets(struct prologue *p, const uint8_t *code, uint64_t start, uint64_t end,
			  const uint64_t **targets, size_t *n);

#endif
