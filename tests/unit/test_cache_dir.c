/*
 * Unit tests for src/base/cache_dir.c's eviction: cache_dir_make_room() removes the least recently used files
 * first and counts every file of the cache, however many the directory holds (more than one listing weighs); its
 * ledger spares a listing only while it is recent, readable and of the same bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/base/cache_dir.h"
#include "tests/lib/testlib.h"

#define NFILES 5000	/* more than one listing's CACHE_DIR_EVICT_MAX_FILES */
#define FILE_SIZE 100

/* The cache directory of test i: in memory (/dev/shm) where there is one, as 15,000 files on a loaded disk take
 * seconds to create. */
static void cache_path(const struct test_workdir *w, char *dir, size_t len)
{
	static unsigned n;
	if (access("/dev/shm", W_OK) == 0)
		snprintf(dir, len, "/dev/shm/hostprof-test-cache-%d-%u", (int)getpid(), n++);
	else
		snprintf(dir, len, "%s/cache", w->dir);
}

static void remove_cache(const char *dir)
{
	assert_int_equal(test_run("rm -rf '%s'", dir), 0);
}

/* Cache files 0..NFILES-1 of FILE_SIZE bytes, file i last used at second 1000000 + i; a file of another cache. */
static int fill(const char *dir)
{
	char name[64], data[FILE_SIZE] = { 0 };
	int dirfd = cache_dir_open(dir);
	assert_true(dirfd >= 0);
	for (int i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%05d.x", i);
		int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
		struct timespec t[2] = { { 1000000 + i, 0 }, { 1000000 + i, 0 } };
		assert_int_equal(futimens(fd, t), 0);
		close(fd);
	}
	int other = openat(dirfd, "old.y", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(other >= 0);
	struct timespec t[2] = { { 1, 0 }, { 1, 0 } };
	assert_int_equal(futimens(other, t), 0);
	close(other);
	return dirfd;
}

/* Exactly files keep_from..NFILES-1 of the cache are left, and the other cache's file. */
static void assert_left(int dirfd, int keep_from)
{
	char name[64];
	struct stat st;
	for (int i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%05d.x", i);
		int there = fstatat(dirfd, name, &st, 0) == 0;
		if (there != (i >= keep_from))
			fail_msg("%s is %s", name, there ? "still there" : "gone");
	}
	assert_int_equal(fstatat(dirfd, "old.y", &st, 0), 0);
}

/* Room for 1000 files: the 4000 oldest go, although one listing weighs 4096 files at most. */
static void test_oldest_go_first(void **state)
{
	struct test_workdir *w = *state;
	char dir[600];
	cache_path(w, dir, sizeof(dir));
	int dirfd = fill(dir);
	cache_dir_make_room(dirfd, ".x", 1000ULL * FILE_SIZE, 0, CACHE_NEED_EXACT);
	assert_left(dirfd, NFILES - 1000);
	close(dirfd);
	remove_cache(dir);
}

/* Room for 500 files and a new one of 50 files' size: 4550 go, more than one listing can remove. */
static void test_more_than_one_listing(void **state)
{
	struct test_workdir *w = *state;
	char dir[600];
	cache_path(w, dir, sizeof(dir));
	int dirfd = fill(dir);
	cache_dir_make_room(dirfd, ".x", 500ULL * FILE_SIZE, 50ULL * FILE_SIZE, CACHE_NEED_EXACT);
	assert_left(dirfd, NFILES - 450);
	close(dirfd);
	remove_cache(dir);
}

/* Within the bound, nothing goes. */
static void test_nothing_when_it_fits(void **state)
{
	struct test_workdir *w = *state;
	char dir[600];
	cache_path(w, dir, sizeof(dir));
	int dirfd = fill(dir);
	cache_dir_make_room(dirfd, ".x", (unsigned long long)NFILES * FILE_SIZE + FILE_SIZE, FILE_SIZE,
			    CACHE_NEED_EXACT);
	assert_left(dirfd, 0);
	close(dirfd);
	remove_cache(dir);
}

/* n more cache files named prefix%05d.x from first on, used now: written after a cache_dir_make_room() or, for
 * others, behind the ledger's back. */
static void add_files(int dirfd, const char *prefix, int first, int n)
{
	char name[64], data[FILE_SIZE] = { 0 };
	for (int i = first; i < first + n; i++) {
		snprintf(name, sizeof(name), "%s%05d.x", prefix, i);
		int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
		close(fd);
	}
}

static void set_ledger(int dirfd, const char *text, time_t weighed)
{
	int fd = openat(dirfd, ".x" CACHE_DIR_LEDGER_SUFFIX, O_WRONLY | (text ? O_TRUNC : 0) | O_NOFOLLOW | O_CLOEXEC);
	assert_true(fd >= 0);
	if (text)
		assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	struct timespec t[2] = { { weighed, 0 }, { weighed, 0 } };
	assert_int_equal(futimens(fd, t), 0);
	close(fd);
}

/* Room made for file i of a writer, then the file written. */
static void write_one(int dirfd, unsigned long long max, int i, enum cache_need exact)
{
	cache_dir_make_room(dirfd, ".x", max, FILE_SIZE, exact);
	add_files(dirfd, "w", i, 1);
}

/*
 * After a listing, writes that fit in the room it left are not weighed again: 200 files added behind the ledger's
 * back (101 over the bound with the writer's) stay until the ledger is older than CACHE_DIR_LEDGER_TTL_S; then the
 * oldest go. A ledger with no room left, or that cannot be read, or of another bound, leads to a listing; so does
 * a write whose size is a guess, which leaves the ledger with no room; so does a ledger another writer holds,
 * without waiting for it.
 */
static void test_ledger_spares_listing(void **state)
{
	struct test_workdir *w = *state;
	char dir[600], text[64];
	unsigned long long max = (NFILES + 100ULL) * FILE_SIZE;
	cache_path(w, dir, sizeof(dir));
	int dirfd = fill(dir), i = 0;
	write_one(dirfd, max, i++, CACHE_NEED_EXACT);	/* listed: room for 99 more */
	add_files(dirfd, "n", 0, 200);
	write_one(dirfd, max, i++, CACHE_NEED_EXACT);
	assert_left(dirfd, 0);
	set_ledger(dirfd, NULL, time(NULL) - CACHE_DIR_LEDGER_TTL_S - 1);	/* its room kept, its listing old */
	write_one(dirfd, max, i++, CACHE_NEED_EXACT);	/* 5202 files and 1 to come: 103 go */
	assert_left(dirfd, 103);
	write_one(dirfd, max, i++, CACHE_NEED_EXACT);	/* no room was left */
	assert_left(dirfd, 104);
	int keep_from = 104;
	/* No end, no space, more after the bound. */
	const char *unreadable[] = { "%llu %llu", "%llux%llu\n", "%llu %llu+1\n" };
	for (size_t k = 0; k < sizeof(unreadable) / sizeof(*unreadable); k++) {
		snprintf(text, sizeof(text), unreadable[k], max, max);
		set_ledger(dirfd, text, time(NULL));
		write_one(dirfd, max, i++, CACHE_NEED_EXACT);
		assert_left(dirfd, ++keep_from);
	}
	snprintf(text, sizeof(text), "%llu %llu\n", max, max + 1);	/* another bound's */
	set_ledger(dirfd, text, time(NULL));
	write_one(dirfd, max, i++, CACHE_NEED_EXACT);
	assert_left(dirfd, ++keep_from);
	snprintf(text, sizeof(text), "%llu %llu\n", max, max);	/* all the room there is, but a guessed size */
	set_ledger(dirfd, text, time(NULL));
	write_one(dirfd, max, i++, CACHE_NEED_ESTIMATE);
	assert_left(dirfd, ++keep_from);
	write_one(dirfd, max, i++, CACHE_NEED_EXACT);	/* no room left by the guess */
	assert_left(dirfd, ++keep_from);
	set_ledger(dirfd, text, time(NULL));
	int holder = openat(dirfd, ".x" CACHE_DIR_LEDGER_SUFFIX, O_RDONLY | O_CLOEXEC);
	assert_true(holder >= 0);
	assert_int_equal(flock(holder, LOCK_EX), 0);
	write_one(dirfd, max, i++, CACHE_NEED_EXACT);
	assert_left(dirfd, ++keep_from);
	close(holder);
	close(dirfd);
	remove_cache(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_oldest_go_first, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_more_than_one_listing, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_nothing_when_it_fits, test_workdir_setup, test_workdir_teardown),
		cmocka_unit_test_setup_teardown(test_ledger_spares_listing, test_workdir_setup, test_workdir_teardown),
	};
	return cmocka_run_group_tests_name("cache_dir", tests, NULL, NULL);
}
