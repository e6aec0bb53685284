/*
 * kallsyms_cache.h — the kernel's symbols from a per-boot cache file, /proc/kallsyms when there is none.
 *
 * Reading /proc/kallsyms costs ~60 ms of the kernel's formatting per run, for a table that does not change
 * while the machine runs the same kernel with the same modules. The first run of a boot saves the table as an
 * image (kallsyms.h) in a cache directory; later runs read that in a few milliseconds. The cache is used only
 * when its key matches the running kernel:
 *  - /proc/sys/kernel/random/boot_id (a new boot: a new kernel, new KASLR offsets),
 *  - the address of _text (read from the first lines of /proc/kallsyms, cheaply),
 *  - a hash of /proc/modules (name, size, state and address of every module: a module loaded, unloaded or
 *    moved changes it).
 * Code that the key does not follow (BPF programs, ftrace and kprobe trampolines) is not in the image: the
 * table answers only for the kernel image and each module's code from it, and loads /proc/kallsyms for any
 * other address (kallsyms.h), so names are those /proc/kallsyms gives in every case.
 *
 * The cache is a root daemon's input: it is used only from a directory owned by the effective user with no
 * access for group or others (it holds kernel addresses, which /proc/kallsyms shows to privileged users only),
 * and only a regular file there owned by that user, not writable by others; the file is checked for its
 * length, an XXH3-64 hash of the image and every field of the image before use. Anything else — a mismatch, a short
 * or corrupt file, a directory of another user — makes the load read /proc/kallsyms (and replace the file when
 * the directory is ours). Writes are atomic (src/base/atomic_file.h).
 *
 * Ownership: the table is the caller's (kallsyms_free()). Errors: negative errno.
 */
#ifndef HOSTPROF_KALLSYMS_CACHE_H
#define HOSTPROF_KALLSYMS_CACHE_H

#include <stddef.h>

#include "symbols/kallsyms.h"

/* Where the kernel's files are (NULL: the real ones under /proc) and the cache directory (NULL: no cache). */
struct kallsyms_cache_paths {
	const char *kallsyms;	/* /proc/kallsyms */
	const char *modules;	/* /proc/modules (absent on a kernel without modules: no modules) */
	const char *boot_id;	/* /proc/sys/kernel/random/boot_id */
	const char *dir;	/* created (mode 0700) when absent, with its parent directory */
};

/* How kallsyms_cache_open() came by its table. */
struct kallsyms_cache_result {
	int from_cache;		/* 1: read from the cache file */
	int refused;		/* why the cache file was not used: 0, or -ENOENT (none yet), -ESTALE (another key),
				 * -EINVAL (short or corrupt), -EPERM (directory or file not private to us), ... */
	int saved;		/* 1: the table was written to the cache */
	int save_err;		/* why not, when it was not: 0 or negative errno */
};

/* The kernel's symbols, from the cache when it is valid, else from /proc/kallsyms (then saved to the cache).
 * result may be NULL. Returns 0 and *out, or kallsyms_load()'s error. */
int kallsyms_cache_open(const struct kallsyms_cache_paths *paths, struct kallsyms **out,
			struct kallsyms_cache_result *result);

#endif
