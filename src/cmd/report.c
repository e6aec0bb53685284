/*
 * report.c — `hostprof report`: the top functions, call tree or per-thread view of profiles (src/profile/report.h
 * prints them). Exit status: 0 success, 1 on read or write errors, 2 on usage errors.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "src/cmd/args.h"
#include "src/cmd/commands.h"
#include "src/cmd/profile_inputs.h"
#include "src/profile/report.h"

static void report_usage(FILE *out)
{
	fprintf(out, "usage: hostprof report [--sort self|total] [--limit N] [--tree [--percent-limit PCT]]\n"
		     "                       [--per-thread] [--pid PID] [--lines] [FILE|DIR...]\n"
		     "  --lines  show each frame's source line: function (file.c:LINE), a row per line\n");
}

enum { OPT_TREE = 256, OPT_PER_THREAD, OPT_PERCENT_LIMIT, OPT_LINES };

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
			ok = args_unsigned("--limit", optarg, &o->limit);
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
			ok = o->filter_pid = args_pid("--pid", optarg, &o->pid);
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
			ok = args_percent("--percent-limit", optarg, &o->percent_limit);
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
	struct profile *p;
	if (profile_inputs_load(argv + optind, argc - optind, &p) < 0)
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
