/*
 * `hostprof daemon --status` (src/cmd/daemon_status.h) against a real daemon: its figures are those of the
 * profiles it wrote (profiles counted, samples and lost summed from the files themselves), and where no daemon
 * runs it says so and exits 1: no status file, a daemon that stopped, one killed (its pid gone), and a file
 * whose pid is some other program. A partial status file left by a kill goes at the next start. Profiles are asked for with SIGUSR1 under a 1 h interval, so that none
 * comes by itself between the status read and the directory scan, however loaded the machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "re");
	char *text = NULL;
	size_t cap = 0;
	if (!f)
		return strdup("");
	if (getdelim(&text, &cap, '\0', f) < 0) {
		free(text);
		text = strdup("");
	}
	fclose(f);
	return text;
}

/* `daemon --status -o dir`: its exit status, its stdout and stderr in *out and *err (freed by the caller). */
static int status(const char *work, const char *dir, char **out, char **err)
{
	char o[600], e[600];
	snprintf(o, sizeof(o), "%s/status.out", work);
	snprintf(e, sizeof(e), "%s/status.err", work);
	int rc = test_run("\"$HOSTPROF\" daemon --status -o %s > %s 2> %s", dir, o, e);
	*out = read_text(o);
	*err = read_text(e);
	return rc;
}

/* The number after "key " on its own line of text; -1 when missing. */
static long long field(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, key, n) == 0 && line[n] == ' ')
			return strtoll(line + n + 1, NULL, 10);
	}
	return -1;
}

struct scan {
	unsigned profiles;
	unsigned long long samples, lost, counted;
	char newest[256];
};

/* The profiles in dir, read as any reader reads them. */
static void scan_dir(const char *dir, struct scan *s)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	memset(s, 0, sizeof(*s));
	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[1024];
		if (strncmp(de->d_name, "profile-", 8) || strstr(de->d_name, ".tmp."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		struct profile *p = test_read_profile(path);
		s->profiles++;
		s->samples += p->info.samples;
		s->lost += p->info.lost;
		s->counted += test_total_samples(p);
		if (strcmp(de->d_name, s->newest) > 0)
			snprintf(s->newest, sizeof(s->newest), "%s", de->d_name);
		profile_free(p);
	}
	closedir(d);
}

/* The daemon running, killed by the teardown when a check failed halfway. */
static pid_t running_daemon;

static pid_t start_daemon(const char *dir, const char *log)
{
	char *const argv[] = { (char *)test_hostprof(), "daemon", "-o", (char *)dir, "--interval", "1h", "-F", "99",
			       NULL };
	running_daemon = test_spawn(argv, log);
	return running_daemon;
}

static int wait_exit(pid_t pid)
{
	int st = 0;
	waitpid(pid, &st, 0);
	running_daemon = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* --status until it shows want profiles written (the file is replaced after each profile's), within 2 min. */
static char *status_with(const char *work, const char *dir, long long want)
{
	for (int i = 0; i < 1200; i++) {
		char *out, *err;
		int rc = status(work, dir, &out, &err);
		free(err);
		if (rc == 0 && field(out, "profiles_written") == want)
			return out;
		free(out);
		usleep(100000);
	}
	fail_msg("the daemon's status never showed %lld profiles", want);
	return NULL;
}

/* The figures of the status against the profiles in the directory. */
static void check_against_files(const char *dir, const char *text, pid_t pid)
{
	struct scan s;
	scan_dir(dir, &s);
	fprintf(stderr, "%s\n%u profiles in the directory: %llu samples (%llu counted in stacks), %llu lost\n", text,
		s.profiles, s.samples, s.counted, s.lost);
	assert_int_equal(field(text, "pid"), pid);
	assert_non_null(strstr(text, "\nstate running\n"));
	assert_int_equal(field(text, "profiles_written"), s.profiles);
	assert_int_equal(field(text, "samples"), s.samples);
	assert_int_equal(field(text, "lost"), s.lost);
	assert_true(s.samples > 0);
	assert_true(s.counted <= s.samples);
	assert_int_equal(field(text, "profiles_dropped"), 0);
	assert_non_null(strstr(text, s.newest));	/* last_profile */
	assert_true(field(text, "rss") > 1 << 20);
	assert_int_equal(field(text, "memory_budget"), 128 << 20);
	assert_int_equal(field(text, "otlp"), 0);
	assert_true(field(text, "uptime") >= 0);
	assert_true(field(text, "age") >= 0);
}

static void test_status_of_a_running_daemon(void **state)
{
	const struct test_workdir *w = *state;
	char dir[600], log[600], *out, *err;
	test_require_root("the daemon samples every CPU");
	snprintf(dir, sizeof(dir), "%s/profiles", w->dir);
	snprintf(log, sizeof(log), "%s/daemon.log", w->dir);

	/* Nothing ran there yet. */
	assert_int_equal(status(w->dir, dir, &out, &err), 1);
	assert_non_null(strstr(err, "no daemon is running in "));
	assert_string_equal(out, "");
	free(out);
	free(err);

	pid_t d = start_daemon(dir, log);
	out = status_with(w->dir, dir, 0);	/* written at start */
	assert_int_equal(field(out, "samples"), 0);
	free(out);
	for (long long n = 1; n <= 2; n++) {
		sleep(1);			/* a second of samples: the machine's own, at 99 Hz per CPU */
		kill(d, SIGUSR1);
		out = status_with(w->dir, dir, n);
		check_against_files(dir, out, d);
		free(out);
	}

	/* Killed: the file stays, naming a pid that is gone. */
	kill(d, SIGKILL);
	wait_exit(d);
	assert_int_equal(status(w->dir, dir, &out, &err), 1);
	fprintf(stderr, "%s", err);
	assert_non_null(strstr(err, "stale"));
	assert_non_null(strstr(err, "is gone"));
	free(out);
	free(err);

	/* Stopped: the file says so. A partial status file a kill left mid-write goes at the next start. */
	char partial[700];
	snprintf(partial, sizeof(partial), "%s/hostprof-daemon.status.tmp.Ab12Cd", dir);
	FILE *f = fopen(partial, "we");
	assert_non_null(f);
	fclose(f);
	d = start_daemon(dir, log);
	free(status_with(w->dir, dir, 0));
	assert_int_not_equal(access(partial, F_OK), 0);
	kill(d, SIGTERM);
	assert_int_equal(wait_exit(d), 0);
	assert_int_equal(status(w->dir, dir, &out, &err), 1);
	fprintf(stderr, "%s", err);
	assert_non_null(strstr(err, "stopped"));
	assert_string_equal(out, "");
	free(out);
	free(err);
	test_run("cat %s", log);
}

/* A status file naming a live pid that is no hostprof daemon (this test) is stale; one that is no status file at
 * all is refused; neither is printed. */
static void test_stale_or_foreign_file(void **state)
{
	const struct test_workdir *w = *state;
	char path[700], *out, *err;
	snprintf(path, sizeof(path), "%s/hostprof-daemon.status", w->dir);
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	fprintf(f, "format 1\npid %d\nstate running\nstarted 1\nupdated 1\nsamples 5\n", (int)getpid());
	fclose(f);
	assert_int_equal(status(w->dir, w->dir, &out, &err), 1);
	fprintf(stderr, "%s", err);
	assert_non_null(strstr(err, "stale"));
	assert_non_null(strstr(err, "is no hostprof daemon"));
	assert_string_equal(out, "");
	free(out);
	free(err);

	f = fopen(path, "we");
	fprintf(f, "\033[2Jsomething else\n");
	fclose(f);
	assert_int_equal(status(w->dir, w->dir, &out, &err), 1);
	assert_non_null(strstr(err, "no daemon status file"));
	assert_null(strchr(err, '\033'));
	free(out);
	free(err);
}

static int teardown(void **state)
{
	if (running_daemon > 0) {
		kill(running_daemon, SIGKILL);
		wait_exit(running_daemon);
	}
	return test_workdir_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_status_of_a_running_daemon, test_workdir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_or_foreign_file, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
