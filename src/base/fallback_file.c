/*
 * fallback_file.c — saving an output elsewhere. See fallback_file.h for the contract.
 */
#include "src/base/fallback_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Same name tried with this many counters before the next place. */
#define FALLBACK_NAME_TRIES 100

/* A free name for intended's file in dir: 0 with it in path, or a negative errno. */
static int free_name(const char *dir, const char *base, char *path, size_t pathlen)
{
	for (unsigned n = 0; n < FALLBACK_NAME_TRIES; n++) {
		int len = n ? snprintf(path, pathlen, "%s/hostprof-unsaved-%d-%u-%s", dir, (int)getpid(), n, base)
			    : snprintf(path, pathlen, "%s/hostprof-unsaved-%d-%s", dir, (int)getpid(), base);
		if (len < 0 || (size_t)len >= pathlen)
			return -ENAMETOOLONG;
		if (access(path, F_OK) < 0 && errno == ENOENT)
			return 0;
	}
	return -EEXIST;
}

int fallback_file_save(const char *intended, fallback_write_fn write, void *arg, char *path, size_t pathlen)
{
	const char *tmpdir = getenv("TMPDIR");
	const char *dirs[] = { tmpdir && tmpdir[0] == '/' ? tmpdir : NULL, "/var/tmp", "/tmp", "/dev/shm" };
	const char *slash = strrchr(intended, '/');
	const char *base = slash ? slash + 1 : intended;
	int err = -ENOENT;
	if (!*base)
		base = "output";
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (!dirs[i] || (i > 0 && dirs[0] && !strcmp(dirs[i], dirs[0])))
			continue;
		if ((err = free_name(dirs[i], base, path, pathlen)) == 0 && (err = write(arg, path)) == 0)
			return 0;
	}
	return err;
}
