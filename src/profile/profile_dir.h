/*
 * profile_dir.h — the daemon's output directory: profile file names that sort by time, and retention.
 *
 * Profiles are named "profile-YYYYMMDDTHHMMSSZ-NNNNNN.msgpack" (UTC, then a sequence number), so a plain sort
 * is chronological. Retention deletes the oldest such files until at most max_files remain and they total at most
 * max_bytes; nothing else in the directory is touched, except temporary files the profile writer left behind
 * when the daemon was killed mid-write ("profile-*.msgpack.tmp.*"), removed at start.
 */
#ifndef HOSTPROF_PROFILE_DIR_H
#define HOSTPROF_PROFILE_DIR_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The name for a profile written at unix time t with sequence number seq, into buf (dir + "/" + name). */
int profile_dir_name(const char *dir, time_t t, unsigned seq, char *buf, size_t len);

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
