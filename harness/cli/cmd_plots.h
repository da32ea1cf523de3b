/* cmd_plots.h - `evictbench plots` and `evictbench tables` (harness/main.c
 * dispatches to them).  Same contract as commands.h: argv[0] is the
 * subcommand, the return value is the exit code. */
#ifndef EB_CMD_PLOTS_H
#define EB_CMD_PLOTS_H

int cmd_plots(int argc, char **argv);
int cmd_tables(int argc, char **argv);
/* cmd_report.c */
int cmd_report(int argc, char **argv);

#endif
