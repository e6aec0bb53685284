/*
 * fuzz_jitdump.c — fuzz target: a jitdump file (jit-PID.dump), which the profiled process writes and hostprof
 * reads as root. The input is parsed whole, then as a runtime still writing it would leave it: the file cut
 * where the first byte says, read in pieces as the JIT reader reads (at least JITDUMP_RECORD_PREFIX_MAX bytes,
 * or the rest), then grown to its full length; the tables are committed and looked up.
 */
#include <stdint.h>
#include <stdlib.h>

#include "symbols/jitdump.h"
#include "symbols/jitsyms.h"

/* Parse data[0..file) from *pos on as the reader would; returns the last result. */
static int64_t read_on(struct jitdump_parser *p, struct jitsyms *t, const uint8_t *data, size_t file, uint64_t *pos)
{
	int64_t used = 0;
	while (*pos < file) {
		size_t left = file - (size_t)*pos;
		size_t n = left < JITDUMP_RECORD_PREFIX_MAX ? left : JITDUMP_RECORD_PREFIX_MAX;
		used = jitdump_parse(p, t, data + *pos, n, left);
		if (used <= 0)
			break;
		if ((uint64_t)used > left)
			abort();	/* never past the end of the file */
		*pos += (uint64_t)used;
	}
	return used;
}

static void look_up(struct jitsyms *t, const uint8_t *data, size_t size)
{
	struct jitsym_info info;
	jitsyms_commit(t);
	for (size_t i = 0; i + 8 <= size && i < 512; i += 8) {
		uint64_t addr;
		__builtin_memcpy(&addr, data + i, 8);
		jitsyms_lookup(t, addr, &info);
		jitsyms_lookup(t, addr + 1, &info);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jitsyms_limits lim = { .max_ranges = 4096, .max_lines = 4096, .max_bytes = 1 << 20 };
	struct jitsyms *whole = NULL, *grown = NULL;
	struct jitdump_parser a, b;
	jitdump_parser_init(&a);
	jitdump_parser_init(&b);
	if (jitsyms_new(&lim, &whole) < 0 || jitsyms_new(&lim, &grown) < 0)
		goto out;
	uint64_t pos = 0;
	read_on(&a, whole, data, size, &pos);
	size_t cut = size ? (size_t)data[size - 1] * size / 256 : 0;
	pos = 0;
	read_on(&b, grown, data, cut, &pos);
	read_on(&b, grown, data, size, &pos);
	look_up(whole, data, size);
	look_up(grown, data, size);
out:
	jitdump_parser_free(&a);
	jitdump_parser_free(&b);
	jitsyms_free(whole);
	jitsyms_free(grown);
	return 0;
}
