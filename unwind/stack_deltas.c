/*
 * stack_deltas.c — compile an ELF file's CFI into a sorted (address, rule) table. See stack_deltas.h.
 *
 * The build runs in four steps:
 *   1. take Go code's rows from .gopclntab (gopclntab.h); enumerate the FDEs of .eh_frame (found through
 *      .eh_frame_hdr when there are no section headers) and of .debug_frame with dwarf_next_cfi, decoding only
 *      their address ranges (byte_reader.h), and leave Go's range to its own rows;
 *   2. for each FDE, walk its rows with libdw: dwarf_cfi_addrframe() at an address, dwarf_frame_info() for the
 *      [start, end) over which that row holds, then jump to end; each row becomes a rule;
 *   3. cover executable code that has no FDE with the prologue analysis (prologue.h), or the plain
 *      frame-pointer rule when that is not possible;
 *   4. sort, let each address keep its best source, merge equal neighbours and pack the result into
 *      struct-of-arrays form: u32 address offsets + u16 rule indices (6 bytes a row) into a small table of
 *      distinct rules, with a 64 KiB page index in front of the binary search.
 */
#include "unwind/stack_deltas.h"

#include "unwind/byte_reader.h"
#include "unwind/gopclntab.h"
#include "unwind/prologue.h"
#include "src/base/bsearch.h"
#include "src/base/clock.h"
#include "src/base/hindex.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* Rule indices are u16; index 0 is INVALID, 1 is FALLBACK (what a rule becomes once the table is full). */
#define SD_MAX_RULES 65536u
#define SD_RULE_INVALID 0u
#define SD_RULE_FALLBACK 1u
/* Each dwarf_cfi_addrframe call re-runs its FDE's program from the start, so a hostile FDE with many rows costs
 * rows x length. Bound the bytes of CFI program interpreted per FDE and, linearly in the CFI's size, per file.
 * Real files stay far below: libc ~2 M in all (0.5 per CFI byte), libLLVM ~80 M (~20 per CFI byte). */
#define SD_WORK_PER_FDE (1ull << 24)
#define SD_WORK_PER_CFI_BYTE 256u
#define SD_WORK_MAX (1ull << 31)	/* a few seconds of libdw at most */
/* Gaps between FDEs shorter than this are alignment padding: the previous rule simply extends over them. */
#define SD_MIN_GAP 16
/* Bytes of code without CFI that the prologue analysis may disassemble per file (each byte twice), about half
 * a second of capstone. Beyond that (e.g. Go binaries, which have no CFI but keep frame pointers) code gets the
 * frame-pointer rule. */
#define SD_ANALYSIS_MAX_BYTES (4u << 20)
/* At most this many rows; past it the rest of the file is left out (never reached by real files). */
#define SD_MAX_ROWS (1u << 27)
#define SD_PAGE_BITS 16

/* Which source a build-time row came from; at one address the higher priority wins. */
enum sd_prio { SD_PRIO_END, SD_PRIO_ANALYSIS, SD_PRIO_CFI, SD_PRIO_GO, SD_PRIO_SIGNAL };

/* x86_64 DWARF register numbers. */
enum { SD_DW_RBP = 6, SD_DW_RSP = 7, SD_DW_RA = 16 };

struct stack_deltas {
	uint64_t base;			/* ELF address of the first row */
	uint32_t nrows, npages, nrules;
	const uint32_t *addr;		/* nrows row starts, as offsets from base, ascending */
	const uint16_t *rule;		/* nrows indices into rules */
	const uint32_t *page;		/* npages + 1: first row whose addr >= page << SD_PAGE_BITS */
	const struct stack_delta_rule *rules;
	size_t bytes;
	void *map;			/* a table read in place from a file (stack_deltas_adopt): the mapping
					 * it owns, unmapped by stack_deltas_free; NULL for a built table (one
					 * allocation) */
	size_t map_len;
	size_t own_len;			/* a built table in a mapping of its own (sd_alloc()): its length;
					 * 0: malloc'd */
};

_Static_assert(sizeof(struct stack_delta_rule) == 12, "rules are stored packed, 12 bytes each");
_Static_assert(sizeof(struct stack_deltas) % 8 == 0, "the arrays follow the table's struct, 8-aligned");

struct sd_row {
	uint64_t addr;
	uint32_t seq;		/* insertion order, to keep the sort stable */
	uint16_t rule;
	uint8_t prio;		/* enum sd_prio */
};

/* One FDE's address range and where it came from. */
struct sd_range {
	uint64_t start, end;
	uint32_t src;		/* index into builder.src */
	uint32_t prog_len;	/* FDE size: what one dwarf_cfi_addrframe call may interpret */
};

/* A CFI section: raw bytes for dwarf_next_cfi and a libdw handle to evaluate rows with. */
struct sd_source {
	Elf_Data data;
	uint64_t va;		/* ELF address of data.d_buf[0], for pc-relative pointers */
	bool eh;		/* .eh_frame format (else .debug_frame) */
	Dwarf_CFI *cfi;
	Dwarf *dw;		/* owner of cfi for .debug_frame */
};

/* Executable code: an address range and its bytes (NULL when the file holds none). */
struct sd_code {
	uint64_t start, end;
	const uint8_t *bytes;
};

/* A decoded CIE, as much as FDE decoding needs. */
struct sd_cie {
	uint64_t off;
	uint8_t fde_enc;
	bool valid, used;
};

#define SD_CIE_CACHE 64

struct sd_builder {
	Elf *elf;
	GElf_Ehdr ehdr;
	const unsigned char *ident;
	int err;			/* first fatal error (-ENOMEM) */

	struct stack_delta_rule *rules;
	uint32_t nrules, rules_cap;
	struct hindex rule_index;	/* sd_rule_hash -> index into rules */

	struct sd_row *rows;
	size_t nrows, rows_cap;

	struct sd_source src[2];
	unsigned nsrc;
	struct sd_range *ranges;
	size_t nranges, ranges_cap;
	struct sd_cie cies[SD_CIE_CACHE];

	struct sd_code *code;
	size_t ncode;
	uint64_t *funcs;		/* sorted function symbol addresses, to split code without CFI */
	size_t nfuncs;
	uint64_t go_lo, go_hi;		/* Go code, described by .gopclntab (have_go) */
	bool have_go;

	uint64_t work, work_max;
	size_t analysed_bytes;
	struct prologue *prologue;	/* the analysis of code without CFI (unwind/prologue.h), opened on first use */
	int prologue_state;		/* 0 not opened, 1 open, -1 unavailable */
	bool analysing;			/* the current gap is being disassembled */

	struct stack_deltas_stats *st;
};

/* qsort, minus the undefined behaviour of passing it a NULL array. */
static void sd_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

/* ---- rules ---------------------------------------------------------------------------------------------- */

static uint64_t sd_rule_hash(const struct stack_delta_rule *r)
{
	uint64_t h = (uint64_t)r->kind | (uint64_t)r->fp << 8 | (uint64_t)(uint16_t)r->fp_off << 16 |
		     (uint64_t)(uint32_t)r->cfa_off << 32;
	return hash_u64(h, (uint32_t)r->aux);
}

static bool sd_rule_eq(const struct stack_delta_rule *a, const struct stack_delta_rule *b)
{
	return a->kind == b->kind && a->fp == b->fp && a->fp_off == b->fp_off && a->cfa_off == b->cfa_off &&
	       a->aux == b->aux;
}

/* Whether rule index value of the builder ctx is the rule key (the rule index's equality). */
static bool sd_rule_is(const void *ctx, uint64_t value, const void *key)
{
	const struct sd_builder *b = ctx;
	return sd_rule_eq(&b->rules[value], key);
}

/* Index of r in the rule table, adding it if new. Once the table is full, new rules become FALLBACK. */
static uint16_t sd_intern(struct sd_builder *b, const struct stack_delta_rule *r)
{
	uint64_t hash = sd_rule_hash(r);
	uint32_t idx;
	if (hindex_find_index(&b->rule_index, hash, sd_rule_is, b, r, &idx))
		return (uint16_t)idx;
	if (b->nrules >= SD_MAX_RULES)
		return SD_RULE_FALLBACK;
	if (b->nrules == b->rules_cap) {
		uint32_t cap = b->rules_cap * 2;
		struct stack_delta_rule *n = realloc(b->rules, cap * sizeof(*n));
		if (!n) {
			b->err = -ENOMEM;
			return SD_RULE_FALLBACK;
		}
		b->rules = n;
		b->rules_cap = cap;
	}
	if (hindex_insert(&b->rule_index, hash, b->nrules) < 0) {
		b->err = -ENOMEM;
		return SD_RULE_FALLBACK;
	}
	b->rules[b->nrules++] = *r;
	return (uint16_t)(b->nrules - 1);
}

static int sd_rules_init(struct sd_builder *b)
{
	b->rules_cap = 64;
	b->rules = malloc(b->rules_cap * sizeof(*b->rules));
	if (!b->rules)
		return -ENOMEM;
	struct stack_delta_rule inv = stack_delta_rule_make(STACK_DELTA_INVALID);
	struct stack_delta_rule fb = stack_delta_rule_make(STACK_DELTA_FALLBACK);
	sd_intern(b, &inv);
	sd_intern(b, &fb);
	return b->err;
}

static void sd_add_row(struct sd_builder *b, uint64_t addr, uint16_t rule, enum sd_prio prio)
{
	if (b->err || b->nrows >= SD_MAX_ROWS)
		return;
	if (b->nrows == b->rows_cap) {
		size_t cap = b->rows_cap ? b->rows_cap * 2 : 4096;
		struct sd_row *n = realloc(b->rows, cap * sizeof(*n));
		if (!n) {
			b->err = -ENOMEM;
			return;
		}
		b->rows = n;
		b->rows_cap = cap;
	}
	b->rows[b->nrows] = (struct sd_row){ .addr = addr, .seq = (uint32_t)b->nrows, .rule = rule,
					     .prio = (uint8_t)prio };
	b->nrows++;
}

static void sd_add_rule_row(struct sd_builder *b, uint64_t addr, const struct stack_delta_rule *r,
			    enum sd_prio prio)
{
	sd_add_row(b, addr, sd_intern(b, r), prio);
}

/* ---- ELF helpers ---------------------------------------------------------------------------------------- */

static const char *sd_section_name(struct sd_builder *b, Elf_Scn *scn, GElf_Shdr *sh)
{
	size_t shstrndx;
	if (!gelf_getshdr(scn, sh) || elf_getshdrstrndx(b->elf, &shstrndx) != 0)
		return NULL;
	return elf_strptr(b->elf, shstrndx, sh->sh_name);
}

static Elf_Scn *sd_find_section(struct sd_builder *b, const char *name, GElf_Shdr *sh)
{
	for (Elf_Scn *scn = elf_nextscn(b->elf, NULL); scn; scn = elf_nextscn(b->elf, scn)) {
		const char *n = sd_section_name(b, scn, sh);
		if (n && strcmp(n, name) == 0)
			return scn;
	}
	return NULL;
}

/*
 * Bytes of the file backing ELF address va through a PT_LOAD, or NULL; *avail is how many follow. Read as a raw
 * chunk, not through elf_rawfile(): on a handle that reads (ELF_C_READ, files others may write) that would copy
 * the whole file into memory, and libelf then loses track of section data read before. A chunk lives as long as
 * the handle (the worker's ends with the build); on a mapped handle it points into the mapping.
 */
static const uint8_t *sd_segment_bytes(struct sd_builder *b, uint64_t va, size_t *avail)
{
	size_t n;
	if (elf_getphdrnum(b->elf, &n) != 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(b->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (va < ph.p_vaddr || va - ph.p_vaddr >= ph.p_filesz)
			continue;
		uint64_t off = ph.p_offset + (va - ph.p_vaddr), len = ph.p_filesz - (va - ph.p_vaddr);
		/* libelf refuses a chunk past the end of the file (a truncated one: no bytes, less analysis) */
		Elf_Data *d = off < ph.p_offset || off > INT64_MAX || len > SIZE_MAX ? NULL :
			      elf_getdata_rawchunk(b->elf, (int64_t)off, (size_t)len, ELF_T_BYTE);
		if (!d || !d->d_buf)
			return NULL;
		*avail = d->d_size;
		return d->d_buf;
	}
	return NULL;
}

/* The section's own bytes (never converted: CFI and code are byte streams). */
static bool sd_section_data(Elf_Scn *scn, const GElf_Shdr *sh, Elf_Data *out)
{
	if (sh->sh_type == SHT_NOBITS || (sh->sh_flags & SHF_COMPRESSED))
		return false;
	Elf_Data *d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size == 0)
		return false;
	*out = *d;
	return true;
}

/* ---- step 1: CFI sections and FDE ranges ---------------------------------------------------------------- */

/* .eh_frame located through PT_GNU_EH_FRAME, for files without section headers. */
static bool sd_eh_frame_from_phdr(struct sd_builder *b, struct sd_source *s)
{
	size_t n, avail;
	if (elf_getphdrnum(b->elf, &n) != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(b->elf, (int)i, &ph) || ph.p_type != PT_GNU_EH_FRAME)
			continue;
		const uint8_t *hdr = sd_segment_bytes(b, ph.p_vaddr, &avail);
		struct byte_reader r;
		uint8_t version, ptr_enc;
		uint64_t va;
		if (!hdr)
			return false;
		/* version 1, eh_frame_ptr's encoding, two more encodings, then eh_frame_ptr */
		byte_reader_init(&r, hdr, avail);
		r.va = ph.p_vaddr;
		if (!byte_reader_u8(&r, &version) || version != 1 || !byte_reader_u8(&r, &ptr_enc) ||
		    !byte_reader_skip(&r, 2) || !byte_reader_eh_pointer(&r, ptr_enc, ph.p_vaddr, &va))
			return false;
		const uint8_t *eh = sd_segment_bytes(b, va, &avail);
		if (!eh)
			return false;
		s->data.d_buf = (void *)eh;
		s->data.d_size = avail;
		s->data.d_type = ELF_T_BYTE;
		s->va = va;
		return true;
	}
	return false;
}

static void sd_open_eh_frame(struct sd_builder *b)
{
	struct sd_source *s = &b->src[b->nsrc];
	memset(s, 0, sizeof(*s));
	s->eh = true;
	GElf_Shdr sh;
	Elf_Scn *scn = sd_find_section(b, ".eh_frame", &sh);
	bool found = false;
	if (scn && (sh.sh_type == SHT_PROGBITS || sh.sh_type == SHT_X86_64_UNWIND) && sd_section_data(scn, &sh, &s->data)) {
		s->va = sh.sh_addr;
		found = true;
	} else if (!scn) {
		found = sd_eh_frame_from_phdr(b, s);
	}
	if (!found)
		return;
	s->cfi = dwarf_getcfi_elf(b->elf);
	if (s->cfi)
		b->nsrc++;
}

static void sd_open_debug_frame(struct sd_builder *b)
{
	struct sd_source *s = &b->src[b->nsrc];
	memset(s, 0, sizeof(*s));
	GElf_Shdr sh;
	if (!sd_find_section(b, ".debug_frame", &sh))
		return;
	/* libdw decompresses a compressed .debug_frame in place when it opens the file: open it first. */
	s->dw = dwarf_begin_elf(b->elf, DWARF_C_READ, NULL);
	Elf_Scn *scn = s->dw ? sd_find_section(b, ".debug_frame", &sh) : NULL;
	s->cfi = s->dw ? dwarf_getcfi(s->dw) : NULL;
	if (!scn || !s->cfi || !sd_section_data(scn, &sh, &s->data)) {
		if (s->dw)
			dwarf_end(s->dw);
		return;
	}
	s->va = 0;
	b->nsrc++;
}

static const struct sd_cie *sd_get_cie(struct sd_builder *b, const struct sd_source *s, uint64_t off)
{
	struct sd_cie *c = &b->cies[(off * 0x9e3779b97f4a7c15ull) >> 58];
	if (c->used && c->off == off)
		return c;
	Dwarf_CFI_Entry e;
	Dwarf_Off next;
	c->used = true;
	c->off = off;
	c->fde_enc = DW_EH_PE_absptr;
	c->valid = dwarf_next_cfi(b->ident, (Elf_Data *)&s->data, s->eh, off, &next, &e) == 0 &&
		   dwarf_cfi_cie_p(&e) &&
		   (!s->eh || byte_reader_cie_fde_encoding(e.cie.augmentation, e.cie.augmentation_data,
							   e.cie.augmentation_data_size, &c->fde_enc));
	return c;
}

static int sd_add_range(struct sd_builder *b, uint64_t start, uint64_t end, uint32_t src, size_t prog_len)
{
	if (b->nranges == b->ranges_cap) {
		size_t cap = b->ranges_cap ? b->ranges_cap * 2 : 1024;
		struct sd_range *n = realloc(b->ranges, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		b->ranges = n;
		b->ranges_cap = cap;
	}
	b->ranges[b->nranges++] = (struct sd_range){ start, end, src,
						     (uint32_t)(prog_len < UINT32_MAX ? prog_len : UINT32_MAX) };
	return 0;
}

/* Decode an FDE's [start, end); false when its header cannot be decoded or the range is empty. */
static bool sd_fde_range(struct sd_builder *b, const struct sd_source *s, const Dwarf_FDE *fde, uint64_t *start,
			 uint64_t *end)
{
	const struct sd_cie *cie = sd_get_cie(b, s, fde->CIE_pointer);
	if (!cie->valid)
		return false;
	struct byte_reader r;
	uint64_t len;
	uint8_t enc = s->eh ? cie->fde_enc : DW_EH_PE_udata8;
	byte_reader_init(&r, fde->start, (size_t)(fde->end - fde->start));
	r.va = s->va + (uint64_t)(fde->start - (const uint8_t *)s->data.d_buf);
	if (!byte_reader_eh_pointer(&r, enc, 0, start) || !byte_reader_eh_value(&r, enc, &len))
		return false;
	if (len == 0 || *start == 0 || *start + len < *start)
		return false;
	*end = *start + len;
	return true;
}

/* Walk every entry of one CFI section, recording the FDE ranges. */
static int sd_collect_fdes(struct sd_builder *b, uint32_t si)
{
	const struct sd_source *s = &b->src[si];
	memset(b->cies, 0, sizeof(b->cies));
	Dwarf_Off off = 0;
	while (off < s->data.d_size) {
		Dwarf_CFI_Entry e;
		Dwarf_Off next = (Dwarf_Off)-1;
		int r = dwarf_next_cfi(b->ident, (Elf_Data *)&s->data, s->eh, off, &next, &e);
		if (r > 0)
			break;
		if (next == (Dwarf_Off)-1 || next <= off)
			break;		/* cannot resynchronise: the rest of the section is lost */
		off = next;
		if (r < 0) {
			b->st->fdes_skipped++;
			continue;
		}
		if (dwarf_cfi_cie_p(&e))
			continue;
		uint64_t start, end;
		if (!sd_fde_range(b, s, &e.fde, &start, &end)) {
			b->st->fdes_skipped++;
			continue;
		}
		if (sd_add_range(b, start, end, si, (size_t)(e.fde.end - e.fde.start)) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int sd_range_cmp(const void *a, const void *b)
{
	const struct sd_range *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static bool sd_starts_at_or_past_end(const void *kept, size_t i, const void *r)
{
	return ((const struct sd_range *)kept)[i].start >= ((const struct sd_range *)r)->end;
}

/* Whether r overlaps one of kept[0..n), which is sorted and free of overlaps: the last one starting before r
 * ends is the only one that may. */
static bool sd_overlaps(const struct sd_range *kept, size_t n, const struct sd_range *r)
{
	size_t i = bsearch_first(kept, n, sd_starts_at_or_past_end, r);
	return i > 0 && kept[i - 1].end > r->start;
}

/*
 * Sort the ranges and drop overlaps. .eh_frame is what the program's own unwinder trusts, so .debug_frame only
 * fills what .eh_frame leaves uncovered; within one section the first FDE at an address wins.
 */
static int sd_resolve_overlaps(struct sd_builder *b)
{
	struct sd_range *kept = malloc((b->nranges ? b->nranges : 1) * sizeof(*kept));
	if (!kept)
		return -ENOMEM;
	sd_sort(b->ranges, b->nranges, sizeof(*b->ranges), sd_range_cmp);
	size_t neh = 0, n;
	for (size_t i = 0; i < b->nranges; i++) {
		const struct sd_range *r = &b->ranges[i];
		if (b->src[r->src].eh && !(neh && r->start < kept[neh - 1].end))
			kept[neh++] = *r;
	}
	n = neh;
	for (size_t i = 0; i < b->nranges; i++) {
		const struct sd_range *r = &b->ranges[i];
		if (!b->src[r->src].eh && !sd_overlaps(kept, neh, r) && !(n > neh && r->start < kept[n - 1].end))
			kept[n++] = *r;
	}
	sd_sort(kept, n, sizeof(*kept), sd_range_cmp);
	b->st->fdes_skipped += b->nranges - n;
	b->st->fdes_eh = neh;
	b->st->fdes_debug = n - neh;
	free(b->ranges);
	b->ranges = kept;
	b->nranges = b->ranges_cap = n;
	return 0;
}

/* ---- step 2: FDE rows through libdw --------------------------------------------------------------------- */

static bool sd_is_breg(const Dwarf_Op *op, unsigned *reg, int64_t *off)
{
	if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg31) {
		*reg = op->atom - DW_OP_breg0;
		*off = (int64_t)op->number;
		return true;
	}
	if (op->atom == DW_OP_bregx) {
		*reg = op->number > 0xffff ? 0xffff : (unsigned)op->number;
		*off = (int64_t)op->number2;
		return true;
	}
	return false;
}

static bool sd_fits_i32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* GCC/binutils' .plt CFA: rsp + N + ((rip & 15) >= K ? 8 : 0), as breg7 N; breg16 0; lit15; and; litK; ge;
 * lit3; shl; plus. Recognised by shape, as the OTel profiler does. */
static bool sd_match_plt(const Dwarf_Op *ops, size_t n, struct stack_delta_rule *r)
{
	static const uint8_t shape[9] = { DW_OP_breg7, DW_OP_breg16, DW_OP_lit15, DW_OP_and, 0, DW_OP_ge,
					  DW_OP_lit3, DW_OP_shl, DW_OP_plus };
	if (n != 9)
		return false;
	for (size_t i = 0; i < 9; i++)
		if (i != 4 && ops[i].atom != shape[i])
			return false;
	if (ops[1].number != 0 || ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit15 ||
	    !sd_fits_i32((int64_t)ops[0].number))
		return false;
	*r = stack_delta_rule_make(STACK_DELTA_PLT);
	r->cfa_off = (int32_t)(int64_t)ops[0].number;
	r->aux = ops[4].atom - DW_OP_lit0;
	return true;
}

/* breg(rsp|rbp) N; deref [; plus_uconst K]: the CFA saved in the frame (stack realignment). */
static bool sd_match_deref(const Dwarf_Op *ops, size_t n, struct stack_delta_rule *r)
{
	unsigned reg;
	int64_t off;
	if ((n != 2 && n != 3) || !sd_is_breg(&ops[0], &reg, &off) || ops[1].atom != DW_OP_deref)
		return false;
	if ((reg != SD_DW_RSP && reg != SD_DW_RBP) || !sd_fits_i32(off))
		return false;
	int64_t add = 0;
	if (n == 3) {
		if (ops[2].atom != DW_OP_plus_uconst || ops[2].number > 4096)
			return false;
		add = (int64_t)ops[2].number;
	}
	*r = stack_delta_rule_make(reg == SD_DW_RSP ? STACK_DELTA_CFA_SP_DEREF : STACK_DELTA_CFA_FP_DEREF);
	r->cfa_off = (int32_t)off;
	r->aux = (int32_t)add;
	return true;
}

/* The CFA part of a rule; false when it is not expressible. */
static bool sd_cfa_rule(Dwarf_Frame *f, struct stack_delta_rule *r)
{
	Dwarf_Op *ops;
	size_t n;
	unsigned reg;
	int64_t off;
	if (dwarf_frame_cfa(f, &ops, &n) != 0 || n == 0)
		return false;
	if (n == 1 && sd_is_breg(&ops[0], &reg, &off)) {
		if ((reg != SD_DW_RSP && reg != SD_DW_RBP) || !sd_fits_i32(off))
			return false;
		*r = stack_delta_rule_make(reg == SD_DW_RSP ? STACK_DELTA_CFA_SP : STACK_DELTA_CFA_FP);
		r->cfa_off = (int32_t)off;
		return true;
	}
	return sd_match_plt(ops, n, r) || sd_match_deref(ops, n, r);
}

/* Whether a register rule is "saved at CFA + off"; true with *off set. */
static bool sd_reg_at_cfa(const Dwarf_Op *ops, size_t n, int64_t *off)
{
	if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa) {
		*off = 0;
		return true;
	}
	if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	return false;
}

enum sd_ra { SD_RA_AT_CFA_M8, SD_RA_UNDEFINED, SD_RA_OTHER };

static enum sd_ra sd_ra_rule(Dwarf_Frame *f)
{
	Dwarf_Op mem[3], *ops;
	size_t n;
	int64_t off;
	if (dwarf_frame_register(f, SD_DW_RA, mem, &ops, &n) != 0)
		return SD_RA_OTHER;
	if (n == 0)
		return ops ? SD_RA_UNDEFINED : SD_RA_OTHER;
	return sd_reg_at_cfa(ops, n, &off) && off == -8 ? SD_RA_AT_CFA_M8 : SD_RA_OTHER;
}

/* The FP part of a rule; false when it is not expressible. */
static bool sd_fp_rule_of(Dwarf_Frame *f, struct stack_delta_rule *r)
{
	Dwarf_Op mem[3], *ops;
	size_t n;
	int64_t off;
	unsigned reg;
	if (dwarf_frame_register(f, SD_DW_RBP, mem, &ops, &n) != 0)
		return false;
	r->fp = STACK_DELTA_FP_SAME;
	if (n == 0)
		return true;	/* same value, or undefined: keep what we have */
	if (sd_reg_at_cfa(ops, n, &off)) {
		if (off >= 0 || off < INT16_MIN)
			return false;
		r->fp = STACK_DELTA_FP_AT_CFA;
		r->fp_off = (int16_t)off;
		return true;
	}
	/* DW_CFA_expression rbp, (breg6 k): libdw puts the CFA on the stack first, which the breg ignores. */
	const Dwarf_Op *e = n == 2 && ops[0].atom == DW_OP_call_frame_cfa ? &ops[1] : n == 1 ? &ops[0] : NULL;
	if (e && sd_is_breg(e, &reg, &off) && reg == SD_DW_RBP && off >= INT16_MIN && off <= INT16_MAX) {
		r->fp = STACK_DELTA_FP_AT_FP;
		r->fp_off = (int16_t)off;
		return true;
	}
	return false;
}

/* Translate one CFI row into a rule. */
static struct stack_delta_rule sd_rule_of_frame(Dwarf_Frame *f, bool signal)
{
	struct stack_delta_rule r;
	if (signal)
		return stack_delta_rule_make(STACK_DELTA_SIGNAL);
	enum sd_ra ra = sd_ra_rule(f);
	if (ra == SD_RA_UNDEFINED)
		return stack_delta_rule_make(STACK_DELTA_STOP);
	if (ra != SD_RA_AT_CFA_M8 || !sd_cfa_rule(f, &r) || !sd_fp_rule_of(f, &r))
		return stack_delta_rule_make(STACK_DELTA_FALLBACK);
	/* A return address below the stack pointer was already popped (musl's __clone child): outermost. */
	if (r.kind == STACK_DELTA_CFA_SP && r.cfa_off < 8)
		return stack_delta_rule_make(STACK_DELTA_STOP);
	return r;
}

/* Rows of one FDE range. prev_end is where the previous range ended, to place a signal row before it. */
static void sd_eval_range(struct sd_builder *b, const struct sd_range *rg, uint64_t prev_end)
{
	Dwarf_CFI *cfi = b->src[rg->src].cfi;
	uint64_t cost = (uint64_t)rg->prog_len + 16, fde_work = 0;
	for (uint64_t addr = rg->start; addr < rg->end && !b->err;) {
		Dwarf_Frame *f = NULL;
		fde_work += cost;
		b->work += cost;
		if (fde_work > SD_WORK_PER_FDE || b->work > b->work_max ||
		    dwarf_cfi_addrframe(cfi, addr, &f) != 0) {
			sd_add_row(b, addr, SD_RULE_FALLBACK, SD_PRIO_CFI);
			break;
		}
		Dwarf_Addr s = addr, e = rg->end;
		bool signal = false;
		dwarf_frame_info(f, &s, &e, &signal);
		struct stack_delta_rule r = sd_rule_of_frame(f, signal);
		free(f);
		/* Return addresses are looked up at address - 1: a trampoline whose FDE starts exactly at its
		 * first byte (not at a nop before it, as glibc's does) must also own the byte before. */
		if (r.kind == STACK_DELTA_SIGNAL && addr == rg->start && addr > prev_end)
			sd_add_rule_row(b, addr - 1, &r, SD_PRIO_SIGNAL);
		sd_add_rule_row(b, addr, &r, SD_PRIO_CFI);
		addr = e > addr && e <= rg->end ? e : rg->end;
	}
	sd_add_row(b, rg->end, SD_RULE_INVALID, SD_PRIO_END);
}

/* ---- step 3: code without CFI --------------------------------------------------------------------------- */

static int sd_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int sd_code_cmp(const void *a, const void *b)
{
	const struct sd_code *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static int sd_push_code(struct sd_builder *b, uint64_t start, uint64_t size, const uint8_t *bytes, size_t *cap)
{
	if (size == 0 || start + size < start)
		return 0;
	if (b->ncode == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		struct sd_code *n = realloc(b->code, *cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		b->code = n;
	}
	b->code[b->ncode++] = (struct sd_code){ start, start + size, bytes };
	return 0;
}

/* Executable sections, or executable PT_LOADs when the file has no section headers. */
static int sd_collect_code(struct sd_builder *b)
{
	size_t cap = 0, nscn = 0;
	for (Elf_Scn *scn = elf_nextscn(b->elf, NULL); scn; scn = elf_nextscn(b->elf, scn)) {
		GElf_Shdr sh;
		Elf_Data d;
		nscn++;
		if (!gelf_getshdr(scn, &sh) || (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR))
			continue;
		bool have = sh.sh_type == SHT_PROGBITS && sd_section_data(scn, &sh, &d);
		uint64_t size = have && d.d_size < sh.sh_size ? d.d_size : sh.sh_size;
		if (sd_push_code(b, sh.sh_addr, size, have ? d.d_buf : NULL, &cap) < 0)
			return -ENOMEM;
	}
	size_t n;
	if (nscn == 0 && elf_getphdrnum(b->elf, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			size_t avail = 0;
			if (!gelf_getphdr(b->elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
				continue;
			const uint8_t *bytes = sd_segment_bytes(b, ph.p_vaddr, &avail);
			if (sd_push_code(b, ph.p_vaddr, bytes ? avail : 0, bytes, &cap) < 0)
				return -ENOMEM;
		}
	}
	sd_sort(b->code, b->ncode, sizeof(*b->code), sd_code_cmp);
	return 0;
}

static int sd_add_func(struct sd_builder *b, uint64_t addr, size_t *cap)
{
	if (b->nfuncs == *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		uint64_t *f = realloc(b->funcs, *cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		b->funcs = f;
	}
	b->funcs[b->nfuncs++] = addr;
	return 0;
}

static int sd_collect_symtab(struct sd_builder *b, Elf_Scn *scn, const GElf_Shdr *sh, size_t *cap)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || sh->sh_entsize != sizeof(Elf64_Sym))
		return 0;
	size_t n = d->d_size / sizeof(Elf64_Sym);
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
			continue;
		if (sd_add_func(b, sym.st_value, cap) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Function start addresses from .symtab and .dynsym, and the file's entry point (a stripped program has no
 * symbol there, and its entry, the outermost frame, is no call's target): where code without CFI is split. */
static int sd_collect_funcs(struct sd_builder *b)
{
	size_t cap = 0;
	if (b->ehdr.e_entry && sd_add_func(b, b->ehdr.e_entry, &cap) < 0)
		return -ENOMEM;
	for (Elf_Scn *scn = elf_nextscn(b->elf, NULL); scn; scn = elf_nextscn(b->elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		if (sd_collect_symtab(b, scn, &sh, &cap) < 0)
			return -ENOMEM;
	}
	sd_sort(b->funcs, b->nfuncs, sizeof(*b->funcs), sd_u64_cmp);
	return 0;
}

static bool sd_u64_above(const void *a, size_t i, const void *key)
{
	return ((const uint64_t *)a)[i] > *(const uint64_t *)key;
}

/* First address of sorted a[0..n) strictly inside (after, end), or end. */
static uint64_t sd_next_in(const uint64_t *a, size_t n, uint64_t after, uint64_t end)
{
	size_t i = bsearch_first(a, n, sd_u64_above, &after);
	return i < n && a[i] < end ? a[i] : end;
}

/* The prologue analysis, opened on first use; false when capstone cannot be had (code gets the FP rule). */
static bool sd_open_prologue(struct sd_builder *b)
{
	if (b->prologue_state == 0)
		b->prologue_state = prologue_new(&b->prologue) == 0 ? 1 : -1;
	return b->prologue_state == 1;
}

/* Tracks the emitted rows of one analysed range so equal neighbours are not emitted twice. */
struct sd_emitter {
	struct sd_builder *b;
	int last;		/* last rule index emitted, -1 before the first */
};

/* An analysed row (a prologue_rule_fn, ctx the struct sd_emitter). */
static void sd_emit(void *ctx, uint64_t addr, const struct stack_delta_rule *r)
{
	struct sd_emitter *em = ctx;
	uint16_t idx = sd_intern(em->b, r);
	if ((int)idx == em->last)
		return;
	sd_add_row(em->b, addr, idx, SD_PRIO_ANALYSIS);
	em->last = idx;
}

bool stack_delta_is_sigreturn(const uint8_t *p, size_t avail)
{
	static const uint8_t tramp[STACK_DELTA_SIGRETURN_LEN] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	return avail >= sizeof(tramp) && memcmp(p, tramp, sizeof(tramp)) == 0;
}

/* Rules for one function without CFI, or the part of a gap up to the next known function start. */
static void sd_analyse_function(struct sd_builder *b, const struct sd_code *c, uint64_t gap_start, uint64_t start,
				uint64_t end)
{
	struct sd_emitter em = { b, -1 };
	const uint8_t *code = c->bytes ? c->bytes + (start - c->start) : NULL;
	/* Where the kernel starts a file (a program's _start, or the dynamic loader's, which runs first in every
	 * dynamic program and has no CFI in glibc) nothing called: the outermost frame. */
	if (b->ehdr.e_entry && start == b->ehdr.e_entry) {
		struct stack_delta_rule stop = stack_delta_rule_make(STACK_DELTA_STOP);
		sd_emit(&em, start, &stop);
		return;
	}
	if (code && stack_delta_is_sigreturn(code, (size_t)(end - start))) {
		struct stack_delta_rule sig = stack_delta_rule_make(STACK_DELTA_SIGNAL);
		sd_emit(&em, start > gap_start ? start - 1 : start, &sig);
		start += STACK_DELTA_SIGRETURN_LEN;
		code += STACK_DELTA_SIGRETURN_LEN;
	}
	if (start >= end)
		return;
	if (code && b->analysing)
		prologue_sweep(b->prologue, code, start, end, sd_emit, &em);
	else {
		/* The frame-pointer convention: a guess. */
		struct stack_delta_rule fp = stack_delta_rule_rbp_frame(STACK_DELTA_GUESSED);
		sd_emit(&em, start, &fp);
	}
}

/*
 * Code in [start, end) has no CFI. Split it into functions at symbols and direct call targets and analyse
 * each, or give it the frame-pointer rule when it cannot be disassembled (no bytes, no capstone, budget spent).
 */
static void sd_analyse_gap(struct sd_builder *b, const struct sd_code *c, uint64_t start, uint64_t end)
{
	const uint8_t *code = c->bytes ? c->bytes + (start - c->start) : NULL;
	const uint64_t *targets = NULL;
	size_t ntargets = 0;
	b->analysing = code && b->analysed_bytes + 2 * (end - start) <= SD_ANALYSIS_MAX_BYTES && sd_open_prologue(b);
	if (b->analysing) {
		b->analysed_bytes += 2 * (size_t)(end - start);
		b->st->analysed_ranges++;
		if (prologue_call_targets(b->prologue, code, start, end, &targets, &ntargets) < 0) {
			b->err = -ENOMEM;
			return;
		}
	} else {
		b->st->fp_ranges++;
	}
	for (uint64_t s = start; s < end && !b->err;) {
		uint64_t e = sd_next_in(b->funcs, b->nfuncs, s, end);
		e = sd_next_in(targets, ntargets, s, e);
		sd_analyse_function(b, c, start, s, e);
		s = e;
	}
	sd_add_row(b, end, SD_RULE_INVALID, SD_PRIO_END);
}

/*
 * Cover each code range's parts that no FDE covers. ranges[] is sorted and free of overlaps. Short gaps
 * between two FDEs are alignment padding that the previous rule may cover (see sd_normalise).
 */
static void sd_cover_gaps(struct sd_builder *b)
{
	size_t ri = 0;
	for (size_t ci = 0; ci < b->ncode && !b->err; ci++) {
		const struct sd_code *c = &b->code[ci];
		uint64_t pos = c->start;
		while (ri < b->nranges && b->ranges[ri].end <= pos)
			ri++;
		for (size_t j = ri; j < b->nranges && b->ranges[j].start < c->end && !b->err; j++) {
			const struct sd_range *r = &b->ranges[j];
			if (r->start > pos && (pos == c->start || r->start - pos >= SD_MIN_GAP))
				sd_analyse_gap(b, c, pos, r->start);
			if (r->end > pos)
				pos = r->end;
		}
		if (pos < c->end)
			sd_analyse_gap(b, c, pos, c->end);
	}
}

/* ---- step 4: the final table ---------------------------------------------------------------------------- */

static int sd_row_cmp(const void *a, const void *b)
{
	const struct sd_row *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->prio != y->prio)
		return x->prio < y->prio ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * The rows sorted by sd_row_cmp, a total order (seq is unique), so the result is the one qsort gives. The rows
 * of the FDEs come in address order and only those of the code without CFI (step 3) after them: qsort of the
 * whole was ~40 % of a build of libc's table. The sorted prefix stays; the rest is sorted and merged into it
 * from the back.
 */
static void sd_sort_rows(struct sd_row *rows, size_t n)
{
	size_t p = 1;
	while (p < n && sd_row_cmp(&rows[p - 1], &rows[p]) < 0)
		p++;
	if (p >= n)
		return;
	struct sd_row *tail = malloc((n - p) * sizeof(*tail));
	if (!tail) {
		sd_sort(rows, n, sizeof(*rows), sd_row_cmp);
		return;
	}
	sd_sort(rows + p, n - p, sizeof(*rows), sd_row_cmp);
	memcpy(tail, rows + p, (n - p) * sizeof(*tail));
	for (size_t i = p, j = n - p, k = n; j > 0;)
		rows[--k] = i > 0 && sd_row_cmp(&rows[i - 1], &tail[j - 1]) > 0 ? rows[--i] : tail[--j];
	free(tail);
}

/*
 * Sort; at each address keep the best row; drop end markers that a row follows within SD_MIN_GAP (padding);
 * merge neighbours with equal rules. Works in place; returns the new count.
 */
static size_t sd_normalise(struct sd_builder *b)
{
	sd_sort_rows(b->rows, b->nrows);
	size_t n = 0;
	for (size_t i = 0; i < b->nrows; i++) {
		if (i + 1 < b->nrows && b->rows[i + 1].addr == b->rows[i].addr)
			continue;	/* a better row follows at the same address */
		if (b->rows[i].prio == SD_PRIO_END && i + 1 < b->nrows && b->rows[i + 1].addr - b->rows[i].addr < SD_MIN_GAP)
			continue;
		if (n && b->rows[n - 1].rule == b->rows[i].rule)
			continue;
		if (n == 0 && b->rows[i].rule == SD_RULE_INVALID)
			continue;
		b->rows[n++] = b->rows[i];
	}
	return n;
}

void stack_deltas_count(const struct stack_deltas *t, struct stack_deltas_stats *st)
{
	st->rows = t->nrows;
	st->bytes = t->bytes;
	st->rules = t->nrules;
	st->fallback_rows = st->plt_rows = st->signal_rows = st->stop_rows = 0;
	for (uint32_t i = 0; i < t->nrows; i++) {
		switch (t->rules[t->rule[i]].kind) {
		case STACK_DELTA_FALLBACK: st->fallback_rows++; break;
		case STACK_DELTA_PLT: st->plt_rows++; break;
		case STACK_DELTA_SIGNAL: st->signal_rows++; break;
		case STACK_DELTA_STOP: st->stop_rows++; break;
		default: break;
		}
	}
}

/* Bytes of the packed arrays that follow the table's struct (rules, page index, addr[], rule[]). */
static size_t sd_arrays_size(uint32_t nrows, uint32_t npages, uint32_t nrules)
{
	return (size_t)nrules * sizeof(struct stack_delta_rule) + ((size_t)npages + 1) * sizeof(uint32_t) +
	       (size_t)nrows * (sizeof(uint32_t) + sizeof(uint16_t));
}

/*
 * Tables of at least SD_OWN_MAPPING_MIN bytes get a mapping of their own: freed, their pages go back to the
 * kernel at once. From the heap, a freed table of many MB leaves a hole that malloc seldom returns (glibc raises
 * its mmap threshold after the first large free), and a daemon that built tables for fresh copies of LLVM kept
 * 100 MB more after they were gone.
 */
#define SD_OWN_MAPPING_MIN (64u << 10)

static struct stack_deltas *sd_alloc(size_t sz)
{
	if (sz < SD_OWN_MAPPING_MIN) {
		struct stack_deltas *t = malloc(sz);
		if (t)
			t->own_len = 0;
		return t;
	}
	void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	((struct stack_deltas *)p)->own_len = sz;
	return p;
}

/* Pack rows[0..n) into one allocation. Rows beyond 4 GiB of the first are dropped (u32 offsets). */
static struct stack_deltas *sd_pack(struct sd_builder *b, size_t n)
{
	uint64_t base = n ? b->rows[0].addr : 0;
	while (n && b->rows[n - 1].addr - base > UINT32_MAX)
		n--;
	uint64_t last = n ? b->rows[n - 1].addr - base : 0;
	uint32_t npages = (uint32_t)(last >> SD_PAGE_BITS) + 1;
	size_t sz = sizeof(struct stack_deltas) + sd_arrays_size((uint32_t)n, npages, b->nrules);
	struct stack_deltas *t = sd_alloc(sz);
	if (!t)
		return NULL;
	size_t own_len = t->own_len;
	struct stack_delta_rule *rules = (struct stack_delta_rule *)(t + 1);
	uint32_t *page = (uint32_t *)(rules + b->nrules);
	uint32_t *addr = page + npages + 1;
	uint16_t *rule = (uint16_t *)(addr + n);
	memcpy(rules, b->rules, b->nrules * sizeof(*rules));
	uint32_t p = 0;
	for (size_t i = 0; i < n; i++) {
		addr[i] = (uint32_t)(b->rows[i].addr - base);
		rule[i] = b->rows[i].rule;
		while (p <= (addr[i] >> SD_PAGE_BITS))
			page[p++] = (uint32_t)i;
	}
	while (p <= npages)
		page[p++] = (uint32_t)n;
	*t = (struct stack_deltas){ .base = base, .nrows = (uint32_t)n, .npages = npages, .nrules = b->nrules,
				    .addr = addr, .rule = rule, .page = page, .rules = rules, .bytes = sz,
				    .own_len = own_len };
	return t;
}

/* ---- build ---------------------------------------------------------------------------------------------- */

static int sd_init(struct sd_builder *b, Elf *elf, struct stack_deltas_stats *st)
{
	memset(b, 0, sizeof(*b));
	memset(st, 0, sizeof(*st));
	b->elf = elf;
	b->st = st;
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &b->ehdr))
		return -ENOTSUP;
	b->ident = (const unsigned char *)elf_getident(elf, NULL);
	if (!b->ident || b->ident[EI_CLASS] != ELFCLASS64 || b->ident[EI_DATA] != ELFDATA2LSB ||
	    b->ehdr.e_machine != EM_X86_64)
		return -ENOTSUP;
	return sd_rules_init(b);
}

static void sd_fini(struct sd_builder *b)
{
	for (unsigned i = 0; i < b->nsrc; i++) {
		if (b->src[i].dw)
			dwarf_end(b->src[i].dw);	/* owns its cfi */
		else
			dwarf_cfi_end(b->src[i].cfi);
	}
	prologue_free(b->prologue);
	free(b->rules);
	hindex_free(&b->rule_index);
	free(b->rows);
	free(b->ranges);
	free(b->code);
	free(b->funcs);
}

/* ---- Go: rows from .gopclntab (unwind/gopclntab.h) ---------------------------------------------------- */

static int sd_go_row(void *ctx, uint64_t va, const struct stack_delta_rule *r)
{
	struct sd_builder *b = ctx;
	/* The row that ends the Go range may share its address with the next code's first row: let that win. */
	sd_add_rule_row(b, va, r, va == b->go_hi ? SD_PRIO_END : SD_PRIO_GO);
	b->st->go_rows++;
	return b->err;
}

/* Pure Go code has no .eh_frame; its pcsp tables give each function's SP delta at every pc. */
static void sd_add_go(struct sd_builder *b)
{
	struct gopclntab *go;
	if (gopclntab_open(b->elf, &go) < 0)
		return; /* not Go, or a corrupt table: CFI and analysis as for any file */
	gopclntab_text_range(go, &b->go_lo, &b->go_hi);
	b->have_go = gopclntab_for_each_rule(go, sd_go_row, b) == 0;
	gopclntab_free(go);
}

/* Go's own .debug_frame (when present) knows nothing of its stop, frame-pointer and signal functions: inside the
 * Go range the pclntab rows rule. cgo's C functions lie outside it and keep their CFI. */
static void sd_drop_go_ranges(struct sd_builder *b)
{
	size_t n = 0;
	for (size_t i = 0; i < b->nranges; i++) {
		if (!b->have_go || b->ranges[i].end <= b->go_lo || b->ranges[i].start >= b->go_hi)
			b->ranges[n++] = b->ranges[i];
		else
			b->st->fdes_skipped++;
	}
	b->nranges = n;
}

static int sd_run(struct sd_builder *b)
{
	sd_add_go(b);
	sd_open_eh_frame(b);
	sd_open_debug_frame(b);
	b->work_max = SD_WORK_PER_FDE;
	for (unsigned i = 0; i < b->nsrc; i++) {
		b->work_max += (uint64_t)b->src[i].data.d_size * SD_WORK_PER_CFI_BYTE;
		if (b->work_max > SD_WORK_MAX)
			b->work_max = SD_WORK_MAX;
		if (sd_collect_fdes(b, i) < 0)
			return -ENOMEM;
	}
	if (sd_resolve_overlaps(b) < 0)
		return -ENOMEM;
	sd_drop_go_ranges(b);
	uint64_t prev_end = 0;
	for (size_t i = 0; i < b->nranges && !b->err; i++) {
		sd_eval_range(b, &b->ranges[i], prev_end);
		prev_end = b->ranges[i].end;
	}
	/* The Go range counts as covered, so the prologue analysis does not disassemble Go code. */
	if (b->have_go) {
		if (sd_add_range(b, b->go_lo, b->go_hi, UINT32_MAX, 0) < 0)
			return -ENOMEM;
		sd_sort(b->ranges, b->nranges, sizeof(*b->ranges), sd_range_cmp);
	}
	if (b->err || sd_collect_code(b) < 0 || sd_collect_funcs(b) < 0)
		return -ENOMEM;
	sd_cover_gaps(b);
	return b->err;
}

int stack_deltas_build(Elf *elf, struct stack_deltas **out, struct stack_deltas_stats *stats)
{
	struct stack_deltas_stats local;
	struct sd_builder b;
	uint64_t t0 = clock_mono_ns();
	*out = NULL;
	int err = sd_init(&b, elf, stats ? stats : &local);
	if (err == 0)
		err = sd_run(&b);
	size_t n = err == 0 ? sd_normalise(&b) : 0;
	if (err == 0 && n == 0)
		err = -ENOENT;
	if (err == 0 && !(*out = sd_pack(&b, n)))
		err = -ENOMEM;
	if (err == 0)
		stack_deltas_count(*out, b.st);
	sd_fini(&b);
	(stats ? stats : &local)->build_ns = clock_mono_ns() - t0;
	return err;
}

void stack_deltas_free(struct stack_deltas *t)
{
	if (t && t->map)
		munmap(t->map, t->map_len);
	if (t && t->own_len)
		munmap(t, t->own_len);
	else
		free(t);
}

/* ---- the packed form, for the table cache ---------------------------------------------------------------- */

void stack_deltas_image(const struct stack_deltas *t, struct stack_deltas_image *out)
{
	*out = (struct stack_deltas_image){ .base = t->base, .nrows = t->nrows, .npages = t->npages,
					    .nrules = t->nrules, .data = t->rules,
					    .size = sd_arrays_size(t->nrows, t->npages, t->nrules) };
}

/* The rules as sd_rules_init() starts them (INVALID, then FALLBACK: lookups and a full table rely on their
 * indices), and every rule's kind and FP location one the unwinder knows. */
static bool sd_rules_valid(const struct stack_delta_rule *rules, uint32_t n)
{
	struct stack_delta_rule inv = stack_delta_rule_make(STACK_DELTA_INVALID);
	struct stack_delta_rule fb = stack_delta_rule_make(STACK_DELTA_FALLBACK);
	if (n < 2 || n > SD_MAX_RULES || !sd_rule_eq(&rules[SD_RULE_INVALID], &inv) ||
	    !sd_rule_eq(&rules[SD_RULE_FALLBACK], &fb))
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (rules[i].kind > STACK_DELTA_FALLBACK || rules[i].fp > STACK_DELTA_FP_AT_FP)
			return false;
	return true;
}

/* Rows as sd_pack() lays them out: the first at offset 0, addresses strictly ascending, rule indices in range,
 * and the page index exactly the one sd_pack() computes (so every lookup's binary search stays in range and
 * finds what it would in the built table). */
static bool sd_rows_valid(const struct stack_deltas *t)
{
	uint32_t last = t->nrows ? t->addr[t->nrows - 1] : 0, p = 0;
	if (t->nrows == 0 || t->addr[0] != 0 || t->npages != (last >> SD_PAGE_BITS) + 1)
		return false;
	for (uint32_t i = 0; i < t->nrows; i++) {
		if ((i > 0 && t->addr[i] <= t->addr[i - 1]) || t->rule[i] >= t->nrules)
			return false;
		for (; p <= (t->addr[i] >> SD_PAGE_BITS); p++)
			if (t->page[p] != i)
				return false;
	}
	for (; p <= t->npages; p++)
		if (t->page[p] != t->nrows)
			return false;
	return true;
}

int stack_deltas_adopt(const struct stack_deltas_image *img, void *map, size_t map_len, struct stack_deltas **out)
{
	*out = NULL;
	/* Bounds first, so that the sizes below cannot overflow: addresses are u32 offsets (at most 65536 pages). */
	if (img->nrows > SD_MAX_ROWS || img->npages == 0 || img->npages > (1u << (32 - SD_PAGE_BITS)) ||
	    img->nrules < 2 || img->nrules > SD_MAX_RULES || ((uintptr_t)img->data & 7) ||
	    img->size != sd_arrays_size(img->nrows, img->npages, img->nrules))
		return -EINVAL;
	struct stack_deltas *t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	const struct stack_delta_rule *rules = img->data;
	const uint32_t *page = (const uint32_t *)(rules + img->nrules);
	const uint32_t *addr = page + img->npages + 1;
	*t = (struct stack_deltas){ .base = img->base, .nrows = img->nrows, .npages = img->npages,
				    .nrules = img->nrules, .addr = addr, .rule = (const uint16_t *)(addr + img->nrows),
				    .page = page, .rules = rules, .bytes = sizeof(*t) + img->size };
	if (!sd_rules_valid(rules, t->nrules) || !sd_rows_valid(t) || img->base + addr[t->nrows - 1] < img->base) {
		free(t);
		return -EINVAL;
	}
	t->map = map;
	t->map_len = map_len;
	*out = t;
	return 0;
}

size_t stack_deltas_bytes(const struct stack_deltas *t)
{
	return t ? t->bytes : 0;
}

size_t stack_deltas_rows(const struct stack_deltas *t)
{
	return t ? t->nrows : 0;
}

void stack_deltas_row(const struct stack_deltas *t, size_t i, uint64_t *elf_va, struct stack_delta_rule *rule)
{
	*elf_va = t->base + t->addr[i];
	*rule = t->rules[t->rule[i]];
}

static bool sd_row_after(const void *addr, size_t i, const void *off)
{
	return ((const uint32_t *)addr)[i] > *(const uint32_t *)off;
}

int stack_deltas_lookup(const struct stack_deltas *t, uint64_t elf_va, struct stack_delta_rule *out)
{
	*out = t->rules[SD_RULE_INVALID];
	if (t->nrows == 0 || elf_va < t->base || elf_va - t->base > UINT32_MAX)
		return -ENOENT;
	uint32_t off = (uint32_t)(elf_va - t->base);
	uint32_t p = off >> SD_PAGE_BITS;
	uint32_t lo, hi;
	if (p >= t->npages) {
		lo = t->nrows;
		hi = t->nrows;
	} else {
		lo = t->page[p];
		hi = t->page[p + 1];
	}
	/* The answer is the last row at or before off: in [lo, hi), or lo - 1 (which starts in an earlier page).
	 * The shared search costs what the hand-written loop did within noise (47-49 ns a lookup at random
	 * addresses of libc's table, either way), and the unwinder's rule cache answers all but ~0.05% of frames
	 * before they get here. */
	size_t after = lo + bsearch_first(t->addr + lo, hi - lo, sd_row_after, &off);
	if (after == 0)
		return -ENOENT;
	*out = t->rules[t->rule[after - 1]];
	return out->kind == STACK_DELTA_INVALID ? -ENOENT : 0;
}
