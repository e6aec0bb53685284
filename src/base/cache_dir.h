/*
 * cache_dir.h — hostprof's per-user cache directory, and the files in it that may be trusted.
 *
 * Caches spare work a run would otherwise repeat (the kernel's symbol table, decompressed debug files). They are
 * inputs of a root daemon, so a cache is used only from a directory owned by the effective user with no access
 * for group or others (created so, mode 0700, when absent), and only its regular files owned by that user that
 * no other may write, opened without following symlinks. Whatever a file holds is still checked by its reader.
 *
 * Each cache bounds its own files' total size: cache_dir_make_room() removes its least recently used files
 * (oldest modification time; a reader marks a file used by touching it) before a new one is written. Weighing
 * them means a stat of each, ~3 ms in a directory of 2000 files, and a run writes several: so the room left after
 * a listing is kept in a ledger file, "<suffix>.room" (locked while used, so that writers take from it in turn),
 * and a write that fits in it takes its size from it with no listing. The ledger counts a replaced file's size
 * twice (it is gone only once the new one is in place): it errs towards listing again. It is trusted for
 * CACHE_DIR_LEDGER_TTL_S after its listing, against files others removed or added behind its back. Writes in
 * flight while another process lists are not counted by that listing: the bound may be passed by them, as
 * without a ledger.
 *
 * Errors: negative errno (-EPERM for a directory or file not private to the user). No state: every call is
 * independent; the caller owns returned descriptors.
 */
#ifndef HOSTPROF_BASE_CACHE_DIR_H
#define HOSTPROF_BASE_CACHE_DIR_H

#include <stddef.h>
#include <sys/stat.h>

/* /var/cache/hostprof for root, else $XDG_CACHE_HOME/hostprof or $HOME/.cache/hostprof. Returns 0, -ENOENT
 * without a home, -ENAMETOOLONG. */
int cache_dir_default(char *buf, size_t len);

/* The directory at path, created (mode 0700, and its parent when absent) if needed. Returns its descriptor,
 * -EPERM if it is not private to the effective user, or another negative errno. */
int cache_dir_open(const char *path);

/* The file name in the directory dirfd, for reading, with its status in *st. Returns a descriptor, -EPERM for
 * anything but a regular file private to the effective user, -ELOOP for a symlink, or open(2)'s error. */
int cache_dir_open_file(int dirfd, const char *name, struct stat *st);

/* Files cache_dir_make_room() removes per listing of the directory (the least recently used); a directory of
 * more takes more listings. */
#define CACHE_DIR_EVICT_MAX_FILES 4096

#define CACHE_DIR_LEDGER_SUFFIX ".room"
#define CACHE_DIR_LEDGER_TTL_S 600
#define CACHE_DIR_NAME_MAX 256

/* Whether need is the size of the file to be written, or a guess (a decompressed copy's). */
enum cache_need {
	CACHE_NEED_EXACT,
	CACHE_NEED_ESTIMATE,	/* the files are weighed, and the ledger left with no room: the next write weighs
				 * them again, with the file written */
};

/* Remove the least recently used regular files of dirfd whose names end in suffix until need more bytes fit in
 * max_bytes with those left, unless the ledger says they fit. Best effort: a file another process removed first
 * is skipped; without a ledger (it cannot be made, is not private, or another writer holds it), the files are
 * weighed every time. */
void cache_dir_make_room(int dirfd, const char *suffix, unsigned long long max_bytes, unsigned long long need,
			 enum cache_need exact);

#endif
