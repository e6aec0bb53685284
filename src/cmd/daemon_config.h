/*
 * daemon_config.h — `hostprof daemon` settings: defaults, a config file, command-line flags.
 *
 * The config file holds `key = value` lines whose keys are the daemon's long flags without the dashes
 * (`interval = 30`, `no-apm = true`); `#` starts a comment. Precedence: defaults, then the file, then flags, so
 * a reload (SIGHUP) re-reads the file and applies the flags given at start on top again.
 * Errors name the file, the line and the key ("hostprof.conf:3: unknown key 'intervall'").
 */
#ifndef HOSTPROF_DAEMON_CONFIG_H
#define HOSTPROF_DAEMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/log.h"

struct daemon_config {
	char output_dir[4096];
	char event[32];
	char unwinder[16];		/* "deltas" or "libunwind" */
	char host_id[128];		/* "" = /etc/machine-id */
	unsigned freq_hz;
	unsigned interval_s;		/* reporting interval */
	unsigned max_files;		/* retention: profiles kept (0 = no limit) */
	uint64_t max_bytes;		/* retention: bytes kept (0 = no limit) */
	unsigned prob_threshold;	/* probabilistic profiling: percent of intervals profiled (100 = always) */
	unsigned prob_interval_s;	/* probabilistic profiling: how long each on/off decision lasts */
	unsigned stack_size;
	unsigned max_stack;		/* stack a walk may see, read past the copy from the process (0 = copy only) */
	unsigned max_frames;		/* user frames kept per sample; deeper stacks end [truncated] */
	unsigned max_processes;		/* tracked at once; others count under [too many processes] */
	unsigned forget_idle_s;		/* processes without samples this long are forgotten */
	unsigned apm_delay_ms;		/* 0 = the correlation library's default */
	unsigned apm_max_staleness_us;	/* 0 = the session's default */
	int apm;			/* APM correlation on */
	int go_stacks;			/* follow Go samples on the g0 stack onto their goroutine's stack */
	int fp_chain;			/* ask the kernel for each sample's user frame-pointer chain */
	int realtime;			/* APM fast-lane readers at SCHED_FIFO (no-realtime = true turns it off) */
	int use_cache;			/* kallsyms and debug-file caches (no-cache = true: not) */
	int kernel;			/* kernel frames */
	enum log_level log_level;
};

void daemon_config_defaults(struct daemon_config *c);

/* Set one key (a long flag name without dashes). Returns 0, -ENOENT for an unknown key, -EINVAL for a bad
 * value; err gets a message. */
int daemon_config_set(struct daemon_config *c, const char *key, const char *value, char *err, size_t errlen);

/* Apply a config file. Returns 0 or a negative errno with a "file:line: ..." message in err. */
int daemon_config_load(struct daemon_config *c, const char *path, char *err, size_t errlen);

/* Cross-field checks (a threshold of 0, an interval of 0, ...). */
int daemon_config_validate(const struct daemon_config *c, char *err, size_t errlen);

#endif
