/*
 * cmd_report.c — `hostprof report`, `hostprof convert` and `hostprof diff`: read profiles, then print, convert
 * or compare them.
 *
 * Every command takes profile files or directories; a directory stands for its *.msgpack files in name order
 * (a daemon's output directory, say), and all the files given are merged into one profile. Errors are one
 * line "hostprof: ..." on stderr. Exit status: 0 success; report and convert 1 on read or write errors, 2 on
 * usage errors; diff 1 when a function regressed past the threshold, 2 on usage or read errors.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/collapsed.h"
#include "src/commands.h"
#include "src/diff.h"
#include "src/pprof.h"
#include "src/profile.h"
#include "src/report.h"
#include "src/speedscope.h"

#define DEFAULT_PROFILE "hostprof.msgpack"
#define PROFILE_SUFFIX ".msgpack"

/* --- reading and merging ---------------------------------------------------------------------------------- */

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

static struct profile *read_one(const char *path)
{
	struct profile *p = NULL;
	char err[512] = "";
	if (profile_read_file(path, &p, err, sizeof(err)) < 0) {
		fprintf(stderr, "hostprof: %s\n", err[0] ? err : path);
		return NULL;
	}
	return p;
}

/* Read the profiles args name (files or directories; none: hostprof.msgpack) merged into one, or NULL. */
static struct profile *load_profiles(char *const *args, int n)
{
	static char *const default_args[] = { DEFAULT_PROFILE };
	struct path_list paths = { 0 };
	struct profile *merged = NULL;
	if (n == 0) {
		args = default_args;
		n = 1;
	}
	if (expand_paths(args, n, &paths) == 0 && (merged = read_one(paths.items[0]))) {
		for (size_t i = 1; i < paths.count && merged; i++) {
			struct profile *p = read_one(paths.items[i]);
			int err = p ? profile_merge(merged, p) : -EINVAL;
			if (p && err < 0)
				fprintf(stderr, "hostprof: cannot merge %s: %s\n", paths.items[i], strerror(-err));
			profile_free(p);
			if (err < 0) {
				profile_free(merged);
				merged = NULL;
			}
		}
	}
	path_list_free(&paths);
	return merged;
}

/* --- option values ---------------------------------------------------------------------------------------- */

static bool parse_unsigned(const char *flag, const char *s, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > UINT_MAX || s[0] == '-') {
		fprintf(stderr, "hostprof: invalid %s '%s' (a number > 0)\n", flag, s);
		return false;
	}
	*out = (unsigned)v;
	return true;
}

static bool parse_percent(const char *flag, const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 100) {
		fprintf(stderr, "hostprof: invalid %s '%s' (a percentage from 0 to 100)\n", flag, s);
		return false;
	}
	*out = v;
	return true;
}

static bool parse_pid(const char *s, int32_t *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT32_MAX) {
		fprintf(stderr, "hostprof: invalid --pid '%s' (a process ID)\n", s);
		return false;
	}
	*out = (int32_t)v;
	return true;
}

/* --- report ----------------------------------------------------------------------------------------------- */

static void report_usage(FILE *out)
{
	fprintf(out, "usage: hostprof report [--sort self|total] [--limit N] [--tree [--percent-limit PCT]]\n"
		     "                       [--per-thread] [--pid PID] [--lines] [FILE|DIR...]\n"
		     "  --lines  show each frame's source line: function (file.c:LINE), a row per line\n");
}

enum { OPT_TREE = 256, OPT_PER_THREAD, OPT_PERCENT_LIMIT, OPT_STACK_IDS, OPT_LINES };

static const struct option report_longopts[] = {
	{ "limit", required_argument, NULL, 'n' },
	{ "sort", required_argument, NULL, 's' },
	{ "pid", required_argument, NULL, 'p' },
	{ "tree", no_argument, NULL, OPT_TREE },
	{ "per-thread", no_argument, NULL, OPT_PER_THREAD },
	{ "percent-limit", required_argument, NULL, OPT_PERCENT_LIMIT },
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Parse report's options into o; returns -1 to go on, else the exit status. */
static int parse_report_options(int argc, char **argv, struct report_options *o)
{
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:s:p:h", report_longopts, NULL)) != -1) {
		bool ok = true;
		switch (c) {
		case 'n':
			ok = parse_unsigned("--limit", optarg, &o->limit);
			break;
		case 's':
			if (strcmp(optarg, "self") == 0 || strcmp(optarg, "total") == 0) {
				o->sort = optarg[0] == 's' ? REPORT_SORT_SELF : REPORT_SORT_TOTAL;
			} else {
				fprintf(stderr, "hostprof: invalid --sort '%s' (self or total)\n", optarg);
				ok = false;
			}
			break;
		case 'p':
			ok = o->filter_pid = parse_pid(optarg, &o->pid);
			break;
		case OPT_TREE:
			o->tree = true;
			break;
		case OPT_PER_THREAD:
			o->per_thread = true;
			break;
		case OPT_LINES:
			o->lines = true;
			break;
		case OPT_PERCENT_LIMIT:
			ok = parse_percent("--percent-limit", optarg, &o->percent_limit);
			break;
		case 'h':
			report_usage(stdout);
			return 0;
		default:
			report_usage(stderr);
			return 2;
		}
		if (!ok)
			return 2;
	}
	return -1;
}

int cmd_report(int argc, char **argv, const struct cli_env *env)
{
	struct report_options o = { .limit = REPORT_DEFAULT_LIMIT, .sort = REPORT_SORT_SELF,
				    .percent_limit = REPORT_DEFAULT_PERCENT_LIMIT };
	int status = parse_report_options(argc, argv, &o);
	(void)env;
	if (status >= 0)
		return status;
	struct profile *p = load_profiles(argv + optind, argc - optind);
	if (!p)
		return 1;
	int err = report_print(p, stdout, &o);
	profile_free(p);
	if (fflush(stdout) != 0 && err == 0)
		err = -errno;
	if (err == -ESRCH) {
		fprintf(stderr, "hostprof: no samples of pid %" PRId32 " in the profile\n", o.pid);
		return 1;
	}
	if (err < 0) {
		fprintf(stderr, "hostprof: report: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}

/* --- convert ---------------------------------------------------------------------------------------------- */

enum format { FORMAT_COLLAPSED, FORMAT_PPROF, FORMAT_SPEEDSCOPE };

struct convert_args {
	enum format format;
	const char *out_path;	/* NULL: standard output */
	struct collapsed_options collapsed;
	const char *name;	/* the first input, to name the speedscope document */
};

static void convert_usage(FILE *out)
{
	fprintf(out, "usage: hostprof convert [FILE|DIR...] --to collapsed|pprof|speedscope [--stack-ids] [-o OUT]\n");
}

static bool parse_format(const char *s, enum format *f)
{
	static const char *const names[] = { "collapsed", "pprof", "speedscope" };
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(s, names[i]) == 0) {
			*f = (enum format)i;
			return true;
		}
	}
	fprintf(stderr, "hostprof: unknown format '%s' (collapsed, pprof or speedscope)\n", s);
	return false;
}

static int parse_convert_options(int argc, char **argv, struct convert_args *a)
{
	static const struct option longopts[] = {
		{ "to", required_argument, NULL, 't' },
		{ "output", required_argument, NULL, 'o' },
		{ "stack-ids", no_argument, NULL, OPT_STACK_IDS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_format = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "t:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!(have_format = parse_format(optarg, &a->format)))
				return 2;
			break;
		case 'o':
			a->out_path = optarg;
			break;
		case OPT_STACK_IDS:
			a->collapsed.stack_ids = true;
			break;
		case 'h':
			convert_usage(stdout);
			return 0;
		default:
			convert_usage(stderr);
			return 2;
		}
	}
	if (!have_format) {
		fprintf(stderr, "hostprof: convert needs --to collapsed, pprof or speedscope\n");
		return 2;
	}
	if (a->collapsed.stack_ids && a->format != FORMAT_COLLAPSED) {
		fprintf(stderr, "hostprof: --stack-ids only applies to --to collapsed\n");
		return 2;
	}
	return -1;
}

static int write_format(const struct profile *p, FILE *out, const struct convert_args *a)
{
	struct speedscope_options so = { .name = a->name, .exporter = "hostprof " HOSTPROF_VERSION };
	switch (a->format) {
	case FORMAT_PPROF:
		return pprof_write(p, out);
	case FORMAT_SPEEDSCOPE:
		return speedscope_write(p, out, &so);
	case FORMAT_COLLAPSED:
		break;
	}
	return collapsed_write(p, out, &a->collapsed);
}

/* Write the converted profile; a failed write removes a half-written output file. */
static int write_output(const struct profile *p, const struct convert_args *a)
{
	FILE *out = a->out_path ? fopen(a->out_path, "we") : stdout;
	if (!out) {
		fprintf(stderr, "hostprof: cannot write %s: %s\n", a->out_path, strerror(errno));
		return 1;
	}
	int err = write_format(p, out, a);
	if (fflush(out) != 0 && err == 0)
		err = -errno;
	if (out != stdout && fclose(out) != 0 && err == 0)
		err = -errno;
	if (err < 0) {
		fprintf(stderr, "hostprof: cannot write %s: %s\n", a->out_path ? a->out_path : "standard output",
			strerror(-err));
		if (a->out_path)
			unlink(a->out_path);
		return 1;
	}
	return 0;
}

int cmd_convert(int argc, char **argv, const struct cli_env *env)
{
	struct convert_args a = { .format = FORMAT_COLLAPSED };
	int status = parse_convert_options(argc, argv, &a);
	(void)env;
	if (status >= 0)
		return status;
	if (a.format == FORMAT_PPROF && !a.out_path && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "hostprof: pprof output is binary: use -o FILE or redirect standard output\n");
		return 2;
	}
	a.name = optind < argc ? argv[optind] : DEFAULT_PROFILE;
	struct profile *p = load_profiles(argv + optind, argc - optind);
	if (!p)
		return 1;
	status = write_output(p, &a);
	profile_free(p);
	return status;
}

/* --- diff ------------------------------------------------------------------------------------------------- */

static void diff_usage(FILE *out)
{
	fprintf(out, "usage: hostprof diff BASE NEW [--threshold PCT] [--limit N]\n"
		     "  BASE, NEW: profile files or directories; exit status 1 when a function's total share\n"
		     "  grew by more than PCT percentage points (default %.0f)\n",
		DIFF_DEFAULT_THRESHOLD);
}

static int parse_diff_options(int argc, char **argv, struct diff_options *o)
{
	static const struct option longopts[] = {
		{ "threshold", required_argument, NULL, 't' },
		{ "limit", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "t:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!parse_percent("--threshold", optarg, &o->threshold))
				return 2;
			break;
		case 'n':
			if (!parse_unsigned("--limit", optarg, &o->limit))
				return 2;
			break;
		case 'h':
			diff_usage(stdout);
			return 0;
		default:
			diff_usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		diff_usage(stderr);
		return 2;
	}
	return -1;
}

/* One side of the comparison, which must have samples to compare. */
static struct profile *load_side(char *arg)
{
	struct profile *p = load_profiles(&arg, 1);
	uint64_t total = 0;
	for (uint32_t i = 0; p && i < p->samples.count; i++)
		total += p->samples.items[i].count;
	if (p && !total) {
		fprintf(stderr, "hostprof: %s: no samples to compare\n", arg);
		profile_free(p);
		return NULL;
	}
	return p;
}

int cmd_diff(int argc, char **argv, const struct cli_env *env)
{
	struct diff_options o = { .threshold = DIFF_DEFAULT_THRESHOLD, .limit = DIFF_DEFAULT_LIMIT };
	struct profile *base = NULL, *new = NULL;
	struct diff d;
	int status = parse_diff_options(argc, argv, &o), err;
	(void)env;
	if (status >= 0)
		return status;
	o.base_name = argv[optind];
	o.new_name = argv[optind + 1];
	if (!(base = load_side(argv[optind])) || !(new = load_side(argv[optind + 1]))) {
		profile_free(base);
		return 2;
	}
	if ((err = diff_compute(base, new, &d)) == 0) {
		if ((err = diff_print(&d, stdout, &o)) == 0 && fflush(stdout) != 0)
			err = -errno;
		status = diff_regressions(&d, o.threshold) ? 1 : 0;
		diff_free(&d);
	}
	profile_free(base);
	profile_free(new);
	if (err < 0) {
		fprintf(stderr, "hostprof: diff: %s\n", strerror(-err));
		return 2;
	}
	return status;
}
