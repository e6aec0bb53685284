/*
 * debug_cache.c — decompressed copies of separate debug files (see debug_cache.h).
 *
 * A copy is a new ELF file written with libelf: the same header, program headers and sections in the same
 * order, the compressed ones decompressed (elf_compress), laid out by libelf.
 */
#include "symbols/debug_cache.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/atomic_file.h"
#include "src/base/cache_dir.h"

#define BUILD_ID_MAX 64

bool debug_file_has_build_id(int fd, const unsigned char *id, int id_len)
{
	const void *got;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	bool same = elf && dwelf_elf_gnu_build_id(elf, &got) == id_len && memcmp(got, id, (size_t)id_len) == 0;
	elf_end(elf);
	return same;
}

/* Whether elf has compressed .debug_* sections to decompress, and no dwz alternate file. */
static bool worth_a_copy(Elf *elf)
{
	size_t shstrndx, nscn;
	bool compressed = false;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0 || elf_getshdrnum(elf, &nscn) != 0 || nscn >= SHN_LORESERVE)
		return false;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (!name || strcmp(name, ".gnu_debugaltlink") == 0)
			return false;
		compressed |= (sh.sh_flags & SHF_COMPRESSED) && strncmp(name, ".debug_", 7) == 0;
	}
	return compressed;
}

/* One section of src appended to dst, decompressed. */
static int copy_section(Elf_Scn *scn, Elf *dst)
{
	GElf_Shdr sh;
	if ((gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) ||
	    !gelf_getshdr(scn, &sh))
		return -EINVAL;
	Elf_Scn *out = elf_newscn(dst);
	if (!out || !gelf_update_shdr(out, &sh))
		return -ENOMEM;
	Elf_Data *d = elf_getdata(scn, NULL), *nd;
	if (!d)
		return 0;
	if (!(nd = elf_newdata(out)))
		return -ENOMEM;
	nd->d_buf = d->d_buf;
	nd->d_type = d->d_type;
	nd->d_size = d->d_size;
	nd->d_align = d->d_align;
	nd->d_version = d->d_version;
	return 0;
}

/* dst (opened for writing) made a copy of src with its sections decompressed, and written. */
static int copy_elf(Elf *src, Elf *dst)
{
	GElf_Ehdr eh;
	size_t nph;
	int err = 0;
	if (!gelf_getehdr(src, &eh) || elf_getphdrnum(src, &nph) != 0 || !gelf_newehdr(dst, gelf_getclass(src)))
		return -EINVAL;
	if (nph && !gelf_newphdr(dst, nph))
		return -ENOMEM;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(src, (int)i, &ph) || !gelf_update_phdr(dst, (int)i, &ph))
			return -EINVAL;
	}
	for (Elf_Scn *scn = elf_nextscn(src, NULL); scn && err == 0; scn = elf_nextscn(src, scn))
		err = copy_section(scn, dst);
	if (err == 0 && !gelf_update_ehdr(dst, &eh))
		err = -EINVAL;
	if (err == 0 && elf_update(dst, ELF_C_WRITE) < 0)
		err = -EIO;
	return err;
}

static int write_copy(const char *path, int fd)
{
	struct atomic_file *f;
	Elf *src = elf_begin(fd, ELF_C_READ, NULL);	/* in memory: decompressing changes it */
	int err = src ? atomic_file_new(path, &f) : -EINVAL;
	if (err < 0) {
		elf_end(src);
		return err;
	}
	Elf *dst = elf_begin(fileno(atomic_file_stream(f)), ELF_C_WRITE, NULL);
	err = dst ? copy_elf(src, dst) : -ENOMEM;
	elf_end(dst);
	elf_end(src);
	if (err < 0) {
		atomic_file_discard(f);
		return err;
	}
	return atomic_file_commit(f);
}

/* The copy named name in dirfd, if it is ours and of build-id id; its use time refreshed. */
static int open_copy(int dirfd, const char *name, const unsigned char *id, int id_len)
{
	struct stat st;
	int fd = cache_dir_open_file(dirfd, name, &st);
	if (fd >= 0 && !debug_file_has_build_id(fd, id, id_len)) {
		close(fd);
		return -EINVAL;
	}
	if (fd >= 0)
		futimens(fd, NULL);	/* most recently used: the last to be removed */
	return fd;
}

static int copy_name(const unsigned char *id, int id_len, char *name, size_t len)
{
	if (id_len <= 0 || id_len > BUILD_ID_MAX || len < (size_t)id_len * 2 + sizeof(".debug"))
		return -EINVAL;
	for (int i = 0; i < id_len; i++)
		sprintf(name + 2 * i, "%02x", id[i]);
	strcpy(name + 2 * id_len, ".debug");
	return 0;
}

int debug_cache_open(const char *dir, int fd, const unsigned char *id, int id_len)
{
	char name[BUILD_ID_MAX * 2 + sizeof(".debug")], path[4096];
	struct stat st;
	int err = copy_name(id, id_len, name, sizeof(name));
	if (err < 0)
		return err;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	bool worth = elf && worth_a_copy(elf);
	elf_end(elf);
	if (!worth)
		return -ENOTSUP;
	int dirfd = cache_dir_open(dir);
	if (dirfd < 0)
		return dirfd;
	int copy = open_copy(dirfd, name, id, id_len);
	if (copy < 0 && copy != -EPERM && fstat(fd, &st) == 0 &&
	    snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path)) {
		cache_dir_make_room(dirfd, ".debug", DEBUG_CACHE_MAX_BYTES, (unsigned long long)st.st_size * 4,
				    CACHE_NEED_ESTIMATE);
		copy = write_copy(path, fd);
		copy = copy < 0 ? copy : open_copy(dirfd, name, id, id_len);
	}
	close(dirfd);
	return copy;
}
