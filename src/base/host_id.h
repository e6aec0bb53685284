/*
 * host_id.h — the id of this host, as profile headers record it and APM agents receive it.
 *
 * The id configured (`record --host-id`, the daemon's --host-id or `host-id =`) when one is given, else the
 * first line of /etc/machine-id (systemd's 32 hex digits), else "". `record`, the daemon and the APM
 * correlation all take it from here, so a profile's header and the agents name a host the same way.
 *
 * The result is at most HOST_ID_MAX - 1 bytes (longer ids are cut) and never holds a line break. No
 * allocation; thread-safe.
 */
#ifndef HOSTPROF_BASE_HOST_ID_H
#define HOSTPROF_BASE_HOST_ID_H

#include <stddef.h>

#define HOST_ID_MAX 128
#define HOST_ID_MACHINE_ID "/etc/machine-id"

/*
 * The host id into out (len bytes, at least 1): configured if it is neither NULL nor "", else the first line
 * of machine_id_path. Returns 0, or the negative errno of opening or reading that file (out is then "").
 */
int host_id_from(const char *configured, const char *machine_id_path, char *out, size_t len);

/* host_id_from(configured, HOST_ID_MACHINE_ID, out, len). */
int host_id_get(const char *configured, char *out, size_t len);

#endif
