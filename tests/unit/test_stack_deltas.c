/*
 * Unit tests for unwind/stack_deltas.c: fixtures assembled at test time with explicit CFI (and without), whose
 * rows are checked at labelled addresses; libc and this binary for scale, PLT and signal frames; corrupted
 * inputs for robustness.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwind/stack_deltas.h"
#include "tests/lib/testlib.h"

#define LIBC_PATH "/usr/lib/x86_64-linux-gnu/libc.so.6"

/* Functions with CFI of every kind the table knows, then functions without CFI. Labels mark the addresses
 * the tests check; they are local NOTYPE symbols, so they split nothing. */
static const char fixture_asm[] =
	"	.text\n"
	"	.p2align 4\n"
	"	.type sp_func,@function\n"
	"sp_func:\n"
	"	.cfi_startproc\n"
	"	push %rbx\n"
	"sp_after_push:\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbx, -16\n"
	"	sub $32, %rsp\n"
	"sp_body:\n"
	"	.cfi_def_cfa_offset 48\n"
	"	call leaf_nocfi\n"
	"	nop\n"
	"sp_same:\n"
	"	.cfi_def_cfa_offset 48\n"	/* a row equal to the previous one: must be merged */
	"	nop\n"
	"	add $32, %rsp\n"
	"sp_after_add:\n"
	"	.cfi_def_cfa_offset 16\n"
	"	pop %rbx\n"
	"sp_ret:\n"
	"	.cfi_def_cfa_offset 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size sp_func,.-sp_func\n"
	"\n"
	"	.p2align 4\n"
	"	.type fp_func,@function\n"
	"fp_func:\n"
	"	.cfi_startproc\n"
	"	push %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbp, -16\n"
	"	mov %rsp, %rbp\n"
	"fp_body:\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	sub $16, %rsp\n"
	"	call leaf_nocfi\n"
	"	leave\n"
	"fp_ret:\n"
	"	.cfi_def_cfa %rsp, 8\n"
	"	.cfi_restore %rbp\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size fp_func,.-fp_func\n"
	"\n"
	"	.p2align 4\n"
	"	.type plt_like,@function\n"
	"plt_like:\n"
	"	.cfi_startproc\n"
	/* DW_CFA_def_cfa_expression: breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl; plus */
	"	.cfi_escape 0x0f,0x0b,0x77,0x08,0x80,0x00,0x3f,0x1a,0x3b,0x2a,0x33,0x24,0x22\n"
	"	nop\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size plt_like,.-plt_like\n"
	"\n"
	"	.p2align 4\n"
	"	.type drap_func,@function\n"
	"drap_func:\n"
	"	.cfi_startproc\n"
	"	lea 8(%rsp), %r10\n"
	"drap_r10:\n"
	"	.cfi_def_cfa %r10, 0\n"
	"	and $-32, %rsp\n"
	"	push -8(%r10)\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	.cfi_escape 0x10,0x06,0x02,0x76,0x00\n"	/* DW_CFA_expression rbp: breg6 0 */
	"	push %r10\n"
	"drap_body:\n"
	"	.cfi_escape 0x0f,0x03,0x76,0x78,0x06\n"	/* DW_CFA_def_cfa_expression: breg6 -8; deref */
	"	nop\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size drap_func,.-drap_func\n"
	"\n"
	"	.p2align 4\n"
	"	.type bad_expr,@function\n"
	"bad_expr:\n"
	"	.cfi_startproc\n"
	"	.cfi_escape 0x0f,0x04,0x77,0x08,0x31,0x22\n"	/* breg7 8; lit1; plus: not a known shape */
	"	nop\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size bad_expr,.-bad_expr\n"
	"\n"
	"	.p2align 4\n"
	"	.type ra_in_reg,@function\n"
	"ra_in_reg:\n"
	"	.cfi_startproc\n"
	"	pop %rdi\n"
	"ra_popped:\n"
	"	.cfi_def_cfa_offset 0\n"
	"	.cfi_register %rip, %rdi\n"
	"	jmp *%rdi\n"
	"	.cfi_endproc\n"
	"	.size ra_in_reg,.-ra_in_reg\n"
	"\n"
	"	.p2align 4\n"
	"	.type stop_func,@function\n"
	"stop_func:\n"
	"	.cfi_startproc\n"
	"	.cfi_undefined %rip\n"
	"	xor %ebp, %ebp\n"
	"	call leaf_nocfi\n"
	"	hlt\n"
	"	.cfi_endproc\n"
	"	.size stop_func,.-stop_func\n"
	"\n"
	"	.p2align 5\n"
	"	.type sig_func,@function\n"
	"sig_func:\n"
	"	.cfi_startproc\n"
	"	.cfi_signal_frame\n"
	"	mov $15, %rax\n"
	"	syscall\n"
	"	.cfi_endproc\n"
	"	.size sig_func,.-sig_func\n"
	"\n"
	"	.p2align 5\n"
	"	.type nocfi_fp,@function\n"
	"nocfi_fp:\n"
	"	push %rbp\n"
	"nocfi_fp_pushed:\n"
	"	mov %rsp, %rbp\n"
	"nocfi_fp_body:\n"
	"	sub $16, %rsp\n"
	"	call leaf_nocfi\n"
	"	leave\n"
	"nocfi_fp_ret:\n"
	"	ret\n"
	"	.size nocfi_fp,.-nocfi_fp\n"
	"\n"
	"	.p2align 4\n"
	"	.type leaf_nocfi,@function\n"
	"leaf_nocfi:\n"
	"	mov $1, %eax\n"
	"	add %edi, %eax\n"
	"	ret\n"
	"	.size leaf_nocfi,.-leaf_nocfi\n"
	"\n"
	"	.p2align 4\n"
	"	.type nocfi_frameless,@function\n"
	"nocfi_frameless:\n"
	"	push %rbx\n"
	"nocfi_fl_pushed:\n"
	"	sub $16, %rsp\n"
	"nocfi_fl_body:\n"
	"	call leaf_nocfi\n"
	"	test %eax, %eax\n"
	"	je nocfi_fl_path2\n"
	"	add $16, %rsp\n"
	"	pop %rbx\n"
	"nocfi_fl_ret:\n"
	"	ret\n"
	"nocfi_fl_path2:\n"
	"	mov $2, %eax\n"
	"	add $16, %rsp\n"
	"	pop %rbx\n"
	"	ret\n"
	"	.size nocfi_frameless,.-nocfi_frameless\n";

/* The same kind of function, with its CFI in .debug_frame only. */
static const char debug_frame_asm[] =
	"	.cfi_sections .debug_frame\n"
	"	.text\n"
	"	.p2align 4\n"
	"	.type dbg_func,@function\n"
	"dbg_func:\n"
	"	.cfi_startproc\n"
	"	push %rbx\n"
	"dbg_pushed:\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbx, -16\n"
	"	pop %rbx\n"
	"dbg_ret:\n"
	"	.cfi_def_cfa_offset 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size dbg_func,.-dbg_func\n";

/* With both_frame_asm (CFI in .eh_frame and .debug_frame) linked in: a function described twice. */
static const char both_frame_asm[] =
	"	.cfi_sections .eh_frame, .debug_frame\n"
	"	.text\n"
	"	.p2align 4\n"
	"	.type both_func,@function\n"
	"both_func:\n"
	"	.cfi_startproc\n"
	"	sub $24, %rsp\n"
	"both_body:\n"
	"	.cfi_def_cfa_offset 32\n"
	"	add $24, %rsp\n"
	"	.cfi_def_cfa_offset 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size both_func,.-both_func\n";

/* A static program whose entry point has no CFI. */
static const char entry_asm[] =
	"	.text\n"
	"	.globl _start\n"
	"	.type _start,@function\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	mov %rsp, %rdi\n"
	"	call main_like\n"
	"	hlt\n"
	"	.size _start,.-_start\n"
	"	.p2align 4\n"
	"	.type main_like,@function\n"
	"main_like:\n"
	"	.cfi_startproc\n"
	"	mov $60, %eax\n"
	"	syscall\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size main_like,.-main_like\n";

/* A stripped program whose entry point is no symbol's and no call's target, right after other code without CFI. */
static const char stripped_entry_asm[] =
	"	.text\n"
	"	.type before,@function\n"
	"before:\n"
	"	push %rbx\n"
	"	pop %rbx\n"
	"	ret\n"
	"	.size before,.-before\n"
	"	.globl _start\n"
	"	.type _start,@function\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	mov %rsp, %rdi\n"
	"	call main_like\n"
	"	hlt\n"
	"	.size _start,.-_start\n"
	"	.type main_like,@function\n"
	"main_like:\n"
	"	mov $60, %eax\n"
	"	syscall\n"
	"	ret\n"
	"	.size main_like,.-main_like\n";

struct fixture {
	char dir[64];
	int fd;
	Elf *elf;		/* fixture.so */
	struct stack_deltas *t;
	struct stack_deltas_stats st;
};

static struct fixture *fx;

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -1;
}

/* Assemble and link dir/name from src (and, when given, a second source src2). */
static int build_asm2(const char *dir, const char *name, const char *src, const char *src2, const char *flags)
{
	char path[128], path2[128] = "", cmd[512];
	snprintf(path, sizeof(path), "%s/%s.s", dir, name);
	if (write_text(path, src) < 0)
		return -1;
	if (src2) {
		snprintf(path2, sizeof(path2), "%s/%s.2.s", dir, name);
		if (write_text(path2, src2) < 0)
			return -1;
	}
	snprintf(cmd, sizeof(cmd), "gcc %s -nostdlib -o %s/%s %s %s", flags, dir, name, path, path2);
	return system(cmd) == 0 ? 0 : -1;
}

static int build_asm(const char *dir, const char *name, const char *src, const char *flags)
{
	return build_asm2(dir, name, src, NULL, flags);
}

static Elf *open_elf(const char *path, int *fd)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	return *fd < 0 ? NULL : elf_begin(*fd, ELF_C_READ_MMAP, NULL);
}

static void close_elf(Elf *elf, int fd)
{
	elf_end(elf);
	if (fd >= 0)
		close(fd);
}

static int group_setup(void **state)
{
	(void)state;
	elf_version(EV_CURRENT);
	fx = calloc(1, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/hostprof-sd-XXXXXX");
	if (!fx || !mkdtemp(fx->dir))
		return -1;
	if (build_asm(fx->dir, "fixture.so", fixture_asm, "-shared") < 0 ||
	    build_asm(fx->dir, "debug_frame.so", debug_frame_asm, "-shared") < 0 ||
	    build_asm2(fx->dir, "both_frames.so", debug_frame_asm, both_frame_asm, "-shared") < 0 ||
	    build_asm(fx->dir, "entry", entry_asm, "-static") < 0 ||
	    build_asm(fx->dir, "entry_stripped", stripped_entry_asm, "-static -s") < 0)
		return -1;
	char path[128];
	snprintf(path, sizeof(path), "%s/fixture.so", fx->dir);
	fx->elf = open_elf(path, &fx->fd);
	if (!fx->elf || stack_deltas_build(fx->elf, &fx->t, &fx->st) != 0)
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	char cmd[128];
	stack_deltas_free(fx->t);
	close_elf(fx->elf, fx->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", fx->dir);
	if (system(cmd) != 0)
		return -1;
	free(fx);
	return 0;
}

/* Value of a .symtab symbol; fails the test when absent. */
static uint64_t sym(Elf *elf, const char *name)
{
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sizeof(Elf64_Sym); i++) {
			GElf_Sym s;
			const char *n;
			if (gelf_getsym(d, (int)i, &s) && (n = elf_strptr(elf, sh.sh_link, s.st_name)) && strcmp(n, name) == 0)
				return s.st_value;
		}
	}
	fail_msg("no symbol %s", name);
	return 0;
}

/* The rule at va, formatted. */
static const char *rule_at(const struct stack_deltas *t, uint64_t va, char *buf, size_t len)
{
	struct stack_delta_rule r;
	stack_deltas_lookup(t, va, &r);
	stack_delta_rule_format(&r, buf, len);
	return buf;
}

static void expect_rule(const struct stack_deltas *t, uint64_t va, const char *want)
{
	char buf[96];
	rule_at(t, va, buf, sizeof(buf));
	if (strcmp(buf, want) != 0)
		fail_msg("at %#llx: got \"%s\", want \"%s\"", (unsigned long long)va, buf, want);
}

static void expect_sym_rule(const char *name, int64_t delta, const char *want)
{
	expect_rule(fx->t, sym(fx->elf, name) + (uint64_t)delta, want);
}

static void test_sp_based(void **state)
{
	(void)state;
	expect_sym_rule("sp_func", 0, "cfa=sp+8");
	expect_sym_rule("sp_after_push", 0, "cfa=sp+16");
	expect_sym_rule("sp_after_push", -1, "cfa=sp+8");
	expect_sym_rule("sp_body", 0, "cfa=sp+48");
	expect_sym_rule("sp_after_add", -1, "cfa=sp+48");
	expect_sym_rule("sp_after_add", 0, "cfa=sp+16");
	expect_sym_rule("sp_ret", 0, "cfa=sp+8");
}

static void test_fp_based(void **state)
{
	(void)state;
	expect_sym_rule("fp_func", 0, "cfa=sp+8");
	expect_sym_rule("fp_func", 1, "cfa=sp+16 fp=[cfa-16]");
	expect_sym_rule("fp_body", 0, "cfa=fp+16 fp=[cfa-16]");
	expect_sym_rule("fp_ret", -1, "cfa=fp+16 fp=[cfa-16]");
	expect_sym_rule("fp_ret", 0, "cfa=sp+8");
}

static void test_expressions(void **state)
{
	(void)state;
	expect_sym_rule("plt_like", 0, "plt sp+8 ip&15>=11");
	expect_sym_rule("drap_func", 0, "cfa=sp+8");
	expect_sym_rule("drap_body", 0, "cfa=*(fp-8)+0 fp=[fp+0]");
	expect_sym_rule("drap_body", 1, "cfa=*(fp-8)+0 fp=[fp+0]");
}

/* What the rules cannot express is FALLBACK for exactly those rows. */
static void test_fallback_rows(void **state)
{
	(void)state;
	expect_sym_rule("drap_r10", 0, "fallback");
	expect_sym_rule("drap_body", -1, "fallback");
	expect_sym_rule("bad_expr", 0, "fallback");
	expect_sym_rule("ra_in_reg", 0, "cfa=sp+8");
	expect_sym_rule("ra_popped", 0, "fallback");
	assert_true(fx->st.fallback_rows >= 3);
}

static void test_stop_and_signal(void **state)
{
	(void)state;
	expect_sym_rule("stop_func", 0, "stop");
	expect_sym_rule("stop_func", 3, "stop");
	expect_sym_rule("sig_func", 0, "signal");
	/* Return addresses are looked up at address - 1: the byte before the trampoline belongs to it. */
	expect_sym_rule("sig_func", -1, "signal");
	expect_sym_rule("sig_func", 8, "signal");
}

/* The dynamic loader runs first in every dynamic program, from its entry point (_start), which glibc gives no CFI:
 * there a walk stops, complete, instead of guessing a caller that does not exist ("[truncated];_start;_dl_start").
 * The loader is the one this test program was started by (its PT_INTERP), its entry read from its ELF header. */
static void test_loader_entry_is_outermost(void **state)
{
	(void)state;
	char interp[256] = "";
	int fd;
	Elf *self = open_elf("/proc/self/exe", &fd);
	assert_non_null(self);
	size_t n;
	assert_int_equal(elf_getphdrnum(self, &n), 0);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		size_t len;
		const char *raw = elf_rawfile(self, &len);
		if (gelf_getphdr(self, (int)i, &ph) && ph.p_type == PT_INTERP && ph.p_offset + ph.p_filesz <= len &&
		    ph.p_filesz < sizeof(interp))
			memcpy(interp, raw + ph.p_offset, ph.p_filesz);
	}
	close_elf(self, fd);
	if (!interp[0])
		test_skip("this test program is linked statically: no dynamic loader");
	Elf *elf = open_elf(interp, &fd);
	assert_non_null(elf);
	GElf_Ehdr eh;
	assert_non_null(gelf_getehdr(elf, &eh));
	assert_true(eh.e_entry != 0);
	struct stack_deltas *t;
	struct stack_deltas_stats st;
	assert_int_equal(stack_deltas_build(elf, &t, &st), 0);
	fprintf(stderr, "%s: entry 0x%llx\n", interp, (unsigned long long)eh.e_entry);
	expect_rule(t, eh.e_entry, "stop");
	expect_rule(t, eh.e_entry + 8, "stop");	/* _start calls _dl_start: its return address is inside */
	stack_deltas_free(t);
	close_elf(elf, fd);
}

static void test_code_without_cfi(void **state)
{
	(void)state;
	expect_sym_rule("nocfi_fp", 0, "cfa=sp+8");
	expect_sym_rule("nocfi_fp_pushed", 0, "cfa=sp+16 fp=[cfa-16]");
	expect_sym_rule("nocfi_fp_body", 0, "cfa=fp+16 fp=[cfa-16]");
	expect_sym_rule("nocfi_fp_ret", -1, "cfa=fp+16 fp=[cfa-16]");
	expect_sym_rule("nocfi_fp_ret", 0, "cfa=sp+8");
	expect_sym_rule("leaf_nocfi", 0, "cfa=sp+8");
	expect_sym_rule("leaf_nocfi", 5, "cfa=sp+8");
	expect_sym_rule("nocfi_frameless", 0, "cfa=sp+8");
	expect_sym_rule("nocfi_fl_pushed", 0, "cfa=sp+16");
	expect_sym_rule("nocfi_fl_body", 0, "cfa=sp+32");
	expect_sym_rule("nocfi_fl_ret", 0, "cfa=sp+8");
	/* Code after a ret is another path of the same function, with the frame of its body. */
	expect_sym_rule("nocfi_fl_path2", 0, "cfa=sp+32");
	assert_true(fx->st.analysed_ranges >= 1);
	/* Rules read from code are guesses, and say so; rules from CFI do not. */
	struct stack_delta_rule r;
	assert_int_equal(stack_deltas_lookup(fx->t, sym(fx->elf, "nocfi_fp_body"), &r), 0);
	assert_true(r.aux & STACK_DELTA_GUESSED);
	assert_int_equal(stack_deltas_lookup(fx->t, sym(fx->elf, "nocfi_fl_body"), &r), 0);
	assert_true(r.aux & STACK_DELTA_GUESSED);
	assert_int_equal(stack_deltas_lookup(fx->t, sym(fx->elf, "sp_body"), &r), 0);
	assert_false(r.aux & STACK_DELTA_GUESSED);
	assert_int_equal(stack_deltas_lookup(fx->t, sym(fx->elf, "fp_body"), &r), 0);
	assert_false(r.aux & STACK_DELTA_GUESSED);
}

/* Neighbouring rows never repeat a rule, addresses ascend, and everything outside the code is INVALID. */
static void test_rows_merged_and_bounded(void **state)
{
	(void)state;
	size_t n = stack_deltas_rows(fx->t);
	assert_int_equal(n, fx->st.rows);
	assert_true(n > 10);
	uint64_t prev_va = 0;
	struct stack_delta_rule prev;
	for (size_t i = 0; i < n; i++) {
		uint64_t va;
		struct stack_delta_rule r;
		stack_deltas_row(fx->t, i, &va, &r);
		if (i) {
			assert_true(va > prev_va);
			assert_memory_not_equal(&r, &prev, sizeof(r));
		}
		prev_va = va;
		prev = r;
	}
	expect_sym_rule("sp_same", 0, "cfa=sp+48");
	struct stack_delta_rule r;
	assert_int_equal(stack_deltas_lookup(fx->t, 0, &r), -ENOENT);
	assert_int_equal(r.kind, STACK_DELTA_INVALID);
	assert_int_equal(stack_deltas_lookup(fx->t, prev_va + 4096, &r), -ENOENT);
	assert_int_equal(stack_deltas_lookup(fx->t, ~0ull, &r), -ENOENT);
	assert_int_equal(stack_deltas_bytes(fx->t), fx->st.bytes);
	assert_true(fx->st.fdes_eh >= 8);
}

static void check_debug_frame(const char *name)
{
	char path[128];
	int fd;
	snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
	Elf *elf = open_elf(path, &fd);
	assert_non_null(elf);
	struct stack_deltas *t;
	struct stack_deltas_stats st;
	assert_int_equal(stack_deltas_build(elf, &t, &st), 0);
	assert_int_equal(st.fdes_eh, 0);
	assert_int_equal(st.fdes_debug, 1);
	expect_rule(t, sym(elf, "dbg_func"), "cfa=sp+8");
	expect_rule(t, sym(elf, "dbg_pushed"), "cfa=sp+16");
	expect_rule(t, sym(elf, "dbg_ret"), "cfa=sp+8");
	stack_deltas_free(t);
	close_elf(elf, fd);
}

static void test_debug_frame(void **state)
{
	(void)state;
	char cmd[320];
	check_debug_frame("debug_frame.so");
	/* Compressed (SHF_COMPRESSED) .debug_frame, as distributions ship debug info. */
	snprintf(cmd, sizeof(cmd), "objcopy --compress-debug-sections=zlib-gabi %s/debug_frame.so %s/debug_frame_z.so",
		 fx->dir, fx->dir);
	if (system(cmd) != 0)
		test_skip("objcopy cannot compress debug sections here");
	check_debug_frame("debug_frame_z.so");
}

/* .debug_frame fills only what .eh_frame leaves uncovered. */
static void test_eh_frame_preferred(void **state)
{
	(void)state;
	char path[128];
	int fd;
	snprintf(path, sizeof(path), "%s/both_frames.so", fx->dir);
	Elf *elf = open_elf(path, &fd);
	assert_non_null(elf);
	struct stack_deltas *t;
	struct stack_deltas_stats st;
	assert_int_equal(stack_deltas_build(elf, &t, &st), 0);
	assert_int_equal(st.fdes_eh, 1);	/* both_func */
	assert_int_equal(st.fdes_debug, 1);	/* dbg_func */
	assert_int_equal(st.fdes_skipped, 1);	/* both_func again */
	expect_rule(t, sym(elf, "both_body"), "cfa=sp+32");
	expect_rule(t, sym(elf, "dbg_pushed"), "cfa=sp+16");
	stack_deltas_free(t);
	close_elf(elf, fd);
}

/* A program's entry point without CFI is the outermost frame. */
static void test_entry_point_stops(void **state)
{
	(void)state;
	char path[128];
	int fd;
	snprintf(path, sizeof(path), "%s/entry", fx->dir);
	Elf *elf = open_elf(path, &fd);
	assert_non_null(elf);
	struct stack_deltas *t;
	GElf_Ehdr eh;
	assert_non_null(gelf_getehdr(elf, &eh));
	assert_int_equal(stack_deltas_build(elf, &t, NULL), 0);
	expect_rule(t, eh.e_entry, "stop");
	expect_rule(t, eh.e_entry + 5, "stop");
	expect_rule(t, sym(elf, "main_like"), "cfa=sp+8");
	stack_deltas_free(t);
	close_elf(elf, fd);
	/* Stripped, with other code right before it: still split there, still the outermost frame. */
	snprintf(path, sizeof(path), "%s/entry_stripped", fx->dir);
	assert_non_null(elf = open_elf(path, &fd));
	assert_non_null(gelf_getehdr(elf, &eh));
	assert_int_equal(stack_deltas_build(elf, &t, NULL), 0);
	expect_rule(t, eh.e_entry, "stop");
	expect_rule(t, eh.e_entry + 5, "stop");	/* the return address of its call, minus 1 */
	expect_rule(t, eh.e_entry - 1, "cfa=sp+8");	/* before's ret */
	stack_deltas_free(t);
	close_elf(elf, fd);
}

static void *read_file(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	void *buf = malloc((size_t)sb.st_size);
	if (buf && read(fd, buf, (size_t)sb.st_size) != sb.st_size) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	*size = (size_t)sb.st_size;
	return buf;
}

/* Without section headers, .eh_frame is found through PT_GNU_EH_FRAME and code through PT_LOAD. */
static void test_no_section_headers(void **state)
{
	(void)state;
	char path[128];
	size_t size;
	snprintf(path, sizeof(path), "%s/fixture.so", fx->dir);
	char *image = read_file(path, &size);
	assert_non_null(image);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)image;
	eh->e_shoff = 0;
	eh->e_shnum = 0;
	eh->e_shstrndx = 0;
	Elf *elf = elf_memory(image, size);
	assert_non_null(elf);
	struct stack_deltas *t;
	struct stack_deltas_stats st;
	assert_int_equal(stack_deltas_build(elf, &t, &st), 0);
	assert_int_equal(st.fdes_eh, fx->st.fdes_eh);
	const char *names[] = { "sp_after_push", "sp_body", "fp_body", "plt_like", "drap_body", "stop_func",
				"sig_func", "nocfi_fp_body", "nocfi_fl_body" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char want[96];
		uint64_t va = sym(fx->elf, names[i]);
		expect_rule(t, va, rule_at(fx->t, va, want, sizeof(want)));
	}
	stack_deltas_free(t);
	elf_end(elf);
	free(image);
}

static uint64_t section_addr(Elf *elf, const char *name, uint64_t *size)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		const char *n;
		if (gelf_getshdr(scn, &sh) && (n = elf_strptr(elf, shstrndx, sh.sh_name)) && strcmp(n, name) == 0) {
			*size = sh.sh_size;
			return sh.sh_addr;
		}
	}
	return 0;
}

static void test_libc(void **state)
{
	(void)state;
	int fd;
	Elf *elf = open_elf(LIBC_PATH, &fd);
	if (!elf)
		test_skip("%s is not there (not Debian 12 on x86_64)", LIBC_PATH);
	struct stack_deltas *t;
	struct stack_deltas_stats st;
	assert_int_equal(stack_deltas_build(elf, &t, &st), 0);
	printf("libc: %zu rows, %zu bytes (%.2f bytes/row), %zu rules, %zu FDEs, %zu fallback rows, "
	       "%zu ranges without CFI, built in %.1f ms\n", st.rows, st.bytes, (double)st.bytes / (double)st.rows,
	       st.rules, st.fdes_eh, st.fallback_rows, st.analysed_ranges, (double)st.build_ns / 1e6);
	assert_true(st.rows > 10000);
	assert_true(st.bytes <= 8 * st.rows);
	assert_true(st.stop_rows >= 1);		/* clone/clone3's child: undefined return address */
	assert_true(st.signal_rows >= 1);	/* __restore_rt */

	uint64_t plt_size = 0, plt = section_addr(elf, ".plt", &plt_size);
	if (plt && plt_size > 0x30) {
		expect_rule(t, plt + 0x20, "plt sp+8 ip&15>=11");
		assert_true(st.plt_rows >= 1);
	}
	/* glibc hands the kernel __restore_rt as the signal restorer; find it in the file through dladdr. */
	struct sigaction sa, old;
	Dl_info info;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
	assert_int_equal(sigaction(SIGUSR2, &old, &sa), 0);	/* sa: what glibc installed, restorer included */
	assert_non_null(sa.sa_restorer);
	if (dladdr((void *)sa.sa_restorer, &info) && strstr(info.dli_fname, "libc.so")) {
		uint64_t va = (uint64_t)(uintptr_t)sa.sa_restorer - (uint64_t)(uintptr_t)info.dli_fbase;
		expect_rule(t, va, "signal");
		expect_rule(t, va - 1, "signal");
	}
	stack_deltas_free(t);
	close_elf(elf, fd);
}

static void test_not_x86_64(void **state);

static void test_own_binary_plt(void **state)
{
	(void)state;
	int fd;
	Elf *elf = open_elf("/proc/self/exe", &fd);
	assert_non_null(elf);
	struct stack_deltas *t;
	struct stack_deltas_stats st;
	assert_int_equal(stack_deltas_build(elf, &t, &st), 0);
	uint64_t plt_size = 0, plt = section_addr(elf, ".plt", &plt_size);
	if (!plt || plt_size < 0x30) {
		stack_deltas_free(t);
		close_elf(elf, fd);
		test_skip("this libc has no .plt of the expected shape");
	}
	expect_rule(t, plt + 0x10, "plt sp+8 ip&15>=11");
	expect_rule(t, plt + plt_size - 1, "plt sp+8 ip&15>=11");
	/* Every function starts with the return address just pushed. */
	Dl_info info;
	assert_true(dladdr((void *)(uintptr_t)test_not_x86_64, &info) != 0);
	expect_rule(t, (uint64_t)(uintptr_t)test_not_x86_64 - (uint64_t)(uintptr_t)info.dli_fbase, "cfa=sp+8");
	printf("own binary: %zu rows, %zu bytes, built in %.2f ms\n", st.rows, st.bytes, (double)st.build_ns / 1e6);
	stack_deltas_free(t);
	close_elf(elf, fd);
}

static void test_not_x86_64(void **state)
{
	(void)state;
	char image[sizeof(Elf64_Ehdr)];
	memset(image, 0, sizeof(image));
	Elf64_Ehdr *eh = (Elf64_Ehdr *)image;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_AARCH64;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	struct stack_deltas *t = (struct stack_deltas *)1;
	Elf *elf = elf_memory(image, sizeof(image));
	assert_non_null(elf);
	assert_int_equal(stack_deltas_build(elf, &t, NULL), -ENOTSUP);
	assert_null(t);
	elf_end(elf);
	eh->e_machine = EM_X86_64;	/* right machine, but no code and no CFI */
	elf = elf_memory(image, sizeof(image));
	assert_int_equal(stack_deltas_build(elf, &t, NULL), -ENOENT);
	elf_end(elf);
	assert_int_equal(stack_deltas_build(NULL, &t, NULL), -ENOTSUP);
}

/* Look the table up everywhere in [lo, hi): must not crash, whatever it holds. */
static void probe(const struct stack_deltas *t, uint64_t lo, uint64_t hi)
{
	struct stack_delta_rule r;
	for (uint64_t a = lo; a < hi; a += 3)
		stack_deltas_lookup(t, a, &r);
}

static uint32_t next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Corrupt CFI, section headers and program headers of real files: the build must survive every variant. */
static void fuzz_file(const char *path, unsigned rounds, unsigned flips)
{
	size_t size;
	char *orig = read_file(path, &size);
	if (!orig)
		return;
	char *image = malloc(size);
	assert_non_null(image);
	uint32_t seed = 0x12345678;
	uint64_t ehf_size = 0, ehf;
	Elf *e0 = elf_memory(orig, size);
	ehf = section_addr(e0, ".eh_frame", &ehf_size);
	elf_end(e0);
	unsigned built = 0;
	for (unsigned round = 0; round < rounds; round++) {
		memcpy(image, orig, size);
		for (unsigned i = 0; i < flips; i++) {
			size_t off;
			uint32_t r = next_rand(&seed);
			if (r % 4 == 0)
				off = r % 512;			/* headers */
			else if (ehf_size && ehf < size)
				off = (size_t)(ehf + (r >> 4) % ehf_size) % size;	/* CFI (offset == address here) */
			else
				off = (r >> 2) % size;
			image[off] = (char)next_rand(&seed);
		}
		size_t len = round % 5 == 4 ? (size_t)(next_rand(&seed) % size) : size;	/* truncated */
		Elf *elf = elf_memory(image, len);
		struct stack_deltas *t = NULL;
		if (elf && stack_deltas_build(elf, &t, NULL) == 0) {
			built++;
			probe(t, ehf > 0x10000 ? ehf - 0x10000 : 0, ehf + 0x1000);
			stack_deltas_free(t);
		}
		elf_end(elf);
	}
	assert_true(built > 0);
	free(image);
	free(orig);
}

static void test_hostile_inputs(void **state)
{
	(void)state;
	char path[128];
	snprintf(path, sizeof(path), "%s/fixture.so", fx->dir);
	fuzz_file(path, 300, 8);
	snprintf(path, sizeof(path), "%s/debug_frame.so", fx->dir);
	fuzz_file(path, 100, 4);
	fuzz_file("/usr/bin/xz", 20, 64);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sp_based),
		cmocka_unit_test(test_fp_based),
		cmocka_unit_test(test_expressions),
		cmocka_unit_test(test_fallback_rows),
		cmocka_unit_test(test_stop_and_signal),
		cmocka_unit_test(test_loader_entry_is_outermost),
		cmocka_unit_test(test_code_without_cfi),
		cmocka_unit_test(test_rows_merged_and_bounded),
		cmocka_unit_test(test_debug_frame),
		cmocka_unit_test(test_eh_frame_preferred),
		cmocka_unit_test(test_entry_point_stops),
		cmocka_unit_test(test_no_section_headers),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_own_binary_plt),
		cmocka_unit_test(test_not_x86_64),
		cmocka_unit_test(test_hostile_inputs),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
