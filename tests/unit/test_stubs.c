/*
 * Unit tests for symbols/stubs.c: programs linked at test time with their PLT stubs in .plt, .plt.sec (IBT) and
 * .plt.got, named as objdump names them (its own "<name@plt>" labels are the oracle); the sigreturn trampoline in
 * an assembled object.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/stubs.h"

static const char lib_c[] = "int tiny(int x) { return x + 1; }\nint other(int x) { return x * 3; }\n";
static const char main_c[] =
	"#include <stdlib.h>\n"
	"int tiny(int); int other(int);\n"
	"#ifdef TAKE_ADDRESS\nint (*volatile p)(int);\n#endif\n"
	"int main(int argc, char **argv) {\n"
	"#ifdef TAKE_ADDRESS\n\tp = tiny;\n#endif\n"
	"\treturn tiny(argc) + other(atoi(argv[0]));\n}\n";
static const char tramp_asm[] =
	"	.text\n"
	"	.globl f\n"
	"f:\n"
	"	ret\n"
	"	nop\n"
	"tramp:\n"
	"	mov $15, %rax\n"
	"	syscall\n"
	"after:\n"
	"	ret\n";

struct fixture {
	char dir[64];
};

static int write_text(const char *dir, const char *name, const char *text)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	return f && fputs(text, f) >= 0 && fclose(f) == 0 ? 0 : -1;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char cmd[1024];
	if (!f)
		return -1;
	*state = f;
	elf_version(EV_CURRENT);
	snprintf(f->dir, sizeof(f->dir), "/tmp/hostprof-stubs-XXXXXX");
	if (!mkdtemp(f->dir) || write_text(f->dir, "lib.c", lib_c) < 0 || write_text(f->dir, "main.c", main_c) < 0 ||
	    write_text(f->dir, "tramp.s", tramp_asm) < 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "cd %s && cc -O2 -shared -fPIC -o libt.so lib.c && "
		 "cc -O2 -o plt main.c -L. -lt && "
		 "cc -O2 -fcf-protection -Wl,-z,ibtplt -o pltsec main.c -L. -lt && "
		 "cc -O2 -DTAKE_ADDRESS -o pltgot main.c -L. -lt && "
		 "cc -shared -nostdlib -o tramp.so tramp.s", f->dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	int rc = system(cmd);
	free(f);
	return rc == 0 ? 0 : -1;
}

static Elf *open_elf(const struct fixture *f, const char *name, int *fd)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf = *fd < 0 ? NULL : elf_begin(*fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	return elf;
}

/* Every "<name@plt>" stub objdump shows in binary is named name, over its whole entry; returns how many. */
static int check_against_objdump(const struct fixture *f, const char *binary, const char *section)
{
	char cmd[512], line[512];
	int fd, checked = 0;
	Elf *elf = open_elf(f, binary, &fd);
	struct stub_names *stubs;
	assert_int_equal(stub_names_new(elf, &stubs), 0);
	assert_non_null(stubs);
	snprintf(cmd, sizeof(cmd), "objdump -d -j %s %s/%s", section, f->dir, binary);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long va;
		char name[256];
		int end = 0;
		/* "0000000000001050 <tiny@plt>:", not the header's "<other@plt-0x10>:" */
		if (sscanf(line, "%llx <%255[^@>]@plt>:%n", &va, name, &end) != 2 || end == 0)
			continue;
		const char *got = stub_names_plt(stubs, va), *mid = stub_names_plt(stubs, va + 5);
		if (!got || strcmp(got, name) != 0 || !mid || strcmp(mid, name) != 0)
			fail_msg("%s %s stub at %#llx: want %s, got %s / %s", binary, section, va, name,
				 got ? got : "-", mid ? mid : "-");
		checked++;
	}
	pclose(p);
	stub_names_free(stubs);
	elf_end(elf);
	close(fd);
	return checked;
}

static void test_plt_sections(void **state)
{
	struct fixture *f = *state;
	/* tiny and other (and the C library's functions) in each kind of stub section */
	assert_true(check_against_objdump(f, "plt", ".plt") >= 2);
	assert_true(check_against_objdump(f, "pltsec", ".plt.sec") >= 2);
	assert_true(check_against_objdump(f, "pltgot", ".plt.got") >= 1);
}

static void test_outside_stubs(void **state)
{
	struct fixture *f = *state;
	int fd;
	Elf *elf = open_elf(f, "plt", &fd);
	struct stub_names *stubs;
	GElf_Ehdr eh;
	assert_int_equal(stub_names_new(elf, &stubs), 0);
	assert_non_null(gelf_getehdr(elf, &eh));
	assert_null(stub_names_plt(stubs, eh.e_entry));		/* .text */
	assert_null(stub_names_plt(stubs, 0));
	assert_null(stub_names_plt(stubs, UINT64_MAX));
	assert_null(stub_names_plt(NULL, eh.e_entry));
	stub_names_free(stubs);
	elf_end(elf);
	close(fd);
	/* A file without PLT sections has no stub index at all. */
	elf = open_elf(f, "tramp.so", &fd);
	assert_int_equal(stub_names_new(elf, &stubs), 0);
	assert_null(stubs);
	elf_end(elf);
	close(fd);
}

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

static void test_sigreturn_trampoline(void **state)
{
	struct fixture *f = *state;
	int fd;
	Elf *elf = open_elf(f, "tramp.so", &fd);
	uint64_t tramp = sym(elf, "tramp");
	/* Read from the file (as the symbolizer does), and from an image of it in memory (elf_memory(), fd -1): the
	 * same answers. (elf_rawfile() on a handle that reads the file loses the section data read before it.) */
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	char *image = malloc((size_t)st.st_size);
	assert_non_null(image);
	assert_int_equal(pread(fd, image, (size_t)st.st_size, 0), st.st_size);
	Elf *mem = elf_memory(image, (size_t)st.st_size);
	assert_non_null(mem);
	Elf *elfs[2] = { elf, mem };
	int fds[2] = { fd, -1 };
	for (int i = 0; i < 2; i++) {
		assert_true(stub_is_sigreturn(elfs[i], fds[i], tramp));
		assert_true(stub_is_sigreturn(elfs[i], fds[i], tramp - 1));	/* a return address into it, minus 1 */
		assert_false(stub_is_sigreturn(elfs[i], fds[i], tramp + 1));
		assert_false(stub_is_sigreturn(elfs[i], fds[i], sym(elf, "f")));
		assert_false(stub_is_sigreturn(elfs[i], fds[i], sym(elf, "after")));
		assert_false(stub_is_sigreturn(elfs[i], fds[i], UINT64_MAX - 4));
	}
	elf_end(mem);
	free(image);
	elf_end(elf);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plt_sections),
		cmocka_unit_test(test_outside_stubs),
		cmocka_unit_test(test_sigreturn_trampoline),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
