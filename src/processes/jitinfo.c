/*
 * jitinfo.c — the JIT code of profiled processes. See jitinfo.h for the contract.
 */
#include "src/processes/jitinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "src/base/clock.h"
#include "src/base/hindex.h"
#include "src/base/proc_threads.h"
#include "src/processes/procmem.h"
#include "symbols/jitdump.h"
#include "symbols/perfmap.h"

#define JITINFO_CHUNK JITDUMP_RECORD_PREFIX_MAX	/* read size: what either parser needs to move on */
#define JITINFO_SAMPLE_BUDGET (16u << 20)	/* most read by one refresh on the sampling path */
#define JITINFO_PROC_MAX (256u << 10)	/* most of a /proc file read (command line, environment) */

/* A file a runtime writes for profilers. */
struct jit_file {
	char *path;		/* as the process sees it; NULL while unknown */
	int fd;			/* -1 until opened */
	uint64_t offset;	/* bytes parsed */
	uint64_t bytes;		/* bytes read */
	bool done;		/* nothing more will be read: unreadable format, closed, or at max_file_bytes */
	bool refused, capped;	/* counted once */
};

struct jitinfo {
	struct jitinfo_mgr *mgr;
	unsigned refs;
	bool attached;		/* the manager's pid table holds it (and a reference) */
	bool tracked;		/* made before its first JIT frame (jitinfo_mgr_track), and so its children */
	bool used;		/* a sample was in its JIT code (counted once) */
	bool scanned;		/* its mappings were looked through (scan_mappings) */
	bool learned;		/* what the process says about itself was read (learn_identity) */
	int exited;		/* reaps left before it is detached; 0 while the process lives */
	pid_t pid, nspid;
	uid_t uid;
	int root_fd;		/* the process's root directory, -1 if it could not be opened */
	int64_t start_ns;	/* process start, CLOCK_REALTIME ns; 0 unknown */
	bool is_jvm, jvm_fp;
	struct hotspot *hotspot;	/* a JVM's code cache (hotspot.h), NULL until opened */
	int hotspot_err;	/* why it could not be opened (jitinfo_open_jvm), 0 before it was tried */
	struct hindex blobs_named;	/* hash of a code blob's code range: its name was added to syms */
	struct hindex methods_named;	/* hash of an interpreted frame's Method: 1 named in syms, 0 not nameable */
	uint64_t interpreter_begin, interpreter_end;	/* a JVM's interpreter's code, once met */
	uint64_t commits;		/* of syms: what a lookup memo'd before the last one found may have changed */
	struct name_memo *memo;		/* NAME_MEMO_SLOTS lookups of syms, made at the first */
	int trampolines;	/* CPython's perf trampolines checked in its memory: 1 as expected, -1 not, 0 not yet */
	struct file_id anon_id;	/* FileID of code nothing names */
	struct jit_file map, dump;
	struct perfmap_parser map_parser;
	struct jitdump_parser dump_parser;
	struct jitsyms *syms;
	struct file_id *name_ids;	/* FileID per string id, computed on first use */
	uint8_t *name_known;
	size_t name_cap;
	uint64_t next_refresh_ns, last_used_ns;
	struct jitinfo *prev, *next;	/* every entry */
};

struct jitinfo_mgr {
	struct jitinfo_limits lim;
	struct hindex attached;	/* hindex_u32(pid): struct jitinfo * */
	struct jitinfo *all;
	unsigned live;
	struct jitinfo_stats stats;	/* the parts counted as they happen */
	struct jitinfo_stats retired;	/* file counters of entries freed */
	jitinfo_open_fn open_map;	/* offline (jitinfo_mgr_set_offline()): how perf maps are opened; else NULL */
	void *open_ctx;
};

int jitinfo_mgr_new(const struct jitinfo_limits *limits, struct jitinfo_mgr **out)
{
	struct jitinfo_mgr *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	if (limits)
		m->lim = *limits;
	if (!m->lim.max_processes)
		m->lim.max_processes = JITINFO_DEFAULT_PROCESSES;
	if (!m->lim.max_file_bytes)
		m->lim.max_file_bytes = JITINFO_DEFAULT_FILE_BYTES;
	*out = m;
	return 0;
}

void jitinfo_mgr_set_offline(struct jitinfo_mgr *m, jitinfo_open_fn open_map, void *ctx)
{
	m->open_map = open_map;
	m->open_ctx = ctx;
}

void jitinfo_mgr_free(struct jitinfo_mgr *m)
{
	if (!m)
		return;
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&m->attached, &pos, &v);)
		jitinfo_mgr_detach(m, ((struct jitinfo *)(uintptr_t)v)->pid);
	hindex_free(&m->attached);
	free(m);
}

/* ---- what the process says about itself ---------------------------------------------------------------- */

/* /proc/PID/<name>, at most max - 1 bytes, NUL-terminated (NUL-separated files stay readable with the returned
 * length). Returns the length, or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r = 0;
	if (fd < 0)
		return -1;
	while (n < max - 1 && (r = read(fd, buf + n, max - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = '\0';
	return r < 0 ? -1 : (ssize_t)n;
}

/* Effective uid and innermost pid (NSpid) from /proc/PID/status. */
static int read_status(struct jitinfo *j)
{
	struct proc_identity id;
	if (proc_read_identity(j->pid, &id) < 0)
		return -1;
	j->uid = id.euid;
	j->nspid = id.nspid;
	return 0;
}

/* Start time: clock ticks since boot (field 22 of /proc/PID/stat); 0 if unknown. */
static uint64_t read_start_ticks(pid_t pid)
{
	uint64_t ticks;
	return proc_read_stat_field(pid, 22, &ticks) == 0 ? ticks : 0;
}

/* When a process that started `ticks` after boot started, on the real-time clock (file times are on it): moved
 * by the difference between the two clocks now. 0 if unknown. */
static int64_t start_time_ns(uint64_t ticks)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t real = clock_ns(CLOCK_REALTIME), boot = clock_ns(CLOCK_BOOTTIME);
	if (!ticks || hz <= 0 || !real || !boot)
		return 0;
	int64_t since_boot = (int64_t)(ticks / (uint64_t)hz) * 1000000000LL +
			     (int64_t)(ticks % (uint64_t)hz) * (1000000000LL / hz);
	return (int64_t)(real - boot) + since_boot;
}

/* The last -XX:[+-]PreserveFramePointer among the words of s[0..n) (separated by NUL or blanks). */
static void scan_fp_flag(const char *s, size_t n, bool *fp)
{
	static const char on[] = "-XX:+PreserveFramePointer", off[] = "-XX:-PreserveFramePointer";
	for (size_t i = 0; i < n;) {
		size_t len = 0;
		while (i + len < n && s[i + len] && s[i + len] != ' ' && s[i + len] != '\t')
			len++;
		if (len == sizeof(on) - 1 && (!memcmp(s + i, on, len) || !memcmp(s + i, off, len)))
			*fp = s[i + 4] == '+';	/* "-XX:+" */
		i += len + 1;
	}
}

/* The value of environment variable key in a NUL-separated environment, or NULL. */
static const char *env_value(const char *env, size_t n, const char *key, size_t *len)
{
	size_t klen = strlen(key);
	for (size_t i = 0; i < n; i += strlen(env + i) + 1) {
		if (!strncmp(env + i, key, klen) && env[i + klen] == '=') {
			*len = strlen(env + i + klen + 1);
			return env + i + klen + 1;
		}
	}
	return NULL;
}

/* Whether the JVM was told to keep frame pointers, the way it reads its options. */
static bool jvm_keeps_fp(pid_t pid)
{
	static const char *const before[] = { "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS" };
	char *buf = malloc(JITINFO_PROC_MAX);
	bool fp = false;
	size_t len;
	const char *v;
	ssize_t n = buf ? read_proc(pid, "environ", buf, JITINFO_PROC_MAX) : -1;
	for (size_t i = 0; n > 0 && i < 2; i++)
		if ((v = env_value(buf, (size_t)n, before[i], &len)))
			scan_fp_flag(v, len, &fp);
	char *after = n > 0 && (v = env_value(buf, (size_t)n, "_JAVA_OPTIONS", &len)) ? strndup(v, len) : NULL;
	if (buf && (n = read_proc(pid, "cmdline", buf, JITINFO_PROC_MAX)) > 0)
		scan_fp_flag(buf, (size_t)n, &fp);
	if (after)
		scan_fp_flag(after, strlen(after), &fp);
	free(after);
	free(buf);
	return fp;
}

static bool is_jitdump_name(const struct jitinfo *j, const char *path)
{
	const char *base = strrchr(path, '/');
	char *end;
	base = base ? base + 1 : path;
	if (strncmp(base, "jit-", 4) != 0)
		return false;
	long pid = strtol(base + 4, &end, 10);
	return end != base + 4 && strcmp(end, ".dump") == 0 && (pid == j->nspid || pid == j->pid);
}

/* The process maps libjvm.so: a JVM, whose options say whether its compiled code keeps frame pointers (read
 * once, as soon as it is seen: only a living process has them). */
static void found_jvm(struct jitinfo *j)
{
	if (!j->is_jvm && !j->mgr->open_map)	/* offline: the pid is another process's now */
		j->jvm_fp = jvm_keeps_fp(j->pid);
	j->is_jvm = true;
}

bool jitinfo_is_libjvm(const char *path)
{
	const char *base = strrchr(path, '/');
	return base && strcmp(base + 1, "libjvm.so") == 0;
}

/* What the process's mappings say: a JVM, a jitdump file it announced. */
static void scan_mappings(struct jitinfo *j, const struct process *p)
{
	for (unsigned i = 0; i < p->nmaps; i++) {
		const char *path = p->maps[i].path ? p->maps[i].path : "";
		if (jitinfo_is_libjvm(path))
			found_jvm(j);
		if (!j->dump.path && !j->mgr->open_map && is_jitdump_name(j, path))
			j->dump.path = strdup(path);
	}
}

/* ---- reading the runtime's files ------------------------------------------------------------------------ */

/* path (as the process sees it) opened without following symbolic links out of its root; O_PATH. */
static int open_in_root(const struct jitinfo *j, const char *path)
{
	struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	if (j->root_fd < 0)
		return -1;
	int fd = (int)syscall(SYS_openat2, j->root_fd, path, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS && j->attached) {
		/* Kernels before 5.6: through /proc/PID/root, while the process lives. */
		char buf[4200];
		snprintf(buf, sizeof(buf), "/proc/%d/root%s", (int)j->pid, path);
		fd = open(buf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	return fd;
}

/* f is not to be read (yet): counted once per file. */
static int refused(struct jitinfo *j, struct jit_file *f)
{
	if (!f->refused)
		j->mgr->stats.refused++;
	f->refused = true;
	return -EPERM;
}

/* Offline: the file as the caller's open_map gives it. */
static int open_offline(struct jitinfo *j, struct jit_file *f)
{
	int fd = j->mgr->open_map(j->mgr->open_ctx, f->path);
	if (fd == -ENOENT)
		return -ENOENT;
	if (fd < 0)
		return refused(j, f);
	f->fd = fd;
	return 0;
}

/*
 * Open f for reading if it is a regular file of the process's user, written since the process started. The
 * checks are made on an O_PATH descriptor, before the file is opened (opening a FIFO or a device could block or
 * act), and again on what was opened. Returns 0, -ENOENT (not there yet) or -EPERM (refused).
 */
static int open_file(struct jitinfo *j, struct jit_file *f)
{
	struct stat st, again;
	char self[64];
	if (j->mgr->open_map)
		return open_offline(j, f);
	int pfd = open_in_root(j, f->path);
	if (pfd < 0)
		return -ENOENT;
	int ok = fstat(pfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == j->uid &&
		 (!j->start_ns || st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec + 1000000000LL >= j->start_ns);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	int fd = ok ? open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) : -1;
	close(pfd);
	if (fd >= 0 && (fstat(fd, &again) < 0 || again.st_ino != st.st_ino || again.st_dev != st.st_dev)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		return refused(j, f);
	f->fd = fd;
	return 0;
}

/* Parse buf[0..n), the file from f->offset on (file_left bytes of it there): bytes to move on by, or < 0. */
static int64_t parse_chunk(struct jitinfo *j, struct jit_file *f, const char *buf, size_t n, uint64_t file_left)
{
	if (f == &j->dump)
		return jitdump_parse(&j->dump_parser, j->syms, (const uint8_t *)buf, n, file_left);
	return (int64_t)perfmap_parse(&j->map_parser, j->syms, buf, n);
}

/* Read and parse what f gained since the last read, up to budget bytes. */
static void read_file(struct jitinfo *j, struct jit_file *f, uint64_t budget)
{
	struct stat st;
	if (f->done || !f->path || (f->fd < 0 && open_file(j, f) < 0) || fstat(f->fd, &st) < 0)
		return;
	uint64_t size = (uint64_t)st.st_size, max = j->mgr->lim.max_file_bytes;
	if (size > max) {
		j->mgr->stats.dropped += !f->capped;
		f->capped = true;
		size = max;
	}
	char *buf = size > f->offset ? malloc(JITINFO_CHUNK) : NULL;
	while (buf && f->offset < size && budget) {
		uint64_t left = size - f->offset;
		ssize_t n = pread(f->fd, buf, left < JITINFO_CHUNK ? (size_t)left : JITINFO_CHUNK, (off_t)f->offset);
		int64_t used = n > 0 ? parse_chunk(j, f, buf, (size_t)n, left) : 0;
		if (used < 0 || (f == &j->dump && j->dump_parser.closed))
			f->done = true;
		if (used <= 0)
			break;
		f->offset += (uint64_t)used;
		f->bytes += (uint64_t)n;
		budget -= (uint64_t)used < budget ? (uint64_t)used : budget;
	}
	free(buf);
}

bool jitinfo_walks_fp(const struct jitinfo *j)
{
	return j->is_jvm ? j->jvm_fp : j->map.fd >= 0 || j->dump.fd >= 0;
}

/* Read what the files gained (budget bytes each at most) and make it visible to lookups. A process whose JIT code
 * was seen is counted as walked by frame pointer when a file it wrote first says so. */
static void refresh(struct jitinfo *j, uint64_t budget)
{
	bool walked = jitinfo_walks_fp(j);
	read_file(j, &j->map, budget);
	read_file(j, &j->dump, budget);
	if (jitsyms_dirty(j->syms) && jitsyms_commit(j->syms) == 0)
		j->commits++;
	j->mgr->stats.fp_processes += j->used && !walked && jitinfo_walks_fp(j);
}

/* ---- entries -------------------------------------------------------------------------------------------- */

static struct jitinfo *find_attached(struct jitinfo_mgr *m, pid_t pid)
{
	uint64_t v;
	if (!hindex_find(&m->attached, hindex_u32((uint32_t)pid), NULL, NULL, NULL, &v))
		return NULL;
	return (struct jitinfo *)(uintptr_t)v;
}

static void file_init(struct jit_file *f)
{
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

/* Offline: what the recording says, its pid; the perf map with it. Unnamed code is known by the pid alone (no
 * start time tells this process from another of the same pid). */
static void learn_offline(struct jitinfo *j, uint64_t now_ns)
{
	char id[64], map[64];
	j->nspid = j->pid;
	int n = snprintf(id, sizeof(id), "jit:pid:%d:0", (int)j->pid);
	fileid_from_text(id, (size_t)n, &j->anon_id);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)j->pid);
	j->map.path = strdup(map);
	refresh(j, JITINFO_SAMPLE_BUDGET);
	j->next_refresh_ns = now_ns + JITINFO_REFRESH_NS;
}

/* What the process says about itself, which only a living process can: its root directory, user, pid as it
 * sees itself, start time. */
static void learn_identity(struct jitinfo *j, uint64_t now_ns)
{
	char root[64], id[64];
	j->learned = true;
	if (j->mgr->open_map) {
		learn_offline(j, now_ns);
		return;
	}
	snprintf(root, sizeof(root), "/proc/%d/root", (int)j->pid);
	j->root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (read_status(j) < 0)
		j->uid = (uid_t)-1;	/* no file can be its user's */
	uint64_t ticks = read_start_ticks(j->pid);
	j->start_ns = start_time_ns(ticks);
	int n = snprintf(id, sizeof(id), "jit:pid:%d:%" PRIu64, (int)j->pid, ticks);
	fileid_from_text(id, (size_t)n, &j->anon_id);
	char map[64];
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)j->nspid);
	j->map.path = strdup(map);
	refresh(j, JITINFO_SAMPLE_BUDGET);
	j->next_refresh_ns = now_ns + JITINFO_REFRESH_NS;
}

/*
 * A new entry for pid, attached (the manager's reference), what the process says about itself read now or (learn
 * false: a child that will likely exec, which is when it is read) at its first use; NULL over the limit or out of
 * memory.
 */
static struct jitinfo *entry_new(struct jitinfo_mgr *m, pid_t pid, uint64_t now_ns, bool learn)
{
	struct jitinfo *j = m->live < m->lim.max_processes ? calloc(1, sizeof(*j)) : NULL;
	if (!j || jitsyms_new(&m->lim.syms, &j->syms) < 0 ||
	    hindex_insert(&m->attached, hindex_u32((uint32_t)pid), (uintptr_t)j) < 0) {
		m->stats.untracked += !j && m->live >= m->lim.max_processes;
		if (j)
			jitsyms_free(j->syms);
		free(j);
		return NULL;
	}
	j->mgr = m;
	j->pid = pid;
	j->root_fd = -1;
	j->uid = (uid_t)-1;
	file_init(&j->map);
	file_init(&j->dump);
	jitdump_parser_init(&j->dump_parser);
	j->next = m->all;
	if (m->all)
		m->all->prev = j;
	m->all = j;
	m->live++;
	j->refs = 1;
	j->attached = true;
	j->last_used_ns = now_ns;
	if (learn)
		learn_identity(j, now_ns);
	return j;
}

static void file_close(struct jitinfo_stats *retired, struct jit_file *f, uint64_t *count)
{
	if (f->fd >= 0)
		close(f->fd);
	*count += f->bytes > 0;
	retired->bytes += f->bytes;
	free(f->path);
}

/* The counters an entry's tables and parsers hold, added to *s. */
static void add_entry_stats(const struct jitinfo *j, struct jitinfo_stats *s)
{
	struct jitsyms_stats ts;
	jitsyms_get_stats(j->syms, &ts);
	s->symbols += ts.ranges;
	s->dropped += ts.dropped;
	s->skipped += j->map_parser.stats.malformed + j->map_parser.stats.too_long + j->dump_parser.stats.skipped +
		      j->dump_parser.stats.refused;
}

static void entry_free(struct jitinfo *j)
{
	struct jitinfo_mgr *m = j->mgr;
	add_entry_stats(j, &m->retired);
	file_close(&m->retired, &j->map, &m->retired.perf_maps);
	file_close(&m->retired, &j->dump, &m->retired.jitdumps);
	if (j->root_fd >= 0)
		close(j->root_fd);
	jitdump_parser_free(&j->dump_parser);
	jitsyms_free(j->syms);
	hotspot_free(j->hotspot);
	hindex_free(&j->blobs_named);
	hindex_free(&j->methods_named);
	free(j->memo);
	free(j->name_ids);
	free(j->name_known);
	if (j->prev)
		j->prev->next = j->next;
	else
		m->all = j->next;
	if (j->next)
		j->next->prev = j->prev;
	m->live--;
	free(j);
}

void jitinfo_ref(struct jitinfo *j)
{
	j->refs++;
}

void jitinfo_release(struct jitinfo *j)
{
	if (j && --j->refs == 0)
		entry_free(j);
}

struct jitinfo *jitinfo_get(struct jitinfo_mgr *m, struct process *p, uint64_t now_ns)
{
	struct jitinfo *j = find_attached(m, p->pid);
	if (!j && !(j = entry_new(m, p->pid, now_ns, true)))
		return NULL;
	if (!j->learned)
		learn_identity(j, now_ns);
	if (!j->scanned) {
		scan_mappings(j, p);
		j->scanned = true;
	}
	/* Made before its runtime wrote anything (a tracked process): has it since? At its first JIT frame, and then
	 * at the refresh rate. */
	if ((j->map.fd < 0 || (j->dump.path && j->dump.fd < 0)) && (!j->used || now_ns >= j->next_refresh_ns)) {
		refresh(j, JITINFO_SAMPLE_BUDGET);
		j->next_refresh_ns = now_ns + JITINFO_REFRESH_NS;
	}
	if (!j->used) {
		m->stats.processes++;
		m->stats.fp_processes += jitinfo_walks_fp(j);
		j->used = true;
	}
	j->last_used_ns = now_ns;
	return j;
}

/* pid's entry, tracked, made if it has none (what it says about itself read now if learn). */
static void track(struct jitinfo_mgr *m, pid_t pid, uint64_t now_ns, bool learn)
{
	struct jitinfo *j = find_attached(m, pid);
	if (j || (j = entry_new(m, pid, now_ns, learn)))
		j->tracked = true;
	if (j && learn && !j->learned)
		learn_identity(j, now_ns);
}

void jitinfo_mgr_track(struct jitinfo_mgr *m, pid_t pid, uint64_t now_ns)
{
	track(m, pid, now_ns, true);
}

void jitinfo_mgr_on_exec(struct jitinfo_mgr *m, pid_t pid, uint64_t now_ns)
{
	struct jitinfo *j = find_attached(m, pid);
	bool tracked = j && j->tracked;
	jitinfo_mgr_detach(m, pid);
	if (tracked)
		jitinfo_mgr_track(m, pid, now_ns);
}

void jitinfo_mgr_on_fork(struct jitinfo_mgr *m, pid_t parent, pid_t child, uint64_t now_ns)
{
	struct jitinfo *p = find_attached(m, parent);
	jitinfo_mgr_detach(m, child);	/* a pid reused */
	if (p && p->tracked)
		track(m, child, now_ns, false);	/* read at its exec, which most children do, or its first use */
}

void jitinfo_mgr_on_mapping(struct jitinfo_mgr *m, pid_t pid, const char *path)
{
	struct jitinfo *j = find_attached(m, pid);
	if (j && path && jitinfo_is_libjvm(path))
		found_jvm(j);
	if (!j || j->dump.path || !path || !is_jitdump_name(j, path) || !(j->dump.path = strdup(path)))
		return;
	refresh(j, JITINFO_SAMPLE_BUDGET);
}

void jitinfo_mgr_detach(struct jitinfo_mgr *m, pid_t pid)
{
	struct jitinfo *j = find_attached(m, pid);
	if (!j)
		return;
	hindex_remove(&m->attached, hindex_u32((uint32_t)pid), (uintptr_t)j);
	j->attached = false;
	jitinfo_release(j);
}

void jitinfo_mgr_on_exit(struct jitinfo_mgr *m, pid_t pid)
{
	struct jitinfo *j = find_attached(m, pid);
	if (j && !j->exited)
		j->exited = 3;
	if (j && j->hotspot)
		hotspot_process_gone(j->hotspot);	/* its pid may be another process's from now on */
}

void jitinfo_mgr_reap_but(struct jitinfo_mgr *m, bool (*keep)(void *ctx, pid_t pid), void *ctx)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&m->attached, &pos, &v);) {
		struct jitinfo *j = (struct jitinfo *)(uintptr_t)v;
		if (j->exited && !(keep && keep(ctx, j->pid)) && --j->exited == 0)
			jitinfo_mgr_detach(m, j->pid);
	}
}

void jitinfo_mgr_reap(struct jitinfo_mgr *m)
{
	jitinfo_mgr_reap_but(m, NULL, NULL);
}

unsigned jitinfo_mgr_forget_idle(struct jitinfo_mgr *m, uint64_t cutoff_ns)
{
	unsigned n = 0;
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&m->attached, &pos, &v);) {
		struct jitinfo *j = (struct jitinfo *)(uintptr_t)v;
		if (j->last_used_ns < cutoff_ns) {
			jitinfo_mgr_detach(m, j->pid);
			n++;
		}
	}
	return n;
}

void jitinfo_mgr_refresh(struct jitinfo_mgr *m)
{
	for (struct jitinfo *j = m->all; j; j = j->next)
		refresh(j, UINT64_MAX);
}

void jitinfo_mgr_get_stats(const struct jitinfo_mgr *m, struct jitinfo_stats *out)
{
	*out = m->stats;
	out->perf_maps += m->retired.perf_maps;
	out->jitdumps += m->retired.jitdumps;
	out->bytes += m->retired.bytes;
	out->symbols += m->retired.symbols;
	out->skipped += m->retired.skipped;
	out->dropped += m->retired.dropped;
	for (const struct jitinfo *j = m->all; j; j = j->next) {
		add_entry_stats(j, out);
		out->perf_maps += j->map.bytes > 0;
		out->jitdumps += j->dump.bytes > 0;
		out->bytes += j->map.bytes + j->dump.bytes;
	}
}

/* ---- frames --------------------------------------------------------------------------------------------- */

struct jitinfo *jitinfo_find(struct jitinfo_mgr *m, pid_t pid)
{
	return find_attached(m, pid);
}

/*
 * A lookup of syms through a memo of the last ones, by address: a JVM's stacks name each of ~20 JIT frames twice a
 * sample (the walk asks whether it is named, the stack-trace ID for its identity), and node's ask of each frame in
 * its binary whether V8 names it, a binary search each over thousands of entries. Valid until the table's next
 * commit.
 */
#define NAME_MEMO_SLOTS 512	/* a power of two */

struct name_memo {
	uint64_t addr, commits;
	bool found;
	struct jitsym_info info;
	uint64_t lo, hi;	/* jitsyms_lookup_span()'s */
};

static const struct name_memo *memo_span(struct jitinfo *j, uint64_t addr)
{
	if (!j->memo && !(j->memo = calloc(NAME_MEMO_SLOTS, sizeof(*j->memo))))
		return NULL;
	struct name_memo *m = &j->memo[(addr * 0x9e3779b97f4a7c15ULL) >> 55 & (NAME_MEMO_SLOTS - 1)];
	if (m->addr != addr || m->commits != j->commits + 1) {
		m->found = jitsyms_lookup_span(j->syms, addr, &m->info, &m->lo, &m->hi);
		m->addr = addr;
		m->commits = j->commits + 1;	/* 0 is an empty slot */
	}
	return m;
}

static bool memo_lookup(struct jitinfo *j, uint64_t addr, struct jitsym_info *info)
{
	const struct name_memo *m = memo_span(j, addr);
	if (!m)
		return jitsyms_lookup(j->syms, addr, info);
	*info = m->info;
	return m->found;
}

bool jitinfo_declares(struct jitinfo *j, uint64_t addr, uint64_t *lo, uint64_t *hi)
{
	struct jitsym_info info;
	*lo = 0;
	*hi = UINT64_MAX;
	/* A JVM's names are of its code cache, never of a file's code: no lookup for its files' frames. */
	if (j->is_jvm || !jitinfo_walks_fp(j))
		return false;
	const struct name_memo *m = memo_span(j, addr);
	if (!m)
		return jitsyms_lookup_span(j->syms, addr, &info, lo, hi);
	*lo = m->lo;
	*hi = m->hi;
	return m->found;
}

static void blob_met(struct jitinfo *j, const struct hotspot_frame *f);

bool jitinfo_names(struct jitinfo *j, uint64_t addr, uint64_t now_ns)
{
	struct jitsym_info info;
	struct hotspot_frame f;
	bool named = memo_lookup(j, addr, &info);
	/* A JVM that keeps frame pointers is walked by them (jitinfo_module), its code named from its cache all the
	 * same: here, where an address is not named yet (visible once the table is next committed), and until its
	 * interpreter's code is met (its frames say their Method; a map the JVM writes may name it). */
	if (j->hotspot && j->jvm_fp && (!named || j->interpreter_begin == j->interpreter_end) &&
	    hotspot_frame(j->hotspot, addr, now_ns, &f) == 1)
		blob_met(j, &f);
	if (named)
		return true;
	if (now_ns < j->next_refresh_ns)
		return false;
	j->next_refresh_ns = now_ns + JITINFO_REFRESH_NS;
	refresh(j, JITINFO_SAMPLE_BUDGET);
	return jitsyms_lookup(j->syms, addr, &info);
}

/* CPython's perf trampoline (Python/asm_trampoline.S, 3.12 and later, x86-64), copied once per code object and
 * named "py::FUNCTION:FILE" in the perf map. Its CFA is SP + 8 but between the sub and the add. */
static const uint8_t cpython_trampoline[] = { 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3 };
#define TRAMPOLINE_SUB_END 4
#define TRAMPOLINE_ADD_START 10

/* Whether the process's trampolines are CPython's: one of them compared with the template, once. */
static bool trampolines_known(struct jitinfo *j, uint64_t start)
{
	uint8_t code[sizeof(cpython_trampoline)];
	if (!j->trampolines && j->attached && !j->mgr->open_map) {
		ssize_t n = procmem_read(j->pid, start, code, sizeof(code));
		j->trampolines = n == (ssize_t)sizeof(code) && !memcmp(code, cpython_trampoline, sizeof(code)) ? 1 : -1;
	}
	return j->trampolines > 0;
}

bool jitinfo_trampoline(struct jitinfo *j, uint64_t addr, uint32_t *cfa_sp, uint64_t *lo, uint64_t *hi)
{
	struct jitsym_info info;
	*lo = 0;
	*hi = UINT64_MAX;
	if (j->trampolines < 0 || !jitsyms_lookup_span(j->syms, addr, &info, lo, hi))
		return false;
	if (strncmp(info.name, "py::", 4) != 0 || info.end - info.start != sizeof(cpython_trampoline) ||
	    *lo != info.start || *hi != info.end || !trampolines_known(j, info.start))
		return false;
	uint64_t off = addr - info.start;
	*cfa_sp = off >= TRAMPOLINE_SUB_END && off < TRAMPOLINE_ADD_START ? 16 : 8;
	*lo = info.start + (off < TRAMPOLINE_SUB_END ? 0 : off < TRAMPOLINE_ADD_START ? TRAMPOLINE_SUB_END :
						  TRAMPOLINE_ADD_START);
	*hi = info.start + (off < TRAMPOLINE_SUB_END ? TRAMPOLINE_SUB_END :
			    off < TRAMPOLINE_ADD_START ? TRAMPOLINE_ADD_START : sizeof(cpython_trampoline));
	return true;
}

/* Most code blobs, and most interpreted methods, of one JVM named (a JVM holds tens of thousands of each at
 * most). */
#define JVM_BLOBS_NAMED_MAX (1u << 20)

/* The code blob a frame was found in gets its name in the process's table, as a perf map would give it, the
 * first time it is met: named while the process lives, the name stays for the profile built after it exited. */
static void name_blob(struct jitinfo *j, const struct hotspot_frame *f)
{
	char name[JITSYMS_NAME_MAX];
	uint64_t key = hash_u64(hash_u64(HASH_SEED, f->code_begin), f->code_end), v;
	if (hindex_find(&j->blobs_named, key, NULL, NULL, NULL, &v) ||
	    hindex_count(&j->blobs_named) >= JVM_BLOBS_NAMED_MAX)
		return;
	int n = hotspot_blob_name(j->hotspot, f, name, sizeof(name));
	/* A read that failed (a method being made or unloaded) is tried again at the blob's next first sight; what
	 * the JVM's structures cannot give (-ENOENT, -EINVAL) is not. */
	if ((n > 0 || n == -ENOENT || n == -EINVAL) && hindex_insert(&j->blobs_named, key, f->code_begin) < 0)
		return;
	if (n > 0 && jitsyms_add(j->syms, f->code_begin, f->code_end - f->code_begin, name, (size_t)n, NULL, 0) >= 0)
		j->mgr->stats.blob_names++;
}

/* The code blob a frame was found in: named at its first sight, and the interpreter's code remembered. */
static void blob_met(struct jitinfo *j, const struct hotspot_frame *f)
{
	if (f->sender_sp) {
		j->interpreter_begin = f->code_begin;
		j->interpreter_end = f->code_end;
	}
	name_blob(j, f);
}

bool jitinfo_names_method(struct jitinfo *j, uint64_t method)
{
	char name[JITSYMS_NAME_MAX];
	uint64_t key = hash_u64(HASH_SEED, method), v;
	if (!j->hotspot || !method)
		return false;
	if (hindex_find(&j->methods_named, key, NULL, NULL, NULL, &v))
		return v == 1;
	if (hindex_count(&j->methods_named) >= JVM_BLOBS_NAMED_MAX)
		return false;
	int n = hotspot_method_name(j->hotspot, method, name, sizeof(name));
	/* A word that is no Method, or whose reads fail (a leaf in the interpreter's entry, before its frame is
	 * made, gives its caller's), is not read again: its frames would cost reads at every sample. Nothing is
	 * kept for a JVM without the fields (nothing was read) or a process gone. */
	if (n == -ENOENT || n == -ESRCH)
		return false;
	bool named = n > 0 && jitsyms_add(j->syms, method, 1, name, (size_t)n, NULL, 0) >= 0;
	if (hindex_insert(&j->methods_named, key, named) < 0)
		return false;
	j->mgr->stats.method_names += named;
	return named;
}

/* A JVM's compiled code without frame pointers: the rule of its code blob at addr, cut to m. */
static bool jvm_module(struct jitinfo *j, const struct mapping *m, uint64_t addr, uint64_t now_ns,
		       struct unwind_module *mod)
{
	struct hotspot_frame f;
	int rc = j->hotspot ? hotspot_frame(j->hotspot, addr, now_ns, &f) : -ENOENT;
	if (rc < 0) {
		j->mgr->stats.blob_misses += j->hotspot != NULL;
		return false;
	}
	j->mgr->stats.blob_frames++;
	if (rc == 1)
		blob_met(j, &f);
	*mod = (struct unwind_module){ .start = f.start > m->start ? f.start : m->start,
				       .end = f.end < m->end ? f.end : m->end, .jit = true, .jit_cfa_sp = f.cfa_sp,
				       .jit_fp_saved = f.fp_saved, .jit_sender_sp = f.sender_sp,
				       .jit_leaf_shapes = f.leaf_shapes,
				       .jit_frame_word_at = f.sender_sp ? HOTSPOT_INTERPRETER_METHOD_AT : 0,
				       .jit_word_start = f.code_begin, .jit_word_end = f.code_end };
	return true;
}

bool jitinfo_module(struct jitinfo *j, const struct mapping *m, uint64_t addr, uint64_t now_ns,
		    struct unwind_module *mod)
{
	uint64_t lo, hi;
	uint32_t cfa_sp = 0;
	if (j->is_jvm && !j->jvm_fp)
		return jvm_module(j, m, addr, now_ns, mod);
	if (!jitinfo_walks_fp(j))
		return false;
	lo = 0;
	hi = UINT64_MAX;
	if (j->is_jvm || !jitinfo_trampoline(j, addr, &cfa_sp, &lo, &hi))
		cfa_sp = 0;	/* a JVM has none of CPython's trampolines */
	/* A JVM that keeps frame pointers: all its code is one module, its interpreter's frames (once its code was
	 * met) saying their Method. */
	bool interpreter = j->is_jvm && j->interpreter_begin < j->interpreter_end;
	*mod = (struct unwind_module){ .start = lo > m->start ? lo : m->start, .end = hi < m->end ? hi : m->end,
				       .jit = true, .jit_cfa_sp = cfa_sp,
				       .jit_frame_word_at = interpreter ? HOTSPOT_INTERPRETER_METHOD_AT : 0,
				       .jit_word_start = j->interpreter_begin, .jit_word_end = j->interpreter_end };
	return true;
}

bool jitinfo_needs_jvm_tables(const struct jitinfo *j)
{
	return j->is_jvm && !j->hotspot && !j->hotspot_err && j->attached && !j->mgr->open_map;
}

int jitinfo_open_jvm(struct jitinfo *j, const uint64_t globals[HOTSPOT_NGLOBALS])
{
	if (!jitinfo_needs_jvm_tables(j))
		return j->hotspot_err;
	struct unwind_memory mem = procmem_reader(&j->pid);
	j->hotspot_err = globals ? hotspot_open(&mem, globals, &j->hotspot) : -ENOENT;
	j->mgr->stats.jvms += j->hotspot != NULL;
	return j->hotspot_err;
}

bool jitinfo_module_unmapped(struct jitinfo *j, uint64_t addr, uint64_t now_ns, struct unwind_module *mod)
{
	struct jitsym_info info;
	struct mapping named = { 0 };
	if (!jitsyms_lookup(j->syms, addr, &info))
		return false;
	named.start = info.start;
	named.end = info.end;
	return jitinfo_module(j, &named, addr, now_ns, mod);
}

struct jitinfo *jitinfo_naming(struct jitinfo_mgr *m, pid_t pid, uint64_t addr, uint64_t now_ns)
{
	struct jitinfo *j = find_attached(m, pid);
	return j && j->learned && jitinfo_names(j, addr, now_ns) ? j : NULL;
}

void jitinfo_file_module(struct jitinfo *j, uint64_t addr, struct unwind_module *mod)
{
	uint64_t lo, hi;
	bool declared = jitinfo_declares(j, addr, &lo, &hi);
	uint64_t start = lo > mod->start ? lo : mod->start, end = hi < mod->end ? hi : mod->end;
	if (declared)
		*mod = (struct unwind_module){ .jit = true };
	mod->start = start;
	mod->end = end;
}

/* The FileID of a name: FNV-1a-128 of "jit:" and the name, computed once per name. */
static struct file_id name_file_id(struct jitinfo *j, uint32_t id, const char *name)
{
	struct file_id fid;
	size_t need = jitsyms_strings(j->syms);
	if (id >= j->name_cap && need > j->name_cap) {
		struct file_id *ids = realloc(j->name_ids, need * sizeof(*ids));
		uint8_t *known = ids ? realloc(j->name_known, need) : NULL;
		if (ids)
			j->name_ids = ids;
		if (known) {
			memset(known + j->name_cap, 0, need - j->name_cap);
			j->name_known = known;
			j->name_cap = need;
		}
	}
	if (id < j->name_cap && j->name_known[id])
		return j->name_ids[id];
	char text[JITSYMS_NAME_MAX + 8];
	int n = snprintf(text, sizeof(text), "jit:%s", name);
	fileid_from_text(text, (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1, &fid);
	if (id < j->name_cap) {
		j->name_ids[id] = fid;
		j->name_known[id] = 1;
	}
	return fid;
}

void jitinfo_identity(struct jitinfo *j, uint64_t addr, struct file_id *file_id, uint64_t *address)
{
	struct jitsym_info info;
	if (memo_lookup(j, addr, &info)) {
		*file_id = name_file_id(j, info.name_id, info.name);
		*address = addr - info.start;
	} else {
		*file_id = j->anon_id;
		*address = addr;
	}
}

/* Identities come from the name table, which changes only at a commit, and from anon_id, set once it is learned. */
uint64_t jitinfo_generation(const struct jitinfo *j)
{
	return j->commits << 1 | j->learned;
}

/* Where the process's names came from. Both files may name code; the perf map is the one a process writes when it
 * writes both; a JVM's code cache names what neither does. Per process, not per name. */
static const char *name_origin(const struct jitinfo *j)
{
	if (j->map.bytes)
		return j->map.path;
	if (j->dump.path)
		return j->dump.path;
	return j->hotspot ? JITINFO_JVM_ORIGIN : j->map.path;
}

void jitinfo_frame(struct jitinfo *j, uint64_t addr, struct jitinfo_frame *out)
{
	struct jitsym_info info;
	bool named = jitsyms_lookup(j->syms, addr, &info);
	jitinfo_identity(j, addr, &out->file_id, &out->address);
	out->name = named ? info.name : NULL;
	out->source = named ? info.file : "";
	out->line = named ? info.line : 0;
	out->origin = named ? name_origin(j) : "[jit]";
}
