/* Unit tests for src/cmd/daemon_config.c and src/profile/profile_dir.c: settings precedence, parsing, naming (names
 * never reused across runs), the directory's lock, retention. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/cmd/daemon_config.h"
#include "src/profile/profile_dir.h"
#include "tests/lib/testlib.h"

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_defaults(void **state)
{
	(void)state;
	struct daemon_config c;
	daemon_config_defaults(&c);
	assert_int_equal(c.run.freq_hz, 19);
	assert_int_equal(c.interval_s, 60);
	assert_string_equal(c.output_dir, "/var/lib/hostprof");
	assert_int_equal(c.prob_threshold, 100);
	assert_true(c.run.apm);
	assert_true(c.run.go_stacks);
	assert_true(c.run.fp_chain);
	assert_true(c.run.realtime);
	assert_int_equal(c.run.max_stack, 1u << 20);
	assert_int_equal(c.run.max_frames, 1024);
}

static void test_values_and_errors(void **state)
{
	(void)state;
	struct daemon_config c;
	char err[256];
	daemon_config_defaults(&c);
	assert_int_equal(daemon_config_set(&c, "interval", "2m30s", err, sizeof(err)), 0);
	assert_int_equal(c.interval_s, 150);
	assert_int_equal(daemon_config_set(&c, "interval", "1h", err, sizeof(err)), 0);
	assert_int_equal(c.interval_s, 3600);
	assert_int_equal(daemon_config_set(&c, "interval", "45", err, sizeof(err)), 0);
	assert_int_equal(c.interval_s, 45);
	assert_int_equal(daemon_config_set(&c, "interval", "2m30", err, sizeof(err)), -EINVAL);
	assert_int_equal(daemon_config_set(&c, "interval", "0", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "interval"));
	assert_int_equal(daemon_config_set(&c, "max-bytes", "10M", err, sizeof(err)), 0);
	assert_int_equal(c.max_bytes, 10u << 20);
	assert_int_equal(daemon_config_set(&c, "probabilistic-threshold", "101", err, sizeof(err)), -EINVAL);
	assert_int_equal(daemon_config_set(&c, "probabilistic-threshold", "25", err, sizeof(err)), 0);
	assert_int_equal(c.prob_threshold, 25);
	assert_int_equal(daemon_config_set(&c, "max-stack", "0", err, sizeof(err)), 0);	/* the copy only */
	assert_int_equal(c.run.max_stack, 0);
	assert_int_equal(daemon_config_set(&c, "max-stack", "200000000", err, sizeof(err)), -EINVAL);
	assert_int_equal(daemon_config_set(&c, "max-frames", "4096", err, sizeof(err)), 0);
	assert_int_equal(c.run.max_frames, 4096);
	assert_int_equal(daemon_config_set(&c, "max-frames", "0", err, sizeof(err)), -EINVAL);
	assert_int_equal(daemon_config_set(&c, "max-frames", "65537", err, sizeof(err)), -EINVAL);
	assert_int_equal(c.run.max_frames, 4096);
	assert_int_equal(daemon_config_set(&c, "no-apm", "true", err, sizeof(err)), 0);
	assert_false(c.run.apm);
	assert_int_equal(daemon_config_set(&c, "no-kernel", "yes", err, sizeof(err)), 0);
	assert_false(c.run.kernel);
	assert_true(c.run.apm == 0 && c.run.go_stacks); /* each key sets its own setting */
	assert_int_equal(daemon_config_set(&c, "no-go-stacks", "true", err, sizeof(err)), 0);
	assert_false(c.run.go_stacks);
	assert_false(c.run.apm);
	assert_true(c.run.fp_chain);
	assert_int_equal(daemon_config_set(&c, "no-fp-chain", "yes", err, sizeof(err)), 0);
	assert_false(c.run.fp_chain);
	assert_true(c.run.kernel == 0 && c.run.go_stacks == 0);
	assert_int_equal(daemon_config_set(&c, "no-fp-chain", "false", err, sizeof(err)), 0);
	assert_true(c.run.fp_chain);
	assert_int_equal(daemon_config_set(&c, "no-fp-chain", "maybe", err, sizeof(err)), -EINVAL);
	assert_int_equal(daemon_config_set(&c, "no-realtime", "true", err, sizeof(err)), 0);
	assert_false(c.run.realtime);
	assert_true(c.run.fp_chain && c.run.apm == 0);
	assert_true(c.run.use_cache);
	assert_int_equal(daemon_config_set(&c, "no-cache", "true", err, sizeof(err)), 0);
	assert_false(c.run.use_cache);
	assert_int_equal(daemon_config_set(&c, "unwinder", "magic", err, sizeof(err)), -EINVAL);
	assert_int_equal(daemon_config_set(&c, "intervall", "5", err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "unknown key 'intervall'");
	assert_int_equal(daemon_config_set(&c, "freq", "-5", err, sizeof(err)), -EINVAL);
}

static void test_file_precedence_and_line_numbers(void **state)
{
	(void)state;
	char *dir = test_mkdtemp(), path[256], err[512];
	struct daemon_config c;
	snprintf(path, sizeof(path), "%s/hostprof.conf", dir);
	write_text(path, "# comment\n\nfreq = 49   # trailing comment\noutput = /tmp/x\ninterval=10s\n");
	daemon_config_defaults(&c);
	assert_int_equal(daemon_config_load(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.run.freq_hz, 49);
	assert_int_equal(c.interval_s, 10);
	assert_string_equal(c.output_dir, "/tmp/x");
	/* A later setting (a command-line flag) overrides the file. */
	assert_int_equal(daemon_config_set(&c, "freq", "99", err, sizeof(err)), 0);
	assert_int_equal(c.run.freq_hz, 99);

	write_text(path, "freq = 49\nbogus line\n");
	assert_int_equal(daemon_config_load(&c, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: expected 'key = value'"));
	write_text(path, "freq = 49\n\nstack-size = 100\n");
	daemon_config_defaults(&c);
	assert_int_equal(daemon_config_load(&c, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":3: invalid value '100' for 'stack-size'"));
	assert_non_null(strstr(err, "multiple of 8"));
	assert_int_equal(c.run.stack_size, 16384);
	assert_true(daemon_config_load(&c, "/nonexistent/hostprof.conf", err, sizeof(err)) == -ENOENT);
	test_rmdir_rf(dir);
	free(dir);
}

static void touch(const char *dir, const char *name, size_t size)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (size_t i = 0; i < size; i++)
		fputc('x', f);
	fclose(f);
}

static int exists(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void test_names_sort_by_time(void **state)
{
	(void)state;
	char a[256], b[256], c[256];
	assert_int_equal(profile_dir_name("/d", 1700000000, 7, a, sizeof(a)), 0);
	assert_string_equal(a, "/d/profile-20231114T221320Z-000007.msgpack");
	assert_int_equal(profile_dir_name("/d", 1700000000, 8, b, sizeof(b)), 0);
	assert_int_equal(profile_dir_name("/d", 1700000001, 0, c, sizeof(c)), 0);
	assert_true(strcmp(a, b) < 0 && strcmp(b, c) < 0);
	assert_int_equal(profile_dir_name("/d", 1700000000, 0, a, 10), -ENAMETOOLONG);
}

static void test_retention_and_temporaries(void **state)
{
	(void)state;
	char *dir = test_mkdtemp();
	touch(dir, "profile-20260101T000000Z-000000.msgpack", 100);
	touch(dir, "profile-20260101T000100Z-000001.msgpack", 100);
	touch(dir, "profile-20260101T000200Z-000002.msgpack", 100);
	touch(dir, "profile-20260101T000300Z-000003.msgpack", 100);
	touch(dir, "notes.txt", 5000);
	touch(dir, "profile-20260101T000400Z-000004.msgpack.tmp.AbC123", 50);

	assert_int_equal(profile_dir_clean_temporaries(dir), 1);
	assert_false(exists(dir, "profile-20260101T000400Z-000004.msgpack.tmp.AbC123"));
	assert_int_equal(profile_dir_retain(dir, 3, 0), 1);
	assert_false(exists(dir, "profile-20260101T000000Z-000000.msgpack"));
	assert_true(exists(dir, "profile-20260101T000100Z-000001.msgpack"));
	assert_int_equal(profile_dir_retain(dir, 0, 250), 1); /* 300 bytes > 250: the oldest goes */
	assert_false(exists(dir, "profile-20260101T000100Z-000001.msgpack"));
	assert_int_equal(profile_dir_retain(dir, 0, 1), 1);   /* the newest stays whatever the limit */
	assert_true(exists(dir, "profile-20260101T000300Z-000003.msgpack"));
	assert_true(exists(dir, "notes.txt"));                /* not ours: never touched */
	assert_int_equal(profile_dir_retain(dir, 0, 0), 0);
	test_rmdir_rf(dir);
	free(dir);
}

/* A name's number continues from the highest a profile of that second has in the directory, whoever wrote it:
 * a restarted daemon never takes a name an earlier run used, and names still sort in the order written. */
static void test_next_name_continues_across_runs(void **state)
{
	(void)state;
	char *dir = test_mkdtemp(), a[512], b[512], expect[512];
	assert_int_equal(profile_dir_next_name(dir, 1700000000, a, sizeof(a)), 0);
	snprintf(expect, sizeof(expect), "%s/profile-20231114T221320Z-000000.msgpack", dir);
	assert_string_equal(a, expect);
	touch(dir, "profile-20231114T221320Z-000000.msgpack", 1);
	touch(dir, "profile-20231114T221320Z-000007.msgpack", 1);	/* a gap: the highest counts */
	touch(dir, "profile-20231114T221321Z-000042.msgpack", 1);	/* another second: does not */
	touch(dir, "profile-20231114T221320Z-000099.msgpack.tmp.AbC123", 1);	/* not a profile */
	touch(dir, "profile-20231114T221320Z-12345.msgpack", 1);	/* not ours: five digits */
	assert_int_equal(profile_dir_next_name(dir, 1700000000, a, sizeof(a)), 0);
	snprintf(expect, sizeof(expect), "%s/profile-20231114T221320Z-000008.msgpack", dir);
	assert_string_equal(a, expect);
	assert_int_equal(profile_dir_next_name(dir, 1700000001, b, sizeof(b)), 0);
	snprintf(expect, sizeof(expect), "%s/profile-20231114T221321Z-000043.msgpack", dir);
	assert_string_equal(b, expect);
	touch(dir, "profile-20231114T221320Z-999999.msgpack", 1);
	assert_int_equal(profile_dir_next_name(dir, 1700000000, a, sizeof(a)), -EEXIST);
	assert_int_equal(profile_dir_next_name("/nonexistent/dir", 1700000000, a, sizeof(a)), -ENOENT);
	test_rmdir_rf(dir);
	free(dir);
}

/* One holder at a time (flock locks are per open file, so a second lock in this process is refused too), told
 * the holder's pid; released, the lock can be taken again. A symlink planted under the lock's name is refused. */
static void test_lock_one_holder(void **state)
{
	(void)state;
	char *dir = test_mkdtemp(), path[512];
	int fd = -1, other = -1, holder = -1;
	assert_int_equal(profile_dir_lock(dir, &fd, &holder), 0);
	assert_true(fd >= 0);
	assert_int_equal(profile_dir_lock(dir, &other, &holder), -EWOULDBLOCK);
	assert_int_equal(holder, getpid());
	assert_int_equal(other, -1);
	profile_dir_unlock(fd);
	assert_int_equal(profile_dir_lock(dir, &other, &holder), 0);
	profile_dir_unlock(other);
	profile_dir_unlock(-1);
	snprintf(path, sizeof(path), "%s/" PROFILE_DIR_LOCK_NAME, dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/elsewhere", path), 0);
	assert_int_equal(profile_dir_lock(dir, &fd, &holder), -ELOOP);
	test_rmdir_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_values_and_errors),
		cmocka_unit_test(test_file_precedence_and_line_numbers),
		cmocka_unit_test(test_names_sort_by_time),
		cmocka_unit_test(test_retention_and_temporaries),
		cmocka_unit_test(test_next_name_continues_across_runs),
		cmocka_unit_test(test_lock_one_holder),
	};
	return cmocka_run_group_tests_name("daemon_config", tests, NULL, NULL);
}
