/*
 * Unit tests for unwind/unwind_libunwind.c.
 *
 * The samples are real: a function captures this thread's registers with inline asm and copies the stack
 * above its stack pointer, as the kernel does for PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER. The process
 * is described from /proc/self/maps with libelf, the way hostprof's process manager describes a target, and
 * frames are named from this executable's .symtab (static functions included) or by the file they are in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "unwind/unwind_libunwind.h"

#define STACK_COPY 16384	/* what hostprof asks the kernel for is of this order */
#define MAX_MAPS 1024
#define MAX_FILES 128
#define MAX_SYMS 65536

/* ---- a sample of this thread ---- */

struct sample_buf {
	struct unwind_sample s;
	uint64_t stack_end;	/* end of the stack mapping: the copy must not run past it */
	uint8_t stack[STACK_COPY];
};

/* The asm below stores registers at enum unwind_reg offsets. */
_Static_assert(UNWIND_REG_SP == 7 && UNWIND_REG_IP == 8 && UNWIND_REG_R8 == 16 && UNWIND_REG_R15 == 23,
	       "perf register layout");

/*
 * Store the registers of the current point of the enclosing function into regs (uint64_t[UNWIND_NREGS]).
 * It must be a macro: the IP and SP must be those of the function that takes the sample.
 */
#define CAPTURE_REGS(regs)                                                                   \
	__asm__ volatile("movq %%rax, 0(%0)\n\t"                                             \
			 "movq %%rbx, 8(%0)\n\t"                                             \
			 "movq %%rcx, 16(%0)\n\t"                                            \
			 "movq %%rdx, 24(%0)\n\t"                                            \
			 "movq %%rsi, 32(%0)\n\t"                                            \
			 "movq %%rdi, 40(%0)\n\t"                                            \
			 "movq %%rbp, 48(%0)\n\t"                                            \
			 "movq %%rsp, 56(%0)\n\t"                                            \
			 "leaq 1f(%%rip), %%rax\n\t"                                         \
			 "1: movq %%rax, 64(%0)\n\t"                                         \
			 "movq %%r8, 128(%0)\n\t"                                            \
			 "movq %%r9, 136(%0)\n\t"                                            \
			 "movq %%r10, 144(%0)\n\t"                                           \
			 "movq %%r11, 152(%0)\n\t"                                           \
			 "movq %%r12, 160(%0)\n\t"                                           \
			 "movq %%r13, 168(%0)\n\t"                                           \
			 "movq %%r14, 176(%0)\n\t"                                           \
			 "movq %%r15, 184(%0)\n\t"                                           \
			 :                                                                   \
			 : "r"(regs)                                                         \
			 : "rax", "memory")

/*
 * Copy the stack from the captured SP up, as the kernel would. rep movsb rather than memcpy: AddressSanitizer
 * would report reading other frames' redzones, which is exactly what a stack sample does.
 */
__attribute__((noinline, no_sanitize_address)) static void copy_stack(struct sample_buf *b)
{
	uint64_t sp = b->s.regs[UNWIND_REG_SP];
	size_t n = b->stack_end > sp && b->stack_end - sp < STACK_COPY ? b->stack_end - sp : STACK_COPY;
	void *dst = b->stack;
	const void *src = (const void *)(uintptr_t)sp;
	b->s.stack = b->stack;
	b->s.stack_size = n;
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

#define CAPTURE(b)                          \
	do {                                \
		CAPTURE_REGS((b)->s.regs);  \
		copy_stack(b);              \
	} while (0)

/* No inlining, no cloning, no frame pointer: the unwinder must use CFI. */
#define SAMPLED __attribute__((noinline, noclone, optimize("omit-frame-pointer")))
/* After a call, so the call is not a tail call. */
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

SAMPLED int func_c(struct sample_buf *b);
SAMPLED int func_b(struct sample_buf *b);
SAMPLED int func_a(struct sample_buf *b);

SAMPLED int func_c(struct sample_buf *b)
{
	CAPTURE(b);
	return (int)(b->s.stack_size & 1);
}

SAMPLED int func_b(struct sample_buf *b)
{
	int r = func_c(b);
	NO_TAIL_CALL();
	return r + 1;
}

SAMPLED int func_a(struct sample_buf *b)
{
	int r = func_b(b);
	NO_TAIL_CALL();
	return r + 2;
}

/* A frame-pointer function: its CFA is rbp + 16 after the prologue. */
__attribute__((noinline, noclone, optimize("no-omit-frame-pointer"))) int fp_func(struct sample_buf *b);
__attribute__((noinline, noclone, optimize("no-omit-frame-pointer"))) int fp_func(struct sample_buf *b)
{
	int r = func_c(b);
	NO_TAIL_CALL();
	return r + 1;
}

/* ---- a function described only by .debug_frame ---- */

SAMPLED void df_callee(struct sample_buf *b);
SAMPLED int df_caller(struct sample_buf *b);
int hp_df_func(struct sample_buf *b);

SAMPLED void df_callee(struct sample_buf *b)
{
	CAPTURE(b);
}

/*
 * hp_df_func has no .eh_frame entry (no .cfi directives); its only CFI is the hand-written .debug_frame CIE
 * and FDE below, with an unrelocated absolute address as .debug_frame has. It keeps 24 bytes of frame, so
 * nothing but its CFI can tell where its return address is.
 */
__asm__(".text\n"
	".globl hp_df_func\n"
	".type hp_df_func, @function\n"
	"hp_df_func:\n"
	"	subq $24, %rsp\n"
	"	call df_callee@PLT\n"
	"	addq $24, %rsp\n"
	"	ret\n"
	".Lhp_df_end:\n"
	".size hp_df_func, .-hp_df_func\n"
	".section .debug_frame,\"\",@progbits\n"
	".Lhp_df_cie:\n"
	"	.long .Lhp_df_cie_end - .Lhp_df_cie_id\n"
	".Lhp_df_cie_id:\n"
	"	.long 0xffffffff\n"	/* CIE id in .debug_frame */
	"	.byte 1\n"		/* version */
	"	.byte 0\n"		/* augmentation "" */
	"	.uleb128 1\n"		/* code alignment */
	"	.sleb128 -8\n"		/* data alignment */
	"	.byte 16\n"		/* return address column: rip */
	"	.byte 0x0c, 7, 8\n"	/* DW_CFA_def_cfa rsp+8 */
	"	.byte 0x90, 1\n"	/* DW_CFA_offset rip at cfa-8 */
	"	.balign 8, 0\n"
	".Lhp_df_cie_end:\n"
	"	.long .Lhp_df_fde_end - .Lhp_df_fde_id\n"
	".Lhp_df_fde_id:\n"
	"	.long .Lhp_df_cie\n"	/* CIE pointer: offset in .debug_frame */
	"	.quad hp_df_func\n"
	"	.quad .Lhp_df_end - hp_df_func\n"
	"	.byte 0x44\n"		/* DW_CFA_advance_loc 4 (past subq) */
	"	.byte 0x0e, 32\n"	/* DW_CFA_def_cfa_offset 32 */
	"	.byte 0x49\n"		/* DW_CFA_advance_loc 9 (past call and addq) */
	"	.byte 0x0e, 8\n"	/* DW_CFA_def_cfa_offset 8 */
	"	.balign 8, 0\n"
	".Lhp_df_fde_end:\n"
	".text\n");

SAMPLED int df_caller(struct sample_buf *b)
{
	int r = hp_df_func(b);
	NO_TAIL_CALL();
	return r + 1;
}

/* ---- a sample taken inside qsort's comparator (frames inside libc) ---- */

static struct sample_buf *qsort_target; /* the comparator has no context argument */

SAMPLED static int qsort_cmp(const void *a, const void *b)
{
	if (qsort_target) {
		CAPTURE(qsort_target);
		qsort_target = NULL;
	}
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

SAMPLED int call_qsort(struct sample_buf *b);
SAMPLED int call_qsort(struct sample_buf *b)
{
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	qsort_target = b;
	qsort(v, 64, sizeof(v[0]), qsort_cmp);
	NO_TAIL_CALL();
	return v[0];
}

/* ---- a sample taken in a signal handler ---- */

static struct sample_buf *signal_target; /* the handler has no context argument */
extern const char hp_ud2_insn[];

static void on_sigill(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	(void)sig, (void)si;
	CAPTURE(signal_target);
	uc->uc_mcontext.gregs[REG_RIP] += 2; /* resume after the ud2 */
}

SAMPLED void raise_sigill(void);
SAMPLED void raise_sigill(void)
{
	__asm__ volatile(".globl hp_ud2_insn\nhp_ud2_insn: ud2" ::: "memory");
}

SAMPLED int call_raise_sigill(void);
SAMPLED int call_raise_sigill(void)
{
	raise_sigill();
	NO_TAIL_CALL();
	return 1;
}

/* ---- the process, as hostprof would describe it ---- */

struct tfile {
	char path[512];
	int fd;
	Elf *elf;
};

struct tmap {
	uint64_t start, end, pgoff, bias;
	bool exec, bias_ok;
	struct tfile *file;
};

struct tsym {
	uint64_t start, size;
	const char *name;
};

struct image {
	uint8_t *buf;
	size_t size;
	Elf *elf;
};

struct fixture {
	struct tmap maps[MAX_MAPS];
	size_t nmaps;
	struct tfile files[MAX_FILES];
	size_t nfiles;
	struct tfile *exe;
	uint64_t exe_bias;
	struct tsym *syms;
	size_t nsyms;
	uint64_t stack_end;
	/* Present another image for the executable, under another cache key. */
	Elf *swap_elf;
	const void *swap_key;
	struct unwind_libunwind *u;
	struct sample_buf sample;	/* func_a -> func_b -> func_c */
	struct sample_buf scratch;	/* for one test at a time; not freed by the test, so failures do not leak */
	struct image img;		/* likewise: a modified copy of the executable */
};

static struct sample_buf *scratch(struct fixture *f, bool from_sample)
{
	struct sample_buf *b = &f->scratch;
	if (from_sample)
		*b = f->sample;
	else
		memset(b, 0, sizeof(*b));
	b->s.stack = b->stack;
	b->stack_end = f->stack_end;
	return b;
}

static struct tfile *open_file(struct fixture *f, const char *path)
{
	for (size_t i = 0; i < f->nfiles; i++)
		if (strcmp(f->files[i].path, path) == 0)
			return &f->files[i];
	if (f->nfiles == MAX_FILES)
		return NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		close(fd);
		return NULL;
	}
	struct tfile *t = &f->files[f->nfiles++];
	snprintf(t->path, sizeof(t->path), "%s", path);
	t->fd = fd;
	t->elf = elf;
	return t;
}

/* bias = runtime address - ELF address, from the PT_LOAD this mapping's file offset falls in. */
static bool map_bias(Elf *elf, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
	size_t n;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	if (elf_getphdrnum(elf, &n) != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_offset & ~(page - 1)) == pgoff) {
			*bias = start - (ph.p_vaddr - (ph.p_offset - pgoff));
			return true;
		}
	}
	return false;
}

static void load_maps(struct fixture *f)
{
	FILE *fp = fopen("/proc/self/maps", "re");
	char line[1024];
	uint64_t here = (uint64_t)(uintptr_t)&line, code = (uint64_t)(uintptr_t)func_a;
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp) && f->nmaps < MAX_MAPS) {
		struct tmap m = { 0 };
		char perms[8], path[512] = "";
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %511[^\n]", &m.start, &m.end, perms,
			   &m.pgoff, path) < 4)
			continue;
		if (here >= m.start && here < m.end)
			f->stack_end = m.end;
		m.exec = perms[2] == 'x';
		if (path[0] == '/' && (m.file = open_file(f, path)))
			m.bias_ok = map_bias(m.file->elf, m.start, m.pgoff, &m.bias);
		/* By a known function: sanitizers map the executable again to read it. */
		if (code >= m.start && code < m.end && m.bias_ok) {
			f->exe = m.file;
			f->exe_bias = m.bias;
		}
		f->maps[f->nmaps++] = m;
	}
	fclose(fp);
	assert_non_null(f->exe);
	assert_true(f->stack_end != 0);
}

static void load_symbols(struct fixture *f)
{
	Elf_Scn *scn = NULL;
	f->syms = calloc(MAX_SYMS, sizeof(*f->syms));
	assert_non_null(f->syms);
	while ((scn = elf_nextscn(f->exe->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; sh.sh_entsize && i < sh.sh_size / sh.sh_entsize && f->nsyms < MAX_SYMS; i++) {
			GElf_Sym s;
			if (gelf_getsym(d, (int)i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_size)
				f->syms[f->nsyms++] = (struct tsym){ s.st_value, s.st_size,
								     elf_strptr(f->exe->elf, sh.sh_link, s.st_name) };
		}
	}
	assert_true(f->nsyms > 0);
}

static const struct tmap *map_of(const struct fixture *f, uint64_t addr)
{
	for (size_t i = 0; i < f->nmaps; i++)
		if (addr >= f->maps[i].start && addr < f->maps[i].end)
			return &f->maps[i];
	return NULL;
}

/* Executable mappings only, as perf reports after attach: the unwinder must find .eh_frame_hdr by itself. */
static int find_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	struct fixture *f = ctx;
	const struct tmap *m = map_of(f, addr);
	if (!m || !m->exec || !m->file || !m->bias_ok)
		return -ENOENT;
	*mod = (struct unwind_module){ .start = m->start, .end = m->end, .pgoff = m->pgoff, .bias = m->bias,
				       .elf = m->file->elf, .cache_key = m->file };
	if (m->file == f->exe && f->swap_elf) {
		mod->elf = f->swap_elf;
		mod->cache_key = f->swap_key;
	}
	return 0;
}

/* The function of this executable containing addr, or NULL. */
static const char *exe_symbol(const struct fixture *f, uint64_t addr)
{
	const struct tmap *m = map_of(f, addr);
	if (!m || m->file != f->exe)
		return NULL;
	uint64_t va = addr - f->exe_bias;
	for (size_t i = 0; i < f->nsyms; i++)
		if (va >= f->syms[i].start && va - f->syms[i].start < f->syms[i].size)
			return f->syms[i].name;
	return NULL;
}

/* Address to look up for frame i: a return address points after the call. */
static uint64_t lookup_addr(const struct unwind_frame *frames, size_t i)
{
	return i == 0 || (frames[i].flags & UNWIND_FRAME_SIGNAL) ? frames[i].ip : frames[i].ip - 1;
}

static const char *frame_name(const struct fixture *f, const struct unwind_frame *frames, size_t i)
{
	const char *s = exe_symbol(f, lookup_addr(frames, i));
	return s ? s : "?";
}

static bool frame_in_file(const struct fixture *f, const struct unwind_frame *frames, size_t i, const char *part)
{
	const struct tmap *m = map_of(f, lookup_addr(frames, i));
	return m && m->file && strstr(m->file->path, part);
}

/* Index of the first frame at or after `from` named `name`, or -1. */
static int find_frame(const struct fixture *f, const struct unwind_frame *frames, int n, int from, const char *name)
{
	for (int i = from; i < n; i++)
		if (strcmp(frame_name(f, frames, (size_t)i), name) == 0)
			return i;
	return -1;
}

static void print_frames(const struct fixture *f, const struct unwind_frame *frames, int n)
{
	for (int i = 0; i < n; i++) {
		const struct tmap *m = map_of(f, lookup_addr(frames, (size_t)i));
		print_message("  #%-2d %#18" PRIx64 "%s %s (%s)\n", i, frames[i].ip,
			      frames[i].flags & UNWIND_FRAME_SIGNAL ? " [signal]" : "", frame_name(f, frames, (size_t)i),
			      m && m->file ? m->file->path : "?");
	}
}

static int unwind(struct fixture *f, const struct sample_buf *b, struct unwind_frame *frames, size_t max,
		  enum unwind_status *st)
{
	struct unwind_process proc = { .find_module = find_module, .ctx = f };
	return unwind_libunwind_unwind(f->u, &proc, &b->s, frames, max, st);
}

/* ---- ELF images with parts hidden ---- */

static void read_exe(struct fixture *f, struct image *img)
{
	size_t size;
	*img = (struct image){ 0 };
	char *raw = elf_rawfile(f->exe->elf, &size);
	assert_non_null(raw);
	img->buf = malloc(size);
	assert_non_null(img->buf);
	memcpy(img->buf, raw, size);
	img->size = size;
}

/* Hide sections by name (their names become "") and, optionally, the PT_GNU_EH_FRAME header. */
static void hide_parts(struct image *img, const char *const *sections, size_t n, bool hide_eh_phdr)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img->buf;
	Elf64_Phdr *ph = (Elf64_Phdr *)(img->buf + eh->e_phoff);
	Elf64_Shdr *sh = (Elf64_Shdr *)(img->buf + eh->e_shoff);
	const char *names = (const char *)img->buf + sh[eh->e_shstrndx].sh_offset;
	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (hide_eh_phdr && ph[i].p_type == PT_GNU_EH_FRAME)
			ph[i].p_type = PT_NULL;
	for (unsigned i = 0; i < eh->e_shnum; i++)
		for (size_t k = 0; k < n; k++)
			if (strcmp(names + sh[i].sh_name, sections[k]) == 0)
				sh[i].sh_name = 0;
}

static void swap_exe(struct fixture *f, struct image *img)
{
	img->elf = elf_memory((char *)img->buf, img->size);
	f->swap_elf = img->elf;
	f->swap_key = img;
}

static void unswap_exe(struct fixture *f, struct image *img)
{
	unwind_libunwind_forget(f->u, img);
	f->swap_elf = NULL;
	f->swap_key = NULL;
	if (img->elf)
		elf_end(img->elf);
	free(img->buf);
	*img = (struct image){ 0 };
}

/* ---- tests ---- */

/* frames[] starts func_c, func_b, func_a, setup (the group setup takes the sample); whole walks end at _start. */
static void assert_own_stack(struct fixture *f, const struct unwind_frame *frames, int n, bool whole)
{
	static const char *const leaf[] = { "func_c", "func_b", "func_a", "setup" };
	bool ok = n >= 3;
	for (int i = 0; i < 4 && i < n; i++)
		ok &= strcmp(frame_name(f, frames, (size_t)i), leaf[i]) == 0;
	if (whole)
		ok &= find_frame(f, frames, n, 4, "main") > 4 &&
		      strcmp(frame_name(f, frames, (size_t)n - 1), "_start") == 0;
	if (!ok)
		print_frames(f, frames, n);
	assert_true(ok);
}

static void test_own_stack(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	int n = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
	assert_true(n > 4);
	assert_int_equal(frames[0].ip, f->sample.s.regs[UNWIND_REG_IP]);
	assert_own_stack(f, frames, n, true);
	assert_int_equal(st, UNWIND_COMPLETE);
	for (int i = 0; i < n; i++)
		assert_int_equal(frames[i].flags, 0);
}

/* Fewer stack bytes give a prefix of the full walk, never different frames. */
static void test_truncated_stack(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame full[UNWIND_MAX_FRAMES], part[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	int nfull = unwind(f, &f->sample, full, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(st, UNWIND_COMPLETE);

	struct sample_buf *b = scratch(f, true);
	int prev = 1, saw_two = 0;
	for (size_t size = 0; size < f->sample.s.stack_size; size += 8) {
		b->s.stack_size = size;
		int n = unwind(f, b, part, UNWIND_MAX_FRAMES, &st);
		assert_true(n >= prev && n <= nfull);
		if (st == UNWIND_COMPLETE)
			assert_int_equal(n, nfull);
		else
			assert_int_equal(st, UNWIND_TRUNCATED);
		for (int i = 0; i < n; i++)
			assert_int_equal(part[i].ip, full[i].ip);
		saw_two |= n >= 2 && n < nfull;
		prev = n;
	}
	/* An empty copy still names the leaf; a short one names the first callers. */
	b->s.stack_size = 0;
	assert_int_equal(unwind(f, b, part, UNWIND_MAX_FRAMES, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_true(saw_two);
}

static void test_frame_limit(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	assert_int_equal(unwind(f, &f->sample, frames, 3, &st), 3);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_own_stack(f, frames, 3, false);
}

static void test_unknown_leaf(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[4];
	enum unwind_status st;
	struct sample_buf *b = scratch(f, true);
	b->s.regs[UNWIND_REG_IP] = 0x10;
	assert_int_equal(unwind(f, b, frames, 4, &st), 1);
	assert_int_equal(st, UNWIND_UNKNOWN_LEAF);
	assert_int_equal(frames[0].ip, 0x10);
}

/* The comparator is called from inside the library that implements qsort: libc, or a sanitizer's interceptor. */
static void test_shared_library_frames(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct sample_buf *b = scratch(f, false);
	Dl_info qsort_lib;
	assert_true(dladdr((void *)(uintptr_t)qsort, &qsort_lib) && qsort_lib.dli_fname);
	const char *lib = strrchr(qsort_lib.dli_fname, '/') ? strrchr(qsort_lib.dli_fname, '/') : qsort_lib.dli_fname;
	call_qsort(b);
	assert_non_null(b->s.stack);
	int n = unwind(f, b, frames, UNWIND_MAX_FRAMES, &st);
	int caller = find_frame(f, frames, n, 0, "call_qsort");
	if (caller < 2 || st != UNWIND_COMPLETE)
		print_frames(f, frames, n);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_string_equal(frame_name(f, frames, 0), "qsort_cmp");
	assert_true(caller >= 2);
	/* Between the comparator and qsort's caller: only shared-library frames, qsort's library among them. */
	bool in_lib = false;
	for (int i = 1; i < caller; i++) {
		assert_null(exe_symbol(f, lookup_addr(frames, (size_t)i)));
		in_lib |= frame_in_file(f, frames, (size_t)i, lib);
	}
	if (!in_lib)
		print_frames(f, frames, n);
	assert_true(in_lib);
	assert_true(find_frame(f, frames, n, caller, "main") > caller);
}

static void test_signal_frame(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct sigaction sa = { .sa_sigaction = on_sigill, .sa_flags = SA_SIGINFO }, old;
	struct sample_buf *b = scratch(f, false);
	signal_target = b;
	assert_int_equal(sigaction(SIGILL, &sa, &old), 0);
	call_raise_sigill();
	sigaction(SIGILL, &old, NULL);

	int n = unwind(f, b, frames, UNWIND_MAX_FRAMES, &st);
	int k = find_frame(f, frames, n, 0, "raise_sigill");
	if (k < 2 || st != UNWIND_COMPLETE)
		print_frames(f, frames, n);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_string_equal(frame_name(f, frames, 0), "on_sigill");
	assert_true(k >= 2);
	/* The interrupted frame: exact IP (the ud2 itself), flagged; the one before it is libc's trampoline. */
	assert_int_equal(frames[k].ip, (uint64_t)(uintptr_t)hp_ud2_insn);
	assert_int_equal(frames[k].flags, UNWIND_FRAME_SIGNAL);
	assert_true(frame_in_file(f, frames, (size_t)k - 1, "/libc.so"));
	for (int i = 0; i < n; i++)
		if (i != k)
			assert_int_equal(frames[i].flags, 0);
	assert_int_equal(find_frame(f, frames, n, k, "call_raise_sigill"), k + 1);
	assert_true(find_frame(f, frames, n, k, "main") > k);
}

/* .debug_frame only: converted tables must carry the walk through hp_df_func; hiding them must not. */
static void test_debug_frame(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct sample_buf *b = scratch(f, false);
	df_caller(b);

	int n = unwind(f, b, frames, UNWIND_MAX_FRAMES, &st);
	if (st != UNWIND_COMPLETE)
		print_frames(f, frames, n);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(find_frame(f, frames, n, 0, "df_callee"), 0);
	assert_int_equal(find_frame(f, frames, n, 0, "hp_df_func"), 1);
	assert_int_equal(find_frame(f, frames, n, 0, "df_caller"), 2);
	assert_true(find_frame(f, frames, n, 0, "main") > 2);

	struct image *img = &f->img;
	static const char *const hide[] = { ".debug_frame" };
	read_exe(f, img);
	hide_parts(img, hide, 1, false);
	swap_exe(f, img);
	n = unwind(f, b, frames, UNWIND_MAX_FRAMES, &st);
	unswap_exe(f, img);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_int_equal(n, 2);
}

/* Unwind the func_c sample with parts of the executable's image hidden; it must give the same frames. */
static void assert_same_walk(struct fixture *f, const char *const *hide, size_t nhide, bool hide_eh_phdr)
{
	struct unwind_frame full[UNWIND_MAX_FRAMES], frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	int nfull = unwind(f, &f->sample, full, UNWIND_MAX_FRAMES, &st);
	read_exe(f, &f->img);
	hide_parts(&f->img, hide, nhide, hide_eh_phdr);
	swap_exe(f, &f->img);
	int n = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
	unswap_exe(f, &f->img);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(n, nfull);
	for (int i = 0; i < n; i++)
		assert_int_equal(frames[i].ip, full[i].ip);
}

/* No section header names .eh_frame_hdr (as in a file with stripped sections): PT_GNU_EH_FRAME finds it. */
static void test_eh_frame_hdr_by_phdr(void **state)
{
	static const char *const hide[] = { ".eh_frame_hdr", ".eh_frame" };
	assert_same_walk(*state, hide, 2, false);
}

/* Without .eh_frame_hdr the table is built from .eh_frame; without either there is nothing to unwind by. */
static void test_eh_frame_without_hdr(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	static const char *const no_hdr[] = { ".eh_frame_hdr" };
	assert_same_walk(f, no_hdr, 1, true);

	static const char *const no_cfi[] = { ".eh_frame_hdr", ".eh_frame" };
	read_exe(f, &f->img);
	hide_parts(&f->img, no_cfi, 2, true);
	swap_exe(f, &f->img);
	int n = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
	unswap_exe(f, &f->img);
	assert_int_equal(n, 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
}

/* Per-file data is cached by key until forgotten. */
static void test_forget(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct image *img = &f->img;
	static const char *const no_cfi[] = { ".eh_frame_hdr", ".eh_frame" };
	read_exe(f, img);
	hide_parts(img, no_cfi, 2, true);
	img->elf = elf_memory((char *)img->buf, img->size);

	f->swap_elf = f->exe->elf;
	f->swap_key = img;
	assert_true(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st) > 4);
	assert_int_equal(st, UNWIND_COMPLETE);
	/* Same key, other image: the cached tables still answer... */
	f->swap_elf = img->elf;
	assert_true(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st) > 4);
	assert_int_equal(st, UNWIND_COMPLETE);
	/* ...until the key is forgotten. */
	unwind_libunwind_forget(f->u, img);
	assert_int_equal(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unswap_exe(f, img);
	unwind_libunwind_forget(f->u, img); /* unknown keys are ignored */
	assert_true(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st) > 4);
	assert_int_equal(st, UNWIND_COMPLETE);
}

/* A hostile stack for the frame-pointer code at ip: saved rbps chain through `links` slots (offsets in the copy). */
static void forge_rbp_chain(struct sample_buf *b, uint64_t ip, const size_t *links, size_t n)
{
	uint64_t sp = b->s.regs[UNWIND_REG_SP];
	memset(b->stack, 0, 128);
	for (size_t i = 0; i < n; i++) {
		uint64_t next = sp + links[(i + 1) % n];
		memcpy(b->stack + links[i], &next, 8);
		memcpy(b->stack + links[i] + 8, &ip, 8);
	}
	b->s.stack_size = 128;
	b->s.regs[UNWIND_REG_IP] = ip;
	b->s.regs[UNWIND_REG_BP] = sp + links[0];
}

/*
 * Saved rbps that point back at themselves, with return addresses into the same rbp-based code: the walk
 * must stop at the first repeated or downward step rather than repeat frames up to the limit.
 */
static void test_loop_guard(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct sample_buf *b = scratch(f, false);
	fp_func(b);
	int n = unwind(f, b, frames, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(find_frame(f, frames, n, 0, "fp_func"), 1);
	uint64_t ret_in_fp = frames[1].ip;

	static const size_t self[] = { 32 }, pair[] = { 64, 32 };
	forge_rbp_chain(b, ret_in_fp, self, 1);
	n = unwind(f, b, frames, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_int_equal(n, 2);
	/* Frame 1's SP is sp+80, frame 2's would be sp+48: downward, so not a caller. */
	forge_rbp_chain(b, ret_in_fp, pair, 2);
	n = unwind(f, b, frames, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_int_equal(n, 2);
	assert_int_equal(frames[1].ip, ret_in_fp);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random registers and stacks salted with real code addresses: any result, but bounded and no crash. */
static void test_garbage(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct sample_buf *b = &f->scratch;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	const uint64_t *real = (const uint64_t *)f->sample.stack;
	size_t nreal = f->sample.s.stack_size / 8;
	for (int iter = 0; iter < 3000; iter++) {
		*b = f->sample;
		b->s.stack = b->stack;
		b->s.stack_size = xorshift(&seed) % (STACK_COPY + 1);
		for (size_t i = 0; i + 8 <= STACK_COPY; i += 8) {
			uint64_t r = xorshift(&seed), v = r;
			if (r % 4 == 0)
				v = real[r / 4 % nreal] + (r >> 60); /* a real return address or stack pointer, nearly */
			memcpy(b->stack + i, &v, 8);
		}
		for (int r = 0; r < UNWIND_NREGS; r++)
			if (xorshift(&seed) % 3 == 0)
				b->s.regs[r] = xorshift(&seed);
		if (iter % 2)
			b->s.regs[UNWIND_REG_IP] = f->sample.s.regs[UNWIND_REG_IP] + xorshift(&seed) % 64;
		size_t max = 1 + xorshift(&seed) % UNWIND_MAX_FRAMES;
		int n = unwind(f, b, frames, max, &st);
		assert_true(n >= 1 && (size_t)n <= max);
		assert_true(st == UNWIND_COMPLETE || st == UNWIND_TRUNCATED || st == UNWIND_UNKNOWN_LEAF);
	}
}

/* Truncated and corrupted copies of the executable in place of the real one: no crash. */
static void test_hostile_elf(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	uint64_t seed = 12345;
	for (int iter = 0; iter < 60; iter++) {
		struct image *img = &f->img;
		read_exe(f, img);
		if (iter % 3 == 0)
			img->size = xorshift(&seed) % img->size;
		for (int k = 0; k < 200 * (iter % 3); k++) {
			size_t at = xorshift(&seed) % img->size;
			img->buf[at] = (uint8_t)xorshift(&seed);
		}
		swap_exe(f, img);
		int n = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
		unswap_exe(f, img);
		assert_true(n >= 1 && n <= UNWIND_MAX_FRAMES);
	}
}

/* Not an assertion: the cost of one walk of the func_c sample, for the report. */
static void test_speed(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct timespec t0, t1;
	const int iters = 2000;
	int n = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < iters; i++)
		n = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / iters;
	print_message("libunwind reference: %.1f us per sample of %d frames\n", us, n);
	assert_int_equal(st, UNWIND_COMPLETE);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	load_maps(f);
	load_symbols(f);
	if (unwind_libunwind_new(&f->u) < 0)
		return -1;
	f->sample.stack_end = f->stack_end;
	func_a(&f->sample);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	unswap_exe(f, &f->img);
	unwind_libunwind_free(f->u);
	for (size_t i = 0; i < f->nfiles; i++) {
		elf_end(f->files[i].elf);
		close(f->files[i].fd);
	}
	free(f->syms);
	free(f);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_stack),
		cmocka_unit_test(test_truncated_stack),
		cmocka_unit_test(test_frame_limit),
		cmocka_unit_test(test_unknown_leaf),
		cmocka_unit_test(test_shared_library_frames),
		cmocka_unit_test(test_signal_frame),
		cmocka_unit_test(test_debug_frame),
		cmocka_unit_test(test_eh_frame_hdr_by_phdr),
		cmocka_unit_test(test_eh_frame_without_hdr),
		cmocka_unit_test(test_forget),
		cmocka_unit_test(test_loop_guard),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_hostile_elf),
		cmocka_unit_test(test_speed),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
