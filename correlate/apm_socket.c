/*
 * apm_socket.c — reaching an APM agent's socket safely, and sending to it.
 *
 * The socket path comes from the (untrusted) process storage and is as the process sees it, inside its
 * mount namespace and root. hostprof is root, so a naive open of "/proc/PID/root" + path would let the
 * process point us anywhere through symlinks or "..": instead the path must be absolute without ".."
 * components, it is resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from an O_PATH fd of
 * /proc/PID/root (symlinks resolve inside that root, magic links such as /proc/self/root are refused), the
 * result must be a socket owned by the effective uid the process had when it published the path (a socket its
 * user could write to anyway; the caller passes those credentials, bound to that image: apm_image.c),
 * and we connect through "/proc/self/fd/N" of the O_PATH fd: that names exactly the inode we checked (no race
 * with a rename) and stays short whatever the length of the path under /proc/PID/root (sun_path is 108
 * bytes). Sends never block (MSG_DONTWAIT): a full receiver queue is the caller's EAGAIN to retry.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "correlate/correlate_impl.h"

int corr_open_in_root(pid_t pid, const char *path, int flags)
{
	char name[64];
	snprintf(name, sizeof(name), "/proc/%d/root", (int)pid);
	int root = open(name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -ESRCH;	/* gone, or a zombie: it has no root any more */
	while (*path == '/')
		path++;
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	/* glibc 2.36 has no openat2() wrapper. */
	long fd = *path ? syscall(SYS_openat2, root, path, &how, sizeof(how)) : (errno = ENOENT, -1);
	int ret = fd < 0 ? -errno : (int)fd;
	close(root);
	return ret;
}

/* Absolute, and no ".." component (RESOLVE_IN_ROOT would contain it, but such a path is never honest). */
static int path_acceptable(const char *path)
{
	if (path[0] != '/')
		return 0;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 0;
		p += n;
		while (*p == '/')
			p++;
	}
	return 1;
}

static enum corr_sock_problem connect_fd(int pathfd, struct corr_sock *out, char *why, size_t whylen)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d", pathfd);
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		snprintf(why, whylen, "connect failed (%s)", strerror(errno));
		if (s >= 0)
			close(s);
		return CORR_SOCK_CONNECT;
	}
	out->fd = s;
	return CORR_SOCK_OK;
}

enum corr_sock_problem corr_socket_open(pid_t pid, const char *path, const struct corr_creds *creds,
					struct corr_sock *out, char *why, size_t whylen)
{
	uid_t euid = creds->euid;
	struct stat st;
	if (!path_acceptable(path)) {
		snprintf(why, whylen, "socket path '%s' is not absolute or has a '..' component", path);
		return CORR_SOCK_BAD_PATH;
	}
	int fd = corr_open_in_root(pid, path, O_PATH);
	if (fd < 0) {
		snprintf(why, whylen, "socket path '%s' does not resolve inside the process's root (%s)", path,
			 strerror(-fd));
		return fd == -ESRCH ? CORR_SOCK_PROC : CORR_SOCK_RESOLVE;
	}
	enum corr_sock_problem p = CORR_SOCK_OK;
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		snprintf(why, whylen, "'%s' is not a socket", path);
		p = CORR_SOCK_NOT_SOCKET;
	} else if (st.st_uid != euid || creds->fsuid != euid) {
		snprintf(why, whylen, "socket '%s' is owned by uid %u, not by the euid %u (fsuid %u) the process "
			 "had when it published the path", path, (unsigned)st.st_uid, (unsigned)euid,
			 (unsigned)creds->fsuid);
		p = CORR_SOCK_OWNER;
	} else {
		p = connect_fd(fd, out, why, whylen);
		out->dev = st.st_dev;
		out->ino = st.st_ino;
	}
	close(fd);
	return p;
}

int corr_socket_send(void *sock, const void *buf, size_t len)
{
	const struct corr_sock *s = sock;
	ssize_t n = send(s->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0)
		return -EMSGSIZE;
	return errno == EWOULDBLOCK ? -EAGAIN : -errno;
}
