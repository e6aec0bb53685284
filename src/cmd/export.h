/*
 * export.h — record's and the daemon's OTLP export, made from their settings (options.h: export_settings).
 *
 * The daemon keeps one sender for its life (started again when a reload changes an otlp- setting), spooling in
 * <output>/otlp-spool; each interval's profile is encoded on the reporter's thread (reporter.h) and handed to it.
 * record sends its one profile at the end and waits for the answer (export_profile_now()).
 *
 * Errors: negative errno, and one line on the log or stderr saying what failed; a failed export never costs the
 * profile file.
 */
#ifndef HOSTPROF_CMD_EXPORT_H
#define HOSTPROF_CMD_EXPORT_H

#include <stdbool.h>

#include "src/base/log.h"
#include "src/cmd/options.h"
#include "src/export/otlp_sender.h"
#include "src/profile/profile.h"

/* The sender es asks for, spooling in spool_dir (NULL: in memory); 0 and *out NULL when no endpoint is set.
 * Returns 0, or a negative errno (said on log). */
int export_new(const struct export_settings *es, const char *spool_dir, const struct log_sink *log,
	       struct otlp_sender **out);
/* record: p encoded and sent now, waiting at most three --otlp-timeout for the receiver's answer; says the
 * outcome on stderr (unless quiet, when only failures are). Returns 0, or a negative errno. */
int export_profile_now(const struct export_settings *es, const struct profile *p, bool quiet);
/* The daemon, once per profile while exporting: what was sent, what waits, what was refused or dropped. */
void export_log(struct otlp_sender *s, const struct log_sink *log);

#endif
