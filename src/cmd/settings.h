/*
 * settings.h — command-line options and daemon config keys, declared once as tables of settings.
 *
 * A setting is a row of a table (src/cmd/settings_table.c holds every command's): its long name (which is also
 * its daemon config key), short flag, type, range, default, help text and the field of the options struct it
 * fills. From a command's table this module builds getopt_long's option array and option string, prints
 * `--help`, applies the defaults, and parses values given on the command line or in the daemon's config file
 * through one parser per type, so that a flag and a key of the same setting take the same values and fail with
 * the same explanation.
 *
 * Values (one parser per type, setting_parse()):
 *   FLAG      no value on the command line (sets the field; "no-" settings clear it); in a config file true,
 *             yes, on, 1 or false, no, off, 0
 *   UNSIGNED  a decimal number in [min, max]
 *   SIZE      bytes: a decimal number with an optional K, M or G suffix (powers of 1024; k and g too), in
 *             [min, max], a multiple of `multiple` when set
 *   DURATION  whole seconds: 90, 90s, 2m30s, 1h, in [min, max]
 *   SECONDS   a decimal number of seconds > 0, fractions allowed (a double field)
 *   PERCENT   a decimal number from 0 to 100 (a double field)
 *   STRING    text, copied into a char array field (at most its size - 1 bytes); empty only with
 *             SETTING_MAY_BE_EMPTY
 *   ENUM      one of `names`: the field (an int or enum) gets its index
 *   PID       a process ID, 0 to INT32_MAX (an int32_t field)
 *   PIDS      process IDs > 0 separated by commas, appended to a struct setting_pids field
 *   STRINGS   text, once per value: each time given (flag or key) appended to a struct setting_strings field
 *             (at most SETTING_MAX_STRINGS values of at most SETTING_STRING_MAX - 1 bytes)
 * Numbers are digits only: no sign, no spaces, no hexadecimal. Unsigned fields are 1, 4 or 8 bytes wide as the
 * table says (`size`); FLAG fields are int or bool.
 *
 * Errors: the functions that parse print nothing themselves but settings_parse_args(), which prints one line
 * "hostprof: invalid --NAME 'VALUE' (WHAT IS ALLOWED)" on stderr; the others put the explanation in a caller's
 * buffer. No allocation, no global state but getopt's own (optind).
 */
#ifndef HOSTPROF_CMD_SETTINGS_H
#define HOSTPROF_CMD_SETTINGS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum setting_type {
	SETTING_FLAG,
	SETTING_UNSIGNED,
	SETTING_SIZE,
	SETTING_DURATION,
	SETTING_SECONDS,
	SETTING_PERCENT,
	SETTING_STRING,
	SETTING_ENUM,
	SETTING_PID,
	SETTING_PIDS,
	SETTING_STRINGS,
};

enum setting_flags {
	SETTING_NEGATE = 1 << 0,	/* FLAG: giving it clears the field ("no-apm" turns apm off) */
	SETTING_CONFIG = 1 << 1,	/* also a key of the daemon's config file */
	SETTING_MAY_BE_EMPTY = 1 << 2,	/* STRING: "" is a value */
};

#define SETTING_MAX_PIDS 1024

struct setting_pids {
	unsigned n;
	int32_t pids[SETTING_MAX_PIDS];
};

#define SETTING_MAX_STRINGS 16
#define SETTING_STRING_MAX 1024

struct setting_strings {
	unsigned n;
	char v[SETTING_MAX_STRINGS][SETTING_STRING_MAX];
};

struct setting {
	const char *name;		/* long option without the dashes; the config key when SETTING_CONFIG */
	char short_flag;		/* 0: none */
	enum setting_type type;
	unsigned flags;			/* enum setting_flags */
	size_t offset, size;		/* of the field in the options struct (offsetof, sizeof) */
	uint64_t min, max;		/* UNSIGNED, SIZE, DURATION */
	unsigned multiple;		/* SIZE: the value must be a multiple of it (0: any) */
	const char *const *names;	/* ENUM: NULL-terminated */
	int (*check)(const char *value);	/* STRING: further validation (0 or -EINVAL), or NULL */
	const char *check_what;		/* STRING with check: what is allowed, for the error */
	const char *arg;		/* the value's name in --help ("HZ"); NULL for FLAG */
	const char *def;		/* the default, parsed like a given value; NULL: the field stays zero */
	const char *def_shown;		/* shown as the default instead of def (a default that is not a value) */
	const char *daemon_def;		/* the daemon's default when it differs from record's */
	const char *help;		/* one line, no default in it: --help appends "(default ...)" */
	size_t given;			/* offset of a bool set when the option is given, or 0 for none */
};

/* A table of settings and where its fields are: at `base` in the options struct of the command. */
struct setting_group {
	const struct setting *items;
	size_t count;
	size_t base;
};

/* A command's settings: groups of them, in the order --help lists them. */
struct command_settings {
	const char *command;		/* "record" */
	const char *usage;		/* the synopsis lines --help prints first, each ending in \n */
	const char *footer;		/* printed after the options, or NULL */
	int daemon;			/* the daemon: settings' daemon_def replaces their def */
	int stop_at_operand;		/* options end at the first operand (record's command) */
	const struct setting_group *groups;
	size_t ngroups;
};

/* The most options one command may have (getopt's array is built on the stack). */
#define SETTINGS_MAX_OPTIONS 48

/*
 * Parse value as setting s into its field at `field`. Returns 0, or -EINVAL with a short description of what s
 * allows in why (e.g. "a whole number from 1 to 100000"); the field is then unchanged (PIDS: the pids before the
 * bad one are kept).
 */
int setting_parse(const struct setting *s, const char *value, void *field, char *why, size_t whylen);

/* What s allows, as setting_parse() explains a refused value. */
void setting_describe(const struct setting *s, char *why, size_t whylen);

/* The default of s for this command as --help shows it; NULL for none, and for every FLAG. */
const char *setting_default(const struct command_settings *c, const struct setting *s);

/* Zero *fields (of fields_size bytes) and apply every setting's default. Returns 0, or -EINVAL when a
 * default of the table does not parse (a bug in the table, described in why). */
int settings_defaults(const struct command_settings *c, void *fields, size_t fields_size, char *why,
		      size_t whylen);

/* The setting named key that is a config key (SETTING_CONFIG), and the base of its group; NULL if none. */
const struct setting *settings_find_key(const struct command_settings *c, const char *key, size_t *base);

/*
 * Parse the options of argv (argv[0] is the command) into fields with getopt_long, after the defaults were
 * applied. Returns 0 with *first_operand the index of the first operand, 1 when --help was printed on stdout,
 * or -EINVAL after a one-line error on stderr (an unknown option, a missing or invalid value).
 */
int settings_parse_args(const struct command_settings *c, int argc, char **argv, void *fields,
			int *first_operand);

/* settings_defaults() into fields (fields_size bytes), then settings_parse_args(): what a command does. */
int settings_parse_command(const struct command_settings *c, int argc, char **argv, void *fields,
			   size_t fields_size, int *first_operand);

/* The usage, every option with its help and default, and the footer. */
void settings_usage(const struct command_settings *c, FILE *out);

/* Whether any setting of group g differs between two option structs (compared field by field). */
int settings_differ(const struct setting_group *g, const void *a, const void *b);

/* Building getopt's tables, apart for the tests: longopts gets one entry per setting plus --help and the
 * terminator (val 256 + the setting's index in c's groups, or its short flag), optstring the short flags.
 * Returns the number of settings, or -E2BIG. */
int settings_getopt_tables(const struct command_settings *c, struct option *longopts, size_t nlongopts,
			   char *optstring, size_t optlen);

/* The setting getopt_long returned val for (by the tables above), and the base of its group; NULL if none. */
const struct setting *settings_from_getopt(const struct command_settings *c, int val, size_t *base);

#endif
