/*
 * Unit tests for unwind/stack_deltas_cache.c and stack_deltas_adopt(): tables of real files of this system (libc,
 * ld.so, distro programs, a Go program, this test) stored and loaded back give the same row and the same lookup
 * everywhere as the tables built; corrupt, stale, foreign and untrusted cache files are refused and replaced by
 * the next build; the cache stays under its size bound; and a manager without a cache directory (--no-cache)
 * neither reads nor writes one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "src/processes/execinfo.h"
#include "src/profile/ids.h"
#include "unwind/stack_deltas.h"
#include "unwind/stack_deltas_cache.h"
#include "tests/lib/testlib.h"

#define LIBC_PATH "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LDSO_PATH "/lib64/ld-linux-x86-64.so.2"
#define GO_PROGRAM "/usr/lib/go/bin/gofmt"	/* golang-go (make deps): a Go program without a GNU build-id */

struct env {
	char *root;
	char dir[512];
	struct stack_deltas_cache *c;
};

/* An ELF file opened for a build, and its cache key: its GNU build-id (the hex of its FileID for a file without
 * one: the cache takes the caller's word for which file a key names) and its FileID. */
struct elf_file {
	int fd;
	Elf *elf;
	char build_id[2 * 32 + 1];
	struct stack_deltas_key key;
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	e->root = test_mkdtemp();
	snprintf(e->dir, sizeof(e->dir), "%s/cache/hostprof", e->root);
	assert_int_equal(stack_deltas_cache_open(e->dir, &e->c), 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	stack_deltas_cache_free(e->c);
	test_rmdir_rf(e->root);
	free(e->root);
	free(e);
	return 0;
}

static void elf_file_open(const char *path, struct elf_file *f)
{
	const void *id;
	struct file_id fid;
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(f->fd >= 0);
	f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(f->elf);
	assert_int_equal(fileid_from_fd(f->fd, &fid), 0);
	ssize_t n = dwelf_elf_gnu_build_id(f->elf, &id);
	if (n > 0 && n <= 32)
		hex_encode(id, (size_t)n, f->build_id);
	else
		hex_encode(fid.bytes, sizeof(fid.bytes), f->build_id);
	f->key.build_id = f->build_id;
	memcpy(f->key.file, fid.bytes, sizeof(f->key.file));
}

static void elf_file_close(struct elf_file *f)
{
	elf_end(f->elf);
	close(f->fd);
}

/* The path of key's cache file. */
static void cache_path(const struct env *e, const struct stack_deltas_key *key, char *buf, size_t len)
{
	char name[256];
	assert_int_equal(stack_deltas_cache_file_name(e->c, key, name, sizeof(name)), 0);
	snprintf(buf, len, "%s/%s", e->dir, name);
}

static void assert_same_rule(const struct stack_delta_rule *a, const struct stack_delta_rule *b)
{
	assert_int_equal(a->kind, b->kind);
	assert_int_equal(a->fp, b->fp);
	assert_int_equal(a->fp_off, b->fp_off);
	assert_int_equal(a->cfa_off, b->cfa_off);
	assert_int_equal(a->aux, b->aux);
}

static void assert_same_lookup(const struct stack_deltas *a, const struct stack_deltas *b, uint64_t va)
{
	struct stack_delta_rule ra, rb;
	assert_int_equal(stack_deltas_lookup(a, va, &ra), stack_deltas_lookup(b, va, &rb));
	assert_same_rule(&ra, &rb);
}

/* Every row the same, and every lookup at, around and between the rows' addresses, and outside the table. */
static void assert_same_table(const struct stack_deltas *a, const struct stack_deltas *b)
{
	size_t n = stack_deltas_rows(a);
	assert_int_equal(n, stack_deltas_rows(b));
	assert_int_equal(stack_deltas_bytes(a), stack_deltas_bytes(b));
	for (size_t i = 0; i < n; i++) {
		uint64_t va, vb, next = 0;
		struct stack_delta_rule ra, rb;
		stack_deltas_row(a, i, &va, &ra);
		stack_deltas_row(b, i, &vb, &rb);
		assert_int_equal(va, vb);
		assert_same_rule(&ra, &rb);
		if (i + 1 < n)
			stack_deltas_row(a, i + 1, &next, &ra);
		assert_same_lookup(a, b, va - 1);
		assert_same_lookup(a, b, va);
		assert_same_lookup(a, b, i + 1 < n ? va + (next - va) / 2 : va + 4096);
	}
	assert_same_lookup(a, b, 0);
	assert_same_lookup(a, b, UINT64_MAX);
}

static void assert_same_counts(const struct stack_deltas_stats *a, const struct stack_deltas_stats *b)
{
	assert_int_equal(a->rows, b->rows);
	assert_int_equal(a->bytes, b->bytes);
	assert_int_equal(a->rules, b->rules);
	assert_int_equal(a->fdes_eh, b->fdes_eh);
	assert_int_equal(a->fdes_debug, b->fdes_debug);
	assert_int_equal(a->fdes_skipped, b->fdes_skipped);
	assert_int_equal(a->fallback_rows, b->fallback_rows);
	assert_int_equal(a->plt_rows, b->plt_rows);
	assert_int_equal(a->signal_rows, b->signal_rows);
	assert_int_equal(a->stop_rows, b->stop_rows);
	assert_int_equal(a->analysed_ranges, b->analysed_ranges);
	assert_int_equal(a->fp_ranges, b->fp_ranges);
	assert_int_equal(a->go_rows, b->go_rows);
}

/* path's table through the cache: built and stored the first time, loaded the second; the same table. */
static void check_round_trip(struct env *e, const char *path)
{
	struct elf_file f;
	struct stack_deltas *built, *loaded, *again;
	struct stack_deltas_stats sb, sl, sa;
	char file[1024];
	struct stat st;
	elf_file_open(path, &f);
	cache_path(e, &f.key, file, sizeof(file));
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &loaded, &sl), -ENOENT);
	assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &built, &sb), 0);
	assert_false(sb.from_cache);
	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &loaded, &sl), 0);
	assert_true(sl.from_cache);
	assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &again, &sa), 0);
	assert_true(sa.from_cache);
	assert_same_table(built, loaded);
	assert_same_table(built, again);
	assert_same_counts(&sb, &sl);
	assert_same_counts(&sb, &sa);
	fprintf(stderr, "%s: %zu rows, %zu rules, file of %lld bytes; built in %.2f ms, loaded in %.3f ms\n", path,
		sb.rows, sb.rules, (long long)st.st_size, sb.build_ns / 1e6, sl.build_ns / 1e6);
	stack_deltas_free(built);
	stack_deltas_free(again);
	elf_file_close(&f);
	stack_deltas_free(loaded);	/* outlives its file's Elf and the cache's handle alike */
}

static void test_real_files_same_lookups(void **state)
{
	struct env *e = *state;
	static const char *const paths[] = { LIBC_PATH, LDSO_PATH, "/usr/bin/xz", "/usr/bin/sqlite3",
					     "/usr/bin/python3", GO_PROGRAM, "/proc/self/exe" };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		check_round_trip(e, paths[i]);
}

/* ---- corrupt files ---------------------------------------------------------------------------------------- */

/* A cache file in memory, and where its arrays are. */
struct cfile {
	unsigned char *bytes;
	size_t len;
	struct stack_deltas_cache_head *h;
	struct stack_delta_rule *rules;
	uint32_t *page, *addr;
	uint16_t *rule;
};

static void cfile_read(const char *path, struct cfile *cf)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	cf->len = (size_t)ftell(f);
	rewind(f);
	cf->bytes = malloc(cf->len);
	assert_non_null(cf->bytes);
	assert_int_equal(fread(cf->bytes, 1, cf->len, f), cf->len);
	fclose(f);
	cf->h = (struct stack_deltas_cache_head *)cf->bytes;
	assert_int_equal(cf->h->head_size, sizeof(*cf->h));
	cf->rules = (struct stack_delta_rule *)(cf->bytes + sizeof(*cf->h));
	cf->page = (uint32_t *)(cf->rules + cf->h->nrules);
	cf->addr = cf->page + cf->h->npages + 1;
	cf->rule = (uint16_t *)(cf->addr + cf->h->nrows);
}

/* Written back, len bytes of it, in place (as the owner of the private directory could). */
static void cfile_write(const char *path, const struct cfile *cf, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(cf->bytes, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* The hash as the writer computes it (stack_deltas_cache.h), so that the checks after it are reached. */
static void cfile_fix_hash(struct cfile *cf)
{
	cf->h->hash = 0;
	cf->h->hash = XXH3_64bits_withSeed(cf->bytes + sizeof(*cf->h), cf->len - sizeof(*cf->h),
					   XXH3_64bits(cf->h, sizeof(*cf->h)));
}

enum damage {
	TRUNCATE_ONE, TRUNCATE_HEAD, EMPTY, BAD_MAGIC, BAD_FORMAT, OTHER_BUILD_ID, OTHER_FILE, OTHER_BUILDER,
	FLIPPED_BYTE, PAGE_OUT_OF_RANGE, PAGE_INEXACT, RULE_OUT_OF_RANGE, ADDR_UNSORTED, ADDR_NOT_FROM_ZERO,
	BAD_KIND, BAD_FP, FIRST_RULE_NOT_INVALID, ROWS_MISCOUNTED, NO_PAGES, NDAMAGE
};

/* Damage the good file (bytes of cf) as d says and write it; the error a load must give. */
static int damage(const char *path, struct cfile *cf, enum damage d)
{
	uint32_t mid = cf->h->nrows / 2;
	switch (d) {
	case TRUNCATE_ONE: cfile_write(path, cf, cf->len - 1); return -EINVAL;
	case TRUNCATE_HEAD: cfile_write(path, cf, sizeof(*cf->h) - 1); return -EINVAL;
	case EMPTY: cfile_write(path, cf, 0); return -EINVAL;
	case BAD_MAGIC: cf->h->magic[0] ^= 1; break;
	case BAD_FORMAT: cf->h->format++; break;
	case OTHER_BUILD_ID: cf->h->build_id[0] = cf->h->build_id[0] == '0' ? '1' : '0'; break;
	case OTHER_FILE: cf->h->file[0] ^= 1; break;
	case OTHER_BUILDER: cf->h->builder[1] ^= 1; break;
	case FLIPPED_BYTE: cf->addr[mid] ^= 1; cfile_write(path, cf, cf->len); return -EINVAL; /* the hash */
	case PAGE_OUT_OF_RANGE: cf->page[cf->h->npages / 2] = cf->h->nrows + 7; break;
	case PAGE_INEXACT: cf->page[cf->h->npages] = cf->h->nrows - 1; break;
	case RULE_OUT_OF_RANGE: cf->rule[mid] = (uint16_t)cf->h->nrules; break;
	case ADDR_UNSORTED: cf->addr[mid] = cf->addr[mid + 1]; break;
	case ADDR_NOT_FROM_ZERO: cf->addr[0] = 1; break;
	case BAD_KIND: cf->rules[cf->h->nrules - 1].kind = STACK_DELTA_FALLBACK + 1; break;
	case BAD_FP: cf->rules[cf->h->nrules - 1].fp = STACK_DELTA_FP_AT_FP + 1; break;
	case FIRST_RULE_NOT_INVALID: cf->rules[0].cfa_off = 8; break;
	case ROWS_MISCOUNTED: cf->h->nrows--; break;
	case NO_PAGES: cf->h->npages = 0; break;
	case NDAMAGE: fail();
	}
	cfile_fix_hash(cf);
	cfile_write(path, cf, cf->len);
	return d == OTHER_BUILD_ID || d == OTHER_FILE || d == OTHER_BUILDER ? -ESTALE : -EINVAL;
}

/* Each kind of damage: the load refuses the file, the next get builds and replaces it, then loads it. */
static void test_corrupt_files_rebuilt(void **state)
{
	struct env *e = *state;
	struct elf_file f;
	struct stack_deltas *ref, *t;
	struct stack_deltas_stats st;
	char path[1024];
	elf_file_open(LDSO_PATH, &f);
	cache_path(e, &f.key, path, sizeof(path));
	assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &ref, &st), 0);
	for (int d = 0; d < NDAMAGE; d++) {
		struct cfile cf;
		cfile_read(path, &cf);
		assert_true(cf.h->nrows > 2 && cf.h->npages > 0);
		int want = damage(path, &cf, (enum damage)d);
		free(cf.bytes);
		assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &t, &st), want);
		assert_null(t);
		assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &t, &st), 0);
		assert_false(st.from_cache);
		assert_same_table(ref, t);
		stack_deltas_free(t);
		assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &t, &st), 0);
		assert_same_table(ref, t);
		stack_deltas_free(t);
	}
	stack_deltas_free(ref);
	elf_file_close(&f);
}

/* The image checks on their own, in memory: the good copy is adopted (nothing to unmap), damaged ones are not. */
static void test_adopt_checks(void **state)
{
	(void)state;
	struct elf_file f;
	struct stack_deltas *built, *t;
	struct stack_deltas_image img, copy;
	elf_file_open("/usr/bin/xz", &f);
	assert_int_equal(stack_deltas_build(f.elf, &built, NULL), 0);
	stack_deltas_image(built, &img);
	void *data = aligned_alloc(8, (img.size + 7) & ~(size_t)7);
	assert_non_null(data);
	memcpy(data, img.data, img.size);
	copy = img;
	copy.data = data;
	assert_int_equal(stack_deltas_adopt(&copy, NULL, 0, &t), 0);
	assert_same_table(built, t);
	stack_deltas_free(t);
	copy.size--;
	assert_int_equal(stack_deltas_adopt(&copy, NULL, 0, &t), -EINVAL);
	copy = img;
	copy.data = (const char *)data + 4;	/* misaligned */
	assert_int_equal(stack_deltas_adopt(&copy, NULL, 0, &t), -EINVAL);
	copy = img;
	copy.data = data;
	copy.nrules = 70000;
	assert_int_equal(stack_deltas_adopt(&copy, NULL, 0, &t), -EINVAL);
	copy = img;
	copy.data = data;
	copy.base = UINT64_MAX - 16;	/* the rows' addresses would wrap */
	assert_int_equal(stack_deltas_adopt(&copy, NULL, 0, &t), -EINVAL);
	assert_null(t);
	free(data);
	stack_deltas_free(built);
	elf_file_close(&f);
}

/* ---- keys ----------------------------------------------------------------------------------------------- */

/*
 * A table stored by another builder (an older hostprof) is not used: its name differs, and the same file under
 * this builder's name is refused by its head; this builder builds its own. The other builder still reads its.
 */
static void test_stale_builder_not_used(void **state)
{
	struct env *e = *state;
	struct stack_deltas_cache *old;
	struct elf_file f;
	struct stack_deltas *t, *mine;
	struct stack_deltas_stats st;
	char old_name[256], path[1024], old_path[1024];
	assert_int_equal(stack_deltas_cache_open_as(e->dir, "f1 src:0123456789abcdef dw:0.1 cs:1.0", &old), 0);
	assert_string_not_equal(stack_deltas_cache_builder(old), stack_deltas_cache_builder(e->c));
	elf_file_open("/usr/bin/xz", &f);
	assert_int_equal(stack_deltas_cache_get(old, &f.key, f.elf, &t, &st), 0);
	stack_deltas_free(t);
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &t, &st), -ENOENT);
	assert_int_equal(stack_deltas_cache_file_name(old, &f.key, old_name, sizeof(old_name)), 0);
	snprintf(old_path, sizeof(old_path), "%s/%s", e->dir, old_name);
	cache_path(e, &f.key, path, sizeof(path));
	assert_string_not_equal(old_path, path);
	assert_int_equal(test_run("cp '%s' '%s'", old_path, path), 0);
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &t, &st), -ESTALE);
	assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &mine, &st), 0);
	assert_false(st.from_cache);
	stack_deltas_free(mine);
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &mine, &st), 0);
	assert_int_equal(stack_deltas_cache_load(old, &f.key, &t, &st), 0);
	assert_same_table(mine, t);
	stack_deltas_free(t);
	stack_deltas_free(mine);
	stack_deltas_cache_free(old);
	elf_file_close(&f);
}

/* A program and its stripped copy share a build-id, not their tables' key: one's table never serves the other. */
static void test_stripped_copy_not_confused(void **state)
{
	struct env *e = *state;
	struct elf_file full, stripped;
	struct stack_deltas *a, *b, *ref;
	struct stack_deltas_stats st;
	char copy[600];
	snprintf(copy, sizeof(copy), "%s/stripped", e->root);
	assert_int_equal(test_run("objcopy --strip-all /proc/%d/exe '%s'", (int)getpid(), copy), 0);
	elf_file_open("/proc/self/exe", &full);
	elf_file_open(copy, &stripped);
	assert_string_equal(full.build_id, stripped.build_id);
	assert_int_equal(stack_deltas_cache_get(e->c, &stripped.key, stripped.elf, &a, &st), 0);
	assert_int_equal(stack_deltas_cache_load(e->c, &full.key, &b, &st), -ESTALE);
	assert_int_equal(stack_deltas_cache_get(e->c, &full.key, full.elf, &b, &st), 0);
	assert_false(st.from_cache);
	assert_int_equal(stack_deltas_build(full.elf, &ref, NULL), 0);
	assert_same_table(ref, b);
	stack_deltas_free(a);
	stack_deltas_free(b);
	stack_deltas_free(ref);
	elf_file_close(&full);
	elf_file_close(&stripped);
}

/* Build-ids are a file's content: nothing but lowercase hex of a sane length names a cache file. */
static void test_bad_build_ids_refused(void **state)
{
	struct env *e = *state;
	static const char *const bad[] = { "", "a", "abc", "../../etc/passwd", "ABCD", "ab/cd", "abcdeg" };
	char name[512], longer[STACK_DELTAS_CACHE_BUILD_ID_MAX + 3];
	struct stack_deltas *t;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct stack_deltas_key key = { .build_id = bad[i] };
		assert_int_equal(stack_deltas_cache_file_name(e->c, &key, name, sizeof(name)), -EINVAL);
		assert_int_equal(stack_deltas_cache_load(e->c, &key, &t, NULL), -EINVAL);
	}
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	struct stack_deltas_key key = { .build_id = longer };
	assert_int_equal(stack_deltas_cache_file_name(e->c, &key, name, sizeof(name)), -EINVAL);
}

/* ---- trust and size --------------------------------------------------------------------------------------- */

/* A file others may write, or a symlink, is not read; the next build replaces it. */
static void test_untrusted_files_refused(void **state)
{
	struct env *e = *state;
	struct elf_file f;
	struct stack_deltas *t;
	struct stack_deltas_stats st;
	char path[1024], elsewhere[600];
	elf_file_open("/usr/bin/xz", &f);
	cache_path(e, &f.key, path, sizeof(path));
	assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &t, &st), 0);
	stack_deltas_free(t);
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &t, &st), -EPERM);
	assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &t, &st), 0);
	assert_false(st.from_cache);
	stack_deltas_free(t);
	snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere.sdt", e->root);
	assert_int_equal(rename(path, elsewhere), 0);
	assert_int_equal(symlink(elsewhere, path), 0);
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &t, &st), -ELOOP);
	assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &t, &st), 0);
	stack_deltas_free(t);
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &t, &st), 0);
	stack_deltas_free(t);
	elf_file_close(&f);
}

/* A sparse file of size bytes named name in dir, last used seconds_ago. */
static void sparse_file(const char *dir, const char *name, off_t size, time_t seconds_ago)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	struct timespec t[2] = { { time(NULL) - seconds_ago, 0 }, { time(NULL) - seconds_ago, 0 } };
	assert_int_equal(futimens(fd, t), 0);
	close(fd);
}

static bool exists(const char *dir, const char *name)
{
	char path[1024];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

/* Storing makes room under the bound by removing the least recently used tables, and nothing else. */
static void test_size_bounded_lru(void **state)
{
	struct env *e = *state;
	struct elf_file f;
	struct stack_deltas *t;
	struct stack_deltas_stats st;
	sparse_file(e->dir, "oldest.x.sdt", 120 << 20, 300);
	sparse_file(e->dir, "older.x.sdt", 100 << 20, 200);
	sparse_file(e->dir, "recent.x.sdt", 100 << 20, 100);
	sparse_file(e->dir, "big.debug", 512 << 20, 1000);	/* another cache's: not weighed */
	elf_file_open(LDSO_PATH, &f);
	assert_int_equal(stack_deltas_cache_get(e->c, &f.key, f.elf, &t, &st), 0);
	stack_deltas_free(t);
	/* 320 MiB + the new table > 256 MiB: the oldest goes, 200 MiB + the table fit. */
	assert_false(exists(e->dir, "oldest.x.sdt"));
	assert_true(exists(e->dir, "older.x.sdt"));
	assert_true(exists(e->dir, "recent.x.sdt"));
	assert_true(exists(e->dir, "big.debug"));
	assert_int_equal(stack_deltas_cache_load(e->c, &f.key, &t, &st), 0);
	stack_deltas_free(t);
	elf_file_close(&f);
}

/* ---- through the executable-info manager: --no-cache ------------------------------------------------------ */

/* The number of table files in dir (0 when dir does not exist). */
static int count_tables(const char *dir)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "ls '%s' 2>/dev/null | grep -c '\\.sdt$'", dir);
	FILE *p = popen(cmd, "r");
	int n = -1;
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

/* path's table through a manager with the cache directory dir (NULL: none, as --no-cache); whether it came from
 * the cache. */
static bool deltas_via_execinfo(const char *dir, const char *path)
{
	struct execinfo_mgr *m;
	struct execinfo *x;
	assert_int_equal(execinfo_mgr_new(&m), 0);
	if (dir)
		assert_int_equal(execinfo_mgr_set_cache_dir(m, dir), 0);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(execinfo_acquire_fd(m, fd, path, &x), 0);
	assert_non_null(execinfo_deltas(x));
	bool cached = execinfo_deltas_stats(x)->from_cache;
	struct execinfo_totals tot;
	execinfo_mgr_totals(m, &tot);
	assert_int_equal(tot.tables, 1);
	assert_int_equal(tot.tables_cached, cached);
	execinfo_release(m, x);
	execinfo_mgr_free(m);
	return cached;
}

static void test_no_cache_neither_reads_nor_writes(void **state)
{
	struct env *e = *state;
	char dir[600], user_writable[600];
	snprintf(dir, sizeof(dir), "%s/other-cache", e->root);
	assert_false(deltas_via_execinfo(NULL, "/usr/bin/xz"));
	assert_int_equal(count_tables(dir), 0);
	assert_false(deltas_via_execinfo(dir, "/usr/bin/xz"));	/* written */
	assert_int_equal(count_tables(dir), 1);
	assert_true(deltas_via_execinfo(dir, "/usr/bin/xz"));	/* read */
	assert_false(deltas_via_execinfo(NULL, "/usr/bin/xz"));	/* not read */
	assert_int_equal(count_tables(dir), 1);
	/* A file that others may write could claim any build-id: its table is neither stored nor loaded. */
	snprintf(user_writable, sizeof(user_writable), "%s/sqlite3-copy", e->root);
	assert_int_equal(test_run("cp /usr/bin/sqlite3 '%s' && chmod 0666 '%s'", user_writable, user_writable), 0);
	assert_false(deltas_via_execinfo(dir, user_writable));
	assert_false(deltas_via_execinfo(dir, user_writable));
	assert_int_equal(count_tables(dir), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_real_files_same_lookups, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_files_rebuilt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_adopt_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_builder_not_used, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stripped_copy_not_confused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_build_ids_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untrusted_files_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_size_bounded_lru, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_cache_neither_reads_nor_writes, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
