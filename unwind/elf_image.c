/*
 * elf_image.c — an ELF file's PT_LOAD bytes by virtual address. See elf_image.h.
 */
#include "unwind/elf_image.h"

#include <string.h>

/* Record one PT_LOAD: the extent it spans in memory, and its file bytes if the image holds any. */
static void ei_add_load(struct elf_image *img, const GElf_Phdr *ph)
{
	if (!img->have_loads) {
		img->have_loads = true;
		img->first_vaddr = ph->p_vaddr;
		img->first_align = ph->p_align;
		img->lo = UINT64_MAX;
	}
	if (ph->p_vaddr + ph->p_memsz < ph->p_vaddr)
		return;		/* wraps: no extent, no bytes */
	if (ph->p_vaddr < img->lo)
		img->lo = ph->p_vaddr;
	if (ph->p_vaddr + ph->p_memsz > img->hi)
		img->hi = ph->p_vaddr + ph->p_memsz;
	if (img->nloads == ELF_IMAGE_MAX_LOADS || ph->p_offset >= img->image_size)
		return;
	uint64_t left = img->image_size - ph->p_offset;
	uint64_t size = ph->p_filesz < left ? ph->p_filesz : left;
	if (size)
		img->loads[img->nloads++] = (struct elf_image_load){ ph->p_vaddr, size, ph->p_offset };
}

void elf_image_init(struct elf_image *img, Elf *elf)
{
	size_t n;
	memset(img, 0, sizeof(*img));
	img->image = (const uint8_t *)elf_rawfile(elf, &img->image_size);
	if (!img->image)
		img->image_size = 0;
	if (elf_getphdrnum(elf, &n) != 0)
		n = 0;
	for (size_t i = 0; i < n && i < ELF_IMAGE_MAX_HEADERS; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			ei_add_load(img, &ph);
	}
	if (img->lo > img->hi)
		img->lo = img->hi = 0;	/* every load wrapped */
}

const struct elf_image_load *elf_image_load_at(const struct elf_image *img, uint64_t va)
{
	for (unsigned i = 0; i < img->nloads; i++)
		if (va >= img->loads[i].vaddr && va - img->loads[i].vaddr < img->loads[i].size)
			return &img->loads[i];
	return NULL;
}

const uint8_t *elf_image_bytes(const struct elf_image *img, uint64_t va, uint64_t size)
{
	for (unsigned i = 0; i < img->nloads; i++) {
		const struct elf_image_load *l = &img->loads[i];
		if (va >= l->vaddr && va - l->vaddr <= l->size && size <= l->size - (va - l->vaddr))
			return img->image + l->offset + (va - l->vaddr);
	}
	return NULL;
}
