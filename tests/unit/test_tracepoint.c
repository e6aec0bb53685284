/* Unit tests for src/tracepoint.c: the sched_switch format parsed from tracefs text, fields read bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "src/tracepoint.h"

/* Linux 6.x's format (prev_state a long at 32). */
static const char format_6[] =
	"name: sched_switch\nID: 372\nformat:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
	"\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
	"\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\n"
	"print fmt: \"prev_comm=%s prev_pid=%d\"\n";

static void test_parse_6x(void **state)
{
	struct sched_switch_format f = { 0 };
	(void)state;
	assert_int_equal(sched_switch_format_parse(format_6, strlen(format_6), &f), 0);
	assert_int_equal(f.common_type.offset, 0);
	assert_int_equal(f.common_type.size, 2);
	assert_int_equal(f.prev_pid.offset, 24);
	assert_int_equal(f.prev_state.offset, 32);
	assert_int_equal(f.prev_state.size, 8);
	assert_int_equal(f.next_pid.offset, 56);
}

/* An older layout (prev_state an unsigned int elsewhere) is read where it says, not where 6.x has it. */
static void test_parse_other_offsets(void **state)
{
	static const char old[] = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
				  "\tfield:pid_t prev_pid;\toffset:20;\tsize:4;\tsigned:1;\n"
				  "\tfield:unsigned int prev_state;\toffset:28;\tsize:4;\tsigned:0;\n";
	struct sched_switch_format f = { 0 };
	(void)state;
	assert_int_equal(sched_switch_format_parse(old, strlen(old), &f), 0);
	assert_int_equal(f.prev_pid.offset, 20);
	assert_int_equal(f.prev_state.offset, 28);
	assert_int_equal(f.prev_state.size, 4);
	assert_int_equal(f.next_pid.size, 0);	/* absent: not needed */
}

static void test_parse_refuses(void **state)
{
	static const char no_state[] = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
				       "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n";
	static const char huge[] = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
				   "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
				   "\tfield:long prev_state;\toffset:99999;\tsize:8;\tsigned:1;\n";
	static const char odd_size[] = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
				       "\tfield:pid_t prev_pid;\toffset:24;\tsize:3;\tsigned:1;\n"
				       "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n";
	struct sched_switch_format f = { 0 };
	(void)state;
	assert_int_equal(sched_switch_format_parse(no_state, strlen(no_state), &f), -EBADMSG);
	assert_int_equal(sched_switch_format_parse(huge, strlen(huge), &f), -EBADMSG);
	assert_int_equal(sched_switch_format_parse(odd_size, strlen(odd_size), &f), -EBADMSG);
	assert_int_equal(sched_switch_format_parse("", 0, &f), -EBADMSG);
}

static void test_field_get_bounded(void **state)
{
	uint8_t raw[40] = { 0 };
	uint64_t v;
	int64_t state_val = 0x100;	/* "R+": preempted */
	(void)state;
	memcpy(raw + 32, &state_val, 8);
	assert_true(tracepoint_field_get(raw, sizeof(raw), (struct tracepoint_field){ 32, 8 }, &v));
	assert_int_equal(v, 0x100);
	assert_int_equal(v & SCHED_SWITCH_STATE_MASK, 0);
	assert_false(tracepoint_field_get(raw, sizeof(raw), (struct tracepoint_field){ 36, 8 }, &v));
	assert_int_equal(v, 0);
	assert_false(tracepoint_field_get(raw, sizeof(raw), (struct tracepoint_field){ 0, 0 }, &v));
}

/* The running kernel's own format, where tracefs can be read (root): it must parse. */
static void test_read_live(void **state)
{
	struct sched_switch_format f;
	char why[256];
	(void)state;
	int err = sched_switch_format_read(&f, why, sizeof(why));
	if (err == -EACCES || err == -ENOENT || err == -EPERM) {
		assert_true(strlen(why) > 0);
		return;	/* not root, or no tracefs: the explanation is what matters */
	}
	assert_int_equal(err, 0);
	assert_true(f.id > 0);
	assert_int_equal(f.common_type.size, 2);
	assert_true(f.prev_state.size >= 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_6x),
		cmocka_unit_test(test_parse_other_offsets),
		cmocka_unit_test(test_parse_refuses),
		cmocka_unit_test(test_field_get_bounded),
		cmocka_unit_test(test_read_live),
	};
	return cmocka_run_group_tests_name("tracepoint", tests, NULL, NULL);
}
