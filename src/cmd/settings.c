/*
 * settings.c — the value parsers, getopt tables, --help and defaults built from settings tables. See settings.h.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/cmd/settings.h"

#define USAGE_WIDTH 110	/* --help wraps its lines here */

/* Leading decimal digits of v into *out; *end after them. No digit, or more than 64 bits: -EINVAL. */
static int parse_digits(const char *v, const char **end, uint64_t *out)
{
	uint64_t x = 0;
	const char *p = v;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	if (p == v)
		return -EINVAL;
	*end = p;
	*out = x;
	return 0;
}

static int parse_size(const char *v, uint64_t *out)
{
	static const char suffixes[] = "kKmMgG";
	const char *end;
	uint64_t x;
	if (parse_digits(v, &end, &x) < 0)
		return -EINVAL;
	if (!*end) {
		*out = x;
		return 0;
	}
	const char *s = end[1] ? NULL : strchr(suffixes, *end);
	if (!s)
		return -EINVAL;
	unsigned shift = 10 * (unsigned)(1 + (s - suffixes) / 2);
	if (x > UINT64_MAX >> shift)
		return -EINVAL;
	*out = x << shift;
	return 0;
}

/* Whole seconds as "90", "90s", "2m30s" or "1h". */
static int parse_duration(const char *v, uint64_t *out)
{
	uint64_t total = 0, x;
	const char *p = v, *end;
	if (!*v)
		return -EINVAL;
	while (*p) {
		if (parse_digits(p, &end, &x) < 0 || x > UINT32_MAX)
			return -EINVAL;
		if (!*end) {
			if (p != v)
				return -EINVAL; /* "2m30": 30 what? */
			total = x;
			break;
		}
		uint64_t unit = *end == 'h' ? 3600 : *end == 'm' ? 60 : *end == 's' ? 1 : 0;
		if (!unit)
			return -EINVAL;
		total += x * unit;
		p = end + 1;
	}
	*out = total;
	return 0;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false", "no", "off", "0" };
	for (size_t i = 0; i < 4; i++) {
		if (!strcmp(v, yes[i]) || !strcmp(v, no[i])) {
			*out = !strcmp(v, yes[i]);
			return 0;
		}
	}
	return -EINVAL;
}

/* A decimal number with optional fraction: digits first (no sign, no space), finite. */
static int parse_decimal(const char *v, double *out)
{
	char *end;
	if (!((*v >= '0' && *v <= '9') || *v == '.'))
		return -EINVAL;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || *end || !isfinite(x))
		return -EINVAL;
	*out = x;
	return 0;
}

static void store_uint(void *field, size_t size, uint64_t x)
{
	if (size == 1)
		*(uint8_t *)field = (uint8_t)x;
	else if (size == 4)
		*(uint32_t *)field = (uint32_t)x;
	else
		*(uint64_t *)field = x;
}

/* UNSIGNED, SIZE and DURATION: parse, then check the range (and SIZE's multiple). */
static int parse_ranged(const struct setting *s, const char *value, void *field)
{
	uint64_t x;
	const char *end;
	int err = s->type == SETTING_SIZE	 ? parse_size(value, &x)
		  : s->type == SETTING_DURATION ? parse_duration(value, &x)
		  : parse_digits(value, &end, &x) < 0 || *end ? -EINVAL
							      : 0;
	if (err < 0 || x < s->min || x > s->max || (s->multiple && x % s->multiple))
		return -EINVAL;
	store_uint(field, s->size, x);
	return 0;
}

static int parse_string(const struct setting *s, const char *value, void *field)
{
	size_t n = strlen(value);
	if ((!n && !(s->flags & SETTING_MAY_BE_EMPTY)) || n >= s->size || (s->check && s->check(value) < 0))
		return -EINVAL;
	memset(field, 0, s->size); /* a whole field, so that settings_differ() can compare its bytes */
	memcpy(field, value, n);
	return 0;
}

static int parse_enum(const struct setting *s, const char *value, void *field)
{
	for (int i = 0; s->names[i]; i++) {
		if (!strcmp(value, s->names[i])) {
			*(int *)field = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Comma-separated pids > 0, appended. */
static int parse_pids(const char *value, struct setting_pids *out)
{
	const char *p = value, *end;
	uint64_t x;
	do {
		if (parse_digits(p, &end, &x) < 0 || x == 0 || x > INT32_MAX || (*end && *end != ','))
			return -EINVAL;
		if (out->n == SETTING_MAX_PIDS)
			return -E2BIG;
		out->pids[out->n++] = (int32_t)x;
		p = end + 1;
	} while (*end);
	return 0;
}

/* One more value, appended. */
static int parse_strings(const char *value, struct setting_strings *out)
{
	size_t len = strlen(value);
	if (!len || len >= SETTING_STRING_MAX)
		return -EINVAL;
	if (out->n == SETTING_MAX_STRINGS)
		return -E2BIG;
	memcpy(out->v[out->n++], value, len + 1);
	return 0;
}

static int parse_value(const struct setting *s, const char *value, void *field)
{
	double d;
	bool b;
	uint64_t x;
	const char *end;
	switch (s->type) {
	case SETTING_FLAG:
		if (parse_bool(value, &b) < 0)
			return -EINVAL;
		store_uint(field, s->size, (s->flags & SETTING_NEGATE) ? !b : b);
		return 0;
	case SETTING_UNSIGNED:
	case SETTING_SIZE:
	case SETTING_DURATION:
		return parse_ranged(s, value, field);
	case SETTING_SECONDS:
	case SETTING_PERCENT:
		if (parse_decimal(value, &d) < 0 || (s->type == SETTING_SECONDS ? d <= 0 : d > 100))
			return -EINVAL;
		*(double *)field = d;
		return 0;
	case SETTING_STRING:
		return parse_string(s, value, field);
	case SETTING_ENUM:
		return parse_enum(s, value, field);
	case SETTING_PID:
		if (parse_digits(value, &end, &x) < 0 || *end || x > INT32_MAX)
			return -EINVAL;
		*(int32_t *)field = (int32_t)x;
		return 0;
	case SETTING_PIDS:
		return parse_pids(value, field);
	case SETTING_STRINGS:
		return parse_strings(value, field);
	}
	return -EINVAL;
}

int setting_parse(const struct setting *s, const char *value, void *field, char *why, size_t whylen)
{
	int err = parse_value(s, value, field);
	if (err == -E2BIG && s->type == SETTING_STRINGS)
		snprintf(why, whylen, "given at most %d times", SETTING_MAX_STRINGS);
	else if (err == -E2BIG)
		snprintf(why, whylen, "at most %d process IDs", SETTING_MAX_PIDS);
	else if (err < 0)
		setting_describe(s, why, whylen);
	return err < 0 ? -EINVAL : 0;
}

static void describe_names(const char *const *names, char *why, size_t whylen)
{
	size_t n = 0, len = 0;
	while (names[n])
		n++;
	why[0] = '\0';
	for (size_t i = 0; i < n && len < whylen; i++) {
		const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
		int w = snprintf(why + len, whylen - len, "%s%s", sep, names[i]);
		len += w > 0 ? (size_t)w : 0;
	}
}

void setting_describe(const struct setting *s, char *why, size_t whylen)
{
	static const char *const fixed[] = {
		[SETTING_FLAG] = "true or false (yes or no, on or off, 1 or 0)",
		[SETTING_SECONDS] = "seconds > 0",
		[SETTING_PERCENT] = "a percentage from 0 to 100",
		[SETTING_PID] = "a process ID",
		[SETTING_PIDS] = "process IDs separated by commas",
		[SETTING_STRINGS] = "text of 1 to 1023 bytes, once per value",
	};
	unsigned long long lo = s->min, hi = s->max;
	if (s->type == SETTING_UNSIGNED)
		snprintf(why, whylen, "a whole number from %llu to %llu", lo, hi);
	else if (s->type == SETTING_SIZE)
		snprintf(why, whylen, "bytes from %llu to %llu%s%.0u, an optional K, M or G suffix", lo, hi,
			 s->multiple ? ", a multiple of " : "", s->multiple);
	else if (s->type == SETTING_DURATION)
		snprintf(why, whylen, "seconds from %llu to %llu, as 90, 90s, 2m30s or 1h", lo, hi);
	else if (s->type == SETTING_STRING && s->check_what)
		snprintf(why, whylen, "%s", s->check_what);
	else if (s->type == SETTING_STRING)
		snprintf(why, whylen, "text of %s%zu bytes", s->flags & SETTING_MAY_BE_EMPTY ? "0 to " : "1 to ",
			 s->size - 1);
	else if (s->type == SETTING_ENUM)
		describe_names(s->names, why, whylen);
	else
		snprintf(why, whylen, "%s", fixed[s->type]);
}

const char *setting_default(const struct command_settings *c, const struct setting *s)
{
	if (s->type == SETTING_FLAG)
		return NULL; /* a flag's default is not giving it */
	if (s->def_shown)
		return s->def_shown;
	return c->daemon && s->daemon_def ? s->daemon_def : s->def;
}

int settings_defaults(const struct command_settings *c, void *fields, size_t fields_size, char *why,
		      size_t whylen)
{
	memset(fields, 0, fields_size);
	for (size_t g = 0; g < c->ngroups; g++) {
		for (size_t i = 0; i < c->groups[g].count; i++) {
			const struct setting *s = &c->groups[g].items[i];
			const char *def = c->daemon && s->daemon_def ? s->daemon_def : s->def;
			char *field = (char *)fields + c->groups[g].base + s->offset;
			if (def && setting_parse(s, def, field, why, whylen) < 0)
				return -EINVAL;
		}
	}
	return 0;
}

const struct setting *settings_find_key(const struct command_settings *c, const char *key, size_t *base)
{
	for (size_t g = 0; g < c->ngroups; g++) {
		for (size_t i = 0; i < c->groups[g].count; i++) {
			const struct setting *s = &c->groups[g].items[i];
			if ((s->flags & SETTING_CONFIG) && !strcmp(s->name, key)) {
				*base = c->groups[g].base;
				return s;
			}
		}
	}
	return NULL;
}

/* The index-th setting of c over all its groups, or NULL. */
static const struct setting *nth_setting(const struct command_settings *c, size_t index, size_t *base)
{
	for (size_t g = 0; g < c->ngroups; g++) {
		if (index < c->groups[g].count) {
			*base = c->groups[g].base;
			return &c->groups[g].items[index];
		}
		index -= c->groups[g].count;
	}
	return NULL;
}

int settings_getopt_tables(const struct command_settings *c, struct option *longopts, size_t nlongopts,
			   char *optstring, size_t optlen)
{
	size_t n = 0, len = 0, base;
	const struct setting *s;
	if (optlen < 4)
		return -E2BIG;
	if (c->stop_at_operand)
		optstring[len++] = '+';
	optstring[len++] = ':'; /* a missing value returns ':', told apart from an unknown option */
	for (; (s = nth_setting(c, n, &base)); n++) {
		if (n + 2 > nlongopts || len + 4 > optlen)
			return -E2BIG;
		int has_arg = s->type == SETTING_FLAG ? no_argument : required_argument;
		longopts[n] = (struct option){ s->name, has_arg, NULL, s->short_flag ? s->short_flag : 256 + (int)n };
		if (s->short_flag) {
			optstring[len++] = s->short_flag;
			if (has_arg)
				optstring[len++] = ':';
		}
	}
	longopts[n] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[n + 1] = (struct option){ NULL, 0, NULL, 0 };
	optstring[len++] = 'h';
	optstring[len] = '\0';
	return (int)n;
}

const struct setting *settings_from_getopt(const struct command_settings *c, int val, size_t *base)
{
	const struct setting *s;
	for (size_t n = 0; (s = nth_setting(c, n, base)); n++) {
		if (val == (s->short_flag ? s->short_flag : 256 + (int)n))
			return s;
	}
	return NULL;
}

/* The option getopt_long refused, named as given. */
static int option_error(const struct command_settings *c, char **argv, int val)
{
	size_t base;
	const struct setting *s = settings_from_getopt(c, optopt, &base);
	if (val == ':' && s)
		fprintf(stderr, "hostprof: --%s needs a value (%s)\n", s->name, s->arg ? s->arg : "");
	else if (s && !strncmp(argv[optind - 1], "--", 2))
		fprintf(stderr, "hostprof: --%s takes no value\n", s->name); /* "--no-apm=1" */
	else if (optopt && optopt < 256)
		fprintf(stderr, "hostprof: %s: unknown option '-%c' (try 'hostprof %s --help')\n", c->command,
			optopt, c->command);
	else
		fprintf(stderr, "hostprof: %s: unknown option '%s' (try 'hostprof %s --help')\n", c->command,
			argv[optind - 1], c->command);
	return -EINVAL;
}

static int apply_option(const struct command_settings *c, int val, const char *arg, void *fields)
{
	size_t base;
	char why[256];
	const struct setting *s = settings_from_getopt(c, val, &base);
	char *field = (char *)fields + base + s->offset;
	if (s->type == SETTING_FLAG)
		store_uint(field, s->size, !(s->flags & SETTING_NEGATE));
	else if (setting_parse(s, arg, field, why, sizeof(why)) < 0) {
		fprintf(stderr, "hostprof: invalid --%s '%s' (%s)\n", s->name, arg, why);
		return -EINVAL;
	}
	if (s->given)
		*(bool *)((char *)fields + base + s->given) = true;
	return 0;
}

int settings_parse_args(const struct command_settings *c, int argc, char **argv, void *fields,
			int *first_operand)
{
	struct option longopts[SETTINGS_MAX_OPTIONS + 2];
	char optstring[3 * SETTINGS_MAX_OPTIONS + 4];
	int val, err = 0;
	if (settings_getopt_tables(c, longopts, SETTINGS_MAX_OPTIONS + 2, optstring, sizeof(optstring)) < 0) {
		fprintf(stderr, "hostprof: %s: too many options\n", c->command);
		return -EINVAL;
	}
	optind = 0; /* glibc: start over, this argv may not be the last one parsed */
	opterr = 0;
	while (err == 0 && (val = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		if (val == 'h') {
			settings_usage(c, stdout);
			return 1;
		}
		err = val == '?' || val == ':' ? option_error(c, argv, val) : apply_option(c, val, optarg, fields);
	}
	*first_operand = optind;
	return err;
}

int settings_parse_command(const struct command_settings *c, int argc, char **argv, void *fields,
			   size_t fields_size, int *first_operand)
{
	char why[256];
	if (settings_defaults(c, fields, fields_size, why, sizeof(why)) < 0) {
		fprintf(stderr, "hostprof: %s: a default does not parse: %s\n", c->command, why);
		return -EINVAL;
	}
	return settings_parse_args(c, argc, argv, fields, first_operand);
}

/* "  -F, --freq HZ" or "      --max-stack BYTES" into buf; returns its length. */
static int option_label(const struct setting *s, char *buf, size_t len)
{
	char shortf[8] = "    ";
	if (s->short_flag)
		snprintf(shortf, sizeof(shortf), "-%c, ", s->short_flag);
	return snprintf(buf, len, "  %s--%s%s%s", shortf, s->name, s->arg ? " " : "", s->arg ? s->arg : "");
}

/* text from column col on, wrapped at USAGE_WIDTH, continuation lines indented to col. */
static void print_wrapped(FILE *out, const char *text, int col)
{
	int at = col;
	while (*text) {
		size_t w = strcspn(text, " ");
		if (at > col && at + 1 + (int)w > USAGE_WIDTH) {
			fprintf(out, "\n%*s", col, "");
			at = col;
		} else if (at > col) {
			fputc(' ', out);
			at++;
		}
		fprintf(out, "%.*s", (int)w, text);
		at += (int)w;
		text += w;
		text += strspn(text, " ");
	}
	fputc('\n', out);
}

void settings_usage(const struct command_settings *c, FILE *out)
{
	char label[96], text[512];
	int col = 0;
	size_t base;
	const struct setting *s;
	for (size_t n = 0; (s = nth_setting(c, n, &base)); n++) {
		int w = option_label(s, label, sizeof(label));
		col = w > col ? w : col;
	}
	col += 2;
	fprintf(out, "%s\n", c->usage);
	for (size_t n = 0; (s = nth_setting(c, n, &base)); n++) {
		const char *def = setting_default(c, s);
		int w = option_label(s, label, sizeof(label));
		snprintf(text, sizeof(text), "%s%s%s%s", s->help, def ? " (default " : "", def ? def : "",
			 def ? ")" : "");
		fprintf(out, "%s%*s", label, col - w, "");
		print_wrapped(out, text, col);
	}
	if (c->footer)
		fprintf(out, "%s", c->footer);
}

int settings_differ(const struct setting_group *g, const void *a, const void *b)
{
	for (size_t i = 0; i < g->count; i++) {
		size_t at = g->base + g->items[i].offset;
		if (memcmp((const char *)a + at, (const char *)b + at, g->items[i].size))
			return 1;
	}
	return 0;
}
