/*
 * report.h — `hostprof report`: a run summary and views of a profile as text: the top functions, a call tree,
 * and either of them per thread.
 *
 * Rows are functions (a function name within a library), not lines or addresses (unless lines is set:
 * then a row is a function's line, the line a sample was taken at or the call was made from): self counts the samples whose
 * innermost frame is the function, total the samples with the function anywhere in the stack, counted once per
 * stack even under recursion. Inlined functions are functions of their own. Unsymbolized frames are rows named
 * "libname+0xADDR" (frame_name.h). Ordering is deterministic: by the sort key, then the other count, then name
 * and library.
 *
 * The call tree starts from the process names (comm), then the outermost frames; a node's Total% is the share
 * of samples passing through that path, Self% of those ending there. Nodes below percent_limit of the samples
 * are left out, with their subtrees. The tree shows tree_depth levels of frames below a process: where stacks
 * go deeper, one line "... N more levels" under the last node shown gives the share of the samples that go on
 * and the most levels they go on for. Guide lines are drawn for REPORT_TREE_INDENT_MAX levels; a node deeper
 * than that shows its level ("[70] `- name") where its guides would go on. So the output grows with the levels
 * shown, never with the square of a stack's depth, and no line is longer than the guides of
 * REPORT_TREE_INDENT_MAX levels and one name.
 *
 * Percentages are of the samples shown: all of them, those of --pid, or, per thread, the thread's own. With
 * off_cpu or wall, a stack weighs its time off CPU, or its wall time (CPU time, the samples' periods, plus time
 * off CPU), instead of its sample count, and the Self column shows milliseconds; wall starts with the table of
 * each thread's time on CPU, blocked and preempted (thread_times.h).
 *
 * Only reads p. Functions return 0, -ENOMEM, -EIO when writing to out fails, or -ESRCH when a pid filter
 * matches no sample.
 */
#ifndef HOSTPROF_REPORT_H
#define HOSTPROF_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "src/profile/profile.h"

enum report_sort {
	REPORT_SORT_SELF,
	REPORT_SORT_TOTAL,
};

struct report_options {
	unsigned limit;		/* rows to print (per table); 0 means REPORT_DEFAULT_LIMIT */
	enum report_sort sort;
	bool tree;		/* the call tree instead of the top-functions table */
	bool per_thread;	/* one table (or tree) per (pid, tid, thread name), busiest first */
	bool filter_pid;	/* only the samples of pid */
	int32_t pid;
	double percent_limit;	/* hide tree nodes under this share; < 0 means REPORT_DEFAULT_PERCENT_LIMIT */
	bool lines;		/* rows (and tree nodes) per source line: "function (file.c:LINE)" */
	bool addresses;		/* code without a function name: a row per address ("lib.so+0x1234"), not one per
				 * library ("[lib.so]") */
	bool no_inline;		/* inlined functions folded into the function they were inlined into: its row
				 * takes their samples (self included), as perf report counts them */
	bool wide;		/* the command's --wide: whole names on a terminal (width is then 0) */
	bool quiet;		/* the command's -q: no progress on stderr while the profiles are read */
	unsigned width;		/* the columns a line may take: longer names are cut, ending in "..." (a C++
				 * name runs to hundreds of characters); 0: whole names */
	bool off_cpu;		/* weigh stacks by time off CPU (profiles recorded with --off-cpu) */
	bool wall;		/* weigh stacks by wall time (CPU + off CPU), after a table of each thread's split */
	unsigned tree_depth;	/* levels of frames a tree shows below a process; 0 means REPORT_DEFAULT_TREE_DEPTH,
				 * at most REPORT_MAX_TREE_DEPTH */
};

#define REPORT_DEFAULT_LIMIT 20
#define REPORT_DEFAULT_PERCENT_LIMIT 0.5
/* Levels of frames a tree shows by default: most stacks whole (a deep Java or Go service stack runs to 60 or 100
 * frames), lines at most 3 x 64 characters of guides. The most a tree may show: a person reads no deeper, and
 * the printer recurses once per level. */
#define REPORT_DEFAULT_TREE_DEPTH 64
#define REPORT_MAX_TREE_DEPTH 4096
/* Levels of guide lines drawn left of a tree node; deeper nodes show their level instead. */
#define REPORT_TREE_INDENT_MAX 64

/* o may be NULL for the defaults (20 rows, by self, all samples, no tree). */
int report_print(const struct profile *p, FILE *out, const struct report_options *o);

/* One function of a profile with its sample counts, as a row of the top-functions table. Names and libraries are
 * escaped for a terminal (escape.h), as everything report_print() shows of a profile's strings is: they come
 * from the processes profiled. */
struct report_function {
	char *name;		/* "function (file.c)", or a frame name such as "libc.so.6+0x1234" */
	char *library;		/* basename of the file, "[kernel]", or "" */
	uint64_t self, total;
};

struct report_functions {
	struct report_function *items;	/* functions with total > 0, sorted by (name, library) */
	uint32_t count;
	uint64_t samples;	/* sum of all sample counts: the whole that self and total are shares of */
};

/* Every function of p with its counts over all samples. Free with report_functions_free(). */
int report_functions_get(const struct profile *p, struct report_functions *out);
/* The same weighed by value v (enum profile_value): samples is then the sum of v over all samples. */
int report_functions_get_value(const struct profile *p, enum profile_value v, struct report_functions *out);
void report_functions_free(struct report_functions *f);

#endif
