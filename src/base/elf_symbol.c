/*
 * elf_symbol.c — a named symbol's entry in an ELF symbol table (elf_symbol.h).
 */
#include <string.h>

#include "src/base/elf_symbol.h"

Elf_Scn *elf_symbol_table(Elf *e, Elf64_Word type, size_t *count)
{
	for (Elf_Scn *s = elf_nextscn(e, NULL); s; s = elf_nextscn(e, s)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(s, &sh) || sh.sh_type != type)
			continue;
		if (sh.sh_entsize != sizeof(Elf64_Sym))
			return NULL;
		*count = sh.sh_size / sizeof(Elf64_Sym);
		return s;
	}
	return NULL;
}

size_t elf_symbol_find(Elf *e, Elf_Scn *symtab, size_t count, const char *name, GElf_Sym *out)
{
	GElf_Shdr sh;
	Elf_Data *d = elf_getdata(symtab, NULL);
	if (!d || !gelf_getshdr(symtab, &sh))
		return 0;
	if (count > d->d_size / sizeof(Elf64_Sym))
		count = d->d_size / sizeof(Elf64_Sym);
	for (size_t i = 1; i < count; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || sym.st_name == 0)
			continue;
		const char *n = elf_strptr(e, sh.sh_link, sym.st_name);
		if (n && strcmp(n, name) == 0) {
			*out = sym;
			return i;
		}
	}
	return 0;
}
