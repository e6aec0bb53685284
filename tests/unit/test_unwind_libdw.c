/*
 * Unit tests for unwind/unwind_libdw.c.
 *
 * The samples are real: a function captures this thread's registers with inline asm and copies the stack
 * above its stack pointer, as the kernel does for PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER. The process
 * is described from /proc/self/maps with libelf, the way hostprof's process manager describes a target, and
 * frames are named from this executable's .symtab (static functions included) or by the file they are in.
 * libunwind's reference unwinder runs on the same samples: the two oracles must agree frame for frame.
 *
 * The walk of this thread ends at _start, whose CFI marks the return address undefined: libdw reports the end
 * of the stack there, as libunwind does, so a whole walk is f3, f2, f1, setup, (cmocka), main,
 * __libc_start_call_main, __libc_start_main, _start and COMPLETE.
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

#include "unwind/unwind_libdw.h"
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

/* No inlining, cloning or other interprocedural shortcuts, no frame pointer: the unwinder must use CFI. */
#define SAMPLED __attribute__((noipa, optimize("omit-frame-pointer")))
/* After a call, so the call is not a tail call. */
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

SAMPLED int f3(struct sample_buf *b);
SAMPLED int f2(struct sample_buf *b);
SAMPLED int f1(struct sample_buf *b);

SAMPLED int f3(struct sample_buf *b)
{
	CAPTURE(b);
	return (int)(b->s.stack_size & 1);
}

SAMPLED int f2(struct sample_buf *b)
{
	int r = f3(b);
	NO_TAIL_CALL();
	return r + 1;
}

SAMPLED int f1(struct sample_buf *b)
{
	int r = f2(b);
	NO_TAIL_CALL();
	return r + 2;
}

/* ---- a function described only by .debug_frame ---- */

SAMPLED void df_callee(struct sample_buf *b);
SAMPLED int df_caller(struct sample_buf *b);
int hp_ldw_df_func(struct sample_buf *b);

SAMPLED void df_callee(struct sample_buf *b)
{
	CAPTURE(b);
}

/*
 * hp_ldw_df_func has no .eh_frame entry (no .cfi directives); its only CFI is the hand-written .debug_frame CIE
 * and FDE below. It keeps 24 bytes of frame, so nothing but its CFI can tell where its return address is.
 */
__asm__(".text\n"
	".globl hp_ldw_df_func\n"
	".type hp_ldw_df_func, @function\n"
	"hp_ldw_df_func:\n"
	"	subq $24, %rsp\n"
	"	call df_callee@PLT\n"
	"	addq $24, %rsp\n"
	"	ret\n"
	".Lhp_ldw_df_end:\n"
	".size hp_ldw_df_func, .-hp_ldw_df_func\n"
	".section .debug_frame,\"\",@progbits\n"
	".Lhp_ldw_df_cie:\n"
	"	.long .Lhp_ldw_df_cie_end - .Lhp_ldw_df_cie_id\n"
	".Lhp_ldw_df_cie_id:\n"
	"	.long 0xffffffff\n"	/* CIE id in .debug_frame */
	"	.byte 1\n"		/* version */
	"	.byte 0\n"		/* augmentation "" */
	"	.uleb128 1\n"		/* code alignment */
	"	.sleb128 -8\n"		/* data alignment */
	"	.byte 16\n"		/* return address column: rip */
	"	.byte 0x0c, 7, 8\n"	/* DW_CFA_def_cfa rsp+8 */
	"	.byte 0x90, 1\n"	/* DW_CFA_offset rip at cfa-8 */
	"	.balign 8, 0\n"
	".Lhp_ldw_df_cie_end:\n"
	"	.long .Lhp_ldw_df_fde_end - .Lhp_ldw_df_fde_id\n"
	".Lhp_ldw_df_fde_id:\n"
	"	.long .Lhp_ldw_df_cie\n"	/* CIE pointer: offset in .debug_frame */
	"	.quad hp_ldw_df_func\n"
	"	.quad .Lhp_ldw_df_end - hp_ldw_df_func\n"
	"	.byte 0x44\n"		/* DW_CFA_advance_loc 4 (past subq) */
	"	.byte 0x0e, 32\n"	/* DW_CFA_def_cfa_offset 32 */
	"	.byte 0x49\n"		/* DW_CFA_advance_loc 9 (past call and addq) */
	"	.byte 0x0e, 8\n"	/* DW_CFA_def_cfa_offset 8 */
	"	.balign 8, 0\n"
	".Lhp_ldw_df_fde_end:\n"
	".text\n");

SAMPLED int df_caller(struct sample_buf *b)
{
	int r = hp_ldw_df_func(b);
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
extern const char hp_ldw_ud2_insn[];

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
	__asm__ volatile(".globl hp_ldw_ud2_insn\nhp_ldw_ud2_insn: ud2" ::: "memory");
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

/* Another image of the executable, presented in its place under its own cache key. */
struct image {
	uint8_t *buf;		/* malloc'd copy, or NULL when the image is a file */
	size_t size;
	int fd;
	char path[64];		/* temporary file, removed by unswap_exe */
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
	Elf *swap_elf;
	const void *swap_key;
	struct unwind_libdw *u;
	struct unwind_libunwind *ul;	/* the other oracle */
	struct sample_buf sample;	/* f1 -> f2 -> f3 */
	struct sample_buf scratch;	/* for one test at a time */
	struct image img;
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
	/* A read-only mapping, as hostprof keeps: libdw must never write to the caller's image. */
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

/* bias = map start - pgoff + p_offset - p_vaddr, from the PT_LOAD whose file range holds pgoff. */
static bool map_bias(Elf *elf, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
	size_t n;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	if (elf_getphdrnum(elf, &n) != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_offset & ~(page - 1)) <= pgoff &&
		    pgoff < ph.p_offset + ph.p_filesz) {
			*bias = start - pgoff + ph.p_offset - ph.p_vaddr;
			return true;
		}
	}
	return false;
}

static void load_maps(struct fixture *f)
{
	FILE *fp = fopen("/proc/self/maps", "re");
	char line[1024];
	uint64_t here = (uint64_t)(uintptr_t)&line, code = (uint64_t)(uintptr_t)f1;
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

/* Executable mappings only, as perf reports after attach. */
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
	return unwind_libdw_unwind(f->u, &proc, &b->s, frames, max, st);
}

static int unwind_reference(struct fixture *f, const struct sample_buf *b, struct unwind_frame *frames, size_t max,
			    enum unwind_status *st)
{
	struct unwind_process proc = { .find_module = find_module, .ctx = f };
	return unwind_libunwind_unwind(f->ul, &proc, &b->s, frames, max, st);
}

/* Both oracles on one sample: same frames, same flags, same ending. Returns the frame count. */
static int assert_oracles_agree(struct fixture *f, const struct sample_buf *b, size_t max)
{
	struct unwind_frame a[UNWIND_MAX_FRAMES], r[UNWIND_MAX_FRAMES];
	enum unwind_status sa, sr;
	int na = unwind(f, b, a, max, &sa), nr = unwind_reference(f, b, r, max, &sr);
	bool same = na == nr && sa == sr;
	for (int i = 0; same && i < na; i++)
		same = a[i].ip == r[i].ip && a[i].flags == r[i].flags;
	if (!same) {
		print_message("libdw: %d frames, status %d\n", na, (int)sa);
		print_frames(f, a, na);
		print_message("libunwind: %d frames, status %d\n", nr, (int)sr);
		print_frames(f, r, nr);
	}
	assert_true(same);
	return na;
}

/* ---- other images of the executable ---- */

static void unswap_exe(struct fixture *f, struct image *img);

static void read_exe(struct fixture *f, struct image *img)
{
	size_t size;
	unswap_exe(f, img); /* whatever a failed test left behind */
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
	if (!img->elf)
		img->elf = elf_memory((char *)img->buf, img->size);
	assert_non_null(img->elf);
	f->swap_elf = img->elf;
	f->swap_key = img;
}

/* Back to the real executable; the image is forgotten by both unwinders and released. */
static void unswap_exe(struct fixture *f, struct image *img)
{
	unwind_libdw_forget(f->u, img);
	unwind_libunwind_forget(f->ul, img);
	f->swap_elf = NULL;
	f->swap_key = NULL;
	if (img->elf)
		elf_end(img->elf);
	if (img->fd >= 0)
		close(img->fd);
	if (img->path[0])
		unlink(img->path);
	free(img->buf);
	*img = (struct image){ .fd = -1 };
}

/*
 * A copy of the executable in a temporary file with its .debug_* sections zlib-compressed (where that makes
 * them smaller), opened read-only and mapped: what libdw would crash on if it decompressed into the image.
 * Returns the number of sections compressed.
 */
static int compressed_exe(struct fixture *f, struct image *img)
{
	size_t size, shstrndx;
	int compressed = 0;
	char *raw = elf_rawfile(f->exe->elf, &size);
	unswap_exe(f, img);
	snprintf(img->path, sizeof(img->path), "/tmp/hostprof-test-libdw-XXXXXX");
	int fd = mkstemp(img->path);
	assert_true(fd >= 0 && raw);
	assert_int_equal(write(fd, raw, size), (ssize_t)size);
	Elf *e = elf_begin(fd, ELF_C_RDWR, NULL);
	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	elf_flagelf(e, ELF_C_SET, ELF_F_LAYOUT); /* keep every offset: the loads must not move */
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		const char *name;
		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstrndx, sh.sh_name)) ||
		    strncmp(name, ".debug_", 7) != 0 || (sh.sh_flags & SHF_COMPRESSED) ||
		    elf_compress(scn, ELFCOMPRESS_ZLIB, 0) != 1)
			continue;
		/* Under ELF_F_LAYOUT, elf_update writes only what is marked dirty: the header and the data. */
		elf_flagshdr(scn, ELF_C_SET, ELF_F_DIRTY);
		elf_flagdata(elf_getdata(scn, NULL), ELF_C_SET, ELF_F_DIRTY);
		compressed++;
	}
	assert_true(elf_update(e, ELF_C_WRITE) > 0);
	elf_end(e);
	img->fd = fd;
	img->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(img->elf);
	return compressed;
}

/* ---- tests ---- */

/* frames[] starts f3, f2, f1, setup (the group setup takes the sample); whole walks end at _start. */
static void assert_own_stack(struct fixture *f, const struct unwind_frame *frames, int n, bool whole)
{
	static const char *const leaf[] = { "f3", "f2", "f1", "setup" };
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

/* The two oracles agree on every kind of sample here, whole and cut short. */
static void test_matches_libunwind(void **state)
{
	struct fixture *f = *state;
	struct sample_buf *b = scratch(f, false);
	struct sigaction sa = { .sa_sigaction = on_sigill, .sa_flags = SA_SIGINFO }, old;
	assert_true(assert_oracles_agree(f, &f->sample, UNWIND_MAX_FRAMES) > 4);
	for (size_t max = 1; max < 12; max++)
		assert_oracles_agree(f, &f->sample, max);

	call_qsort(b);
	assert_true(assert_oracles_agree(f, b, UNWIND_MAX_FRAMES) > 4);
	df_caller(b);
	assert_true(assert_oracles_agree(f, b, UNWIND_MAX_FRAMES) > 4);
	signal_target = b;
	assert_int_equal(sigaction(SIGILL, &sa, &old), 0);
	call_raise_sigill();
	sigaction(SIGILL, &old, NULL);
	assert_true(assert_oracles_agree(f, b, UNWIND_MAX_FRAMES) > 4);
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
		if (size % 512 == 0)
			assert_oracles_agree(f, b, UNWIND_MAX_FRAMES);
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
	int nfull = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(unwind(f, &f->sample, frames, 3, &st), 3);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_own_stack(f, frames, 3, false);
	/* Exactly enough room: the walk still sees the end. */
	assert_int_equal(unwind(f, &f->sample, frames, (size_t)nfull, &st), nfull);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(unwind(f, &f->sample, frames, 0, &st), 0);
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
	assert_int_equal(frames[k].ip, (uint64_t)(uintptr_t)hp_ldw_ud2_insn);
	assert_int_equal(frames[k].flags, UNWIND_FRAME_SIGNAL);
	assert_true(frame_in_file(f, frames, (size_t)k - 1, "/libc.so"));
	for (int i = 0; i < n; i++)
		if (i != k)
			assert_int_equal(frames[i].flags, 0);
	assert_int_equal(find_frame(f, frames, n, k, "call_raise_sigill"), k + 1);
	assert_true(find_frame(f, frames, n, k, "main") > k);
}

/* .debug_frame only: libdw's .debug_frame carries the walk through hp_ldw_df_func; hiding it stops there. */
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
	assert_int_equal(find_frame(f, frames, n, 0, "hp_ldw_df_func"), 1);
	assert_int_equal(find_frame(f, frames, n, 0, "df_caller"), 2);
	assert_true(find_frame(f, frames, n, 0, "main") > 2);

	/* libdw's frame-pointer guess would go on from hp_ldw_df_func; the oracle does not guess. */
	static const char *const hide[] = { ".debug_frame" };
	read_exe(f, &f->img);
	hide_parts(&f->img, hide, 1, false);
	swap_exe(f, &f->img);
	n = unwind(f, b, frames, UNWIND_MAX_FRAMES, &st);
	assert_oracles_agree(f, b, UNWIND_MAX_FRAMES);
	unswap_exe(f, &f->img);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_int_equal(n, 2);
}

/* No CFI at all for the executable: nothing past the leaf, whatever rbp holds. */
static void test_no_cfi(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	static const char *const no_cfi[] = { ".eh_frame_hdr", ".eh_frame", ".debug_frame" };
	read_exe(f, &f->img);
	hide_parts(&f->img, no_cfi, 3, true);
	swap_exe(f, &f->img);
	int n = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
	unswap_exe(f, &f->img);
	assert_int_equal(n, 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
}

/* Compressed debug sections in a read-only mapping: no crash, .eh_frame still used, the oracles agree. */
static void test_compressed_sections(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct sample_buf *b = scratch(f, false);
	int compressed = compressed_exe(f, &f->img);
	print_message("%d debug sections compressed%s\n", compressed, compressed ? "" : " (none without -g: only the plain path ran)");
	swap_exe(f, &f->img);
	int n = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_own_stack(f, frames, n, true);
	df_caller(b);
	n = assert_oracles_agree(f, b, UNWIND_MAX_FRAMES);
	unswap_exe(f, &f->img);
	assert_true(n >= 2);
}

/*
 * One Dwfl per process context, checked against find_module on every frame: when the file mapped at an address
 * changes under the same context, the new one is used at once, and the old one again when it comes back.
 */
static void test_module_change(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	static const char *const no_cfi[] = { ".eh_frame_hdr", ".eh_frame", ".debug_frame" };
	assert_true(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st) > 4);
	assert_int_equal(st, UNWIND_COMPLETE);
	read_exe(f, &f->img);
	hide_parts(&f->img, no_cfi, 3, true);
	swap_exe(f, &f->img);
	assert_int_equal(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	f->swap_elf = NULL; /* the real file again, the image still cached */
	assert_true(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st) > 4);
	assert_int_equal(st, UNWIND_COMPLETE);
	unswap_exe(f, &f->img);

	/* Other contexts get their own Dwfl; dropping one costs only its rebuild. */
	struct fixture *other = malloc(sizeof(*other));
	assert_non_null(other);
	memcpy(other, f, sizeof(*other));
	struct unwind_process p1 = { .find_module = find_module, .ctx = f }, p2 = { .find_module = find_module, .ctx = other };
	for (int i = 0; i < 4; i++) {
		const struct unwind_process *p = i % 2 ? &p2 : &p1;
		assert_true(unwind_libdw_unwind(f->u, p, &f->sample.s, frames, UNWIND_MAX_FRAMES, &st) > 4);
		assert_int_equal(st, UNWIND_COMPLETE);
		if (i == 1)
			unwind_libdw_forget_process(f->u, other);
	}
	unwind_libdw_forget_process(f->u, other);
	unwind_libdw_forget_process(f->u, NULL); /* unknown contexts are ignored */
	free(other);
}

/* Per-file data is cached by key until forgotten; forgetting drops the Dwfls that used the file. */
static void test_forget(void **state)
{
	struct fixture *f = *state;
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct image *img = &f->img;
	static const char *const no_cfi[] = { ".eh_frame_hdr", ".eh_frame", ".debug_frame" };
	read_exe(f, img);
	hide_parts(img, no_cfi, 3, true);
	img->elf = elf_memory((char *)img->buf, img->size);

	f->swap_elf = f->exe->elf;
	f->swap_key = img;
	assert_true(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st) > 4);
	assert_int_equal(st, UNWIND_COMPLETE);
	/* Same key, other image: the cached file still answers... */
	f->swap_elf = img->elf;
	assert_true(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st) > 4);
	assert_int_equal(st, UNWIND_COMPLETE);
	/* ...until the key is forgotten. */
	unwind_libdw_forget(f->u, img);
	assert_int_equal(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unswap_exe(f, img);
	unwind_libdw_forget(f->u, img); /* unknown keys are ignored */
	assert_true(unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st) > 4);
	assert_int_equal(st, UNWIND_COMPLETE);
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
		img->elf = elf_memory((char *)img->buf, img->size);
		if (img->elf)
			swap_exe(f, img);
		int n = unwind(f, &f->sample, frames, UNWIND_MAX_FRAMES, &st);
		unswap_exe(f, img);
		assert_true(n >= 1 && n <= UNWIND_MAX_FRAMES);
	}
}

/*
 * Microseconds of this thread's CPU time per walk of the samples: the best of several rounds, so that other
 * load on the machine counts as little as possible. *frames gets the frames of one pass.
 */
static double time_walks(struct fixture *f, int (*fn)(struct fixture *, const struct sample_buf *,
						      struct unwind_frame *, size_t, enum unwind_status *),
			 const struct sample_buf *const *samples, int nsamples, int rounds, int iters, long *frames)
{
	struct unwind_frame out[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	double best = 0;
	*frames = 0;
	for (int k = 0; k < nsamples; k++)
		*frames += fn(f, samples[k], out, UNWIND_MAX_FRAMES, &st);
	for (int r = 0; r < rounds; r++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
		for (int i = 0; i < iters; i++)
			for (int k = 0; k < nsamples; k++)
				fn(f, samples[k], out, UNWIND_MAX_FRAMES, &st);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
		double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / iters /
			    nsamples;
		if (r == 0 || us < best)
			best = us;
	}
	return best;
}

/* One line of the speed report: both unwinders on the same samples. */
static void report_speed(struct fixture *f, const char *what, const struct sample_buf *const *samples, int n)
{
	long frames_dw, frames_uw;
	double dw = time_walks(f, unwind, samples, n, 5, 400, &frames_dw);
	double uw = time_walks(f, unwind_reference, samples, n, 5, 400, &frames_uw);
	print_message("%s (%.1f frames): libdw %.2f us/sample, %.0f ns/frame; libunwind %.2f us/sample, %.0f ns/frame; "
		      "libdw/libunwind x%.2f\n", what, (double)frames_dw / n, dw, dw * 1e3 * n / (double)frames_dw, uw,
		      uw * 1e3 * n / (double)frames_uw, dw / uw);
	assert_int_equal(frames_dw, frames_uw);
}

/* Not an assertion: the cost of walks, libdw against libunwind, for the report. */
static void test_speed(void **state)
{
	struct fixture *f = *state;
	static struct sample_buf qs, df;
	struct unwind_frame out[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct timespec t0, t1;
	qs.stack_end = df.stack_end = f->stack_end;
	call_qsort(&qs);
	df_caller(&df);
	const struct sample_buf *samples[] = { &f->sample, &qs, &df };

	/* Cold: a fresh instance builds its Dwfl, reports the modules, opens their CFI. */
	struct unwind_libdw *warm = f->u;
	assert_int_equal(unwind_libdw_new(&f->u), 0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	unwind(f, &f->sample, out, UNWIND_MAX_FRAMES, &st);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	unwind_libdw_free(f->u);
	f->u = warm;
	print_message("libdw, first sample of a fresh instance: %.0f us\n",
		      (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3);
	report_speed(f, "f1->f2->f3 sample", samples, 1);
	report_speed(f, "f3, qsort and .debug_frame samples", samples, 3);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	f->img.fd = -1;
	load_maps(f);
	load_symbols(f);
	if (unwind_libdw_new(&f->u) < 0 || unwind_libunwind_new(&f->ul) < 0)
		return -1;
	f->sample.stack_end = f->stack_end;
	f1(&f->sample);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	unswap_exe(f, &f->img);
	unwind_libdw_free(f->u);
	unwind_libunwind_free(f->ul);
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
		cmocka_unit_test(test_matches_libunwind),
		cmocka_unit_test(test_truncated_stack),
		cmocka_unit_test(test_frame_limit),
		cmocka_unit_test(test_unknown_leaf),
		cmocka_unit_test(test_shared_library_frames),
		cmocka_unit_test(test_signal_frame),
		cmocka_unit_test(test_debug_frame),
		cmocka_unit_test(test_no_cfi),
		cmocka_unit_test(test_compressed_sections),
		cmocka_unit_test(test_module_change),
		cmocka_unit_test(test_forget),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_hostile_elf),
		cmocka_unit_test(test_speed),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
