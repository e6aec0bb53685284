/*
 * kallsyms.h — kernel symbols from /proc/kallsyms.
 *
 * Ownership: kallsyms_load() gives a table owned by the caller (kallsyms_free()); returned strings live as
 * long as the table. Reading a kallsyms without permission yields all-zero addresses: the load then fails with
 * -EPERM rather than returning a table that would name every address wrongly.
 */
#ifndef HOSTPROF_KALLSYMS_H
#define HOSTPROF_KALLSYMS_H

#include <stdint.h>

struct kallsyms;

/* path is normally "/proc/kallsyms". Returns 0 and *out (free with kallsyms_free()), -ENOMEM, -EINVAL (path NULL),
 * open(2)'s or read(2)'s error, -EPERM (addresses hidden), or -ENODATA (no symbols); *out is set only on success.
 * Reading the whole of /proc/kallsyms costs ~60 ms of kernel time (it formats every symbol): load it only to name
 * kernel frames. */
int kallsyms_load(const char *path, struct kallsyms **out);
void kallsyms_free(struct kallsyms *k);

/* Nearest symbol at or below addr. Returns its name (and module, NULL for vmlinux) or NULL. */
const char *kallsyms_lookup(const struct kallsyms *k, uint64_t addr, uint64_t *offset, const char **module);

/* Address of the kernel's _text (start of vmlinux), 0 if unknown. */
uint64_t kallsyms_text_start(const struct kallsyms *k);

/* _text alone, cheaply: it is among the first lines (read until it is found, in large reads). Returns 0 and
 * *addr, -ENOENT if absent, -EPERM if addresses are hidden (all zero), or another negative errno. */
int kallsyms_read_text_start(const char *path, uint64_t *addr);

#endif
