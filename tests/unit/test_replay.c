/*
 * Unit tests for src/pipeline/replay.c's reader and environment on hand-built replay files (msgpack-c): a replay file that
 * is a FIFO, and a replay whose library path names a FIFO, are refused at once and said to be no regular file,
 * by the library and by `hostprof replay`; an alarm and `timeout` turn a hang into a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/regular_file.h"
#include "src/processes/execinfo.h"
#include "src/pipeline/replay.h"
#include "tests/lib/testlib.h"

#define HANG_SECONDS 20

static void pack_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

/* A replay (man/hostprof-profile.5, REPLAY FILES) of one process mapping library, one sample in it. */
static void write_replay(const char *path, const char *library)
{
	static const uint8_t file_id[16], stack[64];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 5);
	pack_str(&pk, "format");
	pack_str(&pk, REPLAY_FORMAT);
	pack_str(&pk, "version");
	msgpack_pack_uint32(&pk, REPLAY_VERSION);
	pack_str(&pk, "files");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 2);
	pack_str(&pk, "path");
	pack_str(&pk, library);
	pack_str(&pk, "file_id");
	msgpack_pack_bin_with_body(&pk, file_id, sizeof(file_id));
	pack_str(&pk, "processes");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 2);
	pack_str(&pk, "pid");
	msgpack_pack_int32(&pk, 7);
	pack_str(&pk, "mappings");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_array(&pk, 5);
	for (uint64_t v = 0, vals[] = { 0, 0x400000, 0x401000, 0, 5 }; v < 5; v++)
		msgpack_pack_uint64(&pk, vals[v]);
	pack_str(&pk, "samples");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 4);
	pack_str(&pk, "pid");
	msgpack_pack_int32(&pk, 7);
	pack_str(&pk, "tid");
	msgpack_pack_int32(&pk, 7);
	pack_str(&pk, "regs");
	msgpack_pack_array(&pk, UNWIND_NREGS);
	for (int i = 0; i < UNWIND_NREGS; i++)
		msgpack_pack_uint64(&pk, 0x400100);
	pack_str(&pk, "stack");
	msgpack_pack_bin_with_body(&pk, stack, sizeof(stack));
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fwrite(sb.data, 1, sb.size, f), sb.size);
	assert_int_equal(fclose(f), 0);
	msgpack_sbuffer_destroy(&sb);
}

static void test_replay_file_fifo_refused(void **state)
{
	(void)state;
	char *dir = test_mkdtemp(), path[512], err[512];
	struct replay *r = NULL;
	snprintf(path, sizeof(path), "%s/samples.replay", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(HANG_SECONDS);
	assert_int_equal(replay_read(path, &r, err, sizeof(err)), -EINVAL);
	alarm(0);
	assert_null(r);
	assert_non_null(strstr(err, "samples.replay: not a regular file (a FIFO)"));
	assert_int_equal(test_run("timeout %d \"$HOSTPROF\" replay %s 2> %s/err; test $? = 1", HANG_SECONDS, path, dir),
			 0);
	assert_int_equal(test_run("grep -q 'samples.replay: not a regular file (a FIFO)' %s/err", dir), 0);
	test_rmdir_rf(dir);
	free(dir);
}

/* The library a replay names is a FIFO: never opened (an open would wait for a writer), its samples skipped. */
static void test_library_fifo_refused(void **state)
{
	(void)state;
	char *dir = test_mkdtemp(), path[512], lib[512], err[512];
	struct replay *r = NULL;
	struct execinfo_mgr *em = NULL;
	struct replay_env *env = NULL;
	snprintf(path, sizeof(path), "%s/lib.replay", dir);
	snprintf(lib, sizeof(lib), "%s/libx.so", dir);
	assert_int_equal(mkfifo(lib, 0600), 0);
	write_replay(path, lib);
	assert_int_equal(replay_read(path, &r, err, sizeof(err)), 0);
	assert_int_equal(execinfo_mgr_new(&em), 0);
	alarm(HANG_SECONDS);
	assert_int_equal(replay_env_new(r, em, &env), 0);
	alarm(0);
	assert_null(replay_env_file(env, 0));
	const struct replay_file_status *st = replay_env_file_status(env, 0);
	assert_true(st->not_regular);
	assert_int_equal(st->err, -EINVAL);
	assert_string_equal(regular_file_kind(st->mode), "a FIFO");
	replay_env_free(env);
	execinfo_mgr_free(em);
	replay_free(r);
	assert_int_equal(test_run("timeout %d \"$HOSTPROF\" replay %s > %s/out 2> %s/err", HANG_SECONDS, path, dir, dir),
			 0);
	assert_int_equal(test_run("grep -q 'libx.so: not a regular file (a FIFO): the samples that need it are "
				  "skipped' %s/err", dir), 0);
	assert_int_equal(test_run("grep -q 'replay: 1 samples, 1 skipped' %s/out", dir), 0);
	test_rmdir_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replay_file_fifo_refused),
		cmocka_unit_test(test_library_fifo_refused),
	};
	return cmocka_run_group_tests_name("replay", tests, NULL, NULL);
}
