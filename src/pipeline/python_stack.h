/*
 * python_stack.h — mixed stacks: a CPython sample's native frames with its Python frames in place.
 *
 * A thread running Python shows _PyEval_EvalFrameDefault on its native stack once per entry into the interpreter
 * (pyframes.h). Each such frame stands for the Python frames from the innermost one not yet placed out to the next
 * entry frame of the chain read from the process; they replace it where it is, innermost first, and the native
 * frames above and below (C extensions, the interpreter's own C code, the kernel) stay.
 *
 * A stack is merged only when the two agree: every eval frame finds its Python frames ending in an entry frame,
 * and no Python frame is left over. Otherwise (the chain was read after the thread moved on, or mid-call) the
 * native frames are kept as they are and the caller counts the sample as "Python frames not trusted": never a
 * stack the program was not in.
 *
 * Pure functions over the caller's arrays: no state, no allocation, thread-safe.
 */
#ifndef HOSTPROF_PYTHON_STACK_H
#define HOSTPROF_PYTHON_STACK_H

#include "src/pipeline/traces.h"
#include "src/processes/pyframes.h"

/*
 * Merge: in[0..n) a walked trace (kernel frames, user frames, perhaps an error frame), py[0..npy) the thread's
 * Python frames, innermost first. Writes at most max frames to out and returns how many, each Python frame holding
 * no reference of its own (the trace handler takes its own: traces_add_linked()); 0 when they disagree or the
 * merged stack would not fit (out is then undefined), and the caller keeps in. *evals: the eval frames in.
 */
unsigned python_stack_merge(const struct pyproc *pp, const struct trace_frame *in, unsigned n,
			    const struct pyframe *py, unsigned npy, struct trace_frame *out, unsigned max,
			    unsigned *evals);

/* Whether f is a frame of pp's _PyEval_EvalFrameDefault. */
bool python_stack_is_eval(const struct pyproc *pp, const struct trace_frame *f);

#endif
