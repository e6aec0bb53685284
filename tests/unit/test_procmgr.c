/* Unit tests for src/processes/procmgr.c and src/processes/execinfo.c: mapping bookkeeping, fork/exec, lazy file opening, anonymous
 * executable memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/processes/procmgr.h"

struct pm_state {
	struct execinfo_mgr *em;
	struct procmgr *pm;
};

static int setup(void **state)
{
	struct pm_state *s = calloc(1, sizeof(*s));
	assert_int_equal(execinfo_mgr_new(&s->em), 0);
	assert_int_equal(procmgr_new(s->em, &s->pm), 0);
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct pm_state *s = *state;
	procmgr_free(s->pm);
	assert_int_equal(execinfo_mgr_count(s->em), 0); /* every reference was given back */
	execinfo_mgr_free(s->em);
	free(s);
	return 0;
}

/* A pid that cannot exist, so nothing is seeded from /proc. */
#define FAKE_PID 2147483600

static void mmap2(struct procmgr *pm, pid_t pid, uint64_t start, uint64_t len, uint64_t pgoff, const char *path)
{
	struct perf_mmap2 m = { .pid = (uint32_t)pid, .tid = (uint32_t)pid, .addr = start, .len = len,
				.pgoff = pgoff, .ino = 1, .filename = path };
	procmgr_on_mmap2(pm, &m);
}

static void test_parse_maps_line(void **state)
{
	(void)state;
	char line[] = "7f1c2a400000-7f1c2a428000 r-xp 00028000 08:01 1234567    /usr/lib/libc.so.6\n";
	struct mapping m;
	int exec;
	const char *path;
	assert_int_equal(procmgr_parse_maps_line(line, &m, &exec, &path), 0);
	assert_int_equal(m.start, 0x7f1c2a400000);
	assert_int_equal(m.end, 0x7f1c2a428000);
	assert_int_equal(m.pgoff, 0x28000);
	assert_int_equal(m.ino, 1234567);
	assert_true(exec);
	assert_string_equal(path, "/usr/lib/libc.so.6");
	char anon[] = "7ffd1000-7ffd2000 rw-p 00000000 00:00 0 \n";
	assert_int_equal(procmgr_parse_maps_line(anon, &m, &exec, &path), 0);
	assert_false(exec);
	assert_string_equal(path, "");
	char bad[] = "garbage line\n";
	assert_int_equal(procmgr_parse_maps_line(bad, &m, &exec, &path), -EINVAL);
}

static void test_mmap_overlap_and_split(void **state)
{
	struct pm_state *s = *state;
	struct process *p = procmgr_get(s->pm, FAKE_PID);
	assert_non_null(p);
	assert_int_equal(p->nmaps, 0);
	mmap2(s->pm, FAKE_PID, 0x10000, 0x10000, 0, "/a");
	mmap2(s->pm, FAKE_PID, 0x30000, 0x1000, 0, "/c");
	assert_int_equal(p->nmaps, 2);
	/* A new mapping in the middle of /a splits it in two and keeps the file offsets right. */
	mmap2(s->pm, FAKE_PID, 0x14000, 0x1000, 0, "/b");
	assert_int_equal(p->nmaps, 4);
	struct mapping *m = procmgr_find_mapping(s->pm, p, 0x16000, 0);
	assert_non_null(m);
	assert_string_equal(m->path, "/a");
	assert_int_equal(m->start, 0x15000);
	assert_int_equal(m->pgoff, 0x5000);
	assert_string_equal(procmgr_find_mapping(s->pm, p, 0x14800, 0)->path, "/b");
	assert_int_equal(procmgr_find_mapping(s->pm, p, 0x13fff, 0)->end, 0x14000);
	assert_null(procmgr_find_mapping(s->pm, p, 0x20000, 0));
	/* Replacing a whole range drops what it covers. */
	mmap2(s->pm, FAKE_PID, 0x10000, 0x21000, 0, "/d");
	assert_int_equal(p->nmaps, 1);
	assert_string_equal(procmgr_find_mapping(s->pm, p, 0x30800, 0)->path, "/d");
}

static void test_fork_exec_exit(void **state)
{
	struct pm_state *s = *state;
	mmap2(s->pm, FAKE_PID, 0x10000, 0x1000, 0, "/parent");
	struct perf_task fork = { .pid = FAKE_PID + 1, .ppid = FAKE_PID, .tid = FAKE_PID + 1, .ptid = FAKE_PID };
	procmgr_on_fork(s->pm, &fork);
	struct process *child = procmgr_get(s->pm, FAKE_PID + 1);
	assert_int_equal(child->nmaps, 1);
	assert_string_equal(child->maps[0].path, "/parent");

	struct perf_comm exec = { .pid = FAKE_PID + 1, .tid = FAKE_PID + 1, .exec = 1, .comm = "newprog" };
	procmgr_on_comm(s->pm, &exec);
	assert_int_equal(child->nmaps, 0);
	assert_string_equal(child->comm, "newprog");
	assert_string_equal(procmgr_thread_name(s->pm, child, FAKE_PID + 1), "newprog");

	assert_int_equal(procmgr_count(s->pm), 2);
	struct perf_task exit = fork;
	procmgr_on_exit(s->pm, &exit);
	procmgr_reap(s->pm, NULL, NULL);
	assert_int_equal(procmgr_count(s->pm), 2); /* kept while other rings may still hold its samples */
	procmgr_reap(s->pm, NULL, NULL);
	procmgr_reap(s->pm, NULL, NULL);
	assert_int_equal(procmgr_count(s->pm), 1);
}

/* The program's path: from the process's own mappings, its parent's until it execs, "" when nothing says it. */
static void test_exe_path_and_container(void **state)
{
	struct pm_state *s = *state;
	char self[PROCMGR_EXE_PATH_MAX], want_container[CONTAINER_ID_LEN + 1];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	struct process *p = procmgr_get(s->pm, getpid());
	assert_string_equal(procmgr_exe_path(p), self);
	container_id_read(getpid(), want_container);
	assert_string_equal(procmgr_container_id(p), want_container);

	struct process *fake = procmgr_get(s->pm, FAKE_PID);
	assert_string_equal(procmgr_exe_path(fake), "");	/* no mapping, no /proc */
	assert_string_equal(procmgr_container_id(fake), "");
	struct perf_mmap2 m = { .pid = FAKE_PID, .tid = FAKE_PID, .addr = 0x400000, .len = 0x1000, .ino = 42,
				.filename = "/usr/bin/prog" };
	procmgr_on_mmap2(s->pm, &m);
	assert_string_equal(procmgr_exe_path(fake), "/usr/bin/prog");	/* tried again, now known */

	struct perf_task fork = { .pid = FAKE_PID + 1, .ppid = FAKE_PID, .tid = FAKE_PID + 1, .ptid = FAKE_PID };
	procmgr_on_fork(s->pm, &fork);
	struct process *child = procmgr_get(s->pm, FAKE_PID + 1);
	assert_string_equal(procmgr_exe_path(child), "/usr/bin/prog");
	struct perf_comm exec = { .pid = FAKE_PID + 1, .tid = FAKE_PID + 1, .exec = 1, .comm = "other" };
	procmgr_on_comm(s->pm, &exec);
	assert_string_equal(procmgr_exe_path(child), "");	/* the old program's path went with its image */
	m.pid = m.tid = FAKE_PID + 1;
	m.filename = "/usr/bin/other";
	procmgr_on_mmap2(s->pm, &m);
	assert_string_equal(procmgr_exe_path(child), "/usr/bin/other");
	assert_string_equal(procmgr_exe_path(fake), "/usr/bin/prog");
}

static int data_marker = 5;

__attribute__((noinline)) static int marker_function(int x)
{
	return x * 3 + 1;
}

static void test_self_mapping_and_bias(void **state)
{
	struct pm_state *s = *state;
	struct process *p = procmgr_get(s->pm, getpid());
	assert_non_null(p);
	uint64_t addr = (uint64_t)(uintptr_t)&marker_function;
	struct mapping *m = procmgr_find_mapping(s->pm, p, addr, 1);
	assert_non_null(m);
	struct execinfo *e = procmgr_mapping_exe(s->pm, p, m);
	assert_non_null(e);
	Dl_info info;
	assert_true(dladdr(&marker_function, &info) != 0);
	/* A PIE's first segment is at virtual address 0, so the bias is its load base. */
	assert_int_equal(m->bias, (uint64_t)(uintptr_t)info.dli_fbase);
	assert_true(execinfo_contains_va(e, addr - m->bias));

	/* Another mapping of the same file (its data segment) shares the one entry. */
	struct mapping *data = procmgr_find_mapping(s->pm, p, (uint64_t)(uintptr_t)&data_marker, 1);
	assert_non_null(data);
	assert_ptr_not_equal(data, m);
	assert_ptr_equal(procmgr_mapping_exe(s->pm, p, data), e);
	assert_int_equal(data->bias, m->bias);
	data_marker++;
	assert_int_equal(marker_function(1), 4);
}

/*
 * A miss re-reads /proc/PID/maps; the files of the mappings it replaces must outlive the walk that missed (its
 * unwinder still reads their images and tables), until procmgr_release_deferred().
 */
static void test_resync_keeps_files_until_released(void **state)
{
	struct pm_state *s = *state;
	struct process *p = procmgr_get(s->pm, getpid());
	assert_non_null(p);
	struct mapping *m = procmgr_find_mapping(s->pm, p, (uint64_t)(uintptr_t)&marker_function, 1);
	assert_non_null(m);
	struct execinfo *e = procmgr_mapping_exe(s->pm, p, m);
	assert_non_null(e);
	assert_int_equal(execinfo_mgr_count(s->em), 1);
	/* An address in no mapping, long after the last re-read: the maps are read again. */
	assert_null(procmgr_find_mapping(s->pm, p, 8, 1 + 2 * PROCMGR_RESYNC_NS));
	assert_int_equal(execinfo_mgr_count(s->em), 1);
	assert_int_equal(execinfo_refs(e), 1);
	/* The new mapping of the same file finds the same entry. */
	struct mapping *again = procmgr_find_mapping(s->pm, p, (uint64_t)(uintptr_t)&marker_function, 1);
	assert_non_null(again);
	assert_ptr_equal(procmgr_mapping_exe(s->pm, p, again), e);
	assert_int_equal(execinfo_refs(e), 2);
	procmgr_release_deferred(s->pm);
	assert_int_equal(execinfo_refs(e), 1);
	assert_int_equal(execinfo_mgr_count(s->em), 1);
	/* When no mapping holds it any more, the deferred release is the last one. */
	assert_null(procmgr_find_mapping(s->pm, p, 8, 1 + 4 * PROCMGR_RESYNC_NS));
	assert_int_equal(execinfo_mgr_count(s->em), 1);
	procmgr_release_deferred(s->pm);
	assert_int_equal(execinfo_mgr_count(s->em), 0);
	procmgr_release_deferred(s->pm);
}

/*
 * A re-read of /proc/PID/maps that no longer maps the program's file comes from a later image (the process exec'd
 * and its exec record waits in a ring): it is refused and the mappings the records gave stay. Here the records
 * say the program is a file at 0x10000 that this process does not map; a re-read that maps it is taken.
 */
static void test_resync_refused_after_unseen_exec(void **state)
{
	struct pm_state *s = *state;
	struct process *p = procmgr_get(s->pm, getpid());
	uint64_t code = (uint64_t)(uintptr_t)&marker_function;
	assert_non_null(p);
	assert_non_null(procmgr_find_mapping(s->pm, p, code, 1));
	/* The lowest file mapping: the program, to hostprof. */
	struct perf_mmap2 m = { .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid(), .addr = 0x10000, .len = 0x1000,
				.ino = 987654321, .maj = 8, .filename = "/gone/program" };
	procmgr_on_mmap2(s->pm, &m);
	assert_true(procmgr_overlaps(p, 0x10fff, 0x20000));
	assert_false(procmgr_overlaps(p, 0x11000, 0x20000));
	assert_false(procmgr_overlaps(p, 0x1000, 0x10000));
	unsigned nmaps = p->nmaps;
	/* A miss long after the last re-read: the maps are read again, and refused. */
	assert_null(procmgr_find_mapping(s->pm, p, 8, 1 + 2 * PROCMGR_RESYNC_NS));
	assert_int_equal(p->nmaps, nmaps);
	assert_non_null(procmgr_lookup_mapping(p, 0x10000));
	procmgr_release_deferred(s->pm);
	/* After the exec record, the maps come from the new image's records, and re-reads are taken again. */
	struct perf_comm c = { .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid(), .comm = "test", .exec = 1 };
	procmgr_on_comm(s->pm, &c);
	assert_int_equal(p->nmaps, 0);
	assert_non_null(procmgr_find_mapping(s->pm, p, code, 1 + 4 * PROCMGR_RESYNC_NS));
	assert_null(procmgr_lookup_mapping(p, 0x10000));
	procmgr_release_deferred(s->pm);
}

/*
 * Samples the kernel takes inside an exec after its record still carry the old program's registers: the exec keeps
 * the mappings it replaced, files opened, until they are dropped; a second exec replaces them in turn.
 */
static void test_exec_keeps_replaced_image(void **state)
{
	struct pm_state *s = *state;
	struct process *p = procmgr_get(s->pm, getpid());
	uint64_t code = (uint64_t)(uintptr_t)&marker_function;
	struct mapping *m = procmgr_find_mapping(s->pm, p, code, 1);
	assert_non_null(m);
	struct execinfo *e = procmgr_mapping_exe(s->pm, p, m);
	assert_non_null(e);
	assert_null(procmgr_replaced_mapping(p, code));
	struct perf_comm c = { .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid(), .comm = "test", .exec = 1 };
	procmgr_on_comm(s->pm, &c);
	assert_null(procmgr_lookup_mapping(p, code));
	struct mapping *old = procmgr_replaced_mapping(p, code);
	assert_non_null(old);
	assert_ptr_equal(procmgr_mapping_exe(s->pm, p, old), e);
	assert_null(procmgr_replaced_mapping(p, 8));
	/* The new image's mappings are its own; a second exec replaces the kept image with them. */
	mmap2(s->pm, getpid(), 0x10000, 0x1000, 0, "/new");
	procmgr_on_comm(s->pm, &c);
	assert_null(procmgr_replaced_mapping(p, code));
	assert_string_equal(procmgr_replaced_mapping(p, 0x10800)->path, "/new");
	procmgr_drop_replaced(s->pm, p);
	assert_null(procmgr_replaced_mapping(p, 0x10800));
	assert_int_equal(p->nreplaced, 0);
}

static void test_vdso_image(void **state)
{
	struct pm_state *s = *state;
	struct process *p = procmgr_get(s->pm, getpid());
	for (unsigned i = 0; i < p->nmaps; i++) {
		if (strcmp(p->maps[i].path, "[vdso]") != 0)
			continue;
		struct execinfo *e = procmgr_mapping_exe(s->pm, p, &p->maps[i]);
		assert_non_null(e);
		assert_true(execinfo_contains_va(e, p->maps[i].start + 16 - p->maps[i].bias));
		return;
	}
	fail_msg("no [vdso] mapping in /proc/self/maps");
}

/* Copy this test program to a new file of mode mode in $TMPDIR; returns an open read-only fd, path in path. */
static int copy_self(char *path, size_t len, mode_t mode)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, len, "%s/hostprof-execinfo-XXXXXX", tmp);
	int out = mkstemp(path);
	int in = open("/proc/self/exe", O_RDONLY);
	assert_true(out >= 0 && in >= 0);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	assert_int_equal(n, 0);
	assert_int_equal(fchmod(out, mode), 0);
	close(in);
	close(out);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	return fd;
}

/* Whether path is mapped into this process. */
static int self_maps(const char *path)
{
	char line[1024];
	int found = 0;
	FILE *fp = fopen("/proc/self/maps", "r");
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp))
		found |= strstr(line, path) != NULL;
	fclose(fp);
	return found;
}

/*
 * A file that someone other than root can write is read, not mmap'd: truncated under hostprof, it must cost
 * the tables that can no longer be read, not SIGBUS. (Mapped, this test dies reading .eh_frame.)
 */
static void test_writable_file_truncated(void **state)
{
	struct pm_state *s = *state;
	char path[256];
	struct execinfo *e;
	int fd = copy_self(path, sizeof(path), 0666);
	assert_int_equal(execinfo_acquire_fd(s->em, fd, path, &e), 0);
	assert_false(self_maps(path));
	assert_int_equal(truncate(path, 4096), 0);
	assert_null(execinfo_deltas(e)); /* .eh_frame is past the first page: a read error, nothing else */
	assert_false(self_maps(path));
	execinfo_release(s->em, e);
	unlink(path);

	/* The same file that only root can write is mapped (shared with the page cache), when we are root. */
	if (geteuid() != 0)
		return;
	fd = copy_self(path, sizeof(path), 0644);
	assert_int_equal(execinfo_acquire_fd(s->em, fd, path, &e), 0);
	assert_non_null(execinfo_deltas(e));
	assert_true(self_maps(path));
	execinfo_release(s->em, e);
	unlink(path);
}

/*
 * Anonymous executable memory (JIT code) is kept as a mapping with nothing to open, from /proc/PID/maps and from
 * perf's "//anon" records; anonymous memory that is not executable is not.
 */
static void test_anonymous_code(void **state)
{
	struct pm_state *s = *state;
	void *code = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *data = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(code != MAP_FAILED && data != MAP_FAILED);
	struct process *p = procmgr_get(s->pm, getpid());
	assert_non_null(p);
	struct mapping *m = procmgr_lookup_mapping(p, (uint64_t)(uintptr_t)code);
	assert_non_null(m);
	assert_true(m->anon);
	assert_string_equal(m->path, "//anon");
	assert_true(m->prot & PROT_EXEC);
	assert_null(procmgr_mapping_exe(s->pm, p, m));
	assert_null(procmgr_lookup_mapping(p, (uint64_t)(uintptr_t)data));

	struct perf_mmap2 rec = { .pid = FAKE_PID, .tid = FAKE_PID, .addr = 0x50000, .len = 0x1000,
				  .prot = PROT_READ | PROT_EXEC, .filename = "//anon" };
	procmgr_on_mmap2(s->pm, &rec);
	struct process *fake = procmgr_get(s->pm, FAKE_PID);
	assert_int_equal(fake->nmaps, 1);
	assert_true(fake->maps[0].anon);
	assert_int_equal(fake->maps[0].ino, 0);
	assert_null(procmgr_mapping_exe(s->pm, fake, &fake->maps[0]));
	mmap2(s->pm, FAKE_PID, 0x60000, 0x1000, 0, "/usr/bin/true");
	assert_false(fake->maps[1].anon);
	munmap(code, 8192);
	munmap(data, 8192);
}

struct offline_opens {
	int calls;
	char path[256];
	pid_t pid;
};

/* procmgr_open_fn: this test binary, whatever path the mapping names; a path under /missing/ is not here (its
 * build-id recorded as 0102...14). */
static int open_self(void *ctx, const struct process *p, const struct mapping *m, char build_id[41])
{
	struct offline_opens *o = ctx;
	o->calls++;
	o->pid = p->pid;
	snprintf(o->path, sizeof(o->path), "%s", m->path);
	if (strncmp(m->path, "/missing/", 9) == 0) {
		snprintf(build_id, 41, "%s", "0102030405060708090a0b0c0d0e0f1011121314");
		return -ENOENT;
	}
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Offline (records from a file): a process known only by its records, nothing read from /proc even for a pid
 * that exists (this one), its mapped files opened by the callback. */
static void test_offline_reads_no_proc(void **state)
{
	struct pm_state *s = *state;
	struct offline_opens o = { 0 };
	procmgr_set_offline(s->pm, open_self, &o);
	struct process *p = procmgr_get(s->pm, getpid());
	assert_non_null(p);
	assert_true(p->offline);
	assert_int_equal(p->nmaps, 0);			/* not seeded from /proc/PID/maps */
	assert_string_equal(p->comm, "");		/* nor named from /proc/PID/comm */
	uint64_t addr = (uint64_t)(uintptr_t)&marker_function;
	assert_null(procmgr_find_mapping(s->pm, p, addr, 1));	/* a miss re-reads nothing */
	assert_int_equal(p->nmaps, 0);
	assert_string_equal(procmgr_exe_path(p), "");	/* not /proc/PID/exe */
	assert_string_equal(procmgr_container_id(p), "");
	struct perf_comm c = { .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid() + 1, .comm = "worker" };
	procmgr_on_comm(s->pm, &c);
	assert_string_equal(procmgr_thread_name(s->pm, p, getpid() + 1), "worker");
	assert_string_equal(procmgr_thread_name(s->pm, p, getpid() + 2), "");	/* the process's name: none */
	/* the records' mapping of this binary's code, opened by the callback */
	Dl_info info;
	assert_true(dladdr(&marker_function, &info) != 0);
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096 + 128];
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f)) {
		struct mapping m;
		int exec;
		const char *path;
		if (procmgr_parse_maps_line(line, &m, &exec, &path) == 0 && exec && addr >= m.start && addr < m.end) {
			struct perf_mmap2 rec = { .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid(), .addr = m.start,
						  .len = m.end - m.start, .pgoff = m.pgoff, .ino = 12345,
						  .prot = PROT_READ | PROT_EXEC, .filename = "/recorded/elsewhere/prog" };
			procmgr_on_mmap2(s->pm, &rec);
			found = true;
		}
	}
	if (f)
		fclose(f);
	assert_true(found);
	struct mapping *m = procmgr_find_mapping(s->pm, p, addr, 1);
	assert_non_null(m);
	struct execinfo *e = procmgr_mapping_exe(s->pm, p, m);
	assert_non_null(e);
	assert_int_equal(o.calls, 1);
	assert_int_equal(o.pid, getpid());
	assert_string_equal(o.path, "/recorded/elsewhere/prog");
	assert_true(execinfo_contains_va(e, addr - m->bias));
	assert_string_equal(procmgr_exe_path(p), "/recorded/elsewhere/prog");
	/* a file not here: known without its contents, its addresses offsets in the file, by the recorded build-id */
	struct perf_mmap2 gone = { .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid(), .addr = 0x7f0000010000,
				   .len = 0x3000, .pgoff = 0x2000, .prot = PROT_READ | PROT_EXEC,
				   .filename = "/missing/libgone.so" };
	procmgr_on_mmap2(s->pm, &gone);
	struct mapping *gm = procmgr_find_mapping(s->pm, p, 0x7f0000011234, 1);
	assert_non_null(gm);
	struct execinfo *ge = procmgr_mapping_exe(s->pm, p, gm);
	assert_non_null(ge);
	assert_true(execinfo_unread(ge));
	assert_int_equal(0x7f0000011234 - gm->bias, 0x3234);	/* 0x1234 into a mapping of offset 0x2000 */
	assert_string_equal(execinfo_build_id(ge), "0102030405060708090a0b0c0d0e0f1011121314");
	assert_string_equal(execinfo_name(ge), "libgone.so");
	assert_null(execinfo_elf(ge));
	assert_null(execinfo_symbolizer(ge));
	assert_null(execinfo_deltas(ge));
	/* another mapping of the same build shares its entry */
	gone.addr = 0x7f0000020000;
	gone.pgoff = 0;
	gone.filename = "/missing/elsewhere/libgone.so";
	procmgr_on_mmap2(s->pm, &gone);
	struct mapping *gm2 = procmgr_find_mapping(s->pm, p, 0x7f0000020010, 1);
	assert_true(gm2 && procmgr_mapping_exe(s->pm, p, gm2) == ge);
	assert_int_equal(0x7f0000020010 - gm2->bias, 0x10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_maps_line),
		cmocka_unit_test_setup_teardown(test_mmap_overlap_and_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_exec_exit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_self_mapping_and_bias, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resync_keeps_files_until_released, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resync_refused_after_unseen_exec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_keeps_replaced_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vdso_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writable_file_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_anonymous_code, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exe_path_and_container, setup, teardown),
		cmocka_unit_test_setup_teardown(test_offline_reads_no_proc, setup, teardown),
	};
	return cmocka_run_group_tests_name("procmgr", tests, NULL, NULL);
}
