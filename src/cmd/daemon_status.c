/*
 * daemon_status.c — the daemon's status file and `hostprof daemon --status`. See daemon_status.h.
 */
#include "src/cmd/daemon_status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/base/atomic_file.h"
#include "src/base/escape.h"
#include "src/base/read_file.h"

static void put_u64(FILE *f, const char *key, uint64_t v)
{
	fprintf(f, "%s %" PRIu64 "\n", key, v);
}

static void put_str(FILE *f, const char *key, const char *s)
{
	char buf[ESCAPE_SIZE(PATH_MAX)];
	fprintf(f, "%s %s\n", key, escape_str(buf, sizeof(buf), s));
}

static void put_otlp(FILE *f, const struct daemon_status *st)
{
	put_u64(f, "otlp", st->otlp);
	if (!st->otlp)
		return;
	put_u64(f, "otlp_pending", st->otlp_pending);
	put_u64(f, "otlp_pending_bytes", st->otlp_pending_bytes);
	put_u64(f, "otlp_sent", st->otlp_sent);
	put_u64(f, "otlp_sent_bytes", st->otlp_sent_bytes);
	put_u64(f, "otlp_retries", st->otlp_retries);
	put_u64(f, "otlp_refused", st->otlp_refused);
	put_u64(f, "otlp_spool_dropped", st->otlp_spool_dropped);
	fprintf(f, "otlp_last_status %d\n", st->otlp_last_status);
}

int daemon_status_write(const char *dir, const struct daemon_status *st)
{
	char path[PATH_MAX];
	struct atomic_file *af;
	if (snprintf(path, sizeof(path), "%s/%s", dir, DAEMON_STATUS_NAME) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	int err = atomic_file_new(path, &af);
	if (err < 0)
		return err;
	FILE *f = atomic_file_stream(af);
	fprintf(f, "format 1\n");
	fprintf(f, "pid %d\n", (int)st->pid);
	fprintf(f, "state %s\n", st->running ? "running" : "stopped");
	fprintf(f, "started %" PRId64 "\nupdated %" PRId64 "\n", st->started, st->updated);
	put_u64(f, "interval", st->interval_s);
	put_str(f, "output", st->output_dir);
	put_u64(f, "profiles_written", st->profiles_written);
	put_str(f, "last_profile", st->last_profile);
	put_u64(f, "samples", st->samples);
	put_u64(f, "lost", st->lost);
	put_u64(f, "profiles_held", st->profiles_held);
	put_u64(f, "held_bytes", st->held_bytes);
	put_u64(f, "profiles_dropped", st->profiles_dropped);
	put_u64(f, "samples_dropped", st->samples_dropped);
	put_u64(f, "rss", st->rss);
	put_u64(f, "memory_budget", st->memory_budget);
	put_u64(f, "memory_over", st->memory_over);
	put_u64(f, "memory_episodes", st->memory_episodes);
	put_u64(f, "memory_peak_rss", st->memory_peak_rss);
	put_otlp(f, st);
	return atomic_file_commit(af);
}

int daemon_status_clean_temporaries(const char *dir)
{
	static const char prefix[] = DAEMON_STATUS_NAME ".tmp.";
	DIR *d = opendir(dir);
	struct dirent *de;
	int removed = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, sizeof(prefix) - 1) == 0 && unlinkat(dirfd(d), de->d_name, 0) == 0)
			removed++;
	closedir(d);
	return removed;
}

/* What --status found in the file. */
struct status_seen {
	long long pid, started, updated;
	char state[16];
	int format;
};

/* The value of line (up to end) when its key is key, else NULL. */
static const char *value_of(const char *line, const char *end, const char *key)
{
	size_t n = strlen(key);
	if ((size_t)(end - line) <= n || strncmp(line, key, n) != 0 || line[n] != ' ')
		return NULL;
	return line + n + 1;
}

static void parse_line(const char *line, const char *end, struct status_seen *s)
{
	const char *v;
	if ((v = value_of(line, end, "format")))
		s->format = atoi(v);
	else if ((v = value_of(line, end, "pid")))
		s->pid = strtoll(v, NULL, 10);
	else if ((v = value_of(line, end, "started")))
		s->started = strtoll(v, NULL, 10);
	else if ((v = value_of(line, end, "updated")))
		s->updated = strtoll(v, NULL, 10);
	else if ((v = value_of(line, end, "state")))
		snprintf(s->state, sizeof(s->state), "%.*s", (int)(end - v), v);
}

/* Whether pid is a hostprof daemon: its command line is "…/hostprof… daemon …". 0: yes, -ESRCH: no such
 * process, -EPERM: another program has that pid now, or open(2)'s error. */
static int is_hostprof_daemon(long long pid)
{
	char path[64];
	uint8_t *buf;
	size_t len;
	snprintf(path, sizeof(path), "/proc/%lld/cmdline", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	int err = read_fd_all(fd, 65536, &buf, &len);
	close(fd);
	if (err < 0)
		return err;
	/* argv[0] and argv[1], each NUL-terminated; a kernel thread's is empty */
	const char *argv0 = (const char *)buf, *end = argv0 + len;
	const char *nul0 = memchr(argv0, 0, len);
	const char *argv1 = nul0 ? nul0 + 1 : end;
	const char *base = nul0 ? strrchr(argv0, '/') : NULL;
	base = base ? base + 1 : argv0;
	int ok = nul0 && strncmp(base, "hostprof", 8) == 0 && end - argv1 >= 7 && memcmp(argv1, "daemon", 7) == 0;
	free(buf);
	return ok ? 0 : -EPERM;
}

/* Read dir's status file into *buf, *len; says why not on err. */
static int read_status(const char *dir, uint8_t **buf, size_t *len, FILE *err)
{
	char path[PATH_MAX], shown[ESCAPE_SIZE(PATH_MAX)];
	snprintf(path, sizeof(path), "%s/%s", dir, DAEMON_STATUS_NAME);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	int rc = fd < 0 ? -errno : read_fd_all(fd, DAEMON_STATUS_MAX, buf, len);
	if (fd >= 0)
		close(fd);
	if (rc == -ENOENT)
		fprintf(err, "hostprof: no daemon is running in %s (no status file %s there)\n",
			escape_str(shown, sizeof(shown), dir), DAEMON_STATUS_NAME);
	else if (rc < 0)
		fprintf(err, "hostprof: cannot read %s: %s\n", escape_str(shown, sizeof(shown), path), strerror(-rc));
	return rc;
}

/* Whether the daemon s names runs; says why not on err. */
static int check_running(const char *dir, const struct status_seen *s, FILE *err)
{
	char shown[ESCAPE_SIZE(PATH_MAX)];
	escape_str(shown, sizeof(shown), dir);
	if (s->format != 1 || s->pid <= 0 || s->pid > INT_MAX) {
		fprintf(err, "hostprof: %s/%s is no daemon status file this hostprof reads\n", shown,
			DAEMON_STATUS_NAME);
		return -EINVAL;
	}
	if (strcmp(s->state, "running") != 0) {
		fprintf(err, "hostprof: no daemon is running in %s: the last one (pid %lld) stopped %lld s ago\n", shown,
			s->pid, (long long)time(NULL) - s->updated);
		return -ESRCH;
	}
	int rc = is_hostprof_daemon(s->pid);
	if (rc == -ESRCH || rc == -EPERM)
		fprintf(err, "hostprof: no daemon is running in %s: its status file is stale (pid %lld %s; the "
			"daemon was killed?)\n", shown, s->pid, rc == -ESRCH ? "is gone" : "is no hostprof daemon now");
	else if (rc < 0)
		fprintf(err, "hostprof: cannot tell whether pid %lld, named by %s/%s, runs: %s\n", s->pid, shown,
			DAEMON_STATUS_NAME, strerror(-rc));
	return rc;
}

int daemon_status_show(const char *dir, FILE *out, FILE *err)
{
	uint8_t *buf;
	size_t len;
	struct status_seen s = { .format = 0 };
	if (read_status(dir, &buf, &len, err) < 0)
		return 1;
	const char *p = (const char *)buf, *end = p + len;
	for (const char *line = p; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *stop = nl ? nl : end;
		parse_line(line, stop, &s);
		line = stop + 1;
	}
	if (check_running(dir, &s, err) < 0) {
		free(buf);
		return 1;
	}
	/* The file is the daemon's, but shown as text that cannot drive the terminal whoever wrote it. */
	for (const char *line = p; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *stop = nl ? nl : end;
		char shown[ESCAPE_SIZE(PATH_MAX) + 64];	/* a line holds one escaped path at most */
		escape_bytes(shown, sizeof(shown), line, (size_t)(stop - line), ESCAPE_KEEP_BACKSLASH);
		fprintf(out, "%s\n", shown);
		line = stop + 1;
	}
	long long now = (long long)time(NULL);
	fprintf(out, "uptime %lld\nage %lld\n", now - s.started, now - s.updated);
	free(buf);
	return fflush(out) == 0 ? 0 : 1;
}
