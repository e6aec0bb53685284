/*
 * walk.c — the frames of one sample. See walk.h for the contract.
 */
#include "src/pipeline/walk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "src/base/clock.h"
#include "src/base/elf_symbol.h"
#include "src/pipeline/fastlane.h"
#include "src/processes/procmem.h"
#include "unwind/elf_image.h"
#include "unwind/unwind_libunwind.h"

#define WALK_DEFAULT_MAX_FRAMES 1024u

/* The kernel's default bound on a call chain (kernel.perf_event_max_stack): a chain this long was cut. */
#define WALK_CHAIN_LIMIT 127

struct walk {
	struct walk_options o;
	struct walk_deps d;
	struct unwind_libunwind *unwinder;	/* the reference, and the fast unwinder's fallback */
	struct unwind_deltas *deltas;
	struct go_stack *go_stack;		/* NULL when not following goroutines from g0 */
	size_t go_max_stack;			/* most goroutine stack read per sample */
	struct stackext *stackext;		/* NULL when walks see only the kernel's stack copy */
	uint8_t *fast_ext;			/* a stack copy and the fast lane's rest of it, joined */
	struct walk_stats stats;
	/* scratch, sized once by the frame bound so that no walk allocates */
	struct unwind_frame *uframes;		/* max_frames */
	struct trace_frame *frames;		/* kernel frames, max_frames user frames, one error frame */
};

/* One walk in progress: what its hooks and module lookups need (the unwinders pass it back as their ctx). */
struct walk_call {
	struct walk *w;
	const struct walk_in *in;
	struct process *proc;
	const struct unwind_sample *sample;	/* as the kernel copied it */
	pid_t pid;				/* proc's, for memory */
	struct unwind_memory memory;		/* the live process (procmem.h) */
	uint64_t now;
	bool pending;				/* a table the walk met is being built */
	bool probing;				/* find_module is only checking an address (probe_module) */
	struct jitinfo *jit;			/* the process's JIT code entry, once looked up */
	bool jit_got, jit_found;		/* looked up by process_jit (made if missing), by existing_jit */
	int go_read_rc;				/* the goroutine behind g0 was not read (its read's -errno), or 0 */
	size_t copy_size;			/* the kernel's copy, of which the walk began with in->view bytes */
	bool past_view;				/* ... and needed more */
};

/* ---- modules: the files and JIT code a walk goes through ---- */

static void fill_module(struct walk_call *c, const struct mapping *m, struct execinfo *e, struct unwind_module *mod)
{
	mod->start = m->start;
	mod->end = m->end;
	mod->pgoff = m->pgoff;
	mod->bias = m->bias;
	mod->elf = execinfo_elf(e);
	mod->cache_key = e;
	/* Code runs only from executable mappings: an address in a file's data is no frame (prot 0: unknown). */
	mod->not_code = !(m->prot == 0 || (m->prot & PROT_EXEC));
	/* Built once per file, on the first sample that needs it, by the worker; the reference unwinder has no use
	 * for it. While it is built, the sample is held, or walked with the fallback. */
	bool pending = false;
	mod->deltas = c->w->o.reference ? NULL : execinfo_deltas_nowait(e, &pending);
	mod->table_pending = pending;
	/* Over the memory budget: walks stop at files without a table, none is made. */
	mod->table_refused = !mod->deltas && !pending && !c->w->o.reference && execinfo_mgr_deferring(e);
	c->pending |= pending;
}

/*
 * perf reports only executable mappings after attach, but unwinders also read a file's read-only parts
 * (.eh_frame_hdr): an address in no mapping still belongs to a file whose image, placed by a known mapping's
 * bias, covers it.
 */
static int find_in_neighbour(struct walk_call *c, uint64_t addr, struct unwind_module *mod)
{
	struct process *p = c->proc;
	for (unsigned i = 0; i < p->nmaps; i++) {
		struct mapping *m = &p->maps[i];
		if (!m->exe || addr < m->bias || !execinfo_contains_va(m->exe, addr - m->bias))
			continue;
		fill_module(c, m, m->exe, mod);
		mod->start = addr;
		mod->end = addr + 1;
		mod->not_code = true;
		return 0;
	}
	return -ENOENT;
}

/* The sampled process's JIT code entry, looked up once per walk. */
static struct jitinfo *process_jit(struct walk_call *c)
{
	if (!c->jit_got) {
		c->jit = jitinfo_get(c->w->d.jit, c->proc, c->now);
		c->jit_got = c->jit_found = true;
	}
	return c->jit;
}

/* The sampled process's JIT code entry if it has one already (none is made for processes without JIT code). */
static struct jitinfo *existing_jit(struct walk_call *c)
{
	if (!c->jit_found) {
		c->jit = jitinfo_find(c->w->d.jit, c->proc->pid);
		c->jit_found = true;
	}
	return c->jit;
}

/* The runtime addresses of libjvm.so's VMStructs globals (hotspot.h), from the file the process maps: false when
 * it maps none or the file lacks one. */
static bool jvm_globals(struct walk_call *c, uint64_t globals[HOTSPOT_NGLOBALS])
{
	for (unsigned i = 0; i < c->proc->nmaps; i++) {
		struct mapping *m = &c->proc->maps[i];
		if (!m->path || !(m->prot & PROT_EXEC) || !jitinfo_is_libjvm(m->path))
			continue;
		struct execinfo *e = procmgr_mapping_exe(c->w->d.procs, c->proc, m);
		Elf *elf = e ? execinfo_elf(e) : NULL;
		size_t count = 0;
		Elf_Scn *dynsym = elf ? elf_symbol_table(elf, SHT_DYNSYM, &count) : NULL;
		GElf_Sym sym;
		for (unsigned g = 0; dynsym && g < HOTSPOT_NGLOBALS; g++) {
			if (!elf_symbol_find(elf, dynsym, count, hotspot_global_names[g], &sym))
				return false;
			globals[g] = sym.st_value + m->bias;
		}
		return dynsym != NULL;
	}
	return false;
}

/* The unwinder's module for addr in JIT code, or false (jitinfo_module): only the delta unwinder walks it. A JVM
 * has its code cache looked for at its first JIT frame. */
static bool jit_module(struct walk_call *c, const struct mapping *m, uint64_t addr, struct unwind_module *mod)
{
	struct jitinfo *j = c->w->o.reference ? NULL : process_jit(c);
	if (j && jitinfo_needs_jvm_tables(j)) {
		uint64_t globals[HOTSPOT_NGLOBALS];
		jitinfo_open_jvm(j, jvm_globals(c, globals) ? globals : NULL);
	}
	return j && jitinfo_module(j, m, addr, c->now, mod);
}

/* File code the runtime calls its own (V8's embedded builtins) is JIT code to the delta unwinder too. */
static void jit_in_file(struct walk_call *c, uint64_t addr, struct unwind_module *mod)
{
	struct jitinfo *j = c->w->o.reference ? NULL : existing_jit(c);
	if (j)
		jitinfo_file_module(j, addr, mod);
}

/* JIT code in no mapping hostprof knows (its record was lost, the process is gone), which its map names. */
static struct jitinfo *unmapped_jit(struct walk_call *c, uint64_t addr)
{
	struct jitinfo *j = existing_jit(c);
	return j && jitinfo_names(j, addr, c->now) ? j : NULL;
}

/* unwind_process.find_module */
static int find_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	struct walk_call *c = ctx;
	struct procmgr *pm = c->w->d.procs;
	struct mapping *m = c->probing ? procmgr_lookup_mapping(c->proc, addr) :
					 procmgr_find_mapping(pm, c->proc, addr, c->now);
	struct execinfo *e = m ? procmgr_mapping_exe(pm, c->proc, m) : NULL;
	if (!e && m && m->anon && jit_module(c, m, addr, mod))
		return 0;
	struct jitinfo *j = !m && !c->w->o.reference && !c->probing ? unmapped_jit(c, addr) : NULL;
	if (j && jitinfo_module_unmapped(j, addr, c->now, mod))
		return 0;
	if (!e)
		return find_in_neighbour(c, addr, mod);
	fill_module(c, m, e, mod);
	if (c->pending && c->in->may_hold)
		return -EAGAIN;	/* the sample will be held and walked again: the walk need not go on */
	jit_in_file(c, addr, mod);
	return 0;
}

/* unwind_process.probe_module: as find_module, with no re-read of the mappings on a miss (a JVM's compiled frames
 * check candidate return addresses that may be any word: a heap address, a count). */
static int probe_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	struct walk_call *c = ctx;
	c->probing = true;
	int rc = find_module(ctx, addr, mod);
	c->probing = false;
	return rc;
}

/* ---- the unwinders' hooks ---- */

/*
 * go_stack_options.rule_at: the delta-table rule at addr (a return address minus 1, or an entry) of the sampled
 * process. addr is a guess being checked: a miss does not re-read the process's mappings (which would release files
 * the walk still uses).
 */
static bool rule_at(void *ctx, const struct unwind_process *proc, uint64_t addr, struct stack_delta_rule *rule)
{
	const struct walk_call *c = proc->ctx;
	struct mapping *m = procmgr_lookup_mapping(c->proc, addr);
	struct execinfo *e = m ? procmgr_mapping_exe(c->w->d.procs, c->proc, m) : NULL;
	bool pending;	/* a guess, not a walk: a table not ready yet is no reason to hold the sample */
	const struct stack_deltas *t = e ? execinfo_deltas_nowait(e, &pending) : NULL;
	(void)ctx;
	return t && addr >= m->bias && stack_deltas_lookup(t, addr - m->bias, rule) == 0;
}

/*
 * go_stack_options.code_at: code of the sampled process from the file mapped at addr, as the mapping and its table
 * lookup stand (no re-read of the mappings, as in rule_at). A short-lived Go program has exited by its last
 * batch: the call that names a stack growth's grower is read from its file then.
 */
static bool code_at(void *ctx, const struct unwind_process *proc, uint64_t addr, void *buf, size_t len)
{
	const struct walk_call *c = proc->ctx;
	struct mapping *m = procmgr_lookup_mapping(c->proc, addr);
	struct execinfo *e = m && (m->prot & PROT_EXEC) ? procmgr_mapping_exe(c->w->d.procs, c->proc, m) : NULL;
	Elf *elf = e ? execinfo_elf(e) : NULL;
	struct elf_image img;
	(void)ctx;
	if (!elf || addr < m->bias || len > m->end - addr)
		return false;
	elf_image_init(&img, elf);
	const uint8_t *bytes = elf_image_bytes(&img, addr - m->bias, len);
	if (bytes)
		memcpy(buf, bytes, len);
	return bytes != NULL;
}

/* go_stack_options.held: the goroutine the fast lane's reader read while it held the thread (fastlane.h). */
static const struct go_stack_snapshot *held_goroutine(void *ctx, const struct unwind_process *proc)
{
	const struct walk_call *c = proc->ctx;
	(void)ctx;
	return c->in->fast_go;
}

static void live_read(struct walk_call *c, unsigned kind, bool past_copy, int rc)
{
	const struct walk_deps *d = &c->w->d;
	struct walk_live_read r = { .tid = (pid_t)c->in->ps->tid, .time = c->in->ps->time, .kind = kind,
				    .past_copy = past_copy, .rc = rc,
				    .fast = c->in->fast_go != NULL, .replaying = c->in->replaying };
	if (d->live_read)
		d->live_read(d->ctx, c->proc, &r);
}

/* go_stack_options.followed: counted; a goroutine not read (a failed read, or frames given to join the chain) is
 * told of once the walk is over, if the walk lost its frames (add_user_frames). */
static void followed_goroutine(void *ctx, const struct unwind_process *proc, enum go_stack_source source, int rc)
{
	struct walk *w = ctx;
	struct walk_call *c = proc->ctx;
	if (source == GO_STACK_HELD)
		w->stats.fast_goroutines++;
	else if (source == GO_STACK_JOINED)
		c->go_read_rc = -ESTALE;	/* not read: lost if the join fails */
	else if (rc < 0)
		c->go_read_rc = rc;
}

/*
 * The rest of the stack past the sample's copy (a goroutine's, or a deep one's), as the fast lane's reader read it
 * while it held the thread: exactly what the sample saw, so it needs no witness (stackext.h). At most
 * max_stack_bytes from the sampled SP, as for stack read later.
 */
static int fast_extension(struct walk_call *c, const struct unwind_sample *stack, uint64_t addr,
			  struct unwind_sample *longer)
{
	struct walk *w = c->w;
	const struct go_stack_snapshot *snap = c->in->fast_go;
	uint64_t end = stack->regs[UNWIND_REG_SP] + stack->stack_size;
	if (!snap || snap->kind != GO_STACK_SNAPSHOT_EXTENSION || snap->addr != end || addr < end ||
	    addr + 8 - end > snap->size || stack->stack_size >= w->o.max_stack_bytes)
		return -ENOENT;
	size_t most = w->go_max_stack > w->o.max_stack_bytes ? w->go_max_stack : w->o.max_stack_bytes;
	most = most > FASTLANE_DEEP_READ ? most : FASTLANE_DEEP_READ;
	if (!w->fast_ext && !(w->fast_ext = malloc(SAMPLER_MAX_STACK + most)))
		return -ENOMEM;
	/* Whole words: a read that ended mid-word, or a length the lane chose, leaves its last bytes to stackext. */
	size_t room = w->o.max_stack_bytes - stack->stack_size;
	size_t take = (snap->size < room ? snap->size : room) & ~(size_t)7;
	if (addr + 8 - end > take)
		return -ENOENT;
	memcpy(w->fast_ext, stack->stack, stack->stack_size);
	memcpy(w->fast_ext + stack->stack_size, snap->bytes, take);
	*longer = *stack;
	longer->stack = w->fast_ext;
	longer->stack_size = stack->stack_size + take;
	w->stats.fast_extensions++;
	return 0;
}

/*
 * The delta unwinder's stack-extension hook: the walk needs stack past the sample's copy. A fast-lane sample
 * brings what its reader read past the copy while it held the thread (fast_extension); past that, or without it,
 * read on from the process (stackext.h), piece after piece, each checked against the end of the one before (the
 * fast lane's bytes being the first such end). The kernel's copy may also have ended early, at a page it could
 * not read from its interrupt (not present in the page tables yet): the process can still read it. In Go, whose g
 * register names the goroutine (or g0) the sample ran on, reads stop at that stack's end, and a stack Go has
 * since moved is not read at all (its old memory is free for reuse). A goroutine's stack that follow_goroutine
 * read is not extended: it was read up to its end, or max_stack_bytes. A walk shown only part of the kernel's copy
 * (walk_in.view) is first given the rest of it, with nothing read.
 */
static int extend_stack(void *ctx, const struct unwind_process *proc, const struct unwind_sample *stack,
			uint64_t addr, struct unwind_sample *longer)
{
	struct walk *w = ctx;
	struct walk_call *c = proc->ctx;
	struct stackext_stack have = { .sp = stack->regs[UNWIND_REG_SP], .bytes = stack->stack,
				       .size = stack->stack_size, .lo = 0, .hi = UINT64_MAX },
			      got;
	bool first = stack->stack == c->sample->stack;
	if (!first && !(w->fast_ext && stack->stack == w->fast_ext) && !stackext_owns(w->stackext, stack->stack))
		return -ENOENT;
	if (first && stack->stack_size < c->copy_size) {	/* the rest of the kernel's copy (walk_in.view) */
		*longer = *stack;
		longer->stack_size = c->copy_size;
		c->past_view = true;
		return 0;
	}
	if (first && fast_extension(c, stack, addr, longer) == 0)
		return 0;
	/* Past what the fast lane read: its reader reads as far for this process's next samples. */
	if (c->in->fast_go && w->d.read_deeper)
		w->d.read_deeper(w->d.ctx, c->proc->pid, (size_t)(addr - (c->sample->regs[UNWIND_REG_SP] +
									   c->sample->stack_size)) * 5 / 4 + 4096);
	int go = go_stack_bounds(proc->memory, c->sample->regs[UNWIND_REG_R14], &have.lo, &have.hi) == 0;
	if (!go) {
		have.lo = 0;
		have.hi = UINT64_MAX;
	}
	int rc = stackext_read(w->stackext, proc->memory, &have, addr, &got);
	/* A walk's reads count once for the fast lane's decision (a deep one takes several), and each time late. */
	if (first || rc == -ESTALE)
		live_read(c, go ? FASTLANE_GO : FASTLANE_DEEP, true, rc);
	if (rc < 0)
		return rc;
	longer->regs[UNWIND_REG_SP] = got.sp;
	longer->stack = got.bytes;
	longer->stack_size = got.size;
	return 0;
}

/* ---- frames ---- */

static unsigned add_kernel_frames(struct walk *w, const struct perf_sample *ps, struct trace_frame *out)
{
	const uint64_t *ips;
	size_t n;
	perf_callchain_kernel(ps, &ips, &n);
	if (n > TRACE_MAX_KERNEL_FRAMES)
		n = TRACE_MAX_KERNEL_FRAMES;
	for (size_t i = 0; i < n; i++) {
		out[i].exe = NULL;
		out[i].address = ips[i];
		out[i].kind = PROFILE_FRAME_KERNEL;
	}
	w->stats.kernel_frames |= n > 0;
	return (unsigned)n;
}

/* A frame in JIT code, named when the profile is built; a name missing now has the map read again if it grew. A
 * JVM's interpreted frame is known by the Method it says it runs (frame_word), where that is named. */
static int jit_frame(struct walk_call *c, struct jitinfo *j, uint64_t addr, uint64_t frame_word,
		     struct trace_frame *out)
{
	if (!j)
		return 0;
	jitinfo_names(j, addr, c->now);
	out->exe = NULL;
	out->jit = j;
	out->address = frame_word && jitinfo_names_method(j, frame_word) ? frame_word : addr;
	out->kind = PROFILE_FRAME_JIT;
	return 1;
}

/* One unwound user frame as (file, ELF address), by the module the unwinder found it in, else by the process's
 * mappings; 0 if it is in no known file. */
static int user_frame(struct walk_call *c, const struct unwind_frame *uf, int is_return, struct trace_frame *out)
{
	/* A return address may be the first byte after the caller's mapping (a call ending a function). */
	uint64_t lookup = is_return ? uf->ip - 1 : uf->ip;
	if (uf->module) {
		out->exe = (struct execinfo *)uf->module;
		out->address = lookup - uf->bias;
		out->kind = PROFILE_FRAME_NATIVE;
		return 1;
	}
	struct mapping *m = procmgr_find_mapping(c->w->d.procs, c->proc, lookup, c->now);
	/* Code runs only from executable mappings: an address in a file's data is no frame (prot 0: unknown). */
	bool code = m && (m->prot == 0 || (m->prot & PROT_EXEC));
	struct execinfo *e = code ? procmgr_mapping_exe(c->w->d.procs, c->proc, m) : NULL;
	if (!e)
		return jit_frame(c, m && m->anon ? process_jit(c) : !m ? unmapped_jit(c, lookup) : NULL, lookup,
				 uf->frame_word, out);
	out->exe = e;
	out->address = lookup - m->bias;
	out->kind = PROFILE_FRAME_NATIVE;
	return 1;
}

static void count_status(struct walk_counts *wc, enum unwind_status st)
{
	if (st == UNWIND_COMPLETE)
		wc->complete++;
	else if (st == UNWIND_UNKNOWN_LEAF)
		wc->unknown++;
	else
		wc->truncated++;
}

/* The unwound frames named, and how the walk ended (its error frame, counted). */
static unsigned name_user_frames(struct walk_call *c, int nu, enum unwind_status st, struct trace_frame *out)
{
	struct walk *w = c->w;
	unsigned n = 0;
	for (int i = 0; i < nu; i++) {
		/* Every caller frame holds a return address, except one a signal interrupted: its IP is exact. */
		int is_return = i > 0 && !(w->uframes[i].flags & UNWIND_FRAME_SIGNAL);
		if (!user_frame(c, &w->uframes[i], is_return, &out[n])) {
			/* Code in no mapping hostprof knows (a vanished one): the stack cannot be named past it. */
			st = i == 0 ? UNWIND_UNKNOWN_LEAF : UNWIND_TRUNCATED;
			break;
		}
		n++;
	}
	if (nu <= 0)
		st = UNWIND_UNKNOWN_LEAF;
	else if (st == UNWIND_UNKNOWN_LEAF && n)
		st = UNWIND_TRUNCATED;	/* a leaf in JIT code no unwinder could walk: known, not followed */
	/* Cut by the frame bound: every frame the walk could keep was taken and named. */
	if (nu == (int)w->o.max_frames && n == (unsigned)nu && st == UNWIND_TRUNCATED)
		c->in->counts->frame_limited++;
	count_status(c->in->counts, st);
	if (st != UNWIND_COMPLETE) {
		out[n].exe = NULL;
		out[n].kind = PROFILE_FRAME_ERROR;
		out[n].address = st == UNWIND_UNKNOWN_LEAF ? TRACE_ERROR_UNKNOWN : TRACE_ERROR_TRUNCATED;
		n++;
	}
	return n;
}

static unsigned add_user_frames(struct walk_call *c, struct trace_frame *out)
{
	struct walk *w = c->w;
	const struct perf_sample *ps = c->in->ps;
	struct unwind_sample us;
	struct unwind_process up = { .find_module = find_module, .probe_module = probe_module, .ctx = c,
				     .memory = w->o.offline ? NULL : &c->memory };
	enum unwind_status st = UNWIND_TRUNCATED;
	memcpy(us.regs, ps->regs, sizeof(us.regs));
	us.stack = ps->stack;
	us.stack_size = c->copy_size = ps->stack ? ps->stack_size : 0;
	if (c->in->view && us.stack_size > c->in->view && !w->o.reference && w->stackext)
		us.stack_size = c->in->view;	/* the rest is the stack-extension hook's to give */
	perf_callchain_user(ps, &us.fp_chain, &us.fp_chain_len);
	c->sample = &us;
	uint64_t t0 = w->o.offline ? 0 : clock_mono_ns();	/* a file's walks are not timed (session.c) */
	int nu = w->o.reference ? unwind_libunwind_unwind(w->unwinder, &up, &us, w->uframes, w->o.max_frames, &st) :
				  unwind_deltas_unwind(w->deltas, &up, &us, w->uframes, w->o.max_frames, &st);
	if (!w->o.offline)
		w->stats.unwind_ns += clock_mono_ns() - t0;
	if (c->pending && c->in->may_hold)
		return 0;	/* held: counted when it is walked again */
	/* The goroutine behind g0 could not be read as the sample saw it, and no frame-pointer chain made up for
	 * it: the walk ended without its frames (a walk cut short past the switch for another reason counts too). */
	if (c->go_read_rc < 0 && st != UNWIND_COMPLETE)
		live_read(c, FASTLANE_GO, false, c->go_read_rc);
	us.stack_size = c->copy_size;
	if (w->d.capture && replay_writer_add_sample(w->d.capture, c->proc->pid, (pid_t)ps->tid, &us) < 0)
		w->stats.capture_errors++;
	return name_user_frames(c, nu, st, out);
}

/*
 * A sample without user registers or stack whose call chain has a user part (perf record --call-graph fp, read
 * from a perf.data file): its user frames are the kernel's frame-pointer walk as it is, the sampled IP then return
 * addresses. A chain as long as the kernel's limit was cut there; a shorter one ended where the walk did.
 */
static unsigned chain_user_frames(struct walk_call *c, const uint64_t *chain, size_t n, struct trace_frame *out)
{
	struct walk *w = c->w;
	if (n > w->o.max_frames)
		n = w->o.max_frames;
	for (size_t i = 0; i < n; i++)
		w->uframes[i] = (struct unwind_frame){ .ip = chain[i] };
	return name_user_frames(c, (int)n, n >= WALK_CHAIN_LIMIT ? UNWIND_TRUNCATED : UNWIND_COMPLETE, out);
}

/*
 * A sample the kernel took inside an exec, after the exec record: until the kernel sets the new program's
 * registers, the user registers are those the old program entered exec with, in the image the exec replaced
 * (procmgr.h), while the stack it copies at their stack pointer is of the new address space (nothing, or the new
 * program's bytes). The leaf is named in the replaced image; nothing past it can be walked. Returns its frames (the
 * leaf and a truncation), or 0 when the sample is not one: a sample with the new image's registers (taken in user
 * mode, or its IP in the new image) shows the exec returned, and the replaced image goes.
 */
static unsigned in_exec_frames(struct walk_call *c, struct trace_frame *out)
{
	struct process *p = c->proc;
	const struct perf_sample *ps = c->in->ps;
	uint64_t ip = ps->regs[UNWIND_REG_IP];
	if ((ps->misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_KERNEL || procmgr_lookup_mapping(p, ip)) {
		procmgr_drop_replaced(c->w->d.procs, p);
		return 0;
	}
	struct mapping *m = procmgr_replaced_mapping(p, ip);
	bool code = m && (m->prot == 0 || (m->prot & PROT_EXEC));
	struct execinfo *e = code ? procmgr_mapping_exe(c->w->d.procs, p, m) : NULL;
	if (!e || ip < m->bias)
		return 0;
	out[0] = (struct trace_frame){ .exe = e, .address = ip - m->bias, .kind = PROFILE_FRAME_NATIVE };
	out[1] = (struct trace_frame){ .kind = PROFILE_FRAME_ERROR, .address = TRACE_ERROR_TRUNCATED };
	count_status(c->in->counts, UNWIND_TRUNCATED);
	return 2;
}

/* The user part of a sample's call chain, when it has one. */
static bool user_chain(const struct perf_sample *ps, const uint64_t **chain, size_t *n)
{
	*n = 0;
	if (ps->callchain_nr)
		perf_callchain_user(ps, chain, n);
	return *n > 0;
}

void walk_sample(struct walk *w, const struct walk_in *in, struct walk_out *out)
{
	struct walk_call c = { .w = w, .in = in, .proc = in->proc, .now = in->ps->time,
			       .pid = in->proc ? in->proc->pid : 0 };
	c.memory = procmem_reader(&c.pid);
	const uint64_t *chain;
	size_t nchain;
	unsigned n = add_kernel_frames(w, in->ps, w->frames);
	if (in->ps->regs_abi != PERF_SAMPLE_REGS_ABI_NONE && in->ps->pid != 0 && in->proc) {
		unsigned in_exec = in->proc->nreplaced ? in_exec_frames(&c, w->frames + n) : 0;
		n += in_exec ? in_exec : add_user_frames(&c, w->frames + n);
	} else if (in->ps->pid != 0 && in->proc && user_chain(in->ps, &chain, &nchain)) {
		n += chain_user_frames(&c, chain, nchain, w->frames + n);
	} else {
		in->counts->kernel_only++;
	}
	*out = (struct walk_out){ .n = n, .pending = c.pending, .stopped = c.pending && in->may_hold,
				  .past_view = c.past_view };
}

const struct trace_frame *walk_frames(const struct walk *w)
{
	return w->frames;
}

/* ---- the walker ---- */

static void forget_in_unwinders(void *ctx, const struct execinfo *e)
{
	struct walk *w = ctx;
	unwind_libunwind_forget(w->unwinder, e);
	unwind_deltas_forget(w->deltas, e);
}

/*
 * The unwinders: libunwind, and the delta unwinder with its hooks. Rows the delta tables cannot express are stepped
 * by libunwind, for that frame only; Go samples on g0 go on with their goroutine (go_stack.h), walks past the copy
 * with the stack read on (stackext.h).
 */
static int setup_unwinders(struct walk *w)
{
	struct go_stack_options go = { .rule_at = rule_at, .code_at = code_at, .held = held_goroutine,
				       .followed = followed_goroutine, .ctx = w };
	int err = unwind_libunwind_new(&w->unwinder);
	struct unwind_deltas_options dopts = { .fallback = unwind_libunwind_deltas_fallback,
					       .fallback_ctx = w->unwinder };
	if (err == 0 && w->o.go_stacks) {
		/* The goroutine's stack is read up to its end, as far as a walk may go (max_stack_bytes). */
		unsigned go_bytes = w->o.go_stack_bytes ? w->o.go_stack_bytes : 16384;
		w->go_max_stack = w->o.max_stack_bytes > go_bytes ? w->o.max_stack_bytes : go_bytes;
		go.max_stack = w->go_max_stack;
		err = go_stack_new(&go, &w->go_stack);
		dopts.stack_switch = go_stack_follow;
		dopts.stack_switch_ctx = w->go_stack;
	}
	if (err == 0 && w->o.max_stack_bytes > w->o.stack_copy_bytes) {
		err = stackext_new(w->o.max_stack_bytes, &w->stackext);
		dopts.stack_extend = extend_stack;
		dopts.stack_extend_ctx = w;
	}
	return err < 0 ? err : unwind_deltas_new(&dopts, &w->deltas);
}

int walk_new(const struct walk_options *o, const struct walk_deps *d, struct walk **out)
{
	struct walk *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->o = *o;
	w->d = *d;
	if (!w->o.max_frames)
		w->o.max_frames = WALK_DEFAULT_MAX_FRAMES;
	w->uframes = calloc(w->o.max_frames, sizeof(*w->uframes));
	w->frames = calloc(TRACE_MAX_KERNEL_FRAMES + w->o.max_frames + 1, sizeof(*w->frames));
	int err = w->uframes && w->frames ? setup_unwinders(w) : -ENOMEM;
	if (err == 0)
		err = execinfo_mgr_add_release_hook(d->execinfo, forget_in_unwinders, w);
	if (err < 0) {
		walk_free(w);
		return err;
	}
	*out = w;
	return 0;
}

void walk_free(struct walk *w)
{
	if (!w)
		return;
	unwind_libunwind_free(w->unwinder);
	unwind_deltas_free(w->deltas);
	go_stack_free(w->go_stack);
	stackext_free(w->stackext);
	free(w->uframes);
	free(w->frames);
	free(w->fast_ext);
	free(w);
}

const struct walk_stats *walk_get_stats(const struct walk *w)
{
	return &w->stats;
}

void walk_reset_stats(struct walk *w)
{
	bool kernel_frames = w->stats.kernel_frames;	/* a fact of the session, not of an interval */
	memset(&w->stats, 0, sizeof(w->stats));
	w->stats.kernel_frames = kernel_frames;
}

void walk_unwind_stats(const struct walk *w, struct unwind_deltas_stats *out)
{
	unwind_deltas_get_stats(w->deltas, out);
}

int walk_stackext_stats(const struct walk *w, struct stackext_stats *out)
{
	if (!w->stackext)
		return -ENOENT;
	stackext_get_stats(w->stackext, out);
	return 0;
}

int walk_go_stack_stats(const struct walk *w, struct go_stack_stats *out)
{
	if (!w->go_stack)
		return -ENOENT;
	go_stack_get_stats(w->go_stack, out);
	return 0;
}

size_t walk_go_max_stack(const struct walk *w)
{
	return w->go_stack ? w->go_max_stack : 0;
}
