/*
 * Unit tests for symbols/symbolizer.c. A small C program is compiled here (gcc -O2 -g) with a noinline
 * function that an always_inline one is inlined into; addresses come from nm, line numbers from markers in
 * the source below, and the addresses of the inlined code from the line table (libdw, read independently).
 * Copies of it (stripped, with a separate debug file, truncated, corrupted) exercise the other paths.
 * The symbol index is checked against libdwfl's own search (dwfl_module_addrinfo) on libc and on a
 * generated program with thousands of functions and hand-made assembly symbols.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <inttypes.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbols/demangle.h"
#include "symbols/symbolizer.h"
#include "tests/lib/testlib.h"

static const char prog_source[] =
	"volatile int sink;\n"
	"static inline __attribute__((always_inline)) int inner_add(int x)\n"
	"{ /* MARK:inner_start */\n"
	"	sink = sink * x + 7; /* MARK:inner */\n"
	"	return sink ^ x;\n"
	"} /* MARK:inner_end */\n"
	"__attribute__((noinline)) int outer_work(int x)\n"
	"{\n"
	"	sink = x + 1;\n"
	"	int r = inner_add(x); /* MARK:call */\n"
	"	sink = r - 3;\n"
	"	return r + sink;\n"
	"}\n"
	"__attribute__((noinline)) int exported_leaf(int x) /* MARK:exported */\n"
	"{\n"
	"	return x * 5 + sink;\n"
	"}\n"
	"static __attribute__((noinline)) int hidden_static(int x) /* MARK:hidden */\n"
	"{\n"
	"	sink = x * 11;\n"
	"	return sink + 2;\n"
	"}\n"
	"int (*volatile fp)(int) = hidden_static;\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	(void)argv;\n"
	"	return outer_work(argc) + exported_leaf(argc) + fp(argc);\n"
	"}\n";

static const char cpp_source[] =
	"namespace ns {\n"
	"volatile int sink;\n"
	"struct Box {\n"
	"	int v;\n"
	"	__attribute__((always_inline)) inline int twice(int x) { sink = x; return 2 * x + v; }\n"
	"};\n"
	"__attribute__((noinline)) int work(Box *b, int x) { return b->twice(x) + 1; }\n"
	"}\n"
	"int main(int argc, char **) { ns::Box b{argc}; return ns::work(&b, argc); }\n";

/*
 * Symbols that put the rules to work, for the generated program: nesting, weak over global, aliases of
 * different plainness, equal starts, a local and a global at one address, assembly labels after, inside and
 * between sized symbols, a global label inside a local function, symbol versions, an object in the code,
 * a code section of its own and an absolute symbol. Directives only, so any GNU assembler takes it.
 */
static const char tricky_asm[] =
	"	.text\n"
	"	.p2align 6\n"
	"	.globl tricky_outer\n	.type tricky_outer, %function\n"
	"tricky_outer:\n	.skip 64\n"
	"	.type tricky_inner_local, %function\n"
	"tricky_inner_local:\n	.skip 32\n	.size tricky_inner_local, 32\n	.skip 32\n"
	"	.globl tricky_inner_global\n	.type tricky_inner_global, %function\n"
	"tricky_inner_global:\n	.skip 16\n	.size tricky_inner_global, 16\n	.skip 112\n"
	"	.size tricky_outer, .-tricky_outer\n"
	"	.weak tricky_weak_wide\n	.type tricky_weak_wide, %function\n"
	"tricky_weak_wide:\n	.skip 48\n"
	"	.globl tricky_global_narrow\n	.type tricky_global_narrow, %function\n"
	"tricky_global_narrow:\n	.skip 16\n	.size tricky_global_narrow, 16\n	.skip 64\n"
	"	.size tricky_weak_wide, .-tricky_weak_wide\n"
	"	.globl __tricky_alias, _tricky_alias, tricky_alias\n"
	"	.type __tricky_alias, %function\n	.type _tricky_alias, %function\n"
	"	.type tricky_alias, %function\n"
	"__tricky_alias:\n_tricky_alias:\ntricky_alias:\n	.skip 40\n"
	"	.size __tricky_alias, 40\n	.size _tricky_alias, 40\n	.size tricky_alias, 40\n"
	"	.globl tricky_same_long, tricky_same_short\n"
	"	.type tricky_same_long, %function\n	.type tricky_same_short, %function\n"
	"tricky_same_long:\ntricky_same_short:\n	.skip 64\n"
	"	.size tricky_same_long, 64\n	.size tricky_same_short, 24\n"
	"	.globl tricky_dup_global\n"
	"	.type tricky_dup_local, %function\n	.type tricky_dup_global, %function\n"
	"tricky_dup_local:\ntricky_dup_global:\n	.skip 32\n"
	"	.size tricky_dup_local, 32\n	.size tricky_dup_global, 32\n"
	"	.globl tricky_sized\n	.type tricky_sized, %function\n"
	"tricky_sized:\n	.skip 16\n	.size tricky_sized, 16\n"
	"	.globl tricky_label_global\n"
	"tricky_label_global:\n	.skip 24\n"
	"tricky_label_local:\n	.skip 24\n"
	"	.globl tricky_label_function\n	.type tricky_label_function, %function\n"
	"tricky_label_function:\n	.skip 24\n"
	"	.globl tricky_host\n	.type tricky_host, %function\n"
	"tricky_host:\n	.skip 16\n"
	"	.globl tricky_label_inside\n"
	"tricky_label_inside:\n	.skip 16\n	.size tricky_host, 32\n	.skip 8\n"
	"	.type tricky_local_wide, %function\n"
	"tricky_local_wide:\n	.skip 64\n"
	"	.globl tricky_label_in_local\n"
	"tricky_label_in_local:\n	.skip 64\n	.size tricky_local_wide, 128\n"
	"	.type tricky_table, %object\n"
	"tricky_table:\n	.skip 32\n	.size tricky_table, 32\n"
	"	.globl tricky_twin_b\n"
	"tricky_twin_a:\ntricky_twin_b:\n	.skip 16\n"
	"	.globl tricky_v1\n	.type tricky_v1, %function\n"
	"tricky_v1:\n	.skip 16\n	.size tricky_v1, 16\n"
	"	.symver tricky_v1, tricky_versioned@VERS_1\n"
	"	.globl tricky_v2\n	.type tricky_v2, %function\n"
	"tricky_v2:\n	.skip 16\n	.size tricky_v2, 16\n"
	"	.symver tricky_v2, tricky_versioned@@VERS_2\n"
	"	.globl tricky_last\n	.type tricky_last, %function\n"
	"tricky_last:\n	.skip 16\n	.size tricky_last, 16\n"
	"	.section hostprof_code, \"ax\", %progbits\n"
	"	.globl tricky_own_section_label\n"
	"tricky_own_section_label:\n	.skip 32\n"
	"	.globl tricky_own_section\n	.type tricky_own_section, %function\n"
	"tricky_own_section:\n	.skip 32\n	.size tricky_own_section, 32\n	.skip 16\n"
	"	.globl tricky_absolute\n	.set tricky_absolute, 0x1234\n"
	"	.data\n	.globl tricky_data_label\n"
	"tricky_data_label:\n	.skip 16\n"
	"	.section .note.GNU-stack, \"\", %progbits\n";

static const char tricky_versions[] =
	"VERS_1 { global: tricky_versioned; };\n"
	"VERS_2 { global: tricky_versioned; } VERS_1;\n";

struct symbol_addr {
	uint64_t addr, size;
};

struct fixture {
	char dir[200];
	char src[256], prog[256], stripped[256], linked[256], debug[256];
	struct symbol_addr outer, leaf, hidden;
	int line_inner, line_inner_start, line_inner_end, line_call, line_exported, line_hidden;
};

/* ---- helpers ---- */

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void path_in(const struct fixture *f, char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", f->dir, name);
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void *read_file(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	char *data = malloc((size_t)st.st_size);
	assert_non_null(data);
	assert_int_equal(read(fd, data, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return data;
}

/* Line number of the source line holding the marker. */
static int marker_line(const char *source, const char *marker)
{
	const char *at = strstr(source, marker);
	assert_non_null(at);
	int line = 1;
	for (const char *p = source; p < at; p++)
		line += *p == '\n';
	return line;
}

/* Address and size of a defined symbol, from nm. */
static struct symbol_addr nm_symbol(const char *path, const char *name)
{
	char cmd[512], line[512];
	struct symbol_addr found = { 0, 0 };
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		uint64_t addr, size;
		char type, sym[256];
		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %255s", &addr, &size, &type, sym) == 4 &&
		    strcmp(sym, name) == 0)
			found = (struct symbol_addr){ addr, size };
	}
	pclose(p);
	assert_true(found.addr != 0 && found.size != 0);
	return found;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static struct symbolizer *open_ok(const char *path)
{
	struct symbolizer *s = NULL;
	int err = symbolizer_open(path, -1, &s);
	if (err < 0)
		fail_msg("symbolizer_open(%s) failed: %s", path, strerror(-err));
	return s;
}

static int open_err(const char *path)
{
	struct symbolizer *s = NULL;
	int err = symbolizer_open(path, -1, &s);
	assert_true(err < 0 ? s == NULL : s != NULL);	/* *out is set only on success */
	symbolizer_free(s);
	return err;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void assert_frame(const struct symbol_frame *f, const char *function, const char *file, int line_lo,
			 int line_hi, int inlined)
{
	assert_non_null(f->function);
	assert_string_equal(f->function, function);
	if (file) {
		assert_non_null(f->file);
		assert_true(ends_with(f->file, file));
	} else {
		assert_null(f->file);
	}
	if (f->line < line_lo || f->line > line_hi)
		fail_msg("%s: line %d not in [%d, %d]", function, f->line, line_lo, line_hi);
	assert_int_equal(f->inlined, inlined);
}

/* ---- fixture ---- */

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "%s/hostprof-symbols-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	path_in(f, f->src, sizeof(f->src), "prog.c");
	path_in(f, f->prog, sizeof(f->prog), "prog");
	path_in(f, f->stripped, sizeof(f->stripped), "prog.stripped");
	path_in(f, f->linked, sizeof(f->linked), "prog.linked");
	path_in(f, f->debug, sizeof(f->debug), "prog.debug");
	write_file(f->src, prog_source, strlen(prog_source));
	/* -rdynamic puts the non-static functions in .dynsym, which survives stripping. */
	if (run("gcc -O2 -g -rdynamic -o '%s' '%s'", f->prog, f->src) != 0 ||
	    run("objcopy --strip-all '%s' '%s'", f->prog, f->stripped) != 0 ||
	    run("cd '%s' && objcopy --only-keep-debug prog prog.debug && "
		"objcopy --strip-all --add-gnu-debuglink=prog.debug prog prog.linked && chmod 0644 prog.debug",
		f->dir) != 0) {
		fprintf(stderr, "test_symbols: cannot build the test program (gcc, objcopy)\n");
		return -1;
	}
	f->outer = nm_symbol(f->prog, "outer_work");
	f->leaf = nm_symbol(f->prog, "exported_leaf");
	f->hidden = nm_symbol(f->prog, "hidden_static");
	f->line_inner = marker_line(prog_source, "MARK:inner */");
	f->line_inner_start = marker_line(prog_source, "MARK:inner_start");
	f->line_inner_end = marker_line(prog_source, "MARK:inner_end");
	f->line_call = marker_line(prog_source, "MARK:call");
	f->line_exported = marker_line(prog_source, "MARK:exported");
	f->line_hidden = marker_line(prog_source, "MARK:hidden");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	if (f)
		nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/*
 * Addresses (inside outer_work) of line-table rows for the inlined statement, read with libdw directly.
 * Returns how many.
 */
static size_t inline_addresses(const struct fixture *f, uint64_t *out, size_t max)
{
	Dwarf_Line **lines = NULL;
	size_t nlines = 0, n = 0;
	int fd = open(f->prog, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
	assert_non_null(dw);
	assert_int_equal(dwarf_getsrc_file(dw, f->src, f->line_inner, 0, &lines, &nlines), 0);
	for (size_t i = 0; i < nlines && n < max; i++) {
		Dwarf_Addr addr;
		if (dwarf_lineaddr(lines[i], &addr) == 0 && addr >= f->outer.addr &&
		    addr < f->outer.addr + f->outer.size)
			out[n++] = addr;
	}
	free(lines);
	dwarf_end(dw);
	close(fd);
	return n;
}

/* ---- tests ---- */

static void test_function_name_and_line(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	struct symbolizer *s = open_ok(f->prog);

	const uint64_t offsets[] = { 0, f->leaf.size - 1 };
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(symbolizer_lookup(s, f->leaf.addr + offsets[i], fr, 8), 1);
		assert_frame(&fr[0], "exported_leaf", "/prog.c", f->line_exported, f->line_exported + 3, 0);
	}
	assert_int_equal(symbolizer_lookup(s, f->hidden.addr, fr, 8), 1);
	assert_frame(&fr[0], "hidden_static", "/prog.c", f->line_hidden, f->line_hidden + 3, 0);
	assert_int_equal(fr[0].go, 0);	/* C, named from DWARF: not Go code */
	/* Before the inlined code: outer_work itself. */
	assert_int_equal(symbolizer_lookup(s, f->outer.addr, fr, 8), 1);
	assert_frame(&fr[0], "outer_work", "/prog.c", f->line_call - 3, f->line_call - 1, 0);
	symbolizer_free(s);
}

static void test_inline_chain(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	uint64_t addrs[32];
	size_t n = inline_addresses(f, addrs, 32), exact = 0;
	struct symbolizer *s = open_ok(f->prog);

	assert_true(n > 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(symbolizer_lookup(s, addrs[i], fr, 8), 2);
		assert_frame(&fr[0], "inner_add", "/prog.c", f->line_inner_start, f->line_inner_end, 1);
		assert_frame(&fr[1], "outer_work", "/prog.c", f->line_call, f->line_call, 0);
		exact += fr[0].line == f->line_inner;
	}
	assert_true(exact > 0);
	/* A short buffer keeps the innermost frame. */
	assert_int_equal(symbolizer_lookup(s, addrs[0], fr, 1), 1);
	assert_string_equal(fr[0].function, "inner_add");
	assert_int_equal(symbolizer_lookup(s, addrs[0], fr, 0), 0);
	symbolizer_free(s);
}

static void test_stripped_uses_dynsym_only(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	uint64_t inl[1];
	struct symbolizer *s = open_ok(f->stripped);

	/* hidden_static was only in .symtab: nothing covers it any more, however near an exported symbol is. */
	assert_int_equal(symbolizer_lookup(s, f->hidden.addr, fr, 8), 0);
	assert_int_equal(symbolizer_lookup(s, f->hidden.addr + f->hidden.size - 1, fr, 8), 0);
	assert_int_equal(symbolizer_lookup(s, f->leaf.addr + 1, fr, 8), 1);
	assert_frame(&fr[0], "exported_leaf", NULL, 0, 0, 0);
	/* No DWARF: the inlined code is just outer_work. */
	assert_int_equal(inline_addresses(f, inl, 1), 1);
	assert_int_equal(symbolizer_lookup(s, inl[0], fr, 8), 1);
	assert_frame(&fr[0], "outer_work", NULL, 0, 0, 0);
	symbolizer_free(s);
}

static void test_outside_any_symbol(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	struct symbolizer *s = open_ok(f->prog);
	assert_int_equal(symbolizer_lookup(s, 0, fr, 8), 0);
	assert_int_equal(symbolizer_lookup(s, UINT64_MAX, fr, 8), 0);
	assert_int_equal(symbolizer_lookup(s, 0x7fffffff0000ull, fr, 8), 0);
	assert_int_equal(symbolizer_lookup(NULL, f->leaf.addr, fr, 8), 0);
	symbolizer_free(s);
}

static void test_debuglink(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	struct symbolizer *s = open_ok(f->linked);
	assert_int_equal(symbolizer_lookup(s, f->hidden.addr, fr, 8), 1);
	assert_frame(&fr[0], "hidden_static", "/prog.c", f->line_hidden, f->line_hidden + 3, 0);
	symbolizer_free(s);

	/* A debug file other users could write (and so truncate under our mmap) is not used. */
	assert_int_equal(chmod(f->debug, 0666), 0);
	s = open_ok(f->linked);
	assert_int_equal(symbolizer_lookup(s, f->hidden.addr, fr, 8), 0);
	symbolizer_free(s);
	assert_int_equal(chmod(f->debug, 0644), 0);
}

/* A .gnu_debuglink naming a path ("../dbg/prog.debug") is not followed, though the file there matches. */
static void test_debuglink_path_refused(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	char crafted[256], evil[256];
	unsigned char link[24] = "../dbg/prog.debug";	/* NUL-padded to 4 bytes, then a CRC we do not use */

	path_in(f, crafted, sizeof(crafted), "link.bin");
	path_in(f, evil, sizeof(evil), "bin/evil");
	write_file(crafted, link, sizeof(link));
	assert_int_equal(run("cd '%s' && mkdir -p bin dbg && cp -p prog.debug dbg/ && "
			     "objcopy --update-section .gnu_debuglink=link.bin prog.linked bin/evil",
			     f->dir), 0);
	struct symbolizer *s = open_ok(evil);
	assert_int_equal(symbolizer_lookup(s, f->hidden.addr, fr, 8), 0);
	assert_int_equal(symbolizer_lookup(s, f->leaf.addr, fr, 8), 1);
	symbolizer_free(s);
}

static void test_fd_is_duplicated(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	int fd = open(f->prog, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct symbolizer *s;
	assert_int_equal(symbolizer_open("/nonexistent/name/only", fd, &s), 0);
	assert_true(fcntl(fd, F_GETFD) >= 0);	/* still ours */
	close(fd);
	assert_int_equal(symbolizer_lookup(s, f->leaf.addr, fr, 8), 1);
	assert_string_equal(fr[0].function, "exported_leaf");
	symbolizer_free(s);
}

static void test_strings_live_until_free(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame a[8], b[8];
	struct symbolizer *s = open_ok(f->prog);
	assert_int_equal(symbolizer_lookup(s, f->leaf.addr, a, 8), 1);
	for (uint64_t off = 0; off < f->outer.size; off++)
		symbolizer_lookup(s, f->outer.addr + off, b, 8);
	assert_string_equal(a[0].function, "exported_leaf");
	assert_true(ends_with(a[0].file, "/prog.c"));
	/* Interned: the same name comes back as the same pointer. */
	assert_int_equal(symbolizer_lookup(s, f->leaf.addr + 1, b, 8), 1);
	assert_ptr_equal(a[0].function, b[0].function);
	symbolizer_free(s);
}

/* Repeated lookups (remembered ones) give what the first gave, also after the cache has been emptied. */
static void test_repeated_lookups(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame first[8], again[8];
	uint64_t inl[1];
	struct symbolizer *s = open_ok(f->prog);

	assert_int_equal(inline_addresses(f, inl, 1), 1);
	int n = symbolizer_lookup(s, inl[0], first, 8);
	assert_int_equal(n, 2);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(symbolizer_lookup(s, inl[0], again, 8), n);
		assert_memory_equal(first, again, (size_t)n * sizeof(first[0]));
		/* More distinct addresses than the cache holds. */
		for (uint64_t a = 0; a < (1u << 16) + 100; a++)
			symbolizer_lookup(s, a, again, 8);
	}
	symbolizer_free(s);
}

static void test_not_elf_is_enoexec(void **state)
{
	struct fixture *f = *state;
	char path[256];
	size_t len;
	unsigned char junk[4096];
	uint32_t x = 12345;

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
	path_in(f, path, sizeof(path), "garbage");
	write_file(path, junk, sizeof(junk));
	assert_int_equal(open_err(path), -ENOEXEC);
	memcpy(junk, "\177ELF\2\1\1", 7);	/* plausible ident, garbage headers */
	write_file(path, junk, sizeof(junk));
	assert_int_equal(open_err(path), -ENOEXEC);
	write_file(path, "", 0);
	assert_int_equal(open_err(path), -ENOEXEC);
	assert_int_equal(open_err(f->dir), -ENOEXEC);
	assert_int_equal(open_err("/nonexistent/hostprof/file"), -ENOENT);

	char *prog = read_file(f->prog, &len);
	const size_t cuts[] = { 16, 64, 700, len / 2, len - 200, len - 1 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		write_file(path, prog, cuts[i]);
		if (open_err(path) != -ENOEXEC)
			fail_msg("truncated to %zu of %zu bytes: not -ENOEXEC", cuts[i], len);
	}
	free(prog);
}

static void test_relocatable_is_enoexec(void **state)
{
	struct fixture *f = *state;
	char obj[256];
	path_in(f, obj, sizeof(obj), "prog.o");
	assert_int_equal(run("gcc -O2 -g -c -o '%s' '%s'", obj, f->src), 0);
	assert_int_equal(open_err(obj), -ENOEXEC);
}

/* A copy of src at dst whose section name's header points past the end of the file: its offset (field 0) or
 * its size (field 1). The header is found with libelf and rewritten in place, nothing else moves. */
static void corrupt_section(const char *src, const char *dst, const char *name, int field)
{
	size_t len, shstrndx;
	char *bytes = read_file(src, &len);
	write_file(dst, bytes, len);
	free(bytes);
	int fd = open(dst, O_RDWR);
	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	GElf_Ehdr eh;
	assert_non_null(e);
	assert_non_null(gelf_getehdr(e, &eh));
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	bool done = false;
	for (Elf_Scn *scn = elf_nextscn(e, NULL); scn && !done; scn = elf_nextscn(e, scn)) {
		GElf_Shdr sh;
		Elf64_Shdr raw;
		assert_non_null(gelf_getshdr(scn, &sh));
		const char *n = elf_strptr(e, shstrndx, sh.sh_name);
		if (!n || strcmp(n, name))
			continue;
		off_t at = (off_t)(eh.e_shoff + elf_ndxscn(scn) * eh.e_shentsize);
		assert_int_equal(pread(fd, &raw, sizeof(raw), at), sizeof(raw));
		if (field == 0)
			raw.sh_offset = len + 4096;
		else
			raw.sh_size = len * 4;
		assert_int_equal(pwrite(fd, &raw, sizeof(raw), at), sizeof(raw));
		done = true;
	}
	elf_end(e);
	close(fd);
	assert_true(done);
}

/*
 * One section whose header points past the end of the file costs that section, not the file's names: with
 * .comment, .debug_str (DWARF's names) or .eh_frame corrupt, the symbol table still names every function.
 */
static void test_bad_section_costs_only_itself(void **state)
{
	struct fixture *f = *state;
	const char *sections[] = { ".comment", ".debug_str", ".eh_frame" };
	struct symbol_frame fr[8];
	char path[256];
	path_in(f, path, sizeof(path), "bad-section");
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		for (int field = 0; field < 2; field++) {
			corrupt_section(f->prog, path, sections[i], field);
			struct symbolizer *s = open_ok(path);
			assert_int_equal(symbolizer_lookup(s, f->leaf.addr, fr, 8), 1);
			assert_string_equal(fr[0].function, "exported_leaf");
			assert_true(symbolizer_lookup(s, f->hidden.addr, fr, 8) >= 1);
			assert_string_equal(fr[0].function, "hidden_static");
			symbolizer_free(s);
		}
	}
}

/* Corrupted copies must fail or work, never crash (most useful under the sanitizers). */
static void test_corrupt_copies_do_not_crash(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	char path[256];
	size_t len;
	uint32_t x = 777;
	char *prog = read_file(f->prog, &len);
	char *copy = malloc(len);
	assert_non_null(copy);
	path_in(f, path, sizeof(path), "corrupt");
	for (int round = 0; round < 200; round++) {
		memcpy(copy, prog, len);
		for (int i = 0; i < 16; i++) {
			x = x * 1103515245u + 12345u;
			copy[(x >> 8) % len] = (char)(x >> 24);
		}
		write_file(path, copy, len);
		struct symbolizer *s = NULL;
		int err = symbolizer_open(path, -1, &s);
		assert_true(err == 0 ? s != NULL : err < 0 && s == NULL);
		for (uint64_t a = f->outer.addr; s && a < f->outer.addr + f->outer.size; a += 3)
			assert_in_range(symbolizer_lookup(s, a, fr, 8), 0, 8);
		symbolizer_free(s);
	}
	free(copy);
	free(prog);
}

/* libc's own malloc (not a sanitizer's): its file and ELF address, from the dynamic linker. */
static void libc_malloc(const char **path, uint64_t *va)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(libc);
	void *fn = dlsym(libc, "malloc");
	Dl_info info;
	struct link_map *map = NULL;
	assert_non_null(fn);
	assert_true(dladdr1(fn, &info, (void **)&map, RTLD_DL_LINKMAP) != 0 && map);
	*path = map->l_name;
	*va = (uint64_t)(uintptr_t)fn - map->l_addr;
	dlclose(libc);
}

static void test_libc_malloc(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	const char *libc;
	char copy[256];
	uint64_t va;

	libc_malloc(&libc, &va);
	struct symbolizer *s = open_ok(libc);
	int n = symbolizer_lookup(s, va + 1, fr, 8);
	assert_true(n >= 1);
	assert_string_equal(fr[n - 1].function, "malloc");	/* not its alias __libc_malloc */
	symbolizer_free(s);

	/* Without a build-id no debug file (libc6-dbg) can be matched: the name comes from .dynsym alone. */
	path_in(f, copy, sizeof(copy), "libc.nobuildid");
	assert_int_equal(run("objcopy --remove-section .note.gnu.build-id '%s' '%s'", libc, copy), 0);
	s = open_ok(copy);
	assert_int_equal(symbolizer_lookup(s, va + 1, fr, 8), 1);
	assert_frame(&fr[0], "malloc", NULL, 0, 0, 0);
	symbolizer_free(s);
}

static void test_cxx_demangled(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	char src[256], bin[256];
	void *libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY);
	if (!libstdcxx)
		test_skip("libstdc++ is not installed");
	dlclose(libstdcxx);
	test_require_tool("g++ --version", "g++");
	path_in(f, src, sizeof(src), "cpp.cc");
	path_in(f, bin, sizeof(bin), "cppprog");
	write_file(src, cpp_source, strlen(cpp_source));
	assert_int_equal(run("g++ -O2 -g -o '%s' '%s'", bin, src), 0);
	struct symbol_addr work = nm_symbol(bin, "_ZN2ns4workEPNS_3BoxEi");
	struct symbolizer *s = open_ok(bin);
	assert_int_equal(symbolizer_lookup(s, work.addr, fr, 8), 2);
	assert_frame(&fr[0], "ns::Box::twice(int)", "/cpp.cc", 5, 5, 1);
	assert_frame(&fr[1], "ns::work(ns::Box*, int)", "/cpp.cc", 7, 7, 0);
	symbolizer_free(s);
}

/* ---- the symbol index against libdwfl's own search ---- */

static double seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The file as libdwfl sees it, at its link-time addresses, to ask dwfl_module_addrinfo() directly. */
struct reference {
	Dwfl *dwfl;
	Dwfl_Module *mod;
};

static void reference_open(struct reference *r, const char *path)
{
	static char debug_root[] = "/usr/lib/debug";
	static char *debuginfo_path = debug_root;
	static const Dwfl_Callbacks callbacks = {
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_build_id_find_debuginfo,
		.debuginfo_path = &debuginfo_path,
	};
	GElf_Addr bias = 1;

	r->dwfl = dwfl_begin(&callbacks);
	assert_non_null(r->dwfl);
	dwfl_report_begin(r->dwfl);
	r->mod = dwfl_report_elf(r->dwfl, path, path, -1, 0, true);
	assert_non_null(r->mod);
	assert_int_equal(dwfl_report_end(r->dwfl, NULL, NULL), 0);
	assert_non_null(dwfl_module_getelf(r->mod, &bias));
	assert_int_equal(bias, 0);
}

static void reference_close(struct reference *r)
{
	dwfl_end(r->dwfl);
}

static int reference_noise(const char *name)
{
	int n = 0;
	while (name[n] == '_')
		n++;
	return strchr(name, '@') ? n + 1000 : n;
}

/*
 * The ELF symbol name the symbolizer gave for va before it had an index, computed as it did: the symbol
 * dwfl_module_addrinfo() returns, if it covers va or is sizeless in a code section; its plainest alias found
 * by a scan of the whole table; demangled, or without its version. NULL if none; malloc'd otherwise, with
 * *covering telling which of the two kinds it is.
 */
static char *reference_name(const struct reference *r, uint64_t va, bool *covering)
{
	GElf_Off off;
	GElf_Sym sym;
	GElf_Shdr sh;
	Dwarf_Addr offset = va, bias;
	const char *name = dwfl_module_addrinfo(r->mod, va, &off, &sym, NULL, NULL, NULL);

	if (!name || !*name)
		return NULL;
	*covering = sym.st_size > 0 && off < sym.st_size;
	if (!*covering) {
		Elf_Scn *scn = dwfl_module_address_section(r->mod, &offset, &bias);
		if (sym.st_size != 0 || !scn || !gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR))
			return NULL;
	}
	bool mangled = name[0] == '_' && (name[1] == 'Z' || name[1] == 'R');
	int n = dwfl_module_getsymtab(r->mod);
	for (int i = 1; i < n && !mangled && reference_noise(name) > 0; i++) {
		GElf_Sym alias_sym;
		GElf_Addr alias_addr;
		const char *alias = dwfl_module_getsym_info(r->mod, i, &alias_sym, &alias_addr, NULL, NULL, NULL);
		if (alias && *alias && alias_addr == va - off && alias_sym.st_size == sym.st_size &&
		    alias_sym.st_info == sym.st_info && reference_noise(alias) < reference_noise(name))
			name = alias;
	}
	char *demangled = demangle(name);
	if (demangled)
		return demangled;
	const char *at = strchr(name, '@');
	return strndup(name, at && at > name ? (size_t)(at - name) : strlen(name));
}

struct address_list {
	uint64_t *addr;
	size_t n, cap;
};

static void add_address(struct address_list *l, uint64_t addr)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4096;
		l->addr = realloc(l->addr, l->cap * sizeof(*l->addr));
		assert_non_null(l->addr);
	}
	l->addr[l->n++] = addr;
}

static int by_value(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return *x < *y ? -1 : *x > *y;
}

/*
 * Every symbol's start, middle and one-past-end address, each once; around and inside the symbols whose
 * names start with sweep_prefix (when given), every address.
 */
static size_t symbol_addresses(const struct reference *r, const char *sweep_prefix, struct address_list *l)
{
	int n = dwfl_module_getsymtab(r->mod);
	assert_true(n > 1);
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr value;
		const char *name = dwfl_module_getsym_info(r->mod, i, &sym, &value, NULL, NULL, NULL);
		if (!name || sym.st_size > UINT64_MAX - value)
			continue;
		add_address(l, value);
		add_address(l, value + sym.st_size / 2);
		add_address(l, value + sym.st_size);
		if (sweep_prefix && strncmp(name, sweep_prefix, strlen(sweep_prefix)) == 0 && value >= 8)
			for (uint64_t a = value - 8; a < value + sym.st_size + 8; a++)
				add_address(l, a);
	}
	qsort(l->addr, l->n, sizeof(*l->addr), by_value);
	size_t unique = 0;
	for (size_t i = 0; i < l->n; i++)
		if (unique == 0 || l->addr[unique - 1] != l->addr[i])
			l->addr[unique++] = l->addr[i];
	l->n = unique;
	return (size_t)n - 1;
}

/*
 * The symbolizer names every address as it did with dwfl_module_addrinfo(): exactly, where no DWARF covers
 * the address; where DWARF does, the physical frame carries a covering symbol's name. Prints both rates.
 */
static void compare_with_reference(const char *path, const char *sweep_prefix)
{
	struct reference r;
	struct address_list l = { NULL, 0, 0 };
	struct symbol_frame fr[8];
	size_t mismatches = 0, named = 0;

	reference_open(&r, path);
	size_t nsyms = symbol_addresses(&r, sweep_prefix, &l);
	char **expected = calloc(l.n, sizeof(*expected));
	bool *covering = calloc(l.n, sizeof(*covering));
	int *got_n = calloc(l.n, sizeof(*got_n));
	const char **got = calloc(l.n, sizeof(*got));
	assert_true(expected && covering && got_n && got);

	double start = seconds();
	for (size_t i = 0; i < l.n; i++)
		expected[i] = reference_name(&r, l.addr[i], &covering[i]);
	double before = seconds() - start;

	struct symbolizer *s = open_ok(path);
	start = seconds();
	got_n[0] = symbolizer_lookup(s, l.addr[0], fr, 8);	/* builds the index */
	got[0] = got_n[0] > 0 ? fr[got_n[0] - 1].function : NULL;
	double build = seconds() - start;
	start = seconds();
	for (size_t i = 1; i < l.n; i++) {
		got_n[i] = symbolizer_lookup(s, l.addr[i], fr, 8);
		got[i] = got_n[i] > 0 ? fr[got_n[i] - 1].function : NULL;
	}
	double after = seconds() - start;

	for (size_t i = 0; i < l.n; i++) {
		Dwarf_Addr bias;
		bool dwarf = dwfl_module_addrdie(r.mod, l.addr[i], &bias) != NULL;
		bool same;
		if (!dwarf)
			same = expected[i] ? got_n[i] == 1 && strcmp(got[i], expected[i]) == 0 : got_n[i] == 0;
		else
			same = !expected[i] || !covering[i] || (got_n[i] > 0 && strcmp(got[i], expected[i]) == 0);
		named += expected[i] != NULL;
		if (!same && mismatches++ < 20)
			fprintf(stderr, "%s: 0x%" PRIx64 ": dwfl_module_addrinfo gives %s, the index %s (%d frames)\n",
				path, l.addr[i], expected[i] ? expected[i] : "nothing", got[i] ? got[i] : "nothing",
				got_n[i]);
		free(expected[i]);
	}
	printf("    %s: %zu symbols, %zu addresses (%zu named): dwfl_module_addrinfo %.0f lookups/s, "
	       "index %.0f lookups/s (built in %.1f ms by the first lookup)\n",
	       path, nsyms, l.n, named, (double)l.n / before, (double)(l.n - 1) / after, build * 1e3);
	symbolizer_free(s);
	reference_close(&r);
	free(expected);
	free(covering);
	free(got_n);
	free(got);
	free(l.addr);
	assert_int_equal(mismatches, 0);
	assert_true(named > 0);
}

static void test_index_matches_dwfl_on_libc(void **state)
{
	const char *libc;
	uint64_t va;
	(void)state;
	libc_malloc(&libc, &va);
	compare_with_reference(libc, NULL);
}

/*
 * Writes count noinline functions (local, weak, aliased behind an underscored name, plain) over two C files
 * and builds them, with tricky_asm, at -O1 without DWARF.
 */
static void build_many_functions(const struct fixture *f, const char *bin, int count)
{
	for (int part = 0; part < 2; part++) {
		char path[256], name[32];
		snprintf(name, sizeof(name), "many%d.c", part);
		path_in(f, path, sizeof(path), name);
		FILE *out = fopen(path, "w");
		assert_non_null(out);
		fprintf(out, "extern volatile int sink;\n");
		if (part == 0)
			fprintf(out, "volatile int sink;\nint main(void) { return sink; }\n");
		for (int i = part; i < count; i += 2) {
			const char *body = "(int x) { return x * %d + sink; }\n";
			switch (i % 4) {
			case 0:
				fprintf(out, "static __attribute__((noinline, used)) int fn_%d", i);
				break;
			case 1:
				fprintf(out, "__attribute__((noinline, weak)) int fn_%d", i);
				break;
			case 2:
				fprintf(out, "int fn_%d(int) __attribute__((alias(\"__fn_%d\")));\n", i, i);
				fprintf(out, "__attribute__((noinline)) int __fn_%d", i);
				break;
			default:
				fprintf(out, "__attribute__((noinline)) int fn_%d", i);
			}
			fprintf(out, body, i + 3);
		}
		assert_int_equal(fclose(out), 0);
	}
	char asm_path[256], map_path[256];
	path_in(f, asm_path, sizeof(asm_path), "tricky.s");
	path_in(f, map_path, sizeof(map_path), "tricky.map");
	write_file(asm_path, tricky_asm, strlen(tricky_asm));
	write_file(map_path, tricky_versions, strlen(tricky_versions));
	assert_int_equal(run("cd '%s' && (gcc -O1 -c many0.c & gcc -O1 -c many1.c & wait) && "
			     "gcc -O1 -o '%s' many0.o many1.o tricky.s -Wl,--version-script=tricky.map",
			     f->dir, bin), 0);
}

/* HOSTPROF_TEST_FUNCTIONS sets how many (5000 by default: gcc -O1 takes about a millisecond each). */
static void test_index_matches_dwfl_on_many_functions(void **state)
{
	struct fixture *f = *state;
	char bin[256];
	const char *env = getenv("HOSTPROF_TEST_FUNCTIONS");
	int count = env && atoi(env) > 0 ? atoi(env) : 5000;

	path_in(f, bin, sizeof(bin), "many");
	build_many_functions(f, bin, count);
	compare_with_reference(bin, "tricky_");
}

/* More sized symbols over one address than the index weighs (a crafted file): no ELF name there, only. */
static void test_crowded_address(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	char src[256], bin[256];

	path_in(f, src, sizeof(src), "crowd.s");
	path_in(f, bin, sizeof(bin), "crowd");
	FILE *out = fopen(src, "w");
	assert_non_null(out);
	fprintf(out, "	.text\n	.globl crowd_before\n	.type crowd_before, %%function\n"
		     "crowd_before:\n	.skip 16\n	.size crowd_before, 16\n");
	for (int i = 0; i < 1100; i++)
		fprintf(out, "	.globl crowd_%d\n	.type crowd_%d, %%function\n	.size crowd_%d, 64\n"
			     "crowd_%d:\n", i, i, i, i);
	fprintf(out, "	.skip 64\n	.globl crowd_after\n	.type crowd_after, %%function\n"
		     "crowd_after:\n	.skip 16\n	.size crowd_after, 16\n"
		     "	.section .note.GNU-stack, \"\", %%progbits\n");
	assert_int_equal(fclose(out), 0);
	assert_int_equal(run("gcc -nostdlib -Wl,-e,crowd_before -o '%s' '%s'", bin, src), 0);

	struct symbol_addr before = nm_symbol(bin, "crowd_before"), after = nm_symbol(bin, "crowd_after");
	struct symbolizer *s = open_ok(bin);
	assert_int_equal(symbolizer_lookup(s, before.addr + 16, fr, 8), 0);
	assert_int_equal(symbolizer_lookup(s, before.addr + 16 + 63, fr, 8), 0);
	assert_int_equal(symbolizer_lookup(s, before.addr, fr, 8), 1);
	assert_string_equal(fr[0].function, "crowd_before");
	assert_int_equal(symbolizer_lookup(s, after.addr, fr, 8), 1);
	assert_string_equal(fr[0].function, "crowd_after");
	symbolizer_free(s);
}

/* A copy of the program without section headers: libdwfl then reads .dynsym through PT_DYNAMIC. */
static void test_no_section_headers(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	char path[256];
	size_t len;
	Elf64_Ehdr eh;
	char *prog = read_file(f->prog, &len);

	memcpy(&eh, prog, sizeof(eh));
	if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
		free(prog);
		test_skip("the test program is not a 64-bit ELF file");
	}
	eh.e_shoff = 0;
	eh.e_shnum = 0;
	eh.e_shstrndx = 0;
	memcpy(prog, &eh, sizeof(eh));
	path_in(f, path, sizeof(path), "prog.noshdr");
	write_file(path, prog, len);
	free(prog);

	struct symbolizer *s = open_ok(path);
	assert_int_equal(symbolizer_lookup(s, f->leaf.addr + 1, fr, 8), 1);
	assert_frame(&fr[0], "exported_leaf", NULL, 0, 0, 0);
	assert_int_equal(symbolizer_lookup(s, f->hidden.addr, fr, 8), 0);	/* only in .symtab */
	symbolizer_free(s);
}

/* File offset and size of the named section. */
static void section_extent(const char *path, const char *name, uint64_t *offset, uint64_t *size)
{
	size_t shstrndx;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	*offset = *size = 0;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		assert_non_null(gelf_getshdr(scn, &sh));
		const char *scn_name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (scn_name && strcmp(scn_name, name) == 0) {
			*offset = sh.sh_offset;
			*size = sh.sh_size;
		}
	}
	elf_end(elf);
	close(fd);
	assert_true(*size > 0);
}

/*
 * The last name in .strtab runs off its end (it and its NUL overwritten with 'x'): it is not used, nothing
 * reads past the table (which the sanitizer build checks), and the other names are still there.
 */
static void test_unterminated_name(void **state)
{
	struct fixture *f = *state;
	struct symbol_frame fr[8];
	char path[256];
	uint64_t offset, size;
	size_t len;
	char *prog = read_file(f->prog, &len);

	section_extent(f->prog, ".strtab", &offset, &size);
	assert_true(offset + size <= len && size >= 2 && prog[offset + size - 1] == '\0');
	for (uint64_t i = offset + size - 1; i > offset && (i == offset + size - 1 || prog[i] != '\0'); i--)
		prog[i] = 'x';
	path_in(f, path, sizeof(path), "prog.unterminated");
	write_file(path, prog, len);
	free(prog);

	struct symbolizer *s = open_ok(path);
	for (uint64_t a = f->outer.addr; a < f->hidden.addr + f->hidden.size; a++)
		assert_in_range(symbolizer_lookup(s, a, fr, 8), 0, 8);
	assert_int_equal(symbolizer_lookup(s, f->leaf.addr, fr, 8), 1);
	assert_string_equal(fr[0].function, "exported_leaf");
	symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_function_name_and_line),
		cmocka_unit_test(test_inline_chain),
		cmocka_unit_test(test_stripped_uses_dynsym_only),
		cmocka_unit_test(test_outside_any_symbol),
		cmocka_unit_test(test_debuglink),
		cmocka_unit_test(test_debuglink_path_refused),
		cmocka_unit_test(test_fd_is_duplicated),
		cmocka_unit_test(test_strings_live_until_free),
		cmocka_unit_test(test_repeated_lookups),
		cmocka_unit_test(test_not_elf_is_enoexec),
		cmocka_unit_test(test_relocatable_is_enoexec),
		cmocka_unit_test(test_corrupt_copies_do_not_crash),
		cmocka_unit_test(test_bad_section_costs_only_itself),
		cmocka_unit_test(test_libc_malloc),
		cmocka_unit_test(test_cxx_demangled),
		cmocka_unit_test(test_index_matches_dwfl_on_libc),
		cmocka_unit_test(test_index_matches_dwfl_on_many_functions),
		cmocka_unit_test(test_crowded_address),
		cmocka_unit_test(test_no_section_headers),
		cmocka_unit_test(test_unterminated_name),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
