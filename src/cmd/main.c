/*
 * main.c — the hostprof binary: the table of commands, dispatch to them, and the process-wide signal state.
 *
 * This is the only file with mutable global state: the flags the signal handlers set.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "src/cmd/commands.h"

static volatile sig_atomic_t stop_requested, reload_requested, flush_requested;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload_requested = 1;
	else if (sig == SIGUSR1)
		flush_requested = 1;
	else
		stop_requested = 1;
}

static void install_signal_handlers(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The commands, in the order `hostprof --help` lists them (git's cmd_struct, in hostprof's terms). */
static const struct command {
	const char *name;
	int (*run)(int argc, char **argv, const struct cli_env *env);
	const char *summary;
	/* A reader of its output that goes away (`| head`) ends it quietly, by SIGPIPE, as it does other tools;
	 * record and the daemon ignore SIGPIPE (sockets to APM agents and collectors report EPIPE instead). */
	bool pipe_ends_it;
} commands[] = {
	{ "record", cmd_record, "profile a command, processes (-p) or the whole system (-a)", false },
	{ "daemon", cmd_daemon, "profile the whole system continuously into a directory of profiles", false },
	{ "report", cmd_report, "show the top functions of a profile", true },
	{ "convert", cmd_convert, "convert a profile (--to pprof, otlp, speedscope or collapsed)", true },
	{ "diff", cmd_diff, "compare two profiles; exit status 1 when a function regressed", true },
	{ "replay", cmd_replay, "unwind the samples of a replay file again (--compare, --bench)", true },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
	fprintf(out, "usage: hostprof COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'hostprof COMMAND --help' and 'man hostprof' tell more.\n");
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	struct cli_env env = { .stop = &stop_requested, .reload = &reload_requested, .flush = &flush_requested };

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *name = argv[1];
	if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
		printf("hostprof %s\n", HOSTPROF_VERSION);
		return 0;
	}
	const struct command *cmd = find_command(name);
	if (!cmd) {
		fprintf(stderr, "hostprof: unknown command '%s' (try 'hostprof --help')\n", name);
		return 2;
	}
	install_signal_handlers();
	if (cmd->pipe_ends_it)
		signal(SIGPIPE, SIG_DFL);
	return cmd->run(argc - 1, argv + 1, &env);
}
