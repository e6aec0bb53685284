/*
 * fuzz_elf.c — fuzz target: an ELF file from a hostile process, through everything hostprof derives from one:
 * stack-delta tables (.eh_frame/.debug_frame CFI, PLT, capstone analysis, .gopclntab), the Go function table
 * with its names, files, lines and inline tree, the symbolizer (symtab, DWARF lines and inline frames, PLT
 * stubs named from relocations, the signal trampoline) and the call-site check of guessed return addresses.
 * Any crash, leak or sanitizer report is a bug: bad input must only make these calls fail.
 */
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/gosym.h"
#include "symbols/stubs.h"
#include "symbols/symbolizer.h"
#include "tests/fuzz/fuzz_input.h"
#include "unwind/call_site.h"
#include "unwind/gopclntab.h"
#include "unwind/stack_deltas.h"

/* Look up a few addresses of each function of the Go table, as the symbolizer and the unwinder would. */
static void walk_go_table(const struct gopclntab *t)
{
	size_t n = gopclntab_func_count(t);
	for (size_t i = 0; i < n && i < 256; i++) {
		struct gopclntab_func f;
		struct symbol_frame frames[8];
		int32_t v;
		if (gopclntab_func(t, i, &f) < 0)
			continue;
		gosym_lookup(t, f.entry, frames, 8);
		gosym_lookup(t, f.entry + 1, frames, 8);
		gopclntab_pcvalue(t, i, GOPCLNTAB_PCSP, f.entry, &v);
	}
}

static void fuzz_tables(Elf *elf)
{
	struct stack_deltas *d = NULL;
	struct stack_deltas_stats stats;
	if (stack_deltas_build(elf, &d, &stats) == 0) {
		struct stack_delta_rule r;
		size_t rows = stack_deltas_rows(d);
		for (size_t i = 0; i < rows && i < 256; i++) {
			uint64_t va;
			stack_deltas_row(d, i, &va, &r);
			stack_deltas_lookup(d, va, &r);
			stack_deltas_lookup(d, va - 1, &r);
		}
		stack_deltas_free(d);
	}
	struct gopclntab *t = NULL;
	if (gopclntab_open(elf, &t) == 0) {
		walk_go_table(t);
		gopclntab_free(t);
	}
}

/* The low addresses, where small files keep their PLT and code: every stub entry, a return address per 16 bytes. */
static void fuzz_code_checks(Elf *elf)
{
	struct stub_names *stubs = NULL;
	struct call_site *calls = NULL;
	call_site_new(&calls);
	if (stub_names_new(elf, &stubs) == 0) {
		for (uint64_t va = 0; va < 0x4000; va += 8)
			stub_names_plt(stubs, va);
		stub_names_free(stubs);
	}
	for (uint64_t va = 0; va < 0x4000 && calls; va += 16) {
		call_site_follows_call(calls, elf, NULL, va);
		stub_is_sigreturn(elf, -1, va);
	}
	call_site_free(calls);
}

static void fuzz_symbolizer(int fd)
{
	char path[64];
	struct symbolizer *s;
	fuzz_input_path(fd, path, sizeof(path));
	if (symbolizer_open(path, fd, &s) < 0)
		return;
	struct symbol_frame frames[16];
	for (uint64_t va = 0; va < 0x10000; va += 0x100)
		symbolizer_lookup(s, va, frames, 16);
	symbolizer_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready)
		ready = elf_version(EV_CURRENT) != EV_NONE;
	/* elf_memory() wants a writable image it may convert in place: give it a copy. */
	char *image = malloc(size ? size : 1);
	if (!image)
		return 0;
	memcpy(image, data, size);
	Elf *elf = elf_memory(image, size);
	if (elf) {
		if (elf_kind(elf) == ELF_K_ELF) {
			fuzz_tables(elf);
			fuzz_code_checks(elf);
		}
		elf_end(elf);
	}
	free(image);
	int fd = fuzz_input_fd(data, size);
	if (fd >= 0) {
		fuzz_symbolizer(fd);
		close(fd);
	}
	return 0;
}
