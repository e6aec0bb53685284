/*
 * convert.c — `hostprof convert`: profiles to pprof, speedscope, collapsed stacks, an OTLP profiles export
 * request or an HTML flame graph page (src/profile/ writes each).
 * Exit status: 0 success, 1 on read or write errors (a half-written output file is removed), 2 on usage errors.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/cmd/commands.h"
#include "src/cmd/options.h"
#include "src/cmd/profile_inputs.h"
#include "src/profile/collapsed.h"
#include "src/profile/flame_html.h"
#include "src/profile/otlp.h"
#include "src/profile/pprof.h"
#include "src/profile/speedscope.h"

struct convert_args {
	struct convert_options o;
	struct collapsed_options collapsed;
	const char *out_path;	/* NULL: standard output */
	const char *name;	/* the first input, to name the speedscope document and the flame graph page */
};

/* Parse convert's options into a; returns -1 to go on, else the exit status. */
static int parse_convert_options(int argc, char **argv, struct convert_args *a, int *operand)
{
	int err = settings_parse_command(&convert_settings, argc, argv, &a->o, sizeof(a->o), operand);
	if (err)
		return err > 0 ? 0 : 2;
	if (!a->o.format_given) {
		fprintf(stderr, "hostprof: convert needs --to collapsed, pprof, speedscope, otlp or html\n");
		return 2;
	}
	if (a->o.stack_ids && a->o.format != CONVERT_COLLAPSED) {
		fprintf(stderr, "hostprof: --stack-ids only applies to --to collapsed\n");
		return 2;
	}
	if (a->o.value != PROFILE_VALUE_SAMPLES && (a->o.format == CONVERT_PPROF || a->o.format == CONVERT_OTLP)) {
		fprintf(stderr, "hostprof: --value applies to collapsed, speedscope and html (pprof and otlp carry "
				"every value)\n");
		return 2;
	}
	a->collapsed.stack_ids = a->o.stack_ids;
	a->collapsed.value = (enum profile_value)a->o.value;
	a->out_path = a->o.output[0] ? a->o.output : NULL;
	return -1;
}

/* The export request as a collector takes it, written as it is (no compression, no framing). */
static int otlp_write(const struct profile *p, FILE *out)
{
	struct otlp_encode_options o = { .scope_version = HOSTPROF_VERSION };
	uint8_t *buf;
	size_t len;
	int err = otlp_encode_profile(p, &o, &buf, &len);
	if (err == 0 && fwrite(buf, 1, len, out) != len)
		err = -EIO;
	free(buf);
	return err;
}

static int write_format(const struct profile *p, FILE *out, const struct convert_args *a)
{
	struct speedscope_options so = { .name = a->name, .exporter = "hostprof " HOSTPROF_VERSION,
					 .value = (enum profile_value)a->o.value };
	struct flame_html_options fo = { .title = a->name, .value = (enum profile_value)a->o.value };
	switch ((enum convert_format)a->o.format) {
	case CONVERT_HTML:
		return flame_html_write(p, out, &fo);
	case CONVERT_PPROF:
		return pprof_write(p, out);
	case CONVERT_SPEEDSCOPE:
		return speedscope_write(p, out, &so);
	case CONVERT_OTLP:
		return otlp_write(p, out);
	case CONVERT_COLLAPSED:
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
	struct convert_args a = { .out_path = NULL };
	int operand, status = parse_convert_options(argc, argv, &a, &operand);
	(void)env;
	if (status >= 0)
		return status;
	if ((a.o.format == CONVERT_PPROF || a.o.format == CONVERT_OTLP) && !a.out_path && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "hostprof: %s output is binary: use -o FILE or redirect standard output\n",
			a.o.format == CONVERT_PPROF ? "pprof" : "otlp");
		return 2;
	}
	a.name = operand < argc ? argv[operand] : PROFILE_INPUTS_DEFAULT;
	struct profile *p;
	struct perf_input_options po = { .symfs = a.o.perf.symfs };
	if (profile_inputs_load(argv + operand, argc - operand, &po, !a.o.quiet, &p) < 0)
		return 1;
	status = write_output(p, &a);
	profile_free(p);
	return status;
}
