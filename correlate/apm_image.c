/*
 * apm_image.c — binding what the library does for an APM process to one image of it (one exec), and the
 * credentials that image had when it published its process storage.
 *
 * Why: hostprof runs as root, and the socket path it sends to comes from the process's memory. A socket is
 * acceptable only if the process's own user could reach it (it owns it). If that owner were compared with
 * the process's credentials at connect time, a process could publish the path of a socket only root can reach,
 * then exec a setuid-root program (kept waiting on its input) before the connect: the new image is root, the
 * check passes, and root sends to a socket the publisher's user could never reach. The exec record that would
 * make the library forget the process may be handled only after the tick that connects.
 *
 * The image's identity is its auxiliary vector (/proc/PID/auxv, opened afresh each time so it describes the
 * image the pid has now): the kernel writes it at exec and a process cannot change it (prctl(PR_SET_MM_AUXV)
 * needs CAP_SYS_RESOURCE). It holds the randomised addresses of that exec (AT_RANDOM, AT_BASE, the vDSO) and
 * the credentials it began with (AT_UID, AT_EUID, AT_GID, AT_EGID, AT_SECURE): an exec that gains privileges
 * always changes it, even without address randomisation. (An exec of the same program with the same
 * credentials and no randomisation is not told apart, and need not be: it gains nothing.) The /proc/PID/mem
 * descriptor is not enough alone: after an exec its reads return 0 only once the old address space has no
 * user left, and another process of the same user that opened it too can keep it alive by reading it.
 *
 * The protocol (correlate.c):
 * - attach: capture the image, open /proc/PID/mem, check the image again: the descriptor belongs to it;
 * - storage read: credentials, the storage through that descriptor, credentials again (equal, or retry),
 *   then check the image: the credentials were those of the image that published the path;
 * - the socket's owner is compared with those credentials, never with ones read later;
 * - right before the connect, right after it, and right before every send, the image is checked again:
 *   nothing is done for an image that is not the one the storage came from.
 * What closes the window is the comparison with the publisher's credentials: an exec after the last check
 * and before the send() gains nothing, since the socket was one the publisher's own user could reach. The
 * checks around the connect and sends keep the library from acting for a new image at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "correlate/correlate_impl.h"
#include "src/base/proc_threads.h"

int corr_image_capture(pid_t pid, struct corr_image *out)
{
	char name[64];
	snprintf(name, sizeof(name), "/proc/%d/auxv", (int)pid);
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(out->auxv) && (n = read(fd, out->auxv + len, sizeof(out->auxv) - len)) > 0)
		len += (size_t)n;
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err == -EIO ? -ESRCH : err;
	/* An empty vector: no address space any more (a zombie, or exiting). A full buffer: not a real one. */
	if (len == 0)
		return -ESRCH;
	if (len == sizeof(out->auxv))
		return -EFBIG;
	out->len = (uint32_t)len;
	return 0;
}

int corr_image_check(pid_t pid, const struct corr_image *img)
{
	struct corr_image now;
	int err = corr_image_capture(pid, &now);
	if (err)
		return err;
	return now.len == img->len && memcmp(now.auxv, img->auxv, img->len) == 0 ? 0 : -ESTALE;
}

int corr_proc_creds(pid_t pid, struct corr_creds *out)
{
	struct proc_identity id;
	int err = proc_read_identity(pid, &id);
	if (err < 0)
		return err == -ENOENT || err == -EINVAL ? -ESRCH : err;	/* gone, or no uids: not a live process */
	*out = (struct corr_creds){ .ruid = id.ruid, .euid = id.euid, .suid = id.suid, .fsuid = id.fsuid };
	return 0;
}

int corr_creds_equal(const struct corr_creds *a, const struct corr_creds *b)
{
	return a->ruid == b->ruid && a->euid == b->euid && a->suid == b->suid && a->fsuid == b->fsuid;
}
