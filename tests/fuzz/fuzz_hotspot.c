/*
 * fuzz_hotspot.c — fuzz target: a JVM's code cache as hostprof reads it from the process's memory
 * (src/processes/hotspot.h): a hostile process controls every byte of its VMStructs tables, code heaps, segment
 * maps, blobs and method names, so every length, hop and pointer is checked.
 * The input (tests/lib/fake_jvm.h writes its seed): the addresses of libjvm.so's globals, four JIT addresses to
 * look up and name, then the process's memory from 0x10000000; nothing else is readable.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "src/processes/hotspot.h"

#define BASE 0x10000000ull
#define ADDRS 4

struct image {
	const uint8_t *bytes;
	size_t len;
};

static ssize_t read_image(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *m = ctx;
	if (addr < BASE || addr - BASE >= m->len)
		return -EFAULT;
	size_t off = (size_t)(addr - BASE), n = m->len - off < len ? m->len - off : len;
	memcpy(buf, m->bytes + off, n);
	return (ssize_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t globals[HOTSPOT_NGLOBALS], addrs[ADDRS];
	if (size < sizeof(globals) + sizeof(addrs))
		return 0;
	memcpy(globals, data, sizeof(globals));
	memcpy(addrs, data + sizeof(globals), sizeof(addrs));
	struct image img = { data + sizeof(globals) + sizeof(addrs), size - sizeof(globals) - sizeof(addrs) };
	struct unwind_memory mem = { .read = read_image, .ctx = &img };
	struct hotspot *h;
	if (hotspot_open(&mem, globals, &h) < 0)
		return 0;
	for (unsigned i = 0; i < ADDRS; i++) {
		struct hotspot_frame f;
		char name[256];
		/* twice: from the process, then from the cache */
		for (uint64_t now = 1; now <= 2; now++)
			if (hotspot_frame(h, addrs[i], now, &f) >= 0 &&
			    hotspot_blob_name(h, &f, name, sizeof(name)) >= 0 && !memchr(name, '\0', sizeof(name)))
				__builtin_trap();	/* a name is NUL-terminated within its buffer */
		/* the address taken for an interpreted frame's Method, a word from the stack */
		if (hotspot_method_name(h, addrs[i], name, sizeof(name)) >= 0 && !memchr(name, '\0', sizeof(name)))
			__builtin_trap();
	}
	hotspot_free(h);
	return 0;
}
