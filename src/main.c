/*
 * main.c — the hostprof binary: dispatch to subcommands, and the process-wide signal state.
 *
 * This is the only file with mutable global state: the flag the signal handlers set.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "src/commands.h"

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void install_signal_handlers(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: hostprof COMMAND [ARGS]\n"
		"\n"
		"commands:\n"
		"  record   profile a command, processes (-p) or the whole system (-a)\n"
		"  report   show the top functions of a profile\n"
		"  convert  convert a profile (--to collapsed)\n"
		"  replay   unwind the samples of a replay file again (--compare, --bench)\n"
		"\n"
		"'hostprof COMMAND --help' and 'man hostprof' tell more.\n");
}

int main(int argc, char **argv)
{
	struct cli_env env = { .stop = &stop_requested };

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
	if (strcmp(cmd, "report") == 0)
		return cmd_report(argc - 1, argv + 1, &env);
	if (strcmp(cmd, "convert") == 0)
		return cmd_convert(argc - 1, argv + 1, &env);
	fprintf(stderr, "hostprof: unknown command '%s' (try 'hostprof --help')\n", cmd);
	return 2;
}
