/*
 * main.c — the hostprof binary: dispatch to subcommands, and the process-wide signal state.
 *
 * This is the only file with mutable global state: the flags the signal handlers set.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "src/commands.h"

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

static void usage(FILE *out)
{
	fprintf(out,
		"usage: hostprof COMMAND [ARGS]\n"
		"\n"
		"commands:\n"
		"  record   profile a command, processes (-p) or the whole system (-a)\n"
		"  daemon   profile the whole system continuously into a directory of profiles\n"
		"  report   show the top functions of a profile\n"
		"  convert  convert a profile (--to pprof, speedscope or collapsed)\n"
		"  diff     compare two profiles; exit status 1 when a function regressed\n"
		"  replay   unwind the samples of a replay file again (--compare, --bench)\n"
		"\n"
		"'hostprof COMMAND --help' and 'man hostprof' tell more.\n");
}

int main(int argc, char **argv)
{
	struct cli_env env = { .stop = &stop_requested, .reload = &reload_requested, .flush = &flush_requested };

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("hostprof %s\n", HOSTPROF_VERSION);
		return 0;
	}
	install_signal_handlers();
	if (strcmp(cmd, "record") == 0)
		return cmd_record(argc - 1, argv + 1, &env);
	if (strcmp(cmd, "daemon") == 0)
		return cmd_daemon(argc - 1, argv + 1, &env);
	if (strcmp(cmd, "report") == 0)
		return cmd_report(argc - 1, argv + 1, &env);
	if (strcmp(cmd, "convert") == 0)
		return cmd_convert(argc - 1, argv + 1, &env);
	if (strcmp(cmd, "replay") == 0)
		return cmd_replay(argc - 1, argv + 1, &env);
	if (strcmp(cmd, "diff") == 0)
		return cmd_diff(argc - 1, argv + 1, &env);
	fprintf(stderr, "hostprof: unknown command '%s' (try 'hostprof --help')\n", cmd);
	return 2;
}
