/*
 * cmd_report.c — `hostprof report` and `hostprof convert`: read profiles, print or convert them.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/collapsed.h"
#include "src/commands.h"
#include "src/profile.h"
#include "src/report.h"

#define DEFAULT_PROFILE "hostprof.msgpack"

static struct profile *load_profile(const char *path)
{
	struct profile *p = NULL;
	char err[512] = "";
	if (profile_read_file(path, &p, err, sizeof(err)) < 0) {
		fprintf(stderr, "hostprof: %s\n", err[0] ? err : path);
		return NULL;
	}
	return p;
}

static void report_usage(FILE *out)
{
	fprintf(out, "usage: hostprof report [--limit N] [--sort self|total] [FILE]\n");
}

int cmd_report(int argc, char **argv, const struct cli_env *env)
{
	static const struct option longopts[] = {
		{ "limit", required_argument, NULL, 'n' },
		{ "sort", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct report_options o = { .limit = 20, .sort = REPORT_SORT_SELF };
	char *end;
	int c;
	(void)env;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:s:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			o.limit = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !o.limit) {
				fprintf(stderr, "hostprof: invalid --limit '%s' (a number > 0)\n", optarg);
				return 2;
			}
			break;
		case 's':
			if (strcmp(optarg, "self") == 0) {
				o.sort = REPORT_SORT_SELF;
			} else if (strcmp(optarg, "total") == 0) {
				o.sort = REPORT_SORT_TOTAL;
			} else {
				fprintf(stderr, "hostprof: invalid --sort '%s' (self or total)\n", optarg);
				return 2;
			}
			break;
		case 'h':
			report_usage(stdout);
			return 0;
		default:
			report_usage(stderr);
			return 2;
		}
	}
	if (argc - optind > 1) {
		report_usage(stderr);
		return 2;
	}
	struct profile *p = load_profile(optind < argc ? argv[optind] : DEFAULT_PROFILE);
	if (!p)
		return 1;
	int err = report_print(p, stdout, &o);
	profile_free(p);
	if (err < 0) {
		fprintf(stderr, "hostprof: report: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}

static void convert_usage(FILE *out)
{
	fprintf(out, "usage: hostprof convert [FILE] --to collapsed [-o OUT]\n");
}

static int write_collapsed(const struct profile *p, const char *out_path, const struct collapsed_options *o)
{
	FILE *out = out_path ? fopen(out_path, "we") : stdout;
	if (!out) {
		fprintf(stderr, "hostprof: cannot write %s: %s\n", out_path, strerror(errno));
		return 1;
	}
	int err = collapsed_write(p, out, o);
	if (fflush(out) != 0 && err == 0)
		err = -errno;
	if (out != stdout && fclose(out) != 0 && err == 0)
		err = -errno;
	if (err < 0) {
		fprintf(stderr, "hostprof: cannot write %s: %s\n", out_path ? out_path : "standard output",
			strerror(-err));
		return 1;
	}
	return 0;
}

int cmd_convert(int argc, char **argv, const struct cli_env *env)
{
	static const struct option longopts[] = {
		{ "to", required_argument, NULL, 't' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *format = NULL, *out_path = NULL;
	struct collapsed_options co = { 0 };
	int c;
	(void)env;
	optind = 1;
	while ((c = getopt_long(argc, argv, "t:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			format = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'h':
			convert_usage(stdout);
			return 0;
		default:
			convert_usage(stderr);
			return 2;
		}
	}
	if (!format || strcmp(format, "collapsed") != 0) {
		fprintf(stderr, "hostprof: convert needs --to collapsed%s%s%s\n", format ? " (unknown format '" : "",
			format ? format : "", format ? "')" : "");
		return 2;
	}
	if (argc - optind > 1) {
		convert_usage(stderr);
		return 2;
	}
	struct profile *p = load_profile(optind < argc ? argv[optind] : DEFAULT_PROFILE);
	if (!p)
		return 1;
	int status = write_collapsed(p, out_path, &co);
	profile_free(p);
	return status;
}
