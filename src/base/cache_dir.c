/*
 * cache_dir.c — the per-user cache directory and its trusted files (see cache_dir.h).
 */
#include "src/base/cache_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Owned by us; a directory closed to group and others, a file not writable by them. */
static int private_to_us(const struct stat *st, bool dir)
{
	if (st->st_uid != geteuid())
		return -EPERM;
	return (st->st_mode & (dir ? 077 : 022)) ? -EPERM : 0;
}

static int make_dir(const char *path)
{
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

int cache_dir_default(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;
	if (geteuid() == 0)
		n = snprintf(buf, len, "/var/cache/hostprof");
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/hostprof", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.cache/hostprof", home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int cache_dir_open(const char *path)
{
	char parent[4096];
	struct stat st;
	if (strlen(path) >= sizeof(parent))
		return -ENAMETOOLONG;
	strcpy(parent, path);
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		make_dir(parent);	/* ~/.cache may not exist yet; a failure shows below */
	}
	int err = make_dir(path);
	int fd = err ? err : open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fd == err ? err : -errno;
	if (fstat(fd, &st) < 0 || (err = private_to_us(&st, true)) < 0) {
		err = err ? err : -errno;
		close(fd);
		return err;
	}
	return fd;
}

int cache_dir_open_file(int dirfd, const char *name, struct stat *st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int err = fd < 0 ? -errno : fstat(fd, st) < 0 ? -errno : 0;
	if (err == 0 && !S_ISREG(st->st_mode))
		err = -EPERM;
	if (err == 0)
		err = private_to_us(st, false);
	if (err < 0 && fd >= 0)
		close(fd);
	return err < 0 ? err : fd;
}

struct cached_file {
	char name[256];
	off_t size;
	struct timespec used;
};

static int by_use(const void *a, const void *b)
{
	const struct cached_file *x = a, *y = b;
	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

/* The regular files of dirfd named *suffix, up to max, and their total size. */
static size_t list_files(int dirfd, const char *suffix, struct cached_file *out, size_t max,
			 unsigned long long *total)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	size_t n = 0, slen = strlen(suffix);
	struct dirent *e;
	*total = 0;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	rewinddir(d);	/* the duplicate shares dirfd's position */
	while (n < max && (e = readdir(d))) {
		struct stat st;
		size_t len = strlen(e->d_name);
		if (len <= slen || len >= sizeof(out->name) || strcmp(e->d_name + len - slen, suffix) != 0 ||
		    fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		memcpy(out[n].name, e->d_name, len + 1);
		out[n].size = st.st_size;
		out[n].used = st.st_mtim;
		*total += (unsigned long long)st.st_size;
		n++;
	}
	closedir(d);
	return n;
}

void cache_dir_make_room(int dirfd, const char *suffix, unsigned long long max_bytes, unsigned long long need)
{
	unsigned long long total;
	struct cached_file *c = malloc(CACHE_DIR_EVICT_MAX_FILES * sizeof(*c));
	size_t n = c ? list_files(dirfd, suffix, c, CACHE_DIR_EVICT_MAX_FILES, &total) : 0;
	if (n > 1)
		qsort(c, n, sizeof(*c), by_use);
	for (size_t i = 0; i < n && total + need > max_bytes; i++) {
		if (unlinkat(dirfd, c[i].name, 0) == 0)
			total -= (unsigned long long)c[i].size;
	}
	free(c);
}
