/*
 * replay.h — replay files: raw samples (user registers + stack copies) with the mappings and files they need,
 * so unwinders can be run again on exactly the same input (differential tests, benchmarks, bug reports).
 *
 * A replay file is one msgpack map (schema in man/hostprof-profile.5, § REPLAY FILES). Files are referred to by
 * path and FileID; small files outside the system directories (test programs) and in-memory images (the vdso)
 * are embedded, so a replay made here also runs where those files differ. When a referenced file's FileID does
 * not match on the replaying machine, the samples needing it are reported, not silently mis-unwound.
 *
 * Writer: replay_writer_new(), add files, processes and samples, replay_writer_save() (atomic: src/base/atomic_file.h).
 * Reader: replay_read() loads and bound-checks a whole file; the replay file and the files it names are opened
 * only when they are regular files (src/base/regular_file.h): a FIFO or a device is refused, never waited on.
 * Not thread-safe.
 */
#ifndef HOSTPROF_REPLAY_H
#define HOSTPROF_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/processes/execinfo.h"
#include "unwind/unwind.h"

#define REPLAY_FORMAT "hostprof-replay"
#define REPLAY_VERSION 1
/* Files at most this big, outside /usr and /lib, are embedded. */
#define REPLAY_EMBED_MAX (4u << 20)

struct replay_file {
	char *path;
	uint8_t file_id[16];
	uint8_t *image;		/* embedded contents, or NULL */
	size_t image_size;
};

struct replay_mapping {
	uint32_t file;		/* index into files */
	uint64_t start, end, pgoff;
	int prot;		/* PROT_* bits as mapped; 0 if the file did not say (older replay files) */
};

struct replay_process {
	int32_t pid;
	struct replay_mapping *mappings;	/* sorted by start */
	uint32_t nmappings;
};

struct replay_sample {
	int32_t pid, tid;
	uint64_t regs[UNWIND_NREGS];
	uint8_t *stack;
	uint32_t stack_size;
	uint64_t *fp_chain;	/* the kernel's frame-pointer chain (unwind_sample.fp_chain), or NULL */
	uint32_t fp_chain_len;
};

/* Most frame-pointer chain entries a replay sample may hold (the kernel's own limit is far lower). */
#define REPLAY_MAX_FP_CHAIN 1024

struct replay {
	struct replay_file *files;
	uint32_t nfiles;
	struct replay_process *processes;
	uint32_t nprocesses;
	struct replay_sample *samples;
	uint32_t nsamples;
};

struct replay_writer;

/* Returns 0 and *out (free with replay_writer_free()), or -ENOMEM; *out is set only on success. */
int replay_writer_new(struct replay_writer **out);
void replay_writer_free(struct replay_writer *w);
/* Add the file behind e (deduplicated by FileID); *index receives its index. */
int replay_writer_add_file(struct replay_writer *w, const struct execinfo *e, uint32_t *index);
/* Record a process's mappings (a later call for the same pid replaces them). */
int replay_writer_set_process(struct replay_writer *w, pid_t pid, const struct replay_mapping *maps, uint32_t n);
/* Record every process procs knows: the mappings whose files can be opened, with those files. */
struct procmgr;
int replay_writer_add_processes(struct replay_writer *w, struct procmgr *procs);
int replay_writer_add_sample(struct replay_writer *w, pid_t pid, pid_t tid, const struct unwind_sample *s);
int replay_writer_save(struct replay_writer *w, const char *path);

int replay_read(const char *path, struct replay **out, char *errbuf, size_t errlen);
void replay_free(struct replay *r);

/*
 * The files of a replay opened through an executable-info manager: embedded images as they are, others from
 * their path when the FileID matches. replay_env_process() gives an unwind_process for one pid.
 */
struct replay_env;

int replay_env_new(const struct replay *r, struct execinfo_mgr *em, struct replay_env **out);
void replay_env_free(struct replay_env *env);
/* Set up proc for pid (no process memory: proc->memory is NULL); -ENOENT if the replay has no such process. */
int replay_env_process(struct replay_env *env, int32_t pid, struct unwind_process *proc);
/* The execinfo of a replay file index, NULL if missing here. */
struct execinfo *replay_env_file(const struct replay_env *env, uint32_t file);

/* Why a replay file is missing here (err 0: it is here): its open's error (-ENOENT, ...), -ESTALE for another
 * build of the file (its FileID differs), or what reading it as ELF gave; not_regular when the path names no
 * regular file (mode says what it is: regular_file_kind()), which is then never opened (a FIFO would block). */
struct replay_file_status {
	int err;
	bool not_regular;
	mode_t mode;
};

const struct replay_file_status *replay_env_file_status(const struct replay_env *env, uint32_t file);

#endif
