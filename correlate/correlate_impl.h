/*
 * correlate_impl.h — internals shared by the files of correlate/ (not part of the public API; unit tests
 * include it to test the pieces alone).
 *
 * apm_messages.c datagram encoding; the per-process aggregation table and its flushing
 * apm_process.c  agent-library detection, ELF/TLSDESC resolution, reading process memory and process storage
 * apm_thread.c   thread pointers through a one-time ptrace stop
 * apm_socket.c   opening the agent's socket safely under the process's root; sending
 * apm_image.c    binding every action to one image of the process (one exec) and its credentials
 * apm_reader.c   the TLS reads of samples (correlate_reader): thread-safe, for readers on other threads
 * correlate.c    the handle: per-process state machine, public API, logging, stats
 *
 * All functions return 0 or a positive value on success and a negative errno on failure. None keeps global
 * state; none is thread-safe on shared arguments.
 */
#ifndef HOSTPROF_CORRELATE_IMPL_H
#define HOSTPROF_CORRELATE_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "correlate/correlate.h"
#include "src/base/hindex.h"

/* ---- protocol constants (man/hostprof-correlation.7, MESSAGES) ---- */
#define CORR_MSG_CORRELATION		1
#define CORR_MSG_CORRELATION_MINOR	1
#define CORR_MSG_REGISTRATION		2
#define CORR_MSG_REGISTRATION_MINOR	2	/* as the seed gives it; the Java agent ignores minors */
#define CORR_CORRELATION_LEN		46
#define CORR_MAX_COUNT			32767	/* the Java agent reads count as a signed 16-bit value */
#define CORR_DATAGRAM_MAX		1024	/* the Java agent's receive buffer */
#define CORR_TLS_LEN			37
#define CORR_TLS_OFF_VALID		2
#define CORR_TLS_OFF_PRESENT		3
#define CORR_TLS_OFF_FLAGS		4
#define CORR_TLS_OFF_TRACE		5
#define CORR_TLS_OFF_SPAN		21
#define CORR_TLS_OFF_TXN		29
/* The agents drain their socket every 20 ms: the right pace to retry after EAGAIN. */
#define CORR_RECEIVER_POLL_MS		20

#define CORR_STORAGE_SYMBOL	"elastic_apm_profiling_correlation_process_storage_v1"
#define CORR_TLS_SYMBOL		"elastic_apm_profiling_correlation_tls_v1"

/* ---- correlate.c: the points where a test may act (an exec of the process, exactly there) ---- */
enum corr_stage {
	CORR_STAGE_STORAGE_READ,	/* the process storage was just read, not yet checked against the image */
	CORR_STAGE_CONNECT,		/* right before the agent's socket is opened and connected */
	CORR_STAGE_SEND,		/* right before a datagram (registration or counts) is sent */
};
typedef void (*corr_stage_hook)(void *arg, pid_t pid, enum corr_stage stage);
/* For tests only (not in correlate.h): fn is called at each stage, from inside correlate_tick(). NULL = none. */
void corr_set_stage_hook(struct correlate *c, corr_stage_hook fn, void *arg);

/* ---- apm_messages.c ---- */
struct corr_key {
	uint8_t trace_id[CORRELATE_TRACE_ID_LEN];
	uint8_t transaction_id[CORRELATE_TRANSACTION_ID_LEN];
	uint8_t stack_id[CORRELATE_STACK_ID_LEN];
};

/* Writes the 46-byte correlation message; count must be 1..CORR_MAX_COUNT. Returns 46. */
size_t corr_encode_correlation(uint8_t out[CORR_CORRELATION_LEN], const struct corr_key *k, uint16_t count);
/* Writes the registration message into out (cap bytes); returns its length or -EMSGSIZE. */
ssize_t corr_encode_registration(uint8_t *out, size_t cap, uint32_t delay_ms, const char *host_id,
				 size_t host_id_len);

struct corr_pending_entry {
	struct corr_key key;
	uint64_t count;		/* unsent */
	uint64_t oldest_ns;	/* time of the oldest unsent sample of this key */
};

/* Unsent counts of one process, in first-seen order (so retries send the oldest first). */
struct corr_pending {
	struct corr_pending_entry *entries;
	uint32_t n, cap;
	struct hindex index;	/* hash of key → entry index */
	uint32_t max;		/* bound on n */
	uint64_t total;		/* sum of entries' counts */
};

/* 0, -ENOSPC when max distinct keys are pending (the count is not added), -ENOMEM. */
int corr_pending_add(struct corr_pending *p, const struct corr_key *k, uint64_t sample_ns);

/* One datagram out: 0, -EAGAIN (queue full: try later), other -errno (socket unusable). */
typedef int (*corr_send_fn)(void *arg, const void *buf, size_t len);

struct corr_flush_result {
	uint64_t messages, counts;
};

/*
 * Send every pending count, oldest key first, at most CORR_MAX_COUNT per message. Stops at the first
 * failing send and returns its error; what was not sent stays pending. Sent counts are added to hist
 * (CORRELATE_LATENCY_BUCKETS buckets of CORRELATE_LATENCY_BUCKET_MS, weighted by count) with latency now_ns - oldest_ns.
 */
int corr_pending_flush(struct corr_pending *p, corr_send_fn send, void *arg, uint64_t now_ns, uint64_t *hist,
		       struct corr_flush_result *res);
/* Forget everything; returns the number of counts that were pending. */
uint64_t corr_pending_clear(struct corr_pending *p);
void corr_pending_free(struct corr_pending *p);

/* ---- apm_process.c ---- */
/* What the agent library's ELF says, as link-time virtual addresses. */
struct corr_agent_elf {
	uint64_t storage_va;	/* the 8-byte process-storage pointer variable */
	uint64_t tlsdesc_va;	/* the 16-byte TLSDESC {resolver, argument} of the TLS variable (GOT) */
};

/*
 * Resolve the agent symbols in an ELF file (fd, not closed). why receives a one-line reason on failure:
 * -ENOEXEC (not an x86_64 ELF shared object, or malformed), -ENOENT (a symbol or the TLSDESC relocation is
 * missing), -EFBIG (absurd size).
 */
int corr_agent_elf_resolve(int fd, struct corr_agent_elf *out, char *why, size_t whylen);


/* Value of a symbol (.symtab, then .dynsym) of type STT_FUNC/STT_OBJECT/STT_TLS; -ENOENT if absent. */
int corr_elf_symbol(int fd, const char *name, uint64_t *value, uint64_t *size);

/* Read exactly len bytes of the target's memory at addr through its /proc/PID/mem fd. -EFAULT for addresses
 * that cannot be user memory, -EIO for unmapped memory, -ESRCH when the address space is gone. */
int corr_mem_read(int memfd, uint64_t addr, void *buf, size_t len);

/* One line of /proc/PID/maps. path points into the caller's line buffer. */
struct corr_map {
	uint64_t start, end, pgoff;
	int exec;
	int prot;		/* PROT_* bits */
	const char *path;	/* "" for anonymous mappings */
};

/* PT_LOAD headers looked at in the agent library; real files have 2 to 5. */
#define CORR_MAX_SEGMENTS 16

/* The load bias of file fd mapped as m: runtime address − ELF address (load_bias.h). */
int corr_elf_load_bias(int fd, const struct corr_map *m, uint64_t *bias);

/* Calls fn for each line of /proc/PID/maps until it returns non-zero; returns that value, 0, or -errno. */
int corr_maps_each(pid_t pid, int (*fn)(void *arg, const struct corr_map *m), void *arg);

/* Open a mapped file: /proc/PID/map_files/START-END, else path under /proc/PID/root. */
int corr_open_mapped_file(pid_t pid, const struct corr_map *m);

enum corr_resolver {
	CORR_RESOLVER_UNRELOCATED,	/* 0 or outside any executable file mapping: dlopen not done yet */
	CORR_RESOLVER_STATIC,		/* the static-TLS resolver: argument = offset from the thread pointer */
	CORR_RESOLVER_DYNAMIC,		/* _dl_tlsdesc_dynamic: the variable is in dynamically allocated TLS */
	CORR_RESOLVER_OTHER,		/* anything else (lazy resolver of old glibc, unknown libc) */
};

/* Classify a TLSDESC resolver address of pid. why names what was found. */
enum corr_resolver corr_classify_resolver(pid_t pid, int memfd, uint64_t resolver, char *why, size_t whylen);

/* The process storage, validated. */
struct corr_storage {
	uint16_t minor;
	char service[CORRELATE_SERVICE_MAX + 1];
	char env[CORRELATE_SERVICE_MAX + 1];
	char socket_path[CORRELATE_SOCKET_PATH_MAX + 1];
};

/* Read and validate the storage at ptr (the value of the pointer variable, non-zero). -EIO unreadable,
 * -EBADMSG garbage (lengths, encoding); why says which. */
int corr_storage_read(int memfd, uint64_t ptr, struct corr_storage *out, char *why, size_t whylen);

/* 1 if the bytes are well-formed UTF-8 without NUL, else 0. */
int corr_utf8_valid(const uint8_t *s, size_t len);

/* ---- apm_thread.c ---- */
/*
 * The thread pointer (fs_base) of tid: PTRACE_SEIZE, PTRACE_INTERRUPT, wait for the stop (at most
 * wait_ms), PTRACE_GETREGS, PTRACE_DETACH (re-injecting a signal the stop intercepted). Returns 0,
 * -EPERM/-ESRCH/... from ptrace, or -EINPROGRESS when the thread did not stop in time: it stays seized with
 * an interrupt pending and the caller must call corr_ptrace_finish() until it returns non-zero. keep_exit:
 * tid is the leader of the caller's own child, whose exit status must be left for the caller.
 */
int corr_ptrace_fs_base(pid_t tid, int keep_exit, unsigned wait_ms, uint64_t *fs_base);
/* For a thread left seized: 1 once it has been detached (or is gone), 0 while it has not stopped yet. */
int corr_ptrace_finish(pid_t tid, int keep_exit);

/* ---- apm_reader.c: the handle registers ready processes; correlate.h has the reading side ---- */
/* Returns 0 and *out (free with corr_reader_free()), -ENOMEM, or pthread_mutex_init()'s error, negated; *out is
 * set only on success. */
int corr_reader_new(struct correlate_reader **out);
void corr_reader_free(struct correlate_reader *r);
/* pid is ready: memfd (duplicated, the caller keeps its own) and the TLS offset; replaces an earlier entry. */
int corr_reader_add(struct correlate_reader *r, pid_t pid, int memfd, uint64_t tls_offset, int is_our_child);
void corr_reader_remove(struct correlate_reader *r, pid_t pid);
void corr_reader_forget_thread(struct correlate_reader *r, pid_t pid, pid_t tid);

/* ---- apm_image.c ---- */
/* The auxiliary vector of one exec of a process: its identity (apm_image.c says why). */
#define CORR_AUXV_MAX 1024
struct corr_image {
	uint32_t len;
	uint8_t auxv[CORR_AUXV_MAX];
};

/* A process's user ids (/proc/PID/status "Uid:"). */
struct corr_creds {
	uid_t ruid, euid, suid, fsuid;
};

/* The image pid has now: 0, -ESRCH (gone, or no address space), -EFBIG, or open()/read()'s error. */
int corr_image_capture(pid_t pid, struct corr_image *out);
/* 0 if pid still runs the image img, -ESTALE if it exec'd since, or corr_image_capture()'s error. */
int corr_image_check(pid_t pid, const struct corr_image *img);
/* proc_read_identity()'s uids: 0, -ESRCH (gone, or a status without uids), or fopen()'s error. */
int corr_proc_creds(pid_t pid, struct corr_creds *out);
/* 1 if all four ids are equal. */
int corr_creds_equal(const struct corr_creds *a, const struct corr_creds *b);

/* ---- apm_socket.c ---- */
enum corr_sock_problem {
	CORR_SOCK_OK,
	CORR_SOCK_BAD_PATH,	/* not absolute, empty, NUL or ".." component */
	CORR_SOCK_RESOLVE,	/* cannot be resolved under the process's root (missing, symlink escape, …) */
	CORR_SOCK_NOT_SOCKET,
	CORR_SOCK_OWNER,	/* not owned by the effective (and file-system) uid the process had */
	CORR_SOCK_CONNECT,
	CORR_SOCK_PROC,		/* the process is gone or /proc unreadable */
};

struct corr_sock {
	int fd;			/* connected SOCK_DGRAM, non-blocking */
	uint64_t dev, ino;	/* the socket file reached */
};

/*
 * Connect to the agent socket at path (as the process sees it). The socket must be owned by creds' euid, which
 * must also be its fsuid: the credentials of the image that published path (apm_image.c), never re-read here.
 * Returns CORR_SOCK_OK or a problem with why.
 */
enum corr_sock_problem corr_socket_open(pid_t pid, const char *path, const struct corr_creds *creds,
					struct corr_sock *out, char *why, size_t whylen);
/*
 * Open path (as pid sees it) under /proc/PID/root with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS):
 * symlinks and ".." resolve inside that root, never above it. flags are open flags (O_CLOEXEC is added).
 */
int corr_open_in_root(pid_t pid, const char *path, int flags);
/* corr_send_fn for a struct corr_sock *. */
int corr_socket_send(void *sock, const void *buf, size_t len);

#endif
