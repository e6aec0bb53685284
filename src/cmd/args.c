/*
 * args.c — option values of the profile-reading commands. See args.h.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/cmd/args.h"

bool args_unsigned(const char *flag, const char *s, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > UINT_MAX || s[0] == '-') {
		fprintf(stderr, "hostprof: invalid %s '%s' (a number > 0)\n", flag, s);
		return false;
	}
	*out = (unsigned)v;
	return true;
}

bool args_percent(const char *flag, const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 100) {
		fprintf(stderr, "hostprof: invalid %s '%s' (a percentage from 0 to 100)\n", flag, s);
		return false;
	}
	*out = v;
	return true;
}

bool args_pid(const char *flag, const char *s, int32_t *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT32_MAX) {
		fprintf(stderr, "hostprof: invalid %s '%s' (a process ID)\n", flag, s);
		return false;
	}
	*out = (int32_t)v;
	return true;
}
