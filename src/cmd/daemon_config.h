/*
 * daemon_config.h — `hostprof daemon` settings: defaults, a config file, command-line flags.
 *
 * The settings are the rows of daemon_settings (src/cmd/options.h, settings.h); the config file holds `key =
 * value` lines whose keys are the daemon's long flags without the dashes (`interval = 30`, `no-apm = true`),
 * parsed by the same parsers as the flags; `#` starts a comment. Precedence: defaults, then the file, then flags,
 * so a reload (SIGHUP) re-reads the file and applies the flags given at start on top again.
 * Errors name the file, the line and the key ("hostprof.conf:3: unknown key 'intervall'").
 */
#ifndef HOSTPROF_DAEMON_CONFIG_H
#define HOSTPROF_DAEMON_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "src/base/log.h"
#include "src/cmd/options.h"

struct daemon_config {
	struct run_settings run;	/* as record's */
	struct export_settings export;	/* as record's; the spool is <output_dir>/otlp-spool */
	char output_dir[PATH_MAX];
	char config_path[PATH_MAX];	/* -c: the config file ("": none); a flag, not a key */
	unsigned interval_s;		/* reporting interval */
	unsigned max_files;		/* retention: profiles kept (0 = no limit) */
	uint64_t max_bytes;		/* retention: bytes kept (0 = no limit) */
	uint64_t max_unwritten;		/* encoded profiles held in memory while their files cannot be written */
	unsigned prob_threshold;	/* probabilistic profiling: percent of intervals profiled (100 = always) */
	unsigned prob_interval_s;	/* probabilistic profiling: how long each on/off decision lasts */
	unsigned max_processes;		/* tracked at once; others count under [too many processes] */
	unsigned forget_idle_s;		/* processes without samples this long are forgotten */
	uint64_t memory_budget;		/* anonymous memory after each profile (memory_watch_enforce(); 0: none) */
	int log_level;			/* enum log_level */
	int status;			/* --status: print the running daemon's status and exit */
};

void daemon_config_defaults(struct daemon_config *c);

/* Set one key (a long flag name without dashes). Returns 0, -ENOENT for an unknown key, -EINVAL for a bad
 * value; err gets a message ("invalid value 'fast' for 'freq' (a whole number from 1 to 100000)"). */
int daemon_config_set(struct daemon_config *c, const char *key, const char *value, char *err, size_t errlen);

/* Apply a config file. Returns 0 or a negative errno with a "file:line: ..." message in err. */
int daemon_config_load(struct daemon_config *c, const char *path, char *err, size_t errlen);

#endif
