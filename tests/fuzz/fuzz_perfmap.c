/*
 * fuzz_perfmap.c — fuzz target: a perf map (/tmp/perf-PID.map), which the profiled process writes and hostprof
 * reads as root. The input is parsed whole, then again in pieces as a runtime still appending would leave it
 * (piece size from the first byte), the way the JIT reader feeds the parser; the tables are committed and
 * looked up. Both parses must agree on what was consumed.
 */
#include <stdint.h>
#include <stdlib.h>

#include "symbols/jitsyms.h"
#include "symbols/perfmap.h"

static void look_up(struct jitsyms *t, const uint8_t *data, size_t size)
{
	struct jitsym_info info;
	jitsyms_commit(t);
	for (size_t i = 0; i + 8 <= size && i < 256; i += 8) {
		uint64_t addr;
		__builtin_memcpy(&addr, data + i, 8);
		jitsyms_lookup(t, addr, &info);
		jitsyms_lookup(t, addr & 0xffffffffffffull, &info);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jitsyms_limits lim = { .max_ranges = 4096, .max_lines = 4096, .max_bytes = 1 << 20 };
	struct jitsyms *whole = NULL, *pieces = NULL;
	struct perfmap_parser a = { 0 }, b = { 0 };
	if (jitsyms_new(&lim, &whole) < 0 || jitsyms_new(&lim, &pieces) < 0)
		goto out;
	size_t used = perfmap_parse(&a, whole, (const char *)data, size);
	if (used > size)
		abort();
	/* Pieces of at least PERFMAP_LINE_MAX bytes, as the reader gives: it always moves on. */
	size_t piece = PERFMAP_LINE_MAX + (size ? data[0] : 0), done = 0;
	while (done < size) {
		size_t n = size - done < piece ? size - done : piece;
		size_t got = perfmap_parse(&b, pieces, (const char *)data + done, n);
		if (got > n || (got == 0 && n >= PERFMAP_LINE_MAX))
			abort();
		if (got == 0)
			break;
		done += got;
	}
	if (b.stats.symbols != a.stats.symbols && !a.stats.too_long && !b.stats.too_long)
		abort();
	look_up(whole, data, size);
	look_up(pieces, data, size);
out:
	jitsyms_free(whole);
	jitsyms_free(pieces);
	return 0;
}
