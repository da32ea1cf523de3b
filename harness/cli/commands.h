/* commands.h - the evictbench subcommands.  Each takes the arguments after the
 * subcommand name (argv[0] is the subcommand) and returns the process exit code.
 * Errors are printed as one line "evictbench: <what failed>: <why>". */
#ifndef EB_COMMANDS_H
#define EB_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

#endif
