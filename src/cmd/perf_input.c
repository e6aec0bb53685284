/*
 * perf_input.c — a perf.data file read as a profile. See perf_input.h.
 */
#include "src/cmd/perf_input.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "src/base/clock.h"
#include "src/base/escape.h"
#include "src/base/regular_file.h"
#include "src/cmd/commands.h"
#include "src/pipeline/event_loop.h"
#include "src/pipeline/offcpu.h"
#include "src/pipeline/session.h"
#include "src/sampling/perf_data.h"

/* A mapped file not opened: missing here, or only another build of it found; said once, at the end, with the
 * samples taken in it. */
struct failed_file {
	char *path;
	bool other_build;
	char want[41], found[41];
	uint64_t samples;	/* samples whose IP is in one of its mappings */
	struct failed_range {
		int32_t pid;
		uint64_t start, end;
	} *ranges;
	size_t nranges, capranges;
};

#define BUILDID_DIRS 2

struct opener {
	struct perf_data *pd;
	const char *symfs;
	char buildid_dir[BUILDID_DIRS][PATH_MAX];	/* perf's build-id caches to look in, "" for none */
	uid_t recorder;		/* the perf.data file's owner: the user who recorded */
	struct failed_file *failed;
	size_t nfailed, capfailed;
};

bool perf_input_is_perf_data(const char *path)
{
	char head[8];
	int fd = regular_file_open(AT_FDCWD, path, 0, NULL);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, head, sizeof(head));
	close(fd);
	return n == (ssize_t)sizeof(head) && perf_data_is_perf_data(head, sizeof(head));
}

/* The GNU build-id of an ELF file (its first NT_GNU_BUILD_ID note); 0 and *len, or -ENOENT. */
static int elf_build_id(int fd, uint8_t *id, size_t *len)
{
	int rc = -ENOENT;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	while (e && rc < 0 && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || !(d = elf_getdata(scn, NULL)))
			continue;
		size_t off = 0, name_off, desc_off, next;
		GElf_Nhdr nh;
		while (rc < 0 && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz <= 20) {
				memcpy(id, (const char *)d->d_buf + desc_off, nh.n_descsz);
				*len = nh.n_descsz;
				rc = 0;
			}
			off = next;
		}
	}
	if (e)
		elf_end(e);
	return rc;
}

static void hex(const uint8_t *id, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", id[i]);
	out[2 * n] = '\0';
}

/* The failed file of path, added if new; NULL without memory. */
static struct failed_file *failed_file(struct opener *o, const char *path)
{
	for (size_t i = 0; i < o->nfailed; i++)
		if (strcmp(o->failed[i].path, path) == 0)
			return &o->failed[i];
	if (o->nfailed == o->capfailed) {
		size_t cap = o->capfailed ? 2 * o->capfailed : 8;
		struct failed_file *f = realloc(o->failed, cap * sizeof(*f));
		if (!f)
			return NULL;
		o->failed = f;
		o->capfailed = cap;
	}
	struct failed_file *f = &o->failed[o->nfailed];
	memset(f, 0, sizeof(*f));
	if (!(f->path = strdup(path)))
		return NULL;
	o->nfailed++;
	return f;
}

static void add_failed_range(struct failed_file *f, int32_t pid, uint64_t start, uint64_t end)
{
	if (f->nranges == f->capranges) {
		size_t cap = f->capranges ? 2 * f->capranges : 4;
		struct failed_range *r = realloc(f->ranges, cap * sizeof(*r));
		if (!r)
			return;
		f->ranges = r;
		f->capranges = cap;
	}
	f->ranges[f->nranges++] = (struct failed_range){ .pid = pid, .start = start, .end = end };
}

/* Where a file the recording named is looked for first, as perf does: under --symfs when given, then at its path.
 * cand holds at least two; returns how many were written. */
static int path_candidates(const struct opener *o, const char *path, char cand[][PATH_MAX])
{
	int n = 0;
	if (o->symfs && o->symfs[0])
		snprintf(cand[n++], PATH_MAX, "%s%s", o->symfs, path);
	snprintf(cand[n++], PATH_MAX, "%s", path);
	return n;
}

/*
 * procmgr_open_fn: the file a mapping of the recording named, if it is the one the recording had. Candidates in
 * order: under --symfs, the path itself, perf's build-id cache; with a build-id recorded, the first whose build-id
 * is that one, else the first that opens.
 */
static int open_file(void *ctx, const struct process *p, const struct mapping *m, char build_id[41])
{
	struct opener *o = ctx;
	const struct perf_data_build_id *b = perf_data_build_id(o->pd, p->pid, m->path);
	char cand[2 + BUILDID_DIRS][PATH_MAX], want[41] = "", found[41] = "";
	int n = path_candidates(o, m->path, cand);
	if (b && b->size)
		hex(b->id, b->size, want);
	for (int i = 0; b && b->size && i < BUILDID_DIRS; i++)
		if (o->buildid_dir[i][0])
			snprintf(cand[n++], PATH_MAX, "%s/.build-id/%.2s/%s/elf", o->buildid_dir[i], want, want + 2);
	bool any = false;
	for (int i = 0; i < n; i++) {
		int fd = regular_file_open(AT_FDCWD, cand[i], 0, NULL);
		if (fd < 0)
			continue;
		any = true;
		uint8_t id[20];
		size_t len = 0;
		char have[41];
		if (!want[0])
			return fd;
		if (elf_build_id(fd, id, &len) == 0) {
			hex(id, len, have);
			if (strcmp(have, want) == 0)
				return fd;
			if (!found[0])
				snprintf(found, sizeof(found), "%s", have);
		}
		close(fd);
	}
	snprintf(build_id, 41, "%s", want);
	struct failed_file *f = failed_file(o, m->path);
	if (f) {
		f->other_build = any;
		snprintf(f->want, sizeof(f->want), "%s", want);
		snprintf(f->found, sizeof(f->found), "%s", found[0] ? found : "none");
		add_failed_range(f, p->pid, m->start, m->end);
	}
	return any ? -ESTALE : -ENOENT;
}

/*
 * perf's build-id caches, as perf record fills them: $PERF_BUILDID_DIR, else ~/.debug; then, where the file is
 * another user's (root reading what a user recorded), that user's ~/.debug, where their perf record put the
 * files. What is found there is used only if its build-id is the recorded one.
 */
static void find_buildid_dirs(struct opener *o)
{
	const char *env = getenv("PERF_BUILDID_DIR"), *home = getenv("HOME");
	if (env && env[0])
		snprintf(o->buildid_dir[0], PATH_MAX, "%s", env);
	else if (home && home[0])
		snprintf(o->buildid_dir[0], PATH_MAX, "%s/.debug", home);
	struct passwd *pw;
	if (o->recorder != geteuid() && (pw = getpwuid(o->recorder)) && pw->pw_dir && pw->pw_dir[0] == '/')
		snprintf(o->buildid_dir[1], PATH_MAX, "%s/.debug", pw->pw_dir);
}

/*
 * jitinfo_open_fn: a process's perf map (/tmp/perf-PID.map, the recording's pid), where perf report reads it, at its
 * path, but under --symfs first when given (as the mapped files). The map is another process's writing: only a
 * regular file, not reached through a symbolic link, owned by root, by the user reading or by the user who
 * recorded (perf takes the first two), is read; jitinfo bounds what is read of it.
 */
static int open_jit_map(void *ctx, const char *path)
{
	struct opener *o = ctx;
	char cand[2][PATH_MAX];
	int n = path_candidates(o, path, cand), err = -ENOENT;
	for (int i = 0; i < n; i++) {
		struct stat st;
		int fd = regular_file_open(AT_FDCWD, cand[i], O_NOFOLLOW, &st);
		if (fd >= 0 && (st.st_uid == 0 || st.st_uid == geteuid() || st.st_uid == o->recorder))
			return fd;
		if (fd >= 0) {
			close(fd);
			fd = -EPERM;
		}
		if (fd != -ENOENT)
			err = fd;	/* there, but refused: said as such unless another candidate is taken */
	}
	return err;
}

/*
 * The file's records as the session gets them, each sample counted against the files not opened (a mapping's
 * file is opened as its first sample is handled: the sample is looked at after the session had it).
 */
struct counting_source {
	struct record_source inner;
	struct opener *op;
	record_fn fn;
	void *ctx;
};

static int count_record(void *ctx, const struct perf_event_header *rec, const struct record_origin *origin)
{
	struct counting_source *cs = ctx;
	int rc = cs->fn(cs->ctx, rec, origin);
	struct perf_sample ps;
	if (rec->type != PERF_RECORD_SAMPLE || !cs->op->nfailed || perf_decode_sample(origin->layout, rec, &ps) < 0)
		return rc;
	uint64_t ip = ps.regs_abi ? ps.regs[UNWIND_REG_IP] : ps.ip;
	for (size_t i = 0; i < cs->op->nfailed; i++) {
		struct failed_file *f = &cs->op->failed[i];
		for (size_t k = 0; k < f->nranges; k++) {
			if (f->ranges[k].pid == (int32_t)ps.pid && ip >= f->ranges[k].start && ip < f->ranges[k].end) {
				f->samples++;
				return rc;
			}
		}
	}
	return rc;
}

static int counting_drain(void *impl, record_fn fn, void *ctx)
{
	struct counting_source *cs = impl;
	cs->fn = fn;
	cs->ctx = ctx;
	return cs->inner.drain(cs->inner.impl, count_record, cs);
}

/* Each file not opened, once: why, and how many samples were taken in it. */
static void print_failed(const struct opener *op)
{
	char shown[ESCAPE_SHOWN_MAX];
	for (size_t i = 0; i < op->nfailed; i++) {
		const struct failed_file *f = &op->failed[i];
		escape_str(shown, sizeof(shown), f->path);
		const char *slash = strrchr(shown, '/');
		const char *name = slash ? slash + 1 : shown;
		if (f->other_build)
			fprintf(stderr, "hostprof: %s: not the build perf recorded (build-id %s, here %s), %" PRIu64
				" samples in it: its frames are %s+0x... (offsets in the file; perf's build-id cache or "
				"--symfs DIR may have it)\n", shown, f->want, f->found, f->samples, name);
		else
			fprintf(stderr, "hostprof: %s: not found here, %" PRIu64 " samples in it: its frames are "
				"%s+0x... (offsets in the file)%s\n", shown, f->samples, name,
				op->symfs && op->symfs[0] ? "" : "; --symfs DIR looks under DIR");
	}
}

/* The profile's info from the file's header: set before samples are added (profile.h). */
static int fill_info(struct perf_data *pd, struct profile *p, int64_t realtime_offset)
{
	const struct perf_data_info *in = perf_data_info(pd);
	const struct perf_data_counts *c = perf_data_counts(pd);
	struct profile_info *i = &p->info;
	char producer[256];
	snprintf(producer, sizeof(producer), "hostprof " HOSTPROF_VERSION " (perf.data%s%s)",
		 in->perf_version[0] ? " of perf " : "", in->perf_version);
	int err;
	if ((err = profile_set_info_string(p, &i->producer, producer)) < 0 ||
	    (err = profile_set_info_string(p, &i->hostname, in->hostname)) < 0 ||
	    (err = profile_set_info_string(p, &i->kernel, in->osrelease)) < 0 ||
	    (err = profile_set_info_string(p, &i->cmdline, in->cmdline[0] ? in->cmdline : NULL)) < 0 ||
	    (err = profile_set_info_string(p, &i->event, in->event)) < 0 ||
	    (err = profile_set_info_string(p, &i->unwinder, "deltas")) < 0)
		return err;
	i->cpus_online = in->nrcpus_online;
	i->cpus_available = in->nrcpus_avail;
	i->frequency_hz = in->frequency_hz;
	i->period_ns = in->period_ns;
	if (c->first_time) {
		i->start_unix_ns = (uint64_t)((int64_t)c->first_time + realtime_offset);
		i->duration_ns = c->last_time - c->first_time;
	}
	return 0;
}

static void print_summary(const char *path, struct perf_data *pd, const struct session_stats *st,
			  const struct jitinfo_stats *jit)
{
	const struct perf_data_info *in = perf_data_info(pd);
	const struct perf_data_counts *c = perf_data_counts(pd);
	char used[512], unused[1024], shown[ESCAPE_SHOWN_MAX], ev[ESCAPE_SHOWN_MAX], host[ESCAPE_SHOWN_MAX],
		version[ESCAPE_SHOWN_MAX], release[ESCAPE_SHOWN_MAX];
	perf_data_format_counts(pd, true, used, sizeof(used));
	perf_data_format_counts(pd, false, unused, sizeof(unused));
	char other[512] = "", lead[64];
	int at = 0;
	/* a file of the tracepoint alone is its switch-outs; with a sampling event they come after its samples */
	bool switches_only = in->off_cpu && !st->samples;
	snprintf(lead, sizeof(lead), "%" PRIu64 " %s", switches_only ? c->switch_outs : st->samples,
		 switches_only ? "switch-outs (off-CPU time)" : "samples");
	if (in->off_cpu && !switches_only)
		at = snprintf(other, sizeof(other), ", %" PRIu64 " sched_switch switch-outs as off-CPU time",
			      c->switch_outs);
	if (in->off_cpu && at >= 0 && (size_t)at < sizeof(other))
		at += snprintf(other + at, sizeof(other) - (size_t)at, ", %s", in->switch_records ?
			       "switch-ins from switch records" : "switch-ins inferred: no --switch-events");
	if (c->samples_other && at >= 0 && (size_t)at < sizeof(other))
		at += snprintf(other + at, sizeof(other) - (size_t)at, ", %" PRIu64 " samples of other events not used",
			       c->samples_other);
	if (jit->perf_maps && at >= 0 && (size_t)at < sizeof(other))
		at += snprintf(other + at, sizeof(other) - (size_t)at, ", JIT code named from %" PRIu64 " perf map%s",
			       jit->perf_maps, jit->perf_maps == 1 ? "" : "s");
	if (jit->refused && at >= 0 && (size_t)at < sizeof(other))
		at += snprintf(other + at, sizeof(other) - (size_t)at, ", %" PRIu64 " perf map%s not read (not a "
			       "regular file, or not of root, you or the file's owner)", jit->refused,
			       jit->refused == 1 ? "" : "s");
	/* a layout the decoder does not read (PERF_SAMPLE_READ, BRANCH_STACK: perf record --call-graph lbr) */
	if (st->bad_records && at >= 0 && (size_t)at < sizeof(other))
		snprintf(other + at, sizeof(other) - (size_t)at, ", %" PRIu64 " records that do not decode",
			 st->bad_records);
	fprintf(stderr, "hostprof: %s: %s of %s (perf %s on %s, %s%s), %" PRIu64 " lost%s; records "
		"used: %s; not used: %s\n", escape_str(shown, sizeof(shown), path), lead,
		in->event[0] ? escape_str(ev, sizeof(ev), in->event) : "its event", in->perf_version[0] ?
		escape_str(version, sizeof(version), in->perf_version) : "?",
		in->hostname[0] ? escape_str(host, sizeof(host), in->hostname) : "?",
		in->osrelease[0] ? escape_str(release, sizeof(release), in->osrelease) : "?", in->compressed ? ", compressed" : "", st->lost, other, used,
		unused[0] ? unused : "none");
}

int perf_input_load(const char *path, const struct perf_input_options *o, struct profile **out)
{
	char err[640], shown[ESCAPE_SHOWN_MAX];
	struct perf_data *pd = NULL;
	int rc = perf_data_open(path, &pd, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "hostprof: %s\n", err);
		return rc;
	}
	const struct perf_data_info *in = perf_data_info(pd);
	struct utsname u;
	uname(&u);
	/* Kernel frames are named from this machine's kallsyms only when the file's kernel is this one. */
	bool kernel = !in->exclude_kernel && strcmp(in->osrelease, u.release) == 0;
	int64_t offset = in->has_clock_data ? (int64_t)(in->clock_wall_ns - in->clock_ns)
					    : (int64_t)(clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC));
	struct stat data_st;
	struct opener op = { .pd = pd, .symfs = o ? o->symfs : NULL,
			     .recorder = stat(path, &data_st) == 0 ? data_st.st_uid : geteuid() };
	find_buildid_dirs(&op);
	struct session_offline off = { .open_file = open_file, .open_jit_map = open_jit_map, .open_ctx = &op,
				       .kernel = kernel, .realtime_offset_ns = (uint64_t)offset,
				       .off_cpu_layout = perf_data_off_cpu_layout(pd) };
	/* Off-CPU time of sched:sched_switch samples as record --off-cpu counts it by default, with no rate cap: the
	 * file holds every switch-out it has, and unwinding them costs no one but this reading. */
	struct session_options so = { .unwinder = SESSION_UNWIND_DELTAS, .offline = &off, .use_cache = 1,
				      .off_cpu_threshold_ns = OFFCPU_DEFAULT_THRESHOLD_US * 1000ULL };
	struct session *s = NULL;
	struct profile *p = NULL;
	struct record_source src;
	rc = session_new(NULL, &so, &s);
	if (rc < 0) {
		fprintf(stderr, "hostprof: cannot start a session: %s\n", strerror(-rc));
		goto out;
	}
	struct counting_source cs = { .op = &op };
	perf_data_source(pd, &cs.inner);
	src = (struct record_source){ .impl = &cs, .drain = counting_drain };
	/* The loop `record` runs, over a source always ready: a drain is the next rounds of the file. A read that
	 * takes more than a second says how far it is, on a terminal. */
	bool progress = (!o || !o->quiet) && isatty(STDERR_FILENO);
	uint64_t start = clock_mono_ns(), next = start + 1000000000ULL;
	while (!perf_data_finished(pd)) {
		event_loop_turn(&src, s, 0, NULL, 0);
		if (progress && clock_mono_ns() >= next) {
			fprintf(stderr, "\rhostprof: reading %s: %3.0f%%", escape_str(shown, sizeof(shown), path),
				100.0 * perf_data_progress(pd));
			next += 500000000ULL;
		}
	}
	if (progress && next > start + 1000000000ULL)
		fprintf(stderr, "\r%*s\r", (int)strlen(shown) + 32, "");
	event_loop_end(&src, s);
	print_failed(&op);
	if (perf_data_error(pd)[0]) {
		fprintf(stderr, "hostprof: %s\n", perf_data_error(pd));
		rc = -EBADMSG;
		goto out;
	}
	const struct perf_data_counts *c = perf_data_counts(pd);
	if (c->truncated)
		fprintf(stderr, "hostprof: warning: %s ends at offset %" PRIu64 " inside its data: perf did not finish "
			"it; the %" PRIu64 " records read before are used\n", escape_str(shown, sizeof(shown), path),
			c->truncated_at, c->delivered);
	if ((rc = profile_new(&p)) == 0 && (rc = fill_info(pd, p, offset)) == 0)
		rc = session_build_profile(s, p);
	if (rc < 0) {
		fprintf(stderr, "hostprof: cannot make the profile of %s: %s\n", escape_str(shown, sizeof(shown), path),
			strerror(-rc));
		goto out;
	}
	if (!o || !o->quiet) {
		struct session_counters sc;
		session_counters(s, &sc);
		print_summary(path, pd, session_stats(s), &sc.jit);
	}
	*out = p;
	p = NULL;
out:
	profile_free(p);
	session_free(s);
	perf_data_free(pd);
	for (size_t i = 0; i < op.nfailed; i++) {
		free(op.failed[i].path);
		free(op.failed[i].ranges);
	}
	free(op.failed);
	return rc;
}
