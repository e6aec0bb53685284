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

/*
 * Who may write a file, from its owner and mode: writable by us only (ours or root's, without group or other write
 * permission), and root only (root's likewise; not the effective user's own unless that is root, since a user
 * may truncate their own file under a mapping).
 */
static void test_who_can_write(void **state)
{
	(void)state;
	enum owner { ROOT, US, OTHER };
	static const struct {
		enum owner owner;
		mode_t mode;
		bool us_only, root_only;
	} cases[] = {
		{ ROOT, 0644, true, true },  { ROOT, 0755, true, true },   { ROOT, 0664, false, false },
		{ ROOT, 0646, false, false }, { US, 0644, true, false },   { US, 0664, false, false },
		{ OTHER, 0644, false, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		uid_t uids[] = { 0, geteuid(), geteuid() + 1000 };
		struct stat st = { .st_uid = uids[cases[i].owner], .st_mode = S_IFREG | cases[i].mode };
		bool root_only = cases[i].root_only || (cases[i].owner == US && geteuid() == 0 && cases[i].us_only);
		bool us_got = regular_file_writable_by_us_only(&st), root_got = regular_file_root_only(&st);
		if (us_got != cases[i].us_only || root_got != root_only)
			fail_msg("case %zu (owner %d, mode %o): writable by us only %d, root only %d", i,
				 cases[i].owner, (unsigned)cases[i].mode, us_got, root_got);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regular_file_opens_blocking),
		cmocka_unit_test(test_others_refused_at_once),
		cmocka_unit_test(test_kind_names),
		cmocka_unit_test(test_who_can_write),
	};
	return cmocka_run_group_tests_name("regular_file", tests, NULL, NULL);
}
