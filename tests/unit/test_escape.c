/*
 * Unit tests of escape.c (what a process-supplied string becomes before a log or a terminal sees it) and of the
 * printing log sink (log.c), which escapes every message once more.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/escape.h"
#include "src/base/log.h"

static const char *esc(const char *s, unsigned flags)
{
	static char buf[1024];
	escape_bytes(buf, sizeof(buf), s, strlen(s), flags);
	return buf;
}

static void test_controls_escaped(void **state)
{
	(void)state;
	assert_string_equal(esc("plain text 123 ~!", 0), "plain text 123 ~!");
	assert_string_equal(esc("a\nb\rc\td", 0), "a\\nb\\rc\\td");
	assert_string_equal(esc("\033[31mred\033[0m", 0), "\\x1b[31mred\\x1b[0m");
	assert_string_equal(esc("bell\007del\177", 0), "bell\\x07del\\x7f");
	assert_string_equal(esc("svc\n<0>hostprof: emerg: x", 0), "svc\\n<0>hostprof: emerg: x");
	/* a backslash doubles, so "\n" written by the process and a newline read back differently */
	assert_string_equal(esc("a\\nb", 0), "a\\\\nb");
	assert_string_equal(esc("a\\nb\n", ESCAPE_KEEP_BACKSLASH), "a\\nb\\n");
	/* embedded NULs are bytes like the others */
	char out[64];
	assert_int_equal(escape_bytes(out, sizeof(out), "a\0b", 3, 0), 6);
	assert_string_equal(out, "a\\x00b");
}

static void test_utf8(void **state)
{
	(void)state;
	/* valid multi-byte characters (2, 3 and 4 bytes) are kept */
	assert_string_equal(esc("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	/* invalid: a lone continuation, a cut sequence, overlong forms, a surrogate, past U+10FFFF, 0xff */
	assert_string_equal(esc("\x80", 0), "\\x80");
	assert_string_equal(esc("\xe2\x82", 0), "\\xe2\\x82");
	assert_string_equal(esc("\xe2\x82x", 0), "\\xe2\\x82x");
	assert_string_equal(esc("\xc0\xaf", 0), "\\xc0\\xaf");
	assert_string_equal(esc("\xe0\x80\xaf", 0), "\\xe0\\x80\\xaf");
	assert_string_equal(esc("\xf0\x80\x80\xaf", 0), "\\xf0\\x80\\x80\\xaf");
	assert_string_equal(esc("\xed\xa0\x80", 0), "\\xed\\xa0\\x80");
	assert_string_equal(esc("\xf4\x90\x80\x80", 0), "\\xf4\\x90\\x80\\x80");
	assert_string_equal(esc("\xff", 0), "\\xff");
	/* valid UTF-8 that controls text: C1 CSI, line separator, right-to-left override */
	assert_string_equal(esc("\xc2\x9b" "2J", 0), "\\xc2\\x9b2J");
	assert_string_equal(esc("a\xe2\x80\xa8" "b", 0), "a\\xe2\\x80\\xa8b");
	assert_string_equal(esc("\xe2\x80\xae" "txt", 0), "\\xe2\\x80\\xaetxt");
	/* the last code points either side of those ranges are ordinary */
	assert_string_equal(esc("\xc2\xa0\xe2\x80\xa7\xe2\x81\xa5", 0), "\xc2\xa0\xe2\x80\xa7\xe2\x81\xa5");
}

/* Output never passes size - 1 bytes, never cuts an escape or a character, and marks a cut with "...". */
static void test_bounded(void **state)
{
	(void)state;
	char out[16];
	memset(out, 'Z', sizeof(out));
	assert_int_equal(escape_bytes(out, 8, "abcdefghij", 10, 0), 7);
	assert_string_equal(out, "abcd...");
	assert_int_equal(out[8], 'Z');
	assert_int_equal(escape_bytes(out, 8, "abcdefg", 7, 0), 7); /* fits exactly: no marker */
	assert_string_equal(out, "abcdefg");
	assert_int_equal(escape_bytes(out, 9, "ab\033\033", 4, 0), 5);
	assert_string_equal(out, "ab...");	/* "ab\x1b" + "..." is 9 bytes: the escape is not cut */
	assert_int_equal(escape_bytes(out, 8, "a\xe2\x82\xac\xe2\x82\xacx", 8, 0), 7);
	assert_string_equal(out, "a\xe2\x82\xac...");
	assert_int_equal(escape_bytes(out, 3, "abcdef", 6, 0), 2);	/* no room for the marker */
	assert_string_equal(out, "ab");
	assert_int_equal(escape_bytes(out, 1, "abc", 3, 0), 0);
	assert_string_equal(out, "");
	memset(out, 'Z', sizeof(out));
	assert_int_equal(escape_bytes(out, 0, "abc", 3, 0), 0);
	assert_int_equal(out[0], 'Z');
	/* the worst case fits ESCAPE_SIZE */
	char big[ESCAPE_SIZE(4)];
	assert_int_equal(escape_bytes(big, sizeof(big), "\x01\x02\x03\x04", 4, 0), 16);
	assert_string_equal(escape_str(big, sizeof(big), NULL), "(null)");
}

/* The sink: one line per message, escaped, with the journald priority of its level or the level's name. */
static void test_stderr_sink(void **state)
{
	(void)state;
	char path[] = "/tmp/hostprof-escape-XXXXXX", text[512] = "";
	int fd = mkstemp(path), saved = dup(2);
	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	dup2(fd, 2);
	struct log_stderr journal = { .max_level = LOG_LEVEL_INFO, .journal = 1 };
	struct log_stderr plain = { .max_level = LOG_LEVEL_WARN };
	log_stderr_write(&journal, LOG_LEVEL_INFO, "service 'svc\n<0>hostprof: emerg: x\033[2J'");
	log_stderr_write(&journal, LOG_LEVEL_DEBUG, "dropped: above the level");
	log_stderr_write(&journal, LOG_LEVEL_ERROR, "a\\nb");
	log_stderr_write(&plain, LOG_LEVEL_WARN, "warned\r");
	log_stderr_write(&plain, LOG_LEVEL_INFO, "dropped too");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	unlink(path);
	assert_true(n > 0);
	assert_string_equal(text, "<6>hostprof: service 'svc\\n<0>hostprof: emerg: x\\x1b[2J'\n"
				  "<3>hostprof: a\\nb\n"
				  "hostprof: warning: warned\\r\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_controls_escaped),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_stderr_sink),
	};
	return cmocka_run_group_tests_name("escape", tests, NULL, NULL);
}
