/*
 * regular_file.h — open, for reading, a file someone else named (a user's argument, a path a process mapped),
 * only if it is a regular file.
 *
 * A profile, replay file, config file or library path may name a FIFO, a device or a socket, by mistake or
 * planted by a hostile process. open(2) of a FIFO blocks until a writer comes, which may be never; opening a
 * device can have effects of its own (a tape rewinds, a watchdog arms); reading either may never end. So the
 * path is looked at first (stat, following symlinks as open(2) will unless O_NOFOLLOW is given) and anything
 * but a regular file is refused without being opened. What is opened is opened with O_NONBLOCK and O_NOCTTY and
 * checked again with fstat (the path may have been replaced in between: then it is refused, it never blocks),
 * and only then is O_NONBLOCK cleared, so that the file reads as usual.
 *
 * Errors: negative errno. -EINVAL for anything but a regular file, a directory too, with st->st_mode saying what
 * it is (regular_file_kind() names it for a message); -ELOOP for a symlink under O_NOFOLLOW; else stat(2)'s,
 * open(2)'s or fcntl(2)'s error (-ENOENT, -EACCES, ...). No state; thread-safe.
 */
#ifndef HOSTPROF_BASE_REGULAR_FILE_H
#define HOSTPROF_BASE_REGULAR_FILE_H

#include <stdbool.h>
#include <sys/stat.h>

/* Open path (relative to dirfd, or AT_FDCWD) read-only, close-on-exec, with the further open(2) flags given
 * (O_NOFOLLOW, O_NOATIME): returns the descriptor, the caller's to close, with its status in *st (st may be
 * NULL); or a negative errno (see above). */
int regular_file_open(int dirfd, const char *path, int flags, struct stat *st);

/* Whether no user but root and the effective user can write the file: owned by one of them, without group or
 * other write permission. What a cache keyed by a file's build-id needs of the file (another user's file could
 * claim any build-id), and what a file mapped by a root process needs (no one else can truncate it). */
bool regular_file_writable_by_us_only(const struct stat *st);

/* Whether only root can write the file: owned by root, without group or other write permission. What a file
 * needs to be mapped rather than read (ELF_C_READ_MMAP): no user, not even the one profiling, can truncate it
 * under the mapping, which would kill the reader with SIGBUS; packages replace such files by rename. */
bool regular_file_root_only(const struct stat *st);

/* What a st_mode is, for "not a regular file (a FIFO)": "a FIFO", "a directory", "a character device", ... */
const char *regular_file_kind(mode_t mode);

#endif
