/*
 * fuzz_pylinetable.c — fuzz target: a CPython 3.11 code object's location table (co_linetable) as hostprof reads
 * it from a Python process's memory (src/processes/pyframes.h, pycode_line()): the process controls every byte,
 * so every entry, varint and line delta is checked.
 * The input's first 4 bytes are the instruction looked up and the code's first line's low bits; the rest is the
 * table.
 */
#include <stdint.h>
#include <string.h>

#include "src/processes/pyframes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t head;
	if (size < sizeof(head))
		return 0;
	memcpy(&head, data, sizeof(head));
	struct pycode c = { .firstlineno = (int32_t)(head >> 16), .linetable = (uint8_t *)data + sizeof(head),
			    .linetable_len = (uint32_t)(size - sizeof(head)) };
	/* The instruction asked, and every one up to the table's reach (an entry covers at most 8 units). */
	pycode_line(&c, head & 0xffff);
	for (uint32_t i = 0; i <= 8 * c.linetable_len && i < 4096; i++)
		pycode_line(&c, i);
	return 0;
}
