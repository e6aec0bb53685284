/*
 * options.h — what each command's options fill, and the tables of settings that fill them (settings_table.c).
 *
 * Every option of every command, and every key of the daemon's config file, is one row of those tables
 * (settings.h): its defaults, ranges, help and man-page entry follow from there. The settings `record` and the
 * daemon share (sampling, unwinding, APM correlation) are one group, struct run_settings, that both option
 * structs embed: they take the same values with the same checks.
 *
 * The structs are plain values (no pointers): copy them freely. Strings are NUL-terminated arrays, zero-filled
 * past the terminator (settings_differ() compares their bytes).
 */
#ifndef HOSTPROF_CMD_OPTIONS_H
#define HOSTPROF_CMD_OPTIONS_H

#include <limits.h>
#include <stdbool.h>

#include "src/cmd/settings.h"
#include "src/sampling/sampler.h"
#include "src/pipeline/session.h"
#include "src/profile/diff.h"
#include "src/profile/report.h"

/* What `record` and the daemon share: the sampler's and the session's settings. */
struct run_settings {
	char event[32];
	char host_id[1024];		/* "": /etc/machine-id (src/base/host_id.h cuts ids to HOST_ID_MAX - 1) */
	unsigned freq_hz;
	unsigned stack_size;		/* user stack copied per sample */
	unsigned thread_stack_size;	/* ... per sample of a thread found deeper (0: no such copy) */
	unsigned max_stack;		/* stack a walk may see, past the copy read from the process (0: copy only) */
	unsigned max_frames;		/* user frames kept per sample */
	unsigned apm_delay_ms;		/* the latency bound announced to APM agents */
	unsigned apm_max_staleness_us;	/* APM context read later than this after the sample: uncorrelated */
	int unwinder;			/* enum session_unwinder */
	int kernel;			/* kernel frames */
	int go_stacks;			/* follow Go samples on the g0 stack onto their goroutine's stack */
	int fp_chain;			/* ask the kernel for each sample's user frame-pointer chain */
	int apm;			/* APM trace correlation */
	int realtime;			/* fast-lane readers at SCHED_FIFO */
	int fast_lane;			/* which processes the fast lane reads: 0 APM and live stacks, 1 APM only */
	int use_cache;			/* kernel symbols, debug files and stack-delta tables from hostprof's
					 * private cache */
	int off_cpu;			/* off-CPU time per stack, sampled at every switch-out (offcpu.h) */
	unsigned off_cpu_threshold_us;	/* shorter blocks: summed per thread, no stack */
	unsigned off_cpu_max_rate;	/* off-CPU stacks unwound per second at most (0: no limit) */
	unsigned off_cpu_stack_size;	/* user stack copied per off-CPU sample */
};

/* Where record and the daemon send their profiles besides files: an OTLP receiver (src/export/otlp_sender.h). */
struct export_settings {
	char otlp_endpoint[1024];	/* "": no export */
	struct setting_strings otlp_headers;	/* "Name=Value" each, never logged */
	char otlp_ca_file[PATH_MAX];	/* "": the system's CA bundle */
	unsigned otlp_timeout_s;	/* per request */
	uint64_t otlp_spool_max;	/* the daemon's spool of unsent profiles, bytes */
};

struct record_options {
	struct run_settings run;
	struct export_settings export;
	char output[PATH_MAX];
	char save_samples[PATH_MAX];	/* "": no replay file */
	double duration_s;		/* 0: until the targets end or a signal */
	int all_cpus;
	int quiet;
	int verbose;			/* the run's details after the summary line */
	struct setting_pids pids;
};

/* How report, convert and diff read perf.data files (perf_input.h). */
struct perf_input_settings {
	char symfs[PATH_MAX];		/* look for the recording's files under this directory first; "": not */
};

/* report's settings: the report's, and perf.data input's. */
struct report_command {
	struct report_options report;
	struct perf_input_settings perf;
};

/* diff's likewise. */
struct diff_command {
	struct diff_options diff;
	struct perf_input_settings perf;
};

enum convert_format { CONVERT_COLLAPSED, CONVERT_PPROF, CONVERT_SPEEDSCOPE, CONVERT_OTLP, CONVERT_HTML };

struct convert_options {
	int format;			/* enum convert_format */
	bool format_given;
	bool stack_ids;
	int value;			/* enum profile_value: what collapsed lines count, speedscope weighs, the flame
				 * graph page shows first */
	char output[PATH_MAX];		/* "": standard output */
	struct perf_input_settings perf;
	bool quiet;			/* no progress on stderr */
};

struct replay_options {
	bool compare, bench;
	unsigned iterations, show;
};

extern const struct command_settings record_settings, daemon_settings, report_settings, convert_settings,
	diff_settings, replay_settings;

/* The group of export_settings in the daemon's settings (daemon.c starts the sender again when one changed). */
extern const struct setting_group daemon_export_group;
/* The group of run_settings in the daemon's settings (daemon.c restarts sampling when one of them changed). */
extern const struct setting_group daemon_run_group;

/* The unwinder's name, as profiles record it. */
const char *run_settings_unwinder_name(const struct run_settings *r);

/* The sampler's options for r; event points into r. */
void run_settings_sampler(const struct run_settings *r, struct sampler_options *out);

/* The session's options for r (the fields no setting has stay zero); host_id points into r. */
void run_settings_session(const struct run_settings *r, struct session_options *out);

#endif
