/*
 * commands.h — the subcommands of the hostprof binary (`hostprof COMMAND ...`).
 *
 * Each takes the arguments after the command name (argv[0] is the command) and returns the process exit
 * status. They report errors on stderr as one line "hostprof: ...". The flags in cli_env are set asynchronously
 * by main.c's signal handlers; long-running commands poll them and clear reload and flush when handled.
 */
#ifndef HOSTPROF_CMD_COMMANDS_H
#define HOSTPROF_CMD_COMMANDS_H

#include <signal.h>

#define HOSTPROF_VERSION "0.1.0"

struct cli_env {
	volatile sig_atomic_t *stop;	/* SIGINT, SIGTERM */
	volatile sig_atomic_t *reload;	/* SIGHUP */
	volatile sig_atomic_t *flush;	/* SIGUSR1 */
};

int cmd_record(int argc, char **argv, const struct cli_env *env);
int cmd_report(int argc, char **argv, const struct cli_env *env);
int cmd_convert(int argc, char **argv, const struct cli_env *env);
int cmd_diff(int argc, char **argv, const struct cli_env *env);
int cmd_replay(int argc, char **argv, const struct cli_env *env);
int cmd_daemon(int argc, char **argv, const struct cli_env *env);

#endif
