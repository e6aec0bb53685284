/*
 * gopclntab.h — a Go binary's function table (.gopclntab): its functions, their stack deltas and their source
 * positions, read from the table alone (pure Go binaries have no .eh_frame; stripped ones have no symbols).
 *
 * Finding the table: the .gopclntab (or .data.rel.ro.gopclntab) section; else the runtime.pclntab symbol; else,
 * in a file that carries a Go build id or build info, a scan of its read-only data for the table's magic.
 * Every table layout since Go 1.2 is read: Go 1.2-1.15 (magic 0xfffffffb), 1.16-1.17 (0xfffffffa), 1.18-1.19
 * (0xfffffff0), 1.20 and later (0xfffffff1). Function addresses of Go >= 1.18 tables are offsets from the start
 * of the Go text, taken from the runtime.text symbol, else the runtime's moduledata, else the header's textStart,
 * else the .text section (each candidate is checked to put the functions in executable code).
 *
 * Stack deltas (x86_64 only): each function's pcsp table says how far SP is below the function's entry SP, so
 * CFA = SP + pcsp + 8 (the return address at CFA - 8). The caller's RBP is saved at CFA - 16 once the prologue
 * has stored it (checked against the code: Go's frame-pointer prologue, in its pre-1.21 "mov %rbp, off(%rsp)" and
 * 1.21+ "push %rbp" forms); functions without that prologue leave RBP alone. Special functions:
 *  - STOP (outermost frames): runtime.goexit, runtime.mstart, runtime.rt0_go, _rt0_* entry stubs, runtime.mcall
 *    (it runs the scheduler on the g0 stack, whose bottom it is), and functions flagged TOPFRAME except
 *    runtime.sigtramp / runtime.cgoSigtramp, whose return address is the kernel's signal frame.
 *  - runtime.morestack: STOP flagged STACK_DELTA_GO_STACK_SWITCH. It moved stack growth onto the g0 stack; the
 *    goroutine that grew, with its callers, is on its own stack, reachable only through runtime structures (the
 *    unwinder's stack-switch hook may follow it there; else the g0 stack ends here).
 *  - Frame-pointer rule (CFA = RBP + 16) flagged STACK_DELTA_GO_STACK_SWITCH: runtime.systemstack and
 *    runtime.asmcgocall. They switch from a goroutine's stack to the g0 stack without a frame of their own; RBP
 *    still holds the goroutine caller's frame pointer, so the walk continues on the goroutine stack when the
 *    sampled stack copy covers it (skipping the one frame that called the switch); otherwise the stack-switch
 *    hook may follow the goroutine, or the walk ends there, truncated (the unwinder rejects a CFA outside the
 *    copy or below SP).
 *  - SIGNAL: runtime.sigreturn and runtime.sigreturn__sigaction (also the byte before them, for return-address
 *    lookups at address - 1).
 *  - Other functions flagged SPWRITE (they move SP in ways pcsp cannot describe): with a frame-pointer prologue
 *    (runtime.nanotime1 and time.now, which switch to g0 for the vDSO; the callCgo* helpers; cgocallback, which
 *    switches from g0 to the goroutine stack), pcsp until RBP is saved and the frame-pointer rule after it (RBP
 *    locates their own frame, so nothing is skipped); without one (gogo, runtime.clone) INVALID: the walk ends
 *    there, truncated, where Go's own traceback stops too.
 *  - INVALID also for functions whose pcsp table is missing or corrupt.
 *
 * Ownership and lifetime: the table borrows the Elf's memory (section data and the file image): keep elf open
 * until gopclntab_free(). Strings returned point into that memory. Lookups load section data on demand through
 * libelf and are therefore not thread-safe; give each thread its own Elf and table if needed.
 *
 * Untrusted input: the file may be hostile. Every offset, count and length is checked against the table's
 * regions and the file; a corrupt header or function table fails gopclntab_open() with -EBADMSG, a corrupt
 * record fails only the call that reads it. Work is bounded by the table's size.
 */
#ifndef HOSTPROF_GOPCLNTAB_H
#define HOSTPROF_GOPCLNTAB_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind/stack_delta_rule.h"

/* Table layout generation (not the exact Go release, which the table does not record). */
enum gopclntab_version {
	GOPCLNTAB_GO12 = 12,	/* Go 1.2 - 1.15 */
	GOPCLNTAB_GO116 = 116,	/* Go 1.16 - 1.17 */
	GOPCLNTAB_GO118 = 118,	/* Go 1.18 - 1.19 */
	GOPCLNTAB_GO120 = 120,	/* Go 1.20 and later */
};

/* _func.flag bits (Go >= 1.17; always 0 in older tables). */
#define GOPCLNTAB_FLAG_TOPFRAME 1u	/* outermost frame of a stack */
#define GOPCLNTAB_FLAG_SPWRITE 2u	/* writes SP other than by fixed adjustments */
#define GOPCLNTAB_FLAG_ASM 4u		/* written in assembly (Go >= 1.21) */

/* One function of the table. */
struct gopclntab_func {
	uint64_t entry, end;	/* ELF virtual addresses; end is the next function's entry */
	const char *name;	/* e.g. "main.main", "net/http.(*conn).serve"; owned by the table */
	uint8_t func_id;	/* runtime funcID (numbering differs between Go releases) */
	uint8_t flag;		/* GOPCLNTAB_FLAG_* */
};

/* The pc-value tables of a function. */
enum gopclntab_pctab {
	GOPCLNTAB_PCSP,		/* SP offset from the entry SP */
	GOPCLNTAB_PCFILE,	/* file number (see gopclntab_file) */
	GOPCLNTAB_PCLN,		/* line number */
	GOPCLNTAB_PCINLINE,	/* index into the inline tree, -1 outside inlined code (Go >= 1.16) */
};

struct gopclntab;

/*
 * Find and parse the table of elf. Returns 0 and *out, -ENOENT when the file is not a Go binary or has no table,
 * -EBADMSG when the table is corrupt (bad header, regions or function table), -ENOMEM.
 */
int gopclntab_open(Elf *elf, struct gopclntab **out);
void gopclntab_free(struct gopclntab *t);

enum gopclntab_version gopclntab_version(const struct gopclntab *t);
/* ELF virtual address of the table's header (0 when the section is not loaded), for diagnostics. */
uint64_t gopclntab_address(const struct gopclntab *t);
size_t gopclntab_func_count(const struct gopclntab *t);
/* [*start, *end): the code the table covers, from the first function's entry to the last one's end. */
void gopclntab_text_range(const struct gopclntab *t, uint64_t *start, uint64_t *end);

/* Function i (< gopclntab_func_count). Returns 0, -ERANGE, or -EBADMSG when its record is corrupt. */
int gopclntab_func(const struct gopclntab *t, size_t i, struct gopclntab_func *out);
/* Index of the function covering va. Returns 0, or -ENOENT. */
int gopclntab_find_func(const struct gopclntab *t, uint64_t va, size_t *index);

/*
 * Called for each run [start, end) of equal value in a pc-value table; a non-zero return stops the walk and is
 * passed back to the caller.
 */
typedef int (*gopclntab_pcvalue_fn)(void *ctx, uint64_t start, uint64_t end, int32_t value);

/*
 * Decode a raw pc-value table of len bytes at p for code starting at entry, up to limit (exclusive), with
 * instruction size quantum: values start at -1, each step adds a zig-zag varint value delta and advances the pc
 * by a varint times quantum; a zero value delta after the first step ends the table. Returns 0, fn's non-zero
 * result, or -EBADMSG for a truncated or overflowing table.
 */
int gopclntab_decode_pcvalue(const uint8_t *p, size_t len, uint64_t entry, uint64_t limit, unsigned quantum,
			     gopclntab_pcvalue_fn fn, void *ctx);

/* The runs of one of function i's tables. Returns 0, fn's result, -ENOENT (no such table), -EBADMSG, -ERANGE. */
int gopclntab_pcvalue_rows(const struct gopclntab *t, size_t i, enum gopclntab_pctab tab, gopclntab_pcvalue_fn fn,
			   void *ctx);
/* The value of one of function i's tables at va. Returns 0, -ENOENT (no table, or va not covered), -EBADMSG. */
int gopclntab_pcvalue(const struct gopclntab *t, size_t i, enum gopclntab_pctab tab, uint64_t va, int32_t *value);

/* Name of file number fileno (a PCFILE value) of function i, or NULL when unknown. */
const char *gopclntab_file(const struct gopclntab *t, size_t i, int32_t fileno);

/*
 * Entry index of function i's inline tree (a PCINLINE value >= 0): the inlined function's name and the address
 * of an instruction of the caller (the function or the enclosing inlined call) that stands for the call site.
 * Returns 0, -ENOENT (no inline tree, or Go < 1.16), -EBADMSG.
 */
int gopclntab_inline(const struct gopclntab *t, size_t i, int32_t index, const char **name, uint64_t *call_va);

/*
 * Called for each stack-delta row, in ascending address order: the rule holds from va up to the next row's va.
 * A non-zero return stops the walk and is passed back to the caller.
 */
typedef int (*gopclntab_rule_fn)(void *ctx, uint64_t va, const struct stack_delta_rule *rule);

/*
 * Emit the stack-delta rows of every function (see the head comment for the special functions), with an INVALID
 * row at the end of the last function. Returns 0, fn's result, -ENOTSUP for a table of another architecture than
 * x86_64.
 */
int gopclntab_for_each_rule(const struct gopclntab *t, gopclntab_rule_fn fn, void *ctx);

#endif
