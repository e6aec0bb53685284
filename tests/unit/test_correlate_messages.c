/*
 * Unit tests for correlate/ pieces that need no other process: message encoding (the byte layouts of
 * man/hostprof-correlation.7, MESSAGES), aggregation and splitting at 32767, EAGAIN retention, the id map,
 * agent-library path matching, UTF-8 and process-storage validation (read from our own /proc/self/mem), and the
 * socket safety checks that can be exercised in our own root.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "correlate/correlate_impl.h"

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;
	for (; hex[0] && hex[1] && n < cap; hex += 2) {
		if (hex[0] == ' ') {
			hex--;
			continue;
		}
		unsigned v;
		sscanf(hex, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

static void seq(uint8_t *b, size_t n, uint8_t first)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(first + i);
}

static void key_from_spec(struct corr_key *k)
{
	seq(k->trace_id, 16, 0x10);
	seq(k->transaction_id, 8, 0xb0);
	unhex("60b420bb3851d9d47acb933dbe70399b", k->stack_id, 16);
}

/* A correlation message for count 2, byte for byte as the Elastic agents decode it (hostprof-correlation.7). */
static void test_encode_correlation_vector(void **state)
{
	(void)state;
	uint8_t want[64], got[CORR_CORRELATION_LEN];
	size_t n = unhex("01000100 101112131415161718191a1b1c1d1e1f b0b1b2b3b4b5b6b7 "
			 "60b420bb3851d9d47acb933dbe70399b 0200", want, sizeof(want));
	assert_int_equal(n, 46);
	struct corr_key k;
	key_from_spec(&k);
	assert_int_equal(corr_encode_correlation(got, &k, 2), 46);
	assert_memory_equal(got, want, 46);
}

/* The same vector as registration v1 except the minor: we send the seed's minor 2. */
static void test_encode_registration_vector(void **state)
{
	(void)state;
	uint8_t want[64], got[CORR_DATAGRAM_MAX];
	size_t n = unhex("02000200 b2578702 0f000000 6d792d686f73746964c3a4c3b6c3bc", want, sizeof(want));
	const char *host = "my-hostid\xc3\xa4\xc3\xb6\xc3\xbc";
	ssize_t len = corr_encode_registration(got, sizeof(got), 42424242, host, strlen(host));
	assert_int_equal(len, n);
	assert_memory_equal(got, want, n);
	/* Empty host id: 12 bytes. */
	assert_int_equal(corr_encode_registration(got, sizeof(got), 1, "", 0), 12);
}

static void test_registration_fits_a_datagram(void **state)
{
	(void)state;
	uint8_t buf[CORR_DATAGRAM_MAX];
	char host[CORRELATE_HOST_ID_MAX + 2];
	memset(host, 'h', sizeof(host));
	assert_int_equal(corr_encode_registration(buf, sizeof(buf), 1, host, CORRELATE_HOST_ID_MAX), 1024);
	assert_int_equal(corr_encode_registration(buf, sizeof(buf), 1, host, CORRELATE_HOST_ID_MAX + 1), -EMSGSIZE);
	/* The public API refuses such a host id up front. */
	host[CORRELATE_HOST_ID_MAX + 1] = '\0';
	struct correlate_options o = { .host_id = host };
	struct correlate *c = NULL;
	assert_int_equal(correlate_new(&o, &c), -EINVAL);
	assert_null(c);
}

/* A fake socket: records messages, can refuse with an error after a number of sends. */
struct sink {
	uint8_t msgs[256][CORR_CORRELATION_LEN];
	unsigned n, fail_after;
	int err;
};

static int sink_send(void *arg, const void *buf, size_t len)
{
	struct sink *s = arg;
	assert_int_equal(len, CORR_CORRELATION_LEN);
	if (s->err && s->n >= s->fail_after)
		return s->err;
	assert_true(s->n < 256);
	memcpy(s->msgs[s->n++], buf, len);
	return 0;
}

static uint16_t msg_count(const uint8_t *m)
{
	uint16_t c;
	memcpy(&c, m + 44, 2);
	return c;
}

static int16_t msg_count_as_java(const uint8_t *m)
{
	int16_t c;
	memcpy(&c, m + 44, 2);
	return c;
}

/* Samples (st1, 2), (st2, 1), (st1, 1) aggregate to st1 × 3 and st2 × 1, first seen first. */
static void test_aggregation_spec_example(void **state)
{
	(void)state;
	struct corr_pending p = { .max = 100 };
	struct corr_key k1, k2;
	key_from_spec(&k1);
	k2 = k1;
	unhex("4c9326bb9805fa8f85882c12eae724ce", k2.stack_id, 16);
	assert_int_equal(corr_pending_add(&p, &k1, 1000), 0);
	assert_int_equal(corr_pending_add(&p, &k1, 2000), 0);
	assert_int_equal(corr_pending_add(&p, &k2, 3000), 0);
	assert_int_equal(corr_pending_add(&p, &k1, 4000), 0);
	assert_int_equal(p.n, 2);
	assert_int_equal(p.total, 4);
	struct sink s = { 0 };
	struct corr_flush_result r;
	uint64_t hist[CORRELATE_LATENCY_BUCKETS] = { 0 };
	assert_int_equal(corr_pending_flush(&p, sink_send, &s, 1000 + 12 * 1000000ull, hist, &r), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(r.messages, 2);
	assert_int_equal(r.counts, 4);
	assert_memory_equal(s.msgs[0] + 28, k1.stack_id, 16);
	assert_int_equal(msg_count(s.msgs[0]), 3);
	assert_memory_equal(s.msgs[1] + 28, k2.stack_id, 16);
	assert_int_equal(msg_count(s.msgs[1]), 1);
	assert_int_equal(p.n, 0);
	assert_int_equal(p.total, 0);
	/* Latency is measured from each key's oldest sample: 12 ms and ~12 ms, bucket 2 (10-15 ms). */
	assert_int_equal(hist[12 / CORRELATE_LATENCY_BUCKET_MS], 4);
	corr_pending_free(&p);
}

/* The Java agent reads count as signed 16 bits: 40000 must be 32767 + 7233, never one negative message. */
static void test_split_at_32767(void **state)
{
	(void)state;
	struct corr_pending p = { .max = 10 };
	struct corr_key k;
	key_from_spec(&k);
	for (int i = 0; i < 100000; i++)
		assert_int_equal(corr_pending_add(&p, &k, 5), 0);
	struct sink s = { 0 };
	struct corr_flush_result r;
	assert_int_equal(corr_pending_flush(&p, sink_send, &s, 10, NULL, &r), 0);
	assert_int_equal(s.n, 4);
	uint64_t sum = 0;
	for (unsigned i = 0; i < s.n; i++) {
		assert_true(msg_count_as_java(s.msgs[i]) > 0);
		assert_true(msg_count(s.msgs[i]) <= 32767);
		sum += msg_count(s.msgs[i]);
	}
	assert_int_equal(sum, 100000);
	assert_int_equal(msg_count(s.msgs[3]), 100000 - 3 * 32767);
	corr_pending_free(&p);
}

/* A full receiver queue keeps what was not sent; the next flush sends the oldest first. */
static void test_eagain_keeps_counts(void **state)
{
	(void)state;
	struct corr_pending p = { .max = 100 };
	struct corr_key k[20];
	for (int i = 0; i < 20; i++) {
		key_from_spec(&k[i]);
		k[i].stack_id[0] = (uint8_t)i;
		for (int j = 0; j <= i; j++)
			assert_int_equal(corr_pending_add(&p, &k[i], 100 + (uint64_t)i), 0);
	}
	assert_int_equal(p.total, 210);
	struct sink s = { .fail_after = 10, .err = -EAGAIN };
	struct corr_flush_result r;
	assert_int_equal(corr_pending_flush(&p, sink_send, &s, 1000, NULL, &r), -EAGAIN);
	assert_int_equal(r.messages, 10);
	assert_int_equal(p.n, 10);
	assert_int_equal(p.total, 210 - 55);
	/* New counts for an already-sent key and for a pending key aggregate normally. */
	assert_int_equal(corr_pending_add(&p, &k[0], 2000), 0);
	assert_int_equal(corr_pending_add(&p, &k[15], 2000), 0);
	s.err = 0;
	assert_int_equal(corr_pending_flush(&p, sink_send, &s, 3000, NULL, &r), 0);
	assert_int_equal(s.n, 21);
	assert_int_equal(s.msgs[10][28], 10);	/* resumed with the oldest unsent key */
	assert_int_equal(msg_count(s.msgs[15]), 17);
	assert_int_equal(s.msgs[20][28], 0);	/* the re-added key comes last */
	uint64_t sum = 0;
	for (unsigned i = 0; i < s.n; i++)
		sum += msg_count(s.msgs[i]);
	assert_int_equal(sum, 212);
	assert_int_equal(p.total, 0);
	corr_pending_free(&p);
}

static void test_pending_bound(void **state)
{
	(void)state;
	struct corr_pending p = { .max = 3 };
	struct corr_key k;
	key_from_spec(&k);
	for (int i = 0; i < 3; i++) {
		k.stack_id[0] = (uint8_t)i;
		assert_int_equal(corr_pending_add(&p, &k, 1), 0);
	}
	k.stack_id[0] = 9;
	assert_int_equal(corr_pending_add(&p, &k, 1), -ENOSPC);
	k.stack_id[0] = 1;
	assert_int_equal(corr_pending_add(&p, &k, 1), 0);	/* existing keys still count */
	assert_int_equal(corr_pending_clear(&p), 4);
	corr_pending_free(&p);
}

static void test_library_path(void **state)
{
	(void)state;
	assert_true(correlate_is_apm_library("/tmp/elastic-jvmti-linux-x86_64.so"));
	assert_true(correlate_is_apm_library(
		"/tmp/elastic-jvmti-linux-x64-0123456789abcdef0123456789abcdef-fedcba9876543210fedcba9876543210.so"));
	assert_true(correlate_is_apm_library("/a/b/elastic-jvmti-linux-musl-arm64.so (deleted)"));
	assert_true(correlate_is_apm_library("/elastic-jvmti-linux-.so"));
	assert_false(correlate_is_apm_library("elastic-jvmti-linux-x64.so"));	/* the regex needs a '/' */
	assert_false(correlate_is_apm_library("/tmp/elastic-jvmti-linux-x64.so.1"));
	assert_false(correlate_is_apm_library("/tmp/elastic-jvmti-linux-x.64.so"));
	assert_false(correlate_is_apm_library("/tmp/libelastic-jvmti-linux-x64.so"));
	assert_false(correlate_is_apm_library("/usr/lib/libc.so.6"));
	assert_false(correlate_is_apm_library(NULL));
}

static void test_utf8(void **state)
{
	(void)state;
	assert_true(corr_utf8_valid((const uint8_t *)"service \xc3\x84 1", 11));
	assert_true(corr_utf8_valid((const uint8_t *)"\xf0\x9f\x98\x80", 4));
	assert_false(corr_utf8_valid((const uint8_t *)"a\0b", 3));
	assert_false(corr_utf8_valid((const uint8_t *)"\xc3", 1));		/* truncated */
	assert_false(corr_utf8_valid((const uint8_t *)"\xc0\xaf", 2));		/* overlong */
	assert_false(corr_utf8_valid((const uint8_t *)"\xed\xa0\x80", 3));	/* surrogate */
	assert_false(corr_utf8_valid((const uint8_t *)"\xff", 1));
}

static size_t put_str(uint8_t *p, const char *s, uint32_t len)
{
	memcpy(p, &len, 4);
	memcpy(p + 4, s, len);
	return 4 + len;
}

static size_t make_storage(uint8_t *b, uint16_t minor, const char *svc, uint32_t lsvc, const char *env,
			   const char *path, uint32_t lpath)
{
	memcpy(b, &minor, 2);
	size_t n = 2;
	n += put_str(b + n, svc, lsvc);
	n += put_str(b + n, env, (uint32_t)strlen(env));
	n += put_str(b + n, path, lpath);
	return n;
}

/* Process storage read through /proc/self/mem, exactly as from a target. */
static void test_storage_validation(void **state)
{
	(void)state;
	int memfd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	assert_true(memfd >= 0);
	static uint8_t buf[1024];
	char big[300], why[256];
	memset(big, 's', sizeof(big));
	struct corr_storage st;
	make_storage(buf, 1, "svc \xc3\x84", 6, "prod", "/tmp/essockABCDEFGH", 19);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), 0);
	assert_string_equal(st.service, "svc \xc3\x84");
	assert_string_equal(st.env, "prod");
	assert_string_equal(st.socket_path, "/tmp/essockABCDEFGH");
	/* Limits: 128 for names, 107 for the path. */
	make_storage(buf, 1, big, 128, "e", "/p", 2);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), 0);
	make_storage(buf, 1, big, 129, "e", "/p", 2);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "service-name length 129"));
	big[0] = '/';
	make_storage(buf, 1, "s", 1, "e", big, 107);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), 0);
	make_storage(buf, 1, "s", 1, "e", big, 108);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), -EBADMSG);
	make_storage(buf, 1, "s", 1, "e", "", 0);
	uint32_t absurd = 0xfffffffeu;
	memcpy(buf + 12, &absurd, 4);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), -EBADMSG);
	make_storage(buf, 1, "s", 1, "e", "", 0);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), -EBADMSG);
	make_storage(buf, 0, "s", 1, "e", "/p", 2);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), -EBADMSG);
	make_storage(buf, 1, "s\xff", 2, "e", "/p", 2);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)buf, &st, why, sizeof(why)), -EBADMSG);
	/* A length that runs past the end of mapped memory, and a pointer to unmapped memory. */
	uint8_t *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(page != MAP_FAILED);
	munmap(page + 4096, 4096);
	size_t n = make_storage(buf, 1, "s", 1, "e", "", 0);
	assert_int_equal(n, 16);
	uint8_t *at = page + 4096 - n;
	memcpy(at, buf, n);
	uint32_t len = 100;	/* the path's bytes would be past the end of the mapping */
	memcpy(at + 12, &len, 4);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)at, &st, why, sizeof(why)), -EIO);
	assert_int_equal(corr_storage_read(memfd, (uintptr_t)(page + 4096), &st, why, sizeof(why)), -EIO);
	assert_non_null(strstr(why, "unreadable"));
	/* Kernel and non-canonical addresses are refused before any read. */
	assert_int_equal(corr_mem_read(memfd, 0xffffffff81000000ull, buf, 8), -EFAULT);
	assert_int_equal(corr_mem_read(memfd, UINT64_MAX - 3, buf, 8), -EFAULT);
	assert_int_equal(corr_mem_read(memfd, 0, buf, 8), -EFAULT);
	munmap(page, 4096);
	close(memfd);
}

static int bind_at(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	assert_true(strlen(path) < sizeof(a.sun_path));
	memcpy(a.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* The owner is compared with the credentials given (the publisher's), never with ours re-read. */
static void check_owner_is_publishers(const char *path, const struct corr_creds *creds)
{
	struct corr_creds other = *creds, fs = *creds;
	struct corr_sock s = { .fd = -1 };
	char why[512];
	other.euid = other.fsuid = creds->euid + 1;
	fs.fsuid = creds->euid + 1;
	assert_int_equal(corr_socket_open(getpid(), path, &other, &s, why, sizeof(why)), CORR_SOCK_OWNER);
	assert_int_equal(corr_socket_open(getpid(), path, &fs, &s, why, sizeof(why)), CORR_SOCK_OWNER);
	assert_non_null(strstr(why, "fsuid"));
}

/* Socket checks against ourselves (our root is "/"; escapes through a chroot are in the process test). */
static void test_socket_checks(void **state)
{
	(void)state;
	char dir[] = "/tmp/corr-sock-XXXXXX", path[256], file[256], why[512];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	snprintf(file, sizeof(file), "%s/file", dir);
	int rx = bind_at(path);
	int f = open(file, O_CREAT | O_WRONLY, 0600);
	close(f);
	struct corr_sock s = { .fd = -1 };
	pid_t me = getpid();
	struct corr_creds creds;
	assert_int_equal(corr_proc_creds(me, &creds), 0);
	assert_int_equal(creds.euid, geteuid());
	assert_int_equal(corr_socket_open(me, "tmp/x", &creds, &s, why, sizeof(why)), CORR_SOCK_BAD_PATH);
	char dotdot[300];
	snprintf(dotdot, sizeof(dotdot), "%s/../%s/sock", dir, dir + 5);
	assert_int_equal(corr_socket_open(me, dotdot, &creds, &s, why, sizeof(why)), CORR_SOCK_BAD_PATH);
	assert_int_equal(corr_socket_open(me, file, &creds, &s, why, sizeof(why)), CORR_SOCK_NOT_SOCKET);
	assert_int_equal(corr_socket_open(me, "/nonexistent/sock", &creds, &s, why, sizeof(why)), CORR_SOCK_RESOLVE);
	/* "/proc/self/root" is a magic link: refused even though it would lead back to our own socket. */
	char magic[300];
	snprintf(magic, sizeof(magic), "/proc/self/root%s", path);
	assert_int_equal(corr_socket_open(me, magic, &creds, &s, why, sizeof(why)), CORR_SOCK_RESOLVE);
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 12345, (gid_t)-1), 0);
		assert_int_equal(corr_socket_open(me, path, &creds, &s, why, sizeof(why)), CORR_SOCK_OWNER);
		assert_non_null(strstr(why, "uid 12345"));
		assert_int_equal(chown(path, 0, (gid_t)-1), 0);
	}
	check_owner_is_publishers(path, &creds);
	assert_int_equal(corr_socket_open(me, path, &creds, &s, why, sizeof(why)), CORR_SOCK_OK);
	assert_int_equal(corr_socket_send(&s, "ping", 4), 0);
	char got[8];
	assert_int_equal(recv(rx, got, sizeof(got), 0), 4);
	/* The receiver's queue fills: EAGAIN, never blocking. */
	int sent = 0, r;
	while ((r = corr_socket_send(&s, "x", 1)) == 0 && sent < 100000)
		sent++;
	assert_int_equal(r, -EAGAIN);
	/* The receiver goes away: the error says so (the library then reconnects). */
	close(rx);
	assert_int_equal(corr_socket_send(&s, "x", 1), -ECONNREFUSED);
	close(s.fd);
	unlink(path);
	unlink(file);
	rmdir(dir);
}

/* A process's image: the same until it execs (-ESTALE), gone once it is a zombie (-ESRCH). */
static void test_image_identity(void **state)
{
	(void)state;
	struct corr_image me1, me2, child;
	assert_int_equal(corr_image_capture(getpid(), &me1), 0);
	assert_true(me1.len >= 16 && me1.len % 16 == 0);
	assert_int_equal(corr_image_capture(getpid(), &me2), 0);
	assert_int_equal(corr_image_check(getpid(), &me1), 0);
	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) == 1)
			execl("/bin/sleep", "sleep", "10", (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	assert_int_equal(corr_image_capture(pid, &child), 0);
	assert_int_equal(corr_image_check(pid, &child), 0);
	assert_int_equal(write(go[1], "x", 1), 1);
	int r = 0;
	for (int i = 0; i < 2000 && (r = corr_image_check(pid, &child)) == 0; i++)
		usleep(1000);
	assert_int_equal(r, -ESTALE);
	kill(pid, SIGKILL);
	for (int i = 0; i < 2000 && (r = corr_image_check(pid, &child)) != -ESRCH; i++)
		usleep(1000);
	assert_int_equal(r, -ESRCH);	/* a zombie has no address space */
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	close(go[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_correlation_vector),
		cmocka_unit_test(test_encode_registration_vector),
		cmocka_unit_test(test_registration_fits_a_datagram),
		cmocka_unit_test(test_aggregation_spec_example),
		cmocka_unit_test(test_split_at_32767),
		cmocka_unit_test(test_eagain_keeps_counts),
		cmocka_unit_test(test_pending_bound),
		cmocka_unit_test(test_library_path),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_storage_validation),
		cmocka_unit_test(test_socket_checks),
		cmocka_unit_test(test_image_identity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
