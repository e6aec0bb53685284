/*
 * load_bias.h — where an ELF file's load segments sit in a process: runtime address minus ELF virtual address.
 *
 * A mapping of a file is [start, end) at file offset pgoff with protection prot. The kernel maps whole pages,
 * so pgoff is a segment's p_offset rounded down to a page, and with linkers that pack segments into shared
 * pages (lld: a read-only segment and the text segment both start in page 0 of the file) several segments may
 * claim the same page. The segment a mapping belongs to is the one whose protection it has (PF_X for an
 * executable mapping); without a protection (old replay files), the one the mapping's range covers most.
 *
 * The one place that turns a mapping into a bias: the process manager, the replay reader and the APM
 * correlation library all call it. Pure function; no allocation.
 */
#ifndef HOSTPROF_BASE_LOAD_BIAS_H
#define HOSTPROF_BASE_LOAD_BIAS_H

#include <stdint.h>

/* A PT_LOAD program header, as much of it as a bias needs. flags: PF_R, PF_W, PF_X. */
struct load_segment {
	uint64_t vaddr, memsz, offset, filesz;
	uint32_t flags;
};

/* prot of a mapping whose protection is not known. A PROT_NONE mapping (0) tells nothing either. */
#define LOAD_PROT_UNKNOWN (-1)

/*
 * The bias of the mapping [start, end) at file offset pgoff with protection prot (PROT_READ/WRITE/EXEC bits,
 * 0 or LOAD_PROT_UNKNOWN). Returns 0 and *bias, or -ENOENT when pgoff is in no segment.
 */
int load_bias(const struct load_segment *segs, unsigned nsegs, uint64_t start, uint64_t end, uint64_t pgoff,
	      int prot, uint64_t *bias);

/*
 * Whether bias is one the mapping at start with file offset pgoff can have (some segment claims its page and
 * places it there). A file has one bias per process: when several segments claim a non-executable mapping's
 * page, the bias of the file's executable mapping decides (the process manager asks this first).
 */
int load_bias_fits(const struct load_segment *segs, unsigned nsegs, uint64_t start, uint64_t pgoff, uint64_t bias);

#endif
