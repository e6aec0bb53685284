/*
 * execinfo.c — the executable-info manager. See execinfo.h for the contract.
 */
#include "src/processes/execinfo.h"
#include "src/base/read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/hindex.h"
#include "src/base/regular_file.h"
#include "src/processes/table_worker.h"
#include "unwind/stack_deltas_cache.h"

struct execinfo {
	struct file_id file_id;
	char build_id[41];	/* lowercase hex GNU build-id, "" if none */
	char *path;		/* path as first seen (for display; not an identity) */
	char *name;		/* basename of path */
	int fd;			/* -1 for in-memory images */
	void *image;		/* owned copy of an in-memory image (vdso), else NULL */
	size_t image_size;
	Elf *elf;
	struct load_segment *segments;	/* its PT_LOAD headers */
	unsigned nsegments;
	struct symbolizer *symbolizer;	/* lazily opened, see execinfo_symbolizer() */
	int symbolizer_failed;
	struct stack_deltas *deltas;	/* lazily built, see execinfo_deltas() */
	int deltas_failed;
	bool deltas_cacheable;		/* see table_cacheable() */
	bool deltas_pending;		/* its table is being built by the worker (which holds a reference) */
	bool unread;			/* execinfo_acquire_unread(): nothing of the file is at hand */
	Elf_Cmd elf_cmd;		/* how e->elf reads the file: the worker's handle reads it the same way */
	struct stack_deltas_stats deltas_stats;
	unsigned refs;
	uint32_t used_gen;		/* the manager's generation when its table or symbolizer was last asked for */
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_ns;
	struct execinfo_mgr *mgr;
};

#define EXECINFO_MAX_HOOKS 4
#define EXECINFO_MAX_SEGMENTS 64

struct execinfo_mgr {
	struct hindex by_id;	/* by FileID: struct execinfo * */
	struct hindex by_stat;	/* open files by (dev, inode): struct execinfo * */
	struct {
		execinfo_release_fn fn;
		void *ctx;
	} hooks[EXECINFO_MAX_HOOKS];
	unsigned nhooks;
	char *cache_dir;	/* execinfo_mgr_set_cache_dir(); NULL: none */
	struct stack_deltas_cache *tables;	/* in cache_dir, opened on the first table (table_cache()) */
	int tables_failed;
	struct table_worker *worker;	/* execinfo_mgr_start_worker(); NULL: tables are built when asked */
	uint32_t gen;			/* execinfo_mgr_evict() calls so far */
	unsigned naming;		/* profile builds in flight on other threads (execinfo_mgr_naming()) */
	bool defer_builds;		/* execinfo_mgr_defer_builds(): over the memory budget, no new table */
	execinfo_room_fn room;		/* execinfo_mgr_set_room(): whether a build's memory fits now */
	void *room_ctx;
	uint64_t builds_deferred;	/* tables asked for meanwhile (the samples walked without) */
};

int execinfo_mgr_new(struct execinfo_mgr **out)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	struct execinfo_mgr *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	*out = m;
	return 0;
}

void execinfo_mgr_free(struct execinfo_mgr *m)
{
	if (!m)
		return;
	table_worker_free(m->worker);
	hindex_free(&m->by_id);
	hindex_free(&m->by_stat);
	stack_deltas_cache_free(m->tables);
	free(m->cache_dir);
	free(m);
}

int execinfo_mgr_set_cache_dir(struct execinfo_mgr *m, const char *dir)
{
	if (m->cache_dir || !dir)
		return -EINVAL;
	return (m->cache_dir = strdup(dir)) ? 0 : -ENOMEM;
}

int execinfo_mgr_add_release_hook(struct execinfo_mgr *m, execinfo_release_fn fn, void *ctx)
{
	if (m->nhooks == EXECINFO_MAX_HOOKS)
		return -ENOSPC;
	m->hooks[m->nhooks].fn = fn;
	m->hooks[m->nhooks].ctx = ctx;
	m->nhooks++;
	return 0;
}

unsigned execinfo_mgr_count(const struct execinfo_mgr *m)
{
	return hindex_count(&m->by_id);
}

/* A FileID is a hash already: its first 8 bytes are the index's hash. */
static uint64_t id_hash(const struct file_id *id)
{
	uint64_t h;
	memcpy(&h, id->bytes, sizeof(h));
	return h;
}

static uint64_t stat_hash(dev_t dev, ino_t ino)
{
	return hash_u64(hash_u64(HASH_SEED, (uint64_t)dev), (uint64_t)ino);
}

static bool has_file_id(const void *ctx, uint64_t value, const void *key)
{
	(void)ctx;
	return memcmp(((const struct execinfo *)(uintptr_t)value)->file_id.bytes, key, sizeof(struct file_id)) == 0;
}

/* The same file, unchanged: same inode, size and modification time. */
static bool has_stat(const void *ctx, uint64_t value, const void *key)
{
	const struct execinfo *e = (const struct execinfo *)(uintptr_t)value;
	const struct stat *st = key;
	(void)ctx;
	return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
	       e->mtime_ns == (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static struct execinfo *find_by_stat(struct execinfo_mgr *m, const struct stat *st)
{
	uint64_t v;
	if (!hindex_find(&m->by_stat, stat_hash(st->st_dev, st->st_ino), has_stat, NULL, st, &v))
		return NULL;
	return (struct execinfo *)(uintptr_t)v;
}

static struct execinfo *find_by_file_id(struct execinfo_mgr *m, const struct file_id *id)
{
	uint64_t v;
	if (!hindex_find(&m->by_id, id_hash(id), has_file_id, NULL, id->bytes, &v))
		return NULL;
	return (struct execinfo *)(uintptr_t)v;
}

static void read_build_id(struct execinfo *e)
{
	size_t nphdr;
	if (elf_getphdrnum(e->elf, &nphdr) < 0)
		return;
	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e->elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		Elf_Data *d = elf_getdata_rawchunk(e->elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nh;
		while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp((char *)d->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz <= 20 && nh.n_descsz) {
				hex_encode((uint8_t *)d->d_buf + desc_off, nh.n_descsz, e->build_id);
				return;
			}
		}
	}
}

static int read_segments(struct execinfo *e)
{
	size_t nphdr;
	if (elf_getphdrnum(e->elf, &nphdr) < 0)
		return -ENOEXEC;
	e->segments = calloc(EXECINFO_MAX_SEGMENTS, sizeof(*e->segments));
	if (!e->segments)
		return -ENOMEM;
	for (size_t i = 0; i < nphdr && e->nsegments < EXECINFO_MAX_SEGMENTS; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		struct load_segment *s = &e->segments[e->nsegments++];
		s->vaddr = ph.p_vaddr;
		s->memsz = ph.p_memsz;
		s->offset = ph.p_offset;
		s->filesz = ph.p_filesz;
		s->flags = ph.p_flags;
	}
	return e->nsegments ? 0 : -ENOEXEC;
}

static void entry_free(struct execinfo *e)
{
	stack_deltas_free(e->deltas);
	if (e->symbolizer)
		symbolizer_free(e->symbolizer);
	if (e->elf)
		elf_end(e->elf);
	if (e->fd >= 0)
		close(e->fd);
	free(e->image);
	free(e->segments);
	free(e->path);
	free(e);
}

/*
 * Whether the file may be mmap'd. A mapped file that shrinks under us turns the next read of a lost page into
 * SIGBUS, so a user who can truncate a file hostprof has open could kill the root daemon. Only files that no
 * one but root can write are mapped (distro binaries and libraries: cheap, shared with the page cache); the
 * others are read with pread, where a truncated file is a read error for the one request that needs it.
 */
/*
 * Whether the file's table may go to and come from the table cache (stack_deltas_cache.h): a file with a
 * build-id that only root or we can write. The cache is keyed by build-id (and FileID, which covers only the
 * file's ends): a file that anyone else could write could claim the build-id of a library it is not, and the
 * table stored for it would then serve that library in every later run. In-memory images (the vdso) are read
 * from a process's memory: not cached either.
 */
static bool table_cacheable(const struct execinfo *e, const struct stat *st)
{
	return e->build_id[0] && regular_file_writable_by_us_only(st);
}

/* Parse the ELF image (fd or memory already set in e) and fill the derived fields. */
static int entry_load(struct execinfo *e, const char *path, Elf_Cmd cmd)
{
	e->path = strdup(path);
	if (!e->path)
		return -ENOMEM;
	const char *slash = strrchr(e->path, '/');
	e->name = slash ? (char *)slash + 1 : e->path;
	e->elf_cmd = cmd;
	e->elf = e->image ? elf_memory(e->image, e->image_size) : elf_begin(e->fd, cmd, NULL);
	if (!e->elf || elf_kind(e->elf) != ELF_K_ELF)
		return -ENOEXEC;
	read_build_id(e);
	return read_segments(e);
}

/* Index a new entry (one reference, the caller's); on failure (-ENOMEM) the entry is freed. */
static int entry_insert(struct execinfo_mgr *m, struct execinfo *e)
{
	int err = hindex_insert(&m->by_id, id_hash(&e->file_id), (uintptr_t)e);
	if (err == 0 && e->fd >= 0 && (err = hindex_insert(&m->by_stat, stat_hash(e->dev, e->ino), (uintptr_t)e)) < 0)
		hindex_remove(&m->by_id, id_hash(&e->file_id), (uintptr_t)e);
	if (err < 0) {
		entry_free(e);
		return err;
	}
	e->refs = 1;
	return 0;
}

int execinfo_acquire_fd(struct execinfo_mgr *m, int fd, const char *path, struct execinfo **out)
{
	struct stat st;
	struct file_id id;
	struct execinfo *e;
	int err;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = S_ISREG(st.st_mode) ? -errno : -ENOEXEC;
		close(fd);
		return err;
	}
	if ((e = find_by_stat(m, &st)) || ((err = fileid_from_fd(fd, &id)) == 0 && (e = find_by_file_id(m, &id)))) {
		close(fd);
		e->refs++;
		*out = e;
		return 0;
	}
	if (err < 0) {
		close(fd);
		return err;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		close(fd);
		return -ENOMEM;
	}
	e->fd = fd;
	e->mgr = m;
	e->file_id = id;
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->size = st.st_size;
	e->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	if ((err = entry_load(e, path, regular_file_root_only(&st) ? ELF_C_READ_MMAP : ELF_C_READ)) < 0) {
		entry_free(e);
		return err;
	}
	e->deltas_cacheable = table_cacheable(e, &st);
	if ((err = entry_insert(m, e)) < 0)
		return err;
	*out = e;
	return 0;
}

int execinfo_acquire_image(struct execinfo_mgr *m, const void *image, size_t size, const char *name,
			   struct execinfo **out)
{
	struct file_id id;
	struct execinfo *e;
	int err;

	fileid_from_buffer(image, size, &id);
	if ((e = find_by_file_id(m, &id))) {
		e->refs++;
		*out = e;
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fd = -1;
	e->mgr = m;
	e->file_id = id;
	e->image = malloc(size);
	if (!e->image) {
		free(e);
		return -ENOMEM;
	}
	memcpy(e->image, image, size);
	e->image_size = size;
	if ((err = entry_load(e, name, ELF_C_READ)) < 0) {
		entry_free(e);
		return err;
	}
	if ((err = entry_insert(m, e)) < 0)
		return err;
	*out = e;
	return 0;
}

/*
 * The entry of a file that is not at hand: no ELF, symbolizer nor table. One segment maps each file offset at the
 * same virtual address, so the bias of any mapping of it is start - pgoff and its addresses are file offsets.
 */
int execinfo_acquire_unread(struct execinfo_mgr *m, const char *path, const char *build_id, struct execinfo **out)
{
	static const char tag[] = "unread file\n";
	char text[sizeof(tag) + PATH_MAX + 64];
	struct file_id id;
	struct execinfo *e;
	int err;
	bool by_build = build_id && build_id[0] && strlen(build_id) < sizeof(e->build_id);
	int n = snprintf(text, sizeof(text), "%s%s", tag, by_build ? build_id : path);
	if (n < 0 || (size_t)n >= sizeof(text))
		return -ENAMETOOLONG;
	fileid_from_text(text, (size_t)n, &id);
	if ((e = find_by_file_id(m, &id))) {
		e->refs++;
		*out = e;
		return 0;
	}
	if (!(e = calloc(1, sizeof(*e))))
		return -ENOMEM;
	e->fd = -1;
	e->mgr = m;
	e->file_id = id;
	e->unread = true;
	e->symbolizer_failed = 1;
	e->deltas_failed = 1;
	if (by_build)
		snprintf(e->build_id, sizeof(e->build_id), "%s", build_id);
	if (!(e->path = strdup(path)) || !(e->segments = calloc(1, sizeof(*e->segments)))) {
		entry_free(e);
		return -ENOMEM;
	}
	const char *slash = strrchr(e->path, '/');
	e->name = slash ? (char *)slash + 1 : e->path;
	e->segments[0] = (struct load_segment){ .memsz = UINT64_MAX, .filesz = UINT64_MAX,
						.flags = PF_R | PF_W | PF_X };
	e->nsegments = 1;
	if ((err = entry_insert(m, e)) < 0)
		return err;
	*out = e;
	return 0;
}

void execinfo_ref(struct execinfo *e)
{
	e->refs++;
}

void execinfo_release(struct execinfo_mgr *m, struct execinfo *e)
{
	if (!e || --e->refs > 0)
		return;
	hindex_remove(&m->by_id, id_hash(&e->file_id), (uintptr_t)e);
	if (e->fd >= 0)
		hindex_remove(&m->by_stat, stat_hash(e->dev, e->ino), (uintptr_t)e);
	for (unsigned i = 0; i < m->nhooks; i++)
		m->hooks[i].fn(m->hooks[i].ctx, e);
	entry_free(e);
}

int execinfo_bias(const struct execinfo *e, uint64_t map_start, uint64_t map_end, uint64_t pgoff, int prot,
		  uint64_t *bias)
{
	return load_bias(e->segments, e->nsegments, map_start, map_end, pgoff, prot, bias);
}

int execinfo_contains_va(const struct execinfo *e, uint64_t va)
{
	for (unsigned i = 0; i < e->nsegments; i++) {
		if (va >= e->segments[i].vaddr && va - e->segments[i].vaddr < e->segments[i].memsz)
			return 1;
	}
	return 0;
}

struct symbolizer *execinfo_symbolizer(struct execinfo *e)
{
	e->used_gen = e->mgr->gen;
	return execinfo_naming_symbolizer(e);
}

struct symbolizer *execinfo_naming_symbolizer(struct execinfo *e)
{
	if (e->symbolizer || e->symbolizer_failed)
		return e->symbolizer;
	int fd = e->fd;
	if (fd < 0 && e->image) {
		/* In-memory images (the vdso) are symbolized through an anonymous file holding a copy. */
		fd = memfd_create(e->name, MFD_CLOEXEC);
		if (fd >= 0 && write(fd, e->image, e->image_size) != (ssize_t)e->image_size) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0) {
		/* The file may have been replaced or deleted since: symbolize the very file we hashed (fd); the path
		 * only serves to find a .gnu_debuglink file beside it. */
		symbolizer_open(e->path, fd, &e->symbolizer);	/* NULL on failure: marked failed below */
		if (fd != e->fd)
			close(fd);
	}
	if (!e->symbolizer)
		e->symbolizer_failed = 1;
	else if (e->mgr->cache_dir) {
		symbolizer_set_debug_cache(e->symbolizer, e->mgr->cache_dir);	/* without it: decompressed each run */
		symbolizer_set_names_cache(e->symbolizer, e->mgr->cache_dir);	/* without it: named again each run */
	}
	return e->symbolizer;
}

/* The manager's table cache, opened on first use; NULL without a cache directory or when it cannot be used. */
static struct stack_deltas_cache *table_cache(struct execinfo_mgr *m)
{
	if (!m->tables && m->cache_dir && !m->tables_failed && stack_deltas_cache_open(m->cache_dir, &m->tables) < 0)
		m->tables_failed = 1;
	return m->tables;
}

int execinfo_mgr_start_worker(struct execinfo_mgr *m, int wake_fd)
{
	return m->worker ? -EINVAL : table_worker_new(wake_fd, &m->worker);
}

static void table_key(const struct execinfo *e, struct stack_deltas_key *key)
{
	key->build_id = e->build_id;
	memcpy(key->file, e->file_id.bytes, sizeof(key->file));
}

/* Memory a build of e's table takes at its peak, from the CFI sections it reads: the table and the rows it sorts
 * are about twice their size (a 5 MiB .eh_frame makes a 9 MiB table). */
static uint64_t build_need(const struct execinfo *e)
{
	size_t shstrndx;
	uint64_t cfi = 0;
	if (!e->elf || elf_getshdrstrndx(e->elf, &shstrndx) < 0)
		return 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e->elf, scn));) {
		GElf_Shdr sh;
		const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(e->elf, shstrndx, sh.sh_name) : NULL;
		if (name && (!strcmp(name, ".eh_frame") || !strcmp(name, ".debug_frame")))
			cfi += sh.sh_size;
	}
	return 2 * cfi;
}

/* Hand e's table to the worker, which holds a reference on e until the job comes back. 0 or -errno. */
static int submit_build(struct execinfo *e)
{
	struct table_job *job = calloc(1, sizeof(*job));
	if (!job)
		return -ENOMEM;
	job->fd = e->fd;
	job->cmd = e->elf_cmd;
	job->cache = e->deltas_cacheable ? table_cache(e->mgr) : NULL;
	memcpy(job->build_id, e->build_id, sizeof(e->build_id));
	memcpy(job->file, e->file_id.bytes, sizeof(job->file));
	job->owner = e;
	int err = table_worker_submit(e->mgr->worker, job);
	if (err < 0) {
		free(job);
		return err;
	}
	e->refs++;
	e->deltas_pending = true;
	return 0;
}

const struct stack_deltas *execinfo_deltas_nowait(struct execinfo *e, bool *pending)
{
	*pending = e->deltas_pending;
	e->used_gen = e->mgr->gen;
	if (e->deltas || e->deltas_failed || e->deltas_pending)
		return e->deltas;
	struct stack_deltas_key key;
	struct stack_deltas_cache *c = e->deltas_cacheable ? table_cache(e->mgr) : NULL;
	table_key(e, &key);
	if (e->mgr->worker && e->fd >= 0) {
		/* A small table from the cache is mapped and checked in well under a millisecond: no need to wait
		 * for it. A larger one is loaded by the worker, like a table it builds. */
		if (c && stack_deltas_cache_load_upto(c, &key, EXECINFO_LOAD_NOW_BYTES, &e->deltas,
						      &e->deltas_stats) == 0)
			return e->deltas;
		e->deltas = NULL;
		/* At most EXECINFO_MAX_BUILDS jobs queued: each keeps its file open and its entry alive, and the queue
		 * is worked in order. Past the bound the sample waits as if its job were queued; asked again once
		 * another is done, the table gets one. */
		if (!e->mgr->defer_builds && e->mgr->room && !e->mgr->room(e->mgr->room_ctx, build_need(e)))
			e->mgr->defer_builds = true;	/* until the caller finds room again */
		if (e->mgr->defer_builds) {
			/* Over the memory budget: this sample is walked without (asked again later, not failed). */
			e->mgr->builds_deferred++;
			return NULL;
		}
		*pending = true;
		if (table_worker_outstanding(e->mgr->worker) >= EXECINFO_MAX_BUILDS || submit_build(e) == 0)
			return NULL;
		*pending = false;	/* the worker cannot take it: built here */
	}
	if (stack_deltas_cache_get(c, c ? &key : NULL, e->elf, &e->deltas, &e->deltas_stats) < 0) {
		e->deltas = NULL;
		e->deltas_failed = 1;
	}
	return e->deltas;
}

/* Install the tables of the jobs in list (built, failed or cancelled) and drop the worker's references. */
static unsigned install(struct execinfo_mgr *m, struct table_job *list)
{
	unsigned n = 0;
	for (struct table_job *job = list, *next; job; job = next, n++) {
		struct execinfo *e = job->owner;
		next = table_job_next(job);
		e->deltas_pending = false;
		if (job->base.cancelled) {
			/* not a failed build: asked again */
		} else if (job->err == 0) {
			e->deltas = job->table;
			e->deltas_stats = job->stats;
		} else {
			e->deltas_failed = 1;
		}
		free(job);
		execinfo_release(m, e);
	}
	return n;
}

unsigned execinfo_mgr_collect(struct execinfo_mgr *m)
{
	return m->worker ? install(m, table_worker_done(m->worker, false)) : 0;
}

unsigned execinfo_mgr_wait(struct execinfo_mgr *m)
{
	return m->worker ? install(m, table_worker_done(m->worker, true)) : 0;
}

void execinfo_mgr_stop(struct execinfo_mgr *m)
{
	if (!m->worker)
		return;
	table_worker_cancel(m->worker);
	execinfo_mgr_wait(m);
}

const struct stack_deltas *execinfo_deltas(struct execinfo *e)
{
	bool pending;
	const struct stack_deltas *t = execinfo_deltas_nowait(e, &pending);
	if (!pending)
		return t;
	/* e stays alive through the wait: the caller holds a reference and so does the job. */
	while (e->deltas_pending)
		execinfo_mgr_wait(e->mgr);
	return e->deltas;
}

/* Drop e's table and symbolizer (asked again, they come back: from the table cache, or built). */
static void evict(struct execinfo *e, struct execinfo_evicted *out)
{
	if (e->deltas && !e->deltas_pending) {
		out->tables++;
		out->table_bytes += e->deltas_stats.bytes;
		stack_deltas_free(e->deltas);
		e->deltas = NULL;
		memset(&e->deltas_stats, 0, sizeof(e->deltas_stats));
	}
	if (e->symbolizer && !e->mgr->naming) {	/* a build in flight may be using it */
		out->symbolizers++;
		symbolizer_free(e->symbolizer);
		e->symbolizer = NULL;
	}
}

void execinfo_mgr_set_room(struct execinfo_mgr *m, execinfo_room_fn room, void *ctx)
{
	m->room = room;
	m->room_ctx = ctx;
}

void execinfo_mgr_defer_builds(struct execinfo_mgr *m, bool defer)
{
	m->defer_builds = defer;
}

bool execinfo_mgr_deferring(const struct execinfo *e)
{
	return e->mgr->defer_builds;
}

uint64_t execinfo_mgr_builds_deferred(const struct execinfo_mgr *m)
{
	return m->builds_deferred;
}

void execinfo_mgr_trim_files(struct execinfo_mgr *m)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&m->by_id, &pos, &v);) {
		struct execinfo *e = (struct execinfo *)(uintptr_t)v;
		size_t size;
		char *base = e->elf && e->elf_cmd == ELF_C_READ_MMAP ? elf_rawfile(e->elf, &size) : NULL;
		long page = sysconf(_SC_PAGESIZE);
		/* A read-only mapping of the file: its pages stay in the page cache, and come back on a minor fault. */
		if (base && size && ((uintptr_t)base & (uintptr_t)(page - 1)) == 0)
			madvise(base, size, MADV_DONTNEED);
	}
}

bool execinfo_naming_close_symbolizer(struct execinfo *e)
{
	if (!e->symbolizer)
		return false;
	symbolizer_free(e->symbolizer);
	e->symbolizer = NULL;
	return true;
}

void execinfo_mgr_naming(struct execinfo_mgr *m, bool begin)
{
	if (begin)
		m->naming++;
	else if (m->naming > 0)
		m->naming--;
}

void execinfo_mgr_evict(struct execinfo_mgr *m, bool all, struct execinfo_evicted *out)
{
	uint64_t v;
	memset(out, 0, sizeof(*out));
	for (uint32_t pos = 0; hindex_next(&m->by_id, &pos, &v);) {
		struct execinfo *e = (struct execinfo *)(uintptr_t)v;
		if (!(all || e->used_gen != m->gen))
			continue;
		evict(e, out);
		/* The unwinders' per-file caches (libunwind's tables, checked call sites) go too. */
		for (unsigned i = 0; i < m->nhooks; i++)
			m->hooks[i].fn(m->hooks[i].ctx, e);
	}
	m->gen++;
}

void execinfo_mgr_totals(const struct execinfo_mgr *m, struct execinfo_totals *t)
{
	uint64_t v;
	memset(t, 0, sizeof(*t));
	for (uint32_t pos = 0; hindex_next(&m->by_id, &pos, &v);) {
		const struct execinfo *e = (const struct execinfo *)(uintptr_t)v;
		t->entries++;
		if (!e->deltas)
			continue;
		t->tables++;
		t->tables_cached += e->deltas_stats.from_cache;
		t->rows += e->deltas_stats.rows;
		t->bytes += e->deltas_stats.bytes;
		t->build_ns += e->deltas_stats.build_ns;
	}
}

const struct file_id *execinfo_file_id(const struct execinfo *e)
{
	return &e->file_id;
}

const char *execinfo_build_id(const struct execinfo *e)
{
	return e->build_id;
}

const char *execinfo_path(const struct execinfo *e)
{
	return e->path;
}

const char *execinfo_name(const struct execinfo *e)
{
	return e->name;
}

Elf *execinfo_elf(const struct execinfo *e)
{
	return e->elf;
}

bool execinfo_unread(const struct execinfo *e)
{
	return e->unread;
}

bool execinfo_in_memory(const struct execinfo *e)
{
	return e->image != NULL;
}

uint64_t execinfo_size(const struct execinfo *e)
{
	return e->image ? e->image_size : e->size > 0 ? (uint64_t)e->size : 0;
}

int execinfo_copy_contents(const struct execinfo *e, size_t max, uint8_t **out, size_t *len)
{
	if (e->unread)
		return -ENOENT;
	if (!e->image)
		return read_fd_all(e->fd, max, out, len);
	if (e->image_size > max)
		return -EFBIG;
	if (!(*out = malloc(e->image_size ? e->image_size : 1)))
		return -ENOMEM;
	memcpy(*out, e->image, e->image_size);
	*len = e->image_size;
	return 0;
}

bool execinfo_bias_fits(const struct execinfo *e, uint64_t map_start, uint64_t pgoff, uint64_t bias)
{
	return load_bias_fits(e->segments, e->nsegments, map_start, pgoff, bias);
}

const struct stack_deltas_stats *execinfo_deltas_stats(const struct execinfo *e)
{
	return e->deltas ? &e->deltas_stats : NULL;
}

unsigned execinfo_refs(const struct execinfo *e)
{
	return e->refs;
}
