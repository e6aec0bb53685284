/*
 * call_site.c — whether an address follows a call instruction. See call_site.h.
 */
#include "unwind/call_site.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <stdlib.h>

#define CS_CACHE_BITS 10
#define CS_CACHE_SIZE (1u << CS_CACHE_BITS)
/* The shortest call is 2 bytes (call *%rax), the longest instruction x86_64 allows 15. */
#define CS_MIN_CALL 2
#define CS_MAX_INSN 15

struct cs_entry {
	const void *key;	/* NULL: empty */
	uint64_t va;
	bool follows_call;
};

struct call_site {
	csh cs;
	cs_insn *insn;
	struct call_site_stats stats;
	struct cs_entry cache[CS_CACHE_SIZE];
};

int call_site_new(struct call_site **out)
{
	struct call_site *c = calloc(1, sizeof(*c));
	*out = NULL;
	if (!c)
		return -ENOMEM;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &c->cs) != CS_ERR_OK) {
		free(c);
		return -ENOTSUP;
	}
	if (!(c->insn = cs_malloc(c->cs))) {
		cs_close(&c->cs);
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void call_site_free(struct call_site *c)
{
	if (!c)
		return;
	cs_free(c->insn, 1);
	cs_close(&c->cs);
	free(c);
}

void call_site_forget(struct call_site *c, const void *key)
{
	for (size_t i = 0; i < CS_CACHE_SIZE; i++)
		if (c->cache[i].key == key)
			c->cache[i].key = NULL;
}

void call_site_get_stats(const struct call_site *c, struct call_site_stats *out)
{
	*out = c->stats;
}

/*
 * The file bytes of [va - *len, va) in the executable segment that holds them, or NULL. *len is cut to what the
 * segment holds before va (it may start less than CS_MAX_INSN bytes before).
 */
static const uint8_t *code_before(Elf *elf, uint64_t va, size_t *len)
{
	size_t image_size, nph;
	const uint8_t *image = (const uint8_t *)elf_rawfile(elf, &image_size);
	if (!image || elf_getphdrnum(elf, &nph) != 0)
		return NULL;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		/* va - 1 is the last byte of the call: inside the segment's file bytes, as is everything read. */
		if (va <= ph.p_vaddr || va - ph.p_vaddr > ph.p_filesz || ph.p_offset > image_size ||
		    ph.p_filesz > image_size - ph.p_offset)
			continue;
		uint64_t avail = va - ph.p_vaddr;
		if (*len > avail)
			*len = (size_t)avail;
		return image + ph.p_offset + avail - *len;
	}
	return NULL;
}

/* Whether one call instruction of exactly n bytes is at code (n bytes, ending at va). */
static bool is_call_of(struct call_site *c, const uint8_t *code, size_t n, uint64_t va)
{
	size_t size = n;
	uint64_t addr = va - n;
	if (!cs_disasm_iter(c->cs, &code, &size, &addr, c->insn))
		return false;
	return size == 0 && (c->insn->id == X86_INS_CALL || c->insn->id == X86_INS_LCALL);
}

static bool decode_follows_call(struct call_site *c, Elf *elf, uint64_t va)
{
	size_t len = CS_MAX_INSN;
	const uint8_t *bytes = code_before(elf, va, &len);
	for (size_t n = CS_MIN_CALL; bytes && n <= len; n++)
		if (is_call_of(c, bytes + len - n, n, va))
			return true;
	return false;
}

bool call_site_follows_call(struct call_site *c, Elf *elf, const void *key, uint64_t va)
{
	if (!elf)
		return false;
	if (!key)
		key = elf;
	uint64_t h = ((uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull) ^ (va * 0xff51afd7ed558ccdull);
	struct cs_entry *e = &c->cache[h >> (64 - CS_CACHE_BITS)];
	c->stats.checks++;
	if (e->key == key && e->va == va) {
		c->stats.cache_hits++;
	} else {
		*e = (struct cs_entry){ .key = key, .va = va, .follows_call = decode_follows_call(c, elf, va) };
	}
	if (!e->follows_call)
		c->stats.rejected++;
	return e->follows_call;
}
