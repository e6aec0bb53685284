/*
 * diff.c — `hostprof diff BASE NEW`: which functions' shares grew (src/profile/diff.h compares), and with --html a
 * differential flame graph page of NEW (src/profile/flame_html.h). Exit status: 0, 1 when a function regressed
 * past the threshold (for CI: the page is written either way, to keep next to the failing status), 2 on usage,
 * read or write errors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/cmd/commands.h"
#include "src/cmd/options.h"
#include "src/cmd/profile_inputs.h"
#include "src/profile/diff.h"
#include "src/profile/flame_html.h"

/* Parse diff's options into o; returns -1 to go on, else the exit status. */
static int parse_diff_options(int argc, char **argv, struct diff_command *c, int *operand)
{
	int err = settings_parse_command(&diff_settings, argc, argv, c, sizeof(*c), operand);
	if (err)
		return err > 0 ? 0 : 2;
	if (argc - *operand != 2) {
		fprintf(stderr, "hostprof: diff needs two profiles, BASE and NEW (try 'hostprof diff --help')\n");
		return 2;
	}
	return -1;
}

/* One side of the comparison, which must have samples to compare (-ENODATA if it has none). Returns 0 and *out,
 * or a negative errno, said on stderr. */
static int load_side(char *arg, enum profile_value value, const struct perf_input_options *po, struct profile **out)
{
	struct profile *p;
	int err = profile_inputs_load(&arg, 1, po, false, &p);
	if (err < 0)
		return err;
	uint64_t total = 0;
	for (uint32_t i = 0; i < p->samples.count; i++)
		total += profile_sample_value(p, &p->samples.items[i], value);
	if (!total) {
		fprintf(stderr, "hostprof: %s: no %s to compare\n", arg,
			value == PROFILE_VALUE_OFF_CPU ? "off-CPU time (record --off-cpu)" : "samples");
		profile_free(p);
		return -ENODATA;
	}
	*out = p;
	return 0;
}

/* The verdict line diff prints, for the page: "FAIL: ..." or "OK: ...", or NULL without memory. */
static char *verdict_text(const struct diff *d, double threshold)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m)
		return NULL;
	diff_print_verdict(d, m, threshold);
	if (fclose(m) != 0) {
		free(text);
		return NULL;
	}
	while (len && text[len - 1] == '\n')
		text[--len] = '\0';
	return text;
}

/* The differential flame graph page, written to o->html (removed again when writing fails). */
static int write_html(const struct profile *base, const struct profile *new, const struct diff *d,
		      const struct diff_options *o)
{
	char *verdict = verdict_text(d, o->threshold);
	struct flame_html_options fo = { .title = o->new_name, .value = (enum profile_value)o->value, .base = base,
					 .base_title = o->base_name, .verdict = verdict ? verdict + strspn(verdict, "\n") : NULL };
	FILE *out = fopen(o->html, "we");
	int err = out ? flame_html_write(new, out, &fo) : -errno;
	if (out && fclose(out) != 0 && err == 0)
		err = -errno;
	if (err < 0) {
		fprintf(stderr, "hostprof: cannot write %s: %s\n", o->html, strerror(-err));
		if (out)
			unlink(o->html);
	}
	free(verdict);
	return err;
}

int cmd_diff(int argc, char **argv, const struct cli_env *env)
{
	struct diff_command c;
	struct diff_options o;
	struct profile *base = NULL, *new = NULL;
	struct diff d;
	int operand, status = parse_diff_options(argc, argv, &c, &operand), err;
	(void)env;
	if (status >= 0)
		return status;
	o = c.diff;
	struct perf_input_options po = { .symfs = c.perf.symfs };
	o.base_name = argv[operand];
	o.new_name = argv[operand + 1];
	if (load_side(argv[operand], o.value, &po, &base) < 0 ||
	    load_side(argv[operand + 1], o.value, &po, &new) < 0) {
		profile_free(base);
		return 2;
	}
	if ((err = diff_compute_value(base, new, o.value, &d)) == 0) {
		if ((err = diff_print(&d, stdout, &o)) == 0 && fflush(stdout) != 0)
			err = -errno;
		status = diff_regressions(&d, o.threshold) ? 1 : 0;
		if (err == 0 && o.html[0] && write_html(base, new, &d, &o) < 0)
			status = 2;
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
