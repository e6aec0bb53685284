/*
 * pyframes.h — the Python frames of a thread of a CPython process, read from its memory.
 *
 * CPython runs Python code in its C function _PyEval_EvalFrameDefault; a native stack shows that function once
 * per entry into the interpreter, never the Python functions. The interpreter keeps them in its own memory: the
 * runtime (_PyRuntime) lists the interpreters, each its threads (PyThreadState, with the thread's native id),
 * each thread its chain of _PyInterpreterFrame from the innermost out. A frame names its code object (qualified
 * name, file, line table) and the instruction it is at; frames where a C call entered the interpreter are marked
 * "entry": one _PyEval_EvalFrameDefault runs the frames from one entry frame up to the next.
 *
 * What is read where is data: one row of offsets per CPython version (pyframes.c), the version read from the
 * process (Py_Version). Verified rows: 3.11 (checked against 3.11.2, statically linked, and 3.11.7 through
 * libpython3.11.so) and 3.12 (3.12.1, libpython3.12.so); 3.13 from the offsets its runtime describes itself with
 * (_Py_DebugOffsets at the start of _PyRuntime, checked in 3.13.0). A process of another version is not read
 * (pyframes_process() says no).
 *
 * A process is looked at once, at its first sample (pyframes_process()): the mapping of its python3.X executable
 * or libpython3.X.so is opened and its symbols read (symbolizer_find(): _PyRuntime, Py_Version,
 * _PyEval_EvalFrameDefault). Code objects are read once per (process, address) and kept (struct pycode), so a
 * frame costs two small reads after the first (the frame, and the code object's pointers to its names and line
 * table, which tell a code object from a later one at the same address); an exec or exit forgets them
 * (pyframes_forget()).
 *
 * Untrusted input: the process's memory may be anything. Every read goes through procmem_read() with a bounded
 * length, every pointer read is only ever an address to read from again, chains are bounded (interpreters,
 * 16 interpreters, 4096 threads, PYFRAMES_MAX_FRAMES frames), strings are cut at PYCODE_NAME_MAX bytes and made valid UTF-8 without
 * controls, line tables are read up to PYCODE_LINETABLE_MAX bytes and decoded with every step bounded.
 *
 * Threads: every function may be called from any thread (the fast lane's readers and the main thread); one mutex
 * guards the state. A struct pycode is immutable once made, reference counted (atomically): a trace frame holds
 * one. Errors: negative errno.
 */
#ifndef HOSTPROF_PYFRAMES_H
#define HOSTPROF_PYFRAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/processes/execinfo.h"
#include "src/processes/procmgr.h"
#include "src/profile/ids.h"

#define PYFRAMES_MAX_FRAMES 1024	/* Python frames a read follows at most */
#define PYCODE_NAME_MAX 512		/* bytes of a name or file name kept (longer ones cut) */
#define PYCODE_LINETABLE_MAX (64u << 10)	/* bytes of a line table read */

/* A code object as read once: its names (module.qualname, file), immutable, shared by reference. */
struct pycode {
	unsigned refs;		/* atomic */
	struct file_id file_id;	/* FNV-1a-128 of "cpython", the file and the name: the frame's identity */
	int32_t firstlineno;
	uint32_t linetable_len;
	char *name;		/* module.qualname, the module from the file's name */
	char *file;		/* co_filename */
	uint8_t *linetable;	/* co_linetable (3.11 location table) */
};

void pycode_ref(struct pycode *c);
void pycode_release(struct pycode *c);
/* The source line of instruction index (code units from the code's start) of c; 0 if unknown. */
int32_t pycode_line(const struct pycode *c, uint32_t instr);

/* One Python frame read, innermost first. */
struct pyframe {
	struct pycode *code;	/* one reference held by whoever holds the frame */
	int32_t line;		/* the line of the instruction the frame is at (0: unknown) */
	bool entry;		/* a C call entered the interpreter here: the last frame of its eval loop */
};

/* What is known of a CPython process: where its interpreter is, and whether it can be read. */
struct pyproc {
	bool python;		/* a CPython whose version has a row: its threads can be read */
	uint32_t version;	/* Py_Version (PY_VERSION_HEX) as read, 0 if none */
	struct execinfo *eval_exe;	/* the file with _PyEval_EvalFrameDefault (the executable or libpython) */
	uint64_t eval_start, eval_end;	/* its ELF virtual addresses there */
};

struct pyframes_stats {
	uint64_t processes;	/* CPython processes found, that can be read */
	uint64_t unsupported;	/* CPython processes of a version without a row */
	uint64_t reads;		/* thread reads */
	uint64_t read_errors;	/* ... that failed (no thread state, a read refused, a chain too long) */
	uint64_t codes;		/* code objects read */
	uint64_t code_errors;	/* ... that could not be read */
	uint64_t codes_replaced;	/* code objects found replaced by another at the same address */
};

struct pyframes;

/* execinfo is borrowed and must outlive the reader (it holds references on CPython's files). */
int pyframes_new(struct execinfo_mgr *execinfo, struct pyframes **out);
void pyframes_free(struct pyframes *m);

/*
 * What p is: looked at once (until pyframes_forget()), from its mappings (pm opens the files); *out is copied.
 * Returns 0 with out->python set or not, or a negative errno (nothing known yet: asked again next time).
 */
int pyframes_process(struct pyframes *m, struct procmgr *pm, struct process *p, struct pyproc *out);
/* Whether pid is a CPython process that can be read (as pyframes_process() found, no look now). */
bool pyframes_known_python(struct pyframes *m, pid_t pid);

/*
 * Read the Python frames of thread tid of process pid (found by pyframes_process()), innermost first, at most max
 * (max <= PYFRAMES_MAX_FRAMES): *n and out[0..*n), each holding a reference on its code (the caller releases them).
 * Returns 0, -ENOENT (not a process known to be CPython, or no thread state for tid: a thread that never ran
 * Python), -E2BIG (the chain is longer than max: nothing returned), or procmem_read()'s error.
 */
int pyframes_read(struct pyframes *m, pid_t pid, pid_t tid, struct pyframe *out, unsigned max, unsigned *n);

/* pid exec'd, or a new process took it: what is known of it goes. */
void pyframes_forget(struct pyframes *m, pid_t pid);
/* pid exited: what reading its frames keeps goes, but whether it was CPython and where its eval loop was stay until
 * its pid is taken again (pyframes_forget) or room is needed: the fast lane's samples of its last moments, read
 * before it exited, are handled after its exit record, and their Python frames are merged with that. */
void pyframes_on_exit(struct pyframes *m, pid_t pid);
/* pid mapped executable code: if it was found no CPython, it is looked at again at its next sample (an interpreter
 * whose libpython the dynamic loader maps after its first samples, under a shim that execs it, would otherwise stay
 * "no CPython" for its life). */
void pyframes_on_mapping(struct pyframes *m, pid_t pid);

void pyframes_get_stats(struct pyframes *m, struct pyframes_stats *out);

#endif
