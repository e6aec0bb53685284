/*
 * call_site.h — whether an address is a plausible return address: right after a call instruction, in an ELF
 * file's executable code.
 *
 * A walk that guesses a frame (code without CFI, where the rule comes from a prologue analysis or the
 * frame-pointer convention; a general unwinder's heuristics) reads its caller's return address from wherever
 * the guess says. A wrong guess reads a local variable, a saved register, a pointer into data. A real return
 * address follows a call: some call instruction ends exactly there. The check decodes the file's bytes before
 * the address with capstone, for every length an x86_64 instruction can have, and accepts the address when one
 * of them is a single call instruction ending at it.
 *
 * Reads only the ELF image (elf_rawfile), and only bytes inside a PT_LOAD segment with PF_X: an address in a
 * file's data is never a return address. Results are cached per (file key, address) in a direct-mapped cache
 * (return addresses repeat from sample to sample); a lookup that hits decodes nothing.
 *
 * Ownership: call_site_new() / call_site_free(). Call call_site_forget(key) before the file behind a key is
 * closed or the key reused. Not thread-safe: one instance per unwinder. Allocates only in call_site_new().
 * Errors are negative errno values.
 */
#ifndef HOSTPROF_CALL_SITE_H
#define HOSTPROF_CALL_SITE_H

#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>

struct call_site;

/* Returns 0 and *out, -ENOMEM, or -ENOTSUP when capstone cannot be opened. */
int call_site_new(struct call_site **out);
void call_site_free(struct call_site *c);

/*
 * Whether ELF virtual address va of elf follows a call instruction in an executable segment of the file. key
 * names the file for the cache (NULL: elf itself). False when the bytes cannot be read (no image, outside
 * every executable segment).
 */
bool call_site_follows_call(struct call_site *c, Elf *elf, const void *key, uint64_t va);

/* Drop cached results for this file key. */
void call_site_forget(struct call_site *c, const void *key);

struct call_site_stats {
	uint64_t checks, cache_hits, rejected;
};
void call_site_get_stats(const struct call_site *c, struct call_site_stats *out);

#endif
