/*
 * load_bias.c — the load bias of a file mapping. See load_bias.h for the contract.
 */
#include "src/base/load_bias.h"

#include <elf.h>
#include <errno.h>
#include <sys/mman.h>

#define PAGE_MASK_4K (~(uint64_t)0xfff)

/* Bytes of the segment's virtual range that the mapping covers, if its start is placed by this segment. */
static uint64_t covered(const struct load_segment *s, uint64_t start, uint64_t end, uint64_t bias)
{
	uint64_t lo = start - bias, hi = end - bias;
	uint64_t seg_lo = s->vaddr, seg_hi = s->vaddr + s->memsz;
	if (lo < seg_lo)
		lo = seg_lo;
	if (hi > seg_hi)
		hi = seg_hi;
	return hi > lo ? hi - lo : 0;
}

static int claims_page(const struct load_segment *s, uint64_t pgoff)
{
	return pgoff >= (s->offset & PAGE_MASK_4K) && pgoff < s->offset + (s->filesz ? s->filesz : 1);
}

static int score(const struct load_segment *s, int prot, uint64_t start, uint64_t end, uint64_t bias,
		 uint64_t *cover)
{
	*cover = covered(s, start, end, bias);
	if (prot == LOAD_PROT_UNKNOWN || prot == 0)
		return 0;
	/* Execute permission must agree. Write permission is a weaker hint: RELRO pages of a writable segment are
	 * made read-only once relocated. */
	int exec_match = !!(prot & PROT_EXEC) == !!(s->flags & PF_X);
	int write_match = !!(prot & PROT_WRITE) == !!(s->flags & PF_W);
	return 2 * exec_match + write_match;
}

int load_bias(const struct load_segment *segs, unsigned nsegs, uint64_t start, uint64_t end, uint64_t pgoff,
	      int prot, uint64_t *bias)
{
	int best_score = -1;
	uint64_t best_cover = 0;
	for (unsigned i = 0; i < nsegs; i++) {
		const struct load_segment *s = &segs[i];
		uint64_t cover;
		if (!claims_page(s, pgoff))
			continue;
		uint64_t b = start - pgoff + s->offset - s->vaddr;
		int sc = score(s, prot, start, end, b, &cover);
		if (sc > best_score || (sc == best_score && cover > best_cover)) {
			best_score = sc;
			best_cover = cover;
			*bias = b;
		}
	}
	return best_score < 0 ? -ENOENT : 0;
}

int load_bias_fits(const struct load_segment *segs, unsigned nsegs, uint64_t start, uint64_t pgoff, uint64_t bias)
{
	for (unsigned i = 0; i < nsegs; i++) {
		if (claims_page(&segs[i], pgoff) && start - pgoff + segs[i].offset - segs[i].vaddr == bias)
			return 1;
	}
	return 0;
}
