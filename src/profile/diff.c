/*
 * diff.c — compare the function shares of two profiles. See diff.h.
 *
 * Both profiles are reduced to their function rows (report_functions_get, sorted by name and library) and
 * joined by a merge walk; everything after that is arithmetic on shares.
 */
#include "src/profile/diff.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/escape.h"

/* Deltas under half the printed precision read as 0.00: such rows are not changes worth a line. */
#define DIFF_EPSILON 0.005
/* Names listed in the verdict line before "...". */
#define VERDICT_NAMES 5

static double share(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static int compare_keys(const struct report_function *x, const struct report_function *y)
{
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->library, y->library);
}

static double total_delta(const struct diff_row *r)
{
	return r->new_total - r->base_total;
}

static double self_delta(const struct diff_row *r)
{
	return r->new_self - r->base_self;
}

static int compare_rows(const void *a, const void *b)
{
	const struct diff_row *x = a, *y = b;
	double dx = fabs(total_delta(x)), dy = fabs(total_delta(y));
	int c;
	if (dx != dy)
		return dx > dy ? -1 : 1;
	dx = fabs(self_delta(x));
	dy = fabs(self_delta(y));
	if (dx != dy)
		return dx > dy ? -1 : 1;
	if ((c = strcmp(x->name, y->name)) != 0)
		return c;
	return strcmp(x->library, y->library);
}

/* Join the two sorted function lists: one row per function of either. */
static void join(struct diff *d)
{
	const struct report_functions *b = &d->base, *n = &d->new;
	uint32_t i = 0, j = 0;
	while (i < b->count || j < n->count) {
		int c = i == b->count ? 1 : j == n->count ? -1 : compare_keys(&b->items[i], &n->items[j]);
		const struct report_function *f = c <= 0 ? &b->items[i] : &n->items[j];
		struct diff_row *r = &d->rows[d->count++];
		*r = (struct diff_row){ .name = f->name, .library = f->library };
		if (c <= 0) {
			r->base_self = share(b->items[i].self, b->samples);
			r->base_total = share(b->items[i++].total, b->samples);
		}
		if (c >= 0) {
			r->new_self = share(n->items[j].self, n->samples);
			r->new_total = share(n->items[j++].total, n->samples);
		}
	}
}

int diff_compute(const struct profile *base, const struct profile *new, struct diff *d)
{
	return diff_compute_value(base, new, PROFILE_VALUE_SAMPLES, d);
}

int diff_compute_value(const struct profile *base, const struct profile *new, enum profile_value v,
		       struct diff *d)
{
	int err;
	*d = (struct diff){ .value = v };
	if ((err = report_functions_get_value(base, v, &d->base)) < 0 ||
	    (err = report_functions_get_value(new, v, &d->new)) < 0) {
		diff_free(d);
		return err;
	}
	d->base_samples = d->base.samples;
	d->new_samples = d->new.samples;
	if (!(d->rows = calloc((size_t)d->base.count + d->new.count + 1, sizeof(*d->rows)))) {
		diff_free(d);
		return -ENOMEM;
	}
	join(d);
	qsort(d->rows, d->count, sizeof(*d->rows), compare_rows);
	return 0;
}

void diff_free(struct diff *d)
{
	free(d->rows);
	report_functions_free(&d->base);
	report_functions_free(&d->new);
	*d = (struct diff){ 0 };
}

uint32_t diff_regressions(const struct diff *d, double threshold)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < d->count; i++)
		n += total_delta(&d->rows[i]) > threshold;
	return n;
}

double diff_noise(uint64_t base_samples, uint64_t new_samples)
{
	if (!base_samples || !new_samples)
		return 100.0;
	/* 1.96 standard deviations of p1 - p2 at p = 0.5, where the variance p(1-p)/n is largest. */
	return 100.0 * 1.96 * sqrt(0.25 / (double)base_samples + 0.25 / (double)new_samples);
}

static bool changed(const struct diff_row *r)
{
	return fabs(total_delta(r)) >= DIFF_EPSILON || fabs(self_delta(r)) >= DIFF_EPSILON;
}

static void print_header(const struct diff *d, FILE *out, const struct diff_options *o)
{
	static const char *const what[] = { "samples", "CPU", "off CPU", "wall" };
	char base[ESCAPE_SHOWN_MAX], new[ESCAPE_SHOWN_MAX];	/* file names: any bytes */
	escape_str(base, sizeof(base), o->base_name ? o->base_name : "base");
	escape_str(new, sizeof(new), o->new_name ? o->new_name : "new");
	if (d->value != PROFILE_VALUE_SAMPLES) {
		fprintf(out, "Base: %s, %.1f ms %s\n", base, d->base_samples / 1e6, what[d->value & 3]);
		fprintf(out, "New:  %s, %.1f ms %s\n", new, d->new_samples / 1e6, what[d->value & 3]);
		fprintf(out, "Shares are percent of each profile's %s time; deltas are new - base, in points.\n\n",
			what[d->value & 3]);
		return;
	}
	fprintf(out, "Base: %s, %" PRIu64 " samples\n", base, d->base_samples);
	fprintf(out, "New:  %s, %" PRIu64 " samples\n", new, d->new_samples);
	fprintf(out, "Shares are percent of each profile's samples; deltas are new - base, in points "
		     "(sampling noise up to %.2f).\n\n", diff_noise(d->base_samples, d->new_samples));
}

static void print_rows(const struct diff *d, FILE *out, unsigned limit)
{
	uint32_t n = 0;
	int width = (int)strlen("Library");
	for (uint32_t i = 0; i < d->count && n < limit; i++) {
		if (changed(&d->rows[i]) && (int)strlen(d->rows[i].library) > width)
			width = (int)strlen(d->rows[i].library);
		n += changed(&d->rows[i]);
	}
	if (!n) {
		fprintf(out, "No function's share changed.\n");
		return;
	}
	fprintf(out, "   Total share (%%)          Self share (%%)\n");
	fprintf(out, "   base    new    delta     base    new    delta  %-*s  Function\n", width, "Library");
	for (uint32_t i = 0, shown = 0; i < d->count && shown < n; i++) {
		const struct diff_row *r = &d->rows[i];
		if (!changed(r))
			continue;
		fprintf(out, "%7.2f%7.2f %+8.2f  %7.2f%7.2f %+8.2f  %-*s  %s\n", r->base_total, r->new_total,
			total_delta(r), r->base_self, r->new_self, self_delta(r), width, r->library, r->name);
		shown++;
	}
}

/* The row whose total share grew most, or NULL when none grew. */
static const struct diff_row *largest_growth(const struct diff *d)
{
	const struct diff_row *best = NULL;
	for (uint32_t i = 0; i < d->count; i++) {
		if (total_delta(&d->rows[i]) >= DIFF_EPSILON && (!best || total_delta(&d->rows[i]) > total_delta(best)))
			best = &d->rows[i];
	}
	return best;
}

void diff_print_verdict(const struct diff *d, FILE *out, double threshold)
{
	uint32_t n = diff_regressions(d, threshold), listed = 0;
	if (!n) {
		const struct diff_row *r = largest_growth(d);
		fprintf(out, "\nOK: no function's total share grew by more than %.2f points", threshold);
		if (r)
			fprintf(out, " (largest growth: %s %+.2f)", r->name, total_delta(r));
		fputs("\n", out);
		return;
	}
	fprintf(out, "\nFAIL: %" PRIu32 " function%s total share grew by more than %.2f points:", n,
		n == 1 ? "'s" : "s'", threshold);
	/* Rows are ordered by |delta|, so the first regressions met are the biggest. */
	for (uint32_t i = 0; i < d->count && listed < VERDICT_NAMES; i++) {
		const struct diff_row *r = &d->rows[i];
		if (total_delta(r) > threshold)
			fprintf(out, "%s %s %+.2f", listed++ ? "," : "", r->name, total_delta(r));
	}
	fprintf(out, "%s\n", n > VERDICT_NAMES ? ", ..." : "");
}

int diff_print(const struct diff *d, FILE *out, const struct diff_options *o)
{
	struct diff_options def = { .threshold = DIFF_DEFAULT_THRESHOLD };
	if (!o)
		o = &def;
	print_header(d, out, o);
	print_rows(d, out, o->limit ? o->limit : DIFF_DEFAULT_LIMIT);
	diff_print_verdict(d, out, o->threshold);
	return ferror(out) ? -EIO : 0;
}
