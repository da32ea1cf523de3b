/* cmd_exp.h - `evictbench exp` (a sweep from an experiment config) and
 * `evictbench run` (one point from flags).  Both take the arguments after the
 * subcommand name (argv[0] is the subcommand) and return the exit code:
 * 0 done (skipped and 'oom' points included), 1 a failure or some point
 * recorded 'error', 2 bad usage, 130 stopped by SIGINT after a batch. */
#ifndef EB_CMD_EXP_H
#define EB_CMD_EXP_H

int cmd_exp(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif
