/*
 * profile_dir.c — naming and retention of the daemon's profiles. See profile_dir.h for the contract.
 */
#include "src/profile/profile_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREFIX "profile-"
#define SUFFIX ".msgpack"

int profile_dir_name(const char *dir, time_t t, unsigned seq, char *buf, size_t len)
{
	struct tm tm;
	char stamp[32];
	if (!gmtime_r(&t, &tm) || !strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm))
		return -EINVAL;
	int n = snprintf(buf, len, "%s/" PREFIX "%s-%06u" SUFFIX, dir, stamp, seq % 1000000);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The number of name if it is a profile of the second whose stamp is stamp; -1 if it is not. */
static long profile_seq(const char *name, const char *stamp)
{
	size_t p = strlen(PREFIX), n = strlen(stamp);
	if (strncmp(name, PREFIX, p) || strncmp(name + p, stamp, n) || name[p + n] != '-')
		return -1;
	const char *digits = name + p + n + 1;
	for (int i = 0; i < 6; i++)
		if (digits[i] < '0' || digits[i] > '9')
			return -1;
	return strcmp(digits + 6, SUFFIX) == 0 ? strtol(digits, NULL, 10) : -1;
}

int profile_dir_next_name(const char *dir, time_t t, char *buf, size_t len)
{
	char stamp[32];
	struct tm tm;
	struct dirent *de;
	long highest = -1;
	if (!gmtime_r(&t, &tm) || !strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm))
		return -EINVAL;
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		long seq = profile_seq(de->d_name, stamp);
		if (seq > highest)
			highest = seq;
	}
	closedir(d);
	if (highest >= (long)PROFILE_DIR_MAX_SEQ)
		return -EEXIST;
	return profile_dir_name(dir, t, (unsigned)(highest + 1), buf, len);
}

/* The pid a lock file holds, 0 if it holds none. */
static int lock_holder(int fd)
{
	char text[32];
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	long pid = strtol(text, NULL, 10);
	return pid > 0 && pid <= INT32_MAX ? (int)pid : 0;
}

int profile_dir_lock(const char *dir, int *fd, int *holder)
{
	char path[4200], pid[32];
	struct stat st;
	*holder = 0;
	if ((size_t)snprintf(path, sizeof(path), "%s/" PROFILE_DIR_LOCK_NAME, dir) >= sizeof(path))
		return -ENAMETOOLONG;
	/* O_NOFOLLOW: the daemon runs as root, and a symlink by that name must not make it create files elsewhere */
	int lfd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644), err = 0;
	if (lfd < 0)
		return -errno;
	if (fstat(lfd, &st) < 0)
		err = -errno;
	else if (!S_ISREG(st.st_mode))
		err = -EINVAL;
	else if (flock(lfd, LOCK_EX | LOCK_NB) < 0)
		err = -errno;
	if (err == -EWOULDBLOCK)
		*holder = lock_holder(lfd);
	/* The pid is for the message of a daemon refused: best effort. A full disk has no block for it, and the lock
	 * alone keeps the directory one daemon's (the daemon on a full disk holds its profiles until there is room). */
	int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (err == 0 && ftruncate(lfd, 0) == 0)
		(void)!pwrite(lfd, pid, (size_t)n, 0);
	if (err < 0) {
		close(lfd);
		return err;
	}
	*fd = lfd;
	return 0;
}

void profile_dir_unlock(int fd)
{
	if (fd < 0)
		return;
	(void)!ftruncate(fd, 0); /* best effort: a pid left behind is never read while the lock is free */
	close(fd);
}

int profile_dir_prepare(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		return -errno;
	if (stat(dir, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

int profile_dir_clean_temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int removed = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, PREFIX, strlen(PREFIX)) && strstr(de->d_name, SUFFIX ".tmp.") &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

struct entry {
	char *name;
	uint64_t size;
};

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* The profiles in dir, oldest first. */
static int list_profiles(DIR *d, struct entry **out, size_t *n)
{
	struct dirent *de;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	while ((de = readdir(d))) {
		struct stat st;
		if (strncmp(de->d_name, PREFIX, strlen(PREFIX)) || !has_suffix(de->d_name, SUFFIX) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			struct entry *e = realloc(*out, cap * sizeof(*e));
			if (!e)
				return -ENOMEM;
			*out = e;
		}
		(*out)[*n].name = strdup(de->d_name);
		if (!(*out)[*n].name)
			return -ENOMEM;
		(*out)[(*n)++].size = (uint64_t)st.st_size;
	}
	if (*n)	/* qsort(NULL, 0, ...) is undefined */
		qsort(*out, *n, sizeof(**out), cmp_entry);
	return 0;
}

int profile_dir_retain(const char *dir, unsigned max_files, uint64_t max_bytes)
{
	DIR *d = opendir(dir);
	struct entry *e = NULL;
	size_t n = 0;
	int deleted = 0;
	if (!d)
		return -errno;
	int err = list_profiles(d, &e, &n);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += e[i].size;
	/* The newest profile always stays, whatever the limits. */
	for (size_t i = 0; err == 0 && i + 1 < n; i++) {
		int too_many = max_files && n - (size_t)deleted > max_files;
		int too_big = max_bytes && total > max_bytes;
		if (!too_many && !too_big)
			break;
		if (unlinkat(dirfd(d), e[i].name, 0) < 0) {
			err = -errno;
			break;
		}
		total -= e[i].size;
		deleted++;
	}
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	free(e);
	closedir(d);
	return err < 0 ? err : deleted;
}

int profile_dir_remove_oldest(const char *dir, char *name, size_t len)
{
	DIR *d = opendir(dir);
	struct entry *e = NULL;
	size_t n = 0;
	if (!d)
		return -errno;
	int err = list_profiles(d, &e, &n);
	if (err == 0 && n > 0) {
		snprintf(name, len, "%s", e[0].name);
		err = unlinkat(dirfd(d), e[0].name, 0) < 0 ? -errno : 1;
	}
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	free(e);
	closedir(d);
	return err;
}
