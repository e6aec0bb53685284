/*
 * kallsyms_cache.c — a per-boot cache of the kernel's symbol table (see kallsyms_cache.h).
 *
 * The file is a head (magic, key, image length and XXH3-64 hash) followed by a kallsyms image (kallsyms.h). The
 * image holds the kernel image's span of symbols and each module's: a lookup elsewhere goes to /proc/kallsyms.
 */
#include "symbols/kallsyms_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

#define CACHE_MAGIC "HPKCACH2"
#define CACHE_FILE "kallsyms"
#define CACHE_MAX_BYTES (256u << 20)	/* far above any kernel's table (~5 MB): a bound on what is read */
#define BOOT_ID_MAX 40
#define MODULES_MAX 65536
#define MODULE_NAME_MAX 64		/* the kernel's MODULE_NAME_LEN */

struct cache_key {
	char boot_id[BOOT_ID_MAX];	/* NUL-padded */
	uint64_t text_start;
	uint64_t modules_hash;
};

struct cache_head {
	char magic[8];
	struct cache_key key;
	uint64_t image_len;
	uint64_t image_hash;	/* XXH3-64 of the image */
};

struct module {
	uint64_t base, size;
	char name[MODULE_NAME_MAX];
};

struct modules {
	struct module *m;
	size_t n, cap;
	uint64_t hash;		/* of every module's name, size, state and address, in order */
};

/* A span and whose symbols it holds (NULL: vmlinux). */
struct owned_span {
	struct kallsyms_span span;
	const char *owner;
};

static const char *or_default(const char *path, const char *dflt)
{
	return path ? path : dflt;
}

/* ---- the key ---- */

static int read_boot_id(const char *path, char out[BOOT_ID_MAX])
{
	char buf[BOOT_ID_MAX + 1];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf));
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n <= 0 || n >= BOOT_ID_MAX || strspn(buf, "0123456789abcdef-") < (size_t)n)
		return -EINVAL;
	memset(out, 0, BOOT_ID_MAX);
	memcpy(out, buf, (size_t)n);
	return 0;
}

static int add_module(struct modules *mods, const struct module *m)
{
	if (mods->n == MODULES_MAX)
		return -E2BIG;
	if (mods->n == mods->cap) {
		size_t cap = mods->cap ? 2 * mods->cap : 64;
		struct module *n = realloc(mods->m, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		mods->m = n;
		mods->cap = cap;
	}
	mods->m[mods->n++] = *m;
	return 0;
}

/* "name size refcount deps state address [taints]": the use count and users change without the code moving. */
static int take_module_line(struct modules *mods, const char *line)
{
	struct module m;
	char state[16];
	if (sscanf(line, "%63s %" SCNu64 " %*s %*s %15s 0x%" SCNx64, m.name, &m.size, state, &m.base) != 4)
		return -EINVAL;
	char key[MODULE_NAME_MAX + 64];
	int len = snprintf(key, sizeof(key), "%s %" PRIu64 " %s %" PRIx64 "\n", m.name, m.size, state, m.base);
	mods->hash = hash_bytes(mods->hash, key, (size_t)len);
	return add_module(mods, &m);
}

/* /proc/modules; a kernel without modules has none (no file). */
static int read_modules(const char *path, struct modules *mods)
{
	char line[512];
	int err = 0;
	mods->hash = HASH_SEED;
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (err == 0 && fgets(line, sizeof(line), f))
		err = strchr(line, '\n') ? take_module_line(mods, line) : -EINVAL;
	if (err == 0 && ferror(f))
		err = -EIO;
	fclose(f);
	return err;
}

static int read_key(const struct kallsyms_cache_paths *p, struct cache_key *key, struct modules *mods)
{
	memset(key, 0, sizeof(*key));
	int err = read_boot_id(or_default(p->boot_id, "/proc/sys/kernel/random/boot_id"), key->boot_id);
	if (err == 0)
		err = kallsyms_read_text_start(or_default(p->kallsyms, "/proc/kallsyms"), &key->text_start);
	if (err == 0)
		err = read_modules(or_default(p->modules, "/proc/modules"), mods);
	key->modules_hash = mods->hash;
	return err;
}

/* ---- the spans an image may answer for ---- */

static int by_lo(const void *a, const void *b)
{
	const struct owned_span *x = a, *y = b;
	return x->span.lo < y->span.lo ? -1 : x->span.lo > y->span.lo;
}

static bool symbol_at_or_above(const void *k, size_t i, const void *addr)
{
	uint64_t a;
	const char *name, *module;
	kallsyms_symbol(k, i, &a, &name, &module);
	return a >= *(const uint64_t *)addr;
}

/* Index of the first symbol at or above addr. */
static size_t first_at(const struct kallsyms *k, uint64_t addr)
{
	return bsearch_first(k, kallsyms_count(k), symbol_at_or_above, &addr);
}

/* The kernel image's span: from its first symbol to just past its last. */
static int vmlinux_span(const struct kallsyms *k, struct owned_span *out)
{
	uint64_t lo = UINT64_MAX, hi = 0, a;
	const char *name, *module;
	for (size_t i = 0; i < kallsyms_count(k); i++) {
		kallsyms_symbol(k, i, &a, &name, &module);
		if (!module) {
			lo = a < lo ? a : lo;
			hi = a > hi ? a : hi;
		}
	}
	if (lo > hi || hi == UINT64_MAX)
		return -ENODATA;
	*out = (struct owned_span){ { lo, hi + 1 }, NULL };
	return 0;
}

/* A module's span: from its first symbol inside [base, base + size) to its end; none without a symbol there. */
static bool module_span(const struct kallsyms *k, const struct module *m, struct owned_span *out)
{
	size_t i = first_at(k, m->base);
	uint64_t a;
	const char *name, *module;
	if (m->base == 0 || m->size == 0 || m->base + m->size < m->base || i == kallsyms_count(k))
		return false;
	kallsyms_symbol(k, i, &a, &name, &module);
	if (a >= m->base + m->size)
		return false;
	*out = (struct owned_span){ { a, m->base + m->size }, m->name };
	return true;
}

/* Spans sorted and disjoint, and every symbol of k inside one belongs to its owner: else no image is made. */
static int check_owners(const struct kallsyms *k, const struct owned_span *s, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		if (j > 0 && s[j].span.lo < s[j - 1].span.hi)
			return -EINVAL;
		uint64_t a;
		const char *name, *module;
		for (size_t i = first_at(k, s[j].span.lo); i < kallsyms_count(k); i++) {
			kallsyms_symbol(k, i, &a, &name, &module);
			if (a >= s[j].span.hi)
				break;
			if (s[j].owner ? !module || strcmp(module, s[j].owner) != 0 : module != NULL)
				return -EINVAL;
		}
	}
	return 0;
}

static int make_spans(const struct kallsyms *k, const struct modules *mods, struct kallsyms_span **out,
		      size_t *n)
{
	struct owned_span *s = malloc((mods->n + 1) * sizeof(*s));
	*out = NULL;
	*n = 0;
	if (!s)
		return -ENOMEM;
	int err = vmlinux_span(k, &s[0]);
	size_t ns = 1;
	for (size_t i = 0; err == 0 && i < mods->n; i++)
		ns += module_span(k, &mods->m[i], &s[ns]);
	qsort(s, ns, sizeof(*s), by_lo);
	if (err == 0)
		err = check_owners(k, s, ns);
	if (err == 0 && !(*out = malloc(ns * sizeof(**out))))
		err = -ENOMEM;
	for (size_t i = 0; err == 0 && i < ns; i++)
		(*out)[i] = s[i].span;
	if (err == 0)
		*n = ns;
	free(s);
	return err;
}

/* ---- the directory and the file ---- */

/* The whole cache file, mapped, if it is a regular file private to us and of a plausible size. Mapped rather
 * than read: a read into fresh memory cost ~1200 page faults and a copy of its ~5 MB on every start; the
 * mapping shares the page cache's pages, populated in one call. The file is replaced only by rename
 * (atomic_file), never rewritten in place, so the mapped inode does not change while it is used; only the
 * owner of the private directory could truncate it. */
static int map_file(int dirfd, const char **buf, size_t *len)
{
	struct stat st;
	int fd = cache_dir_open_file(dirfd, CACHE_FILE, &st);
	int err = fd < 0 ? fd : 0;
	if (err == 0 && ((size_t)st.st_size < sizeof(struct cache_head) || (size_t)st.st_size > CACHE_MAX_BYTES))
		err = -EINVAL;
	void *p = MAP_FAILED;
	if (err == 0 && (p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0)) == MAP_FAILED)
		err = -errno;
	if (err == 0) {
		*buf = p;
		*len = (size_t)st.st_size;
	}
	if (fd >= 0)
		close(fd);
	return err;
}

/* XXH3 rather than zlib's CRC-32, which took ~2 ms of every start to check the ~5 MB image. */
static uint64_t hash_of(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}

/* The table in the cache file of the directory dirfd, if its key is key and it is whole. */
static int load_cache(int dirfd, const struct cache_key *key, const char *kallsyms, struct kallsyms **out)
{
	const char *buf = NULL;
	size_t len = 0;
	struct cache_head h;
	int err = map_file(dirfd, &buf, &len);
	if (err == 0) {
		memcpy(&h, buf, sizeof(h));
		if (memcmp(h.magic, CACHE_MAGIC, sizeof(h.magic)) != 0 || h.image_len != len - sizeof(h))
			err = -EINVAL;
		else if (memcmp(&h.key, key, sizeof(*key)) != 0)
			err = -ESTALE;
		else if (hash_of(buf + sizeof(h), len - sizeof(h)) != h.image_hash)
			err = -EINVAL;
	}
	/* The table reads the image in place and owns the mapping from here on. */
	if (err == 0)
		err = kallsyms_from_mapping((void *)buf, len, sizeof(h), kallsyms, out);
	if (err < 0 && buf)
		munmap((void *)buf, len);
	return err;
}

static int save_cache(const char *dir, const struct cache_key *key, const struct kallsyms *k,
		      const struct modules *mods)
{
	struct kallsyms_span *spans;
	size_t nspans, len = 0;
	void *image = NULL;
	char path[4096];
	struct atomic_file *f;
	int err = make_spans(k, mods, &spans, &nspans);
	if (err == 0)
		err = kallsyms_image(k, spans, nspans, &image, &len);
	if (err == 0 && snprintf(path, sizeof(path), "%s/%s", dir, CACHE_FILE) >= (int)sizeof(path))
		err = -ENAMETOOLONG;
	if (err == 0 && (err = atomic_file_new(path, &f)) == 0) {
		struct cache_head h = { .key = *key, .image_len = len, .image_hash = hash_of(image, len) };
		memcpy(h.magic, CACHE_MAGIC, sizeof(h.magic));
		if (fwrite(&h, sizeof(h), 1, atomic_file_stream(f)) != 1 ||
		    fwrite(image, len, 1, atomic_file_stream(f)) != 1) {
			atomic_file_discard(f);
			err = -EIO;
		} else {
			err = atomic_file_commit(f);
		}
	}
	free(image);
	free(spans);
	return err;
}

/* ---- the table ---- */

int kallsyms_cache_open(const struct kallsyms_cache_paths *paths, struct kallsyms **out,
			struct kallsyms_cache_result *result)
{
	struct kallsyms_cache_result local;
	struct kallsyms_cache_result *r = result ? result : &local;
	const char *kallsyms = or_default(paths->kallsyms, "/proc/kallsyms");
	struct modules mods = { 0 };
	struct cache_key key;
	int err = 0, dirfd = -ENOENT;
	*r = (struct kallsyms_cache_result){ .refused = -ENOENT, .save_err = -ENOENT };
	int key_err = paths->dir ? read_key(paths, &key, &mods) : -ENOENT;
	if (paths->dir && key_err == 0)
		dirfd = cache_dir_open(paths->dir);
	r->refused = key_err ? key_err : dirfd < 0 ? dirfd : load_cache(dirfd, &key, kallsyms, out);
	r->from_cache = r->refused == 0;
	if (!r->from_cache) {
		if ((err = kallsyms_load(kallsyms, out)) < 0)
			r->save_err = err;
		else if (dirfd >= 0)
			r->save_err = save_cache(paths->dir, &key, *out, &mods);
		else
			r->save_err = key_err ? key_err : dirfd;
	}
	r->saved = !r->from_cache && r->save_err == 0;
	if (dirfd >= 0)
		close(dirfd);
	free(mods.m);
	return *out ? 0 : err;
}
