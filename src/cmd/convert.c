/*
 * convert.c — `hostprof convert`: profiles to pprof, speedscope or collapsed stacks (src/profile/ writes each).
 * Exit status: 0 success, 1 on read or write errors (a half-written output file is removed), 2 on usage errors.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/cmd/commands.h"
#include "src/cmd/profile_inputs.h"
#include "src/profile/collapsed.h"
#include "src/profile/pprof.h"
#include "src/profile/speedscope.h"

enum { OPT_STACK_IDS = 256 };

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
	a.name = optind < argc ? argv[optind] : PROFILE_INPUTS_DEFAULT;
	struct profile *p;
	if (profile_inputs_load(argv + optind, argc - optind, &p) < 0)
		return 1;
	status = write_output(p, &a);
	profile_free(p);
	return status;
}
