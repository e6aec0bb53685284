/*
 * atomic_file.h — write a file so that a reader sees the old file or the whole new one, never a part of it, and
 * a crash leaves one of the two.
 *
 * The data goes to "<path>.tmp.XXXXXX" in path's directory (six random letters or digits), created exclusively
 * with mode 0666 minus the umask — the mode any new file gets, not mkstemp's private 0600. Committing flushes
 * and fsyncs it, renames it over path, then fsyncs the directory so that the rename itself is durable. That
 * last fsync is best effort: the file is complete and in place whatever it returns, and some file systems
 * refuse fsync on a directory. Profiles and replay files are written this way (profile.h, replay.h); the
 * daemon removes temporary files a kill left behind (profile_dir.h). atomic_file_commit_new() never replaces a
 * file that exists (the daemon's profiles: a name used twice must not lose the first): rename(2) with
 * RENAME_NOREPLACE, or link(2) and unlink(2) of the temporary name where the file system has no such rename.
 *
 * Ownership: atomic_file_new() returns a handle that owns the temporary file and its stream; exactly one of
 * atomic_file_commit() and atomic_file_discard() ends it (both free the handle). On failure of either, the
 * temporary file is removed and path is untouched.
 * Errors: negative errno. Not thread-safe per handle; handles are independent.
 */
#ifndef HOSTPROF_BASE_ATOMIC_FILE_H
#define HOSTPROF_BASE_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

struct atomic_file;

/* Create the temporary file for path. Returns 0, or -ENOMEM, or open(2)'s error (-EACCES, -ENOENT, ...). */
int atomic_file_new(const char *path, struct atomic_file **out);

/* The stream to write the new contents to (fully buffered); owned by f. Do not fclose it. */
FILE *atomic_file_stream(struct atomic_file *f);

/* Flush, fsync, rename over the path given to atomic_file_new(), fsync the directory; frees f. Returns 0 or
 * the first write, flush, fsync or rename error. */
int atomic_file_commit(struct atomic_file *f);

/* As atomic_file_commit(), but path is never replaced: -EEXIST, and the temporary file removed, when a file (or
 * anything else) has that name already. */
int atomic_file_commit_new(struct atomic_file *f);

/* Remove the temporary file and free f; path is untouched. NULL is a no-op. */
void atomic_file_discard(struct atomic_file *f);

/* The whole of data[0..size) as path's new contents: atomic_file_new, one write, atomic_file_commit. */
int atomic_file_write(const char *path, const void *data, size_t size);
/* The same with atomic_file_commit_new(): -EEXIST when path exists. */
int atomic_file_write_new(const char *path, const void *data, size_t size);

/* Whether path could be written now, checked the way it will be: a temporary file is created in its directory
 * and removed again; path itself is untouched. For commands that should refuse an unwritable output before
 * hours of work rather than after. Returns 0, -EISDIR when path is a directory, or atomic_file_new()'s error.
 * A full disk usually passes (an empty file needs no data block): the final write can still fail. */
int atomic_file_probe(const char *path);

#endif
