/*
 * The man pages document every option: for each command, `hostprof CMD --help` and the command's section of the
 * man page (hostprof.1's ".SS CMD", hostprof-daemon.8's OPTIONS) list the same flags, short and long, with the
 * same default wherever either states one; and hostprof-daemon.8's CONFIG FILE section shows every config key
 * of the daemon's settings with its default. --help is generated from the settings table (src/cmd/settings.h),
 * so this holds the table and the man pages together. The comparison is also run on copies of the man pages with
 * an entry removed and a default changed, which it must catch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/cmd/daemon_config.h"
#include "src/cmd/options.h"
#include "tests/lib/testlib.h"

#define MAX_ENTRIES 64
#define MAX_TEXT 8192

/* One option as a document describes it: its flags ("-F", "--freq") and the default it states ("" for none). */
struct entry {
	char flags[4][48];
	int nflags;
	char def[128];
};

struct doc {
	struct entry e[MAX_ENTRIES];
	int n;
};

static bool is_flag(const char *t)
{
	return t[0] == '-' && (isalpha((unsigned char)t[1]) || (t[1] == '-' && isalpha((unsigned char)t[2])));
}

static bool is_help(const char *t)
{
	return !strcmp(t, "-h") || !strcmp(t, "--help");
}

/* Add the flags among the words of text to e (separators: space, comma, brackets, quotes). */
static void add_flags(struct entry *e, char *text)
{
	for (char *save = NULL, *t = strtok_r(text, " ,[]\"|", &save); t; t = strtok_r(NULL, " ,[]\"|", &save)) {
		if (is_flag(t) && !is_help(t) && e->nflags < 4)
			snprintf(e->flags[e->nflags++], sizeof(e->flags[0]), "%s", t);
	}
}

/* The value after the first "default" of text that states one ("Default 60s.", "(default 0.5;", "Default: the
 * contents of /etc/machine-id"), not "by default" or "the default". */
static void find_default(const char *text, char *out, size_t len)
{
	out[0] = '\0';
	for (const char *p = text; (p = strcasestr(p, "default")); p += 7) {
		if ((p > text && isalpha((unsigned char)p[-1])) || isalpha((unsigned char)p[7]))
			continue;
		if ((p - text >= 3 && !strncasecmp(p - 3, "by ", 3)) || (p - text >= 4 && !strncasecmp(p - 4, "the ", 4)))
			continue;
		const char *v = p + 7;
		v += strspn(v, ": ");
		if (!strncmp(v, "the contents of ", 16))
			v += 16;
		size_t n = 0;
		while (v[n] && v[n] != ' ' && v[n] != ',' && v[n] != ';' && v[n] != ')' &&
		       !(v[n] == '.' && (v[n + 1] == ' ' || !v[n + 1])))
			n++;
		snprintf(out, len, "%.*s", (int)n, v);
		if (n)
			return;
	}
}

/* `hostprof CMD --help`: option lines start with a flag indented by 2 to 6 spaces ("  -F, --freq HZ",
 * "      --max-stack BYTES"), their text goes on in lines indented further. */
static void read_help(const char *cmd, struct doc *d)
{
	char command[512], line[1024], text[MAX_TEXT] = "";
	snprintf(command, sizeof(command), "\"%s\" %s --help", test_hostprof(), cmd);
	FILE *f = popen(command, "r");
	assert_non_null(f);
	d->n = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		size_t indent = strspn(line, " ");
		if (indent >= 2 && indent <= 6 && line[indent] == '-') {
			if (d->n)
				find_default(text, d->e[d->n - 1].def, sizeof(d->e[0].def));
			assert_true(d->n < MAX_ENTRIES);
			struct entry *e = &d->e[d->n++];
			memset(e, 0, sizeof(*e));
			char *gap = strstr(line + indent, "  ");
			snprintf(text, sizeof(text), "%s", gap ? gap : "");
			if (gap)
				*gap = '\0';
			add_flags(e, line);
		} else if (d->n && line[0] == ' ') {
			strncat(text, line, sizeof(text) - strlen(text) - 1);
		}
	}
	if (d->n)
		find_default(text, d->e[d->n - 1].def, sizeof(d->e[0].def));
	assert_int_equal(pclose(f), 0);
}

/* A roff line as text: macro names dropped, the arguments of font-alternating macros (.BR, .IR, ...) joined,
 * font escapes and quotes removed. */
static void roff_text(const char *line, char *out, size_t len)
{
	bool alternate = line[0] == '.' && strlen(line) > 3 && line[3] == ' ' && strchr("BIR", line[1]) &&
			 strchr("BIR", line[2]);
	const char *p = line[0] == '.' ? line + strcspn(line, " ") : line;
	size_t n = 0;
	bool quoted = false;
	for (p += *p == ' '; *p && n + 1 < len; p++) {
		if (p[0] == '\\' && p[1] == 'f' && p[2]) {
			p += 2;
		} else if (p[0] == '\\' && (p[1] == '-' || p[1] == 'e')) {
			out[n++] = p[1] == '-' ? '-' : '\\';
			p++;
		} else if (*p == '"') {
			quoted = !quoted;
		} else if (!(alternate && *p == ' ' && !quoted)) {
			out[n++] = *p;
		}
	}
	out[n] = '\0';
}

static bool section_end(const char *line)
{
	return !strncmp(line, ".SH", 3) || !strncmp(line, ".SS", 3);
}

/* The entries of a man page section (from the line `start` to the next .SH or .SS): each ".TP" whose tag line
 * names flags, with the default its paragraph states. */
static void read_man(const char *path, const char *start, struct doc *d)
{
	char line[2048], text[MAX_TEXT] = "", piece[2048];
	FILE *f = fopen(path, "re");
	assert_non_null(f);
	bool in = false, tag = false;
	struct entry *cur = NULL;
	d->n = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		bool ends = in && (section_end(line) || !strcmp(line, ".TP") || !strcmp(line, ".PP"));
		if (ends && cur) {
			find_default(text, cur->def, sizeof(cur->def));
			cur = NULL;
		}
		if (section_end(line) && in)
			break;
		if (!strcmp(line, start)) {
			in = true;
			continue;
		}
		if (!in)
			continue;
		if (!strcmp(line, ".TP")) {
			tag = true;
			continue;
		}
		roff_text(line, piece, sizeof(piece));
		if (tag) {
			tag = false;
			struct entry e = { .nflags = 0 };
			add_flags(&e, piece);
			if (e.nflags) {
				assert_true(d->n < MAX_ENTRIES);
				d->e[d->n] = e;
				cur = &d->e[d->n++];
				text[0] = '\0';
			}
		} else if (cur) {
			strncat(text, " ", sizeof(text) - strlen(text) - 1);
			strncat(text, piece, sizeof(text) - strlen(text) - 1);
		}
	}
	fclose(f);
	assert_true(in);
}

static const struct entry *find_entry(const struct doc *d, const char *flag)
{
	for (int i = 0; i < d->n; i++)
		for (int k = 0; k < d->e[i].nflags; k++)
			if (!strcmp(d->e[i].flags[k], flag))
				return &d->e[i];
	return NULL;
}

/* Differences between --help and the man page, each printed; returns their number. */
static int compare_docs(const char *cmd, const struct doc *help, const struct doc *man)
{
	int bad = 0;
	for (int i = 0; i < help->n; i++) {
		const struct entry *h = &help->e[i], *m = NULL;
		for (int k = 0; k < h->nflags; k++) {
			const struct entry *mk = find_entry(man, h->flags[k]);
			if (!mk || (m && mk != m)) {
				fprintf(stderr, "%s: %s: in --help, not documented (with the flags it goes with)\n", cmd,
					h->flags[k]);
				bad++;
			}
			m = mk ? mk : m;
		}
		if (m && strcmp(h->def, m->def)) {
			fprintf(stderr, "%s: %s: default '%s' in --help, '%s' in the man page\n", cmd, h->flags[0],
				h->def, m->def);
			bad++;
		}
	}
	for (int i = 0; i < man->n; i++)
		for (int k = 0; k < man->e[i].nflags; k++)
			if (!find_entry(help, man->e[i].flags[k])) {
				fprintf(stderr, "%s: %s: documented, not in --help\n", cmd, man->e[i].flags[k]);
				bad++;
			}
	return bad;
}

static const struct {
	const char *cmd, *man, *section;
} pages[] = {
	{ "record", "man/hostprof.1", ".SS record" },  { "report", "man/hostprof.1", ".SS report" },
	{ "convert", "man/hostprof.1", ".SS convert" }, { "diff", "man/hostprof.1", ".SS diff" },
	{ "replay", "man/hostprof.1", ".SS replay" },   { "daemon", "man/hostprof-daemon.8", ".SH OPTIONS" },
};

/* All commands against man pages in dir (the repository's man/ or a changed copy); returns the differences. */
static int compare_all(const char *dir)
{
	static struct doc help, man;
	char path[600];
	int bad = 0;
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, strchr(pages[i].man, '/') + 1);
		read_help(pages[i].cmd, &help);
		read_man(path, pages[i].section, &man);
		assert_true(help.n > 0 && man.n > 0);
		bad += compare_docs(pages[i].cmd, &help, &man);
	}
	return bad;
}

static void test_help_and_man_pages_agree(void **state)
{
	(void)state;
	assert_int_equal(compare_all("man"), 0);
}

/* The daemon's CONFIG FILE section: a "key = default" line (or "# key = default") for every config key. */
static void test_config_keys_documented(void **state)
{
	(void)state;
	char line[1024], key[128], value[512];
	bool in = false;
	unsigned found = 0, keys = 0;
	FILE *f = fopen("man/hostprof-daemon.8", "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, ".SH", 3)) {
			in = !strcmp(line, ".SH CONFIG FILE\n");
			continue;
		}
		const char *p = line + (line[0] == '#' ? 2 : 0);
		size_t base;
		if (!in || sscanf(p, "%127s = %511s", key, value) != 2)
			continue;
		const struct setting *s = settings_find_key(&daemon_settings, key, &base);
		if (!s)
			fprintf(stderr, "daemon: CONFIG FILE shows '%s', not a config key\n", key);
		assert_non_null(s);
		/* the value the key takes by default (host-id's is no value: the line shows an example) */
		const char *def = s->type == SETTING_FLAG ? "false" : s->daemon_def ? s->daemon_def : s->def;
		if (def && strcmp(def, value))
			fprintf(stderr, "daemon: CONFIG FILE: %s = %s, the default is %s\n", key, value, def);
		assert_true(!def || !strcmp(def, value));
		found++;
	}
	fclose(f);
	for (size_t g = 0; g < daemon_settings.ngroups; g++)
		for (size_t i = 0; i < daemon_settings.groups[g].count; i++)
			keys += (daemon_settings.groups[g].items[i].flags & SETTING_CONFIG) != 0;
	assert_int_equal(found, keys);
	/* The config file `make install` puts in place is one the daemon reads. */
	struct daemon_config c;
	char err[512] = "";
	daemon_config_defaults(&c);
	assert_int_equal(daemon_config_load(&c, "src/hostprof.conf", err, sizeof(err)), 0);
}

/* The comparison fails on man pages that lost an entry or state another default. */
static void test_comparison_catches_changes(void **state)
{
	(void)state;
	char *dir = test_mkdtemp();
	/* record's --max-stack entry (its tag line and paragraph) removed */
	assert_int_equal(test_run("cp man/hostprof.1 man/hostprof-daemon.8 %s/ && awk '/^\\.BI --max-stack /"
				  "{skip=1; next} skip && /^\\.TP/{skip=0} !skip' man/hostprof.1 > %s/hostprof.1",
				  dir, dir),
			 0);
	assert_int_equal(test_run("! cmp -s man/hostprof.1 %s/hostprof.1", dir), 0);
	assert_true(compare_all(dir) > 0);
	/* the daemon's --forget-idle default changed */
	assert_int_equal(test_run("cp man/hostprof.1 %s/ && sed -i 's/Default 300s/Default 200s/' %s/hostprof-daemon.8",
				  dir, dir),
			 0);
	assert_int_equal(test_run("! cmp -s man/hostprof-daemon.8 %s/hostprof-daemon.8", dir), 0);
	assert_true(compare_all(dir) > 0);
	test_rmdir_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_help_and_man_pages_agree),
		cmocka_unit_test(test_config_keys_documented),
		cmocka_unit_test(test_comparison_catches_changes),
	};
	return cmocka_run_group_tests_name("cli docs", tests, NULL, NULL);
}
