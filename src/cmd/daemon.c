/*
 * daemon.c — `hostprof daemon`: continuous whole-system profiling into a directory of profiles.
 *
 * One event per CPU (19 Hz by default), every sample unwound and counted as `record -a` does; every reporting
 * interval the counts become one profile, written atomically into the output directory under a name that sorts
 * by time and that no file has (never over one: profile_dir.h), and retention trims the oldest. The directory is
 * this daemon's alone while it runs (its lock, profile_dir.h): a second daemon there is refused. SIGUSR1 writes
 * a profile now, SIGHUP reloads the config file, SIGTERM/SIGINT write what is pending and exit 0. Memory stays
 * bounded: processes without samples for a while are forgotten and at most max-processes are tracked.
 * Probabilistic profiling (man/hostprof-daemon.8) turns sampling on for a probabilistic-interval with
 * probability threshold/100.
 *
 * Logs go to stderr, one line each, with a syslog level prefix ("<6>") when run under systemd (JOURNAL_STREAM)
 * so journald keeps the levels; strings processes supplied are escaped first (log.h, escape.h).
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "src/base/atomic_file.h"
#include "src/base/clock.h"
#include "src/base/fallback_file.h"
#include "src/base/host_id.h"
#include "src/base/log.h"
#include "src/base/mem_usage.h"
#include "src/cmd/commands.h"
#include "src/cmd/daemon_config.h"
#include "src/cmd/daemon_status.h"
#include "src/cmd/export.h"
#include "src/cmd/options.h"
#include "src/pipeline/event_loop.h"
#include "src/pipeline/fastlane.h"
#include "src/processes/memory_watch.h"
#include "src/profile/profile.h"
#include "src/profile/profile_dir.h"
#include "src/pipeline/reporter.h"
#include "src/sampling/sampler.h"
#include "src/pipeline/session.h"

/*
 * The rings wake the daemon when half full (sampler.h): at 19 Hz a 2 MiB ring takes ~3 s to get there, so on
 * an idle-ish host this timer is what drains them. Once a second bounds how stale a sample is when it is
 * handled (the stack past the copy and Go goroutines are read from the process then) and what a profile
 * misses at its interval's end, at a cost that does not grow with the CPUs: one wakeup for all rings. APM
 * samples do not wait for it (fastlane.h), and signals wake the daemon at once.
 */
#define DAEMON_DRAIN_MS 1000

/* On a full disk, at most this many old profiles are deleted per interval to make room for new ones; and at
 * most this many profiles are held in memory (within max-unwritten bytes) until they can be written. */
#define DAEMON_MAKE_ROOM_MAX 16
#define DAEMON_HELD_MAX 64

/* A name taken since it was chosen (profile_dir.h: a file is never replaced) is tried again with the next
 * name this many times. */
#define DAEMON_NAME_TRIES 4

/* Intervals whose profiles the reporter may be naming at once (reporter.h): one being named, the others waiting
 * (their traces, not their symbols: a few MiB at most). An
 * interval that ends with both still there goes on until one is done, said in the log, rather than queue more
 * traces, and memory, without bound. */
#define DAEMON_REPORTS_MAX 8

/* An interval's profile on its way: named and encoded by the reporter, then written here. */
struct interval_report {
	struct report r;		/* first: the reporter's */
	time_t start;			/* the second its name carries */
	char why[16];			/* what ended the interval, for the log */
};

/* An interval's profile its file could not take yet, encoded, with the second its name carries (the name itself
 * is chosen when it is written: profile_dir.h) and the name it was last meant to have, for messages. */
struct held_profile {
	time_t start;
	char path[4200];
	char *data;
	size_t size;
	uint64_t samples, lost;
};

struct daemon {
	const struct cli_env *env;
	int argc;
	char **argv;			/* the flags given at start: applied again on reload */
	char config_path[PATH_MAX];	/* -c ("": none) */
	struct daemon_config cfg;
	int journal;			/* stderr goes to journald */
	struct sampler *sampler;
	struct session *session;
	struct reporter *reporter;	/* names and encodes the intervals' profiles off this thread */
	int report_fd;			/* its eventfd, polled with the rings */
	uint64_t extended;		/* intervals gone on because the reporter was behind */
	int sampling;			/* probabilistic profiling: on for this interval */
	uint64_t interval_start_unix_ns, interval_start_mono_ns;
	uint64_t next_flush_ns, next_decision_ns;
	int dir_lock;			/* holds the output directory's lock (profile_dir.h), -1 before */
	uint64_t profiles_written;
	uint64_t samples_written, lost_written;	/* of the profiles written */
	uint64_t profiles_dropped, samples_dropped;	/* neither written nor held */
	char last_profile[4200];	/* the path of the last profile written, "" before */
	int64_t started;		/* unix seconds */
	int status_err;			/* the status file's last write error (said once per change) */
	uint64_t dropped_reported;	/* session_counters() dropped_mappings when last logged */
	struct held_profile held[DAEMON_HELD_MAX];	/* oldest first */
	unsigned nheld;
	uint64_t held_bytes;
	unsigned made_room;		/* old profiles deleted for room this interval */
	struct otlp_sender *otlp;	/* --otlp-endpoint: each profile sent there too (export.h), else NULL */
};

static void forget_and_budget(struct daemon *d);

/* Every line the daemon logs, its own and the session's: one sink (log.h) with --log-level and journald
 * priorities, which escapes whatever a process put into the message. */
__attribute__((format(printf, 3, 4))) static void dlog(const struct daemon *d, enum log_level level,
						      const char *fmt, ...)
{
	char msg[LOG_MSG_MAX];
	struct log_stderr to = { .max_level = (enum log_level)d->cfg.log_level, .journal = d->journal };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_stderr_write(&to, level, msg);
}

/* The session's log sink: its lines are the daemon's (--log-level, journald priorities). */
static void session_log(void *ctx, enum log_level level, const char *msg)
{
	dlog(ctx, level, "%s", msg);
}

/* defaults, then the config file, then the flags given at start. */
static int load_config(struct daemon *d, struct daemon_config *out)
{
	char err[512];
	int operand;
	daemon_config_defaults(out);
	if (d->config_path[0] && daemon_config_load(out, d->config_path, err, sizeof(err)) < 0) {
		dlog(d, LOG_LEVEL_ERROR, "%s", err);
		return -EINVAL;
	}
	/* The flags were checked at start (cmd_daemon): parsing them again cannot fail. */
	return settings_parse_args(&daemon_settings, d->argc, d->argv, out, &operand) == 0 ? 0 : -EINVAL;
}

static void stop_sampling(struct daemon *d)
{
	session_free(d->session);
	sampler_free(d->sampler);
	d->session = NULL;
	d->sampler = NULL;
}

static int start_sampling(struct daemon *d)
{
	struct sampler_options so;
	struct session_options se;
	int err;
	run_settings_sampler(&d->cfg.run, &so);
	/* 2 MiB per CPU: at 19 Hz half of it takes ~3 s, past the 1 s drain, on any number of CPUs (a larger ring
	 * would only lock more memory) */
	so.ring_pages = 512;
	run_settings_session(&d->cfg.run, &se);
	se.memory_budget = d->cfg.memory_budget;
	se.log = (struct log_sink){ .write = session_log, .ctx = d };
	if ((err = sampler_new(&so, &d->sampler)) < 0) {
		dlog(d, LOG_LEVEL_ERROR, "cannot sample '%s': %s", d->cfg.run.event, strerror(-err));
		return err;
	}
	if ((err = sampler_open_system(d->sampler)) < 0) {
		dlog(d, LOG_LEVEL_ERROR, "%s", sampler_error(d->sampler));
		stop_sampling(d);
		return err;
	}
	if (sampler_note(d->sampler)[0])
		dlog(d, LOG_LEVEL_WARN, "%s", sampler_note(d->sampler));
	if ((err = session_new(d->sampler, &se, &d->session)) < 0) {
		dlog(d, LOG_LEVEL_ERROR, "cannot start a session: %s", strerror(-err));
		stop_sampling(d);
		return err;
	}
	session_set_limits(d->session, d->cfg.max_processes);
	session_pause(d->session, 1); /* as the sampler, until decide_sampling() turns it on */
	return 0;
}

static int fill_info(struct daemon *d, struct profile *p, uint64_t end_mono)
{
	char host[256] = "", machine_id[HOST_ID_MAX];
	struct utsname u;
	struct profile_info *i = &p->info;
	int err;
	gethostname(host, sizeof(host) - 1);
	host_id_get(d->cfg.run.host_id, machine_id, sizeof(machine_id));
	uname(&u);
	if ((err = profile_set_info_string(p, &i->producer, "hostprof " HOSTPROF_VERSION " daemon")) < 0 ||
	    (err = profile_set_info_string(p, &i->hostname, host)) < 0 ||
	    (err = profile_set_info_string(p, &i->host_id, machine_id)) < 0 ||
	    (err = profile_set_info_string(p, &i->kernel, u.release)) < 0 ||
	    (err = profile_set_info_string(p, &i->event, d->sampler ? sampler_event(d->sampler) : d->cfg.run.event)) < 0 ||
	    (err = profile_set_info_string(p, &i->unwinder, run_settings_unwinder_name(&d->cfg.run))) < 0)
		return err;
	i->start_unix_ns = d->interval_start_unix_ns;
	i->duration_ns = end_mono - d->interval_start_mono_ns;
	i->frequency_hz = d->cfg.run.freq_hz;
	i->period_ns = 1000000000ULL / d->cfg.run.freq_hz;
	long online = sysconf(_SC_NPROCESSORS_ONLN), available = sysconf(_SC_NPROCESSORS_CONF);
	i->cpus_online = online > 0 && online <= UINT32_MAX ? (uint32_t)online : 0;
	i->cpus_available = available > 0 && available <= UINT32_MAX ? (uint32_t)available : 0;
	return 0;
}

/* What the session could not keep for lack of memory since the last profile, said once per profile. A new
 * session (after a reload) counts from 0 again. */
static void log_dropped(struct daemon *d)
{
	struct session_counters c = { 0 };
	if (d->session)
		session_counters(d->session, &c);
	uint64_t n = c.dropped_mappings;
	if (n > d->dropped_reported)
		dlog(d, LOG_LEVEL_WARN, "%llu mappings or thread names not kept for lack of memory since the last "
		     "profile", (unsigned long long)(n - d->dropped_reported));
	d->dropped_reported = n;
}

/* A disk that is full rather than broken: deleting old profiles may make room. */
static int disk_full(int err)
{
	return err == -ENOSPC || err == -EDQUOT;
}

/* Never over a file: a name already taken is left to the profile that has it (profile_dir.h). */
static int write_held_to(void *held, const char *path)
{
	const struct held_profile *h = held;
	return atomic_file_write_new(path, h->data, h->size);
}

/* write(arg, path); on a full disk, the oldest profiles of the directory are deleted (each logged, at most
 * DAEMON_MAKE_ROOM_MAX per interval) until it fits. */
static int write_making_room(struct daemon *d, fallback_write_fn write, void *arg, const char *path)
{
	char name[256];
	int err = write(arg, path);
	while (disk_full(err) && d->made_room < DAEMON_MAKE_ROOM_MAX &&
	       profile_dir_remove_oldest(d->cfg.output_dir, name, sizeof(name)) == 1) {
		d->made_room++;
		dlog(d, LOG_LEVEL_WARN, "disk full: removed the oldest profile %s to make room", name);
		err = write(arg, path);
	}
	return err;
}

/* write(arg, path) under the next free name for an interval that started at start, into path[0..len). The write
 * refuses a name a file has (atomic_file_commit_new()): one made since the name was chosen takes the next. */
static int write_new_profile(struct daemon *d, fallback_write_fn write, void *arg, time_t start, char *path,
			     size_t len)
{
	int err = -EEXIST;
	for (int tries = 0; err == -EEXIST && tries < DAEMON_NAME_TRIES; tries++) {
		if ((err = profile_dir_next_name(d->cfg.output_dir, start, path, len)) == 0)
			err = write_making_room(d, write, arg, path);
	}
	return err;
}

/* A profile written: for the status file. */
static void count_written(struct daemon *d, const struct held_profile *h)
{
	d->profiles_written++;
	d->samples_written += h->samples;
	d->lost_written += h->lost;
	snprintf(d->last_profile, sizeof(d->last_profile), "%s", h->path);
}

/* A profile neither written nor held: for the status file. */
static void count_dropped(struct daemon *d, uint64_t samples)
{
	d->profiles_dropped++;
	d->samples_dropped += samples;
}

/* The oldest profile held, written or given up: out of the queue. */
static void forget_oldest_held(struct daemon *d)
{
	d->held_bytes -= d->held[0].size;
	free(d->held[0].data);
	memmove(d->held, d->held + 1, (d->nheld - 1) * sizeof(*d->held));
	d->nheld--;
}

static void drop_oldest_held(struct daemon *d, const char *why)
{
	dlog(d, LOG_LEVEL_ERROR, "dropped the unwritten profile %s (%llu samples): %s", d->held[0].path,
	     (unsigned long long)d->held[0].samples, why);
	count_dropped(d, d->held[0].samples);
	forget_oldest_held(d);
}

/* h (its data taken over) could not be written to h.path (why: the error, 0 when older profiles still wait):
 * keep it within max-unwritten (the oldest held go first). */
static void hold_profile(struct daemon *d, struct held_profile h, int why)
{
	int err = 0;
	const char *path = h.path;
	if (err == 0 && h.size > d->cfg.max_unwritten)
		err = -EFBIG;
	if (err == 0 && d->nheld == DAEMON_HELD_MAX)
		drop_oldest_held(d, "too many profiles held");
	while (err == 0 && d->held_bytes + h.size > d->cfg.max_unwritten)
		drop_oldest_held(d, "max-unwritten reached");
	if (err < 0) {
		dlog(d, LOG_LEVEL_ERROR, "cannot write %s: %s; its %llu samples are dropped (%s)", path,
		     strerror(-why), (unsigned long long)h.samples,
		     err == -EFBIG ? "larger than max-unwritten" : strerror(-err));
		count_dropped(d, h.samples);
		free(h.data);
		return;
	}
	d->held[d->nheld++] = h;
	d->held_bytes += h.size;
	dlog(d, LOG_LEVEL_WARN, "cannot write %s: %s; held in memory to retry (%u profiles, %llu bytes held)", path,
	     why ? strerror(-why) : "earlier profiles wait to be written first", d->nheld,
	     (unsigned long long)d->held_bytes);
}

/* The profiles held, oldest first, before the new one; stops at the first that still fails. */
static void retry_held(struct daemon *d)
{
	while (d->nheld > 0) {
		struct held_profile *h = &d->held[0];
		int err = write_new_profile(d, write_held_to, h, h->start, h->path, sizeof(h->path));
		if (err < 0) {
			dlog(d, LOG_LEVEL_WARN, "still cannot write %s: %s (%u profiles held)", h->path, strerror(-err),
			     d->nheld);
			return;
		}
		count_written(d, h);
		dlog(d, LOG_LEVEL_INFO, "wrote %s (held in memory until now): %llu samples", h->path,
		     (unsigned long long)h->samples);
		forget_oldest_held(d);
	}
}

/* At exit, what the directory still cannot take goes to a fallback place (fallback_file.h), said where. */
static void save_held(struct daemon *d)
{
	retry_held(d);
	while (d->nheld > 0) {
		char saved[PATH_MAX];
		int err = fallback_file_save(d->held[0].path, write_held_to, &d->held[0], saved, sizeof(saved));
		if (err == 0) {
			dlog(d, LOG_LEVEL_WARN, "saved the unwritten profile %s to %s", d->held[0].path, saved);
			forget_oldest_held(d);
		} else {
			drop_oldest_held(d, "no other place takes it either");
		}
	}
}

/* The fast lane's processes and per-thread events, and the thread copies, said once per profile while there are
 * any: their descriptors are what a daemon running for weeks must not pile up (fastlane.h, thread_copies.h). */
static void log_fastlane(struct daemon *d)
{
	struct session_counters c;
	if (!d->session)
		return;
	session_counters(d->session, &c);
	const struct fastlane_stats fs = c.fastlane;
	const struct thread_copies_stats ts = c.thread_copies;
	if (c.has_thread_copies && ts.threads)
		dlog(d, LOG_LEVEL_INFO, "thread copies: %u threads have one now, %llu given so far, %llu events closed as "
		     "their threads exited, %llu copies given back", ts.threads, (unsigned long long)ts.opened,
		     (unsigned long long)ts.closed, (unsigned long long)ts.given_back);
	if (!c.has_fastlane || (!fs.processes && !fs.events))
		return;
	dlog(d, LOG_LEVEL_INFO, "fast lane: %u processes, %u per-thread events open, %llu closed as their threads "
	     "exited, %u processes refused", fs.processes, fs.events, (unsigned long long)fs.events_closed,
	     fs.refused);
}

/* The per-file state the session holds, said at debug level once per profile. */
static void log_memory(struct daemon *d)
{
	struct session_counters c;
	if (!d->session)
		return;
	session_counters(d->session, &c);
	unsigned tables = c.tables.tables;
	uint64_t bytes = c.tables.bytes;
	const struct session_stats *st = session_stats(d->session);
	dlog(d, LOG_LEVEL_DEBUG, "%u stack-delta tables in memory (%.1f MiB); %llu samples held while tables were "
	     "built (%llu walked once ready, %llu without), %llu walked without one, never held", tables,
	     bytes / 1048576.0, (unsigned long long)st->held, (unsigned long long)st->replayed,
	     (unsigned long long)st->settled, (unsigned long long)st->table_pending);
}

/* An encoded profile to the directory, after those held since earlier failures (in order), or held in turn. */
static void write_profile(struct daemon *d, struct held_profile h, const char *why)
{
	int err;
	d->made_room = 0;
	retry_held(d);
	if (d->nheld > 0) {
		hold_profile(d, h, 0); /* in order, after those still waiting */
	} else if ((err = write_new_profile(d, write_held_to, &h, h.start, h.path, sizeof(h.path))) < 0) {
		hold_profile(d, h, err);
	} else {
		count_written(d, &h);
		dlog(d, LOG_LEVEL_INFO, "wrote %s (%s): %llu samples, %llu lost", h.path, why,
		     (unsigned long long)h.samples, (unsigned long long)h.lost);
		free(h.data);
	}
	int deleted = profile_dir_retain(d->cfg.output_dir, d->cfg.max_files, d->cfg.max_bytes);
	if (deleted > 0)
		dlog(d, LOG_LEVEL_DEBUG, "retention removed %d old profiles", deleted);
}

/* The OTLP export's sender (export.h), spooling in <output>/otlp-spool; none without --otlp-endpoint. A sender that
 * cannot start is said and the daemon goes on with its files. */
static void start_export(struct daemon *d)
{
	char spool[PATH_MAX + 16];
	struct log_sink log = { .write = session_log, .ctx = d };
	snprintf(spool, sizeof(spool), "%s/otlp-spool", d->cfg.output_dir);
	if (export_new(&d->cfg.export, spool, &log, &d->otlp) == 0 && d->otlp)
		dlog(d, LOG_LEVEL_INFO, "otlp: sending each profile to %s too (spool %s)", d->cfg.export.otlp_endpoint,
		     spool);
}

/* What waits is sent within deadline_ms, the rest kept in the spool for the next start. */
static void stop_export(struct daemon *d, unsigned deadline_ms)
{
	if (!d->otlp)
		return;
	unsigned left = otlp_sender_flush(d->otlp, deadline_ms);
	if (left)
		dlog(d, LOG_LEVEL_INFO, "otlp: %u profiles not sent yet, kept in the spool for the next start", left);
	otlp_sender_free(d->otlp);
	d->otlp = NULL;
}

/* A profile's export request to the sender (which owns it then), or its encoding's error said. */
static void export_report(struct daemon *d, struct report *r)
{
	if (r->otlp_err < 0)
		dlog(d, LOG_LEVEL_ERROR, "otlp: cannot encode a profile: %s (not sent; its file is written)",
		     strerror(-r->otlp_err));
	if (r->otlp_data && d->otlp)
		otlp_sender_submit(d->otlp, r->otlp_data, r->otlp_size);
	else
		free(r->otlp_data);
	r->otlp_data = NULL;
}

/* The status file (daemon_status.h): this daemon's figures now; running false at exit. A write that fails is
 * said once, and again only when its error changes, so that a full disk does not fill the log too. */
static void update_status(struct daemon *d, bool running)
{
	struct mem_usage mu = { 0 };
	struct daemon_status st = { .pid = getpid(), .running = running, .started = d->started,
				    .updated = (int64_t)time(NULL), .interval_s = d->cfg.interval_s,
				    .output_dir = d->cfg.output_dir, .profiles_written = d->profiles_written,
				    .last_profile = d->last_profile, .samples = d->samples_written,
				    .lost = d->lost_written, .profiles_held = d->nheld, .held_bytes = d->held_bytes,
				    .profiles_dropped = d->profiles_dropped, .samples_dropped = d->samples_dropped,
				    .memory_budget = d->cfg.memory_budget, .otlp = d->otlp != NULL };
	mem_usage_read(0, &mu);
	st.rss = mu.rss;
	if (d->session) {
		struct memory_watch_state ms;
		memory_watch_get_state(session_memory_watch(d->session), &ms);
		st.memory_over = ms.over;
		st.memory_episodes = ms.episodes;
		st.memory_peak_rss = ms.peak_rss;
	}
	if (d->otlp) {
		struct otlp_sender_stats os;
		otlp_sender_get_stats(d->otlp, &os);
		st.otlp_pending = os.pending;
		st.otlp_pending_bytes = os.pending_bytes;
		st.otlp_sent = os.sent;
		st.otlp_sent_bytes = os.sent_bytes;
		st.otlp_retries = os.retries;
		st.otlp_refused = os.refused;
		st.otlp_spool_dropped = os.spool_dropped;
		st.otlp_last_status = os.last_status;
	}
	int err = daemon_status_write(d->cfg.output_dir, &st);
	if (err < 0 && err != d->status_err)
		dlog(d, LOG_LEVEL_WARN, "cannot write the status file %s/%s: %s", d->cfg.output_dir,
		     DAEMON_STATUS_NAME, strerror(-err));
	d->status_err = err;
}

/* A report back from the reporter: its traces to the session, its profile written. */
static void finish_report(struct daemon *d, struct interval_report *ir)
{
	struct report *r = &ir->r;
	struct held_profile h = { .start = ir->start, .data = r->data, .size = r->size,
				  .samples = r->profile->info.samples, .lost = r->profile->info.lost };
	if (r->traces)
		session_release_interval(d->session, r->traces);
	/* The name it would get now, for messages (written, it gets the one free then). */
	if (profile_dir_next_name(d->cfg.output_dir, ir->start, h.path, sizeof(h.path)) < 0)
		profile_dir_name(d->cfg.output_dir, ir->start, 0, h.path, sizeof(h.path));
	if (r->err < 0) {
		dlog(d, LOG_LEVEL_ERROR, "cannot make a profile for %s: %s (its %llu samples are dropped)",
		     d->cfg.output_dir, strerror(-r->err), (unsigned long long)h.samples);
		count_dropped(d, h.samples);
	} else {
		write_profile(d, h, ir->why);
	}
	export_report(d, r);
	if (r->err == 0 && r->profile->info.timestamps_dropped)
		dlog(d, LOG_LEVEL_WARN, "%llu samples of %s counted without their time (a profile keeps at most %u): "
		     "their processes' OTLP profiles have no timestamps", (unsigned long long)r->profile->info.timestamps_dropped,
		     ir->why, TRACES_MAX_TIMESTAMPS);
	dlog(d, LOG_LEVEL_DEBUG, "named the profile of %s in %.0f ms%s", ir->why, r->name_ns / 1e6,
	     r->stats.symbolizers_closed ? " (symbolizers closed as used: over the memory budget)" : "");
	profile_free(r->profile);
	free(ir);
}

/* The reports done (wait: every one submitted), then what is done after each profile. */
static void collect_reports(struct daemon *d, bool wait)
{
	struct report *r = d->reporter ? reporter_done(d->reporter, wait) : NULL;
	if (!r)
		return;
	for (struct report *next; r; r = next) {
		next = report_next(r);
		finish_report(d, (struct interval_report *)r);
	}
	log_dropped(d);
	log_fastlane(d);
	log_memory(d);
	struct log_sink log = { .write = session_log, .ctx = d };
	export_log(d->otlp, &log);
	forget_and_budget(d);
	update_status(d, true);
}

/* A report of the interval that ends now (why), d->session's counts detached into it; NULL on error (said). */
static struct interval_report *make_report(struct daemon *d, const char *why, uint64_t end_mono)
{
	struct interval_report *ir = calloc(1, sizeof(*ir));
	int err = ir ? profile_new(&ir->r.profile) : -ENOMEM;
	if (err == 0)
		err = fill_info(d, ir->r.profile, end_mono);
	if (err == 0 && d->session)
		err = session_detach_interval(d->session, ir->r.profile, &ir->r.traces);
	if (err < 0) {
		dlog(d, LOG_LEVEL_ERROR, "cannot make a profile for %s: %s (its samples are dropped)",
		     d->cfg.output_dir, strerror(-err));
		if (ir)
			profile_free(ir->r.profile);
		free(ir);
		if (d->session)
			session_reset_counts(d->session);
		return NULL;
	}
	ir->start = (time_t)(d->interval_start_unix_ns / 1000000000ULL);
	ir->r.memory_budget = d->session ? memory_watch_sampling_budget(session_memory_watch(d->session)) : 0;
	ir->r.otlp = d->otlp != NULL;
	ir->r.otlp_options = (struct otlp_encode_options){ .scope_version = HOSTPROF_VERSION };
	snprintf(ir->why, sizeof(ir->why), "%s", why);
	return ir;
}

/*
 * End the interval (even an empty one: its profile records that the host was watched) and start anew: its
 * counts go to the reporter, which names them into a profile while sampling goes on. A reporter still busy with
 * DAEMON_REPORTS_MAX intervals makes a timer's interval go on instead (said once per stretch), so that traces are
 * never queued without bound. Returns 0, or a negative errno with the interval's samples dropped (said).
 */
static int close_interval(struct daemon *d, const char *why)
{
	uint64_t end_mono = clock_ns(CLOCK_MONOTONIC);
	if (!strcmp(why, "interval") && reporter_outstanding(d->reporter) >= DAEMON_REPORTS_MAX) {
		if (d->extended++ == 0)
			dlog(d, LOG_LEVEL_WARN, "naming the profiles of the last %u intervals is not done: this one goes "
			     "on until it is", DAEMON_REPORTS_MAX);
		d->next_flush_ns = end_mono + 100000000ULL;	/* looked at again in 100 ms */
		return 0;
	}
	d->extended = 0;
	struct interval_report *ir = make_report(d, why, end_mono);
	int err = ir ? reporter_submit(d->reporter, &ir->r) : -ENOMEM;
	if (ir && err < 0) {
		dlog(d, LOG_LEVEL_ERROR, "cannot name a profile: %s (its samples are dropped)", strerror(-err));
		if (ir->r.traces)
			session_release_interval(d->session, ir->r.traces);
		profile_free(ir->r.profile);
		free(ir);
	}
	d->interval_start_unix_ns = clock_ns(CLOCK_REALTIME);
	d->interval_start_mono_ns = end_mono;
	d->next_flush_ns = end_mono + (uint64_t)d->cfg.interval_s * 1000000000ULL;
	return err;
}

/* Probabilistic profiling: a random number in 0..99 below the threshold turns sampling on until the next
 * decision. */
static void decide_sampling(struct daemon *d, uint64_t now)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)now;
	int on = d->cfg.prob_threshold >= 100 || r % 100 < d->cfg.prob_threshold;
	if (on != d->sampling && d->sampler) {
		if (on)
			sampler_enable(d->sampler);
		else
			sampler_disable(d->sampler);
		session_pause(d->session, !on);
		dlog(d, LOG_LEVEL_DEBUG, "probabilistic profiling: sampling %s", on ? "on" : "off");
	}
	d->sampling = on;
	d->next_decision_ns = now + (uint64_t)d->cfg.prob_interval_s * 1000000000ULL;
}

/* The last samples in the rings and the fast lane, and every pending APM count, before a profile that ends
 * the session. */
static void quiesce(struct daemon *d)
{
	if (!d->sampler)
		return;
	struct record_source source;
	sampler_source(d->sampler, &source);
	event_loop_end(&source, d->session);
}

/* The lock of dir, the output directory (profile_dir.h) into *fd; refused, one line says why and who has it. */
static int lock_dir(struct daemon *d, const char *dir, int *fd, const char *what)
{
	int holder, err = profile_dir_lock(dir, fd, &holder);
	if (err == -EWOULDBLOCK && holder)
		dlog(d, LOG_LEVEL_ERROR, "%soutput directory %s is in use by another hostprof daemon (pid %d)", what,
		     dir, holder);
	else if (err == -EWOULDBLOCK)
		dlog(d, LOG_LEVEL_ERROR, "%soutput directory %s is in use by another hostprof daemon", what, dir);
	else if (err < 0)
		dlog(d, LOG_LEVEL_ERROR, "%scannot lock output directory %s (%s): %s", what, dir,
		     PROFILE_DIR_LOCK_NAME, strerror(-err));
	return err;
}

static void reload(struct daemon *d)
{
	struct daemon_config next;
	int lock = -1;
	if (load_config(d, &next) < 0) {
		dlog(d, LOG_LEVEL_ERROR, "reload failed: keeping the current settings");
		return;
	}
	if (profile_dir_prepare(next.output_dir) < 0) {
		dlog(d, LOG_LEVEL_ERROR, "reload: cannot use %s: keeping the current settings", next.output_dir);
		return;
	}
	/* A new directory is locked before the old one is let go: the daemon never writes where it has no lock. */
	if (strcmp(next.output_dir, d->cfg.output_dir) != 0 &&
	    lock_dir(d, next.output_dir, &lock, "reload: keeping the current settings: ") < 0)
		return;
	int restart = settings_differ(&daemon_run_group, &d->cfg, &next); /* a sampler or session setting */
	/* An export setting, or the directory its spool is in. */
	int new_export = settings_differ(&daemon_export_group, &d->cfg, &next) ||
			 strcmp(next.output_dir, d->cfg.output_dir) != 0;
	if (new_export)
		stop_export(d, 0);
	if (restart) {
		quiesce(d);
		close_interval(d, "reload"); /* the samples so far belong to the old settings */
		collect_reports(d, true);	/* their traces are the session's, which goes */
	}
	if (lock >= 0) {	/* no daemon runs in the old directory now: its status file goes */
		char old_status[PATH_MAX + sizeof(DAEMON_STATUS_NAME) + 1];
		snprintf(old_status, sizeof(old_status), "%s/%s", d->cfg.output_dir, DAEMON_STATUS_NAME);
		unlink(old_status);
	}
	d->cfg = next;
	if (new_export)
		start_export(d);
	if (lock >= 0) {
		profile_dir_unlock(d->dir_lock);
		d->dir_lock = lock;
	}
	if (restart) {
		stop_sampling(d);
		if (start_sampling(d) == 0) {
			d->sampling = 0;
			decide_sampling(d, clock_ns(CLOCK_MONOTONIC));
		}
	}
	d->next_flush_ns = d->interval_start_mono_ns + (uint64_t)d->cfg.interval_s * 1000000000ULL;
	dlog(d, LOG_LEVEL_INFO, "reloaded %s: %u Hz, interval %u s, output %s, max %u files", d->config_path,
	     d->cfg.run.freq_hz, d->cfg.interval_s, d->cfg.output_dir, d->cfg.max_files);
	update_status(d, true);
}

/* Until the next drain, session work, profile or sampling decision is due. */
static int wait_ms(const struct daemon *d, int session_ms)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC), next = now + (uint64_t)DAEMON_DRAIN_MS * 1000000ULL;
	if (session_ms >= 0 && now + (uint64_t)session_ms * 1000000ULL < next)
		next = now + (uint64_t)session_ms * 1000000ULL;
	if (d->next_flush_ns < next)
		next = d->next_flush_ns;
	if (d->next_decision_ns < next)
		next = d->next_decision_ns;
	return next > now ? (int)((next - now + 999999) / 1000000) : 0;
}

/* One wakeup per half-full ring, timer, fast-lane batch or signal; nothing per sample. */
static void wait_and_drain(struct daemon *d, int *session_ms)
{
	struct pollfd wake[2] = { { .fd = d->report_fd, .events = POLLIN },
				  { .fd = d->session ? session_wake_fd(d->session) : -1, .events = POLLIN } };
	uint64_t n;
	if (!d->sampler) {
		poll(wake, 1, wait_ms(d, -1));
	} else {
		struct record_source source;
		sampler_source(d->sampler, &source);
		*session_ms = event_loop_turn(&source, d->session, wait_ms(d, *session_ms), wake, wake[1].fd >= 0 ? 2 : 1);
	}
	if (read(d->report_fd, &n, sizeof(n)) == sizeof(n))	/* reset: then look at what is done */
		collect_reports(d, false);
}

/* After a profile: forget idle processes, then idle files' tables and symbols, and hold the memory budget. */
static void forget_and_budget(struct daemon *d)
{
	struct memory_enforced mem;
	if (!d->session) {
		malloc_trim(0);
		return;
	}
	session_forget_idle(d->session, (uint64_t)d->cfg.forget_idle_s * 1000000000ULL);
	memory_watch_enforce(session_memory_watch(d->session), d->cfg.memory_budget, &mem);
	dlog(d, mem.over ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG,
	     "memory: dropped %u stack-delta tables (%.1f MiB) and %u symbolizers%s; %u files known, %.1f MiB "
	     "resident (budget %.0f MiB)", mem.tables, mem.table_bytes / 1048576.0, mem.symbolizers,
	     mem.over ? " (over budget: of files in use too)" : " of idle files", mem.files, mem.rss / 1048576.0,
	     d->cfg.memory_budget / 1048576.0);
}

static void run_loop(struct daemon *d)
{
	const struct cli_env *env = d->env;
	int session_ms = -1;
	while (!*env->stop) {
		wait_and_drain(d, &session_ms);
		uint64_t now = clock_ns(CLOCK_MONOTONIC);
		if (*env->reload) {
			*env->reload = 0;
			reload(d);
		}
		if (*env->flush) {
			*env->flush = 0;
			close_interval(d, "SIGUSR1");
		} else if (now >= d->next_flush_ns) {
			close_interval(d, "interval");
		}
		if (now >= d->next_decision_ns)
			decide_sampling(d, now);
	}
}

static int daemon_start(struct daemon *d)
{
	int err, removed;
	if (load_config(d, &d->cfg) < 0)
		return -EINVAL;
	if ((err = profile_dir_prepare(d->cfg.output_dir)) < 0) {
		dlog(d, LOG_LEVEL_ERROR, "cannot use output directory %s: %s", d->cfg.output_dir, strerror(-err));
		return err;
	}
	/* before anything is written or cleaned there: the temporary files may be another daemon's */
	if ((err = lock_dir(d, d->cfg.output_dir, &d->dir_lock, "not starting: ")) < 0)
		return err;
	/* a read-only or foreign directory is refused now, not found out at the first interval's end */
	char probe[4200];
	if ((err = profile_dir_name(d->cfg.output_dir, time(NULL), 0, probe, sizeof(probe))) < 0 ||
	    (err = atomic_file_probe(probe)) < 0) {
		dlog(d, LOG_LEVEL_ERROR, "cannot write into output directory %s: %s", d->cfg.output_dir,
		     strerror(-err));
		return err;
	}
	if ((removed = profile_dir_clean_temporaries(d->cfg.output_dir)) > 0)
		dlog(d, LOG_LEVEL_INFO, "removed %d partial profiles left by an earlier run", removed);
	daemon_status_clean_temporaries(d->cfg.output_dir);
	if ((d->report_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
	    (err = reporter_new(d->report_fd, &d->reporter)) < 0) {
		err = d->report_fd < 0 ? -errno : err;
		dlog(d, LOG_LEVEL_ERROR, "cannot start the reporter: %s", strerror(-err));
		return err;
	}
	if ((err = start_sampling(d)) < 0)
		return err;
	start_export(d);
	d->interval_start_unix_ns = clock_ns(CLOCK_REALTIME);
	d->interval_start_mono_ns = clock_ns(CLOCK_MONOTONIC);
	d->next_flush_ns = d->interval_start_mono_ns + (uint64_t)d->cfg.interval_s * 1000000000ULL;
	decide_sampling(d, d->interval_start_mono_ns);
	dlog(d, LOG_LEVEL_INFO, "profiling all CPUs at %u Hz (%s), a profile every %u s into %s%s", d->cfg.run.freq_hz,
	     sampler_event(d->sampler), d->cfg.interval_s, d->cfg.output_dir,
	     d->cfg.prob_threshold < 100 ? " (probabilistic)" : "");
	d->started = (int64_t)time(NULL);
	update_status(d, true);
	return 0;
}

/*
 * A daemon's memory must come back after a burst (a user loading fresh copies of large libraries, thousands of short
 * processes). glibc's malloc raises its mmap threshold up to 32 MiB after the first large block is freed, after
 * which the table builder's multi-MB temporaries and symbol indexes come from the heap and leave holes it seldom
 * returns: fixed at 128 KiB, large blocks keep mappings of their own. The heap's free top goes back past 1 MiB,
 * and after each profile malloc_trim() returns the free pages inside it (memory_watch_enforce()).
 */
static void allocator_setup(void)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

int cmd_daemon(int argc, char **argv, const struct cli_env *env)
{
	allocator_setup();
	struct daemon *d = calloc(1, sizeof(*d));
	if (!d) {
		fprintf(stderr, "hostprof: out of memory\n");
		return 1;
	}
	d->env = env;
	d->dir_lock = -1;
	d->report_fd = -1;
	d->journal = getenv("JOURNAL_STREAM") != NULL;
	d->argc = argc;
	d->argv = argv;
	int operand, err = settings_parse_command(&daemon_settings, argc, argv, &d->cfg, sizeof(d->cfg), &operand);
	if (err == 0 && operand != argc) {
		fprintf(stderr, "hostprof: daemon takes no operands ('%s')\n", argv[operand]);
		err = -EINVAL;
	}
	if (err) {
		free(d);
		return err > 0 ? 0 : 2;
	}
	memcpy(d->config_path, d->cfg.config_path, sizeof(d->config_path));
	if (d->cfg.status) {	/* another daemon's, in the directory the settings name */
		int status = load_config(d, &d->cfg) < 0 ? 2 : daemon_status_show(d->cfg.output_dir, stdout, stderr);
		free(d);
		return status;
	}
	err = daemon_start(d);
	if (err == 0) {
		run_loop(d);
		quiesce(d);
		close_interval(d, "exit");
		collect_reports(d, true);
		save_held(d);
		/* What the receiver has not taken yet: sent now within --otlp-timeout, else kept for the next start. */
		stop_export(d, d->cfg.export.otlp_timeout_s * 1000);
		dlog(d, LOG_LEVEL_INFO, "stopped after %llu profiles", (unsigned long long)d->profiles_written);
		update_status(d, false);
	}
	stop_export(d, 0);
	collect_reports(d, true);	/* none is left: their traces are the session's */
	reporter_free(d->reporter);
	if (d->report_fd >= 0)
		close(d->report_fd);
	stop_sampling(d);
	profile_dir_unlock(d->dir_lock);
	free(d);
	return err < 0 ? 1 : 0;
}
