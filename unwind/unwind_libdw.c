/*
 * unwind_libdw.c — the libdw reference unwinder: libdwfl's frame unwinder over a perf sample. See
 * unwind_libdw.h for the contract.
 *
 * libdwfl sees a process through two sets of callbacks, both answered from data we own:
 *  - Dwfl_Thread_Callbacks: one thread whose initial registers are the sample's (perf order mapped to DWARF
 *    order) and whose memory is the stack copy, else the file image of the module mapped there;
 *  - Dwfl_Callbacks: find_elf hands libdwfl an Elf for a module we reported; there is no debuginfo search
 *    (nothing is ever opened by path, debuginfod is never asked).
 *
 * Modules. libdwfl finds a frame's CFI through dwfl_addrmodule(), so a module must be reported before libdw
 * steps from a frame in it. The frame callback runs on every frame before that step: it looks the frame's
 * lookup address up with find_module and, when the Dwfl has no module there or one for another file or bias,
 * reports the right one (dwfl_report_begin_add for a new range; a full dwfl_report_begin/end that re-reports the
 * survivors when the new range overlaps stale ones). In steady state a frame costs one find_module and one
 * dwfl_addrmodule; nothing is re-reported. A module spans the file's PT_LOADs, starting at the first PT_LOAD's
 * p_vaddr rounded down to its p_align, which is where libdwfl expects it when it computes the bias.
 *
 * Elf handles. libdwfl ends the Elf that find_elf returns, so it gets its own descriptor: elf_memory() over the
 * caller's image (elf_rawfile), shared read-only by every module of the file. libelf writes into an
 * elf_memory image in one case we meet: libdw decompressing a compressed debug section rewrites its section
 * header in place, which faults on a read-only mapping. Files with compressed sections therefore get one
 * private copy in which those sections are marked SHT_NOBITS; libdw ignores them, as the libunwind oracle
 * ignores a compressed .debug_frame. ET_REL files (which libdwfl would relocate in place) are never reported.
 *
 * CFI only. When no module or no CFI covers a frame, libdw falls back to the x86_64 frame-pointer guess, which
 * sets PC, SP and RBP but not the return-address column (16) that every CFI step sets. A frame without column 16
 * equal to its PC is such a guess: the walk ends there, TRUNCATED, as libunwind's oracle ends.
 *
 * Signal frames. A frame whose caller was interrupted by a signal (a trampoline whose CIE has the 'S'
 * augmentation) makes that caller's PC exact. dwfl_frame_pc's isactivation folds "this frame is a signal
 * trampoline" and "the previous one was" together; it is false on all ordinary frames, so only when it is true
 * (and for the sampled frame, where it is always true) is the CIE asked directly.
 *
 * End of the walk. libdw ends a walk when the return address is undefined, zero, or could not be computed (the
 * stack copy ends, or a register the CFA needs is unknown), and does not say which. The walk is COMPLETE when
 * the last frame's CFI marks the return address undefined, or when the return address read as zero; otherwise
 * TRUNCATED. A failed read for some other register (a slot below SP in an epilogue, say) does not end a walk.
 */
#include "unwind/unwind_libdw.h"

#include "unwind/elf_image.h"
#include "unwind/file_cache.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 65536	/* section headers looked at per file: bounds work on hostile input */
#define MAX_SPACES 64		/* address spaces (Dwfls) kept */
#define MAX_MODULES 4096	/* modules per address space; past it the Dwfl starts over */
#define MAX_REPORTS 64		/* module reports per sample: bounds churn on a hostile or changing process */
#define THREAD_ID 1		/* the only thread of every Dwfl we attach */
#define DWARF_NREGS 17		/* x86_64 CFI registers libdwfl tracks: 16 general-purpose + return address */
#define DWARF_SP 7
#define DWARF_RA 16

/* One ELF file, shared by every address space that maps it (unwind/file_cache.h). */
struct file_info {
	struct elf_image img;		/* the caller's whole file, from elf_rawfile, and its PT_LOADs */
	uint8_t *private_image;		/* copy for libdw when the file has compressed sections, else NULL */
	uint64_t lo, hi;		/* module extent in ELF addresses, as libdwfl computes the bias */
	bool usable;			/* an x86_64 ET_EXEC/ET_DYN with loads: something libdwfl can unwind in */
};

/* One file at one bias in one address space: what a Dwfl_Module's userdata points to. */
struct module {
	struct module *next;
	struct file_info *file;
	uint64_t bias, low, high;	/* [low, high) is the range reported to libdwfl */
	Dwfl_Module *dwmod;
	bool stale;			/* overlapped by a newer module: removed at the next report */
	char name[20];			/* unique, so that re-reporting never revives a removed module */
};

/* One process's address space as libdwfl knows it. */
struct space {
	const void *ctx;		/* unwind_process.ctx: the cache key */
	Dwfl *dwfl;
	struct module *modules;
	size_t nmodules;
	uint64_t last_use;
	struct unwind_libdw *u;
};

/* The sample being unwound: the state every callback reaches through its space. */
struct walk {
	const struct unwind_process *proc;
	const struct unwind_sample *sample;
	struct space *space;
	struct unwind_frame *frames;
	size_t max, n;
	uint64_t prev_pc, prev_sp;
	bool next_signal;		/* the next frame was interrupted by a signal: its PC is exact */
	const struct module *last_module; /* the latest frame's module and lookup address */
	uint64_t last_lookup;
	bool last_read_ok;		/* the latest memory read of the latest step succeeded... */
	uint64_t last_read;		/* ...and read this */
	unsigned reports;
	int err;			/* internal error (-ENOMEM) met inside a callback */
};

struct unwind_libdw {
	struct file_cache *files;	/* file key -> struct file_info */
	struct space *spaces[MAX_SPACES];
	struct space *last_space;
	uint64_t clock;			/* for least-recently-used eviction of spaces */
	uint64_t next_module_id;
	/*
	 * A bare x86_64 header that tells dwfl_attach_state the architecture. Without it libdwfl would borrow the
	 * backend of the first module, which dangles once that module is removed.
	 */
	Elf64_Ehdr arch_ehdr;
	Elf *arch_elf;
	struct walk w;
};

/* ---- per-file data ---- */

static bool is_x86_64_object(Elf *elf)
{
	GElf_Ehdr eh;
	return gelf_getehdr(elf, &eh) && eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == ELFDATA2LSB &&
	       eh.e_machine == EM_X86_64 && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN);
}

/* The module's extent: from the first PT_LOAD, as libdwfl's open_elf places it, to the end of the highest. */
static bool module_extent(struct file_info *fi)
{
	fi->lo = fi->img.first_vaddr & (0 - fi->img.first_align); /* libdwfl's arithmetic, whatever p_align holds */
	fi->hi = fi->img.hi;
	return fi->img.have_loads && fi->lo < fi->hi;
}

/* Sections libdw would decompress in place when it opens the file's DWARF. */
static bool compressed_section(Elf *elf, size_t shstrndx, const GElf_Shdr *sh)
{
	const char *name = elf_strptr(elf, shstrndx, sh->sh_name);
	return (sh->sh_flags & SHF_COMPRESSED) || (name && strncmp(name, ".zdebug", 7) == 0);
}

/* In the private copy, turn section ndx into SHT_NOBITS, which libdw skips. */
static bool hide_section(struct file_info *fi, const GElf_Ehdr *eh, size_t ndx)
{
	Elf64_Shdr sh;
	if (eh->e_shentsize != sizeof(sh) || eh->e_shoff > fi->img.image_size ||
	    ndx >= (fi->img.image_size - eh->e_shoff) / sizeof(sh))
		return false;
	uint8_t *at = fi->private_image + eh->e_shoff + ndx * sizeof(sh);
	memcpy(&sh, at, sizeof(sh)); /* may be unaligned */
	sh.sh_type = SHT_NOBITS;
	sh.sh_flags &= ~(Elf64_Xword)SHF_COMPRESSED;
	memcpy(at, &sh, sizeof(sh));
	return true;
}

/*
 * Give libdw a copy without compressed sections when the file has any. Returns -ENOMEM, -EINVAL when a section
 * cannot be hidden (the file is then not used), or 0.
 */
static int hide_compressed_sections(struct file_info *fi, Elf *elf)
{
	GElf_Ehdr eh;
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	if (!gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	for (unsigned i = 0; i < MAX_HEADERS && (scn = elf_nextscn(elf, scn)); i++) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || !compressed_section(elf, shstrndx, &sh))
			continue;
		if (!fi->private_image) {
			fi->private_image = malloc(fi->img.image_size);
			if (!fi->private_image)
				return -ENOMEM;
			memcpy(fi->private_image, fi->img.image, fi->img.image_size);
		}
		if (!hide_section(fi, &eh, elf_ndxscn(scn)))
			return -EINVAL;
	}
	return 0;
}

/* file_cache hook: what libdwfl needs of a file, or that it cannot use it (usable false). */
static int file_info_make(void *ctx, const void *key, Elf *elf, void **value)
{
	struct file_info *fi = calloc(1, sizeof(*fi));
	(void)ctx, (void)key;
	if (!fi)
		return -ENOMEM;
	elf_image_init(&fi->img, elf);
	fi->usable = fi->img.image && module_extent(fi) && is_x86_64_object(elf);
	if (fi->usable) {
		int r = hide_compressed_sections(fi, elf);
		if (r == -ENOMEM) {
			free(fi->private_image);
			free(fi);
			return r;
		}
		fi->usable = r == 0;
	}
	*value = fi;
	return 0;
}

/* The cached info of mod's file, built on first use. NULL: no Elf, or -ENOMEM in u->w.err. */
static struct file_info *file_get(struct unwind_libdw *u, const struct unwind_module *mod)
{
	void *fi;
	int err = file_cache_get(u->files, mod, &fi);
	if (err == -ENOMEM)
		u->w.err = err;
	return err < 0 ? NULL : fi;
}

/* ---- memory ---- */

static bool read_stack(const struct unwind_sample *s, uint64_t addr, uint64_t *val)
{
	uint64_t sp = s->regs[UNWIND_REG_SP];
	if (addr < sp || s->stack_size < sizeof(*val) || addr - sp > s->stack_size - sizeof(*val))
		return false;
	memcpy(val, s->stack + (addr - sp), sizeof(*val));
	return true;
}

/* The unwind data and code libdw may read are read-only, so the file holds what the process holds. */
static bool read_file(struct unwind_libdw *u, uint64_t addr, uint64_t *val)
{
	struct unwind_module mod;
	const struct file_info *fi;
	if (u->w.proc->find_module(u->w.proc->ctx, addr, &mod) < 0 || !(fi = file_get(u, &mod)))
		return false;
	const uint8_t *p = elf_image_bytes(&fi->img, addr - mod.bias, sizeof(*val));
	if (!p)
		return false;
	memcpy(val, p, sizeof(*val));
	return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct space *s = arg;
	struct unwind_libdw *u = s->u;
	uint64_t v = 0;
	(void)dwfl;
	u->w.last_read_ok = read_stack(u->w.sample, addr, &v) || read_file(u, addr, &v);
	u->w.last_read = v;
	*result = v;
	return u->w.last_read_ok;
}

/* ---- threads and registers ---- */

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = arg;
	return THREAD_ID;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	*thread_argp = arg;
	return tid == THREAD_ID;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	/* DWARF numbering (the x86_64 psABI's) to perf's. */
	static const uint8_t perf_reg[DWARF_NREGS] = {
		UNWIND_REG_AX, UNWIND_REG_DX, UNWIND_REG_CX, UNWIND_REG_BX, UNWIND_REG_SI, UNWIND_REG_DI,
		UNWIND_REG_BP, UNWIND_REG_SP, UNWIND_REG_R8, UNWIND_REG_R9, UNWIND_REG_R10, UNWIND_REG_R11,
		UNWIND_REG_R12, UNWIND_REG_R13, UNWIND_REG_R14, UNWIND_REG_R15, UNWIND_REG_IP,
	};
	const struct space *s = arg;
	const uint64_t *regs = s->u->w.sample->regs;
	Dwarf_Word dw[DWARF_NREGS];
	for (unsigned i = 0; i < DWARF_NREGS; i++)
		dw[i] = regs[perf_reg[i]];
	if (!dwfl_thread_state_registers(thread, 0, DWARF_NREGS, dw))
		return false;
	dwfl_thread_state_register_pc(thread, regs[UNWIND_REG_IP]);
	return true;
}

/* ---- modules ---- */

static int find_elf(Dwfl_Module *dwmod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
		    Elf **elfp)
{
	const struct module *m = *userdata;
	(void)dwmod, (void)name, (void)base, (void)file_name;
	*elfp = NULL;
	if (m) {
		const struct file_info *fi = m->file;
		/* libelf does not write to an image without compressed sections (see the top of this file). */
		const uint8_t *image = fi->private_image ? fi->private_image : fi->img.image;
		*elfp = elf_memory((char *)image, fi->img.image_size);
	}
	return -1; /* no file descriptor: libdwfl owns only the Elf */
}

/* Separate debug files are never looked for: the caller's file is all we read. */
static int find_no_debuginfo(Dwfl_Module *dwmod, void **userdata, const char *name, Dwarf_Addr base,
			     const char *file_name, const char *debuglink, GElf_Word crc, char **debuginfo_name)
{
	(void)dwmod, (void)userdata, (void)name, (void)base, (void)file_name, (void)debuglink, (void)crc,
		(void)debuginfo_name;
	return -1;
}

static struct module *module_of(Dwfl_Module *dwmod)
{
	void **userdata;
	dwfl_module_info(dwmod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	return *userdata;
}

/* Mark the modules a new [low, high) overlaps. Returns whether there were any. */
static bool mark_overlaps(struct space *s, uint64_t low, uint64_t high)
{
	bool any = false;
	for (struct module *m = s->modules; m; m = m->next) {
		if (m->low < high && low < m->high) {
			m->stale = true;
			any = true;
		}
	}
	return any;
}

/* Inside a dwfl_report_begin session: keep the modules that are not stale (libdwfl frees the others). */
static void rereport(struct space *s)
{
	for (struct module *m = s->modules; m; m = m->next)
		if (!m->stale)
			dwfl_report_module(s->dwfl, m->name, m->low, m->high); /* same name and range: same module */
}

static void drop_stale(struct space *s)
{
	for (struct module **pp = &s->modules; *pp;) {
		struct module *m = *pp;
		if (m->stale) {
			*pp = m->next;
			free(m);
			s->nmodules--;
		} else {
			pp = &m->next;
		}
	}
}

/* Report fi at bias, replacing whatever overlaps it. Returns 0, -ENOENT (cannot cover addr) or -ENOMEM. */
static int report_module(struct unwind_libdw *u, struct file_info *fi, uint64_t bias, uint64_t addr,
			 struct module **out)
{
	struct space *s = u->w.space;
	uint64_t low = bias + fi->lo, high = bias + fi->hi;
	if (low >= high || addr < low || addr >= high || u->w.reports++ == MAX_REPORTS)
		return -ENOENT;
	struct module *m = calloc(1, sizeof(*m));
	if (!m)
		return u->w.err = -ENOMEM;
	*m = (struct module){ .file = fi, .bias = bias, .low = low, .high = high };
	snprintf(m->name, sizeof(m->name), "m%" PRIx64, u->next_module_id++);

	bool rebuild = mark_overlaps(s, low, high);
	if (s->nmodules >= MAX_MODULES)
		rebuild = mark_overlaps(s, 0, UINT64_MAX);
	if (rebuild) {
		dwfl_report_begin(s->dwfl);
		rereport(s);
	} else {
		dwfl_report_begin_add(s->dwfl);
	}
	m->dwmod = dwfl_report_module(s->dwfl, m->name, low, high);
	dwfl_report_end(s->dwfl, NULL, NULL);
	drop_stale(s);
	if (!m->dwmod) {
		free(m);
		return u->w.err = -ENOMEM;
	}
	void **userdata;
	dwfl_module_info(m->dwmod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	*userdata = m;
	m->next = s->modules;
	s->modules = m;
	s->nmodules++;
	*out = m;
	return 0;
}

/*
 * Make sure the Dwfl's module at addr is the file find_module maps there, at its bias; report it if not.
 * Returns 0 with the module, or a negative errno when libdw could not unwind there.
 */
static int ensure_module(struct unwind_libdw *u, uint64_t addr, struct module **out)
{
	struct unwind_module mod;
	const struct unwind_process *proc = u->w.proc;
	if (proc->find_module(proc->ctx, addr, &mod) < 0)
		return -ENOENT;
	struct file_info *fi = file_get(u, &mod);
	if (!fi || !fi->usable)
		return -ENOENT;
	Dwfl_Module *dwmod = dwfl_addrmodule(u->w.space->dwfl, addr);
	struct module *m = dwmod ? module_of(dwmod) : NULL;
	if (m && m->file == fi && m->bias == mod.bias) {
		*out = m;
		return 0;
	}
	return report_module(u, fi, mod.bias, addr, out);
}

/* ---- address spaces ---- */

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = find_no_debuginfo,
};

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

static void space_free(struct space *s)
{
	if (!s)
		return;
	dwfl_end(s->dwfl); /* ends every module's Elf before the files they borrow can go */
	for (struct module *m = s->modules, *next; m; m = next) {
		next = m->next;
		free(m);
	}
	free(s);
}

static int space_new(struct unwind_libdw *u, const void *ctx, struct space **out)
{
	struct space *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ctx = ctx;
	s->u = u;
	s->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!s->dwfl) {
		free(s);
		return -ENOMEM;
	}
	if (!dwfl_attach_state(s->dwfl, u->arch_elf, THREAD_ID, &thread_callbacks, s)) {
		space_free(s);
		return -EINVAL;
	}
	*out = s;
	return 0;
}

static struct space *space_find(const struct unwind_libdw *u, const void *ctx)
{
	if (u->last_space && u->last_space->ctx == ctx)
		return u->last_space;
	for (size_t i = 0; i < MAX_SPACES; i++)
		if (u->spaces[i] && u->spaces[i]->ctx == ctx)
			return u->spaces[i];
	return NULL;
}

/* An empty slot, else the least recently used one. */
static size_t victim_slot(const struct unwind_libdw *u)
{
	size_t v = 0;
	for (size_t i = 0; i < MAX_SPACES; i++) {
		if (!u->spaces[i])
			return i;
		if (u->spaces[i]->last_use < u->spaces[v]->last_use)
			v = i;
	}
	return v;
}

static void space_drop(struct unwind_libdw *u, size_t i)
{
	if (u->last_space == u->spaces[i])
		u->last_space = NULL;
	space_free(u->spaces[i]);
	u->spaces[i] = NULL;
}

/* The space cached for ctx, created on first use. */
static int space_get(struct unwind_libdw *u, const void *ctx, struct space **out)
{
	struct space *s = space_find(u, ctx);
	if (!s) {
		size_t slot = victim_slot(u);
		space_drop(u, slot);
		int r = space_new(u, ctx, &s);
		if (r < 0)
			return r;
		u->spaces[slot] = s;
	}
	s->last_use = ++u->clock;
	u->last_space = s;
	*out = s;
	return 0;
}

static bool space_uses(const struct space *s, const struct file_info *fi)
{
	for (const struct module *m = s->modules; m; m = m->next)
		if (m->file == fi)
			return true;
	return false;
}

/* ---- the walk ---- */

/* Callers live at higher addresses; only a signal frame may switch stacks (sigaltstack). */
static bool advances(uint64_t pc, uint64_t sp, uint64_t prev_pc, uint64_t prev_sp, bool after_signal)
{
	if (after_signal)
		return pc != prev_pc || sp != prev_sp;
	return sp > prev_sp;
}

/* What the CFI that libdw steps by says about a frame. */
struct cfi_facts {
	bool signal;			/* a signal trampoline's CIE ('S'): the caller was interrupted, its PC is exact */
	bool ra_undefined;		/* the outermost frame: the return address is undefined */
};

static bool cfi_facts_in(Dwarf_CFI *cfi, Dwarf_Addr addr, struct cfi_facts *out)
{
	Dwarf_Frame *frame;
	Dwarf_Op ops_mem[3], *ops;
	size_t nops;
	if (!cfi || dwarf_cfi_addrframe(cfi, addr, &frame) != 0)
		return false;
	int ra = dwarf_frame_info(frame, NULL, NULL, &out->signal);
	/* "Undefined" is no operations, stored in the caller's array (libdw.h, dwarf_frame_register). */
	out->ra_undefined = ra >= 0 && dwarf_frame_register(frame, ra, ops_mem, &ops, &nops) == 0 && nops == 0 &&
			    ops == ops_mem;
	free(frame);
	return true;
}

/* The CFI facts at addr in m, found as libdw finds its rules: .eh_frame first, then .debug_frame. */
static struct cfi_facts cfi_facts(const struct module *m, uint64_t addr)
{
	struct cfi_facts f = { false, false };
	Dwarf_Addr bias;
	Dwarf_CFI *cfi = dwfl_module_eh_cfi(m->dwmod, &bias);
	if (!cfi_facts_in(cfi, addr - bias, &f) && (cfi = dwfl_module_dwarf_cfi(m->dwmod, &bias)))
		cfi_facts_in(cfi, addr - bias, &f);
	return f;
}

/*
 * Take frame n >= 1 if CFI produced it and it moves up the stack. The return-address column is set by every
 * CFI step and by nothing else: libdw's frame-pointer fallback sets the PC directly.
 */
static bool accept_frame(struct walk *w, Dwfl_Frame *state, uint64_t pc, bool signal)
{
	Dwarf_Word ra, sp;
	if (w->n == w->max || dwfl_frame_reg(state, DWARF_RA, &ra) != 0 || ra != pc ||
	    dwfl_frame_reg(state, DWARF_SP, &sp) != 0 || !advances(pc, sp, w->prev_pc, w->prev_sp, signal))
		return false;
	w->frames[w->n++] = (struct unwind_frame){ .ip = pc, .flags = signal ? UNWIND_FRAME_SIGNAL : 0 };
	w->prev_pc = pc;
	w->prev_sp = sp;
	return true;
}

/*
 * Called on each frame before libdw steps from it: record it, then make sure libdw finds the right module for
 * the step, and learn whether the step crosses a signal frame.
 */
static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct unwind_libdw *u = arg;
	struct walk *w = &u->w;
	bool first = w->n == 0, signal = w->next_signal, activation = true;
	Dwarf_Addr pc;
	struct module *m;
	if (!dwfl_frame_pc(state, &pc, NULL))
		return DWARF_CB_ABORT;
	if (first) {
		w->n = 1;
		w->prev_pc = pc;
		w->prev_sp = w->sample->regs[UNWIND_REG_SP];
	} else if (!accept_frame(w, state, pc, signal)) {
		return DWARF_CB_ABORT;
	}
	/* A return address points after the call; an interrupted PC is exact. */
	uint64_t lookup = first || signal ? pc : pc - 1;
	if (ensure_module(u, lookup, &m) < 0)
		return DWARF_CB_ABORT;
	w->last_module = m;
	w->last_lookup = lookup;
	w->last_read_ok = false; /* what follows is this frame's step */
	/* With the module in place, this unwinds the frame (libdw would next) and tells about signal frames. */
	if (!first)
		dwfl_frame_pc(state, &pc, &activation);
	w->next_signal = activation && cfi_facts(m, lookup).signal;
	return DWARF_CB_OK;
}

/*
 * libdw ended the walk: the last step found the return address undefined, zero, or could not compute it. Only
 * the first two are the outermost frame. A return address is the last register a step computes, so a zero one
 * was the step's last memory read.
 */
static bool walk_complete(const struct walk *w)
{
	if (w->last_read_ok && w->last_read == 0)
		return true;
	return w->last_module && cfi_facts(w->last_module, w->last_lookup).ra_undefined;
}

int unwind_libdw_unwind(struct unwind_libdw *u, const struct unwind_process *proc,
			const struct unwind_sample *sample, struct unwind_frame *frames, size_t max,
			enum unwind_status *status)
{
	struct unwind_module leaf;
	struct space *s;
	*status = UNWIND_TRUNCATED;
	if (max == 0)
		return 0;
	frames[0] = (struct unwind_frame){ .ip = sample->regs[UNWIND_REG_IP] };
	if (proc->find_module(proc->ctx, frames[0].ip, &leaf) < 0) {
		*status = UNWIND_UNKNOWN_LEAF;
		return 1;
	}
	int r = space_get(u, proc->ctx, &s);
	if (r < 0)
		return r;
	u->w = (struct walk){ .proc = proc, .sample = sample, .space = s, .frames = frames, .max = max };
	r = dwfl_getthread_frames(s->dwfl, THREAD_ID, frame_cb, u);
	if (u->w.err)
		return u->w.err;
	if (r == 0 && walk_complete(&u->w))
		*status = UNWIND_COMPLETE;
	return u->w.n ? (int)u->w.n : 1;
}

/* ---- lifetime ---- */

/* file_cache hook: the file is forgotten. Forgetting is rare (the file left every process): rebuilding the Dwfls
 * that used it is simplest. */
static void file_info_release(void *ctx, void *value)
{
	struct unwind_libdw *u = ctx;
	struct file_info *fi = value;
	for (size_t i = 0; i < MAX_SPACES; i++)
		if (u->spaces[i] && space_uses(u->spaces[i], fi))
			space_drop(u, i);
	free(fi->private_image);
	free(fi);
}

int unwind_libdw_new(struct unwind_libdw **out)
{
	*out = NULL;
	/* libelf refuses every descriptor until the version is set; setting it again is harmless. */
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	struct unwind_libdw *u = calloc(1, sizeof(*u));
	struct file_cache_hooks hooks = { file_info_make, file_info_release, u };
	if (!u)
		return -ENOMEM;
	if (file_cache_new(&hooks, &u->files) < 0) {
		free(u);
		return -ENOMEM;
	}
	Elf64_Ehdr *eh = &u->arch_ehdr;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(*eh);
	u->arch_elf = elf_memory((char *)eh, sizeof(*eh));
	if (!u->arch_elf) {
		file_cache_free(u->files);
		free(u);
		return -ENOMEM;
	}
	*out = u;
	return 0;
}

void unwind_libdw_forget(struct unwind_libdw *u, const void *cache_key)
{
	if (u)
		file_cache_forget(u->files, cache_key);
}

void unwind_libdw_forget_process(struct unwind_libdw *u, const void *proc_ctx)
{
	if (!u)
		return;
	for (size_t i = 0; i < MAX_SPACES; i++)
		if (u->spaces[i] && u->spaces[i]->ctx == proc_ctx)
			space_drop(u, i);
}

void unwind_libdw_free(struct unwind_libdw *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < MAX_SPACES; i++)
		space_drop(u, i);
	file_cache_free(u->files);
	elf_end(u->arch_elf);
	free(u);
}
