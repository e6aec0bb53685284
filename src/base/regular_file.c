/*
 * regular_file.c — opening only regular files, never blocking on anything else. See regular_file.h.
 */
#include "src/base/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* 0 for a regular file; -ELOOP for a symlink (only seen under O_NOFOLLOW); -EINVAL for anything else. */
static int check_mode(mode_t mode)
{
	return S_ISREG(mode) ? 0 : S_ISLNK(mode) ? -ELOOP : -EINVAL;
}

int regular_file_open(int dirfd, const char *path, int flags, struct stat *st)
{
	struct stat local;
	int fd, fl, err;
	if (!st)
		st = &local;
	/* Look before opening: a device is never opened, a FIFO's open never waits for a writer. */
	if (fstatat(dirfd, path, st, flags & O_NOFOLLOW ? AT_SYMLINK_NOFOLLOW : 0) < 0)
		return -errno;
	if ((err = check_mode(st->st_mode)) < 0)
		return err;
	fd = openat(dirfd, path, flags | O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	/* What was opened is what counts: the path may name something else by now. */
	if (fstat(fd, st) < 0 || (fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		err = -errno;
	else
		err = check_mode(st->st_mode);
	if (err < 0) {
		close(fd);
		return err;
	}
	return fd;
}

const char *regular_file_kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFSOCK:
		return "a socket";
	case S_IFLNK:
		return "a symbolic link";
	}
	return "not a regular file";
}

bool regular_file_writable_by_us_only(const struct stat *st)
{
	return (st->st_uid == 0 || st->st_uid == geteuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

bool regular_file_root_only(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}
