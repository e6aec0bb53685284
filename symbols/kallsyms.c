/*
 * kallsyms.c — parse /proc/kallsyms and find the symbol at or below a kernel address (see kallsyms.h).
 *
 * Only text symbols (t, T, w, W) are kept: samples land in code, and a data symbol placed between two
 * functions would take the addresses that belong to the function before it. kallsyms has no sizes, so a
 * lookup names the nearest symbol below the address. Lines are read into a bounded buffer (names are at
 * most 512 bytes since Linux 6.1); a line that is too long or not in the expected form is skipped.
 */
#include "symbols/kallsyms.h"

#include "src/base/bsearch.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LINE_MAX_LEN 1024
#define READ_BUFFER (1u << 20)	/* /proc/kallsyms is ~5 MB: a few reads instead of thousands of 4 KiB ones */
#define SYMBOLS_MAX (1u << 24)	/* far above any kernel (~200k), a bound on a hostile file */
#define NO_MODULE UINT32_MAX

struct ksym {
	uint64_t addr;
	uint32_t name;		/* offset in kallsyms.names */
	uint32_t module;	/* offset in kallsyms.names, NO_MODULE for vmlinux */
	uint32_t order;		/* line order, to keep sorting deterministic */
	uint32_t rank;		/* lower is preferred among symbols at one address */
};

struct kallsyms {
	struct ksym *sym;
	size_t n, cap;
	char *names;		/* NUL-separated names and module names */
	size_t names_len, names_cap;
	uint64_t text_start;
	/* A table read from an image (kallsyms_from_image) answers exactly for the addresses in its spans only;
	 * any other address is looked up in the whole file, loaded from fallback_path the first time. */
	struct kallsyms_span *spans;	/* NULL for a table loaded from the file */
	size_t nspans;
	char *fallback_path;
	struct kallsyms *full;
	bool full_failed;
	/* A table of a mapped image (kallsyms_from_mapping) reads its symbols and names in place: sym is NULL,
	 * isym the image's symbols and names the image's names, both inside map, which the table unmaps. */
	const struct image_sym *isym;
	void *map;
	size_t map_len;
};

/* One parsed line; the strings point into the line buffer. */
struct line {
	uint64_t addr;
	char type;
	const char *name;
	const char *module;	/* NULL for vmlinux */
};

/* ---- parsing ---- */

/* Plain comparisons rather than <ctype.h>, which costs a call per character: 5 MB are parsed per load. */
static int hex_digit(unsigned char c)
{
	if ((unsigned)(c - '0') < 10u)
		return c - '0';
	c |= 0x20;
	return (unsigned)(c - 'a') < 6u ? c - 'a' + 10 : -1;
}

static bool is_graph(unsigned char c)
{
	return (unsigned)(c - 0x21) < 0x5eu;	/* printable, not blank */
}

static bool parse_hex(char **p, uint64_t *out)
{
	uint64_t v = 0;
	int digits = 0, d;
	for (; (d = hex_digit((unsigned char)**p)) >= 0; (*p)++) {
		if (++digits > 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return digits > 0;
}

/* Cuts a run of printable non-blank characters at *p; returns its start, or NULL if empty. */
static char *take_word(char **p)
{
	char *start = *p;
	while (is_graph((unsigned char)**p))
		(*p)++;
	return *p > start ? start : NULL;
}

/* "ffffffff81000000 T _text" or "ffffffffc0a01000 t name\t[module]", without its newline. */
static int parse_line(char *s, struct line *l)
{
	char *name, *module = NULL;
	if (!parse_hex(&s, &l->addr) || s[0] != ' ' || !isalpha((unsigned char)s[1]) || s[2] != ' ')
		return -EINVAL;
	l->type = s[1];
	s += 3;
	if (!(name = take_word(&s)))
		return -EINVAL;
	char *name_end = s;
	if (s[0] == '\t' && s[1] == '[') {
		char *end;
		s += 2;
		if (!(module = take_word(&s)) || !(end = strchr(module, ']')) || end == module || end[1] != '\0')
			return -EINVAL;
		*end = '\0';
	} else if (s[0] != '\0') {
		return -EINVAL;
	}
	*name_end = '\0';
	l->name = name;
	l->module = module;
	return 0;
}

static bool is_text(char type)
{
	return type == 't' || type == 'T' || type == 'w' || type == 'W';
}

/* Among aliases at one address: fewer leading underscores, then global, then strong reads best. */
static uint32_t rank(const struct line *l)
{
	uint32_t underscores = 0;
	while (l->name[underscores] == '_' && underscores < 255)
		underscores++;
	return underscores << 2 | (islower((unsigned char)l->type) ? 2u : 0u) | (tolower(l->type) == 'w' ? 1u : 0u);
}

/* ---- building the table ---- */

static int add_name(struct kallsyms *k, const char *s, uint32_t *offset)
{
	size_t len = strlen(s) + 1;
	if (k->names_len + len > UINT32_MAX)
		return -E2BIG;
	if (k->names_len + len > k->names_cap) {
		size_t cap = k->names_cap ? 2 * k->names_cap : 1 << 16;
		while (cap < k->names_len + len)
			cap *= 2;
		char *names = realloc(k->names, cap);
		if (!names)
			return -ENOMEM;
		k->names = names;
		k->names_cap = cap;
	}
	memcpy(k->names + k->names_len, s, len);
	*offset = (uint32_t)k->names_len;
	k->names_len += len;
	return 0;
}

/* Module symbols come grouped by module: reusing the previous module's name is enough to share it. */
static int module_name(struct kallsyms *k, const char *module, uint32_t *last, uint32_t *offset)
{
	if (!module) {
		*offset = NO_MODULE;
		return 0;
	}
	if (*last != NO_MODULE && strcmp(k->names + *last, module) == 0) {
		*offset = *last;
		return 0;
	}
	int err = add_name(k, module, offset);
	if (err == 0)
		*last = *offset;
	return err;
}

static int add_symbol(struct kallsyms *k, const struct line *l, uint32_t *last_module)
{
	if (k->n == SYMBOLS_MAX)
		return -E2BIG;
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 4096;
		struct ksym *sym = realloc(k->sym, cap * sizeof(*sym));
		if (!sym)
			return -ENOMEM;
		k->sym = sym;
		k->cap = cap;
	}
	struct ksym *s = &k->sym[k->n];
	int err = add_name(k, l->name, &s->name);
	if (err == 0)
		err = module_name(k, l->module, last_module, &s->module);
	if (err < 0)
		return err;
	s->addr = l->addr;
	s->order = (uint32_t)k->n;
	s->rank = rank(l);
	k->n++;
	return 0;
}

static int compare_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Of two symbols at one address, whether a reads better than b (rank, then line order). */
static bool better(const struct ksym *a, const struct ksym *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->order < b->order;
}

/*
 * Sorted by address, one symbol per address (the best ranked). /proc/kallsyms lists vmlinux in address order
 * and then the modules, each in its own order: only the part after the sorted prefix (sorted: its length) is
 * sorted, then merged with the prefix — a linear pass where qsort of the whole table took ~20 ms.
 */
static int sort_and_dedup(struct kallsyms *k, size_t sorted)
{
	size_t n = k->n, out = 0;
	struct ksym *all = k->sym;
	if (sorted < n) {
		qsort(k->sym + sorted, n - sorted, sizeof(*k->sym), compare_ksym);
		if (sorted && k->sym[sorted].addr < k->sym[sorted - 1].addr) {
			if (!(all = malloc(n * sizeof(*all))))
				return -ENOMEM;
			for (size_t i = 0, j = sorted, o = 0; o < n; o++)
				all[o] = j == n || (i < sorted && compare_ksym(&k->sym[i], &k->sym[j]) <= 0) ? k->sym[i++] :
												       k->sym[j++];
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (out > 0 && all[out - 1].addr == all[i].addr) {
			if (better(&all[i], &all[out - 1]))
				all[out - 1] = all[i];
		} else {
			all[out++] = all[i];
		}
	}
	if (all != k->sym) {
		free(k->sym);
		k->sym = all;
		k->cap = n;
	}
	k->n = out;
	return 0;
}

/* ---- reading ---- */

struct load_stats {
	size_t lines;		/* well-formed lines, of any type */
	size_t nonzero;		/* ... with a nonzero address */
	size_t sorted;		/* symbols in address order from the first */
};

static int take_line(struct kallsyms *k, char *s, struct load_stats *st, uint32_t *last_module)
{
	struct line l;
	if (parse_line(s, &l) < 0)
		return 0;
	st->lines++;
	st->nonzero += l.addr != 0;
	if (!l.module && l.type == 'T' && strcmp(l.name, "_text") == 0)
		k->text_start = l.addr;
	if (!is_text(l.type))
		return 0;
	int err = add_symbol(k, &l, last_module);
	if (err == 0 && st->sorted == k->n - 1 && (k->n == 1 || k->sym[k->n - 2].addr <= l.addr))
		st->sorted = k->n;
	return err;
}

/*
 * The file in READ_BUFFER reads (stdio would read /proc files 1 KiB at a time, their st_blksize), its lines
 * parsed in place. A line of LINE_MAX_LEN bytes or more is skipped up to its newline.
 */
static int read_symbols(int fd, char *buf, struct kallsyms *k, struct load_stats *st)
{
	uint32_t last_module = NO_MODULE;
	size_t have = 0;
	bool skipping = false;
	for (;;) {
		ssize_t got = read(fd, buf + have, READ_BUFFER - 1 - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		char *p = buf, *end = buf + have + got, *nl;
		if (got == 0 && have > 0)
			*end++ = '\n'; /* the last line, without its newline */
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			*nl = '\0';
			int err = !skipping && nl - p < LINE_MAX_LEN ? take_line(k, p, st, &last_module) : 0;
			if (err < 0)
				return err;
			skipping = false;
			p = nl + 1;
		}
		if (got == 0)
			return 0;
		have = (size_t)(end - p);
		if (have >= LINE_MAX_LEN) {
			skipping = true;
			have = 0;
		}
		memmove(buf, p, have);
	}
}

int kallsyms_load(const char *path, struct kallsyms **out)
{
	struct load_stats st = { 0, 0, 0 };
	struct kallsyms *k = calloc(1, sizeof(*k));
	char *buf = malloc(READ_BUFFER);
	int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	int e = !k || !buf ? -ENOMEM : !path ? -EINVAL : fd < 0 ? -errno : read_symbols(fd, buf, k, &st);

	if (fd >= 0)
		close(fd);
	free(buf);
	/* Without permission the kernel shows every address as 0: a table of zeros would name everything wrongly. */
	if (e == 0 && st.lines > 0 && st.nonzero == 0)
		e = -EPERM;
	else if (e == 0 && k->n == 0)
		e = -ENODATA;
	if (e == 0)
		e = sort_and_dedup(k, st.sorted);
	if (e < 0) {
		kallsyms_free(k);
		return e;
	}
	*out = k;
	return 0;
}

/* Reads one line into buf without its newline; false at EOF. *too_long if the line did not fit (skipped). */
static bool read_line(FILE *f, char *buf, size_t size, bool *too_long)
{
	if (!fgets(buf, (int)size, f))
		return false;
	size_t len = strlen(buf);
	*too_long = false;
	if (len > 0 && buf[len - 1] == '\n') {
		buf[len - 1] = '\0';
	} else if (!feof(f)) {
		int c;
		*too_long = true;
		while ((c = fgetc(f)) != EOF && c != '\n')
			;
	}
	return true;
}

int kallsyms_read_text_start(const char *path, uint64_t *addr)
{
	char buf[LINE_MAX_LEN], stdio_buf[16384];
	bool too_long;
	FILE *f = fopen(path, "re");
	int err = -ENOENT;
	if (!f)
		return -errno;
	setvbuf(f, stdio_buf, _IOFBF, sizeof(stdio_buf));
	while (err == -ENOENT && read_line(f, buf, sizeof(buf), &too_long)) {
		struct line l;
		if (too_long || parse_line(buf, &l) < 0 || l.module || l.type != 'T' || strcmp(l.name, "_text") != 0)
			continue;
		*addr = l.addr;
		err = l.addr ? 0 : -EPERM;
	}
	fclose(f);
	return err;
}

void kallsyms_free(struct kallsyms *k)
{
	if (!k)
		return;
	if (k->map) {
		munmap(k->map, k->map_len);
	} else {
		free(k->sym);
		free(k->names);
	}
	free(k->spans);
	free(k->fallback_path);
	kallsyms_free(k->full);
	free(k);
}

/* ---- lookups ---- */

struct image_sym {
	uint64_t addr;
	uint32_t name, module;	/* offsets in the names; module NO_MODULE for vmlinux */
};

/* Symbol i of k, in its own table or in place in its image. */
static uint64_t sym_addr(const struct kallsyms *k, size_t i)
{
	return k->isym ? k->isym[i].addr : k->sym[i].addr;
}

static bool sym_after(const void *k, size_t i, const void *addr)
{
	return sym_addr(k, i) > *(const uint64_t *)addr;
}

static void sym_names(const struct kallsyms *k, size_t i, uint32_t *name, uint32_t *module)
{
	*name = k->isym ? k->isym[i].name : k->sym[i].name;
	*module = k->isym ? k->isym[i].module : k->sym[i].module;
}

static bool span_ends_after(const void *spans, size_t i, const void *addr)
{
	return ((const struct kallsyms_span *)spans)[i].hi > *(const uint64_t *)addr;
}

/* Whether a table read from an image answers for addr exactly (spans sorted, disjoint). */
static bool in_spans(const struct kallsyms *k, uint64_t addr)
{
	size_t i = bsearch_first(k->spans, k->nspans, span_ends_after, &addr);
	return i < k->nspans && k->spans[i].lo <= addr;
}

/* The table that answers for addr: k, or the whole file for an address outside an image's spans. */
static const struct kallsyms *table_for(struct kallsyms *k, uint64_t addr)
{
	if (!k->spans || in_spans(k, addr))
		return k;
	if (!k->full && !k->full_failed && kallsyms_load(k->fallback_path, &k->full) < 0)
		k->full_failed = true;
	return k->full;
}

const char *kallsyms_lookup(struct kallsyms *table, uint64_t addr, uint64_t *offset, const char **module)
{
	if (offset)
		*offset = 0;
	if (module)
		*module = NULL;
	const struct kallsyms *k = table ? table_for(table, addr) : NULL;
	if (!k || k->n == 0 || addr < sym_addr(k, 0))
		return NULL;
	/* The symbol before the first one past addr: there is one, the first symbol is at or below addr. */
	size_t i = bsearch_first(k, k->n, sym_after, &addr) - 1;
	uint32_t name, mod;
	sym_names(k, i, &name, &mod);
	if (offset)
		*offset = addr - sym_addr(k, i);
	if (module && mod != NO_MODULE)
		*module = k->names + mod;
	return k->names + name;
}

uint64_t kallsyms_text_start(const struct kallsyms *k)
{
	return k ? k->text_start : 0;
}

/* ---- images ---- */

#define IMAGE_MAGIC "HPKSYM01"
#define SPANS_MAX (1u << 16)	/* vmlinux and one per module: far below */

struct image_head {
	char magic[8];
	uint64_t text_start;
	uint32_t nsym, nspans, names_len, reserved;
};

/* Bytes of an image of these counts; 0 if that overflows. */
static size_t image_size(size_t nsym, size_t nspans, size_t names_len)
{
	if (nsym > SYMBOLS_MAX || nspans > SPANS_MAX || names_len > UINT32_MAX)
		return 0;
	return sizeof(struct image_head) + nspans * sizeof(struct kallsyms_span) + nsym * sizeof(struct image_sym) +
	       names_len;
}

/* The symbols of k whose address lies in spans, with only their names, into out (empty). */
static int copy_spanned(const struct kallsyms *k, const struct kallsyms_span *spans, size_t nspans,
			struct kallsyms *out)
{
	struct kallsyms probe = { .spans = (struct kallsyms_span *)spans, .nspans = nspans };
	uint32_t last_module = NO_MODULE;
	for (size_t i = 0; i < k->n; i++) {
		const struct ksym *s = &k->sym[i];
		if (!in_spans(&probe, s->addr))
			continue;
		struct line l = { .addr = s->addr, .type = 'T', .name = k->names + s->name,
				  .module = s->module == NO_MODULE ? NULL : k->names + s->module };
		int err = add_symbol(out, &l, &last_module);
		if (err < 0)
			return err;
	}
	return 0;
}

/* Spans (at p, maybe unaligned) non-empty, sorted and disjoint. */
static int check_spans(const char *p, size_t n)
{
	struct kallsyms_span prev = { 0, 0 }, cur;
	for (size_t i = 0; i < n; i++, prev = cur) {
		memcpy(&cur, p + i * sizeof(cur), sizeof(cur));
		if (cur.lo >= cur.hi || (i > 0 && cur.lo < prev.hi))
			return -EINVAL;
	}
	return n ? 0 : -EINVAL;
}

/* Fills buf (image_size bytes) from t, a sorted table, and its spans. */
static void image_fill(char *buf, const struct kallsyms *t, const struct kallsyms_span *spans, size_t nspans,
		       uint64_t text_start)
{
	struct image_head h = { .text_start = text_start, .nsym = (uint32_t)t->n, .nspans = (uint32_t)nspans,
				.names_len = (uint32_t)t->names_len };
	memcpy(h.magic, IMAGE_MAGIC, sizeof(h.magic));
	memcpy(buf, &h, sizeof(h));
	char *p = buf + sizeof(h);
	if (nspans)
		memcpy(p, spans, nspans * sizeof(*spans));
	p += nspans * sizeof(*spans);
	for (size_t i = 0; i < t->n; i++, p += sizeof(struct image_sym)) {
		struct image_sym s = { t->sym[i].addr, t->sym[i].name, t->sym[i].module };
		memcpy(p, &s, sizeof(s));
	}
	memcpy(p, t->names, t->names_len);
}

int kallsyms_image(const struct kallsyms *k, const struct kallsyms_span *spans, size_t nspans, void **out,
		   size_t *len)
{
	struct kallsyms t = { 0 };
	*out = NULL;
	*len = 0;
	if (!k || k->spans || nspans > SPANS_MAX || check_spans((const char *)spans, nspans) < 0)
		return -EINVAL;
	int err = copy_spanned(k, spans, nspans, &t);
	size_t size = err == 0 ? image_size(t.n, nspans, t.names_len) : 0;
	if (err == 0 && t.n == 0)
		err = -ENODATA;
	else if (err == 0 && size == 0)
		err = -E2BIG;
	else if (err == 0 && !(*out = malloc(size)))
		err = -ENOMEM;
	if (err == 0) {
		image_fill(*out, &t, spans, nspans, k->text_start);
		*len = size;
	}
	free(t.sym);
	free(t.names);
	return err;
}

/* Symbols in strictly ascending order, names and modules inside the names. */
static int check_symbols(const char *p, size_t n, uint32_t names_len)
{
	struct image_sym prev = { 0, 0, 0 }, s;
	for (size_t i = 0; i < n; i++, prev = s) {
		memcpy(&s, p + i * sizeof(s), sizeof(s));
		if (s.name >= names_len || (s.module != NO_MODULE && s.module >= names_len) ||
		    (i > 0 && prev.addr >= s.addr))
			return -EINVAL;
	}
	return 0;
}

/* The parts of an image after its head, checked; the head's counts already match len. */
static int image_check(const char *buf, const struct image_head *h)
{
	const char *spans = buf + sizeof(*h);
	const char *syms = spans + h->nspans * sizeof(struct kallsyms_span);
	const char *names = syms + (size_t)h->nsym * sizeof(struct image_sym);
	if (h->nsym == 0 || h->names_len == 0 || names[h->names_len - 1] != '\0')
		return -EINVAL;
	int err = check_spans(spans, h->nspans);
	return err ? err : check_symbols(syms, h->nsym, h->names_len);
}

/* A table from a checked image. */
static int image_table(const char *buf, const struct image_head *h, const char *fallback_path,
		       struct kallsyms *k)
{
	const char *spans = buf + sizeof(*h);
	const char *syms = spans + h->nspans * sizeof(struct kallsyms_span);
	const char *names = syms + (size_t)h->nsym * sizeof(struct image_sym);
	k->sym = malloc(h->nsym * sizeof(*k->sym));
	k->spans = malloc(h->nspans * sizeof(*k->spans));
	k->names = malloc(h->names_len);
	k->fallback_path = strdup(fallback_path);
	if (!k->sym || !k->spans || !k->names || !k->fallback_path)
		return -ENOMEM;
	for (size_t i = 0; i < h->nsym; i++) {
		struct image_sym s;
		memcpy(&s, syms + i * sizeof(s), sizeof(s));
		k->sym[i] = (struct ksym){ .addr = s.addr, .name = s.name, .module = s.module, .order = (uint32_t)i };
	}
	memcpy(k->spans, spans, h->nspans * sizeof(*k->spans));	/* h->nspans >= 1: checked */
	memcpy(k->names, names, h->names_len);
	k->n = k->cap = h->nsym;
	k->nspans = h->nspans;
	k->names_len = k->names_cap = h->names_len;
	k->text_start = h->text_start;
	return 0;
}

/* The head of an image of len bytes, and the whole image checked. */
static int image_read_head(const void *image, size_t len, struct image_head *h)
{
	if (!image || len < sizeof(*h))
		return -EINVAL;
	memcpy(h, image, sizeof(*h));
	if (memcmp(h->magic, IMAGE_MAGIC, sizeof(h->magic)) != 0 || image_size(h->nsym, h->nspans, h->names_len) != len ||
	    h->reserved)
		return -EINVAL;
	return image_check(image, h);
}

int kallsyms_from_image(const void *image, size_t len, const char *fallback_path, struct kallsyms **out)
{
	struct image_head h;
	*out = NULL;
	if (!fallback_path)
		return -EINVAL;
	int err = image_read_head(image, len, &h);
	struct kallsyms *k = err == 0 ? calloc(1, sizeof(*k)) : NULL;
	if (err == 0 && !k)
		err = -ENOMEM;
	if (err == 0 && (err = image_table(image, &h, fallback_path, k)) < 0)
		kallsyms_free(k);
	if (err == 0)
		*out = k;
	return err;
}

int kallsyms_from_mapping(void *map, size_t map_len, size_t off, const char *fallback_path, struct kallsyms **out)
{
	struct image_head h;
	*out = NULL;
	const char *image = (const char *)map + off;
	if (!map || !fallback_path || off > map_len || (uintptr_t)image % _Alignof(struct image_sym) != 0)
		return -EINVAL;
	int err = image_read_head(image, map_len - off, &h);
	struct kallsyms *k = err == 0 ? calloc(1, sizeof(*k)) : NULL;
	if (err == 0 && !k)
		err = -ENOMEM;
	if (err < 0)
		return err;
	const char *spans = image + sizeof(h);
	const char *syms = spans + h.nspans * sizeof(struct kallsyms_span);
	k->spans = malloc(h.nspans * sizeof(*k->spans));
	k->fallback_path = strdup(fallback_path);
	if (!k->spans || !k->fallback_path) {
		kallsyms_free(k);	/* k->map not set yet: the mapping stays the caller's */
		return -ENOMEM;
	}
	memcpy(k->spans, spans, h.nspans * sizeof(*k->spans));
	k->isym = (const struct image_sym *)syms;	/* aligned: checked above, the head and spans are 8-byte multiples */
	k->names = (char *)(syms + (size_t)h.nsym * sizeof(struct image_sym));
	k->n = k->cap = h.nsym;
	k->nspans = h.nspans;
	k->names_len = k->names_cap = h.names_len;
	k->text_start = h.text_start;
	k->map = map;
	k->map_len = map_len;
	*out = k;
	return 0;
}

size_t kallsyms_count(const struct kallsyms *k)
{
	return k ? k->n : 0;
}

void kallsyms_symbol(const struct kallsyms *k, size_t i, uint64_t *addr, const char **name, const char **module)
{
	uint32_t n, m;
	sym_names(k, i, &n, &m);
	*addr = sym_addr(k, i);
	*name = k->names + n;
	*module = m == NO_MODULE ? NULL : k->names + m;
}
