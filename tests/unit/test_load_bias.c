/*
 * Unit tests for src/base/load_bias.c and execinfo_bias(): the ELF address of a runtime address goes through the
 * load segment its mapping belongs to, also when segments share a file page (lld's layout: p_vaddr != p_offset
 * and several PT_LOADs starting in page 0 of the file).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "src/base/load_bias.h"
#include "src/processes/execinfo.h"
#include "src/processes/procmgr.h"

#define BASE 0x555555554000ull

/* The program headers `clang -fuse-ld=lld` wrote for a small PIE (readelf -l), page size 4 KiB. */
static const struct load_segment lld_segments[] = {
	{ .vaddr = 0x0, .memsz = 0x754, .offset = 0x0, .filesz = 0x754, .flags = PF_R },
	{ .vaddr = 0x1760, .memsz = 0x300, .offset = 0x760, .filesz = 0x300, .flags = PF_R | PF_X },
	{ .vaddr = 0x2a60, .memsz = 0x1e8, .offset = 0xa60, .filesz = 0x1e8, .flags = PF_R | PF_W },
	{ .vaddr = 0x3c48, .memsz = 0x58, .offset = 0xc48, .filesz = 0x48, .flags = PF_R | PF_W },
};

/* GNU ld's layout: every segment starts on its own file page, p_vaddr == p_offset. */
static const struct load_segment bfd_segments[] = {
	{ .vaddr = 0x0, .memsz = 0x628, .offset = 0x0, .filesz = 0x628, .flags = PF_R },
	{ .vaddr = 0x1000, .memsz = 0x1f5, .offset = 0x1000, .filesz = 0x1f5, .flags = PF_R | PF_X },
	{ .vaddr = 0x2000, .memsz = 0x10c, .offset = 0x2000, .filesz = 0x10c, .flags = PF_R },
	{ .vaddr = 0x3df0, .memsz = 0x230, .offset = 0x2df0, .filesz = 0x228, .flags = PF_R | PF_W },
};

static uint64_t bias_of(const struct load_segment *s, unsigned n, uint64_t start, uint64_t end, uint64_t pgoff,
			int prot)
{
	uint64_t bias = 0xdead;
	assert_int_equal(load_bias(s, n, start, end, pgoff, prot, &bias), 0);
	return bias;
}

/* The kernel maps each lld segment at BASE + its page-rounded vaddr, all from file page 0. */
static void test_lld_shared_first_page(void **state)
{
	(void)state;
	const unsigned n = 4;
	/* The text mapping: r-x, pgoff 0, at BASE + 0x1000. A file offset taken for an ELF address is 0x1000 off. */
	assert_int_equal(bias_of(lld_segments, n, BASE + 0x1000, BASE + 0x2000, 0, PROT_READ | PROT_EXEC), BASE);
	/* An address in the text segment, its ELF virtual address, then the same through the mapping. */
	uint64_t leaf = BASE + 0x1800;
	assert_int_equal(leaf - bias_of(lld_segments, n, BASE + 0x1000, BASE + 0x2000, 0, PROT_READ | PROT_EXEC),
			 0x1800);
	/* The read-only first segment and the writable ones, mapped from the same file page. */
	assert_int_equal(bias_of(lld_segments, n, BASE, BASE + 0x1000, 0, PROT_READ), BASE);
	/* Both writable segments claim file page 0: the mapping alone cannot tell them apart, the file's executable
	 * mapping can (the process manager checks its bias fits first, see test_procmgr_lld_mappings). */
	assert_true(load_bias_fits(lld_segments, n, BASE + 0x3000, 0, BASE));
	assert_true(load_bias_fits(lld_segments, n, BASE + 0x3000, 0, BASE + 0x1000));
	assert_false(load_bias_fits(lld_segments, n, BASE + 0x3000, 0, BASE + 0x4000));
}

static void test_bfd_layout(void **state)
{
	(void)state;
	const unsigned n = 4;
	assert_int_equal(bias_of(bfd_segments, n, BASE + 0x1000, BASE + 0x2000, 0x1000, PROT_READ | PROT_EXEC), BASE);
	assert_int_equal(bias_of(bfd_segments, n, BASE, BASE + 0x1000, 0, PROT_READ), BASE);
	assert_int_equal(bias_of(bfd_segments, n, BASE + 0x3000, BASE + 0x4000, 0x2000, PROT_READ | PROT_WRITE),
			 BASE);
}

/* Without a protection (older replay files) the segment the mapping covers most is taken. */
static void test_unknown_protection(void **state)
{
	(void)state;
	/* A text segment larger than the read-only part before it in page 0. */
	const struct load_segment segs[] = {
		{ .vaddr = 0x0, .memsz = 0x300, .offset = 0x0, .filesz = 0x300, .flags = PF_R },
		{ .vaddr = 0x1300, .memsz = 0x5000, .offset = 0x300, .filesz = 0x5000, .flags = PF_R | PF_X },
	};
	assert_int_equal(bias_of(segs, 2, BASE + 0x1000, BASE + 0x7000, 0, LOAD_PROT_UNKNOWN), BASE);
	assert_int_equal(bias_of(segs, 2, BASE + 0x1000, BASE + 0x7000, 0, 0), BASE);
}

/* A mapping that starts inside a segment (mprotect split it, or a partial munmap). */
static void test_split_mapping(void **state)
{
	(void)state;
	const struct load_segment segs[] = {
		{ .vaddr = 0x1760, .memsz = 0x9000, .offset = 0x760, .filesz = 0x9000, .flags = PF_R | PF_X },
	};
	assert_int_equal(bias_of(segs, 1, BASE + 0x5000, BASE + 0xa000, 0x4000, PROT_READ | PROT_EXEC), BASE);
}

static void test_no_segment(void **state)
{
	(void)state;
	uint64_t bias = 7;
	assert_int_equal(load_bias(lld_segments, 4, BASE, BASE + 0x1000, 0x8000, PROT_READ, &bias), -ENOENT);
	assert_int_equal(bias, 7);
	assert_int_equal(load_bias(NULL, 0, BASE, BASE + 0x1000, 0, PROT_READ, &bias), -ENOENT);
}

/* A real (tiny) ELF file with lld's program headers, written with libelf, read back through execinfo. */
static int write_tiny_elf(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_WRITE, NULL);
	assert_non_null(e);
	GElf_Ehdr eh;
	assert_non_null(gelf_newehdr(e, ELFCLASS64));
	assert_non_null(gelf_getehdr(e, &eh));
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	assert_true(gelf_update_ehdr(e, &eh));
	assert_non_null(gelf_newphdr(e, 4));
	/* Contents so the segments' bytes exist in the file. */
	Elf_Scn *scn = elf_newscn(e);
	Elf_Data *d = elf_newdata(scn);
	static uint8_t bytes[0xd00];
	d->d_buf = bytes;
	d->d_size = sizeof(bytes);
	d->d_align = 1;
	d->d_type = ELF_T_BYTE;
	assert_true(elf_update(e, ELF_C_NULL) >= 0);
	for (int i = 0; i < 4; i++) {
		GElf_Phdr ph = { .p_type = PT_LOAD, .p_offset = lld_segments[i].offset,
				 .p_vaddr = lld_segments[i].vaddr, .p_paddr = lld_segments[i].vaddr,
				 .p_filesz = lld_segments[i].filesz, .p_memsz = lld_segments[i].memsz,
				 .p_flags = lld_segments[i].flags, .p_align = 0x1000 };
		assert_true(gelf_update_phdr(e, i, &ph));
	}
	elf_flagphdr(e, ELF_C_SET, ELF_F_DIRTY);
	assert_true(elf_update(e, ELF_C_WRITE) >= 0);
	elf_end(e);
	return fd;
}

static void test_execinfo_tiny_elf(void **state)
{
	(void)state;
	char path[] = "/tmp/hostprof-test-lld-XXXXXX";
	int tmp = mkstemp(path);
	assert_true(tmp >= 0);
	close(tmp);
	int fd = write_tiny_elf(path);
	struct execinfo_mgr *m;
	assert_int_equal(execinfo_mgr_new(&m), 0);
	struct execinfo *e = NULL;
	assert_int_equal(execinfo_acquire_fd(m, fd, path, &e), 0); /* takes the fd */
	uint64_t bias = 0;
	assert_int_equal(execinfo_bias(e, BASE + 0x1000, BASE + 0x2000, 0, PROT_READ | PROT_EXEC, &bias), 0);
	assert_int_equal(bias, BASE);
	assert_true(execinfo_contains_va(e, 0x1800));
	assert_int_equal(execinfo_bias(e, BASE, BASE + 0x1000, 0, PROT_READ, &bias), 0);
	assert_int_equal(bias, BASE);
	execinfo_release(m, e);
	execinfo_mgr_free(m);
	unlink(path);
}

/* Mappings of the tiny lld file as the kernel reports them, one per segment, all from file page 0. */
static void test_procmgr_lld_mappings(void **state)
{
	(void)state;
	char path[] = "/tmp/hostprof-test-lld-XXXXXX";
	int tmp = mkstemp(path);
	assert_true(tmp >= 0);
	close(tmp);
	close(write_tiny_elf(path));
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	struct execinfo_mgr *em;
	assert_int_equal(execinfo_mgr_new(&em), 0);
	struct procmgr *pm;
	assert_int_equal(procmgr_new(em, &pm), 0);
	const pid_t pid = 2147483600; /* cannot exist: nothing is seeded from /proc */
	static const int prots[] = { PROT_READ, PROT_READ | PROT_EXEC, PROT_READ, PROT_READ | PROT_WRITE };
	for (int i = 3; i >= 0; i--) { /* the writable ones first: their bias must still come out right */
		struct perf_mmap2 m = { .pid = (uint32_t)pid, .tid = (uint32_t)pid, .addr = BASE + 0x1000ull * i,
					.len = 0x1000, .pgoff = 0, .maj = major(st.st_dev), .min = minor(st.st_dev),
					.ino = st.st_ino, .prot = (uint32_t)prots[i], .filename = path };
		procmgr_on_mmap2(pm, &m);
	}
	struct process *p = procmgr_get(pm, pid);
	assert_non_null(p);
	assert_int_equal(p->nmaps, 4);
	for (unsigned i = 0; i < 4; i++) {
		assert_non_null(procmgr_mapping_exe(pm, p, &p->maps[i]));
		assert_int_equal(p->maps[i].bias, BASE);
	}
	procmgr_free(pm);
	execinfo_mgr_free(em);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lld_shared_first_page),
		cmocka_unit_test(test_bfd_layout),
		cmocka_unit_test(test_unknown_protection),
		cmocka_unit_test(test_split_mapping),
		cmocka_unit_test(test_no_segment),
		cmocka_unit_test(test_execinfo_tiny_elf),
		cmocka_unit_test(test_procmgr_lld_mappings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
