/*
 * Unit tests for src/processes/jitinfo.c: the JIT maps of real child processes, written here as a runtime would write them
 * (/tmp/perf-PID.map, a jitdump file the process maps): names and identities, maps that grow, a map written
 * after the process exited, files that must not be read (another owner, a symbolic link, a FIFO, a map older
 * than the process), how a JVM says it keeps frame pointers, the process limit and the entries' lifetime; and
 * offline, where the pid is only the recording's and nothing of the process is read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/processes/jitinfo.h"
#include "symbols/jitdump.h"

/* A child that waits on its stdin; with argv, it runs that (sh -c 'read x' ...) instead. */
struct child {
	pid_t pid;
	int to_child;
	char map[64];
	struct process proc;	/* what the process manager would know of it */
	struct mapping maps[2];
};

static void child_start(struct child *c, char *const argv[], char *const envp[])
{
	int fds[2], exec_done[2];
	char buf[1];
	memset(c, 0, sizeof(*c));
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pipe2(exec_done, O_CLOEXEC), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		close(fds[1]);
		close(exec_done[0]);
		dup2(fds[0], 0);
		if (argv)
			execve(argv[0], argv, envp);
		close(exec_done[1]);
		while (read(0, buf, 1) > 0)
			;
		_exit(0);
	}
	close(fds[0]);
	close(exec_done[1]);
	/* Closed by its exec (or before waiting): what is read about it is then the program it runs. */
	assert_int_equal(read(exec_done[0], buf, 1), 0);
	close(exec_done[0]);
	c->to_child = fds[1];
	snprintf(c->map, sizeof(c->map), "/tmp/perf-%d.map", (int)c->pid);
	c->proc.pid = c->pid;
	c->proc.maps = c->maps;
}

/* Killed rather than told: children forked after it hold its pipe too. */
static void child_stop(struct child *c)
{
	if (c->to_child >= 0) {
		close(c->to_child);
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	c->to_child = -1;
	unlink(c->map);
}

static void write_file(const char *path, const char *text, const char *mode)
{
	FILE *f = fopen(path, mode);
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool same_id(const struct file_id *a, const char *text)
{
	struct file_id want;
	fileid_from_text(text, strlen(text), &want);
	return memcmp(a->bytes, want.bytes, 16) == 0;
}

static void test_perf_map(void **state)
{
	(void)state;
	struct child c;
	child_start(&c, NULL, NULL);
	write_file(c.map, "7f0000001000 100 JS:*hot /app/hot.js:3:1\n0x7f0000002000 0x40 long Hot.f(long)\n", "w");
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	struct jitinfo *j = jitinfo_get(m, &c.proc, mono_ns());
	assert_non_null(j);
	assert_ptr_equal(jitinfo_get(m, &c.proc, mono_ns()), j);
	assert_ptr_equal(jitinfo_find(m, c.pid), j);
	assert_true(jitinfo_walks_fp(j));	/* a runtime that publishes a map keeps frame pointers */
	struct jitinfo_frame f;
	jitinfo_frame(j, 0x7f0000001010, &f);
	assert_string_equal(f.name, "JS:*hot /app/hot.js:3:1");
	assert_string_equal(f.origin, c.map);
	assert_int_equal(f.address, 0x10);
	assert_true(same_id(&f.file_id, "jit:JS:*hot /app/hot.js:3:1"));
	jitinfo_frame(j, 0x7f000000203f, &f);
	assert_string_equal(f.name, "long Hot.f(long)");
	/* Unnamed code: the process's own identity and the runtime address. */
	jitinfo_frame(j, 0x7f0000003000, &f);
	assert_null(f.name);
	assert_string_equal(f.origin, "[jit]");
	assert_int_equal(f.address, 0x7f0000003000);
	struct file_id id;
	uint64_t addr;
	jitinfo_identity(j, 0x7f0000003008, &id, &addr);
	assert_memory_equal(id.bytes, f.file_id.bytes, 16);
	assert_int_equal(addr, 0x7f0000003008);
	struct jitinfo_stats st;
	jitinfo_mgr_get_stats(m, &st);
	assert_int_equal(st.processes, 1);
	assert_int_equal(st.perf_maps, 1);
	assert_int_equal(st.symbols, 2);
	assert_int_equal(st.fp_processes, 1);
	child_stop(&c);
	jitinfo_mgr_free(m);
}

/* A runtime appends as it compiles: a missing name has the map read on from where it stopped, not more often
 * than every JITINFO_REFRESH_NS; a line still being written waits for its end. */
static void test_map_grows(void **state)
{
	(void)state;
	struct child c;
	child_start(&c, NULL, NULL);
	write_file(c.map, "1000 10 first\n", "w");
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	uint64_t now = mono_ns();
	struct jitinfo *j = jitinfo_get(m, &c.proc, now);
	assert_true(jitinfo_names(j, 0x1000, now));
	write_file(c.map, "2000 10 second\n3000 10 thi", "a");
	assert_false(jitinfo_names(j, 0x2000, now + 1));	/* too soon after the first read */
	assert_true(jitinfo_names(j, 0x2000, now + JITINFO_REFRESH_NS));
	assert_false(jitinfo_names(j, 0x3000, now + 2 * JITINFO_REFRESH_NS));
	write_file(c.map, "rd\n", "a");
	assert_true(jitinfo_names(j, 0x3000, now + 3 * JITINFO_REFRESH_NS));
	struct jitinfo_frame f;
	jitinfo_frame(j, 0x3000, &f);
	assert_string_equal(f.name, "third");
	child_stop(&c);
	jitinfo_mgr_free(m);
}

/* HotSpot's -XX:+DumpPerfMapAtExit: the map appears as the process exits; building the profile still reads it,
 * through the root directory opened while the process lived. */
static void test_map_after_exit(void **state)
{
	(void)state;
	struct child c;
	child_start(&c, NULL, NULL);
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	struct jitinfo *j = jitinfo_get(m, &c.proc, mono_ns());
	assert_false(jitinfo_walks_fp(j));	/* nothing says so yet */
	jitinfo_ref(j);				/* a trace frame's */
	child_stop(&c);
	jitinfo_mgr_on_exit(m, c.pid);
	jitinfo_mgr_reap(m);
	assert_ptr_equal(jitinfo_find(m, c.pid), j);	/* a late sample still finds it */
	jitinfo_mgr_reap(m);
	jitinfo_mgr_reap(m);
	assert_null(jitinfo_find(m, c.pid));
	write_file(c.map, "5000 20 written_at_exit\n", "w");
	jitinfo_mgr_refresh(m);
	struct jitinfo_frame f;
	jitinfo_frame(j, 0x5004, &f);
	assert_non_null(f.name);
	assert_string_equal(f.name, "written_at_exit");
	jitinfo_release(j);
	unlink(c.map);
	jitinfo_mgr_free(m);
}

/*
 * A sample handled after its process exited (hostprof lagging behind a short command): a process tracked while it
 * lived (record's command, -p) still has its map read, through the root opened then; one first seen after its
 * exit has nothing to read it through. Code in no known mapping is found through the map.
 */
static void test_tracked_after_exit(void **state)
{
	(void)state;
	struct child c, d;
	child_start(&c, NULL, NULL);
	child_start(&d, NULL, NULL);
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	uint64_t now = mono_ns();
	jitinfo_mgr_track(m, c.pid, now);
	pid_t cpid = c.pid, dpid = d.pid;
	char cmap[64], dmap[64];
	snprintf(cmap, sizeof(cmap), "%s", c.map);
	snprintf(dmap, sizeof(dmap), "%s", d.map);
	child_stop(&c);
	child_stop(&d);
	write_file(cmap, "7f0000001000 100 JS:*late\n", "w");
	write_file(dmap, "7f0000001000 100 JS:*late\n", "w");
	now += 2 * JITINFO_REFRESH_NS;
	struct jitinfo *j = jitinfo_naming(m, cpid, 0x7f0000001010, now);
	assert_non_null(j);
	assert_ptr_equal(jitinfo_get(m, &c.proc, now), j);
	assert_true(jitinfo_walks_fp(j));
	assert_null(jitinfo_naming(m, dpid, 0x7f0000001010, now));	/* no entry */
	struct jitinfo *k = jitinfo_get(m, &d.proc, now);
	assert_non_null(k);
	assert_false(jitinfo_names(k, 0x7f0000001010, now + 2 * JITINFO_REFRESH_NS));
	struct unwind_module mod;
	assert_true(jitinfo_module_unmapped(j, 0x7f0000001010, 1, &mod));
	assert_true(mod.jit);
	assert_int_equal(mod.start, 0x7f0000001000);
	assert_int_equal(mod.end, 0x7f0000001100);
	unlink(cmap);
	unlink(dmap);
	jitinfo_mgr_free(m);
}

/* A tracked process's exec makes its entry again (the new program's); its children are tracked; a reused pid's
 * entry is let go. Untracked processes get entries only from their JIT frames. */
static void test_tracked_exec_and_fork(void **state)
{
	(void)state;
	struct child c, d;
	child_start(&c, NULL, NULL);
	child_start(&d, NULL, NULL);
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	jitinfo_mgr_track(m, c.pid, 1);
	struct jitinfo *before = jitinfo_find(m, c.pid);
	assert_non_null(before);
	jitinfo_ref(before);
	jitinfo_mgr_on_exec(m, c.pid, 2);
	struct jitinfo *after = jitinfo_find(m, c.pid);
	assert_non_null(after);
	assert_ptr_not_equal(after, before);
	jitinfo_release(before);
	jitinfo_mgr_on_fork(m, c.pid, d.pid, 3);	/* d stands for c's child */
	assert_non_null(jitinfo_find(m, d.pid));
	jitinfo_mgr_on_fork(m, 1, d.pid, 4);		/* d's pid reused by an untracked parent's child */
	assert_null(jitinfo_find(m, d.pid));
	jitinfo_mgr_on_exec(m, d.pid, 5);
	assert_null(jitinfo_find(m, d.pid));
	struct jitinfo_stats st;
	jitinfo_mgr_get_stats(m, &st);
	assert_int_equal(st.processes, 0);	/* none ran JIT code */
	child_stop(&c);
	child_stop(&d);
	jitinfo_mgr_free(m);
}

/* Files the process's user did not write for it are not read, and never block. */
static void test_refused_files(void **state)
{
	(void)state;
	struct child c;
	child_start(&c, NULL, NULL);
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	char other[64];
	snprintf(other, sizeof(other), "/tmp/hostprof-jitinfo-%d", (int)getpid());
	write_file(other, "1000 10 from_elsewhere\n", "w");
	assert_int_equal(symlink(other, c.map), 0);
	struct jitinfo *j = jitinfo_get(m, &c.proc, mono_ns());
	uint64_t now = mono_ns() + 2 * JITINFO_REFRESH_NS;
	assert_false(jitinfo_names(j, 0x1000, now));
	assert_false(jitinfo_walks_fp(j));
	unlink(c.map);
	assert_int_equal(mkfifo(c.map, 0600), 0);	/* opened O_PATH only: no reader waits for a writer */
	assert_false(jitinfo_names(j, 0x1000, now += JITINFO_REFRESH_NS));
	unlink(c.map);
	/* A map left by an earlier process of the same pid: older than the process. */
	write_file(c.map, "1000 10 stale\n", "w");
	struct timespec old[2] = { { .tv_sec = time(NULL) - 3600 }, { .tv_sec = time(NULL) - 3600 } };
	assert_int_equal(utimensat(AT_FDCWD, c.map, old, 0), 0);
	assert_false(jitinfo_names(j, 0x1000, now += JITINFO_REFRESH_NS));
	if (geteuid() == 0) {
		write_file(c.map, "1000 10 not_its_user\n", "w");
		assert_int_equal(chown(c.map, 65534, 65534), 0);
		assert_false(jitinfo_names(j, 0x1000, now += JITINFO_REFRESH_NS));
		assert_int_equal(chown(c.map, 0, 0), 0);
	} else {
		write_file(c.map, "1000 10 its_user\n", "w");
	}
	/* The same map, now the process's: read. */
	assert_true(jitinfo_names(j, 0x1000, now += JITINFO_REFRESH_NS));
	struct jitinfo_stats st;
	jitinfo_mgr_get_stats(m, &st);
	assert_int_equal(st.refused, 1);	/* counted once per file */
	unlink(other);
	child_stop(&c);
	jitinfo_mgr_free(m);
}

/* jitinfo_open_fn of test_offline: records what it was asked for, gives the file give (or the error err). */
struct offline_open {
	char asked[64];
	unsigned calls;
	const char *give;
	int err;
};

static int offline_open(void *ctx, const char *path)
{
	struct offline_open *o = ctx;
	snprintf(o->asked, sizeof(o->asked), "%s", path);
	o->calls++;
	if (o->err)
		return o->err;
	int fd = open(o->give, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* An entry offline, for the process c->proc (with libjvm.so mapped if jvm), its map opened by o. */
static struct jitinfo *offline_entry(struct jitinfo_mgr **m, struct child *c, struct offline_open *o, bool jvm)
{
	c->maps[0] = (struct mapping){ .start = 0x10000, .end = 0x20000, .prot = 5,
				       .path = "/usr/lib/jvm/java-17/lib/server/libjvm.so" };
	c->proc.nmaps = jvm;
	assert_int_equal(jitinfo_mgr_new(NULL, m), 0);
	jitinfo_mgr_set_offline(*m, offline_open, o);
	struct jitinfo *j = jitinfo_get(*m, &c->proc, mono_ns());
	assert_non_null(j);
	return j;
}

/*
 * Offline (a recording read back): nothing of the pid is read, whoever has it now (here a living child with its own
 * map, and a JVM's options that say it keeps frame pointers): the map is what open_map gives for the recording's
 * "/tmp/perf-PID.map", unnamed code is known by the pid alone, a JVM is not walked by frame pointer, and a map
 * open_map refuses is counted, nothing named from it.
 */
static void test_offline(void **state)
{
	(void)state;
	char *const argv[] = { "/bin/sh", "-c", "read x", "-XX:+PreserveFramePointer", NULL };
	struct child c;
	child_start(&c, argv, NULL);
	write_file(c.map, "1000 10 the_living_process\n", "w");
	char given[64];
	snprintf(given, sizeof(given), "/tmp/hostprof-jitinfo-offline-%d", (int)getpid());
	write_file(given, "1000 10 recorded_name\n", "w");
	struct offline_open o = { .give = given };
	struct jitinfo_mgr *m;
	struct jitinfo *j = offline_entry(&m, &c, &o, false);
	assert_string_equal(o.asked, c.map);
	assert_true(jitinfo_walks_fp(j));	/* a runtime that published a map keeps frame pointers */
	struct jitinfo_frame f;
	jitinfo_frame(j, 0x1008, &f);
	assert_string_equal(f.name, "recorded_name");
	struct file_id id;
	uint64_t addr;
	char anon[64];
	jitinfo_identity(j, 0x5000, &id, &addr);
	snprintf(anon, sizeof(anon), "jit:pid:%d:0", (int)c.pid);
	assert_true(same_id(&id, anon));
	jitinfo_mgr_free(m);

	struct jitinfo *k = offline_entry(&m, &c, &o, true);
	assert_false(jitinfo_walks_fp(k));	/* -XX:+PreserveFramePointer on the living one's command line: unread */
	jitinfo_mgr_free(m);

	struct offline_open refuse = { .err = -EPERM };
	k = offline_entry(&m, &c, &refuse, false);
	assert_false(jitinfo_names(k, 0x1000, mono_ns() + 2 * JITINFO_REFRESH_NS));
	assert_false(jitinfo_walks_fp(k));
	struct jitinfo_stats st;
	jitinfo_mgr_get_stats(m, &st);
	assert_int_equal(st.refused, 1);
	assert_int_equal(st.perf_maps, 0);
	jitinfo_mgr_free(m);
	unlink(given);
	child_stop(&c);
}

/* A jitdump file is found through the process's mapping of it (V8 --perf-prof, perf's JVMTI agent). */
static void put32(FILE *f, uint32_t v) { assert_int_equal(fwrite(&v, 4, 1, f), 1); }
static void put64(FILE *f, uint64_t v) { assert_int_equal(fwrite(&v, 8, 1, f), 1); }

static void write_dump(const char *path, pid_t pid)
{
	static const char name[] = "JS:*dumped";
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	put32(f, JITDUMP_MAGIC);
	put32(f, 1);
	put32(f, 40);
	put32(f, EM_X86_64);
	put32(f, 0);
	put32(f, (uint32_t)pid);
	put64(f, 0);
	put64(f, 0);
	put32(f, JITDUMP_CODE_LOAD);
	put32(f, (uint32_t)(56 + sizeof(name) + 4));
	put64(f, 1);
	put32(f, (uint32_t)pid);
	put32(f, (uint32_t)pid);
	put64(f, 0x9000);
	put64(f, 0x9000);
	put64(f, 4);
	put64(f, 1);
	assert_int_equal(fwrite(name, sizeof(name), 1, f), 1);
	put32(f, 0xc3c3c3c3);
	assert_int_equal(fclose(f), 0);
}

static void test_jitdump_mapping(void **state)
{
	(void)state;
	struct child c, d;
	char dump[64], dump2[64];
	child_start(&c, NULL, NULL);
	child_start(&d, NULL, NULL);
	snprintf(dump, sizeof(dump), "/tmp/jit-%d.dump", (int)c.pid);
	snprintf(dump2, sizeof(dump2), "/tmp/jit-%d.dump", (int)d.pid);
	write_dump(dump, c.pid);
	write_dump(dump2, d.pid);
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	/* Known from the mappings when the entry is made... */
	c.maps[0] = (struct mapping){ .start = 0x10000, .end = 0x11000, .prot = 5, .path = dump };
	c.proc.nmaps = 1;
	struct jitinfo *j = jitinfo_get(m, &c.proc, mono_ns());
	assert_true(jitinfo_walks_fp(j));
	struct jitinfo_frame f;
	jitinfo_frame(j, 0x9002, &f);
	assert_non_null(f.name);
	assert_string_equal(f.name, "JS:*dumped");
	assert_string_equal(f.origin, dump);
	/* ... or from perf's record of the mapping, later; a file named for another pid is not its dump. */
	struct jitinfo *k = jitinfo_get(m, &d.proc, mono_ns());
	jitinfo_mgr_on_mapping(m, d.pid, dump);
	assert_false(jitinfo_walks_fp(k));
	jitinfo_mgr_on_mapping(m, d.pid, dump2);
	assert_true(jitinfo_walks_fp(k));
	assert_true(jitinfo_names(k, 0x9003, mono_ns()));
	struct jitinfo_stats st;
	jitinfo_mgr_get_stats(m, &st);
	assert_int_equal(st.jitdumps, 2);
	unlink(dump);
	unlink(dump2);
	child_stop(&c);
	child_stop(&d);
	jitinfo_mgr_free(m);
}

/* A JVM keeps frame pointers in its compiled code only when told so: the last flag wins, the environment's
 * options before the command line's, _JAVA_OPTIONS after them. */
static bool jvm_walks_fp(char *const argv[], char *const envp[], bool with_map)
{
	struct child c;
	child_start(&c, argv, envp);
	if (with_map)
		write_file(c.map, "1000 10 f\n", "w");
	c.maps[0] = (struct mapping){ .start = 0x10000, .end = 0x20000, .prot = 5,
				      .path = "/usr/lib/jvm/java-17/lib/server/libjvm.so" };
	c.proc.nmaps = 1;
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	struct jitinfo *j = jitinfo_get(m, &c.proc, mono_ns());
	bool fp = jitinfo_walks_fp(j);
	child_stop(&c);
	jitinfo_mgr_free(m);
	return fp;
}

static void test_jvm_frame_pointers(void **state)
{
	(void)state;
	char *plus[] = { "/bin/sh", "-c", "read x", "java", "-XX:-PreserveFramePointer", "-XX:+PreserveFramePointer", NULL };
	char *minus[] = { "/bin/sh", "-c", "read x", "java", "-XX:+PreserveFramePointer", "-XX:-PreserveFramePointer", NULL };
	char *none[] = { "/bin/sh", "-c", "read x", "java", "-Xmx1g", NULL };
	char *tool_on[] = { "JAVA_TOOL_OPTIONS=-Xss1m -XX:+PreserveFramePointer", NULL };
	char *override_on[] = { "_JAVA_OPTIONS=-XX:+PreserveFramePointer", NULL };
	assert_true(jvm_walks_fp(plus, NULL, false));
	assert_false(jvm_walks_fp(minus, NULL, false));
	assert_false(jvm_walks_fp(none, NULL, true));	/* a perf map alone says nothing about a JVM's code */
	assert_true(jvm_walks_fp(none, tool_on, false));
	assert_false(jvm_walks_fp(minus, tool_on, false));	/* the command line comes after */
	assert_true(jvm_walks_fp(minus, override_on, false));	/* _JAVA_OPTIONS after it */
}

static void test_limit_and_lifetime(void **state)
{
	(void)state;
	struct child c, d;
	child_start(&c, NULL, NULL);
	child_start(&d, NULL, NULL);
	struct jitinfo_limits lim = { .max_processes = 1 };
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(&lim, &m), 0);
	struct jitinfo *j = jitinfo_get(m, &c.proc, 1);
	assert_non_null(j);
	assert_null(jitinfo_get(m, &d.proc, 1));
	jitinfo_ref(j);
	jitinfo_mgr_detach(m, c.pid);	/* exec: the pid's next code is another program's */
	assert_null(jitinfo_find(m, c.pid));
	assert_null(jitinfo_get(m, &d.proc, 1));	/* the old entry still counts while a frame holds it */
	jitinfo_release(j);
	assert_non_null(jitinfo_get(m, &d.proc, 1));
	/* Idle entries are let go. */
	assert_int_equal(jitinfo_mgr_forget_idle(m, 2), 1);
	assert_null(jitinfo_find(m, d.pid));
	struct jitinfo_stats st;
	jitinfo_mgr_get_stats(m, &st);
	assert_int_equal(st.processes, 2);
	assert_int_equal(st.untracked, 2);
	child_stop(&c);
	child_stop(&d);
	jitinfo_mgr_free(m);
}

/*
 * The unwinder's modules: anonymous code is one frame-pointer module; file code the map names (V8's builtins in
 * the node binary) becomes JIT code, and the file's module around it is cut so it is not reused across it.
 */
static void test_unwinder_modules(void **state)
{
	(void)state;
	struct child c;
	child_start(&c, NULL, NULL);
	write_file(c.map, "2000 100 Builtin:InterpreterEntryTrampoline\n7f0000001000 10 JS:*f\n", "w");
	struct jitinfo_mgr *m;
	assert_int_equal(jitinfo_mgr_new(NULL, &m), 0);
	struct jitinfo *j = jitinfo_get(m, &c.proc, mono_ns());
	struct mapping anon = { .start = 0x7f0000000000, .end = 0x7f0000100000, .anon = 1 };
	struct unwind_module mod;
	assert_true(jitinfo_module(j, &anon, 0x7f0000001004, 1, &mod));	/* named: that code's own module */
	assert_true(mod.jit);
	assert_int_equal(mod.jit_cfa_sp, 0);
	assert_int_equal(mod.start, 0x7f0000001000);
	assert_int_equal(mod.end, 0x7f0000001010);
	assert_true(jitinfo_module(j, &anon, 0x7f0000002000, 1, &mod));	/* unnamed: up to the next named */
	assert_int_equal(mod.start, 0x7f0000001010);
	assert_int_equal(mod.end, anon.end);
	struct unwind_module file = { .start = 0x1000, .end = 0x9000, .bias = 0x400, .cache_key = &c };
	mod = file;
	jitinfo_file_module(j, 0x1500, &mod);
	assert_false(mod.jit);
	assert_int_equal(mod.bias, 0x400);
	assert_int_equal(mod.start, 0x1000);
	assert_int_equal(mod.end, 0x2000);
	mod = file;
	jitinfo_file_module(j, 0x2050, &mod);
	assert_true(mod.jit);
	assert_null(mod.cache_key);
	assert_int_equal(mod.start, 0x2000);
	assert_int_equal(mod.end, 0x2100);
	mod = file;
	jitinfo_file_module(j, 0x3000, &mod);
	assert_false(mod.jit);
	assert_int_equal(mod.start, 0x2100);
	assert_int_equal(mod.end, 0x9000);
	/* Asked again once the map names it: the answer is the map's now, not the one remembered. */
	write_file(c.map, "3000 20 Builtin:ArrayPrototypePush\n", "a");
	jitinfo_mgr_refresh(m);
	mod = file;
	jitinfo_file_module(j, 0x3000, &mod);
	assert_true(mod.jit);
	assert_int_equal(mod.start, 0x3000);
	assert_int_equal(mod.end, 0x3020);
	child_stop(&c);
	jitinfo_mgr_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_perf_map),
		cmocka_unit_test(test_offline),
		cmocka_unit_test(test_map_grows),
		cmocka_unit_test(test_map_after_exit),
		cmocka_unit_test(test_refused_files),
		cmocka_unit_test(test_jitdump_mapping),
		cmocka_unit_test(test_jvm_frame_pointers),
		cmocka_unit_test(test_limit_and_lifetime),
		cmocka_unit_test(test_unwinder_modules),
		cmocka_unit_test(test_tracked_after_exit),
		cmocka_unit_test(test_tracked_exec_and_fork),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
