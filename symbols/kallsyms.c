/*
 * kallsyms.c — parse /proc/kallsyms and find the symbol at or below a kernel address (see kallsyms.h).
 *
 * Only text symbols (t, T, w, W) are kept: samples land in code, and a data symbol placed between two
 * functions would take the addresses that belong to the function before it. kallsyms has no sizes, so a
 * lookup names the nearest symbol below the address. Lines are read into a bounded buffer (names are at
 * most 512 bytes since Linux 6.1); a line that is too long or not in the expected form is skipped.
 */
#include "symbols/kallsyms.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

/* One parsed line; the strings point into the line buffer. */
struct line {
	uint64_t addr;
	char type;
	const char *name;
	const char *module;	/* NULL for vmlinux */
};

/* ---- parsing ---- */

static bool parse_hex(char **p, uint64_t *out)
{
	uint64_t v = 0;
	int digits = 0;
	for (; isxdigit((unsigned char)**p); (*p)++) {
		if (++digits > 16)
			return false;
		int c = tolower((unsigned char)**p);
		v = v << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
	}
	*out = v;
	return digits > 0;
}

/* Cuts a run of printable non-blank characters at *p; returns its start, or NULL if empty. */
static char *take_word(char **p)
{
	char *start = *p;
	while (isgraph((unsigned char)**p))
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

/* Sorted by address, one symbol per address (the best ranked). */
static void sort_and_dedup(struct kallsyms *k)
{
	size_t out = 0;
	qsort(k->sym, k->n, sizeof(*k->sym), compare_ksym);
	for (size_t i = 0; i < k->n; i++)
		if (out == 0 || k->sym[out - 1].addr != k->sym[i].addr)
			k->sym[out++] = k->sym[i];
	k->n = out;
}

/* ---- reading ---- */

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

struct load_stats {
	size_t lines;		/* well-formed lines, of any type */
	size_t nonzero;		/* ... with a nonzero address */
};

static int read_symbols(FILE *f, struct kallsyms *k, struct load_stats *st)
{
	char buf[LINE_MAX_LEN];
	bool too_long;
	uint32_t last_module = NO_MODULE;

	while (read_line(f, buf, sizeof(buf), &too_long)) {
		struct line l;
		if (too_long || parse_line(buf, &l) < 0)
			continue;
		st->lines++;
		st->nonzero += l.addr != 0;
		if (!l.module && l.type == 'T' && strcmp(l.name, "_text") == 0)
			k->text_start = l.addr;
		int err = is_text(l.type) ? add_symbol(k, &l, &last_module) : 0;
		if (err < 0)
			return err;
	}
	return ferror(f) ? -EIO : 0;
}

struct kallsyms *kallsyms_load(const char *path, int *err)
{
	struct load_stats st = { 0, 0 };
	struct kallsyms *k = calloc(1, sizeof(*k));
	char *buf = malloc(READ_BUFFER);	/* stdio would read /proc files 1 KiB at a time (their st_blksize) */
	FILE *f = path ? fopen(path, "re") : NULL;
	if (f && buf)
		setvbuf(f, buf, _IOFBF, READ_BUFFER);
	int e = !k || !buf ? -ENOMEM : !path ? -EINVAL : !f ? -errno : read_symbols(f, k, &st);

	if (f)
		fclose(f);
	free(buf);
	/* Without permission the kernel shows every address as 0: a table of zeros would name everything wrongly. */
	if (e == 0 && st.lines > 0 && st.nonzero == 0)
		e = -EPERM;
	else if (e == 0 && k->n == 0)
		e = -ENODATA;
	if (e < 0) {
		kallsyms_free(k);
		if (err)
			*err = e;
		return NULL;
	}
	sort_and_dedup(k);
	return k;
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
	free(k->sym);
	free(k->names);
	free(k);
}

/* ---- lookups ---- */

const char *kallsyms_lookup(const struct kallsyms *k, uint64_t addr, uint64_t *offset, const char **module)
{
	if (offset)
		*offset = 0;
	if (module)
		*module = NULL;
	if (!k || k->n == 0 || addr < k->sym[0].addr)
		return NULL;
	size_t lo = 0, hi = k->n;	/* sym[lo].addr <= addr < sym[hi].addr */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->sym[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	const struct ksym *s = &k->sym[lo];
	if (offset)
		*offset = addr - s->addr;
	if (module && s->module != NO_MODULE)
		*module = k->names + s->module;
	return k->names + s->name;
}

uint64_t kallsyms_text_start(const struct kallsyms *k)
{
	return k ? k->text_start : 0;
}
