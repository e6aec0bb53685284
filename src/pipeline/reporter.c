/*
 * reporter.c — interval profiles built off the draining thread. See reporter.h for the contract.
 */
#include "src/pipeline/reporter.h"

#include "src/profile/otlp.h"

#include <errno.h>
#include <stdlib.h>

#include "src/base/clock.h"

struct reporter {
	struct worker *w;
};

int reporter_new(int wake_fd, struct reporter **out)
{
	struct reporter *r = calloc(1, sizeof(*r));
	int err = r ? worker_new(wake_fd, &r->w) : -ENOMEM;
	if (err < 0) {
		free(r);
		return err;
	}
	*out = r;
	return 0;
}

/* On the worker's thread: name the interval into its profile and encode it. */
static void build(struct worker_job *base)
{
	struct report *rp = (struct report *)base;
	uint64_t t0 = clock_mono_ns();
	rp->data = NULL;
	rp->size = 0;
	struct traces_build_options o = { .memory_budget = rp->memory_budget };
	rp->err = traces_build_profile(rp->traces, rp->profile, &o, &rp->stats);
	if (rp->err == 0)
		rp->err = profile_encode(rp->profile, &rp->data, &rp->size);
	rp->otlp_data = NULL;
	rp->otlp_size = 0;
	rp->otlp_err = rp->err == 0 && rp->otlp ?
		       otlp_encode_profile(rp->profile, &rp->otlp_options, &rp->otlp_data, &rp->otlp_size) : 0;
	rp->name_ns = clock_mono_ns() - t0;
}

int reporter_submit(struct reporter *r, struct report *report)
{
	report->base.run = build;
	return worker_submit(r->w, &report->base);
}

struct report *reporter_done(struct reporter *r, bool wait)
{
	return (struct report *)worker_done(r->w, wait);
}

unsigned reporter_outstanding(const struct reporter *r)
{
	return worker_outstanding(r->w);
}

void reporter_free(struct reporter *r)
{
	if (!r)
		return;
	worker_free(r->w, NULL);
	free(r);
}
