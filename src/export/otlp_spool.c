/*
 * otlp_spool.c — the ordered, bounded, persistent queue of requests to send (otlp_spool.h).
 */
#include "src/export/otlp_spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/atomic_file.h"
#include "src/base/read_file.h"
#include "src/base/regular_file.h"

/* A request's file name: its sequence number, 16 hex digits, and this suffix. */
#define SPOOL_SUFFIX ".otlp"
/* A spooled request is never larger than this (an interval's profile is a few MiB at most). */
#define SPOOL_MAX_REQUEST (256ULL << 20)

struct entry {
	uint64_t seq;
	size_t len;
	uint8_t *data;		/* memory spool only */
};

struct otlp_spool {
	char *dir;		/* NULL: memory only */
	uint64_t max_bytes, bytes, next_seq, dropped;
	struct entry *entries;	/* oldest first, from head */
	unsigned head, count, cap;
	bool oldest_in_flight;	/* peeked and not yet popped or released: never dropped for room */
	struct log_sink log;
};

static void entry_path(const struct otlp_spool *s, uint64_t seq, char *out, size_t size)
{
	snprintf(out, size, "%s/%016" PRIx64 SPOOL_SUFFIX, s->dir, seq);
}

static int append_entry(struct otlp_spool *s, struct entry e)
{
	if (s->head + s->count == s->cap) {
		if (s->head) {	/* room at the front: move down rather than grow */
			memmove(s->entries, s->entries + s->head, s->count * sizeof(*s->entries));
			s->head = 0;
		} else {
			unsigned cap = s->cap ? s->cap * 2 : 16;
			struct entry *n = realloc(s->entries, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			s->entries = n;
			s->cap = cap;
		}
	}
	s->entries[s->head + s->count++] = e;
	s->bytes += e.len;
	return 0;
}

/* The name of a spool file: its sequence number, or -1 when it is not one of ours. */
static int64_t parse_name(const char *name)
{
	char *end;
	size_t n = strlen(name);
	if (n != 16 + strlen(SPOOL_SUFFIX) || strcmp(name + 16, SPOOL_SUFFIX) != 0)
		return -1;
	uint64_t seq = strtoull(name, &end, 16);
	return end == name + 16 && seq < INT64_MAX ? (int64_t)seq : -1;
}

/* A temporary file of a request's write: "<16 hex digits>.otlp.tmp.XXXXXX". */
static int is_leftover(const char *name)
{
	const char *tmp = strstr(name, SPOOL_SUFFIX ".tmp.");
	return tmp == name + 16 && strspn(name, "0123456789abcdef") == 16;
}

static int cmp_entry(const void *a, const void *b)
{
	uint64_t x = ((const struct entry *)a)->seq, y = ((const struct entry *)b)->seq;
	return x < y ? -1 : x > y;
}

/* The requests an earlier run left, oldest first; sending goes on after the newest. */
static int load_dir(struct otlp_spool *s)
{
	DIR *d = opendir(s->dir);
	if (!d)
		return -errno;
	int err = 0;
	for (struct dirent *de; !err && (de = readdir(d));) {
		int64_t seq = parse_name(de->d_name);
		struct stat st;
		if (is_leftover(de->d_name)) {	/* a write a kill cut short (atomic_file.h): never complete */
			unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (seq < 0 || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		err = append_entry(s, (struct entry){ .seq = (uint64_t)seq, .len = (size_t)st.st_size });
		if ((uint64_t)seq >= s->next_seq)
			s->next_seq = (uint64_t)seq + 1;
	}
	closedir(d);
	if (!err && s->count)
		qsort(s->entries, s->count, sizeof(*s->entries), cmp_entry);
	if (!err && s->count)
		log_write(&s->log, LOG_LEVEL_INFO, "otlp: %u profiles (%.1f MiB) waiting in %s from before, sent first",
			  s->count, s->bytes / 1048576.0, s->dir);
	return err;
}

int otlp_spool_open(const char *dir, uint64_t max_bytes, const struct log_sink *log, struct otlp_spool **out)
{
	struct otlp_spool *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->max_bytes = max_bytes;
	if (log)
		s->log = *log;
	int err = 0;
	if (dir && !(s->dir = strdup(dir)))
		err = -ENOMEM;
	if (!err && dir && mkdir(dir, 0700) < 0 && errno != EEXIST)
		err = -errno;
	if (!err && dir)
		err = load_dir(s);
	if (err < 0) {
		otlp_spool_close(s);
		return err;
	}
	*out = s;
	return 0;
}

void otlp_spool_close(struct otlp_spool *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->count; i++)
		free(s->entries[s->head + i].data);
	free(s->entries);
	free(s->dir);
	free(s);
}

/* Remove the request at position i from the oldest (0 or 1); dropped: for room, said in the log. */
static void remove_entry(struct otlp_spool *s, unsigned i, int dropped)
{
	struct entry *e = &s->entries[s->head + i];
	char path[PATH_MAX];
	if (s->dir) {
		entry_path(s, e->seq, path, sizeof(path));
		unlink(path);
	}
	if (dropped) {
		s->dropped++;
		log_write(&s->log, LOG_LEVEL_WARN, "otlp: spool full (%.1f MiB of %.1f MiB): dropped the oldest profile "
			  "waiting to be sent (%.1f KiB)", s->bytes / 1048576.0, s->max_bytes / 1048576.0, e->len / 1024.0);
	}
	s->bytes -= e->len;
	free(e->data);
	if (i == 1)	/* the oldest stays, one place on */
		s->entries[s->head + 1] = s->entries[s->head];
	s->head++;
	s->count--;
	if (!s->count)
		s->head = 0;
}

/* Room for len more bytes: the oldest requests go first, but the one being sent, which the receiver may have
 * taken already. -ENOSPC when only that one is left and there is still no room. */
static int make_room(struct otlp_spool *s, size_t len)
{
	while (s->max_bytes && s->bytes + len > s->max_bytes) {
		if (s->count > (s->oldest_in_flight ? 1u : 0u))
			remove_entry(s, s->oldest_in_flight ? 1 : 0, 1);
		else if (s->count)
			return -ENOSPC;
		else
			break;
	}
	return 0;
}

int otlp_spool_push(struct otlp_spool *s, uint8_t *data, size_t len)
{
	int err = 0;
	char path[PATH_MAX];
	if ((s->max_bytes && len > s->max_bytes) || len > SPOOL_MAX_REQUEST) {
		free(data);
		return -EFBIG;
	}
	if ((err = make_room(s, len)) < 0) {
		free(data);
		return err;
	}
	struct entry e = { .seq = s->next_seq, .len = len };
	if (s->dir) {
		entry_path(s, e.seq, path, sizeof(path));
		err = atomic_file_write_new(path, data, len);
		free(data);
	} else {
		e.data = data;
	}
	if (!err && (err = append_entry(s, e)) < 0) {
		if (s->dir)
			unlink(path);
		free(e.data);
	}
	if (!err)
		s->next_seq++;
	return err;
}

int otlp_spool_peek(struct otlp_spool *s, uint8_t **data, size_t *len)
{
	char path[PATH_MAX];
	while (s->count) {
		struct entry *e = &s->entries[s->head];
		if (!s->dir) {
			if (!(*data = malloc(e->len ? e->len : 1)))
				return -ENOMEM;
			memcpy(*data, e->data, e->len);
			*len = e->len;
			s->oldest_in_flight = true;
			return 0;
		}
		entry_path(s, e->seq, path, sizeof(path));
		int fd = regular_file_open(AT_FDCWD, path, O_NOFOLLOW, NULL);
		int err = fd < 0 ? fd : read_fd_all(fd, SPOOL_MAX_REQUEST, data, len);
		if (fd >= 0)
			close(fd);
		if (err == 0) {
			s->oldest_in_flight = true;
			return 0;
		}
		if (err == -ENOMEM)
			return err;
		log_write(&s->log, LOG_LEVEL_WARN, "otlp: cannot read %s (%s): that profile is dropped", path,
			  strerror(-err));
		remove_entry(s, 0, 0);
	}
	return -ENOENT;
}

void otlp_spool_pop(struct otlp_spool *s)
{
	if (s->count)
		remove_entry(s, 0, 0);
	s->oldest_in_flight = false;
}

void otlp_spool_release(struct otlp_spool *s)
{
	s->oldest_in_flight = false;
}

unsigned otlp_spool_count(const struct otlp_spool *s)
{
	return s->count;
}

uint64_t otlp_spool_bytes(const struct otlp_spool *s)
{
	return s->bytes;
}

uint64_t otlp_spool_dropped(const struct otlp_spool *s)
{
	return s->dropped;
}
