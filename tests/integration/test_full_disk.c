/*
 * Integration tests of outputs on an unwritable or full disk: `record` refuses an -o it cannot create before it
 * records anything, and saves the profile to a fallback place (saying where) when the final write fails; the
 * daemon holds the intervals a full disk cannot take, makes room by deleting its own oldest profiles (logging
 * each), and writes the held intervals once there is space again.
 * The full disk is a small tmpfs each test mounts (root); where the kernel refuses the mount, they skip, saying so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testlib.h"

/* A tmpfs of size bytes mounted at dir/mnt, filled to the last block by dir/mnt/fill; returns the mount point. */
static void mount_full_tmpfs(const char *dir, const char *size, char *mnt, size_t len)
{
	char opts[64];
	test_require_root("mounting a small tmpfs to fill");
	snprintf(mnt, len, "%s/mnt", dir);
	snprintf(opts, sizeof(opts), "size=%s,mode=0755", size);
	assert_int_equal(test_run("mkdir -p %s", mnt), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, opts) < 0)
		test_skip("the kernel refuses to mount a tmpfs here (%s)", strerror(errno));
	test_run("dd if=/dev/zero of=%s/fill bs=4096 2>/dev/null", mnt);
	assert_int_equal(test_run("test $(df --output=avail %s | tail -1) -eq 0", mnt), 0);
}

/* An -o that cannot be created is refused before the command even starts. */
static void test_record_unwritable_output(void **state)
{
	struct test_workdir *f = *state;
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s/missing/p.msgpack -- touch %s/ran 2>%s/err", f->dir,
				  f->dir, f->dir), 2);
	assert_int_equal(test_run("grep -q 'cannot write .*/missing/p.msgpack: No such file or directory "
				  "(nothing recorded)' %s/err", f->dir), 0);
	assert_int_equal(test_run("test $(wc -l < %s/err) -eq 1", f->dir), 0);
	assert_int_not_equal(test_run("test -e %s/ran", f->dir), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" record -q -o %s -- touch %s/ran 2>%s/err", f->dir, f->dir, f->dir), 2);
	assert_int_equal(test_run("grep -q 'Is a directory (nothing recorded)' %s/err", f->dir), 0);
	assert_int_not_equal(test_run("test -e %s/ran", f->dir), 0);
}

/* A full disk at the end: the profile lands in $TMPDIR, the message names the file, nothing is left on -o. */
static void test_record_full_disk_fallback(void **state)
{
	struct test_workdir *f = *state;
	char mnt[512], fixture[256], saved[1024] = "";
	test_require_perf();
	mount_full_tmpfs(f->dir, "256k", mnt, sizeof(mnt));
	test_fixture_path("split_paths", fixture, sizeof(fixture));
	assert_int_equal(test_run("mkdir -p %s/fallback", f->dir), 0);
	int rc = test_run("TMPDIR=%s/fallback \"$HOSTPROF\" record -q -F 999 -o %s/p.msgpack -- %s 1 2>%s/err", f->dir,
			  mnt, fixture, f->dir);
	test_run("cat %s/err", f->dir);
	assert_int_equal(test_run("ls -A %s | grep -v '^fill$' | grep -q .", mnt), 1);	/* no partial file */
	assert_int_equal(rc, 1);	/* the profile is not where it was asked for */
	assert_int_equal(test_run("grep -q 'cannot write .*/mnt/p.msgpack: No space left on device' %s/err", f->dir), 0);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "sed -n 's/^hostprof: saved the profile to \\(.*\\) instead$/\\1/p' %s/err", f->dir);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(saved, sizeof(saved), p));
	pclose(p);
	saved[strcspn(saved, "\n")] = '\0';
	assert_non_null(strstr(saved, "/fallback/hostprof-unsaved-"));
	assert_non_null(strstr(saved, "-p.msgpack"));
	struct profile *prof = test_read_profile(saved);
	const char *chain[] = { "main", "path_a", "leaf_a" };
	uint64_t total = test_total_samples(prof), fixture_samples = test_samples_with_chain(prof, chain, 3);
	fprintf(stderr, "fallback profile %s: %llu samples, %llu in main->path_a->leaf_a\n", saved,
		(unsigned long long)total, (unsigned long long)fixture_samples);
	profile_free(prof);
	assert_true(fixture_samples > 50);	/* the fixture's run is in it (fewer samples on a loaded machine) */
}

/* The profile-*.msgpack files of dir, in name order, one a line, into out (NUL-terminated). */
static void list_profiles(const char *dir, char *out, size_t len)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "ls %s | grep '^profile-.*\\.msgpack$'", dir);
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(out, 1, len - 1, p) : 0;
	out[n] = '\0';
	if (p)
		pclose(p);
}

/* Whether log has n lines containing text within 60 s. */
static int wait_for_lines(const char *log, const char *text, int n)
{
	for (int tries = 0; tries < 600; tries++, usleep(100 * 1000)) {
		char cmd[1024];
		snprintf(cmd, sizeof(cmd), "test $(grep -cF '%s' %s) -ge %d", text, log, n);
		if (system(cmd) == 0)
			return 1;
	}
	return 0;
}

/*
 * The daemon on a full disk: it deletes its two old profiles to make room (logged), still cannot write, holds
 * the intervals in memory; once the disk has space again they are all written, in order, and readable.
 */
static void test_daemon_full_disk(void **state)
{
	struct test_workdir *f = *state;
	char mnt[512], log[600], names[8192];
	test_require_perf();
	mount_full_tmpfs(f->dir, "512k", mnt, sizeof(mnt));
	snprintf(log, sizeof(log), "%s/daemon.log", f->dir);
	/* two profiles of an earlier run, the oldest in the directory, the ones to go to make room: empty, so that
	 * deleting them frees no block and the disk stays full */
	assert_int_equal(test_run("touch %s/profile-20000101T000001Z-000000.msgpack "
				  "%s/profile-20000101T000002Z-000000.msgpack", mnt, mnt), 0);
	pid_t d = fork();
	if (d == 0) {
		if (!freopen(log, "w", stderr))
			_exit(126);
		execl(test_hostprof(), "hostprof", "daemon", "-o", mnt, "-F", "99", "--interval", "1",
		      "--log-level", "info", (char *)NULL);
		_exit(127);
	}
	/* two intervals held on the full disk (a sanitizer build starts slowly: waited for, up to 60 s) */
	int held = wait_for_lines(log, "held in memory to retry", 2);
	char while_full[8192];
	list_profiles(mnt, while_full, sizeof(while_full));
	int freed = test_run("rm %s/fill", mnt);
	int written = wait_for_lines(log, "(interval)", 1);
	kill(d, SIGTERM);
	int status;
	waitpid(d, &status, 0);
	test_run("cat %s", log);
	assert_true(held && written);
	assert_string_equal(while_full, "");	/* the old ones were deleted, no new one fits */
	assert_int_equal(freed, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(test_run("test $(grep -c 'disk full: removed the oldest profile profile-20000101T00000' %s) -eq 2",
				  log), 0);
	assert_int_equal(test_run("grep -q 'No space left on device; held in memory to retry' %s", log), 0);
	/* every interval held was written, none dropped */
	assert_int_equal(test_run("test $(grep -c 'held in memory until now' %s) -eq $(grep -c 'held in memory to retry' %s)",
				  log, log), 0);
	assert_int_not_equal(test_run("grep -q 'dropped the unwritten profile' %s", log), 0);
	/* every interval is there, whole, and the names sort in the order the profiles were written */
	list_profiles(mnt, names, sizeof(names));
	char cmd[1024], in_log_order[8192] = "";
	snprintf(cmd, sizeof(cmd), "sed -n 's|^hostprof: info: wrote .*/\\(profile-[^ ]*\\) .*|\\1|p' %s", log);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	in_log_order[fread(in_log_order, 1, sizeof(in_log_order) - 1, p)] = '\0';
	pclose(p);
	assert_string_equal(names, in_log_order);
	unsigned n = 0;
	for (char *line = names; *line; line = strchr(line, '\n') + 1, n++) {
		char path[1024];
		snprintf(path, sizeof(path), "%s/%.*s", mnt, (int)strcspn(line, "\n"), line);
		profile_free(test_read_profile(path));
	}
	fprintf(stderr, "daemon on a full disk: %u profiles written once there was room\n", n);
	assert_true(n >= 3);
}

/* The workdir's teardown, after the tmpfs a failed test may have left mounted. */
static int unmount_teardown(void **state)
{
	struct test_workdir *f = *state;
	char mnt[600];
	snprintf(mnt, sizeof(mnt), "%s/mnt", f->dir);
	umount2(mnt, MNT_DETACH);
	return test_workdir_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_record_unwritable_output, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_record_full_disk_fallback, test_workdir_setup, unmount_teardown),
		cmocka_unit_test_setup_teardown(test_daemon_full_disk, test_workdir_setup, unmount_teardown),
	};
	return cmocka_run_group_tests_name("full disk (integration)", tests, NULL, NULL);
}
