/*
 * stubs.h — names for code no symbol covers: PLT stubs ("tiny@plt") and the signal return trampoline
 * ("__restore_rt").
 *
 * A call to a function of another file goes through a stub in the caller's .plt, .plt.sec (IBT) or .plt.got,
 * which jumps through a GOT slot the dynamic linker fills. No symbol covers the stubs; as perf does, each is
 * named after the function its slot is relocated to: the stub is decoded with capstone, the GOT slot of its
 * `jmp *slot(%rip)` (or, in an IBT .plt, the .rela.plt index its `push` names) looked up among the JUMP_SLOT
 * and GLOB_DAT relocations of .rela.plt and .rela.dyn, and the relocation's .dynsym name taken.
 *
 * The kernel returns from a signal handler through the C library's rt_sigreturn trampoline, which some builds
 * of libc name in no table they ship (Debian's libc.so.6 has no .symtab); it is recognised by its bytes
 * (stack_deltas.h: stack_delta_is_sigreturn).
 *
 * Ownership: stub_names_new() reads the PLT sections, and the relocations are read once, at the first address
 * in one (most files' stubs are never sampled); elf must stay open while the handle is used, and the names it
 * returns point into elf's .dynstr and stay valid while elf is open. Not thread-safe. Untrusted input: every
 * index, offset and size is checked; a PLT section larger than STUB_MAX_PLT_BYTES, or relocations past
 * STUB_MAX_RELOCS, are not used.
 */
#ifndef HOSTPROF_STUBS_H
#define HOSTPROF_STUBS_H

#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>

#define STUB_MAX_PLT_BYTES (16u << 20)
#define STUB_MAX_RELOCS (1u << 20)

struct stub_names;

/* The PLT stubs of elf. Returns 0 and *out (NULL for a file without PLT sections), or -ENOMEM. */
int stub_names_new(Elf *elf, struct stub_names **out);
void stub_names_free(struct stub_names *p);

/*
 * The .dynsym name (raw: mangled, no version) of the function whose PLT stub covers ELF address va, or NULL
 * when va is in no PLT section, its stub does not resolve to a named relocation, or there was no memory to read
 * the relocations.
 */
const char *stub_names_plt(struct stub_names *p, uint64_t va);

/* Whether the rt_sigreturn trampoline starts at ELF address va, or at va + 1 (where a return address into it,
 * minus 1, points), in an executable segment of elf. fd: the file elf reads, whose bytes there are read (-1: elf
 * is an image in memory, elf_memory()). */
bool stub_is_sigreturn(Elf *elf, int fd, uint64_t va);

#endif
