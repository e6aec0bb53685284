/*
 * cache_dir.c — the per-user cache directory and its trusted files (see cache_dir.h).
 */
#include "src/base/cache_dir.h"
#include "src/base/regular_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
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
	int fd = regular_file_open(dirfd, name, O_NOFOLLOW, st);
	int err = fd == -EINVAL ? -EPERM : fd < 0 ? fd : private_to_us(st, false);
	if (err < 0 && fd >= 0)
		close(fd);
	return err < 0 ? err : fd;
}

struct cached_file {
	char name[CACHE_DIR_NAME_MAX];
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

/* The root of heap[0..n) is its most recently used file: the one to give up when an older one comes. */
static void sift_down(struct cached_file *heap, size_t n, size_t i)
{
	for (size_t top = i;; i = top) {
		size_t l = 2 * i + 1, r = l + 1;
		if (l < n && by_use(&heap[l], &heap[top]) > 0)
			top = l;
		if (r < n && by_use(&heap[r], &heap[top]) > 0)
			top = r;
		if (top == i)
			return;
		struct cached_file tmp = heap[i];
		heap[i] = heap[top];
		heap[top] = tmp;
	}
}

static void sift_up(struct cached_file *heap, size_t i)
{
	while (i > 0 && by_use(&heap[i], &heap[(i - 1) / 2]) > 0) {
		struct cached_file tmp = heap[i];
		heap[i] = heap[(i - 1) / 2];
		heap[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
}

/* Keep f among the max least recently used files seen so far (a heap of n). */
static void keep_oldest(struct cached_file *heap, size_t *n, size_t max, const struct cached_file *f)
{
	if (*n < max) {
		heap[*n] = *f;
		sift_up(heap, (*n)++);
	} else if (by_use(f, &heap[0]) < 0) {
		heap[0] = *f;
		sift_down(heap, *n, 0);
	}
}

/* The max least recently used regular files of dirfd named *suffix, and the total size of all of them; *listed
 * false if the directory could not be read to its end (the total is then too small to be kept). */
static size_t list_files(int dirfd, const char *suffix, struct cached_file *out, size_t max,
			 unsigned long long *total, bool *listed)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	size_t n = 0, slen = strlen(suffix);
	struct dirent *e;
	*total = 0;
	*listed = false;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	rewinddir(d);	/* the duplicate shares dirfd's position */
	for (errno = 0; (e = readdir(d)); errno = 0) {
		struct stat st;
		struct cached_file f;
		size_t len = strlen(e->d_name);
		if (len <= slen || len >= sizeof(f.name) || strcmp(e->d_name + len - slen, suffix) != 0 ||
		    fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		memcpy(f.name, e->d_name, len + 1);
		f.size = st.st_size;
		f.used = st.st_mtim;
		*total += (unsigned long long)st.st_size;
		keep_oldest(out, &n, max, &f);
	}
	*listed = errno == 0;
	closedir(d);
	return n;
}

/* One pass: the oldest files (at most CACHE_DIR_EVICT_MAX_FILES) removed until need fits. Returns how many. */
static size_t evict_oldest(int dirfd, const char *suffix, struct cached_file *c, unsigned long long max_bytes,
			   unsigned long long need, bool *fits, unsigned long long *total, bool *listed)
{
	size_t n = list_files(dirfd, suffix, c, CACHE_DIR_EVICT_MAX_FILES, total, listed), removed = 0;
	qsort(c, n, sizeof(*c), by_use);
	for (size_t i = 0; i < n && *total + need > max_bytes; i++) {
		if (unlinkat(dirfd, c[i].name, 0) == 0) {
			*total -= (unsigned long long)c[i].size;
			removed++;
		}
	}
	*fits = *total + need <= max_bytes;
	return removed;
}

/* The ledger of suffix's files, locked, or a negative errno: the listing is then made every time. */
static int ledger_open(int dirfd, const char *suffix)
{
	char name[CACHE_DIR_NAME_MAX];
	struct stat st;
	if (snprintf(name, sizeof(name), "%s%s", suffix, CACHE_DIR_LEDGER_SUFFIX) >= (int)sizeof(name))
		return -ENAMETOOLONG;
	int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600), err = 0;
	if (fd < 0)
		return -errno;
	/* Never waited for: a writer stopped while it holds the ledger (Ctrl-Z, a debugger) must not stop the others,
	 * which list as before. */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || private_to_us(&st, false) < 0)
		err = -EPERM;
	else if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		err = -errno;
	if (err < 0)
		close(fd);
	return err < 0 ? err : fd;
}

/* The room the ledger holds for a bound of max_bytes, if it was weighed within CACHE_DIR_LEDGER_TTL_S. */
static bool ledger_room(int fd, unsigned long long max_bytes, unsigned long long *room, struct stat *st)
{
	char buf[64], *end;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	time_t now = time(NULL);
	/* time() is the coarse clock: a file's fine-grained time may be up to a tick ahead of it. */
	if (n <= 0 || fstat(fd, st) < 0 || st->st_mtime > now + 1 || now - st->st_mtime > CACHE_DIR_LEDGER_TTL_S)
		return false;
	buf[n] = '\0';
	errno = 0;
	*room = strtoull(buf, &end, 10);
	unsigned long long max = *end == ' ' ? strtoull(end + 1, &end, 10) : 0;
	return errno == 0 && *end == '\n' && max == max_bytes && *room <= max_bytes;
}

/* The room left, as of the time weighed (the file's modification time, the listing's). */
static void ledger_write(int fd, unsigned long long room, unsigned long long max_bytes, const struct timespec *weighed)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%llu %llu\n", room, max_bytes);
	if (pwrite(fd, buf, (size_t)n, 0) == n && ftruncate(fd, n) == 0 && weighed) {
		struct timespec t[2] = { *weighed, *weighed };
		futimens(fd, t);
	}
}

void cache_dir_make_room(int dirfd, const char *suffix, unsigned long long max_bytes, unsigned long long need,
			 enum cache_need exact)
{
	int ledger = ledger_open(dirfd, suffix);
	unsigned long long room, total = 0;
	struct stat st;
	if (ledger >= 0 && exact == CACHE_NEED_EXACT && ledger_room(ledger, max_bytes, &room, &st) && need <= room) {
		ledger_write(ledger, room - need, max_bytes, &st.st_mtim);
		close(ledger);
		return;
	}
	struct cached_file *c = malloc(CACHE_DIR_EVICT_MAX_FILES * sizeof(*c));
	bool fits = false, listed = c != NULL;
	/* A directory of more files than one pass weighs takes more passes, each the oldest of those left. */
	while (listed && !fits && evict_oldest(dirfd, suffix, c, max_bytes, need, &fits, &total, &listed) > 0)
		;
	free(c);
	if (ledger >= 0) {
		/* What a listing left, if it read the whole directory and need is what will be written; else none:
		 * the next write lists. */
		ledger_write(ledger, listed && fits && exact == CACHE_NEED_EXACT ? max_bytes - total - need : 0,
			     max_bytes, NULL);
		close(ledger);
	}
}
