/*
 * host_id.c — the host id: configured, else /etc/machine-id. See host_id.h for the contract.
 */
#include "src/base/host_id.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int host_id_from(const char *configured, const char *machine_id_path, char *out, size_t len)
{
	size_t cap = len < HOST_ID_MAX ? len : HOST_ID_MAX;
	out[0] = '\0';
	if (configured && configured[0]) {
		snprintf(out, cap, "%s", configured);
		out[strcspn(out, "\r\n")] = '\0';
		return 0;
	}
	FILE *f = fopen(machine_id_path, "re");
	if (!f)
		return -errno;
	int err = 0;
	if (!fgets(out, (int)cap, f)) {
		err = ferror(f) ? -EIO : 0;
		out[0] = '\0';
	}
	out[strcspn(out, "\r\n")] = '\0';
	fclose(f);
	return err;
}

int host_id_get(const char *configured, char *out, size_t len)
{
	return host_id_from(configured, HOST_ID_MACHINE_ID, out, len);
}
