/*
 * daemon_config.c — `hostprof daemon` settings. See daemon_config.h for the contract.
 */
#include "src/cmd/daemon_config.h"
#include "src/session.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void daemon_config_defaults(struct daemon_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->output_dir, sizeof(c->output_dir), "/var/lib/hostprof");
	snprintf(c->event, sizeof(c->event), "cpu-clock");
	snprintf(c->unwinder, sizeof(c->unwinder), "deltas");
	c->freq_hz = 19;		/* as the eBPF profilers: cheap enough to leave on everywhere */
	c->interval_s = 60;
	c->max_files = 1440;		/* a day of one-minute profiles */
	c->max_bytes = 1ULL << 30;
	c->prob_threshold = 100;
	c->prob_interval_s = 60;
	c->stack_size = 16384;
	c->max_stack = SESSION_DEFAULT_MAX_STACK;
	c->max_frames = SESSION_DEFAULT_MAX_FRAMES;
	c->max_processes = 4096;
	c->forget_idle_s = 300;
	c->apm = 1;
	c->go_stacks = 1;
	c->fp_chain = 1;
	c->realtime = 1;
	c->use_cache = 1;
	c->kernel = 1;
	c->log_level = LOG_LEVEL_INFO;
}

static int parse_unsigned(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!*v || *v == '-')
		return -EINVAL;
	unsigned long long x = strtoull(v, &end, 10);
	uint64_t mult = 1;
	if (*end && !end[1] && strchr("kKmMgG", *end))
		mult = strchr("kK", *end) ? 1ULL << 10 : strchr("mM", *end) ? 1ULL << 20 : 1ULL << 30;
	else if (*end)
		return -EINVAL;
	if (errno || x > max / mult || x * mult < min)
		return -EINVAL;
	*out = x * mult;
	return 0;
}

static int parse_bool(const char *v, int *out)
{
	if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1") || !strcmp(v, "on"))
		*out = 1;
	else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0") || !strcmp(v, "off"))
		*out = 0;
	else
		return -EINVAL;
	return 0;
}

static int set_string(char *dst, size_t size, const char *v)
{
	if (!*v || strlen(v) >= size)
		return -EINVAL;
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

/* Seconds as "90", "90s", "2m30s" or "1h" (the eBPF profiler's duration syntax, whole seconds). */
static int parse_duration(const char *v, uint64_t *out)
{
	uint64_t total = 0;
	const char *p = v;
	if (!*v)
		return -EINVAL;
	while (*p) {
		char *end;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		errno = 0;
		unsigned long long x = strtoull(p, &end, 10);
		if (errno || x > UINT32_MAX)
			return -EINVAL;
		if (!*end) {
			if (p != v)
				return -EINVAL; /* "2m30": 30 what? */
			total = x;
			break;
		}
		uint64_t unit = *end == 'h' ? 3600 : *end == 'm' ? 60 : *end == 's' ? 1 : 0;
		if (!unit)
			return -EINVAL;
		total += x * unit;
		p = end + 1;
	}
	*out = total;
	return 0;
}

struct uint_key {
	const char *key;
	size_t offset;
	uint64_t min, max;
	int duration;
};

#define UKEY(k, field, lo, hi) { k, offsetof(struct daemon_config, field), lo, hi, 0 }
#define DKEY(k, field, lo, hi) { k, offsetof(struct daemon_config, field), lo, hi, 1 }

static const struct uint_key uint_keys[] = {
	UKEY("freq", freq_hz, 1, 100000),
	DKEY("interval", interval_s, 1, 86400),
	UKEY("max-files", max_files, 0, 1000000),
	UKEY("probabilistic-threshold", prob_threshold, 1, 100),
	DKEY("probabilistic-interval", prob_interval_s, 1, 86400),
	UKEY("stack-size", stack_size, 8, 65528),
	UKEY("max-stack", max_stack, 0, SESSION_MAX_STACK_LIMIT),
	UKEY("max-frames", max_frames, 1, SESSION_MAX_FRAMES_LIMIT),
	UKEY("max-processes", max_processes, 0, 1000000),
	DKEY("forget-idle", forget_idle_s, 1, 86400 * 7),
	UKEY("apm-delay-ms", apm_delay_ms, 1, 60000),
	UKEY("apm-max-staleness-us", apm_max_staleness_us, 1, 1000000),
};

static int set_uint(struct daemon_config *c, const struct uint_key *k, const char *v)
{
	uint64_t x;
	if (k->duration ? parse_duration(v, &x) < 0 || x < k->min || x > k->max
			: parse_unsigned(v, k->min, k->max, &x) < 0)
		return -EINVAL;
	*(unsigned *)((char *)c + k->offset) = (unsigned)x;
	return 0;
}

static int set_log_level(struct daemon_config *c, const char *v)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	for (int i = 0; i < 4; i++) {
		if (!strcmp(v, names[i])) {
			c->log_level = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int set_other(struct daemon_config *c, const char *key, const char *v)
{
	int b;
	if (!strcmp(key, "output"))
		return set_string(c->output_dir, sizeof(c->output_dir), v);
	if (!strcmp(key, "event"))
		return set_string(c->event, sizeof(c->event), v);
	if (!strcmp(key, "host-id"))
		return set_string(c->host_id, sizeof(c->host_id), v);
	if (!strcmp(key, "unwinder")) {
		if (strcmp(v, "deltas") && strcmp(v, "libunwind"))
			return -EINVAL;
		return set_string(c->unwinder, sizeof(c->unwinder), v);
	}
	if (!strcmp(key, "max-bytes"))
		return parse_unsigned(v, 0, UINT64_MAX, &c->max_bytes);
	if (!strcmp(key, "log-level"))
		return set_log_level(c, v);
	static const struct {
		const char *key;
		size_t offset;
	} negated[] = {
		{ "no-apm", offsetof(struct daemon_config, apm) },
		{ "no-kernel", offsetof(struct daemon_config, kernel) },
		{ "no-go-stacks", offsetof(struct daemon_config, go_stacks) },
		{ "no-fp-chain", offsetof(struct daemon_config, fp_chain) },
		{ "no-realtime", offsetof(struct daemon_config, realtime) },
		{ "no-cache", offsetof(struct daemon_config, use_cache) },
	};
	for (size_t i = 0; i < sizeof(negated) / sizeof(negated[0]); i++) {
		if (strcmp(key, negated[i].key))
			continue;
		if (parse_bool(v, &b) < 0)
			return -EINVAL;
		*(int *)((char *)c + negated[i].offset) = !b;
		return 0;
	}
	return -ENOENT;
}

int daemon_config_set(struct daemon_config *c, const char *key, const char *value, char *err, size_t errlen)
{
	int rc = -ENOENT;
	for (size_t i = 0; i < sizeof(uint_keys) / sizeof(uint_keys[0]); i++) {
		if (!strcmp(key, uint_keys[i].key))
			rc = set_uint(c, &uint_keys[i], value);
	}
	if (rc == -ENOENT)
		rc = set_other(c, key, value);
	if (rc == -ENOENT)
		snprintf(err, errlen, "unknown key '%s'", key);
	else if (rc < 0)
		snprintf(err, errlen, "invalid value '%s' for '%s'", value, key);
	return rc;
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
	char line[8192], msg[256];
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

int daemon_config_validate(const struct daemon_config *c, char *err, size_t errlen)
{
	if (c->stack_size % 8) {
		snprintf(err, errlen, "stack-size must be a multiple of 8 (got %u)", c->stack_size);
		return -EINVAL;
	}
	return 0;
}
