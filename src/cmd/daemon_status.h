/*
 * daemon_status.h — the running daemon's figures in a file of its output directory, and `hostprof daemon
 * --status`, which reads and prints them: how a daemon is doing without reading its logs.
 *
 * The daemon writes DAEMON_STATUS_NAME at start, after every interval's profiles and at exit, replacing it
 * atomically (atomic_file.h): a reader sees the old figures or the new, never a mix. The file is text, one
 * "key value" line each, keys in the order of struct daemon_status; numbers are decimal, strings (paths) are
 * escaped (escape.h: one line, no terminal control). The first line is "format 1"; later keys may be added, so
 * readers ignore keys they do not know. man/hostprof-daemon.8 (FILES) lists them.
 *
 * --status trusts nothing in the file: it is bounded in size, and the pid it names must be alive and be a
 * hostprof daemon (its command line: "hostprof daemon ...") before the figures are shown as a running daemon's;
 * a file left by a daemon killed with SIGKILL, or by one that stopped, is said to be that.
 *
 * Errors: negative errno from the write (the caller logs it); daemon_status_show() prints its own errors.
 */
#ifndef HOSTPROF_CMD_DAEMON_STATUS_H
#define HOSTPROF_CMD_DAEMON_STATUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define DAEMON_STATUS_NAME "hostprof-daemon.status"
/* A status file is a few hundred bytes and two paths: a larger one is not one. */
#define DAEMON_STATUS_MAX (64 * 1024)

struct daemon_status {
	pid_t pid;
	bool running;			/* false: written at exit */
	int64_t started, updated;	/* unix seconds */
	unsigned interval_s;
	const char *output_dir;
	uint64_t profiles_written;
	const char *last_profile;	/* the path of the last profile written ("": none yet) */
	uint64_t samples, lost;		/* of the profiles written */
	uint64_t profiles_held, held_bytes;	/* waiting in memory for the disk (--max-unwritten) */
	uint64_t profiles_dropped, samples_dropped;	/* profiles neither written nor held */
	uint64_t rss;			/* resident bytes (VmRSS) now */
	uint64_t memory_budget;
	bool memory_over;		/* the memory watch holds new work back now */
	uint64_t memory_episodes, memory_peak_rss;
	bool otlp;			/* exporting: the otlp_ figures follow */
	uint64_t otlp_pending, otlp_pending_bytes, otlp_sent, otlp_sent_bytes, otlp_retries, otlp_refused,
		otlp_spool_dropped;
	int otlp_last_status;
};

/* st as dir/DAEMON_STATUS_NAME, replacing the file atomically. Returns 0 or a negative errno. */
int daemon_status_write(const char *dir, const struct daemon_status *st);

/* Remove the temporary status files a daemon killed mid-write left in dir (by the daemon holding dir's lock,
 * profile_dir.h, at start). Returns how many. */
int daemon_status_clean_temporaries(const char *dir);

/*
 * `hostprof daemon --status`: dir's status file on out, with "uptime" and "age" (seconds since it was written)
 * added, when the daemon it names runs. Otherwise one line on err saying why: no status file (no daemon ever
 * ran there), the daemon stopped, or its pid is gone or is no hostprof daemon (a stale file). Returns the exit
 * status: 0, or 1.
 */
int daemon_status_show(const char *dir, FILE *out, FILE *err);

#endif
