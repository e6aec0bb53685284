/*
 * record.c — `hostprof record`: profile a command, some processes, or the whole system into one profile.
 *
 * Targets: `-- CMD ARGS` starts CMD stopped on a pipe, opens inherited per-CPU events on it that enable at
 * exec, then lets it run; `-p PID,...` opens events on every existing thread of each process (inherit then
 * covers threads created later); `-a` opens one event per CPU for everything. The run ends when the targets are
 * gone, after -d seconds, or on SIGINT/SIGTERM; the profile is written in every case.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "correlate/correlate.h"
#include "src/base/atomic_file.h"
#include "src/base/escape.h"
#include "src/base/fallback_file.h"
#include "src/base/proc_threads.h"
#include "src/base/clock.h"
#include "src/base/host_id.h"
#include "src/cmd/commands.h"
#include "src/cmd/export.h"
#include "src/cmd/options.h"
#include "src/cmd/status_line.h"
#include "src/pipeline/event_loop.h"
#include "src/pipeline/fastlane.h"
#include "src/profile/profile.h"
#include "src/sampling/sampler.h"
#include "src/processes/jitinfo.h"
#include "src/pipeline/offcpu.h"
#include "src/pipeline/session.h"
#include "src/processes/stackext.h"
#include "src/sampling/target_watch.h"
#include "unwind/go_stack.h"
#include "unwind/unwind_deltas.h"

#define MAX_PIDS SETTING_MAX_PIDS
/*
 * Rings wake hostprof when half full (sampler.h): ~100 samples, ~100-200 ms at 999 Hz. This timer drains slower
 * rings (lower rates, idle threads) at least this often, which bounds how late a sample is handled: what a walk
 * reads from the process then (the stack past the copy, goroutines) has moved on by then for some programs,
 * which then take the fast lane (fastlane.h), as APM processes do. Shorter costs wakeups: at 100 ms, the timer
 * rather than the watermark woke hostprof at 999 Hz.
 */
#define RECORD_DRAIN_MS 500
/*
 * For its first RECORD_START_MS a run drains every RECORD_START_DRAIN_MS: a process's first samples decide what
 * must be read as each sample is taken (a CPython process's frames, APM agents, Go's goroutines), and until they
 * are handled its samples are read in a batch, too late for that. Half a ring first was ~250 ms of a Python
 * script's samples without their Python frames (4.3% of a 3 s run; 0.4-0.5% now). Every 5 ms for 300 ms cost ~6 ms
 * of CPU a run (56 more wakeups, each a drain and the session's due work); every 10 ms for 200 ms ~2-3 ms.
 */
#define RECORD_START_MS 200
#define RECORD_START_DRAIN_MS 10

/* What a run does: the options given, the command, and the sampler's and the session's options made of them. */
struct record_plan {
	struct record_options opts;
	int argc;		/* record's own arguments, argv[0] "record": the profile's command line */
	char **argv;
	char **command;		/* NULL-terminated, or NULL */
	struct sampler_options sampler;
	struct session_options session;
};

/* A point of the recording: samples so far, hostprof's CPU time (all threads) and context switches. */
struct steady {
	uint64_t samples, cpu_ns;
	long switches, waits;	/* context switches, and the voluntary ones among them */
	int taken;
};

/* Steady state starts after this many samples: the delta tables and files the first samples need are built. */
#define WARM_SAMPLES 500

struct record_run {
	struct record_plan *o;
	const struct cli_env *env;
	struct sampler *sampler;
	struct session *session;
	struct target_watch *watch;	/* exits of the command or the -p processes */
	pid_t child;
	int exec_fd;			/* exec's errno comes back on it if the command cannot run; -1 once read */
	int child_status;
	int child_exited;
	int export_failed;		/* --otlp-endpoint given and the profile not sent */
	int exec_error;			/* the command could not be run */
	struct rusage child_usage;	/* the command's own CPU time, once it exited */
	uint64_t start_unix_ns, start_mono_ns, end_mono_ns;
	struct steady warm, end;	/* hostprof's CPU time and context switches once warmed up, and at the end */
	struct status_line status;	/* the live line on a terminal */
	double status_cpu_s;	/* hostprof's CPU seconds at the last status line, for its CPU share since */
	uint64_t status_ns;	/* ... and when that was */
};

static int parse_args(int argc, char **argv, struct record_plan *p)
{
	struct record_options *o = &p->opts;
	int operand, err = settings_parse_command(&record_settings, argc, argv, o, sizeof(*o), &operand);
	if (err)
		return err;
	p->command = operand < argc ? argv + operand : NULL;
	p->argc = argc;
	p->argv = argv;
	if ((p->command != NULL) + (o->pids.n > 0) + o->all_cpus != 1) {
		fprintf(stderr, "hostprof: record needs exactly one of: -- COMMAND, -p PID, -a\n");
		return -EINVAL;
	}
	run_settings_sampler(&o->run, &p->sampler);
	run_settings_session(&o->run, &p->session);
	p->session.capture_path = o->save_samples[0] ? o->save_samples : NULL;
	return 0;
}

/* Fork the command stopped on a pipe, so events can be opened on it before it execs. A second pipe, closed by
 * a successful exec, carries exec's errno back when it fails (exec_failed()). */
static int start_command(struct record_run *r, int *go_fd)
{
	int pipefd[2], errfd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(errfd, O_CLOEXEC) < 0) {
		int err = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return err;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int err = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		close(errfd[0]);
		close(errfd[1]);
		return err;
	}
	if (pid == 0) {
		char c;
		close(pipefd[1]);
		close(errfd[0]);
		if (read(pipefd[0], &c, 1) != 1)
			_exit(127); /* hostprof gave up before starting us */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		execvp(r->o->command[0], r->o->command);
		int e = errno;
		if (write(errfd[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
			_exit(126);
		_exit(127);
	}
	close(pipefd[0]);
	close(errfd[1]);
	r->child = pid;
	r->exec_fd = errfd[0];
	*go_fd = pipefd[1];
	return 0;
}

/* Once the command was let go: 0 when it runs, else exec's error, said in words (no profile of nothing). */
static int exec_failed(struct record_run *r)
{
	int e = 0;
	char shown[256];
	if (r->exec_fd < 0)
		return 0;
	ssize_t n;
	while ((n = read(r->exec_fd, &e, sizeof(e))) < 0 && errno == EINTR)
		;
	close(r->exec_fd);
	r->exec_fd = -1;
	if (n != (ssize_t)sizeof(e))
		return 0;
	fprintf(stderr, "hostprof: cannot run '%s': %s (nothing recorded)\n",
		escape_str(shown, sizeof(shown), r->o->command[0]), strerror(e));
	return -e;
}

/* Why pid cannot be recorded, in words, before any event is opened: it is gone, or a zombie. */
static int check_process(pid_t pid)
{
	struct proc_identity id;
	pid_t tids[2];
	unsigned n = 0;
	int err = proc_read_identity(pid, &id);
	if (err == -ENOENT || err == -ESRCH) {
		fprintf(stderr, "hostprof: no such process %d (it has exited, or never existed)\n", (int)pid);
		return -ESRCH;
	}
	/* a zombie leader with live threads is a running process: only one without them has exited */
	if (err == 0 && (id.state == 'Z' || id.state == 'X') && proc_list_threads(pid, tids, 2, &n) == 0 && n <= 1) {
		fprintf(stderr, "hostprof: process %d is a zombie: it has exited and waits for its parent to reap it; "
				"there is nothing to record\n", (int)pid);
		return -ESRCH;
	}
	return 0;
}

/* perf_event_open refused pid: another user's process is the usual reason, and not the paranoid setting. */
static void explain_refusal(struct record_run *r, pid_t pid, int err)
{
	struct proc_identity id;
	uid_t uid = getuid();
	if ((err == -EACCES || err == -EPERM) && proc_read_identity(pid, &id) == 0 &&
	    (id.ruid != uid || id.euid != uid))
		fprintf(stderr, "hostprof: process %d runs as another user (uid %u): profiling it needs root, or "
				"CAP_PERFMON and CAP_SYS_PTRACE\n", (int)pid, (unsigned)(id.euid != uid ? id.euid : id.ruid));
	else
		fprintf(stderr, "hostprof: %s\n", sampler_error(r->sampler));
}


/* Events on every thread of pid. Threads born while we open are caught by a second pass (inherit covers
 * threads created after their creator's event exists). */
static int attach_process(struct record_run *r, pid_t pid)
{
	enum { MAX_THREADS = 8192 };
	pid_t *tids = malloc(MAX_THREADS * sizeof(*tids)), *done = malloc(MAX_THREADS * sizeof(*done));
	unsigned n = 0, ndone = 0;
	int err = tids && done ? 0 : -ENOMEM;

	for (int pass = 0; pass < 2 && !err; pass++) {
		if ((err = proc_list_threads(pid, tids, MAX_THREADS, &n)) < 0) {
			fprintf(stderr, "hostprof: no such process %d\n", (int)pid);
			break;
		}
		for (unsigned i = 0; i < n && !err; i++) {
			unsigned j = 0;
			while (j < ndone && done[j] != tids[i])
				j++;
			if (j < ndone || ndone == MAX_THREADS)
				continue;
			err = sampler_open_task(r->sampler, tids[i], 1, 0);
			if (err == -ESRCH)
				err = 0; /* the thread ended meanwhile */
			else if (err == 0)
				done[ndone++] = tids[i];
		}
	}
	if (err < 0 && err != -ENOENT)
		explain_refusal(r, pid, err);
	free(tids);
	free(done);
	return err;
}

static int open_targets(struct record_run *r, int *go_fd)
{
	int err;
	if (r->o->opts.all_cpus) {
		if ((err = sampler_open_system(r->sampler)) < 0)
			fprintf(stderr, "hostprof: %s\n", sampler_error(r->sampler));
		return err;
	}
	if (r->o->command) {
		if ((err = start_command(r, go_fd)) < 0) {
			fprintf(stderr, "hostprof: cannot start command: %s\n", strerror(-err));
			return err;
		}
		if ((err = target_watch_add(r->watch, r->child, 1)) < 0 ||
		    (err = sampler_open_task(r->sampler, r->child, SAMPLER_INHERIT_ALL, 1)) < 0)
			fprintf(stderr, "hostprof: %s\n", sampler_error(r->sampler));
		else
			session_track_pid(r->session, r->child);
		return err;
	}
	for (unsigned i = 0; i < r->o->opts.pids.n; i++) {
		pid_t pid = r->o->opts.pids.pids[i];
		if ((err = check_process(pid)) < 0)
			return err;
		if ((err = target_watch_add(r->watch, pid, 0)) < 0) {
			fprintf(stderr, "hostprof: no such process %d (it has exited)\n", (int)pid);
			return err;
		}
		if ((err = attach_process(r, pid)) < 0)
			return err;
		session_track_pid(r->session, pid);
	}
	return 0;
}

static void take_point(struct record_run *r, struct steady *p)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	p->samples = session_stats(r->session)->samples;
	p->cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	p->switches = ru.ru_nvcsw + ru.ru_nivcsw;
	p->waits = ru.ru_nvcsw;
	p->taken = 1;
}

/* How long the next wait may last: the drain timer (shorter at the start), the session's next due work, the -d
 * deadline. */
static int wait_ms(uint64_t start, uint64_t deadline, int session_ms)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	int ms = now < start + (uint64_t)RECORD_START_MS * 1000000 ? RECORD_START_DRAIN_MS : RECORD_DRAIN_MS;
	if (session_ms >= 0 && session_ms < ms)
		ms = session_ms;
	if (deadline) {
		uint64_t left_ms = deadline > now ? (deadline - now + 999999) / 1000000 : 0;
		if (left_ms < (uint64_t)ms)
			ms = (int)left_ms;
	}
	return ms;
}

/*
 * One wakeup per half-full ring, drain timer, target exit, fast-lane batch or signal: drain every ring,
 * then let the session do its due work. Nothing here costs a system call per sample.
 */
static double cpu_seconds(const struct rusage *ru);

/* The status line: elapsed time, samples, lost, processes, and hostprof's CPU share since the last line. */
static void show_status(struct record_run *r)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	if (!status_line_due(&r->status, now))
		return;
	const struct session_stats *st = session_stats(r->session);
	struct session_counters c;
	struct rusage self;
	session_counters(r->session, &c);
	getrusage(RUSAGE_SELF, &self);
	double cpu = cpu_seconds(&self), since = (double)(now - r->status_ns) / 1e9;
	double share = since > 0 ? 100.0 * (cpu - r->status_cpu_s) / since : 0;
	status_line_show(&r->status, now, "hostprof: %.1f s, %llu samples, %llu lost, %u processes, hostprof CPU %.1f%%",
			 (double)(now - r->start_mono_ns) / 1e9, (unsigned long long)st->samples,
			 (unsigned long long)st->lost, c.processes, share);
	r->status_cpu_s = cpu;
	r->status_ns = now;
}

static void run_loop(struct record_run *r)
{
	double duration_s = r->o->opts.duration_s;
	uint64_t deadline = duration_s > 0 ? r->start_mono_ns + (uint64_t)(duration_s * 1e9) : 0;
	struct pollfd *fds = calloc(MAX_PIDS + 2, sizeof(*fds));
	struct record_source source;
	int session_ms = -1;
	sampler_source(r->sampler, &source);
	while (fds && !*r->env->stop) {
		unsigned n = 0;
		if (session_wake_fd(r->session) >= 0)
			fds[n++] = (struct pollfd){ .fd = session_wake_fd(r->session), .events = POLLIN };
		n += target_watch_pollfds(r->watch, fds + n, MAX_PIDS + 2 - n);
		session_ms = event_loop_turn(&source, r->session, wait_ms(r->start_mono_ns, deadline, session_ms), fds, n);
		if (!r->warm.taken && session_stats(r->session)->samples >= WARM_SAMPLES)
			take_point(r, &r->warm);
		target_watch_update(r->watch, fds, n);
		if (!target_watch_alive(r->watch))
			break;
		if (deadline && clock_ns(CLOCK_MONOTONIC) >= deadline)
			break;
		show_status(r);
	}
	status_line_clear(&r->status);
	free(fds);
	take_point(r, &r->end);
	r->end_mono_ns = clock_ns(CLOCK_MONOTONIC);
	event_loop_end(&source, r->session);
	r->child_exited = target_watch_child_exit(r->watch, &r->child_status, &r->child_usage);
}

/* Longest command line kept in the profile (as shown by ps: arguments joined by spaces, cut past this). */
#define CMDLINE_MAX 4096

/* "hostprof record ARGS...", into the profile's info. */
static int set_cmdline(struct profile *p, int argc, char **argv)
{
	char line[CMDLINE_MAX];
	size_t at = (size_t)snprintf(line, sizeof(line), "hostprof");
	for (int k = 0; k < argc && at < sizeof(line) - 1; k++)
		at += (size_t)snprintf(line + at, sizeof(line) - at, " %s", argv[k]);
	return profile_set_info_string(p, &p->info.cmdline, line);
}

static int fill_info(struct record_run *r, struct profile *p)
{
	char host[256] = "", machine_id[HOST_ID_MAX];
	struct utsname u;
	int err = 0;

	gethostname(host, sizeof(host) - 1);
	host_id_get(r->o->session.host_id, machine_id, sizeof(machine_id));
	uname(&u);
	struct profile_info *i = &p->info;
	if ((err = profile_set_info_string(p, &i->producer, "hostprof " HOSTPROF_VERSION)) < 0 ||
	    (err = profile_set_info_string(p, &i->hostname, host)) < 0 ||
	    (err = profile_set_info_string(p, &i->host_id, machine_id)) < 0 ||
	    (err = profile_set_info_string(p, &i->kernel, u.release)) < 0 ||
	    (err = profile_set_info_string(p, &i->event, sampler_event(r->sampler))) < 0 ||
	    (err = profile_set_info_string(p, &i->unwinder, run_settings_unwinder_name(&r->o->opts.run))) < 0 ||
	    (err = set_cmdline(p, r->o->argc, r->o->argv)) < 0)
		return err;
	long online = sysconf(_SC_NPROCESSORS_ONLN), available = sysconf(_SC_NPROCESSORS_CONF);
	i->cpus_online = online > 0 && online <= UINT32_MAX ? (uint32_t)online : 0;
	i->cpus_available = available > 0 && available <= UINT32_MAX ? (uint32_t)available : 0;
	i->start_unix_ns = r->start_unix_ns;
	i->duration_ns = r->end_mono_ns - r->start_mono_ns;
	i->frequency_hz = r->o->sampler.freq_hz;
	i->period_ns = 1000000000ULL / r->o->sampler.freq_hz;
	return 0;
}

/*
 * The profile into -o; when that fails at the end (a full disk, an I/O error: -o was checked writable at the
 * start), into a fallback place (fallback_file.h), saying where, so the run is not lost. Returns 0 when it is
 * in -o, 1 when only in the fallback, a negative errno when nowhere.
 */
static int write_profile(struct record_run *r)
{
	const char *out = r->o->opts.output;
	char saved[PATH_MAX];
	struct profile *p = NULL;
	int err = profile_new(&p);
	if (err == 0)
		err = fill_info(r, p);
	if (err == 0)
		err = session_build_profile(r->session, p);
	if (err == 0 && p->info.timestamps_dropped)
		fprintf(stderr, "hostprof: %llu samples counted without their time (a profile keeps at most %u): their "
			"processes' OTLP profiles have no timestamps\n", (unsigned long long)p->info.timestamps_dropped,
			TRACES_MAX_TIMESTAMPS);
	if (err < 0) {
		fprintf(stderr, "hostprof: cannot make the profile: %s\n", strerror(-err));
	} else if ((err = profile_write_file(p, out)) < 0) {
		fprintf(stderr, "hostprof: cannot write %s: %s\n", out, strerror(-err));
		int ferr = fallback_file_save(out, profile_write_file_fn, p, saved, sizeof(saved));
		if (ferr == 0)
			fprintf(stderr, "hostprof: saved the profile to %s instead\n", saved);
		else
			fprintf(stderr, "hostprof: cannot save the profile anywhere else either (%s): it is lost\n",
				strerror(-ferr));
		err = ferr == 0 ? 1 : err;
	}
	/* Sent once written (or saved elsewhere): a receiver that is down costs the export, never the file. */
	if (err >= 0 && r->o->opts.export.otlp_endpoint[0] &&
	    export_profile_now(&r->o->opts.export, p, r->o->opts.quiet) < 0)
		r->export_failed = 1;
	profile_free(p);
	return err;
}

static double cpu_seconds(const struct rusage *ru)
{
	return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 + (double)ru->ru_stime.tv_sec +
	       ru->ru_stime.tv_usec / 1e6;
}

static void print_fast_lane(const struct session_counters *c)
{
	const struct fastlane_stats fs = c->fastlane;
	if (!c->has_fastlane)
		return;
	fprintf(stderr, "hostprof: fast lane: %llu samples (%u events open, %llu closed as their threads exited, %u of "
			"%u readers real-time, %.1f us of their CPU "
			"per sample), read p50 %.1f us p99 %.1f us max %.1f us after the sample, %llu goroutines or stacks read; "
			"%llu lost in a full queue, %llu lost by the kernel, %llu snapshots too large, %u processes "
			"refused\n",
		(unsigned long long)fs.samples, fs.events, (unsigned long long)fs.events_closed, fs.realtime, fs.readers,
		fs.samples ? (double)fs.readers_cpu_ns / 1e3 / (double)fs.samples : 0.0,
		(double)fs.read_p50_ns / 1e3, (double)fs.read_p99_ns / 1e3, (double)fs.read_max_ns / 1e3,
		(unsigned long long)fs.go_snapshots, (unsigned long long)fs.queue_full,
		(unsigned long long)fs.kernel_lost, (unsigned long long)fs.go_too_large, fs.refused);
}

/* Threads given a bigger stack copy of their own (thread_copies.h), when any was. */
static void print_thread_copies(const struct session_counters *c)
{
	const struct thread_copies_stats ts = c->thread_copies;
	if (!c->has_thread_copies || !(ts.opened + ts.gone))
		return;
	fprintf(stderr, "hostprof: thread copies: %llu threads given a stack copy of their own (%llu gone before), "
			"%llu samples taken from them, %llu of the sampler's own replaced, %llu events closed as their "
			"threads exited, %llu copies given back as their threads' stacks no longer needed them\n",
		(unsigned long long)ts.opened, (unsigned long long)ts.gone, (unsigned long long)ts.samples,
		(unsigned long long)ts.replaced, (unsigned long long)ts.closed, (unsigned long long)ts.given_back);
}

static void print_python(struct record_run *r, const struct session_counters *c)
{
	const struct session_stats *st = session_stats(r->session);
	const struct fastlane_stats *fs = &c->fastlane;
	if (!st->python_samples)
		return;
	fprintf(stderr, "hostprof: python: %llu samples of CPython processes, %llu with their Python frames, %llu "
			"(%.2f%%) Python frames not trusted, %llu (%.2f%%) not read in the fast lane (native frames "
			"kept); %.1f us per read\n",
		(unsigned long long)st->python_samples, (unsigned long long)st->python_merged,
		(unsigned long long)st->python_untrusted,
		100.0 * (double)st->python_untrusted / (double)st->python_samples,
		(unsigned long long)st->python_unread, 100.0 * (double)st->python_unread / (double)st->python_samples,
		c->has_fastlane && fs->python_reads ? (double)fs->python_read_ns / 1e3 / (double)fs->python_reads : 0.0);
}

static void print_correlation(struct record_run *r, const struct session_counters *c)
{
	const struct correlate_stats cs = c->correlate;
	if (!c->has_correlate || !cs.samples_correlated)
		return;
	fprintf(stderr,
		"hostprof: apm: %llu of %llu samples correlated (%llu before the agent's socket was ready), %llu "
		"messages with %llu counts sent, %llu pending, %llu dropped (%llu unsent at the end); latency p50 %u "
		"ms p99 %u ms (announced %u ms)\n",
		(unsigned long long)cs.samples_correlated, (unsigned long long)cs.samples,
		(unsigned long long)cs.samples_unsendable, (unsigned long long)cs.messages_sent,
		(unsigned long long)cs.counts_sent, (unsigned long long)cs.counts_pending,
		(unsigned long long)cs.counts_dropped, (unsigned long long)cs.counts_unsent_at_exit,
		(unsigned)cs.latency_p50_ms, (unsigned)cs.latency_p99_ms, (unsigned)cs.delay_ms);
	const struct session_stats *st = session_stats(r->session);
	uint64_t total = 0, fast = 0;
	for (int i = 0; i < 16; i++) {
		total += st->apm_read_hist[i];
		fast += i < 8 ? st->apm_read_hist[i] : 0;
	}
	fprintf(stderr, "hostprof: apm: trace context read within 64 us of the sample for %.1f%% of samples; %llu "
			"read later than %u us left uncorrelated\n",
		total ? 100.0 * (double)fast / (double)total : 0.0, (unsigned long long)st->apm_stale,
		r->o->session.apm_max_staleness_us ? r->o->session.apm_max_staleness_us : SESSION_APM_MAX_STALENESS_US);
}

/* The part of the off-CPU line about switch-outs that came without a sample (switch records only, or lost), "" if
 * none did. */
static void format_no_sample(const struct offcpu_stats *os, char *out, size_t len)
{
	out[0] = '\0';
	if (!os->without_sample)
		return;
	snprintf(out, len, "; %llu switch-outs without a sample, %llu of their stacks read live as the thread waited "
		 "(%llu tried), %llu intervals left without a stack", (unsigned long long)os->without_sample,
		 (unsigned long long)os->live_stacks, (unsigned long long)os->live_tries,
		 (unsigned long long)os->no_sample);
}

static void print_off_cpu(struct record_run *r, const struct session_counters *c)
{
	const struct offcpu_stats os = c->offcpu;
	char no_sample[256];
	if (!c->has_offcpu)
		return;
	const struct session_stats *st = session_stats(r->session);
	format_no_sample(&os, no_sample, sizeof(no_sample));
	fprintf(stderr, "hostprof: off-cpu: %llu switch-outs, %llu intervals: %llu with stacks (%.1f%% unwound "
			"completely), %llu under %u us summed "
			"per thread, %llu over the rate cap of %u/s (%.3f s off CPU without stacks)%s; %llu switch-outs "
			"not tracked, %llu switch-ins without a switch-out seen, %llu off-CPU samples lost (full off-CPU "
			"rings)\n",
		(unsigned long long)os.switch_outs, (unsigned long long)os.intervals,
		(unsigned long long)os.with_stack,
		st->off_cpu_stacks ? 100.0 * (double)st->off_cpu_walks.complete / (double)st->off_cpu_stacks : 0.0,
		(unsigned long long)os.short_blocks,
		r->o->opts.run.off_cpu_threshold_us, (unsigned long long)os.capped, r->o->opts.run.off_cpu_max_rate,
		(double)os.capped_ns / 1e9, no_sample, (unsigned long long)os.untracked,
		(unsigned long long)os.unmatched, (unsigned long long)c->off_cpu_lost);
}

static void print_go_stacks(struct record_run *r, const struct session_counters *c)
{
	const struct go_stack_stats gs = c->go_stacks;
	if (!c->has_go_stacks)
		return;
	/* Those the fast lane read as they were taken were followed without a read now (go_stack_stats). */
	uint64_t fast = session_stats(r->session)->fast_goroutines;
	uint64_t tried = gs.followed + gs.no_goroutine + gs.stale + gs.unreadable + fast;
	if (!tried)
		return;
	fprintf(stderr, "hostprof: go: %llu of %llu samples on the g0 stack followed onto their goroutine's stack, "
			"%llu of them with the goroutine the fast lane read, %llu rebuilt after stack growth (not: %llu "
			"no goroutine found, %llu goroutine moved on, %llu unreadable)\n",
		(unsigned long long)(gs.followed + fast), (unsigned long long)tried, (unsigned long long)fast,
		(unsigned long long)gs.grown, (unsigned long long)gs.no_goroutine, (unsigned long long)gs.stale,
		(unsigned long long)gs.unreadable);
}

static void print_stack_extensions(struct record_run *r, const struct session_counters *c)
{
	const struct stackext_stats x = c->stackext;
	if (!c->has_stackext)
		return;
	/* Walks that went on with what the fast lane read past the copy as the sample was taken needed no read
	 * now; those that went past that too read on from the process, counted with the others. */
	uint64_t fast = session_stats(r->session)->fast_extensions;
	uint64_t tried = x.extended + x.stale + x.unreadable + x.beyond_limit + x.too_short;
	if (!tried && !fast)
		return;
	fprintf(stderr, "hostprof: stack: %llu of %llu walks that ran past the copied stack read on from the process "
			"(not: %llu changed since the sample, %llu unreadable, %llu copies too short to check, %llu past "
			"--max-stack or a Go stack's end); %llu went on with the stack the fast lane read past the copy "
			"as the sample was taken\n",
		(unsigned long long)x.extended, (unsigned long long)tried, (unsigned long long)x.stale,
		(unsigned long long)x.unreadable, (unsigned long long)x.too_short, (unsigned long long)x.beyond_limit,
		(unsigned long long)fast);
}

static void print_frame_limit(struct record_run *r)
{
	const struct session_stats *st = session_stats(r->session);
	if (st->walks.frame_limited)
		fprintf(stderr, "hostprof: stack: %llu samples deeper than --max-frames (%u) end in [truncated]\n",
			(unsigned long long)st->walks.frame_limited,
			r->o->session.max_frames ? r->o->session.max_frames : SESSION_DEFAULT_MAX_FRAMES);
}

static void print_fp_chain(const struct unwind_deltas_stats *us)
{
	uint64_t joins = us->fp_chain_joins + us->fp_chain_join_failures;
	if (!us->fp_chain_walks && !joins && !us->fp_chain_steps)
		return;
	fprintf(stderr, "hostprof: fp chain: %llu walks the stack copy could not finish went on with the kernel's "
			"frame-pointer chain; %llu frames in code without CFI stepped by frame pointer where the chain "
			"agreed; %llu of %llu g0 switches joined it\n",
		(unsigned long long)us->fp_chain_walks, (unsigned long long)us->fp_chain_steps,
		(unsigned long long)us->fp_chain_joins, (unsigned long long)joins);
}

static void print_jit(const struct session_counters *c)
{
	const struct jitinfo_stats js = c->jit;
	const struct unwind_deltas_stats *us = &c->unwind;
	if (!js.processes && !js.untracked)
		return;
	fprintf(stderr, "hostprof: jit: %llu processes ran JIT code (%llu walked by frame pointer: %llu frames, "
			"%llu steps refused); %llu perf maps and %llu jitdump files read, %llu names, %llu bytes "
			"(skipped %llu, dropped %llu, files refused %llu, processes untracked %llu)\n",
		(unsigned long long)js.processes, (unsigned long long)js.fp_processes,
		(unsigned long long)us->jit_steps, (unsigned long long)us->jit_step_failures,
		(unsigned long long)js.perf_maps, (unsigned long long)js.jitdumps, (unsigned long long)js.symbols,
		(unsigned long long)js.bytes, (unsigned long long)js.skipped, (unsigned long long)js.dropped,
		(unsigned long long)js.refused, (unsigned long long)js.untracked);
	if (js.jvms)
		fprintf(stderr, "hostprof: jit: %llu JVMs' code caches read: %llu lookups answered by a code blob's "
				"frame size (no frame pointers), %llu by none (freed code, or a word a step checked); "
				"%llu blobs and %llu interpreted methods named from the JVMs' memory\n",
			(unsigned long long)js.jvms, (unsigned long long)js.blob_frames,
			(unsigned long long)js.blob_misses, (unsigned long long)js.blob_names,
			(unsigned long long)js.method_names);
}

/* All-in per sample once warmed up (ring reading, unwinding, counting, wakeups, every thread of hostprof);
 * start-up, the first samples' tables and writing the profile are in the CPU total of the summary. */
static void print_steady_state(const struct record_run *r)
{
	if (!r->warm.taken || r->end.samples <= r->warm.samples)
		return;
	double n = (double)(r->end.samples - r->warm.samples);
	long sw = r->end.switches - r->warm.switches;
	fprintf(stderr, "hostprof: steady state (after %d samples): %.2f us of CPU per sample, %ld context switches "
			"for %.0f samples (1 per %.0f; %ld of them waits, the others preemptions)\n", WARM_SAMPLES,
		(double)(r->end.cpu_ns - r->warm.cpu_ns) / 1e3 / n, sw, n, sw ? n / (double)sw : n,
		r->end.waits - r->warm.waits);
}

static void print_held(const struct session_stats *st)
{
	if (st->held)
		fprintf(stderr, "hostprof: tables: %llu samples held while the tables they need were built: %llu walked "
				"once ready, %llu without (their process exec'd or was remapped first, or the run ended)\n",
			(unsigned long long)st->held, (unsigned long long)st->replayed,
			(unsigned long long)st->settled);
	if (st->table_pending)
		fprintf(stderr, "hostprof: tables: %llu samples walked while a table they need was built, without it "
				"(no room to hold them, read by the fast lane, or off CPU)\n",
			(unsigned long long)st->table_pending);
}

/* Where the lost samples were lost, when not all in the kernel's rings: "" or ": N by the kernel's rings, M on the
 * fast lane" (lost counts every one: the total stays "(N lost)" where one place lost them all). */
static const char *lost_where(const struct session_stats *st, char *buf, size_t size)
{
	if (!st->lost_fast_lane || st->lost_fast_lane > st->lost)
		return "";
	snprintf(buf, size, ": %llu by the kernel's rings, %llu on the fast lane",
		 (unsigned long long)(st->lost - st->lost_fast_lane), (unsigned long long)st->lost_fast_lane);
	return buf;
}

/*
 * After the processes: the samples that had no user stack, if any (a kernel thread's or an idle CPU's, under -a),
 * and the share of the user stacks unwound completely, or that there were none. Counted over all samples, an -a
 * run on a machine half idle read "48% unwound completely" where 98% of its user stacks were.
 */
static const char *completeness(const struct session_stats *st, char *buf, size_t size)
{
	uint64_t user = st->walks.complete + st->walks.truncated + st->walks.unknown;	/* as report's header */
	int n = 0;
	if (st->walks.kernel_only)
		n = snprintf(buf, size, " (%llu samples in the kernel alone: kernel threads, idle CPUs)",
			     (unsigned long long)st->walks.kernel_only);
	size_t at = n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
	if (user)
		snprintf(buf + at, size - at, ", %.1f%% unwound completely", 100.0 * (double)st->walks.complete / user);
	else
		snprintf(buf + at, size - at, ", no user stack to unwind");
	return buf;
}

/* The summary, one line as perf's: samples, lost, processes, completeness of the user stacks, the output. */
static void print_summary_line(struct record_run *r)
{
	const struct session_stats *st = session_stats(r->session);
	struct session_counters c;
	char where[96], shares[160];
	session_counters(r->session, &c);
	fprintf(stderr, "hostprof: %llu samples in %.2f s (%llu lost%s), %u processes%s; wrote %s\n",
		(unsigned long long)st->samples, (double)(r->end_mono_ns - r->start_mono_ns) / 1e9,
		(unsigned long long)st->lost, lost_where(st, where, sizeof(where)), c.processes,
		completeness(st, shares, sizeof(shares)), r->o->opts.output);
}

/* -v: the summary line with hostprof's costs, then every part's details. */
static void print_summary(struct record_run *r)
{
	const struct session_stats *st = session_stats(r->session);
	char where[96], shares[160];
	double secs = (double)(r->end_mono_ns - r->start_mono_ns) / 1e9;
	double n = st->samples ? (double)st->samples : 1.0;
	struct rusage self;
	struct session_counters c;
	if (!r->o->opts.verbose) {
		print_summary_line(r);
		return;
	}
	getrusage(RUSAGE_SELF, &self);
	session_counters(r->session, &c);
	unsigned tables = c.tables.tables, cached = c.tables.tables_cached;
	uint64_t rows = c.tables.rows, bytes = c.tables.bytes, build_ns = c.tables.build_ns;
	/* Tables are built by the worker thread (in the CPU total); loads from the cache are in the unwinds. */
	uint64_t unwind_ns = st->unwind_ns;
	fprintf(stderr,
		"hostprof: %llu samples in %.2f s (%llu lost%s), %u processes%s; "
		"unwinding %.2f us/sample, handling %.2f us/sample, hostprof CPU %.3f s, %ld context switches",
		(unsigned long long)st->samples, secs, (unsigned long long)st->lost, lost_where(st, where, sizeof(where)),
		c.processes, completeness(st, shares, sizeof(shares)), (double)unwind_ns / 1e3 / n,
		(double)st->handle_ns / 1e3 / n, cpu_seconds(&self),
		self.ru_nvcsw + self.ru_nivcsw);
	if (r->child_exited)
		fprintf(stderr, ", command CPU %.3f s", cpu_seconds(&r->child_usage));
	fprintf(stderr, "; wrote %s\n", r->o->opts.output);
	print_steady_state(r);
	print_correlation(r, &c);
	print_fast_lane(&c);
	print_thread_copies(&c);
	print_python(r, &c);
	print_off_cpu(r, &c);
	print_go_stacks(r, &c);
	print_stack_extensions(r, &c);
	print_frame_limit(r);
	const struct unwind_deltas_stats us = c.unwind;
	print_fp_chain(&us);
	print_jit(&c);
	if (tables)
		fprintf(stderr, "hostprof: %u stack-delta tables (%u from cache), %llu rows, %.1f bytes/row, "
				"built/loaded in %.1f ms; %llu frames stepped by libunwind\n",
			tables, cached, (unsigned long long)rows, rows ? (double)bytes / (double)rows : 0.0,
			build_ns / 1e6, (unsigned long long)us.fallback_calls);
	print_held(st);
	if (c.dropped_mappings)
		fprintf(stderr, "hostprof: %llu mappings or thread names not kept for lack of memory (their samples "
				"show [unknown] or no thread name)\n",
			(unsigned long long)c.dropped_mappings);
	if (us.implausible_callers)
		fprintf(stderr, "hostprof: stack: %llu guessed callers (code without CFI) refused: no call "
				"instruction before them; those stacks end in [truncated]\n",
			(unsigned long long)us.implausible_callers);
}

static int child_exit_code(const struct record_run *r)
{
	if (!r->o->command || !r->child_exited)
		return 0;
	if (WIFEXITED(r->child_status) && WEXITSTATUS(r->child_status)) {
		fprintf(stderr, "hostprof: command exited with status %d\n", WEXITSTATUS(r->child_status));
		return WEXITSTATUS(r->child_status);
	}
	if (WIFSIGNALED(r->child_status)) {
		fprintf(stderr, "hostprof: command killed by signal %d\n", WTERMSIG(r->child_status));
		return 128 + WTERMSIG(r->child_status);
	}
	return 0;
}

static void reap_child(struct record_run *r)
{
	if (r->exec_fd >= 0)	/* not read: the command was never let go */
		close(r->exec_fd);
	if (r->watch && target_watch_stop_child(r->watch))
		r->child_exited = target_watch_child_exit(r->watch, &r->child_status, &r->child_usage);
}

/* The session's log sink (log.h): warnings and errors always, information unless --quiet, escaped. */
static void record_log(void *ctx, enum log_level level, const char *msg)
{
	const struct record_options *o = ctx;
	struct log_stderr to = { .max_level = o->quiet ? LOG_LEVEL_WARN : LOG_LEVEL_INFO };
	log_stderr_write(&to, level, msg);
}

/* The forked command started (err 0) or told to give up (closing go_fd without a byte); then exec's error. */
static int let_command_go(struct record_run *r, int go_fd, int err)
{
	if (err == 0 && write(go_fd, "g", 1) != 1)
		err = -errno;
	close(go_fd);
	if (err == 0 && (err = exec_failed(r)) < 0)
		r->exec_error = 1;
	return err;
}

static int record(struct record_plan *o, const struct cli_env *env)
{
	struct record_run r = { .o = o, .env = env, .child = -1, .exec_fd = -1 };
	int go_fd = -1;
	int err = target_watch_new(o->command ? 1 : o->opts.pids.n, &r.watch);
	if (err == 0)
		err = sampler_new(&o->sampler, &r.sampler);
	o->session.log = (struct log_sink){ .write = record_log, .ctx = &o->opts };
	if (r.sampler)
		err = session_new(r.sampler, &o->session, &r.session);
	if (!r.session) {
		fprintf(stderr, "hostprof: cannot set up sampling: %s\n", strerror(-err));
		sampler_free(r.sampler);
		target_watch_free(r.watch);
		return 1;
	}
	err = open_targets(&r, &go_fd);
	if (err == 0 && sampler_note(r.sampler)[0] && !o->opts.quiet)
		fprintf(stderr, "hostprof: %s\n", sampler_note(r.sampler));
	if (err == 0 && !o->command)
		err = sampler_enable(r.sampler);
	r.start_unix_ns = clock_ns(CLOCK_REALTIME);
	r.start_mono_ns = clock_ns(CLOCK_MONOTONIC);
	if (go_fd >= 0)
		err = let_command_go(&r, go_fd, err);
	if (err == 0) {
		/* Said where someone watches (a terminal) or asked for the details: under a pipe, the summary only. */
		if (!o->opts.quiet && (o->opts.verbose || isatty(STDERR_FILENO)))
			fprintf(stderr, "hostprof: recording at %u Hz (%s)%s\n", o->sampler.freq_hz,
				sampler_event(r.sampler), o->command ? "" : ", Ctrl-C to stop");
		struct rusage self;
		status_line_init(&r.status, stderr, !o->opts.quiet);
		getrusage(RUSAGE_SELF, &self);
		r.status_cpu_s = cpu_seconds(&self);	/* the first line's CPU share: since the start */
		r.status_ns = r.start_mono_ns;
		run_loop(&r);
		int written = write_profile(&r);
		err = written > 0 ? -EIO : written;
		if (written >= 0 && o->session.capture_path && (err = session_save_capture(r.session)) < 0)
			fprintf(stderr, "hostprof: cannot write %s: %s\n", o->session.capture_path, strerror(-err));
		if (written == 0 && err == 0 && !o->opts.quiet)
			print_summary(&r);
	}
	reap_child(&r);
	session_free(r.session);
	sampler_free(r.sampler);
	target_watch_free(r.watch);
	if (err < 0)
		return r.exec_error ? 127 : 1;
	if (r.export_failed)
		return 1;	/* said: the profile is in its file, not at the receiver */
	return child_exit_code(&r);
}

/* Outputs that cannot be created are refused before anything is recorded, not found out after the run. */
static int check_outputs(const struct record_options *o)
{
	const char *paths[] = { o->output, o->save_samples[0] ? o->save_samples : NULL };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int err = paths[i] ? atomic_file_probe(paths[i]) : 0;
		if (err < 0) {
			fprintf(stderr, "hostprof: cannot write %s: %s (nothing recorded)\n", paths[i], strerror(-err));
			return err;
		}
	}
	return 0;
}

int cmd_record(int argc, char **argv, const struct cli_env *env)
{
	struct record_plan *p = calloc(1, sizeof(*p)); /* large: the pid list and paths */
	if (!p) {
		fprintf(stderr, "hostprof: out of memory\n");
		return 1;
	}
	int err = parse_args(argc, argv, p);
	if (err == 0)
		err = check_outputs(&p->opts);
	int status = err ? (err > 0 ? 0 : 2) : record(p, env);
	free(p);
	return status;
}
