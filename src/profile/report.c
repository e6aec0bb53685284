/*
 * report.c — `hostprof report`: run summary, top functions, call tree, per-thread views. See report.h.
 *
 * Each (location, line) pair is resolved once to a row (a function). A view then works on a list of
 * (comm, stack, count) triples summed over the samples it shows, so a thread or a pid costs what its own
 * samples cost, not a pass over every stack of the profile.
 */
#include "src/profile/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/escape.h"
#include "src/profile/frame_name.h"
#include "src/profile/name_pairs.h"
#include "src/profile/profile_impl.h"
#include "src/profile/thread_times.h"

struct row {
	const char *name;	/* "function (file.c)", or a frame name such as "libc.so.6+0x1234" (names' copy) */
	const char *library;
	uint64_t self, total;
	uint32_t stamp;		/* the generation that last counted the row into total */
};

struct report {
	const struct profile *p;
	struct row *rows;
	uint32_t nrows, rows_cap;
	struct name_pairs names;	/* (name, library) of row i, which owns the strings */
	uint32_t *loc_first;	/* per location: its first entry in line_rows */
	uint32_t *line_rows;	/* per (location, line): row; one entry for a location without lines */
	uint32_t generation;	/* bumped per counted stack, so recursion counts a row's total once */
	bool lines;		/* rows per source line: "function (file.c:LINE)" */
	bool addresses;		/* a row per address of unnamed code, not one per library */
	bool no_inline;		/* a location's inlined lines take the row of its physical function */
	enum profile_value value;	/* what a sample weighs */
};

/* Samples of one view summed per (process name, stack). */
struct stack_count {
	uint32_t comm, stack;
	uint64_t count;
};

struct view {
	struct stack_count *stacks;
	uint32_t nstacks;
	uint64_t total;		/* the 100% of the view's percentages */
};

/* --- rows ---------------------------------------------------------------------------------------------- */

struct row_key {
	const char *name, *library;
};

/* The row of k, made when new: row i is pair i of names. */
static int intern_row(struct report *rp, const struct row_key *k, uint32_t *index)
{
	int err = name_pairs_intern(&rp->names, k->name, k->library, index);
	if (err < 0 || *index < rp->nrows)
		return err;
	/* A row whose growth failed earlier is made now: pairs and rows keep the same numbers. */
	if ((err = profile_grow((void **)&rp->rows, &rp->rows_cap, (uint64_t)*index + 1, sizeof(*rp->rows))) < 0)
		return err;
	const struct name_pair *n = &rp->names.items[*index];
	rp->rows[rp->nrows++] = (struct row){ .name = n->first, .library = n->second };
	return 0;
}

/* A symbolized user-space function shows its source file (static functions of one name are told apart), and
 * with_line its line: one row per line of the function that samples were taken at or called from. */
static int append_function_file(const struct profile *p, const struct profile_location *l, uint32_t line,
				bool with_line, struct frame_buf *b)
{
	if (line >= l->nlines || (l->frame_kind & PROFILE_FRAME_ERROR) || l->frame_kind == PROFILE_FRAME_KERNEL)
		return 0;
	const struct profile_function *f = &p->functions.items[l->lines[line].function];
	const char *file = frame_basename(profile_string(p, f->filename));
	int err;
	if (!*file || !*profile_string(p, f->name))
		return 0;
	if ((err = frame_buf_append(b, " (", 2)) < 0 || (err = frame_text_append(b, file, FRAME_NAME_ESCAPED)) < 0)
		return err;
	if (with_line && l->lines[line].line > 0) {
		char num[24];
		int len = snprintf(num, sizeof(num), ":%" PRId64, l->lines[line].line);
		if ((err = frame_buf_append(b, num, (size_t)len)) < 0)
			return err;
	}
	return frame_buf_append(b, ")", 1);
}

/* A frame without a function name (stripped code, no symbol there), which is not an error frame. */
static bool unnamed_frame(const struct profile *p, const struct profile_location *l, uint32_t line)
{
	if (l->frame_kind & PROFILE_FRAME_ERROR)
		return false;
	if (line >= l->nlines)
		return true;
	uint32_t f = l->lines[line].function;
	return f >= p->functions.count || !*profile_string(p, p->functions.items[f].name);
}

/* The row of a library's unnamed code: "[libLLVM-14.so.1]", "[kernel]", or "[unknown]" outside any file. */
static int library_row_name(const struct frame_buf *lib, struct frame_buf *name)
{
	int err;
	if (!lib->len)
		return frame_buf_append(name, "[unknown]", 9);
	if (lib->s[0] == '[')
		return frame_buf_append(name, lib->s, lib->len);
	if ((err = frame_buf_append(name, "[", 1)) < 0 || (err = frame_buf_append(name, lib->s, lib->len)) < 0)
		return err;
	return frame_buf_append(name, "]", 1);
}

static int location_rows(struct report *rp, uint32_t loc, uint32_t *out, struct frame_buf *name,
			 struct frame_buf *lib)
{
	const struct profile_location *l = &rp->p->locations.items[loc];
	uint32_t n = l->nlines ? l->nlines : 1;
	int err;
	lib->len = 0;
	if ((err = frame_library_append(rp->p, l, FRAME_NAME_ESCAPED, lib)) < 0)
		return err;
	for (uint32_t j = rp->no_inline ? n - 1 : 0; j < n; j++) {
		name->len = 0;
		/* A stripped library's samples fall on thousands of addresses, none of which would reach the top rows
		 * on its own: by default they are one row, the library's (as go tool pprof shows them). */
		if (!rp->addresses && unnamed_frame(rp->p, l, j)) {
			if ((err = library_row_name(lib, name)) < 0 ||
			    (err = intern_row(rp, &(struct row_key){ name->s, lib->s }, &out[j])) < 0)
				return err;
			continue;
		}
		if ((err = frame_name_append(rp->p, l, j, FRAME_NAME_ESCAPED, name)) < 0 ||
		    (err = append_function_file(rp->p, l, j, rp->lines, name)) < 0 ||
		    (err = intern_row(rp, &(struct row_key){ name->s, lib->s }, &out[j])) < 0)
			return err;
	}
	for (uint32_t j = 0; rp->no_inline && j + 1 < n; j++)	/* folded: the inlined lines are the caller's */
		out[j] = out[n - 1];
	return 0;
}

static int build_rows(struct report *rp)
{
	const struct profile *p = rp->p;
	struct frame_buf name = { 0 }, lib = { 0 };
	uint64_t entries = 0;
	int err = 0;
	if (!(rp->loc_first = calloc(p->locations.count ? p->locations.count : 1, sizeof(uint32_t))))
		return -ENOMEM;
	for (uint32_t i = 0; i < p->locations.count; i++) {
		rp->loc_first[i] = (uint32_t)entries;
		entries += p->locations.items[i].nlines ? p->locations.items[i].nlines : 1;
	}
	if (entries >= UINT32_MAX || !(rp->line_rows = calloc(entries ? entries : 1, sizeof(uint32_t))))
		return -ENOMEM;
	for (uint32_t i = 0; i < p->locations.count && err == 0; i++)	/* 0 too: a stack may list it */
		err = location_rows(rp, i, &rp->line_rows[rp->loc_first[i]], &name, &lib);
	frame_buf_free(&name);
	frame_buf_free(&lib);
	return err;
}

static void report_free(struct report *rp)
{
	free(rp->rows);
	name_pairs_free(&rp->names);
	free(rp->loc_first);
	free(rp->line_rows);
}

/* The row of line j of the location at position k of stack st. */
static uint32_t stack_row(const struct report *rp, const struct profile_stack *st, uint32_t k, uint32_t j)
{
	return rp->line_rows[rp->loc_first[st->locations[k]] + j];
}

static uint32_t location_nlines(const struct profile *p, uint32_t loc)
{
	return p->locations.items[loc].nlines ? p->locations.items[loc].nlines : 1;
}

/* The frames a location shows: one per line, or one with the inlined ones folded (all lines have its row). */
static uint32_t shown_lines(const struct report *rp, uint32_t loc)
{
	return rp->no_inline ? 1 : location_nlines(rp->p, loc);
}

static void attribute_stack(struct report *rp, uint32_t s, uint64_t c)
{
	const struct profile_stack *st = &rp->p->stacks.items[s];
	uint32_t gen = ++rp->generation;
	if (!c || !st->nlocations)
		return;
	rp->rows[stack_row(rp, st, 0, 0)].self += c;
	for (uint32_t k = 0; k < st->nlocations; k++) {
		for (uint32_t j = 0; j < shown_lines(rp, st->locations[k]); j++) {
			struct row *r = &rp->rows[stack_row(rp, st, k, j)];
			if (r->stamp != gen) {
				r->stamp = gen;
				r->total += c;
			}
		}
	}
}

static void count_functions(struct report *rp, const struct view *v)
{
	for (uint32_t k = 0; k < rp->nrows; k++)
		rp->rows[k].self = rp->rows[k].total = 0;
	for (uint32_t i = 0; i < v->nstacks; i++)
		attribute_stack(rp, v->stacks[i].stack, v->stacks[i].count);
}

/* --- views: which samples are shown ---------------------------------------------------------------------- */

static int compare_stack_counts(const void *a, const void *b)
{
	const struct stack_count *x = a, *y = b;
	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

/* Sum the samples listed in sel (indices into p->samples) per (comm, stack). */
static int view_build(const struct profile *p, enum profile_value value, const uint32_t *sel, uint32_t n,
		      struct view *v)
{
	struct stack_count *sc = malloc((n ? n : 1) * sizeof(*sc));
	uint32_t k = 0;
	if (!sc)
		return -ENOMEM;
	*v = (struct view){ .stacks = sc };
	for (uint32_t i = 0; i < n; i++) {
		const struct profile_sample *s = &p->samples.items[sel[i]];
		sc[i] = (struct stack_count){ s->comm, s->stack, profile_sample_value(p, s, value) };
		v->total += sc[i].count;
	}
	qsort(sc, n, sizeof(*sc), compare_stack_counts);
	for (uint32_t i = 0; i < n; i++) {
		if (k && sc[k - 1].comm == sc[i].comm && sc[k - 1].stack == sc[i].stack)
			sc[k - 1].count += sc[i].count;
		else
			sc[k++] = sc[i];
	}
	v->nstacks = k;
	return 0;
}

/* The indices of the samples o selects (all, or one pid's), in profile order. */
static int select_samples(const struct profile *p, const struct report_options *o, uint32_t **sel, uint32_t *n)
{
	*n = 0;
	if (!(*sel = malloc((p->samples.count ? p->samples.count : 1) * sizeof(uint32_t))))
		return -ENOMEM;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		if (!o->filter_pid || p->samples.items[i].pid == o->pid)
			(*sel)[(*n)++] = i;
	}
	return 0;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* --- summary --------------------------------------------------------------------------------------------- */

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

/* ", 2 CPUs", or ", 2 of 4 CPUs online" where some were offline; nothing when the profile does not say. */
static void print_cpus(const struct profile_info *i, FILE *out)
{
	if (i->cpus_online && i->cpus_available && i->cpus_online != i->cpus_available)
		fprintf(out, ", %" PRIu32 " of %" PRIu32 " CPUs online", i->cpus_online, i->cpus_available);
	else if (i->cpus_online || i->cpus_available)
		fprintf(out, ", %" PRIu32 " CPUs", i->cpus_online ? i->cpus_online : i->cpus_available);
}

/* Where, how and when, for profiles that say (hand-built ones in tests do not). */
static void print_origin(const struct profile_info *i, FILE *out)
{
	char buf[ESCAPE_SHOWN_MAX];
	if (i->hostname && *i->hostname) {
		fprintf(out, "Host:               %s", escape_str(buf, sizeof(buf), i->hostname));
		if (i->kernel && *i->kernel)
			fprintf(out, " (Linux %s)", escape_str(buf, sizeof(buf), i->kernel));
		print_cpus(i, out);
		fputc('\n', out);
	}
	if (i->cmdline && *i->cmdline)
		fprintf(out, "Command:            %s\n", escape_str(buf, sizeof(buf), i->cmdline));
	if (i->start_unix_ns) {
		time_t t = (time_t)(i->start_unix_ns / 1000000000);
		struct tm tm;
		char when[64];
		if (gmtime_r(&t, &tm) && strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm))
			fprintf(out, "Start:              %s\n", when);
	}
}

/* A header counter as a share of the samples. The counters are the file's word, not sums of its samples (a walk
 * whose sample was then dropped still counts, a hostile header says anything): never more than 100%. */
static double counter_pct(uint64_t part, uint64_t samples)
{
	double v = pct(part, samples);
	return v > 100.0 ? 100.0 : v;
}

static int print_summary(const struct profile *p, uint64_t total, bool no_inline, FILE *out)
{
	const struct profile_info *i = &p->info;
	uint64_t samples = i->samples ? i->samples : total;
	uint32_t processes;
	char buf[ESCAPE_SHOWN_MAX];
	int err = count_processes(p, &processes);
	if (err < 0)
		return err;
	print_origin(i, out);
	fprintf(out, "Duration:           %.2f s\n", (double)i->duration_ns / 1e9);
	fprintf(out, "Samples:            %" PRIu64 " (lost %" PRIu64, samples, i->lost);
	if (i->lost_fast_lane && i->lost_fast_lane <= i->lost)
		fprintf(out, ": %" PRIu64 " by the kernel's rings, %" PRIu64 " on the fast lane",
			i->lost - i->lost_fast_lane, i->lost_fast_lane);
	fprintf(out, ")\n");
	fprintf(out, "Event:              %s", escape_str(buf, sizeof(buf), i->event && *i->event ? i->event : "unknown"));
	if (i->frequency_hz)
		fprintf(out, " at %" PRIu64 " Hz", i->frequency_hz);
	fprintf(out, "\nUnwinder:           %s\n",
		escape_str(buf, sizeof(buf), i->unwinder && *i->unwinder ? i->unwinder : "unknown"));
	fprintf(out, "Processes:          %u\n", processes);
	fprintf(out, "Inlined functions:  %s\n", no_inline ? "folded into their callers" : "rows of their own");
	/* Shares of the user stacks walked: a kernel thread's or an idle CPU's sample (-a) has none to unwind. */
	uint64_t walked = i->unwound_complete + i->truncated + i->unknown;
	bool apart = walked < samples;	/* samples with no user stack */
	uint64_t of = apart && walked ? walked : samples;
	if (apart && !walked)
		fprintf(out, "Unwound completely: no user stack walked (kernel threads' and idle CPUs' samples have "
			"none)");
	else if (apart)
		fprintf(out, "Unwound completely: %.2f%% of the %" PRIu64 " user stacks walked (the others were not: "
			"kernel threads' and idle CPUs' samples have none)", counter_pct(i->unwound_complete, of),
			walked);
	else
		fprintf(out, "Unwound completely: %.2f%%", counter_pct(i->unwound_complete, of));
	fprintf(out, "\nTruncated:          %" PRIu64 " (%.2f%%)\n", i->truncated, counter_pct(i->truncated, of));
	fprintf(out, "Unknown:            %" PRIu64 " (%.2f%%)\n", i->unknown, counter_pct(i->unknown, of));
	if (i->timestamps_dropped)	/* said only when some are missing: most profiles have them all */
		fprintf(out, "Without time:       %" PRIu64 " samples\n", i->timestamps_dropped);
	return 0;
}

/* --- top functions --------------------------------------------------------------------------------------- */

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

/* Names shorter than this are never cut, however narrow the line: a name cut shorter says little. */
#define NAME_MIN_COLUMNS 24

/* name, cut to the columns left of a line of width once used are taken ("..." at its end), or whole when width
 * is 0. Columns are counted as characters: escaped names are ASCII and valid UTF-8, cut between characters. */
static void print_name(FILE *out, const char *name, unsigned width, size_t used)
{
	size_t room = width > used + NAME_MIN_COLUMNS ? width - used : NAME_MIN_COLUMNS, chars = 0, cut = 0;
	const char *c = name;
	for (; *c && (width == 0 || chars <= room); c++) {
		if (((unsigned char)*c & 0xc0) == 0x80)
			continue;	/* a UTF-8 continuation byte: the same character */
		if (++chars == room - 2)
			cut = (size_t)(c - name);	/* where "..." starts if the name is too long */
	}
	if (width == 0 || chars <= room)
		fputs(name, out);
	else
		fprintf(out, "%.*s...", (int)cut, name);
}

static void print_table(FILE *out, struct row **sorted, uint32_t n, uint64_t total, enum profile_value value,
			unsigned line_width)
{
	int width = (int)strlen("Library");
	for (uint32_t k = 0; k < n; k++) {
		int w = (int)strlen(sorted[k]->library);
		width = w > width ? w : width;
	}
	bool ms = value != PROFILE_VALUE_SAMPLES;	/* times in ns, shown in ms */
	fprintf(out, "  Self%%  Total%%  %s  %-*s  Function\n", ms ? "Self ms" : "   Self", width, "Library");
	for (uint32_t k = 0; k < n; k++) {
		const struct row *r = sorted[k];
		fprintf(out, "%6.2f%% %6.2f%% ", pct(r->self, total), pct(r->total, total));
		if (ms)
			fprintf(out, "%8.1f", (double)r->self / 1e6);
		else
			fprintf(out, "%8" PRIu64, r->self);
		fprintf(out, "  %-*s  ", width, r->library);
		print_name(out, r->name, line_width, 28 + (size_t)width);	/* the columns before the name */
		fputc('\n', out);
	}
}

static int print_top(struct report *rp, const struct view *v, FILE *out, const struct report_options *o)
{
	struct row **sorted = malloc((rp->nrows ? rp->nrows : 1) * sizeof(*sorted));
	uint32_t n = 0;
	if (!sorted)
		return -ENOMEM;
	count_functions(rp, v);
	for (uint32_t k = 0; k < rp->nrows; k++) {
		if (rp->rows[k].total)
			sorted[n++] = &rp->rows[k];
	}
	enum report_sort sort = o->sort;
	qsort_r(sorted, n, sizeof(*sorted), compare_rows, &sort);
	if (n)
		print_table(out, sorted, n < o->limit ? n : o->limit, v->total, rp->value, o->width);
	else
		fprintf(out, "No samples.\n");
	free(sorted);
	return 0;
}

/* --- call tree ------------------------------------------------------------------------------------------- */

/* Node 0 is the invisible root; its children are processes (key = comm string), theirs functions (key = row).
 * A node's level: 0 for a process, 1 for the outermost frames, ... */
struct tree_node {
	uint32_t parent, key;
	uint64_t self, total;
	uint32_t first_child, next_sibling;	/* 0: none (node 0 is never a child) */
	uint64_t below;		/* at the depth limit: the most levels its stacks go on below it (not in the tree) */
};

struct tree {
	struct tree_node *nodes;
	uint32_t count, cap;
	struct hindex index;
	uint32_t depth;		/* levels of frames kept below a process (report_options.tree_depth) */
};

struct tree_key {
	uint32_t parent, key;
};

static bool node_eq(const void *table, uint64_t i, const void *key)
{
	const struct tree_node *n = &((const struct tree *)table)->nodes[i];
	const struct tree_key *k = key;
	return n->parent == k->parent && n->key == k->key;
}

static int tree_child(struct tree *t, uint32_t parent, uint32_t key, uint32_t *index)
{
	struct tree_key k = { parent, key };
	uint64_t h = hash_u64(hash_u64(HASH_SEED, parent), key);
	int err;
	if (hindex_find_index(&t->index, h, node_eq, t, &k, index))
		return 0;
	if ((err = profile_grow((void **)&t->nodes, &t->cap, (uint64_t)t->count + 1, sizeof(*t->nodes))) < 0 ||
	    (err = hindex_insert(&t->index, h, t->count)) < 0)
		return err;
	t->nodes[t->count] = (struct tree_node){ .parent = parent, .key = key,
						  .next_sibling = t->nodes[parent].first_child };
	t->nodes[parent].first_child = t->count;
	*index = t->count++;
	return 0;
}

/* Levels of frames (inline frames count) in the stack's locations [0, k]: what is still below a cut there. */
static uint64_t levels_from(const struct report *rp, const struct profile_stack *st, uint32_t k)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i <= k; i++)
		n += shown_lines(rp, st->locations[i]);
	return n;
}

/* Add one (comm, stack) to the tree along its root-first path, inline frames outer first, down to the depth
 * limit: what goes on below it is only counted, as levels, in the node where it is cut. The tree (and the time
 * and output it costs) so grows with the levels shown, not with the stacks' depth. */
static int tree_add(struct tree *t, const struct report *rp, const struct stack_count *sc)
{
	const struct profile_stack *st = &rp->p->stacks.items[sc->stack];
	uint32_t node, level = 0;
	int err = tree_child(t, 0, sc->comm, &node);
	if (err < 0)
		return err;
	t->nodes[node].total += sc->count;
	for (uint32_t k = st->nlocations; k-- > 0;) {
		for (uint32_t j = shown_lines(rp, st->locations[k]); j-- > 0;) {
			if (level == t->depth) {
				uint64_t below = levels_from(rp, st, k) - shown_lines(rp, st->locations[k]) + j + 1;
				if (below > t->nodes[node].below)
					t->nodes[node].below = below;
				return 0;
			}
			if ((err = tree_child(t, node, stack_row(rp, st, k, j), &node)) < 0)
				return err;
			t->nodes[node].total += sc->count;
			level++;
		}
	}
	t->nodes[node].self += sc->count;
	return 0;
}

struct tree_print {
	const struct report *rp;
	const struct tree *t;
	FILE *out;
	uint64_t total;
	double limit;		/* percent */
	unsigned width;		/* the line width names are cut to; 0: none */
	struct frame_buf prefix;	/* the guide lines drawn left of a node's children */
	char root[ESCAPE_SHOWN_MAX];	/* a root's name (a process's) escaped: the others' rows are already */
};

static const char *node_name(const struct tree_print *tp, uint32_t node)
{
	const struct tree_node *n = &tp->t->nodes[node];
	if (n->parent == 0) {
		const char *comm = profile_string(tp->rp->p, n->key);
		return *comm ? comm : "[unknown]";
	}
	return tp->rp->rows[n->key].name;
}

static int compare_nodes(const void *a, const void *b, void *arg)
{
	const struct tree_print *tp = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const struct tree_node *nx = &tp->t->nodes[x], *ny = &tp->t->nodes[y];
	int c;
	if (nx->total != ny->total)
		return nx->total > ny->total ? -1 : 1;
	if ((c = strcmp(node_name(tp, x), node_name(tp, y))) != 0)
		return c;
	return (nx->key > ny->key) - (nx->key < ny->key);	/* one name in two libraries */
}

/* The children of node shown (share >= the limit), biggest first; *n of them in *out (malloc'd). */
static int visible_children(const struct tree_print *tp, uint32_t node, uint32_t **out, uint32_t *n)
{
	uint32_t count = 0, k = 0;
	for (uint32_t c = tp->t->nodes[node].first_child; c; c = tp->t->nodes[c].next_sibling)
		count++;
	if (!(*out = malloc((count ? count : 1) * sizeof(uint32_t))))
		return -ENOMEM;
	for (uint32_t c = tp->t->nodes[node].first_child; c; c = tp->t->nodes[c].next_sibling) {
		if (pct(tp->t->nodes[c].total, tp->total) >= tp->limit)
			(*out)[k++] = c;
	}
	qsort_r(*out, k, sizeof(uint32_t), compare_nodes, (void *)tp);
	*n = k;
	return 0;
}

/* The guide lines left of a node at level: drawn for at most REPORT_TREE_INDENT_MAX levels, so that a line's
 * length does not grow with the depth; a node deeper than that shows its level instead: "[70] `- name". */
static size_t print_guides(struct tree_print *tp, uint32_t level, bool last)
{
	int n = 0;
	fputs(tp->prefix.s ? tp->prefix.s : "", tp->out);
	if (level > REPORT_TREE_INDENT_MAX)
		n = fprintf(tp->out, "[%u] ", level);
	fputs(last ? "`- " : "|- ", tp->out);
	return tp->prefix.len + (n > 0 ? (size_t)n : 0) + 3;	/* the columns printed */
}

/* What the depth limit cut below n (which has no children then): one line with the share of the samples that
 * go on, and the most levels they go on for. */
static void print_cut(struct tree_print *tp, const struct tree_node *n)
{
	double share = pct(n->total - n->self, tp->total);
	if (!n->below || share < tp->limit)
		return;
	/* under n's own guides, without a level: it is n's, the line above */
	fprintf(tp->out, "%6.2f%%          %s`- ... %" PRIu64 " more level%s\n", share,
		tp->prefix.s ? tp->prefix.s : "", n->below, n->below == 1 ? "" : "s");
}

static int print_subtree(struct tree_print *tp, uint32_t node, uint32_t level, bool last)
{
	const struct tree_node *n = &tp->t->nodes[node];
	size_t mark = tp->prefix.len;
	uint32_t *children, nchildren;
	int err = 0;
	fprintf(tp->out, "%6.2f%% %6.2f%%  ", pct(n->total, tp->total), pct(n->self, tp->total));
	if (level == 0)
		print_name(tp->out, escape_str(tp->root, sizeof(tp->root), node_name(tp, node)), tp->width, 17);
	else
		print_name(tp->out, node_name(tp, node), tp->width, 17 + print_guides(tp, level, last));
	fputc('\n', tp->out);
	if (level > 0 && level < REPORT_TREE_INDENT_MAX &&
	    (err = frame_buf_append(&tp->prefix, last ? "   " : "|  ", 3)) < 0)
		return err;
	if ((err = visible_children(tp, node, &children, &nchildren)) < 0)
		return err;
	if (nchildren == 0)
		print_cut(tp, n);
	for (uint32_t i = 0; i < nchildren && err == 0; i++)
		err = print_subtree(tp, children[i], level + 1, i + 1 == nchildren);
	free(children);
	tp->prefix.len = mark;
	if (tp->prefix.s)
		tp->prefix.s[mark] = '\0';
	return err;
}

static int print_tree(const struct report *rp, const struct view *v, FILE *out, const struct report_options *o)
{
	struct tree t = { .depth = o->tree_depth };
	struct tree_print tp = { .rp = rp, .t = &t, .out = out, .total = v->total, .limit = o->percent_limit,
				 .width = o->width };
	uint32_t *roots = NULL, nroots = 0;
	int err = profile_grow((void **)&t.nodes, &t.cap, 1, sizeof(*t.nodes));
	if (err == 0)
		t.count = 1;
	for (uint32_t i = 0; i < v->nstacks && err == 0; i++)
		err = tree_add(&t, rp, &v->stacks[i]);
	if (err == 0 && !v->total)
		fprintf(out, "No samples.\n");
	else if (err == 0 && (err = visible_children(&tp, 0, &roots, &nroots)) == 0) {
		fprintf(out, " Total%%   Self%%  Call tree, root first (nodes under %.2f%% hidden)\n", tp.limit);
		for (uint32_t i = 0; i < nroots && err == 0; i++)
			err = print_subtree(&tp, roots[i], 0, i + 1 == nroots);
	}
	free(roots);
	frame_buf_free(&tp.prefix);
	free(t.nodes);
	hindex_free(&t.index);
	return err;
}

/* --- per thread ------------------------------------------------------------------------------------------ */

static int compare_thread_keys(const void *a, const void *b, void *arg)
{
	const struct profile_sample *s = ((const struct profile *)arg)->samples.items;
	return profile_thread_compare(&s[*(const uint32_t *)a], &s[*(const uint32_t *)b]);
}

static bool same_thread(const struct profile_sample *x, const struct profile_sample *y)
{
	return profile_thread_compare(x, y) == 0;
}

/* A run of sel (sorted by thread) holding one thread's samples. */
struct thread_group {
	uint32_t first, n;
	uint64_t count;
};

static int compare_groups(const void *a, const void *b)
{
	const struct thread_group *x = a, *y = b;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return (x->first > y->first) - (x->first < y->first);	/* then by pid and tid, the order of sel */
}

/* Split sel, sorted in place by (pid, tid, thread name), into groups ordered busiest first. */
static int thread_groups(const struct profile *p, enum profile_value value, uint32_t *sel, uint32_t n,
			 struct thread_group **groups, uint32_t *ngroups)
{
	struct thread_group *g = malloc((n ? n : 1) * sizeof(*g));
	uint32_t k = 0;
	if (!g)
		return -ENOMEM;
	qsort_r(sel, n, sizeof(*sel), compare_thread_keys, (void *)p);
	for (uint32_t i = 0; i < n; i++) {
		const struct profile_sample *s = &p->samples.items[sel[i]];
		if (!k || !same_thread(&p->samples.items[sel[g[k - 1].first]], s))
			g[k++] = (struct thread_group){ .first = i };
		g[k - 1].n++;
		g[k - 1].count += profile_sample_value(p, s, value);
	}
	qsort(g, k, sizeof(*g), compare_groups);
	*groups = g;
	*ngroups = k;
	return 0;
}

/* "12 samples", or a time value's milliseconds. */
static void print_amount(FILE *out, uint64_t v, enum profile_value value)
{
	if (value == PROFILE_VALUE_SAMPLES)
		fprintf(out, "%" PRIu64 " sample%s", v, v == 1 ? "" : "s");
	else
		fprintf(out, "%.1f ms %s", (double)v / 1e6, value == PROFILE_VALUE_WALL ? "wall" :
			value == PROFILE_VALUE_OFF_CPU ? "off CPU" : "CPU");
}

static void print_thread_header(const struct report *rp, const struct profile_sample *s, uint64_t count,
				uint64_t all, FILE *out)
{
	char name[ESCAPE_SHOWN_MAX], comm[ESCAPE_SHOWN_MAX];
	fprintf(out, "\nThread %" PRId32 " \"%s\" of process %" PRId32 " \"%s\": ", s->tid,
		escape_str(name, sizeof(name), profile_string(rp->p, s->thread_name)), s->pid,
		escape_str(comm, sizeof(comm), profile_string(rp->p, s->comm)));
	print_amount(out, count, rp->value);
	fprintf(out, " (%.2f%%)\n", pct(count, all));
}

static int print_view(struct report *rp, const uint32_t *sel, uint32_t n, FILE *out, const struct report_options *o)
{
	struct view v;
	int err = view_build(rp->p, rp->value, sel, n, &v);
	if (err < 0)
		return err;
	err = o->tree ? print_tree(rp, &v, out, o) : print_top(rp, &v, out, o);
	free(v.stacks);
	return err;
}

static int print_threads(struct report *rp, uint32_t *sel, uint32_t n, uint64_t all, FILE *out,
			 const struct report_options *o)
{
	struct thread_group *g;
	uint32_t ng;
	int err = thread_groups(rp->p, rp->value, sel, n, &g, &ng);
	if (err < 0)
		return err;
	if (!ng)
		fprintf(out, "\nNo samples.\n");
	for (uint32_t i = 0; i < ng && err == 0; i++) {
		print_thread_header(rp, &rp->p->samples.items[sel[g[i].first]], g[i].count, all, out);
		err = print_view(rp, &sel[g[i].first], g[i].n, out, o);
	}
	free(g);
	return err;
}

/* --- entry points ---------------------------------------------------------------------------------------- */

static struct report_options effective_options(const struct report_options *o)
{
	struct report_options e = o ? *o : (struct report_options){ .sort = REPORT_SORT_SELF, .percent_limit = -1 };
	if (!e.limit)
		e.limit = REPORT_DEFAULT_LIMIT;
	if (!e.tree_depth)
		e.tree_depth = REPORT_DEFAULT_TREE_DEPTH;
	if (e.tree_depth > REPORT_MAX_TREE_DEPTH)	/* the printer recurses once per level */
		e.tree_depth = REPORT_MAX_TREE_DEPTH;
	if (e.percent_limit < 0)
		e.percent_limit = REPORT_DEFAULT_PERCENT_LIMIT;
	return e;
}

static uint64_t sum_samples(const struct profile *p, enum profile_value value, const uint32_t *sel, uint32_t n)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += profile_sample_value(p, &p->samples.items[sel[i]], value);
	return total;
}

/* A profile with off-CPU time says how much, and what became of the switches. */
static void print_off_cpu_summary(const struct profile *p, FILE *out)
{
	uint64_t off = 0, preempted = 0;
	if (!profile_has_off_cpu(p))
		return;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		off += p->samples.items[i].off_cpu_ns;
		preempted += p->samples.items[i].preempted_ns;
	}
	fprintf(out, "Off CPU:            %.3f s (blocked %.3f s, preempted %.3f s); %" PRIu64 " switches, blocks "
		"under %" PRIu64 " us without stacks, %" PRIu64 " stacks over the rate cap, %" PRIu64 " without a "
		"stack, %" PRIu64 " lost\n",
		(double)off / 1e9, (double)(off - preempted) / 1e9, (double)preempted / 1e9, p->info.off_cpu_switches,
		p->info.off_cpu_threshold_ns / 1000, p->info.off_cpu_capped, p->info.off_cpu_no_stack,
		p->info.off_cpu_lost);
}

static int print_wall_table(const struct report *rp, const struct report_options *o, FILE *out)
{
	struct thread_time *t;
	uint32_t n;
	int err = thread_times_get(rp->p, o->filter_pid, o->pid, &t, &n);
	if (err == 0) {
		fputc('\n', out);
		err = thread_times_print(rp->p, t, n, out);
		free(t);
	}
	return err;
}

static int print_report(struct report *rp, uint32_t *sel, uint32_t n, FILE *out, const struct report_options *o)
{
	uint64_t all = 0, shown = sum_samples(rp->p, rp->value, sel, n), count = 0;
	int err;
	for (uint32_t i = 0; i < rp->p->samples.count; i++) {
		all += profile_sample_value(rp->p, &rp->p->samples.items[i], rp->value);
		count += rp->p->samples.items[i].count;
	}
	if (o->filter_pid && !n)
		return -ESRCH;
	if ((err = print_summary(rp->p, count, rp->no_inline, out)) < 0)
		return err;
	print_off_cpu_summary(rp->p, out);
	if (o->filter_pid) {
		fprintf(out, "Shown:              pid %" PRId32 ", ", o->pid);
		print_amount(out, shown, rp->value);
		fprintf(out, " (%.2f%%)\n", pct(shown, all));
	}
	if (o->wall && (err = print_wall_table(rp, o, out)) < 0)
		return err;
	if (o->per_thread)
		return print_threads(rp, sel, n, shown, out, o);
	fputc('\n', out);
	return print_view(rp, sel, n, out, o);
}

int report_print(const struct profile *p, FILE *out, const struct report_options *o)
{
	struct report_options opt = effective_options(o);
	struct report rp = { .p = p, .lines = opt.lines, .addresses = opt.addresses, .no_inline = opt.no_inline,
			     .value = opt.wall ? PROFILE_VALUE_WALL : opt.off_cpu ? PROFILE_VALUE_OFF_CPU :
									    PROFILE_VALUE_SAMPLES };
	uint32_t *sel = NULL, n = 0;
	int err = build_rows(&rp);
	if (err == 0 && (err = select_samples(p, &opt, &sel, &n)) == 0)
		err = print_report(&rp, sel, n, out, &opt);
	free(sel);
	report_free(&rp);
	if (err == 0 && ferror(out))
		err = -EIO;
	return err;
}

static int compare_functions(const void *a, const void *b)
{
	const struct report_function *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->library, y->library);
}

/* Move the counted rows into f, taking their strings. */
static int take_functions(struct report *rp, struct report_functions *f)
{
	if (!(f->items = calloc(rp->nrows ? rp->nrows : 1, sizeof(*f->items))))
		return -ENOMEM;
	for (uint32_t k = 0; k < rp->nrows; k++) {
		struct row *r = &rp->rows[k];
		if (!r->total)
			continue;
		struct report_function *out = &f->items[f->count++];
		name_pairs_take(&rp->names, k, &out->name, &out->library);
		out->self = r->self;
		out->total = r->total;
	}
	qsort(f->items, f->count, sizeof(*f->items), compare_functions);
	return 0;
}

int report_functions_get(const struct profile *p, struct report_functions *out)
{
	return report_functions_get_value(p, PROFILE_VALUE_SAMPLES, out);
}

int report_functions_get_value(const struct profile *p, enum profile_value value, struct report_functions *out)
{
	struct report_options all = { .sort = REPORT_SORT_SELF };
	struct report rp = { .p = p, .value = value };
	struct view v = { 0 };
	uint32_t *sel = NULL, n = 0;
	int err = build_rows(&rp);
	*out = (struct report_functions){ 0 };
	if (err == 0 && (err = select_samples(p, &all, &sel, &n)) == 0 && (err = view_build(p, value, sel, n, &v)) == 0) {
		count_functions(&rp, &v);
		out->samples = v.total;
		err = take_functions(&rp, out);
	}
	free(v.stacks);
	free(sel);
	report_free(&rp);
	if (err < 0)
		report_functions_free(out);
	return err;
}

void report_functions_free(struct report_functions *f)
{
	for (uint32_t i = 0; i < f->count; i++) {
		free(f->items[i].name);
		free(f->items[i].library);
	}
	free(f->items);
	*f = (struct report_functions){ 0 };
}
