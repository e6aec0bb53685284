/*
 * unwind.h — types shared by hostprof's unwinders.
 *
 * An unwinder turns one perf sample (user registers + a copy of the user stack, taken by the kernel at sample
 * time) into a list of absolute instruction addresses, leaf first. It never touches the live process: the only
 * memory it reads is the stack copy and the read-only contents of the ELF files mapped into the process, which
 * the caller exposes through `struct unwind_module`. What must be read from the process's memory besides (a Go
 * goroutine's stack: go_stack.h) is read through the reader the caller injects (`struct unwind_memory`): the
 * live process, bytes read while the thread was held, or bytes recorded for a replay.
 *
 * unwind/ is a library: it includes nothing of src/ but the base layer (src/base/). The caller describes the
 * process through the callbacks below.
 */
#ifndef HOSTPROF_UNWIND_H
#define HOSTPROF_UNWIND_H

#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stack_deltas;

/* x86_64 registers in the order of the kernel's perf_regs (asm/perf_regs.h), as found in a sample when
 * sample_regs_user asks for them. */
enum unwind_reg {
	UNWIND_REG_AX, UNWIND_REG_BX, UNWIND_REG_CX, UNWIND_REG_DX, UNWIND_REG_SI, UNWIND_REG_DI,
	UNWIND_REG_BP, UNWIND_REG_SP, UNWIND_REG_IP, UNWIND_REG_FLAGS, UNWIND_REG_CS, UNWIND_REG_SS,
	UNWIND_REG_DS, UNWIND_REG_ES, UNWIND_REG_FS, UNWIND_REG_GS,
	UNWIND_REG_R8, UNWIND_REG_R9, UNWIND_REG_R10, UNWIND_REG_R11, UNWIND_REG_R12, UNWIND_REG_R13,
	UNWIND_REG_R14, UNWIND_REG_R15,
	UNWIND_NREGS
};

/* The sample_regs_user mask hostprof asks for: the general-purpose registers and IP, not segments or flags. */
#define UNWIND_SAMPLE_REGS_MASK \
	(((1ULL << (UNWIND_REG_IP + 1)) - 1) | (0xffULL << UNWIND_REG_R8))

/*
 * One sample's user state. regs[] is indexed by enum unwind_reg; registers absent from the sample are 0.
 * fp_chain, when the caller has one, is the kernel's walk of the frame-pointer chain at the sample (the user part
 * of PERF_SAMPLE_CALLCHAIN: the sampled IP, then the return address found above each saved frame pointer); it
 * is data the sample carries, not a stack an unwinder may read (only unwind_deltas uses it, see there).
 */
struct unwind_sample {
	uint64_t regs[UNWIND_NREGS];
	const uint8_t *stack;	/* copy of user memory starting at regs[UNWIND_REG_SP] */
	size_t stack_size;	/* bytes valid in stack (the kernel's dyn_size) */
	const uint64_t *fp_chain;	/* NULL when the sample has none */
	size_t fp_chain_len;
};

/* An executable mapping of the sampled process, as the caller knows it: a file's, or JIT code. */
struct unwind_module {
	uint64_t start, end;	/* runtime address range [start, end) of this mapping */
	uint64_t pgoff;		/* file offset mapped at start */
	uint64_t bias;		/* runtime address minus ELF virtual address for this file in this process */
	Elf *elf;		/* open ELF image, owned by the caller; NULL if the file could not be read */
	const void *cache_key;	/* stable identity of the file (e.g. its executable-info); unwinders may key
				 * per-file caches on it until unwind_*_forget(key) is called */
	const struct stack_deltas *deltas; /* the file's stack-delta table (unwind/stack_deltas.h), built once
				 * per file and owned by the caller; NULL lets unwind_deltas build its own */
	bool table_pending;	/* deltas is NULL because the caller's table is still being built elsewhere:
				 * unwind_deltas builds none of its own (that is the wait the caller avoids) and
				 * steps through the module with its fallback */
	bool not_code;		/* a mapping no frame can be in (a file's data, read for its .eh_frame_hdr):
				 * unwinders read it, and give no frame its module (unwind_frame) */
	bool table_refused;	/* deltas is NULL and none is to be made now (the caller's memory budget):
				 * unwind_deltas neither builds one nor reads the file with its fallback (which
				 * touches as much of it): a walk ends at the module's frame, truncated */
	bool jit;		/* JIT code: executable memory no file backs (elf, deltas and cache_key NULL) whose
				 * runtime keeps frame pointers in it; unwind_deltas walks it by them, checking each
				 * step, the other unwinders treat it as code without unwind information */
	uint32_t jit_cfa_sp;	/* JIT code of a known shape (a runtime's fixed trampoline, which keeps no frame
				 * pointer): nonzero, and in all of [start, end) the CFA is SP + jit_cfa_sp and FP is
				 * the caller's; 0: walked by frame pointer */
	bool jit_fp_saved;	/* with jit_cfa_sp: FP is not the caller's, which is saved at CFA - 16 (a JVM's
				 * compiled frame, whose code uses FP as a general register) */
	bool jit_leaf_shapes;	/* where the code was sampled (the leaf), the frame may not be the one the rule
				 * gives but in an epilogue or prologue, or one word deeper (a JVM's code): those
				 * shapes are tried where the rule's return address fails its check; code walked
				 * by frame pointer (a stub that may keep no frame) has the return address on top
				 * of the stack tried first */
	bool jit_sender_sp;	/* walked by frame pointer (jit_cfa_sp 0), but the caller's SP is saved at FP - 8,
				 * not FP + 16 (a JVM's interpreter: an adapter pushed its arguments and locals
				 * below the caller's SP, which the caller's frame size is counted from) */
	uint32_t jit_frame_word_at; /* walked by frame pointer: nonzero, for a frame whose code is in
				 * [jit_word_start, jit_word_end), the word at FP - jit_frame_word_at says what it
				 * runs (a JVM interpreter's Method), given in unwind_frame.frame_word (a range in
				 * the module: a JVM that keeps frame pointers is one module, its interpreter in it) */
	uint64_t jit_word_start, jit_word_end;
};

/*
 * The sampled process's memory, as the caller lets unwind/ read it. read copies at most len bytes at addr into buf
 * and returns how many it copied — fewer than len only where readable memory ends — or a negative errno: -EFAULT
 * (nothing readable at addr), -ESRCH (the process is gone), -EPERM. It never writes past buf + len. The reader
 * may be the live process now (src/processes/procmem.h), so what it returns may have changed since the sample: users check
 * what they read against the sample (go_stack.h says how).
 */
struct unwind_memory {
	ssize_t (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};

/* Exactly len bytes at addr through mem: 0, the reader's negative errno, or -EFAULT where fewer were readable. */
static inline int unwind_memory_read_exact(const struct unwind_memory *mem, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = mem->read(mem->ctx, addr, buf, len);
	return n < 0 ? (int)n : (size_t)n == len ? 0 : -EFAULT;
}

/* Callbacks through which an unwinder sees the process. */
struct unwind_process {
	/* Fill *mod with the executable mapping containing addr. Returns 0, or -ENOENT when none does. */
	int (*find_module)(void *ctx, uint64_t addr, struct unwind_module *mod);
	/* The same for an address the unwinder only checks (a return address a JIT frame's rule found, which may be
	 * any word): a miss costs nothing more (no re-read of the process's mappings). NULL: find_module. */
	int (*probe_module)(void *ctx, uint64_t addr, struct unwind_module *mod);
	void *ctx;
	/* The process's memory for the hooks that need it (Go stack following), or NULL: nothing is read. The
	 * unwinders themselves never read it. */
	const struct unwind_memory *memory;
};

/* How an unwind ended. */
enum unwind_status {
	UNWIND_COMPLETE,	/* reached the outermost frame (_start, thread entry, undefined return address) */
	UNWIND_TRUNCATED,	/* stopped early: stack copy exhausted, no unwind info, bad CFA, frame limit */
	UNWIND_UNKNOWN_LEAF,	/* the sampled IP is not in any known mapping */
};

#define UNWIND_FRAME_SIGNAL 0x1	/* this frame was interrupted by a signal: its IP is exact, not a return address */

struct unwind_frame {
	uint64_t ip;		/* absolute address; for callers this is the return address as found on the stack */
	uint32_t flags;		/* UNWIND_FRAME_* */
	/* The module the frame is in, where the unwinder found it on its way (unwind_deltas: its cache_key and
	 * bias, the file a frame in code is in), so that the caller need not look it up again; NULL when not known
	 * (the caller looks it up: JIT code, the reference unwinders). */
	const void *module;
	union {	/* one or the other: a frame keeps the size of four words, a walk's frames a few KiB */
		uint64_t bias;		/* with module */
		uint64_t frame_word;	/* JIT code (module NULL, unwind_deltas): the word the frame's
					 * unwind_module.jit_frame_word_at names, read from its stack where its frame
					 * pointer was checked; 0: none. Unchecked: believed only as far as the caller
					 * can check it */
	};
};

/* Frames a walk keeps in the replay tools and tests (their frame arrays live on the stack). The unwinders take
 * the bound as an argument and end a walk cut by it UNWIND_TRUNCATED; a session sets its own (--max-frames). */
#define UNWIND_MAX_FRAMES 256

#endif
