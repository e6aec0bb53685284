/*
 * Unit tests for symbols/kallsyms_cache.c and the images of symbols/kallsyms.c: a fake kernel (kallsyms, modules
 * and boot_id files written here) and the real one; the cache refuses every file it must not trust, and a table
 * read from it names every address as /proc/kallsyms does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/kallsyms.h"
#include "symbols/kallsyms_cache.h"
#include "src/base/cache_dir.h"
#include "tests/lib/testlib.h"

/* A fake kernel in a temporary directory: its files and a cache directory not created yet. */
struct fake {
	char *root;
	char kallsyms[512], modules[512], boot_id[512], dir[512], file[600];
	struct kallsyms_cache_paths paths;
};

static const char vmlinux[] =
	"0000000000000000 A fixed_percpu_data\n"
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 T _text\n"
	"ffffffff81001000 t do_one_initcall\n"
	"ffffffff81002000 T schedule\n"
	"ffffffff81002800 D some_data\n"
	"ffffffff81003000 T _etext\n";
static const char module_lines[] =
	"ffffffffc0001000 t mod_fn\t[mymod]\n"
	"ffffffffc0001100 T mod_fn2\t[mymod]\n"
	"ffffffffc0003000 t other_fn\t[other]\n";
/* Code the key does not follow: a BPF program between the modules, an ftrace trampoline after them. */
static const char dynamic_lines[] =
	"ffffffffc0002000 t bpf_prog_6deef7357e7b4530\t[bpf]\n"
	"ffffffffc0005000 t ftrace_trampoline\t[__builtin__ftrace]\n";
static const char modules_file[] =
	"mymod 4096 0 - Live 0xffffffffc0001000\n"
	"other 4096 2 mymod, Live 0xffffffffc0003000 (O)\n";

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void put_kallsyms(struct fake *fk, const char *extra)
{
	char text[4096];
	snprintf(text, sizeof(text), "%s%s%s%s", vmlinux, module_lines, dynamic_lines, extra);
	put(fk->kallsyms, text);
}

static int setup(void **state)
{
	struct fake *fk = calloc(1, sizeof(*fk));
	assert_non_null(fk);
	fk->root = test_mkdtemp();
	snprintf(fk->kallsyms, sizeof(fk->kallsyms), "%s/kallsyms", fk->root);
	snprintf(fk->modules, sizeof(fk->modules), "%s/modules", fk->root);
	snprintf(fk->boot_id, sizeof(fk->boot_id), "%s/boot_id", fk->root);
	snprintf(fk->dir, sizeof(fk->dir), "%s/cache/hostprof", fk->root);
	snprintf(fk->file, sizeof(fk->file), "%s/kallsyms", fk->dir);
	put_kallsyms(fk, "");
	put(fk->modules, modules_file);
	put(fk->boot_id, "9751a669-310a-4f57-ac49-daab9f4e5d6a\n");
	fk->paths = (struct kallsyms_cache_paths){ fk->kallsyms, fk->modules, fk->boot_id, fk->dir };
	*state = fk;
	return 0;
}

static int teardown(void **state)
{
	struct fake *fk = *state;
	test_rmdir_rf(fk->root);
	free(fk->root);
	free(fk);
	return 0;
}

/* One open through the cache; the table is freed, the result returned. */
static struct kallsyms_cache_result open_once(const struct kallsyms_cache_paths *p)
{
	struct kallsyms *k = NULL;
	struct kallsyms_cache_result r;
	assert_int_equal(kallsyms_cache_open(p, &k, &r), 0);
	assert_non_null(k);
	kallsyms_free(k);
	return r;
}

/* Every address of interest named the same by a and b: each symbol's, the byte before and after, and a far one. */
static void assert_same_names(struct kallsyms *a, struct kallsyms *b, struct kallsyms *addrs)
{
	for (size_t i = 0; i < kallsyms_count(addrs); i++) {
		uint64_t addr;
		const char *name, *module;
		kallsyms_symbol(addrs, i, &addr, &name, &module);
		for (uint64_t at = addr - 1; at <= addr + 1; at++) {
			uint64_t oa = 1, ob = 2;
			const char *ma = "unset", *mb = "unset";
			const char *na = kallsyms_lookup(a, at, &oa, &ma), *nb = kallsyms_lookup(b, at, &ob, &mb);
			assert_true((na == NULL) == (nb == NULL));
			if (!na)
				continue;
			assert_string_equal(na, nb);
			assert_int_equal(oa, ob);
			assert_true((ma == NULL) == (mb == NULL));
			if (ma)
				assert_string_equal(ma, mb);
		}
	}
}

/* The first run saves, the second reads the cache; its table names everything as the file does, the dynamic
 * code included (not in the image: found in the file), and it holds no dynamic symbol itself. */
static void test_fake_kernel_cached(void **state)
{
	struct fake *fk = *state;
	struct kallsyms_cache_result r = open_once(&fk->paths);
	assert_int_equal(r.from_cache, 0);
	assert_int_equal(r.refused, -ENOENT);
	assert_int_equal(r.saved, 1);
	struct stat st;
	assert_int_equal(stat(fk->dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);

	struct kallsyms *cached = NULL, *full;
	assert_int_equal(kallsyms_cache_open(&fk->paths, &cached, &r), 0);
	assert_int_equal(r.from_cache, 1);
	assert_int_equal(r.refused, 0);
	assert_int_equal(kallsyms_load(fk->kallsyms, &full), 0);
	assert_int_equal(kallsyms_count(cached), kallsyms_count(full) - 2);
	assert_int_equal(kallsyms_text_start(cached), 0xffffffff81000000ull);
	/* A BPF program loaded since the image was made: the key does not change, its name is found anyway. */
	put_kallsyms(fk, "ffffffffc0006000 t bpf_prog_later\t[bpf]\n");
	struct kallsyms *now = NULL;
	assert_int_equal(kallsyms_load(fk->kallsyms, &now), 0);
	assert_same_names(cached, now, now);
	uint64_t off;
	const char *module;
	assert_string_equal(kallsyms_lookup(cached, 0xffffffffc0006010ull, &off, &module), "bpf_prog_later");
	assert_string_equal(module, "bpf");
	assert_string_equal(kallsyms_lookup(cached, 0xffffffffc0001180ull, &off, &module), "mod_fn2");
	kallsyms_free(now);
	kallsyms_free(full);
	kallsyms_free(cached);
}

/* A cache of another boot, another kernel placement or another set of modules is not used, and is replaced. */
static void test_key_mismatch_refused(void **state)
{
	struct fake *fk = *state;
	open_once(&fk->paths);
	put(fk->boot_id, "00000000-310a-4f57-ac49-daab9f4e5d6a\n");
	struct kallsyms_cache_result r = open_once(&fk->paths);
	assert_int_equal(r.refused, -ESTALE);
	assert_int_equal(r.saved, 1);
	assert_int_equal(open_once(&fk->paths).from_cache, 1);

	put(fk->modules, "mymod 4096 0 - Live 0xffffffffc0001000\n");
	assert_int_equal(open_once(&fk->paths).refused, -ESTALE);
	/* Only the use count changed: the same key. */
	put(fk->modules, "mymod 4096 5 - Live 0xffffffffc0001000\n");
	assert_int_equal(open_once(&fk->paths).from_cache, 1);

	char text[4096];
	snprintf(text, sizeof(text), "ffffffff82000000 T _text\n%s", module_lines);
	put(fk->kallsyms, text);
	r = open_once(&fk->paths);
	assert_int_equal(r.refused, -ESTALE);
	assert_int_equal(r.from_cache, 0);
}

static size_t file_size(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return (size_t)st.st_size;
}

/* Every truncation of the file, and a flipped byte anywhere in it, is refused. */
static void test_truncated_or_corrupt_refused(void **state)
{
	struct fake *fk = *state;
	open_once(&fk->paths);
	size_t size = file_size(fk->file);
	char *good = malloc(size);
	FILE *f = fopen(fk->file, "r");
	assert_true(f && fread(good, 1, size, f) == size);
	fclose(f);
	for (size_t cut = 0; cut < size; cut += 1 + cut / 8) {
		assert_int_equal(truncate(fk->file, (off_t)cut), 0);
		assert_int_equal(open_once(&fk->paths).refused, -EINVAL);
	}
	for (size_t at = 0; at < size; at += 7) {
		int fd = open(fk->file, O_WRONLY | O_TRUNC);
		good[at] ^= 0x40;
		assert_int_equal(write(fd, good, size), (ssize_t)size);
		good[at] ^= 0x40;
		close(fd);
		int refused = open_once(&fk->paths).refused;
		assert_true(refused == -EINVAL || refused == -ESTALE);
	}
	free(good);
}

/* A directory or file that is not ours alone is neither read nor written. */
static void test_untrusted_places_refused(void **state)
{
	struct fake *fk = *state;
	if (geteuid() != 0)
		test_skip("changing a file's owner needs root");
	open_once(&fk->paths);
	assert_int_equal(chmod(fk->file, 0666), 0);
	assert_int_equal(open_once(&fk->paths).refused, -EPERM);	/* and replaced, private again */
	assert_int_equal(open_once(&fk->paths).from_cache, 1);
	assert_int_equal(chown(fk->file, 65534, 65534), 0);
	assert_int_equal(open_once(&fk->paths).refused, -EPERM);

	assert_int_equal(chmod(fk->dir, 0755), 0);
	struct kallsyms_cache_result r = open_once(&fk->paths);
	assert_int_equal(r.refused, -EPERM);
	assert_int_equal(r.saved, 0);
	assert_int_equal(chmod(fk->dir, 0700), 0);
	assert_int_equal(chown(fk->dir, 65534, 65534), 0);
	r = open_once(&fk->paths);
	assert_int_equal(r.refused, -EPERM);
	assert_int_equal(r.save_err, -EPERM);
	assert_int_equal(chown(fk->dir, 0, 0), 0);

	assert_int_equal(unlink(fk->file), 0);
	assert_int_equal(symlink(fk->kallsyms, fk->file), 0);
	assert_int_equal(open_once(&fk->paths).refused, -ELOOP);
}

/* The spans the image tests save: part of the kernel image and part of a module. */
static const struct kallsyms_span image_spans[] = { { 0xffffffff81000000ull, 0xffffffff81003001ull },
						    { 0xffffffffc0001000ull, 0xffffffffc0001200ull } };

/* The fake kernel's table, and its image of image_spans. */
static void load_and_image(const struct fake *fk, struct kallsyms **k, void **image, size_t *len)
{
	*k = NULL;
	assert_int_equal(kallsyms_load(fk->kallsyms, k), 0);
	assert_int_equal(kallsyms_image(*k, image_spans, 2, image, len), 0);
}

/* Images: every truncation refused; single-byte corruptions refused or harmless (ASan watches the lookups). */
static void test_image_checked(void **state)
{
	struct fake *fk = *state;
	struct kallsyms *k, *t;
	void *image;
	size_t len;
	load_and_image(fk, &k, &image, &len);
	struct kallsyms_span bad[] = { image_spans[1], image_spans[0] };
	void *unused;
	size_t ulen;
	assert_int_equal(kallsyms_image(k, bad, 2, &unused, &ulen), -EINVAL);
	for (size_t cut = 0; cut < len; cut++)
		assert_int_equal(kallsyms_from_image(image, cut, fk->kallsyms, &t), -EINVAL);
	unsigned char *bytes = image;
	for (size_t at = 0; at < len; at++) {
		bytes[at] ^= 0x81;
		if (kallsyms_from_image(image, len, fk->kallsyms, &t) == 0) {
			for (uint64_t a = 0xffffffff80fff000ull; a < 0xffffffffc0008000ull; a += 0x800)
				kallsyms_lookup(t, a, NULL, NULL);
			kallsyms_free(t);
		}
		bytes[at] ^= 0x81;
	}
	assert_int_equal(kallsyms_from_image(image, len, fk->kallsyms, &t), 0);
	assert_same_names(t, k, k);
	kallsyms_free(t);
	free(image);
	kallsyms_free(k);
}

/* An image read in place from a mapping names every address as the copy does; a misaligned or cut image is
 * refused and its mapping left to the caller; a good one is owned (and unmapped) by the table. */
static void test_image_mapped(void **state)
{
	struct fake *fk = *state;
	struct kallsyms *k, *t = NULL, *copy = NULL;
	void *image;
	size_t len;
	load_and_image(fk, &k, &image, &len);
	size_t page = (size_t)getpagesize(), maplen = len + 8;
	char *map = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(map != MAP_FAILED && maplen < page);
	memcpy(map + 1, image, len);
	assert_int_equal(kallsyms_from_mapping(map, len + 1, 1, fk->kallsyms, &t), -EINVAL);
	memcpy(map + 8, image, len);
	assert_int_equal(kallsyms_from_mapping(map, len + 7, 8, fk->kallsyms, &t), -EINVAL);
	map[8] ^= 1;
	assert_int_equal(kallsyms_from_mapping(map, maplen, 8, fk->kallsyms, &t), -EINVAL);
	map[8] ^= 1;
	assert_null(t);
	assert_int_equal(kallsyms_from_mapping(map, maplen, 8, fk->kallsyms, &t), 0);
	assert_int_equal(kallsyms_from_image(image, len, fk->kallsyms, &copy), 0);
	assert_int_equal(kallsyms_count(t), kallsyms_count(copy));
	assert_same_names(t, copy, k);
	assert_same_names(copy, t, t);
	kallsyms_free(t);	/* unmaps map */
	kallsyms_free(copy);
	free(image);
	kallsyms_free(k);
}

/* The real kernel: names from the cache equal those of /proc/kallsyms at every symbol. */
static void test_real_kernel(void **state)
{
	struct fake *fk = *state;
	struct kallsyms_cache_paths p = { .dir = fk->dir };
	int err;
	struct kallsyms *full = NULL, *cached = NULL;
	if ((err = kallsyms_load("/proc/kallsyms", &full)) < 0)
		test_skip("the kernel hides /proc/kallsyms from this user (%s)", strerror(-err));
	struct kallsyms_cache_result r = open_once(&p);
	assert_int_equal(r.saved, 1);
	assert_int_equal(kallsyms_cache_open(&p, &cached, &r), 0);
	assert_int_equal(r.from_cache, 1);
	assert_same_names(cached, full, full);
	kallsyms_free(cached);
	kallsyms_free(full);
}

static void test_default_dir(void **state)
{
	(void)state;
	char buf[4096];
	assert_int_equal(cache_dir_default(buf, sizeof(buf)), 0);
	if (geteuid() == 0)
		assert_string_equal(buf, "/var/cache/hostprof");
	else
		assert_non_null(strstr(buf, "/hostprof"));
	assert_int_equal(cache_dir_default(buf, 4), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fake_kernel_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_mismatch_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_or_corrupt_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untrusted_places_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_mapped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_real_kernel, setup, teardown),
		cmocka_unit_test(test_default_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
