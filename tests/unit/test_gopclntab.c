/*
 * Unit tests for unwind/gopclntab.c and symbols/gosym.c.
 *
 * Synthetic tables of each layout (Go 1.2, 1.16, 1.18, 1.20) are written byte by byte, wrapped into a tiny static
 * executable with objcopy, and checked function by function: names, pcsp runs, stack-delta rows (prologue
 * detection, STOP / frame-pointer / SIGNAL / SPWRITE functions), file:line and inline frames. A known pc-value
 * table (an SP delta of 0, 32, 40, 48, 40, 32, 0 over a 0x9c-byte function) is decoded. Mutated and truncated
 * tables must fail cleanly.
 * Real Go binaries are built at test time (pure, stripped, stripped with the section renamed so that only the
 * magic scan finds it, cgo, cgo PIE stripped) when `go` is installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/gosym.h"
#include "unwind/gopclntab.h"
#include "tests/lib/testlib.h"

/* ---- small helpers ---------------------------------------------------------------------------------------- */

struct tg_env {
	char dir[64];
};

static int tg_setup(void **state)
{
	struct tg_env *env = calloc(1, sizeof(*env));
	if (!env)
		return -1;
	strcpy(env->dir, "/tmp/hostprof-gopclntab-XXXXXX");
	if (!mkdtemp(env->dir))
		return -1;
	elf_version(EV_CURRENT);
	*state = env;
	return 0;
}

static int tg_teardown(void **state)
{
	struct tg_env *env = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", env->dir);
	if (getenv("HOSTPROF_TEST_KEEP"))
		print_message("kept %s\n", env->dir);
	else if (system(cmd) != 0)
		return -1;
	free(env);
	return 0;
}

/* Run a shell command (output to the log file cmd.log in the test directory); its exit status. */
static int tg_sh(const struct tg_env *env, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(cmd, sizeof(cmd), "cd '%s' && ( ", env->dir);
	n += vsnprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, ap);
	snprintf(cmd + n, sizeof(cmd) - (size_t)n, " ) >>cmd.log 2>&1");
	va_end(ap);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void tg_path(const struct tg_env *env, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", env->dir, name);
}

static void tg_write(const struct tg_env *env, const char *name, const void *data, size_t len)
{
	char path[256];
	tg_path(env, name, path, sizeof(path));
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* An open ELF file and its table. */
struct tg_file {
	int fd;
	Elf *elf;
	struct gopclntab *t;
};

static int tg_open(const struct tg_env *env, const char *name, struct tg_file *f)
{
	char path[256];
	tg_path(env, name, path, sizeof(path));
	f->t = NULL;
	f->fd = open(path, O_RDONLY);
	assert_true(f->fd >= 0);
	f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(f->elf);
	return gopclntab_open(f->elf, &f->t);
}

static void tg_close(struct tg_file *f)
{
	gopclntab_free(f->t);
	elf_end(f->elf);
	close(f->fd);
}

/* Address of a symbol of an ELF file, 0 when absent. */
static uint64_t tg_symbol(Elf *elf, const char *name)
{
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < d->d_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;
			if (gelf_getsym(d, (int)i, &s) && (n = elf_strptr(elf, sh.sh_link, s.st_name)) && strcmp(n, name) == 0)
				return s.st_value;
		}
	}
	return 0;
}

static bool tg_find_func(const struct gopclntab *t, const char *name, struct gopclntab_func *out, size_t *index)
{
	for (size_t i = 0; i < gopclntab_func_count(t); i++)
		if (gopclntab_func(t, i, out) == 0 && strcmp(out->name, name) == 0) {
			if (index)
				*index = i;
			return true;
		}
	return false;
}

static bool tg_ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);
	return s && a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ---- the pc-value vector ----------------------------------------------------------------------------------- */

struct tg_runs {
	size_t n;
	uint64_t start[64], end[64];
	int32_t value[64];
};

static int tg_runs_cb(void *ctx, uint64_t start, uint64_t end, int32_t value)
{
	struct tg_runs *r = ctx;
	if (r->n < 64) {
		r->start[r->n] = start;
		r->end[r->n] = end;
		r->value[r->n] = value;
	}
	r->n++;
	return 0;
}

static void test_pcvalue_vector(void **state)
{
	(void)state;
	static const uint8_t tab[] = { 0x02, 0x19, 0x40, 0x52, 0x10, 0x02, 0x10, 0x06, 0x0f,
				       0x01, 0x0f, 0x27, 0x3f, 0x01, 0x00 };
	static const int32_t want_val[] = { 0, 32, 40, 48, 40, 32, 0 };
	static const uint64_t want_end[] = { 0x2019, 0x206b, 0x206d, 0x2073, 0x2074, 0x209b, 0x209c };
	struct tg_runs r = { 0 };
	assert_int_equal(gopclntab_decode_pcvalue(tab, sizeof(tab), 0x2000, UINT64_MAX, 1, tg_runs_cb, &r), 0);
	assert_int_equal(r.n, 7);
	for (size_t i = 0; i < 7; i++) {
		assert_int_equal(r.value[i], want_val[i]);
		assert_int_equal(r.end[i], want_end[i]);
		assert_int_equal(r.start[i], i ? want_end[i - 1] : 0x2000);
	}
	/* A limit cuts the last run; quantum 4 scales pc deltas. */
	memset(&r, 0, sizeof(r));
	assert_int_equal(gopclntab_decode_pcvalue(tab, sizeof(tab), 0x2000, 0x2070, 1, tg_runs_cb, &r), 0);
	assert_int_equal(r.n, 4);
	assert_int_equal(r.end[3], 0x2070);
	memset(&r, 0, sizeof(r));
	assert_int_equal(gopclntab_decode_pcvalue(tab, sizeof(tab), 0, UINT64_MAX, 4, tg_runs_cb, &r), 0);
	assert_int_equal(r.end[0], 0x19 * 4);
	/* Truncated anywhere inside a step, and an over-long varint: errors, never reads past the end. */
	for (size_t len = 0; len < sizeof(tab); len++) {
		memset(&r, 0, sizeof(r));
		assert_int_equal(gopclntab_decode_pcvalue(tab, len, 0x2000, UINT64_MAX, 1, tg_runs_cb, &r), -EBADMSG);
	}
	static const uint8_t huge[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x01 };
	assert_int_equal(gopclntab_decode_pcvalue(huge, sizeof(huge), 0, UINT64_MAX, 1, tg_runs_cb, &r), -EBADMSG);
}

/* ---- synthetic tables ----------------------------------------------------------------------------------------- */

struct tg_buf {
	uint8_t *p;
	size_t len, cap;
};

static void tg_put(struct tg_buf *b, const void *d, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void tg_u8(struct tg_buf *b, uint8_t v) { tg_put(b, &v, 1); }
static void tg_u32(struct tg_buf *b, uint32_t v) { tg_put(b, &v, 4); }
static void tg_u64(struct tg_buf *b, uint64_t v) { tg_put(b, &v, 8); }
static void tg_set32(struct tg_buf *b, size_t off, uint32_t v) { memcpy(b->p + off, &v, 4); }
static void tg_set64(struct tg_buf *b, size_t off, uint64_t v) { memcpy(b->p + off, &v, 8); }

static void tg_align(struct tg_buf *b, size_t a)
{
	while (b->len % a)
		tg_u8(b, 0);
}

static void tg_uvarint(struct tg_buf *b, uint32_t v)
{
	while (v >= 0x80) {
		tg_u8(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	tg_u8(b, (uint8_t)v);
}

/* A pc-value table: value[i] holds up to end[i] (offsets from the function's entry). */
struct tg_pcv {
	size_t n;
	int32_t value[6];
	uint32_t end[6];
};

static void tg_encode_pcv(struct tg_buf *b, const struct tg_pcv *v)
{
	int32_t val = -1;
	uint32_t pc = 0;
	for (size_t i = 0; i < v->n; i++) {
		int32_t d = v->value[i] - val;
		tg_uvarint(b, d < 0 ? ((uint32_t)~d << 1) | 1 : (uint32_t)d << 1);
		tg_uvarint(b, v->end[i] - pc);
		val = v->value[i];
		pc = v->end[i];
	}
	tg_u8(b, 0);
}

enum { TG_NFUNC = 6, TG_CODE = 0x100, TG_FILE_A = 0, TG_FILE_B = 1 };

/* The synthetic functions: offsets in the code region, tables, flag. */
struct tg_fn {
	const char *name;
	uint32_t start, end;
	uint8_t flag;
	struct tg_pcv sp, file, line, inl;
};

static const struct tg_fn tg_fns[TG_NFUNC] = {
	{ "main.alpha", 0x00, 0x40, 0, { 3, { 0, 0x20, 0 }, { 4, 0x30, 0x31 } }, { 1, { TG_FILE_A }, { 0x31 } },
	  { 1, { 5 }, { 0x31 } }, { 0 } },
	{ "main.beta", 0x40, 0x80, 0, { 3, { 0, 8, 0 }, { 1, 0x30, 0x31 } },
	  { 3, { TG_FILE_A, TG_FILE_B, TG_FILE_A }, { 0x20, 0x28, 0x31 } },
	  { 4, { 10, 12, 30, 14 }, { 0x10, 0x20, 0x28, 0x31 } }, { 3, { -1, 0, -1 }, { 0x20, 0x28, 0x31 } } },
	{ "runtime.goexit", 0x80, 0xa0, GOPCLNTAB_FLAG_TOPFRAME, { 1, { 0 }, { 1 } }, { 1, { 0 }, { 1 } },
	  { 1, { 1 }, { 1 } }, { 0 } },
	{ "runtime.systemstack", 0xa0, 0xc0, GOPCLNTAB_FLAG_SPWRITE, { 1, { 0 }, { 1 } }, { 1, { 0 }, { 1 } },
	  { 1, { 1 }, { 1 } }, { 0 } },
	{ "runtime.sigreturn__sigaction", 0xc0, 0xe0, 0, { 1, { 0 }, { 1 } }, { 1, { 0 }, { 1 } },
	  { 1, { 1 }, { 1 } }, { 0 } },
	{ "runtime.gogo", 0xe0, 0x100, GOPCLNTAB_FLAG_SPWRITE, { 1, { 0 }, { 1 } }, { 1, { 0 }, { 1 } },
	  { 1, { 1 }, { 1 } }, { 0 } },
};

static const char *const tg_files[2] = { "/src/main.go", "/src/inl.go" };
#define TG_INLINED_NAME "main.inlined"

/* Offset of name k in the names region (k == TG_NFUNC: the inlined function). */
static uint32_t tg_name_off(size_t k)
{
	uint32_t off = 0;
	for (size_t i = 0; i < k; i++)
		off += (uint32_t)strlen(tg_fns[i].name) + 1;
	return off;
}

static void tg_names(struct tg_buf *b)
{
	for (size_t i = 0; i < TG_NFUNC; i++)
		tg_put(b, tg_fns[i].name, strlen(tg_fns[i].name) + 1);
	tg_put(b, TG_INLINED_NAME, sizeof(TG_INLINED_NAME));
}

/* Where the pieces of one function's record point. */
struct tg_refs {
	uint32_t sp, file, line, inl;
};

/* Write the _func record of function i at the end of b (8-aligned). */
static void tg_record(struct tg_buf *b, enum gopclntab_version ver, size_t i, uint64_t code, uint32_t nameoff,
		      const struct tg_refs *r, uint64_t tree)
{
	const struct tg_fn *fn = &tg_fns[i];
	bool inl = ver != GOPCLNTAB_GO12 && fn->inl.n;
	size_t rec = b->len;
	if (ver >= GOPCLNTAB_GO118)
		tg_u32(b, fn->start);
	else
		tg_u64(b, code + fn->start);
	tg_u32(b, nameoff);
	tg_u32(b, 0);			/* args */
	tg_u32(b, 0);			/* deferreturn */
	tg_u32(b, r->sp);
	tg_u32(b, r->file);
	tg_u32(b, r->line);
	tg_u32(b, inl ? 3 : 0);		/* npcdata */
	if (ver != GOPCLNTAB_GO12)
		tg_u32(b, 0);		/* cuOffset */
	if (ver == GOPCLNTAB_GO120)
		tg_u32(b, 1);		/* startLine */
	tg_u8(b, 0);			/* funcID */
	tg_u8(b, ver == GOPCLNTAB_GO12 ? 0 : fn->flag);
	tg_u8(b, 0);
	tg_u8(b, inl ? 4 : 0);		/* nfuncdata */
	if (!inl)
		return;
	tg_u32(b, 0);
	tg_u32(b, 0);
	tg_u32(b, r->inl);
	for (int k = 0; k < 4; k++) {
		if (ver >= GOPCLNTAB_GO118) {
			tg_u32(b, k == 3 ? 0 : 0xffffffffu);	/* the tree is at go:func.* + 0 */
			continue;
		}
		if ((b->len - rec) & 4)
			tg_u32(b, 0);
		tg_u64(b, k == 3 ? tree : 0);
	}
}

/* pc-value tables of every function, appended to b; offsets relative to base. Files are numbered from
 * file_base (1 in Go 1.2 tables, whose file table has its count in slot 0). */
static void tg_pctabs(struct tg_buf *b, size_t base, int32_t file_base, struct tg_refs *refs)
{
	for (size_t i = 0; i < TG_NFUNC; i++) {
		const struct tg_fn *fn = &tg_fns[i];
		struct tg_pcv file = fn->file;
		for (size_t k = 0; k < file.n; k++)
			file.value[k] += file_base;
		refs[i].sp = (uint32_t)(b->len - base);
		tg_encode_pcv(b, &fn->sp);
		refs[i].file = (uint32_t)(b->len - base);
		tg_encode_pcv(b, &file);
		refs[i].line = (uint32_t)(b->len - base);
		tg_encode_pcv(b, &fn->line);
		refs[i].inl = 0;
		if (fn->inl.n) {
			refs[i].inl = (uint32_t)(b->len - base);
			tg_encode_pcv(b, &fn->inl);
		}
	}
}

/* Go 1.2: header, nfunc, function table, file-table offset; names, files, pc-value tables, records. */
static void tg_table_go12(struct tg_buf *b, uint64_t code)
{
	struct tg_refs refs[TG_NFUNC];
	static const uint8_t hdr[8] = { 0xfb, 0xff, 0xff, 0xff, 0, 0, 1, 8 };
	tg_put(b, hdr, 8);
	tg_u64(b, TG_NFUNC);
	size_t ftab = b->len;
	for (size_t i = 0; i <= TG_NFUNC; i++) {
		tg_u64(b, code + (i < TG_NFUNC ? tg_fns[i].start : TG_CODE));
		if (i < TG_NFUNC)
			tg_u64(b, 0);
	}
	size_t filetab_ref = b->len;
	tg_u32(b, 0);
	tg_align(b, 8);
	size_t names = b->len;
	tg_names(b);
	tg_align(b, 4);
	size_t filetab = b->len;
	tg_set32(b, filetab_ref, (uint32_t)filetab);
	tg_u32(b, 3);
	tg_u32(b, 0);
	tg_u32(b, 0);
	for (int k = 0; k < 2; k++) {
		tg_set32(b, filetab + 4 + 4 * (size_t)k, (uint32_t)b->len);
		tg_put(b, tg_files[k], strlen(tg_files[k]) + 1);
	}
	tg_pctabs(b, 0, 1, refs);
	for (size_t i = 0; i < TG_NFUNC; i++) {
		tg_align(b, 8);
		tg_set64(b, ftab + 16 * i + 8, b->len);
		tg_record(b, GOPCLNTAB_GO12, i, code, (uint32_t)names + tg_name_off(i), &refs[i], 0);
	}
}

/* Go >= 1.16: header words, names, cutab, files, pctab, then function table and records. */
static void tg_table_go116(struct tg_buf *b, enum gopclntab_version ver, uint64_t code, uint64_t tree)
{
	struct tg_refs refs[TG_NFUNC];
	uint8_t magic = ver == GOPCLNTAB_GO116 ? 0xfa : ver == GOPCLNTAB_GO118 ? 0xf0 : 0xf1;
	const uint8_t hdr[8] = { magic, 0xff, 0xff, 0xff, 0, 0, 1, 8 };
	size_t nwords = ver == GOPCLNTAB_GO116 ? 7 : 8, off_word = nwords - 5;
	tg_put(b, hdr, 8);
	tg_u64(b, TG_NFUNC);
	tg_u64(b, 2);
	for (size_t k = 2; k < nwords; k++)
		tg_u64(b, k == 2 && ver != GOPCLNTAB_GO116 ? code : 0);
	size_t region[5];
	region[0] = b->len;
	tg_names(b);
	tg_align(b, 4);
	region[1] = b->len;
	tg_u32(b, 0);
	tg_u32(b, (uint32_t)strlen(tg_files[0]) + 1);
	region[2] = b->len;
	for (int k = 0; k < 2; k++)
		tg_put(b, tg_files[k], strlen(tg_files[k]) + 1);
	region[3] = b->len;
	tg_u8(b, 0);		/* offset 0 means "no table" */
	tg_pctabs(b, region[3], 0, refs);
	tg_align(b, 8);
	region[4] = b->len;
	for (size_t k = 0; k < 5; k++)
		tg_set64(b, 8 + 8 * (off_word + k), region[k]);
	size_t ftab = b->len;
	for (size_t i = 0; i <= TG_NFUNC; i++) {
		uint32_t start = i < TG_NFUNC ? tg_fns[i].start : TG_CODE;
		if (ver == GOPCLNTAB_GO116) {
			tg_u64(b, code + start);
			tg_u64(b, 0);
		} else {
			tg_u32(b, start);
			tg_u32(b, 0);
		}
	}
	size_t stride = ver == GOPCLNTAB_GO116 ? 16 : 8;
	for (size_t i = 0; i < TG_NFUNC; i++) {
		tg_align(b, 8);
		size_t funcoff = b->len - region[4], at = ftab + stride * i + stride / 2;
		if (ver == GOPCLNTAB_GO116)
			tg_set64(b, at, funcoff);
		else
			tg_set32(b, at, (uint32_t)funcoff);
		tg_record(b, ver, i, code, tg_name_off(i), &refs[i], tree);
	}
}

/* The tiny executable: code bytes at gocode (two prologues), an inline tree at go:func.* in .rodata. */
static void tg_tiny_source(const struct tg_env *env, enum gopclntab_version ver)
{
	char src[4096];
	uint32_t nameoff = tg_name_off(TG_NFUNC);
	uint8_t tree[20] = { 0 };
	if (ver == GOPCLNTAB_GO120) {
		memcpy(tree + 4, &nameoff, 4);
		tree[8] = 0x10;		/* parentPc */
		tree[12] = 29;		/* startLine */
	} else {
		tree[0] = tree[1] = 0xff;	/* parent -1 */
		tree[4] = 1;
		tree[8] = 12;
		memcpy(tree + 12, &nameoff, 4);
		tree[16] = 0x10;
	}
	int n = snprintf(src, sizeof(src),
			 "__attribute__((used, aligned(8))) const unsigned char gotree[] = {");
	for (size_t i = 0; i < sizeof(tree); i++)
		n += snprintf(src + n, sizeof(src) - (size_t)n, "%u,", tree[i]);
	snprintf(src + n, sizeof(src) - (size_t)n,
		 "};\n"
		 "__asm__(\".globl \\\"go:func.*\\\"\\n.set \\\"go:func.*\\\", gotree\\n\");\n"
		 "__asm__(\".text\\n.globl gocode\\n.p2align 8\\ngocode:\\n"
		 /* main.alpha: sub $0x20,%rsp; mov %rbp,0x18(%rsp); lea 0x18(%rsp),%rbp ... ret */
		 ".byte 0x48,0x83,0xec,0x20, 0x48,0x89,0x6c,0x24,0x18, 0x48,0x8d,0x6c,0x24,0x18\\n"
		 ".fill 0x30-14, 1, 0x90\\n.byte 0xc3\\n.fill 0x0f, 1, 0xcc\\n"
		 /* main.beta: push %rbp; mov %rsp,%rbp ... */
		 ".byte 0x55, 0x48,0x89,0xe5\\n.fill 0x30-4, 1, 0x90\\n.byte 0xc3\\n.fill 0x0f, 1, 0xcc\\n"
		 /* runtime.goexit; runtime.systemstack, with a frame of its own in the 1.20 layout */
		 ".fill 0x20, 1, 0xc3\\n%s.fill 0x60, 1, 0xc3\\n\");\n"
		 "void _start(void) { for (;;) ; }\n",
		 ver == GOPCLNTAB_GO120 ? ".byte 0x55, 0x48,0x89,0xe5\\n.fill 0x1c, 1, 0xc3\\n" : ".fill 0x20, 1, 0xc3\\n");
	tg_write(env, "tiny.c", src, strlen(src));
}

/* Build tiny.gopclntab.<ver> (table as a .gopclntab section) and tiny.scan.<ver> (as an unnamed rodata
 * section of a file marked as Go). Returns the code address. */
static uint64_t tg_build_synthetic(const struct tg_env *env, enum gopclntab_version ver, struct tg_buf *table)
{
	struct tg_file f;
	tg_tiny_source(env, ver);
	assert_int_equal(tg_sh(env, "gcc -O1 -nostdlib -static -o tiny tiny.c"), 0);
	tg_open(env, "tiny", &f);	/* not Go: -ENOENT */
	assert_null(f.t);
	uint64_t code = tg_symbol(f.elf, "gocode"), tree = tg_symbol(f.elf, "gotree");
	tg_close(&f);
	assert_true(code != 0 && tree != 0);
	memset(table, 0, sizeof(*table));
	if (ver == GOPCLNTAB_GO12)
		tg_table_go12(table, code);
	else
		tg_table_go116(table, ver, code, tree);
	tg_write(env, "table.bin", table->p, table->len);
	assert_int_equal(tg_sh(env, "objcopy --add-section .gopclntab=table.bin tiny tiny.gopclntab.%d", ver), 0);
	assert_int_equal(tg_sh(env, "objcopy --add-section .rodata.go=table.bin --set-section-flags "
				    ".rodata.go=alloc,load,readonly,data --change-section-address .rodata.go=0x900000 "
				    "--add-section .note.go.buildid=/dev/null tiny tiny.scan.%d",
			       ver),
			 0);
	return code;
}

struct tg_rows {
	size_t n;
	uint64_t last;
	uint64_t va[64];
	char text[64][48];
};

/* A rule as text, e.g. "sp+40 fp-16", "stop". */
static void tg_rule_text(const struct stack_delta_rule *r, char *buf, size_t len)
{
	static const char *const kinds[] = { "invalid", "sp", "fp", "sp-deref", "fp-deref", "plt", "signal", "stop",
					     "fallback" };
	const char *k = r->kind < sizeof(kinds) / sizeof(kinds[0]) ? kinds[r->kind] : "?";
	if (r->kind == STACK_DELTA_CFA_SP || r->kind == STACK_DELTA_CFA_FP)
		snprintf(buf, len, "%s+%d%s", k, r->cfa_off, r->fp == STACK_DELTA_FP_AT_CFA ? " fp-16" : "");
	else
		snprintf(buf, len, "%s", k);
	if ((r->kind == STACK_DELTA_CFA_FP || r->kind == STACK_DELTA_STOP) && (r->aux & STACK_DELTA_GO_STACK_SWITCH))
		snprintf(buf + strlen(buf), len - strlen(buf), " go-switch");
	if ((r->kind == STACK_DELTA_CFA_SP || r->kind == STACK_DELTA_CFA_FP) && (r->aux & STACK_DELTA_GO_FP_FRAME))
		snprintf(buf + strlen(buf), len - strlen(buf), " fp-frame");
	if (r->fp == STACK_DELTA_FP_AT_CFA && r->fp_off != -16)
		snprintf(buf, len, "bad fp_off %d", r->fp_off);
}

static int tg_rows_cb(void *ctx, uint64_t va, const struct stack_delta_rule *rule)
{
	struct tg_rows *r = ctx;
	if (r->n > 0)
		assert_true(va >= r->last);
	r->last = va;
	if (r->n < 64) {
		r->va[r->n] = va;
		tg_rule_text(rule, r->text[r->n], sizeof(r->text[0]));
	}
	r->n++;
	return 0;
}

/* The rule in effect at code + off, from the emitted rows. */
static const char *tg_rule_at(const struct tg_rows *r, uint64_t va)
{
	const char *found = NULL;
	for (size_t i = 0; i < r->n && i < 64 && r->va[i] <= va; i++)
		found = r->text[i];
	return found;
}

static void tg_check_rules(const struct gopclntab *t, enum gopclntab_version ver, uint64_t code)
{
	struct tg_rows r = { 0 };
	char want[48];
	assert_int_equal(gopclntab_for_each_rule(t, tg_rows_cb, &r), 0);
	/* fp_frame: FP is the frame's own frame pointer there (Go code past its prologue; a systemstack that pushes
	 * a frame of its own, as the 1.20 layout's tiny code does, like newer runtimes). */
	struct { uint32_t off; int kind; int cfa; bool fp; bool go_switch; bool fp_frame; } exp[] = {
		{ 0x00, STACK_DELTA_CFA_SP, 8, false, false, false },	/* alpha: entry */
		{ 0x04, STACK_DELTA_CFA_SP, 40, false, false, false },	/* after sub, before the rbp store */
		{ 0x09, STACK_DELTA_CFA_SP, 40, true, false, true },	/* rbp saved */
		{ 0x30, STACK_DELTA_CFA_SP, 8, false, false, false },	/* at ret */
		{ 0x3f, STACK_DELTA_CFA_SP, 8, false, false, false },	/* padding keeps the last rule */
		{ 0x40, STACK_DELTA_CFA_SP, 8, false, false, false },	/* beta: push %rbp */
		{ 0x41, STACK_DELTA_CFA_SP, 16, true, false, true },	/* rbp saved by the push */
		{ 0x70, STACK_DELTA_CFA_SP, 8, false, false, false },
		{ 0x80, STACK_DELTA_STOP, 0, false, false, false },	/* runtime.goexit */
		{ 0xa0, STACK_DELTA_CFA_FP, 16, true, true, ver == GOPCLNTAB_GO120 },	/* runtime.systemstack */
		{ 0xbf, STACK_DELTA_SIGNAL, 0, false, false, false },	/* the byte before the restorer */
		{ 0xc5, STACK_DELTA_SIGNAL, 0, false, false, false },
		{ 0xe0, ver == GOPCLNTAB_GO12 ? STACK_DELTA_CFA_SP : STACK_DELTA_INVALID, 8, false, false, false },
		{ TG_CODE, STACK_DELTA_INVALID, 0, false, false, false },
	};
	for (size_t i = 0; i < sizeof(exp) / sizeof(exp[0]); i++) {
		struct stack_delta_rule rule = { .kind = (uint8_t)exp[i].kind };
		if (exp[i].kind == STACK_DELTA_CFA_SP || exp[i].kind == STACK_DELTA_CFA_FP)
			rule.cfa_off = exp[i].cfa;
		if (exp[i].fp) {
			rule.fp = STACK_DELTA_FP_AT_CFA;
			rule.fp_off = -16;
		}
		rule.aux = (exp[i].go_switch ? STACK_DELTA_GO_STACK_SWITCH : 0) | (exp[i].fp_frame ? STACK_DELTA_GO_FP_FRAME : 0);
		tg_rule_text(&rule, want, sizeof(want));
		const char *got = tg_rule_at(&r, code + exp[i].off);
		assert_non_null(got);
		if (strcmp(got, want) != 0)
			fail_msg("version %d, code+%#x: rule %s, want %s", ver, exp[i].off, got, want);
	}
}

static void tg_check_symbols(const struct gopclntab *t, enum gopclntab_version ver, uint64_t code)
{
	struct symbol_frame fr[4];
	int n = gosym_lookup(t, code + 0x10, fr, 4);
	assert_int_equal(n, 1);
	assert_string_equal(fr[0].function, "main.alpha");
	assert_string_equal(fr[0].file, "/src/main.go");
	assert_int_equal(fr[0].line, 5);
	assert_int_equal(fr[0].inlined, 0);
	assert_int_equal(fr[0].go, 1);	/* Go code: profiles give it frame kind Go */
	n = gosym_lookup(t, code + 0x44, fr, 4);
	assert_int_equal(n, 1);
	assert_string_equal(fr[0].function, "main.beta");
	assert_int_equal(fr[0].line, 10);
	n = gosym_lookup(t, code + 0x62, fr, 4);
	if (ver == GOPCLNTAB_GO12) {
		/* No inline tree: the physical function at the innermost position. */
		assert_int_equal(n, 1);
		assert_string_equal(fr[0].function, "main.beta");
		assert_string_equal(fr[0].file, "/src/inl.go");
		assert_int_equal(fr[0].line, 30);
	} else {
		assert_int_equal(n, 2);
		assert_string_equal(fr[0].function, TG_INLINED_NAME);
		assert_string_equal(fr[0].file, "/src/inl.go");
		assert_int_equal(fr[0].line, 30);
		assert_int_equal(fr[0].inlined, 1);
		assert_string_equal(fr[1].function, "main.beta");
		assert_string_equal(fr[1].file, "/src/main.go");
		assert_int_equal(fr[1].line, 12);
		assert_int_equal(fr[1].inlined, 0);
		/* max 1 keeps the innermost frame. */
		assert_int_equal(gosym_lookup(t, code + 0x62, fr, 1), 1);
		assert_string_equal(fr[0].function, TG_INLINED_NAME);
	}
	assert_int_equal(gosym_lookup(t, code + TG_CODE, fr, 4), 0);
	assert_int_equal(gosym_lookup(t, code - 1, fr, 4), 0);
	assert_int_equal(gosym_lookup(t, code, fr, 0), 0);
}

static void tg_check_table(const struct gopclntab *t, enum gopclntab_version ver, uint64_t code)
{
	struct gopclntab_func f;
	struct tg_runs runs = { 0 };
	size_t idx;
	uint64_t lo, hi;
	assert_int_equal(gopclntab_version(t), ver);
	assert_int_equal(gopclntab_func_count(t), TG_NFUNC);
	gopclntab_text_range(t, &lo, &hi);
	assert_int_equal(lo, code);
	assert_int_equal(hi, code + TG_CODE);
	for (size_t i = 0; i < TG_NFUNC; i++) {
		assert_int_equal(gopclntab_func(t, i, &f), 0);
		assert_string_equal(f.name, tg_fns[i].name);
		assert_int_equal(f.entry, code + tg_fns[i].start);
		assert_int_equal(f.end, code + tg_fns[i].end);
		assert_int_equal(f.flag, ver == GOPCLNTAB_GO12 ? 0 : tg_fns[i].flag);
		assert_int_equal(gopclntab_find_func(t, f.entry, &idx), 0);
		assert_int_equal(idx, i);
		assert_int_equal(gopclntab_find_func(t, f.end - 1, &idx), 0);
		assert_int_equal(idx, i);
	}
	assert_int_equal(gopclntab_func(t, TG_NFUNC, &f), -ERANGE);
	assert_int_equal(gopclntab_find_func(t, code + TG_CODE, &idx), -ENOENT);
	assert_int_equal(gopclntab_pcvalue_rows(t, 0, GOPCLNTAB_PCSP, tg_runs_cb, &runs), 0);
	assert_int_equal(runs.n, 3);
	assert_int_equal(runs.start[1], code + 4);
	assert_int_equal(runs.end[1], code + 0x30);
	assert_int_equal(runs.value[1], 0x20);
	assert_int_equal(runs.end[2], code + 0x31);
	tg_check_rules(t, ver, code);
	tg_check_symbols(t, ver, code);
}

static void tg_synthetic(void **state, enum gopclntab_version ver)
{
	struct tg_env *env = *state;
	struct tg_buf table;
	struct tg_file f;
	char name[64];
	uint64_t code = tg_build_synthetic(env, ver, &table);
	snprintf(name, sizeof(name), "tiny.gopclntab.%d", ver);
	assert_int_equal(tg_open(env, name, &f), 0);
	tg_check_table(f.t, ver, code);
	tg_close(&f);
	snprintf(name, sizeof(name), "tiny.scan.%d", ver);
	assert_int_equal(tg_open(env, name, &f), 0);
	assert_int_equal(gopclntab_address(f.t), 0x900000);
	tg_check_table(f.t, ver, code);
	tg_close(&f);
	free(table.p);
}

static void test_synthetic_go12(void **state) { tg_synthetic(state, GOPCLNTAB_GO12); }
static void test_synthetic_go116(void **state) { tg_synthetic(state, GOPCLNTAB_GO116); }
static void test_synthetic_go118(void **state) { tg_synthetic(state, GOPCLNTAB_GO118); }
static void test_synthetic_go120(void **state) { tg_synthetic(state, GOPCLNTAB_GO120); }

/* ---- corrupt input ------------------------------------------------------------------------------------------ */

/* Use every entry point on a table that opened, whatever it holds. */
static void tg_exercise(const struct gopclntab *t)
{
	struct tg_rows rows = { 0 };
	struct tg_runs runs = { 0 };
	struct symbol_frame fr[8];
	uint64_t lo, hi;
	size_t n = gopclntab_func_count(t);
	gopclntab_text_range(t, &lo, &hi);
	for (size_t i = 0; i < n && i < 64; i++) {
		struct gopclntab_func f;
		int32_t v;
		if (gopclntab_func(t, i, &f) == 0)
			assert_non_null(f.name);
		runs.n = 0;
		gopclntab_pcvalue_rows(t, i, GOPCLNTAB_PCSP, tg_runs_cb, &runs);
		gopclntab_pcvalue(t, i, GOPCLNTAB_PCLN, lo + i, &v);
		gopclntab_file(t, i, (int32_t)i - 1);
	}
	rows.n = 0;
	gopclntab_for_each_rule(t, tg_rows_cb, &rows);
	for (uint64_t va = lo; va < hi && va < lo + 0x200; va += 7)
		gosym_lookup(t, va, fr, 8);
}

/* Mutate the table section of an in-memory image, or shrink the section; open and exercise. */
static void tg_fuzz_image(const uint8_t *image, size_t size, const char *section, unsigned iterations,
			  unsigned seed)
{
	Elf *elf = elf_memory((char *)image, size);
	assert_non_null(elf);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx, scn_index = 0;
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && strcmp(elf_strptr(elf, shstrndx, sh.sh_name), section) == 0)
			break;
	assert_non_null(scn);
	scn_index = elf_ndxscn(scn);
	GElf_Ehdr eh;
	assert_non_null(gelf_getehdr(elf, &eh));
	elf_end(elf);
	uint8_t *copy = malloc(size);
	assert_non_null(copy);
	srand(seed);
	unsigned opened = 0;
	for (unsigned it = 0; it < iterations; it++) {
		memcpy(copy, image, size);
		unsigned k = 1 + (unsigned)rand() % 8;
		for (unsigned j = 0; j < k; j++) {
			/* Most mutations hit the header and function table, where a byte changes the most. */
			size_t span = rand() % 2 ? (sh.sh_size < 160 ? sh.sh_size : 160) : sh.sh_size;
			size_t at = sh.sh_offset + (size_t)rand() % span;
			copy[at] = rand() % 3 ? (uint8_t)rand() : (uint8_t)(copy[at] ^ (1u << (rand() % 8)));
		}
		if (it % 5 == 0) {
			uint64_t shrunk = (uint64_t)rand() % sh.sh_size;
			memcpy(copy + eh.e_shoff + scn_index * eh.e_shentsize + 32, &shrunk, 8);
		}
		Elf *e = elf_memory((char *)copy, size);
		struct gopclntab *t = NULL;
		int rc = e ? gopclntab_open(e, &t) : -1;
		if (rc == 0) {
			opened++;
			tg_exercise(t);
			gopclntab_free(t);
		} else if (e) {
			assert_true(rc == -EBADMSG || rc == -ENOENT || rc == -EINVAL);
		}
		elf_end(e);
	}
	assert_true(opened > 0);	/* some mutations leave the table readable: its readers ran too */
	free(copy);
}

static uint8_t *tg_slurp(const struct tg_env *env, const char *name, size_t *size)
{
	char path[256];
	struct stat st;
	tg_path(env, name, path, sizeof(path));
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fstat(fileno(f), &st), 0);
	uint8_t *p = malloc((size_t)st.st_size);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	*size = (size_t)st.st_size;
	return p;
}

static void test_corrupt_tables(void **state)
{
	struct tg_env *env = *state;
	static const enum gopclntab_version vers[] = { GOPCLNTAB_GO12, GOPCLNTAB_GO116, GOPCLNTAB_GO118,
						       GOPCLNTAB_GO120 };
	for (size_t v = 0; v < sizeof(vers) / sizeof(vers[0]); v++) {
		struct tg_buf table;
		char name[64];
		size_t size;
		tg_build_synthetic(env, vers[v], &table);
		free(table.p);
		snprintf(name, sizeof(name), "tiny.gopclntab.%d", vers[v]);
		uint8_t *image = tg_slurp(env, name, &size);
		tg_fuzz_image(image, size, ".gopclntab", 1000, 1234 + (unsigned)v);
		free(image);
		snprintf(name, sizeof(name), "tiny.scan.%d", vers[v]);
		image = tg_slurp(env, name, &size);
		tg_fuzz_image(image, size, ".rodata.go", 500, 4321 + (unsigned)v);
		free(image);
	}
}

/* Hand-made bad headers: each must be refused with -EBADMSG, not crash. */
static void test_bad_headers(void **state)
{
	struct tg_env *env = *state;
	struct tg_buf table;
	struct tg_file f;
	uint64_t code = tg_build_synthetic(env, GOPCLNTAB_GO120, &table);
	struct { size_t off; unsigned len; uint64_t value; } cases[] = {
		{ 0, 4, 0xfffffff5 },		/* unknown magic */
		{ 6, 1, 3 },			/* quantum */
		{ 7, 1, 2 },			/* pointer size */
		{ 8, 8, 1ull << 40 },		/* nfunc */
		{ 32, 8, 2 },			/* names offset inside the header */
		{ 48, 8, 1ull << 30 },		/* files offset past the end */
		{ 64, 8, 8 },			/* funcs offset before pctab */
	};
	(void)code;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tg_buf b = { 0 };
		tg_put(&b, table.p, table.len);
		memcpy(b.p + cases[i].off, &cases[i].value, cases[i].len);
		tg_write(env, "bad.bin", b.p, b.len);
		free(b.p);
		assert_int_equal(tg_sh(env, "rm -f bad && objcopy --add-section .gopclntab=bad.bin tiny bad"), 0);
		int rc = tg_open(env, "bad", &f);
		if (rc != -EBADMSG)
			fail_msg("case %zu: %d", i, rc);
		tg_close(&f);
	}
	/* Function offsets that descend. */
	struct tg_buf b = { 0 };
	tg_put(&b, table.p, table.len);
	uint64_t funcs;
	memcpy(&funcs, b.p + 64, 8);
	tg_set32(&b, (size_t)funcs + 8, 0xffff);
	tg_write(env, "bad.bin", b.p, b.len);
	free(b.p);
	assert_int_equal(tg_sh(env, "rm -f bad && objcopy --add-section .gopclntab=bad.bin tiny bad"), 0);
	assert_int_equal(tg_open(env, "bad", &f), -EBADMSG);
	tg_close(&f);
	free(table.p);
}

/* ---- real Go binaries ------------------------------------------------------------------------------------------ */

/* Line numbers below refer to this source. */
static const char tg_go_main[] =
	"package main\n"				/* 1 */
	"\n"						/* 2 */
	"import (\n"					/* 3 */
	"\t\"fmt\"\n"					/* 4 */
	"\t\"os\"\n"					/* 5 */
	")\n"						/* 6 */
	"\n"						/* 7 */
	"//go:noinline\n"				/* 8 */
	"func hotLoop(n int) int {\n"			/* 9 */
	"\ts := 0\n"					/* 10 */
	"\tfor i := 0; i < n; i++ {\n"			/* 11 */
	"\t\ts += square(i)\n"				/* 12 */
	"\t}\n"						/* 13 */
	"\treturn s\n"					/* 14 */
	"}\n"						/* 15 */
	"\n"						/* 16 */
	"func square(x int) int { return x*x + 1 }\n"	/* 17 */
	"\n"
	"//go:noinline\n"
	"func other(n int) int {\n"
	"\ts := 0\n"
	"\tfor i := 0; i < n; i++ {\n"
	"\t\ts ^= hotLoop(i % 100)\n"
	"\t}\n"
	"\treturn s\n"
	"}\n"
	"\n"
	"func main() {\n"
	"\tn := 1000\n"
	"\tif len(os.Args) > 1 {\n"
	"\t\tn = 100000\n"
	"\t}\n"
	"\tfmt.Println(other(n))\n"
	"}\n";

#define TG_SQUARE_LINE 17
#define TG_CALL_LINE 12

static const char tg_cgo_main[] =
	"package main\n"
	"\n"
	"/*\n"
	"int cwork(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * i; return s; }\n"
	"*/\n"
	"import \"C\"\n"
	"import \"fmt\"\n"
	"\n"
	"//go:noinline\n"
	"func callC(n int) int { return int(C.cwork(C.int(n))) }\n"
	"\n"
	"func main() { fmt.Println(callC(1000)) }\n";

#define TG_GO_ENV "GOCACHE=\"$PWD/gocache\" GOPATH=\"$PWD/gopath\" GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local "

static bool tg_have_go(void)
{
	return system("command -v go >/dev/null 2>&1") == 0;
}

/* Build the programs once per test run; false when go is missing. */
static bool tg_build_go(const struct tg_env *env)
{
	static const char mod[] = "module example.com/hot\n\ngo 1.16\n";
	static const char cgo_mod[] = "module example.com/cgo\n\ngo 1.16\n";
	char path[256];
	tg_path(env, "hot/pure", path, sizeof(path));
	if (access(path, X_OK) == 0)
		return true;
	if (!tg_have_go())
		return false;
	assert_int_equal(tg_sh(env, "mkdir -p hot cgo"), 0);
	tg_write(env, "hot/main.go", tg_go_main, sizeof(tg_go_main) - 1);
	tg_write(env, "hot/go.mod", mod, sizeof(mod) - 1);
	tg_write(env, "cgo/main.go", tg_cgo_main, sizeof(tg_cgo_main) - 1);
	tg_write(env, "cgo/go.mod", cgo_mod, sizeof(cgo_mod) - 1);
	assert_int_equal(tg_sh(env, "cd hot && " TG_GO_ENV "CGO_ENABLED=0 go build -gcflags=-m -o pure . 2>gcflags.txt"),
			 0);
	assert_int_equal(tg_sh(env, "grep -q 'inlining call to square' hot/gcflags.txt"), 0);
	assert_int_equal(tg_sh(env, "cd hot && " TG_GO_ENV "CGO_ENABLED=0 go build -ldflags='-s -w' -o stripped ."), 0);
	/* The same stripped file with the section renamed: only the magic scan can find the table. */
	assert_int_equal(tg_sh(env, "objcopy --rename-section .gopclntab=.rodata.hidden hot/stripped hot/hidden"), 0);
	return true;
}

/* The address range where hotLoop runs inlined square code. */
static bool tg_inlined_pc(const struct gopclntab *t, size_t fi, uint64_t *pc)
{
	struct tg_runs r = { 0 };
	if (gopclntab_pcvalue_rows(t, fi, GOPCLNTAB_PCINLINE, tg_runs_cb, &r) != 0)
		return false;
	for (size_t i = 0; i < r.n && i < 64; i++)
		if (r.value[i] >= 0) {
			*pc = r.start[i];
			return true;
		}
	return false;
}

static int tg_frame_rows_cb(void *ctx, uint64_t va, const struct stack_delta_rule *rule)
{
	size_t *frames = ctx;
	(void)va;
	if (rule->kind == STACK_DELTA_CFA_SP && rule->cfa_off > 8)
		(*frames)++;
	return 0;
}

static void tg_check_go_binary(const struct tg_env *env, const char *name)
{
	struct tg_file f;
	struct gopclntab_func hot, other, mainf;
	struct symbol_frame fr[8];
	struct tg_runs runs = { 0 };
	size_t hi = 0, oi = 0, framed = 0;
	uint64_t pc = 0;
	assert_int_equal(tg_open(env, name, &f), 0);
	assert_true(gopclntab_version(f.t) >= GOPCLNTAB_GO116);
	assert_true(gopclntab_func_count(f.t) > 500);
	assert_true(tg_find_func(f.t, "main.hotLoop", &hot, &hi));
	assert_true(tg_find_func(f.t, "main.other", &other, &oi));
	assert_true(tg_find_func(f.t, "main.main", &mainf, NULL));
	assert_true(tg_find_func(f.t, "runtime.goexit", &mainf, NULL));
	assert_int_equal(gosym_lookup(f.t, mainf.entry, fr, 8), 1);
	assert_string_equal(fr[0].function, "runtime.goexit");
	assert_true(tg_ends_with(fr[0].file, ".s"));
	/* main.other has a frame: pcsp goes above 0 and comes back. */
	assert_int_equal(gopclntab_pcvalue_rows(f.t, oi, GOPCLNTAB_PCSP, tg_runs_cb, &runs), 0);
	assert_true(runs.n >= 3);
	assert_int_equal(runs.value[0], 0);
	assert_true(runs.value[1] > 0);
	assert_int_equal(gopclntab_for_each_rule(f.t, tg_frame_rows_cb, &framed), 0);
	assert_true(framed > 100);
	/* An address of the inlined square(): two frames, square inlined into hotLoop. */
	assert_true(tg_inlined_pc(f.t, hi, &pc));
	assert_int_equal(gosym_lookup(f.t, pc, fr, 8), 2);
	assert_string_equal(fr[0].function, "main.square");
	assert_int_equal(fr[0].inlined, 1);
	assert_true(tg_ends_with(fr[0].file, "/main.go"));
	assert_int_equal(fr[0].line, TG_SQUARE_LINE);
	assert_string_equal(fr[1].function, "main.hotLoop");
	assert_int_equal(fr[1].inlined, 0);
	assert_true(tg_ends_with(fr[1].file, "/main.go"));
	assert_int_equal(fr[1].line, TG_CALL_LINE);
	tg_close(&f);
}

static void test_go_pure(void **state)
{
	struct tg_env *env = *state;
	if (!tg_build_go(env))
		test_skip("the go tool is not installed: no real Go binaries");
	tg_check_go_binary(env, "hot/pure");
}

static void test_go_stripped(void **state)
{
	struct tg_env *env = *state;
	struct tg_file f;
	if (!tg_build_go(env))
		test_skip("the go tool is not installed: no real Go binaries");
	tg_check_go_binary(env, "hot/stripped");
	tg_check_go_binary(env, "hot/hidden");
	/* The scan found the same table as the section. */
	assert_int_equal(tg_open(env, "hot/stripped", &f), 0);
	uint64_t va = gopclntab_address(f.t);
	tg_close(&f);
	assert_int_equal(tg_open(env, "hot/hidden", &f), 0);
	assert_int_equal(gopclntab_address(f.t), va);
	tg_close(&f);
}

static void tg_check_cgo(const struct tg_env *env, const char *name, uint64_t c_func)
{
	struct tg_file f;
	struct gopclntab_func fn;
	struct symbol_frame fr[4];
	size_t idx;
	uint64_t lo, hi;
	assert_int_equal(tg_open(env, name, &f), 0);
	assert_true(tg_find_func(f.t, "main.callC", &fn, NULL));
	assert_int_equal(gosym_lookup(f.t, fn.entry, fr, 4), 1);
	assert_string_equal(fr[0].function, "main.callC");
	assert_true(tg_ends_with(fr[0].file, "/main.go"));
	gopclntab_text_range(f.t, &lo, &hi);
	if (c_func) {
		/* C code is outside the table. */
		assert_int_equal(gopclntab_find_func(f.t, c_func, &idx), -ENOENT);
		assert_int_equal(gosym_lookup(f.t, c_func, fr, 4), 0);
	}
	assert_false(tg_find_func(f.t, "cwork", &fn, NULL));
	assert_true(lo < hi);
	tg_close(&f);
}

static void test_go_cgo(void **state)
{
	struct tg_env *env = *state;
	struct tg_file f;
	if (!tg_build_go(env))
		test_skip("the go tool is not installed: no real Go binaries");
	test_require_tool("command -v gcc", "gcc (for cgo)");
	assert_int_equal(tg_sh(env, "cd cgo && " TG_GO_ENV "CGO_ENABLED=1 go build -o cgo ."), 0);
	assert_int_equal(tg_sh(env, "cd cgo && " TG_GO_ENV
				    "CGO_ENABLED=1 go build -buildmode=pie -ldflags='-s -w' -o cgo-pie ."),
			 0);
	assert_int_equal(tg_open(env, "cgo/cgo", &f), 0);
	uint64_t c_func = tg_symbol(f.elf, "cwork");
	tg_close(&f);
	assert_true(c_func != 0);
	tg_check_cgo(env, "cgo/cgo", c_func);
	tg_check_cgo(env, "cgo/cgo-pie", 0);
}

/* Go binaries of other releases that happen to be installed (Go >= 1.20 layouts); skipped when absent. */
static void test_installed_go_binaries(void **state)
{
	(void)state;
	static const char *const paths[] = { "/usr/lib/google-cloud-sdk/bin/gcloud-crc32c", "/usr/local/bin/docker" };
	int seen = 0;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct tg_file f = { 0 };
		struct gopclntab_func fn;
		struct symbol_frame fr[8];
		struct tg_rows rows = { 0 };
		f.fd = open(paths[i], O_RDONLY);
		if (f.fd < 0)
			continue;
		f.elf = elf_begin(f.fd, ELF_C_READ_MMAP, NULL);
		assert_int_equal(gopclntab_open(f.elf, &f.t), 0);
		assert_int_equal(gopclntab_version(f.t), GOPCLNTAB_GO120);
		assert_true(tg_find_func(f.t, "main.main", &fn, NULL));
		assert_true(gosym_lookup(f.t, fn.entry, fr, 8) >= 1);
		assert_true(tg_find_func(f.t, "runtime.mallocgc", &fn, NULL));
		assert_int_equal(gopclntab_for_each_rule(f.t, tg_rows_cb, &rows), 0);
		assert_true(rows.n > gopclntab_func_count(f.t));
		tg_close(&f);
		seen++;
	}
	if (!seen)
		test_skip("no installed Go >= 1.20 binaries");
}

static void test_not_go(void **state)
{
	(void)state;
	struct tg_file f = { 0 };
	f.fd = open("/proc/self/exe", O_RDONLY);
	assert_true(f.fd >= 0);
	f.elf = elf_begin(f.fd, ELF_C_READ_MMAP, NULL);
	assert_int_equal(gopclntab_open(f.elf, &f.t), -ENOENT);
	assert_null(f.t);
	assert_int_equal(gopclntab_open(NULL, &f.t), -ENOENT);
	tg_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pcvalue_vector),
		cmocka_unit_test(test_not_go),
		cmocka_unit_test(test_synthetic_go12),
		cmocka_unit_test(test_synthetic_go116),
		cmocka_unit_test(test_synthetic_go118),
		cmocka_unit_test(test_synthetic_go120),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_corrupt_tables),
		cmocka_unit_test(test_go_pure),
		cmocka_unit_test(test_go_stripped),
		cmocka_unit_test(test_go_cgo),
		cmocka_unit_test(test_installed_go_binaries),
	};
	return cmocka_run_group_tests_name("gopclntab", tests, tg_setup, tg_teardown);
}
