/*
 * Integration test of `hostprof daemon`: a real daemon sampling the whole machine at a short interval while a
 * fixture runs; SIGUSR1, SIGHUP (reload), SIGTERM and SIGKILL; every profile in the directory must be whole and
 * readable, retention and the reloaded settings must hold, and the fixture's functions must be in the profiles.
 * Quick restarts keep every profile; a second daemon on a directory in use is refused, across reloads too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

struct dir_scan {
	unsigned profiles, temporaries, unreadable;
	uint64_t samples;
	uint64_t max_duration_ns, min_duration_ns;
	uint64_t fixture_samples;
};

static void scan_dir(const char *dir, struct dir_scan *s)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	memset(s, 0, sizeof(*s));
	s->min_duration_ns = UINT64_MAX;
	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[1024], err[256];
		if (strstr(de->d_name, ".tmp."))
			s->temporaries++;
		if (strncmp(de->d_name, "profile-", 8) || !strstr(de->d_name, ".msgpack") || strstr(de->d_name, ".tmp."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		struct profile *p = NULL;
		if (profile_read_file(path, &p, err, sizeof(err)) < 0) {
			fprintf(stderr, "unreadable: %s\n", err);
			s->unreadable++;
			continue;
		}
		s->profiles++;
		s->samples += test_total_samples(p);
		if (p->info.duration_ns > s->max_duration_ns)
			s->max_duration_ns = p->info.duration_ns;
		if (p->info.duration_ns < s->min_duration_ns)
			s->min_duration_ns = p->info.duration_ns;
		const char *chain[] = { "main", "path_a", "leaf_a" };
		s->fixture_samples += test_samples_with_chain(p, chain, 3);
		profile_free(p);
	}
	closedir(d);
}

static int wait_exit(pid_t pid)
{
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_daemon_lifecycle(void **state)
{
	(void)state;
	test_require_root("the daemon samples every CPU");
	char *dir = test_mkdtemp(), out[512], conf[512], log[512], fixture[256];
	snprintf(out, sizeof(out), "%s/profiles", dir);
	snprintf(conf, sizeof(conf), "%s/hostprof.conf", dir);
	snprintf(log, sizeof(log), "%s/daemon.log", dir);
	FILE *f = fopen(conf, "w");
	fprintf(f, "interval = 2s\nmax-files = 10\n");
	fclose(f);

	char *fargv[] = { (char *)test_fixture_path("split_paths", fixture, sizeof(fixture)), "12", NULL };
	pid_t work = test_spawn(fargv, NULL);
	char *dargv[] = { (char *)test_hostprof(), "daemon", "--config", conf, "-o", out, "-F", "99", NULL };
	pid_t d = test_spawn(dargv, log);
	sleep(3);
	kill(d, SIGUSR1); /* an extra profile, now */
	sleep(2);
	/* Reload: shorter intervals and a retention of 3 files. */
	f = fopen(conf, "w");
	fprintf(f, "interval = 1s\nmax-files = 3\n");
	fclose(f);
	kill(d, SIGHUP);
	sleep(4);
	kill(d, SIGTERM);
	assert_int_equal(wait_exit(d), 0);

	struct dir_scan s;
	scan_dir(out, &s);
	fprintf(stderr, "daemon: %u profiles, %llu samples (%llu in main->path_a->leaf_a), durations %.2f..%.2f s\n",
		s.profiles, (unsigned long long)s.samples, (unsigned long long)s.fixture_samples,
		s.min_duration_ns / 1e9, s.max_duration_ns / 1e9);
	test_run("cat %s", log);
	assert_int_equal(s.unreadable, 0);
	assert_int_equal(s.temporaries, 0);
	assert_true(s.profiles >= 2);
	assert_true(s.profiles <= 3);			/* the reloaded retention */
	/* After the reload, profiles follow the 1 s interval: 4 s give at least 3 (the old 2 s would give 2). */
	assert_int_equal(test_run("test $(sed -n '/reloaded/,$p' %s | grep -c '(interval)') -ge 3", log), 0);
	assert_true(s.fixture_samples > 100);
	assert_int_equal(test_run("grep -q 'reloaded' %s", log), 0);
	assert_int_equal(test_run("grep -q 'SIGUSR1' %s", log), 0);

	/* SIGKILL at any moment leaves no partial profile visible; the next start cleans up after it. */
	for (int round = 0; round < 3; round++) {
		char *kargv[] = { (char *)test_hostprof(), "daemon", "-o", out, "-F", "99", "--interval", "1",
				  "--max-files", "0", NULL };
		d = test_spawn(kargv, log);
		usleep(1500000 + round * 370000);
		kill(d, SIGKILL);
		wait_exit(d);
		scan_dir(out, &s);
		assert_int_equal(s.unreadable, 0);
	}
	kill(work, SIGKILL);
	wait_exit(work);
	test_rmdir_rf(dir);
	free(dir);
}

/* The host id in the header of the first profile in dir (a daemon's output) or of the file path. */
static char *header_host_id(const char *path_or_dir)
{
	char path[1024];
	DIR *d = opendir(path_or_dir);
	struct dirent *de;
	snprintf(path, sizeof(path), "%s", path_or_dir);
	while (d && (de = readdir(d))) {
		if (!strncmp(de->d_name, "profile-", 8) && !strstr(de->d_name, ".tmp.")) {
			snprintf(path, sizeof(path), "%s/%s", path_or_dir, de->d_name);
			break;
		}
	}
	if (d)
		closedir(d);
	struct profile *p = test_read_profile(path);
	char *id = strdup(p->info.host_id ? p->info.host_id : "");
	profile_free(p);
	return id;
}

/* record and the daemon write the same host id into a profile's header: /etc/machine-id, or --host-id. */
static void host_id_pair(const char *dir, const char *flag, char **from_record, char **from_daemon)
{
	char out[600], rec[600];
	snprintf(rec, sizeof(rec), "%s/record.msgpack", dir);
	snprintf(out, sizeof(out), "%s/daemon", dir);
	assert_int_equal(test_run("rm -rf %s %s && \"$HOSTPROF\" record -q -F 99 %s -o %s -- sleep 0.2", rec, out, flag,
				  rec), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" daemon -F 19 --interval 60 %s -o %s --log-level warn & d=$!; "
				  "sleep 1.5; kill -TERM $d; wait $d", flag, out), 0);
	*from_record = header_host_id(rec);
	*from_daemon = header_host_id(out);
	fprintf(stderr, "host id %s: record '%s', daemon '%s'\n", flag[0] ? flag : "(default)", *from_record,
		*from_daemon);
}

static void test_host_id_same_as_record(void **state)
{
	(void)state;
	test_require_root("the daemon samples every CPU");
	test_require_perf();
	char *dir = test_mkdtemp(), *rec, *dmn, machine_id[128] = "";
	FILE *f = fopen("/etc/machine-id", "re");
	if (f && fgets(machine_id, sizeof(machine_id), f))
		machine_id[strcspn(machine_id, "\n")] = '\0';
	if (f)
		fclose(f);
	host_id_pair(dir, "", &rec, &dmn);
	assert_string_equal(rec, machine_id);
	assert_string_equal(dmn, machine_id);
	free(rec);
	free(dmn);
	host_id_pair(dir, "--host-id rack-7.example", &rec, &dmn);
	assert_string_equal(rec, "rack-7.example");
	assert_string_equal(dmn, "rack-7.example");
	free(rec);
	free(dmn);
	test_rmdir_rf(dir);
	free(dir);
}

/* The whole log, read into memory (NUL-terminated, its length in *len). */
static char *read_log(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);
	assert_non_null(f);
	assert_non_null(buf);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	return buf;
}

/*
 * A hostile service name (a newline, a forged journald priority, terminal escapes) published by an APM process
 * reaches the daemon's journald-formatted log as one line at the daemon's own info priority, escaped; no line
 * begins with the forged "<0>" and no ESC byte gets through.
 */
static void test_daemon_log_escapes_process_strings(void **state)
{
	(void)state;
	test_require_root("the daemon samples every CPU and reads the APM process's memory");
	char *dir = test_mkdtemp(), out[512], log[512], app[256], lib[256], sock[512];
	snprintf(out, sizeof(out), "%s/profiles", dir);
	snprintf(log, sizeof(log), "%s/daemon.log", dir);
	snprintf(sock, sizeof(sock), "%s/apm.sock", dir);
	test_fixture_path("apm_app", app, sizeof(app));
	test_fixture_path("elastic-jvmti-linux-x86_64.so", lib, sizeof(lib));
	char *abs_lib = realpath(lib, NULL);
	assert_non_null(abs_lib);

	setenv("JOURNAL_STREAM", "8:12345", 1); /* the daemon writes journald priorities */
	char *dargv[] = { (char *)test_hostprof(), "daemon", "-o", out, "-F", "99", "--interval", "2",
			  "--log-level", "info", NULL };
	pid_t d = test_spawn(dargv, log);
	unsetenv("JOURNAL_STREAM");
	char *aargv[] = { app, "--lib", abs_lib, "--socket", sock, "--log", dir, "--threads", "2", "--seconds", "5",
			  "--service", "svc\n<0>hostprof: emerg: x\033[2J\033]0;title\007", NULL };
	pid_t a = test_spawn(aargv, NULL);
	assert_int_equal(wait_exit(a), 0);
	kill(d, SIGTERM);
	assert_int_equal(wait_exit(d), 0);

	size_t len;
	char *text = read_log(log, &len);
	fprintf(stderr, "%s", text);
	assert_null(memchr(text, '\033', len));
	assert_null(memchr(text, '\007', len));
	/* every line is the daemon's, with one of its priorities */
	for (char *line = text; line < text + len; line = strchr(line, '\n') + 1) {
		assert_true(!strncmp(line, "<3>hostprof: ", 13) || !strncmp(line, "<4>hostprof: ", 13) ||
			    !strncmp(line, "<6>hostprof: ", 13));
		assert_non_null(strchr(line, '\n'));
	}
	assert_non_null(strstr(text, "<6>hostprof: apm: pid "));
	assert_non_null(strstr(text, ": APM agent: service 'svc\\n<0>hostprof: emerg: x\\x1b[2J\\x1b]0;title\\x07', "
				     "environment 'test-env'"));
	free(text);
	free(abs_lib);
	test_rmdir_rf(dir);
	free(dir);
}

/* Profiles in dir (names "profile-*.msgpack"), each read whole; the names into names[] when given. */
static unsigned count_profiles(const char *dir, char names[][256], unsigned max)
{
	struct dir_scan s;
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;
	scan_dir(dir, &s);
	assert_int_equal(s.unreadable, 0);
	assert_int_equal(s.temporaries, 0);
	assert_non_null(d);
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, "profile-", 8) && n < max && names)
			snprintf(names[n++], sizeof(names[0]), "%s", de->d_name);
	}
	closedir(d);
	return s.profiles;
}

/* Until the log says n daemons ran (the last has the directory's lock and its signal handlers), at most 30 s. */
static void wait_started_n(const char *log, int n)
{
	for (int i = 0; i < 3000; i++) {
		if (test_run("test $(grep -c 'profiling all CPUs' %s 2> /dev/null) -ge %d", log, n) == 0)
			return;
		usleep(10000);
	}
	fail_msg("the daemon did not start: %s", log);
}

static void wait_started(const char *log)
{
	wait_started_n(log, 1);
}

/*
 * Four daemons started and stopped one after the other on one directory, as fast as they go: each writes its
 * profile at exit, and every one of them is there. Their names take the second the run started, so runs in the
 * same second used to write the same name and the later replaced the earlier (4 "wrote" lines, 2 files).
 */
static void test_restarts_keep_every_profile(void **state)
{
	(void)state;
	test_require_root("the daemon samples every CPU");
	test_require_perf();
	char *dir = test_mkdtemp(), out[512], log[512], names[8][256];
	snprintf(out, sizeof(out), "%s/profiles", dir);
	snprintf(log, sizeof(log), "%s/daemon.log", dir);
	for (int i = 0; i < 4; i++) {
		char *dargv[] = { (char *)test_hostprof(), "daemon", "-o", out, "-F", "19", "--interval", "60", NULL };
		pid_t d = test_spawn(dargv, log);
		wait_started_n(log, i + 1);
		kill(d, SIGTERM);
		assert_int_equal(wait_exit(d), 0);
	}
	test_run("cat %s; ls %s", log, out);
	assert_int_equal(test_run("test $(grep -c ': wrote ' %s) = 4", log), 0);
	unsigned n = count_profiles(out, names, 8);
	assert_int_equal(n, 4);
	for (unsigned i = 0; i < n; i++)	/* every name in the log is a file */
		assert_int_equal(test_run("grep -q '%s' %s", names[i], log), 0);
	test_rmdir_rf(dir);
	free(dir);
}

/*
 * A second daemon on a directory a daemon writes into is refused: one line naming the directory and the pid of
 * the daemon that has it, exit status 1, nothing written or removed there. A reload that moves the first daemon
 * to another directory takes that one's lock and lets the first go.
 */
static void test_second_daemon_refused(void **state)
{
	(void)state;
	test_require_root("the daemon samples every CPU");
	test_require_perf();
	char *dir = test_mkdtemp(), out[512], out2[512], log[512], err[512], conf[512];
	snprintf(out, sizeof(out), "%s/profiles", dir);
	snprintf(out2, sizeof(out2), "%s/moved", dir);
	snprintf(log, sizeof(log), "%s/daemon.log", dir);
	snprintf(err, sizeof(err), "%s/second.log", dir);
	snprintf(conf, sizeof(conf), "%s/hostprof.conf", dir);
	FILE *f = fopen(conf, "w");
	fprintf(f, "output = %s\n", out);
	fclose(f);
	char *first[] = { (char *)test_hostprof(), "daemon", "-c", conf, "-F", "19", "--interval", "60", NULL };
	pid_t d = test_spawn(first, log);
	wait_started(log);
	assert_int_equal(test_run("touch %s/profile-20260101T000000Z-000000.msgpack.tmp.AbC123", out), 0);

	char *second[] = { (char *)test_hostprof(), "daemon", "-o", out, "-F", "19", NULL };
	assert_int_equal(wait_exit(test_spawn(second, err)), 1);
	test_run("cat %s", err);
	assert_int_equal(test_run("test $(wc -l < %s) = 1 && grep -q '^hostprof: error: not starting: output directory "
				  "%s is in use by another hostprof daemon (pid %d)$' %s", err, out, (int)d, err), 0);
	assert_int_equal(test_run("test -e %s/profile-20260101T000000Z-000000.msgpack.tmp.AbC123", out), 0);

	/* reloaded into another directory: that one is the first daemon's now, the old one free */
	f = fopen(conf, "w");
	fprintf(f, "output = %s\n", out2);
	fclose(f);
	kill(d, SIGHUP);
	for (int i = 0; i < 300 && test_run("grep -q 'reloaded' %s", log) != 0; i++)
		usleep(100000);
	char *into_new[] = { (char *)test_hostprof(), "daemon", "-o", out2, "-F", "19", NULL };
	assert_int_equal(wait_exit(test_spawn(into_new, err)), 1);
	assert_int_equal(test_run("grep -q 'output directory %s is in use by another hostprof daemon (pid %d)' %s", out2,
				  (int)d, err), 0);
	char *into_old[] = { (char *)test_hostprof(), "daemon", "-o", out, "-F", "19", "--interval", "60", NULL };
	pid_t d2 = test_spawn(into_old, err);
	wait_started(err);
	kill(d2, SIGTERM);
	assert_int_equal(wait_exit(d2), 0);
	kill(d, SIGTERM);
	assert_int_equal(wait_exit(d), 0);
	test_run("cat %s", log);
	assert_int_equal(count_profiles(out2, NULL, 0), 1);	/* the first daemon's exit profile */
	test_rmdir_rf(dir);
	free(dir);
}

static void test_daemon_bad_config(void **state)
{
	(void)state;
	char *dir = test_mkdtemp();
	assert_int_equal(test_run("printf 'freq = fast\\n' > %s/bad.conf", dir), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" daemon --config %s/bad.conf -o %s/out 2> %s/err", dir, dir, dir), 1);
	assert_int_equal(test_run("grep -q \"bad.conf:1: invalid value 'fast' for 'freq'\" %s/err", dir), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" daemon --bogus 2> /dev/null"), 2);
	test_rmdir_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_daemon_lifecycle),
		cmocka_unit_test(test_host_id_same_as_record),
		cmocka_unit_test(test_daemon_bad_config),
		cmocka_unit_test(test_restarts_keep_every_profile),
		cmocka_unit_test(test_second_daemon_refused),
		cmocka_unit_test(test_daemon_log_escapes_process_strings),
	};
	return cmocka_run_group_tests_name("daemon (integration)", tests, NULL, NULL);
}
