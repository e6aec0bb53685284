/*
 * profile_inputs.c — the profiles a command reads: files and directories of them, merged. See profile_inputs.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/base/clock.h"
#include "src/base/escape.h"
#include "src/base/regular_file.h"
#include "src/cmd/perf_input.h"
#include "src/cmd/profile_inputs.h"
#include "src/cmd/status_line.h"

#define PROFILE_SUFFIX ".msgpack"

struct path_list {
	char **items;
	size_t count, cap;
};

static int path_list_add(struct path_list *l, const char *dir, const char *name)
{
	if (l->count == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		char **items = realloc(l->items, cap * sizeof(*items));
		if (!items)
			return -ENOMEM;
		l->items = items;
		l->cap = cap;
	}
	char *path;
	if (dir ? asprintf(&path, "%s/%s", dir, name) < 0 : !(path = strdup(name)))
		return -ENOMEM;
	l->items[l->count++] = path;
	return 0;
}

static void path_list_free(struct path_list *l)
{
	for (size_t i = 0; i < l->count; i++)
		free(l->items[i]);
	free(l->items);
}

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_profile_name(const char *name)
{
	size_t n = strlen(name), s = strlen(PROFILE_SUFFIX);
	return name[0] != '.' && n > s && strcmp(name + n - s, PROFILE_SUFFIX) == 0;
}

/* A *.msgpack entry of a directory that is no regular file (a FIFO would block the read, a device never end
 * it) is left out with a warning: the directory's other profiles are still read. A name that cannot be looked
 * at is kept, and its read says why it fails. */
static bool skip_entry(DIR *d, const char *dir, const char *name)
{
	char shown_dir[ESCAPE_SHOWN_MAX], shown_name[ESCAPE_SHOWN_MAX];
	struct stat st;
	if (fstatat(dirfd(d), name, &st, 0) < 0 || S_ISREG(st.st_mode))
		return false;
	fprintf(stderr, "hostprof: warning: skipping %s/%s: not a regular file (%s)\n",
		escape_str(shown_dir, sizeof(shown_dir), dir), escape_str(shown_name, sizeof(shown_name), name),
		regular_file_kind(st.st_mode));
	return true;
}

/* Add the *.msgpack files of dir, sorted by name. */
static int add_directory(struct path_list *l, const char *dir)
{
	char shown[ESCAPE_SHOWN_MAX];
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t first = l->count;
	int err = 0;
	if (!d) {
		err = -errno;
		fprintf(stderr, "hostprof: cannot read directory %s: %s\n", escape_str(shown, sizeof(shown), dir),
			strerror(-err));
		return err;
	}
	while (err == 0 && (e = readdir(d)))
		if (is_profile_name(e->d_name) && !skip_entry(d, dir, e->d_name))
			err = path_list_add(l, dir, e->d_name);
	closedir(d);
	if (err == 0 && l->count == first) {
		fprintf(stderr, "hostprof: %s: no *%s profiles in this directory\n", escape_str(shown, sizeof(shown), dir),
			PROFILE_SUFFIX);
		return -ENOENT;
	}
	qsort(l->items + first, l->count - first, sizeof(*l->items), compare_strings);
	return err;
}

static int expand_paths(char *const *args, int n, struct path_list *l)
{
	struct stat st;
	int err = 0;
	for (int i = 0; i < n && err == 0; i++)
		err = stat(args[i], &st) == 0 && S_ISDIR(st.st_mode) ? add_directory(l, args[i])
								      : path_list_add(l, NULL, args[i]);
	if (err == -ENOMEM)
		fprintf(stderr, "hostprof: out of memory\n");
	return err;
}

/* path read into *out, or a line saying why not (the progress line erased first). */
static int read_one(const char *path, const struct perf_input_options *po, struct profile **out,
		    struct status_line *line)
{
	char err[512] = "", shown[ESCAPE_SHOWN_MAX];
	if (perf_input_is_perf_data(path)) {
		status_line_clear(line);	/* the perf.data reader shows progress of its own */
		return perf_input_load(path, po, out);	/* it says why it fails */
	}
	int rc = profile_read_file(path, out, err, sizeof(err));
	if (rc < 0)
		status_line_clear(line);
	if (rc < 0)	/* the reader's message escapes the path already */
		fprintf(stderr, "hostprof: %s\n", err[0] ? err : escape_str(shown, sizeof(shown), path));
	return rc;
}

/* src merged into dst, or a line saying why not. */
static int merge_one(struct profile *dst, const struct profile *src, const char *path, struct status_line *line)
{
	char shown[ESCAPE_SHOWN_MAX];
	int err = profile_merge(dst, src);
	if (err < 0)
		status_line_clear(line);
	if (err == -EOVERFLOW)
		fprintf(stderr, "hostprof: cannot merge %s: the profiles' samples add up past %llu (sample counts, or "
			"times in ns)\n", escape_str(shown, sizeof(shown), path), (unsigned long long)PROFILE_VALUE_MAX);
	else if (err < 0)
		fprintf(stderr, "hostprof: cannot merge %s: %s\n", escape_str(shown, sizeof(shown), path),
			strerror(-err));
	return err;
}

/* How far the reading is, for the status line. */
struct progress {
	struct status_line line;
	uint64_t start_ns;
	uint64_t total_bytes, done_bytes;	/* of the regular files given (a file that changes meanwhile: about) */
};

static void progress_start(struct progress *pr, bool wanted, const struct path_list *paths)
{
	struct stat st;
	status_line_init(&pr->line, stderr, wanted);
	pr->start_ns = clock_ns(CLOCK_MONOTONIC);
	pr->total_bytes = pr->done_bytes = 0;
	for (size_t i = 0; pr->line.on && i < paths->count; i++)
		if (stat(paths->items[i], &st) == 0)
			pr->total_bytes += (uint64_t)st.st_size;
}

/* File i (from 0) done: said once reading has taken PROFILE_INPUTS_PROGRESS_AFTER_MS, then every
 * STATUS_LINE_INTERVAL_MS. */
static void progress_done(struct progress *pr, const struct path_list *paths, size_t i)
{
	struct stat st;
	if (!pr->line.on)
		return;
	if (stat(paths->items[i], &st) == 0)
		pr->done_bytes += (uint64_t)st.st_size;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	if (now - pr->start_ns < (uint64_t)PROFILE_INPUTS_PROGRESS_AFTER_MS * 1000000 ||
	    !status_line_due(&pr->line, now))
		return;
	status_line_show(&pr->line, now, "hostprof: reading profiles: %zu of %zu merged, %.1f of %.1f MiB (%.0f%%)",
			 i + 1, paths->count, pr->done_bytes / 1048576.0, pr->total_bytes / 1048576.0,
			 pr->total_bytes ? 100.0 * (double)pr->done_bytes / (double)pr->total_bytes : 100.0);
}

int profile_inputs_load(char *const *args, int n, const struct perf_input_options *po, bool progress,
			struct profile **out)
{
	struct progress pr;
	static char *const default_args[] = { PROFILE_INPUTS_DEFAULT };
	struct path_list paths = { 0 };
	struct profile *merged = NULL;
	if (n == 0) {
		args = default_args;
		n = 1;
	}
	int err = expand_paths(args, n, &paths);
	progress_start(&pr, progress && err == 0, &paths);
	if (err == 0 && (err = read_one(paths.items[0], po, &merged, &pr.line)) == 0)
		progress_done(&pr, &paths, 0);
	for (size_t i = 1; i < paths.count && err == 0; i++) {
		struct profile *p = NULL;
		err = read_one(paths.items[i], po, &p, &pr.line);
		if (err == 0)
			err = merge_one(merged, p, paths.items[i], &pr.line);
		profile_free(p);
		if (err == 0)
			progress_done(&pr, &paths, i);
	}
	status_line_clear(&pr.line);
	path_list_free(&paths);
	if (err < 0) {
		profile_free(merged);
		return err;
	}
	*out = merged;
	return 0;
}
