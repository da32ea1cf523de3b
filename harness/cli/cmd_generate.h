/* cmd_generate.h - `evictbench generate` and `evictbench bench` (harness/main.c
 * dispatches to them).  Same contract as commands.h: argv[0] is the subcommand,
 * the return value is the exit code. */
#ifndef EB_CMD_GENERATE_H
#define EB_CMD_GENERATE_H

int cmd_generate(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* bench --contexts / --max-batch (cmd_bench_long.c). */
int cmd_bench_long(int argc, char **argv);

#endif
