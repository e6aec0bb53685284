/*
 * fallback_file.h — where an output goes when the directory it was meant for cannot take it.
 *
 * A profile is the result of a whole run: when its own file cannot be written at the end (a full disk, an I/O
 * error, a directory removed meanwhile), it is saved elsewhere rather than lost, and the caller says where. The
 * places tried, in order: $TMPDIR (when set to an absolute path), /var/tmp (kept across reboots), /tmp and
 * /dev/shm (memory: the last resort when every disk is full). The file is named
 * "hostprof-unsaved-<pid>-<name of the intended file>", with "-<n>" after the pid when that exists already, so
 * nothing there is overwritten.
 *
 * Errors: negative errno (the last place's error when none took the file). No state; thread-safe as far as the
 * write callback is.
 */
#ifndef HOSTPROF_BASE_FALLBACK_FILE_H
#define HOSTPROF_BASE_FALLBACK_FILE_H

#include <stddef.h>

/* Writes the output to path (atomically: atomic_file.h); 0 or a negative errno. */
typedef int (*fallback_write_fn)(void *arg, const char *path);

/* Save the output meant for intended into the first place that takes it: write(arg, path) there. Returns 0
 * with that path in path[0..pathlen), or a negative errno. */
int fallback_file_save(const char *intended, fallback_write_fn write, void *arg, char *path, size_t pathlen);

#endif
