/* Unit tests for src/cmd/settings.c and the tables of src/cmd/settings_table.c: one parser per value type, and
 * every option of every command reaching its own field through the getopt tables built from its row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "correlate/correlate.h"
#include "src/cmd/daemon_config.h"
#include "src/cmd/options.h"
#include "src/profile/diff.h"
#include "src/profile/report.h"

static const struct command_settings *const all_commands[] = { &record_settings, &daemon_settings,
							       &report_settings, &convert_settings,
							       &diff_settings, &replay_settings };
#define NCOMMANDS (sizeof(all_commands) / sizeof(all_commands[0]))

/* Parse value as s into a 64-bit field; returns setting_parse()'s result, *out the field. */
static int parse_u64(const struct setting *s, const char *value, uint64_t *out)
{
	char why[256];
	*out = 0xdeadbeef;
	return setting_parse(s, value, out, why, sizeof(why));
}

static void test_sizes(void **state)
{
	(void)state;
	struct setting s = { .name = "x", .type = SETTING_SIZE, .size = 8, .max = UINT64_MAX };
	uint64_t v;
	assert_int_equal(parse_u64(&s, "16384", &v), 0);
	assert_int_equal(v, 16384);
	assert_int_equal(parse_u64(&s, "16K", &v), 0);
	assert_int_equal(v, 16384);
	assert_int_equal(parse_u64(&s, "16k", &v), 0);
	assert_int_equal(v, 16384);
	assert_int_equal(parse_u64(&s, "1M", &v), 0);
	assert_int_equal(v, 1u << 20);
	assert_int_equal(parse_u64(&s, "3G", &v), 0);
	assert_int_equal(v, 3ULL << 30);
	assert_int_equal(parse_u64(&s, "0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_u64(&s, "18446744073709551615", &v), 0);
	assert_int_equal(v, UINT64_MAX);
	const char *const bad[] = { "", "K", "16KB", "1T", "-1", "+1", " 1", "1 ", "0x10", "1.5M",
				    "18446744073709551616", "17179869184G", "99999999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse_u64(&s, bad[i], &v), -EINVAL);
		assert_int_equal(v, 0xdeadbeef); /* a refused value leaves the field alone */
	}
	/* Ranges and multiples, in a 4-byte field. */
	struct setting stack = { .name = "stack-size", .type = SETTING_SIZE, .size = 4, .min = 8, .max = 65528,
				 .multiple = 8 };
	unsigned u = 7;
	char why[256];
	assert_int_equal(setting_parse(&stack, "64K", &u, why, sizeof(why)), -EINVAL); /* 65536 > 65528 */
	assert_int_equal(setting_parse(&stack, "100", &u, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "a multiple of 8"));
	assert_non_null(strstr(why, "from 8 to 65528"));
	assert_int_equal(u, 7);
	assert_int_equal(setting_parse(&stack, "8K", &u, why, sizeof(why)), 0);
	assert_int_equal(u, 8192);
	assert_int_equal(setting_parse(&stack, "0", &u, why, sizeof(why)), -EINVAL);
}

static void test_unsigned_and_durations(void **state)
{
	(void)state;
	struct setting n = { .name = "n", .type = SETTING_UNSIGNED, .size = 8, .min = 1, .max = 100000 };
	uint64_t v;
	assert_int_equal(parse_u64(&n, "1", &v), 0);
	assert_int_equal(parse_u64(&n, "100000", &v), 0);
	assert_int_equal(v, 100000);
	const char *const bad[] = { "0", "100001", "1k", "", "x", "-5", "5.0", "4294967297" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse_u64(&n, bad[i], &v), -EINVAL);
	char why[256];
	setting_describe(&n, why, sizeof(why));
	assert_string_equal(why, "a whole number from 1 to 100000");

	struct setting d = { .name = "d", .type = SETTING_DURATION, .size = 8, .min = 1, .max = 86400 };
	assert_int_equal(parse_u64(&d, "2m30s", &v), 0);
	assert_int_equal(v, 150);
	assert_int_equal(parse_u64(&d, "1h", &v), 0);
	assert_int_equal(v, 3600);
	assert_int_equal(parse_u64(&d, "90", &v), 0);
	assert_int_equal(v, 90);
	assert_int_equal(parse_u64(&d, "1h30m", &v), 0);
	assert_int_equal(v, 5400);
	const char *const bad_d[] = { "2m30", "0", "0s", "25h", "", "s", "5x", "-1s", "1m-1s", "99999999999h" };
	for (size_t i = 0; i < sizeof(bad_d) / sizeof(bad_d[0]); i++)
		assert_int_equal(parse_u64(&d, bad_d[i], &v), -EINVAL);
}

static void test_decimals_bools_strings(void **state)
{
	(void)state;
	char why[256];
	double x = -1;
	struct setting pct = { .name = "p", .type = SETTING_PERCENT, .size = sizeof(double) };
	assert_int_equal(setting_parse(&pct, "0.5", &x, why, sizeof(why)), 0);
	assert_true(x == 0.5);
	assert_int_equal(setting_parse(&pct, "100", &x, why, sizeof(why)), 0);
	const char *const bad_pct[] = { "100.5", "-1", "nan", "inf", "", "5%", " 5" };
	for (size_t i = 0; i < sizeof(bad_pct) / sizeof(bad_pct[0]); i++)
		assert_int_equal(setting_parse(&pct, bad_pct[i], &x, why, sizeof(why)), -EINVAL);
	assert_true(x == 100);
	struct setting secs = { .name = "d", .type = SETTING_SECONDS, .size = sizeof(double) };
	assert_int_equal(setting_parse(&secs, "0.25", &x, why, sizeof(why)), 0);
	assert_true(x == 0.25);
	assert_int_equal(setting_parse(&secs, "0", &x, why, sizeof(why)), -EINVAL);
	assert_int_equal(setting_parse(&secs, "1e999", &x, why, sizeof(why)), -EINVAL);

	int flag = 1;
	struct setting neg = { .name = "no-x", .type = SETTING_FLAG, .flags = SETTING_NEGATE, .size = sizeof(int) };
	assert_int_equal(setting_parse(&neg, "yes", &flag, why, sizeof(why)), 0);
	assert_int_equal(flag, 0);
	assert_int_equal(setting_parse(&neg, "off", &flag, why, sizeof(why)), 0);
	assert_int_equal(flag, 1);
	assert_int_equal(setting_parse(&neg, "maybe", &flag, why, sizeof(why)), -EINVAL);
	assert_int_equal(setting_parse(&neg, "", &flag, why, sizeof(why)), -EINVAL);

	char buf[8] = "old";
	struct setting str = { .name = "s", .type = SETTING_STRING, .size = sizeof(buf) };
	assert_int_equal(setting_parse(&str, "1234567", buf, why, sizeof(why)), 0);
	assert_string_equal(buf, "1234567");
	assert_int_equal(setting_parse(&str, "12345678", buf, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "1 to 7 bytes"));
	assert_int_equal(setting_parse(&str, "", buf, why, sizeof(why)), -EINVAL);
	assert_int_equal(setting_parse(&str, "ab", buf, why, sizeof(why)), 0);
	assert_memory_equal(buf, "ab\0\0\0\0\0\0", 8); /* zero-filled: settings_differ() compares bytes */
	str.flags = SETTING_MAY_BE_EMPTY;
	assert_int_equal(setting_parse(&str, "", buf, why, sizeof(why)), 0);
	assert_string_equal(buf, "");
}

static void test_enums_and_pids(void **state)
{
	(void)state;
	static const char *const names[] = { "error", "warn", "info", NULL };
	struct setting e = { .name = "e", .type = SETTING_ENUM, .size = sizeof(int), .names = names };
	char why[256];
	int idx = -1;
	assert_int_equal(setting_parse(&e, "info", &idx, why, sizeof(why)), 0);
	assert_int_equal(idx, 2);
	assert_int_equal(setting_parse(&e, "INFO", &idx, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "error, warn or info");

	int32_t pid = -1;
	struct setting p = { .name = "pid", .type = SETTING_PID, .size = sizeof(pid) };
	assert_int_equal(setting_parse(&p, "0", &pid, why, sizeof(why)), 0);
	assert_int_equal(setting_parse(&p, "2147483647", &pid, why, sizeof(why)), 0);
	assert_int_equal(pid, INT32_MAX);
	assert_int_equal(setting_parse(&p, "2147483648", &pid, why, sizeof(why)), -EINVAL);
	assert_int_equal(setting_parse(&p, "-1", &pid, why, sizeof(why)), -EINVAL);

	static struct setting_pids list;
	struct setting ps = { .name = "pid", .type = SETTING_PIDS, .size = sizeof(list) };
	assert_int_equal(setting_parse(&ps, "12,34", &list, why, sizeof(why)), 0);
	assert_int_equal(setting_parse(&ps, "56", &list, why, sizeof(why)), 0); /* -p again: appended */
	assert_int_equal(list.n, 3);
	assert_int_equal(list.pids[2], 56);
	const char *const bad[] = { "", "1,,2", "1,", "0", "x", "2147483648", ",1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(setting_parse(&ps, bad[i], &list, why, sizeof(why)), -EINVAL);
	list.n = SETTING_MAX_PIDS - 1;
	assert_int_equal(setting_parse(&ps, "7,8", &list, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "at most 1024"));

	/* Each value given is appended (--otlp-header twice: two headers), up to the bound, none empty. */
	static struct setting_strings strs;
	struct setting ss = { .name = "otlp-header", .type = SETTING_STRINGS, .size = sizeof(strs) };
	assert_int_equal(setting_parse(&ss, "A=1", &strs, why, sizeof(why)), 0);
	assert_int_equal(setting_parse(&ss, "B=2", &strs, why, sizeof(why)), 0);
	assert_int_equal(strs.n, 2);
	assert_string_equal(strs.v[1], "B=2");
	assert_int_equal(setting_parse(&ss, "", &strs, why, sizeof(why)), -EINVAL);
	strs.n = SETTING_MAX_STRINGS;
	assert_int_equal(setting_parse(&ss, "C=3", &strs, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "at most 16 times"));
}

/* A value of s's type other than its default, to show which field a flag reaches. */
static const char *sample_value(const struct setting *s, char *buf, size_t len)
{
	switch (s->type) {
	case SETTING_UNSIGNED:
	case SETTING_SIZE:
	case SETTING_DURATION:
		snprintf(buf, len, "%llu", (unsigned long long)(s->min / 2 + s->max / 2) /
						   (s->multiple ? s->multiple : 1) * (s->multiple ? s->multiple : 1));
		return buf;
	case SETTING_SECONDS:
		return "2.5";
	case SETTING_PERCENT:
		return "42.5";
	case SETTING_STRING:
		return s->check ? "task-clock" : "some-value";
	case SETTING_ENUM:
		return s->names[1];
	case SETTING_PID:
	case SETTING_PIDS:
		return "4242";
	case SETTING_STRINGS:
		return "Name=value";
	case SETTING_FLAG:
		break;
	}
	return NULL;
}

/* The option --name (or -X) of c: parsed through getopt_long, it changes its own field and nothing else. */
static void check_option(const struct command_settings *c, const struct setting *s, size_t base, int use_short)
{
	static char defaults[65536], parsed[65536], expect[65536];
	char flag[64], value[64], why[256];
	const char *v = sample_value(s, value, sizeof(value));
	char *argv[] = { (char *)c->command, flag, (char *)v, NULL };
	int argc = v ? 3 : 2, operand;
	if (use_short)
		snprintf(flag, sizeof(flag), "-%c", s->short_flag);
	else
		snprintf(flag, sizeof(flag), "--%s", s->name);
	assert_int_equal(settings_defaults(c, defaults, sizeof(defaults), why, sizeof(why)), 0);
	assert_int_equal(settings_parse_command(c, argc, argv, parsed, sizeof(parsed), &operand), 0);
	assert_int_equal(operand, argc);
	memcpy(expect, defaults, sizeof(expect));
	char *field = expect + base + s->offset;
	if (v)
		assert_int_equal(setting_parse(s, v, field, why, sizeof(why)), 0);
	else
		assert_int_equal(setting_parse(s, "true", field, why, sizeof(why)), 0);
	if (s->given)
		expect[base + s->given] = 1;
	assert_memory_not_equal(expect + base + s->offset, defaults + base + s->offset, s->size);
	if (memcmp(expect, parsed, sizeof(expect))) {
		fprintf(stderr, "%s %s %s: not (only) its own field\n", c->command, flag, v ? v : "");
		fail();
	}
}

static void test_every_option_reaches_its_field(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const struct command_settings *c = all_commands[i];
		unsigned n = 0;
		for (size_t g = 0; g < c->ngroups; g++) {
			for (size_t k = 0; k < c->groups[g].count; k++, n++) {
				const struct setting *s = &c->groups[g].items[k];
				check_option(c, s, c->groups[g].base, 0);
				if (s->short_flag)
					check_option(c, s, c->groups[g].base, 1);
			}
		}
		struct option longopts[SETTINGS_MAX_OPTIONS + 2];
		char optstring[256];
		assert_int_equal(settings_getopt_tables(c, longopts, SETTINGS_MAX_OPTIONS + 2, optstring,
							sizeof(optstring)),
				 (int)n);
		assert_string_equal(longopts[n].name, "help");
		assert_null(longopts[n + 1].name);
	}
}

/* Names and short flags are unique within a command, and none takes --help's. */
static void test_tables_are_consistent(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const struct command_settings *c = all_commands[i];
		struct option longopts[SETTINGS_MAX_OPTIONS + 2];
		char optstring[256];
		int n = settings_getopt_tables(c, longopts, SETTINGS_MAX_OPTIONS + 2, optstring, sizeof(optstring));
		for (int a = 0; a < n; a++) {
			assert_string_not_equal(longopts[a].name, "help");
			assert_int_not_equal(longopts[a].val, 'h');
			for (int b = a + 1; b < n; b++) {
				assert_string_not_equal(longopts[a].name, longopts[b].name);
				assert_int_not_equal(longopts[a].val, longopts[b].val);
			}
		}
	}
}

/* The defaults a user sees are the ones the libraries fall back to when given 0. */
static void test_defaults_match_the_libraries(void **state)
{
	(void)state;
	static struct record_options r;
	struct report_options rep;
	struct diff_options d;
	char why[256];
	assert_int_equal(settings_defaults(&record_settings, &r, sizeof(r), why, sizeof(why)), 0);
	assert_int_equal(r.run.stack_size, SAMPLER_DEFAULT_STACK);
	assert_int_equal(r.run.max_stack, SESSION_DEFAULT_MAX_STACK);
	assert_int_equal(r.run.max_frames, SESSION_DEFAULT_MAX_FRAMES);
	assert_int_equal(r.run.apm_max_staleness_us, SESSION_APM_MAX_STALENESS_US);
	assert_int_equal(r.run.apm_delay_ms, CORRELATE_DEFAULT_DELAY_MS);
	assert_int_equal(r.run.unwinder, SESSION_UNWIND_DELTAS);
	assert_true(r.run.kernel && r.run.apm && r.run.go_stacks && r.run.fp_chain && r.run.realtime);
	assert_int_equal(r.run.freq_hz, 999);
	assert_string_equal(r.output, "hostprof.msgpack");
	assert_string_equal(r.run.host_id, "");
	assert_int_equal(settings_defaults(&report_settings, &rep, sizeof(rep), why, sizeof(why)), 0);
	assert_int_equal(rep.limit, REPORT_DEFAULT_LIMIT);
	assert_true(rep.percent_limit == REPORT_DEFAULT_PERCENT_LIMIT);
	assert_int_equal(rep.sort, REPORT_SORT_SELF);
	assert_false(rep.filter_pid);
	assert_int_equal(settings_defaults(&diff_settings, &d, sizeof(d), why, sizeof(why)), 0);
	assert_true(d.threshold == DIFF_DEFAULT_THRESHOLD);
	assert_int_equal(d.limit, DIFF_DEFAULT_LIMIT);
	struct daemon_config dc;
	daemon_config_defaults(&dc);
	assert_int_equal(dc.run.freq_hz, 19);
	assert_int_equal(dc.log_level, LOG_LEVEL_INFO);
	assert_int_equal(dc.max_bytes, 1ULL << 30);
}

/* record's flags and the daemon's flags and keys take the same values: `record --max-stack 1M` included. */
static void test_record_and_daemon_agree(void **state)
{
	(void)state;
	static struct record_options r;
	struct daemon_config d;
	char err[512];
	int operand;
	char *rargv[] = { "record", "--max-stack", "1M", "--stack-size", "8K", "-a", NULL };
	assert_int_equal(settings_parse_command(&record_settings, 6, rargv, &r, sizeof(r), &operand), 0);
	daemon_config_defaults(&d);
	assert_int_equal(daemon_config_set(&d, "max-stack", "1M", err, sizeof(err)), 0);
	assert_int_equal(daemon_config_set(&d, "stack-size", "8K", err, sizeof(err)), 0);
	assert_int_equal(r.run.max_stack, 1u << 20);
	assert_int_equal(d.run.max_stack, r.run.max_stack);
	assert_int_equal(d.run.stack_size, 8192);
	assert_int_equal(r.run.stack_size, 8192);
	char *bad[] = { "record", "--stack-size", "100", "-a", NULL };
	assert_int_equal(settings_parse_command(&record_settings, 4, bad, &r, sizeof(r), &operand), -EINVAL);
	assert_int_equal(daemon_config_set(&d, "stack-size", "100", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "multiple of 8"));
	/* The daemon's command line goes through the same rows. */
	char *dargv[] = { "daemon", "--max-stack", "2M", "--no-apm", "-c", "/etc/x.conf", NULL };
	assert_int_equal(settings_parse_command(&daemon_settings, 6, dargv, &d, sizeof(d), &operand), 0);
	assert_int_equal(d.run.max_stack, 2u << 20);
	assert_false(d.run.apm);
	assert_string_equal(d.config_path, "/etc/x.conf");
	size_t base;
	assert_null(settings_find_key(&daemon_settings, "config", &base)); /* a flag, not a key */
	assert_non_null(settings_find_key(&daemon_settings, "no-apm", &base));
	assert_int_equal(base, offsetof(struct daemon_config, run));
}

static void test_command_line_errors(void **state)
{
	(void)state;
	static struct record_options r;
	int operand;
	char *unknown[] = { "record", "--bogus", "-a", NULL };
	assert_int_equal(settings_parse_command(&record_settings, 3, unknown, &r, sizeof(r), &operand), -EINVAL);
	char *missing[] = { "record", "-a", "--freq", NULL };
	assert_int_equal(settings_parse_command(&record_settings, 3, missing, &r, sizeof(r), &operand), -EINVAL);
	char *flag_value[] = { "record", "--all-cpus=1", NULL };
	assert_int_equal(settings_parse_command(&record_settings, 2, flag_value, &r, sizeof(r), &operand), -EINVAL);
	char *bad_event[] = { "record", "-e", "no-such-event", "-a", NULL };
	assert_int_equal(settings_parse_command(&record_settings, 4, bad_event, &r, sizeof(r), &operand), -EINVAL);
	/* record's options end at the command: its own flags are its own. */
	char *cmd[] = { "record", "-q", "ls", "-a", "-F", "5", NULL };
	assert_int_equal(settings_parse_command(&record_settings, 6, cmd, &r, sizeof(r), &operand), 0);
	assert_int_equal(operand, 2);
	assert_false(r.all_cpus);
	assert_int_equal(r.run.freq_hz, 999);
	/* report's operands may come before its options. */
	struct report_options rep;
	char *rargs[] = { "report", "a.msgpack", "--limit", "5", NULL };
	assert_int_equal(settings_parse_command(&report_settings, 4, rargs, &rep, sizeof(rep), &operand), 0);
	assert_int_equal(rep.limit, 5);
	assert_int_equal(operand, 3);
	assert_string_equal(rargs[operand], "a.msgpack");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_unsigned_and_durations),
		cmocka_unit_test(test_decimals_bools_strings),
		cmocka_unit_test(test_enums_and_pids),
		cmocka_unit_test(test_every_option_reaches_its_field),
		cmocka_unit_test(test_tables_are_consistent),
		cmocka_unit_test(test_defaults_match_the_libraries),
		cmocka_unit_test(test_record_and_daemon_agree),
		cmocka_unit_test(test_command_line_errors),
	};
	return cmocka_run_group_tests_name("settings", tests, NULL, NULL);
}
