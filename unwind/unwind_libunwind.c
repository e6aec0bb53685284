/*
 * unwind_libunwind.c — the reference unwinder: libunwind's remote API over a perf sample. See
 * unwind_libunwind.h for the contract.
 *
 * libunwind asks four questions through accessors, all answered from data we own:
 *  - registers: the sample's (perf numbering, mapped to libunwind's x86_64 numbering);
 *  - memory: the stack copy for [sp, sp + stack_size), else the file image of the ELF mapped there (the
 *    unwind tables and code libunwind reads are read-only, so the file holds what the process holds), else a
 *    "window" of tables we built ourselves (see below); never the live process;
 *  - unwind info for an IP: the FDE found in a binary-search table, handed to dwarf_search_unwind_table,
 *    which reads and checks the FDE and its CIE;
 *  - the dynamic-info list: none.
 *
 * The walk trusts CFI only. When no FDE covers an IP, libunwind would fall back to guessing (frame-pointer
 * chain, PLT heuristics); the oracle stops there instead and reports UNWIND_TRUNCATED.
 *
 * Per file (keyed by unwind_module.cache_key) we keep the file's PT_LOAD layout and up to two tables:
 *  - .eh_frame_hdr's own table when the file has one (read in place through the file image), else a table
 *    built from walking .eh_frame;
 *  - a table over .debug_frame, which libunwind's remote API cannot read (its .debug_frame path reads the
 *    section from the local address space and its loader is not exported). We convert .debug_frame into
 *    .eh_frame format (CIE id 0, relative CIE pointers, absolute 8-byte addresses) and let libunwind read it
 *    from the window; the unrelocated addresses in it are fixed up by unw_dyn_info_t.load_offset.
 * Tables we build live in host memory and are presented at non-canonical addresses (bit 62 set, the file's
 * slot in bits 32..61) that no process can map, so they never collide with the sample's addresses.
 *
 * The address space uses UNW_CACHE_NONE: libunwind's caches are keyed by IP alone, and the same IP means
 * different code in different processes, so any cached entry could be wrong for the next sample.
 */
#include "unwind/unwind_libunwind.h"

#include "unwind/byte_reader.h"
#include "unwind/elf_image.h"
#include "unwind/file_cache.h"
#include "src/base/bsearch.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <libunwind.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* libunwind exports this for remote unwinders (perf uses it) but does not declare it in its headers. */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
					       unw_proc_info_t *pi, int need_unwind_info, void *arg);
#define dwarf_search_unwind_table UNW_OBJ(dwarf_search_unwind_table)

#define MAX_CFI_ENTRIES (1u << 24)	/* CIEs/FDEs walked per section: bounds work on hostile input */
#define WINDOW_BIT (1ULL << 62)		/* non-canonical on x86_64: never a process address */
#define WINDOW_SLOT_SHIFT 32
#define WINDOW_MAX_SIZE (1ULL << 31)	/* table offsets are int32 */
#define MAX_SECTION_SIZE (1ULL << 28)	/* so that what we build from a section fits the window */
#define MAX_SLOTS (1u << 29)
#define REGION_CACHE 8			/* address ranges remembered during one sample */
#define RECENT_FILES 8			/* files seen during one sample, for addresses no module claims */

/*
 * One binary-search table of (int32 start offset, int32 FDE offset) pairs, as in .eh_frame_hdr. Addresses
 * are ELF virtual addresses (bias not applied) unless marked as window offsets.
 */
struct fde_table {
	int format;			/* 0 (absent), UNW_INFO_FORMAT_REMOTE_TABLE or UNW_INFO_FORMAT_IP_OFFSET */
	uint64_t segbase;		/* what FDE offsets are relative to */
	uint64_t table;			/* first entry */
	bool segbase_in_window, table_in_window;
	uint64_t nentries;
};

/* What we keep of one file (unwind/file_cache.h). */
struct file_info {
	uint32_t slot;			/* index in unwind_libunwind.slots; names this file's window */
	struct elf_image img;		/* the file and its PT_LOAD layout */
	struct fde_table eh;		/* from .eh_frame_hdr or built from .eh_frame */
	struct fde_table debug;		/* built from .debug_frame */
	uint8_t *window;		/* tables we built */
	size_t window_size;
};

/* A range of the sampled process's address space and where its bytes are. */
struct region {
	uint64_t start, end;
	const uint8_t *host;
};

struct recent_file {
	struct file_info *fi;
	uint64_t bias;
};

/* State of the sample being unwound; the accessors' arg. */
struct sample_ctx {
	struct unwind_libunwind *u;
	const struct unwind_process *proc;
	const struct unwind_sample *sample;
	const uint64_t *regs;		/* frame 0's registers: the sample's, or a mid-stack frame's (step) */
	struct region regions[REGION_CACHE];
	unsigned nregions, next_region;
	struct recent_file recent[RECENT_FILES];
	unsigned nrecent, next_recent;
	bool last_find_ok;		/* did the latest find_proc_info find an FDE? */
	int err;			/* internal error (-ENOMEM) met inside an accessor */
};

struct unwind_libunwind {
	unw_addr_space_t as;
	struct file_cache *files;	/* file key -> struct file_info */
	struct file_info **slots;	/* slot -> file_info, for window addresses */
	uint32_t nslots;
	struct sample_ctx sc;
};

/* A growable byte buffer for the tables we build. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};

struct table_entry {
	int32_t start;
	int32_t fde;
};

/* ---- small helpers ---- */

static bool buf_reserve(struct buf *b, size_t more)
{
	if (more > WINDOW_MAX_SIZE || b->len + more > WINDOW_MAX_SIZE)
		return false;
	if (b->len + more <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + more)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return false;
	b->p = p;
	b->cap = cap;
	return true;
}

static bool buf_put(struct buf *b, const void *data, size_t n)
{
	if (n == 0)
		return true;
	if (!buf_reserve(b, n))
		return false;
	memcpy(b->p + b->len, data, n);
	b->len += n;
	return true;
}

static bool buf_put_u8(struct buf *b, uint8_t v)
{
	return buf_put(b, &v, 1);
}

static bool buf_put_uleb(struct buf *b, uint64_t v)
{
	do {
		uint8_t byte = v & 0x7f;
		v >>= 7;
		if (!buf_put_u8(b, byte | (v ? 0x80 : 0)))
			return false;
	} while (v);
	return true;
}

static bool buf_put_sleb(struct buf *b, int64_t v)
{
	for (;;) {
		uint8_t byte = v & 0x7f;
		v >>= 7; /* arithmetic shift: gcc defines it */
		bool done = (v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40));
		if (!buf_put_u8(b, byte | (done ? 0 : 0x80)))
			return false;
		if (done)
			return true;
	}
}

static bool buf_align(struct buf *b, size_t align)
{
	static const uint8_t zeros[8];
	return buf_put(b, zeros, (align - b->len % align) % align);
}

static bool fits_int32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* ---- .eh_frame_hdr ---- */

static bool parse_eh_frame_hdr(struct file_info *fi, uint64_t vaddr, uint64_t size)
{
	const uint8_t *hdr = elf_image_bytes(&fi->img, vaddr, size);
	struct byte_reader r;
	uint8_t version, ptr_enc, count_enc, table_enc;
	uint64_t eh_frame, count;
	if (!hdr)
		return false;
	byte_reader_init(&r, hdr, size);
	r.va = vaddr;
	if (!byte_reader_u8(&r, &version) || version != 1 || !byte_reader_u8(&r, &ptr_enc) ||
	    !byte_reader_u8(&r, &count_enc) || !byte_reader_u8(&r, &table_enc) ||
	    !byte_reader_eh_pointer(&r, ptr_enc, vaddr, &eh_frame) || !byte_reader_eh_pointer(&r, count_enc, vaddr, &count))
		return false;
	/* libunwind's binary search only understands this layout. */
	if (table_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return false;
	uint64_t table_off = byte_reader_offset(&r);
	if (count == 0 || count > (size - table_off) / sizeof(struct table_entry))
		return false;
	fi->eh = (struct fde_table){ .format = UNW_INFO_FORMAT_REMOTE_TABLE, .segbase = vaddr,
				     .table = vaddr + table_off, .nentries = count };
	return true;
}

/* ---- walking .eh_frame / .debug_frame with libdw ---- */

/* What a CIE tells about its FDEs. */
struct cie_note {
	uint64_t offset;		/* in the section */
	uint8_t fde_enc;		/* encoding of initial_location and address_range */
	bool usable;
	uint64_t out_offset;		/* .debug_frame conversion: where the CIE went */
};

struct cie_list {
	struct cie_note *v;
	size_t n, cap;
};

struct section_walk {
	const unsigned char *e_ident;
	Elf_Data data;
	bool eh_frame;
};

/*
 * Calls fn(entry, offset) for each CIE (cies=true) or FDE of the section. A malformed entry that cannot be
 * skipped ends the walk, keeping what came before. Returns false only when fn does (out of memory).
 */
static bool walk_cfi(const struct section_walk *w, bool cies,
		     bool (*fn)(void *ctx, const Dwarf_CFI_Entry *e, uint64_t off), void *ctx)
{
	Dwarf_Off off = 0;
	for (unsigned i = 0; i < MAX_CFI_ENTRIES; i++) {
		Dwarf_Off next = off;
		Dwarf_CFI_Entry e;
		int r = dwarf_next_cfi(w->e_ident, (Elf_Data *)&w->data, w->eh_frame, off, &next, &e);
		if (r > 0)
			return true;
		if (r == 0 && dwarf_cfi_cie_p(&e) == cies && !fn(ctx, &e, off))
			return false;
		/* libdw moves next_offset past an unusable entry when it can be skipped safely. */
		if (next == (Dwarf_Off)-1 || next <= off)
			return true;
		off = next;
	}
	return true;
}

static bool add_cie(void *ctx, const Dwarf_CFI_Entry *e, uint64_t off)
{
	struct cie_list *l = ctx;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct cie_note *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return false;
		l->v = v;
		l->cap = cap;
	}
	struct cie_note *c = &l->v[l->n++];
	*c = (struct cie_note){ .offset = off };
	c->usable = byte_reader_cie_fde_encoding(e->cie.augmentation, e->cie.augmentation_data,
						 e->cie.augmentation_data_size, &c->fde_enc);
	return true;
}

static bool cie_at_or_after(const void *cies, size_t i, const void *off)
{
	return ((const struct cie_note *)cies)[i].offset >= *(const uint64_t *)off;
}

/* CIEs are collected in section order, so the list is sorted by offset. */
static struct cie_note *find_cie(const struct cie_list *l, uint64_t off)
{
	size_t i = bsearch_first(l->v, l->n, cie_at_or_after, &off);
	return i < l->n && l->v[i].offset == off && l->v[i].usable ? &l->v[i] : NULL;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct table_entry *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

/* ---- a table over .eh_frame (no .eh_frame_hdr) ---- */

struct eh_build {
	struct cie_list cies;
	const struct section_walk *w;
	uint64_t vaddr;			/* of .eh_frame */
	struct buf table;
};

static bool add_eh_fde(void *ctx, const Dwarf_CFI_Entry *e, uint64_t off)
{
	struct eh_build *b = ctx;
	const struct cie_note *cie = find_cie(&b->cies, e->fde.CIE_pointer);
	const uint8_t *base = b->w->data.d_buf;
	struct byte_reader r;
	uint64_t start, range;
	byte_reader_init(&r, e->fde.start, (size_t)(e->fde.end - e->fde.start));
	r.va = b->vaddr + (uint64_t)(e->fde.start - base);
	if (!cie || !byte_reader_eh_pointer(&r, cie->fde_enc, 0, &start) ||
	    !byte_reader_eh_value(&r, cie->fde_enc, &range) || range == 0)
		return true; /* an FDE libunwind could not use either: leave it out */
	int64_t rel = (int64_t)(start - b->vaddr);
	if (!fits_int32(rel) || !fits_int32((int64_t)off))
		return true;
	struct table_entry t = { .start = (int32_t)rel, .fde = (int32_t)off };
	return buf_put(&b->table, &t, sizeof(t));
}

/* Sort the entries and append them to the window as table t. Returns false on allocation failure. */
static bool install_table(struct fde_table *dst, struct buf *entries, struct buf *window, struct fde_table t)
{
	size_t n = entries->len / sizeof(struct table_entry);
	if (n == 0)
		return true;
	qsort(entries->p, n, sizeof(struct table_entry), cmp_entry);
	if (!buf_align(window, 8))
		return false;
	t.table = window->len;
	t.table_in_window = true;
	t.nentries = n;
	if (!buf_put(window, entries->p, entries->len))
		return false;
	*dst = t;
	return true;
}

/* Builds the table into the window; returns false only on allocation failure. */
static bool build_eh_frame_table(struct file_info *fi, const struct section_walk *w, uint64_t vaddr,
				 struct buf *window)
{
	struct eh_build b = { .w = w, .vaddr = vaddr };
	bool ok = walk_cfi(w, true, add_cie, &b.cies) && walk_cfi(w, false, add_eh_fde, &b);
	free(b.cies.v);
	struct fde_table t = { .format = UNW_INFO_FORMAT_REMOTE_TABLE, .segbase = vaddr };
	ok = ok && install_table(&fi->eh, &b.table, window, t);
	free(b.table.p);
	return ok;
}

/* ---- .debug_frame converted to .eh_frame format ---- */

struct debug_build {
	struct cie_list cies;
	uint64_t lo_vaddr;
	struct buf *out;		/* the window; converted entries are appended */
	struct buf table;
};

/* Patch the 4-byte length of an entry started at `at` now that the entry is complete. */
static void put_length(struct buf *b, size_t at)
{
	uint32_t len = (uint32_t)(b->len - at - 4);
	memcpy(b->p + at, &len, 4);
}

static bool convert_cie(void *ctx, const Dwarf_CFI_Entry *e, uint64_t off)
{
	struct debug_build *d = ctx;
	if (!add_cie(&d->cies, e, off))
		return false;
	struct cie_note *c = &d->cies.v[d->cies.n - 1];
	/* Only plain CIEs: augmentations in .debug_frame are not something we can translate faithfully. */
	c->usable = e->cie.augmentation[0] == '\0';
	if (!c->usable)
		return true;
	const Dwarf_CIE *cie = &e->cie;
	uint8_t version = cie->return_address_register <= 0xff ? 1 : 3;
	uint32_t zero = 0;
	size_t at = d->out->len;
	c->out_offset = at;
	bool ok = buf_put(d->out, &zero, 4) && buf_put(d->out, &zero, 4) && buf_put_u8(d->out, version) &&
		  buf_put_u8(d->out, 0) && buf_put_uleb(d->out, cie->code_alignment_factor) &&
		  buf_put_sleb(d->out, cie->data_alignment_factor) &&
		  (version == 1 ? buf_put_u8(d->out, (uint8_t)cie->return_address_register)
				: buf_put_uleb(d->out, cie->return_address_register)) &&
		  buf_put(d->out, cie->initial_instructions,
			  (size_t)(cie->initial_instructions_end - cie->initial_instructions)) &&
		  buf_align(d->out, 4);
	if (ok)
		put_length(d->out, at);
	return ok;
}

static bool convert_fde(void *ctx, const Dwarf_CFI_Entry *e, uint64_t off)
{
	struct debug_build *d = ctx;
	const struct cie_note *cie = find_cie(&d->cies, e->fde.CIE_pointer);
	struct byte_reader r;
	uint64_t start, range;
	(void)off;
	byte_reader_init(&r, e->fde.start, (size_t)(e->fde.end - e->fde.start));
	if (!cie || !byte_reader_uint(&r, 8, &start) || !byte_reader_uint(&r, 8, &range) || range == 0 ||
	    !fits_int32((int64_t)(start - d->lo_vaddr)))
		return true;
	size_t at = d->out->len;
	int64_t cie_rel = (int64_t)(at + 4 - cie->out_offset);
	if (!fits_int32(cie_rel) || !fits_int32((int64_t)at))
		return true;
	uint32_t zero = 0, rel32 = (uint32_t)cie_rel;
	bool ok = buf_put(d->out, &zero, 4) && buf_put(d->out, &rel32, 4) && buf_put(d->out, &start, 8) &&
		  buf_put(d->out, &range, 8) && buf_put(d->out, r.pos, byte_reader_left(&r)) && buf_align(d->out, 4);
	if (!ok)
		return false;
	put_length(d->out, at);
	struct table_entry t = { .start = (int32_t)(start - d->lo_vaddr), .fde = (int32_t)at };
	return buf_put(&d->table, &t, sizeof(t));
}

static bool build_debug_frame_table(struct file_info *fi, const struct section_walk *w, struct buf *window)
{
	struct debug_build d = { .lo_vaddr = fi->img.lo, .out = window };
	if (!buf_align(window, 8))
		return false;
	struct fde_table t = { .format = UNW_INFO_FORMAT_IP_OFFSET, .segbase = window->len,
			       .segbase_in_window = true };
	bool ok = walk_cfi(w, true, convert_cie, &d) && walk_cfi(w, false, convert_fde, &d);
	free(d.cies.v);
	ok = ok && install_table(&fi->debug, &d.table, window, t);
	free(d.table.p);
	return ok;
}

/* ---- building a file's info ---- */

/* The section named `name`, if its header is sane. */
static bool find_section(Elf *elf, const char *name, GElf_Shdr *out)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	Elf_Scn *scn = NULL;
	for (unsigned i = 0; i < 65536 && (scn = elf_nextscn(elf, scn)); i++) {
		const char *s;
		if (gelf_getshdr(scn, out) && (s = elf_strptr(elf, shstrndx, out->sh_name)) && strcmp(s, name) == 0)
			return out->sh_type == SHT_PROGBITS && !(out->sh_flags & SHF_COMPRESSED);
	}
	return false;
}

static bool find_eh_frame_hdr(struct file_info *fi, Elf *elf)
{
	GElf_Shdr sh;
	if (find_section(elf, ".eh_frame_hdr", &sh) && parse_eh_frame_hdr(fi, sh.sh_addr, sh.sh_size))
		return true;
	size_t n;
	if (elf_getphdrnum(elf, &n) != 0)
		return false;
	for (size_t i = 0; i < n && i < 4096; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
			return parse_eh_frame_hdr(fi, ph.p_vaddr, ph.p_filesz);
	}
	return false;
}

/* Section data through the load segments for loaded sections (what libunwind will read), else the file. */
static bool section_walk_init(const struct file_info *fi, const GElf_Shdr *sh, const unsigned char *e_ident,
			      bool eh_frame, struct section_walk *w)
{
	const uint8_t *p = NULL;
	if (sh->sh_flags & SHF_ALLOC)
		p = elf_image_bytes(&fi->img, sh->sh_addr, sh->sh_size);
	else if (sh->sh_offset <= fi->img.image_size && sh->sh_size <= fi->img.image_size - sh->sh_offset)
		p = fi->img.image + sh->sh_offset;
	if (!p || sh->sh_size == 0 || sh->sh_size > MAX_SECTION_SIZE)
		return false;
	*w = (struct section_walk){ .e_ident = e_ident, .eh_frame = eh_frame };
	w->data.d_buf = (void *)p;
	w->data.d_size = sh->sh_size;
	w->data.d_type = ELF_T_BYTE;
	return true;
}

/* Fill fi's tables; returns false only on allocation failure. */
static bool build_tables(struct file_info *fi, Elf *elf)
{
	GElf_Ehdr eh;
	if (!gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64)
		return true;
	struct buf window = { 0 };
	struct section_walk w;
	GElf_Shdr sh;
	bool ok = true;
	if (!find_eh_frame_hdr(fi, elf) && find_section(elf, ".eh_frame", &sh) && (sh.sh_flags & SHF_ALLOC) &&
	    section_walk_init(fi, &sh, eh.e_ident, true, &w))
		ok = build_eh_frame_table(fi, &w, sh.sh_addr, &window);
	if (ok && find_section(elf, ".debug_frame", &sh) && section_walk_init(fi, &sh, eh.e_ident, false, &w))
		ok = build_debug_frame_table(fi, &w, &window);
	fi->window = window.p;
	fi->window_size = window.len;
	return ok;
}

/* A free slot for a new file's window, growing the slot array as needed. */
static bool slot_alloc(struct unwind_libunwind *u, uint32_t *slot)
{
	for (uint32_t i = 0; i < u->nslots; i++) {
		if (!u->slots[i]) {
			*slot = i;
			return true;
		}
	}
	if (u->nslots >= MAX_SLOTS)
		return false;
	uint32_t n = u->nslots ? 2 * u->nslots : 16;
	struct file_info **s = realloc(u->slots, n * sizeof(*s));
	if (!s)
		return false;
	memset(s + u->nslots, 0, (n - u->nslots) * sizeof(*s));
	*slot = u->nslots;
	u->slots = s;
	u->nslots = n;
	return true;
}

/* file_cache hook: a file's layout and tables, with a window slot. */
static int file_info_make(void *ctx, const void *key, Elf *elf, void **value)
{
	struct unwind_libunwind *u = ctx;
	struct file_info *fi = calloc(1, sizeof(*fi));
	(void)key;
	if (!fi)
		return -ENOMEM;
	elf_image_init(&fi->img, elf);
	if (!build_tables(fi, elf) || !slot_alloc(u, &fi->slot)) {
		free(fi->window);
		free(fi);
		return -ENOMEM;
	}
	u->slots[fi->slot] = fi;
	*value = fi;
	return 0;
}

/* file_cache hook: the file is forgotten, its window slot freed. */
static void file_info_release(void *ctx, void *value)
{
	struct unwind_libunwind *u = ctx;
	struct file_info *fi = value;
	u->slots[fi->slot] = NULL;
	free(fi->window);
	free(fi);
}

/* The cached info of mod's file, built on first use. NULL: the file is unreadable, or -ENOMEM in sc->err. */
static struct file_info *file_get(struct sample_ctx *sc, const struct unwind_module *mod)
{
	void *fi;
	int err = file_cache_get(sc->u->files, mod, &fi);
	if (err == -ENOMEM)
		sc->err = err;
	return err < 0 ? NULL : fi;
}

/* Remember a file mapped in this sample's process, so addresses no module claims can still be found in it. */
static void note_recent(struct sample_ctx *sc, struct file_info *fi, uint64_t bias)
{
	for (unsigned i = 0; i < sc->nrecent; i++)
		if (sc->recent[i].fi == fi && sc->recent[i].bias == bias)
			return;
	sc->recent[sc->next_recent] = (struct recent_file){ fi, bias };
	sc->next_recent = (sc->next_recent + 1) % RECENT_FILES;
	if (sc->nrecent < RECENT_FILES)
		sc->nrecent++;
}

/* ---- memory ---- */

static uint64_t window_addr(const struct file_info *fi, uint64_t offset)
{
	return WINDOW_BIT | ((uint64_t)fi->slot << WINDOW_SLOT_SHIFT) | offset;
}

static bool window_region(const struct sample_ctx *sc, uint64_t addr, struct region *r)
{
	uint64_t slot = (addr & ~WINDOW_BIT) >> WINDOW_SLOT_SHIFT;
	if ((addr >> 62) != 1 || slot >= sc->u->nslots || !sc->u->slots[slot])
		return false;
	const struct file_info *fi = sc->u->slots[slot];
	*r = (struct region){ window_addr(fi, 0), window_addr(fi, fi->window_size), fi->window };
	return addr < r->end;
}

static bool file_region(const struct file_info *fi, uint64_t bias, uint64_t addr, struct region *r)
{
	uint64_t vaddr = addr - bias;
	const struct elf_image_load *l = elf_image_load_at(&fi->img, vaddr);
	if (!l)
		return false;
	*r = (struct region){ bias + l->vaddr, bias + l->vaddr + l->size, fi->img.image + l->offset };
	return r->start < r->end; /* a wrapping bias makes the range meaningless */
}

/* Where addr's bytes are: a window, the file of the module there, or a file seen earlier in this sample. */
static bool resolve_region(struct sample_ctx *sc, uint64_t addr, struct region *r)
{
	if (addr & WINDOW_BIT)
		return window_region(sc, addr, r);
	struct unwind_module mod;
	if (sc->proc->find_module(sc->proc->ctx, addr, &mod) == 0) {
		struct file_info *fi = file_get(sc, &mod);
		if (fi) {
			note_recent(sc, fi, mod.bias);
			if (file_region(fi, mod.bias, addr, r))
				return true;
		}
	}
	for (unsigned i = 0; i < sc->nrecent; i++)
		if (file_region(sc->recent[i].fi, sc->recent[i].bias, addr, r))
			return true;
	return false;
}

static const struct region *find_region(struct sample_ctx *sc, uint64_t addr)
{
	for (unsigned i = 0; i < sc->nregions; i++)
		if (addr >= sc->regions[i].start && addr < sc->regions[i].end)
			return &sc->regions[i];
	struct region r;
	if (!resolve_region(sc, addr, &r))
		return NULL;
	unsigned i = sc->next_region;
	sc->regions[i] = r;
	sc->next_region = (i + 1) % REGION_CACHE;
	if (sc->nregions < REGION_CACHE)
		sc->nregions++;
	return &sc->regions[i];
}

/* Read the word at addr from a region containing addr; bytes past the region's end read as zero. */
static void read_word(const uint8_t *host, uint64_t avail, unw_word_t *val)
{
	*val = 0;
	memcpy(val, host, avail < sizeof(*val) ? avail : sizeof(*val));
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct sample_ctx *sc = arg;
	const struct unwind_sample *s = sc->sample;
	uint64_t sp = s->regs[UNWIND_REG_SP];
	(void)as;
	if (write)
		return -UNW_EINVAL;
	if (addr >= sp && addr - sp < s->stack_size) {
		read_word(s->stack + (addr - sp), s->stack_size - (addr - sp), val);
		return 0;
	}
	const struct region *r = find_region(sc, addr);
	if (!r)
		return -UNW_EINVAL;
	read_word(r->host + (addr - r->start), r->end - addr, val);
	return 0;
}

/* ---- registers ---- */

/* libunwind's x86_64 numbering (DWARF order) to perf's. */
static int perf_reg(unw_regnum_t reg)
{
	static const int8_t map[] = {
		[UNW_X86_64_RAX] = UNWIND_REG_AX, [UNW_X86_64_RDX] = UNWIND_REG_DX,
		[UNW_X86_64_RCX] = UNWIND_REG_CX, [UNW_X86_64_RBX] = UNWIND_REG_BX,
		[UNW_X86_64_RSI] = UNWIND_REG_SI, [UNW_X86_64_RDI] = UNWIND_REG_DI,
		[UNW_X86_64_RBP] = UNWIND_REG_BP, [UNW_X86_64_RSP] = UNWIND_REG_SP,
		[UNW_X86_64_R8] = UNWIND_REG_R8,   [UNW_X86_64_R9] = UNWIND_REG_R9,
		[UNW_X86_64_R10] = UNWIND_REG_R10, [UNW_X86_64_R11] = UNWIND_REG_R11,
		[UNW_X86_64_R12] = UNWIND_REG_R12, [UNW_X86_64_R13] = UNWIND_REG_R13,
		[UNW_X86_64_R14] = UNWIND_REG_R14, [UNW_X86_64_R15] = UNWIND_REG_R15,
		[UNW_X86_64_RIP] = UNWIND_REG_IP,
	};
	if (reg < 0 || (size_t)reg >= sizeof(map) / sizeof(map[0]))
		return -1;
	return map[reg];
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	struct sample_ctx *sc = arg;
	int r = perf_reg(reg);
	(void)as;
	if (write || r < 0)
		return -UNW_EBADREG;
	*val = sc->regs[r];
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)as, (void)reg, (void)val, (void)write, (void)arg;
	return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as, (void)c, (void)arg;
	return -UNW_EINVAL;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	(void)as, (void)addr, (void)arg;
	return -UNW_ENOINFO;
}

/* The unwind info libunwind allocates for us is its own (and it frees it); we hand out none. */
static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)as, (void)pi, (void)arg;
}

/* ---- unwind info ---- */

static void fill_dyn_info(const struct file_info *fi, const struct fde_table *t, uint64_t bias, unw_dyn_info_t *di)
{
	memset(di, 0, sizeof(*di));
	di->format = t->format;
	di->start_ip = bias + fi->img.lo;
	di->end_ip = bias + fi->img.hi;
	di->u.rti.segbase = t->segbase_in_window ? window_addr(fi, t->segbase) : bias + t->segbase;
	di->u.rti.table_data = t->table_in_window ? window_addr(fi, t->table) : bias + t->table;
	di->u.rti.table_len = t->nentries * sizeof(struct table_entry) / sizeof(unw_word_t);
	/* Converted .debug_frame holds unrelocated addresses: libunwind adds load_offset to what it reads. */
	if (t->format == UNW_INFO_FORMAT_IP_OFFSET)
		di->load_offset = bias;
}

/* Host copy of a table's entries: in the window, or in place in the file's .eh_frame_hdr. */
static const uint8_t *table_host(const struct file_info *fi, const struct fde_table *t)
{
	size_t bytes = t->nentries * sizeof(struct table_entry);
	if (t->table_in_window)
		return t->table <= fi->window_size && bytes <= fi->window_size - t->table ? fi->window + t->table : NULL;
	return elf_image_bytes(&fi->img, t->table, bytes);
}

static bool entry_starts_after(const void *entries, size_t i, const void *rel)
{
	int32_t start;
	memcpy(&start, (const uint8_t *)entries + i * sizeof(struct table_entry), sizeof(start)); /* may be unaligned */
	return start > *(const int32_t *)rel;
}

/* Index of the last entry starting at or before rel (the rule libunwind's own search applies). */
static bool lookup_entry(const uint8_t *entries, uint64_t n, int32_t rel, uint64_t *index)
{
	size_t after = bsearch_first(entries, n, entry_starts_after, &rel);
	if (after == 0)
		return false;
	*index = after - 1;
	return true;
}

/*
 * Search one table; -UNW_ENOINFO when it does not cover ip. We pick the entry ourselves and hand libunwind a
 * one-entry table: its remote binary search reads each probe byte by byte through access_mem, which was
 * about 40% of the reads of a walk. libunwind still reads the FDE and CIE and checks that they cover ip.
 */
static int search_table(struct sample_ctx *sc, const struct file_info *fi, const struct fde_table *t,
			uint64_t bias, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info)
{
	unw_dyn_info_t di;
	const uint8_t *entries = t->format ? table_host(fi, t) : NULL;
	uint64_t index;
	if (!entries)
		return -UNW_ENOINFO;
	fill_dyn_info(fi, t, bias, &di);
	/* Table offsets are int32 from the table's base; libunwind asserts ip lies in [start_ip, end_ip). */
	uint64_t base = t->format == UNW_INFO_FORMAT_IP_OFFSET ? di.start_ip : di.u.rti.segbase;
	if (ip < di.start_ip || ip >= di.end_ip || !fits_int32((int64_t)(ip - base)) ||
	    !lookup_entry(entries, t->nentries, (int32_t)(ip - base), &index))
		return -UNW_ENOINFO;
	di.u.rti.table_data += index * sizeof(struct table_entry);
	di.u.rti.table_len = sizeof(struct table_entry) / sizeof(unw_word_t);
	return dwarf_search_unwind_table(sc->u->as, ip, &di, pi, need_unwind_info, sc);
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info,
			  void *arg)
{
	struct sample_ctx *sc = arg;
	struct unwind_module mod;
	(void)as;
	sc->last_find_ok = false;
	if (sc->proc->find_module(sc->proc->ctx, ip, &mod) < 0)
		return -UNW_ENOINFO;
	struct file_info *fi = file_get(sc, &mod);
	if (!fi)
		return sc->err ? -UNW_ENOMEM : -UNW_ENOINFO;
	note_recent(sc, fi, mod.bias);
	int r = search_table(sc, fi, &fi->eh, mod.bias, ip, pi, need_unwind_info);
	if (r == -UNW_ENOINFO)
		r = search_table(sc, fi, &fi->debug, mod.bias, ip, pi, need_unwind_info);
	sc->last_find_ok = r >= 0;
	return r;
}

/* ---- the walk ---- */

/*
 * One step from the cursor's frame to its caller. Returns 1 with the caller's ip/sp, 0 at the outermost
 * frame, -1 when the walk cannot continue. *after_signal tells that the frame stepped from was a signal
 * trampoline, so the caller's ip is where the signal interrupted it, not a return address.
 */
static int step(struct sample_ctx *sc, unw_cursor_t *c, uint64_t *ip, uint64_t *sp, bool *after_signal)
{
	sc->last_find_ok = false;
	int r = unw_step(c);
	/*
	 * Without an FDE, libunwind guesses (frame-pointer chain, PLT heuristics) and may even report the end of
	 * the stack when rbp is 0. The oracle reports only what CFI proves, so such a step truncates the walk.
	 */
	if (r < 0 || !sc->last_find_ok)
		return -1;
	if (r == 0)
		return 0;
	/*
	 * libunwind 1.6 answers from the CIE ('S' augmentation) of the FDE it just used, i.e. about the frame
	 * stepped from, so the question is asked after the step.
	 */
	*after_signal = unw_is_signal_frame(c) > 0;
	unw_word_t v;
	if (unw_get_reg(c, UNW_REG_IP, &v) < 0)
		return -1;
	*ip = v;
	if (unw_get_reg(c, UNW_REG_SP, &v) < 0)
		return -1;
	*sp = v;
	return 1;
}

/* Callers live at higher addresses; only a signal frame may switch stacks (sigaltstack). */
static bool advances(uint64_t ip, uint64_t sp, uint64_t prev_ip, uint64_t prev_sp, bool after_signal)
{
	if (after_signal)
		return ip != prev_ip || sp != prev_sp;
	return sp > prev_sp;
}

static size_t walk(struct sample_ctx *sc, unw_cursor_t *c, struct unwind_frame *frames, size_t max,
		   enum unwind_status *status)
{
	size_t n = 1;
	uint64_t prev_ip = frames[0].ip, prev_sp = sc->sample->regs[UNWIND_REG_SP];
	for (;;) {
		uint64_t ip = 0, sp = 0;
		bool after_signal = false;
		int r = step(sc, c, &ip, &sp, &after_signal);
		if (r == 0) {
			*status = UNWIND_COMPLETE;
			return n;
		}
		if (r < 0 || !advances(ip, sp, prev_ip, prev_sp, after_signal) || n == max) {
			*status = UNWIND_TRUNCATED;
			return n;
		}
		frames[n++] = (struct unwind_frame){ .ip = ip, .flags = after_signal ? UNWIND_FRAME_SIGNAL : 0 };
		prev_ip = ip;
		prev_sp = sp;
	}
}

static void sample_begin(struct unwind_libunwind *u, const struct unwind_process *proc,
			 const struct unwind_sample *sample)
{
	/* Region and recent-file caches describe one process's address space: start empty for each sample. */
	u->sc = (struct sample_ctx){ .u = u, .proc = proc, .sample = sample, .regs = sample->regs };
}

int unwind_libunwind_unwind(struct unwind_libunwind *u, const struct unwind_process *proc,
			    const struct unwind_sample *sample, struct unwind_frame *frames, size_t max,
			    enum unwind_status *status)
{
	struct unwind_module leaf;
	unw_cursor_t c;
	*status = UNWIND_TRUNCATED;
	if (max == 0)
		return 0;
	frames[0] = (struct unwind_frame){ .ip = sample->regs[UNWIND_REG_IP] };
	if (proc->find_module(proc->ctx, frames[0].ip, &leaf) < 0) {
		*status = UNWIND_UNKNOWN_LEAF;
		return 1;
	}
	sample_begin(u, proc, sample);
	if (unw_init_remote(&c, u->as, &u->sc) < 0)
		return 1;
	size_t n = walk(&u->sc, &c, frames, max, status);
	if (u->sc.err)
		return u->sc.err;
	return (int)n;
}

/* Step c once and store the caller's IP, SP and BP in caller[]. Returns step()'s result. */
static int step_into(struct sample_ctx *sc, unw_cursor_t *c, uint64_t caller[UNWIND_NREGS], bool *caller_signal)
{
	uint64_t ip = 0, sp = 0;
	unw_word_t bp = 0;
	int r = step(sc, c, &ip, &sp, caller_signal);
	if (r <= 0)
		return r;
	if (unw_get_reg(c, UNW_X86_64_RBP, &bp) < 0)
		bp = 0;
	memset(caller, 0, UNWIND_NREGS * sizeof(*caller));
	caller[UNWIND_REG_IP] = ip;
	caller[UNWIND_REG_SP] = sp;
	caller[UNWIND_REG_BP] = bp;
	return 1;
}

/*
 * Walk from the sampled frame to the one at (ip, sp): libunwind then knows every callee-saved register there
 * (a CFA based on rbx, say), which a fast unwinder tracking SP, FP and IP does not. Returns 1 positioned on it.
 */
static int seek_frame(struct sample_ctx *sc, unw_cursor_t *c, uint64_t ip, uint64_t sp)
{
	for (unsigned n = 0; n < UNWIND_MAX_FRAMES; n++) {
		unw_word_t cip, csp;
		bool after_signal;
		uint64_t nip, nsp;
		if (unw_get_reg(c, UNW_REG_IP, &cip) < 0 || unw_get_reg(c, UNW_REG_SP, &csp) < 0)
			return 0;
		if (cip == ip && csp == sp)
			return 1;
		if (csp > sp || step(sc, c, &nip, &nsp, &after_signal) <= 0)
			return 0;
	}
	return 0;
}

/*
 * One step from a frame in the middle of a sample. regs holds that frame's IP, SP and BP (others may be 0);
 * exact_ip says its IP is where it was interrupted rather than a return address. Returns 1 with the caller's IP,
 * SP and BP in caller[] and *caller_signal set when the caller was interrupted by a signal, 0 when the frame is
 * the outermost one, or a negative errno when it cannot step.
 */
static int libunwind_step(struct unwind_libunwind *u, const struct unwind_process *proc,
			  const struct unwind_sample *sample, const uint64_t regs[UNWIND_NREGS], bool exact_ip,
			  uint64_t caller[UNWIND_NREGS], bool *caller_signal)
{
	unw_cursor_t c;
	uint64_t own[UNWIND_NREGS];
	int r;

	*caller_signal = false;
	sample_begin(u, proc, sample);
	if (unw_init_remote(&c, u->as, &u->sc) == 0 &&
	    seek_frame(&u->sc, &c, regs[UNWIND_REG_IP], regs[UNWIND_REG_SP])) {
		r = step_into(&u->sc, &c, caller, caller_signal);
		return u->sc.err ? u->sc.err : r < 0 ? -ENOENT : r;
	}
	/* The reference walk does not reach that frame: start from the registers known there. */
	memcpy(own, regs, sizeof(own));
	if (!exact_ip)
		own[UNWIND_REG_IP]--; /* libunwind takes a first IP as exact; a return address's rule is the call's */
	sample_begin(u, proc, sample);
	u->sc.regs = own;
	if (unw_init_remote(&c, u->as, &u->sc) < 0)
		return -EINVAL;
	r = step_into(&u->sc, &c, caller, caller_signal);
	return u->sc.err ? u->sc.err : r < 0 ? -ENOENT : r;
}

int unwind_libunwind_deltas_fallback(void *ctx, const struct unwind_process *proc, const struct unwind_sample *sample,
				     const struct unwind_module *mod, const struct unwind_deltas_regs *frame,
				     struct unwind_deltas_regs *caller)
{
	uint64_t regs[UNWIND_NREGS], out[UNWIND_NREGS];
	bool signal;
	(void)mod;
	for (int i = 0; i < UNWIND_NREGS; i++)
		regs[i] = frame->known & UNWIND_DELTAS_REG(i) ? frame->regs[i] : 0;
	int r = libunwind_step(ctx, proc, sample, regs, frame->exact_ip, out, &signal);
	if (r <= 0)
		return r == 0 ? UNWIND_DELTAS_FALLBACK_END : r;
	memset(caller, 0, sizeof(*caller));
	memcpy(caller->regs, out, sizeof(out));
	caller->known = UNWIND_DELTAS_REG(UNWIND_REG_IP) | UNWIND_DELTAS_REG(UNWIND_REG_SP) |
			UNWIND_DELTAS_REG(UNWIND_REG_BP);
	caller->exact_ip = signal;
	return 0;
}

/* ---- lifetime ---- */

int unwind_libunwind_new(struct unwind_libunwind **out)
{
	unw_accessors_t acc = {
		.find_proc_info = find_proc_info,
		.put_unwind_info = put_unwind_info,
		.get_dyn_info_list_addr = get_dyn_info_list_addr,
		.access_mem = access_mem,
		.access_reg = access_reg,
		.access_fpreg = access_fpreg,
		.resume = resume,
	};
	struct unwind_libunwind *u = calloc(1, sizeof(*u));
	*out = NULL;
	if (!u)
		return -ENOMEM;
	struct file_cache_hooks hooks = { file_info_make, file_info_release, u };
	u->as = unw_create_addr_space(&acc, 0);
	if (!u->as || unw_set_caching_policy(u->as, UNW_CACHE_NONE) < 0 || file_cache_new(&hooks, &u->files) < 0) {
		if (u->as)
			unw_destroy_addr_space(u->as);
		free(u);
		return -ENOMEM;
	}
	*out = u;
	return 0;
}

void unwind_libunwind_forget(struct unwind_libunwind *u, const void *cache_key)
{
	if (u)
		file_cache_forget(u->files, cache_key);
}

void unwind_libunwind_free(struct unwind_libunwind *u)
{
	if (!u)
		return;
	file_cache_free(u->files);
	free(u->slots);
	unw_destroy_addr_space(u->as);
	free(u);
}
