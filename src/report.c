/*
 * report.c — `hostprof report`: run summary and top functions. See report.h.
 *
 * Each (location, line) pair is resolved once to a row; stacks are then walked once each with their summed
 * sample count, a per-row stamp making total count a function once per stack.
 */
#include "src/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "src/frame_name.h"
#include "src/profile_impl.h"

struct row {
	char *name;		/* "function (file.c)", or a frame name such as "libc.so.6+0x1234" */
	char *library;
	uint64_t self, total;
	uint32_t stamp;		/* the last stack counted into total */
};

struct report {
	const struct profile *p;
	struct row *rows;
	uint32_t nrows, rows_cap;
	struct profile_hindex index;
	uint32_t *loc_first;	/* per location: its first entry in line_rows */
	uint32_t *line_rows;	/* per (location, line): row; one entry for a location without lines */
	uint64_t *stack_counts;
	uint64_t total;		/* sum of sample counts */
};

struct row_key {
	const char *name, *library;
};

static uint64_t hash_row(const struct row_key *k)
{
	return profile_hash_str(profile_hash_str(PROFILE_HASH_SEED, k->name), k->library);
}

static bool row_eq(const void *table, uint32_t i, const void *key)
{
	const struct row *r = &((const struct report *)table)->rows[i];
	const struct row_key *k = key;
	return strcmp(r->name, k->name) == 0 && strcmp(r->library, k->library) == 0;
}

static int intern_row(struct report *rp, const struct row_key *k, uint32_t *index)
{
	uint64_t h = hash_row(k);
	int err;
	if (profile_hindex_find(&rp->index, h, row_eq, rp, k, index))
		return 0;
	if ((err = profile_grow((void **)&rp->rows, &rp->rows_cap, (uint64_t)rp->nrows + 1, sizeof(*rp->rows))) < 0)
		return err;
	struct row *r = &rp->rows[rp->nrows];
	*r = (struct row){ .name = strdup(k->name), .library = strdup(k->library) };
	if (!r->name || !r->library || (err = profile_hindex_insert(&rp->index, h, rp->nrows)) < 0) {
		free(r->name);
		free(r->library);
		return err ? err : -ENOMEM;
	}
	*index = rp->nrows++;
	return 0;
}

/* A symbolized user-space function shows its source file: static functions of one name are told apart. */
static int append_function_file(const struct profile *p, const struct profile_location *l, uint32_t line,
				struct frame_buf *b)
{
	if (line >= l->nlines || (l->frame_kind & PROFILE_FRAME_ERROR) || l->frame_kind == PROFILE_FRAME_KERNEL)
		return 0;
	const struct profile_function *f = &p->functions.items[l->lines[line].function];
	const char *file = frame_basename(profile_string(p, f->filename));
	int err;
	if (!*file || !*profile_string(p, f->name))
		return 0;
	if ((err = frame_buf_append(b, " (", 2)) < 0 || (err = frame_buf_append(b, file, strlen(file))) < 0)
		return err;
	return frame_buf_append(b, ")", 1);
}

static int location_rows(struct report *rp, uint32_t loc, uint32_t *out, struct frame_buf *name,
			 struct frame_buf *lib)
{
	const struct profile_location *l = &rp->p->locations.items[loc];
	uint32_t n = l->nlines ? l->nlines : 1;
	int err;
	lib->len = 0;
	if ((err = frame_library_append(rp->p, l, lib)) < 0)
		return err;
	for (uint32_t j = 0; j < n; j++) {
		name->len = 0;
		if ((err = frame_name_append(rp->p, l, j, 0, name)) < 0 ||
		    (err = append_function_file(rp->p, l, j, name)) < 0 ||
		    (err = intern_row(rp, &(struct row_key){ name->s, lib->s }, &out[j])) < 0)
			return err;
	}
	return 0;
}

static int build_rows(struct report *rp)
{
	const struct profile *p = rp->p;
	struct frame_buf name = { 0 }, lib = { 0 };
	uint64_t entries = 0;
	int err = 0;
	if (!(rp->loc_first = calloc(p->locations.count, sizeof(uint32_t))))
		return -ENOMEM;
	for (uint32_t i = 0; i < p->locations.count; i++) {
		rp->loc_first[i] = (uint32_t)entries;
		entries += p->locations.items[i].nlines ? p->locations.items[i].nlines : 1;
	}
	if (entries >= UINT32_MAX || !(rp->line_rows = calloc(entries, sizeof(uint32_t))))
		return -ENOMEM;
	for (uint32_t i = 0; i < p->locations.count && err == 0; i++)	/* 0 too: a stack may list it */
		err = location_rows(rp, i, &rp->line_rows[rp->loc_first[i]], &name, &lib);
	frame_buf_free(&name);
	frame_buf_free(&lib);
	return err;
}

static int count_stacks(struct report *rp)
{
	const struct profile *p = rp->p;
	if (!(rp->stack_counts = calloc(p->stacks.count ? p->stacks.count : 1, sizeof(uint64_t))))
		return -ENOMEM;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		rp->stack_counts[p->samples.items[i].stack] += p->samples.items[i].count;
		rp->total += p->samples.items[i].count;
	}
	return 0;
}

static void attribute_stack(struct report *rp, uint32_t s)
{
	const struct profile *p = rp->p;
	const struct profile_stack *st = &p->stacks.items[s];
	uint64_t c = rp->stack_counts[s];
	if (!c || !st->nlocations)
		return;
	rp->rows[rp->line_rows[rp->loc_first[st->locations[0]]]].self += c;
	for (uint32_t k = 0; k < st->nlocations; k++) {
		const struct profile_location *l = &p->locations.items[st->locations[k]];
		const uint32_t *lr = &rp->line_rows[rp->loc_first[st->locations[k]]];
		for (uint32_t j = 0; j < (l->nlines ? l->nlines : 1); j++) {
			struct row *r = &rp->rows[lr[j]];
			if (r->stamp != s) {
				r->stamp = s;
				r->total += c;
			}
		}
	}
}

static int compare_rows(const void *a, const void *b, void *arg)
{
	const struct row *x = *(const struct row *const *)a, *y = *(const struct row *const *)b;
	bool by_total = *(const enum report_sort *)arg == REPORT_SORT_TOTAL;
	uint64_t xk = by_total ? x->total : x->self, yk = by_total ? y->total : y->self;
	uint64_t xo = by_total ? x->self : x->total, yo = by_total ? y->self : y->total;
	int c;
	if (xk != yk)
		return xk > yk ? -1 : 1;
	if (xo != yo)
		return xo > yo ? -1 : 1;
	if ((c = strcmp(x->name, y->name)) != 0)
		return c;
	return strcmp(x->library, y->library);
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static int compare_pids(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static int count_processes(const struct profile *p, uint32_t *n)
{
	int32_t *pids = malloc((p->samples.count ? p->samples.count : 1) * sizeof(int32_t));
	if (!pids)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->samples.count; i++)
		pids[i] = p->samples.items[i].pid;
	qsort(pids, p->samples.count, sizeof(*pids), compare_pids);
	*n = 0;
	for (uint32_t i = 0; i < p->samples.count; i++)
		*n += i == 0 || pids[i] != pids[i - 1];
	free(pids);
	return 0;
}

static int print_summary(const struct report *rp, FILE *out)
{
	const struct profile_info *i = &rp->p->info;
	uint64_t samples = i->samples ? i->samples : rp->total;
	uint32_t processes;
	int err = count_processes(rp->p, &processes);
	if (err < 0)
		return err;
	fprintf(out, "Duration:           %.2f s\n", (double)i->duration_ns / 1e9);
	fprintf(out, "Samples:            %" PRIu64 " (lost %" PRIu64 ")\n", samples, i->lost);
	fprintf(out, "Event:              %s", i->event && *i->event ? i->event : "unknown");
	if (i->frequency_hz)
		fprintf(out, " at %" PRIu64 " Hz", i->frequency_hz);
	fprintf(out, "\nUnwinder:           %s\n", i->unwinder && *i->unwinder ? i->unwinder : "unknown");
	fprintf(out, "Processes:          %u\n", processes);
	fprintf(out, "Unwound completely: %.2f%%\n", pct(i->unwound_complete, samples));
	fprintf(out, "Truncated:          %" PRIu64 " (%.2f%%)\n", i->truncated, pct(i->truncated, samples));
	fprintf(out, "Unknown:            %" PRIu64 " (%.2f%%)\n", i->unknown, pct(i->unknown, samples));
	return 0;
}

static void print_table(const struct report *rp, FILE *out, struct row **sorted, uint32_t n)
{
	int width = (int)strlen("Library");
	for (uint32_t k = 0; k < n; k++) {
		int w = (int)strlen(sorted[k]->library);
		width = w > width ? w : width;
	}
	fprintf(out, "\n  Self%%  Total%%     Self  %-*s  Function\n", width, "Library");
	for (uint32_t k = 0; k < n; k++) {
		const struct row *r = sorted[k];
		fprintf(out, "%6.2f%% %6.2f%% %8" PRIu64 "  %-*s  %s\n", pct(r->self, rp->total),
			pct(r->total, rp->total), r->self, width, r->library, r->name);
	}
}

static int print_rows(struct report *rp, FILE *out, const struct report_options *o)
{
	unsigned limit = o && o->limit ? o->limit : REPORT_DEFAULT_LIMIT;
	enum report_sort sort = o ? o->sort : REPORT_SORT_SELF;
	struct row **sorted = malloc((rp->nrows ? rp->nrows : 1) * sizeof(*sorted));
	uint32_t n = 0;
	if (!sorted)
		return -ENOMEM;
	for (uint32_t k = 0; k < rp->nrows; k++) {
		if (rp->rows[k].total)
			sorted[n++] = &rp->rows[k];
	}
	qsort_r(sorted, n, sizeof(*sorted), compare_rows, &sort);
	if (n)
		print_table(rp, out, sorted, n < limit ? n : limit);
	else
		fprintf(out, "\nNo samples.\n");
	free(sorted);
	return 0;
}

static void report_free(struct report *rp)
{
	for (uint32_t k = 0; k < rp->nrows; k++) {
		free(rp->rows[k].name);
		free(rp->rows[k].library);
	}
	free(rp->rows);
	profile_hindex_free(&rp->index);
	free(rp->loc_first);
	free(rp->line_rows);
	free(rp->stack_counts);
}

int report_print(const struct profile *p, FILE *out, const struct report_options *o)
{
	struct report rp = { .p = p };
	int err;
	if ((err = build_rows(&rp)) == 0 && (err = count_stacks(&rp)) == 0) {
		for (uint32_t s = 1; s < p->stacks.count; s++)
			attribute_stack(&rp, s);
		if ((err = print_summary(&rp, out)) == 0)
			err = print_rows(&rp, out, o);
	}
	report_free(&rp);
	if (err == 0 && ferror(out))
		err = -EIO;
	return err;
}
