/*
 * collapsed.c — collapsed-stack output. See collapsed.h.
 *
 * Samples are first summed per (comm, stack) with a sort, then each pair is printed once into a line; lines
 * are sorted and equal ones merged, since different stacks (addresses) often print the same functions.
 */
#include "src/profile/collapsed.h"

#include <errno.h>
#include <inttypes.h>
#include <nettle/base64.h>
#include <stdlib.h>
#include <string.h>

#include "src/profile/frame_name.h"

struct line {
	char *text;		/* everything before the count */
	uint64_t count;
};

struct pair {
	uint32_t comm, stack;
	uint64_t count;
};

void collapsed_stack_id(const uint8_t id[16], char *out)
{
	struct base64_encode_ctx ctx;
	char b64[BASE64_ENCODE_LENGTH(16) + BASE64_ENCODE_FINAL_LENGTH];
	base64url_encode_init(&ctx);
	size_t n = base64_encode_update(&ctx, b64, 16, id);
	n += base64_encode_final(&ctx, b64 + n);	/* 24 characters, "==" padded */
	size_t k = 0;
	for (size_t i = 0; i < n && b64[i] != '='; i++)
		out[k++] = b64[i];
	out[k] = '\0';
}

static int compare_pairs(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

/* Sum sample counts per (comm, stack); returns the number of pairs in *pairs. */
static int sum_pairs(const struct profile *p, enum profile_value value, struct pair **pairs, uint32_t *n)
{
	struct pair *v = malloc((p->samples.count ? p->samples.count : 1) * sizeof(*v));
	uint32_t k = 0;
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->samples.count; i++)
		v[i] = (struct pair){ p->samples.items[i].comm, p->samples.items[i].stack,
				      profile_sample_value(p, &p->samples.items[i], value) };
	qsort(v, p->samples.count, sizeof(*v), compare_pairs);
	for (uint32_t i = 0; i < p->samples.count; i++) {
		if (k && v[k - 1].comm == v[i].comm && v[k - 1].stack == v[i].stack)
			v[k - 1].count += v[i].count;
		else
			v[k++] = v[i];
	}
	*pairs = v;
	*n = k;
	return 0;
}

/* "[ID ]comm;root;...;leaf": locations from the outermost, each one's lines from its physical function in. The
 * names are escaped (escape.h): collapsed stacks are text, read in a terminal as often as by a flame-graph tool,
 * and the names come from the processes profiled. */
static int stack_text(const struct profile *p, const struct pair *pr, bool stack_ids, struct frame_buf *b)
{
	const struct profile_stack *st = &p->stacks.items[pr->stack];
	const char *comm = profile_string(p, pr->comm);
	int err;
	b->len = 0;
	if (stack_ids) {
		char id[24];
		collapsed_stack_id(st->trace_id, id);
		if ((err = frame_buf_append(b, id, strlen(id))) < 0 || (err = frame_buf_append(b, " ", 1)) < 0)
			return err;
	}
	if ((err = frame_text_append(b, *comm ? comm : "[unknown]", FRAME_NAME_COLLAPSED | FRAME_NAME_ESCAPED)) < 0)
		return err;
	for (uint32_t k = st->nlocations; k-- > 0;) {
		const struct profile_location *l = &p->locations.items[st->locations[k]];
		for (uint32_t j = l->nlines ? l->nlines : 1; j-- > 0;) {
			if ((err = frame_buf_append(b, ";", 1)) < 0 ||
			    (err = frame_name_append(p, l, j, FRAME_NAME_SUFFIX | FRAME_NAME_COLLAPSED | FRAME_NAME_ESCAPED,
						     b)) < 0)
				return err;
		}
	}
	return 0;
}

static int compare_lines(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

static void free_lines(struct line *lines, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
}

static int make_lines(const struct profile *p, const struct pair *pairs, uint32_t n, bool stack_ids,
		      struct line *lines)
{
	struct frame_buf b = { 0 };
	int err = 0;
	for (uint32_t i = 0; i < n && err == 0; i++) {
		if ((err = stack_text(p, &pairs[i], stack_ids, &b)) == 0 && !(lines[i].text = strdup(b.s)))
			err = -ENOMEM;
		lines[i].count = pairs[i].count;
	}
	frame_buf_free(&b);
	return err;
}

/* unit: what a line's count is divided by (1000: times summed in ns, printed in whole microseconds). */
static void print_lines(FILE *out, struct line *lines, uint32_t n, uint64_t unit)
{
	qsort(lines, n, sizeof(*lines), compare_lines);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t count = lines[i].count;
		while (i + 1 < n && strcmp(lines[i].text, lines[i + 1].text) == 0)
			count += lines[++i].count;
		if (count / unit)
			fprintf(out, "%s %" PRIu64 "\n", lines[i].text, count / unit);
	}
}

int collapsed_write(const struct profile *p, FILE *out, const struct collapsed_options *o)
{
	struct pair *pairs = NULL;
	struct line *lines = NULL;
	uint32_t n = 0;
	enum profile_value value = o ? o->value : PROFILE_VALUE_SAMPLES;
	int err = sum_pairs(p, value, &pairs, &n);
	if (err == 0 && !(lines = calloc(n ? n : 1, sizeof(*lines))))
		err = -ENOMEM;
	if (err == 0 && (err = make_lines(p, pairs, n, o && o->stack_ids, lines)) == 0)
		print_lines(out, lines, n, value == PROFILE_VALUE_SAMPLES ? 1 : 1000);
	free(pairs);
	if (lines)
		free_lines(lines, n);
	if (err == 0 && ferror(out))
		err = -EIO;
	return err;
}
