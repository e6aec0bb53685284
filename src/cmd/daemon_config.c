/*
 * daemon_config.c — `hostprof daemon` settings: the config file read through daemon_settings' rows. See
 * daemon_config.h for the contract.
 */
#include "src/cmd/daemon_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

void daemon_config_defaults(struct daemon_config *c)
{
	char why[256];
	/* Cannot fail: tests/unit/test_settings.c applies every table's defaults. */
	settings_defaults(&daemon_settings, c, sizeof(*c), why, sizeof(why));
}

int daemon_config_set(struct daemon_config *c, const char *key, const char *value, char *err, size_t errlen)
{
	size_t base;
	char why[256];
	const struct setting *s = settings_find_key(&daemon_settings, key, &base);
	if (!s) {
		snprintf(err, errlen, "unknown key '%s'", key);
		return -ENOENT;
	}
	if (setting_parse(s, value, (char *)c + base + s->offset, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "invalid value '%s' for '%s' (%s)", value, key, why);
		return -EINVAL;
	}
	return 0;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

int daemon_config_load(struct daemon_config *c, const char *path, char *err, size_t errlen)
{
	char line[8192], msg[512];
	FILE *f = fopen(path, "re");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	int rc = 0;
	for (unsigned lineno = 1; rc == 0 && fgets(line, sizeof(line), f); lineno++) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%u: expected 'key = value'", path, lineno);
			rc = -EINVAL;
			break;
		}
		*eq = '\0';
		if ((rc = daemon_config_set(c, trim(s), trim(eq + 1), msg, sizeof(msg))) < 0)
			snprintf(err, errlen, "%s:%u: %s", path, lineno, msg);
	}
	fclose(f);
	return rc;
}
