/*
 * python_stack.c — native and Python frames merged. See python_stack.h for the contract.
 */
#include "src/pipeline/python_stack.h"

bool python_stack_is_eval(const struct pyproc *pp, const struct trace_frame *f)
{
	return f->kind == PROFILE_FRAME_NATIVE && f->exe && f->exe == pp->eval_exe && f->address >= pp->eval_start &&
	       f->address < pp->eval_end;
}

unsigned python_stack_merge(const struct pyproc *pp, const struct trace_frame *in, unsigned n,
			    const struct pyframe *py, unsigned npy, struct trace_frame *out, unsigned max,
			    unsigned *evals)
{
	unsigned k = 0, m = 0;
	bool ok = true;
	*evals = 0;
	for (unsigned i = 0; i < n && ok; i++) {
		if (!python_stack_is_eval(pp, &in[i])) {
			if (m == max)
				return 0;
			out[m] = in[i];
			out[m++].py = NULL;
			continue;
		}
		(*evals)++;
		bool entry = false;
		/* This eval loop's frames: up to and with the next entry frame. */
		while (k < npy && !entry) {
			if (m == max)
				return 0;
			out[m++] = (struct trace_frame){ .py = py[k].code, .address = (uint64_t)(py[k].line > 0 ? py[k].line : 0),
							 .kind = PROFILE_FRAME_PYTHON };
			entry = py[k++].entry;
		}
		ok = entry;
	}
	return ok && k == npy && *evals ? m : 0;
}
