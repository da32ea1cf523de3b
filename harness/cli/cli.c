#include "harness/cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int cli_error(const char *msg)
{
    fprintf(stderr, "evictbench: %s\n", msg);
    return 1;
}

int cli_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("evictbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_int(const char *opt, const char *val, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        cli_errorf("%s: expected an integer in [%ld, %ld], got '%s'", opt, lo, hi, val);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_float(const char *opt, const char *val, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || !isfinite(v) || v < lo || v > hi) {
        cli_errorf("%s: expected a number in [%g, %g], got '%s'", opt, lo, hi, val);
        return -1;
    }
    *out = v;
    return 0;
}

const char *cli_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        cli_errorf("%s: missing value", argv[*i]);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}
