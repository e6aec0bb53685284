/*
 * offcpu_time.c — off-CPU intervals walked and counted into traces (offcpu_time.h).
 */
#include "src/pipeline/offcpu_time.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/clock.h"
#include "src/base/hindex.h"
#include "src/processes/blocked_stack.h"

struct offcpu_time {
	struct offcpu_deps d;
	struct offcpu *tracker;
	uint8_t *live_stack;		/* a waiting thread's stack read live (no switch-out samples) */
	size_t live_stack_size;		/* ... up to this (the off-CPU stack copy's size) */
	uint64_t lost_told;		/* off-CPU samples lost in full rings, as far as in profiles */
	struct offcpu_time_stats stats;
	struct traces *traces;		/* during a call that counts: where */
	struct hindex exited;		/* tids whose exit was handled, until a fork takes them again */
};

/* Exited threads remembered at most: past this the set is emptied (a late switch-out may then count again). */
#define OFFCPU_TIME_MAX_EXITED 65536

/* What the fast lane's reader read of an APM thread as it switched out, kept with the switch-out (offcpu.h). */
struct off_cpu_note {
	struct correlate_read ctx;
	uint64_t read_ns;
};

int offcpu_time_new(const struct offcpu_options *o, const struct offcpu_deps *deps, struct offcpu_time **out)
{
	struct offcpu_time *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->d = *deps;
	int err = offcpu_new(o, &t->tracker);
	if (err < 0) {
		free(t);
		return err;
	}
	*out = t;
	return 0;
}

void offcpu_time_free(struct offcpu_time *t)
{
	if (!t)
		return;
	offcpu_free(t->tracker);
	free(t->live_stack);
	hindex_free(&t->exited);
	free(t);
}

/* Whether tid's exit was handled and no fork took its tid since; counted as such. */
static bool exited(struct offcpu_time *t, uint32_t tid)
{
	if (!hindex_count(&t->exited) || !hindex_u32_get(&t->exited, tid, &(uint64_t){ 0 }))
		return false;
	t->stats.after_exit++;
	return true;
}

void offcpu_time_sample(struct offcpu_time *t, const struct perf_event_header *rec, const struct perf_sample *ps,
			const struct fastlane_entry *fe)
{
	if (ps->pid == 0)
		return;	/* the idle task */
	if (exited(t, ps->tid))
		return;	/* its last switch-out, after its exit record (offcpu_time_forget()) */
	if (offcpu_sample_out(t->tracker, (pid_t)ps->pid, (pid_t)ps->tid, ps->time, rec) == 0 && fe) {
		struct off_cpu_note note = { .ctx = *fe->ctx, .read_ns = fe->read_ns };
		offcpu_set_note(t->tracker, (pid_t)ps->tid, &note, sizeof(note));
	}
}

/* Time off CPU without a stack (a short block, over the rate cap, or no sample): summed per thread under one frame. */
static void count_alone(struct offcpu_time *t, struct process *p, const struct offcpu_interval *iv)
{
	struct trace_frame f = { .kind = PROFILE_FRAME_ERROR, .address = iv->why == OFFCPU_SHORT ?
				 TRACE_ERROR_OFFCPU_SHORT : iv->why == OFFCPU_CAPPED ? TRACE_ERROR_OFFCPU_CAPPED :
				 TRACE_ERROR_OFFCPU_NO_SAMPLE };
	const char *tname = p ? procmgr_thread_name(t->d.procs, p, iv->tid) : "";
	traces_add_off_cpu(t->traces, NULL, iv->pid, iv->tid, p ? p->comm : "", tname, &f, 1, iv->ns, iv->preempted,
			   NULL);
}

/* The sample an interval's stack is unwound from: its switch-out sample decoded, or the registers and stack read
 * live as it waited (blocked_stack.h), which are IP and SP only. 0, or -EBADMSG. */
static int interval_sample(const struct offcpu_interval *iv, const struct perf_layout *layout, struct perf_sample *ps)
{
	if (iv->rec)
		return perf_decode_sample(layout, iv->rec, ps);
	*ps = (struct perf_sample){ .pid = (uint32_t)iv->pid, .tid = (uint32_t)iv->tid, .time = iv->start_ns,
				    .regs_abi = PERF_SAMPLE_REGS_ABI_64, .stack = iv->live->bytes,
				    .stack_size = iv->live->size, .misc = PERF_RECORD_MISC_USER };
	ps->ip = ps->regs[UNWIND_REG_IP] = iv->live->ip;
	ps->regs[UNWIND_REG_SP] = iv->live->sp;
	return 0;
}

/* Its trace context: the one the fast lane read at the switch-out (the note), valid until the switch-in. */
static int linked(struct offcpu_time *t, struct process *p, const struct perf_sample *ps,
		  const struct offcpu_interval *iv, const struct off_cpu_note *note, const struct trace_id *id,
		  struct correlate_context *ctx, struct trace_link *link)
{
	if (!t->d.apm)
		return 0;
	struct apm_link_sample as = { .tid = (pid_t)ps->tid, .time = ps->time, .valid_from = ps->time + iv->ns,
				      .read = note ? &note->ctx : NULL, .read_ns = note ? note->read_ns : 0 };
	return apm_link_sample(t->d.apm, p, !lanes_apm_checked(t->d.lanes, p->pid), &as, id, ctx, link);
}

/* An interval off CPU (offcpu_fn): unwound from its switch-out sample (or the stack read as it waited), walked
 * now with what exists, counted apart from the CPU samples' walks; or summed per thread. */
static void count_interval(void *arg, const struct offcpu_interval *iv)
{
	struct offcpu_time *t = arg;
	struct process *p = procmgr_get(t->d.procs, iv->pid);
	const struct off_cpu_note *note = iv->note_len == sizeof(*note) ? iv->note : NULL;
	struct fastlane *fl = lanes_fastlane(t->d.lanes);
	const struct perf_layout *layout = note && fl ? fastlane_layout(fl)
					  : t->d.sampler ? sampler_layout(t->d.sampler) : t->d.layout;
	struct perf_sample ps;
	if ((!iv->rec && !iv->live) || !p || interval_sample(iv, layout, &ps) < 0) {
		count_alone(t, p, iv);
		return;
	}
	uint64_t t0 = clock_mono_ns();
	p->last_sample_ns = t0;
	struct walk_in in = { .proc = p, .ps = &ps, .counts = &t->stats.walks };
	struct walk_out out;
	t->stats.stacks++;
	walk_sample(t->d.walk, &in, &out);
	struct trace_id id;
	struct trace_link link;
	struct correlate_context ctx;
	traces_hash(t->traces, walk_frames(t->d.walk), out.n, &id);
	int with = linked(t, p, &ps, iv, note, &id, &ctx, &link);
	traces_add_off_cpu(t->traces, &id, iv->pid, iv->tid, p->comm, procmgr_thread_name(t->d.procs, p, iv->tid),
			   walk_frames(t->d.walk), out.n, iv->ns, iv->preempted, with ? &link : NULL);
	procmgr_release_deferred(t->d.procs);
	t->stats.handle_ns += clock_mono_ns() - t0;
}

void offcpu_time_switch(struct offcpu_time *t, const struct perf_switch *sw, bool fast, struct traces *traces)
{
	struct offcpu_interval iv;
	struct fastlane *fl = lanes_fastlane(t->d.lanes);
	if (sw->pid == 0 || (pid_t)sw->pid == t->d.self)
		return;
	if (!fast && fl && fastlane_covers(fl, (pid_t)sw->pid, sw->time))
		return;
	if (exited(t, sw->tid))
		return;	/* its last switch-out would never end (offcpu_time_forget()) */
	if (sw->out) {
		offcpu_switch_out(t->tracker, (pid_t)sw->pid, (pid_t)sw->tid, sw->time, sw->preempted);
	} else if (offcpu_switch_in(t->tracker, (pid_t)sw->tid, sw->time, &iv)) {
		t->traces = traces;
		count_interval(t, &iv);
	}
}

/* offcpu_read_fn: tid's stack, read while it waits. */
static void read_live(void *ctx, pid_t pid, pid_t tid)
{
	struct offcpu_time *t = ctx;
	struct blocked_stack bs;
	if (blocked_stack_read(pid, tid, t->live_stack, t->live_stack_size, &bs) < 0)
		return;	/* running again, gone, or not permitted: the interval stays without a stack (counted) */
	struct offcpu_live live = { .ip = bs.ip, .sp = bs.sp, .bytes = t->live_stack, .size = bs.size };
	offcpu_set_live(t->tracker, tid, &live, bs.done_ns);
}

int offcpu_time_tick(struct offcpu_time *t, uint64_t now)
{
	if (!t->d.sampler || sampler_off_cpu_samples(t->d.sampler))
		return 0;
	if (!t->live_stack) {
		struct sampler_options so;
		sampler_get_options(t->d.sampler, &so);
		t->live_stack_size = so.off_cpu_stack_size ? so.off_cpu_stack_size : so.stack_size;
		if (!(t->live_stack = malloc(t->live_stack_size)))
			return 0;
	}
	offcpu_want_live(t->tracker, now, read_live, t);
	return 1;
}

void offcpu_time_pause(struct offcpu_time *t)
{
	offcpu_cancel(t->tracker);
}

/*
 * A thread's exit: its pending switch-out goes, and switch records of it that come later are not counted until a
 * fork takes its tid again. A CPU-wide event sees a dying thread switched out after its exit record (it may be
 * preempted on its way out, and its last switch is after the record), and rings are drained one after another:
 * such a switch-out would never end, and short-lived processes showed seconds off CPU after they were gone.
 */
void offcpu_time_forget(struct offcpu_time *t, pid_t tid)
{
	offcpu_forget(t->tracker, tid);
	if (hindex_count(&t->exited) >= OFFCPU_TIME_MAX_EXITED)
		hindex_clear(&t->exited);
	hindex_u32_put(&t->exited, (uint32_t)tid, 1);
}

void offcpu_time_on_fork(struct offcpu_time *t, pid_t tid)
{
	if (hindex_count(&t->exited))
		hindex_u32_del(&t->exited, (uint32_t)tid);
}

uint64_t offcpu_time_lost(const struct offcpu_time *t)
{
	struct fastlane_stats fs = { 0 };
	if (lanes_fastlane(t->d.lanes))
		fastlane_get_stats(lanes_fastlane(t->d.lanes), &fs);
	return (t->d.sampler ? sampler_off_cpu_lost(t->d.sampler) : 0) + fs.off_cpu_lost;
}

void offcpu_time_to_profile(struct offcpu_time *t, struct traces *traces, uint64_t until_ns, struct profile *p)
{
	struct offcpu_stats st;
	t->traces = traces;
	offcpu_flush(t->tracker, until_ns, count_interval, t);
	offcpu_get_stats(t->tracker, &st);
	p->info.off_cpu_switches += st.switch_outs;
	p->info.off_cpu_capped += st.capped;
	p->info.off_cpu_no_stack += st.no_sample;
	/* Off-CPU samples lost in full off-CPU rings (the main ones and the fast lane's), apart from CPU samples. */
	uint64_t lost = offcpu_time_lost(t);
	p->info.off_cpu_lost += st.untracked + (lost - t->lost_told);
	t->lost_told = lost;
}

void offcpu_time_get_stats(const struct offcpu_time *t, struct offcpu_stats *tracker, struct offcpu_time_stats *out)
{
	if (tracker)
		offcpu_get_stats(t->tracker, tracker);
	if (out)
		*out = t->stats;
}

void offcpu_time_reset_stats(struct offcpu_time *t)
{
	offcpu_reset_stats(t->tracker);
	memset(&t->stats, 0, sizeof(t->stats));
}
