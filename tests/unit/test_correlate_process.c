/*
 * Tests of correlate/ against real processes: $BUILD/fixtures/apm_app with the fake agent library
 * ($BUILD/fixtures/elastic-jvmti-linux-x86_64.so, TLSDESC). The test plays the sampler: it seeds the
 * library with the app's /proc/PID/maps, calls correlate_on_sample() for the app's threads at known times
 * and correlate_tick() in between, then compares what the app's receiver logged (dgram.log) with what it
 * fed, and what the library read from TLS with the app's transaction schedule (sched.log).
 *
 * Measured and printed: sample → datagram-received latency (exact, FIFO-matched per key) and the library's
 * own upper-bound histogram; attribution accuracy.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "correlate/correlate.h"
#include "correlate/correlate_impl.h"
#include "tests/lib/testlib.h"

#define MAX_LOG 256
#define MAX_TIDS 16
#define MAX_SAMPLES 200000
#define HOST_ID "test-host-id"

/* ---------- helpers: time, paths, log capture ---------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static const char *fixture(const char *name, char *buf, size_t len)
{
	const char *b = getenv("BUILD");
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s/fixtures/%s", b && *b ? b : "build", name);
	if (!realpath(rel, buf))
		snprintf(buf, len, "%s", rel);
	return buf;
}

struct logline {
	enum correlate_log_level level;
	int pid;
	char msg[512];
};

struct logbook {
	struct logline lines[MAX_LOG];
	unsigned n;
};

static void capture_log(void *arg, enum correlate_log_level level, const char *msg)
{
	struct logbook *lb = arg;
	assert_null(strchr(msg, '\n'));
	if (getenv("CORRELATE_TEST_VERBOSE"))
		fprintf(stderr, "log[%d] %s\n", (int)level, msg);
	if (lb->n == MAX_LOG)
		return;
	struct logline *l = &lb->lines[lb->n++];
	l->level = level;
	l->pid = 0;
	sscanf(msg, "apm: pid %d:", &l->pid);
	snprintf(l->msg, sizeof(l->msg), "%s", msg);
}

/* Lines at WARN or above about pid; with needle, only those containing it. */
static unsigned warnings(const struct logbook *lb, int pid, const char *needle)
{
	unsigned n = 0;
	for (unsigned i = 0; i < lb->n; i++)
		if (lb->lines[i].level >= CORRELATE_LOG_WARN && lb->lines[i].pid == pid &&
		    (!needle || strstr(lb->lines[i].msg, needle)))
			n++;
	return n;
}

static void dump_warnings(const struct logbook *lb)
{
	for (unsigned i = 0; i < lb->n; i++)
		if (lb->lines[i].level >= CORRELATE_LOG_WARN)
			print_message("  warn: %s\n", lb->lines[i].msg);
}

static struct correlate *new_correlate(struct logbook *lb)
{
	struct correlate_options o = { .host_id = HOST_ID, .log = capture_log, .log_arg = lb };
	struct correlate *c;
	assert_int_equal(correlate_new(&o, &c), 0);
	return c;
}

/* ---------- the fixture process ---------- */

struct app {
	pid_t pid;
	char dir[PATH_MAX];	/* logs */
	char sock[PATH_MAX + 16];
	pid_t tids[MAX_TIDS];	/* worker threads */
	unsigned ntids;
};

static void make_tmpdir(char *out, size_t len, const char *tag)
{
	snprintf(out, len, "/tmp/corr-%s-XXXXXX", tag);
	assert_non_null(mkdtemp(out));
}

/* The app's worker threads, by name. */
static void find_workers(struct app *a)
{
	pid_t pid = a->pid;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d)) && a->ntids < MAX_TIDS;) {
		char comm[PATH_MAX], name[32] = "";
		snprintf(comm, sizeof(comm), "%s/%s/comm", path, de->d_name);
		FILE *f = fopen(comm, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) && strncmp(name, "txn-worker-", 11) == 0)
			a->tids[a->ntids++] = atoi(de->d_name);
		fclose(f);
	}
	closedir(d);
}

/* In the forked child: become uid (and its group) if uid >= 0, stdout to out, then run argv. Never returns. */
static void app_exec(int uid, int out, const char *tunables, const char *const *argv)
{
	dup2(out, 1);
	if (uid >= 0 && (setgroups(0, NULL) < 0 || setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) < 0 ||
			 setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) < 0))
		_exit(126);
	prctl(PR_SET_PDEATHSIG, SIGKILL);	/* a failed test must not leave apps spinning */
	if (tunables)
		setenv("GLIBC_TUNABLES", tunables, 1);
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

/*
 * The app's "ready" line on fd, within 5 s. When it does not come, the test fails saying what happened: the app
 * still silent, or gone (how it exited: 126, it could not become its user; 127, it could not be run), or the
 * pipe's error.
 */
static void wait_ready_line(pid_t pid, int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char buf[64] = "";
	int polled, status = 0, err = 0;
	ssize_t n = -1;
	while ((polled = poll(&pfd, 1, 5000)) < 0 && errno == EINTR)
		;
	if (polled == 1)
		while ((n = read(fd, buf, sizeof(buf) - 1)) < 0 && errno == EINTR)
			;
	err = errno;
	close(fd);
	if (n > 0 && strncmp(buf, "ready", 5) == 0)
		return;
	pid_t gone = 0;
	for (int i = 0; i < 100 && (gone = waitpid(pid, &status, WNOHANG)) == 0 && polled == 1; i++)
		sleep_ms(1);
	if (gone == pid)
		fail_msg("apm_app (pid %d) ended before it was ready: %s %d", (int)pid,
			 WIFSIGNALED(status) ? "killed by signal" : "exit status",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	fail_msg("apm_app (pid %d) not ready: poll %d, read %zd (%s), got '%.*s'", (int)pid, polled, n,
		 n < 0 ? strerror(err) : "", (int)(n > 0 ? n : 0), buf);
}

/*
 * The fixture name as another user runs it: a copy in dir (its own), as the build tree may be where that user
 * cannot reach (a checkout under /root, mode 0700: exec fails with EACCES).
 */
static void fixture_for_user(const char *name, const char *dir, char *out, size_t len)
{
	char built[PATH_MAX], cmd[3 * PATH_MAX];
	fixture(name, built, sizeof(built));
	snprintf(out, len, "%s/%s", dir, name);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", built, out);
	assert_int_equal(system(cmd), 0);
}

/*
 * Starts apm_app with extra arguments (NULL-terminated); env may set GLIBC_TUNABLES; uid >= 0 runs it as that
 * user (and group), its log directory handed to it with copies of the fixtures. Waits for "ready".
 */
static void app_start_as(struct app *a, int uid, const char *sock, const char *tunables, const char *const *extra)
{
	char prog[PATH_MAX], lib[PATH_MAX];
	fixture("apm_app", prog, sizeof(prog));
	fixture("elastic-jvmti-linux-x86_64.so", lib, sizeof(lib));
	if (access(prog, X_OK) != 0 || access(lib, R_OK) != 0)
		fail_msg("fixtures missing: %s, %s (build them first)", prog, lib);
	memset(a, 0, sizeof(*a));
	make_tmpdir(a->dir, sizeof(a->dir), "app");
	if (uid >= 0) {
		fixture_for_user("apm_app", a->dir, prog, sizeof(prog));
		fixture_for_user("elastic-jvmti-linux-x86_64.so", a->dir, lib, sizeof(lib));
	}
	if (sock)
		snprintf(a->sock, sizeof(a->sock), "%s", sock);
	else
		snprintf(a->sock, sizeof(a->sock), "%s/essock", a->dir);
	const char *argv[32] = { prog, "--lib", lib, "--socket", a->sock, "--log", a->dir, "--seconds", "60" };
	unsigned n = 9;
	for (unsigned i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	int fds[2];
	/* Close-on-exec: only the app's stdout (dup2 clears the flag) keeps the pipe open past its exec. */
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	if (uid >= 0)
		assert_int_equal(chown(a->dir, (uid_t)uid, (gid_t)uid), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		app_exec(uid, fds[1], tunables, argv);
	close(fds[1]);
	a->pid = pid;
	wait_ready_line(pid, fds[0]);
	find_workers(a);
	assert_true(a->ntids > 0);
}

static void app_start(struct app *a, const char *sock, const char *tunables, const char *const *extra)
{
	app_start_as(a, -1, sock, tunables, extra);
}

static void rm_rf(const char *dir)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void app_stop(struct app *a, int sig)
{
	int status;
	kill(a->pid, sig);
	assert_int_equal(waitpid(a->pid, &status, 0), a->pid);	/* the library never stole the exit status */
	rm_rf(a->dir);
}

/* What a sampler would do on first sight of a process: report its file mappings. */
static void seed_mappings(struct correlate *c, pid_t pid)
{
	char path[64], line[PATH_MAX + 128];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	int apm = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e, off;
		char file[PATH_MAX] = "";
		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %4095[^\n]", &s, &e, &off, file) == 4 && file[0] == '/')
			apm |= correlate_on_mapping(c, pid, s, e, off, file) == 1;
	}
	fclose(f);
	assert_true(apm);
}

static char thread_state(pid_t pid, pid_t tid)
{
	char path[96], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return '?';
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* ---------- sampling and expectations ---------- */

struct sample {
	pid_t tid;
	uint64_t t0, t1;	/* the on_sample call */
	int k;			/* transaction returned, -1 = none */
	int stack;		/* stack-trace ID index used */
	int counted;		/* counted for the agent (not "unsendable") */
};

struct run {
	struct sample *s;
	unsigned n;
};

static void stack_id(int idx, uint8_t out[16])
{
	memset(out, 0x77, 16);
	out[0] = (uint8_t)idx;
}

/* The transaction index encoded in the IDs by apm_app, checking every byte; -1 for garbage. */
static int decode_txn(const struct correlate_context *cx)
{
	int k = cx->transaction_id[0] - 0xc0;
	if (k < 0 || k > 3 || cx->trace_id[0] != 0xa0 + k || cx->span_id[0] != 0xb0 + k)
		return -1;
	for (int j = 1; j < 16; j++)
		if (cx->trace_id[j] != j || (j < 8 && (cx->transaction_id[j] != j || cx->span_id[j] != j)))
			return -1;
	return k;
}

static void sample_threads(struct correlate *c, const struct app *a, unsigned round, struct run *r)
{
	for (unsigned i = 0; i < a->ntids && r->n < MAX_SAMPLES; i++) {
		struct sample *s = &r->s[r->n];
		struct correlate_context cx;
		struct correlate_stats before, after;
		uint8_t sid[16];
		s->tid = a->tids[i];
		s->stack = (int)((round + i) % 3);
		stack_id(s->stack, sid);
		correlate_stats(c, &before);
		s->t0 = now_ns();
		int ret = correlate_on_sample(c, a->pid, s->tid, sid, s->t0, &cx);
		s->t1 = now_ns();
		correlate_stats(c, &after);
		assert_true(ret == 0 || ret == 1);
		s->k = -1;
		s->counted = 0;
		if (ret == 1) {
			s->k = decode_txn(&cx);
			assert_true(s->k >= 0);
			if (cx.service_name[0])
				assert_string_equal(cx.service_env, "test-env");
			s->counted = after.samples_unsendable == before.samples_unsendable;
		}
		r->n++;
	}
}

/* Tick until pid is attached (TLS offset known); returns 1 when ready. */
static int wait_ready(struct correlate *c, unsigned ms)
{
	struct correlate_stats st;
	for (uint64_t end = now_ns() + ms * 1000000ull; now_ns() < end; sleep_ms(5)) {
		correlate_tick(c, now_ns());
		correlate_stats(c, &st);
		if (st.apm_ready == st.apm_processes && st.apm_processes)
			return 1;
	}
	return 0;
}

/* Plays the sampler for ms: every ~4 ms sample the apps' workers, tick in between. */
static void drive(struct correlate *c, struct app *apps, unsigned napps, unsigned ms, struct run *r)
{
	unsigned round = 0;
	for (uint64_t end = now_ns() + ms * 1000000ull; now_ns() < end; round++) {
		for (unsigned i = 0; i < napps; i++)
			if (r)
				sample_threads(c, &apps[i], round, r);
		int wait = correlate_tick(c, now_ns());
		assert_true(wait >= 0);
		sleep_ms(wait < 4 ? (unsigned)wait : 4);
	}
}

/* Tick until every count is sent, then let the receiver (20 ms poll) drain. */
static void drain(struct correlate *c)
{
	struct correlate_stats st;
	for (uint64_t end = now_ns() + 3000000000ull; now_ns() < end; sleep_ms(5)) {
		correlate_tick(c, now_ns());
		correlate_stats(c, &st);
		if (st.counts_pending == 0)
			break;
	}
	assert_int_equal(st.counts_pending, 0);
	sleep_ms(120);
}

/* ---------- reading the app's logs ---------- */

struct dgram {
	uint64_t t;
	uint8_t b[1024];
	size_t len;
};

static unsigned read_dgrams(const char *dir, struct dgram *out, unsigned max)
{
	char path[PATH_MAX], line[2200];
	snprintf(path, sizeof(path), "%s/dgram.log", dir);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	unsigned n = 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long long t;
		int off = 0;
		if (sscanf(line, "R %llu %n", &t, &off) != 1)
			continue;
		out[n].t = t;
		out[n].len = 0;
		for (const char *h = line + off; h[0] && h[1] && h[0] != '\n'; h += 2) {
			unsigned v;
			sscanf(h, "%2x", &v);
			out[n].b[out[n].len++] = (uint8_t)v;
		}
		n++;
	}
	fclose(f);
	return n;
}

static uint16_t u16at(const uint8_t *b)
{
	uint16_t v;
	memcpy(&v, b, 2);
	return v;
}

static uint32_t u32at(const uint8_t *b)
{
	uint32_t v;
	memcpy(&v, b, 4);
	return v;
}

static void assert_registration(const struct dgram *d, uint32_t delay_ms)
{
	assert_int_equal(d->len, 12 + strlen(HOST_ID));
	assert_int_equal(u16at(d->b), 2);
	assert_int_equal(u16at(d->b + 2), 2);
	assert_int_equal(u32at(d->b + 4), delay_ms);
	assert_int_equal(u32at(d->b + 8), strlen(HOST_ID));
	assert_memory_equal(d->b + 12, HOST_ID, strlen(HOST_ID));
}

static unsigned count_registrations(const struct dgram *d, unsigned n)
{
	unsigned r = 0;
	for (unsigned i = 0; i < n; i++)
		r += d[i].len >= 4 && u16at(d[i].b) == 2;
	return r;
}

struct sched_entry {
	pid_t tid;
	uint64_t t;
	int k;
};

static unsigned read_sched(const char *dir, struct sched_entry **out)
{
	char path[PATH_MAX], line[128];
	snprintf(path, sizeof(path), "%s/sched.log", dir);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	unsigned n = 0, cap = 1024;
	struct sched_entry *e = malloc(cap * sizeof(*e));
	while (fgets(line, sizeof(line), f)) {
		int tid, k;
		unsigned long long t;
		if (sscanf(line, "S %d %llu %d", &tid, &t, &k) != 3)
			continue;
		if (n == cap)
			e = realloc(e, (cap *= 2) * sizeof(*e));
		e[n++] = (struct sched_entry){ tid, t, k };
	}
	fclose(f);
	*out = e;
	return n;
}

/* The transaction (k, 4 = none) active on tid at time t, -1 if before its first switch. */
static int scheduled(const struct sched_entry *e, unsigned n, pid_t tid, uint64_t t)
{
	int k = -1;
	uint64_t best = 0;
	for (unsigned i = 0; i < n; i++)
		if (e[i].tid == tid && e[i].t <= t && e[i].t >= best) {
			best = e[i].t;
			k = e[i].k;
		}
	return k;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---------- tests ---------- */

/*
 * The main scenario: registration first, well-formed messages whose counts add up exactly to the counted
 * samples per (transaction, stack), TLS reads that match the schedule, latency measured.
 */
static void test_end_to_end(void **state)
{
	(void)state;
	struct logbook *lb = calloc(1, sizeof(*lb));
	struct correlate *c = new_correlate(lb);
	struct app a;
	const char *args[] = { "--threads", "4", "--publish-delay-ms", "300", NULL };
	app_start(&a, NULL, NULL, args);
	seed_mappings(c, a.pid);
	assert_true(wait_ready(c, 2000));
	struct run r = { calloc(MAX_SAMPLES, sizeof(struct sample)), 0 };
	drive(c, &a, 1, 3000, &r);
	/* No thread was left stopped by the thread-pointer reads. */
	for (unsigned i = 0; i < a.ntids; i++)
		assert_true(thread_state(a.pid, a.tids[i]) != 't');
	drain(c);
	struct correlate_stats st;
	correlate_stats(c, &st);
	static struct dgram d[20000];
	unsigned nd = read_dgrams(a.dir, d, 20000);
	struct sched_entry *sched;
	unsigned ns = read_sched(a.dir, &sched);

	/* Registration first, exactly once; then only well-formed correlation messages. */
	assert_true(nd >= 2);
	assert_registration(&d[0], st.delay_ms);
	assert_int_equal(count_registrations(d, nd), 1);
	uint64_t got[4][3] = { { 0 } }, want[4][3] = { { 0 } }, total = 0;
	for (unsigned i = 1; i < nd; i++) {
		assert_int_equal(d[i].len, 46);
		assert_int_equal(u16at(d[i].b), 1);
		assert_int_equal(u16at(d[i].b + 2), 1);
		int k = d[i].b[20] - 0xc0, s = d[i].b[28];
		assert_true(k >= 0 && k < 4 && s >= 0 && s < 3);
		assert_int_equal(d[i].b[4], 0xa0 + k);
		uint16_t cnt = u16at(d[i].b + 44);
		assert_true(cnt >= 1 && cnt <= 32767);
		got[k][s] += cnt;
	}
	unsigned correlated = 0, counted = 0, judged = 0, right = 0, worker_samples = 0;
	for (unsigned i = 0; i < r.n; i++) {
		struct sample *s = &r.s[i];
		worker_samples++;
		if (s->k >= 0) {
			correlated++;
			if (s->counted) {
				counted++;
				want[s->k][s->stack]++;
			}
		}
		int ka = scheduled(sched, ns, s->tid, s->t0), kb = scheduled(sched, ns, s->tid, s->t1);
		int k = s->k >= 0 ? s->k : 4;
		if (ka < 0)
			continue;
		judged++;
		right += k == ka || k == kb;
	}
	for (int k = 0; k < 4; k++)
		for (int s = 0; s < 3; s++) {
			assert_int_equal(got[k][s], want[k][s]);
			total += got[k][s];
		}
	assert_int_equal(total, counted);
	assert_int_equal(st.counts_sent, counted);
	assert_int_equal(st.counts_dropped, 0);
	assert_int_equal(st.samples_correlated, correlated);
	assert_int_equal(st.samples_correlated - st.samples_unsendable, counted);
	assert_int_equal(st.registrations, 1);
	assert_int_equal(st.thread_trace_failures, 0);
	assert_true(st.threads_traced >= a.ntids);
	assert_true(counted > 1000);
	double accuracy = judged ? (double)right / judged : 0;
	print_message("attribution: %u/%u samples match the schedule (%.3f%%); %u worker samples, %u correlated, "
		      "%u counted\n", right, judged, 100.0 * accuracy, worker_samples, correlated, counted);
	assert_true(accuracy >= 0.98);

	/* Exact sample → received latency: per key, samples and datagram counts matched in FIFO order. */
	uint64_t *lat = calloc(counted, sizeof(uint64_t));
	unsigned nl = 0;
	for (int k = 0; k < 4; k++)
		for (int sk = 0; sk < 3; sk++) {
			unsigned si = 0;
			for (unsigned i = 1; i < nd; i++) {
				if (d[i].b[20] - 0xc0 != k || d[i].b[28] != sk)
					continue;
				for (uint16_t n = u16at(d[i].b + 44); n; n--) {
					while (si < r.n && !(r.s[si].counted && r.s[si].k == k && r.s[si].stack == sk))
						si++;
					assert_true(si < r.n);
					lat[nl++] = d[i].t - r.s[si++].t0;
				}
			}
		}
	assert_int_equal(nl, counted);
	qsort(lat, nl, sizeof(*lat), cmp_u64);
	print_message("sample->received latency (exact): p50 %.1f ms, p99 %.1f ms, max %.1f ms; library bound: "
		      "p50 %u ms, p99 %u ms, max %u ms; samples-delay-ms %u; %llu messages, %llu EAGAIN\n",
		      lat[nl / 2] / 1e6, lat[nl * 99 / 100] / 1e6, lat[nl - 1] / 1e6, st.latency_p50_ms,
		      st.latency_p99_ms, st.latency_max_ms, st.delay_ms, (unsigned long long)st.messages_sent,
		      (unsigned long long)st.eagain_retries);
	assert_true(lat[nl * 99 / 100] / 1000000 < st.delay_ms);
	assert_true(st.latency_p99_ms < st.delay_ms);
	assert_int_equal(warnings(lb, a.pid, NULL), 0);

	free(lat);
	free(sched);
	free(r.s);
	correlate_on_process_exit(c, a.pid);
	app_stop(&a, SIGTERM);
	correlate_free(c);
	free(lb);
}

static unsigned registrations_in(const char *dir)
{
	static struct dgram d[20000];
	unsigned nd = read_dgrams(dir, d, 20000);
	for (unsigned i = 0; i < nd; i++)
		if (u16at(d[i].b) == 2)
			assert_registration(&d[i], CORRELATE_DEFAULT_DELAY_MS);
	return nd ? count_registrations(d, nd) : 0;
}

/* The agent re-creates its socket (new inode), then is replaced by a new process on the same path. */
static void test_agent_restart(void **state)
{
	(void)state;
	struct logbook *lb = calloc(1, sizeof(*lb));
	struct correlate *c = new_correlate(lb);
	char sockdir[PATH_MAX], sock[PATH_MAX + 8];
	make_tmpdir(sockdir, sizeof(sockdir), "restart");
	snprintf(sock, sizeof(sock), "%s/essock", sockdir);
	const char *args[] = { "--threads", "2", "--publish-delay-ms", "0", NULL };
	struct app a, b;
	struct correlate_stats st;
	struct run r = { calloc(MAX_SAMPLES, sizeof(struct sample)), 0 };
	app_start(&a, sock, NULL, args);
	seed_mappings(c, a.pid);
	assert_true(wait_ready(c, 2000));
	drive(c, &a, 1, 500, &r);
	correlate_stats(c, &st);
	assert_int_equal(st.registrations, 1);
	assert_true(st.counts_sent > 0);

	kill(a.pid, SIGUSR1);	/* new socket inode, same path */
	sleep_ms(60);
	drive(c, &a, 1, 600, &r);
	drain(c);
	correlate_stats(c, &st);
	assert_int_equal(st.registrations, 2);
	assert_int_equal(registrations_in(a.dir), 2);	/* one per socket inode */
	assert_true(st.send_errors >= 1);

	/* The agent process dies and the caller misses the exit: the library notices by itself, silently. */
	app_stop(&a, SIGKILL);
	for (int i = 0; i < 300 && (correlate_stats(c, &st), st.apm_processes); i++) {
		correlate_tick(c, now_ns());
		sleep_ms(10);
	}
	assert_int_equal(st.apm_processes, 0);
	assert_int_equal(warnings(lb, a.pid, NULL), 0);

	/* A new agent process on the same socket path: registration again, first. */
	app_start(&b, sock, NULL, args);
	seed_mappings(c, b.pid);
	assert_true(wait_ready(c, 2000));
	drive(c, &b, 1, 500, &r);
	drain(c);
	correlate_stats(c, &st);
	assert_int_equal(st.registrations, 3);
	static struct dgram d[20000];
	unsigned nd = read_dgrams(b.dir, d, 20000);
	assert_true(nd >= 2);
	assert_registration(&d[0], CORRELATE_DEFAULT_DELAY_MS);
	assert_int_equal(warnings(lb, b.pid, NULL), 0);
	correlate_on_process_exit(c, b.pid);
	app_stop(&b, SIGTERM);
	rm_rf(sockdir);
	free(r.s);
	correlate_free(c);
	free(lb);
}

static int bind_dgram(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	assert_true(strlen(path) < sizeof(addr.sun_path));
	memcpy(addr.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	return fd;
}

/*
 * Hostile or broken agents, all at once next to a healthy one: each is refused with exactly one warning,
 * nothing is sent where it must not be, and the healthy one is served throughout.
 */
static void test_hostile_agents(void **state)
{
	(void)state;
	test_require_root("the agents' threads are read through ptrace and /proc/PID/mem");
	struct logbook *lb = calloc(1, sizeof(*lb));
	struct correlate *c = new_correlate(lb);
	char outside[PATH_MAX], outsock[PATH_MAX + 8], root[PATH_MAX], sdir[PATH_MAX + 8], real[PATH_MAX + 16],
		link[PATH_MAX + 16], file[PATH_MAX + 8], dotdot[PATH_MAX * 2];
	make_tmpdir(outside, sizeof(outside), "outside");
	snprintf(outsock, sizeof(outsock), "%s/sock", outside);
	int outfd = bind_dgram(outsock);
	/* A chroot whose socket's full host path is longer than sun_path (108 bytes). */
	make_tmpdir(root, sizeof(root), "root-with-a-long-name-so-that-the-socket-path-exceeds-sun-path-"
			"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	snprintf(sdir, sizeof(sdir), "%s/s", root);
	assert_int_equal(mkdir(sdir, 0755), 0);
	snprintf(real, sizeof(real), "%s/real", sdir);
	snprintf(link, sizeof(link), "%s/link", sdir);
	assert_int_equal(symlink(outsock, link), 0);	/* absolute: outside the root if followed naively */
	snprintf(file, sizeof(file), "%s/file", outside);
	close(open(file, O_CREAT | O_WRONLY, 0600));

	enum { HEALTHY, DOTDOT, SYMLINK, CHROOT_OK, OWNER, HUGE, BADPTR, NOTSOCK, DYNTLS, N };
	struct app apps[N];
	const char *needle[N] = { NULL, "'..'", "does not resolve inside", NULL, "uid 12345", "length",
				  "unreadable", "not a socket", "dynamic TLS" };
	snprintf(dotdot, sizeof(dotdot), "%s/../%s/essock", outside, strrchr(outside, '/') + 1);
	const char *base[] = { "--threads", "1", "--publish-delay-ms", "100", "--slot-ms", "20" };
#define ARGS(...) (const char *const[]){ base[0], base[1], base[2], base[3], base[4], base[5], __VA_ARGS__, NULL }
	app_start(&apps[HEALTHY], NULL, NULL, ARGS("--service", "healthy"));
	app_start(&apps[DOTDOT], NULL, NULL, ARGS("--publish-path", dotdot));
	app_start(&apps[SYMLINK], "/s/other", NULL, ARGS("--chroot", root, "--publish-path", "/s/link"));
	app_start(&apps[CHROOT_OK], "/s/real", NULL, ARGS("--chroot", root, "--service", "chrooted"));
	assert_true(strlen(real) >= 108);	/* only reachable as /proc/self/fd/N */
	app_start(&apps[OWNER], NULL, NULL, ARGS("--sock-owner", "12345"));
	app_start(&apps[HUGE], NULL, NULL, ARGS("--storage", "huge-length"));
	app_start(&apps[BADPTR], NULL, NULL, ARGS("--storage", "bad-pointer"));
	app_start(&apps[NOTSOCK], NULL, NULL, ARGS("--publish-path", file));
	app_start(&apps[DYNTLS], NULL, "glibc.rtld.optional_static_tls=0", ARGS("--service", "dyn"));
#undef ARGS
	for (int i = 0; i < N; i++)
		seed_mappings(c, apps[i].pid);
	struct run r = { calloc(MAX_SAMPLES, sizeof(struct sample)), 0 };
	/* Long enough for several socket retries (1 s) and storage polls. */
	drive(c, apps, N, 2500, &r);
	drain(c);
	dump_warnings(lb);
	for (int i = 0; i < N; i++) {
		unsigned w = warnings(lb, apps[i].pid, NULL);
		if (needle[i]) {
			assert_int_equal(w, 1);
			assert_int_equal(warnings(lb, apps[i].pid, needle[i]), 1);
		} else {
			assert_int_equal(w, 0);
		}
	}
	/* The healthy agents (one through a chroot and a > 108-byte host path) got registration and counts. */
	static struct dgram d[20000];
	for (int i = HEALTHY; i <= CHROOT_OK; i += CHROOT_OK - HEALTHY) {
		unsigned nd = read_dgrams(apps[i].dir, d, 20000);
		assert_true(nd >= 2);
		assert_registration(&d[0], CORRELATE_DEFAULT_DELAY_MS);
	}
	/* Nothing reached the socket outside the chroot, nor the refused ones. */
	char buf[64];
	assert_int_equal(recv(outfd, buf, sizeof(buf), 0), -1);
	for (int i = DOTDOT; i < N; i++)
		if (i != CHROOT_OK)
			assert_int_equal(registrations_in(apps[i].dir), 0);
	/* The dynamic-TLS process is never correlated. */
	for (unsigned i = 0; i < r.n; i++)
		if (r.s[i].tid == apps[DYNTLS].tids[0])
			assert_int_equal(r.s[i].k, -1);
	struct correlate_stats st;
	correlate_stats(c, &st);
	assert_int_equal(st.counts_dropped, 0);
	print_message("hostile: %llu samples, %llu correlated, %llu registrations, %llu counts sent\n",
		      (unsigned long long)st.samples, (unsigned long long)st.samples_correlated,
		      (unsigned long long)st.registrations, (unsigned long long)st.counts_sent);
	for (int i = 0; i < N; i++) {
		correlate_on_process_exit(c, apps[i].pid);
		app_stop(&apps[i], SIGTERM);
	}
	close(outfd);
	rm_rf(outside);
	rm_rf(root);
	free(r.s);
	correlate_free(c);
	free(lb);
}

/* A helper that seizes tid (and with interrupt, stops it), tells us through the pipe, and waits to be killed. */
static pid_t tracer_helper(pid_t tid, int interrupt, const int pipefd[2])
{
	pid_t h = fork();
	assert_true(h >= 0);
	if (h == 0) {
		int status;
		char ok = 1;
		if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0)
			_exit(1);
		if (interrupt && (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 ||
				  waitpid(tid, &status, __WALL) != tid || !WIFSTOPPED(status)))
			_exit(2);
		if (write(pipefd[1], &ok, 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	char ok;
	assert_int_equal(read(pipefd[0], &ok, 1), 1);
	return h;
}

static unsigned sched_lines_of(const char *dir, pid_t tid)
{
	struct sched_entry *e;
	unsigned n = read_sched(dir, &e), count = 0;
	for (unsigned i = 0; i < n; i++)
		count += e[i].tid == tid;
	free(e);
	return count;
}

/*
 * A thread that someone else already traces cannot be seized: logged once, skipped, the others work. A
 * tracer killed while its tracee is stopped leaves it running (PTRACE_SEIZE semantics) — the guarantee the
 * library relies on if hostprof is killed in the middle of a thread-pointer read.
 */
static void test_ptrace_cases(void **state)
{
	(void)state;
	struct logbook *lb = calloc(1, sizeof(*lb));
	struct correlate *c = new_correlate(lb);
	struct app a;
	const char *args[] = { "--threads", "2", "--publish-delay-ms", "0", NULL };
	app_start(&a, NULL, NULL, args);
	assert_true(a.ntids == 2);
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t holder = tracer_helper(a.tids[0], 0, p);
	seed_mappings(c, a.pid);
	assert_true(wait_ready(c, 2000));
	struct run r = { calloc(MAX_SAMPLES, sizeof(struct sample)), 0 };
	drive(c, &a, 1, 400, &r);
	unsigned ok0 = 0, ok1 = 0;
	for (unsigned i = 0; i < r.n; i++) {
		ok0 += r.s[i].tid == a.tids[0] && r.s[i].k >= 0;
		ok1 += r.s[i].tid == a.tids[1] && r.s[i].k >= 0;
	}
	assert_int_equal(ok0, 0);
	assert_true(ok1 > 0);
	assert_int_equal(warnings(lb, a.pid, "cannot be traced"), 1);
	assert_int_equal(warnings(lb, a.pid, NULL), 1);
	struct correlate_stats st;
	correlate_stats(c, &st);
	assert_int_equal(st.thread_trace_failures, 1);
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);

	/* Kill a tracer while the tracee is stopped in a ptrace stop. */
	pid_t stopper = tracer_helper(a.tids[1], 1, p);
	char s = '?';
	for (int i = 0; i < 100 && (s = thread_state(a.pid, a.tids[1])) != 't'; i++)
		sleep_ms(2);
	assert_int_equal(s, 't');
	unsigned before = sched_lines_of(a.dir, a.tids[1]);
	sleep_ms(50);
	assert_int_equal(sched_lines_of(a.dir, a.tids[1]), before);	/* really stopped */
	kill(stopper, SIGKILL);
	waitpid(stopper, NULL, 0);
	sleep_ms(100);
	assert_true(thread_state(a.pid, a.tids[1]) != 't');
	assert_true(sched_lines_of(a.dir, a.tids[1]) > before + 3);	/* running again, switching every 10 ms */

	close(p[0]);
	close(p[1]);
	free(r.s);
	correlate_on_process_exit(c, a.pid);
	app_stop(&a, SIGTERM);
	correlate_free(c);
	free(lb);
}

/* The ELF side alone: the fixture library resolves; other files are refused with a reason. */
static void test_agent_elf(void **state)
{
	(void)state;
	char lib[PATH_MAX], why[256] = "";
	fixture("elastic-jvmti-linux-x86_64.so", lib, sizeof(lib));
	int fd = open(lib, O_RDONLY);
	assert_true(fd >= 0);
	struct corr_agent_elf e;
	assert_int_equal(corr_agent_elf_resolve(fd, &e, why, sizeof(why)), 0);
	uint64_t v, size;
	assert_int_equal(corr_elf_symbol(fd, "elastic_apm_profiling_correlation_process_storage_v1", &v, &size), 0);
	assert_int_equal(e.storage_va, v);
	assert_int_equal(size, 8);
	assert_true(e.tlsdesc_va != 0 && e.tlsdesc_va % 8 == 0);
	assert_int_equal(corr_elf_symbol(fd, "fake_apm_set_context", &v, NULL), 0);
	assert_int_equal(corr_elf_symbol(fd, "no_such_symbol", &v, NULL), -ENOENT);
	close(fd);
	fd = open("/proc/self/exe", O_RDONLY);
	assert_int_equal(corr_agent_elf_resolve(fd, &e, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "elastic_apm_profiling_correlation_process_storage_v1"));
	close(fd);
	fd = open("/proc/self/status", O_RDONLY);
	assert_int_equal(corr_agent_elf_resolve(fd, &e, why, sizeof(why)), -ENOEXEC);
	close(fd);
}

/* ---------- the reading half on another thread; the end of a run ---------- */

struct ready_log {
	pid_t pids[8];
	unsigned n;
};

static void note_ready(void *arg, pid_t pid)
{
	struct ready_log *r = arg;
	if (r->n < 8)
		r->pids[r->n++] = pid;
}

#define READS 60

struct reader_job {
	struct correlate_reader *reader;
	const struct app *app;
	struct correlate_read reads[READS];
	pid_t tids[READS];
};

/* What a fast-lane reader does: read contexts on its own thread (including the ptrace stops). */
static void *read_on_thread(void *arg)
{
	struct reader_job *j = arg;
	for (unsigned i = 0; i < READS; i++) {
		j->tids[i] = j->app->tids[i % j->app->ntids];
		correlate_reader_read(j->reader, j->app->pid, j->tids[i], &j->reads[i]);
		sleep_ms(2);
	}
	correlate_reader_thread_exit(j->reader);
	return NULL;
}

static unsigned count_registrations_in(const char *dir)
{
	struct dgram *d = calloc(4096, sizeof(*d));
	unsigned n = count_registrations(d, read_dgrams(dir, d, 4096));
	free(d);
	return n;
}

/* Counts carried by the correlation messages the app received. */
static uint64_t received_counts(const char *dir)
{
	struct dgram *d = calloc(4096, sizeof(*d));
	unsigned n = read_dgrams(dir, d, 4096);
	uint64_t counts = 0;
	for (unsigned i = 0; i < n; i++)
		if (d[i].len == 46 && u16at(d[i].b) == 1)
			counts += u16at(d[i].b + 44);
	free(d);
	return counts;
}

/*
 * Contexts read on another thread (as the fast lane does) and counted later on the handle's thread with
 * correlate_on_read(); the ready callback names the process once. At the end, correlate_finish() sends every
 * pending count although they span more datagrams than the agent's queue holds (it drains it every 20 ms):
 * nothing is dropped. With the agent stopped (its queue stays full), it gives up within its budget and counts
 * what it could not send.
 */
static void test_reader_thread_and_finish(void **state)
{
	(void)state;
	struct logbook *lb = calloc(1, sizeof(*lb));
	struct ready_log ready = { .n = 0 };
	struct correlate_options o = { .host_id = HOST_ID, .log = capture_log, .log_arg = lb, .ready = note_ready,
				       .ready_arg = &ready, .flush_interval_ms = 60000 };
	struct correlate *c;
	assert_int_equal(correlate_new(&o, &c), 0);
	struct app a;
	const char *args[] = { "--threads", "2", "--publish-delay-ms", "0", NULL };
	app_start(&a, NULL, NULL, args);
	seed_mappings(c, a.pid);
	assert_true(wait_ready(c, 2000));
	assert_int_equal(ready.n, 1);
	assert_int_equal(ready.pids[0], a.pid);
	assert_true(correlate_is_ready(c, a.pid));
	assert_false(correlate_is_ready(c, getpid()));
	/* Connected and registered (the flush interval is long: nothing is sent before correlate_finish()). */
	for (int i = 0; i < 100 && received_counts(a.dir) == 0 && count_registrations_in(a.dir) == 0; i++) {
		correlate_tick(c, now_ns());
		sleep_ms(10);
	}
	struct reader_job *j = calloc(1, sizeof(*j));
	j->reader = correlate_get_reader(c);
	j->app = &a;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, read_on_thread, j), 0);
	pthread_join(t, NULL);
	unsigned active = 0;
	for (unsigned i = 0; i < READS; i++) {
		uint8_t sid[16];
		struct correlate_context cx;
		stack_id((int)i, sid); /* a key per read: more datagrams than the agent's queue holds */
		int r = correlate_on_read(c, a.pid, j->tids[i], &j->reads[i], sid, now_ns(), &cx);
		assert_int_equal(r, j->reads[i].status == CORRELATE_READ_ACTIVE);
		if (r == 1) {
			assert_true(decode_txn(&cx) >= 0);
			active++;
		}
	}
	assert_true(active >= READS / 2);
	struct correlate_stats st;
	correlate_stats(c, &st);
	assert_int_equal(st.counts_pending, active);
	assert_int_equal(st.threads_traced, a.ntids);
	assert_int_equal(correlate_finish(c, 1000), 0);
	sleep_ms(60);
	assert_int_equal(received_counts(a.dir), active);
	correlate_stats(c, &st);
	assert_int_equal(st.counts_pending, 0);
	assert_int_equal(st.counts_unsent_at_exit, 0);

	/* The agent stopped: its queue fills, and what is left after the budget is counted, not lost. */
	for (unsigned i = 0; i < 40; i++) {
		uint8_t sid[16];
		struct correlate_read rd;
		stack_id((int)(100 + i), sid);
		correlate_reader_read(j->reader, a.pid, a.tids[0], &rd);
		rd.status = CORRELATE_READ_ACTIVE; /* whatever the thread runs now: a transaction's counts */
		rd.transaction_id[0] = 0xc0;
		rd.trace_id[0] = 0xa0;
		correlate_on_read(c, a.pid, a.tids[0], &rd, sid, now_ns(), NULL);
	}
	kill(a.pid, SIGSTOP);
	uint64_t t0 = now_ns();
	uint64_t unsent = correlate_finish(c, 100);
	assert_true(now_ns() - t0 < 400 * 1000000ull);
	kill(a.pid, SIGCONT);
	correlate_stats(c, &st);
	assert_true(unsent > 0 && unsent <= 40);
	assert_int_equal(st.counts_unsent_at_exit, unsent);
	assert_true(warnings(lb, a.pid, "unsent at the end") == 1);
	free(j);
	correlate_on_process_exit(c, a.pid);
	app_stop(&a, SIGTERM);
	correlate_free(c);
	free(lb);
}

/* ---------- the exec race ---------- */

#define NOBODY 65534
#define EXEC_RACE_REPS 25	/* per stage */

/* The effective uid in /proc/PID/status, or -1. */
static int status_euid(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	int euid = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %*d %d", &euid) == 1)
			break;
	if (f)
		fclose(f);
	return euid;
}

struct exec_race {
	pid_t pid;
	int when;	/* enum corr_stage to exec at, -1: never */
	int fired;	/* the process had exec'd the setuid program when the hook returned */
	int noticed;	/* the library logged that the process runs a new program */
};

/* The stage hook: at the chosen stage, the app execs the setuid-root program and is root before we go on. */
static void exec_at_stage(void *arg, pid_t pid, enum corr_stage st)
{
	struct exec_race *r = arg;
	if (pid != r->pid || (int)st != r->when || r->fired)
		return;
	kill(pid, SIGUSR2);
	for (int i = 0; i < 3000 && status_euid(pid) != 0; i++)
		sleep_ms(1);
	r->fired = status_euid(pid) == 0;
}

/* A copy of sleep(1), setuid root, that nobody may run: the stand-in for passwd kept waiting on its input. */
static void make_setuid_program(char *dir, size_t dirlen, char *prog, size_t proglen)
{
	char cmd[5 * PATH_MAX];
	make_tmpdir(dir, dirlen, "suid");
	snprintf(prog, proglen, "%s/suid-sleep", dir);
	snprintf(cmd, sizeof(cmd), "cp /bin/sleep '%s' && chown root:root '%s' && chmod 4755 '%s' && chmod 755 '%s'",
		 prog, prog, prog, dir);
	assert_int_equal(system(cmd), 0);
}

/* A root-owned datagram socket in a 0700 root directory: only root can reach it. */
static int bind_root_socket(char *dir, size_t dirlen, char *path, size_t pathlen)
{
	make_tmpdir(dir, dirlen, "rootsock");
	assert_int_equal(chmod(dir, 0700), 0);
	snprintf(path, pathlen, "%s/sock", dir);
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	assert_true(strlen(path) < sizeof(addr.sun_path));
	strcpy(addr.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	return fd;
}

static unsigned drain_count(int fd)
{
	uint8_t buf[2048];
	unsigned n = 0;
	while (recv(fd, buf, sizeof(buf), 0) >= 0)
		n++;
	return n;
}

/* Registration datagrams (type 2) the app's receiver logged. */
static unsigned app_registrations(const struct app *a)
{
	char path[PATH_MAX + 16], line[4096];
	snprintf(path, sizeof(path), "%s/dgram.log", a->dir);
	FILE *f = fopen(path, "r");
	unsigned n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		const char *hex = strchr(line + 2, ' ');
		n += hex && strncmp(hex + 1, "0200", 4) == 0;
	}
	if (f)
		fclose(f);
	return n;
}

/*
 * One run: an app running as nobody publishes publish_path; the library is ticked (the clock jumped ahead so
 * every retry is due at once) as a sampler that has not handled the exec record yet would. Returns the
 * registrations the library says it sent.
 */
static uint64_t race_once(struct exec_race *r, struct app *a, const char *publish, const char *prog)
{
	struct logbook *lb = calloc(1, sizeof(*lb));
	struct correlate *c = new_correlate(lb);
	/* publish NULL: the app's own socket (bound by the app as nobody). */
	const char *args[] = { "--threads", "1", "--publish-delay-ms", "0", "--exec-on-usr2", prog,
			       publish ? "--publish-path" : NULL, publish, NULL };
	app_start_as(a, NOBODY, NULL, NULL, args);
	r->pid = a->pid;
	r->fired = 0;
	corr_set_stage_hook(c, exec_at_stage, r);
	seed_mappings(c, a->pid);
	uint64_t t = now_ns();
	struct correlate_stats st = { 0 };
	for (int i = 0, after = 0; i < 200 && after < 4; i++, t += 1100 * 1000000ull) {
		correlate_tick(c, t);
		correlate_stats(c, &st);
		after += r->fired || (r->when < 0 && st.registrations);
		sleep_ms(2);
	}
	for (unsigned i = 0; i < lb->n; i++)
		r->noticed |= lb->lines[i].pid == a->pid && strstr(lb->lines[i].msg, "runs a new program (exec)");
	if (r->when >= 0 && !r->fired)
		dump_warnings(lb);
	correlate_free(c);
	free(lb);
	return st.registrations;
}

/*
 * The process publishes the path of a socket only root can reach, then execs a setuid-root program exactly
 * after its storage was read, or right before the connect; the exec record is never handled. Nothing may
 * arrive, in any run. The positive control: without the exec, the process's own socket (its user's) gets the
 * registration.
 */
static void test_exec_race(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();	/* needs root: a setuid-root program, a root socket, an app run as nobody */
	char suid_dir[PATH_MAX], prog[PATH_MAX + 16], sock_dir[PATH_MAX], sock[PATH_MAX + 16];
	make_setuid_program(suid_dir, sizeof(suid_dir), prog, sizeof(prog));
	int rootfd = bind_root_socket(sock_dir, sizeof(sock_dir), sock, sizeof(sock));
	static const int stages[] = { CORR_STAGE_STORAGE_READ, CORR_STAGE_CONNECT };
	unsigned delivered = 0, runs = 0, fired = 0, regs = 0, noticed = 0;
	for (unsigned s = 0; s < 2; s++) {
		for (unsigned i = 0; i < EXEC_RACE_REPS; i++) {
			struct exec_race r = { .when = stages[s] };
			struct app a;
			regs += (unsigned)race_once(&r, &a, sock, prog);
			fired += r.fired;
			noticed += r.noticed;
			runs++;
			sleep_ms(30);	/* a datagram sent would be queued by now */
			delivered += drain_count(rootfd);
			app_stop(&a, SIGKILL);
		}
	}
	print_message("exec race: %u of %u runs delivered to the root socket (%u registrations sent, exec "
		      "done at the stage in %u runs, noticed in %u)\n", delivered, runs, regs, fired, noticed);
	assert_int_equal(fired, runs);
	assert_int_equal(noticed, runs);	/* refused because of the exec, not by chance */
	assert_int_equal(delivered, 0);
	assert_int_equal(regs, 0);
	/* Positive control: no exec, the app's own socket (owned by nobody) is registered with. */
	struct exec_race r = { .when = -1 };
	struct app a;
	assert_true(race_once(&r, &a, NULL, prog) >= 1);
	unsigned received = 0;
	for (int i = 0; i < 100 && !(received = app_registrations(&a)); i++)
		sleep_ms(10);
	print_message("exec race, control: %u registration(s) received by the app's own socket\n", received);
	assert_true(received >= 1);
	app_stop(&a, SIGKILL);
	close(rootfd);
	rm_rf(sock_dir);
	rm_rf(suid_dir);
}

/* An argument runs only the tests whose names match it (cmocka's pattern: '*' and '?'). */
int main(int argc, char **argv)
{
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reader_thread_and_finish),
		cmocka_unit_test(test_agent_elf),
		cmocka_unit_test(test_end_to_end),
		cmocka_unit_test(test_agent_restart),
		cmocka_unit_test(test_hostile_agents),
		cmocka_unit_test(test_ptrace_cases),
		cmocka_unit_test(test_exec_race),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
