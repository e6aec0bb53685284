/*
 * procmgr.c — the process manager. See procmgr.h for the contract.
 */
#include "src/processes/procmgr.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "src/base/bsearch.h"
#include "src/base/hindex.h"
#include "src/base/proc_threads.h"
#include "src/base/regular_file.h"

#define PROCMGR_VDSO_MAX (1u << 20)

struct procmgr {
	struct execinfo_mgr *execinfo;
	struct hindex by_pid;	/* hindex_u32(pid): struct process * */
	unsigned seen;
	uint64_t dropped;	/* mappings and thread names not kept for lack of memory */
	unsigned limit;		/* 0: none */
	/* Files of mappings a re-read of /proc/PID/maps replaced, released by procmgr_release_deferred(). */
	struct execinfo **deferred;
	size_t ndeferred, deferred_cap;
	/* Offline (procmgr_set_offline()): nothing read from /proc, files opened by open_file. */
	procmgr_open_fn open_file;
	void *open_ctx;
};

void procmgr_set_offline(struct procmgr *pm, procmgr_open_fn open_file, void *ctx)
{
	pm->open_file = open_file;
	pm->open_ctx = ctx;
}

int procmgr_new(struct execinfo_mgr *execinfo, struct procmgr **out)
{
	struct procmgr *pm = calloc(1, sizeof(*pm));
	if (!pm)
		return -ENOMEM;
	pm->execinfo = execinfo;
	*out = pm;
	return 0;
}

static void mapping_clear(struct procmgr *pm, struct mapping *m)
{
	if (m->exe)
		execinfo_release(pm->execinfo, m->exe);
	free(m->path);
	memset(m, 0, sizeof(*m));
}

static void process_clear_maps(struct procmgr *pm, struct process *p)
{
	for (unsigned i = 0; i < p->nmaps; i++)
		mapping_clear(pm, &p->maps[i]);
	p->nmaps = 0;
}

void procmgr_drop_replaced(struct procmgr *pm, struct process *p)
{
	for (unsigned i = 0; i < p->nreplaced; i++)
		mapping_clear(pm, &p->replaced[i]);
	free(p->replaced);
	p->replaced = NULL;
	p->nreplaced = 0;
}

/* An exec: p's mappings become the replaced image (the one before is gone), and p starts with none. */
static void process_replace_image(struct procmgr *pm, struct process *p)
{
	procmgr_drop_replaced(pm, p);
	p->replaced = p->maps;
	p->nreplaced = p->nmaps;
	p->maps = NULL;
	p->nmaps = p->capmaps = 0;
}

static void process_free(struct procmgr *pm, struct process *p)
{
	process_clear_maps(pm, p);
	procmgr_drop_replaced(pm, p);
	free(p->maps);
	free(p->threads);
	free(p->exe_path);
	free(p);
}

void procmgr_release_deferred(struct procmgr *pm)
{
	for (size_t i = 0; i < pm->ndeferred; i++)
		execinfo_release(pm->execinfo, pm->deferred[i]);
	pm->ndeferred = 0;
}

/*
 * Clear p's mappings, keeping their files referenced until procmgr_release_deferred(). -ENOMEM, with nothing
 * cleared, when there is no room to keep them.
 */
static int process_clear_maps_deferred(struct procmgr *pm, struct process *p)
{
	if (pm->ndeferred + p->nmaps > pm->deferred_cap) {
		size_t cap = (pm->ndeferred + p->nmaps) * 2;
		struct execinfo **d = realloc(pm->deferred, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		pm->deferred = d;
		pm->deferred_cap = cap;
	}
	for (unsigned i = 0; i < p->nmaps; i++) {
		if (p->maps[i].exe)
			pm->deferred[pm->ndeferred++] = p->maps[i].exe;
		p->maps[i].exe = NULL;
		mapping_clear(pm, &p->maps[i]);
	}
	p->nmaps = 0;
	return 0;
}

void procmgr_free(struct procmgr *pm)
{
	if (!pm)
		return;
	procmgr_release_deferred(pm);
	free(pm->deferred);
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&pm->by_pid, &pos, &v);)
		process_free(pm, (struct process *)(uintptr_t)v);
	hindex_free(&pm->by_pid);
	free(pm);
}

unsigned procmgr_count(const struct procmgr *pm)
{
	return hindex_count(&pm->by_pid);
}

unsigned procmgr_seen(const struct procmgr *pm)
{
	return pm->seen;
}

uint64_t procmgr_dropped(const struct procmgr *pm)
{
	return pm->dropped;
}

int procmgr_for_each(struct procmgr *pm, int (*fn)(void *ctx, struct process *p), void *ctx)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&pm->by_pid, &pos, &v);) {
		int err = fn(ctx, (struct process *)(uintptr_t)v);
		if (err < 0)
			return err;
	}
	return 0;
}

static inline struct process *find_process(struct procmgr *pm, pid_t pid)
{
	uint64_t v;
	if (!hindex_find(&pm->by_pid, hindex_u32((uint32_t)pid), NULL, NULL, NULL, &v))
		return NULL;
	return (struct process *)(uintptr_t)v;
}

/* Forget p (tracked by pm). */
static void process_forget(struct procmgr *pm, struct process *p)
{
	hindex_remove(&pm->by_pid, hindex_u32((uint32_t)p->pid), (uintptr_t)p);
	process_free(pm, p);
}

/* Remove [start, end) from p's mappings, splitting any mapping that straddles it. */
static int unmap_range(struct procmgr *pm, struct process *p, uint64_t start, uint64_t end)
{
	for (unsigned i = 0; i < p->nmaps; i++) {
		struct mapping *m = &p->maps[i];
		if (m->end <= start || m->start >= end)
			continue;
		if (m->start < start && m->end > end)
			return -EEXIST; /* a hole in the middle: callers replace whole mappings, handled below */
		if (m->start < start) {
			m->end = start;
		} else if (m->end > end) {
			m->pgoff += end - m->start;
			m->start = end;
		} else {
			mapping_clear(pm, m);
			memmove(m, m + 1, (p->nmaps - i - 1) * sizeof(*m));
			p->nmaps--;
			i--;
		}
	}
	return 0;
}

static int reserve_maps(struct process *p, unsigned n)
{
	if (n <= p->capmaps)
		return 0;
	unsigned cap = p->capmaps ? p->capmaps : 16;
	while (cap < n)
		cap *= 2;
	struct mapping *maps = realloc(p->maps, cap * sizeof(*maps));
	if (!maps)
		return -ENOMEM;
	p->maps = maps;
	p->capmaps = cap;
	return 0;
}

/* Insert a mapping (path copied), replacing whatever it overlaps. */
static int insert_mapping(struct procmgr *pm, struct process *p, const struct mapping *src)
{
	if (src->end <= src->start)
		return -EINVAL;
	if (unmap_range(pm, p, src->start, src->end) == -EEXIST) {
		/* Split the straddling mapping in two, then cut again. */
		for (unsigned i = 0; i < p->nmaps; i++) {
			struct mapping *m = &p->maps[i];
			if (m->start < src->start && m->end > src->end) {
				struct mapping tail = *m;
				tail.pgoff += src->end - m->start;
				tail.start = src->end;
				tail.path = m->path ? strdup(m->path) : NULL; /* m may move when p->maps grows */
				if (m->path && !tail.path)
					return -ENOMEM;
				m->end = src->start;
				int err = insert_mapping(pm, p, &tail); /* copies path and takes its own exe reference */
				free(tail.path);
				if (err < 0)
					return err;
				break;
			}
		}
	}
	char *path = src->path ? strdup(src->path) : NULL;
	if ((src->path && !path) || reserve_maps(p, p->nmaps + 1) < 0) {
		free(path);
		return -ENOMEM;
	}
	unsigned pos = 0;
	while (pos < p->nmaps && p->maps[pos].start < src->start)
		pos++;
	memmove(&p->maps[pos + 1], &p->maps[pos], (p->nmaps - pos) * sizeof(*p->maps));
	p->maps[pos] = *src;
	p->maps[pos].path = path;
	if (p->maps[pos].exe)
		execinfo_ref(p->maps[pos].exe);
	p->nmaps++;
	return 0;
}

/* insert_mapping(), a mapping it could not keep for lack of memory counted (procmgr_dropped). */
static int keep_mapping(struct procmgr *pm, struct process *p, const struct mapping *src)
{
	int err = insert_mapping(pm, p, src);
	pm->dropped += err == -ENOMEM;
	return err;
}

int procmgr_parse_maps_line(char *line, struct mapping *m, int *executable, const char **path)
{
	unsigned long long start, end, pgoff, ino;
	unsigned maj, min;
	char perms[8];
	int pathpos = 0;

	memset(m, 0, sizeof(*m));
	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &pgoff, &maj, &min, &ino,
		   &pathpos) < 7 || end <= start)
		return -EINVAL;
	m->start = start;
	m->end = end;
	m->pgoff = pgoff;
	m->dev = makedev(maj, min);
	m->ino = ino;
	*executable = strlen(perms) >= 3 && perms[2] == 'x';
	m->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[0] && perms[1] == 'w' ? PROT_WRITE : 0) |
		  (*executable ? PROT_EXEC : 0);
	char *p = pathpos ? line + pathpos : line + strlen(line);
	p[strcspn(p, "\n")] = '\0';
	*path = p;
	return 0;
}

/* Anonymous memory as /proc/PID/maps ("" or a name the process gave it) and perf ("//anon") show it. */
static int is_anonymous(const char *path)
{
	return !path[0] || strcmp(path, "//anon") == 0 || strncmp(path, "[anon:", 6) == 0;
}

/*
 * Whether a mapping is worth keeping: file-backed (anything: unwinders read .eh_frame_hdr from r-- parts), the
 * vdso, or anonymous executable memory (JIT code). Other anonymous memory, heap and stacks are not. Sets
 * m->anon and gives an unnamed anonymous mapping perf's name for it.
 */
static int mapping_wanted(struct mapping *m, const char **path, int exec)
{
	if (strcmp(*path, "[vdso]") == 0)
		return 1;
	if (exec && is_anonymous(*path)) {
		m->anon = 1;
		if (!(*path)[0])
			*path = "//anon";
		return 1;
	}
	return (*path)[0] == '/' && m->ino != 0;
}

/* The file of p's program as the records told it: its lowest mapping of a file (ino 0: none known yet). */
static const struct mapping *program_mapping(const struct process *p)
{
	for (unsigned i = 0; i < p->nmaps; i++)
		if (!p->maps[i].anon && p->maps[i].ino > 1 && p->maps[i].path && p->maps[i].path[0] == '/')
			return &p->maps[i];
	return NULL;
}

/*
 * Whether the maps file f (opened before: it reads the address space the process had then) is of the image
 * whose records were handled so far, that is, whether it still maps the file of p's program. If not, the
 * process exec'd and its exec record still waits in a ring: samples taken before must not meet the new
 * image's mappings (they come with that record). Rewinds f.
 */
static bool same_image(const struct process *p, FILE *f)
{
	const struct mapping *prog = program_mapping(p);
	char line[4096 + 128];
	bool found = !prog;
	while (!found && fgets(line, sizeof(line), f)) {
		struct mapping m;
		int exec;
		const char *path;
		found = procmgr_parse_maps_line(line, &m, &exec, &path) == 0 && m.ino == prog->ino &&
			(!prog->dev || m.dev == prog->dev);
	}
	rewind(f);
	return found;
}

static int seed_from_proc(struct procmgr *pm, struct process *p)
{
	char fname[64], line[4096 + 128];
	snprintf(fname, sizeof(fname), "/proc/%d/maps", (int)p->pid);
	FILE *f = fopen(fname, "re");
	if (!f)
		return -errno;
	if (!same_image(p, f)) {
		fclose(f);
		return -ESTALE;
	}
	/* A walk may be using the files of the mappings being replaced: they stay open until it is over. */
	if (process_clear_maps_deferred(pm, p) < 0) {
		fclose(f);
		pm->dropped++;	/* the re-read, and so the mappings it would have brought */
		return -ENOMEM;
	}
	int err = 0;
	while (fgets(line, sizeof(line), f)) {
		struct mapping m;
		int exec;
		const char *path;
		if (procmgr_parse_maps_line(line, &m, &exec, &path) < 0 || !mapping_wanted(&m, &path, exec))
			continue;
		m.path = (char *)path;
		if (keep_mapping(pm, p, &m) == -ENOMEM)
			err = -ENOMEM;	/* counted; the next ones may still fit */
	}
	fclose(f);
	return err;
}

static void read_comm(const char *fname, char *out)
{
	FILE *f = fopen(fname, "re");
	out[0] = '\0';
	if (!f)
		return;
	if (fgets(out, PROCMGR_COMM_LEN, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

void procmgr_set_limit(struct procmgr *pm, unsigned max)
{
	pm->limit = max;
}

static struct process *process_new(struct procmgr *pm, pid_t pid)
{
	if (pm->limit && hindex_count(&pm->by_pid) >= pm->limit) {
		errno = ENOSPC;
		return NULL;
	}
	struct process *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->offline = pm->open_file != NULL;
	p->container_known = p->offline;	/* offline: no container is known */
	if (hindex_insert(&pm->by_pid, hindex_u32((uint32_t)pid), (uintptr_t)p) < 0) {
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	pm->seen++;
	return p;
}

static bool ends_after(const void *maps, size_t i, const void *addr)
{
	return ((const struct mapping *)maps)[i].end > *(const uint64_t *)addr;
}

/* The first of maps[n] (sorted, non-overlapping) that ends past addr; n if none. */
static unsigned first_ending_after(const struct mapping *maps, unsigned n, uint64_t addr)
{
	return (unsigned)bsearch_first(maps, n, ends_after, &addr);
}

struct process *procmgr_find(struct procmgr *pm, pid_t pid)
{
	return find_process(pm, pid);
}

bool procmgr_overlaps(const struct process *p, uint64_t start, uint64_t end)
{
	unsigned i = first_ending_after(p->maps, p->nmaps, start);
	return i < p->nmaps && p->maps[i].start < end;
}

struct process *procmgr_get(struct procmgr *pm, pid_t pid)
{
	struct process *p = find_process(pm, pid);
	if (p)
		return p;
	p = process_new(pm, pid);
	if (!p)
		return NULL;
	if (p->offline)
		return p;
	char fname[64];
	snprintf(fname, sizeof(fname), "/proc/%d/comm", (int)pid);
	read_comm(fname, p->comm);
	seed_from_proc(pm, p); /* a process that is gone already keeps no mappings: its samples show [unknown] */
	return p;
}

void procmgr_on_mmap2(struct procmgr *pm, const struct perf_mmap2 *rec)
{
	struct mapping m = {
		.start = rec->addr,
		.end = rec->addr + rec->len,
		.pgoff = rec->pgoff,
		.dev = makedev(rec->maj, rec->min),
		.ino = rec->ino ? rec->ino : 1,	/* the kernel gives none for some files (the vdso) */
		.prot = (int)rec->prot,
	};
	const char *path = rec->filename;
	/* perf reports executable mappings only: its anonymous ones are code, whatever prot says. */
	if (!path || !mapping_wanted(&m, &path, 1))
		return;
	struct process *p = procmgr_get(pm, (pid_t)rec->pid);
	if (!p)
		return;
	m.ino = m.anon ? 0 : rec->ino;
	m.path = (char *)path;
	keep_mapping(pm, p, &m);
}

static struct thread_info *thread_slot(struct process *p, pid_t tid)
{
	for (unsigned i = 0; i < p->nthreads; i++) {
		if (p->threads[i].tid == tid)
			return &p->threads[i];
	}
	if (p->nthreads == p->capthreads) {
		unsigned cap = p->capthreads ? p->capthreads * 2 : 8;
		struct thread_info *t = realloc(p->threads, cap * sizeof(*t));
		if (!t)
			return NULL;
		p->threads = t;
		p->capthreads = cap;
	}
	struct thread_info *t = &p->threads[p->nthreads++];
	t->tid = tid;
	t->name[0] = '\0';
	return t;
}

void procmgr_on_comm(struct procmgr *pm, const struct perf_comm *c)
{
	struct process *p = procmgr_get(pm, (pid_t)c->pid);
	if (!p || !c->comm)
		return;
	if (c->exec) {
		/* exec replaces the address space: the old mappings' records came before this one. */
		process_replace_image(pm, p);
		free(p->exe_path);
		p->exe_path = NULL;
		p->stack_start_known = false;
		p->nthreads = 0;
		p->last_resync_ns = 0;
	}
	if (c->pid == c->tid)
		snprintf(p->comm, sizeof(p->comm), "%s", c->comm);
	struct thread_info *t = thread_slot(p, (pid_t)c->tid);
	if (t)
		snprintf(t->name, sizeof(t->name), "%s", c->comm);
	else
		pm->dropped++;
}

void procmgr_on_fork(struct procmgr *pm, const struct perf_task *t)
{
	if (t->pid == t->ppid || t->pid != t->tid)
		return; /* a new thread shares its process's mappings */
	struct process *parent = find_process(pm, (pid_t)t->ppid);
	struct process *child = find_process(pm, (pid_t)t->pid);
	if (child && !child->exited)
		return;
	if (child) {
		/* pid reused: forget the dead one's state */
		process_clear_maps(pm, child);
		procmgr_drop_replaced(pm, child);
		child->nthreads = 0;
		child->exited = 0;
		free(child->exe_path);
		child->exe_path = NULL;
		child->container_known = false;
		child->stack_start_known = false;
	} else if (!(child = process_new(pm, (pid_t)t->pid))) {
		return;
	}
	if (!parent) {
		seed_from_proc(pm, child);
		return;
	}
	memcpy(child->comm, parent->comm, sizeof(child->comm));
	if (parent->exe_path)
		child->exe_path = strdup(parent->exe_path);	/* else learned later, from the child's mappings */
	child->container_known = parent->container_known;
	child->stack_start_known = parent->stack_start_known;	/* a copy of its address space */
	child->stack_start = parent->stack_start;
	memcpy(child->container_id, parent->container_id, sizeof(child->container_id));
	for (unsigned i = 0; i < parent->nmaps; i++)
		keep_mapping(pm, child, &parent->maps[i]);
}

void procmgr_on_exit(struct procmgr *pm, const struct perf_task *t)
{
	if (t->pid != t->tid)
		return;
	struct process *p = find_process(pm, (pid_t)t->pid);
	if (p && !p->exited)
		p->exited = 3;
}

unsigned procmgr_forget_idle(struct procmgr *pm, uint64_t cutoff_ns, procmgr_keep_fn keep, void *ctx)
{
	unsigned forgotten = 0;
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&pm->by_pid, &pos, &v);) {
		struct process *p = (struct process *)(uintptr_t)v;
		if (!p->exited && p->last_sample_ns < cutoff_ns && !(keep && keep(ctx, p->pid))) {
			process_forget(pm, p);
			forgotten++;
		}
	}
	return forgotten;
}

void procmgr_reap(struct procmgr *pm, procmgr_keep_fn keep, void *ctx)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&pm->by_pid, &pos, &v);) {
		struct process *p = (struct process *)(uintptr_t)v;
		/* held samples are walked in its mappings */
		if (p->exited && !(keep && keep(ctx, p->pid)) && --p->exited == 0)
			process_forget(pm, p);
	}
}

static struct mapping *lookup_in(struct mapping *maps, unsigned n, uint64_t addr)
{
	unsigned i = first_ending_after(maps, n, addr);
	return i < n && maps[i].start <= addr ? &maps[i] : NULL;
}

static struct mapping *lookup(struct process *p, uint64_t addr)
{
	return lookup_in(p->maps, p->nmaps, addr);
}

struct mapping *procmgr_lookup_mapping(struct process *p, uint64_t addr)
{
	return lookup(p, addr);
}

struct mapping *procmgr_replaced_mapping(struct process *p, uint64_t addr)
{
	return lookup_in(p->replaced, p->nreplaced, addr);
}

struct mapping *procmgr_find_mapping(struct procmgr *pm, struct process *p, uint64_t addr, uint64_t now_ns)
{
	struct mapping *m = lookup(p, addr);
	if (m || p->exited || pm->open_file || (p->last_resync_ns && now_ns - p->last_resync_ns < PROCMGR_RESYNC_NS))
		return m;
	p->last_resync_ns = now_ns ? now_ns : 1;
	if (seed_from_proc(pm, p) < 0)
		return NULL;
	return lookup(p, addr);
}

/* Open path and keep it only if it is the mapped inode (when the mapping says which). The path is the process's
 * to choose: a FIFO put in its place is refused, never waited on (regular_file.h). */
static int open_matching(const char *path, const struct mapping *m)
{
	struct stat st;
	int fd = regular_file_open(AT_FDCWD, path, 0, &st);
	if (fd < 0)
		return -1;
	if (m->ino && (st.st_ino != m->ino || (m->dev && st.st_dev != m->dev))) {
		close(fd);
		return -1;
	}
	return fd;
}

int procmgr_open_mapping_file(const struct process *p, const struct mapping *m)
{
	char buf[4096 + 64];
	int fd = open_matching(m->path, m);
	if (fd >= 0)
		return fd;
	snprintf(buf, sizeof(buf), "/proc/%d/root%s", (int)p->pid, m->path);
	if ((fd = open_matching(buf, m)) >= 0)
		return fd;
	/* Deleted or replaced files, and overlay filesystems whose st_dev differs from the mapping's. */
	snprintf(buf, sizeof(buf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)p->pid, m->start, m->end);
	return regular_file_open(AT_FDCWD, buf, 0, NULL);	/* the descriptor, or a negative errno */
}

static int acquire_vdso(struct procmgr *pm, struct execinfo **out)
{
	/* Every process of one ABI maps the same vdso image, so hostprof's own copy stands for theirs. */
	const void *image = (const void *)getauxval(AT_SYSINFO_EHDR);
	if (!image)
		return -ENOENT;
	const Elf64_Ehdr *eh = image;
	size_t size = (size_t)eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	if (size > PROCMGR_VDSO_MAX)
		return -E2BIG;
	return execinfo_acquire_image(pm->execinfo, image, size, "[vdso]", out);
}

/*
 * The bias of a mapping of e. A non-executable mapping whose file page several segments claim (lld packs them)
 * takes the bias of the same file's executable mapping when that one fits: a file has one bias per process.
 */
static int mapping_bias(struct procmgr *pm, struct process *p, struct mapping *m, struct execinfo *e)
{
	if (m->prot && !(m->prot & PROT_EXEC)) {
		for (unsigned i = 0; i < p->nmaps; i++) {
			struct mapping *x = &p->maps[i];
			if (x == m || !(x->prot & PROT_EXEC) || x->ino != m->ino || x->dev != m->dev ||
			    procmgr_mapping_exe(pm, p, x) != e)
				continue;
			if (execinfo_bias_fits(e, m->start, m->pgoff, x->bias)) {
				m->bias = x->bias;
				return 0;
			}
		}
	}
	return execinfo_bias(e, m->start, m->end, m->pgoff, m->prot, &m->bias);
}

struct execinfo *procmgr_mapping_exe(struct procmgr *pm, struct process *p, struct mapping *m)
{
	int err;
	struct execinfo *e = NULL;

	if (m->exe || m->exe_failed || m->anon)
		return m->exe;
	char build_id[41] = "";
	if (strcmp(m->path, "[vdso]") == 0) {
		err = acquire_vdso(pm, &e);
	} else {
		int fd = pm->open_file ? pm->open_file(pm->open_ctx, p, m, build_id) : procmgr_open_mapping_file(p, m);
		err = fd < 0 ? fd : execinfo_acquire_fd(pm->execinfo, fd, m->path, &e);
	}
	if (err == 0 && mapping_bias(pm, p, m, e) < 0) {
		execinfo_release(pm->execinfo, e);
		err = -ENOEXEC;
	}
	/* Offline, the file perf recorded is not here: its frames are still its, at their offsets in it, which
	 * name no function rather than another build's (execinfo_acquire_unread()). */
	build_id[40] = '\0';
	if (err < 0 && err != -ENOMEM && pm->open_file && execinfo_acquire_unread(pm->execinfo, m->path, build_id,
										   &e) == 0 &&
	    (err = mapping_bias(pm, p, m, e)) < 0)
		execinfo_release(pm->execinfo, e);
	if (err < 0) {
		m->exe_failed = 1;
		return NULL;
	}
	m->exe = e;
	return e;
}

const char *procmgr_thread_name(struct procmgr *pm, struct process *p, pid_t tid)
{
	for (unsigned i = 0; i < p->nthreads; i++) {
		if (p->threads[i].tid == tid)
			return p->threads[i].name;
	}
	struct thread_info *t = thread_slot(p, tid);
	if (!t) {
		pm->dropped++;
		return "";
	}
	char fname[64];
	snprintf(fname, sizeof(fname), "/proc/%d/task/%d/comm", (int)p->pid, (int)tid);
	if (pm->open_file)
		t->name[0] = '\0';	/* offline: a thread without a COMM record has its process's name */
	else
		read_comm(fname, t->name);
	if (!t->name[0])
		snprintf(t->name, sizeof(t->name), "%s", p->comm);
	return t->name;
}

/* A copy of path when it is not longer than the kernel's limit: a cut path would name another file. */
static char *exe_path_copy(const char *path, size_t len)
{
	return len > 0 && len < PROCMGR_EXE_PATH_MAX && memchr(path, '\0', len) == NULL ? strndup(path, len) : NULL;
}

static char *read_exe_link(pid_t pid)
{
	char fname[64], buf[PROCMGR_EXE_PATH_MAX];
	snprintf(fname, sizeof(fname), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(fname, buf, sizeof(buf));
	return n > 0 ? exe_path_copy(buf, (size_t)n) : NULL;
}

const char *procmgr_exe_path(struct process *p)
{
	if (!p->exe_path) {
		const struct mapping *prog = program_mapping(p);
		/* The records' path is of the image the samples were taken in; /proc's is of the image now. */
		p->exe_path = prog ? exe_path_copy(prog->path, strnlen(prog->path, PROCMGR_EXE_PATH_MAX))
				   : p->offline ? NULL : read_exe_link(p->pid);
	}
	return p->exe_path ? p->exe_path : "";
}

uint64_t procmgr_stack_start(struct process *p)
{
	if (!p->stack_start_known) {
		if (p->offline || proc_read_stat_field(p->pid, 28, &p->stack_start) < 0)
			p->stack_start = 0;
		p->stack_start_known = true;
	}
	return p->stack_start;
}

const char *procmgr_container_id(struct process *p)
{
	if (!p->container_known) {
		container_id_read(p->pid, p->container_id);	/* a process gone has none we can say */
		p->container_known = true;
	}
	return p->container_id;
}
