/*
 * replay.c — `hostprof replay`: run unwinders again on the samples of a replay file (--save-samples).
 *
 * --compare (the default) unwinds every sample with the stack-delta unwinder and with libunwind, the
 * reference, and reports how many agree frame for frame (IPs, signal flags and how the walk ended), listing
 * each disagreement with the frame where the two part and the rule the delta table had there.
 * --bench times each unwinder over the same samples, tables already built, and prints µs per sample, ns per
 * frame and the ratios. Samples of processes that map a file missing here (or a different build of it) are
 * skipped and counted: their unwind information is not the one the sample was taken with.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/clock.h"
#include "src/base/escape.h"
#include "src/base/regular_file.h"
#include "src/cmd/commands.h"
#include "src/cmd/options.h"
#include "src/processes/execinfo.h"
#include "src/pipeline/replay.h"
#include "unwind/unwind_deltas.h"
#include "unwind/unwind_libdw.h"
#include "unwind/unwind_libunwind.h"

enum replay_unwinder { RU_DELTAS, RU_LIBUNWIND, RU_LIBDW, RU_COUNT };

static const char *const unwinder_names[RU_COUNT] = { "deltas", "libunwind", "libdw" };

struct replay_run {
	struct replay *r;
	struct execinfo_mgr *em;
	struct replay_env *env;
	struct unwind_deltas *deltas;
	struct unwind_libunwind *libunwind;
	struct unwind_libdw *libdw;
	uint8_t *usable;	/* per sample: all files of its process are here */
	uint32_t nusable;
	unsigned show;		/* disagreements to list */
	int verbose;
};

struct unwind_result {
	struct unwind_frame frames[UNWIND_MAX_FRAMES];
	int n;
	enum unwind_status status;
};

static void forget_everywhere(void *ctx, const struct execinfo *e)
{
	struct replay_run *run = ctx;
	unwind_deltas_forget(run->deltas, e);
	unwind_libunwind_forget(run->libunwind, e);
	unwind_libdw_forget(run->libdw, e);
}

/* The sample as the unwinders see it: its registers and stack copy. Not its frame-pointer chain, which only the
 * delta unwinder could use: the unwinders are compared on the same input. */
static void sample_of(const struct replay_sample *rs, struct unwind_sample *us)
{
	memcpy(us->regs, rs->regs, sizeof(us->regs));
	us->stack = rs->stack;
	us->stack_size = rs->stack_size;
	us->fp_chain = NULL;
	us->fp_chain_len = 0;
}

static int run_unwinder(struct replay_run *run, enum replay_unwinder which, const struct replay_sample *rs,
			struct unwind_result *out)
{
	struct unwind_process proc;
	struct unwind_sample us;
	if (replay_env_process(run->env, rs->pid, &proc) < 0)
		return -ENOENT;
	sample_of(rs, &us);
	out->status = UNWIND_TRUNCATED;
	if (which == RU_DELTAS)
		out->n = unwind_deltas_unwind(run->deltas, &proc, &us, out->frames, UNWIND_MAX_FRAMES, &out->status);
	else if (which == RU_LIBUNWIND)
		out->n = unwind_libunwind_unwind(run->libunwind, &proc, &us, out->frames, UNWIND_MAX_FRAMES,
						 &out->status);
	else
		out->n = unwind_libdw_unwind(run->libdw, &proc, &us, out->frames, UNWIND_MAX_FRAMES, &out->status);
	return out->n < 0 ? out->n : 0;
}

/* A sample is usable when every file its process maps is the file it was recorded with. */
static void mark_usable(struct replay_run *run)
{
	for (uint32_t i = 0; i < run->r->nsamples; i++) {
		const struct replay_process *p = NULL;
		for (uint32_t j = 0; j < run->r->nprocesses && !p; j++) {
			if (run->r->processes[j].pid == run->r->samples[i].pid)
				p = &run->r->processes[j];
		}
		int ok = p != NULL;
		for (uint32_t m = 0; ok && m < p->nmappings; m++)
			ok = replay_env_file(run->env, p->mappings[m].file) != NULL;
		run->usable[i] = (uint8_t)ok;
		run->nusable += (uint32_t)ok;
	}
}

static const char *status_name(enum unwind_status s)
{
	return s == UNWIND_COMPLETE ? "complete" : s == UNWIND_UNKNOWN_LEAF ? "unknown-leaf" : "truncated";
}

/* "name+0xoff" or "file+0xva" for an absolute address of a sample's process. */
static void describe_ip(struct replay_run *run, int32_t pid, uint64_t ip, int is_return, char *buf, size_t len)
{
	struct unwind_process proc;
	struct unwind_module mod;
	struct symbol_frame sf[8];
	snprintf(buf, len, "0x%" PRIx64, ip);
	if (replay_env_process(run->env, pid, &proc) < 0 || proc.find_module(proc.ctx, ip, &mod) < 0)
		return;
	const struct execinfo *e = mod.cache_key;
	uint64_t va = ip - mod.bias - (is_return ? 1 : 0);
	struct symbolizer *sym = execinfo_symbolizer((struct execinfo *)e);
	int n = sym ? symbolizer_lookup(sym, va, sf, 8) : 0;
	char rule[64] = "";
	struct stack_delta_rule dr;
	if (mod.deltas && stack_deltas_lookup(mod.deltas, va, &dr) == 0)
		stack_delta_rule_format(&dr, rule, sizeof(rule));
	/* a replay file is handed over (a bug report), and names its files; its binaries name their functions */
	char file[ESCAPE_SHOWN_MAX], fn[ESCAPE_SHOWN_MAX];
	escape_str(file, sizeof(file), execinfo_name(e));
	if (n > 0 && sf[n - 1].function)
		snprintf(buf, len, "%s+0x%" PRIx64 " (%s) [%s]", file, va, escape_str(fn, sizeof(fn), sf[n - 1].function),
			 rule);
	else
		snprintf(buf, len, "%s+0x%" PRIx64 " [%s]", file, va, rule);
}

static int same_walk(const struct unwind_result *a, const struct unwind_result *b)
{
	if (a->n != b->n || a->status != b->status)
		return 0;
	for (int i = 0; i < a->n; i++) {
		if (a->frames[i].ip != b->frames[i].ip || a->frames[i].flags != b->frames[i].flags)
			return 0;
	}
	return 1;
}

static void print_disagreement(struct replay_run *run, uint32_t index, const struct unwind_result *d,
			       const struct unwind_result *l)
{
	const struct replay_sample *rs = &run->r->samples[index];
	int k = 0;
	while (k < d->n && k < l->n && d->frames[k].ip == l->frames[k].ip && d->frames[k].flags == l->frames[k].flags)
		k++;
	char a[2 * ESCAPE_SHOWN_MAX + 128], b[sizeof(a)], prev[sizeof(a)] = "-";
	if (k > 0)
		describe_ip(run, rs->pid, d->frames[k - 1].ip, k - 1 > 0, prev, sizeof(prev));
	snprintf(a, sizeof(a), "%s", k < d->n ? "" : "(ends)");
	snprintf(b, sizeof(b), "%s", k < l->n ? "" : "(ends)");
	if (k < d->n)
		describe_ip(run, rs->pid, d->frames[k].ip, 1, a, sizeof(a));
	if (k < l->n)
		describe_ip(run, rs->pid, l->frames[k].ip, 1, b, sizeof(b));
	printf("  sample %u (pid %d tid %d): part at frame %d after %s\n"
	       "    deltas:    %d frames, %s; frame %d = %s\n"
	       "    libunwind: %d frames, %s; frame %d = %s\n",
	       index, rs->pid, rs->tid, k, prev, d->n, status_name(d->status), k, a, l->n, status_name(l->status), k,
	       b);
}

static int compare(struct replay_run *run)
{
	static struct unwind_result d, l;
	uint32_t agree = 0, differ = 0, shown = 0;
	for (uint32_t i = 0; i < run->r->nsamples; i++) {
		if (!run->usable[i])
			continue;
		if (run_unwinder(run, RU_DELTAS, &run->r->samples[i], &d) < 0 ||
		    run_unwinder(run, RU_LIBUNWIND, &run->r->samples[i], &l) < 0)
			return -ENOMEM;
		if (same_walk(&d, &l)) {
			agree++;
			continue;
		}
		differ++;
		if (shown++ < run->show)
			print_disagreement(run, i, &d, &l);
	}
	printf("replay: %u samples, %u skipped (files missing or different here); deltas vs libunwind: "
	       "%u agree (%.2f%%), %u differ\n",
	       run->r->nsamples, run->r->nsamples - run->nusable, agree,
	       agree + differ ? 100.0 * agree / (agree + differ) : 0.0, differ);
	return 0;
}

/* One pass over the usable samples; returns frames produced. */
static uint64_t bench_pass(struct replay_run *run, enum replay_unwinder which)
{
	static struct unwind_result res;
	uint64_t frames = 0;
	for (uint32_t i = 0; i < run->r->nsamples; i++) {
		if (run->usable[i] && run_unwinder(run, which, &run->r->samples[i], &res) == 0)
			frames += (uint64_t)res.n;
	}
	return frames;
}

/* The delta table of every file the samples used: what it costs to build and to keep, per FileID. */
static void print_tables(const struct replay_run *run)
{
	for (uint32_t i = 0; i < run->r->nfiles; i++) {
		const struct execinfo *e = replay_env_file(run->env, i);
		const struct stack_deltas_stats *st = e ? execinfo_deltas_stats(e) : NULL;
		if (!st)
			continue;
		char name[ESCAPE_SHOWN_MAX];
		printf("table: %-28s %9zu rows %10zu bytes %5.2f bytes/row  built in %7.2f ms  (%zu fallback rows)\n",
		       escape_str(name, sizeof(name), execinfo_name(e)), st->rows, st->bytes, st->rows ? (double)st->bytes / (double)st->rows : 0.0,
		       (double)st->build_ns / 1e6, st->fallback_rows);
	}
}

static int bench(struct replay_run *run, unsigned iterations)
{
	double us_per_sample[RU_COUNT];
	if (!run->nusable) {
		printf("bench: no usable samples\n");
		return 0;
	}
	for (int w = 0; w < RU_COUNT; w++) {
		uint64_t t0 = clock_mono_ns();
		bench_pass(run, (enum replay_unwinder)w); /* builds tables and caches: not what is timed */
		uint64_t t1 = clock_mono_ns(), frames = 0;
		for (unsigned it = 0; it < iterations; it++)
			frames += bench_pass(run, (enum replay_unwinder)w);
		uint64_t t2 = clock_mono_ns();
		double samples = (double)run->nusable * iterations;
		us_per_sample[w] = (double)(t2 - t1) / 1e3 / samples;
		printf("bench: %-9s %8.3f us/sample %8.1f ns/frame  %.1f frames/sample  (first pass %.1f ms)\n",
		       unwinder_names[w], us_per_sample[w], frames ? (double)(t2 - t1) / (double)frames : 0.0,
		       (double)frames / samples, (double)(t1 - t0) / 1e6);
	}
	printf("bench: libunwind/deltas x%.1f, libdw/deltas x%.1f (%u samples x %u iterations)\n",
	       us_per_sample[RU_LIBUNWIND] / us_per_sample[RU_DELTAS], us_per_sample[RU_LIBDW] / us_per_sample[RU_DELTAS],
	       run->nusable, iterations);
	print_tables(run);
	return 0;
}

/* A path that names a FIFO or a device where the replay has a file was not opened (replay.h): said, since it
 * is not what a missing file or another build of it is. */
static void warn_not_regular(const struct replay_run *run)
{
	for (uint32_t i = 0; i < run->r->nfiles; i++) {
		const struct replay_file_status *st = replay_env_file_status(run->env, i);
		char shown[ESCAPE_SHOWN_MAX];
		if (st->not_regular)
			fprintf(stderr, "hostprof: replay: %s: not a regular file (%s): the samples that need it are "
				"skipped\n", escape_str(shown, sizeof(shown), run->r->files[i].path),
				regular_file_kind(st->mode));
	}
}

static int run_setup(struct replay_run *run, const char *path)
{
	char err[512];
	int rc = replay_read(path, &run->r, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "hostprof: %s\n", err);
		return rc;
	}
	rc = execinfo_mgr_new(&run->em);
	if (rc == 0)
		rc = unwind_libunwind_new(&run->libunwind);
	struct unwind_deltas_options dopts = { .fallback = unwind_libunwind_deltas_fallback,
					       .fallback_ctx = run->libunwind };
	if (rc == 0)
		rc = unwind_deltas_new(&dopts, &run->deltas);
	if (rc == 0)
		rc = unwind_libdw_new(&run->libdw);
	if (rc == 0 && !(run->usable = calloc(run->r->nsamples + 1, 1)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = execinfo_mgr_add_release_hook(run->em, forget_everywhere, run);
	if (rc == 0)
		rc = replay_env_new(run->r, run->em, &run->env);
	if (rc < 0) {
		fprintf(stderr, "hostprof: %s\n", strerror(-rc));
		return rc;
	}
	warn_not_regular(run);
	mark_usable(run);
	return 0;
}

static void run_teardown(struct replay_run *run)
{
	replay_env_free(run->env);
	unwind_deltas_free(run->deltas);
	unwind_libunwind_free(run->libunwind);
	unwind_libdw_free(run->libdw);
	if (run->em)
		execinfo_mgr_free(run->em);
	replay_free(run->r);
	free(run->usable);
}

int cmd_replay(int argc, char **argv, const struct cli_env *env)
{
	struct replay_options o;
	struct replay_run run = { .show = 0 };
	int operand, err = settings_parse_command(&replay_settings, argc, argv, &o, sizeof(o), &operand);
	(void)env;
	if (err)
		return err > 0 ? 0 : 2;
	if (operand != argc - 1) {
		fprintf(stderr, "hostprof: replay needs one replay file (try 'hostprof replay --help')\n");
		return 2;
	}
	run.show = o.show;
	int rc = run_setup(&run, argv[operand]);
	if (rc == 0 && (o.compare || !o.bench))
		rc = compare(&run);
	if (rc == 0 && o.bench)
		rc = bench(&run, o.iterations);
	run_teardown(&run);
	return rc < 0 ? 1 : 0;
}
