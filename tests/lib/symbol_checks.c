/*
 * symbol_checks.c — the symbolizer's cache tests' shared program and comparisons (see symbol_checks.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/symbol_checks.h"
#include "tests/lib/testlib.h"

static const char source[] =
	"#include <stdio.h>\n"
	"static inline __attribute__((always_inline)) int square(int x) { return x * x; }\n"
	"static inline __attribute__((always_inline)) int twice(int x) { return square(x) + square(x + 1); }\n"
	"__attribute__((noinline)) int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += twice(i); return s; }\n"
	"__attribute__((noinline)) int more(int n) { return work(n) * 3 + twice(n); }\n"
	"int main(int argc, char **argv) { (void)argv; printf(\"%d\\n\", more(argc * 1000)); return 0; }\n";

void symcheck_build_program(const char *dir, const char *ld_flags, int compress)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/prog.c", dir);
	test_write_text(path, source);
	assert_int_equal(test_run("cd '%s' && cc -O2 -g %s -o prog prog.c && objcopy --only-keep-debug prog prog.debug && "
				  "%s objcopy --strip-debug --add-gnu-debuglink=prog.debug prog && "
				  "chmod 0644 prog prog.debug",
				  dir, ld_flags, compress ? "objcopy --compress-debug-sections=zlib-gabi prog.debug &&" : ""),
			 0);
}

void symcheck_text_range(const char *path, uint64_t *lo, uint64_t *hi)
{
	int fd = open(path, O_RDONLY);
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	*lo = *hi = 0;
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && strcmp(elf_strptr(elf, shstrndx, sh.sh_name), ".text") == 0) {
			*lo = sh.sh_addr;
			*hi = sh.sh_addr + sh.sh_size;
		}
	}
	elf_end(elf);
	close(fd);
	assert_true(*hi > *lo);
}

static void same_str(const char *a, const char *b)
{
	assert_true((a == NULL) == (b == NULL));
	if (a)
		assert_string_equal(a, b);
}

void symcheck_same_frames(const struct symbol_frame *a, const struct symbol_frame *b, int n)
{
	for (int i = 0; i < n; i++) {
		same_str(a[i].function, b[i].function);
		same_str(a[i].file, b[i].file);
		assert_int_equal(a[i].line, b[i].line);
		assert_int_equal(a[i].inlined, b[i].inlined);
		assert_int_equal(a[i].go, b[i].go);
	}
}

size_t symcheck_same_lookups(struct symbolizer *a, struct symbolizer *b, uint64_t lo, uint64_t hi, uint64_t step,
			     size_t *inlined)
{
	size_t with_lines = 0, with_inlined = 0;
	for (uint64_t va = lo; va < hi; va += step) {
		struct symbol_frame fa[64], fb[64];
		int na = symbolizer_lookup(a, va, fa, 64), nb = symbolizer_lookup(b, va, fb, 64);
		assert_int_equal(na, nb);
		symcheck_same_frames(fa, fb, na);
		with_lines += na > 0 && fa[0].line > 0;
		with_inlined += na > 1 && fa[0].inlined;
	}
	if (inlined)
		*inlined = with_inlined;
	return with_lines;
}
