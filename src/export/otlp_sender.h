/*
 * otlp_sender.h — OTLP/HTTP export of profiles to an OpenTelemetry Collector, off the caller's thread, losing
 * nothing while the receiver is down.
 *
 * The caller hands each encoded ExportProfilesServiceRequest to otlp_sender_submit(): it goes into the spool
 * (otlp_spool.h: on disk in the daemon, so that it outlives a restart; bounded, the oldest going first) and a
 * thread of the sender's own sends the spool in order: POST {endpoint}/v1development/profiles, binary protobuf,
 * gzip, with the development revision of the profiles protocol the encoder follows in its header. The thread
 * that drains the sampling rings never waits for the network.
 *
 * What a response means (the OTLP/HTTP specification's rules):
 * - 2xx: delivered; the request leaves the spool.
 * - 429, 502, 503, 504, a timeout or a connection error: the receiver may take it later. The same request is
 *   tried again after an exponential backoff with jitter (retry_initial_ms doubling up to retry_max_ms), or
 *   after the Retry-After the receiver gave; the requests behind it wait, so the order holds.
 * - any other status (400: the receiver will never accept it): dropped, said once per distinct message with the
 *   status and the receiver's message (the body's google.rpc.Status, or its text, escaped), counted after that.
 * Header values (authentication) are never logged.
 *
 * Ownership: o's strings are copied. Threads: submit, flush, stats and free are called from one thread, the
 * caller's; the sending thread blocks every signal. Errors: negative errno; a request that cannot be spooled is
 * said in the log and counted, and the caller's work goes on.
 */
#ifndef HOSTPROF_OTLP_SENDER_H
#define HOSTPROF_OTLP_SENDER_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/log.h"

#define OTLP_PROFILES_PATH "/v1development/profiles"
#define OTLP_DEFAULT_TIMEOUT_MS 10000
#define OTLP_DEFAULT_SPOOL_MAX (256ULL << 20)
#define OTLP_MAX_HEADERS 16

struct otlp_sender_options {
	const char *endpoint;		/* http:// or https:// base URL; the profiles path is appended */
	const char *headers[OTLP_MAX_HEADERS];	/* "Name=Value" each (authentication), never logged */
	unsigned nheaders;
	const char *ca_file;		/* TLS: the CA bundle to verify the receiver with (NULL: the system's) */
	unsigned timeout_ms;		/* per request (0: OTLP_DEFAULT_TIMEOUT_MS) */
	const char *spool_dir;		/* where unsent requests wait (NULL: in memory) */
	uint64_t spool_max;		/* bytes (0: OTLP_DEFAULT_SPOOL_MAX) */
	unsigned retry_initial_ms;	/* first backoff (0: 1000) */
	unsigned retry_max_ms;		/* longest backoff, and longest Retry-After honoured (0: 60000) */
	const char *dev_version;	/* the OTLP-Profiles-Development-Version header's value (NULL: none) */
	struct log_sink log;
};

struct otlp_sender_stats {
	uint64_t sent, sent_bytes;	/* requests delivered (2xx), and their bytes before gzip */
	uint64_t retries;		/* tries that will be repeated */
	uint64_t refused;		/* requests the receiver refused for good (dropped) */
	uint64_t spool_dropped;		/* requests dropped to keep the spool within its bound */
	unsigned pending;		/* requests waiting (in the spool, the one being sent included) */
	uint64_t pending_bytes;
	int last_status;		/* the last response's HTTP status, 0: none or a transport error */
};

struct otlp_sender;

/* Checks the endpoint (-EINVAL: not http:// or https://, or a header without '='), opens the spool (its earlier
 * requests are sent first) and starts the thread. Returns 0 and *out, or a negative errno. */
int otlp_sender_new(const struct otlp_sender_options *o, struct otlp_sender **out);
/* Queue a request (ownership of data, malloc'd, taken on every path). Returns 0, or a negative errno (the
 * request is then dropped and counted). */
int otlp_sender_submit(struct otlp_sender *s, uint8_t *data, size_t len);
/* Send what is waiting, waiting at most deadline_ms (a backoff past the deadline ends the wait). Returns how
 * many requests are still waiting (kept in the spool when it is on disk). */
unsigned otlp_sender_flush(struct otlp_sender *s, unsigned deadline_ms);
void otlp_sender_get_stats(struct otlp_sender *s, struct otlp_sender_stats *out);
/* Stops the thread after the request in flight (if any) and frees; the spool on disk stays for the next run. */
void otlp_sender_free(struct otlp_sender *s);

#endif
