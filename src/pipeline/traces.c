/*
 * traces.c — the trace handler. See traces.h for the contract.
 */
#include "src/pipeline/traces.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hindex.h"
#include "src/base/mem_usage.h"

#define SYMBOL_FRAMES_MAX 32

struct trace {
	struct trace_id id;
	uint64_t jit_generation;	/* jitinfo_generation() of its JIT frames' entry when its ID was last checked */
	unsigned nframes;
	uint32_t stack_index;	/* set while building a profile */
	struct trace_frame frames[];
};

struct count_link {
	uint8_t trace_id[16];
	uint8_t transaction_id[8];
	char service[129];
};

struct count_key {
	pid_t pid, tid;
	struct trace *trace;
	struct count_link *link;	/* APM context, NULL for most samples */
	uint64_t count, cpu_ns;
	uint64_t off_cpu_ns, preempted_ns;	/* time off CPU (traces_add_off_cpu), and of it runnable */
	uint64_t *times;	/* of the samples counted, CLOCK_REALTIME ns: at most count */
	uint32_t ntimes, captimes;
	char comm[16], thread_name[16];
};

/* What traces_note_process() was told of a process. */
struct process_note {
	char *exe_path, *container_id;	/* NULL: unknown */
};

/* A JIT frame as its process's map named it when traces_name_jit() ran: copied, for a build on another thread. */
struct jit_name {
	struct jitinfo *jit;
	uint64_t addr;
	struct file_id file_id;
	uint64_t address;
	uint32_t line;
	char *name, *source, *origin;	/* name NULL when unnamed */
};

/* The JIT entry a stack's JIT frames are in; mixed: they are in two (not found by their frames). */
struct frames_jit {
	struct jitinfo *entry;
	bool mixed;
};

struct traces {
	struct execinfo_mgr *execinfo;
	struct trace_kernel kernel;
	struct hindex traces;	/* by stack-trace ID: struct trace * */
	struct hindex by_frames; /* by frames_hash() of its frames: struct trace * (JIT frames of one entry at most) */
	/* What the latest traces_hash() found, for the traces_add_linked() of the same sample that follows it:
	 * the trace itself (NULL: a new one), or the frames' hash to index the new trace under. */
	struct {
		const struct trace_frame *frames;
		unsigned n;
		struct frames_jit jit;
		uint64_t jit_generation;	/* of jit.entry when the ID was made or found */
		uint64_t frames_hash;
		struct trace_id id;
		struct trace *found;
	} last;
	struct hindex keys;	/* by (trace, pid, tid, APM link): struct count_key * */
	struct hindex jit_names;	/* by (jitinfo, address): struct jit_name *, from traces_name_jit() */
	bool jit_named;		/* traces_name_jit() ran: the build reads only jit_names of JIT code */
	struct hindex processes;	/* hindex_u32(pid): struct process_note * */
	uint64_t ntimes, max_times;	/* sample times kept in the counts, and the most kept */
	uint64_t times_dropped;		/* samples counted without their time */
};

int traces_new(struct execinfo_mgr *execinfo, const struct trace_kernel *kernel, struct traces **out)
{
	struct traces *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->execinfo = execinfo;
	t->max_times = TRACES_MAX_TIMESTAMPS;
	if (kernel)
		t->kernel = *kernel;
	*out = t;
	return 0;
}

static void trace_free(struct traces *t, struct trace *tr)
{
	for (unsigned i = 0; i < tr->nframes; i++) {
		execinfo_release(t->execinfo, tr->frames[i].exe);
		if (tr->frames[i].kind == PROFILE_FRAME_JIT)
			jitinfo_release(tr->frames[i].jit);
		if (tr->frames[i].py)
			pycode_release(tr->frames[i].py);
	}
	free(tr);
}

/* Forget every trace and count (and the file references they hold); the handler stays usable, its indexes
 * keep their size for the next interval. */
void traces_reset(struct traces *t)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&t->keys, &pos, &v);) {
		struct count_key *k = (struct count_key *)(uintptr_t)v;
		free(k->link);
		free(k->times);
		free(k);
	}
	t->ntimes = t->times_dropped = 0;
	for (uint32_t pos = 0; hindex_next(&t->traces, &pos, &v);)
		trace_free(t, (struct trace *)(uintptr_t)v);
	for (uint32_t pos = 0; hindex_next(&t->jit_names, &pos, &v);) {
		struct jit_name *j = (struct jit_name *)(uintptr_t)v;
		free(j->name);
		free(j->source);
		free(j->origin);
		free(j);
	}
	for (uint32_t pos = 0; hindex_next(&t->processes, &pos, &v);) {
		struct process_note *n = (struct process_note *)(uintptr_t)v;
		free(n->exe_path);
		free(n->container_id);
		free(n);
	}
	hindex_clear(&t->processes);
	hindex_clear(&t->keys);
	hindex_clear(&t->traces);
	hindex_clear(&t->by_frames);
	hindex_clear(&t->jit_names);
	t->jit_named = false;
	t->last.frames = NULL;
	t->last.found = NULL;
}

void traces_free(struct traces *t)
{
	if (!t)
		return;
	traces_reset(t);
	hindex_free(&t->keys);
	hindex_free(&t->traces);
	hindex_free(&t->by_frames);
	hindex_free(&t->jit_names);
	hindex_free(&t->processes);
	free(t);
}

void traces_set_kallsyms(struct traces *t, struct kallsyms *k)
{
	t->kernel.kallsyms = k;
}

unsigned traces_count(const struct traces *t)
{
	return hindex_count(&t->traces);
}

unsigned traces_keys(const struct traces *t)
{
	return hindex_count(&t->keys);
}

/* The FileID and address a frame contributes to the stack-trace ID. */
static void frame_identity(const struct traces *t, const struct trace_frame *f, struct file_id *id, uint64_t *addr)
{
	static const struct file_id zero;
	if (f->kind == PROFILE_FRAME_KERNEL) {
		*id = t->kernel.file_id;
		*addr = f->address - 1 - t->kernel.text_start;
	} else if (f->kind == PROFILE_FRAME_JIT) {
		jitinfo_identity(f->jit, f->address, id, addr);
	} else if (f->py) {
		*id = f->py->file_id;
		*addr = f->address;
	} else {
		*id = f->exe ? *execinfo_file_id(f->exe) : zero;
		*addr = f->address;
	}
}

/* The ID as src/profile/ids.h defines it: FNV-1a-128 over each frame's FileID and decimal address. */
static void hash_frames(const struct traces *t, const struct trace_frame *frames, unsigned n, struct trace_id *out)
{
	struct trace_hasher h;
	trace_hash_init(&h);
	for (unsigned i = 0; i < n; i++) {
		struct file_id id;
		uint64_t addr;
		frame_identity(t, &frames[i], &id, &addr);
		trace_hash_frame(&h, &id, addr);
	}
	trace_hash_finish(&h, out);
}

/*
 * Known traces are found again by their frames as the sampler sees them (file object, address, kind), which is
 * a few multiplies per frame instead of the ID's byte-wise 128-bit hash (~0.8 us of a sample's handling, twice
 * that for a JVM's deep stacks). A file object stands for its FileID while a trace holds a reference on it, so
 * equal frames mean an equal ID. A JIT frame's identity can change while the same code address is reused, but
 * only when its entry's generation does: a trace with JIT frames is found by them only in the generation its ID
 * was checked in.
 */
struct frames_key {
	const struct trace_frame *frames;
	unsigned n;
	uint64_t jit_generation;
};

static uint64_t frames_hash(const struct trace_frame *frames, unsigned n, struct frames_jit *jit)
{
	/* A multiply and a rotation per word, mixed once at the end: equality is checked on every hit anyway. */
	uint64_t h = HASH_SEED;
	*jit = (struct frames_jit){ 0 };
	for (unsigned i = 0; i < n; i++) {
		if (frames[i].kind == PROFILE_FRAME_JIT) {
			jit->mixed |= jit->entry && jit->entry != frames[i].jit;
			jit->entry = frames[i].jit;
		}
		h = (h ^ ((uintptr_t)frames[i].exe + (uintptr_t)frames[i].py + frames[i].kind)) * 0x9e3779b97f4a7c15ULL;
		h = (h << 27 | h >> 37) ^ frames[i].address;
	}
	return hash_u64(h, n);
}

static uint64_t frames_generation(const struct frames_jit *jit)
{
	return jit->entry ? jitinfo_generation(jit->entry) : 0;
}

static bool same_frames(const struct trace *tr, const struct trace_frame *frames, unsigned n)
{
	if (tr->nframes != n)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (tr->frames[i].exe != frames[i].exe || tr->frames[i].address != frames[i].address ||
		    tr->frames[i].kind != frames[i].kind || tr->frames[i].py != frames[i].py ||
		    (frames[i].kind == PROFILE_FRAME_JIT && tr->frames[i].jit != frames[i].jit))
			return false;
	return true;
}

static bool trace_has_frames(const void *ctx, uint64_t value, const void *key)
{
	const struct trace *tr = (const struct trace *)(uintptr_t)value;
	const struct frames_key *k = key;
	(void)ctx;
	return tr->jit_generation == k->jit_generation && same_frames(tr, k->frames, k->n);
}

void traces_hash(struct traces *t, const struct trace_frame *frames, unsigned n, struct trace_id *out)
{
	struct frames_jit jit;
	uint64_t h = frames_hash(frames, n, &jit), v;
	struct frames_key key = { frames, n, frames_generation(&jit) };
	struct trace *found = NULL;
	if (!jit.mixed && hindex_find(&t->by_frames, h, trace_has_frames, NULL, &key, &v)) {
		found = (struct trace *)(uintptr_t)v;
		*out = found->id;
	} else {
		hash_frames(t, frames, n, out);
	}
	t->last.frames = frames;
	t->last.n = n;
	t->last.jit = jit;
	t->last.jit_generation = key.jit_generation;
	t->last.frames_hash = h;
	t->last.id = *out;
	t->last.found = found;
}

/* Whether the latest traces_hash() was of these frames, with this ID. */
static bool last_hashed(const struct traces *t, const struct trace_id *id, const struct trace_frame *frames,
			unsigned n)
{
	return t->last.frames == frames && t->last.n == n && memcmp(t->last.id.bytes, id->bytes, 16) == 0;
}

/* A stack-trace ID is a hash already: its first 8 bytes are the index's hash. */
static uint64_t id_hash(const struct trace_id *id)
{
	uint64_t h;
	memcpy(&h, id->bytes, sizeof(h));
	return h;
}

static bool trace_has_id(const void *ctx, uint64_t value, const void *key)
{
	(void)ctx;
	return memcmp(((const struct trace *)(uintptr_t)value)->id.bytes, key, 16) == 0;
}

/* A trace found by its ID, for frames just hashed in the current generation: where they are its own, that
 * generation holds for it (it is found by its frames again). */
static struct trace *trace_checked(struct traces *t, struct trace *tr, const struct trace_frame *frames, unsigned n)
{
	if (t->last.jit.entry && same_frames(tr, frames, n))
		tr->jit_generation = t->last.jit_generation;
	return tr;
}

static struct trace *trace_intern(struct traces *t, const struct trace_id *id, const struct trace_frame *frames,
				  unsigned n)
{
	uint64_t v;
	bool hashed = last_hashed(t, id, frames, n);
	if (hashed && t->last.found)
		return t->last.found;
	if (hindex_find(&t->traces, id_hash(id), trace_has_id, NULL, id->bytes, &v)) {
		struct trace *known = (struct trace *)(uintptr_t)v;
		return hashed ? trace_checked(t, known, frames, n) : known;
	}
	struct trace *tr = malloc(sizeof(*tr) + n * sizeof(*frames));
	if (!tr)
		return NULL;
	tr->id = *id;
	tr->nframes = n;
	memcpy(tr->frames, frames, n * sizeof(*frames));
	for (unsigned i = 0; i < n; i++) {
		if (tr->frames[i].exe)
			execinfo_ref(tr->frames[i].exe);
		if (tr->frames[i].kind == PROFILE_FRAME_JIT)
			jitinfo_ref(tr->frames[i].jit);
		if (tr->frames[i].py)
			pycode_ref(tr->frames[i].py);
	}
	if (hindex_insert(&t->traces, id_hash(id), (uintptr_t)tr) < 0) {
		trace_free(t, tr);
		return NULL;
	}
	struct frames_jit jit;
	uint64_t fh = hashed ? t->last.frames_hash : frames_hash(frames, n, &jit);
	if (hashed)
		jit = t->last.jit;
	/* A caller's ID for JIT frames is not known to be theirs in any generation: found by its ID only. */
	tr->jit_generation = hashed ? t->last.jit_generation : jit.entry ? UINT64_MAX : 0;
	/* Out of memory here only costs the next sample of this stack the full hash. */
	if (!jit.mixed && hindex_insert(&t->by_frames, fh, (uintptr_t)tr) == 0 && hashed)
		t->last.found = tr;
	return tr;
}

static int same_link(const struct count_link *a, const struct trace_link *b)
{
	if (!a || !b)
		return !a && !b;
	return !memcmp(a->trace_id, b->trace_id, 16) && !memcmp(a->transaction_id, b->transaction_id, 8) &&
	       !strcmp(a->service, b->service ? b->service : "");
}

static struct count_key *key_new(pid_t pid, pid_t tid, struct trace *tr, const char *comm, const char *thread_name,
				 const struct trace_link *link)
{
	struct count_key *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	if (link && !(k->link = calloc(1, sizeof(*k->link)))) {
		free(k);
		return NULL;
	}
	if (link) {
		memcpy(k->link->trace_id, link->trace_id, 16);
		memcpy(k->link->transaction_id, link->transaction_id, 8);
		snprintf(k->link->service, sizeof(k->link->service), "%s", link->service ? link->service : "");
	}
	k->pid = pid;
	k->tid = tid;
	k->trace = tr;
	snprintf(k->comm, sizeof(k->comm), "%s", comm ? comm : "");
	snprintf(k->thread_name, sizeof(k->thread_name), "%s", thread_name ? thread_name : "");
	return k;
}

/* What a count is kept per: the trace, the thread (pid and tid in one word) and the APM context. */
struct count_key_ref {
	struct trace *trace;
	uint64_t trace_hash;	/* id_hash() of the sample's ID: the key's hash needs no load of the trace */
	uint64_t thread;
	const struct trace_link *link;
};

static uint64_t thread_word(pid_t pid, pid_t tid)
{
	return (uint64_t)(uint32_t)tid << 32 | (uint32_t)pid;
}

/* The trace's ID is a hash already: the thread and the APM transaction are folded into it with one multiply
 * each (odd constants: distinct threads of one trace never collide), on the per-sample path. */
static uint64_t key_hash(const struct count_key_ref *r)
{
	uint64_t h = r->trace_hash ^ (r->thread + 1) * 0xbf58476d1ce4e5b9ULL, tx;
	if (r->link) {
		memcpy(&tx, r->link->transaction_id, sizeof(tx));
		h ^= (tx + 1) * 0x94d049bb133111ebULL;
	}
	return h;
}

static inline bool key_is(const void *ctx, uint64_t value, const void *key)
{
	const struct count_key *k = (const struct count_key *)(uintptr_t)value;
	const struct count_key_ref *r = key;
	(void)ctx;
	return k->trace == r->trace && thread_word(k->pid, k->tid) == r->thread &&
	       ((!k->link && !r->link) || same_link(k->link, r->link));
}

/* The count of r, made (names copied) if new; NULL when out of memory. */
static struct count_key *key_intern(struct traces *t, const struct count_key_ref *r, const char *comm,
				    const char *thread_name)
{
	uint64_t v, h = key_hash(r);
	if (hindex_find(&t->keys, h, key_is, NULL, r, &v))
		return (struct count_key *)(uintptr_t)v;
	struct count_key *k = key_new((pid_t)(uint32_t)r->thread, (pid_t)(r->thread >> 32), r->trace, comm, thread_name,
				      r->link);
	if (k && hindex_insert(&t->keys, h, (uintptr_t)k) < 0) {
		free(k->link);
		free(k);
		k = NULL;
	}
	return k;
}

/* The count of a sample's (trace, thread, APM link), made if new; NULL when out of memory. */
static struct count_key *count_for(struct traces *t, const struct trace_id *id, pid_t pid, pid_t tid,
				   const char *comm, const char *thread_name, const struct trace_frame *frames,
				   unsigned n, const struct trace_link *link)
{
	struct trace_id own;
	if (!id) {
		traces_hash(t, frames, n, &own);
		id = &own;
	}
	struct trace *tr = trace_intern(t, id, frames, n);
	if (!tr)
		return NULL;
	struct count_key_ref ref = { tr, id_hash(id), thread_word(pid, tid), link };
	return key_intern(t, &ref, comm, thread_name);
}

void traces_set_timestamp_limit(struct traces *t, uint64_t max)
{
	t->max_times = max;
}

/* Keep the time of k's latest sample, within the table's limit; a time not kept is counted. */
static void keep_time(struct traces *t, struct count_key *k, uint64_t time_ns)
{
	if (!time_ns || t->ntimes >= t->max_times || k->ntimes >= UINT32_MAX / 2) {
		t->times_dropped++;
		return;
	}
	if (k->ntimes == k->captimes) {
		uint32_t cap = k->captimes ? 2 * k->captimes : 4;
		uint64_t *grown = realloc(k->times, (size_t)cap * sizeof(*grown));
		if (!grown) {
			t->times_dropped++;
			return;
		}
		k->times = grown;
		k->captimes = cap;
	}
	k->times[k->ntimes++] = time_ns;
	t->ntimes++;
}

int traces_add_linked(struct traces *t, const struct trace_id *id, pid_t pid, pid_t tid, const char *comm,
		      const char *thread_name, const struct trace_frame *frames, unsigned n, uint64_t period_ns,
		      uint64_t time_ns, const struct trace_link *link)
{
	struct count_key *k = count_for(t, id, pid, tid, comm, thread_name, frames, n, link);
	if (!k)
		return -ENOMEM;
	k->count++;
	k->cpu_ns += period_ns;
	keep_time(t, k, time_ns);
	return 0;
}

int traces_add_off_cpu(struct traces *t, const struct trace_id *id, pid_t pid, pid_t tid, const char *comm,
		       const char *thread_name, const struct trace_frame *frames, unsigned n, uint64_t off_ns,
		       int preempted, const struct trace_link *link)
{
	struct count_key *k = count_for(t, id, pid, tid, comm, thread_name, frames, n, link);
	if (!k)
		return -ENOMEM;
	k->off_cpu_ns += off_ns;
	k->preempted_ns += preempted ? off_ns : 0;
	return 0;
}

bool traces_knows_process(const struct traces *t, pid_t pid)
{
	uint64_t v;
	return hindex_u32_get(&t->processes, (uint32_t)pid, &v);
}

/* A copy of s, NULL for "" or past the bound (a cut path would name another file); *err -ENOMEM on failure. */
static char *note_copy(const char *s, int *err)
{
	size_t n = s ? strnlen(s, TRACE_PROCESS_STRING_MAX) : 0;
	char *c = n && n < TRACE_PROCESS_STRING_MAX ? strndup(s, n) : NULL;
	if (n && n < TRACE_PROCESS_STRING_MAX && !c)
		*err = -ENOMEM;
	return c;
}

int traces_note_process(struct traces *t, pid_t pid, const char *exe_path, const char *container_id)
{
	struct process_note *n;
	int err = 0;
	if (traces_knows_process(t, pid))
		return 0;
	if (!(n = calloc(1, sizeof(*n))))
		return -ENOMEM;
	n->exe_path = note_copy(exe_path, &err);
	n->container_id = note_copy(container_id, &err);
	if (err == 0)
		err = hindex_u32_put(&t->processes, (uint32_t)pid, (uintptr_t)n);
	if (err < 0) {
		free(n->exe_path);
		free(n->container_id);
		free(n);
	}
	return err;
}

int traces_add(struct traces *t, pid_t pid, pid_t tid, const char *comm, const char *thread_name,
	       const struct trace_frame *frames, unsigned n, uint64_t period_ns)
{
	return traces_add_linked(t, NULL, pid, tid, comm, thread_name, frames, n, period_ns, 0, NULL);
}

/* --- building a profile --------------------------------------------------------------------------------- */

static int add_mapping(struct profile *p, const struct execinfo *e, uint32_t *index)
{
	struct profile_mapping m = { 0 };
	int err;
	memcpy(m.file_id, execinfo_file_id(e)->bytes, 16);
	if ((err = profile_add_string(p, execinfo_build_id(e), &m.build_id)) < 0 ||
	    (err = profile_add_string(p, execinfo_path(e), &m.filename)) < 0)
		return err;
	return profile_add_mapping(p, &m, index);
}

static int add_function(struct profile *p, const char *name, const char *file, uint32_t *index)
{
	struct profile_function f = { 0 };
	int err;
	if ((err = profile_add_string(p, name, &f.name)) < 0 || (err = profile_add_string(p, file, &f.filename)) < 0)
		return err;
	return profile_add_function(p, &f, index);
}

/* The source lines at va in e, innermost first; *kind becomes PROFILE_FRAME_GO when Go's table names them. */
static int native_lines(struct profile *p, struct execinfo *e, uint64_t va, struct profile_line *lines,
			uint32_t *nlines, uint8_t *kind)
{
	struct symbol_frame sf[SYMBOL_FRAMES_MAX];
	struct symbolizer *s = execinfo_naming_symbolizer(e);
	int n = s ? symbolizer_lookup(s, va, sf, SYMBOL_FRAMES_MAX) : 0;
	*nlines = 0;
	if (n > 0 && sf[0].go)
		*kind = PROFILE_FRAME_GO;
	for (int i = 0; i < n; i++) {
		if (!sf[i].function)
			continue;
		int err = add_function(p, sf[i].function, sf[i].file, &lines[*nlines].function);
		if (err < 0)
			return err;
		lines[(*nlines)++].line = sf[i].line;
	}
	return 0;
}

static int kernel_lines(const struct traces *t, struct profile *p, uint64_t addr, struct profile_line *line,
			uint32_t *nlines)
{
	uint64_t off;
	const char *module;
	const char *name = t->kernel.kallsyms ? kallsyms_lookup(t->kernel.kallsyms, addr, &off, &module) : NULL;
	*nlines = 0;
	if (!name)
		return 0;
	line->line = 0;
	*nlines = 1;
	return add_function(p, name, module, &line->function);
}

static uint64_t jit_name_hash(const struct jitinfo *jit, uint64_t addr)
{
	return hash_u64(hash_u64(HASH_SEED, (uintptr_t)jit), addr);
}

static bool jit_name_is(const void *ctx, uint64_t value, const void *key)
{
	const struct jit_name *j = (const struct jit_name *)(uintptr_t)value, *k = key;
	(void)ctx;
	return j->jit == k->jit && j->addr == k->addr;
}

static const struct jit_name *jit_name_find(const struct traces *t, const struct trace_frame *f)
{
	struct jit_name key = { .jit = f->jit, .addr = f->address };
	uint64_t v;
	return hindex_find(&t->jit_names, jit_name_hash(f->jit, f->address), jit_name_is, NULL, &key, &v) ?
		       (const struct jit_name *)(uintptr_t)v : NULL;
}

/* f's name from its process's JIT map now, copied into t's jit_names. */
static int jit_name_add(struct traces *t, const struct trace_frame *f)
{
	struct jitinfo_frame jf;
	if (jit_name_find(t, f))
		return 0;
	jitinfo_frame(f->jit, f->address, &jf);
	struct jit_name *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct jit_name){ .jit = f->jit, .addr = f->address, .file_id = jf.file_id, .address = jf.address,
				.line = jf.line, .name = jf.name ? strdup(jf.name) : NULL,
				.source = strdup(jf.source ? jf.source : ""), .origin = strdup(jf.origin ? jf.origin : "") };
	if ((jf.name && !j->name) || !j->source || !j->origin ||
	    hindex_insert(&t->jit_names, jit_name_hash(f->jit, f->address), (uintptr_t)j) < 0) {
		free(j->name);
		free(j->source);
		free(j->origin);
		free(j);
		return -ENOMEM;
	}
	return 0;
}

int traces_name_jit(struct traces *t)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&t->traces, &pos, &v);) {
		struct trace *tr = (struct trace *)(uintptr_t)v;
		struct jitinfo *jit_entry = NULL;
		for (unsigned i = 0; i < tr->nframes; i++) {
			if (tr->frames[i].kind != PROFILE_FRAME_JIT)
				continue;
			int err = jit_name_add(t, &tr->frames[i]);
			if (err < 0)
				return err;
			jit_entry = tr->frames[i].jit;	/* the only one: a mixed trace is never found by its frames */
		}
		/* Named now, perhaps by a map written after the sample: their identity is what it is now. */
		if (jit_entry) {
			hash_frames(t, tr->frames, tr->nframes, &tr->id);
			tr->jit_generation = jitinfo_generation(jit_entry);
		}
	}
	t->jit_named = true;
	return 0;
}

/* A JIT frame: its mapping is its identity (FileID, where the name came from), its line the code's name. */
static int jit_location(const struct traces *t, struct profile *p, const struct trace_frame *f,
			struct profile_location *loc)
{
	struct profile_mapping m = { 0 };
	const struct jit_name *j = jit_name_find(t, f);
	int err;
	if (!j)
		return -ENOENT;	/* traces_name_jit() missed it: a bug, not a profile to write */
	memcpy(m.file_id, j->file_id.bytes, 16);
	loc->address = j->address;
	loc->nlines = 0;
	if ((err = profile_add_string(p, j->origin, &m.filename)) < 0 ||
	    (err = profile_add_mapping(p, &m, &loc->mapping)) < 0 || !j->name)
		return err;
	loc->nlines = 1;
	loc->lines[0].line = j->line;
	return add_function(p, j->name, j->source, &loc->lines[0].function);
}

/* A Python frame: its mapping is its identity (FileID of its code, the source file), its line the function's. */
static int python_location(struct profile *p, const struct trace_frame *f, struct profile_location *loc)
{
	struct profile_mapping m = { 0 };
	int err;
	memcpy(m.file_id, f->py->file_id.bytes, 16);
	loc->address = f->address;
	loc->nlines = 1;
	loc->lines[0].line = (int64_t)f->address;
	if ((err = profile_add_string(p, f->py->file, &m.filename)) < 0 ||
	    (err = profile_add_mapping(p, &m, &loc->mapping)) < 0)
		return err;
	return add_function(p, f->py->name, f->py->file, &loc->lines[0].function);
}

static const char *error_name(uint64_t code)
{
	if (code == TRACE_ERROR_TOO_MANY)
		return "[too many processes]";
	if (code == TRACE_ERROR_OFFCPU_SHORT)
		return "[off-cpu below threshold]";
	if (code == TRACE_ERROR_OFFCPU_CAPPED)
		return "[off-cpu over rate cap]";
	if (code == TRACE_ERROR_OFFCPU_NO_SAMPLE)
		return "[off-cpu without stack]";
	return code == TRACE_ERROR_UNKNOWN ? "[unknown]" : "[truncated]";
}

static int name_location(struct traces *t, struct profile *p, const struct trace_frame *f, uint32_t *index)
{
	struct profile_line lines[SYMBOL_FRAMES_MAX];
	struct profile_location loc = { .frame_kind = f->kind, .lines = lines };
	int err = 0;

	if (f->kind & PROFILE_FRAME_ERROR) {
		loc.address = f->address;
		loc.nlines = 1;
		lines[0].line = 0;
		err = add_function(p, error_name(f->address), NULL, &lines[0].function);
	} else if (f->kind == PROFILE_FRAME_KERNEL) {
		loc.address = f->address - 1 - t->kernel.text_start;
		err = kernel_lines(t, p, f->address, lines, &loc.nlines);
	} else if (f->kind == PROFILE_FRAME_JIT) {
		err = jit_location(t, p, f, &loc);
	} else if (f->py) {
		err = python_location(p, f, &loc);
	} else if (f->exe) {
		loc.address = f->address;
		if ((err = add_mapping(p, f->exe, &loc.mapping)) == 0)
			err = native_lines(p, f->exe, f->address, lines, &loc.nlines, &loc.frame_kind);
	} else {
		loc.address = f->address;
	}
	if (err < 0)
		return err;
	return profile_add_location(p, &loc, index);
}

/*
 * The frames of one profile build that were located already: most frames recur in many traces (main, the hot
 * loop's callers), and each location costs string hashing for its mapping and functions even when the symbolizer
 * has the answer cached. Keyed like the known-trace lookup (file object, address, kind); JIT frames are not kept,
 * their names come from the process's map.
 */
struct location_memo {
	struct hindex by_frame;	/* frame hash -> index into frames/locations */
	struct trace_frame *frames;
	uint32_t *locations;
	uint32_t n, cap;
};

static uint64_t frame_key_hash(const struct trace_frame *f)
{
	return hash_u64(hash_u64(HASH_SEED, (uintptr_t)f->exe + (uintptr_t)f->py + f->kind), f->address);
}

static bool memo_has_frame(const void *ctx, uint64_t value, const void *key)
{
	const struct trace_frame *a = &((const struct location_memo *)ctx)->frames[value], *b = key;
	return a->exe == b->exe && a->address == b->address && a->kind == b->kind && a->py == b->py;
}

static void memo_put(struct location_memo *m, uint64_t h, const struct trace_frame *f, uint32_t location)
{
	if (m->n == m->cap) {
		uint32_t cap = m->cap ? 2 * m->cap : 1024;
		struct trace_frame *frames = realloc(m->frames, cap * sizeof(*frames));
		if (frames)
			m->frames = frames;
		uint32_t *locations = frames ? realloc(m->locations, cap * sizeof(*locations)) : NULL;
		if (!locations)
			return;	/* not remembered: located again next time */
		m->locations = locations;
		m->cap = cap;
	}
	if (hindex_insert(&m->by_frame, h, m->n) == 0) {
		m->frames[m->n] = *f;
		m->locations[m->n++] = location;
	}
}

/* A native frame to be named, with its memo hash. */
struct pending_frame {
	const struct trace_frame *f;
	uint64_t hash;
};

static bool memo_has_pending(const void *ctx, uint64_t value, const void *key)
{
	const struct trace_frame *a = ((const struct pending_frame *)ctx)[value].f, *b = key;
	return a->exe == b->exe && a->address == b->address && a->kind == b->kind && a->py == b->py;
}

static struct pending_frame *grow_pending(struct pending_frame *v, size_t *cap)
{
	size_t want = *cap ? 2 * *cap : 1024;
	struct pending_frame *bigger = realloc(v, want * sizeof(*v));
	if (!bigger) {
		free(v);
		return NULL;
	}
	*cap = want;
	return bigger;
}

static int by_file(const void *a, const void *b)
{
	const struct trace_frame *x = ((const struct pending_frame *)a)->f, *y = ((const struct pending_frame *)b)->f;
	return x->exe < y->exe ? -1 : x->exe > y->exe ? 1 : (x->address > y->address) - (x->address < y->address);
}

/* The distinct native frames of t, grouped by file: *out (malloc'd) and *n. */
static int collect_native(const struct traces *t, struct pending_frame **out, size_t *n)
{
	struct hindex seen = { 0 };
	struct pending_frame *v = NULL;
	size_t cap = 0;
	uint64_t tv, x;
	int err = 0;
	*n = 0;
	for (uint32_t pos = 0; err == 0 && hindex_next(&t->traces, &pos, &tv);) {
		const struct trace *tr = (const struct trace *)(uintptr_t)tv;
		for (unsigned i = 0; i < tr->nframes && err == 0; i++) {
			const struct trace_frame *f = &tr->frames[i];
			uint64_t h = frame_key_hash(f);
			if (!f->exe || f->kind == PROFILE_FRAME_JIT || (f->kind & PROFILE_FRAME_ERROR) ||
			    hindex_find(&seen, h, memo_has_pending, v, f, &x))
				continue;
			if (*n == cap && !(v = grow_pending(v, &cap))) {
				err = -ENOMEM;
				break;
			}
			v[*n] = (struct pending_frame){ f, h };
			err = hindex_insert(&seen, h, *n);
			(*n)++;
		}
	}
	hindex_free(&seen);
	if (err == 0 && *n)
		qsort(v, *n, sizeof(*v), by_file);
	*out = v;
	return err;
}

/*
 * Name the native frames file after file, each file's symbolizer opened once. Past the memory budget (VmRSS:
 * anonymous and file-backed, as the kernel counts the daemon's footprint), a file's symbolizer is closed as soon
 * as its frames are named: a large library's symbols take tens of MiB, and an interval that met many of them
 * would otherwise hold all of them at once.
 */
static int name_native(struct traces *t, struct profile *p, struct location_memo *m, uint64_t budget,
		       unsigned *closed)
{
	struct pending_frame *v;
	size_t n;
	int err = collect_native(t, &v, &n);
	for (size_t i = 0; i < n && err == 0; i++) {
		uint32_t index;
		if ((err = name_location(t, p, v[i].f, &index)) == 0)
			memo_put(m, v[i].hash, v[i].f, index);
		struct mem_usage u;
		if (budget && (i + 1 == n || v[i + 1].f->exe != v[i].f->exe) && mem_usage_read(0, &u) == 0 &&
		    u.rss > budget && execinfo_naming_close_symbolizer(v[i].f->exe))
			(*closed)++;
	}
	free(v);
	return err;
}

static int frame_location(struct traces *t, struct profile *p, struct location_memo *m, const struct trace_frame *f,
			  uint32_t *index)
{
	if (f->kind == PROFILE_FRAME_JIT)
		return name_location(t, p, f, index);
	uint64_t h = frame_key_hash(f), v;
	if (hindex_find(&m->by_frame, h, memo_has_frame, m, f, &v)) {
		*index = m->locations[v];
		return 0;
	}
	int err = name_location(t, p, f, index);
	if (err == 0)
		memo_put(m, h, f, *index);
	return err;
}

static int add_trace_stack(struct traces *t, struct profile *p, struct location_memo *m, struct trace *tr)
{
	/* As long as the session's frame bound makes it: built once per trace, off the sampling path. */
	uint32_t *locs = malloc((tr->nframes ? tr->nframes : 1) * sizeof(*locs));
	struct profile_stack st = { .nlocations = tr->nframes, .locations = locs };
	int err = locs ? 0 : -ENOMEM;
	for (unsigned i = 0; i < tr->nframes && err == 0; i++)
		err = frame_location(t, p, m, &tr->frames[i], &locs[i]);
	memcpy(st.trace_id, tr->id.bytes, 16);	/* of JIT frames as traces_name_jit() named them */
	if (err == 0)
		err = profile_add_stack(p, &st, &tr->stack_index);
	free(locs);
	return err;
}

static int add_count(struct profile *p, const struct count_key *k)
{
	struct profile_sample s = {
		.stack = k->trace->stack_index,
		.pid = k->pid,
		.tid = k->tid,
		.count = k->count,
		.cpu_ns = k->cpu_ns,
		.off_cpu_ns = k->off_cpu_ns,
		.preempted_ns = k->preempted_ns,
		.ntimestamps = k->ntimes,
		.timestamps = k->times,
	};
	int err;
	if ((err = profile_add_string(p, k->comm, &s.comm)) < 0 ||
	    (err = profile_add_string(p, k->thread_name, &s.thread_name)) < 0)
		return err;
	if (k->link) {
		struct profile_link l;
		memcpy(l.trace_id, k->link->trace_id, 16);
		memcpy(l.span_id, k->link->transaction_id, 8);
		if ((err = profile_add_link(p, &l, &s.link)) < 0 ||
		    (err = profile_add_string(p, k->link->service, &s.service)) < 0)
			return err;
	}
	return profile_add_sample(p, &s);
}

/* The processes' notes (a process is noted when its samples are counted). */
static int add_processes(struct traces *t, struct profile *p)
{
	uint64_t v;
	uint32_t pid;
	int err = 0;
	for (uint32_t pos = 0; err == 0 && hindex_u32_next(&t->processes, &pos, &pid, &v);) {
		const struct process_note *n = (const struct process_note *)(uintptr_t)v;
		struct profile_process pr = { .pid = (int32_t)pid };
		if ((err = profile_add_string(p, n->exe_path, &pr.exe_path)) == 0 &&
		    (err = profile_add_string(p, n->container_id, &pr.container_id)) == 0 &&
		    (pr.exe_path || pr.container_id))
			err = profile_set_process(p, &pr);
	}
	return err;
}

int traces_build_profile(struct traces *t, struct profile *p, const struct traces_build_options *o,
			 struct traces_build_stats *stats)
{
	uint64_t v;
	int err = t->jit_named ? 0 : -EINVAL;
	struct location_memo memo = { 0 };
	struct traces_build_stats st = { 0 };
	if (err == 0)
		err = name_native(t, p, &memo, o ? o->memory_budget : 0, &st.symbolizers_closed);
	for (uint32_t pos = 0; err == 0 && hindex_next(&t->traces, &pos, &v);)
		err = add_trace_stack(t, p, &memo, (struct trace *)(uintptr_t)v);
	hindex_free(&memo.by_frame);
	free(memo.frames);
	free(memo.locations);
	for (uint32_t pos = 0; err == 0 && hindex_next(&t->keys, &pos, &v);)
		err = add_count(p, (const struct count_key *)(uintptr_t)v);
	if (err == 0)
		err = add_processes(t, p);
	if (err == 0)
		p->info.timestamps_dropped += t->times_dropped;
	if (stats)
		*stats = st;
	return err;
}
