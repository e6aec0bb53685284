/*
 * container_id.h — the id of the container a process runs in, from its cgroup (/proc/PID/cgroup).
 *
 * Docker, containerd, CRI-O and Podman put each container in a cgroup whose last path component carries the
 * container's 64-hex-digit id: "/system.slice/docker-<id>.scope", "/kubepods.slice/.../cri-containerd-<id>.scope",
 * ".../crio-<id>.scope", ".../libpod-<id>.scope" (cgroup v2 and systemd), or "/docker/<id>",
 * "/kubepods/besteffort/pod<uid>/<id>" (cgroup v1, cgroupfs). The id is the innermost run of exactly 64
 * lowercase hex digits that a path component starts with, after an optional "<runtime>-" prefix; Podman's and
 * CRI-O's monitor ("libpod-conmon-<id>", "crio-conmon-<id>") is not the container and is skipped. A process with
 * no such component (on the host, in a systemd unit) has no container id.
 *
 * The text is a process's: never trusted as a C string (lengths bound every read, NULs are ordinary bytes),
 * lines of any length are scanned in place, and the file is read up to CONTAINER_ID_CGROUP_MAX bytes.
 * Pure functions but container_id_read(); thread-safe.
 */
#ifndef HOSTPROF_PROCESSES_CONTAINER_ID_H
#define HOSTPROF_PROCESSES_CONTAINER_ID_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CONTAINER_ID_LEN 64
/* Far above any real cgroup file (one line per v1 hierarchy, each a path of at most a few hundred bytes). */
#define CONTAINER_ID_CGROUP_MAX (64u * 1024u)

/* The container id in the cgroup file's text[0..len): true and out (CONTAINER_ID_LEN hex digits, NUL-terminated)
 * set, from the first line that names one; false and out "" when no line does. */
bool container_id_parse(const char *text, size_t len, char out[CONTAINER_ID_LEN + 1]);

/* The container id of process pid (container_id_parse() of its /proc/PID/cgroup). Returns 1 and out set, 0 for a
 * process in no container (out ""), or a negative errno when the file cannot be read (gone, or larger than
 * CONTAINER_ID_CGROUP_MAX: -EFBIG); out is "" then. */
int container_id_read(pid_t pid, char out[CONTAINER_ID_LEN + 1]);

#endif
