/*
 * Unit tests for unwind/call_site.c: a shared object assembled at test time whose labels sit right after call
 * instructions of every length, and after other instructions, in data, and at the edges of its code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind/call_site.h"

static const char fixture_asm[] =
	"	.text\n"
	"	.globl f\n"
	"	.type f,@function\n"
	"f:\n"
	"	call g\n"			/* e8 rel32: 5 bytes */
	"after_direct:\n"
	"	call *%rax\n"			/* 2 bytes */
	"after_reg:\n"
	"	call *%r11\n"			/* with a REX prefix: 3 bytes */
	"after_rex:\n"
	"	call *slot(%rip)\n"		/* ff 15 disp32: 6 bytes */
	"after_rip:\n"
	"	call *0x12345678(%rbx,%rcx,8)\n"	/* SIB and disp32: 7 bytes */
	"after_sib:\n"
	"	mov $0x11223344, %eax\n"
	"after_mov:\n"
	"	nop\n"
	"after_nop:\n"
	"	jmp g\n"
	"after_jmp:\n"
	"	ret\n"
	"	.size f,.-f\n"
	"	.type g,@function\n"
	"g:\n"
	"	ret\n"
	"	.size g,.-g\n"
	"	.data\n"
	"slot:\n"
	"	.quad 0\n"
	"after_slot:\n"
	"	.quad 0\n";

struct fixture {
	char dir[64];
	int fd;
	Elf *elf;
	struct call_site *c;
};

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

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char path[128], cmd[400];
	if (!f)
		return -1;
	*state = f;
	f->fd = -1;
	elf_version(EV_CURRENT);
	snprintf(f->dir, sizeof(f->dir), "/tmp/hostprof-cs-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(path, sizeof(path), "%s/f.s", f->dir);
	FILE *fp = fopen(path, "w");
	if (!fp || fputs(fixture_asm, fp) < 0 || fclose(fp) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "gcc -shared -nostdlib -o %s/f.so %s", f->dir, path);
	if (system(cmd) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/f.so", f->dir);
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	f->elf = f->fd < 0 ? NULL : elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	if (call_site_new(&f->c) < 0)
		return -1;
	return f->elf ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];
	call_site_free(f->c);
	elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	free(f);
	return system(cmd) == 0 ? 0 : -1;
}

static bool follows(struct fixture *f, const char *label)
{
	return call_site_follows_call(f->c, f->elf, f, sym(f->elf, label));
}

static void test_after_calls(void **state)
{
	struct fixture *f = *state;
	assert_true(follows(f, "after_direct"));
	assert_true(follows(f, "after_reg"));
	assert_true(follows(f, "after_rex"));
	assert_true(follows(f, "after_rip"));
	assert_true(follows(f, "after_sib"));
}

static void test_not_after_calls(void **state)
{
	struct fixture *f = *state;
	assert_false(follows(f, "after_mov"));
	assert_false(follows(f, "after_nop"));
	assert_false(follows(f, "after_jmp"));
	assert_false(follows(f, "f"));		/* a function's entry, no call before it in the segment */
	assert_false(follows(f, "g"));
	/* Inside the call's own bytes. */
	assert_false(call_site_follows_call(f->c, f->elf, f, sym(f->elf, "after_direct") - 2));
	/* Data, and nowhere at all. */
	assert_false(follows(f, "after_slot"));
	assert_false(call_site_follows_call(f->c, f->elf, f, 0));
	assert_false(call_site_follows_call(f->c, f->elf, f, UINT64_MAX));
	assert_false(call_site_follows_call(f->c, NULL, f, sym(f->elf, "after_direct")));
}

static void test_cache_and_forget(void **state)
{
	struct fixture *f = *state;
	struct call_site_stats before, after;
	call_site_forget(f->c, f);
	call_site_get_stats(f->c, &before);
	assert_true(follows(f, "after_rip"));
	assert_true(follows(f, "after_rip"));
	assert_false(follows(f, "after_mov"));
	assert_false(follows(f, "after_mov"));
	call_site_get_stats(f->c, &after);
	assert_int_equal(after.checks - before.checks, 4);
	assert_int_equal(after.cache_hits - before.cache_hits, 2);
	assert_int_equal(after.rejected - before.rejected, 2);
	/* Forgotten: decoded again (the key may name another file now). */
	call_site_forget(f->c, f);
	assert_true(follows(f, "after_rip"));
	call_site_get_stats(f->c, &before);
	assert_int_equal(before.cache_hits, after.cache_hits);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_after_calls),
		cmocka_unit_test(test_not_after_calls),
		cmocka_unit_test(test_cache_and_forget),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
