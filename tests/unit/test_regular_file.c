/*
 * Unit tests for src/base/regular_file.c: a regular file opens, blocking as usual; a FIFO (with no writer), a
 * directory, a device and a symlink to a FIFO are refused at once, named by what they are; O_NOFOLLOW refuses a
 * symlink. An alarm turns a hang into a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/regular_file.h"
#include "tests/lib/testlib.h"

/* An open that blocked would end the test program here: SIGALRM's default action. */
#define HANG_SECONDS 10

static void path_in(char *buf, size_t len, const char *dir, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void test_regular_file_opens_blocking(void **state)
{
	(void)state;
	char *dir = test_mkdtemp(), path[512], buf[8] = "";
	struct stat st;
	path_in(path, sizeof(path), dir, "plain");
	assert_int_equal(test_run("printf abc > %s", path), 0);
	int fd = regular_file_open(AT_FDCWD, path, 0, &st);
	assert_true(fd >= 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 3);
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	assert_int_equal(read(fd, buf, sizeof(buf)), 3);
	assert_string_equal(buf, "abc");
	close(fd);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	fd = regular_file_open(dfd, "plain", 0, NULL);	/* relative to a directory, no status asked */
	assert_true(fd >= 0);
	close(fd);
	close(dfd);
	test_rmdir_rf(dir);
	free(dir);
}

static void assert_refused(const char *path, int flags, int err, const char *kind)
{
	struct stat st;
	alarm(HANG_SECONDS);
	assert_int_equal(regular_file_open(AT_FDCWD, path, flags, &st), err);
	alarm(0);
	if (kind)
		assert_string_equal(regular_file_kind(st.st_mode), kind);
}

static void test_others_refused_at_once(void **state)
{
	(void)state;
	char *dir = test_mkdtemp(), fifo[512], link[512], plain[512], missing[512];
	path_in(fifo, sizeof(fifo), dir, "x.msgpack");
	path_in(link, sizeof(link), dir, "link");
	path_in(plain, sizeof(plain), dir, "plain");
	path_in(missing, sizeof(missing), dir, "missing");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(symlink(fifo, link), 0);
	assert_int_equal(test_run("touch %s", plain), 0);
	assert_refused(fifo, 0, -EINVAL, "a FIFO");
	assert_refused(link, 0, -EINVAL, "a FIFO");
	assert_refused(dir, 0, -EINVAL, "a directory");
	assert_refused("/dev/null", 0, -EINVAL, "a character device");
	assert_refused(link, O_NOFOLLOW, -ELOOP, NULL);
	assert_refused(missing, 0, -ENOENT, NULL);
	unlink(link);
	assert_int_equal(symlink(plain, link), 0);
	assert_refused(link, O_NOFOLLOW, -ELOOP, NULL);	/* even to a regular file */
	int fd = regular_file_open(AT_FDCWD, link, 0, NULL);	/* followed without O_NOFOLLOW */
	assert_true(fd >= 0);
	close(fd);
	test_rmdir_rf(dir);
	free(dir);
}

static void test_kind_names(void **state)
{
	(void)state;
	assert_string_equal(regular_file_kind(S_IFSOCK | 0600), "a socket");
	assert_string_equal(regular_file_kind(S_IFBLK | 0600), "a block device");
	assert_string_equal(regular_file_kind(S_IFREG | 0600), "a regular file");
	assert_string_equal(regular_file_kind(0), "not a regular file");
}

/* Writable by us only: ours or root's, without group or other write permission. */
static void test_writable_by_us_only(void **state)
{
	(void)state;
	struct stat st = { .st_uid = geteuid(), .st_mode = S_IFREG | 0644 };
	assert_true(regular_file_writable_by_us_only(&st));
	st.st_uid = 0;
	assert_true(regular_file_writable_by_us_only(&st));
	st.st_mode = S_IFREG | 0664;
	assert_false(regular_file_writable_by_us_only(&st));
	st.st_mode = S_IFREG | 0646;
	assert_false(regular_file_writable_by_us_only(&st));
	st.st_mode = S_IFREG | 0644;
	st.st_uid = geteuid() + 1000;	/* another user's */
	assert_false(regular_file_writable_by_us_only(&st));
}

/* Root only: root's, without group or other write permission; not the effective user's own unless that is root
 * (a user may truncate their own file under the mapping). */
static void test_root_only(void **state)
{
	(void)state;
	struct stat st = { .st_uid = 0, .st_mode = S_IFREG | 0755 };
	assert_true(regular_file_root_only(&st));
	st.st_mode = S_IFREG | 0775;
	assert_false(regular_file_root_only(&st));
	st.st_mode = S_IFREG | 0757;
	assert_false(regular_file_root_only(&st));
	st.st_mode = S_IFREG | 0755;
	st.st_uid = 1000;
	assert_false(regular_file_root_only(&st));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regular_file_opens_blocking),
		cmocka_unit_test(test_others_refused_at_once),
		cmocka_unit_test(test_kind_names),
		cmocka_unit_test(test_writable_by_us_only),
		cmocka_unit_test(test_root_only),
	};
	return cmocka_run_group_tests_name("regular_file", tests, NULL, NULL);
}
