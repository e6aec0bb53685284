/*
 * apm_process.c — what the library learns about an APM process: the agent library's symbols and TLSDESC
 * relocation (libelf), load biases, the TLS resolver's kind, and the process storage.
 *
 * Everything here reads untrusted input. ELF files are read with libelf (ELF_C_READ: no mmap, so a file
 * truncated under us cannot fault) and every table is bounded by its section; process memory is read through
 * a /proc/PID/mem fd with exact-length reads, so a pointer into unmapped memory is an error, never a crash.
 * Strings from the process are length-checked and UTF-8-checked before use.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "correlate/correlate_impl.h"
#include "src/base/load_bias.h"
#include "src/base/elf_symbol.h"

/* An agent library is ~100 KiB; anything this large is not one. */
#define CORR_ELF_MAX_SIZE	(256ull << 20)
/* Above every user address (57-bit virtual addresses with 5-level paging). */
#define CORR_USER_ADDR_LIMIT	(1ull << 56)
#define CORR_MAPS_LINE_MAX	8192

static Elf *elf_open_fd(int fd, char *why, size_t whylen)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > CORR_ELF_MAX_SIZE) {
		snprintf(why, whylen, "not a regular file of sane size");
		return NULL;
	}
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	GElf_Ehdr eh;
	if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 || !gelf_getehdr(e, &eh) ||
	    eh.e_machine != EM_X86_64) {
		snprintf(why, whylen, "not an x86_64 ELF file");
		if (e)
			elf_end(e);
		return NULL;
	}
	return e;
}

/* r_offset of the R_X86_64_TLSDESC relocation against symbol index symidx of dynsym. */
static int find_tlsdesc(Elf *e, size_t dynsym_ndx, size_t symidx, uint64_t *got_va)
{
	for (Elf_Scn *s = elf_nextscn(e, NULL); s; s = elf_nextscn(e, s)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_RELA || sh.sh_link != dynsym_ndx ||
		    sh.sh_entsize != sizeof(Elf64_Rela))
			continue;
		Elf_Data *d = elf_getdata(s, NULL);
		if (!d)
			continue;
		size_t n = d->d_size / sizeof(Elf64_Rela);
		for (size_t i = 0; i < n; i++) {
			GElf_Rela r;
			if (gelf_getrela(d, (int)i, &r) && GELF_R_TYPE(r.r_info) == R_X86_64_TLSDESC &&
			    GELF_R_SYM(r.r_info) == symidx) {
				*got_va = r.r_offset;
				return 0;
			}
		}
	}
	return -ENOENT;
}

int corr_agent_elf_resolve(int fd, struct corr_agent_elf *out, char *why, size_t whylen)
{
	Elf *e = elf_open_fd(fd, why, whylen);
	if (!e)
		return -ENOEXEC;
	int err = -ENOENT;
	size_t count = 0;
	Elf_Scn *dynsym = elf_symbol_table(e, SHT_DYNSYM, &count);
	GElf_Sym storage, tls;
	size_t tls_idx;
	if (!dynsym) {
		snprintf(why, whylen, "no .dynsym");
	} else if (!elf_symbol_find(e, dynsym, count, CORR_STORAGE_SYMBOL, &storage)) {
		snprintf(why, whylen, "no dynamic symbol %s", CORR_STORAGE_SYMBOL);
	} else if (GELF_ST_TYPE(storage.st_info) != STT_OBJECT || storage.st_size != 8) {
		snprintf(why, whylen, "%s is not an 8-byte object", CORR_STORAGE_SYMBOL);
		err = -ENOEXEC;
	} else if (!(tls_idx = elf_symbol_find(e, dynsym, count, CORR_TLS_SYMBOL, &tls)) ||
		   GELF_ST_TYPE(tls.st_info) != STT_TLS) {
		snprintf(why, whylen, "no dynamic TLS symbol %s", CORR_TLS_SYMBOL);
	} else if (find_tlsdesc(e, elf_ndxscn(dynsym), tls_idx, &out->tlsdesc_va) < 0) {
		snprintf(why, whylen, "no R_X86_64_TLSDESC relocation for %s (not built with "
			 "-mtls-dialect=gnu2?)", CORR_TLS_SYMBOL);
	} else {
		out->storage_va = storage.st_value;
		err = 0;
	}
	elf_end(e);
	return err;
}

int corr_elf_load_bias(int fd, const struct corr_map *m, uint64_t *bias)
{
	char why[64];
	Elf *e = elf_open_fd(fd, why, sizeof(why));
	if (!e)
		return -ENOEXEC;
	struct load_segment segs[CORR_MAX_SEGMENTS];
	unsigned nsegs = 0;
	size_t n = 0;
	if (elf_getphdrnum(e, &n) < 0)
		n = 0;
	for (size_t i = 0; i < n && nsegs < CORR_MAX_SEGMENTS; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || ph.p_filesz == 0 ||
		    ph.p_filesz > UINT64_MAX - ph.p_offset)
			continue;
		segs[nsegs++] = (struct load_segment){ .vaddr = ph.p_vaddr, .memsz = ph.p_memsz,
						       .offset = ph.p_offset, .filesz = ph.p_filesz,
						       .flags = ph.p_flags };
	}
	elf_end(e);
	return load_bias(segs, nsegs, m->start, m->end, m->pgoff, m->prot, bias);
}

int corr_elf_symbol(int fd, const char *name, uint64_t *value, uint64_t *size)
{
	char why[64];
	Elf *e = elf_open_fd(fd, why, sizeof(why));
	if (!e)
		return -ENOEXEC;
	static const Elf64_Word types[] = { SHT_SYMTAB, SHT_DYNSYM };
	int err = -ENOENT;
	for (size_t t = 0; t < 2 && err; t++) {
		size_t count = 0;
		Elf_Scn *s = elf_symbol_table(e, types[t], &count);
		GElf_Sym sym;
		if (s && elf_symbol_find(e, s, count, name, &sym)) {
			*value = sym.st_value;
			if (size)
				*size = sym.st_size;
			err = 0;
		}
	}
	elf_end(e);
	return err;
}

int corr_mem_read(int memfd, uint64_t addr, void *buf, size_t len)
{
	if (addr == 0 || addr >= CORR_USER_ADDR_LIMIT || len > CORR_USER_ADDR_LIMIT - addr)
		return -EFAULT;
	ssize_t n = pread(memfd, buf, len, (off_t)addr);
	if (n == (ssize_t)len)
		return 0;
	if (n == 0)
		return -ESRCH;	/* the address space is gone (exit or exec) */
	return n < 0 && errno != EIO && errno != EFAULT ? -errno : -EIO;
}

static int parse_maps_line(char *line, struct corr_map *m)
{
	char perms[5];
	int off = 0;
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %*s %*u %n", &m->start, &m->end, perms,
		   &m->pgoff, &off) < 4 || off == 0)
		return -EINVAL;
	m->exec = perms[2] == 'x';
	m->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (m->exec ? PROT_EXEC : 0);
	m->path = line + off;
	line[strcspn(line, "\n")] = '\0';
	return 0;
}

int corr_maps_each(pid_t pid, int (*fn)(void *arg, const struct corr_map *m), void *arg)
{
	char name[64];
	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return -errno;
	char *line = malloc(CORR_MAPS_LINE_MAX);
	int ret = line ? 0 : -ENOMEM;
	while (!ret && fgets(line, CORR_MAPS_LINE_MAX, f)) {
		struct corr_map m;
		if (!strchr(line, '\n') && !feof(f)) {
			/* A path longer than the buffer: skip the rest of this line. */
			int ch;
			while ((ch = fgetc(f)) != EOF && ch != '\n')
				;
			continue;
		}
		if (parse_maps_line(line, &m) == 0)
			ret = fn(arg, &m);
	}
	free(line);
	fclose(f);
	return ret;
}

int corr_open_mapped_file(pid_t pid, const struct corr_map *m)
{
	char name[96];
	snprintf(name, sizeof(name), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start, m->end);
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	if (m->path[0] != '/')
		return -ENOENT;
	return corr_open_in_root(pid, m->path, O_RDONLY);
}

struct find_exec_arg {
	uint64_t addr;
	struct corr_map map;
	char path[512];
};

static int find_exec_mapping(void *arg, const struct corr_map *m)
{
	struct find_exec_arg *a = arg;
	if (a->addr < m->start || a->addr >= m->end)
		return 0;
	if (!m->exec || m->path[0] != '/')
		return -ENOENT;
	a->map = *m;
	snprintf(a->path, sizeof(a->path), "%s", m->path);
	a->map.path = a->path;
	return 1;
}

/* glibc's _dl_tlsdesc_return and musl's __tlsdesc_static: "[endbr64] mov 8(%rax),%rax; ret". */
static int is_static_resolver_code(const uint8_t *c)
{
	static const uint8_t body[] = { 0x48, 0x8b, 0x40, 0x08, 0xc3 };
	static const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	if (memcmp(c, endbr, sizeof(endbr)) == 0)
		c += sizeof(endbr);
	return memcmp(c, body, sizeof(body)) == 0;
}

/* glibc's _dl_tlsdesc_dynamic starts "[endbr64] mov %rsi,-16(%rsp); mov %fs:8,%rsi" (the DTV). */
static int is_dynamic_resolver_code(const uint8_t *c)
{
	static const uint8_t body[] = { 0x48, 0x89, 0x74, 0x24, 0xf0, 0x64, 0x48, 0x8b, 0x34, 0x25, 0x08 };
	static const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	if (memcmp(c, endbr, sizeof(endbr)) == 0)
		c += sizeof(endbr);
	return memcmp(c, body, sizeof(body)) == 0;
}

/* By symbol, when the loader's file has them (many distributions strip ld.so's .symtab). */
static enum corr_resolver classify_by_symbol(int fd, uint64_t bias, uint64_t resolver, int *have_symbols)
{
	static const char *const static_names[] = { "_dl_tlsdesc_return", "__tlsdesc_static" };
	static const char *const dynamic_names[] = { "_dl_tlsdesc_dynamic", "__tlsdesc_dynamic" };
	uint64_t v;
	*have_symbols = 0;
	for (size_t i = 0; i < 2; i++) {
		if (corr_elf_symbol(fd, static_names[i], &v, NULL) == 0) {
			*have_symbols = 1;
			if (v + bias == resolver)
				return CORR_RESOLVER_STATIC;
		}
		if (corr_elf_symbol(fd, dynamic_names[i], &v, NULL) == 0) {
			*have_symbols = 1;
			if (v + bias == resolver)
				return CORR_RESOLVER_DYNAMIC;
		}
	}
	return CORR_RESOLVER_OTHER;
}

enum corr_resolver corr_classify_resolver(pid_t pid, int memfd, uint64_t resolver, char *why, size_t whylen)
{
	struct find_exec_arg a = { .addr = resolver };
	if (resolver == 0 || corr_maps_each(pid, find_exec_mapping, &a) != 1) {
		snprintf(why, whylen, "TLS descriptor resolver %#" PRIx64 " is in no executable file mapping "
			 "(not relocated yet?)", resolver);
		return CORR_RESOLVER_UNRELOCATED;
	}
	int have_symbols = 0;
	enum corr_resolver kind = CORR_RESOLVER_OTHER;
	int fd = corr_open_mapped_file(pid, &a.map);
	uint64_t bias;
	if (fd >= 0) {
		if (corr_elf_load_bias(fd, &a.map, &bias) == 0)
			kind = classify_by_symbol(fd, bias, resolver, &have_symbols);
		close(fd);
	}
	uint8_t code[16];
	if (!have_symbols && corr_mem_read(memfd, resolver, code, sizeof(code)) == 0) {
		if (is_static_resolver_code(code))
			kind = CORR_RESOLVER_STATIC;
		else if (is_dynamic_resolver_code(code))
			kind = CORR_RESOLVER_DYNAMIC;
	}
	static const char *const names[] = { "unrelocated", "static TLS (_dl_tlsdesc_return)",
					     "dynamic TLS (_dl_tlsdesc_dynamic)", "unknown" };
	snprintf(why, whylen, "TLS descriptor resolver %#" PRIx64 " in %s+%#" PRIx64 " is %s (by %s)", resolver,
		 a.path, resolver - a.map.start + a.map.pgoff, names[kind], have_symbols ? "symbol" : "code");
	return kind;
}

int corr_utf8_valid(const uint8_t *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		uint8_t c = s[i];
		size_t n;
		uint32_t cp;
		if (c == 0)
			return 0;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1, cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2, cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3, cp = c & 0x07;
		} else {
			return 0;
		}
		if (len - i <= n)
			return 0;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		/* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
		static const uint32_t min_cp[] = { 0, 0x80, 0x800, 0x10000 };
		if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += n + 1;
	}
	return 1;
}

/* One utf8-str at *addr: u32 length (≤ max) then the bytes; advances *addr. */
static int read_str(int memfd, uint64_t *addr, char *out, uint32_t max, const char *what, char *why,
		    size_t whylen)
{
	uint32_t len;
	int err = corr_mem_read(memfd, *addr, &len, sizeof(len));
	if (err == 0 && len > max) {
		snprintf(why, whylen, "process storage %s length %u exceeds %u", what, len, max);
		return -EBADMSG;
	}
	if (err == 0 && len)
		err = corr_mem_read(memfd, *addr + 4, out, len);
	if (err) {
		snprintf(why, whylen, "process storage %s at %#" PRIx64 " unreadable (%s)", what, *addr,
			 strerror(-err));
		return err == -ESRCH ? err : -EIO;
	}
	out[len] = '\0';
	if (!corr_utf8_valid((const uint8_t *)out, len)) {
		snprintf(why, whylen, "process storage %s is not UTF-8", what);
		return -EBADMSG;
	}
	*addr += 4 + (uint64_t)len;
	return 0;
}

int corr_storage_read(int memfd, uint64_t ptr, struct corr_storage *out, char *why, size_t whylen)
{
	int err = corr_mem_read(memfd, ptr, &out->minor, sizeof(out->minor));
	if (err) {
		snprintf(why, whylen, "process storage pointer %#" PRIx64 " unreadable (%s)", ptr, strerror(-err));
		return err == -ESRCH ? err : -EIO;
	}
	if (out->minor == 0) {
		snprintf(why, whylen, "process storage layout-minor-version is 0");
		return -EBADMSG;
	}
	uint64_t a = ptr + 2;
	if ((err = read_str(memfd, &a, out->service, CORRELATE_SERVICE_MAX, "service-name", why, whylen)) ||
	    (err = read_str(memfd, &a, out->env, CORRELATE_SERVICE_MAX, "service-environment", why, whylen)) ||
	    (err = read_str(memfd, &a, out->socket_path, CORRELATE_SOCKET_PATH_MAX, "socket-file-path", why,
			    whylen)))
		return err;
	if (out->socket_path[0] == '\0') {
		snprintf(why, whylen, "process storage socket-file-path is empty");
		return -EBADMSG;
	}
	return 0;
}
