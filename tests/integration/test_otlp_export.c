/*
 * Integration tests of `hostprof convert --to otlp` against decoders that are not hostprof's, on a real profile of
 * the diff_work fixture (tests/fixtures/diff_work.c, "slow": variable_part takes two thirds of the time, steady_part
 * one third), recorded once per run:
 *   - protoc --decode_raw, which knows no schema: the request's structure by the field numbers of
 *     opentelemetry-proto's profiles.proto, written out here from the spec (resources, scope, profiles, the
 *     dictionary's tables), fixed64 times, attribute names and values;
 *   - protoc --decode with hostprof's schema: protobuf's own decoder reads every field (no unknown ones) and the
 *     values add up to the profile's sample count and CPU time;
 *   - the OpenTelemetry Collector itself (tests/otelcol: the OTLP receiver and the file exporter, built once from
 *     its Go modules into the tests' download cache): the request is POSTed to /v1development/profiles, and from
 *     the JSON the collector writes, each function's sample count equals the msgpack profile's, the 2:1 split
 *     shows, and the resource, mapping and frame attributes are there.
 * They skip, saying why, where the kernel refuses perf_event_open, and where protoc, go or curl is missing or the
 * collector cannot be built.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/cmd/commands.h"
#include "src/export/otlp_sender.h"
#include "src/profile/ids.h"
#include "src/profile/otlp.h"
#include "src/profile/proto/otlp_profiles_service.pb-c.h"
#include "tests/lib/testlib.h"

/* User frames only: a kernel symbol sampled by chance ("exc_page_fault") has bytes that protoc --decode_raw reads as
 * a message, not a string, which would make the string table's decoding depend on where the samples fell. */
#define RECORD "\"$HOSTPROF\" record -q -F 1999 --no-kernel"
#define NFUNCTIONS 5
static const char *const functions[NFUNCTIONS] = { "main", "variable_part", "variable_leaf", "steady_part",
						    "steady_leaf" };

struct run {
	char *dir;
	bool made;
	char msgpack[512], pb[512];
	struct profile *p;	/* the msgpack profile the request was made from */
	pid_t collector;	/* 0 when none runs */
};

static int setup(void **state)
{
	struct run *r = calloc(1, sizeof(*r));
	if (!r || !(r->dir = test_mkdtemp()))
		return -1;
	snprintf(r->msgpack, sizeof(r->msgpack), "%s/slow.msgpack", r->dir);
	snprintf(r->pb, sizeof(r->pb), "%s/slow.pb", r->dir);
	*state = r;
	return 0;
}

static void stop_collector(struct run *r)
{
	if (r->collector > 0) {
		kill(r->collector, SIGTERM);
		waitpid(r->collector, NULL, 0);
		r->collector = 0;
	}
}

static int teardown(void **state)
{
	struct run *r = *state;
	stop_collector(r);
	profile_free(r->p);
	test_rmdir_rf(r->dir);
	free(r->dir);
	free(r);
	return 0;
}

/* The profile and its request, made by the first test that needs them; skips the test without perf. */
static void require_export(struct run *r)
{
	char fixture[256];
	test_require_perf();
	if (r->made)
		return;
	test_fixture_path("diff_work", fixture, sizeof(fixture));
	assert_int_equal(test_run(RECORD " -o %s -- %s slow", r->msgpack, fixture), 0);
	assert_int_equal(test_run("\"$HOSTPROF\" convert %s --to otlp -o %s", r->msgpack, r->pb), 0);
	r->p = test_read_profile(r->msgpack);
	assert_true(test_total_samples(r->p) >= 1000);
	r->made = true;
}

/* A whole binary file, malloc'd (never NULL), its length in *len. */
static uint8_t *read_bytes(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	uint8_t *buf = NULL;
	size_t cap = 0, n;
	assert_non_null(f);
	*len = 0;
	do {
		if (*len == cap)
			assert_non_null(buf = realloc(buf, cap = cap ? 2 * cap : 4096));
		n = fread(buf + *len, 1, cap - *len, f);
		*len += n;
	} while (n > 0);
	fclose(f);
	return buf;
}

/* --- protobuf's text format, as protoc prints it ------------------------------------------------------- */

/* Each field as its path of field names or numbers from the top ("1.2.2.3", "dictionary.string_table") and its
 * value as printed ("{" for a message), in the order printed. */
struct text_field {
	char path[160];
	char *value;
};

struct text_doc {
	struct text_field *f;
	size_t n, cap;
};

static void add_field(struct text_doc *d, const char *path, const char *value)
{
	if (d->n == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 1024;
		d->f = realloc(d->f, d->cap * sizeof(*d->f));
		assert_non_null(d->f);
	}
	snprintf(d->f[d->n].path, sizeof(d->f[d->n].path), "%s", path);
	d->f[d->n++].value = strdup(value);
}

static void parse_text(char *text, struct text_doc *d)
{
	char path[160] = "";
	size_t lens[32], depth = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *colon, *t = line + strspn(line, " ");
		size_t n = strlen(t);
		if (strcmp(t, "}") == 0) {
			assert_true(depth > 0);
			path[lens[--depth]] = '\0';
		} else if (n > 2 && strcmp(t + n - 2, " {") == 0) {
			t[n - 2] = '\0';
			lens[depth++] = strlen(path);
			snprintf(path + strlen(path), sizeof(path) - strlen(path), "%s%s", path[0] ? "." : "", t);
			add_field(d, path, "{");
		} else if ((colon = strstr(t, ": "))) {
			char full[160];
			*colon = '\0';
			snprintf(full, sizeof(full), "%s%s%s", path, path[0] ? "." : "", t);
			add_field(d, full, colon + 2);
		} else {
			fail_msg("protoc printed an unexpected line: %s", t);
		}
	}
	assert_int_equal(depth, 0);
}

static void doc_free(struct text_doc *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->f[i].value);
	free(d->f);
}

/* Fields of that path: how many there are, and whether one has that value. */
static size_t doc_count(const struct text_doc *d, const char *path)
{
	size_t n = 0;
	for (size_t i = 0; i < d->n; i++)
		n += strcmp(d->f[i].path, path) == 0;
	return n;
}

static bool doc_has(const struct text_doc *d, const char *path, const char *value)
{
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(d->f[i].path, path) == 0 && strcmp(d->f[i].value, value) == 0)
			return true;
	}
	return false;
}

/* The k-th string of the string table at path (values printed in quotes), "" past its end. */
static const char *doc_string(const struct text_doc *d, const char *path, long k, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(d->f[i].path, path) == 0 && k-- == 0) {
			size_t n = strlen(d->f[i].value);
			assert_true(n >= 2 && d->f[i].value[0] == '"');
			snprintf(out, len, "%.*s", (int)(n - 2), d->f[i].value + 1);
			break;
		}
	}
	return out;
}

/* Whether some field at path is a string-table index naming s. */
static bool doc_names(const struct text_doc *d, const char *path, const char *strings, const char *s)
{
	char buf[256];
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(d->f[i].path, path) == 0 &&
		    strcmp(doc_string(d, strings, strtol(d->f[i].value, NULL, 10), buf, sizeof(buf)), s) == 0)
			return true;
	}
	return false;
}

/* Whether some field at path is a string-table index naming a string that ends in suffix. */
static bool doc_names_suffix(const struct text_doc *d, const char *path, const char *strings, const char *suffix)
{
	char buf[600];
	size_t n = strlen(suffix);
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(d->f[i].path, path) != 0)
			continue;
		size_t len = strlen(doc_string(d, strings, strtol(d->f[i].value, NULL, 10), buf, sizeof(buf)));
		if (len >= n && strcmp(buf + len - n, suffix) == 0)
			return true;
	}
	return false;
}

static void protoc_to_doc(const struct run *r, const char *args, const char *name, struct text_doc *d)
{
	char out[600];
	snprintf(out, sizeof(out), "%s/%s", r->dir, name);
	assert_int_equal(test_run("protoc %s < %s > %s", args, r->pb, out), 0);
	char *text = test_read_text(out);
	parse_text(text, d);
	free(text);
}

/* --- protoc --decode_raw: the wire format by the spec's field numbers ---------------------------------- */

/*
 * ExportProfilesServiceRequest {1 resource_profiles, 2 dictionary}; ResourceProfiles {1 resource {1 attributes
 * KeyValue {1 key, 2 value AnyValue {1 string_value, 3 int_value}}}, 2 scope_profiles {1 scope {1 name, 2 version},
 * 2 profiles {1 sample_type {1 type_strindex, 2 unit_strindex}, 2 samples {1 stack_index, 2 attribute_indices,
 * 4 values}, 3 time_unix_nano (fixed64), 4 duration_nano, 5 period_type, 6 period}}}; ProfilesDictionary
 * {1 mapping_table {4 filename_strindex},
 * 2 location_table {2 address, 3 lines {1 function_index}}, 3 function_table {1 name_strindex}, 4 link_table,
 * 5 string_table, 6 attribute_table {1 key_strindex, 2 value}, 7 stack_table}.
 */
static void test_decode_raw(void **state)
{
	struct run *r = *state;
	struct text_doc d = { 0 };
	char buf[600];
	require_export(r);
	test_require_tool("command -v protoc", "protoc (Debian's protobuf-compiler)");
	protoc_to_doc(r, "--decode_raw", "raw.txt", &d);
	const struct profile_info *i = &r->p->info;
	const char *keys[] = { "host.id", "host.name", "host.arch", "os.type", "process.pid", "process.executable.name",
			       "process.executable.path" };
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		snprintf(buf, sizeof(buf), "\"%s\"", keys[k]);
		assert_true(doc_has(&d, "1.1.1.1", buf));
	}
	assert_true(doc_has(&d, "1.1.1.2.1", "\"linux\"") && doc_has(&d, "1.1.1.2.1", "\"diff_work\""));
	snprintf(buf, sizeof(buf), "%d", r->p->samples.items[0].pid);
	assert_true(doc_has(&d, "1.1.1.2.3", buf));
	assert_true(doc_has(&d, "1.2.1.1", "\"" OTLP_SCOPE_NAME "\"") && doc_has(&d, "1.2.1.2", "\"" HOSTPROF_VERSION "\""));
	snprintf(buf, sizeof(buf), "0x%016llx", (unsigned long long)i->start_unix_ns);	/* fixed64 */
	assert_true(doc_has(&d, "1.2.2.3", buf));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)i->duration_ns);
	assert_true(doc_has(&d, "1.2.2.4", buf));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)i->period_ns);
	assert_true(doc_has(&d, "1.2.2.6", buf));
	/* One Profile of CPU time and one of counts, both with period type cpu/nanoseconds. */
	assert_true(doc_names(&d, "1.2.2.1.1", "2.5", "cpu") && doc_names(&d, "1.2.2.1.2", "2.5", "nanoseconds"));
	assert_true(doc_names(&d, "1.2.2.1.1", "2.5", "samples") && doc_names(&d, "1.2.2.1.2", "2.5", "count"));
	assert_true(doc_names(&d, "1.2.2.5.1", "2.5", "cpu") && doc_names(&d, "1.2.2.5.2", "2.5", "nanoseconds"));
	/* Samples (v1.10's numbers): stack_index 1, attribute_indices 2 (thread.id at least), values 4 (packed: a
	 * string or, where its bytes happen to read as a message, a message), and timestamps 5 (packed too) in the
	 * samples/count Profile only, whose samples are those of the cpu/nanoseconds one. */
	size_t nsamples = doc_count(&d, "1.2.2.2");
	assert_true(nsamples >= 2 * NFUNCTIONS);
	assert_int_equal(doc_count(&d, "1.2.2.2.1"), nsamples);
	assert_int_equal(doc_count(&d, "1.2.2.2.2"), nsamples);
	assert_int_equal(doc_count(&d, "1.2.2.2.4"), nsamples);
	assert_int_equal(doc_count(&d, "1.2.2.2.5"), nsamples / 2);
	/* The dictionary: element 0 of each table empty, the frames' functions and files named, attributes. */
	assert_string_equal(doc_string(&d, "2.5", 0, buf, sizeof(buf)), "");
	assert_true(doc_has(&d, "2.1", "\"\"") && doc_has(&d, "2.2", "\"\"") && doc_has(&d, "2.3", "\"\"") &&
		    doc_has(&d, "2.6", "\"\"") && doc_has(&d, "2.7", "\"\""));
	for (size_t k = 0; k < NFUNCTIONS; k++)
		assert_true(doc_names(&d, "2.3.1", "2.5", functions[k]));
	assert_true(doc_count(&d, "2.2.2") >= NFUNCTIONS && doc_count(&d, "2.2.3.1") >= NFUNCTIONS);
	assert_true(doc_names_suffix(&d, "2.1.4", "2.5", "/fixtures/diff_work"));	/* a mapping's file */
	assert_true(doc_names(&d, "2.6.1", "2.5", "profile.frame.type") && doc_has(&d, "2.6.2.1", "\"native\""));
	assert_true(doc_names(&d, "2.6.1", "2.5", "process.executable.build_id.htlhash"));
	assert_true(doc_names(&d, "2.6.1", "2.5", "thread.id"));
	assert_true(doc_count(&d, "2.4") == 1 && doc_count(&d, "2.7") >= 2);	/* no APM link; stacks */
	doc_free(&d);
}

/* --- protoc --decode: protobuf's own decoder, hostprof's schema ---------------------------------------- */

/* Every resource names the fixture's program by its real path (record follows the fixture alone). */
static void check_exe_path(const struct text_doc *d)
{
	char fixture[256], real[4096], want[4200];
	size_t found = 0;
	test_fixture_path("diff_work", fixture, sizeof(fixture));
	assert_non_null(realpath(fixture, real));
	snprintf(want, sizeof(want), "\"%s\"", real);
	for (size_t i = 0; i + 2 < d->n; i++) {
		if (strcmp(d->f[i].path, "resource_profiles.resource.attributes.key") != 0 ||
		    strcmp(d->f[i].value, "\"process.executable.path\"") != 0)
			continue;
		assert_string_equal(d->f[i + 1].path, "resource_profiles.resource.attributes.value");
		assert_string_equal(d->f[i + 2].path, "resource_profiles.resource.attributes.value.string_value");
		assert_string_equal(d->f[i + 2].value, want);
		found++;
	}
	fprintf(stderr, "protoc --decode: %zu resources with process.executable.path %s\n", found, want);
	assert_int_equal(found, doc_count(d, "resource_profiles.resource"));
}

static void test_decode_schema(void **state)
{
	struct run *r = *state;
	struct text_doc d = { 0 };
	char type[64];
	uint64_t cpu = 0, samples = 0, want_cpu = 0;
	require_export(r);
	test_require_tool("command -v protoc", "protoc (Debian's protobuf-compiler)");
	protoc_to_doc(r, "-I. --decode=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest "
			 "src/profile/proto/otlp_profiles_service.proto", "decoded.txt", &d);
	long current = -1;
	for (size_t i = 0; i < d.n; i++) {
		const char *last = strrchr(d.f[i].path, '.');
		last = last ? last + 1 : d.f[i].path;
		if (last[0] >= '0' && last[0] <= '9')
			fail_msg("a field the schema does not have: %s", d.f[i].path);
		if (strcmp(d.f[i].path, "resource_profiles.scope_profiles.profiles.sample_type.type_strindex") == 0)
			current = strtol(d.f[i].value, NULL, 10);
		if (strcmp(d.f[i].path, "resource_profiles.scope_profiles.profiles.samples.values") != 0)
			continue;
		doc_string(&d, "dictionary.string_table", current, type, sizeof(type));
		if (strcmp(type, "cpu") == 0)
			cpu += strtoull(d.f[i].value, NULL, 10);
		else if (strcmp(type, "samples") == 0)
			samples += strtoull(d.f[i].value, NULL, 10);
	}
	for (uint32_t i = 0; i < r->p->samples.count; i++)
		want_cpu += profile_sample_value(r->p, &r->p->samples.items[i], PROFILE_VALUE_CPU);
	fprintf(stderr, "protoc --decode: %llu samples, %llu ns of CPU\n", (unsigned long long)samples,
		(unsigned long long)cpu);
	assert_int_equal(samples, test_total_samples(r->p));
	assert_int_equal(cpu, want_cpu);
	check_exe_path(&d);
	doc_free(&d);
}

/* --- the OpenTelemetry Collector ----------------------------------------------------------------------- */

/* The collector's binary (tests/otelcol/build: built once into the download cache); skips when it cannot be. */
static void build_collector(char *bin, size_t len)
{
	char cmd[1024];
	test_require_tool("command -v go", "go (to build the OpenTelemetry Collector)");
	snprintf(cmd, sizeof(cmd), "tests/otelcol/build '%s'", test_download_cache());
	FILE *out = popen(cmd, "r");
	assert_non_null(out);
	bool got = fgets(bin, (int)len, out) != NULL;
	int status = pclose(out);
	if (!got || status != 0)
		test_skip("cannot build the OpenTelemetry Collector from its Go modules (go's message above)");
	bin[strcspn(bin, "\n")] = '\0';
}

/* A TCP port of the loopback nobody listens on now. */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static bool port_open(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* The collector, taking OTLP/HTTP on the loopback at port and writing what it gets to json; its log in log. */
static void start_collector(struct run *r, const char *bin, int port, const char *json, const char *log)
{
	char conf[600], arg[700];
	snprintf(conf, sizeof(conf), "%s/otelcol.yaml", r->dir);
	FILE *f = fopen(conf, "we");
	assert_non_null(f);
	fprintf(f, "receivers: {otlp: {protocols: {http: {endpoint: \"127.0.0.1:%d\"}}}}\n"
		   "exporters: {file: {path: \"%s\", format: json}, debug: {verbosity: basic}}\n"
		   "service:\n  telemetry: {metrics: {level: none}}\n"
		   "  pipelines: {profiles: {receivers: [otlp], exporters: [file, debug]}}\n", port, json);
	assert_int_equal(fclose(f), 0);
	snprintf(arg, sizeof(arg), "--config=file:%s", conf);
	r->collector = fork();
	assert_true(r->collector >= 0);
	if (r->collector == 0) {
		if (!freopen(log, "w", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
			_exit(126);
		execl(bin, bin, arg, "--feature-gates=service.profilesSupport", (char *)NULL);
		_exit(127);
	}
	for (int waited = 0; !port_open(port); waited += 100) {
		if (waited >= 60000 || waitpid(r->collector, NULL, WNOHANG) != 0) {
			test_run("cat %s >&2", log);
			fail_msg("the collector did not start listening on port %d", port);
		}
		sleep_ms(100);
	}
}

/* POST the request as an OTLP/HTTP exporter does; the collector must take all of it. */
static void post_request(const struct run *r, int port)
{
	char resp[600], code[600];
	snprintf(resp, sizeof(resp), "%s/response.pb", r->dir);
	snprintf(code, sizeof(code), "%s/http-code", r->dir);
	assert_int_equal(test_run("curl -sS -o %s -w '%%{http_code}' -H 'Content-Type: application/x-protobuf' "
				  "-H 'OTLP-Profiles-Development-Version: %s' --data-binary @%s http://127.0.0.1:%d%s > %s",
				  resp, OTLP_PROFILES_DEVELOPMENT_VERSION, r->pb, port, OTLP_PROFILES_PATH, code), 0);
	char *text = test_read_text(code);
	size_t len;
	uint8_t *body = read_bytes(resp, &len);
	fprintf(stderr, "collector: HTTP %s, %zu bytes of response\n", text, len);
	assert_string_equal(text, "200");
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse *res =
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
			NULL, len, body);
	assert_non_null(res);
	assert_true(!res->partial_success || res->partial_success->rejected_profiles == 0);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(res,
														  NULL);
	free(text);
	free(body);
}

/* --- the collector's JSON ------------------------------------------------------------------------------ */

static json_object *member(json_object *obj, const char *key)
{
	json_object *v = NULL;
	return obj && json_object_object_get_ex(obj, key, &v) ? v : NULL;
}

/* An integer field as OTLP JSON writes it (int64 as a string, absent when 0). */
static int64_t jint(json_object *obj, const char *key)
{
	json_object *v = member(obj, key);
	return !v ? 0 : json_object_is_type(v, json_type_string) ? strtoll(json_object_get_string(v), NULL, 10) :
								     json_object_get_int64(v);
}

static json_object *jindex(json_object *arr, int64_t i)
{
	assert_true(arr && i >= 0 && (size_t)i < json_object_array_length(arr));
	return json_object_array_get_idx(arr, (size_t)i);
}

static const char *jstring(json_object *dict, int64_t i)
{
	return json_object_get_string(jindex(member(dict, "stringTable"), i));
}

/* An attribute's value as a string: in line, or by its string-table index (the collector writes both). */
static const char *jvalue(json_object *dict, json_object *value)
{
	json_object *s = member(value, "stringValue");
	if (s)
		return json_object_get_string(s);
	if (member(value, "stringValueStrindex"))
		return jstring(dict, jint(value, "stringValueStrindex"));
	return member(value, "intValue") ? json_object_get_string(member(value, "intValue")) : "";
}

/* The value of the attribute named key among a list of attribute-table indices, NULL if none. */
static const char *jattr(json_object *dict, json_object *indices, const char *key)
{
	for (size_t i = 0; indices && i < json_object_array_length(indices); i++) {
		json_object *a = jindex(member(dict, "attributeTable"), json_object_get_int64(jindex(indices, (int64_t)i)));
		if (strcmp(jstring(dict, jint(a, "keyStrindex")), key) == 0)
			return jvalue(dict, member(a, "value"));
	}
	return NULL;
}

/* Whether the stack at stack_index has function name in any frame, inlined ones included. */
static bool stack_has(json_object *dict, int64_t stack_index, const char *name)
{
	json_object *locs = member(jindex(member(dict, "stackTable"), stack_index), "locationIndices");
	for (size_t i = 0; locs && i < json_object_array_length(locs); i++) {
		json_object *loc = jindex(member(dict, "locationTable"), json_object_get_int64(jindex(locs, (int64_t)i)));
		json_object *lines = member(loc, "lines");
		for (size_t j = 0; lines && j < json_object_array_length(lines); j++) {
			json_object *fn = jindex(member(dict, "functionTable"), jint(jindex(lines, (int64_t)j), "functionIndex"));
			if (strcmp(jstring(dict, jint(fn, "nameStrindex")), name) == 0)
				return true;
		}
	}
	return false;
}

struct counts {
	uint64_t total, cpu_ns, per_function[NFUNCTIONS];
	uint64_t timestamps, outside;	/* samples' timestamps, and those outside their Profile's interval */
	bool resource_ok;	/* process.pid and process.executable.name as the profile has them */
};

/* A sample's values added up (one each, or one per timestamp in parallel); its timestamps counted into c, and
 * those outside [start, start + duration). */
static int64_t sample_values(json_object *s, uint64_t start, uint64_t duration, struct counts *c)
{
	json_object *values = member(s, "values"), *times = member(s, "timestampsUnixNano");
	size_t nv = values ? json_object_array_length(values) : 0, nt = times ? json_object_array_length(times) : 0;
	int64_t v = 0;
	assert_true(nt == 0 || nt == nv);
	for (size_t k = 0; k < nv; k++)
		v += strtoll(json_object_get_string(jindex(values, (int64_t)k)), NULL, 10);
	for (size_t k = 0; k < nt; k++) {
		uint64_t t = strtoull(json_object_get_string(jindex(times, (int64_t)k)), NULL, 10);
		c->outside += t < start || t - start >= duration;
	}
	c->timestamps += nt;
	return v;
}

/* Add what one Profile holds to c. */
static void count_profile(json_object *dict, json_object *prof, struct counts *c)
{
	const char *type = jstring(dict, jint(member(prof, "sampleType"), "typeStrindex"));
	json_object *samples = member(prof, "samples");
	uint64_t start = strtoull(json_object_get_string(member(prof, "timeUnixNano")), NULL, 10);
	uint64_t duration = (uint64_t)jint(prof, "durationNano");
	for (size_t i = 0; samples && i < json_object_array_length(samples); i++) {
		json_object *s = jindex(samples, (int64_t)i);
		int64_t v = sample_values(s, start, duration, c);
		if (strcmp(type, "cpu") == 0) {
			c->cpu_ns += (uint64_t)v;
			continue;
		}
		if (strcmp(type, "samples") != 0)
			continue;
		c->total += (uint64_t)v;
		for (size_t k = 0; k < NFUNCTIONS; k++)
			c->per_function[k] += stack_has(dict, jint(s, "stackIndex"), functions[k]) ? (uint64_t)v : 0;
	}
}

/* One request as the collector wrote it (one line of its file). */
static void count_request(json_object *req, const struct profile *p, struct counts *c)
{
	json_object *dict = member(req, "dictionary"), *rps = member(req, "resourceProfiles");
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", p->samples.items[0].pid);
	for (size_t r = 0; rps && r < json_object_array_length(rps); r++) {
		json_object *rp = jindex(rps, (int64_t)r), *attrs = member(member(rp, "resource"), "attributes");
		for (size_t a = 0; attrs && a < json_object_array_length(attrs); a++) {
			json_object *kv = jindex(attrs, (int64_t)a);
			const char *key = member(kv, "key") ? json_object_get_string(member(kv, "key")) :
							       jstring(dict, jint(kv, "keyStrindex"));
			c->resource_ok |= strcmp(key, "process.pid") == 0 && strcmp(jvalue(dict, member(kv, "value")), pid) == 0;
		}
		json_object *scopes = member(rp, "scopeProfiles");
		for (size_t s = 0; scopes && s < json_object_array_length(scopes); s++) {
			json_object *profs = member(jindex(scopes, (int64_t)s), "profiles");
			assert_string_equal(json_object_get_string(member(member(jindex(scopes, (int64_t)s), "scope"), "name")),
					    OTLP_SCOPE_NAME);
			for (size_t k = 0; profs && k < json_object_array_length(profs); k++)
				count_profile(dict, jindex(profs, (int64_t)k), c);
		}
	}
}

/* The fixture's mapping carries the FileID the profile has for it; its frames are native. */
static void check_mapping(json_object *req, const struct profile *p)
{
	json_object *dict = member(req, "dictionary"), *maps = member(dict, "mappingTable");
	char want[33] = "";
	for (uint32_t m = 1; m < p->mappings.count; m++) {
		const char *name = profile_string(p, p->mappings.items[m].filename);
		if (strlen(name) > 10 && strcmp(name + strlen(name) - 10, "/diff_work") == 0)
			hex_encode(p->mappings.items[m].file_id, 16, want);
	}
	assert_true(want[0]);
	bool found = false;
	for (size_t i = 1; maps && i < json_object_array_length(maps); i++) {
		json_object *m = jindex(maps, (int64_t)i);
		const char *id = jattr(dict, member(m, "attributeIndices"), "process.executable.build_id.htlhash");
		found |= id && strcmp(id, want) == 0;
	}
	assert_true(found);
	json_object *locs = member(dict, "locationTable");
	const char *type = jattr(dict, member(jindex(locs, 1), "attributeIndices"), "profile.frame.type");
	assert_non_null(type);
}

/* The file exporter's JSON, one request a line, once it has written what was sent (at most 30 s). */
static void read_collector_json(const char *json, const struct profile *p, struct counts *c)
{
	struct stat st;
	for (int waited = 0; stat(json, &st) != 0 || st.st_size == 0; waited += 100) {
		if (waited >= 30000)
			fail_msg("the collector wrote nothing to %s", json);
		sleep_ms(100);
	}
	sleep_ms(200);	/* the line it is writing */
	char *text = test_read_text(json);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		json_object *req = json_tokener_parse(line);
		assert_non_null(req);
		count_request(req, p, c);
		check_mapping(req, p);
		json_object_put(req);
	}
	free(text);
}

static void test_collector(void **state)
{
	struct run *r = *state;
	char bin[600], json[600], log[600];
	struct counts c = { 0 };
	require_export(r);
	test_require_tool("command -v curl", "curl");
	build_collector(bin, sizeof(bin));
	snprintf(json, sizeof(json), "%s/otlp.json", r->dir);
	snprintf(log, sizeof(log), "%s/otelcol.log", r->dir);
	int port = free_port();
	start_collector(r, bin, port, json, log);
	post_request(r, port);
	read_collector_json(json, r->p, &c);
	stop_collector(r);
	uint64_t want_cpu = 0;
	for (uint32_t i = 0; i < r->p->samples.count; i++)
		want_cpu += profile_sample_value(r->p, &r->p->samples.items[i], PROFILE_VALUE_CPU);
	fprintf(stderr, "collector: %llu samples, %llu ns of CPU\n", (unsigned long long)c.total,
		(unsigned long long)c.cpu_ns);
	assert_true(c.resource_ok);
	assert_int_equal(c.total, test_total_samples(r->p));
	/* every sample with its time, within the profile's interval */
	fprintf(stderr, "collector: %llu timestamps, %llu outside the profile's interval\n",
		(unsigned long long)c.timestamps, (unsigned long long)c.outside);
	assert_int_equal(c.timestamps, c.total);
	assert_int_equal(c.outside, 0);
	assert_int_equal(c.cpu_ns, want_cpu);
	for (size_t k = 0; k < NFUNCTIONS; k++) {
		uint64_t want = test_samples_with_function(r->p, functions[k]);
		fprintf(stderr, "  %-14s collector %llu, profile %llu\n", functions[k],
			(unsigned long long)c.per_function[k], (unsigned long long)want);
		assert_int_equal(c.per_function[k], want);
	}
	/* The fixture's split, as the collector sees it: variable_part two thirds, steady_part one third. */
	double v = test_share(c.per_function[1], c.total), s = test_share(c.per_function[3], c.total);
	assert_true(v > 66.7 - 6.0 && v < 66.7 + 6.0);
	assert_true(s > 33.3 - 6.0 && s < 33.3 + 6.0);
}

/* --- the daemon's export: the collector down, the daemon restarted, nothing lost --------------------------- */

/* Each request the collector wrote (lines of the json files): its profile's start time and sample count. */
struct arrival {
	uint64_t start_ns, samples;
};

static unsigned read_arrivals(const char *json, struct arrival *out, unsigned max, unsigned n)
{
	struct stat st;
	if (stat(json, &st) != 0 || st.st_size == 0)
		return n;
	char *text = test_read_text(json);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		json_object *req = json_tokener_parse(line);
		assert_non_null(req);
		assert_true(n < max);
		json_object *dict = member(req, "dictionary"), *rps = member(req, "resourceProfiles");
		out[n] = (struct arrival){ 0 };
		for (size_t r = 0; rps && r < json_object_array_length(rps); r++) {
			json_object *scopes = member(jindex(rps, (int64_t)r), "scopeProfiles");
			for (size_t s = 0; scopes && s < json_object_array_length(scopes); s++) {
				json_object *profs = member(jindex(scopes, (int64_t)s), "profiles");
				for (size_t k = 0; profs && k < json_object_array_length(profs); k++) {
					json_object *prof = jindex(profs, (int64_t)k);
					struct counts c = { 0 };
					out[n].start_ns = strtoull(json_object_get_string(member(prof, "timeUnixNano")), NULL,
								   10);
					count_profile(dict, prof, &c);
					assert_int_equal(c.outside, 0);
					out[n].samples += c.total;
				}
			}
		}
		json_object_put(req);
		n++;
	}
	free(text);
	return n;
}

static pid_t start_daemon(const char *dir, int port, const char *log)
{
	char out[600], endpoint[64];
	snprintf(out, sizeof(out), "%s/profiles", dir);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
	char *const argv[] = { (char *)test_hostprof(), "daemon", "-o", out, "-F", "99", "--interval", "1",
			       "--otlp-endpoint", endpoint, "--otlp-timeout", "5s", NULL };
	return test_spawn(argv, log);
}

static void stop_daemon(pid_t d)
{
	int status;
	kill(d, SIGTERM);
	assert_int_equal(waitpid(d, &status, 0), d);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Whether the spool is empty: every profile taken by the collector. */
static bool spool_empty(const char *dir)
{
	return test_run("test -z \"$(ls -A %s/profiles/otlp-spool 2>/dev/null)\"", dir) == 0;
}

/*
 * The daemon sends a profile a second while the collector runs; the collector stops (requests spool up), the
 * daemon restarts meanwhile, the collector comes back: every profile the daemon wrote arrives, once, with the
 * same number of samples as its file.
 */
static void test_daemon_loses_nothing_while_collector_down(void **state)
{
	struct run *r = *state;
	char bin[600], json1[700], json2[700], clog[700], dlog[700], fixture[256], dir[600];
	test_require_root("the daemon samples every CPU");
	test_require_perf();
	build_collector(bin, sizeof(bin));
	snprintf(dir, sizeof(dir), "%s/daemon", r->dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(json1, sizeof(json1), "%s/before.json", dir);
	snprintf(json2, sizeof(json2), "%s/after.json", dir);
	snprintf(clog, sizeof(clog), "%s/otelcol.log", dir);
	snprintf(dlog, sizeof(dlog), "%s/daemon.log", dir);
	int port = free_port();
	/* Something to sample in every interval, for its CPU time, whatever the machine's load. */
	assert_int_equal(test_run("%s 30 >/dev/null 2>&1 & echo $! > %s/busy.pid",
				  test_fixture_path("split_paths", fixture, sizeof(fixture)), dir), 0);
	start_collector(r, bin, port, json1, clog);
	pid_t d = start_daemon(dir, port, dlog);
	sleep(3);
	stop_collector(r);
	sleep(3);		/* profiles wait in the spool */
	stop_daemon(d);		/* its last profile too */
	assert_false(spool_empty(dir));
	d = start_daemon(dir, port, dlog);
	sleep(2);
	start_collector(r, bin, port, json2, clog);
	for (int waited = 0; !spool_empty(dir); waited++) {
		if (waited >= 60)
			fail_msg("profiles still wait in the spool a minute after the collector came back");
		sleep(1);
	}
	stop_daemon(d);
	test_run("kill $(cat %s/busy.pid) 2>/dev/null; grep -E 'otlp' %s | tail -n 12 >&2", dir, dlog);
	sleep_ms(500);	/* the collector's file exporter writes what it took */
	stop_collector(r);
	struct arrival got[256];
	unsigned n = read_arrivals(json1, got, 256, 0);
	unsigned before = n;
	n = read_arrivals(json2, got, 256, n);
	/* Every profile file (the empty ones too: a request with no samples has no Profile to time it) arrived. */
	char cmd[700], path[1000];
	snprintf(cmd, sizeof(cmd), "ls %s/profiles | grep -E '^profile-.*\\.msgpack$'", dir);
	FILE *ls = popen(cmd, "r");
	assert_non_null(ls);
	unsigned files = 0, with_samples = 0;
	for (char name[256]; fgets(name, sizeof(name), ls);) {
		name[strcspn(name, "\n")] = '\0';
		snprintf(path, sizeof(path), "%s/profiles/%s", dir, name);
		struct profile *p = test_read_profile(path);
		uint64_t total = test_total_samples(p), start = p->info.start_unix_ns;
		profile_free(p);
		files++;
		if (!total)
			continue;
		with_samples++;
		unsigned same = 0;
		for (unsigned i = 0; i < n; i++) {
			if (got[i].start_ns != start)
				continue;
			same++;
			if (got[i].samples != total)
				fail_msg("%s: %llu samples, the collector got %llu", name, (unsigned long long)total,
					 (unsigned long long)got[i].samples);
		}
		if (same != 1)
			fail_msg("%s arrived %u times", name, same);
	}
	pclose(ls);
	fprintf(stderr, "daemon export: %u profiles written (%u with samples); the collector took %u before it "
		"stopped and %u after it came back, the daemon restarted in between\n", files, with_samples, before,
		n - before);
	assert_true(before >= 1 && n - before >= 2);
	assert_int_equal(n, files);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_raw),
		cmocka_unit_test(test_decode_schema),
		cmocka_unit_test(test_collector),
		cmocka_unit_test(test_daemon_loses_nothing_while_collector_down),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
