/* Unit tests for src/processes/container_id.c: the container id in real cgroup files' shapes, and hostile ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/processes/container_id.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static void expect_id(const char *text, const char *want)
{
	char out[CONTAINER_ID_LEN + 1];
	bool found = container_id_parse(text, strlen(text), out);
	assert_int_equal(found, want != NULL);
	assert_string_equal(out, want ? want : "");
}

static void test_runtimes_cgroup_v2(void **state)
{
	(void)state;
	expect_id("0::/system.slice/docker-" ID ".scope\n", ID);
	expect_id("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1d2c3b4a_5e6f_7a8b_9c0d_"
		  "1e2f3a4b5c6d.slice/cri-containerd-" ID ".scope\n", ID);
	expect_id("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podabc.slice/crio-" ID
		  ".scope\n", ID);
	expect_id("0::/machine.slice/libpod-" ID ".scope\n", ID);
	/* rootless podman: the container's own cgroup under its scope */
	expect_id("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID ".scope/container\n", ID);
	/* no newline at the end */
	expect_id("0::/system.slice/docker-" ID ".scope", ID);
}

static void test_runtimes_cgroup_v1(void **state)
{
	(void)state;
	expect_id("12:pids:/docker/" ID "\n11:memory:/docker/" ID "\n0::/\n", ID);
	expect_id("5:cpu,cpuacct:/kubepods/besteffort/pod1d2c3b4a-5e6f-7a8b-9c0d-1e2f3a4b5c6d/" ID "\n", ID);
	/* hybrid: the unified line says nothing, a v1 line does */
	expect_id("0::/\n3:memory:/docker/" ID "\n", ID);
	/* docker in docker: the innermost */
	expect_id("0::/docker/" ID2 "/docker/" ID "\n", ID);
}

static void test_no_container(void **state)
{
	(void)state;
	expect_id("0::/user.slice/user-1000.slice/session-3.scope\n", NULL);
	expect_id("0::/system.slice/sshd.service\n", NULL);
	expect_id("0::/init.scope\n", NULL);
	expect_id("0::/\n", NULL);
	expect_id("", NULL);
	/* the runtimes' monitors run beside the container, not in it */
	expect_id("0::/machine.slice/libpod-conmon-" ID ".scope\n", NULL);
	expect_id("0::/kubepods.slice/crio-conmon-" ID ".scope\n", NULL);
}

static void test_hostile(void **state)
{
	(void)state;
	/* 63 and 65 digits, upper case, a digit that is not hex, a suffix that is not .scope */
	expect_id("0::/docker/" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde" "\n", NULL);
	expect_id("0::/docker/" ID "0\n", NULL);
	expect_id("0::/docker/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n", NULL);
	expect_id("0::/docker/0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef\n", NULL);
	expect_id("0::/docker-" ID ".service\n", NULL);
	expect_id("0::/x9-" ID ".scope\n", NULL);	/* a prefix that is not a runtime's name */
	/* no path: lines without their two colons */
	expect_id(ID "\n", NULL);
	expect_id("0:" ID "\n", NULL);
	/* the id in the controllers field, not the path */
	expect_id("0:" ID ":/\n", NULL);

	/* a NUL is an ordinary byte: the length bounds the text, not a terminator */
	char text[] = "0::/docker/" ID "\n";
	char out[CONTAINER_ID_LEN + 1];
	text[5] = '\0';
	assert_true(container_id_parse(text, sizeof(text) - 1, out));
	assert_string_equal(out, ID);
	text[11 + 30] = '\0';	/* in the id */
	assert_false(container_id_parse(text, sizeof(text) - 1, out));
	/* a length that cuts the id short */
	assert_false(container_id_parse("0::/docker/" ID, 11 + 40, out));

	/* a line far longer than any real one, then a real one */
	size_t n = 1u << 20;
	char *big = malloc(n + 100);
	assert_non_null(big);
	memset(big, 'a', n);
	memcpy(big, "0::/", 4);
	strcpy(big + n, "\n0::/docker/" ID "\n");
	expect_id(big, ID);
	/* a path of nothing but hex */
	big[n] = '\0';
	expect_id(big, NULL);
	free(big);
}

static void test_read_self(void **state)
{
	(void)state;
	char out[CONTAINER_ID_LEN + 1];
	int r = container_id_read(getpid(), out);
	assert_true(r == 0 || r == 1);	/* whether the tests run in a container or not */
	assert_int_equal(strlen(out), r ? CONTAINER_ID_LEN : 0);
	assert_true(container_id_read(-1, out) < 0);
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runtimes_cgroup_v2),
		cmocka_unit_test(test_runtimes_cgroup_v1),
		cmocka_unit_test(test_no_container),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_read_self),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
