/*
 * stack_deltas_cache.c — stack-delta tables on disk (see stack_deltas_cache.h).
 *
 * A cache file is a head (struct stack_deltas_cache_head) followed by the table's packed arrays
 * (stack_deltas_image). The head's size is a multiple of 8, so the arrays are aligned in the mapping.
 */
#include "unwind/stack_deltas_cache.h"

#include <capstone/capstone.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "src/base/atomic_file.h"
#include "src/base/cache_dir.h"
#include "src/base/clock.h"
#include "src/base/hindex.h"

/* The Makefile hashes the builder's sources (stack_deltas_cache.h) into this. */
#ifndef STACK_DELTAS_BUILDER_SOURCES
#error "STACK_DELTAS_BUILDER_SOURCES must name the hash of the table builder's sources (see the Makefile)"
#endif

_Static_assert(sizeof(struct stack_deltas_cache_head) % 8 == 0, "the arrays after the head stay 8-aligned");

struct stack_deltas_cache {
	char *dir;
	int dirfd;
	char builder[STACK_DELTAS_CACHE_BUILDER_MAX];
	char builder_hash[17];	/* of builder, in the file names */
};

/* ---- the handle ---- */

static void set_builder(struct stack_deltas_cache *c, const char *builder)
{
	snprintf(c->builder, sizeof(c->builder), "%s", builder);
	uint64_t h = hash_bytes(HASH_SEED, c->builder, strlen(c->builder));
	snprintf(c->builder_hash, sizeof(c->builder_hash), "%016llx", (unsigned long long)h);
}

int stack_deltas_cache_open_as(const char *dir, const char *builder, struct stack_deltas_cache **out)
{
	*out = NULL;
	if (strlen(builder) >= STACK_DELTAS_CACHE_BUILDER_MAX)
		return -EINVAL;
	struct stack_deltas_cache *c = calloc(1, sizeof(*c));
	if (!c || !(c->dir = strdup(dir))) {
		free(c);
		return -ENOMEM;
	}
	if ((c->dirfd = cache_dir_open(dir)) < 0) {
		int err = c->dirfd;
		free(c->dir);
		free(c);
		return err;
	}
	set_builder(c, builder);
	*out = c;
	return 0;
}

int stack_deltas_cache_open(const char *dir, struct stack_deltas_cache **out)
{
	char builder[STACK_DELTAS_CACHE_BUILDER_MAX];
	int major = 0, minor = 0;
	const char *dw = dwfl_version(NULL);
	cs_version(&major, &minor);
	snprintf(builder, sizeof(builder), "f%d src:%.16s dw:%.12s cs:%d.%d", STACK_DELTAS_CACHE_FORMAT,
		 STACK_DELTAS_BUILDER_SOURCES, dw ? dw : "?", major, minor);
	return stack_deltas_cache_open_as(dir, builder, out);
}

void stack_deltas_cache_free(struct stack_deltas_cache *c)
{
	if (!c)
		return;
	close(c->dirfd);
	free(c->dir);
	free(c);
}

const char *stack_deltas_cache_builder(const struct stack_deltas_cache *c)
{
	return c->builder;
}

/* The build-id is the file's (hostile) content: only lowercase hex of an even length makes a name. */
static bool build_id_valid(const char *id)
{
	size_t n = id ? strnlen(id, STACK_DELTAS_CACHE_BUILD_ID_MAX + 1) : 0;
	return n >= 2 && n <= STACK_DELTAS_CACHE_BUILD_ID_MAX && n % 2 == 0 &&
	       strspn(id, "0123456789abcdef") == n;
}

int stack_deltas_cache_file_name(const struct stack_deltas_cache *c, const struct stack_deltas_key *key, char *buf,
				 size_t len)
{
	if (!build_id_valid(key->build_id))
		return -EINVAL;
	int n = snprintf(buf, len, "%s.%s%s", key->build_id, c->builder_hash, STACK_DELTAS_CACHE_SUFFIX);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the file ---- */

/* XXH3 rather than zlib's CRC-32: a 5 MB table (clang's, a Go binary's) is checked on every start, and XXH3 reads
 * it about ten times as fast. */
static uint64_t file_hash(const struct stack_deltas_cache_head *h, const void *data, size_t size)
{
	struct stack_deltas_cache_head zeroed = *h;
	zeroed.hash = 0;
	return XXH3_64bits_withSeed(data, size, XXH3_64bits(&zeroed, sizeof(zeroed)));	/* the head's hash seeds the rest's */
}

static void make_head(const struct stack_deltas_cache *c, const struct stack_deltas_key *key,
		      const struct stack_deltas_image *img, const struct stack_deltas_stats *st,
		      struct stack_deltas_cache_head *h)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, STACK_DELTAS_CACHE_MAGIC, sizeof(h->magic));
	h->format = STACK_DELTAS_CACHE_FORMAT;
	h->head_size = sizeof(*h);
	memcpy(h->builder, c->builder, strlen(c->builder));
	memcpy(h->build_id, key->build_id, strlen(key->build_id));
	memcpy(h->file, key->file, sizeof(h->file));
	h->base = img->base;
	h->nrows = img->nrows;
	h->npages = img->npages;
	h->nrules = img->nrules;
	h->data_size = img->size;
	if (st) {
		h->fdes_eh = st->fdes_eh;
		h->fdes_debug = st->fdes_debug;
		h->fdes_skipped = st->fdes_skipped;
		h->analysed_ranges = st->analysed_ranges;
		h->fp_ranges = st->fp_ranges;
		h->go_rows = st->go_rows;
		h->fallback_rows = st->fallback_rows;
		h->plt_rows = st->plt_rows;
		h->signal_rows = st->signal_rows;
		h->stop_rows = st->stop_rows;
	}
	h->hash = file_hash(h, img->data, img->size);
}

/* Whether the head is of this format and its size that of the file; else -EINVAL. Whether it is key's table by
 * this builder; else -ESTALE. */
static int check_head(const struct stack_deltas_cache *c, const struct stack_deltas_key *key,
		      const struct stack_deltas_cache_head *h, size_t len)
{
	char builder[STACK_DELTAS_CACHE_BUILDER_MAX] = { 0 }, id[STACK_DELTAS_CACHE_BUILD_ID_MAX] = { 0 };
	if (memcmp(h->magic, STACK_DELTAS_CACHE_MAGIC, sizeof(h->magic)) != 0 ||
	    h->format != STACK_DELTAS_CACHE_FORMAT || h->head_size != sizeof(*h) || h->data_size != len - sizeof(*h) ||
	    h->reserved)
		return -EINVAL;
	memcpy(builder, c->builder, strlen(c->builder));
	memcpy(id, key->build_id, strlen(key->build_id));
	if (memcmp(h->builder, builder, sizeof(builder)) != 0 || memcmp(h->build_id, id, sizeof(id)) != 0 ||
	    memcmp(h->file, key->file, sizeof(h->file)) != 0)
		return -ESTALE;
	return 0;
}

static void stats_from_head(const struct stack_deltas_cache_head *h, const struct stack_deltas *t,
			    struct stack_deltas_stats *st)
{
	*st = (struct stack_deltas_stats){ .from_cache = true, .fdes_eh = h->fdes_eh, .fdes_debug = h->fdes_debug,
					   .fdes_skipped = h->fdes_skipped, .analysed_ranges = h->analysed_ranges,
					   .fp_ranges = h->fp_ranges, .go_rows = h->go_rows,
					   .fallback_rows = h->fallback_rows, .plt_rows = h->plt_rows,
					   .signal_rows = h->signal_rows, .stop_rows = h->stop_rows, .rows = h->nrows,
					   .rules = h->nrules, .bytes = stack_deltas_bytes(t) };
}

/* The whole file, mapped read-only if it is private to us and of a plausible size (at most max_bytes: else
 * -EFBIG); fd stays open (*fd). */
static int map_file(const struct stack_deltas_cache *c, const char *name, size_t max_bytes, int *fd, void **map,
		    size_t *len)
{
	struct stat st;
	*fd = cache_dir_open_file(c->dirfd, name, &st);
	if (*fd < 0)
		return *fd;
	if (st.st_size < (off_t)sizeof(struct stack_deltas_cache_head) ||
	    (unsigned long long)st.st_size > STACK_DELTAS_CACHE_MAX_BYTES)
		return -EINVAL;
	if ((unsigned long long)st.st_size > max_bytes)
		return -EFBIG;
	/* Populated at once: the checks read every page anyway. */
	*map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, *fd, 0);
	if (*map == MAP_FAILED)
		return -errno;
	*len = (size_t)st.st_size;
	return 0;
}

/* The checked table of the mapped file map[0..len); on success it owns the mapping. */
static int adopt_file(const struct stack_deltas_cache *c, const struct stack_deltas_key *key, void *map, size_t len,
		      struct stack_deltas **out, struct stack_deltas_stats *st)
{
	struct stack_deltas_cache_head h;
	memcpy(&h, map, sizeof(h));
	int err = check_head(c, key, &h, len);
	const void *data = (const char *)map + sizeof(h);
	if (err == 0 && file_hash(&h, data, len - sizeof(h)) != h.hash)
		err = -EINVAL;
	struct stack_deltas_image img = { .base = h.base, .nrows = h.nrows, .npages = h.npages, .nrules = h.nrules,
					  .data = data, .size = len - sizeof(h) };
	if (err == 0)
		err = stack_deltas_adopt(&img, map, len, out);
	if (err == 0 && st)
		stats_from_head(&h, *out, st);
	return err;
}

int stack_deltas_cache_load_upto(const struct stack_deltas_cache *c, const struct stack_deltas_key *key,
				 size_t max_bytes, struct stack_deltas **out, struct stack_deltas_stats *stats)
{
	char name[STACK_DELTAS_CACHE_BUILD_ID_MAX + 32];
	uint64_t t0 = clock_mono_ns();
	void *map = MAP_FAILED;
	size_t len = 0;
	int fd = -1;
	*out = NULL;
	int err = stack_deltas_cache_file_name(c, key, name, sizeof(name));
	if (err == 0)
		err = map_file(c, name, max_bytes, &fd, &map, &len);
	if (err == 0)
		err = adopt_file(c, key, map, len, out, stats);
	if (err == 0)
		futimens(fd, NULL);	/* used now: the last to be removed to make room */
	else if (map != MAP_FAILED)
		munmap(map, len);
	if (fd >= 0)
		close(fd);
	if (err == 0 && stats)
		stats->build_ns = clock_mono_ns() - t0;
	return err;
}

int stack_deltas_cache_load(const struct stack_deltas_cache *c, const struct stack_deltas_key *key,
			    struct stack_deltas **out, struct stack_deltas_stats *stats)
{
	return stack_deltas_cache_load_upto(c, key, SIZE_MAX, out, stats);
}

int stack_deltas_cache_store(const struct stack_deltas_cache *c, const struct stack_deltas_key *key,
			     const struct stack_deltas *t, const struct stack_deltas_stats *stats)
{
	char name[STACK_DELTAS_CACHE_BUILD_ID_MAX + 32], path[4096];
	struct stack_deltas_image img;
	struct stack_deltas_cache_head h;
	int err = stack_deltas_cache_file_name(c, key, name, sizeof(name));
	if (err < 0)
		return err;
	if (snprintf(path, sizeof(path), "%s/%s", c->dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	stack_deltas_image(t, &img);
	if (sizeof(h) + img.size > STACK_DELTAS_CACHE_MAX_BYTES)
		return -EFBIG;
	make_head(c, key, &img, stats, &h);
	cache_dir_make_room(c->dirfd, STACK_DELTAS_CACHE_SUFFIX, STACK_DELTAS_CACHE_MAX_BYTES, sizeof(h) + img.size,
			    CACHE_NEED_EXACT);
	struct atomic_file *f;
	if ((err = atomic_file_new(path, &f)) < 0)
		return err;
	if (fwrite(&h, sizeof(h), 1, atomic_file_stream(f)) != 1 ||
	    fwrite(img.data, img.size, 1, atomic_file_stream(f)) != 1) {
		atomic_file_discard(f);
		return -EIO;
	}
	return atomic_file_commit(f);
}

int stack_deltas_cache_get(const struct stack_deltas_cache *c, const struct stack_deltas_key *key, Elf *elf,
			   struct stack_deltas **out, struct stack_deltas_stats *stats)
{
	struct stack_deltas_stats local;
	struct stack_deltas_stats *st = stats ? stats : &local;
	if (c && key && stack_deltas_cache_load(c, key, out, st) == 0)
		return 0;
	uint64_t t0 = clock_mono_ns();
	int err = stack_deltas_build(elf, out, st);
	if (err == 0 && c && key)
		stack_deltas_cache_store(c, key, *out, st);	/* on failure the next run builds again */
	st->build_ns = clock_mono_ns() - t0;
	return err;
}
