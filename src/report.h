/*
 * report.h — `hostprof report`: a run summary and the top functions of a profile, as text.
 *
 * Rows are functions (a function name within a library), not lines or addresses: self counts the samples whose
 * innermost frame is the function, total the samples with the function anywhere in the stack, counted once per
 * stack even under recursion. Inlined functions are functions of their own. Unsymbolized frames are rows named
 * "libname+0xADDR" (frame_name.h). Ordering is deterministic: by the sort key, then the other count, then name
 * and library.
 *
 * report_print() only reads p. Returns 0, -ENOMEM, or -EIO when writing to out fails.
 */
#ifndef HOSTPROF_REPORT_H
#define HOSTPROF_REPORT_H

#include <stdio.h>

#include "src/profile.h"

enum report_sort {
	REPORT_SORT_SELF,
	REPORT_SORT_TOTAL,
};

struct report_options {
	unsigned limit;		/* rows to print; 0 means REPORT_DEFAULT_LIMIT */
	enum report_sort sort;
};

#define REPORT_DEFAULT_LIMIT 20

/* o may be NULL for the defaults (20 rows, by self). */
int report_print(const struct profile *p, FILE *out, const struct report_options *o);

#endif
