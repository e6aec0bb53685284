/*
 * names_cache.c — the frames of one ELF file's addresses, kept between runs (see names_cache.h).
 */
#include "symbols/names_cache.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "src/base/atomic_file.h"
#include "src/base/bsearch.h"
#include "src/base/cache_dir.h"
#include "src/base/hindex.h"

_Static_assert(sizeof(struct names_cache_head) % 8 == 0, "the entries after the head stay 8-aligned");
_Static_assert(sizeof(struct names_cache_frame) == 16, "frames are packed");


/* An address names_cache_add() was given: frames added[first, first + n). */
struct added_entry {
	uint64_t addr;
	uint32_t first, n;
	size_t order;		/* the order added: of two for one address, the first is kept */
};

struct names_cache {
	char *path;
	int dirfd;
	char key[NAMES_CACHE_KEY_MAX];		/* NUL-padded */
	enum names_cache_state state;
	/* The file, when used: */
	void *map;
	size_t map_len;
	const struct names_cache_entry *entries;
	const struct names_cache_frame *frames;
	const char *strings;
	size_t nentries, nframes, strings_size;
	/* Added since: */
	struct added_entry *added;
	size_t nadded, added_cap;
	struct symbol_frame *added_frames;
	size_t nadded_frames, added_frames_cap;
};

static bool build_id_valid(const char *id)
{
	size_t n = strnlen(id, NAMES_CACHE_BUILD_ID_MAX + 1);
	return n >= 2 && n <= NAMES_CACHE_BUILD_ID_MAX && n % 2 == 0 && strspn(id, "0123456789abcdef") == n;
}

static uint64_t body_hash(const struct names_cache_head *h, const void *body, size_t size)
{
	struct names_cache_head zeroed = *h;
	zeroed.hash = 0;
	return XXH3_64bits_withSeed(body, size, XXH3_64bits(&zeroed, sizeof(zeroed)));
}

/* ---- reading a file ---- */

static size_t body_size(const struct names_cache_head *h)
{
	return (size_t)h->nentries * sizeof(struct names_cache_entry) +
	       (size_t)h->nframes * sizeof(struct names_cache_frame) + h->strings_size;
}

static bool string_ok(uint32_t ref, uint64_t strings_size)
{
	return ref == 0 || ref - 1 < strings_size;	/* the pool ends in NUL: every string in it is terminated */
}

static bool frames_ok(const struct names_cache_frame *f, size_t n, uint64_t strings_size)
{
	for (size_t i = 0; i < n; i++)
		if (!string_ok(f[i].function, strings_size) || !string_ok(f[i].file, strings_size) || f[i].line < 0 ||
		    f[i].inlined > 1 || f[i].go > 1 || f[i].reserved[0] || f[i].reserved[1])
			return false;
	return true;
}

static bool entries_ok(const struct names_cache_entry *e, size_t n, size_t nframes)
{
	for (size_t i = 0; i < n; i++)
		if ((i > 0 && e[i].addr <= e[i - 1].addr) || e[i].n > NAMES_CACHE_CHAIN_MAX || e[i].first > nframes ||
		    e[i].n > nframes - e[i].first)
			return false;
	return true;
}

/* Whether the mapped file is whole and of this format; then whether it is of c's key. */
static enum names_cache_state check_file(const struct names_cache *c, const char *map, size_t len)
{
	struct names_cache_head h;
	memcpy(&h, map, sizeof(h));
	if (memcmp(h.magic, NAMES_CACHE_MAGIC, sizeof(h.magic)) != 0 || h.format != NAMES_CACHE_FORMAT ||
	    h.head_size != sizeof(h) || h.nentries > NAMES_CACHE_ENTRIES_MAX ||
	    h.nframes > (uint64_t)NAMES_CACHE_ENTRIES_MAX * NAMES_CACHE_CHAIN_MAX || h.strings_size > NAMES_CACHE_FILE_MAX_BYTES ||
	    body_size(&h) != len - sizeof(h))
		return NAMES_CACHE_DAMAGED;
	if (memcmp(h.key, c->key, sizeof(h.key)) != 0)
		return NAMES_CACHE_STALE;
	const char *body = map + sizeof(h);
	const struct names_cache_entry *e = (const void *)body;
	const struct names_cache_frame *f = (const void *)(e + h.nentries);
	const char *strings = (const char *)(f + h.nframes);
	if (body_hash(&h, body, len - sizeof(h)) != h.hash || (h.strings_size && strings[h.strings_size - 1]) ||
	    !entries_ok(e, h.nentries, h.nframes) || !frames_ok(f, h.nframes, h.strings_size))
		return NAMES_CACHE_DAMAGED;
	return NAMES_CACHE_USED;
}

static void adopt_file(struct names_cache *c, void *map, size_t len)
{
	struct names_cache_head h;
	memcpy(&h, map, sizeof(h));
	c->map = map;
	c->map_len = len;
	c->entries = (const void *)((const char *)map + sizeof(h));
	c->frames = (const void *)(c->entries + h.nentries);
	c->strings = (const char *)(c->frames + h.nframes);
	c->nentries = h.nentries;
	c->nframes = h.nframes;
	c->strings_size = h.strings_size;
}

/* Maps and checks the file; c->state says what was found. Only errors of memory are returned. */
static void load_file(struct names_cache *c, const char *name)
{
	struct stat st;
	int fd = cache_dir_open_file(c->dirfd, name, &st);
	if (fd < 0) {
		c->state = fd == -ENOENT ? NAMES_CACHE_ABSENT : NAMES_CACHE_DAMAGED;
		return;
	}
	c->state = NAMES_CACHE_DAMAGED;
	void *map = MAP_FAILED;
	if ((size_t)st.st_size >= sizeof(struct names_cache_head) && (uint64_t)st.st_size <= NAMES_CACHE_FILE_MAX_BYTES)
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (map != MAP_FAILED && (c->state = check_file(c, map, (size_t)st.st_size)) == NAMES_CACHE_USED) {
		adopt_file(c, map, (size_t)st.st_size);
		futimens(fd, NULL);	/* used now: the last to be removed to make room */
	} else if (map != MAP_FAILED) {
		munmap(map, (size_t)st.st_size);
	}
	close(fd);
}

int names_cache_open(const char *dir, const char *build_id, const char *key, struct names_cache **out)
{
	char name[NAMES_CACHE_BUILD_ID_MAX + sizeof(NAMES_CACHE_SUFFIX)];
	*out = NULL;
	if (!dir || !build_id || !key || !build_id_valid(build_id) || strlen(key) >= NAMES_CACHE_KEY_MAX)
		return -EINVAL;
	snprintf(name, sizeof(name), "%s%s", build_id, NAMES_CACHE_SUFFIX);
	struct names_cache *c = calloc(1, sizeof(*c));
	if (!c || asprintf(&c->path, "%s/%s", dir, name) < 0) {
		free(c);
		return -ENOMEM;
	}
	memcpy(c->key, key, strlen(key));
	if ((c->dirfd = cache_dir_open(dir)) < 0) {
		int err = c->dirfd;
		free(c->path);
		free(c);
		return err;
	}
	load_file(c, name);
	*out = c;
	return 0;
}

void names_cache_free(struct names_cache *c)
{
	if (!c)
		return;
	if (c->map)
		munmap(c->map, c->map_len);
	close(c->dirfd);
	free(c->added);
	free(c->added_frames);
	free(c->path);
	free(c);
}

enum names_cache_state names_cache_state(const struct names_cache *c)
{
	return c->state;
}

/* ---- lookups ---- */

static bool entry_at_or_after(const void *set, size_t i, const void *addr)
{
	return ((const struct names_cache_entry *)set)[i].addr >= *(const uint64_t *)addr;
}

static const char *string_at(const struct names_cache *c, uint32_t ref)
{
	return ref ? c->strings + (ref - 1) : NULL;
}

int names_cache_get(const struct names_cache *c, uint64_t addr, struct symbol_frame *frames, size_t max)
{
	size_t i = bsearch_first(c->entries, c->nentries, entry_at_or_after, &addr);
	if (i == c->nentries || c->entries[i].addr != addr)
		return -ENOENT;
	const struct names_cache_frame *f = c->frames + c->entries[i].first;
	size_t n = c->entries[i].n < max ? c->entries[i].n : max;	/* the innermost */
	for (size_t j = 0; j < n; j++)
		frames[j] = (struct symbol_frame){ .function = string_at(c, f[j].function), .file = string_at(c, f[j].file),
						   .line = f[j].line, .inlined = f[j].inlined, .go = f[j].go };
	return (int)n;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t cap2 = *cap ? *cap * 2 : 64;
	while (cap2 < need)
		cap2 *= 2;
	void *q = realloc(*p, cap2 * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = cap2;
	return 0;
}

int names_cache_add(struct names_cache *c, uint64_t addr, const struct symbol_frame *frames, int n)
{
	if (n < 0 || n > NAMES_CACHE_CHAIN_MAX || (n > 0 && !frames))
		return -EINVAL;
	if (c->nentries + c->nadded >= NAMES_CACHE_ENTRIES_MAX || c->nadded >= NAMES_CACHE_ADDED_MAX)
		return -E2BIG;
	if (grow((void **)&c->added, &c->added_cap, c->nadded + 1, sizeof(*c->added)) < 0 ||
	    grow((void **)&c->added_frames, &c->added_frames_cap, c->nadded_frames + (size_t)n,
		 sizeof(*c->added_frames)) < 0)
		return -ENOMEM;
	c->added[c->nadded] = (struct added_entry){ addr, (uint32_t)c->nadded_frames, (uint32_t)n, c->nadded };
	c->nadded++;
	if (n > 0)
		memcpy(c->added_frames + c->nadded_frames, frames, (size_t)n * sizeof(*frames));
	c->nadded_frames += (size_t)n;
	return 0;
}

/* ---- writing a file ---- */

/* The file being made: its arrays, and its strings indexed by content. */
struct file_image {
	struct names_cache_entry *entries;
	size_t nentries;
	struct names_cache_frame *frames;
	size_t nframes;
	char *strings;
	size_t strings_size, strings_cap;
	struct hindex string_index;	/* hash of content: 1 + offset */
};

static bool string_is(const void *ctx, uint64_t value, const void *key)
{
	const struct file_image *img = ctx;
	return strcmp(img->strings + (value - 1), key) == 0;
}

/* 1 + the offset of s in the image's strings, added if new; 0 for NULL; -ENOMEM (as a negative int64). */
static int64_t image_string(struct file_image *img, const char *s)
{
	uint64_t ref;
	if (!s)
		return 0;
	uint64_t h = hash_str(HASH_SEED, s);
	if (hindex_find(&img->string_index, h, string_is, img, s, &ref))
		return (int64_t)ref;
	size_t len = strlen(s) + 1;
	if (img->strings_size + len > UINT32_MAX - 1 ||
	    grow((void **)&img->strings, &img->strings_cap, img->strings_size + len, 1) < 0)
		return -ENOMEM;
	memcpy(img->strings + img->strings_size, s, len);
	ref = img->strings_size + 1;
	img->strings_size += len;
	return hindex_insert(&img->string_index, h, ref) < 0 ? -ENOMEM : (int64_t)ref;
}

static int image_entry(struct file_image *img, uint64_t addr, const struct symbol_frame *frames, size_t n)
{
	img->entries[img->nentries++] = (struct names_cache_entry){ addr, (uint32_t)img->nframes, (uint32_t)n };
	for (size_t i = 0; i < n; i++) {
		int64_t fn = image_string(img, frames[i].function), file = image_string(img, frames[i].file);
		if (fn < 0 || file < 0)
			return -ENOMEM;
		img->frames[img->nframes++] = (struct names_cache_frame){
			.function = (uint32_t)fn, .file = (uint32_t)file, .line = frames[i].line > 0 ? frames[i].line : 0,
			.inlined = frames[i].inlined != 0, .go = frames[i].go != 0 };
	}
	return 0;
}

static int by_addr_then_order(const void *a, const void *b)
{
	const struct added_entry *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * The held file's strings and frames, as the new file's first: the held entries keep their frames' places and the
 * frames their strings' offsets, and each held string is hashed once for the added frames to share. Rewriting
 * every held frame's strings instead cost a save most of its CPU: a large program's file holds 100k addresses and
 * gains a few thousand a run.
 */
static int adopt_held(const struct names_cache *c, struct file_image *img)
{
	if (c->strings_size) {
		if (grow((void **)&img->strings, &img->strings_cap, c->strings_size, 1) < 0)
			return -ENOMEM;
		memcpy(img->strings, c->strings, c->strings_size);
	}
	img->strings_size = c->strings_size;
	/* The pool ends in NUL: each string ends within it. */
	for (size_t off = 0; off < c->strings_size; off += strlen(c->strings + off) + 1) {
		const char *str = c->strings + off;
		uint64_t h = hash_str(HASH_SEED, str), ref;
		if (!hindex_find(&img->string_index, h, string_is, img, str, &ref) &&
		    hindex_insert(&img->string_index, h, off + 1) < 0)
			return -ENOMEM;
	}
	if (c->nframes)
		memcpy(img->frames, c->frames, c->nframes * sizeof(*c->frames));
	img->nframes = c->nframes;
	return 0;
}

/* The held entries and the added ones (sorted by then), merged by address into img, after adopt_held(). */
static int merge(const struct names_cache *c, struct file_image *img)
{
	size_t i = 0, j = 0;
	int err = 0;
	while (err == 0 && (i < c->nentries || j < c->nadded)) {
		bool held = j == c->nadded || (i < c->nentries && c->entries[i].addr <= c->added[j].addr);
		uint64_t addr = held ? c->entries[i].addr : c->added[j].addr;
		if (held)
			img->entries[img->nentries++] = c->entries[i++];
		else
			err = image_entry(img, addr, c->added_frames + c->added[j].first, c->added[j].n);
		while (j < c->nadded && c->added[j].addr == addr)	/* held, or added before: the first kept */
			j++;
	}
	return err;
}

static int write_image(struct names_cache *c, const struct file_image *img)
{
	size_t esize = img->nentries * sizeof(*img->entries), fsize = img->nframes * sizeof(*img->frames);
	size_t size = esize + fsize + img->strings_size;
	struct names_cache_head h = { .format = NAMES_CACHE_FORMAT, .head_size = sizeof(h),
				      .nentries = (uint32_t)img->nentries, .nframes = (uint32_t)img->nframes,
				      .strings_size = img->strings_size };
	memcpy(h.magic, NAMES_CACHE_MAGIC, sizeof(h.magic));
	memcpy(h.key, c->key, sizeof(h.key));
	if (sizeof(h) + size > NAMES_CACHE_FILE_MAX_BYTES)
		return -EFBIG;
	char *body = malloc(size);	/* > 0: a save has an entry at least */
	if (!body)
		return -ENOMEM;
	memcpy(body, img->entries, esize);
	if (fsize)
		memcpy(body + esize, img->frames, fsize);
	if (img->strings_size)	/* no strings (nameless addresses only): no buffer */
		memcpy(body + esize + fsize, img->strings, img->strings_size);
	h.hash = body_hash(&h, body, size);
	cache_dir_make_room(c->dirfd, NAMES_CACHE_SUFFIX, NAMES_CACHE_DIR_MAX_BYTES, sizeof(h) + size,
			    CACHE_NEED_EXACT);
	struct atomic_file *f;
	int err = atomic_file_new(c->path, &f);
	if (err == 0 && (fwrite(&h, sizeof(h), 1, atomic_file_stream(f)) != 1 ||
			 fwrite(body, size, 1, atomic_file_stream(f)) != 1)) {
		atomic_file_discard(f);
		err = -EIO;
	} else if (err == 0) {
		err = atomic_file_commit(f);
	}
	free(body);
	return err;
}

int names_cache_save(struct names_cache *c)
{
	if (c->nadded == 0)
		return 0;
	qsort(c->added, c->nadded, sizeof(*c->added), by_addr_then_order);
	struct file_image img = { 0 };
	size_t most = c->nentries + c->nadded;
	img.entries = malloc(most * sizeof(*img.entries));
	img.frames = malloc((c->nframes + c->nadded_frames + 1) * sizeof(*img.frames));
	int err = img.entries && img.frames ? adopt_held(c, &img) : -ENOMEM;
	if (err == 0)
		err = merge(c, &img);
	if (err == 0)
		err = write_image(c, &img);
	free(img.entries);
	free(img.frames);
	free(img.strings);
	hindex_free(&img.string_index);
	if (err == 0)
		c->nadded = c->nadded_frames = 0;	/* written: a second save has nothing to add */
	return err;
}
