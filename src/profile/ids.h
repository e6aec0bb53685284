/*
 * ids.h — identifiers shared with the OpenTelemetry eBPF profiler (man/hostprof-profile.5 describes them).
 *
 * FileID: SHA-256 over the first 4096 bytes, the last 4096 bytes and the file length (big-endian u64), first
 * 16 bytes kept. Kernel FileID: FNV-1a-128 of the build-id as lowercase hex text. JIT code: FNV-1a-128 of a
 * text that names it (jitinfo.h). Stack-trace ID: FNV-1a-128
 * over each frame's FileID bytes followed by its address as ASCII decimal.
 *
 * Pure functions except fileid_from_fd(), which reads the file with pread and leaves the offset alone.
 */
#ifndef HOSTPROF_IDS_H
#define HOSTPROF_IDS_H

#include <stddef.h>
#include <stdint.h>

struct file_id { uint8_t bytes[16]; };
struct trace_id { uint8_t bytes[16]; };

/* FileID of an in-memory file image. */
void fileid_from_buffer(const uint8_t *data, size_t size, struct file_id *out);
/* FileID of an open file. Returns 0 or a negative errno. */
int fileid_from_fd(int fd, struct file_id *out);
/* Kernel (or any build-id-named object) FileID: FNV-1a-128 of the hex text of build_id. */
void fileid_from_build_id_hex(const char *hex, struct file_id *out);
/* FNV-1a-128 of text[0..n): the FileID of code no file holds (JIT code, jitinfo.h). */
void fileid_from_text(const void *text, size_t n, struct file_id *out);

/* Incremental stack-trace ID: init, one call per frame (kernel frames leaf first, then user frames leaf first),
 * finish. */
struct trace_hasher { unsigned __int128 state; };
void trace_hash_init(struct trace_hasher *h);
void trace_hash_frame(struct trace_hasher *h, const struct file_id *file, uint64_t address);
void trace_hash_finish(const struct trace_hasher *h, struct trace_id *out);

/* Lowercase hex of n bytes into out (2n+1 bytes). */
void hex_encode(const uint8_t *bytes, size_t n, char *out);

#endif
