/*
 * diff.c — `hostprof diff BASE NEW`: which functions' shares grew (src/profile/diff.h compares). Exit status: 0,
 * 1 when a function regressed past the threshold (for CI), 2 on usage or read errors.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "src/cmd/args.h"
#include "src/cmd/commands.h"
#include "src/cmd/profile_inputs.h"
#include "src/profile/diff.h"

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
			if (!args_percent("--threshold", optarg, &o->threshold))
				return 2;
			break;
		case 'n':
			if (!args_unsigned("--limit", optarg, &o->limit))
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

/* One side of the comparison, which must have samples to compare (-ENODATA if it has none). Returns 0 and *out,
 * or a negative errno, said on stderr. */
static int load_side(char *arg, struct profile **out)
{
	struct profile *p;
	int err = profile_inputs_load(&arg, 1, &p);
	if (err < 0)
		return err;
	uint64_t total = 0;
	for (uint32_t i = 0; i < p->samples.count; i++)
		total += p->samples.items[i].count;
	if (!total) {
		fprintf(stderr, "hostprof: %s: no samples to compare\n", arg);
		profile_free(p);
		return -ENODATA;
	}
	*out = p;
	return 0;
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
	if (load_side(argv[optind], &base) < 0 || load_side(argv[optind + 1], &new) < 0) {
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
