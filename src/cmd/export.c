/*
 * export.c — the OTLP export of record and the daemon (export.h).
 */
#include "src/cmd/export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/cmd/commands.h"
#include "src/profile/otlp.h"

int export_new(const struct export_settings *es, const char *spool_dir, const struct log_sink *log,
	       struct otlp_sender **out)
{
	*out = NULL;
	if (!es->otlp_endpoint[0])
		return 0;
	struct otlp_sender_options o = { .endpoint = es->otlp_endpoint,
					 .ca_file = es->otlp_ca_file[0] ? es->otlp_ca_file : NULL,
					 .timeout_ms = es->otlp_timeout_s * 1000, .spool_dir = spool_dir,
					 .spool_max = es->otlp_spool_max, .dev_version = OTLP_PROFILES_DEVELOPMENT_VERSION,
					 .log = *log };
	for (unsigned i = 0; i < es->otlp_headers.n && i < OTLP_MAX_HEADERS; i++)
		o.headers[o.nheaders++] = es->otlp_headers.v[i];
	int err = otlp_sender_new(&o, out);
	if (err == -EINVAL)
		log_write(log, LOG_LEVEL_ERROR, "otlp: cannot send to %s: an endpoint is http://... or https://..., and a "
			  "header NAME=VALUE on one line", es->otlp_endpoint);
	else if (err < 0)
		log_write(log, LOG_LEVEL_ERROR, "otlp: cannot start sending to %s: %s", es->otlp_endpoint,
			  strerror(-err));
	return err;
}

/* record's lines go to stderr as "hostprof: ...". */
static void to_stderr(void *ctx, enum log_level level, const char *msg)
{
	struct log_stderr to = { .max_level = *(const bool *)ctx ? LOG_LEVEL_ERROR : LOG_LEVEL_INFO };
	log_stderr_write(&to, level, msg);
}

int export_profile_now(const struct export_settings *es, const struct profile *p, bool quiet)
{
	struct log_sink log = { .write = to_stderr, .ctx = &quiet };
	struct otlp_sender *s = NULL;
	struct otlp_sender_stats st;
	uint8_t *data = NULL;
	size_t len = 0;
	struct otlp_encode_options eo = { .scope_version = HOSTPROF_VERSION };
	int err = otlp_encode_profile(p, &eo, &data, &len);
	if (err < 0) {
		log_write(&log, LOG_LEVEL_ERROR, "otlp: cannot encode the profile: %s", strerror(-err));
		return err;
	}
	if ((err = export_new(es, NULL, &log, &s)) < 0 || !s) {
		free(data);
		return err;
	}
	otlp_sender_submit(s, data, len);
	unsigned left = otlp_sender_flush(s, es->otlp_timeout_s * 3000);
	otlp_sender_get_stats(s, &st);
	otlp_sender_free(s);
	if (st.sent)
		log_write(&log, LOG_LEVEL_INFO, "otlp: sent the profile to %s (%.1f KiB)", es->otlp_endpoint,
			  st.sent_bytes / 1024.0);
	else if (left)
		log_write(&log, LOG_LEVEL_ERROR, "otlp: the profile was not sent to %s in %u s: not kept (the file "
			  "has it)", es->otlp_endpoint, es->otlp_timeout_s * 3);
	return st.sent ? 0 : left ? -ETIMEDOUT : -EPROTO;
}

void export_log(struct otlp_sender *s, const struct log_sink *log)
{
	struct otlp_sender_stats st;
	if (!s)
		return;
	otlp_sender_get_stats(s, &st);
	log_write(log, st.pending > 1 ? LOG_LEVEL_WARN : LOG_LEVEL_INFO,
		  "otlp: %llu profiles sent (%.1f MiB), %u waiting (%.1f MiB), %llu refused, %llu dropped for room",
		  (unsigned long long)st.sent, st.sent_bytes / 1048576.0, st.pending, st.pending_bytes / 1048576.0,
		  (unsigned long long)st.refused, (unsigned long long)st.spool_dropped);
}
