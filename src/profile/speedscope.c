/*
 * speedscope.c — speedscope JSON export. See speedscope.h for the layout.
 *
 * Frames are interned once per (location, line) on first use. Each stack's root-first frame list is computed
 * once, and its JSON array is built once and shared (json-c reference counts) by every thread that samples it.
 */
#include "src/profile/speedscope.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/escape.h"
#include "src/profile/frame_name.h"
#include "src/profile/name_pairs.h"
#include "src/profile/profile_impl.h"

#define NO_FRAME UINT32_MAX

struct stack_frames {
	uint32_t *frames;	/* root first; NULL until computed */
	uint32_t n;
	json_object *json;	/* the same list as a JSON array, NULL until built */
};

struct exporter {
	const struct profile *p;
	struct name_pairs frames;	/* (name, file) of each frame; file may be "" (left out) */
	uint32_t *loc_first;	/* per location: its first entry in line_frames */
	uint32_t *line_frames;	/* per (location, line): frame, NO_FRAME until interned */
	struct stack_frames *stacks;
	bool nanoseconds;	/* weights are CPU time rather than sample counts */
	enum profile_value value;	/* PROFILE_VALUE_OFF_CPU or _WALL: weights are that time; else CPU */
	struct frame_buf name, file;
};

/* One merged sample of a thread: a frame list and its weight. */
struct entry {
	uint32_t stack;		/* a stack with this frame list */
	uint64_t weight;
};

/* --- frames ---------------------------------------------------------------------------------------------- */

/* A symbolized user function's source file, else the file the code is in. */
static int frame_file(struct exporter *e, const struct profile_location *l, uint32_t line)
{
	const struct profile *p = e->p;
	e->file.len = 0;
	if (line < l->nlines && !(l->frame_kind & PROFILE_FRAME_ERROR) && l->frame_kind != PROFILE_FRAME_KERNEL) {
		const char *src = profile_string(p, p->functions.items[l->lines[line].function].filename);
		if (*src)
			return frame_text_append(&e->file, src, FRAME_NAME_ESCAPED);
	}
	return frame_library_append(p, l, FRAME_NAME_ESCAPED, &e->file);
}

static int line_frame(struct exporter *e, uint32_t loc, uint32_t line, uint32_t *frame)
{
	const struct profile_location *l = &e->p->locations.items[loc];
	uint32_t *slot = &e->line_frames[e->loc_first[loc] + line];
	int err;
	if (*slot == NO_FRAME) {
		e->name.len = 0;
		if ((err = frame_name_append(e->p, l, line, FRAME_NAME_ESCAPED, &e->name)) < 0 ||
		    (err = frame_file(e, l, line)) < 0 ||
		    (err = name_pairs_intern(&e->frames, e->name.s, e->file.s ? e->file.s : "", slot)) < 0)
			return err;
	}
	*frame = *slot;
	return 0;
}

static uint32_t location_nlines(const struct profile *p, uint32_t loc)
{
	return p->locations.items[loc].nlines ? p->locations.items[loc].nlines : 1;
}

/* The root-first frame list of stack s, computed on first use. */
static int stack_frames(struct exporter *e, uint32_t s, const struct stack_frames **out)
{
	const struct profile_stack *st = &e->p->stacks.items[s];
	struct stack_frames *sf = &e->stacks[s];
	uint64_t n = 0;
	int err;
	*out = sf;
	if (sf->frames || !st->nlocations)
		return 0;
	for (uint32_t k = 0; k < st->nlocations; k++)
		n += location_nlines(e->p, st->locations[k]);
	if (!(sf->frames = malloc(n * sizeof(uint32_t))))
		return -ENOMEM;
	for (uint32_t k = st->nlocations; k-- > 0;) {
		for (uint32_t j = location_nlines(e->p, st->locations[k]); j-- > 0;) {
			if ((err = line_frame(e, st->locations[k], j, &sf->frames[sf->n])) < 0)
				return err;
			sf->n++;
		}
	}
	return 0;
}

/* --- setup ----------------------------------------------------------------------------------------------- */

static bool weights_are_time(const struct profile *p)
{
	if (p->info.period_ns)
		return true;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		if (p->samples.items[i].count && !p->samples.items[i].cpu_ns)
			return false;
	}
	return true;
}

static int exporter_init(struct exporter *e, const struct profile *p)
{
	uint64_t entries = 0;
	*e = (struct exporter){ .p = p, .nanoseconds = weights_are_time(p) };
	e->loc_first = calloc(p->locations.count ? p->locations.count : 1, sizeof(uint32_t));
	e->stacks = calloc(p->stacks.count ? p->stacks.count : 1, sizeof(*e->stacks));
	if (!e->loc_first || !e->stacks)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->locations.count; i++) {
		e->loc_first[i] = (uint32_t)entries;
		entries += location_nlines(p, i);
	}
	if (entries >= UINT32_MAX || !(e->line_frames = malloc((entries ? entries : 1) * sizeof(uint32_t))))
		return -ENOMEM;
	memset(e->line_frames, 0xff, (entries ? entries : 1) * sizeof(uint32_t));	/* NO_FRAME */
	return 0;
}

static void exporter_free(struct exporter *e)
{
	name_pairs_free(&e->frames);
	for (uint32_t s = 0; e->stacks && s < e->p->stacks.count; s++) {
		free(e->stacks[s].frames);
		json_object_put(e->stacks[s].json);
	}
	free(e->stacks);
	free(e->loc_first);
	free(e->line_frames);
	frame_buf_free(&e->name);
	frame_buf_free(&e->file);
}

/* --- JSON helpers: each returns 0 or -ENOMEM and takes ownership of val ----------------------------------- */

static int put(json_object *obj, const char *key, json_object *val)
{
	if (!val)
		return -ENOMEM;
	if (json_object_object_add(obj, key, val) != 0) {
		json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

static int append(json_object *array, json_object *val)
{
	if (!val)
		return -ENOMEM;
	if (json_object_array_add(array, val) != 0) {
		json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

/* --- threads --------------------------------------------------------------------------------------------- */

static int compare_thread_samples(const void *a, const void *b, void *arg)
{
	const struct profile_sample *s = ((const struct profile *)arg)->samples.items;
	const struct profile_sample *x = &s[*(const uint32_t *)a], *y = &s[*(const uint32_t *)b];
	int by_thread = profile_thread_compare(x, y);
	return by_thread ? by_thread : (x->stack > y->stack) - (x->stack < y->stack);
}

static uint64_t sample_weight(const struct exporter *e, const struct profile_sample *s)
{
	if (e->value == PROFILE_VALUE_OFF_CPU || e->value == PROFILE_VALUE_WALL)
		return profile_sample_value(e->p, s, e->value);
	if (!e->nanoseconds)
		return s->count;
	return s->cpu_ns ? s->cpu_ns : s->count * e->p->info.period_ns;
}

static int compare_entries(const void *a, const void *b, void *arg)
{
	const struct exporter *e = arg;
	const struct stack_frames *x = &e->stacks[((const struct entry *)a)->stack];
	const struct stack_frames *y = &e->stacks[((const struct entry *)b)->stack];
	for (uint32_t i = 0; i < x->n && i < y->n; i++) {
		if (x->frames[i] != y->frames[i])
			return x->frames[i] < y->frames[i] ? -1 : 1;
	}
	return (x->n > y->n) - (x->n < y->n);
}

/* The thread's samples (sel[0..n)) as entries sorted by frame list, equal lists merged. */
static int thread_entries(struct exporter *e, const uint32_t *sel, uint32_t n, struct entry **out, uint32_t *nout)
{
	struct entry *v = malloc((n ? n : 1) * sizeof(*v));
	const struct stack_frames *sf;
	uint32_t k = 0;
	int err = 0;
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < n && err == 0; i++) {
		const struct profile_sample *s = &e->p->samples.items[sel[i]];
		v[i] = (struct entry){ s->stack, sample_weight(e, s) };
		err = stack_frames(e, s->stack, &sf);
	}
	if (err < 0) {
		free(v);
		return err;
	}
	qsort_r(v, n, sizeof(*v), compare_entries, e);
	for (uint32_t i = 0; i < n; i++) {
		if (k && compare_entries(&v[k - 1], &v[i], e) == 0)
			v[k - 1].weight += v[i].weight;
		else
			v[k++] = v[i];
	}
	*out = v;
	*nout = k;
	return 0;
}

static json_object *stack_json(struct exporter *e, uint32_t s)
{
	struct stack_frames *sf = &e->stacks[s];
	if (!sf->json && (sf->json = json_object_new_array_ext((int)sf->n))) {
		for (uint32_t i = 0; i < sf->n; i++) {
			if (append(sf->json, json_object_new_int64(sf->frames[i])) < 0) {
				json_object_put(sf->json);
				return sf->json = NULL;
			}
		}
	}
	return json_object_get(sf->json);	/* one more reference, for the caller's array */
}

static int thread_name(const struct exporter *e, const struct profile_sample *s, json_object *prof)
{
	char name[2 * ESCAPE_SHOWN_MAX + 64], comm[ESCAPE_SHOWN_MAX], thread[ESCAPE_SHOWN_MAX];
	escape_str(comm, sizeof(comm), profile_string(e->p, s->comm));
	escape_str(thread, sizeof(thread), profile_string(e->p, s->thread_name));
	snprintf(name, sizeof(name), "%s pid %" PRId32 " / %s tid %" PRId32, *comm ? comm : "[unknown]", s->pid,
		 *thread ? thread : "[unknown]", s->tid);
	return put(prof, "name", json_object_new_string(name));
}

static int thread_samples(struct exporter *e, const struct entry *v, uint32_t n, json_object *prof, uint64_t *sum)
{
	json_object *samples = json_object_new_array_ext((int)n), *weights = json_object_new_array_ext((int)n);
	int err = put(prof, "samples", samples), err2 = put(prof, "weights", weights);
	*sum = 0;
	if (err < 0 || err2 < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < n && err == 0; i++) {
		if ((err = append(samples, stack_json(e, v[i].stack))) == 0)
			err = append(weights, json_object_new_int64((int64_t)v[i].weight));
		*sum += v[i].weight;
	}
	return err;
}

static int thread_profile(struct exporter *e, const uint32_t *sel, uint32_t n, json_object *profiles,
			  uint64_t *sum)
{
	json_object *prof = json_object_new_object();
	struct entry *v = NULL;
	uint32_t nv = 0;
	int err;
	if (!prof)
		return -ENOMEM;
	if ((err = put(prof, "type", json_object_new_string("sampled"))) < 0 ||
	    (err = thread_name(e, &e->p->samples.items[sel[0]], prof)) < 0 ||
	    (err = put(prof, "unit", json_object_new_string(e->nanoseconds ? "nanoseconds" : "none"))) < 0 ||
	    (err = thread_entries(e, sel, n, &v, &nv)) < 0 || (err = thread_samples(e, v, nv, prof, sum)) < 0 ||
	    (err = put(prof, "startValue", json_object_new_int64(0))) < 0 ||
	    (err = put(prof, "endValue", json_object_new_int64((int64_t)*sum))) < 0) {
		free(v);
		json_object_put(prof);
		return err;
	}
	free(v);
	return append(profiles, prof);
}

/* The samples with a weight, sorted by thread. */
static int sorted_samples(const struct exporter *e, uint32_t **sel, uint32_t *n)
{
	const struct profile *p = e->p;
	*n = 0;
	if (!(*sel = malloc((p->samples.count ? p->samples.count : 1) * sizeof(uint32_t))))
		return -ENOMEM;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		if (sample_weight(e, &p->samples.items[i]))
			(*sel)[(*n)++] = i;
	}
	qsort_r(*sel, *n, sizeof(uint32_t), compare_thread_samples, (void *)p);
	return 0;
}

/* One profile per (pid, tid); the index of the heaviest in *active. */
static int build_profiles(struct exporter *e, json_object *profiles, int64_t *active)
{
	const struct profile_sample *s = e->p->samples.items;
	uint32_t *sel, n, first = 0, index = 0;
	uint64_t best = 0, sum;
	int err = sorted_samples(e, &sel, &n);
	*active = 0;
	for (uint32_t i = 1; i <= n && err == 0; i++) {
		if (i < n && s[sel[i]].pid == s[sel[first]].pid && s[sel[i]].tid == s[sel[first]].tid)
			continue;
		if ((err = thread_profile(e, &sel[first], i - first, profiles, &sum)) == 0 && sum > best) {
			best = sum;
			*active = index;
		}
		first = i;
		index++;
	}
	free(sel);
	return err;
}

/* --- document -------------------------------------------------------------------------------------------- */

static int build_frames(const struct exporter *e, json_object *shared)
{
	json_object *frames = json_object_new_array_ext((int)e->frames.count);
	int err = put(shared, "frames", frames);
	for (uint32_t i = 0; i < e->frames.count && err == 0; i++) {
		json_object *f = json_object_new_object();
		if ((err = append(frames, f)) < 0 || (err = put(f, "name", json_object_new_string(e->frames.items[i].first))) < 0)
			break;
		if (*e->frames.items[i].second)
			err = put(f, "file", json_object_new_string(e->frames.items[i].second));
	}
	return err;
}

static int build_document(struct exporter *e, json_object *doc, const struct speedscope_options *o)
{
	json_object *shared = NULL, *profiles = NULL;
	int64_t active = 0;
	int err;
	/* "shared" is filled last: the profiles intern the frames it lists. */
	if ((err = put(doc, "$schema", json_object_new_string(SPEEDSCOPE_SCHEMA))) < 0 ||
	    (err = put(doc, "version", json_object_new_string("0.0.1"))) < 0 ||
	    (err = put(doc, "name", json_object_new_string(o && o->name ? o->name : "hostprof"))) < 0 ||
	    (o && o->exporter && (err = put(doc, "exporter", json_object_new_string(o->exporter))) < 0) ||
	    (err = put(doc, "shared", shared = json_object_new_object())) < 0 ||
	    (err = put(doc, "profiles", profiles = json_object_new_array())) < 0 ||
	    (err = build_profiles(e, profiles, &active)) < 0 || (err = build_frames(e, shared)) < 0)
		return err;
	if (!json_object_array_length(profiles))
		return 0;	/* the index must name a profile */
	return put(doc, "activeProfileIndex", json_object_new_int64(active));
}

int speedscope_write(const struct profile *p, FILE *out, const struct speedscope_options *o)
{
	struct exporter e;
	json_object *doc = json_object_new_object();
	size_t len = 0;
	int err = doc ? exporter_init(&e, p) : -ENOMEM;
	if (err == 0 && o && (o->value == PROFILE_VALUE_OFF_CPU || o->value == PROFILE_VALUE_WALL)) {
		e.value = o->value;
		e.nanoseconds = true;
	}
	if (err == 0 && (err = build_document(&e, doc, o)) == 0) {
		const char *text = json_object_to_json_string_length(doc, JSON_C_TO_STRING_PLAIN |
								       JSON_C_TO_STRING_NOSLASHESCAPE, &len);
		if (!text)
			err = -ENOMEM;
		else if (fwrite(text, 1, len, out) != len || fputc('\n', out) == EOF)
			err = -EIO;
	}
	json_object_put(doc);
	if (doc)
		exporter_free(&e);
	if (err == 0 && ferror(out))
		err = -EIO;
	return err;
}
