/*
 * compress_words — the bundled workload for `make run`: builds a pseudo-random text, counts its words in a
 * hash table, sorts them by frequency and run-length/LZ-style compresses the text, a few times over.
 * Its time splits over hashing, sorting (qsort in libc) and compression, so a report has something to show.
 * Usage: compress_words [SECONDS [ROUNDS]] (default 3 s). With ROUNDS it does exactly that much work, whatever
 * the time, so benchmarks can compare its CPU time under different profilers; it prints its CPU time last.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define TEXT_SIZE (1 << 20)
#define TABLE_SIZE (1 << 16)

struct word_count {
	char word[16];
	unsigned count;
};

static const char *const vocabulary[] = {
	"profile", "sample", "stack", "frame", "unwind", "symbol", "kernel", "thread", "process", "delta",
	"table", "cache", "perf", "event", "ring", "buffer", "hash", "trace", "count", "report",
};

__attribute__((noinline)) static void generate_text(char *text, size_t size, uint64_t seed)
{
	size_t pos = 0;
	const size_t nvocab = sizeof(vocabulary) / sizeof(vocabulary[0]);
	while (pos + 17 < size) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		const char *w = vocabulary[(seed >> 33) % nvocab];
		size_t len = strlen(w);
		memcpy(text + pos, w, len);
		pos += len;
		text[pos++] = ' ';
	}
	text[pos] = '\0';
}

__attribute__((noinline)) static uint32_t hash_word(const char *w, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)w[i]) * 16777619u;
	return h;
}

__attribute__((noinline)) static size_t count_words(const char *text, struct word_count *table)
{
	size_t distinct = 0;
	const char *p = text;
	while (*p) {
		size_t len = strcspn(p, " ");
		if (len && len < 16) {
			uint32_t slot = hash_word(p, len) & (TABLE_SIZE - 1);
			while (table[slot].count && strncmp(table[slot].word, p, len) != 0)
				slot = (slot + 1) & (TABLE_SIZE - 1);
			if (!table[slot].count++) {
				memcpy(table[slot].word, p, len);
				distinct++;
			}
		}
		p += len + (p[len] == ' ');
	}
	return distinct;
}

static int by_count(const void *a, const void *b)
{
	const struct word_count *x = a, *y = b;
	return (x->count < y->count) - (x->count > y->count);
}

__attribute__((noinline)) static void sort_counts(struct word_count *table)
{
	qsort(table, TABLE_SIZE, sizeof(*table), by_count);
}

__attribute__((noinline)) static size_t compress_lz(const char *in, size_t n, uint8_t *out)
{
	size_t o = 0, i = 0;
	while (i < n) {
		size_t best_len = 0, best_dist = 0;
		size_t window = i < 4096 ? i : 4096;
		for (size_t d = 1; d <= window; d += 7) {
			size_t l = 0;
			while (l < 255 && i + l < n && in[i + l] == in[i - d + l])
				l++;
			if (l > best_len) {
				best_len = l;
				best_dist = d;
			}
		}
		if (best_len >= 4) {
			out[o++] = 0xff;
			out[o++] = (uint8_t)best_len;
			out[o++] = (uint8_t)(best_dist >> 8);
			out[o++] = (uint8_t)best_dist;
			i += best_len;
		} else {
			out[o++] = (uint8_t)in[i++];
		}
	}
	return o;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 3.0);
	long rounds = argc > 2 ? atol(argv[2]) : 0;
	char *text = malloc(TEXT_SIZE);
	uint8_t *packed = malloc(TEXT_SIZE * 2);
	struct word_count *table = calloc(TABLE_SIZE, sizeof(*table));
	size_t total = 0;
	if (!text || !packed || !table)
		return 1;
	for (uint64_t round = 1; rounds ? round <= (uint64_t)rounds : now() < end; round++) {
		generate_text(text, TEXT_SIZE, round);
		memset(table, 0, TABLE_SIZE * sizeof(*table));
		count_words(text, table);
		sort_counts(table);
		total += compress_lz(text, TEXT_SIZE / 8, packed);
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	/* Its own CPU time, so benchmarks can compare it under different profilers. */
	printf("compress_words: top word '%s', %zu bytes compressed, cpu %.3f s\n", table[0].word, total,
	       (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
		       ru.ru_stime.tv_usec / 1e6);
	free(text);
	free(packed);
	free(table);
	return 0;
}
