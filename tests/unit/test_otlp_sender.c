/*
 * The OTLP sender against a scripted receiver (tests/lib/otlp_receiver.py, a real HTTP server on 127.0.0.1):
 * requests arrive whole, gzip'd, in order, with their headers; nothing is lost while the receiver is down or
 * across a restart of the sender; a 400 drops its request and is said once; Retry-After is honoured; the spool
 * keeps its bound, the oldest going first. What the requests carry is the encoder's (test_otlp, and the real
 * collector in the integration tests).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/export/otlp_sender.h"
#include "tests/lib/testlib.h"

struct log_capture {
	pthread_mutex_t lock;
	char text[16384];
	size_t len;
};

static void capture(void *ctx, enum log_level level, const char *msg)
{
	struct log_capture *c = ctx;
	(void)level;
	pthread_mutex_lock(&c->lock);
	int n = snprintf(c->text + c->len, sizeof(c->text) - c->len, "%s\n", msg);
	if (n > 0 && c->len + (size_t)n < sizeof(c->text))
		c->len += (size_t)n;
	pthread_mutex_unlock(&c->lock);
}

static unsigned count_in_log(struct log_capture *c, const char *needle)
{
	unsigned n = 0;
	pthread_mutex_lock(&c->lock);
	for (const char *p = c->text; (p = strstr(p, needle)); p++)
		n++;
	pthread_mutex_unlock(&c->lock);
	return n;
}

struct receiver {
	pid_t pid;
	int port;
	char dir[512];
};

/* A receiver answering script, recording into dir (on port, or an ephemeral one if 0). */
static void start_receiver(struct receiver *r, const char *dir, const char *script, int port)
{
	char path[600], portarg[16];
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	snprintf(path, sizeof(path), "%s/port", dir);
	unlink(path);
	snprintf(portarg, sizeof(portarg), "%d", port);
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (r->pid == 0) {
		execlp("python3", "python3", "tests/lib/otlp_receiver.py", dir, script, portarg, (char *)NULL);
		_exit(127);
	}
	FILE *f = NULL;
	for (int i = 0; i < 200 && !(f = fopen(path, "re")); i++)
		usleep(50000);
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &r->port), 1);
	fclose(f);
}

static void stop_receiver(struct receiver *r)
{
	kill(r->pid, SIGTERM);
	waitpid(r->pid, NULL, 0);
}

static unsigned posts(const char *dir)
{
	unsigned n = 0;
	char path[600];
	for (;; n++) {
		snprintf(path, sizeof(path), "%s/%04u.body", dir, n);
		if (access(path, F_OK) != 0)
			return n;
	}
}

/* Post n's body equals want, and its meta has every line of lines. */
static void check_post(const char *dir, unsigned n, const char *want, const char *const *lines)
{
	char path[600], buf[4096];
	snprintf(path, sizeof(path), "%s/%04u.body", dir, n);
	FILE *f = fopen(path, "re");
	assert_non_null(f);
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	assert_string_equal(buf, want);
	snprintf(path, sizeof(path), "%s/%04u.meta", dir, n);
	f = fopen(path, "re");
	assert_non_null(f);
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	for (; lines && *lines; lines++) {
		if (!strstr(buf, *lines))
			fail_msg("post %u lacks \"%s\": %s", n, *lines, buf);
	}
}

static double post_time(const char *dir, unsigned n)
{
	char path[600];
	double t = 0;
	snprintf(path, sizeof(path), "%s/%04u.meta", dir, n);
	FILE *f = fopen(path, "re");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "path %*s time %lf", &t), 1);
	fclose(f);
	return t;
}

/* A sender whose retries start at retry_ms and grow to 4 times that. */
static struct otlp_sender *sender_retrying(int port, const char *spool, struct log_capture *log, uint64_t spool_max,
					   unsigned retry_ms)
{
	static char endpoint[64];
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d/", port);
	struct otlp_sender_options o = { .endpoint = endpoint, .headers = { "Authorization=Bearer s3cr3t" },
					 .nheaders = 1, .timeout_ms = 2000, .spool_dir = spool, .spool_max = spool_max,
					 .retry_initial_ms = retry_ms, .retry_max_ms = 4 * retry_ms, .dev_version = "2",
					 .log = { .write = capture, .ctx = log } };
	struct otlp_sender *s = NULL;
	assert_int_equal(otlp_sender_new(&o, &s), 0);
	return s;
}

static struct otlp_sender *sender(int port, const char *spool, struct log_capture *log, uint64_t spool_max)
{
	return sender_retrying(port, spool, log, spool_max, 50);
}

static void submit(struct otlp_sender *s, const char *text)
{
	assert_int_equal(otlp_sender_submit(s, (uint8_t *)strdup(text), strlen(text)), 0);
}

static void test_delivered_in_order_with_headers(void **state)
{
	(void)state;
	struct log_capture log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	char *dir = test_mkdtemp();
	struct receiver r;
	start_receiver(&r, dir, "200", 0);
	struct otlp_sender *s = sender(r.port, NULL, &log, 0);
	submit(s, "first");
	submit(s, "second");
	submit(s, "third");
	assert_int_equal(otlp_sender_flush(s, 20000), 0);
	struct otlp_sender_stats st;
	otlp_sender_get_stats(s, &st);
	otlp_sender_free(s);
	stop_receiver(&r);
	const char *lines[] = { "path /v1development/profiles", "header content-encoding: gzip",
				"header content-type: application/x-protobuf", "header authorization: Bearer s3cr3t",
				"header otlp-profiles-development-version: 2", NULL };
	assert_int_equal(posts(dir), 3);
	check_post(dir, 0, "first", lines);
	check_post(dir, 1, "second", lines);
	check_post(dir, 2, "third", lines);
	assert_int_equal(st.sent, 3);
	assert_int_equal(st.pending, 0);
	assert_int_equal(count_in_log(&log, "s3cr3t"), 0);
	test_rmdir_rf(dir);
	free(dir);
}

/* The receiver down, then back where it was: every request arrives, in order, none twice. */
static void test_down_then_back_none_lost(void **state)
{
	(void)state;
	struct log_capture log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	char *dir = test_mkdtemp(), spool[600];
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	struct receiver r;
	start_receiver(&r, dir, "200", 0);
	stop_receiver(&r);
	struct otlp_sender *s = sender(r.port, spool, &log, 0);
	submit(s, "one");
	submit(s, "two");
	submit(s, "three");
	assert_int_equal(otlp_sender_flush(s, 300), 3);
	assert_int_equal(count_in_log(&log, "cannot send to http://127.0.0.1"), 1);	/* once per streak */
	start_receiver(&r, dir, "200", r.port);
	assert_int_equal(otlp_sender_flush(s, 20000), 0);
	otlp_sender_free(s);
	stop_receiver(&r);
	assert_int_equal(posts(dir), 3);
	check_post(dir, 0, "one", NULL);
	check_post(dir, 1, "two", NULL);
	check_post(dir, 2, "three", NULL);
	assert_int_equal(count_in_log(&log, "takes profiles again"), 1);
	test_rmdir_rf(dir);
	free(dir);
}

/* Requests spooled by a sender that stopped are sent by the next one, first. */
static void test_spool_outlives_the_sender(void **state)
{
	(void)state;
	struct log_capture log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	char *dir = test_mkdtemp(), spool[600];
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	struct receiver r;
	start_receiver(&r, dir, "200", 0);
	stop_receiver(&r);
	struct otlp_sender *s = sender(r.port, spool, &log, 0);
	submit(s, "before the restart");
	submit(s, "also before");
	otlp_sender_free(s);
	assert_int_equal(test_run("test $(ls %s | wc -l) -eq 2", spool), 0);
	start_receiver(&r, dir, "200", r.port);
	s = sender(r.port, spool, &log, 0);
	submit(s, "after");
	assert_int_equal(otlp_sender_flush(s, 20000), 0);
	otlp_sender_free(s);
	stop_receiver(&r);
	assert_int_equal(posts(dir), 3);
	check_post(dir, 0, "before the restart", NULL);
	check_post(dir, 1, "also before", NULL);
	check_post(dir, 2, "after", NULL);
	assert_int_equal(test_run("test $(ls %s | wc -l) -eq 0", spool), 0);
	assert_int_equal(count_in_log(&log, "waiting in"), 1);
	test_rmdir_rf(dir);
	free(dir);
}

/* A 400: that request dropped, said once with the receiver's message; the next ones go on. */
static void test_refused_dropped_and_said_once(void **state)
{
	(void)state;
	struct log_capture log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	char *dir = test_mkdtemp();
	struct receiver r;
	start_receiver(&r, dir, "400:profile has no samples,400:profile has no samples,200", 0);
	struct otlp_sender *s = sender(r.port, NULL, &log, 0);
	submit(s, "bad");
	submit(s, "bad again");
	submit(s, "good");
	assert_int_equal(otlp_sender_flush(s, 20000), 0);
	struct otlp_sender_stats st;
	otlp_sender_get_stats(s, &st);
	otlp_sender_free(s);
	stop_receiver(&r);
	assert_int_equal(posts(dir), 3);	/* each tried once: a 400 is not retried */
	check_post(dir, 2, "good", NULL);
	assert_int_equal(st.refused, 2);
	assert_int_equal(st.sent, 1);
	assert_int_equal(count_in_log(&log, "HTTP 400: profile has no samples"), 1);
	test_rmdir_rf(dir);
	free(dir);
}

/* 503 with Retry-After: 1 s: the next try waits that second, not the 50 ms backoff. */
static void test_retry_after_honoured(void **state)
{
	(void)state;
	struct log_capture log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	char *dir = test_mkdtemp();
	struct receiver r;
	start_receiver(&r, dir, "503:1,200", 0);
	char endpoint[64];
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", r.port);
	struct otlp_sender_options so = { .endpoint = endpoint, .retry_initial_ms = 50, .retry_max_ms = 5000,
					  .log = { .write = capture, .ctx = &log } };
	struct otlp_sender *s = NULL;
	assert_int_equal(otlp_sender_new(&so, &s), 0);
	submit(s, "later");
	assert_int_equal(otlp_sender_flush(s, 20000), 0);
	otlp_sender_free(s);
	stop_receiver(&r);
	assert_int_equal(posts(dir), 2);
	check_post(dir, 1, "later", NULL);
	double gap = post_time(dir, 1) - post_time(dir, 0);
	fprintf(stderr, "retry after 503 with Retry-After 1: %.3f s later\n", gap);
	assert_true(gap >= 0.95);
	test_rmdir_rf(dir);
	free(dir);
}

/* Past the spool's bound the oldest request goes, said; the others arrive once the receiver is up. */
static void test_spool_bound_drops_oldest(void **state)
{
	(void)state;
	struct log_capture log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	char *dir = test_mkdtemp(), spool[600], big[3][1001];
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	struct receiver r;
	start_receiver(&r, dir, "200", 0);
	stop_receiver(&r);
	/* The request being sent is never dropped for room (otlp_spool.h): the first is let fail once, so that the
	 * others come during its 1 s backoff, when none is in flight, and the oldest goes. */
	struct otlp_sender *s = sender_retrying(r.port, spool, &log, 2500, 1000);
	struct otlp_sender_stats st;
	for (int i = 0; i < 3; i++) {
		memset(big[i], 'a' + i, 1000);
		big[i][1000] = '\0';
		submit(s, big[i]);
		for (int wait = 0; i == 0 && wait < 1000; wait++) {
			otlp_sender_get_stats(s, &st);
			if (st.retries)
				break;
			usleep(1000);
		}
	}
	otlp_sender_get_stats(s, &st);
	assert_int_equal(st.spool_dropped, 1);
	assert_int_equal(st.pending, 2);
	assert_int_equal(count_in_log(&log, "spool full"), 1);
	start_receiver(&r, dir, "200", r.port);
	assert_int_equal(otlp_sender_flush(s, 20000), 0);
	otlp_sender_free(s);
	stop_receiver(&r);
	assert_int_equal(posts(dir), 2);
	check_post(dir, 0, big[1], NULL);
	check_post(dir, 1, big[2], NULL);
	test_rmdir_rf(dir);
	free(dir);
}

/* A receiver that takes the connection and never answers: stopping the sender ends the request in flight at
 * once, not after its 30 s timeout, and the request stays in the spool for the next start. */
static void test_stop_ends_a_request_in_flight(void **state)
{
	(void)state;
	struct log_capture log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	char *dir = test_mkdtemp(), spool[600], endpoint[64];
	snprintf(spool, sizeof(spool), "%s/spool", dir);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 8), 0);	/* the kernel completes connections; nobody answers */
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", ntohs(a.sin_port));
	struct otlp_sender_options o = { .endpoint = endpoint, .timeout_ms = 30000, .spool_dir = spool,
					 .log = { .write = capture, .ctx = &log } };
	struct otlp_sender *s = NULL;
	assert_int_equal(otlp_sender_new(&o, &s), 0);
	submit(s, "never answered");
	assert_int_equal(otlp_sender_flush(s, 300), 1);	/* in flight */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	otlp_sender_free(s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	fprintf(stderr, "stopped with a request in flight in %.3f s (its timeout: 30 s)\n", took);
	assert_true(took < 10.0);
	close(fd);
	assert_int_equal(test_run("test $(ls %s | wc -l) -eq 1", spool), 0);
	test_rmdir_rf(dir);
	free(dir);
}

static void test_bad_settings_refused(void **state)
{
	(void)state;
	struct otlp_sender *s = NULL;
	struct otlp_sender_options o = { .endpoint = "ftp://127.0.0.1:1" };
	assert_int_equal(otlp_sender_new(&o, &s), -EINVAL);
	o = (struct otlp_sender_options){ .endpoint = "http://127.0.0.1:1", .headers = { "no equals sign" },
					  .nheaders = 1 };
	assert_int_equal(otlp_sender_new(&o, &s), -EINVAL);
	o.headers[0] = "X-Evil=a\r\nHost: elsewhere";
	assert_int_equal(otlp_sender_new(&o, &s), -EINVAL);
	assert_null(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delivered_in_order_with_headers),
		cmocka_unit_test(test_down_then_back_none_lost),
		cmocka_unit_test(test_spool_outlives_the_sender),
		cmocka_unit_test(test_refused_dropped_and_said_once),
		cmocka_unit_test(test_retry_after_honoured),
		cmocka_unit_test(test_spool_bound_drops_oldest),
		cmocka_unit_test(test_stop_ends_a_request_in_flight),
		cmocka_unit_test(test_bad_settings_refused),
	};
	return cmocka_run_group_tests_name("otlp sender", tests, NULL, NULL);
}
