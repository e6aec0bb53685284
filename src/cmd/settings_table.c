/*
 * settings_table.c — every option of every command and every key of the daemon's config file, once. See
 * options.h; the man pages document each row (tests/integration/test_cli_docs.c compares them with --help).
 */
#include <stddef.h>
#include <stdint.h>

#include "src/cmd/daemon_config.h"
#include "src/cmd/options.h"
#include "src/profile/diff.h"
#include "src/profile/report.h"

#define FIELD(type, member) .offset = offsetof(type, member), .size = sizeof(((type *)0)->member)
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define GROUP(items, type, member) { items, COUNT(items), offsetof(type, member) }
/* A command whose settings are one table of its own, filling the struct the table's rows name. */
#define ONE_TABLE_COMMAND(var, name, usage_text, items)                                                    \
	static const struct setting_group var##_groups[] = { { items, COUNT(items), 0 } };                 \
	const struct command_settings var = { .command = name, .usage = usage_text, .groups = var##_groups, \
					      .ngroups = 1 }

static const char *const unwinder_names[] = { "deltas", "libunwind", NULL };	/* enum session_unwinder */
static const char *const log_level_names[] = { "error", "warn", "info", "debug", NULL };	/* enum log_level */
static const char *const sort_names[] = { "self", "total", NULL };	/* enum report_sort */
static const char *const format_names[] = { "collapsed", "pprof", "speedscope", "otlp", "html", NULL };	/* convert_format */
/* run_settings.fast_lane: which processes' samples the fast lane reads as they are taken. */
static const char *const fast_lane_names[] = { "stacks", "apm", NULL };
static const char *const value_names[] = { "samples", "cpu", "off-cpu", "wall", NULL };	/* enum profile_value */

static int check_event(const char *name)
{
	uint32_t type;
	uint64_t config;
	return sampler_parse_event(name, &type, &config);
}

#define RUN(m) FIELD(struct run_settings, m)
#define KEY SETTING_CONFIG

/* record and the daemon: how samples are taken, unwound and correlated. */
static const struct setting run_items[] = {
	{ "freq", 'F', SETTING_UNSIGNED, KEY, RUN(freq_hz), .min = 1, .max = 100000, .arg = "HZ", .def = "999",
	  .daemon_def = "19", .help = "samples per second per thread, or per CPU with -a and in the daemon" },
	{ "event", 'e', SETTING_STRING, KEY, RUN(event), .check = check_event, .arg = "NAME", .def = "cpu-clock",
	  .check_what = "cpu-clock, task-clock, cycles, instructions, cache-misses, branch-misses or ref-cycles",
	  .help = "the sampling event: cpu-clock, task-clock, cycles, instructions, ..." },
	{ "stack-size", 0, SETTING_SIZE, KEY, RUN(stack_size), .min = 8, .max = SAMPLER_MAX_STACK, .multiple = 8,
	  .arg = "BYTES", .def = "16384", .help = "user stack copied per sample (a multiple of 8, at most 65528)" },
	{ "thread-stack-size", 0, SETTING_SIZE, KEY, RUN(thread_stack_size), .max = SAMPLER_MAX_STACK, .multiple = 8,
	  .arg = "BYTES", .def = "65528",
	  .help = "user stack copied per sample of a thread whose stack runs past --stack-size, by events of its own "
		  "(0 or no more than --stack-size: none)" },
	{ "max-stack", 0, SETTING_SIZE, KEY, RUN(max_stack), .max = SESSION_MAX_STACK_LIMIT, .arg = "BYTES",
	  .def = "1048576", .help = "stack a walk may see: past the copy, read from the process if unchanged (0: the "
				    "copy only)" },
	{ "max-frames", 0, SETTING_UNSIGNED, KEY, RUN(max_frames), .min = 1, .max = SESSION_MAX_FRAMES_LIMIT,
	  .arg = "N", .def = "1024", .help = "user frames kept per sample; deeper stacks end in [truncated]" },
	{ "unwinder", 0, SETTING_ENUM, KEY, RUN(unwinder), .names = unwinder_names, .arg = "NAME", .def = "deltas",
	  .help = "deltas (stack-delta tables) or libunwind (the reference)" },
	{ "no-kernel", 0, SETTING_FLAG, KEY | SETTING_NEGATE, RUN(kernel), .def = "false",
	  .help = "user-space samples only, no kernel frames" },
	{ "no-go-stacks", 0, SETTING_FLAG, KEY | SETTING_NEGATE, RUN(go_stacks), .def = "false",
	  .help = "do not follow Go samples on the g0 stack onto their goroutine's stack" },
	{ "no-fp-chain", 0, SETTING_FLAG, KEY | SETTING_NEGATE, RUN(fp_chain), .def = "false",
	  .help = "do not ask the kernel for each sample's frame-pointer chain (finishes walks the stack copy "
		  "cannot, e.g. Go stack growth)" },
	{ "no-apm", 0, SETTING_FLAG, KEY | SETTING_NEGATE, RUN(apm), .def = "false",
	  .help = "no APM trace correlation" },
	{ "apm-delay-ms", 0, SETTING_UNSIGNED, KEY, RUN(apm_delay_ms), .min = 1, .max = 60000, .arg = "MS",
	  .def = "300", .help = "APM: the sample-to-message latency bound announced to agents" },
	{ "apm-max-staleness-us", 0, SETTING_UNSIGNED, KEY, RUN(apm_max_staleness_us), .min = 1, .max = 1000000,
	  .arg = "US", .def = "1000",
	  .help = "APM: correlate only samples whose context was read this soon after them" },
	{ "fast-lane", 0, SETTING_ENUM, KEY, RUN(fast_lane), .names = fast_lane_names, .arg = "WHICH",
	  .def = "stacks", .help = "samples read at once: stacks (APM processes, and Go or deep stacks read on from "
				   "the process) or apm (APM processes only)" },
	{ "no-realtime", 0, SETTING_FLAG, KEY | SETTING_NEGATE, RUN(realtime), .def = "false",
	  .help = "fast-lane readers (APM, Go) at normal priority, not SCHED_FIFO" },
	{ "no-cache", 0, SETTING_FLAG, KEY | SETTING_NEGATE, RUN(use_cache), .def = "false",
	  .help = "no cached kernel symbols, debug files, stack-delta tables or names: read, build and name afresh" },
	{ "off-cpu", 0, SETTING_FLAG, KEY, RUN(off_cpu), .def = "false",
	  .help = "also record where threads wait: time off CPU per stack (a sample at every switch-out)" },
	{ "off-cpu-threshold-us", 0, SETTING_UNSIGNED, KEY, RUN(off_cpu_threshold_us), .max = 60000000, .arg = "US",
	  .def = "100", .help = "off-CPU: blocks shorter than US microseconds are summed per thread, without a stack" },
	{ "off-cpu-max-rate", 0, SETTING_UNSIGNED, KEY, RUN(off_cpu_max_rate), .max = 10000000, .arg = "N",
	  .def = "10000", .daemon_def = "1000",
	  .help = "off-CPU: unwind at most N stacks a second; the time of the others is summed per thread (0: no "
		  "limit)" },
	{ "off-cpu-stack-size", 0, SETTING_SIZE, KEY, RUN(off_cpu_stack_size), .min = 8, .max = SAMPLER_MAX_STACK,
	  .multiple = 8, .arg = "BYTES", .def = "8192",
	  .help = "off-CPU: user stack copied per switch-out (a multiple of 8, at most 65528)" },
	{ "host-id", 0, SETTING_STRING, KEY | SETTING_MAY_BE_EMPTY, RUN(host_id), .arg = "ID",
	  .def_shown = "/etc/machine-id", .help = "host id sent to APM agents and written in profiles" },
};

#define REC(m) FIELD(struct record_options, m)

static const struct setting record_items[] = {
	{ "pid", 'p', SETTING_PIDS, 0, REC(pids), .arg = "PIDS",
	  .help = "profile running processes (all their threads), PID[,PID...]" },
	{ "all-cpus", 'a', SETTING_FLAG, 0, REC(all_cpus), .help = "profile the whole system (root)" },
	{ "duration", 'd', SETTING_SECONDS, 0, REC(duration_s), .arg = "SECS", .help = "stop after SECS seconds" },
	{ "output", 'o', SETTING_STRING, 0, REC(output), .arg = "FILE", .def = "hostprof.msgpack",
	  .help = "profile to write" },
	{ "save-samples", 0, SETTING_STRING, 0, REC(save_samples), .arg = "FILE",
	  .help = "also save the raw samples to a replay file" },
	{ "quiet", 'q', SETTING_FLAG, 0, REC(quiet), .help = "no progress or summary messages" },
	{ "verbose", 'v', SETTING_FLAG, 0, REC(verbose),
	  .help = "the run's details after the summary: costs, tables, fast lane, held samples, stacks" },
};

#define EXP(m) FIELD(struct export_settings, m)

/* record and the daemon: sending profiles to an OpenTelemetry Collector (OTLP/HTTP). */
static const struct setting export_items[] = {
	{ "otlp-endpoint", 0, SETTING_STRING, KEY, EXP(otlp_endpoint), .arg = "URL",
	  .help = "also send each profile to this OTLP/HTTP receiver (http://HOST:4318 or https://...)" },
	{ "otlp-header", 0, SETTING_STRINGS, KEY, EXP(otlp_headers), .arg = "NAME=VALUE",
	  .help = "an HTTP header of every request (authentication; never logged); repeatable" },
	{ "otlp-ca-file", 0, SETTING_STRING, KEY, EXP(otlp_ca_file), .arg = "FILE",
	  .help = "CA certificates to verify an https:// receiver with (default: the system's)" },
	{ "otlp-timeout", 0, SETTING_DURATION, KEY, EXP(otlp_timeout_s), .min = 1, .max = 3600, .arg = "DURATION",
	  .def = "10s", .help = "each request's timeout" },
	{ "otlp-spool-max", 0, SETTING_SIZE, KEY, EXP(otlp_spool_max), .min = 4096, .max = UINT64_MAX, .arg = "SIZE",
	  .def = "256M", .help = "unsent profiles kept on disk while the receiver is down, the oldest dropped past SIZE" },
};

static const struct setting_group record_groups[] = {
	{ record_items, COUNT(record_items), 0 },
	GROUP(run_items, struct record_options, run),
	GROUP(export_items, struct record_options, export),
};

const struct command_settings record_settings = {
	.command = "record",
	.usage = "usage: hostprof record [OPTIONS] -- COMMAND [ARGS...]\n"
		 "       hostprof record [OPTIONS] -p PID[,PID...]\n"
		 "       hostprof record [OPTIONS] -a\n",
	.stop_at_operand = 1,
	.groups = record_groups,
	.ngroups = COUNT(record_groups),
};

#define DMN(m) FIELD(struct daemon_config, m)

static const struct setting daemon_items[] = {
	{ "config", 'c', SETTING_STRING, 0, DMN(config_path), .arg = "FILE",
	  .help = "settings file (key = value, keys as the long options); SIGHUP reads it again" },
	{ "status", 0, SETTING_FLAG, 0, DMN(status),
	  .help = "print the status of the daemon running in the output directory and exit" },
	{ "output", 'o', SETTING_STRING, KEY, DMN(output_dir), .arg = "DIR", .def = "/var/lib/hostprof",
	  .help = "profiles directory" },
	{ "interval", 0, SETTING_DURATION, KEY, DMN(interval_s), .min = 1, .max = 86400, .arg = "DURATION",
	  .def = "60s", .help = "one profile per interval (90, 90s, 2m30s, 1h)" },
	{ "max-files", 0, SETTING_UNSIGNED, KEY, DMN(max_files), .max = 1000000, .arg = "N", .def = "1440",
	  .help = "keep at most N profiles (0: no limit)" },
	{ "max-bytes", 0, SETTING_SIZE, KEY, DMN(max_bytes), .max = UINT64_MAX, .arg = "SIZE", .def = "1G",
	  .help = "keep at most SIZE bytes of profiles (0: no limit)" },
	{ "max-unwritten", 0, SETTING_SIZE, KEY, DMN(max_unwritten), .max = UINT64_MAX, .arg = "SIZE", .def = "32M",
	  .help = "profiles the disk cannot take yet are held in memory up to SIZE and retried (0: none held)" },
	{ "probabilistic-threshold", 0, SETTING_UNSIGNED, KEY, DMN(prob_threshold), .min = 1, .max = 100,
	  .arg = "PERCENT", .def = "100", .help = "profile PERCENT of probabilistic intervals" },
	{ "probabilistic-interval", 0, SETTING_DURATION, KEY, DMN(prob_interval_s), .min = 1, .max = 86400,
	  .arg = "DURATION", .def = "60s", .help = "length of each on/off decision" },
	{ "max-processes", 0, SETTING_UNSIGNED, KEY, DMN(max_processes), .max = 1000000, .arg = "N", .def = "4096",
	  .help = "processes tracked at once (0: no limit)" },
	{ "forget-idle", 0, SETTING_DURATION, KEY, DMN(forget_idle_s), .min = 1, .max = 7 * 86400,
	  .arg = "DURATION", .def = "300s", .help = "forget processes without samples this long" },
	{ "memory-budget", 0, SETTING_SIZE, KEY, DMN(memory_budget), .max = UINT64_MAX, .arg = "SIZE", .def = "128M",
	  .help = "after each profile, drop the tables and symbols of files in use too while memory is over SIZE "
		  "(0: only those of idle files)" },
	{ "log-level", 0, SETTING_ENUM, KEY, DMN(log_level), .names = log_level_names, .arg = "LEVEL", .def = "info",
	  .help = "error, warn, info or debug" },
};

const struct setting_group daemon_run_group = GROUP(run_items, struct daemon_config, run);

const struct setting_group daemon_export_group = GROUP(export_items, struct daemon_config, export);

static const struct setting_group daemon_groups[] = {
	{ daemon_items, COUNT(daemon_items), 0 },
	GROUP(run_items, struct daemon_config, run),
	GROUP(export_items, struct daemon_config, export),
};

const struct command_settings daemon_settings = {
	.command = "daemon",
	.usage = "usage: hostprof daemon [--config FILE] [-o DIR] [OPTIONS]\n"
		 "       hostprof daemon --status [--config FILE] [-o DIR]\n",
	.daemon = 1,
	.groups = daemon_groups,
	.ngroups = COUNT(daemon_groups),
};

#define PIN(m) FIELD(struct perf_input_settings, m)

/* report, convert and diff: how perf.data files are read (perf_input.h). */
static const struct setting perf_input_items[] = {
	{ "symfs", 0, SETTING_STRING, 0, PIN(symfs), .arg = "DIR",
	  .help = "(perf.data files) look for the files the recording mapped, and its perf maps, under DIR first" },
};

#define RPT(m) FIELD(struct report_options, m)

static const struct setting report_items[] = {
	{ "sort", 's', SETTING_ENUM, 0, RPT(sort), .names = sort_names, .arg = "ORDER", .def = "self",
	  .help = "order by self or by total samples" },
	{ "limit", 'n', SETTING_UNSIGNED, 0, RPT(limit), .min = 1, .max = UINT_MAX, .arg = "N", .def = "20",
	  .help = "show the top N functions of each table" },
	{ "tree", 0, SETTING_FLAG, 0, RPT(tree), .help = "the call tree instead of the table" },
	{ "percent-limit", 0, SETTING_PERCENT, 0, RPT(percent_limit), .arg = "PCT", .def = "0.5",
	  .help = "leave out tree nodes under PCT percent of the samples" },
	{ "tree-depth", 0, SETTING_UNSIGNED, 0, RPT(tree_depth), .min = 1, .max = REPORT_MAX_TREE_DEPTH, .arg = "N",
	  .def = "64", .help = "show N levels of frames below each process in the tree; a line says how many more "
			      "there are" },
	{ "per-thread", 0, SETTING_FLAG, 0, RPT(per_thread), .help = "one table (or tree) per thread" },
	{ "pid", 'p', SETTING_PID, 0, RPT(pid), .given = offsetof(struct report_options, filter_pid), .arg = "PID",
	  .help = "only the samples of process PID" },
	{ "lines", 0, SETTING_FLAG, 0, RPT(lines),
	  .help = "show each frame's source line: function (file.c:LINE), a row per line" },
	{ "addresses", 0, SETTING_FLAG, 0, RPT(addresses),
	  .help = "a row per address of code without a function name, not one per library" },
	{ "quiet", 'q', SETTING_FLAG, 0, RPT(quiet), .help = "no progress on a terminal while the profiles are read" },
	{ "wide", 0, SETTING_FLAG, 0, RPT(wide),
	  .help = "whole names on a terminal, not cut to its width" },
	{ "no-inline", 0, SETTING_FLAG, 0, RPT(no_inline),
	  .help = "fold inlined functions into their callers (self samples included), as perf report does" },
	{ "off-cpu", 0, SETTING_FLAG, 0, RPT(off_cpu),
	  .help = "weigh stacks by their time off CPU (a profile recorded with --off-cpu)" },
	{ "wall", 0, SETTING_FLAG, 0, RPT(wall),
	  .help = "weigh stacks by wall time (CPU + off CPU), after each thread's split of its wall time" },
};

static const struct setting_group report_groups[] = {
	GROUP(report_items, struct report_command, report),
	GROUP(perf_input_items, struct report_command, perf),
};

const struct command_settings report_settings = { .command = "report",
						  .usage = "usage: hostprof report [OPTIONS] [FILE|DIR...]\n",
						  .groups = report_groups, .ngroups = COUNT(report_groups) };

#define CNV(m) FIELD(struct convert_options, m)

static const struct setting convert_items[] = {
	{ "to", 't', SETTING_ENUM, 0, CNV(format), .names = format_names, .arg = "FORMAT",
	  .given = offsetof(struct convert_options, format_given),
	  .help = "collapsed, pprof, speedscope, otlp (an OpenTelemetry profiles export request) or html (a "
		  "flame graph page)" },
	{ "stack-ids", 0, SETTING_FLAG, 0, CNV(stack_ids),
	  .help = "(collapsed) start each line with its stack-trace ID" },
	{ "value", 0, SETTING_ENUM, 0, CNV(value), .names = value_names, .arg = "VALUE", .def = "samples",
	  .help = "(collapsed, speedscope, html) weigh stacks by samples, cpu, off-cpu or wall time (times in "
		  "microseconds in collapsed stacks; the value a flame graph page opens with)" },
	{ "output", 'o', SETTING_STRING, 0, CNV(output), .arg = "FILE", .help = "write there, not to standard output" },
	{ "quiet", 'q', SETTING_FLAG, 0, CNV(quiet), .help = "no progress on a terminal while the profiles are read" },
};

static const struct setting_group convert_groups[] = {
	{ convert_items, COUNT(convert_items), 0 },
	GROUP(perf_input_items, struct convert_options, perf),
};

const struct command_settings convert_settings = {
	.command = "convert",
	.usage = "usage: hostprof convert [FILE|DIR...] --to collapsed|pprof|speedscope|otlp|html [--stack-ids] "
		 "[--value VALUE] [-o OUT]\n",
	.groups = convert_groups,
	.ngroups = COUNT(convert_groups),
};

#define DIF(m) FIELD(struct diff_options, m)

static const struct setting diff_items[] = {
	{ "threshold", 't', SETTING_PERCENT, 0, DIF(threshold), .arg = "PCT", .def = "5",
	  .help = "exit status 1 when a function's total share grew by more than PCT percentage points" },
	{ "limit", 'n', SETTING_UNSIGNED, 0, DIF(limit), .min = 1, .max = UINT_MAX, .arg = "N", .def = "20",
	  .help = "show the N biggest changes" },
	{ "value", 0, SETTING_ENUM, 0, DIF(value), .names = value_names, .arg = "VALUE", .def = "samples",
	  .help = "compare shares of samples, cpu, off-cpu or wall time" },
	{ "html", 0, SETTING_STRING, 0, DIF(html), .arg = "FILE",
	  .help = "also write a differential flame graph of NEW there (red grew, blue shrank)" },
};

static const struct setting_group diff_groups[] = {
	GROUP(diff_items, struct diff_command, diff),
	GROUP(perf_input_items, struct diff_command, perf),
};

const struct command_settings diff_settings = { .command = "diff",
						.usage = "usage: hostprof diff BASE NEW [OPTIONS]\n"
							 "  BASE, NEW: profile files, perf.data files or directories\n",
						.groups = diff_groups, .ngroups = COUNT(diff_groups) };

#define RPL(m) FIELD(struct replay_options, m)

static const struct setting replay_items[] = {
	{ "compare", 'c', SETTING_FLAG, 0, RPL(compare),
	  .help = "unwind with the stack-delta unwinder and libunwind, compare (without --bench too)" },
	{ "show", 's', SETTING_UNSIGNED, 0, RPL(show), .max = UINT_MAX, .arg = "N", .def = "20",
	  .help = "list at most N disagreements" },
	{ "bench", 'b', SETTING_FLAG, 0, RPL(bench), .help = "time each unwinder over the samples" },
	{ "iterations", 'i', SETTING_UNSIGNED, 0, RPL(iterations), .min = 1, .max = UINT_MAX, .arg = "N",
	  .def = "20", .help = "passes over the samples per unwinder for --bench" },
};

ONE_TABLE_COMMAND(replay_settings, "replay",
		  "usage: hostprof replay FILE [--compare] [--show N] [--bench [--iterations N]]\n", replay_items);

const char *run_settings_unwinder_name(const struct run_settings *r)
{
	return unwinder_names[r->unwinder == SESSION_UNWIND_LIBUNWIND];
}

void run_settings_sampler(const struct run_settings *r, struct sampler_options *out)
{
	*out = (struct sampler_options){ .event = r->event, .freq_hz = r->freq_hz, .stack_size = r->stack_size,
					 .kernel = r->kernel, .fp_chain = r->fp_chain, .off_cpu = r->off_cpu,
					 .off_cpu_stack_size = r->off_cpu_stack_size };
}

void run_settings_session(const struct run_settings *r, struct session_options *out)
{
	*out = (struct session_options){
		.unwinder = r->unwinder == 1 ? SESSION_UNWIND_LIBUNWIND : SESSION_UNWIND_DELTAS,
		.apm = r->apm,
		.host_id = r->host_id,
		.apm_delay_ms = r->apm_delay_ms,
		.apm_max_staleness_us = r->apm_max_staleness_us,
		.go_stacks = r->go_stacks,
		.go_stack_bytes = r->stack_size, /* as much of the goroutine's stack as of g0's */
		.max_stack_bytes = r->max_stack,
		.max_frames = r->max_frames,
		.stack_copy_bytes = r->stack_size,
		.thread_copy_bytes = r->thread_stack_size,
		/* APM samples are read at once in the fast lane, and unless told otherwise the samples of programs
		 * whose stacks are read on from the process (Go, deep recursion); the rest in batches. */
		.fast_lane = r->fast_lane == 1 ? SESSION_FAST_LANE_APM : SESSION_FAST_LANE_APM | SESSION_FAST_LANE_STACKS,
		.fast_lane_realtime = r->realtime,
		.use_cache = r->use_cache,
		.off_cpu = r->off_cpu,
		.off_cpu_threshold_ns = (uint64_t)r->off_cpu_threshold_us * 1000,
		.off_cpu_max_rate = r->off_cpu_max_rate,
	};
}
