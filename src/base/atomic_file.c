/*
 * atomic_file.c — temporary file, fsync, rename, directory fsync. See atomic_file.h for the contract.
 */
#include "src/base/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/clock.h"

#define ATOMIC_FILE_SUFFIX ".tmp.XXXXXX"
#define ATOMIC_FILE_BUFFER (1 << 16)

struct atomic_file {
	char *path, *tmp;
	FILE *stream;
	int fd;
};

/* Six random name characters into out; from the clock and pid when the kernel's pool is not ready yet. */
static void random_suffix(char out[6], unsigned attempt)
{
	static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	uint8_t rnd[6];
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		uint64_t x = clock_mono_ns() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() ^ attempt;
		memcpy(rnd, &x, sizeof(rnd));
	}
	for (int i = 0; i < 6; i++)
		out[i] = chars[rnd[i] % (sizeof(chars) - 1)];
}

/* Create "<path>.tmp.XXXXXX" exclusively into f->tmp and f->fd. Not mkstemp(): that forces mode 0600. */
static int create_temp(struct atomic_file *f)
{
	size_t n = strlen(f->path);
	if (!(f->tmp = malloc(n + sizeof(ATOMIC_FILE_SUFFIX))))
		return -ENOMEM;
	memcpy(f->tmp, f->path, n);
	memcpy(f->tmp + n, ATOMIC_FILE_SUFFIX, sizeof(ATOMIC_FILE_SUFFIX));
	for (unsigned attempt = 0; attempt < 100; attempt++) {
		random_suffix(f->tmp + n + sizeof(ATOMIC_FILE_SUFFIX) - 7, attempt);
		f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (f->fd >= 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static void atomic_file_free(struct atomic_file *f)
{
	free(f->path);
	free(f->tmp);
	free(f);
}

int atomic_file_new(const char *path, struct atomic_file **out)
{
	struct atomic_file *f = calloc(1, sizeof(*f));
	int err;
	if (!f)
		return -ENOMEM;
	f->fd = -1;
	if (!(f->path = strdup(path))) {
		atomic_file_free(f);
		return -ENOMEM;
	}
	if ((err = create_temp(f)) < 0) {
		atomic_file_free(f);
		return err;
	}
	if (!(f->stream = fdopen(f->fd, "w"))) {
		err = -errno;
		close(f->fd);
		unlink(f->tmp);
		atomic_file_free(f);
		return err;
	}
	setvbuf(f->stream, NULL, _IOFBF, ATOMIC_FILE_BUFFER);
	*out = f;
	return 0;
}

FILE *atomic_file_stream(struct atomic_file *f)
{
	return f->stream;
}

/* Best effort (see atomic_file.h): make the rename of path durable. */
static void sync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	free(dir);
}

/* tmp made path without replacing a file there: rename(2) with RENAME_NOREPLACE, or where the file system has
 * no such rename (NFS, some FUSE: EINVAL), a hard link, which fails just as well on a name that exists, then
 * the temporary name removed. -EEXIST when path exists. */
static int place_new(const char *tmp, const char *path)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (link(tmp, path) < 0)
		return -errno;
	unlink(tmp);
	return 0;
}

static int commit(struct atomic_file *f, bool replace)
{
	int err = ferror(f->stream) ? -EIO : 0;
	errno = 0;
	if (!err && fflush(f->stream) != 0)
		err = errno ? -errno : -EIO;
	if (!err && fsync(f->fd) < 0)
		err = -errno;
	if (fclose(f->stream) != 0 && !err)
		err = errno ? -errno : -EIO;
	if (!err)
		err = replace ? (rename(f->tmp, f->path) < 0 ? -errno : 0) : place_new(f->tmp, f->path);
	if (err)
		unlink(f->tmp);
	else
		sync_parent(f->path);
	atomic_file_free(f);
	return err;
}

int atomic_file_commit(struct atomic_file *f)
{
	return commit(f, true);
}

int atomic_file_commit_new(struct atomic_file *f)
{
	return commit(f, false);
}

void atomic_file_discard(struct atomic_file *f)
{
	if (!f)
		return;
	fclose(f->stream);
	unlink(f->tmp);
	atomic_file_free(f);
}

static int write_whole(const char *path, const void *data, size_t size, bool replace)
{
	struct atomic_file *f;
	int err = atomic_file_new(path, &f);
	if (err < 0)
		return err;
	errno = 0;
	if (size && fwrite(data, 1, size, f->stream) != size) {
		err = errno ? -errno : -EIO;
		atomic_file_discard(f);
		return err;
	}
	return commit(f, replace);
}

int atomic_file_write(const char *path, const void *data, size_t size)
{
	return write_whole(path, data, size, true);
}

int atomic_file_write_new(const char *path, const void *data, size_t size)
{
	return write_whole(path, data, size, false);
}

int atomic_file_probe(const char *path)
{
	struct atomic_file *f;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR;
	int err = atomic_file_new(path, &f);
	if (err == 0)
		atomic_file_discard(f);
	return err;
}
