/*
 * Unit tests for src/base/atomic_file.c, the one way profiles and replay files reach the disk: the new contents
 * replace the old in one rename, with the mode the umask gives; a discarded or failed write leaves the old file
 * and no temporary file behind; a temporary name never clobbers a file that exists; the _new commit never replaces
 * a file.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/atomic_file.h"
#include "tests/lib/testlib.h"

/* Entries of dir: all of them, and those that are temporary files (".tmp." in the name). */
static int count_entries(const char *dir, int *temps)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	assert_non_null(d);
	*temps = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		n++;
		*temps += strstr(e->d_name, ".tmp.") != NULL;
	}
	closedir(d);
	return n;
}

static void assert_contents(const char *path, const char *expect)
{
	char buf[256] = "";
	FILE *f = fopen(path, "re");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	assert_string_equal(buf, expect);
}

static void test_replaces_with_umask_mode(void **state)
{
	struct test_workdir *w = *state;
	char path[600];
	struct stat st;
	int temps;
	snprintf(path, sizeof(path), "%s/f", w->dir);
	assert_int_equal(atomic_file_write(path, "old", 3), 0);
	mode_t old = umask(027);
	assert_int_equal(atomic_file_write(path, "new contents", 12), 0);
	umask(old);
	assert_contents(path, "new contents");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	assert_int_equal(count_entries(w->dir, &temps), 1);
	assert_int_equal(temps, 0);
}

/* Until the commit, readers see the old file; a discard keeps it and removes the temporary file. */
static void test_stream_then_discard(void **state)
{
	struct test_workdir *w = *state;
	char path[600];
	struct atomic_file *f;
	int temps;
	snprintf(path, sizeof(path), "%s/f", w->dir);
	assert_int_equal(atomic_file_write(path, "old", 3), 0);
	assert_int_equal(atomic_file_new(path, &f), 0);
	fputs("half of the new", atomic_file_stream(f));
	fflush(atomic_file_stream(f));
	assert_contents(path, "old");
	assert_int_equal(count_entries(w->dir, &temps), 2);
	assert_int_equal(temps, 1);
	atomic_file_discard(f);
	assert_contents(path, "old");
	assert_int_equal(count_entries(w->dir, &temps), 1);
	assert_int_equal(temps, 0);
	atomic_file_discard(NULL);

	assert_int_equal(atomic_file_new(path, &f), 0);
	fputs("whole", atomic_file_stream(f));
	assert_contents(path, "old");
	assert_int_equal(atomic_file_commit(f), 0);
	assert_contents(path, "whole");
}

/* Errors: a missing directory, a directory in the way, a write past the file size limit (like ENOSPC). */
static void test_failures_leave_nothing(void **state)
{
	struct test_workdir *w = *state;
	char path[600];
	struct atomic_file *f;
	struct rlimit old, small;
	int temps;
	snprintf(path, sizeof(path), "%s/missing/f", w->dir);
	assert_int_equal(atomic_file_new(path, &f), -ENOENT);
	assert_int_equal(atomic_file_write(path, "x", 1), -ENOENT);
	snprintf(path, sizeof(path), "%s/adir", w->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	int rc = atomic_file_write(path, "x", 1);
	assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);

	snprintf(path, sizeof(path), "%s/f", w->dir);
	assert_int_equal(atomic_file_write(path, "old", 3), 0);
	static char big[1 << 17];
	memset(big, 'x', sizeof(big));
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = old;
	small.rlim_cur = 4096;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	rc = atomic_file_write(path, big, sizeof(big));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(rc, -EFBIG);
	assert_contents(path, "old");
	assert_int_equal(count_entries(w->dir, &temps), 2);	/* f and adir */
	assert_int_equal(temps, 0);
}

/* The probe says what a write would meet, and leaves nothing behind: neither a file nor a temporary. */
static void test_probe(void **state)
{
	struct test_workdir *w = *state;
	char path[600];
	int temps;
	snprintf(path, sizeof(path), "%s/f", w->dir);
	assert_int_equal(atomic_file_probe(path), 0);
	assert_int_equal(count_entries(w->dir, &temps), 0);
	assert_int_equal(atomic_file_write(path, "old", 3), 0);
	assert_int_equal(atomic_file_probe(path), 0);
	assert_contents(path, "old");
	assert_int_equal(atomic_file_probe(w->dir), -EISDIR);
	snprintf(path, sizeof(path), "%s/missing/f", w->dir);
	assert_int_equal(atomic_file_probe(path), -ENOENT);
	if (geteuid() != 0) { /* root writes into a read-only directory all the same */
		snprintf(path, sizeof(path), "%s/ro", w->dir);
		assert_int_equal(mkdir(path, 0555), 0);
		strcat(path, "/f");
		assert_int_equal(atomic_file_probe(path), -EACCES);
	}
	assert_int_equal(count_entries(w->dir, &temps), geteuid() != 0 ? 2 : 1);
	assert_int_equal(temps, 0);
}

/* Many handles open at once on one path get distinct temporary files; the last commit wins. */
static void test_distinct_temporaries(void **state)
{
	struct test_workdir *w = *state;
	char path[600];
	struct atomic_file *f[20];
	int temps;
	snprintf(path, sizeof(path), "%s/f", w->dir);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(atomic_file_new(path, &f[i]), 0);
		fprintf(atomic_file_stream(f[i]), "writer %d", i);
	}
	assert_int_equal(count_entries(w->dir, &temps), 20);
	assert_int_equal(temps, 20);
	for (int i = 0; i < 20; i++)
		assert_int_equal(atomic_file_commit(f[i]), 0);
	assert_contents(path, "writer 19");
	assert_int_equal(count_entries(w->dir, &temps), 1);
}

/* atomic_file_commit_new() never replaces: a second write to a name, or a file made under it while the new one
 * was written, keeps the file that was there, and leaves no temporary file. */
static void test_commit_new_never_replaces(void **state)
{
	struct test_workdir *w = *state;
	char path[600];
	struct atomic_file *f;
	int temps;
	snprintf(path, sizeof(path), "%s/f", w->dir);
	assert_int_equal(atomic_file_write_new(path, "first", 5), 0);
	assert_contents(path, "first");
	assert_int_equal(atomic_file_write_new(path, "second", 6), -EEXIST);
	assert_contents(path, "first");
	assert_int_equal(atomic_file_new(path, &f), 0);
	fputs("third", atomic_file_stream(f));
	assert_int_equal(unlink(path), 0);
	assert_int_equal(atomic_file_write(path, "made meanwhile", 14), 0);
	assert_int_equal(atomic_file_commit_new(f), -EEXIST);
	assert_contents(path, "made meanwhile");
	assert_int_equal(count_entries(w->dir, &temps), 1);
	assert_int_equal(temps, 0);
	assert_int_equal(unlink(path), 0);	/* the name free again: taken */
	assert_int_equal(atomic_file_write_new(path, "fourth", 6), 0);
	assert_contents(path, "fourth");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_replaces_with_umask_mode, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_stream_then_discard, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_failures_leave_nothing, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_distinct_temporaries, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_probe, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_commit_new_never_replaces, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("atomic_file", tests, NULL, NULL);
}
