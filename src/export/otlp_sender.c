/*
 * otlp_sender.c — the OTLP/HTTP sending thread: spool in order, gzip, POST, retry or drop (otlp_sender.h).
 */
#include "src/export/otlp_sender.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "src/base/clock.h"
#include "src/base/escape.h"
#include "src/base/gzip.h"
#include "src/base/hindex.h"
#include "src/export/otlp_spool.h"
#include "src/export/proto/rpc_status.pb-c.h"

/* The most of a response body read: a receiver's error message, not its data. */
#define RESPONSE_MAX 65536

/* libcurl, opened when a sender starts (dlopen): every other command of hostprof, and record and the daemon
 * without an endpoint, start without its ~30 libraries (TLS, IDN, HTTP/2, ...), which doubled the start-up of
 * `hostprof report`. The functions hostprof calls, by name. */
struct curl_api {
	void *lib;
	CURLcode (*global_init)(long flags);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	void (*easy_reset)(CURL *curl);
	void (*easy_cleanup)(CURL *curl);
	CURLcode (*easy_setopt)(CURL *curl, CURLoption option, ...);
	CURLcode (*easy_perform)(CURL *curl);
	CURLcode (*easy_getinfo)(CURL *curl, CURLINFO info, ...);
	const char *(*easy_strerror)(CURLcode code);
	struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
	void (*slist_free_all)(struct curl_slist *list);
};

#define CURL_LIBRARY "libcurl.so.4"

/* The library and its functions; -ENOENT (said in log) when it is not installed. */
static int curl_api_open(struct curl_api *a, const struct log_sink *log)
{
	static const char *const names[] = { "curl_global_init", "curl_global_cleanup", "curl_easy_init",
					     "curl_easy_reset", "curl_easy_cleanup", "curl_easy_setopt",
					     "curl_easy_perform", "curl_easy_getinfo", "curl_easy_strerror",
					     "curl_slist_append", "curl_slist_free_all" };
	void **slots[] = { (void **)&a->global_init, (void **)&a->global_cleanup, (void **)&a->easy_init,
			   (void **)&a->easy_reset, (void **)&a->easy_cleanup, (void **)&a->easy_setopt,
			   (void **)&a->easy_perform, (void **)&a->easy_getinfo, (void **)&a->easy_strerror,
			   (void **)&a->slist_append, (void **)&a->slist_free_all };
	if (!(a->lib = dlopen(CURL_LIBRARY, RTLD_NOW | RTLD_LOCAL))) {
		log_write(log, LOG_LEVEL_ERROR, "otlp: cannot load %s (%s): install the libcurl4 package to send "
			  "profiles", CURL_LIBRARY, dlerror());
		return -ENOENT;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(*slots[i] = dlsym(a->lib, names[i]))) {
			log_write(log, LOG_LEVEL_ERROR, "otlp: %s has no %s: too old a libcurl", CURL_LIBRARY, names[i]);
			dlclose(a->lib);
			a->lib = NULL;
			return -ENOENT;
		}
	}
	return 0;
}

struct otlp_sender {
	char *url, *url_for_log, *ca_file;	/* url_for_log: without user:password@ */
	struct curl_api curl;		/* libcurl's functions (dlopen'd) */
	bool curl_inited;		/* its global state made (curl_global_init) */
	struct curl_slist *headers;
	unsigned timeout_ms, retry_initial_ms, retry_max_ms;
	struct log_sink log;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;		/* guards everything below */
	pthread_cond_t cond;		/* work arrived, a request was done with, or stop */
	struct otlp_spool *spool;
	bool stop, sending;
	uint64_t next_try_ns;		/* a backoff: nothing is sent before */
	unsigned backoff_ms;
	struct otlp_sender_stats stats;
	uint64_t refused_said;		/* the message last refused with, hashed: said once */
	bool failing;			/* transport failures since the last delivery: said once per streak */
};

/* The result of one try. */
enum outcome { DELIVERED, RETRY, REFUSED };

struct response {
	char body[RESPONSE_MAX];
	size_t len;
};

static size_t on_body(char *ptr, size_t size, size_t n, void *arg)
{
	struct response *r = arg;
	size_t bytes = size * n, room = sizeof(r->body) - 1 - r->len;
	memcpy(r->body + r->len, ptr, bytes < room ? bytes : room);
	r->len += bytes < room ? bytes : room;
	return bytes;	/* the rest is not needed, but taken: the connection stays usable */
}

/* data gzip'd into *out (malloc'd): the body as it goes on the wire. 0, -ENOMEM or -EIO. */
static int gzip(const uint8_t *data, size_t len, uint8_t **out, size_t *out_len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return -ENOMEM;
	int err = gzip_write(data, len, f);
	if (fclose(f) != 0 && err == 0)
		err = -ENOMEM;
	if (err < 0) {
		free(buf);
		return err;
	}
	*out = (uint8_t *)buf;
	*out_len = size;
	return 0;
}

/* The receiver's message from a refused response: its google.rpc.Status, or its text; escaped, bounded. */
static void refusal_message(const struct response *r, char *out, size_t size)
{
	Google__Rpc__Status *st = google__rpc__status__unpack(NULL, r->len, (const uint8_t *)r->body);
	const char *msg = st && st->message && st->message[0] ? st->message : NULL;
	if (msg)
		escape_str(out, size, msg);
	else
		escape_bytes(out, size, r->body, r->len, 0);
	if (st)
		google__rpc__status__free_unpacked(st, NULL);
}


/* curl's progress callback: a request in flight ends when the sender stops, so that stopping waits for no
 * timeout (the request stays in the spool). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return __atomic_load_n(&((struct otlp_sender *)arg)->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

/* POST one request (gzip'd body). *status: the HTTP status, 0 for a transport error; *retry_after_s: the
 * receiver's Retry-After, -1 if none. */
static enum outcome post(struct otlp_sender *s, CURL *curl, const uint8_t *body, size_t len, struct response *r,
			 long *status, long *retry_after_s, char *err, size_t err_size)
{
	char curl_err[CURL_ERROR_SIZE] = "";
	curl_off_t after = -1;
	s->curl.easy_reset(curl);
	s->curl.easy_setopt(curl, CURLOPT_URL, s->url);
	s->curl.easy_setopt(curl, CURLOPT_HTTPHEADER, s->headers);
	s->curl.easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	s->curl.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	s->curl.easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	s->curl.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	s->curl.easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
	s->curl.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	s->curl.easy_setopt(curl, CURLOPT_WRITEDATA, r);
	s->curl.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	s->curl.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	s->curl.easy_setopt(curl, CURLOPT_XFERINFODATA, s);
	s->curl.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	if (s->ca_file)
		s->curl.easy_setopt(curl, CURLOPT_CAINFO, s->ca_file);
	r->len = 0;
	*status = 0;
	*retry_after_s = -1;
	CURLcode rc = s->curl.easy_perform(curl);
	if (rc != CURLE_OK) {
		escape_str(err, err_size, curl_err[0] ? curl_err : s->curl.easy_strerror(rc));
		return RETRY;
	}
	s->curl.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
	if (s->curl.easy_getinfo(curl, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && after >= 0)
		*retry_after_s = (long)after;
	r->body[r->len] = '\0';
	if (*status >= 200 && *status < 300)
		return DELIVERED;
	if (*status == 429 || *status == 502 || *status == 503 || *status == 504)
		return RETRY;
	return REFUSED;
}

/* The next backoff: doubled, capped, with up to a fifth of jitter either way (many hosts retrying in step
 * would come back to a recovering collector all at once). A Retry-After the receiver gave wins, capped. */
static uint64_t backoff_ns(struct otlp_sender *s, long retry_after_s)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)clock_mono_ns();
	uint64_t ms = s->backoff_ms ? s->backoff_ms : s->retry_initial_ms;
	s->backoff_ms = ms * 2 > s->retry_max_ms ? s->retry_max_ms : (unsigned)(ms * 2);
	ms = ms * 4 / 5 + r % (ms * 2 / 5 + 1);
	/* Not sooner than a tenth of a second: "Retry-After: 0" again and again would be a busy loop. */
	if (retry_after_s >= 0)
		ms = (uint64_t)retry_after_s * 1000 < s->retry_max_ms ? (uint64_t)retry_after_s * 1000 : s->retry_max_ms;
	ms = ms < 100 ? 100 : ms;
	return ms * 1000000ULL;
}

/* What a try came to, said and counted; the spool advanced when the request is done with. Under the lock. */
static void settle(struct otlp_sender *s, enum outcome o, size_t len, long status, long retry_after_s,
		   const struct response *r, const char *err)
{
	char msg[512];
	s->stats.last_status = (int)status;
	if (o == DELIVERED) {
		s->stats.sent++;
		s->stats.sent_bytes += len;
		if (s->failing)
			log_write(&s->log, LOG_LEVEL_INFO, "otlp: the receiver takes profiles again (%u waiting)",
				  otlp_spool_count(s->spool) - 1);
		s->failing = false;
		s->backoff_ms = 0;
		otlp_spool_pop(s->spool);
	} else if (o == REFUSED) {
		refusal_message(r, msg, sizeof(msg));
		uint64_t h = hash_u64(hash_str(HASH_SEED, msg), (uint64_t)status);
		if (h != s->refused_said)
			log_write(&s->log, LOG_LEVEL_ERROR, "otlp: the receiver refused a profile for good (HTTP %ld: %s): "
				  "dropped; more refusals like it are counted, not said", status, msg[0] ? msg : "no message");
		s->refused_said = h;
		s->stats.refused++;
		s->backoff_ms = 0;
		otlp_spool_pop(s->spool);
	} else {
		s->stats.retries++;
		otlp_spool_release(s->spool);
		s->next_try_ns = clock_mono_ns() + backoff_ns(s, retry_after_s);
		if (!s->failing && status)
			log_write(&s->log, LOG_LEVEL_WARN, "otlp: cannot send to %s (HTTP %ld): %u profiles wait, tried "
				  "again with backoff", s->url_for_log, status, otlp_spool_count(s->spool));
		else if (!s->failing)
			log_write(&s->log, LOG_LEVEL_WARN, "otlp: cannot send to %s (%s): %u profiles wait, tried again "
				  "with backoff", s->url_for_log, err, otlp_spool_count(s->spool));
		s->failing = true;
	}
}

/* Whether a try is due: something waits, no backoff runs, not stopping. Under the lock. */
static bool due(struct otlp_sender *s, uint64_t now)
{
	return !s->stop && otlp_spool_count(s->spool) && now >= s->next_try_ns;
}

/* Wait under the lock until a try is due or stop; false on stop. */
static bool wait_due(struct otlp_sender *s)
{
	for (uint64_t now = clock_mono_ns(); !s->stop && !due(s, now); now = clock_mono_ns()) {
		if (!otlp_spool_count(s->spool) || s->next_try_ns <= now) {
			pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t until = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + (s->next_try_ns - now);
		ts = (struct timespec){ .tv_sec = (time_t)(until / 1000000000ULL), .tv_nsec = (long)(until % 1000000000ULL) };
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	return !s->stop;
}

/* One try of the oldest request, the lock let go while on the network. Under the lock. */
static void try_oldest(struct otlp_sender *s, CURL *curl, struct response *r)
{
	uint8_t *data = NULL, *body = NULL;
	size_t len = 0, body_len = 0;
	long status = 0, retry_after = -1;
	char err[256] = "";
	if (otlp_spool_peek(s->spool, &data, &len) < 0)
		return;
	s->sending = true;
	pthread_mutex_unlock(&s->lock);
	enum outcome o = RETRY;
	if (gzip(data, len, &body, &body_len) == 0)
		o = post(s, curl, body, body_len, r, &status, &retry_after, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "cannot compress the request");
	free(body);
	free(data);
	pthread_mutex_lock(&s->lock);
	s->sending = false;
	settle(s, o, len, status, retry_after, r, err);
	pthread_cond_broadcast(&s->cond);
}

static void *sender_main(void *arg)
{
	struct otlp_sender *s = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);	/* signals are the caller's (they interrupt its poll) */
	CURL *curl = s->curl.easy_init();
	struct response *r = malloc(sizeof(*r));
	pthread_mutex_lock(&s->lock);
	if (!curl || !r)
		log_write(&s->log, LOG_LEVEL_ERROR, "otlp: cannot start sending (out of memory): profiles stay in the "
			  "spool");
	while (curl && r && wait_due(s))
		try_oldest(s, curl, r);
	pthread_mutex_unlock(&s->lock);
	free(r);
	if (curl)
		s->curl.easy_cleanup(curl);
	return NULL;
}

/* "Name=Value" as an HTTP header line; -EINVAL for a name or value that would break the request. */
static int add_header(const struct curl_api *api, struct curl_slist **list, const char *spec)
{
	const char *eq = strchr(spec, '=');
	if (!eq || eq == spec || strpbrk(spec, "\r\n") || memchr(spec, ':', (size_t)(eq - spec)) ||
	    memchr(spec, ' ', (size_t)(eq - spec)))
		return -EINVAL;
	char line[4096];
	int n = snprintf(line, sizeof(line), "%.*s: %s", (int)(eq - spec), spec, eq + 1);
	if (n < 0 || (size_t)n >= sizeof(line))
		return -EINVAL;
	struct curl_slist *next = api->slist_append(*list, line);
	if (!next)
		return -ENOMEM;
	*list = next;
	return 0;
}

/* The profiles URL from the endpoint, and the same without user:password@ for the log. */
static int make_urls(struct otlp_sender *s, const char *endpoint)
{
	size_t n = strlen(endpoint);
	if (strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0)
		return -EINVAL;
	while (n && endpoint[n - 1] == '/')
		n--;
	if (!(s->url = malloc(n + sizeof(OTLP_PROFILES_PATH))) || !(s->url_for_log = malloc(n + sizeof(OTLP_PROFILES_PATH))))
		return -ENOMEM;
	memcpy(s->url, endpoint, n);
	memcpy(s->url + n, OTLP_PROFILES_PATH, sizeof(OTLP_PROFILES_PATH));
	const char *host = strstr(s->url, "://") + 3, *slash = strchr(host, '/'), *at = strchr(host, '@');
	size_t scheme = (size_t)(host - s->url);
	memcpy(s->url_for_log, s->url, scheme);
	strcpy(s->url_for_log + scheme, at && at < slash ? at + 1 : host);
	return 0;
}

static int configure(struct otlp_sender *s, const struct otlp_sender_options *o)
{
	int err = make_urls(s, o->endpoint ? o->endpoint : "");
	for (unsigned i = 0; !err && i < o->nheaders && i < OTLP_MAX_HEADERS; i++)
		err = add_header(&s->curl, &s->headers, o->headers[i]);
	static const char *fixed[] = { "Content-Type=application/x-protobuf", "Content-Encoding=gzip", "Expect=" };
	for (unsigned i = 0; !err && i < sizeof(fixed) / sizeof(fixed[0]); i++)
		err = add_header(&s->curl, &s->headers, fixed[i]);
	char dev[256];
	if (!err && o->dev_version) {
		snprintf(dev, sizeof(dev), "OTLP-Profiles-Development-Version=%s", o->dev_version);
		err = add_header(&s->curl, &s->headers, dev);
	}
	if (!err && o->ca_file && !(s->ca_file = strdup(o->ca_file)))
		err = -ENOMEM;
	s->timeout_ms = o->timeout_ms ? o->timeout_ms : OTLP_DEFAULT_TIMEOUT_MS;
	s->retry_initial_ms = o->retry_initial_ms ? o->retry_initial_ms : 1000;
	s->retry_max_ms = o->retry_max_ms ? o->retry_max_ms : 60000;
	s->log = o->log;
	return err;
}

int otlp_sender_new(const struct otlp_sender_options *o, struct otlp_sender **out)
{
	struct otlp_sender *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	int err = curl_api_open(&s->curl, &o->log);
	if (!err && s->curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		err = -ENOMEM;
	s->curl_inited = !err;
	if (!err)
		err = configure(s, o);
	if (!err)
		err = otlp_spool_open(o->spool_dir, o->spool_max ? o->spool_max : OTLP_DEFAULT_SPOOL_MAX, &o->log,
				      &s->spool);
	if (!err && (err = -pthread_create(&s->thread, NULL, sender_main, s)) == 0)
		s->started = true;
	if (err < 0) {
		otlp_sender_free(s);
		return err;
	}
	*out = s;
	return 0;
}

int otlp_sender_submit(struct otlp_sender *s, uint8_t *data, size_t len)
{
	pthread_mutex_lock(&s->lock);
	uint64_t dropped = otlp_spool_dropped(s->spool);
	int err = otlp_spool_push(s->spool, data, len);
	s->stats.spool_dropped += otlp_spool_dropped(s->spool) - dropped;
	if (err < 0) {
		s->stats.spool_dropped++;
		log_write(&s->log, LOG_LEVEL_ERROR, "otlp: cannot keep a profile of %.1f KiB to send (%s): dropped",
			  len / 1024.0, strerror(-err));
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return err;
}

unsigned otlp_sender_flush(struct otlp_sender *s, unsigned deadline_ms)
{
	uint64_t end = clock_mono_ns() + (uint64_t)deadline_ms * 1000000ULL;
	pthread_mutex_lock(&s->lock);
	/* A backoff that ends before the deadline is waited for; one that ends after it ends the wait. */
	for (uint64_t now = clock_mono_ns(); otlp_spool_count(s->spool) && now < end && s->next_try_ns < end;
	     now = clock_mono_ns()) {
		struct timespec ts;
		uint64_t until = end;
		ts = (struct timespec){ .tv_sec = (time_t)(until / 1000000000ULL), .tv_nsec = (long)(until % 1000000000ULL) };
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	unsigned left = otlp_spool_count(s->spool);
	pthread_mutex_unlock(&s->lock);
	return left;
}

void otlp_sender_get_stats(struct otlp_sender *s, struct otlp_sender_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	out->pending = otlp_spool_count(s->spool);
	out->pending_bytes = otlp_spool_bytes(s->spool);
	pthread_mutex_unlock(&s->lock);
}

void otlp_sender_free(struct otlp_sender *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		__atomic_store_n(&s->stop, true, __ATOMIC_RELAXED);	/* also read by on_progress(), unlocked */
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
	}
	otlp_spool_close(s->spool);
	if (s->curl.lib)
		s->curl.slist_free_all(s->headers);
	free(s->url);
	free(s->url_for_log);
	free(s->ca_file);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	if (s->curl_inited)
		s->curl.global_cleanup();
	if (s->curl.lib)
		dlclose(s->curl.lib);
	free(s);
}
