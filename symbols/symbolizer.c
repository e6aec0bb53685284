/*
 * symbolizer.c — names, files and lines for ELF virtual addresses, through libdwfl (see symbolizer.h).
 *
 * The file is reported to libdwfl as one module placed at its link-time addresses (bias 0), so ELF virtual
 * addresses are module addresses. libdwfl brings .symtab/.dynsym/.gnu_debugdata, separate debug files and
 * DWARF; this file adds what a profiler reading hostile files needs on top of it:
 *  - the main file is read with pread (ELF_C_READ), and its headers are checked against its size: a process
 *    truncating a library it mapped must not kill the profiler with SIGBUS. Only a file no one but root can
 *    write is mapped (ELF_C_READ_MMAP): its symbol and string tables are then used in place, where reading
 *    them cost libLLVM's ~10 MB of copies into fresh memory on every run;
 *  - separate debug files: by build-id under /usr/lib/debug, or by .gnu_debuglink only as a plain file name,
 *    only if no other user can write the file, and only if its build-id matches (libdwfl's standard search
 *    follows "../" in the link name, opens FIFOs and, without a build-id or CRC, accepts any file);
 *  - the scope walk for inline frames is iterative with a bounded depth (libdw's walkers recurse once per
 *    DIE nesting level, which the file controls);
 *  - a symbol is returned only for an address it covers;
 *  - names come from an index of the symbol table built on the first lookup and searched by address:
 *    dwfl_module_addrinfo() reads the whole table for every address, milliseconds each in a Go binary or
 *    libLLVM. The index answers what dwfl_module_addrinfo() would, rules and ties included (see "symbol
 *    index" below), in O(log n).
 */
#include "symbols/symbolizer.h"

#include "symbols/gosym.h"
#include "unwind/gopclntab.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/bsearch.h"
#include "src/base/hindex.h"
#include "src/base/radix_sort.h"
#include "src/base/regular_file.h"
#include "symbols/debug_cache.h"
#include "symbols/demangle.h"
#include "symbols/names_cache.h"
#include "symbols/stubs.h"

/* The Makefile hashes the symbolizer's sources into this: names kept by another hostprof are not used. */
#ifndef SYMBOLIZER_SOURCES
#error "SYMBOLIZER_SOURCES must name the hash of the symbolizer's sources (see the Makefile)"
#endif

#define DEBUG_ROOT "/usr/lib/debug"
#define BUILD_ID_MAX 64		/* libdwfl's own limit; real ones are 20 bytes */
#define SCOPE_DEPTH_MAX 64	/* DIE nesting levels searched below a CU */
_Static_assert(SCOPE_DEPTH_MAX == NAMES_CACHE_CHAIN_MAX, "a chain is kept whole");
#define NAME_LEN_MAX 4096	/* longer names (hostile or absurd templates) are cut */
#define CACHE_MAX (1u << 16)	/* addresses remembered; the cache is emptied when full */
#define SYMBOLS_MAX (1 << 22)	/* larger symbol tables are not indexed: no ELF names (real ones: < 10^6) */
#define COVER_MAX 1024		/* sized symbols weighed over one address; more give no ELF name */

/* Interned strings: every string handed out is a copy owned here, alive until symbolizer_free(). */
struct strtab {
	struct hindex index;	/* by content: the copy (char *) */
};

/*
 * Lookups remembered per address: DWARF scope walks and line tables are slow, and a profile asks for the same
 * return addresses again in every new trace that passes through them.
 */
struct cached_lookup {
	uint64_t addr;
	int n;
	struct symbol_frame *frames;	/* n frames, the full chain */
};

struct lookup_cache {
	struct cached_lookup *entries;	/* in the order remembered */
	size_t n, cap;
	struct hindex index;	/* by address: entry index */
};

/*
 * A symbol that may name an address: one dwfl_module_addrinfo() would consider (named, defined, not a
 * section, file or TLS symbol), with what its rules look at.
 */
struct indexed_symbol {
	GElf_Addr value;	/* libdwfl's address for it (st_value + bias); first (sort_equal_values()) */
	GElf_Xword size;
	const char *name;	/* already the plainest of its aliases (name_aliases()); libdwfl's string */
	uint32_t order;		/* its index in libdwfl's symbol table: the order libdwfl meets symbols in */
	uint8_t binding;	/* binding_rank() */
	bool absolute;		/* section index >= SHN_LORESERVE (SHN_ABS…): a label only at its own address */
};

/*
 * The symbols of one of libdwfl's two passes over the table: first the global symbols, then, when they
 * name nothing, the local ones. Sized symbols are sorted by address, with max_last an implicit binary tree
 * (node i has children 2i and 2i+1; node leaves + j is sized[j]) holding the last address covered by any
 * symbol below each inner node, so the symbols covering an address are found without visiting the others.
 */
struct symbol_pass {
	struct indexed_symbol *sized;		/* by value */
	size_t nsized;
	GElf_Addr *max_last;			/* [1, leaves) used */
	size_t leaves;				/* a power of two >= nsized */
	struct indexed_symbol *sizeless;	/* by (value, absolute, order) */
	size_t nsizeless;
};

struct symbol_index {
	bool built;				/* an empty index (no or unusable table) is built too */
	struct symbol_pass pass[2];		/* globals, locals */
	const struct indexed_symbol **cover;	/* scratch for one lookup: COVER_MAX entries */
};

struct symbolizer {
	Dwfl_Callbacks callbacks;	/* libdwfl keeps a pointer to it */
	char debug_root[sizeof(DEBUG_ROOT)];
	char *debuginfo_path;		/* what callbacks.debuginfo_path points to: debug_root */
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Elf *elf;			/* the main file, until libdwfl takes it over (find_main_elf) */
	int fd;				/* its descriptor, likewise */
	int bytes_fd;			/* the main file again, ours to pread a few bytes from (stub_is_sigreturn):
					 * libdwfl owns fd, and maps the file only if only root can write it */
	dev_t dev;			/* identity of the main file, which is never its own debug file */
	ino_t ino;
	uint64_t size;
	bool trusted;			/* only root or we can write the main file: its names may be kept */
	GElf_Addr start, end;		/* the span of its PT_LOAD segments */
	char *dir;			/* its directory, for .gnu_debuglink; NULL if unknown */
	struct strtab strings;
	struct lookup_cache cache;
	struct symbol_index index;
	struct gopclntab *go;		/* Go's function table, when the file has one (gosym.h) */
	struct stub_names *stubs;	/* its PLT stubs (stubs.h); read on the first lookup, NULL without any */
	bool stubs_read;
	int dwarf_usable;		/* 0 not checked yet, 1 usable (or absent), -1 refused (dwarf_checked) */
	char *debug_cache_dir;		/* decompressed debug files are kept there (debug_cache.h); NULL: not */
	char *names_dir;		/* names made are kept there (names_cache.h); NULL: not */
	struct names_cache *names;	/* opened on the first lookup (names_open()) */
	bool names_opened;
	size_t names_kept;		/* lookups answered from it */
	bool debuginfo_asked;		/* find_debuginfo was called: a later call is for a dwz alternate file */
};

/* How sure we are that a symbol names the function at an address. */
enum evidence { NO_SYMBOL, SIZELESS_SYMBOL, COVERING_SYMBOL };

struct symbol {
	const char *name;
	enum evidence evidence;
};

/* ---- interned strings ---- */

/* A string being interned: len bytes, not NUL-terminated. */
struct text {
	const char *s;
	size_t len;
};

static bool text_is(const void *ctx, uint64_t value, const void *key)
{
	const char *have = (const char *)(uintptr_t)value;
	const struct text *k = key;
	(void)ctx;
	return strncmp(have, k->s, k->len) == 0 && have[k->len] == '\0';
}

/* The interned copy of the first len bytes of s (cut to NAME_LEN_MAX); NULL for NULL or when out of memory. */
static const char *intern_n(struct strtab *t, const char *s, size_t len)
{
	uint64_t have;
	if (!s)
		return NULL;
	struct text k = { s, strnlen(s, len < NAME_LEN_MAX ? len : NAME_LEN_MAX) };
	uint64_t h = hash_bytes(HASH_SEED, k.s, k.len);
	if (hindex_find(&t->index, h, text_is, NULL, &k, &have))
		return (const char *)(uintptr_t)have;
	char *copy = strndup(s, k.len);
	if (copy && hindex_insert(&t->index, h, (uintptr_t)copy) < 0) {
		free(copy);
		copy = NULL;
	}
	return copy;
}

static const char *intern(struct strtab *t, const char *s)
{
	return intern_n(t, s, NAME_LEN_MAX);
}

static void strtab_free(struct strtab *t)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&t->index, &pos, &v);)
		free((char *)(uintptr_t)v);
	hindex_free(&t->index);
}

/* ---- remembered lookups ---- */

static bool lookup_is(const void *ctx, uint64_t value, const void *key)
{
	const struct lookup_cache *c = ctx;
	return c->entries[value].addr == *(const uint64_t *)key;
}

static const struct cached_lookup *cache_get(const struct lookup_cache *c, uint64_t addr)
{
	uint64_t i;
	if (!hindex_find(&c->index, hash_u64(HASH_SEED, addr), lookup_is, c, &addr, &i))
		return NULL;
	return &c->entries[i];
}

static void cache_clear(struct lookup_cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->entries[i].frames);
	c->n = 0;
	hindex_clear(&c->index);
}

/* Remembers a lookup; when memory is short it is simply not remembered. */
static void cache_put(struct lookup_cache *c, uint64_t addr, const struct symbol_frame *frames, int n)
{
	struct symbol_frame *copy = NULL;
	if (c->n >= CACHE_MAX)
		cache_clear(c);
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		struct cached_lookup *e = realloc(c->entries, cap * sizeof(*e));
		if (!e)
			return;
		c->entries = e;
		c->cap = cap;
	}
	if ((n > 0 && !(copy = malloc(n * sizeof(*copy)))) ||
	    hindex_insert(&c->index, hash_u64(HASH_SEED, addr), c->n) < 0) {
		free(copy);
		return;
	}
	if (n > 0)
		memcpy(copy, frames, n * sizeof(*copy));
	c->entries[c->n++] = (struct cached_lookup){ addr, n, copy };
}

static void cache_free(struct lookup_cache *c)
{
	cache_clear(c);
	free(c->entries);
	hindex_free(&c->index);
}

/* A function name as shown to users: demangled if it can be, without a symbol version ("@GLIBC_2.2.5"). */
static const char *display_name(struct symbolizer *s, const char *raw)
{
	char *demangled = demangle(raw);
	const char *at = raw ? strchr(raw, '@') : NULL;
	if (!demangled)
		return intern_n(&s->strings, raw, at && at > raw ? (size_t)(at - raw) : NAME_LEN_MAX);
	const char *name = intern(&s->strings, demangled);
	free(demangled);
	return name;
}

/* ---- symbol index ---- */

/*
 * What dwfl_module_addrinfo() (elfutils' __libdwfl_addrsym()) answers for an address, and so what the index
 * must answer. It walks the global symbols, then, unless that found a sized symbol covering the address or a
 * sizeless one right at it, the local ones; it considers the symbols at or below the address and keeps
 *  - the "closest" sized symbol covering the address: a later one replaces it if it starts higher, binds
 *    more strongly (global, weak, local) or starts at the same address with the same binding and is smaller.
 *    The outcome depends on the table order, so the covering symbols are replayed in that order;
 *  - min_label, the furthest end (value + size) of the symbols seen: a label before it lies inside them;
 *  - a sizeless symbol (label) starting at min_label so far and in the address's section (an absolute one:
 *    at the address itself). It is the answer if no sized symbol covers the address and it still starts at
 *    min_label at the end: the last label the walk meets at the final min_label.
 * (On ppc64, with function descriptors, libdwfl also tries a second value per function; not done here.)
 */

/* A named symbol of libdwfl's table while the index is built. */
struct table_symbol {
	GElf_Addr value;	/* first (sort_equal_values()) */
	GElf_Xword size;
	const char *name;
	const char *plainest;	/* the name to show for it (name_aliases()) */
	int noise;		/* name_noise(name) */
	bool mangled;		/* mangled(name): read with the name, not again in address order (a cache miss) */
	uint32_t order;
	unsigned char info;
	bool absolute;
	signed char pass;	/* 0 global, 1 local, -1 undefined: only a possible alias of others */
};

/* How plainly a symbol name reads: leading underscores, and worse, a version ("shm_open@GLIBC_2.2.5"). */
static int name_noise(const char *name)
{
	int n = 0;
	while (n < NAME_LEN_MAX && name[n] == '_')
		n++;
	return strchr(name, '@') ? n + 1000 : n;
}

static bool mangled(const char *name)
{
	return name[0] == '_' && (name[1] == 'Z' || name[1] == 'R');
}

/* Rank of a binding in libdwfl's choice: higher wins. */
static uint8_t binding_rank(unsigned char info)
{
	switch (GELF_ST_BIND(info)) {
	case STB_GLOBAL:
		return 3;
	case STB_WEAK:
		return 2;
	case STB_LOCAL:
		return 1;
	}
	return 0;
}

/*
 * libdwfl hands out a symbol name at any offset inside its string table without checking that the name ends
 * there: in a crafted file it may run off the end of the table. A name is used only if it ends inside the
 * table, known by its start (the name minus its offset): the section linked from the file's symbol table,
 * chosen as libdwfl chooses it (another choice just leaves the names unused), or, in a file without symbol
 * table sections, .dynstr as libdwfl then reads it through PT_DYNAMIC: DT_STRSZ bytes.
 */
struct string_table {
	uintptr_t start;
	size_t size;		/* 0 when not found: none of its names is used */
};

struct name_tables {
	struct string_table table[2];	/* libdwfl reads at most two: the symbol file's and .gnu_debugdata's */
	size_t n;
	Elf *main;
};

/* The names of the symbol table libdwfl's load_symtab() takes: the last SHT_SYMTAB's, else SHT_DYNSYM's. */
static Elf_Data *symbol_names(Elf *elf, bool *has_symbols)
{
	Elf_Scn *symtab = NULL, *dynsym = NULL, *names;
	GElf_Shdr sh;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
		else if (sh.sh_type == SHT_DYNSYM && !symtab)
			dynsym = scn;
	}
	*has_symbols = symtab || dynsym;
	if (!*has_symbols || !gelf_getshdr(symtab ? symtab : dynsym, &sh) ||
	    !(names = elf_getscn(elf, sh.sh_link)) || !gelf_getshdr(names, &sh) || sh.sh_type != SHT_STRTAB)
		return NULL;
	return elf_getdata(names, NULL);
}

/* The least DT_STRSZ of the PT_DYNAMIC segments: no more than libdwfl read of .dynstr, whichever it used. */
static size_t dynamic_names_size(Elf *elf)
{
	size_t phnum, entry = gelf_fsize(elf, ELF_T_DYN, 1, EV_CURRENT);
	GElf_Xword least = UINT64_MAX;
	if (entry == 0 || elf_getphdrnum(elf, &phnum) != 0)
		return 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		Elf_Data *data;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_DYNAMIC ||
		    !(data = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_DYN)))
			continue;
		for (size_t j = 0; j < data->d_size / entry && j <= INT_MAX; j++) {
			GElf_Dyn dyn;
			if (gelf_getdyn(data, (int)j, &dyn) && dyn.d_tag == DT_STRSZ && dyn.d_un.d_val < least)
				least = dyn.d_un.d_val;
		}
	}
	return least == UINT64_MAX || least > SIZE_MAX ? 0 : (size_t)least;
}

static size_t names_size(struct name_tables *t, Elf *elf, uintptr_t start)
{
	bool has_symbols;
	size_t size = 0;
	for (size_t i = 0; i < t->n; i++)
		if (t->table[i].start == start)
			return t->table[i].size;
	Elf_Data *names = elf ? symbol_names(elf, &has_symbols) : NULL;
	if (names && (uintptr_t)names->d_buf == start)
		size = names->d_size;
	else if (elf && elf == t->main && !has_symbols)
		size = dynamic_names_size(elf);
	if (t->n < sizeof(t->table) / sizeof(t->table[0]))
		t->table[t->n++] = (struct string_table){ start, size };
	return size;
}

static bool name_ends_in_table(struct name_tables *t, Elf *elf, const char *name, GElf_Word offset)
{
	size_t size = names_size(t, elf, (uintptr_t)name - offset);
	return offset < size && memchr(name, '\0', size - offset);
}

/* The named symbols that can name an address or be an alias of one, in table order; NULL if none. */
static struct table_symbol *read_table(Dwfl_Module *mod, size_t *count)
{
	int n = dwfl_module_getsymtab(mod);
	int first_global = dwfl_module_getsymtab_first_global(mod);
	GElf_Addr bias;
	struct name_tables names = { .main = dwfl_module_getelf(mod, &bias) };
	struct table_symbol *table;

	*count = 0;
	if (n <= 1 || n > SYMBOLS_MAX || first_global < 0 || !(table = malloc((size_t)n * sizeof(*table))))
		return NULL;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr value;
		GElf_Word shndx;
		Elf *elf;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &value, &shndx, &elf, NULL);
		if (!name || !name_ends_in_table(&names, elf, name, sym.st_name) || !*name ||
		    GELF_ST_TYPE(sym.st_info) == STT_SECTION || GELF_ST_TYPE(sym.st_info) == STT_FILE ||
		    GELF_ST_TYPE(sym.st_info) == STT_TLS)
			continue;
		table[(*count)++] = (struct table_symbol){
			.value = value,
			.size = sym.st_size,
			.name = name,
			.noise = name_noise(name),
			.mangled = mangled(name),
			.order = (uint32_t)i,
			.info = sym.st_info,
			.absolute = shndx >= SHN_LORESERVE,
			.pass = sym.st_shndx == SHN_UNDEF ? -1 : i >= first_global ? 0 : 1,
		};
	}
	return table;
}

_Static_assert(offsetof(struct table_symbol, value) == 0 && offsetof(struct indexed_symbol, value) == 0,
	       "sort_equal_values() reads the value first");

static int by_alias_group(const void *a, const void *b)
{
	const struct table_symbol *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	if (x->info != y->info)
		return x->info < y->info ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static bool aliases(const struct table_symbol *a, const struct table_symbol *b)
{
	return a->value == b->value && a->size == b->size && a->info == b->info;
}

/* rows[0..n) of size bytes, sorted by value (their first field) already: each run of equal value sorted by cmp. */
static void sort_equal_values(void *rows, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	char *r = rows;
	for (size_t start = 0, end; start < n; start = end) {
		GElf_Addr v, w;
		memcpy(&v, r + start * size, sizeof(v));
		for (end = start + 1; end < n; end++) {
			memcpy(&w, r + end * size, sizeof(w));
			if (w != v)
				break;
		}
		if (end - start > 1)
			qsort(r + start * size, end - start, size, cmp);
	}
}

/*
 * Sorting a large table (libjvm's 58k symbols, libLLVM's 45k) whole by its full order took most of the index's
 * build, redone every run that names a new address in it (libjvm: 8 ms, and 4 more for the passes' sorts). Rows
 * are sorted by address as pairs (radix_sort.h) instead, and only rows of equal address (aliases, labels) by the
 * full order: the same order, in 2.5-4 ms and 0.6 (libjvm's whole index 16 -> 7 ms). *table comes back sorted
 * by_alias_group, in a new array (the old one freed); out of memory, in place the slow way.
 */
static void sort_alias_groups(struct table_symbol **table, size_t n)
{
	struct radix_pair *keys = malloc(2 * n * sizeof(*keys));
	struct table_symbol *sorted = malloc(n * sizeof(*sorted));
	if (!keys || !sorted) {
		free(keys);
		free(sorted);
		qsort(*table, n, sizeof(**table), by_alias_group);
		return;
	}
	for (size_t i = 0; i < n; i++)
		keys[i] = (struct radix_pair){ (*table)[i].value, i };
	radix_sort_pairs(keys, keys + n, n);
	for (size_t i = 0; i < n; i++)
		sorted[i] = (*table)[keys[i].value];
	sort_equal_values(sorted, n, sizeof(*sorted), by_alias_group);
	free(keys);
	free(*table);
	*table = sorted;
}

/*
 * The name to show for every symbol: among its aliases (same address, size, type and binding, like malloc
 * and __libc_malloc), the first in table order of the plainest names, if plainer than its own: the name
 * users know. Mangled names have no such aliases. *table comes back sorted by_alias_group.
 */
static void name_aliases(struct table_symbol **tablep, size_t n)
{
	sort_alias_groups(tablep, n);
	struct table_symbol *table = *tablep;
	for (size_t start = 0, end; start < n; start = end) {
		const struct table_symbol *plainest = &table[start];
		for (end = start + 1; end < n && aliases(&table[start], &table[end]); end++)
			if (table[end].noise < plainest->noise)
				plainest = &table[end];
		for (size_t i = start; i < end; i++) {
			bool own = table[i].mangled || plainest->noise >= table[i].noise;
			table[i].plainest = own ? table[i].name : plainest->name;
		}
	}
}

static int by_address(const void *a, const void *b)
{
	const struct indexed_symbol *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	if (x->absolute != y->absolute)
		return x->absolute ? 1 : -1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* The last address a sized symbol covers; one that runs past the end of the address space covers all. */
static GElf_Addr last_covered(const struct indexed_symbol *sym)
{
	return sym->size - 1 > UINT64_MAX - sym->value ? UINT64_MAX : sym->value + (sym->size - 1);
}

static GElf_Addr node_last(const struct symbol_pass *p, size_t node)
{
	if (node < p->leaves)
		return p->max_last[node];
	node -= p->leaves;
	return node < p->nsized ? last_covered(&p->sized[node]) : 0;
}

/* The symbols of one pass (0 global, 1 local), sorted, and the tree over the sized ones. */
static int build_pass(struct symbol_pass *p, const struct table_symbol *table, size_t n, int pass)
{
	size_t nsized = 0, nsizeless = 0;
	for (size_t i = 0; i < n; i++)
		if (table[i].pass == pass)
			*(table[i].size ? &nsized : &nsizeless) += 1;
	for (p->leaves = 1; p->leaves < nsized; p->leaves *= 2)
		;
	p->sized = calloc(nsized + 1, sizeof(*p->sized));
	p->sizeless = calloc(nsizeless + 1, sizeof(*p->sizeless));
	p->max_last = calloc(p->leaves, sizeof(*p->max_last));
	if (!p->sized || !p->sizeless || !p->max_last)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct table_symbol *t = &table[i];
		if (t->pass != pass)
			continue;
		struct indexed_symbol *sym = t->size ? &p->sized[p->nsized++] : &p->sizeless[p->nsizeless++];
		*sym = (struct indexed_symbol){ t->value, t->size, t->plainest, t->order, binding_rank(t->info),
						t->absolute };
	}
	/* The table is in alias-group order, by value first: only rows of equal value may be out of by_address. */
	sort_equal_values(p->sized, p->nsized, sizeof(*p->sized), by_address);
	sort_equal_values(p->sizeless, p->nsizeless, sizeof(*p->sizeless), by_address);
	for (size_t node = p->leaves - 1; node >= 1; node--) {
		GElf_Addr left = node_last(p, 2 * node), right = node_last(p, 2 * node + 1);
		p->max_last[node] = left > right ? left : right;
	}
	return 0;
}

static void index_free(struct symbol_index *x)
{
	for (size_t i = 0; i < 2; i++) {
		free(x->pass[i].sized);
		free(x->pass[i].sizeless);
		free(x->pass[i].max_last);
	}
	free(x->cover);
	*x = (struct symbol_index){ .built = x->built };
}

/*
 * Built once, on the first lookup. A table that cannot be indexed (none, too large, out of memory) leaves
 * the index empty: addresses are then named by DWARF alone.
 */
static void index_build(struct symbol_index *x, Dwfl_Module *mod)
{
	size_t n;
	struct table_symbol *table = read_table(mod, &n);

	x->built = true;
	if (!table)
		return;
	name_aliases(&table, n);
	if (!(x->cover = malloc(COVER_MAX * sizeof(*x->cover))) || build_pass(&x->pass[0], table, n, 0) < 0 ||
	    build_pass(&x->pass[1], table, n, 1) < 0)
		index_free(x);
	free(table);
}

static bool starts_after(const void *syms, size_t i, const void *addr)
{
	return ((const struct indexed_symbol *)syms)[i].value > *(const GElf_Addr *)addr;
}

/* How many of the sorted syms[0..n) start at or below addr. */
static size_t count_at_most(const struct indexed_symbol *syms, size_t n, GElf_Addr addr)
{
	return bsearch_first(syms, n, starts_after, &addr);
}

/* A label's place in the order labels are sorted in (by_address): by value, then not absolute before absolute. */
struct label_key {
	GElf_Addr value;
	bool absolute;
};

static bool label_after(const void *labels, size_t i, const void *key)
{
	const struct indexed_symbol *sym = &((const struct indexed_symbol *)labels)[i];
	const struct label_key *k = key;
	return sym->value > k->value || (sym->value == k->value && sym->absolute > k->absolute);
}

/* How many labels of a pass come up to (value, absolute) in their order. */
static size_t labels_up_to(const struct symbol_pass *p, GElf_Addr value, bool absolute)
{
	struct label_key key = { value, absolute };
	return bsearch_first(p->sizeless, p->nsizeless, label_after, &key);
}

/* The label of a pass at value (absolute or not) that comes last in table order; NULL if none. */
static const struct indexed_symbol *last_label(const struct symbol_pass *p, GElf_Addr value, bool absolute)
{
	size_t n = labels_up_to(p, value, absolute);
	const struct indexed_symbol *sym = n > 0 ? &p->sizeless[n - 1] : NULL;
	return sym && sym->value == value && sym->absolute == absolute ? sym : NULL;
}

static bool label_at(const struct symbol_pass *p, GElf_Addr addr)
{
	return last_label(p, addr, false) || last_label(p, addr, true);
}

/* The largest last covered address among the sized symbols sized[0..upto]. (A descent of the max tree, which
 * halves a node's range at each step: no search of a sorted set, so not bsearch.h's.) */
static GElf_Addr prefix_max_last(const struct symbol_pass *p, size_t upto)
{
	GElf_Addr max = 0;
	size_t node = 1, lo = 0, width = p->leaves;
	while (lo + width - 1 > upto) {		/* node's range reaches past upto: split it */
		width /= 2;
		if (upto >= lo + width) {	/* the left half is all in */
			GElf_Addr left = node_last(p, 2 * node);
			max = left > max ? left : max;
			node = 2 * node + 1;
			lo += width;
		} else {
			node = 2 * node;
		}
	}
	GElf_Addr last = node_last(p, node);
	return last > max ? last : max;
}

/*
 * libdwfl's min_label after a pass that found no sized symbol covering addr: the furthest end of the symbols
 * starting at or below it. Those sized all end at or before addr, so last + 1 cannot overflow.
 */
static GElf_Addr pass_reach(const struct symbol_pass *p, GElf_Addr addr)
{
	GElf_Addr reach = 0;
	size_t n = count_at_most(p->sized, p->nsized, addr);
	if (n > 0)
		reach = prefix_max_last(p, n - 1) + 1;
	n = labels_up_to(p, addr, true);
	if (n > 0 && p->sizeless[n - 1].value > reach)
		reach = p->sizeless[n - 1].value;
	return reach;
}

struct cover_list {
	const struct indexed_symbol **sym;
	size_t n;
};

/*
 * Adds the symbols of sized[0..upto] below node (which spans [lo, lo + width)) that cover addr, visiting no
 * subtree that holds none. false when more than COVER_MAX cover it (only a crafted file has that).
 */
static bool collect_covering(const struct symbol_pass *p, size_t node, size_t lo, size_t width, size_t upto,
			     GElf_Addr addr, struct cover_list *out)
{
	if (lo > upto || node_last(p, node) < addr)
		return true;
	if (width == 1) {
		if (out->n == COVER_MAX)
			return false;
		out->sym[out->n++] = &p->sized[lo];
		return true;
	}
	width /= 2;
	return collect_covering(p, 2 * node, lo, width, upto, addr, out) &&
	       collect_covering(p, 2 * node + 1, lo + width, width, upto, addr, out);
}

static int by_order(const void *a, const void *b)
{
	const struct indexed_symbol *const *x = a, *const *y = b;
	return (*x)->order < (*y)->order ? -1 : (*x)->order > (*y)->order;
}

/* Whether libdwfl, having chosen a covering symbol, takes the next one it meets instead. */
static bool replaces(const struct indexed_symbol *chosen, const struct indexed_symbol *next)
{
	return next->value > chosen->value || next->binding > chosen->binding ||
	       (next->value == chosen->value && next->binding == chosen->binding && next->size < chosen->size);
}

/* libdwfl's choice among the sized symbols of a pass covering addr; NULL if none covers it or too many do. */
static const struct indexed_symbol *covering_symbol(const struct symbol_index *x, const struct symbol_pass *p,
						    GElf_Addr addr, bool *crowded)
{
	struct cover_list found = { x->cover, 0 };
	const struct indexed_symbol *chosen = NULL;
	size_t n = count_at_most(p->sized, p->nsized, addr);

	if (n == 0)
		return NULL;
	if (!collect_covering(p, 1, 0, p->leaves, n - 1, addr, &found)) {
		*crowded = true;
		return NULL;
	}
	qsort(found.sym, found.n, sizeof(*found.sym), by_order);
	for (size_t i = 0; i < found.n; i++)
		if (!chosen || replaces(chosen, found.sym[i]))
			chosen = found.sym[i];
	return chosen;
}

/* ---- opening and checking the main file ---- */

static bool fits(uint64_t offset, uint64_t len, uint64_t size)
{
	return offset <= size && len <= size - offset;
}

/*
 * The section header table lies inside the file. A section whose contents do not (a corrupt sh_offset or
 * sh_size) costs only itself, not the file: libelf refuses its data (elf_getdata() checks it against the file's
 * size and returns NULL), every reader of sections here then skips it, and the names of an intact .symtab or
 * .gopclntab are kept.
 */
static int check_sections(Elf *elf, const GElf_Ehdr *eh, uint64_t size)
{
	size_t n;
	if (elf_getshdrnum(elf, &n) != 0)
		return -ENOEXEC;
	/* libelf takes a section header table cut short by the end of the file for no sections at all. */
	if (eh->e_shoff != 0 && (n == 0 || !fits(eh->e_shoff, (uint64_t)n * eh->e_shentsize, size)))
		return -ENOEXEC;
	return 0;
}

/* The address span of the PT_LOAD segments, which must lie inside the file. */
static int load_span(Elf *elf, const GElf_Ehdr *eh, uint64_t size, GElf_Addr *start, GElf_Addr *end)
{
	size_t n;
	bool first = true;
	if (elf_getphdrnum(elf, &n) != 0 || !fits(eh->e_phoff, (uint64_t)n * eh->e_phentsize, size))
		return -ENOEXEC;
	*start = *end = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, i, &ph))
			return -ENOEXEC;
		if (ph.p_type != PT_LOAD)
			continue;
		if (!fits(ph.p_offset, ph.p_filesz, size) || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			return -ENOEXEC;
		if (first)	/* computed as libdwfl does, so that its bias comes out 0 */
			*start = ph.p_vaddr & -ph.p_align;
		first = false;
		if (ph.p_vaddr + ph.p_memsz > *end)
			*end = ph.p_vaddr + ph.p_memsz;
	}
	return *end > *start ? 0 : -ENOEXEC;
}

static int check_elf(struct symbolizer *s, uint64_t size)
{
	GElf_Ehdr eh;
	if (elf_kind(s->elf) != ELF_K_ELF || !gelf_getehdr(s->elf, &eh))
		return -ENOEXEC;
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
		return -ENOEXEC;	/* relocatable objects and cores are never mapped code */
	int err = check_sections(s->elf, &eh, size);
	return err < 0 ? err : load_span(s->elf, &eh, size, &s->start, &s->end);
}

static int open_main(struct symbolizer *s, const char *path, int fd)
{
	struct stat st;
	if (fd < 0 && !path)
		return -EINVAL;
	if (fd >= 0) {
		if ((s->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0 || fstat(s->fd, &st) < 0)
			return -errno;
	} else {
		/* A path may name a FIFO or a device: refused, never waited on (regular_file.h). */
		int opened = regular_file_open(AT_FDCWD, path, 0, &st);
		if (opened < 0)
			return opened == -EINVAL ? -ENOEXEC : opened;
		s->fd = opened;
	}
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = (uint64_t)st.st_size;
	s->trusted = regular_file_writable_by_us_only(&st);
	elf_version(EV_CURRENT);
	s->bytes_fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0);
	if (s->bytes_fd < 0)
		return -errno;
	s->elf = elf_begin(s->fd, regular_file_root_only(&st) ? ELF_C_READ_MMAP : ELF_C_READ, NULL);
	return s->elf ? check_elf(s, (uint64_t)st.st_size) : -ENOEXEC;
}

/* The directory of path with symlinks resolved, where .gnu_debuglink files may sit; NULL if unknown. */
static char *main_dir(const char *path)
{
	char *real = path ? realpath(path, NULL) : NULL;
	char *slash = real ? strrchr(real, '/') : NULL;
	if (!slash) {
		free(real);
		return NULL;
	}
	*slash = '\0';
	return real;
}

/* ---- libdwfl callbacks ---- */

/* Hands libdwfl the main file opened by open_main(): libdwfl would mmap it if it opened it itself. */
static int find_main_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
			 Elf **elfp)
{
	(void)mod, (void)name, (void)base, (void)file_name;
	struct symbolizer *s = *userdata;
	if (!s) {
		*elfp = NULL;
		return -1;
	}
	int fd = s->fd;
	*elfp = s->elf;
	s->elf = NULL;
	s->fd = -1;
	return fd;
}

/* A debug link is used only as a plain file name, never as a path. */
static bool plain_file_name(const char *name)
{
	size_t len = strnlen(name, NAME_MAX + 1);
	return len > 0 && len <= NAME_MAX && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/* libdwfl mmaps debug files: take only files no other user can write, so none can truncate them under us. */
static bool trusted_debug_file(const struct symbolizer *s, const struct stat *st)
{
	return S_ISREG(st->st_mode) && !(st->st_dev == s->dev && st->st_ino == s->ino) &&
	       regular_file_writable_by_us_only(st);
}

static int open_debug_candidate(const struct symbolizer *s, const char *path, const unsigned char *id, int id_len)
{
	struct stat st;
	/* A symlink, FIFO or device planted under the link's name leads nowhere (regular_file.h). */
	int fd = regular_file_open(AT_FDCWD, path, O_NOFOLLOW, &st);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && trusted_debug_file(s, &st) && debug_file_has_build_id(fd, id, id_len))
		return fd;
	close(fd);
	return -1;
}

/* Where gdb and libdwfl look: next to the file, in its .debug/, and under /usr/lib/debug/<its directory>. */
static int find_by_debuglink(struct symbolizer *s, const unsigned char *id, int id_len, const char *link,
			     char **debug_name)
{
	static const char *const formats[] = { "%s/%s", "%s/.debug/%s", DEBUG_ROOT "%s/%s" };
	if (!link || !s->dir || !plain_file_name(link))
		return -1;
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		char *candidate;
		if (asprintf(&candidate, formats[i], s->dir, link) < 0)
			return -1;
		int fd = open_debug_candidate(s, candidate, id, id_len);
		if (fd >= 0) {
			*debug_name = candidate;
			return fd;
		}
		free(candidate);
	}
	return -1;
}

/* The separate debug file by build-id under DEBUG_ROOT (where libdwfl looks first), as a trusted candidate. */
static int find_by_build_id(struct symbolizer *s, const unsigned char *id, int id_len, char **debug_name)
{
	char path[sizeof(DEBUG_ROOT) + sizeof("/.build-id/xx/.debug") + 2 * BUILD_ID_MAX];
	int n = snprintf(path, sizeof(path), DEBUG_ROOT "/.build-id/%02x/", id[0]);
	for (int i = 1; i < id_len; i++)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x", id[i]);
	snprintf(path + n, sizeof(path) - (size_t)n, ".debug");
	int fd = open_debug_candidate(s, path, id, id_len);
	if (fd >= 0 && !(*debug_name = strdup(path))) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * With a debug cache: the decompressed copy of the separate debug file (debug_cache.h), found as libdwfl would
 * find the file (build-id, then debug link); -1 when there is none or nothing to decompress, and libdwfl's own
 * search goes on. Not through dwfl_build_id_find_debuginfo(): that keeps the file it finds open as the module's
 * debug file, whatever descriptor is returned.
 */
static int find_cached_copy(struct symbolizer *s, const unsigned char *id, int id_len, const char *debuglink,
			    char **debug_name)
{
	if (!s->debug_cache_dir)
		return -1;
	int fd = find_by_build_id(s, id, id_len, debug_name);
	if (fd < 0)
		fd = find_by_debuglink(s, id, id_len, debuglink, debug_name);
	int copy = fd >= 0 ? debug_cache_open(s->debug_cache_dir, fd, id, id_len) : -1;
	if (fd >= 0)
		close(fd);
	if (copy < 0 && fd >= 0) {
		free(*debug_name);
		*debug_name = NULL;
	}
	return copy < 0 ? -1 : copy;
}

/*
 * Called for the separate debug file and for a dwz alternate file (a later call: the first is for the debug
 * file, which a copy from the cache never is when it has an alternate file). Without a build-id nothing proves that a
 * file found by name belongs to this one (a CRC would mean reading all of it), so none is looked for.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink, GElf_Word crc, char **debug_name)
{
	const unsigned char *id;
	GElf_Addr id_vaddr;
	int id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
	if (id_len <= 0 || id_len > BUILD_ID_MAX)
		return -1;
	struct symbolizer *s = *userdata;
	int fd = s && !s->debuginfo_asked ? find_cached_copy(s, id, id_len, debuglink, debug_name) : -1;
	if (s)
		s->debuginfo_asked = true;
	if (fd >= 0)
		return fd;
	fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink, crc, debug_name);
	if (fd >= 0 || !s)
		return fd;
	return find_by_debuglink(s, id, id_len, debuglink, debug_name);
}

static int report(struct symbolizer *s, const char *path)
{
	void **userdata;
	GElf_Addr bias;

	memcpy(s->debug_root, DEBUG_ROOT, sizeof(DEBUG_ROOT));
	s->debuginfo_path = s->debug_root;
	s->callbacks = (Dwfl_Callbacks){
		.find_elf = find_main_elf,
		.find_debuginfo = find_debuginfo,
		.debuginfo_path = &s->debuginfo_path,
	};
	if (!(s->dwfl = dwfl_begin(&s->callbacks)))
		return -ENOMEM;
	dwfl_report_begin(s->dwfl);
	s->mod = dwfl_report_module(s->dwfl, path ? path : "", s->start, s->end);
	if (dwfl_report_end(s->dwfl, NULL, NULL) != 0 || !s->mod)
		return -ENOMEM;
	dwfl_module_info(s->mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	*userdata = s;
	/* Opens the ELF now (find_main_elf), so that lookups never meet a half-usable module. */
	Elf *elf = dwfl_module_getelf(s->mod, &bias);
	if (!elf || bias != 0)
		return -ENOEXEC;
	/* Go binaries name their functions, files, lines and inlined calls in .gopclntab, stripped or not. */
	if (gopclntab_open(elf, &s->go) < 0)
		s->go = NULL;
	return 0;
}

int symbolizer_open(const char *path, int fd, struct symbolizer **out)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = -1;
	s->bytes_fd = -1;
	int e = open_main(s, path, fd);
	if (e == 0) {
		s->dir = main_dir(path);
		e = report(s, path);
	}
	if (e < 0) {
		symbolizer_free(s);
		return e;
	}
	*out = s;
	return 0;
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	/* First: the names it writes may be Go's (gopclntab's strings) or interned here. A failure costs the next run
	 * the work of making them again, nothing else. */
	if (s->names && s->trusted)
		names_cache_save(s->names);
	names_cache_free(s->names);
	free(s->names_dir);
	gopclntab_free(s->go); /* it reads the module's Elf, which dwfl_end closes */
	stub_names_free(s->stubs);
	if (s->dwfl)
		dwfl_end(s->dwfl);
	if (s->elf)
		elf_end(s->elf);
	if (s->fd >= 0)
		close(s->fd);
	if (s->bytes_fd >= 0)
		close(s->bytes_fd);
	strtab_free(&s->strings);
	cache_free(&s->cache);
	index_free(&s->index);
	free(s->dir);
	free(s->debug_cache_dir);
	free(s);
}

int symbolizer_find(struct symbolizer *s, const char *name, uint64_t *va, uint64_t *size)
{
	int n = dwfl_module_getsymtab(s->mod);
	if (n <= 1 || n > SYMBOLS_MAX)
		return -ENOENT;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr value;
		GElf_Word shndx;
		const char *sname = dwfl_module_getsym_info(s->mod, i, &sym, &value, &shndx, NULL, NULL);
		if (sname && sym.st_shndx != SHN_UNDEF && strcmp(sname, name) == 0) {
			*va = value;
			*size = sym.st_size;
			return 0;
		}
	}
	return -ENOENT;
}

/* *slot becomes a copy of dir (NULL: none), the old one freed; unchanged on -ENOMEM. */
static int set_dir(char **slot, const char *dir)
{
	char *copy = dir ? strdup(dir) : NULL;
	if (dir && !copy)
		return -ENOMEM;
	free(*slot);
	*slot = copy;
	return 0;
}

int symbolizer_set_debug_cache(struct symbolizer *s, const char *dir)
{
	return set_dir(&s->debug_cache_dir, dir);
}

int symbolizer_set_names_cache(struct symbolizer *s, const char *dir)
{
	return set_dir(&s->names_dir, dir);
}

/* ---- lookups ---- */

static bool in_code(struct symbolizer *s, GElf_Addr va)
{
	Dwarf_Addr offset = va, bias;
	GElf_Shdr sh;
	Elf_Scn *scn = dwfl_module_address_section(s->mod, &offset, &bias);
	return scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR);
}

static size_t section_index(struct symbolizer *s, GElf_Addr va)
{
	Dwarf_Addr offset = va, bias;
	Elf_Scn *scn = dwfl_module_address_section(s->mod, &offset, &bias);
	return scn ? elf_ndxscn(scn) : SHN_UNDEF;
}

/*
 * libdwfl's label for va when no sized symbol covers it (passes: how many of its passes ran; reach: its
 * final min_label): of the labels starting at reach, in va's section or, absolute ones, right at va, the
 * last one its walk meets.
 */
static const struct indexed_symbol *label_for(struct symbolizer *s, int passes, GElf_Addr reach, GElf_Addr va)
{
	bool same_section = reach == va || section_index(s, reach) == section_index(s, va);
	for (int i = passes - 1; i >= 0; i--) {
		const struct symbol_pass *p = &s->index.pass[i];
		const struct indexed_symbol *in_section = same_section ? last_label(p, reach, false) : NULL;
		const struct indexed_symbol *absolute = reach == va ? last_label(p, reach, true) : NULL;
		if (!absolute || (in_section && in_section->order > absolute->order))
			absolute = in_section;
		if (absolute)
			return absolute;
	}
	return NULL;
}

/*
 * The ELF symbol for va, as dwfl_module_addrinfo() finds it (see "symbol index"). A sized symbol counts only
 * if it covers va. A sizeless one (hand-written assembly) is what libdwfl offers only when it lies in the
 * same section as va with no sized symbol ending in between; we also want that section to hold code, and
 * DWARF, when it covers va, is preferred to it by the caller.
 */
static struct symbol find_symbol(struct symbolizer *s, GElf_Addr va)
{
	struct symbol out = { NULL, NO_SYMBOL };
	struct symbol_index *x = &s->index;
	bool crowded = false;
	int passes = 1;
	GElf_Addr reach = 0;

	if (!x->built)
		index_build(x, s->mod);
	const struct indexed_symbol *sym = covering_symbol(x, &x->pass[0], va, &crowded);
	if (!sym && !crowded) {
		reach = pass_reach(&x->pass[0], va);
		if (!label_at(&x->pass[0], va)) {	/* libdwfl then skips the locals */
			passes = 2;
			sym = covering_symbol(x, &x->pass[1], va, &crowded);
			GElf_Addr local_reach = sym || crowded ? 0 : pass_reach(&x->pass[1], va);
			reach = local_reach > reach ? local_reach : reach;
		}
	}
	if (crowded)
		return out;
	if (sym)
		out.evidence = COVERING_SYMBOL;
	else if (in_code(s, va) && (sym = label_for(s, passes, reach, va)))
		out.evidence = SIZELESS_SYMBOL;
	else
		return out;
	out.name = display_name(s, sym->name);
	return out;
}

/* Children of these may define functions though they have no address ranges of their own. */
static bool is_container(int tag)
{
	switch (tag) {
	case DW_TAG_namespace:
	case DW_TAG_module:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
		return true;
	}
	return false;
}

/* Scopes with address ranges: entered only when they contain the address. */
static bool is_code_scope(int tag)
{
	switch (tag) {
	case DW_TAG_subprogram:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_entry_point:
	case DW_TAG_lexical_block:
	case DW_TAG_try_block:
	case DW_TAG_catch_block:
	case DW_TAG_with_stmt:
		return true;
	}
	return false;
}

static bool is_function(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

/*
 * The function DIEs (physical subprogram, then the inlined instances) containing pc, outermost first.
 * path[d] is the DIE being looked at d levels below the CU; floor is the level just inside the innermost
 * scope found to contain pc, past which we never climb back.
 */
static int function_scopes(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *funcs, int max)
{
	Dwarf_Die path[SCOPE_DEPTH_MAX];
	int depth = 0, floor = 0, n = 0;

	if (dwarf_child(cu, &path[0]) != 0)
		return 0;
	for (;;) {
		Dwarf_Die *die = &path[depth];
		int tag = dwarf_tag(die);
		bool enter = false;
		if (is_code_scope(tag) && dwarf_haspc(die, pc) == 1) {
			if (is_function(tag) && n < max)
				funcs[n++] = *die;
			floor = depth + 1;
			enter = true;
		} else if (is_container(tag) && dwarf_haschildren(die) > 0) {
			enter = true;
		}
		if (enter && depth + 1 < SCOPE_DEPTH_MAX && dwarf_child(die, &path[depth + 1]) == 0) {
			depth++;
			continue;
		}
		if (floor == depth + 1)
			return n;	/* the innermost scope holding pc has nothing inside */
		while (dwarf_siblingof(&path[depth], &path[depth]) != 0) {
			if (depth == floor)
				return n;
			depth--;	/* out of a container that did not hold pc */
		}
	}
}

/* DWARF's name for a function DIE (following abstract origins): demangled linkage name, else DW_AT_name. */
static const char *die_name(struct symbolizer *s, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (!linkage)
		linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	char *demangled = demangle(linkage);
	if (demangled) {
		const char *name = intern(&s->strings, demangled);
		free(demangled);
		return name;
	}
	const char *name = dwarf_diename(die);
	return intern(&s->strings, name ? name : linkage);
}

struct position {
	const char *file;	/* not interned yet */
	int line;
};

/* Source position of pc itself, from the line table. */
static struct position line_at(Dwarf_Die *cu, Dwarf_Addr pc)
{
	struct position pos = { NULL, 0 };
	Dwarf_Line *line = cu ? dwarf_getsrc_die(cu, pc) : NULL;
	if (line && dwarf_lineno(line, &pos.line) == 0) {
		pos.file = dwarf_linesrc(line, NULL, NULL);
		if (pos.line < 0)
			pos.line = 0;
	}
	return pos;
}

/* Where an inlined instance was called from: the position of the frame that contains it. */
static struct position call_site(Dwarf_Die *die, Dwarf_Files *files, size_t nfiles)
{
	struct position pos = { NULL, 0 };
	Dwarf_Attribute attr;
	Dwarf_Word v;
	if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) == 0 && v < nfiles)
		pos.file = dwarf_filesrc(files, v, NULL, NULL);
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0 && v <= INT_MAX)
		pos.line = (int)v;
	return pos;
}

static void set_frame(struct symbolizer *s, struct symbol_frame *f, const char *function, struct position pos,
		      int inlined)
{
	f->function = function;
	f->file = intern(&s->strings, pos.file);
	f->line = pos.line;
	f->inlined = inlined;
	f->go = 0;
}

/* Frames for the function DIEs funcs[0..n) (outermost first), emitted innermost first. */
static size_t inline_frames(struct symbolizer *s, Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *funcs, int n,
			    const char *physical_name, struct symbol_frame *frames, size_t max)
{
	Dwarf_Files *files = NULL;
	size_t nfiles = 0, out = 0;
	struct position pos = line_at(cu, pc);

	if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
		files = NULL;
	for (int i = n - 1; i >= 0 && out < max; i--) {
		const char *name = i == 0 && physical_name ? physical_name : die_name(s, &funcs[i]);
		set_frame(s, &frames[out++], name, pos, i > 0);
		pos = call_site(&funcs[i], files, nfiles);
	}
	return out;
}

/*
 * Whether the string sections of the file holding the DWARF end in a NUL. libdw (elfutils 0.188) reads
 * .debug_str and .debug_line_str strings with strlen and no bound, so in a hostile file one unterminated
 * section is a read past its buffer (found by fuzz_elf). Such a file gets symbols, not DWARF.
 */
static bool dwarf_strings_terminated(Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (!name || (strcmp(name, ".debug_str") != 0 && strcmp(name, ".debug_line_str") != 0))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (d && d->d_size && ((const char *)d->d_buf)[d->d_size - 1] != '\0')
			return false;
	}
	return true;
}

/* Whether DWARF lookups may run on this module: checked once, when the DWARF is first needed. */
static bool dwarf_checked(struct symbolizer *s)
{
	if (s->dwarf_usable == 0) {
		Dwarf_Addr bias;
		Dwarf *dw = dwfl_module_getdwarf(s->mod, &bias);
		Elf *elf = dw ? dwarf_getelf(dw) : NULL;
		s->dwarf_usable = !elf || dwarf_strings_terminated(elf) ? 1 : -1;
	}
	return s->dwarf_usable > 0;
}

/* The main file's Elf (libdwfl's, open since report()). */
static Elf *main_elf(struct symbolizer *s)
{
	GElf_Addr bias;
	return dwfl_module_getelf(s->mod, &bias);
}

/* "name@plt" for a PLT stub at va, as perf names them; NULL elsewhere. */
static const char *plt_stub_name(struct symbolizer *s, GElf_Addr va)
{
	char buf[NAME_LEN_MAX + sizeof("@plt")];
	if (!s->stubs_read) {
		Elf *elf = main_elf(s);
		s->stubs_read = true;
		if (!elf || stub_names_new(elf, &s->stubs) < 0)
			s->stubs = NULL;
	}
	const char *raw = stub_names_plt(s->stubs, va);
	if (!raw)
		return NULL;
	snprintf(buf, sizeof(buf), "%s@plt", display_name(s, raw));
	return intern(&s->strings, buf);
}

/* Code no symbol names for sure: a PLT stub, or the signal return trampoline (__restore_rt). */
static int stub_frame(struct symbolizer *s, GElf_Addr va, enum evidence evidence, struct symbol_frame *frame)
{
	const char *name = plt_stub_name(s, va);
	Elf *elf;
	if (!name && evidence != COVERING_SYMBOL && (elf = main_elf(s)) && stub_is_sigreturn(elf, s->bytes_fd, va))
		name = intern(&s->strings, "__restore_rt");
	if (!name)
		return 0;
	set_frame(s, frame, name, (struct position){ NULL, 0 }, 0);
	return 1;
}

static int lookup_uncached(struct symbolizer *s, uint64_t elf_va, struct symbol_frame *frames, size_t max)
{
	int ngo = s->go ? gosym_lookup(s->go, elf_va, frames, max) : 0;
	if (ngo > 0)
		return ngo;
	Dwarf_Die funcs[SCOPE_DEPTH_MAX];
	Dwarf_Addr bias = 0;
	struct symbol sym = find_symbol(s, elf_va);
	Dwarf_Die *cu = dwarf_checked(s) ? dwfl_module_addrdie(s->mod, elf_va, &bias) : NULL;
	int n = cu ? function_scopes(cu, elf_va - bias, funcs, SCOPE_DEPTH_MAX) : 0;
	if (n > 0) {
		const char *physical = sym.evidence == COVERING_SYMBOL ? sym.name : NULL;
		return (int)inline_frames(s, cu, elf_va - bias, funcs, n, physical, frames, max);
	}
	if (stub_frame(s, elf_va, sym.evidence, &frames[0]))
		return 1;
	if (sym.evidence == NO_SYMBOL)
		return 0;
	set_frame(s, &frames[0], sym.name, line_at(cu, elf_va - bias), 0);
	return 1;
}

/* ---- names kept between runs ---- */

size_t symbolizer_kept_names(const struct symbolizer *s)
{
	return s->names_kept;
}

/* The size of the separate debug file libdwfl would take (by build-id, then debug link), or -1 for none. */
static long long debug_file_size(struct symbolizer *s, const unsigned char *id, int id_len)
{
	GElf_Word crc;
	char *name = NULL;
	struct stat st;
	int fd = find_by_build_id(s, id, id_len, &name);
	if (fd < 0)
		fd = find_by_debuglink(s, id, id_len, dwelf_elf_gnu_debuglink(main_elf(s), &crc), &name);
	long long size = fd >= 0 && fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
	if (fd >= 0)
		close(fd);
	free(name);
	return size;
}

/*
 * The file of names kept for this file's build-id, with the key of everything else they depend on: the
 * symbolizer's sources, libdw, the file's size and its debug file's (one installed or removed since changes
 * the names). NULL without a build-id or a cache directory.
 */
static struct names_cache *names_open(struct symbolizer *s)
{
	const unsigned char *id;
	GElf_Addr id_vaddr;
	char hex[2 * BUILD_ID_MAX + 1], key[NAMES_CACHE_KEY_MAX];
	s->names_opened = true;
	int id_len = s->names_dir ? dwfl_module_build_id(s->mod, &id, &id_vaddr) : 0;
	if (id_len <= 0 || id_len > BUILD_ID_MAX)
		return NULL;
	for (int i = 0; i < id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	const char *dw = dwfl_version(NULL);
	snprintf(key, sizeof(key), "n%d src:%.16s dw:%.12s size:%llu debug:%lld", NAMES_CACHE_FORMAT,
		 SYMBOLIZER_SOURCES, dw ? dw : "?", (unsigned long long)s->size, debug_file_size(s, id, id_len));
	struct names_cache *c;
	return names_cache_open(s->names_dir, hex, key, &c) == 0 ? c : NULL;
}

int symbolizer_lookup(struct symbolizer *s, uint64_t elf_va, struct symbol_frame *frames, size_t max)
{
	struct symbol_frame chain[SCOPE_DEPTH_MAX];
	const struct symbol_frame *found = chain;
	int n;

	if (!s || !frames || max == 0)
		return 0;
	const struct cached_lookup *hit = cache_get(&s->cache, elf_va);
	if (hit) {
		n = hit->n;
		found = hit->frames;
	} else {
		if (!s->names_opened)
			s->names = names_open(s);
		n = s->names ? names_cache_get(s->names, elf_va, chain, SCOPE_DEPTH_MAX) : -ENOENT;
		s->names_kept += n >= 0;
		if (n < 0) {
			n = lookup_uncached(s, elf_va, chain, SCOPE_DEPTH_MAX);
			if (s->names)
				names_cache_add(s->names, elf_va, chain, n);	/* past its bound: not kept */
		}
		cache_put(&s->cache, elf_va, chain, n);
	}
	if ((size_t)n > max)
		n = (int)max;	/* the innermost frames */
	if (n > 0)
		memcpy(frames, found, (size_t)n * sizeof(*frames));
	return n;
}
