/*
 * args.h — parsing option values of `report`, `convert` and `diff`.
 *
 * Each parses the whole of s as the value of flag (named in the message) into *out and returns true, or prints
 * "hostprof: invalid FLAG 'S' (what it must be)" on stderr and returns false, leaving *out alone.
 */
#ifndef HOSTPROF_CMD_ARGS_H
#define HOSTPROF_CMD_ARGS_H

#include <stdbool.h>
#include <stdint.h>

bool args_unsigned(const char *flag, const char *s, unsigned *out);	/* a decimal number from 1 to UINT_MAX */
bool args_percent(const char *flag, const char *s, double *out);	/* a number from 0 to 100 */
bool args_pid(const char *flag, const char *s, int32_t *out);		/* a decimal process ID, 0 to INT32_MAX */

#endif
