/*
 * report.c — `hostprof report`: the top functions, call tree or per-thread view of profiles (src/profile/report.h
 * prints them). Exit status: 0 success, 1 on read or write errors, 2 on usage errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "src/cmd/commands.h"
#include "src/cmd/options.h"
#include "src/cmd/profile_inputs.h"
#include "src/cmd/status_line.h"
#include "src/profile/report.h"

int cmd_report(int argc, char **argv, const struct cli_env *env)
{
	struct report_command c;
	struct report_options *o = &c.report;
	int operand, err = settings_parse_command(&report_settings, argc, argv, &c, sizeof(c), &operand);
	(void)env;
	if (err)
		return err > 0 ? 0 : 2;
	/* On a terminal, names fit its width (C++ names run to hundreds of characters); --wide, or a pipe, whole. */
	o->width = o->wide ? 0 : (unsigned)status_line_columns(stdout);
	struct profile *p;
	struct perf_input_options po = { .symfs = c.perf.symfs };
	if (profile_inputs_load(argv + operand, argc - operand, &po, !o->quiet, &p) < 0)
		return 1;
	err = report_print(p, stdout, o);
	profile_free(p);
	if (fflush(stdout) != 0 && err == 0)
		err = -errno;
	if (err == -ESRCH) {
		fprintf(stderr, "hostprof: no samples of pid %" PRId32 " in the profile\n", o->pid);
		return 1;
	}
	if (err < 0) {
		fprintf(stderr, "hostprof: report: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}
