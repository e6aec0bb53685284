/*
 * standalone_main.c — runs a fuzz target (LLVMFuzzerTestOneInput) without libFuzzer, so that `make check`
 * builds every target with the normal compiler (and its sanitizers under `make check-asan`) and replays inputs
 * through it: each file given, then, with -m N, N mutants of each made from a fixed seed (bytes overwritten,
 * runs of bytes zeroed or set to 0xff, the file cut short), the same ones on every run.
 *
 * Usage: fuzz_TARGET [-m N] FILE...   Exit status 0 when every input ran; a bug crashes or trips a sanitizer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Under AddressSanitizer, an allocation a hostile count asks for (msgpack-c sizes an array's zone by its declared
 * count: a mutant's 0xffffffff wants 128 GiB) fails as it does in production, with NULL, which the parsers turn
 * into an error, instead of aborting the run. Ignored without ASan.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

/* xorshift64: deterministic mutants, not security. */
static uint64_t next_random(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

static void mutate(uint8_t *buf, size_t *size, uint64_t *rng)
{
	size_t n = *size;
	if (n == 0)
		return;
	switch (next_random(rng) % 4) {
	case 0: /* a few bytes anywhere */
		for (int i = 0; i < 8; i++)
			buf[next_random(rng) % n] = (uint8_t)next_random(rng);
		break;
	case 1: /* a run of zeros: lengths and offsets that vanish */
	case 2: { /* a run of 0xff: huge lengths and counts */
		uint8_t fill = (next_random(rng) & 1) ? 0xff : 0;
		size_t at = next_random(rng) % n, len = 1 + next_random(rng) % 16;
		memset(buf + at, fill, len < n - at ? len : n - at);
		break;
	}
	default: /* cut short */
		*size = next_random(rng) % n;
		break;
	}
}

static int read_file(const char *path, uint8_t **data, size_t *size)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return -errno;
	size_t cap = 65536, n = 0;
	uint8_t *buf = malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, fp)) > 0) {
		n += got;
		if (n == cap) {
			uint8_t *bigger = realloc(buf, cap *= 2);
			if (!bigger)
				free(buf);
			buf = bigger;
		}
	}
	int failed = ferror(fp);
	fclose(fp);
	if (!buf)
		return -ENOMEM;
	if (failed) {
		free(buf);
		return -EIO;
	}
	*data = buf;
	*size = n;
	return 0;
}

int main(int argc, char **argv)
{
	int first = 1;
	unsigned long mutants = 0;
	if (argc > 2 && strcmp(argv[1], "-m") == 0) {
		mutants = strtoul(argv[2], NULL, 10);
		first = 3;
	}
	if (first >= argc) {
		fprintf(stderr, "usage: %s [-m N] FILE...\n", argv[0]);
		return 2;
	}
	for (int i = first; i < argc; i++) {
		uint8_t *data = NULL, *copy;
		size_t size = 0;
		int err = read_file(argv[i], &data, &size);
		if (err < 0) {
			fprintf(stderr, "%s: %s: %s\n", argv[0], argv[i], strerror(-err));
			return 1;
		}
		LLVMFuzzerTestOneInput(data, size);
		if (!(copy = malloc(size ? size : 1))) {
			free(data);
			return 1;
		}
		uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)i;
		for (unsigned long m = 0; m < mutants; m++) {
			size_t n = size;
			memcpy(copy, data, size);
			mutate(copy, &n, &rng);
			LLVMFuzzerTestOneInput(copy, n);
		}
		free(copy);
		free(data);
	}
	fprintf(stderr, "%s: %d inputs, %lu mutants each: no crash\n", argv[0], argc - first, mutants);
	return 0;
}
