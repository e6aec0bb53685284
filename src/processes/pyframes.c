/*
 * pyframes.c — CPython's frames read from its memory. See pyframes.h for the contract.
 */
#include "src/processes/pyframes.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/base/hindex.h"
#include "src/processes/procmem.h"
#include "symbols/symbolizer.h"
#include "unwind/byte_reader.h"

/* Where CPython keeps what is read, for one version (x86-64 and other LP64 targets): byte offsets. */
struct pylayout {
	uint32_t version;		/* major << 8 | minor */
	uint16_t runtime_interp_head;	/* _PyRuntimeState.interpreters.head */
	uint16_t interp_next, interp_threads_head;	/* PyInterpreterState.next, .threads.head */
	uint16_t ts_next, ts_native_thread_id, ts_cframe;	/* PyThreadState */
	uint16_t cframe_current_frame;	/* _PyCFrame.current_frame */
	bool no_cframe;			/* 3.13: ts_cframe is the thread state's current_frame itself */
	uint16_t frame_code, frame_previous, frame_prev_instr, frame_size;	/* _PyInterpreterFrame */
	/* Where an eval loop's frames end: 3.11 marks its first frame (is_entry), 3.12 puts a frame of its own under
	 * it, owned by the C stack (owner FRAME_OWNED_BY_CSTACK), which names no Python function. 0: not this way. */
	uint16_t frame_is_entry, frame_owner;
	uint8_t owner_cstack;
	uint16_t code_type, code_firstlineno, code_filename, code_qualname, code_linetable, code_code;	/* PyCodeObject */
	uint16_t str_length, str_state, str_ascii_data, str_compact_data;	/* PyASCIIObject, PyCompactUnicodeObject */
	uint16_t bytes_size, bytes_data;	/* PyBytesObject */
};

/*
 * One row per version, checked against the real interpreters: from Include/internal/pycore_runtime.h,
 * pycore_interp.h, cpython/pystate.h, pycore_frame.h, cpython/code.h, cpython/unicodeobject.h, and read back in
 * running interpreters against id() of the objects and their f_lasti: 3.11 in 3.11.2 (Debian 12, static) and
 * 3.11.7 (libpython3.11.so), 3.12 in 3.12.1 (libpython3.12.so).
 */
static const struct pylayout layouts[] = {
	{
		.version = 0x030b,
		.runtime_interp_head = 40,
		.interp_next = 0, .interp_threads_head = 16,
		.ts_next = 8, .ts_native_thread_id = 160, .ts_cframe = 56,
		.cframe_current_frame = 8,
		.frame_code = 32, .frame_previous = 48, .frame_prev_instr = 56, .frame_is_entry = 68, .frame_size = 72,
		.code_type = 8, .code_firstlineno = 72, .code_filename = 112, .code_qualname = 128,
		.code_linetable = 136, .code_code = 184,
		.str_length = 16, .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
	},
	{
		.version = 0x030c,
		.runtime_interp_head = 40,
		.interp_next = 0, .interp_threads_head = 72,
		.ts_next = 8, .ts_native_thread_id = 144, .ts_cframe = 56,
		.cframe_current_frame = 0,
		.frame_code = 0, .frame_previous = 8, .frame_prev_instr = 56, .frame_size = 72,
		.frame_owner = 70, .owner_cstack = 3,
		.code_type = 8, .code_firstlineno = 68, .code_filename = 112, .code_qualname = 128,
		.code_linetable = 136, .code_code = 192,
		.str_length = 16, .str_state = 32, .str_ascii_data = 40, .str_compact_data = 56,
		.bytes_size = 16, .bytes_data = 32,
	},
};

#define MAX_INTERPRETERS 16	/* a chain longer than these (a loop, in a hostile process) is cut */
#define MAX_THREADS 4096
#define MAX_CODES_PER_PROCESS 65536
#define MAX_PROCESSES 65536	/* processes known; past it the ones found not CPython are forgotten */
#define CODE_HEADER 192		/* bytes of a code object read: past every field a row names */
#define TSTATE_HEADER 256

/* What one file (python3.X or libpython3.X.so) holds, found once: ELF virtual addresses. */
struct pyfile {
	struct execinfo *exe;	/* a reference held */
	bool found;		/* every symbol below was there */
	uint64_t runtime, version, code_type, eval, eval_size;
};

/* A code object read, with what tells it from a later one at the same address: the pointers to its file, name,
 * qualified name and location table (objects of its own, freed with it). */
#define CODE_SIG_MAX 64
struct code_entry {
	uint64_t addr;
	struct pycode *code;
	uint8_t sig[CODE_SIG_MAX];
};

struct pyprocess {
	pid_t pid;
	struct pyproc info;	/* info.eval_exe: borrowed from its pyfile */
	const struct pylayout *l;	/* a row of layouts[], or own */
	struct pylayout own;		/* 3.13 and later: from the runtime's _Py_DebugOffsets */
	uint64_t runtime, code_type;	/* runtime addresses */
	struct hindex codes;	/* code address -> struct code_entry * */
	struct hindex tstates;	/* tid -> thread state address, as last found */
	bool exited;		/* its exit was seen: info kept for its samples still queued (pyframes_on_exit) */
};

struct pyframes {
	pthread_mutex_t lock;
	struct execinfo_mgr *execinfo;
	struct hindex processes;	/* pid -> struct pyprocess * */
	struct hindex files;		/* execinfo pointer -> struct pyfile * */
	struct pyframes_stats stats;
};

void pycode_ref(struct pycode *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

void pycode_release(struct pycode *c)
{
	if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL))
		return;
	free(c->name);
	free(c->file);
	free(c->linetable);
	free(c);
}

/* --- the 3.11 location table (Objects/locations.md): entries of a first byte and varints of 6 bits --- */

/* CPython's varint: 6 bits a byte, low first, bit 6 set while more follow (not LEB128); at most 32 bits. */
static bool lt_varint(struct byte_reader *r, uint32_t *v)
{
	uint8_t b;
	*v = 0;
	for (unsigned shift = 0; shift < 32; shift += 6) {
		if (!byte_reader_u8(r, &b))
			return false;
		*v |= (uint32_t)(b & 63) << shift;
		if (!(b & 64))
			return true;
	}
	return false;
}

static bool lt_svarint(struct byte_reader *r, int32_t *v)
{
	uint32_t u;
	if (!lt_varint(r, &u))
		return false;
	*v = u & 1 ? -(int32_t)(u >> 1) : (int32_t)(u >> 1);
	return true;
}

/* One entry's line delta, the cursor moved past the entry's columns. */
static bool lt_entry(struct byte_reader *r, unsigned kind, int32_t *delta)
{
	uint32_t skip;
	*delta = 0;
	if (kind == 14)		/* long form: line delta, end line, column, end column */
		return lt_svarint(r, delta) && lt_varint(r, &skip) && lt_varint(r, &skip) && lt_varint(r, &skip);
	if (kind == 13)		/* no column */
		return lt_svarint(r, delta);
	if (kind >= 10 && kind <= 12) {	/* one line: the delta in the kind, two column bytes */
		*delta = (int32_t)kind - 10;
		return byte_reader_skip(r, 2);
	}
	if (kind < 10)		/* short form: the same line, one column byte */
		return byte_reader_skip(r, 1);
	return true;		/* 15: no location, the line carries on */
}

int32_t pycode_line(const struct pycode *code, uint32_t instr)
{
	struct byte_reader r;
	int64_t line = code->firstlineno;
	uint64_t addr = 0;
	uint8_t first;
	int32_t delta;
	byte_reader_init(&r, code->linetable, code->linetable_len);
	while (byte_reader_u8(&r, &first)) {
		if (!(first & 0x80) || !lt_entry(&r, (first >> 3) & 15, &delta))
			return 0;	/* not at an entry's start, or cut short: a table we do not understand */
		line += delta;
		if (line < 0 || line > INT32_MAX)
			return 0;
		if (instr < addr + (first & 7) + 1)
			return (int32_t)line;
		addr += (first & 7) + 1;
	}
	return 0;
}

/* --- reading the process --- */

static int read_exact(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = procmem_read(pid, addr, buf, len);
	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -EFAULT;
}

static uint64_t u64_at(const uint8_t *b, unsigned off)
{
	uint64_t v;
	memcpy(&v, b + off, sizeof(v));
	return v;
}

static uint32_t u32_at(const uint8_t *b, unsigned off)
{
	uint32_t v;
	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* Append code point cp as UTF-8 (controls and surrogates as '?'); false when it does not fit. */
static bool put_utf8(char *out, size_t size, size_t *len, uint32_t cp)
{
	char b[4];
	size_t n;
	if (cp < 0x20 || cp == 0x7f || (cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff)
		cp = '?';
	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | cp >> 6);
		b[1] = (char)(0x80 | (cp & 63));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | cp >> 12);
		b[1] = (char)(0x80 | ((cp >> 6) & 63));
		b[2] = (char)(0x80 | (cp & 63));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | cp >> 18);
		b[1] = (char)(0x80 | ((cp >> 12) & 63));
		b[2] = (char)(0x80 | ((cp >> 6) & 63));
		b[3] = (char)(0x80 | (cp & 63));
		n = 4;
	}
	if (*len + n >= size)
		return false;
	memcpy(out + *len, b, n);
	*len += n;
	return true;
}

/* A str object (compact, as code objects' names are) as UTF-8 in out (NUL-terminated, cut to fit). */
static int read_str(pid_t pid, const struct pylayout *l, uint64_t addr, char *out, size_t size)
{
	uint8_t h[80], data[PYCODE_NAME_MAX * 4];
	int err = read_exact(pid, addr, h, l->str_compact_data);
	if (err < 0)
		return err;
	uint64_t length = u64_at(h, l->str_length);
	uint32_t state = u32_at(h, l->str_state);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
		return -EINVAL;
	size_t chars = length < PYCODE_NAME_MAX ? (size_t)length : PYCODE_NAME_MAX;
	if ((err = read_exact(pid, addr + (ascii ? l->str_ascii_data : l->str_compact_data), data, chars * kind)) < 0)
		return err;
	size_t len = 0;
	for (size_t i = 0; i < chars; i++) {
		uint32_t cp = kind == 1 ? data[i] : kind == 2 ? (uint32_t)data[2 * i] | (uint32_t)data[2 * i + 1] << 8 :
								u32_at(data, (unsigned)(4 * i));
		if (!put_utf8(out, size, &len, cp))
			break;
	}
	out[len] = '\0';
	return 0;
}

static int read_bytes(pid_t pid, const struct pylayout *l, uint64_t addr, uint8_t **out, uint32_t *len)
{
	uint8_t h[64];
	int err = read_exact(pid, addr, h, l->bytes_data);
	if (err < 0)
		return err;
	uint64_t size = u64_at(h, l->bytes_size);
	if (size > PYCODE_LINETABLE_MAX)
		size = PYCODE_LINETABLE_MAX;	/* lines past it are unknown */
	*out = malloc(size ? size : 1);
	if (!*out)
		return -ENOMEM;
	if ((err = read_exact(pid, addr + l->bytes_data, *out, size)) < 0) {
		free(*out);
		return err;
	}
	*len = (uint32_t)size;
	return 0;
}

/* The module a file is: its name without .py (a package's: its directory's), a frozen module's own name. */
static void module_of(const char *file, char *out, size_t size)
{
	size_t n = strlen(file);
	if (strncmp(file, "<frozen ", 8) == 0 && n > 9 && file[n - 1] == '>') {
		snprintf(out, size, "%.*s", (int)(n - 9), file + 8);
		return;
	}
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	size_t bn = strlen(base);
	if (bn > 3 && strcmp(base + bn - 3, ".py") == 0)
		bn -= 3;
	if (bn == 8 && strncmp(base, "__init__", 8) == 0 && base > file + 1) {
		const char *end = base - 1, *dir = end;
		while (dir > file && dir[-1] != '/')
			dir--;
		snprintf(out, size, "%.*s", (int)(end - dir), dir);
		return;
	}
	snprintf(out, size, "%.*s", (int)bn, base);
}

/* The bytes of a code object's header that tell it apart (struct code_entry): [filename, linetable]. */
static unsigned sig_len(const struct pylayout *l)
{
	return l->code_linetable + 8u - l->code_filename;
}

static struct pycode *read_code(struct pyprocess *pp, uint64_t addr, uint8_t *sig)
{
	const struct pylayout *l = pp->l;
	uint8_t h[CODE_HEADER];
	char file[PYCODE_NAME_MAX * 4], qual[PYCODE_NAME_MAX * 4], module[PYCODE_NAME_MAX * 4];
	if (read_exact(pp->pid, addr, h, sizeof(h)) < 0 || u64_at(h, l->code_type) != pp->code_type)
		return NULL;	/* not a code object (the chain moved on, or was never one) */
	memcpy(sig, h + l->code_filename, sig_len(l));
	struct pycode *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->refs = 1;
	c->firstlineno = (int32_t)u32_at(h, l->code_firstlineno);
	if (read_str(pp->pid, l, u64_at(h, l->code_filename), file, sizeof(file)) < 0 ||
	    read_str(pp->pid, l, u64_at(h, l->code_qualname), qual, sizeof(qual)) < 0 ||
	    read_bytes(pp->pid, l, u64_at(h, l->code_linetable), &c->linetable, &c->linetable_len) < 0) {
		free(c);
		return NULL;
	}
	module_of(file, module, sizeof(module));
	size_t nlen = strlen(module) + strlen(qual) + 2;
	c->name = malloc(nlen);
	c->file = strdup(file);
	if (!c->name || !c->file) {
		pycode_release(c);
		return NULL;
	}
	snprintf(c->name, nlen, "%s.%s", module, qual);
	char text[sizeof(file) + sizeof(module) + sizeof(qual) + 16];
	int tn = snprintf(text, sizeof(text), "cpython%c%s%c%s", 0, c->file, 0, c->name);
	fileid_from_text(text, tn < 0 ? 0 : (size_t)tn < sizeof(text) ? (size_t)tn : sizeof(text) - 1, &c->file_id);
	return c;
}

static bool code_is(const void *ctx, uint64_t value, const void *key)
{
	(void)ctx;
	return ((const struct code_entry *)(uintptr_t)value)->addr == *(const uint64_t *)key;
}

/*
 * The code object at addr (a reference for the caller): read once per process, then known by its address, checked
 * by one small read of its header (struct code_entry's sig): code objects are freed (a module's body after it ran,
 * a lambda's) and their memory reused for others, which the address alone would name wrongly.
 */
static struct pycode *code_at(struct pyframes *m, struct pyprocess *pp, uint64_t addr)
{
	uint64_t h = hash_u64(HASH_SEED, addr), v;
	uint8_t sig[CODE_SIG_MAX];
	struct code_entry *e = NULL;
	if (hindex_find(&pp->codes, h, code_is, NULL, &addr, &v)) {
		e = (struct code_entry *)(uintptr_t)v;
		if (read_exact(pp->pid, addr + pp->l->code_filename, sig, sig_len(pp->l)) < 0)
			return NULL;
		if (memcmp(sig, e->sig, sig_len(pp->l)) == 0) {
			pycode_ref(e->code);
			return e->code;
		}
		m->stats.codes_replaced++;
	}
	struct pycode *c = read_code(pp, addr, sig);
	m->stats.codes++;
	if (!c) {
		m->stats.code_errors++;
		return NULL;
	}
	if (e) {		/* another code object at the address now */
		pycode_release(e->code);
		e->code = c;
		memcpy(e->sig, sig, sizeof(sig));
		pycode_ref(c);	/* the cache's */
		return c;
	}
	e = hindex_count(&pp->codes) < MAX_CODES_PER_PROCESS ? malloc(sizeof(*e)) : NULL;
	if (e) {
		e->addr = addr;
		e->code = c;
		memcpy(e->sig, sig, sizeof(sig));
		if (hindex_insert(&pp->codes, h, (uintptr_t)e) == 0)
			pycode_ref(c);	/* the cache's */
		else
			free(e);
	}
	return c;
}

/* The thread state of tid: the one found last time if it still is tid's, else looked for in every interpreter. */
static int find_tstate(struct pyprocess *pp, pid_t tid, uint64_t *out)
{
	const struct pylayout *l = pp->l;
	uint8_t b[TSTATE_HEADER];
	uint64_t v, interp, ts;
	unsigned need = l->ts_native_thread_id + 8u;
	if (hindex_u32_get(&pp->tstates, (uint32_t)tid, &v) && read_exact(pp->pid, v, b, need) == 0 &&
	    u64_at(b, l->ts_native_thread_id) == (uint64_t)tid) {
		*out = v;
		return 0;
	}
	int err = read_exact(pp->pid, pp->runtime + l->runtime_interp_head, &interp, 8);
	for (unsigned i = 0; err == 0 && interp && i < MAX_INTERPRETERS; i++) {
		if ((err = read_exact(pp->pid, interp + l->interp_threads_head, &ts, 8)) < 0)
			break;
		for (unsigned j = 0; ts && j < MAX_THREADS; j++) {
			if ((err = read_exact(pp->pid, ts, b, need)) < 0)
				return err;
			if (u64_at(b, l->ts_native_thread_id) == (uint64_t)tid) {
				hindex_u32_put(&pp->tstates, (uint32_t)tid, ts);	/* not kept: found again next time */
				*out = ts;
				return 0;
			}
			ts = u64_at(b, l->ts_next);
		}
		err = read_exact(pp->pid, interp + l->interp_next, &interp, 8);
	}
	return err < 0 ? err : -ENOENT;
}

static void release_frames(struct pyframe *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		pycode_release(f[i].code);
}

static int read_chain(struct pyframes *m, struct pyprocess *pp, pid_t tid, struct pyframe *out, unsigned max,
		      unsigned *n)
{
	const struct pylayout *l = pp->l;
	uint64_t ts, cframe, frame;
	uint8_t b[128];
	int err = find_tstate(pp, tid, &ts);
	if (err == 0)
		err = read_exact(pp->pid, ts + l->ts_cframe, &cframe, 8);
	if (err == 0)
		err = !cframe ? -ENOENT : l->no_cframe ? (frame = cframe, 0) :
			      read_exact(pp->pid, cframe + l->cframe_current_frame, &frame, 8);
	*n = 0;
	/* Each Python frame may have an eval loop's frame under it (3.12): at most twice max steps. */
	for (unsigned steps = 0; err == 0 && frame; steps++) {
		if (*n == max || steps == 2 * max) {
			err = -E2BIG;
			break;
		}
		if ((err = read_exact(pp->pid, frame, b, l->frame_size)) < 0)
			break;
		if (l->frame_owner && b[l->frame_owner] == l->owner_cstack) {
			/* 3.12: the eval loop's own frame, under its Python frames: the one above ends that loop. */
			if (*n)
				out[*n - 1].entry = true;
			frame = u64_at(b, l->frame_previous);
			continue;
		}
		uint64_t code_addr = u64_at(b, l->frame_code), prev_instr = u64_at(b, l->frame_prev_instr);
		struct pycode *c = code_at(m, pp, code_addr);
		if (!c) {
			err = -EFAULT;
			break;
		}
		/* prev_instr is the instruction running (or one before the first, not started yet): code units of 2. */
		uint64_t start = code_addr + l->code_code;
		uint64_t instr = prev_instr >= start ? (prev_instr - start) / 2 : 0;
		out[*n] = (struct pyframe){ .code = c, .line = pycode_line(c, instr > UINT32_MAX ? UINT32_MAX : (uint32_t)instr),
					    .entry = l->frame_is_entry && b[l->frame_is_entry] != 0 };
		(*n)++;
		frame = u64_at(b, l->frame_previous);
	}
	if (err < 0) {
		release_frames(out, *n);
		*n = 0;
	}
	return err;
}

int pyframes_read(struct pyframes *m, pid_t pid, pid_t tid, struct pyframe *out, unsigned max, unsigned *n)
{
	uint64_t v;
	int err = -ENOENT;
	*n = 0;
	if (max > PYFRAMES_MAX_FRAMES)
		max = PYFRAMES_MAX_FRAMES;
	pthread_mutex_lock(&m->lock);
	if (hindex_u32_get(&m->processes, (uint32_t)pid, &v) && ((struct pyprocess *)(uintptr_t)v)->info.python) {
		m->stats.reads++;
		err = read_chain(m, (struct pyprocess *)(uintptr_t)v, tid, out, max, n);
		m->stats.read_errors += err < 0;
	}
	pthread_mutex_unlock(&m->lock);
	return err;
}

/* --- finding the interpreter --- */

/* A mapping of CPython's executable or library: python3.X or libpython3.X.so... */
static bool python_file(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, "lib", 3) == 0)
		base += 3;
	return strncmp(base, "python3.", 8) == 0;
}

static int file_symbols(struct pyfile *f, struct process *p, const struct mapping *mp)
{
	struct symbolizer *s;
	uint64_t size, code_size;
	int fd = procmgr_open_mapping_file(p, mp);
	if (fd < 0)
		return fd;
	int err = symbolizer_open(mp->path, fd, &s);
	close(fd);
	if (err < 0)
		return err;
	f->found = symbolizer_find(s, "_PyRuntime", &f->runtime, &size) == 0 &&
		   symbolizer_find(s, "Py_Version", &f->version, &size) == 0 &&
		   symbolizer_find(s, "PyCode_Type", &f->code_type, &code_size) == 0 &&
		   symbolizer_find(s, "_PyEval_EvalFrameDefault", &f->eval, &f->eval_size) == 0;
	symbolizer_free(s);
	return 0;
}

static bool file_is(const void *ctx, uint64_t value, const void *key)
{
	(void)ctx;
	return ((const struct pyfile *)(uintptr_t)value)->exe == key;
}

static struct pyfile *known_file(struct pyframes *m, const struct execinfo *e)
{
	uint64_t v;
	return hindex_find(&m->files, hash_u64(HASH_SEED, (uintptr_t)e), file_is, NULL, e, &v) ?
		       (struct pyfile *)(uintptr_t)v : NULL;
}

/*
 * 3.13 and later describe their structures at the start of _PyRuntime (_Py_DebugOffsets, cookie "xdebugpy"): the
 * offsets read from there, checked for the cookie, the version, a build with the GIL and offsets that fit what is
 * read of each structure here. The fields' places are those of 3.13's struct (in 8-byte words from the runtime's
 * start), checked in 3.13.0; a later version whose struct differs is not read.
 */
enum {
	DO_VERSION = 1, DO_FREE_THREADED = 2, DO_INTERP_HEAD = 5, DO_INTERP_NEXT = 8, DO_THREADS_HEAD = 9,
	DO_TS_NEXT = 21, DO_TS_CURRENT_FRAME = 23, DO_TS_NATIVE_ID = 25, DO_FRAME_PREVIOUS = 29,
	DO_FRAME_EXECUTABLE = 30, DO_FRAME_INSTR = 31, DO_FRAME_LOCALSPLUS = 32, DO_FRAME_OWNER = 33,
	DO_CODE_FILENAME = 35, DO_CODE_QUALNAME = 37, DO_CODE_LINETABLE = 38, DO_CODE_FIRSTLINENO = 39,
	DO_CODE_ADAPTIVE = 43, DO_OB_TYPE = 45, DO_BYTES_SIZE = 65, DO_BYTES_DATA = 66, DO_STR_STATE = 68,
	DO_STR_LENGTH = 69, DO_STR_ASCII_SIZE = 70, DO_WORDS = 71,
};

static bool fits(uint64_t off, uint64_t width, uint64_t limit)
{
	return off <= limit && width <= limit - off;
}

static int debug_offsets(pid_t pid, uint64_t runtime, uint32_t version, struct pylayout *l)
{
	uint64_t w[DO_WORDS];
	int err = read_exact(pid, runtime, w, sizeof(w));
	if (err < 0)
		return err;
	if (memcmp(w, "xdebugpy", 8) != 0 || (uint32_t)w[DO_VERSION] >> 16 != version >> 16 || w[DO_FREE_THREADED])
		return -ENOTSUP;
	*l = (struct pylayout){
		.version = version >> 16, .runtime_interp_head = (uint16_t)w[DO_INTERP_HEAD],
		.interp_next = (uint16_t)w[DO_INTERP_NEXT], .interp_threads_head = (uint16_t)w[DO_THREADS_HEAD],
		.ts_next = (uint16_t)w[DO_TS_NEXT], .ts_native_thread_id = (uint16_t)w[DO_TS_NATIVE_ID],
		.ts_cframe = (uint16_t)w[DO_TS_CURRENT_FRAME], .no_cframe = true,
		.frame_code = (uint16_t)w[DO_FRAME_EXECUTABLE], .frame_previous = (uint16_t)w[DO_FRAME_PREVIOUS],
		.frame_prev_instr = (uint16_t)w[DO_FRAME_INSTR], .frame_size = (uint16_t)w[DO_FRAME_LOCALSPLUS],
		.frame_owner = (uint16_t)w[DO_FRAME_OWNER], .owner_cstack = 3,
		.code_type = (uint16_t)w[DO_OB_TYPE], .code_firstlineno = (uint16_t)w[DO_CODE_FIRSTLINENO],
		.code_filename = (uint16_t)w[DO_CODE_FILENAME], .code_qualname = (uint16_t)w[DO_CODE_QUALNAME],
		.code_linetable = (uint16_t)w[DO_CODE_LINETABLE], .code_code = (uint16_t)w[DO_CODE_ADAPTIVE],
		.str_length = (uint16_t)w[DO_STR_LENGTH], .str_state = (uint16_t)w[DO_STR_STATE],
		.str_ascii_data = (uint16_t)w[DO_STR_ASCII_SIZE],
		/* PyCompactUnicodeObject: PyASCIIObject, then utf8_length and utf8 */
		.str_compact_data = (uint16_t)(w[DO_STR_ASCII_SIZE] + 16),
		.bytes_size = (uint16_t)w[DO_BYTES_SIZE], .bytes_data = (uint16_t)w[DO_BYTES_DATA],
	};
	/* Each offset within what is read of its structure here (the buffers in this file), the code's names before
	 * its line table (the signature of struct code_entry), the 32-bit fields 4 bytes wide. */
	bool ok = fits(w[DO_INTERP_HEAD], 8, 4096) && fits(w[DO_INTERP_NEXT], 8, 65535) &&
		  fits(w[DO_THREADS_HEAD], 8, 65535) && w[DO_TS_NEXT] < w[DO_TS_NATIVE_ID] &&
		  fits(w[DO_TS_NATIVE_ID], 8, TSTATE_HEADER) && fits(w[DO_TS_CURRENT_FRAME], 8, 4096) &&
		  w[DO_FRAME_LOCALSPLUS] <= 128 && fits(w[DO_FRAME_EXECUTABLE], 8, w[DO_FRAME_LOCALSPLUS]) &&
		  fits(w[DO_FRAME_PREVIOUS], 8, w[DO_FRAME_LOCALSPLUS]) && fits(w[DO_FRAME_INSTR], 8, w[DO_FRAME_LOCALSPLUS]) &&
		  fits(w[DO_FRAME_OWNER], 1, w[DO_FRAME_LOCALSPLUS]) && fits(w[DO_OB_TYPE], 8, CODE_HEADER) &&
		  fits(w[DO_CODE_FIRSTLINENO], 4, CODE_HEADER) && fits(w[DO_CODE_FILENAME], 8, CODE_HEADER) &&
		  fits(w[DO_CODE_QUALNAME], 8, CODE_HEADER) && fits(w[DO_CODE_LINETABLE], 8, CODE_HEADER) &&
		  w[DO_CODE_FILENAME] < w[DO_CODE_LINETABLE] &&
		  w[DO_CODE_LINETABLE] + 8 - w[DO_CODE_FILENAME] <= CODE_SIG_MAX && fits(w[DO_CODE_ADAPTIVE], 0, 4096) &&
		  fits(w[DO_STR_LENGTH], 8, 80) && fits(w[DO_STR_STATE], 4, 80) && w[DO_STR_ASCII_SIZE] + 16 <= 80 &&
		  fits(w[DO_BYTES_SIZE], 8, 64) && w[DO_BYTES_DATA] <= 64;
	return ok ? 0 : -ENOTSUP;
}

/* Look at p's mappings for CPython's file and its version (pp->info). */
static int look_at(struct pyframes *m, struct procmgr *pm, struct process *p, struct pyprocess *pp)
{
	for (unsigned i = 0; i < p->nmaps; i++) {
		struct mapping *mp = &p->maps[i];
		if (!(mp->prot & PROT_EXEC) || mp->anon || !python_file(mp->path))
			continue;
		/* a file not at hand (a recording's, execinfo_acquire_unread()) has no symbols to find CPython by */
		if (!procmgr_mapping_exe(pm, p, mp) || execinfo_unread(mp->exe))
			continue;
		struct pyfile *f = known_file(m, mp->exe);
		if (!f) {
			f = calloc(1, sizeof(*f));
			if (!f)
				return -ENOMEM;
			int err = file_symbols(f, p, mp);
			if (err < 0 || hindex_insert(&m->files, hash_u64(HASH_SEED, (uintptr_t)mp->exe), (uintptr_t)f) < 0) {
				free(f);
				return err < 0 ? err : -ENOMEM;
			}
			f->exe = mp->exe;
			execinfo_ref(f->exe);
		}
		if (!f->found)
			continue;	/* python3.11's executable beside its library: the library has them */
		uint64_t version;
		int err = read_exact(p->pid, f->version + mp->bias, &version, 8);
		if (err < 0)
			return err;
		pp->info.version = (uint32_t)version;
		for (size_t r = 0; r < sizeof(layouts) / sizeof(layouts[0]); r++)
			if (layouts[r].version == (uint32_t)version >> 16)
				pp->l = &layouts[r];
		if ((uint32_t)version >> 16 == 0x030d && debug_offsets(p->pid, f->runtime + mp->bias, (uint32_t)version,
								  &pp->own) == 0)
			pp->l = &pp->own;
		pp->info.python = pp->l != NULL;
		pp->info.eval_exe = f->exe;
		pp->info.eval_start = f->eval;
		pp->info.eval_end = f->eval + f->eval_size;
		pp->runtime = f->runtime + mp->bias;
		pp->code_type = f->code_type + mp->bias;
		if (pp->info.python)
			m->stats.processes++;
		else
			m->stats.unsupported++;
		return 0;
	}
	return 0;
}

static void process_free(struct pyprocess *pp);

/* The processes found not CPython (their exits missed: lost records), and those that exited, go; they are looked
 * at again if sampled. */
static void forget_others(struct pyframes *m)
{
	uint64_t v;
	uint32_t pid;
	for (uint32_t pos = 0; hindex_u32_next(&m->processes, &pos, &pid, &v);) {
		struct pyprocess *pp = (struct pyprocess *)(uintptr_t)v;
		if ((!pp->info.python || pp->exited) && hindex_u32_del(&m->processes, pid))
			process_free(pp);	/* a removal marks its slot, moving no entry: the walk goes on */
	}
}

int pyframes_process(struct pyframes *m, struct procmgr *pm, struct process *p, struct pyproc *out)
{
	uint64_t v;
	int err = 0;
	pthread_mutex_lock(&m->lock);
	if (!hindex_u32_get(&m->processes, (uint32_t)p->pid, &v) && hindex_count(&m->processes) >= MAX_PROCESSES)
		forget_others(m);
	if (!hindex_u32_get(&m->processes, (uint32_t)p->pid, &v)) {
		struct pyprocess *pp = calloc(1, sizeof(*pp));
		/* A process that could not be looked at (its file or memory refused) is taken for no CPython: not
		 * looked at again on every sample. */
		if (pp && look_at(m, pm, p, pp) < 0)
			pp->info = (struct pyproc){ 0 };
		err = pp ? hindex_u32_put(&m->processes, (uint32_t)p->pid, (uintptr_t)pp) : -ENOMEM;
		if (err == 0) {
			pp->pid = p->pid;
			v = (uintptr_t)pp;
		} else {
			free(pp);
		}
	}
	if (err == 0)
		*out = ((struct pyprocess *)(uintptr_t)v)->info;
	pthread_mutex_unlock(&m->lock);
	return err;
}

bool pyframes_known_python(struct pyframes *m, pid_t pid)
{
	uint64_t v;
	pthread_mutex_lock(&m->lock);
	bool yes = hindex_u32_get(&m->processes, (uint32_t)pid, &v) && ((struct pyprocess *)(uintptr_t)v)->info.python;
	pthread_mutex_unlock(&m->lock);
	return yes;
}

/* What reading a process's frames keeps: its code objects and its threads' states. */
static void process_release_reads(struct pyprocess *pp)
{
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&pp->codes, &pos, &v);) {
		struct code_entry *e = (struct code_entry *)(uintptr_t)v;
		pycode_release(e->code);
		free(e);
	}
	hindex_free(&pp->codes);
	hindex_free(&pp->tstates);
	memset(&pp->codes, 0, sizeof(pp->codes));
	memset(&pp->tstates, 0, sizeof(pp->tstates));
}

static void process_free(struct pyprocess *pp)
{
	process_release_reads(pp);
	free(pp);
}

void pyframes_on_exit(struct pyframes *m, pid_t pid)
{
	uint64_t v;
	pthread_mutex_lock(&m->lock);
	if (hindex_u32_get(&m->processes, (uint32_t)pid, &v)) {
		struct pyprocess *pp = (struct pyprocess *)(uintptr_t)v;
		process_release_reads(pp);
		pp->exited = true;
	}
	pthread_mutex_unlock(&m->lock);
}

void pyframes_on_mapping(struct pyframes *m, pid_t pid)
{
	uint64_t v;
	pthread_mutex_lock(&m->lock);
	if (hindex_u32_get(&m->processes, (uint32_t)pid, &v) && !((struct pyprocess *)(uintptr_t)v)->info.python) {
		hindex_u32_del(&m->processes, (uint32_t)pid);
		process_free((struct pyprocess *)(uintptr_t)v);
	}
	pthread_mutex_unlock(&m->lock);
}

void pyframes_forget(struct pyframes *m, pid_t pid)
{
	uint64_t v;
	pthread_mutex_lock(&m->lock);
	if (hindex_u32_get(&m->processes, (uint32_t)pid, &v)) {
		hindex_u32_del(&m->processes, (uint32_t)pid);
		process_free((struct pyprocess *)(uintptr_t)v);
	}
	pthread_mutex_unlock(&m->lock);
}

int pyframes_new(struct execinfo_mgr *execinfo, struct pyframes **out)
{
	struct pyframes *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->execinfo = execinfo;
	int err = pthread_mutex_init(&m->lock, NULL);
	if (err) {
		free(m);
		return -err;
	}
	*out = m;
	return 0;
}

void pyframes_free(struct pyframes *m)
{
	uint64_t v;
	if (!m)
		return;
	for (uint32_t pos = 0; hindex_next(&m->processes, &pos, &v);)
		process_free((struct pyprocess *)(uintptr_t)v);
	hindex_free(&m->processes);
	for (uint32_t pos = 0; hindex_next(&m->files, &pos, &v);) {
		struct pyfile *f = (struct pyfile *)(uintptr_t)v;
		execinfo_release(m->execinfo, f->exe);
		free(f);
	}
	hindex_free(&m->files);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void pyframes_get_stats(struct pyframes *m, struct pyframes_stats *out)
{
	pthread_mutex_lock(&m->lock);
	*out = m->stats;
	pthread_mutex_unlock(&m->lock);
}
