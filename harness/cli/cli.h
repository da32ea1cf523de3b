/* cli.h - small helpers shared by the subcommands: error printing and option parsing. */
#ifndef EB_CLI_H
#define EB_CLI_H

/* Print "evictbench: <msg>" to stderr; returns 1 (the exit code). */
int cli_error(const char *msg);
int cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse a whole decimal integer / float option value; 0 on success, -1 (and an
 * error printed naming the option) otherwise. */
int cli_int(const char *opt, const char *val, long lo, long hi, long *out);
int cli_float(const char *opt, const char *val, double lo, double hi, double *out);

/* Value of option argv[*i] (advances *i); prints an error and returns NULL when missing. */
const char *cli_value(int argc, char **argv, int *i);

#endif
