/*
 * hotspot.h — a running JVM's code cache, read from its memory: which code blob a JIT address is in and how big
 * its frame is, so that compiled Java code is walked without frame pointers.
 *
 * Why: HotSpot's compiled code uses the frame pointer as a general register unless the JVM runs with
 * -XX:+PreserveFramePointer, and no unwind table describes it. But every code blob records its frame size, and
 * the JVM publishes where its own structures keep it: libjvm.so exports gHotSpotVMStructs and gHotSpotVMTypes,
 * tables of (type, field, offset or static address) and (type, size), with the strides and entry offsets
 * beside them (HOTSPOT_GLOBAL_*). hotspot_open() reads from the tables what it needs: CodeCache::_heaps, each
 * code heap's bounds, segment map and segment size, and CodeBlob's code range, frame size and frame-complete
 * offset. hotspot_frame() finds the blob holding an address as the JVM does: the segment map's byte for the
 * address's segment counts the segments back towards its block's first (0), 0xff marks a free segment; the
 * block's header says whether it is in use and how long; the blob follows it.
 *
 * A compiled frame's caller: CFA = SP + frame size (in words, return address included), the return address at
 * CFA - 8, the caller's frame pointer saved at CFA - 16 (the prologue pushed it). Past the blob's
 * frame-complete offset only: before it, in the prologue, CFA = SP + 8 as the code is entered (and SP + 16 once
 * the frame pointer is pushed: a shape the unwinder tries, as it tries an intrinsic's pushed word and an
 * epilogue where the code was sampled). A stub whose frame is never complete for the JVM (a runtime stub's
 * frame-complete offset is -1) has its frame size from its first instruction on, the leaf's shapes covering its
 * entry. A blob with no frame size (the interpreter, the call stub, stub routines) is walked by frame pointer,
 * and a leaf stub that pushes none by the shapes. The interpreter's caller's
 * SP is not where its frame ends, but saved at FP - 8: an adapter from compiled code pushed the arguments and
 * locals below it, and a compiled caller's frame size counts from it.
 *
 * Memory: read through the injected reader (unwind.h: unwind_memory), the live process. The JVM changes it
 * under the reader: every length is bounded (strings, entry counts, hops through the segment map), every
 * pointer is only read through the reader, and a blob is believed only when its fields agree (its code range
 * inside its block, the address inside its code, a frame under HOTSPOT_FRAME_MAX). What it gives is a rule the
 * unwinder still checks (the return address it finds must be in code). Blobs are freed and their space reused:
 * a frame found is cached per 64-byte line of code for HOTSPOT_CACHE_NS at most. Once the process is gone (the
 * reader says -ESRCH, or the caller says so: hotspot_process_gone) nothing is read any more, since another
 * process may get the pid, and the newest frame cached for an address's code is what its code was: a command's
 * last samples are walked after it exited.
 *
 * Ownership: hotspot_open() allocates, hotspot_free() frees; the reader must outlive the handle. Not
 * thread-safe. Errors are negative errnos: -ENOENT (not code the JVM knows, or no such table entry), -EAGAIN
 * (the JVM has not made its code heaps yet), -EINVAL (tables or a blob that make no sense), or the reader's.
 */
#ifndef HOSTPROF_PROCESSES_HOTSPOT_H
#define HOSTPROF_PROCESSES_HOTSPOT_H

#include <stdbool.h>
#include <stdint.h>

#include "unwind/unwind.h"

/* libjvm.so's exported globals hotspot_open() needs, by the index of their runtime address in its argument. */
enum hotspot_global {
	HOTSPOT_GLOBAL_STRUCTS,			/* gHotSpotVMStructs: the address of the first entry */
	HOTSPOT_GLOBAL_STRUCT_STRIDE,		/* gHotSpotVMStructEntryArrayStride */
	HOTSPOT_GLOBAL_STRUCT_TYPE_NAME,	/* gHotSpotVMStructEntryTypeNameOffset */
	HOTSPOT_GLOBAL_STRUCT_FIELD_NAME,	/* gHotSpotVMStructEntryFieldNameOffset */
	HOTSPOT_GLOBAL_STRUCT_OFFSET,		/* gHotSpotVMStructEntryOffsetOffset */
	HOTSPOT_GLOBAL_STRUCT_ADDRESS,		/* gHotSpotVMStructEntryAddressOffset */
	HOTSPOT_GLOBAL_TYPES,			/* gHotSpotVMTypes */
	HOTSPOT_GLOBAL_TYPE_STRIDE,		/* gHotSpotVMTypeEntryArrayStride */
	HOTSPOT_GLOBAL_TYPE_NAME,		/* gHotSpotVMTypeEntryTypeNameOffset */
	HOTSPOT_GLOBAL_TYPE_SIZE,		/* gHotSpotVMTypeEntrySizeOffset */
	HOTSPOT_NGLOBALS
};

/* Their names in libjvm.so's dynamic symbol table, by enum hotspot_global. */
extern const char *const hotspot_global_names[HOTSPOT_NGLOBALS];

/* Most stack one compiled frame may take (the unwinder's bound on a JIT frame). */
#define HOTSPOT_FRAME_MAX (1u << 20)
/* Where an interpreted frame keeps its Method: at FP minus this (x86-64's interpreter_frame_method_offset, -3 words,
 * in JDK 8 to 21). */
#define HOTSPOT_INTERPRETER_METHOD_AT 24
/* How long a frame found at an address is believed without reading its blob again. */
#define HOTSPOT_CACHE_NS 1000000000ULL

/* The code around an address, as far as one rule holds: [start, end), and that rule. */
struct hotspot_frame {
	uint64_t start, end;
	uint32_t cfa_sp;	/* CFA = SP + cfa_sp; 0: walked by frame pointer */
	bool fp_saved;		/* with cfa_sp: the caller's FP at CFA - 16 (else FP is the caller's) */
	bool sender_sp;		/* walked by frame pointer, the caller's SP saved at FP - 8, its Method at FP -
				 * HOTSPOT_INTERPRETER_METHOD_AT: the interpreter */
	bool leaf_shapes;	/* where sampled, the frame may be one word deeper, in a prologue or an epilogue */
	uint64_t blob;		/* the code blob (hotspot_blob_name) */
	uint64_t code_begin, code_end;	/* its code */
};

struct hotspot;

/* globals: the runtime addresses of HOTSPOT_GLOBAL_*. Returns 0 and *out, or a negative errno (above). */
int hotspot_open(const struct unwind_memory *mem, const uint64_t globals[HOTSPOT_NGLOBALS], struct hotspot **out);
void hotspot_free(struct hotspot *h);

/* The frame rule at addr, in the code cache as it is now (now_ns: CLOCK_MONOTONIC, for the cache). Returns 0 (from
 * the cache), 1 (read from the process just now: a blob the caller may not have met), -ENOENT (in no blob),
 * -EAGAIN (no code heap yet), -EINVAL or the reader's error. */
int hotspot_frame(struct hotspot *h, uint64_t addr, uint64_t now_ns, struct hotspot_frame *out);

/* The process exited (its exit was seen): hotspot_frame() answers from its cache alone, hotspot_blob_name() not. */
void hotspot_process_gone(struct hotspot *h);

/*
 * The name of the code blob a frame was found in (hotspot_frame): a compiled method's "package.Class.method"
 * (its class's name and its own, read through its Method, ConstMethod and constant pool), another blob's own
 * ("Interpreter", "StubRoutines (1)", "_new_instance_Java"). Into buf[0..len), NUL-terminated; returns its
 * length, -ENOENT when this JVM's structures do not say where a method's name is, -EINVAL, -ESRCH (the process is
 * gone), or the reader's error.
 * The text is the process's: the caller escapes it before it reaches a log.
 */
int hotspot_blob_name(struct hotspot *h, const struct hotspot_frame *frame, char *buf, size_t len);

/*
 * The name of the Method at method ("package.Class.method"), as hotspot_blob_name() names a compiled one: for an
 * interpreted frame, whose Method the interpreter keeps in the frame (HOTSPOT_INTERPRETER_METHOD_AT). The word is
 * the stack's: anything, believed only when every read on the way succeeds and the names are text.
 */
int hotspot_method_name(struct hotspot *h, uint64_t method, char *buf, size_t len);

#endif
