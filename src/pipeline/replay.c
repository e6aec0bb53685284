/*
 * replay.c — replay files: writer, reader and the environment that serves their files to unwinders.
 * See replay.h for the contract.
 */
#include "src/pipeline/replay.h"
#include "src/base/read_file.h"

#include "src/base/atomic_file.h"
#include "src/base/bsearch.h"
#include "src/base/escape.h"
#include "src/base/msgpack_scan.h"
#include "src/base/regular_file.h"
#include "src/processes/procmgr.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLAY_MAX_FILE_SIZE (1ULL << 30)

/* ---- writer ------------------------------------------------------------------------------------------- */

struct replay_writer {
	struct replay r;	/* what will be written; the same structures the reader produces */
	uint32_t capfiles, capprocesses, capsamples;
};

int replay_writer_new(struct replay_writer **out)
{
	struct replay_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*out = w;
	return 0;
}

void replay_writer_free(struct replay_writer *w)
{
	if (!w)
		return;
	struct replay tmp = w->r;
	free(w);
	struct replay *r = malloc(sizeof(*r));
	if (r) {
		*r = tmp;
		replay_free(r);
	}
}

static int grow(void **items, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	uint32_t n = *cap ? *cap * 2 : 16;
	while (n < need)
		n *= 2;
	void *p = realloc(*items, (size_t)n * size);
	if (!p)
		return -ENOMEM;
	*items = p;
	*cap = n;
	return 0;
}

/* Test programs and the vdso travel with the replay; system libraries are referred to by path and FileID. */
static int should_embed(const struct execinfo *e)
{
	const char *path = execinfo_path(e);
	uint64_t size = execinfo_size(e);
	if (execinfo_in_memory(e))
		return 1;
	if (!strncmp(path, "/usr/", 5) || !strncmp(path, "/lib", 4))
		return 0;
	return size > 0 && size <= REPLAY_EMBED_MAX;
}

static int embed_file(const struct execinfo *e, struct replay_file *f)
{
	return execinfo_copy_contents(e, REPLAY_EMBED_MAX, &f->image, &f->image_size);
}

int replay_writer_add_file(struct replay_writer *w, const struct execinfo *e, uint32_t *index)
{
	for (uint32_t i = 0; i < w->r.nfiles; i++) {
		if (!memcmp(w->r.files[i].file_id, execinfo_file_id(e)->bytes, 16)) {
			*index = i;
			return 0;
		}
	}
	int err = grow((void **)&w->r.files, &w->capfiles, w->r.nfiles + 1, sizeof(*w->r.files));
	if (err < 0)
		return err;
	struct replay_file *f = &w->r.files[w->r.nfiles];
	memset(f, 0, sizeof(*f));
	memcpy(f->file_id, execinfo_file_id(e)->bytes, 16);
	f->path = strdup(execinfo_path(e));
	if (!f->path || (should_embed(e) && (err = embed_file(e, f)) < 0)) {
		free(f->path);
		return err < 0 ? err : -ENOMEM;
	}
	*index = w->r.nfiles++;
	return 0;
}

int replay_writer_set_process(struct replay_writer *w, pid_t pid, const struct replay_mapping *maps, uint32_t n)
{
	struct replay_process *p = NULL;
	for (uint32_t i = 0; i < w->r.nprocesses && !p; i++) {
		if (w->r.processes[i].pid == pid)
			p = &w->r.processes[i];
	}
	if (!p) {
		int err = grow((void **)&w->r.processes, &w->capprocesses, w->r.nprocesses + 1, sizeof(*p));
		if (err < 0)
			return err;
		p = &w->r.processes[w->r.nprocesses++];
		memset(p, 0, sizeof(*p));
		p->pid = pid;
	}
	struct replay_mapping *copy = malloc((n ? n : 1) * sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	memcpy(copy, maps, n * sizeof(*copy));
	free(p->mappings);
	p->mappings = copy;
	p->nmappings = n;
	return 0;
}

int replay_writer_add_sample(struct replay_writer *w, pid_t pid, pid_t tid, const struct unwind_sample *s)
{
	int err = grow((void **)&w->r.samples, &w->capsamples, w->r.nsamples + 1, sizeof(*w->r.samples));
	if (err < 0)
		return err;
	struct replay_sample *rs = &w->r.samples[w->r.nsamples];
	rs->pid = pid;
	rs->tid = tid;
	memcpy(rs->regs, s->regs, sizeof(rs->regs));
	rs->stack_size = (uint32_t)s->stack_size;
	rs->stack = malloc(s->stack_size ? s->stack_size : 1);
	if (!rs->stack)
		return -ENOMEM;
	memcpy(rs->stack, s->stack, s->stack_size);
	rs->fp_chain = NULL;
	rs->fp_chain_len = 0;
	w->r.nsamples++;
	size_t nchain = s->fp_chain_len < REPLAY_MAX_FP_CHAIN ? s->fp_chain_len : REPLAY_MAX_FP_CHAIN;
	if (s->fp_chain && nchain) {
		rs->fp_chain = malloc(nchain * sizeof(*rs->fp_chain));
		if (!rs->fp_chain)
			return -ENOMEM;
		memcpy(rs->fp_chain, s->fp_chain, nchain * sizeof(*rs->fp_chain));
		rs->fp_chain_len = (uint32_t)nchain;
	}
	return 0;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void pack_bin(msgpack_packer *pk, const void *data, size_t n)
{
	msgpack_pack_bin_with_body(pk, data, n);
}

static void pack_files(msgpack_packer *pk, const struct replay *r)
{
	msgpack_pack_array(pk, r->nfiles);
	for (uint32_t i = 0; i < r->nfiles; i++) {
		const struct replay_file *f = &r->files[i];
		msgpack_pack_map(pk, f->image ? 3 : 2);
		pack_str(pk, "path");
		pack_str(pk, f->path);
		pack_str(pk, "file_id");
		pack_bin(pk, f->file_id, 16);
		if (f->image) {
			pack_str(pk, "image");
			pack_bin(pk, f->image, f->image_size);
		}
	}
}

static void pack_processes(msgpack_packer *pk, const struct replay *r)
{
	msgpack_pack_array(pk, r->nprocesses);
	for (uint32_t i = 0; i < r->nprocesses; i++) {
		const struct replay_process *p = &r->processes[i];
		msgpack_pack_map(pk, 2);
		pack_str(pk, "pid");
		msgpack_pack_int32(pk, p->pid);
		pack_str(pk, "mappings");
		msgpack_pack_array(pk, p->nmappings);
		for (uint32_t j = 0; j < p->nmappings; j++) {
			const struct replay_mapping *m = &p->mappings[j];
			msgpack_pack_array(pk, 5);
			msgpack_pack_uint32(pk, m->file);
			msgpack_pack_uint64(pk, m->start);
			msgpack_pack_uint64(pk, m->end);
			msgpack_pack_uint64(pk, m->pgoff);
			msgpack_pack_uint32(pk, (uint32_t)m->prot);
		}
	}
}

static void pack_samples(msgpack_packer *pk, const struct replay *r)
{
	msgpack_pack_array(pk, r->nsamples);
	for (uint32_t i = 0; i < r->nsamples; i++) {
		const struct replay_sample *s = &r->samples[i];
		msgpack_pack_map(pk, s->fp_chain_len ? 5 : 4);
		pack_str(pk, "pid");
		msgpack_pack_int32(pk, s->pid);
		pack_str(pk, "tid");
		msgpack_pack_int32(pk, s->tid);
		pack_str(pk, "regs");
		msgpack_pack_array(pk, UNWIND_NREGS);
		for (int j = 0; j < UNWIND_NREGS; j++)
			msgpack_pack_uint64(pk, s->regs[j]);
		pack_str(pk, "stack");
		pack_bin(pk, s->stack, s->stack_size);
		if (s->fp_chain_len) {
			pack_str(pk, "fp_chain");
			msgpack_pack_array(pk, s->fp_chain_len);
			for (uint32_t j = 0; j < s->fp_chain_len; j++)
				msgpack_pack_uint64(pk, s->fp_chain[j]);
		}
	}
}

int replay_writer_save(struct replay_writer *w, const char *path)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 5);
	pack_str(&pk, "format");
	pack_str(&pk, REPLAY_FORMAT);
	pack_str(&pk, "version");
	msgpack_pack_uint32(&pk, REPLAY_VERSION);
	pack_str(&pk, "files");
	pack_files(&pk, &w->r);
	pack_str(&pk, "processes");
	pack_processes(&pk, &w->r);
	pack_str(&pk, "samples");
	pack_samples(&pk, &w->r);
	int err = sb.data ? atomic_file_write(path, sb.data, sb.size) : -ENOMEM;
	msgpack_sbuffer_destroy(&sb);
	return err;
}

/* ---- reader ------------------------------------------------------------------------------------------- */

void replay_free(struct replay *r)
{
	if (!r)
		return;
	for (uint32_t i = 0; i < r->nfiles; i++) {
		free(r->files[i].path);
		free(r->files[i].image);
	}
	for (uint32_t i = 0; i < r->nprocesses; i++)
		free(r->processes[i].mappings);
	for (uint32_t i = 0; i < r->nsamples; i++) {
		free(r->samples[i].stack);
		free(r->samples[i].fp_chain);
	}
	free(r->files);
	free(r->processes);
	free(r->samples);
	free(r);
}

static const msgpack_object *map_get(const msgpack_object *map, const char *key)
{
	if (map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	size_t klen = strlen(key);
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen && !memcmp(k->via.str.ptr, key, klen))
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

static int get_u64(const msgpack_object *map, const char *key, uint64_t *out)
{
	const msgpack_object *o = map_get(map, key);
	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -EBADMSG;
	*out = o->via.u64;
	return 0;
}

static int get_i32(const msgpack_object *map, const char *key, int32_t *out)
{
	const msgpack_object *o = map_get(map, key);
	if (!o || (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER && o->type != MSGPACK_OBJECT_NEGATIVE_INTEGER) ||
	    o->via.i64 < INT32_MIN || o->via.i64 > INT32_MAX)
		return -EBADMSG;
	*out = (int32_t)o->via.i64;
	return 0;
}

static int copy_bin(const msgpack_object *o, uint8_t **out, size_t *size)
{
	if (!o || o->type != MSGPACK_OBJECT_BIN)
		return -EBADMSG;
	*out = malloc(o->via.bin.size ? o->via.bin.size : 1);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, o->via.bin.ptr, o->via.bin.size);
	*size = o->via.bin.size;
	return 0;
}

static const msgpack_object *get_array(const msgpack_object *map, const char *key)
{
	const msgpack_object *o = map_get(map, key);
	return o && o->type == MSGPACK_OBJECT_ARRAY ? o : NULL;
}

static int read_file_entry(const msgpack_object *o, struct replay_file *f)
{
	const msgpack_object *path = map_get(o, "path"), *id = map_get(o, "file_id");
	if (!path || path->type != MSGPACK_OBJECT_STR || !id || id->type != MSGPACK_OBJECT_BIN ||
	    id->via.bin.size != 16)
		return -EBADMSG;
	f->path = strndup(path->via.str.ptr, path->via.str.size);
	if (!f->path)
		return -ENOMEM;
	memcpy(f->file_id, id->via.bin.ptr, 16);
	const msgpack_object *image = map_get(o, "image");
	return image ? copy_bin(image, &f->image, &f->image_size) : 0;
}

static int read_mapping(const msgpack_object *o, uint32_t nfiles, struct replay_mapping *m)
{
	/* [file, start, end, pgoff] and, since mappings carry it, prot */
	uint32_t n = o->type == MSGPACK_OBJECT_ARRAY ? o->via.array.size : 0;
	if (n != 4 && n != 5)
		return -EBADMSG;
	for (uint32_t i = 0; i < n; i++) {
		if (o->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return -EBADMSG;
	}
	if (n == 5 && o->via.array.ptr[4].via.u64 > 7)
		return -EBADMSG;
	m->prot = n == 5 ? (int)o->via.array.ptr[4].via.u64 : 0;
	uint64_t file = o->via.array.ptr[0].via.u64;
	m->start = o->via.array.ptr[1].via.u64;
	m->end = o->via.array.ptr[2].via.u64;
	m->pgoff = o->via.array.ptr[3].via.u64;
	if (file >= nfiles || m->end <= m->start)
		return -EBADMSG;
	m->file = (uint32_t)file;
	return 0;
}

static int read_process(const msgpack_object *o, uint32_t nfiles, struct replay_process *p)
{
	const msgpack_object *maps = get_array(o, "mappings");
	int err = get_i32(o, "pid", &p->pid);
	if (err < 0 || !maps)
		return -EBADMSG;
	p->mappings = calloc(maps->via.array.size + 1, sizeof(*p->mappings));
	if (!p->mappings)
		return -ENOMEM;
	for (uint32_t i = 0; i < maps->via.array.size && !err; i++) {
		err = read_mapping(&maps->via.array.ptr[i], nfiles, &p->mappings[i]);
		if (!err && i && p->mappings[i].start < p->mappings[i - 1].end)
			err = -EBADMSG; /* must be sorted and disjoint: lookups binary-search them */
		p->nmappings = i + 1;
	}
	return err;
}

/* A sample's optional frame-pointer chain: at most REPLAY_MAX_FP_CHAIN addresses. */
static int read_fp_chain(const msgpack_object *o, struct replay_sample *s)
{
	const msgpack_object *chain = map_get(o, "fp_chain");
	if (!chain)
		return 0;
	if (chain->type != MSGPACK_OBJECT_ARRAY || chain->via.array.size > REPLAY_MAX_FP_CHAIN)
		return -EBADMSG;
	uint32_t n = chain->via.array.size;
	if (n == 0)
		return 0;
	s->fp_chain = malloc(n * sizeof(*s->fp_chain));
	if (!s->fp_chain)
		return -ENOMEM;
	s->fp_chain_len = n;
	for (uint32_t i = 0; i < n; i++) {
		if (chain->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return -EBADMSG;
		s->fp_chain[i] = chain->via.array.ptr[i].via.u64;
	}
	return 0;
}

static int read_sample(const msgpack_object *o, struct replay_sample *s)
{
	const msgpack_object *regs = get_array(o, "regs");
	size_t size = 0;
	int err;
	if ((err = get_i32(o, "pid", &s->pid)) < 0 || (err = get_i32(o, "tid", &s->tid)) < 0)
		return err;
	if (!regs || regs->via.array.size != UNWIND_NREGS)
		return -EBADMSG;
	for (int i = 0; i < UNWIND_NREGS; i++) {
		if (regs->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return -EBADMSG;
		s->regs[i] = regs->via.array.ptr[i].via.u64;
	}
	if ((err = copy_bin(map_get(o, "stack"), &s->stack, &size)) < 0)
		return err;
	if (size > 65536)
		return -EBADMSG;
	s->stack_size = (uint32_t)size;
	return read_fp_chain(o, s);
}

#define READ_ARRAY(root, key, field, count, fn, ...)                                                          \
	do {                                                                                                   \
		const msgpack_object *arr_ = get_array(root, key);                                             \
		if (!arr_)                                                                                     \
			return -EBADMSG;                                                                       \
		r->field = calloc(arr_->via.array.size + 1, sizeof(*r->field));                                \
		if (!r->field)                                                                                 \
			return -ENOMEM;                                                                        \
		for (uint32_t i_ = 0; i_ < arr_->via.array.size; i_++) {                                       \
			r->count = i_ + 1;                                                                     \
			int e_ = fn(&arr_->via.array.ptr[i_], ##__VA_ARGS__, &r->field[i_]);                   \
			if (e_ < 0)                                                                            \
				return e_;                                                                     \
		}                                                                                              \
	} while (0)

static int read_root(const msgpack_object *root, struct replay *r)
{
	const msgpack_object *fmt = map_get(root, "format");
	uint64_t version;
	if (!fmt || fmt->type != MSGPACK_OBJECT_STR || fmt->via.str.size != strlen(REPLAY_FORMAT) ||
	    memcmp(fmt->via.str.ptr, REPLAY_FORMAT, fmt->via.str.size) != 0)
		return -EINVAL;
	if (get_u64(root, "version", &version) < 0 || version != REPLAY_VERSION)
		return -EPROTONOSUPPORT;
	READ_ARRAY(root, "files", files, nfiles, read_file_entry);
	READ_ARRAY(root, "processes", processes, nprocesses, read_process, r->nfiles);
	READ_ARRAY(root, "samples", samples, nsamples, read_sample);
	return 0;
}

/* The whole file, a regular one only (regular_file.h): *mode says what else it is on -EINVAL. */
static int slurp(const char *path, char **data, size_t *size, mode_t *mode)
{
	struct stat st = { 0 };
	int fd = regular_file_open(AT_FDCWD, path, 0, &st);
	*mode = st.st_mode;
	if (fd < 0)
		return fd;
	int err = read_fd_all(fd, REPLAY_MAX_FILE_SIZE, (uint8_t **)data, size);
	close(fd);
	return err;
}

int replay_read(const char *path, struct replay **out, char *errbuf, size_t errlen)
{
	char *data = NULL, shown[ESCAPE_SHOWN_MAX];
	size_t size = 0;
	msgpack_unpacked u;
	mode_t mode = 0;
	int err = slurp(path, &data, &size, &mode);
	struct replay *r = NULL;

	escape_str(shown, sizeof(shown), path);
	if (err == -EINVAL) {
		snprintf(errbuf, errlen, "%s: not a regular file (%s)", shown, regular_file_kind(mode));
		return err;
	}
	if (err < 0) {
		snprintf(errbuf, errlen, "%s: %s", shown, strerror(-err));
		return err;
	}
	size_t end = 0;
	msgpack_unpacked_init(&u);
	/* counts bounded by the bytes left first (msgpack_scan.h): msgpack-c allocates what a header declares */
	if (msgpack_scan_object((const uint8_t *)data, size, &end) != MSGPACK_SCAN_OK ||
	    msgpack_unpack_next(&u, data, end, NULL) != MSGPACK_UNPACK_SUCCESS) {
		err = -EBADMSG;
	} else if (!(r = calloc(1, sizeof(*r)))) {
		err = -ENOMEM;
	} else {
		err = read_root(&u.data, r);
	}
	msgpack_unpacked_destroy(&u);
	free(data);
	if (err < 0) {
		snprintf(errbuf, errlen, "%s: %s", shown,
			 err == -EINVAL ? "not a hostprof replay file" :
			 err == -EPROTONOSUPPORT ? "unsupported replay version" : "corrupt replay file");
		replay_free(r);
		return err;
	}
	*out = r;
	return 0;
}

/* ---- environment -------------------------------------------------------------------------------------- */

struct replay_env_proc {
	struct replay_env *env;
	const struct replay_process *p;
};

struct replay_env {
	const struct replay *r;
	struct execinfo_mgr *em;
	struct execinfo **files;	/* by replay file index; NULL when missing here */
	struct replay_file_status *status;	/* by replay file index: why one is missing */
	struct replay_env_proc *procs;
};

/* The file a replay names, opened here: only a regular file (a FIFO would block the open, regular_file.h), and
 * only the build the samples were taken with. Returns 0 with *out, or why not in st. */
static int open_replay_file(struct execinfo_mgr *em, const struct replay_file *f, struct replay_file_status *st,
			    struct execinfo **out)
{
	struct execinfo *e = NULL;
	struct stat sb = { 0 };
	int err;
	if (f->image) {
		err = execinfo_acquire_image(em, f->image, f->image_size, f->path, &e);
	} else {
		int fd = regular_file_open(AT_FDCWD, f->path, 0, &sb);
		st->not_regular = fd == -EINVAL;
		st->mode = sb.st_mode;
		err = fd < 0 ? fd : execinfo_acquire_fd(em, fd, f->path, &e);
	}
	if (err < 0)
		return st->err = err;
	if (memcmp(execinfo_file_id(e)->bytes, f->file_id, 16) != 0) {
		execinfo_release(em, e); /* another build of that file: its unwind info would not match */
		return st->err = -ESTALE;
	}
	*out = e;
	return 0;
}

int replay_env_new(const struct replay *r, struct execinfo_mgr *em, struct replay_env **out)
{
	struct replay_env *env = calloc(1, sizeof(*env));
	if (!env)
		return -ENOMEM;
	env->r = r;
	env->em = em;
	env->files = calloc(r->nfiles + 1, sizeof(*env->files));
	env->status = calloc(r->nfiles + 1, sizeof(*env->status));
	env->procs = calloc(r->nprocesses + 1, sizeof(*env->procs));
	if (!env->files || !env->status || !env->procs) {
		replay_env_free(env);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < r->nfiles; i++)
		open_replay_file(em, &r->files[i], &env->status[i], &env->files[i]);
	for (uint32_t i = 0; i < r->nprocesses; i++)
		env->procs[i] = (struct replay_env_proc){ .env = env, .p = &r->processes[i] };
	*out = env;
	return 0;
}

void replay_env_free(struct replay_env *env)
{
	if (!env)
		return;
	for (uint32_t i = 0; env->files && i < env->r->nfiles; i++)
		execinfo_release(env->em, env->files[i]);
	free(env->files);
	free(env->status);
	free(env->procs);
	free(env);
}

const struct replay_file_status *replay_env_file_status(const struct replay_env *env, uint32_t file)
{
	static const struct replay_file_status none = { .err = -ENOENT };
	return file < env->r->nfiles ? &env->status[file] : &none;
}

struct execinfo *replay_env_file(const struct replay_env *env, uint32_t file)
{
	return file < env->r->nfiles ? env->files[file] : NULL;
}

static int fill_from_mapping(struct replay_env *env, const struct replay_mapping *m, struct unwind_module *mod)
{
	struct execinfo *e = env->files[m->file];
	if (!e || execinfo_bias(e, m->start, m->end, m->pgoff, m->prot, &mod->bias) < 0)
		return -ENOENT;
	mod->start = m->start;
	mod->end = m->end;
	mod->pgoff = m->pgoff;
	mod->elf = execinfo_elf(e);
	mod->cache_key = e;
	mod->deltas = execinfo_deltas(e);
	return 0;
}

static bool mapping_ends_after(const void *mappings, size_t i, const void *addr)
{
	return ((const struct replay_mapping *)mappings)[i].end > *(const uint64_t *)addr;
}

static int replay_find_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	struct replay_env_proc *rp = ctx;
	const struct replay_process *p = rp->p;
	/* Mappings are sorted and disjoint (read_process): only the first one ending past addr may hold it. */
	size_t i = bsearch_first(p->mappings, p->nmappings, mapping_ends_after, &addr);
	if (i < p->nmappings && p->mappings[i].start <= addr)
		return fill_from_mapping(rp->env, &p->mappings[i], mod);
	return -ENOENT;
}

int replay_env_process(struct replay_env *env, int32_t pid, struct unwind_process *proc)
{
	for (uint32_t i = 0; i < env->r->nprocesses; i++) {
		if (env->procs[i].p->pid == pid) {
			proc->find_module = replay_find_module;
			proc->ctx = &env->procs[i];
			/* No process memory was recorded: a replay's walks end where the stack copy does. */
			proc->memory = NULL;
			return 0;
		}
	}
	return -ENOENT;
}

struct capture_ctx {
	struct replay_writer *w;
	struct procmgr *procs;
};

/* The mappings of p whose files can be opened, as a replay records them. */
static int capture_process(void *arg, struct process *p)
{
	struct capture_ctx *c = arg;
	struct replay_mapping *maps = calloc(p->nmaps + 1, sizeof(*maps));
	uint32_t n = 0;
	int err = maps ? 0 : -ENOMEM;
	for (unsigned i = 0; i < p->nmaps && !err; i++) {
		struct execinfo *e = procmgr_mapping_exe(c->procs, p, &p->maps[i]);
		if (!e)
			continue;
		maps[n] = (struct replay_mapping){ .start = p->maps[i].start, .end = p->maps[i].end,
						   .pgoff = p->maps[i].pgoff, .prot = p->maps[i].prot };
		err = replay_writer_add_file(c->w, e, &maps[n].file);
		n++;
	}
	if (!err)
		err = replay_writer_set_process(c->w, p->pid, maps, n);
	free(maps);
	return err;
}

int replay_writer_add_processes(struct replay_writer *w, struct procmgr *procs)
{
	struct capture_ctx c = { w, procs };
	return procmgr_for_each(procs, capture_process, &c);
}
