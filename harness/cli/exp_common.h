/* exp_common.h - what `exp` (cmd_exp.c) and `run` (cmd_run.c) share: the
 * options both take and running a sweep into the results store.  Private to
 * harness/cli/. */
#ifndef EB_EXP_COMMON_H
#define EB_EXP_COMMON_H

#include "harness/exp/config.h"
#include "harness/exp/sweep.h"

struct exp_common {
    const char *db, *data_dir;
    long threads, mem_limit_mb;
    const char *device;             /* --device; NULL: cpu */
    int dry_run, quiet;
    int shard_index, shard_count;   /* exp --shard I/N; 0: the whole sweep */
};

/* The options' help lines. */
extern const char EXP_COMMON_HELP[];

/* 1 when argv[*i] was a common option (its value consumed), 0 if not, -1 on
 * a bad value (message printed). */
int exp_common_option(int argc, char **argv, int *i, struct exp_common *c);

/* Run (or with --dry-run, list) the points of s not yet in the store, and
 * print the summary; takes s (frees it).  The exit code of exp/run. */
int exp_run_sweep(struct exp_config *cfg, struct sweep *s, const struct exp_common *c);

/* Run a config whose budgets include fractions of FullKV's mean generation
 * length: first (its slot budgets and FullKV), then the fractions resolved
 * per model and dataset slice (exp_frac.c); takes first. */
int exp_run_fractions(struct exp_config *cfg, struct sweep *first, const struct exp_common *c);

#endif
