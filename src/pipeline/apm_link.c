/*
 * apm_link.c — a sample's APM trace context, through the correlation library (apm_link.h).
 */
#include "src/pipeline/apm_link.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/clock.h"
#include "src/base/host_id.h"

struct apm_link {
	struct apm_link_options o;
	char host_id[HOST_ID_MAX];
	struct correlate *correlate;
	struct apm_link_stats stats;
};

/* The correlation library's log lines go to the sink at their level (they begin "apm: "). */
static void correlate_log(void *arg, enum correlate_log_level level, const char *msg)
{
	const struct apm_link *l = arg;
	static const enum log_level levels[] = { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };
	log_write(&l->o.log, (unsigned)level < 4 ? levels[level] : LOG_LEVEL_ERROR, "%s", msg);
}

int apm_link_new(const struct apm_link_options *o, struct apm_link **out)
{
	struct apm_link *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->o = *o;
	host_id_get(o->host_id, l->host_id, sizeof(l->host_id));
	struct correlate_options co = { .host_id = l->host_id, .delay_ms = o->delay_ms, .log = correlate_log,
					.log_arg = l, .ready = o->ready, .ready_arg = o->ready_ctx };
	int err = correlate_new(&co, &l->correlate);
	if (err < 0) {
		free(l);
		return err;
	}
	*out = l;
	return 0;
}

void apm_link_free(struct apm_link *l)
{
	if (!l)
		return;
	correlate_free(l->correlate);
	free(l);
}

struct correlate_reader *apm_link_reader(struct apm_link *l)
{
	return correlate_get_reader(l->correlate);
}

void apm_link_on_mapping(struct apm_link *l, pid_t pid, uint64_t start, uint64_t end, uint64_t pgoff,
			 const char *path)
{
	if (path && correlate_is_apm_library(path))
		correlate_on_mapping(l->correlate, pid, start, end, pgoff, path);
}

void apm_link_on_exec(struct apm_link *l, pid_t pid)
{
	correlate_on_exec(l->correlate, pid);
}

void apm_link_on_exit(struct apm_link *l, pid_t pid, pid_t tid, bool process)
{
	if (process)
		correlate_on_process_exit(l->correlate, pid);
	else
		correlate_on_thread_exit(l->correlate, pid, tid);
}

/* p's agent libraries among the mappings it had before hostprof saw it map them. */
static void find_agent(struct apm_link *l, const struct process *p)
{
	for (unsigned i = 0; i < p->nmaps; i++) {
		const struct mapping *m = &p->maps[i];
		apm_link_on_mapping(l, p->pid, m->start, m->end, m->pgoff, m->path);
	}
}

int apm_link_sample(struct apm_link *l, const struct process *p, bool look_for_agent,
		    const struct apm_link_sample *s, const struct trace_id *id, struct correlate_context *ctx,
		    struct trace_link *link)
{
	if (look_for_agent)
		find_agent(l, p);
	if (!correlate_is_ready(l->correlate, p->pid))
		return 0;
	uint64_t read_ns = s->read ? s->read_ns : clock_mono_ns();
	uint64_t lat_us = read_ns > s->valid_from ? (read_ns - s->valid_from) / 1000 : 0;
	l->stats.read_hist[lat_us < 64 ? lat_us / 8 : lat_us < 1024 ? 8 + lat_us / 128 : 15]++;
	if (lat_us > l->o.max_staleness_us) {
		l->stats.stale++;
		return 0;
	}
	int r = s->read ? correlate_on_read(l->correlate, p->pid, s->tid, s->read, id->bytes, s->time, ctx) :
			  correlate_on_sample(l->correlate, p->pid, s->tid, id->bytes, s->time, ctx);
	if (r != 1)
		return 0;
	memcpy(link->trace_id, ctx->trace_id, 16);
	memcpy(link->transaction_id, ctx->transaction_id, 8);
	link->service = ctx->service_name;
	return 1;
}

int apm_link_tick(struct apm_link *l, uint64_t now_ns)
{
	return correlate_tick(l->correlate, now_ns);
}

void apm_link_finish(struct apm_link *l)
{
	correlate_tick(l->correlate, clock_mono_ns());
	correlate_finish(l->correlate, correlate_delay_ms(l->correlate));
}

void apm_link_get_stats(const struct apm_link *l, struct apm_link_stats *out, struct correlate_stats *correlate)
{
	*out = l->stats;
	correlate_stats(l->correlate, correlate);
}
