/*
 * profile_inputs.c — the profiles a command reads: files and directories of them, merged. See profile_inputs.h.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/cmd/profile_inputs.h"

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

/* Add the *.msgpack files of dir, sorted by name. */
static int add_directory(struct path_list *l, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t first = l->count;
	int err = 0;
	if (!d) {
		err = -errno;
		fprintf(stderr, "hostprof: cannot read directory %s: %s\n", dir, strerror(-err));
		return err;
	}
	while (err == 0 && (e = readdir(d)))
		if (is_profile_name(e->d_name))
			err = path_list_add(l, dir, e->d_name);
	closedir(d);
	if (err == 0 && l->count == first) {
		fprintf(stderr, "hostprof: %s: no *%s profiles in this directory\n", dir, PROFILE_SUFFIX);
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

static int read_one(const char *path, struct profile **out)
{
	char err[512] = "";
	int rc = profile_read_file(path, out, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "hostprof: %s\n", err[0] ? err : path);
	return rc;
}

int profile_inputs_load(char *const *args, int n, struct profile **out)
{
	static char *const default_args[] = { PROFILE_INPUTS_DEFAULT };
	struct path_list paths = { 0 };
	struct profile *merged = NULL;
	if (n == 0) {
		args = default_args;
		n = 1;
	}
	int err = expand_paths(args, n, &paths);
	if (err == 0)
		err = read_one(paths.items[0], &merged);
	for (size_t i = 1; i < paths.count && err == 0; i++) {
		struct profile *p = NULL;
		err = read_one(paths.items[i], &p);
		if (err == 0 && (err = profile_merge(merged, p)) < 0)
			fprintf(stderr, "hostprof: cannot merge %s: %s\n", paths.items[i], strerror(-err));
		profile_free(p);
	}
	path_list_free(&paths);
	if (err < 0) {
		profile_free(merged);
		return err;
	}
	*out = merged;
	return 0;
}
