/*
 * profile_dir.h — the daemon's output directory: profile file names that sort by time and are never reused,
 * the lock that keeps it one daemon's, and retention.
 *
 * Profiles are named "profile-YYYYMMDDTHHMMSSZ-NNNNNN.msgpack": the UTC second the profile's interval started,
 * then a number, one more than the highest a profile of that second already has in the directory (0 for the
 * first). So a plain sort is chronological, and a daemon restarted within the same second (or a profile written
 * twice in one second: SIGUSR1, a reload) takes a name of its own instead of the one an earlier run wrote; the
 * number is the directory's, not a counter of the daemon's, so it survives restarts. (Not a random suffix: that
 * would not sort in the order the profiles were written.) The daemon writes with profile_write_new_file(), which
 * never replaces a file, and takes the next name if one appeared meanwhile.
 *
 * One daemon per directory: profile_dir_lock() takes an advisory lock (flock(2)) on the file
 * PROFILE_DIR_LOCK_NAME in it, which holds the pid of the daemon that has it; a second daemon is refused and told
 * that pid. The lock lives as long as its descriptor.
 *
 * Retention deletes the oldest profiles until at most max_files remain and they total at most max_bytes; nothing
 * else in the directory is touched, except temporary files the profile writer left behind when the daemon was
 * killed mid-write ("profile-*.msgpack.tmp.*"), removed at start (by the daemon holding the lock: another's
 * files being written are never touched).
 */
#ifndef HOSTPROF_PROFILE_DIR_H
#define HOSTPROF_PROFILE_DIR_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The name for a profile written at unix time t with sequence number seq, into buf (dir + "/" + name). */
int profile_dir_name(const char *dir, time_t t, unsigned seq, char *buf, size_t len);

/* The most profiles one second can have: the number has six digits. */
#define PROFILE_DIR_MAX_SEQ 999999u

/* The next free name for a profile of unix time t into buf (dir + "/" + name): its number one more than the
 * highest of the profiles of that second in dir, 0 when there is none. Returns 0, -ENAMETOOLONG, -EEXIST when
 * that second has PROFILE_DIR_MAX_SEQ already, or opendir(3)'s error. */
int profile_dir_next_name(const char *dir, time_t t, char *buf, size_t len);

/* The lock file in the output directory, holding the pid of the daemon that has the lock. */
#define PROFILE_DIR_LOCK_NAME "hostprof-daemon.lock"

/* Take dir's lock without waiting (creating its file, mode 0644, when missing) and write this process's pid into
 * it (best effort: a full disk may have no room for it). Returns 0 with the descriptor that holds the lock in *fd
 * (closing it, or profile_dir_unlock(), releases it); -EWOULDBLOCK when another process has it, with its pid in
 * *holder (0 when the file does not say, as when it has just taken the lock); -ELOOP or -EINVAL when the lock
 * file is a symlink or no regular file; or open(2)'s or flock(2)'s error. */
int profile_dir_lock(const char *dir, int *fd, int *holder);

/* Release the lock taken by profile_dir_lock() (its pid is cleared from the file first). fd < 0 is a no-op. */
void profile_dir_unlock(int fd);

/* Create dir (mode 0750) if missing. Returns 0 or a negative errno. */
int profile_dir_prepare(const char *dir);

/* Remove stale temporary files; returns how many. */
int profile_dir_clean_temporaries(const char *dir);

/* Apply retention (0 = no limit for either). Returns files deleted, or a negative errno. */
int profile_dir_retain(const char *dir, unsigned max_files, uint64_t max_bytes);

/* Delete the oldest profile, to make room on a full disk for a newer one (the newest may go too: what waits
 * to be written is newer still). Returns 1 with its file name in name[0..len), 0 when there is none, or a
 * negative errno. */
int profile_dir_remove_oldest(const char *dir, char *name, size_t len);

#endif
