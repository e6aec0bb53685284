/*
 * gopclntab.c — read Go's function table. See gopclntab.h; the layouts follow the Go runtime's own reader
 * (runtime/symtab.go) for each version.
 *
 * Layout of a table, as Go's linker writes it (offsets from its header, all read through a bounded reader,
 * byte_reader.h, and checked against the table and its regions):
 *   header   magic, pad, quantum, pointer size, then words: nfunc, [nfiles, [textStart,] region offsets]
 *   names    NUL-terminated function names            (Go >= 1.16; the whole table before)
 *   cutab    u32 file-name offsets per compilation unit (Go >= 1.16)
 *   files    NUL-terminated file names                 (Go 1.2: a u32 count and u32 offsets)
 *   pctab    the pc-value tables                       (Go >= 1.16; the whole table before)
 *   funcs    the function table (nfunc {entry, funcoff} pairs and the end address), then the _func records
 */
#include "unwind/gopclntab.h"

#include "unwind/byte_reader.h"
#include "src/base/bsearch.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define GP_MAGIC_12 0xfffffffbu
#define GP_MAGIC_116 0xfffffffau
#define GP_MAGIC_118 0xfffffff0u
#define GP_MAGIC_120 0xfffffff1u

/* PCDATA / FUNCDATA slots of the inline tree (Go >= 1.16; older releases numbered them differently). */
#define GP_PCDATA_INLTREE 2
#define GP_FUNCDATA_INLTREE 3

#define GP_NO_FUNCDATA 0xffffffffu

/* moduledata word indexes: text (Go >= 1.16) and gofunc (Go 1.18-1.19, Go >= 1.20 which added covctrs). */
#define GP_MD_TEXT 22
#define GP_MD_GOFUNC_118 38
#define GP_MD_GOFUNC_120 40

#ifndef R_X86_64_RELATIVE
#define R_X86_64_RELATIVE 8
#endif
#ifndef R_AARCH64_RELATIVE
#define R_AARCH64_RELATIVE 1027
#endif

/* A loaded piece of the file: an allocated section, or a PT_LOAD segment when there are no sections. */
struct gp_block {
	uint64_t va, size;
	Elf_Scn *scn;		/* NULL: a segment, read as a raw chunk at off */
	uint64_t off;
	const uint8_t *bytes;	/* NULL until first used */
	size_t avail;		/* bytes present in the file (<= size) */
	bool exec, write, loaded;
};

/* A RELATIVE relocation of a position-independent file: the word at off holds addend once loaded. */
struct gp_reloc {
	uint64_t off, addend;
};

/* A byte range [off, end) inside the table. */
struct gp_region {
	size_t off, end;
};

struct gopclntab {
	Elf *elf;
	uint16_t machine;
	struct gp_block *blocks;
	size_t nblocks;
	struct gp_reloc *relocs;	/* sorted by off; only for ET_DYN files */
	size_t nrelocs;

	const uint8_t *tab;
	size_t size;
	struct byte_reader r;		/* over tab, in the table's byte order */
	uint64_t va;
	enum gopclntab_version ver;
	bool be;
	unsigned quantum, ptrsize;
	size_t nfunc;
	struct gp_region names, cutab, files, pctab, funcs;
	size_t functab, ftab_stride;
	size_t filetab, nfiletab;	/* Go 1.2 file table */
	uint64_t text_start;		/* Go >= 1.18: base of entry offsets */
	uint64_t *entries;		/* Go < 1.18: nfunc + 1 absolute entries, relocations applied */
	uint64_t gofunc;		/* Go >= 1.18: base of funcdata offsets */
	bool have_gofunc;
};

/* Symbols of interest from .symtab. */
enum gp_sym { GP_SYM_PCLNTAB, GP_SYM_EPCLNTAB, GP_SYM_TEXT, GP_SYM_MODULEDATA, GP_SYM_GOFUNC, GP_NSYMS };

struct gp_syms {
	uint64_t va[GP_NSYMS];
	bool have[GP_NSYMS];
};

/* A decoded _func record. */
struct gp_func {
	uint64_t entry, end;
	int32_t nameoff;
	uint32_t pcsp, pcfile, pcln, npcdata, cuoff;
	uint8_t funcid, flag, nfuncdata;
	size_t pcdata;		/* table offset of pcdata[0] (u32 each) */
	size_t funcdata;	/* table offset of funcdata[0] */
};

/* ---- raw reads -------------------------------------------------------------------------------------------- */

/* n bytes (2, 4 or 8) at table offset off, in the table's byte order. */
static bool gp_rd(const struct gopclntab *t, size_t off, unsigned n, uint64_t *v)
{
	return byte_reader_uint_at(&t->r, off, n, v);
}

static bool gp_u32(const struct gopclntab *t, size_t off, uint32_t *v)
{
	return byte_reader_u32_at(&t->r, off, v);
}

/* ---- the file: blocks, relocations, symbols ----------------------------------------------------------------- */

static const uint8_t *gp_block_bytes(const struct gopclntab *t, struct gp_block *b)
{
	if (!b->loaded) {
		Elf_Data *d = b->scn ? elf_getdata(b->scn, NULL)
				     : elf_getdata_rawchunk(t->elf, (int64_t)b->off, (size_t)b->size, ELF_T_BYTE);
		b->loaded = true;
		if (d && d->d_buf) {
			b->bytes = d->d_buf;
			b->avail = d->d_size < b->size ? d->d_size : (size_t)b->size;
		}
	}
	return b->bytes;
}

static struct gp_block *gp_block_at(const struct gopclntab *t, uint64_t va)
{
	for (size_t i = 0; i < t->nblocks; i++)
		if (va >= t->blocks[i].va && va - t->blocks[i].va < t->blocks[i].size)
			return &t->blocks[i];
	return NULL;
}

/* A reader over the loaded bytes of block b, in the table's byte order. False when the file holds none. */
static bool gp_block_reader(const struct gopclntab *t, struct gp_block *b, struct byte_reader *r)
{
	if (!gp_block_bytes(t, b))
		return false;
	byte_reader_init(r, b->bytes, b->avail);
	r->va = b->va;
	r->big_endian = t->be;
	return true;
}

/* A reader over the len bytes of the file at ELF address va; false when they are not all in one loaded block. */
static bool gp_va_reader(const struct gopclntab *t, uint64_t va, size_t len, struct byte_reader *r)
{
	struct gp_block *b = gp_block_at(t, va);
	if (!b || !gp_block_bytes(t, b) || va - b->va > b->avail || b->avail - (va - b->va) < len)
		return false;
	byte_reader_init(r, b->bytes + (va - b->va), len);
	r->va = va;
	r->big_endian = t->be;
	return true;
}

static bool gp_reloc_at_or_after(const void *relocs, size_t i, const void *va)
{
	return ((const struct gp_reloc *)relocs)[i].off >= *(const uint64_t *)va;
}

static const struct gp_reloc *gp_reloc_at(const struct gopclntab *t, uint64_t va)
{
	size_t i = bsearch_first(t->relocs, t->nrelocs, gp_reloc_at_or_after, &va);
	return i < t->nrelocs && t->relocs[i].off == va ? &t->relocs[i] : NULL;
}

/* A pointer-sized word at ELF address va as the loaded program sees it (its RELATIVE relocation applied). */
static bool gp_va_word(const struct gopclntab *t, uint64_t va, uint64_t *v)
{
	const struct gp_reloc *r = gp_reloc_at(t, va);
	if (r) {
		*v = r->addend;
		return true;
	}
	struct byte_reader w;
	return gp_va_reader(t, va, t->ptrsize, &w) && byte_reader_uint(&w, t->ptrsize, v);
}

/* A pointer-sized word at table offset off, relocated when the table is loaded at a known address. */
static bool gp_tab_word(const struct gopclntab *t, size_t off, uint64_t *v)
{
	if (t->va && t->nrelocs) {
		const struct gp_reloc *r = gp_reloc_at(t, t->va + off);
		if (r) {
			*v = r->addend;
			return off <= t->size && t->size - off >= t->ptrsize;
		}
	}
	return gp_rd(t, off, t->ptrsize, v);
}

static int gp_push_block(struct gopclntab *t, size_t *cap, const struct gp_block *b)
{
	if (t->nblocks == *cap) {
		size_t n = *cap ? *cap * 2 : 32;
		struct gp_block *nb = realloc(t->blocks, n * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		t->blocks = nb;
		*cap = n;
	}
	t->blocks[t->nblocks++] = *b;
	return 0;
}

/* Allocated sections with file contents; PT_LOAD segments when the file has no section headers. */
static int gp_collect_blocks(struct gopclntab *t)
{
	size_t cap = 0, n;
	for (Elf_Scn *scn = elf_nextscn(t->elf, NULL); scn; scn = elf_nextscn(t->elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || sh.sh_type == SHT_NOBITS || !sh.sh_size)
			continue;
		struct gp_block b = { .va = sh.sh_addr, .size = sh.sh_size, .scn = scn,
				      .exec = sh.sh_flags & SHF_EXECINSTR, .write = sh.sh_flags & SHF_WRITE };
		if (gp_push_block(t, &cap, &b) < 0)
			return -ENOMEM;
	}
	if (t->nblocks || elf_getphdrnum(t->elf, &n) != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(t->elf, (int)i, &ph) || ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		struct gp_block b = { .va = ph.p_vaddr, .size = ph.p_filesz, .off = ph.p_offset,
				      .exec = ph.p_flags & PF_X, .write = ph.p_flags & PF_W };
		if (gp_push_block(t, &cap, &b) < 0)
			return -ENOMEM;
	}
	return 0;
}

static const char *gp_scn_name(Elf *elf, Elf_Scn *scn)
{
	size_t shstrndx;
	GElf_Shdr sh;
	if (!scn || elf_getshdrstrndx(elf, &shstrndx) != 0 || !gelf_getshdr(scn, &sh))
		return NULL;
	return elf_strptr(elf, shstrndx, sh.sh_name);
}

static Elf_Scn *gp_find_scn(Elf *elf, const char *name)
{
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		const char *n = gp_scn_name(elf, scn);
		if (n && strcmp(n, name) == 0)
			return scn;
	}
	return NULL;
}

/* Whether a PT_NOTE segment holds Go's build-id note (owner "Go", type 4). */
static bool gp_has_go_note(Elf *elf)
{
	size_t n;
	if (elf_getphdrnum(elf, &n) != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;
		while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0)
			if (nh.n_type == 4 && nh.n_namesz == 3 && memcmp((char *)d->d_buf + name_off, "Go", 3) == 0)
				return true;
	}
	return false;
}

/* Whether the file says it was built by Go: only then is a scan for the table worth its cost. */
static bool gp_is_go(Elf *elf)
{
	static const char *const marks[] = { ".go.buildinfo", ".note.go.buildid", ".gosymtab", ".go.module" };
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
		if (gp_find_scn(elf, marks[i]))
			return true;
	return gp_has_go_note(elf);
}

static int gp_sym_kind(const char *name)
{
	static const char *const names[][2] = {
		[GP_SYM_PCLNTAB] = { "runtime.pclntab", NULL },
		[GP_SYM_EPCLNTAB] = { "runtime.epclntab", NULL },
		[GP_SYM_TEXT] = { "runtime.text", NULL },
		[GP_SYM_MODULEDATA] = { "runtime.firstmoduledata", NULL },
		[GP_SYM_GOFUNC] = { "go:func.*", "go.func.*" },
	};
	for (int k = 0; k < GP_NSYMS; k++)
		for (int j = 0; j < 2; j++)
			if (names[k][j] && strcmp(name, names[k][j]) == 0)
				return k;
	return -1;
}

/* The few runtime symbols the table's interpretation can use, when .symtab survived. */
static void gp_read_syms(Elf *elf, struct gp_syms *s)
{
	memset(s, 0, sizeof(*s));
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = d ? d->d_size / sh.sh_entsize : 0;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym sym;
			const char *name;
			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)) || name[0] == '\0')
				continue;
			int k = gp_sym_kind(name);
			if (k >= 0 && !s->have[k]) {
				s->have[k] = true;
				s->va[k] = sym.st_value;
			}
		}
	}
}

static int gp_reloc_cmp(const void *a, const void *b)
{
	const struct gp_reloc *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* RELATIVE relocations of a position-independent file: the on-disk words they patch may be zero. */
static int gp_read_relocs(struct gopclntab *t)
{
	GElf_Ehdr eh;
	size_t cap = 0;
	if (!gelf_getehdr(t->elf, &eh) || eh.e_type != ET_DYN)
		return 0;
	for (Elf_Scn *scn = elf_nextscn(t->elf, NULL); scn; scn = elf_nextscn(t->elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = d ? d->d_size / sh.sh_entsize : 0;
		for (size_t i = 0; i < n; i++) {
			GElf_Rela r;
			unsigned type;
			if (!gelf_getrela(d, (int)i, &r))
				continue;
			type = (unsigned)GELF_R_TYPE(r.r_info);
			if (type != R_X86_64_RELATIVE && type != R_AARCH64_RELATIVE)
				continue;
			if (t->nrelocs == cap) {
				cap = cap ? cap * 2 : 1024;
				struct gp_reloc *nr = realloc(t->relocs, cap * sizeof(*nr));
				if (!nr)
					return -ENOMEM;
				t->relocs = nr;
			}
			t->relocs[t->nrelocs++] = (struct gp_reloc){ r.r_offset, (uint64_t)r.r_addend };
		}
	}
	if (t->nrelocs > 1)
		qsort(t->relocs, t->nrelocs, sizeof(*t->relocs), gp_reloc_cmp);
	return 0;
}

/* ---- locating the table ----------------------------------------------------------------------------------- */

static bool gp_magic_version(uint32_t magic, enum gopclntab_version *ver)
{
	switch (magic) {
	case GP_MAGIC_12: *ver = GOPCLNTAB_GO12; return true;
	case GP_MAGIC_116: *ver = GOPCLNTAB_GO116; return true;
	case GP_MAGIC_118: *ver = GOPCLNTAB_GO118; return true;
	case GP_MAGIC_120: *ver = GOPCLNTAB_GO120; return true;
	default: return false;
	}
}

/* The version of the table whose magic is in the 4 bytes at off of r, in r's byte order. */
static bool gp_magic_at(const struct byte_reader *r, size_t off, enum gopclntab_version *ver)
{
	uint32_t magic;
	return byte_reader_u32_at(r, off, &magic) && gp_magic_version(magic, ver);
}

/*
 * Whether the 8 bytes at off of r look like a table header: a known magic (in either byte order), zero padding, a
 * sane quantum and word size. Returns 0 (no), 1 (a little-endian table) or 2 (big-endian).
 */
static int gp_header_like(struct byte_reader r, size_t off)
{
	enum gopclntab_version v;
	uint64_t rest;
	r.big_endian = false;
	if (!byte_reader_uint_at(&r, off + 4, 4, &rest))
		return 0;
	uint8_t quantum = (uint8_t)(rest >> 16), ptrsize = (uint8_t)(rest >> 24);
	if ((rest & 0xffff) != 0 || (quantum != 1 && quantum != 2 && quantum != 4) || (ptrsize != 4 && ptrsize != 8))
		return 0;
	if (gp_magic_at(&r, off, &v))
		return 1;
	r.big_endian = true;
	return gp_magic_at(&r, off, &v) ? 2 : 0;
}

static void gp_set_table(struct gopclntab *t, const uint8_t *p, size_t size, uint64_t va)
{
	t->tab = p;
	t->size = size;
	t->va = va;
	byte_reader_init(&t->r, p, size);
	t->r.va = va;
}

static bool gp_from_section(struct gopclntab *t)
{
	static const char *const names[] = { ".gopclntab", ".data.rel.ro.gopclntab" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		Elf_Scn *scn = gp_find_scn(t->elf, names[i]);
		GElf_Shdr sh;
		Elf_Data *d;
		if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !(d = elf_getdata(scn, NULL)) ||
		    !d->d_buf || d->d_size < 8)
			continue;
		gp_set_table(t, d->d_buf, d->d_size, (sh.sh_flags & SHF_ALLOC) ? sh.sh_addr : 0);
		return true;
	}
	return false;
}

static bool gp_from_symbol(struct gopclntab *t, const struct gp_syms *s)
{
	if (!s->have[GP_SYM_PCLNTAB])
		return false;
	uint64_t va = s->va[GP_SYM_PCLNTAB];
	struct gp_block *b = gp_block_at(t, va);
	if (!b || !gp_block_bytes(t, b) || va - b->va >= b->avail)
		return false;
	size_t size = b->avail - (size_t)(va - b->va);
	if (s->have[GP_SYM_EPCLNTAB] && s->va[GP_SYM_EPCLNTAB] > va && s->va[GP_SYM_EPCLNTAB] - va < size)
		size = (size_t)(s->va[GP_SYM_EPCLNTAB] - va);
	gp_set_table(t, b->bytes + (va - b->va), size, va);
	return true;
}

static int gp_parse(struct gopclntab *t);

/* Scan read-only and relro data for a header that parses. Headers are at least 4-byte aligned. */
static bool gp_from_scan(struct gopclntab *t)
{
	for (size_t i = 0; i < t->nblocks; i++) {
		struct gp_block *b = &t->blocks[i];
		struct byte_reader r;
		if (b->exec || !gp_block_reader(t, b, &r) || b->avail < 16)
			continue;
		for (size_t off = (size_t)(-b->va & 3); off <= b->avail - 16; off += 4) {
			/* The magic's second byte is 0xff in either byte order: most words fail right there. */
			if (b->bytes[off + 1] != 0xff || !gp_header_like(r, off))
				continue;
			gp_set_table(t, b->bytes + off, b->avail - off, b->va + off);
			if (gp_parse(t) == 0)
				return true;
			free(t->entries);
			t->entries = NULL;
		}
	}
	return false;
}

/* ---- the header and the function table ---------------------------------------------------------------------- */

static int gp_parse_prefix(struct gopclntab *t)
{
	int order = gp_header_like(t->r, 0);
	if (t->size < 16 || !order)
		return -EBADMSG;
	t->be = t->r.big_endian = order == 2;
	gp_magic_at(&t->r, 0, &t->ver);
	t->quantum = t->tab[6];
	t->ptrsize = t->tab[7];
	return 0;
}

/* Go 1.2: nfunc, then the function table right after it, then a u32 offset of the file table. */
static int gp_parse_go12(struct gopclntab *t)
{
	uint64_t nfunc, filetab;
	uint32_t nfiles;
	size_t ps = t->ptrsize;
	t->names = t->pctab = t->funcs = (struct gp_region){ 0, t->size };
	t->functab = 8 + ps;
	t->ftab_stride = 2 * ps;
	if (!gp_rd(t, 8, ps, &nfunc) || nfunc > (t->size - t->functab) / t->ftab_stride)
		return -EBADMSG;
	t->nfunc = (size_t)nfunc;
	size_t ftab_end = t->functab + t->nfunc * t->ftab_stride + ps;
	uint32_t off;
	if (!gp_u32(t, ftab_end, &off))
		return -EBADMSG;
	filetab = off;
	if (!gp_u32(t, (size_t)filetab, &nfiles) || nfiles > (t->size - filetab) / 4)
		return -EBADMSG;
	t->filetab = (size_t)filetab;
	t->nfiletab = nfiles;
	t->files = (struct gp_region){ 0, t->size };
	return 0;
}

/* Go >= 1.16: nfunc, nfiles, [textStart,] then offsets of the names, cutab, files, pctab and funcs regions. */
static int gp_parse_go116(struct gopclntab *t)
{
	size_t ps = t->ptrsize, nwords = t->ver == GOPCLNTAB_GO116 ? 7 : 8;
	uint64_t w[8];
	for (size_t i = 0; i < nwords; i++)
		if (!gp_rd(t, 8 + i * ps, (unsigned)ps, &w[i]))
			return -EBADMSG;
	const uint64_t *off = &w[nwords - 5];
	uint64_t prev = 8 + nwords * ps;
	for (int i = 0; i < 5; i++) {
		if (off[i] < prev || off[i] >= t->size)
			return -EBADMSG;
		prev = off[i];
	}
	t->names = (struct gp_region){ (size_t)off[0], (size_t)off[1] };
	t->cutab = (struct gp_region){ (size_t)off[1], (size_t)off[2] };
	t->files = (struct gp_region){ (size_t)off[2], (size_t)off[3] };
	t->pctab = (struct gp_region){ (size_t)off[3], (size_t)off[4] };
	t->funcs = (struct gp_region){ (size_t)off[4], t->size };
	t->functab = t->funcs.off;
	t->ftab_stride = t->ver == GOPCLNTAB_GO116 ? 2 * ps : 8;
	size_t entsize = t->ver == GOPCLNTAB_GO116 ? ps : 4;
	size_t room = t->funcs.end - t->funcs.off;
	if (room < entsize || w[0] > (room - entsize) / t->ftab_stride)
		return -EBADMSG;
	t->nfunc = (size_t)w[0];
	return 0;
}

/* Go < 1.18: absolute entry addresses, relocated, checked to ascend. */
static int gp_load_entries(struct gopclntab *t)
{
	t->entries = malloc((t->nfunc + 1) * sizeof(*t->entries));
	if (!t->entries)
		return -ENOMEM;
	for (size_t i = 0; i <= t->nfunc; i++) {
		if (!gp_tab_word(t, t->functab + i * t->ftab_stride, &t->entries[i]))
			return -EBADMSG;
		if (i && t->entries[i] < t->entries[i - 1])
			return -EBADMSG;
	}
	return 0;
}

/* Go >= 1.18: entry offsets must ascend; the last one is the end of the last function. */
static int gp_check_entry_offsets(const struct gopclntab *t)
{
	uint32_t prev = 0, v;
	for (size_t i = 0; i <= t->nfunc; i++) {
		if (!gp_u32(t, t->functab + i * t->ftab_stride, &v) || v < prev)
			return -EBADMSG;
		prev = v;
	}
	return 0;
}

static uint64_t gp_entry(const struct gopclntab *t, size_t i)
{
	uint32_t off = 0;
	if (t->entries)
		return t->entries[i];
	gp_u32(t, t->functab + i * t->ftab_stride, &off);	/* checked by gp_check_entry_offsets */
	return t->text_start + off;
}

/* Parse a table already placed in t->tab: header, regions, function table. */
static int gp_parse(struct gopclntab *t)
{
	int err = gp_parse_prefix(t);
	if (err == 0)
		err = t->ver == GOPCLNTAB_GO12 ? gp_parse_go12(t) : gp_parse_go116(t);
	if (err == 0 && t->nfunc == 0)
		err = -ENOENT;
	if (err == 0)
		err = t->ver < GOPCLNTAB_GO118 ? gp_load_entries(t) : gp_check_entry_offsets(t);
	return err;
}

/* ---- text start and gofunc (Go >= 1.18) ----------------------------------------------------------------------- */

/* Whether [lo, hi] lies in one executable block: where function entries must be. */
static bool gp_in_exec(const struct gopclntab *t, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < t->nblocks; i++) {
		const struct gp_block *b = &t->blocks[i];
		if (b->exec && lo >= b->va && hi >= lo && hi - b->va <= b->size)
			return true;
	}
	return false;
}

/* Whether md is the address of the runtime's moduledata for this table: it points at the header and names. */
static bool gp_is_moduledata(const struct gopclntab *t, uint64_t md)
{
	uint64_t hdr, names, cutab;
	return gp_va_word(t, md, &hdr) && hdr == t->va && gp_va_word(t, md + t->ptrsize, &names) &&
	       names == t->va + t->names.off && gp_va_word(t, md + 4 * t->ptrsize, &cutab) &&
	       cutab == t->va + t->cutab.off;
}

/* Find moduledata by a word that holds the header's address, in writable data or among the relocations. */
static bool gp_scan_moduledata(const struct gopclntab *t, uint64_t *md)
{
	for (size_t i = 0; i < t->nrelocs; i++)
		if (t->relocs[i].addend == t->va && gp_is_moduledata(t, t->relocs[i].off)) {
			*md = t->relocs[i].off;
			return true;
		}
	for (size_t i = 0; i < t->nblocks; i++) {
		struct gp_block *b = &t->blocks[i];
		struct byte_reader r;
		uint64_t word;
		if (b->exec || !b->write || !gp_block_reader(t, b, &r) || b->avail < t->ptrsize)
			continue;
		for (size_t off = (size_t)(-b->va & (t->ptrsize - 1)); off <= b->avail - t->ptrsize; off += t->ptrsize)
			if (byte_reader_uint_at(&r, off, t->ptrsize, &word) && word == t->va &&
			    gp_is_moduledata(t, b->va + off)) {
				*md = b->va + off;
				return true;
			}
	}
	return false;
}

static bool gp_find_moduledata(const struct gopclntab *t, const struct gp_syms *s, uint64_t *md)
{
	GElf_Shdr sh;
	Elf_Scn *scn;
	if (!t->va)
		return false;
	if (s->have[GP_SYM_MODULEDATA] && gp_is_moduledata(t, s->va[GP_SYM_MODULEDATA])) {
		*md = s->va[GP_SYM_MODULEDATA];
		return true;
	}
	if ((scn = gp_find_scn(t->elf, ".go.module")) && gelf_getshdr(scn, &sh) && gp_is_moduledata(t, sh.sh_addr)) {
		*md = sh.sh_addr;
		return true;
	}
	return gp_scan_moduledata(t, md);
}

static bool gp_text_ok(const struct gopclntab *t, uint64_t base)
{
	uint32_t first = 0, last = 0;
	gp_u32(t, t->functab, &first);
	gp_u32(t, t->functab + t->nfunc * t->ftab_stride, &last);
	return base && gp_in_exec(t, base + first, base + last);
}

/* The base of entry offsets: runtime.text, moduledata.text, the header's textStart, the .text section. */
static int gp_find_text_start(struct gopclntab *t, const struct gp_syms *s, bool have_md, uint64_t md)
{
	uint64_t cand[4];
	size_t n = 0;
	GElf_Shdr sh;
	Elf_Scn *text = gp_find_scn(t->elf, ".text");
	if (s->have[GP_SYM_TEXT])
		cand[n++] = s->va[GP_SYM_TEXT];
	if (have_md && gp_va_word(t, md + GP_MD_TEXT * t->ptrsize, &cand[n]))
		n++;
	if (gp_tab_word(t, 8 + 2 * t->ptrsize, &cand[n]))
		n++;
	if (text && gelf_getshdr(text, &sh))
		cand[n++] = sh.sh_addr;
	for (size_t i = 0; i < n; i++)
		if (gp_text_ok(t, cand[i])) {
			t->text_start = cand[i];
			return 0;
		}
	return -EBADMSG;
}

/* moduledata.gofunc, checked against its neighbours types <= etypes and rodata <= gofunc. */
static bool gp_md_gofunc(const struct gopclntab *t, uint64_t md, unsigned idx, uint64_t *gofunc)
{
	uint64_t types, etypes, rodata, ps = t->ptrsize;
	const struct gp_block *b;
	if (!gp_va_word(t, md + idx * ps, gofunc) || !gp_va_word(t, md + (idx - 1) * ps, &rodata) ||
	    !gp_va_word(t, md + (idx - 3) * ps, &types) || !gp_va_word(t, md + (idx - 2) * ps, &etypes))
		return false;
	b = gp_block_at(t, *gofunc);
	return b && !b->exec && types <= etypes && rodata <= *gofunc;
}

static void gp_find_gofunc(struct gopclntab *t, const struct gp_syms *s, bool have_md, uint64_t md)
{
	unsigned first = t->ver == GOPCLNTAB_GO118 ? GP_MD_GOFUNC_118 : GP_MD_GOFUNC_120;
	unsigned second = first == GP_MD_GOFUNC_118 ? GP_MD_GOFUNC_120 : GP_MD_GOFUNC_118;
	if (s->have[GP_SYM_GOFUNC]) {
		t->gofunc = s->va[GP_SYM_GOFUNC];
		t->have_gofunc = true;
	} else if (have_md) {
		t->have_gofunc = gp_md_gofunc(t, md, first, &t->gofunc) || gp_md_gofunc(t, md, second, &t->gofunc);
	}
}

/* ---- open / free --------------------------------------------------------------------------------------------- */

/* The section, else the symbol, else the scan. Files that are not Go cost a look at their section names. */
static int gp_locate(struct gopclntab *t, struct gp_syms *s)
{
	bool section = gp_from_section(t);
	if (!section && !gp_is_go(t->elf))
		return -ENOENT;
	int err = gp_collect_blocks(t);
	if (err < 0)
		return err;
	gp_read_syms(t->elf, s);
	if (section || gp_from_symbol(t, s))
		return gp_parse(t);
	return gp_from_scan(t) ? 0 : -ENOENT;
}

static int gp_open(struct gopclntab *t, Elf *elf)
{
	GElf_Ehdr eh;
	struct gp_syms syms;
	uint64_t md = 0;
	bool have_md;
	int err;
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh))
		return -ENOENT;
	t->elf = elf;
	t->machine = eh.e_machine;
	if ((err = gp_locate(t, &syms)) < 0 || (err = gp_read_relocs(t)) < 0)
		return err;
	if (t->entries && t->nrelocs) {
		free(t->entries);	/* reread them with their relocations applied */
		t->entries = NULL;
		if ((err = gp_load_entries(t)) < 0)
			return err;
	}
	if (t->ver < GOPCLNTAB_GO118)
		return 0;
	have_md = gp_find_moduledata(t, &syms, &md);
	gp_find_gofunc(t, &syms, have_md, md);
	return gp_find_text_start(t, &syms, have_md, md);
}

int gopclntab_open(Elf *elf, struct gopclntab **out)
{
	struct gopclntab *t = calloc(1, sizeof(*t));
	*out = NULL;
	if (!t)
		return -ENOMEM;
	int err = gp_open(t, elf);
	if (err < 0) {
		gopclntab_free(t);
		return err;
	}
	*out = t;
	return 0;
}

void gopclntab_free(struct gopclntab *t)
{
	if (!t)
		return;
	free(t->entries);
	free(t->relocs);
	free(t->blocks);
	free(t);
}

enum gopclntab_version gopclntab_version(const struct gopclntab *t)
{
	return t->ver;
}

uint64_t gopclntab_address(const struct gopclntab *t)
{
	return t->va;
}

size_t gopclntab_func_count(const struct gopclntab *t)
{
	return t->nfunc;
}

void gopclntab_text_range(const struct gopclntab *t, uint64_t *start, uint64_t *end)
{
	*start = gp_entry(t, 0);
	*end = gp_entry(t, t->nfunc);
}

static bool gp_entry_after(const void *t, size_t i, const void *va)
{
	return gp_entry(t, i) > *(const uint64_t *)va;
}

int gopclntab_find_func(const struct gopclntab *t, uint64_t va, size_t *index)
{
	if (va < gp_entry(t, 0) || va >= gp_entry(t, t->nfunc))
		return -ENOENT;
	/* Entries ascend (checked at open) and the first is at or below va: the function is the one before the
	 * first entry past va, which exists among 1..nfunc-1 or is the end, nfunc. */
	*index = bsearch_first(t, t->nfunc, gp_entry_after, &va) - 1;
	return 0;
}

/* ---- _func records ------------------------------------------------------------------------------------------ */

/* Size of the fixed part of a _func record. */
static size_t gp_func_fixed(const struct gopclntab *t)
{
	switch (t->ver) {
	case GOPCLNTAB_GO12: return t->ptrsize + 32;
	case GOPCLNTAB_GO116: return t->ptrsize + 36;
	case GOPCLNTAB_GO118: return 40;
	default: return 44;
	}
}

/*
 * The fields after the entry of the record at table offset off: nameoff, args, deferreturn, pcsp, pcfile, pcln,
 * npcdata[, cuOffset[, startLine]], funcID, flag, pad, nfuncdata. False when the table does not hold them.
 */
static bool gp_decode_func_fields(const struct gopclntab *t, size_t off, struct gp_func *f)
{
	struct byte_reader r = t->r;
	uint32_t nameoff;
	if (!byte_reader_seek(&r, off) || !byte_reader_u32(&r, &nameoff) || !byte_reader_skip(&r, 8) ||
	    !byte_reader_u32(&r, &f->pcsp) || !byte_reader_u32(&r, &f->pcfile) || !byte_reader_u32(&r, &f->pcln) ||
	    !byte_reader_u32(&r, &f->npcdata))
		return false;
	f->nameoff = (int32_t)nameoff;
	if (t->ver != GOPCLNTAB_GO12 && !byte_reader_u32(&r, &f->cuoff))
		return false;
	if (t->ver == GOPCLNTAB_GO120 && !byte_reader_skip(&r, 4))
		return false;	/* startLine */
	if (!byte_reader_u8(&r, &f->funcid) || !byte_reader_u8(&r, &f->flag) || !byte_reader_skip(&r, 1) ||
	    !byte_reader_u8(&r, &f->nfuncdata))
		return false;
	if (t->ver == GOPCLNTAB_GO12)
		f->flag = 0;	/* Go 1.2's records have no flags */
	return true;
}

/* Where the pcdata and funcdata arrays are, and whether they fit in the funcs region. */
static bool gp_func_arrays(const struct gopclntab *t, size_t rec, struct gp_func *f)
{
	uint64_t pos = (uint64_t)rec + gp_func_fixed(t), end = t->funcs.end;
	f->pcdata = (size_t)pos;
	pos += (uint64_t)f->npcdata * 4;
	if (t->ver < GOPCLNTAB_GO118 && t->ptrsize == 8 && f->nfuncdata && ((pos - rec) & 4))
		pos += 4;	/* funcdata are pointers, aligned like the (aligned) record */
	f->funcdata = (size_t)pos;
	pos += (uint64_t)f->nfuncdata * (t->ver < GOPCLNTAB_GO118 ? t->ptrsize : 4);
	return pos <= end;
}

static int gp_load_func(const struct gopclntab *t, size_t i, struct gp_func *f)
{
	uint64_t funcoff, entry;
	if (i >= t->nfunc)
		return -ERANGE;
	memset(f, 0, sizeof(*f));
	f->entry = gp_entry(t, i);
	f->end = gp_entry(t, i + 1);
	size_t fo_pos = t->functab + i * t->ftab_stride + (t->ver >= GOPCLNTAB_GO118 ? 4 : t->ptrsize);
	if (!gp_rd(t, fo_pos, t->ver >= GOPCLNTAB_GO118 ? 4 : t->ptrsize, &funcoff))
		return -EBADMSG;
	size_t base = t->ver == GOPCLNTAB_GO12 ? 0 : t->funcs.off;
	size_t fixed = gp_func_fixed(t), entsize = t->ver >= GOPCLNTAB_GO118 ? 4 : t->ptrsize;
	if (funcoff > t->funcs.end - base || t->funcs.end - base - funcoff < fixed)
		return -EBADMSG;
	size_t rec = base + (size_t)funcoff;
	if (t->ver >= GOPCLNTAB_GO118) {
		uint32_t eo;
		if (!gp_u32(t, rec, &eo))
			return -EBADMSG;
		entry = t->text_start + eo;
	} else if (!gp_tab_word(t, rec, &entry)) {
		return -EBADMSG;
	}
	if (entry != f->entry)
		return -EBADMSG;	/* the record is not this function's */
	if (!gp_decode_func_fields(t, rec + entsize, f) || !gp_func_arrays(t, rec, f))
		return -EBADMSG;
	return 0;
}

/* NUL-terminated string at off in region r, or NULL. */
static const char *gp_str(const struct gopclntab *t, struct gp_region r, uint64_t off)
{
	if (off >= r.end - r.off)
		return NULL;
	const char *s = (const char *)t->tab + r.off + off;
	return memchr(s, '\0', r.end - r.off - (size_t)off) ? s : NULL;
}

static const char *gp_name(const struct gopclntab *t, int32_t nameoff)
{
	return nameoff < 0 ? NULL : gp_str(t, t->names, (uint64_t)nameoff);
}

int gopclntab_func(const struct gopclntab *t, size_t i, struct gopclntab_func *out)
{
	struct gp_func f;
	int err = gp_load_func(t, i, &f);
	if (err < 0)
		return err;
	const char *name = gp_name(t, f.nameoff);
	if (!name)
		return -EBADMSG;
	*out = (struct gopclntab_func){ .entry = f.entry, .end = f.end, .name = name, .func_id = f.funcid,
					.flag = f.flag };
	return 0;
}

/* ---- pc-value tables ------------------------------------------------------------------------------------------ */

int gopclntab_decode_pcvalue(const uint8_t *p, size_t len, uint64_t entry, uint64_t limit, unsigned quantum,
			     gopclntab_pcvalue_fn fn, void *ctx)
{
	uint32_t val = UINT32_MAX;	/* -1 */
	uint64_t pc = entry;
	struct byte_reader r;
	byte_reader_init(&r, p, len);
	for (bool first = true; pc < limit; first = false) {
		uint32_t uv, pcd;
		uint8_t b;
		/* A zero byte where a value delta would start ends the table, as in Go's own decoder (pcvalue). */
		if (!first && byte_reader_peek_u8(&r, &b) && b == 0)
			return 0;
		if (!byte_reader_uleb128_32(&r, &uv) || !byte_reader_uleb128_32(&r, &pcd))
			return -EBADMSG;
		val += (uv & 1) ? ~(uv >> 1) : uv >> 1;
		uint64_t next = pc + (uint64_t)pcd * quantum;
		if (next < pc)
			return -EBADMSG;
		uint64_t end = next < limit ? next : limit;
		if (end > pc) {
			int rc = fn(ctx, pc, end, (int32_t)val);
			if (rc)
				return rc;
		}
		pc = next;
	}
	return 0;
}

/* Table offset and length of function f's table tab, or false when it has none. */
static bool gp_pctab_span(const struct gopclntab *t, const struct gp_func *f, enum gopclntab_pctab tab,
			  size_t *off, size_t *len)
{
	uint32_t rel = 0;
	switch (tab) {
	case GOPCLNTAB_PCSP: rel = f->pcsp; break;
	case GOPCLNTAB_PCFILE: rel = f->pcfile; break;
	case GOPCLNTAB_PCLN: rel = f->pcln; break;
	case GOPCLNTAB_PCINLINE:
		if (t->ver == GOPCLNTAB_GO12 || f->npcdata <= GP_PCDATA_INLTREE ||
		    !gp_u32(t, f->pcdata + 4 * GP_PCDATA_INLTREE, &rel))
			return false;
		break;
	}
	struct gp_region r = t->ver == GOPCLNTAB_GO12 ? (struct gp_region){ 0, t->size } : t->pctab;
	if (rel == 0 || rel >= r.end - r.off)
		return false;
	*off = r.off + rel;
	*len = r.end - *off;
	return true;
}

int gopclntab_pcvalue_rows(const struct gopclntab *t, size_t i, enum gopclntab_pctab tab, gopclntab_pcvalue_fn fn,
			   void *ctx)
{
	struct gp_func f;
	size_t off, len;
	int err = gp_load_func(t, i, &f);
	if (err < 0)
		return err;
	if (!gp_pctab_span(t, &f, tab, &off, &len))
		return -ENOENT;
	return gopclntab_decode_pcvalue(t->tab + off, len, f.entry, f.end, t->quantum, fn, ctx);
}

struct gp_value_at {
	uint64_t va;
	int32_t value;
};

static int gp_value_at_cb(void *ctx, uint64_t start, uint64_t end, int32_t value)
{
	struct gp_value_at *q = ctx;
	if (q->va < start || q->va >= end)
		return 0;
	q->value = value;
	return 1;
}

int gopclntab_pcvalue(const struct gopclntab *t, size_t i, enum gopclntab_pctab tab, uint64_t va, int32_t *value)
{
	struct gp_value_at q = { .va = va };
	int rc = gopclntab_pcvalue_rows(t, i, tab, gp_value_at_cb, &q);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return -ENOENT;
	*value = q.value;
	return 0;
}

/* ---- files and inlining --------------------------------------------------------------------------------------- */

const char *gopclntab_file(const struct gopclntab *t, size_t i, int32_t fileno)
{
	struct gp_func f;
	uint32_t off;
	if (fileno < 0 || gp_load_func(t, i, &f) < 0)
		return NULL;
	if (t->ver == GOPCLNTAB_GO12) {
		if (fileno == 0 || (size_t)fileno >= t->nfiletab || !gp_u32(t, t->filetab + 4 * (size_t)fileno, &off))
			return NULL;
		return gp_str(t, (struct gp_region){ 0, t->size }, off);
	}
	uint64_t idx = (uint64_t)f.cuoff + (uint64_t)fileno;
	if (idx >= (t->cutab.end - t->cutab.off) / 4 || !gp_u32(t, t->cutab.off + 4 * (size_t)idx, &off) ||
	    off == UINT32_MAX)
		return NULL;
	return gp_str(t, t->files, off);
}

/* ELF address of function f's inline tree. */
static bool gp_inline_tree(const struct gopclntab *t, const struct gp_func *f, uint64_t *va)
{
	if (t->ver == GOPCLNTAB_GO12 || f->nfuncdata <= GP_FUNCDATA_INLTREE)
		return false;
	if (t->ver == GOPCLNTAB_GO116)
		return gp_tab_word(t, f->funcdata + GP_FUNCDATA_INLTREE * t->ptrsize, va) && *va != 0;
	uint32_t off;
	if (!t->have_gofunc || !gp_u32(t, f->funcdata + 4 * GP_FUNCDATA_INLTREE, &off) || off == GP_NO_FUNCDATA)
		return false;
	*va = t->gofunc + off;
	return true;
}

int gopclntab_inline(const struct gopclntab *t, size_t i, int32_t index, const char **name, uint64_t *call_va)
{
	struct gp_func f;
	uint64_t tree;
	int err = gp_load_func(t, i, &f);
	if (err < 0)
		return err;
	if (index < 0 || !gp_inline_tree(t, &f, &tree))
		return -ENOENT;
	/* Go 1.20: funcID, pad[3], nameOff, parentPc, startLine. Before: parent, funcID, pad, file, line, nameOff,
	 * parentPc. */
	bool v120 = t->ver == GOPCLNTAB_GO120;
	size_t esize = v120 ? 16 : 20;
	struct byte_reader e;
	uint32_t nameoff, parent_pc;
	if (!gp_va_reader(t, tree + (uint64_t)index * esize, esize, &e) ||
	    !byte_reader_u32_at(&e, v120 ? 4 : 12, &nameoff) || !byte_reader_u32_at(&e, v120 ? 8 : 16, &parent_pc))
		return -EBADMSG;
	*name = gp_name(t, (int32_t)nameoff);
	if (!*name || (int32_t)parent_pc < 0 || parent_pc >= f.end - f.entry)
		return -EBADMSG;
	*call_va = f.entry + parent_pc;
	return 0;
}

/* ---- stack-delta rules (x86_64) ------------------------------------------------------------------------------- */

enum gp_special { GP_NORMAL, GP_STOP, GP_STOP_SWITCH, GP_FRAME_POINTER, GP_SIGNAL, GP_SP_WRITE };

/* Whether name is base, or base with an ABI suffix (".abi0"). */
static bool gp_name_is(const char *name, const char *base)
{
	size_t n = strlen(base);
	return strncmp(name, base, n) == 0 && (name[n] == '\0' || strcmp(name + n, ".abi0") == 0);
}

static bool gp_name_in(const char *name, const char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (gp_name_is(name, set[i]))
			return true;
	return false;
}

#define GP_IN(name, set) gp_name_in(name, set, sizeof(set) / sizeof(set[0]))

static enum gp_special gp_classify(const struct gopclntab_func *f)
{
	static const char *const stop[] = { "runtime.goexit", "runtime.mstart", "runtime.rt0_go", "runtime.mcall" };
	static const char *const fp[] = { "runtime.systemstack", "runtime.asmcgocall" };
	static const char *const sig[] = { "runtime.sigreturn", "runtime.sigreturn__sigaction" };
	/* TOPFRAME for Go's traceback, but the kernel's signal frame (the restorer as return address) follows. */
	static const char *const sigtramp[] = { "runtime.sigtramp", "runtime.cgoSigtramp" };
	if (GP_IN(f->name, stop) || strncmp(f->name, "_rt0_", 5) == 0)
		return GP_STOP;
	if (gp_name_is(f->name, "runtime.morestack"))
		return GP_STOP_SWITCH;
	if (GP_IN(f->name, fp))
		return GP_FRAME_POINTER;
	if (GP_IN(f->name, sig))
		return GP_SIGNAL;
	if (GP_IN(f->name, sigtramp))
		return GP_NORMAL;
	if (f->flag & GOPCLNTAB_FLAG_TOPFRAME)
		return GP_STOP;
	if (f->flag & GOPCLNTAB_FLAG_SPWRITE)
		return GP_SP_WRITE;
	return GP_NORMAL;
}

struct gp_emit {
	gopclntab_rule_fn fn;
	void *ctx;
	int rc;
	bool have_last;
	struct stack_delta_rule last;
};

static void gp_emit(struct gp_emit *em, uint64_t va, const struct stack_delta_rule *r)
{
	if (em->rc || (em->have_last && memcmp(&em->last, r, sizeof(*r)) == 0))
		return;
	em->rc = em->fn(em->ctx, va, r);
	em->last = *r;
	em->have_last = true;
}

/* CFA = SP + sp + 8; the caller's RBP at CFA - 16 once the prologue saved it. */
static struct stack_delta_rule gp_sp_rule(int32_t sp, bool fp_saved)
{
	struct stack_delta_rule r = stack_delta_rule_make(STACK_DELTA_CFA_SP);
	if (sp < 0 || sp > INT32_MAX - 8)
		return stack_delta_rule_make(STACK_DELTA_INVALID);
	r.cfa_off = sp + 8;
	if (fp_saved && sp >= 8) {
		r.fp = STACK_DELTA_FP_AT_CFA;
		r.fp_off = -16;
		r.aux = STACK_DELTA_GO_FP_FRAME;
	}
	return r;
}

/* The first run with a frame (SP below its entry value): where the prologue stored, or did not store, RBP. */
struct gp_first_frame {
	uint64_t va;
	int32_t sp;
	bool found;
};

static int gp_first_frame_cb(void *ctx, uint64_t start, uint64_t end, int32_t value)
{
	struct gp_first_frame *ff = ctx;
	(void)end;
	if (value > 0 && !ff->found)
		*ff = (struct gp_first_frame){ start, value, true };
	return 0;	/* read on: the whole table must decode */
}

/* Frame-pointer state of a function, from its prologue. */
#define GP_FP_UNKNOWN 0			/* code unreadable: assume every frame holds the caller's RBP */
#define GP_FP_NEVER UINT64_MAX		/* no frame-pointer prologue */

/*
 * From which address function code keeps the caller's RBP at CFA - 16, given its first frame row: right there
 * after Go >= 1.21's "push %rbp"; after the "mov %rbp, sp-8(%rsp)" that follows older Go's "sub $sp, %rsp";
 * GP_FP_NEVER when the code is neither (assembly without a frame pointer).
 */
static uint64_t gp_fp_saved_from(const struct gopclntab *t, uint64_t va, int32_t sp)
{
	struct byte_reader r;
	const uint8_t *p;
	uint32_t disp32;
	if (!gp_va_reader(t, va - 1, 9, &r) || !byte_reader_bytes(&r, 9, &p))
		return GP_FP_UNKNOWN;
	r.big_endian = false;	/* x86_64 code, whatever the table's byte order */
	if (p[0] == 0x55 && sp == 8)
		return va;
	int32_t disp = sp - 8;
	if (p[1] == 0x48 && p[2] == 0x89 && p[3] == 0x6c && p[4] == 0x24 && disp < 128 && p[5] == (uint8_t)disp)
		return va + 5;
	if (p[1] == 0x48 && p[2] == 0x89 && p[3] == 0xac && p[4] == 0x24 && byte_reader_u32_at(&r, 5, &disp32) &&
	    (int32_t)disp32 == disp)
		return va + 8;
	return GP_FP_NEVER;
}

struct gp_sp_rows {
	struct gp_emit *em;
	uint64_t fp_from;
	bool sp_write;		/* past the prologue SP may be anywhere: use the frame pointer there */
};

static struct stack_delta_rule gp_row_rule(const struct gp_sp_rows *w, uint64_t va, int32_t sp)
{
	bool fp_saved = va >= w->fp_from;
	if (w->sp_write && fp_saved && sp > 0)
		return stack_delta_rule_rbp_frame(0);
	return gp_sp_rule(sp, fp_saved);
}

static int gp_sp_rows_cb(void *ctx, uint64_t start, uint64_t end, int32_t value)
{
	struct gp_sp_rows *w = ctx;
	struct stack_delta_rule r = gp_row_rule(w, start, value);
	gp_emit(w->em, start, &r);
	if (w->fp_from > start && w->fp_from < end) {
		r = gp_row_rule(w, w->fp_from, value);
		gp_emit(w->em, w->fp_from, &r);
	}
	return w->em->rc;
}

/*
 * Rows of a function from its pcsp table (INVALID when the table is missing or corrupt). The table ends with
 * the code; the alignment padding after it keeps the last rule. A function that writes SP (sp_write) is
 * described by pcsp only until its prologue saved RBP, and by the frame pointer after that; without a
 * frame-pointer prologue it cannot be unwound at all.
 */
static void gp_emit_pcsp(const struct gopclntab *t, size_t i, const struct gopclntab_func *f, bool sp_write,
			 struct gp_emit *em)
{
	struct gp_first_frame ff = { 0, 0, false };
	struct stack_delta_rule inv = stack_delta_rule_make(STACK_DELTA_INVALID);
	int rc = gopclntab_pcvalue_rows(t, i, GOPCLNTAB_PCSP, gp_first_frame_cb, &ff);
	struct gp_sp_rows w = { em, ff.found ? gp_fp_saved_from(t, ff.va, ff.sp) : GP_FP_NEVER, sp_write };
	if (rc < 0 || (sp_write && (w.fp_from == GP_FP_NEVER || w.fp_from == GP_FP_UNKNOWN))) {
		gp_emit(em, f->entry, &inv);
		return;
	}
	gopclntab_pcvalue_rows(t, i, GOPCLNTAB_PCSP, gp_sp_rows_cb, &w);
}

/*
 * Whether the function at entry starts "push %rbp; mov %rsp, %rbp": a frame of its own. Newer Go runtimes give
 * systemstack and asmcgocall one on the goroutine's stack (older ones keep none: their caller's FP is left in
 * rbp), and a frame-pointer chain through them then leads to their caller.
 */
static bool gp_pushes_frame(const struct gopclntab *t, uint64_t entry)
{
	static const uint8_t prologue[] = { 0x55, 0x48, 0x89, 0xe5 };
	struct byte_reader r;
	const uint8_t *p;
	return gp_va_reader(t, entry, sizeof(prologue), &r) && byte_reader_bytes(&r, sizeof(prologue), &p) &&
	       memcmp(p, prologue, sizeof(prologue)) == 0;
}

static void gp_emit_func(const struct gopclntab *t, size_t i, uint64_t prev_entry, struct gp_emit *em)
{
	struct gopclntab_func f;
	struct stack_delta_rule r;
	if (gopclntab_func(t, i, &f) < 0) {
		r = stack_delta_rule_make(STACK_DELTA_INVALID);
		gp_emit(em, gp_entry(t, i), &r);
		return;
	}
	enum gp_special kind = gp_classify(&f);
	switch (kind) {
	case GP_STOP:
		r = stack_delta_rule_make(STACK_DELTA_STOP);
		break;
	case GP_STOP_SWITCH:
		r = stack_delta_rule_make(STACK_DELTA_STOP);
		r.aux = STACK_DELTA_GO_STACK_SWITCH;
		break;
	case GP_FRAME_POINTER:
		r = stack_delta_rule_rbp_frame(STACK_DELTA_GO_STACK_SWITCH |
					       (gp_pushes_frame(t, f.entry) ? STACK_DELTA_GO_FP_FRAME : 0));
		break;
	case GP_SIGNAL:
		r = stack_delta_rule_make(STACK_DELTA_SIGNAL);
		/* Return addresses are looked up at address - 1; the handler "returns" to the first byte. */
		if (f.entry > prev_entry + 1)
			gp_emit(em, f.entry - 1, &r);
		break;
	default:
		gp_emit_pcsp(t, i, &f, kind == GP_SP_WRITE, em);
		return;
	}
	gp_emit(em, f.entry, &r);
}

int gopclntab_for_each_rule(const struct gopclntab *t, gopclntab_rule_fn fn, void *ctx)
{
	struct gp_emit em = { .fn = fn, .ctx = ctx };
	struct stack_delta_rule inv = stack_delta_rule_make(STACK_DELTA_INVALID);
	if (t->machine != EM_X86_64 || t->ptrsize != 8 || t->quantum != 1)
		return -ENOTSUP;
	for (size_t i = 0; i < t->nfunc && !em.rc; i++) {
		em.have_last = false;	/* every function starts with a row, whatever came before */
		gp_emit_func(t, i, i ? gp_entry(t, i - 1) : 0, &em);
	}
	em.have_last = false;
	gp_emit(&em, gp_entry(t, t->nfunc), &inv);
	return em.rc;
}
