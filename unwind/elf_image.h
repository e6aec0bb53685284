/*
 * elf_image.h — where an ELF file's loadable bytes are: its image (elf_rawfile) and the file-backed part of each
 * PT_LOAD segment, to answer "the bytes at ELF virtual address va" without a system call.
 *
 * An unwinder that reads memory outside the stack copy reads the file instead (code and unwind tables are
 * read-only: the file holds what the process holds); this is the one place that maps an address to those bytes.
 *
 * Ownership: a plain value filled by elf_image_init(); it points into the caller's Elf image (elf_rawfile) and is
 * valid while that Elf is open. No allocation. Untrusted input: segments whose file part lies outside the image
 * are cut to it or left out, at most ELF_IMAGE_MAX_LOADS are kept, and at most ELF_IMAGE_MAX_HEADERS program
 * headers are looked at.
 */
#ifndef HOSTPROF_UNWIND_ELF_IMAGE_H
#define HOSTPROF_UNWIND_ELF_IMAGE_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELF_IMAGE_MAX_LOADS 32		/* PT_LOAD segments kept; more is not a real object */
#define ELF_IMAGE_MAX_HEADERS 65536	/* program headers looked at: bounds work on hostile input */

/* The file-backed part of one PT_LOAD segment. */
struct elf_image_load {
	uint64_t vaddr;
	uint64_t size;		/* bytes present in the image: p_filesz, cut to the image's end */
	uint64_t offset;	/* p_offset */
};

struct elf_image {
	const uint8_t *image;	/* the whole file; NULL when libelf has no image of it */
	size_t image_size;
	struct elf_image_load loads[ELF_IMAGE_MAX_LOADS];
	unsigned nloads;
	bool have_loads;	/* the file has a PT_LOAD (even one without bytes in the image) */
	uint64_t lo, hi;	/* [lo, hi): the lowest p_vaddr to the highest p_vaddr + p_memsz; 0, 0 without */
	uint64_t first_vaddr;	/* the first PT_LOAD's p_vaddr and p_align, where libdwfl places a module */
	uint64_t first_align;
};

/* Read elf's image and program headers into *img (an image without loads when they cannot be read). */
void elf_image_init(struct elf_image *img, Elf *elf);

/* The load whose file bytes hold va, or NULL. */
const struct elf_image_load *elf_image_load_at(const struct elf_image *img, uint64_t va);

/* The image's bytes of [va, va + size) when they lie in one load's file bytes, else NULL. */
const uint8_t *elf_image_bytes(const struct elf_image *img, uint64_t va, uint64_t size);

#endif
