/*
 * End-to-end test of APM correlation through `hostprof record`: the fake agent application (tests/fixtures/
 * apm_app.c, with the TLSDESC library elastic-jvmti-linux-x86_64.so) switches each thread between known
 * transactions every 10 ms and logs every datagram it receives. Asserted: registration first (again after an
 * agent restart), every correlation message well-formed with a count <= 32767, the counts received equal the
 * counts hostprof says it sent (less what was in flight to the agent's old socket at its restart), nothing lost
 * without being counted, and the attribution accuracy: the share of
 * counted samples whose stack (looked up by the stack-trace ID the datagram carries) runs the transaction's own
 * function txn_work_<k>.
 *
 * Under load: three traced threads switching transactions every 7 ms of their own CPU time, two busy untraced
 * processes, both CPUs full. Asserted against the profile and the datagrams, not hostprof's own counters:
 * >= 97 % of the traced samples (profile samples in txn_work_0..3; the app starts transactions only once
 * registered and drains its socket a while before it exits) arrive as counts, >= 99.5 % of counts name the
 * transaction their stack runs, and the sample-to-datagram latency (p99) stays under the announced
 * samples-delay-ms.
 *
 * Off CPU (--off-cpu): two traced threads block 8 ms in nanosleep at the start of every 12 ms slot, inside the
 * transaction (block_in_transaction under txn_work_k). The fast lane reads each thread's trace context as it
 * switches out, so its time off CPU is that transaction's: >= 95 % of the blocked time under txn_work_k is
 * linked to transaction k in the profile (none of it to another), none under idle_work is linked, and the
 * counts sent to the agent name the transaction their stack runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/profile/proto/otlp_profiles_service.pb-c.h"
#include "tests/lib/testlib.h"

#define MAX_MSGS 200000

struct corr_msg {
	uint8_t trace_id[16], txn_id[8], stack_id[16];
	uint16_t count;
};

struct dgrams {
	unsigned registrations, correlations, malformed, first_is_registration;
	unsigned registrations_after_restart;
	uint64_t counts;
	uint16_t max_count;
	struct corr_msg *msgs;
};

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static size_t unhex(const char *s, uint8_t *out, size_t max)
{
	size_t n = 0;
	while (n < max && hexval(s[0]) >= 0 && hexval(s[1]) >= 0) {
		out[n++] = (uint8_t)(hexval(s[0]) << 4 | hexval(s[1]));
		s += 2;
	}
	return n;
}

static void parse_dgrams(const char *path, uint64_t restart_ns, struct dgrams *d)
{
	char line[4096];
	uint8_t b[1100];
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	memset(d, 0, sizeof(*d));
	d->msgs = calloc(MAX_MSGS, sizeof(*d->msgs));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long ns;
		char hex[4000];
		if (sscanf(line, "R %llu %3999s", &ns, hex) != 2)
			continue;
		size_t n = unhex(hex, b, sizeof(b));
		uint16_t type = n >= 2 ? (uint16_t)(b[0] | b[1] << 8) : 0;
		if (d->registrations + d->correlations == 0)
			d->first_is_registration = type == 2;
		if (type == 2) {
			d->registrations++;
			d->registrations_after_restart += restart_ns && ns > restart_ns;
		} else if (type == 1 && n == 46 && d->correlations < MAX_MSGS) {
			struct corr_msg *m = &d->msgs[d->correlations++];
			memcpy(m->trace_id, b + 4, 16);
			memcpy(m->txn_id, b + 20, 8);
			memcpy(m->stack_id, b + 28, 16);
			m->count = (uint16_t)(b[44] | b[45] << 8);
			d->counts += m->count;
			if (m->count > d->max_count)
				d->max_count = m->count;
		} else {
			d->malformed++;
		}
	}
	fclose(f);
}

/* Counts whose stack runs the function of the transaction the message names (transaction id C0+k ...). */
static double attribution(const struct profile *p, const struct dgrams *d, uint64_t *matched, uint64_t *unknown)
{
	uint64_t total = 0;
	*matched = *unknown = 0;
	for (unsigned i = 0; i < d->correlations; i++) {
		const struct corr_msg *m = &d->msgs[i];
		char want[32];
		snprintf(want, sizeof(want), "txn_work_%d", m->txn_id[0] - 0xc0);
		total += m->count;
		uint32_t s = 1;
		while (s < p->stacks.count && memcmp(p->stacks.items[s].trace_id, m->stack_id, 16) != 0)
			s++;
		if (s == p->stacks.count) {
			*unknown += m->count;
			continue;
		}
		const char *names[512];
		size_t n = test_stack_functions(p, s, names, 512);
		for (size_t j = 0; j < n; j++) {
			if (strcmp(names[j], want) == 0) {
				*matched += m->count;
				break;
			}
		}
	}
	return total ? 100.0 * (double)*matched / (double)total : 0.0;
}

static uint64_t summary_value(const char *file, const char *pattern)
{
	char cmd[1024], buf[64] = "";
	snprintf(cmd, sizeof(cmd), "sed -n 's/.*%s.*/\\1/p' %s | tail -1", pattern, file);
	FILE *f = popen(cmd, "r");
	if (f && fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	if (f)
		pclose(f);
	return strtoull(buf, NULL, 10);
}

/* The files of one run of the APM fixture under hostprof, in a directory of its own. */
struct apm_run {
	char *dir, *abs_lib;
	char app[256], lib[256], out[512], err[512], dgram[512], sock[512];
};

static void apm_run_setup(struct apm_run *r)
{
	r->dir = test_mkdtemp();
	test_fixture_path("apm_app", r->app, sizeof(r->app));
	test_fixture_path("elastic-jvmti-linux-x86_64.so", r->lib, sizeof(r->lib));
	r->abs_lib = realpath(r->lib, NULL);
	assert_non_null(r->abs_lib);
	snprintf(r->out, sizeof(r->out), "%s/p.msgpack", r->dir);
	snprintf(r->err, sizeof(r->err), "%s/hostprof.err", r->dir);
	snprintf(r->dgram, sizeof(r->dgram), "%s/dgram.log", r->dir);
	/* The socket in this run's own directory: a concurrent run's agent bound at a shared path would receive
	 * this hostprof's counts, and this one the other's (stacks this profile does not have). */
	snprintf(r->sock, sizeof(r->sock), "%s/apm.sock", r->dir);
}

static void apm_run_cleanup(struct apm_run *r)
{
	free(r->abs_lib);
	test_rmdir_rf(r->dir);
	free(r->dir);
}

/*
 * The same profile as an OTLP export (`convert --to otlp`), decoded by protobuf-c from the wire: the samples/count
 * Profiles' samples that link to a trace add up to the msgpack profile's linked samples, and each link's span is
 * one of the fixture's transactions (0xc0 + its number in the first byte), its trace id the one the msgpack link
 * has. Returns the linked samples.
 */
static uint64_t otlp_linked(const char *msgpack, const char *dir, const struct profile *p)
{
	typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest request;
	char pb[600];
	snprintf(pb, sizeof(pb), "%s/apm.otlp.pb", dir);
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s --to otlp -o %s", msgpack, pb), 0);
	FILE *f = fopen(pb, "rbe");
	assert_non_null(f);
	static uint8_t buf[64 << 20];
	size_t len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	request *req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, len, buf);
	assert_non_null(req);
	const Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *dict = req->dictionary;
	uint64_t linked = 0;
	for (size_t r = 0; r < req->n_resource_profiles; r++) {
		for (size_t sc = 0; sc < req->resource_profiles[r]->n_scope_profiles; sc++) {
			const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *scope =
				req->resource_profiles[r]->scope_profiles[sc];
			for (size_t k = 0; k < scope->n_profiles; k++) {
				const Opentelemetry__Proto__Profiles__V1development__Profile *prof = scope->profiles[k];
				if (strcmp(dict->string_table[prof->sample_type->type_strindex], "samples") != 0)
					continue;
				for (size_t i = 0; i < prof->n_samples; i++) {
					const Opentelemetry__Proto__Profiles__V1development__Sample *smp = prof->samples[i];
					if (!smp->link_index)
						continue;
					assert_true((size_t)smp->link_index < dict->n_link_table);
					const Opentelemetry__Proto__Profiles__V1development__Link *l =
						dict->link_table[smp->link_index];
					assert_int_equal(l->span_id.len, 8);
					assert_int_equal(l->trace_id.len, 16);
					assert_int_equal(l->span_id.data[0] & 0xf0, 0xc0);
					bool known = false;	/* a trace id of the msgpack profile's links */
					for (uint32_t m = 1; m < p->links.count && !known; m++)
						known = !memcmp(p->links.items[m].trace_id, l->trace_id.data, 16) &&
							!memcmp(p->links.items[m].span_id, l->span_id.data, 8);
					assert_true(known);
					for (size_t v = 0; v < smp->n_values; v++)
						linked += (uint64_t)smp->values[v];
				}
			}
		}
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(req,
														 NULL);
	return linked;
}

static void test_correlation_end_to_end(void **state)
{
	(void)state;
	test_require_root("reading another process's TLS needs ptrace and /proc/PID/mem");
	struct apm_run r;
	apm_run_setup(&r);
	char *dir = r.dir, *app = r.app, *abs_lib = r.abs_lib, *out = r.out, *err = r.err, *dgram = r.dgram,
	     *sock = r.sock;

	/* hostprof in the background, so the agent can be restarted (SIGUSR1: a new socket) half-way. */
	pid_t h = fork();
	if (h == 0) {
		if (!freopen(err, "w", stderr))
			_exit(126);
		execl(test_hostprof(), "hostprof", "record", "-v", "-o", out, "--", app, "--lib", abs_lib, "--socket", sock,
		      "--log", dir, "--threads", "4", "--seconds", "8", (char *)NULL);
		_exit(127);
	}
	sleep(2);
	char pidcmd[256], pidbuf[32] = "";
	/* hostprof's own child: other runs of these tests may share the machine. */
	snprintf(pidcmd, sizeof(pidcmd), "pgrep -P %d -x apm_app", (int)h);
	FILE *pf = popen(pidcmd, "r");
	if (pf && fgets(pidbuf, sizeof(pidbuf), pf) == NULL)
		pidbuf[0] = '\0';
	if (pf)
		pclose(pf);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t restart_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	assert_true(atoi(pidbuf) > 0);
	kill(atoi(pidbuf), SIGUSR1);
	int status;
	waitpid(h, &status, 0);
	test_run("cat %s", err);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	struct dgrams d;
	parse_dgrams(dgram, restart_ns, &d);
	struct profile *p = test_read_profile(out);
	uint64_t matched, unknown;
	double pct = attribution(p, &d, &matched, &unknown);
	uint64_t sent = summary_value(err, "messages with \\([0-9]*\\) counts sent");
	uint64_t correlated = summary_value(err, "apm: \\([0-9]*\\) of [0-9]* samples correlated");
	uint64_t early = summary_value(err, "correlated (\\([0-9]*\\) before");
	uint64_t pending = summary_value(err, "sent, \\([0-9]*\\) pending");
	uint64_t dropped = summary_value(err, "pending, \\([0-9]*\\) dropped");
	fprintf(stderr,
		"apm: %u registrations (%u after the restart), %u messages, %llu counts received of %llu sent; "
		"%llu correlated = %llu before the socket + %llu sent + %llu pending + %llu dropped; max count %u; "
		"attribution accuracy %.2f%% (%llu of %llu counts, %llu with a stack not in the profile)\n",
		d.registrations, d.registrations_after_restart, d.correlations, (unsigned long long)d.counts,
		(unsigned long long)sent, (unsigned long long)correlated, (unsigned long long)early,
		(unsigned long long)sent, (unsigned long long)pending, (unsigned long long)dropped, d.max_count, pct,
		(unsigned long long)matched, (unsigned long long)d.counts, (unsigned long long)unknown);
	assert_true(d.first_is_registration);
	assert_true(d.registrations >= 2);
	assert_true(d.registrations_after_restart >= 1);
	assert_int_equal(d.malformed, 0);
	assert_true(d.correlations > 100);
	assert_true(d.max_count <= 32767);
	/* Every count sent arrived, but for datagrams in flight to the old socket when the agent re-created it
	 * (accepted by the kernel, then discarded with the old socket: the agent's restart, not hostprof's loss). Its
	 * queue holds 11 datagrams at most: 8 s of counts make that well under 5 %. */
	assert_true(d.counts <= sent && sent - d.counts <= sent / 20);
	assert_true(correlated == early + sent + pending + dropped);	/* none lost uncounted */
	assert_int_equal(unknown, 0);
	/* The context is read after the sample (not in the kernel at sample time, as BPF does): within
	 * SESSION_APM_MAX_STALENESS_US of it, against a switch every 10 ms. Measured 99.7-99.8 %. */
	assert_true(pct >= 99.5);
	/* The profile carries the same context: linked samples name the service and the transaction. */
	uint64_t linked = 0, named = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		if (!s->link)
			continue;
		linked += s->count;
		/* The service is known once the agent published its process storage (after the first samples). */
		const char *service = profile_string(p, s->service);
		assert_true(!*service || !strcmp(service, "fake-service"));
		named += *service ? s->count : 0;
		assert_int_equal(p->links.items[s->link].span_id[0] & 0xf0, 0xc0);
	}
	assert_int_equal(linked, correlated);
	assert_true(named >= sent);
	/* And so does its OTLP export: a trace backend can go from a span to these samples. */
	uint64_t exported = otlp_linked(out, dir, p);
	fprintf(stderr, "apm: %llu linked samples in the profile, %llu in its OTLP export\n",
		(unsigned long long)linked, (unsigned long long)exported);
	assert_int_equal(exported, linked);
	profile_free(p);
	free(d.msgs);
	apm_run_cleanup(&r);
}

/* A process that only burns CPU until killed: load hostprof does not trace. */
static pid_t start_busy(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		volatile uint64_t x = 1;
		for (;;)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	}
	assert_true(pid > 0);
	return pid;
}

/* Profile samples whose stack runs a transaction's function txn_work_0..3. */
static uint64_t traced_samples(const struct profile *p)
{
	const char *names[512];
	uint64_t total = 0;
	for (uint32_t i = 0; i < p->samples.count; i++) {
		size_t n = test_stack_functions(p, p->samples.items[i].stack, names, 512);
		for (size_t j = 0; j < n; j++) {
			if (strncmp(names[j], "txn_work_", 9) == 0 && names[j][9] >= '0' && names[j][9] <= '3' &&
			    !names[j][10]) {
				total += p->samples.items[i].count;
				break;
			}
		}
	}
	return total;
}

static void test_correlation_under_load(void **state)
{
	(void)state;
	test_require_root("reading another process's TLS needs ptrace and /proc/PID/mem");
	struct apm_run r;
	apm_run_setup(&r);
	char *dir = r.dir, *app = r.app, *abs_lib = r.abs_lib, *out = r.out, *err = r.err, *dgram = r.dgram,
	     *sock = r.sock;
	pid_t busy[2] = { start_busy(), start_busy() };
	int rc = test_run("\"$HOSTPROF\" record -v -o %s -- %s --lib %s --socket %s --log %s "
			  "--threads 3 --slot-cpu-ms 7 --wait-registration --linger-ms 500 --seconds 6 "
			  "--publish-delay-ms 100 2> %s", out, app, abs_lib, sock, dir, err);
	for (int i = 0; i < 2; i++) {
		kill(busy[i], SIGKILL);
		waitpid(busy[i], NULL, 0);
	}
	test_run("cat %s", err);
	assert_int_equal(rc, 0);

	struct dgrams d;
	parse_dgrams(dgram, 0, &d);
	struct profile *p = test_read_profile(out);
	uint64_t matched, unknown, traced = traced_samples(p);
	double pct = attribution(p, &d, &matched, &unknown);
	uint64_t p99 = summary_value(err, "latency p50 [0-9]* ms p99 \\([0-9]*\\) ms");
	uint64_t announced = summary_value(err, "announced \\([0-9]*\\) ms");
	uint64_t queue_full = summary_value(err, "\\([0-9]*\\) lost in a full queue");
	fprintf(stderr, "apm under load: %llu traced samples, %llu counts received (%.2f%%), attribution %.2f%% "
			"(%llu of %llu), sample-to-send p99 %llu ms + the agent's 20 ms poll against %llu ms "
			"announced, %llu samples lost in the fast lane's queue\n",
		(unsigned long long)traced, (unsigned long long)d.counts,
		traced ? 100.0 * (double)d.counts / (double)traced : 0.0, pct, (unsigned long long)matched,
		(unsigned long long)d.counts, (unsigned long long)p99, (unsigned long long)announced,
		(unsigned long long)queue_full);
	/* 3 threads sharing 2 CPUs with 2 busy processes for 6 s get ~7000 samples at 999 Hz. Far fewer means this
	 * machine is too slow or too loaded for the figures below to say anything: fail, saying so. */
	if (traced < 1000)
		fail_msg("only %llu traced samples in 6 s (want >= 1000): the machine is too loaded to run this test",
			 (unsigned long long)traced);
	assert_true(d.first_is_registration);
	assert_int_equal(d.malformed, 0);
	assert_int_equal(unknown, 0);
	assert_true(d.counts * 100 >= traced * 97);
	assert_true(pct >= 99.5);
	assert_true(announced > 0 && p99 + 20 <= announced);
	assert_int_equal(queue_full, 0);
	profile_free(p);
	free(d.msgs);
	apm_run_cleanup(&r);
}

/* Blocked time (off CPU, not preempted) of the profile's samples under txn_work_0..3, and how much of it is
 * linked to the transaction whose function the stack runs, or to another; blocked time under idle_work that is
 * linked at all (it has no transaction). */
struct off_cpu_split {
	uint64_t blocked, right, wrong, idle_blocked, idle_linked;
};

static void off_cpu_split(const struct profile *p, struct off_cpu_split *o)
{
	const char *names[512];
	memset(o, 0, sizeof(*o));
	for (uint32_t i = 0; i < p->samples.count; i++) {
		const struct profile_sample *s = &p->samples.items[i];
		uint64_t blocked = s->off_cpu_ns - s->preempted_ns;
		size_t n = test_stack_functions(p, s->stack, names, 512);
		int k = -1, idle = 0, in_block = 0;
		for (size_t j = 0; j < n; j++) {
			if (!strncmp(names[j], "txn_work_", 9) && names[j][9] >= '0' && names[j][9] <= '3' && !names[j][10])
				k = names[j][9] - '0';
			idle |= !strcmp(names[j], "idle_work");
			in_block |= !strcmp(names[j], "block_in_transaction");
		}
		if (!s->off_cpu_ns || !in_block)
			continue;
		if (idle) {
			o->idle_blocked += blocked;
			o->idle_linked += s->link ? blocked : 0;
		} else if (k >= 0) {
			o->blocked += blocked;
			if (s->link && p->links.items[s->link].span_id[0] == 0xc0 + k)
				o->right += blocked;
			else if (s->link)
				o->wrong += blocked;
		}
	}
}

static void test_off_cpu_correlated(void **state)
{
	(void)state;
	test_require_root("reading another process's TLS needs ptrace and /proc/PID/mem");
	struct apm_run r;
	apm_run_setup(&r);
	int rc = test_run("\"$HOSTPROF\" record -v --off-cpu -o %s -- %s --lib %s --socket %s --log %s --threads 2 "
			  "--slot-ms 4 --block-ms 8 --wait-registration --linger-ms 500 --seconds 5 2> %s",
			  r.out, r.app, r.abs_lib, r.sock, r.dir, r.err);
	test_run("cat %s", r.err);
	assert_int_equal(rc, 0);
	struct dgrams d;
	parse_dgrams(r.dgram, 0, &d);
	struct profile *p = test_read_profile(r.out);
	struct off_cpu_split o;
	off_cpu_split(p, &o);
	uint64_t matched, unknown;
	double pct = attribution(p, &d, &matched, &unknown);
	fprintf(stderr, "apm off-cpu: %.3f s blocked in transactions, %.2f%% linked to their own (%.3f s to another), "
			"%.3f s blocked without one (%.3f s linked); %llu counts received (%llu with a stack not in the profile), "
			"attribution %.2f%%\n",
		(double)o.blocked / 1e9, o.blocked ? 100.0 * (double)o.right / (double)o.blocked : 0.0,
		(double)o.wrong / 1e9, (double)o.idle_blocked / 1e9, (double)o.idle_linked / 1e9,
		(unsigned long long)d.counts, (unsigned long long)unknown, pct);
	/* 2 threads × 5 s, 8 ms of every 12 blocked, 4 slots in 5 in a transaction: ~5 s; the first ~0.3 s wait
	 * for the registration. */
	assert_true(o.blocked > 2000000000ull);
	assert_true(o.right * 100 >= o.blocked * 95);
	assert_true(o.wrong * 1000 <= o.blocked);
	assert_true(o.idle_blocked > 0 && o.idle_linked * 1000 <= o.idle_blocked);
	assert_true(d.first_is_registration);
	assert_int_equal(d.malformed, 0);
	/* Counts whose stack this profile has name their transaction's function. Another profiler running on the
	 * machine at the same time (a system-wide one) correlates this app too and sends its own stacks to the same
	 * socket: those are not in this profile (unknown), and the other tests' unknown == 0 catches ours. */
	assert_true(d.counts > unknown && matched * 1000 >= (d.counts - unknown) * 995);
	(void)pct;
	profile_free(p);
	free(d.msgs);
	apm_run_cleanup(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_correlation_end_to_end),
		cmocka_unit_test(test_correlation_under_load),
		cmocka_unit_test(test_off_cpu_correlated),
	};
	return cmocka_run_group_tests_name("apm correlation (integration)", tests, NULL, NULL);
}
