/*
 * kallsyms.h — kernel symbols from /proc/kallsyms.
 *
 * Ownership: kallsyms_load(), kallsyms_from_image() and kallsyms_from_mapping() return a table owned by the
 * caller (kallsyms_free()); returned strings live as long as the table. Reading a kallsyms without permission
 * yields all-zero addresses: the load then fails with -EPERM rather than returning a table that would name every
 * address wrongly.
 *
 * Images: a table can be saved as a flat image of the symbols inside given address spans (kallsyms_image) and
 * read back (kallsyms_from_image) in a few milliseconds, where reading /proc/kallsyms costs ~60 ms of the
 * kernel's formatting. A table read from an image answers for the addresses inside its spans only; a lookup of
 * any other address loads the whole file from the path given then (once) and answers from it, so that code
 * loaded since the image was made (BPF programs, ftrace trampolines) is named as it would be without the image.
 * Lookups may therefore modify the table: a table is not thread-safe. The images are caches of this machine
 * (native byte order, no stability across versions: the magic number names the format).
 * Untrusted input: kallsyms_from_image() checks every count, offset and order before using the image.
 */
#ifndef HOSTPROF_KALLSYMS_H
#define HOSTPROF_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

struct kallsyms;

/* path is normally "/proc/kallsyms". Returns 0 and *out (free with kallsyms_free()), -ENOMEM, -EINVAL (path NULL),
 * open(2)'s or read(2)'s error, -EPERM (addresses hidden), or -ENODATA (no symbols); *out is set only on success.
 * Reading the whole of /proc/kallsyms costs ~60 ms of kernel time (it formats every symbol): load it only to name
 * kernel frames. */
int kallsyms_load(const char *path, struct kallsyms **out);
void kallsyms_free(struct kallsyms *k);

/* Nearest symbol at or below addr. Returns its name (and module, NULL for vmlinux) or NULL. */
const char *kallsyms_lookup(struct kallsyms *k, uint64_t addr, uint64_t *offset, const char **module);

/* Address of the kernel's _text (start of vmlinux), 0 if unknown. */
uint64_t kallsyms_text_start(const struct kallsyms *k);

/* _text alone, cheaply: it is among the first lines (read until it is found, in large reads). Returns 0 and
 * *addr, -ENOENT if absent, -EPERM if addresses are hidden (all zero), or another negative errno. */
int kallsyms_read_text_start(const char *path, uint64_t *addr);

/* An address range [lo, hi). */
struct kallsyms_span {
	uint64_t lo, hi;
};

/*
 * An image of the symbols of k (a table loaded from the file) whose addresses lie in spans (sorted, disjoint,
 * non-empty, at most 65536): the table the image gives back answers for those addresses exactly as k does
 * only if every symbol at or below each of them that k holds lies in the same span — the caller's choice of
 * spans (the kernel image, each module's code). Returns 0 with *out (malloc'd, the caller frees) and *len,
 * -EINVAL for bad spans or a table read from an image, -ENODATA if no symbol lies in spans, -ENOMEM.
 */
int kallsyms_image(const struct kallsyms *k, const struct kallsyms_span *spans, size_t nspans, void **out,
		   size_t *len);

/*
 * The table an image holds; addresses outside its spans are looked up in fallback_path (normally
 * "/proc/kallsyms"), loaded on the first such lookup. Returns 0 and *out, -EINVAL for an image that is not
 * exactly one well-formed image of len bytes, -ENOMEM. image may be unaligned; it is copied.
 */
int kallsyms_from_image(const void *image, size_t len, const char *fallback_path, struct kallsyms **out);

/*
 * The same from an image at offset off of a mapping (mmap) of map_len bytes, read in place rather than copied
 * (a warm start reads ~5 MB less into fresh memory). On success the table owns the mapping: kallsyms_free()
 * unmaps it; on error it stays the caller's. The image must start 8-byte aligned (-EINVAL otherwise), and the
 * mapping must not change while the table lives (a private, read-only mapping of a file that is replaced only
 * by rename).
 */
int kallsyms_from_mapping(void *map, size_t map_len, size_t off, const char *fallback_path, struct kallsyms **out);

/* Symbols in k, one per address, in address order: for tests and comparisons. */
size_t kallsyms_count(const struct kallsyms *k);
/* Symbol i (< kallsyms_count): its address, name and module (NULL for vmlinux). */
void kallsyms_symbol(const struct kallsyms *k, size_t i, uint64_t *addr, const char **name, const char **module);

#endif
