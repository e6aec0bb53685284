/*
 * diff.h — `hostprof diff`: which functions take a larger or smaller share of the samples in one profile (new)
 * than in another (base), for regression checks in CI.
 *
 * Functions are matched by name and library, as report.h names them. For each, the self and total (inclusive)
 * shares are percentages of its own profile's samples, so profiles of different lengths or rates compare; a
 * delta is new - base in percentage points. The regression signal is the growth of the total share: a
 * function whose own code or whose callees got slower grows there, while work merely moved into a callee
 * (self share shifts, total stays) does not count. The callers of a slower function grow with it; the self
 * column tells which one does the work.
 *
 * Shares add up to 100%, so one function growing makes the others shrink: diff says where the time went,
 * not how long the program took. Sampling noise: a share measured over n samples varies by about
 * 100 * sqrt(p(1-p)/n) points; diff_noise() is the worst-case 95% bound for the difference of two shares,
 * which a threshold should stay well above. Shares of time (diff_compute_value()) compare the same way; the
 * noise bound is then not printed (a time is not a sample count).
 *
 * Only reads the profiles. Functions return 0, -ENOMEM, or -EIO when writing to out fails.
 */
#ifndef HOSTPROF_DIFF_H
#define HOSTPROF_DIFF_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "src/profile/profile.h"
#include "src/profile/report.h"

#define DIFF_DEFAULT_THRESHOLD 5.0
#define DIFF_DEFAULT_LIMIT 20

struct diff_row {
	const char *name, *library;	/* owned by the diff */
	double base_self, base_total;	/* percent of base's samples; 0 when base lacks the function */
	double new_self, new_total;	/* percent of new's samples */
};

struct diff {
	struct diff_row *rows;	/* every function of either profile, biggest |total delta| first */
	uint32_t count;
	uint64_t base_samples, new_samples;	/* the sums of value over each profile's samples */
	enum profile_value value;	/* what shares are of: samples (the default), CPU, off-CPU or wall time */
	struct report_functions base, new;	/* own the names */
};

struct diff_options {
	double threshold;	/* percentage points of total share; growth above it is a regression */
	unsigned limit;		/* rows to print; 0 means DIFF_DEFAULT_LIMIT */
	const char *base_name, *new_name;	/* shown in the header; NULL: "base", "new" */
	int value;		/* enum profile_value the shares are of (the command's --value) */
	char html[PATH_MAX];	/* the command's --html: where to write a differential flame graph; "": none */
};

int diff_compute(const struct profile *base, const struct profile *new, struct diff *d);
/* The same with shares of value v (enum profile_value): where the CPU, off-CPU or wall time went. */
int diff_compute_value(const struct profile *base, const struct profile *new, enum profile_value v,
		       struct diff *d);
void diff_free(struct diff *d);

/* The rows whose total share grew by more than threshold points (the regressions). */
uint32_t diff_regressions(const struct diff *d, double threshold);

/* Worst-case 95% sampling noise of a share difference, in percentage points. */
double diff_noise(uint64_t base_samples, uint64_t new_samples);

/* Header, the table of the biggest changes, and a verdict line ("FAIL: ..." or "OK: ..."). */
int diff_print(const struct diff *d, FILE *out, const struct diff_options *o);
/* The verdict alone, as diff_print() ends: an empty line, then "FAIL: ..." or "OK: ..." and a line break. */
void diff_print_verdict(const struct diff *d, FILE *out, double threshold);

#endif
