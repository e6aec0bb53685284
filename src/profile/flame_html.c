/*
 * flame_html.c — the HTML flame graph. See flame_html.h.
 *
 * Frames are interned once per (location, line) of each profile on first use, as speedscope.c does; a stack's
 * leaf node is found once per stack and each node once per (parent, frame), through a hash index, so a node is a
 * path of frames as the page draws it; the source lines met at a node are kept with it (the first few). Numbers
 * are written as they are; every string goes through json-c's string escaping, then '<' becomes \u003c.
 */
#include "src/profile/flame_html.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hindex.h"
#include "src/profile/frame_name.h"
#include "src/profile/name_pairs.h"
#include "src/profile/profile_impl.h"

/* The page (src/profile/flame.html), put into the program by the assembler; the Makefile rebuilds this object
 * when the page changes. */
__asm__(".pushsection .rodata\n"
	".globl hostprof_flame_template\n.hidden hostprof_flame_template\n"
	"hostprof_flame_template:\n"
	".incbin \"src/profile/flame.html\"\n"
	".byte 0\n"
	".popsection\n");
extern const char hostprof_flame_template[];	/* NUL-terminated */

/* Where the data goes in the page: the whole text of an empty JSON script element's body. */
#define DATA_MARK "{\"hostprof\":\"data\"}"

#define NONE UINT32_MAX		/* no frame or node yet; as a parent: the stack's root */

/* The source lines a node lists: a frame's sampled lines, or its calls' lines, are a handful in the usual case. */
#define NODE_LINES 4

struct node {
	uint32_t parent, frame;
	uint32_t nlines;
	int64_t lines[NODE_LINES];	/* distinct, positive, in the order met */
};

struct thread {
	int32_t pid, tid;
	uint32_t comm, name;	/* string indices of the profile */
};

/* One profile's view of the shared tables. */
struct side {
	const struct profile *p;
	uint32_t *loc_first;	/* per location: its first entry in line_frame */
	uint32_t *line_frame;	/* per (location, line): frame, NONE until interned */
	uint32_t *stack_leaf;	/* per stack: its leaf node, NONE until found (and for an empty stack) */
	bool *stack_done;
	struct {
		struct thread *items;
		uint32_t count, cap;
	} threads;
	struct hindex thread_index;
};

struct flame {
	struct name_pairs frames;	/* (name, source file or library) */
	struct {
		uint8_t *items;
		uint32_t count, cap;
	} kinds;		/* per frame: enum profile_frame_kind */
	struct {
		struct node *items;
		uint32_t count, cap;
	} nodes;
	struct hindex node_index;
	struct frame_buf name, file;
	struct side sides[2];	/* the profile, then the base of a differential graph */
	uint32_t nsides;
};

/* --- frames and nodes ------------------------------------------------------------------------------------ */

static uint32_t location_nlines(const struct profile *p, uint32_t loc)
{
	return p->locations.items[loc].nlines ? p->locations.items[loc].nlines : 1;
}

/* A symbolized function's source file, else the file the code is in ("" when none). */
static int frame_file(struct flame *f, const struct profile *p, const struct profile_location *l, uint32_t line)
{
	f->file.len = 0;
	if (f->file.s)
		f->file.s[0] = '\0';
	if (line < l->nlines && !(l->frame_kind & PROFILE_FRAME_ERROR) && l->frame_kind != PROFILE_FRAME_KERNEL) {
		const char *src = profile_string(p, p->functions.items[l->lines[line].function].filename);
		if (*src)
			return frame_text_append(&f->file, src, FRAME_NAME_ESCAPED);
	}
	return frame_library_append(p, l, FRAME_NAME_ESCAPED, &f->file);
}

static int intern_frame(struct flame *f, const struct profile *p, const struct profile_location *l, uint32_t line,
			uint32_t *frame)
{
	int err;
	f->name.len = 0;
	if ((err = frame_name_append(p, l, line, FRAME_NAME_ESCAPED, &f->name)) < 0 ||
	    (err = frame_file(f, p, l, line)) < 0 ||
	    (err = name_pairs_intern(&f->frames, f->name.s ? f->name.s : "", f->file.s ? f->file.s : "", frame)) < 0)
		return err;
	if (*frame < f->kinds.count)
		return 0;
	if ((err = PROFILE_TABLE_RESERVE(f->kinds, (uint64_t)f->kinds.count + 1)) < 0)
		return err;
	f->kinds.items[f->kinds.count++] = l->frame_kind;
	return 0;
}

static int line_frame(struct flame *f, struct side *s, uint32_t loc, uint32_t line, uint32_t *frame)
{
	uint32_t *slot = &s->line_frame[s->loc_first[loc] + line];
	int err;
	if (*slot == NONE && (err = intern_frame(f, s->p, &s->p->locations.items[loc], line, slot)) < 0)
		return err;
	*frame = *slot;
	return 0;
}

static bool node_eq(const void *ctx, uint64_t value, const void *key)
{
	const struct node *a = &((const struct flame *)ctx)->nodes.items[value], *b = key;
	return a->parent == b->parent && a->frame == b->frame;
}

static void node_add_line(struct node *n, int64_t line)
{
	for (uint32_t i = 0; i < n->nlines; i++) {
		if (n->lines[i] == line)
			return;
	}
	if (line > 0 && n->nlines < NODE_LINES)
		n->lines[n->nlines++] = line;
}

static int intern_node(struct flame *f, const struct node *key, int64_t line, uint32_t *node)
{
	uint64_t h = hash_u64(hash_u64(HASH_SEED, key->parent), key->frame);
	int err;
	if (hindex_find_index(&f->node_index, h, node_eq, f, key, node)) {
		node_add_line(&f->nodes.items[*node], line);
		return 0;
	}
	if (f->nodes.count >= INT32_MAX)
		return -EOVERFLOW;
	if ((err = PROFILE_TABLE_RESERVE(f->nodes, (uint64_t)f->nodes.count + 1)) < 0 ||
	    (err = hindex_insert(&f->node_index, h, f->nodes.count)) < 0)
		return err;
	f->nodes.items[f->nodes.count] = (struct node){ .parent = key->parent, .frame = key->frame };
	node_add_line(&f->nodes.items[f->nodes.count], line);
	*node = f->nodes.count++;
	return 0;
}

/* The leaf node of stack st, its nodes interned from the outermost frame in (inlined functions outer first). */
static int stack_leaf(struct flame *f, struct side *s, uint32_t st, uint32_t *leaf)
{
	const struct profile_stack *stack = &s->p->stacks.items[st];
	struct node key = { .parent = NONE };
	int err;
	if (s->stack_done[st]) {
		*leaf = s->stack_leaf[st];
		return 0;
	}
	for (uint32_t k = stack->nlocations; k-- > 0;) {
		const struct profile_location *l = &s->p->locations.items[stack->locations[k]];
		for (uint32_t j = location_nlines(s->p, stack->locations[k]); j-- > 0;) {
			if ((err = line_frame(f, s, stack->locations[k], j, &key.frame)) < 0)
				return err;
			if ((err = intern_node(f, &key, j < l->nlines ? l->lines[j].line : 0, &key.parent)) < 0)
				return err;
		}
	}
	s->stack_done[st] = true;
	*leaf = s->stack_leaf[st] = key.parent;
	return 0;
}

/* --- threads --------------------------------------------------------------------------------------------- */

static bool thread_eq(const void *ctx, uint64_t value, const void *key)
{
	const struct thread *a = &((const struct side *)ctx)->threads.items[value], *b = key;
	return a->pid == b->pid && a->tid == b->tid && a->comm == b->comm && a->name == b->name;
}

static int intern_thread(struct side *s, const struct profile_sample *sample, uint32_t *index)
{
	const struct thread key = { sample->pid, sample->tid, sample->comm, sample->thread_name };
	uint64_t h = hash_u64(hash_u64(hash_u64(hash_u64(HASH_SEED, (uint32_t)key.pid), (uint32_t)key.tid),
				       key.comm), key.name);
	int err;
	if (hindex_find_index(&s->thread_index, h, thread_eq, s, &key, index))
		return 0;
	if ((err = PROFILE_TABLE_RESERVE(s->threads, (uint64_t)s->threads.count + 1)) < 0 ||
	    (err = hindex_insert(&s->thread_index, h, s->threads.count)) < 0)
		return err;
	s->threads.items[s->threads.count] = key;
	*index = s->threads.count++;
	return 0;
}

/* --- setup ----------------------------------------------------------------------------------------------- */

static int side_init(struct side *s, const struct profile *p)
{
	uint64_t entries = 0;
	*s = (struct side){ .p = p };
	s->loc_first = calloc(p->locations.count ? p->locations.count : 1, sizeof(uint32_t));
	s->stack_leaf = calloc(p->stacks.count ? p->stacks.count : 1, sizeof(uint32_t));
	s->stack_done = calloc(p->stacks.count ? p->stacks.count : 1, sizeof(bool));
	if (!s->loc_first || !s->stack_leaf || !s->stack_done)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->locations.count; i++) {
		s->loc_first[i] = (uint32_t)entries;
		entries += location_nlines(p, i);
	}
	if (entries >= UINT32_MAX || !(s->line_frame = malloc((entries ? entries : 1) * sizeof(uint32_t))))
		return -ENOMEM;
	memset(s->line_frame, 0xff, (entries ? entries : 1) * sizeof(uint32_t));	/* NONE */
	return 0;
}

static void side_free(struct side *s)
{
	free(s->loc_first);
	free(s->line_frame);
	free(s->stack_leaf);
	free(s->stack_done);
	free(s->threads.items);
	hindex_free(&s->thread_index);
}

static void flame_free(struct flame *f)
{
	name_pairs_free(&f->frames);
	free(f->kinds.items);
	free(f->nodes.items);
	hindex_free(&f->node_index);
	frame_buf_free(&f->name);
	frame_buf_free(&f->file);
	for (uint32_t i = 0; i < f->nsides; i++)
		side_free(&f->sides[i]);
}

/* Every sample's leaf node and thread, so the tables are complete before they are written. */
static int side_collect(struct flame *f, struct side *s)
{
	uint32_t node, thread;
	int err = 0;
	for (uint32_t i = 0; i < s->p->samples.count && err == 0; i++) {
		const struct profile_sample *sample = &s->p->samples.items[i];
		if ((err = stack_leaf(f, s, sample->stack, &node)) == 0)
			err = intern_thread(s, sample, &thread);
	}
	return err;
}

/* --- JSON ------------------------------------------------------------------------------------------------ */

struct json_out {
	FILE *out;
	int err;
};

static void put_raw(struct json_out *j, const char *s, size_t n)
{
	if (j->err == 0 && fwrite(s, 1, n, j->out) != n)
		j->err = -EIO;
}

static void put_text(struct json_out *j, const char *s)
{
	put_raw(j, s, strlen(s));
}

static void put_int(struct json_out *j, int64_t v)
{
	if (j->err == 0 && fprintf(j->out, "%" PRId64, v) < 0)
		j->err = -EIO;
}

/* A JSON string that cannot end or comment out the script element it is in: '<' as \u003c. */
static void put_string(struct json_out *j, const char *s)
{
	json_object *o = json_object_new_string(s ? s : "");
	const char *t = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;
	if (!t && j->err == 0)
		j->err = -ENOMEM;
	for (const char *lt; t && j->err == 0; t = lt + 1) {
		if (!(lt = strchr(t, '<'))) {
			put_text(j, t);
			break;
		}
		put_raw(j, t, (size_t)(lt - t));
		put_text(j, "\\u003c");
	}
	json_object_put(o);
}

static void put_key(struct json_out *j, const char *key, const char *value)
{
	put_string(j, key);
	put_text(j, ":");
	put_string(j, value);
	put_text(j, ",");
}

/* A name the user gave (a file's), escaped as the profile's names are: one line, valid UTF-8. */
static void put_name_key(struct json_out *j, struct flame *f, const char *key, const char *value)
{
	f->name.len = 0;
	if (j->err == 0 && (j->err = frame_text_append(&f->name, value, FRAME_NAME_ESCAPED)) == 0)
		put_key(j, key, f->name.s ? f->name.s : "");
}

static void write_frames(struct json_out *j, const struct flame *f)
{
	put_text(j, "\"frames\":[");
	for (uint32_t i = 0; i < f->frames.count && j->err == 0; i++) {
		put_text(j, i ? ",[" : "[");
		put_string(j, f->frames.items[i].first);
		put_text(j, ",");
		put_string(j, f->frames.items[i].second);
		put_text(j, ",");
		put_int(j, f->kinds.items[i]);
		put_text(j, "]");
	}
	/* Each node as (its distance back to its parent, frame, first line or 0): a parent is often the node just
	 * before, so most distances are 1; a root's distance points before the first node, at -1. */
	put_text(j, "],\"nodes\":[");
	for (uint32_t i = 0; i < f->nodes.count && j->err == 0; i++) {
		const struct node *n = &f->nodes.items[i];
		put_text(j, i ? "," : "");
		put_int(j, (int64_t)i - (n->parent == NONE ? -1 : (int64_t)n->parent));
		put_text(j, ",");
		put_int(j, n->frame);
		put_text(j, ",");
		put_int(j, n->nlines ? n->lines[0] : 0);
	}
	put_text(j, "],\"lines\":[");	/* (node, line) pairs of the further lines, by node */
	for (uint32_t i = 0, first = 1; i < f->nodes.count && j->err == 0; i++) {
		const struct node *n = &f->nodes.items[i];
		for (uint32_t k = 1; k < n->nlines; k++, first = 0) {
			put_text(j, first ? "" : ",");
			put_int(j, i);
			put_text(j, ",");
			put_int(j, n->lines[k]);
		}
	}
	put_text(j, "],");
}

static void write_threads(struct json_out *j, struct flame *f, const struct side *s)
{
	put_text(j, "\"threads\":[");
	for (uint32_t i = 0; i < s->threads.count && j->err == 0; i++) {
		const struct thread *t = &s->threads.items[i];
		put_text(j, i ? ",[" : "[");
		put_int(j, t->pid);
		put_text(j, ",");
		put_int(j, t->tid);
		f->name.len = 0;
		if ((j->err = frame_text_append(&f->name, profile_string(s->p, t->comm), FRAME_NAME_ESCAPED)) < 0)
			return;
		put_text(j, ",");
		put_string(j, f->name.s);
		f->name.len = 0;
		if ((j->err = frame_text_append(&f->name, profile_string(s->p, t->name), FRAME_NAME_ESCAPED)) < 0)
			return;
		put_text(j, ",");
		put_string(j, f->name.s);
		put_text(j, "]");
	}
	put_text(j, "],");
}

/* Samples as flat quintuples: leaf node (-1: an empty stack), thread, count, CPU ns, off-CPU ns. */
static void write_samples(struct json_out *j, struct flame *f, struct side *s)
{
	bool first = true;
	put_text(j, "\"samples\":[");
	for (uint32_t i = 0; i < s->p->samples.count && j->err == 0; i++) {
		const struct profile_sample *sample = &s->p->samples.items[i];
		uint64_t cpu = profile_sample_value(s->p, sample, PROFILE_VALUE_CPU);
		uint32_t node, thread;
		if (!sample->count && !cpu && !sample->off_cpu_ns)
			continue;
		if ((j->err = stack_leaf(f, s, sample->stack, &node)) < 0 ||
		    (j->err = intern_thread(s, sample, &thread)) < 0)
			return;
		put_text(j, first ? "" : ",");
		first = false;
		put_int(j, node == NONE ? -1 : (int64_t)node);
		put_text(j, ",");
		put_int(j, thread);
		put_text(j, ",");
		put_int(j, (int64_t)sample->count);
		put_text(j, ",");
		put_int(j, (int64_t)cpu);
		put_text(j, ",");
		put_int(j, (int64_t)sample->off_cpu_ns);
	}
	put_text(j, "]");
}

static void write_data(struct json_out *j, struct flame *f, const struct flame_html_options *o)
{
	static const char *const values[] = { "samples", "cpu", "off-cpu", "wall" };	/* enum profile_value */
	unsigned v = o && (unsigned)o->value < 4 ? (unsigned)o->value : 0;
	put_text(j, "{");
	put_name_key(j, f, "title", o && o->title ? o->title : "hostprof");
	put_key(j, "value", values[v]);
	if (f->nsides > 1) {
		put_name_key(j, f, "baseTitle", o->base_title ? o->base_title : "base");
		put_key(j, "verdict", o->verdict ? o->verdict : "");
	}
	write_frames(j, f);
	put_text(j, "\"profiles\":[");
	for (uint32_t i = 0; i < f->nsides && j->err == 0; i++) {
		put_text(j, i ? ",{" : "{");
		write_threads(j, f, &f->sides[i]);
		write_samples(j, f, &f->sides[i]);
		put_text(j, "}");
	}
	put_text(j, "]}");
}

int flame_html_write(const struct profile *p, FILE *out, const struct flame_html_options *o)
{
	const char *page = hostprof_flame_template, *mark = strstr(page, DATA_MARK);
	struct flame f = { .nsides = 0 };
	struct json_out j = { .out = out };
	if (!mark)
		return -EINVAL;	/* a page without its mark is a build error; the tests open the page */
	f.nsides = o && o->base ? 2 : 1;
	for (uint32_t i = 0; i < f.nsides && j.err == 0; i++) {
		if ((j.err = side_init(&f.sides[i], i ? o->base : p)) == 0)
			j.err = side_collect(&f, &f.sides[i]);
	}
	if (j.err == 0) {
		put_raw(&j, page, (size_t)(mark - page));
		write_data(&j, &f, o);
		put_text(&j, mark + strlen(DATA_MARK));
	}
	flame_free(&f);
	if (j.err == 0 && ferror(out))
		j.err = -EIO;
	return j.err;
}
