/*
 * Unit tests for unwind/elf_image.c: the bytes at an ELF virtual address are the file's bytes at that segment's
 * offset, checked against the program headers of this test's own executable; a read never spans two segments
 * or leaves one; an image cut short keeps only what it holds (a segment past its end has an extent but no
 * bytes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwind/elf_image.h"

struct self_image {
	uint8_t *buf;
	size_t size;
};

static void read_self(struct self_image *s)
{
	struct stat st;
	int fd = open("/proc/self/exe", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	s->size = (size_t)st.st_size;
	s->buf = malloc(s->size);
	assert_non_null(s->buf);
	assert_int_equal(pread(fd, s->buf, s->size, 0), (ssize_t)s->size);
	close(fd);
}

static void test_own_executable(void **state)
{
	(void)state;
	struct self_image s;
	struct elf_image img;
	read_self(&s);
	Elf *elf = elf_memory((char *)s.buf, s.size);
	assert_non_null(elf);
	elf_image_init(&img, elf);
	size_t n;
	unsigned loads = 0;
	uint64_t lo = UINT64_MAX, hi = 0;
	assert_int_equal(elf_getphdrnum(elf, &n), 0);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		assert_non_null(gelf_getphdr(elf, (int)i, &ph));
		if (ph.p_type != PT_LOAD)
			continue;
		if (loads == 0) {
			assert_int_equal(img.first_vaddr, ph.p_vaddr);
			assert_int_equal(img.first_align, ph.p_align);
		}
		loads += ph.p_filesz > 0;
		lo = ph.p_vaddr < lo ? ph.p_vaddr : lo;
		hi = ph.p_vaddr + ph.p_memsz > hi ? ph.p_vaddr + ph.p_memsz : hi;
		if (!ph.p_filesz)
			continue;
		/* The first and last bytes of the segment are the file's; a read past its end is refused. */
		const uint8_t *p = elf_image_bytes(&img, ph.p_vaddr, ph.p_filesz);
		assert_ptr_equal(p, s.buf + ph.p_offset);
		assert_ptr_equal(elf_image_bytes(&img, ph.p_vaddr + ph.p_filesz - 1, 1), s.buf + ph.p_offset + ph.p_filesz - 1);
		assert_ptr_equal(elf_image_bytes(&img, ph.p_vaddr + ph.p_filesz, 0), s.buf + ph.p_offset + ph.p_filesz);
		assert_null(elf_image_bytes(&img, ph.p_vaddr + ph.p_filesz - 4, 8));
		assert_ptr_equal(elf_image_load_at(&img, ph.p_vaddr + 1)->offset, ph.p_offset);
		assert_null(elf_image_bytes(&img, ph.p_vaddr, UINT64_MAX));
	}
	assert_true(img.have_loads);
	assert_int_equal(img.nloads, loads);
	assert_int_equal(img.lo, lo);
	assert_int_equal(img.hi, hi);
	assert_null(elf_image_load_at(&img, hi));
	/* main is code of this file: its bytes are found where the file holds them. */
	GElf_Ehdr eh;
	assert_non_null(gelf_getehdr(elf, &eh));
	assert_non_null(elf_image_bytes(&img, eh.e_entry, 16));
	elf_end(elf);
	free(s.buf);
}

/* The file cut in the middle of its last loaded segment: that one is cut, any after it has no bytes. */
static void test_cut_image(void **state)
{
	(void)state;
	struct self_image s;
	struct elf_image whole, cut;
	read_self(&s);
	Elf *elf = elf_memory((char *)s.buf, s.size);
	assert_non_null(elf);
	elf_image_init(&whole, elf);
	elf_end(elf);
	assert_true(whole.nloads >= 2);
	const struct elf_image_load *last = &whole.loads[whole.nloads - 1];
	size_t at = (size_t)(last->offset + last->size / 2);
	if (last->size < 2)
		at = (size_t)last->offset;
	elf = elf_memory((char *)s.buf, at);
	assert_non_null(elf);
	elf_image_init(&cut, elf);
	assert_int_equal(cut.lo, whole.lo);
	assert_int_equal(cut.hi, whole.hi);
	assert_true(cut.nloads <= whole.nloads);
	for (unsigned i = 0; i < cut.nloads; i++)
		assert_true(cut.loads[i].offset + cut.loads[i].size <= at);
	assert_null(elf_image_bytes(&cut, last->vaddr + (at - last->offset), 1));
	elf_end(elf);
	free(s.buf);
}

int main(void)
{
	elf_version(EV_CURRENT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_executable),
		cmocka_unit_test(test_cut_image),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
