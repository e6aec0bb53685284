/*
 * Unit tests for symbols/symbolizer.c. A small C program is compiled here (gcc -O2 -g) with a noinline
 * function that an always_inline one is inlined into; addresses come from nm, line numbers from markers in
 * the source below, and the addresses of the inlined code from the line table (libdw, read independently).
 * Copies of it (stripped, with a separate debug file, truncated, corrupted) exercise the other paths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/symbolizer.h"

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
	int err = 0;
	struct symbolizer *s = symbolizer_open(path, -1, &err);
	if (!s)
		fail_msg("symbolizer_open(%s) failed: %s", path, strerror(-err));
	return s;
}

static int open_err(const char *path)
{
	int err = 0;
	struct symbolizer *s = symbolizer_open(path, -1, &err);
	symbolizer_free(s);
	return s ? 0 : err;
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
	int err = 0;
	int fd = open(f->prog, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct symbolizer *s = symbolizer_open("/nonexistent/name/only", fd, &err);
	assert_non_null(s);
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
		int err = 0;
		struct symbolizer *s = symbolizer_open(path, -1, &err);
		assert_true(s || err < 0);
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
	if (!libstdcxx || system("g++ --version >/dev/null 2>&1") != 0)
		skip();
	dlclose(libstdcxx);
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
		cmocka_unit_test(test_libc_malloc),
		cmocka_unit_test(test_cxx_demangled),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
