/*
 * stubs.c — names for PLT stubs and the signal return trampoline. See stubs.h.
 */
#include "symbols/stubs.h"

#include "unwind/stack_deltas.h"
#include "src/base/bsearch.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STUB_MAX_SECTIONS 4	/* .plt, .plt.sec, .plt.got (and one spare) */

struct stub_plt {
	uint64_t addr, size, entsize;
	const uint8_t *bytes;	/* the section's contents, owned by the Elf */
	bool lazy;		/* .plt: an IBT entry names its relocation by index (push $i) */
};

/* A GOT slot and the function it is relocated to. */
struct stub_slot {
	uint64_t got;
	const char *name;
};

struct stub_names {
	struct stub_plt plt[STUB_MAX_SECTIONS];
	unsigned nplt;
	struct stub_slot *slots;	/* by got */
	size_t nslots, slots_cap;
	const char **jump_slots;	/* .rela.plt in order (NULL: not a named JUMP_SLOT), for push $i */
	size_t njump;
	Elf *elf;			/* the relocations' file, read at the first address in a PLT section */
	int relocs_state;		/* 0 not read yet, 1 read, -1 failed (no memory) */
	csh cs;
	cs_insn *insn;
	int cs_state;			/* 0 not opened yet, 1 open, -1 failed */
};

static int add_slot(struct stub_names *p, uint64_t got, const char *name)
{
	if (p->nslots == p->slots_cap) {
		size_t cap = p->slots_cap ? p->slots_cap * 2 : 64;
		struct stub_slot *n = realloc(p->slots, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		p->slots = n;
		p->slots_cap = cap;
	}
	p->slots[p->nslots++] = (struct stub_slot){ got, name };
	return 0;
}

/* The name of symbol i of the symbol table section symscn, or NULL. */
static const char *symbol_name(Elf *elf, Elf_Scn *symscn, size_t i)
{
	GElf_Shdr sh;
	GElf_Sym sym;
	Elf_Data *d = symscn ? elf_getdata(symscn, NULL) : NULL;
	if (!d || !gelf_getshdr(symscn, &sh) || sh.sh_entsize != sizeof(Elf64_Sym) || i == 0 ||
	    i >= d->d_size / sizeof(Elf64_Sym) || !gelf_getsym(d, (int)i, &sym) || sym.st_name == 0)
		return NULL;
	const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
	return name && *name ? name : NULL;
}

/* The JUMP_SLOT and GLOB_DAT relocations of one SHT_RELA section; .rela.plt's also in order (jump_slots). */
static int read_relocs(struct stub_names *p, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, bool rela_plt)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	Elf_Scn *symscn = elf_getscn(elf, sh->sh_link);
	if (!d || sh->sh_entsize != sizeof(Elf64_Rela))
		return 0;
	size_t n = d->d_size / sizeof(Elf64_Rela);
	if (n > STUB_MAX_RELOCS - p->nslots)
		n = STUB_MAX_RELOCS - p->nslots;
	if (rela_plt && !p->jump_slots && n && !(p->jump_slots = calloc(n, sizeof(*p->jump_slots))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		GElf_Rela r;
		if (!gelf_getrela(d, (int)i, &r))
			break;
		unsigned type = (unsigned)GELF_R_TYPE(r.r_info);
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
		const char *name = symbol_name(elf, symscn, GELF_R_SYM(r.r_info));
		if (!name)
			continue;
		if (rela_plt && p->jump_slots && type == R_X86_64_JUMP_SLOT)
			p->jump_slots[i] = name;
		if (add_slot(p, r.r_offset, name) < 0)
			return -ENOMEM;
	}
	if (rela_plt && p->jump_slots && !p->njump)
		p->njump = n;
	return 0;
}

static void add_plt(struct stub_names *p, Elf_Scn *scn, const GElf_Shdr *sh, const char *name)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (p->nplt == STUB_MAX_SECTIONS || sh->sh_type != SHT_PROGBITS || !(sh->sh_flags & SHF_EXECINSTR) ||
	    sh->sh_size > STUB_MAX_PLT_BYTES || !d || !d->d_buf || d->d_size != sh->sh_size)
		return;
	p->plt[p->nplt++] = (struct stub_plt){
		.addr = sh->sh_addr, .size = sh->sh_size, .bytes = d->d_buf,
		.entsize = sh->sh_entsize == 8 || sh->sh_entsize == 16 ? sh->sh_entsize : 16,
		.lazy = strcmp(name, ".plt") == 0,
	};
}

static int by_got(const void *a, const void *b)
{
	const struct stub_slot *x = a, *y = b;
	return (x->got > y->got) - (x->got < y->got);
}

/* The first section after scn (NULL: the first of all) with a header and a name, both returned; NULL past the
 * last. */
static Elf_Scn *next_named_section(Elf *elf, size_t shstrndx, Elf_Scn *scn, GElf_Shdr *sh, const char **name)
{
	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, sh) && (*name = elf_strptr(elf, shstrndx, sh->sh_name)))
			return scn;
	return NULL;
}

/* The PLT sections of elf. */
static void read_plt_sections(struct stub_names *p, Elf *elf)
{
	size_t shstrndx;
	GElf_Shdr sh;
	const char *name;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	for (Elf_Scn *scn = NULL; (scn = next_named_section(elf, shstrndx, scn, &sh, &name));)
		if (!strcmp(name, ".plt") || !strcmp(name, ".plt.sec") || !strcmp(name, ".plt.got"))
			add_plt(p, scn, &sh, name);
}

/*
 * The JUMP_SLOT and GLOB_DAT relocations of every SHT_RELA section, read when first needed: a large library's
 * .rela.dyn holds 100k relocations of other types, whose reading cost a run that named no stub of it ~10 ms.
 */
static int read_all_relocs(struct stub_names *p)
{
	size_t shstrndx;
	GElf_Shdr sh;
	const char *name;
	Elf *elf = p->elf;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	for (Elf_Scn *scn = NULL; (scn = next_named_section(elf, shstrndx, scn, &sh, &name));)
		if (sh.sh_type == SHT_RELA && read_relocs(p, elf, scn, &sh, !strcmp(name, ".rela.plt")) < 0)
			return -ENOMEM;
	if (p->nslots)
		qsort(p->slots, p->nslots, sizeof(*p->slots), by_got);
	return 0;
}

int stub_names_new(Elf *elf, struct stub_names **out)
{
	*out = NULL;
	struct stub_names *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->elf = elf;
	read_plt_sections(p, elf);
	if (p->nplt == 0) {
		stub_names_free(p);
		return 0;
	}
	*out = p;
	return 0;
}

void stub_names_free(struct stub_names *p)
{
	if (!p)
		return;
	if (p->cs_state == 1) {
		cs_free(p->insn, 1);
		cs_close(&p->cs);
	}
	free(p->slots);
	free(p->jump_slots);
	free(p);
}

static bool open_capstone(struct stub_names *p)
{
	if (p->cs_state == 0) {
		p->cs_state = -1;
		if (cs_open(CS_ARCH_X86, CS_MODE_64, &p->cs) == CS_ERR_OK) {
			if (cs_option(p->cs, CS_OPT_DETAIL, CS_OPT_ON) == CS_ERR_OK && (p->insn = cs_malloc(p->cs)))
				p->cs_state = 1;
			else
				cs_close(&p->cs);
		}
	}
	return p->cs_state == 1;
}

static bool slot_at_or_after(const void *slots, size_t i, const void *got)
{
	return ((const struct stub_slot *)slots)[i].got >= *(const uint64_t *)got;
}

static const char *slot_name(const struct stub_names *p, uint64_t got)
{
	size_t i = bsearch_first(p->slots, p->nslots, slot_at_or_after, &got);
	return i < p->nslots && p->slots[i].got == got ? p->slots[i].name : NULL;
}

/* The function one stub (its bytes at code, addr) leads to: its jmp *slot(%rip), else an IBT .plt's push $i. */
static const char *stub_target(struct stub_names *p, const struct stub_plt *plt, const uint8_t *code, size_t size,
			       uint64_t addr)
{
	while (cs_disasm_iter(p->cs, &code, &size, &addr, p->insn)) {
		const cs_x86 *x = &p->insn->detail->x86;
		if (x->op_count != 1)
			continue;
		const cs_x86_op *op = &x->operands[0];
		if (p->insn->id == X86_INS_JMP && op->type == X86_OP_MEM && op->mem.base == X86_REG_RIP &&
		    op->mem.index == X86_REG_INVALID)
			return slot_name(p, addr + (uint64_t)op->mem.disp);	/* addr is past the jmp now */
		if (p->insn->id == X86_INS_PUSH && op->type == X86_OP_IMM && plt->lazy && op->imm >= 0 &&
		    (uint64_t)op->imm < p->njump)
			return p->jump_slots[op->imm];
	}
	return NULL;
}

const char *stub_names_plt(struct stub_names *p, uint64_t va)
{
	for (unsigned i = 0; p && i < p->nplt; i++) {
		const struct stub_plt *plt = &p->plt[i];
		if (va < plt->addr || va - plt->addr >= plt->size)
			continue;
		if (p->relocs_state == 0)
			p->relocs_state = read_all_relocs(p) < 0 ? -1 : 1;
		if (p->relocs_state < 0 || !open_capstone(p))
			return NULL;
		uint64_t off = (va - plt->addr) / plt->entsize * plt->entsize;
		uint64_t len = plt->size - off < plt->entsize ? plt->size - off : plt->entsize;
		return stub_target(p, plt, plt->bytes + off, (size_t)len, plt->addr + off);
	}
	return NULL;
}

bool stub_is_sigreturn(Elf *elf, int fd, uint64_t va)
{
	size_t nph;
	if (elf_getphdrnum(elf, &nph) != 0)
		return false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
		    va < ph.p_vaddr || va - ph.p_vaddr >= ph.p_filesz)
			continue;
		uint8_t buf[STACK_DELTA_SIGRETURN_LEN + 1];
		uint64_t off = ph.p_offset + (va - ph.p_vaddr), avail = ph.p_filesz - (va - ph.p_vaddr);
		size_t want = avail < sizeof(buf) ? (size_t)avail : sizeof(buf);
		ssize_t n;
		if (off < ph.p_offset || off > (uint64_t)INT64_MAX)
			return false;
		if (fd >= 0) {
			/* Ten bytes from the file: elf_rawfile() on a handle that reads (not maps) the file would
			 * read all of it into memory, 100 MB for a large library, kept as long as the handle. */
			n = pread(fd, buf, want, (off_t)off);
		} else {
			/* An image in memory: its raw file is that memory, nothing is copied. A raw chunk per address
			 * would be allocated and kept in a search tree for every address looked up. */
			size_t file_len;
			const uint8_t *file = (const uint8_t *)elf_rawfile(elf, &file_len);
			n = file && off < file_len ? (ssize_t)(want < file_len - off ? want : file_len - off) : -1;
			if (n > 0)
				memcpy(buf, file + off, (size_t)n);
		}
		return n > 0 && (stack_delta_is_sigreturn(buf, (size_t)n) ||
				 (n > 1 && stack_delta_is_sigreturn(buf + 1, (size_t)n - 1)));
	}
	return false;
}
