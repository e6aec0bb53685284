/*
 * kernel_frames.c — the kernel's build id, _text and symbols for traces (kernel_frames.h).
 */
#include "src/pipeline/kernel_frames.h"

#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/cache_dir.h"
#include "src/profile/ids.h"
#include "symbols/kallsyms.h"
#include "symbols/kallsyms_cache.h"

struct kernel_frames {
	struct trace_kernel trace;
	struct kallsyms *kallsyms;	/* NULL until loaded */
	bool use_cache;
};

/* The kernel's build-id from /sys/kernel/notes, a sequence of ELF notes, every length checked against what was
 * read. */
static void read_kernel_build_id(char *out)
{
	uint8_t buf[4096];
	FILE *f = fopen("/sys/kernel/notes", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	out[0] = '\0';
	if (f)
		fclose(f);
	for (size_t off = 0; off + 12 <= n;) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		size_t name_off = off + 12, desc_off = name_off + ((namesz + 3) & ~3u);
		if (namesz > n || descsz > n || desc_off + descsz > n)
			return;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 && descsz <= 20) {
			hex_encode(buf + desc_off, descsz, out);
			return;
		}
		off = desc_off + ((descsz + 3) & ~3u);
	}
}

int kernel_frames_new(bool sampled, bool use_cache, struct kernel_frames **out)
{
	struct kernel_frames *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->use_cache = use_cache;
	read_kernel_build_id(k->trace.build_id);
	if (k->trace.build_id[0])
		fileid_from_build_id_hex(k->trace.build_id, &k->trace.file_id);
	if (sampled)
		kallsyms_read_text_start("/proc/kallsyms", &k->trace.text_start);
	*out = k;
	return 0;
}

void kernel_frames_free(struct kernel_frames *k)
{
	if (!k)
		return;
	kallsyms_free(k->kallsyms);
	free(k);
}

struct trace_kernel *kernel_frames_trace(struct kernel_frames *k)
{
	return &k->trace;
}

struct kallsyms *kernel_frames_symbols(struct kernel_frames *k)
{
	char dir[4096];
	struct kallsyms_cache_paths paths = { .dir = NULL };
	if (k->kallsyms)
		return k->kallsyms;
	if (k->use_cache && cache_dir_default(dir, sizeof(dir)) == 0)
		paths.dir = dir;
	if (kallsyms_cache_open(&paths, &k->kallsyms, NULL) == 0)
		k->trace.kallsyms = k->kallsyms;	/* for the tables of later intervals */
	return k->kallsyms;
}
