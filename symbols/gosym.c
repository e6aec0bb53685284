/*
 * gosym.c — Go symbolization over a parsed function table. See gosym.h.
 *
 * At a pc the PCINLINE table gives the innermost inlined call (an index into the function's inline tree) or -1
 * for the function itself; PCFILE and PCLN give the innermost source position. Each inline tree entry names the
 * inlined function and points at an instruction of its caller that stands for the call site, whose own PCINLINE,
 * PCFILE and PCLN values describe the next frame out — as the Go runtime's inlineUnwinder walks it.
 */
#include "symbols/gosym.h"

#include <string.h>

/* Deepest inline chain followed: a hostile tree could otherwise loop through parent call sites forever. */
#define GOSYM_MAX_DEPTH 64

/* Fill one frame: name as given, file and line of the source position at pc. */
static void gosym_frame(const struct gopclntab *t, size_t fi, uint64_t pc, const char *name, int inlined,
			struct symbol_frame *out)
{
	int32_t fileno, line;
	out->function = name;
	out->file = gopclntab_pcvalue(t, fi, GOPCLNTAB_PCFILE, pc, &fileno) == 0 ? gopclntab_file(t, fi, fileno)
										  : NULL;
	out->line = gopclntab_pcvalue(t, fi, GOPCLNTAB_PCLN, pc, &line) == 0 && line > 0 ? line : 0;
	out->inlined = inlined;
	out->go = 1;
}

int gosym_lookup(const struct gopclntab *t, uint64_t elf_va, struct symbol_frame *frames, size_t max)
{
	struct gopclntab_func f;
	size_t fi, n = 0;
	uint64_t pc = elf_va;
	if (max == 0 || gopclntab_find_func(t, elf_va, &fi) < 0 || gopclntab_func(t, fi, &f) < 0)
		return 0;
	for (int depth = 0; n < max; depth++) {
		int32_t idx = -1;
		const char *name = f.name;
		uint64_t call_va = 0;
		if (depth < GOSYM_MAX_DEPTH && gopclntab_pcvalue(t, fi, GOPCLNTAB_PCINLINE, pc, &idx) == 0 && idx >= 0 &&
		    gopclntab_inline(t, fi, idx, &name, &call_va) < 0) {
			idx = -1;
			name = f.name;
		}
		gosym_frame(t, fi, pc, name, idx >= 0, &frames[n++]);
		if (idx < 0)
			break;
		pc = call_va;
	}
	return (int)n;
}
