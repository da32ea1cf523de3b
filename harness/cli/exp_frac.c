/* exp_frac.c - `exp` with budgets given as fractions of FullKV's mean
 * generation length ("budgets": [0.25, 0.5]).  The sweep's slot budgets and
 * its FullKV points run first; then, per model and dataset slice, each
 * fraction becomes slots from the mean length FullKV's point recorded there,
 * and those points run as any others.  On another model (--model) the same
 * fractions give that model's slots.  (exp_common.h) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness/cli/cli.h"
#include "harness/cli/exp_common.h"
#include "harness/store/store.h"
#include "policies/registry.h"

static int take_number(void *ctx, int ncols, const char *const *names, const char *const *values)
{
    (void)names;
    if (ncols > 0 && values[0]) *(double *)ctx = strtod(values[0], NULL);
    return 1;
}

/* FullKV's mean generation length on the one model and dataset of sub: the
 * first of its FullKV points recorded 'ok' in db; 0 when none is (yet). */
static int fullkv_length(struct exp_config *sub, const struct exp_common *c, double *len,
                         struct eb_err *e)
{
    *len = 0;
    struct exp_policy keep[64];
    int n = 0;
    for (int i = 0; i < sub->n_policies && n < 64; i++)
        if (policy_named_keeps_all(sub->policies[i].name, sub->policies[i].params))
            keep[n++] = sub->policies[i];
    if (n == 0)
        return eb_fail(e, "%s: budgets given as fractions of FullKV's length need fullkv among "
                          "the policies", sub->source);
    struct exp_config only = *sub;
    only.policies = keep;
    only.n_policies = n;
    struct sweep sw;
    if (sweep_expand(&only, c->data_dir, &sw, e)) return -1;
    struct store *st = NULL;
    int rc = 0;
    if (access(c->db, F_OK) == 0 && store_open_readonly(c->db, &st, e)) rc = -1;
    for (int i = 0; st && rc == 0 && i < sw.n && *len <= 0; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT mean_gen_tokens FROM runs WHERE status = 'ok' AND "
                 "run_key = '%s' AND mean_gen_tokens > 0", sw.pts[i].run_key);
        rc = store_query(st, sql, take_number, len, e);
    }
    store_close(st);
    sweep_free(&sw);
    return rc;
}

/* The fractions on one model and dataset: resolved and run, or (dry run,
 * FullKV not yet recorded) said so. */
static int run_slice(struct exp_config *cfg, int m, int d, const struct exp_common *c)
{
    struct eb_err e = {0};
    struct exp_config sub = *cfg;
    sub.models = &cfg->models[m];
    sub.n_models = 1;
    sub.datasets = &cfg->datasets[d];
    sub.n_datasets = 1;
    double len;
    if (fullkv_length(&sub, c, &len, &e)) return cli_error(e.msg);
    char fr[256];
    int k = 0;
    for (int i = 0; i < cfg->n_budget_fracs && k < (int)sizeof fr - 16; i++)
        k += snprintf(fr + k, sizeof fr - k, "%s%g", i ? ", " : "", cfg->budget_fracs[i]);
    if (len <= 0) {
        if (!c->dry_run)
            return cli_errorf("exp: FullKV on %s / %s has no finished run to take the budgets "
                              "%s from", cfg->models[m], cfg->datasets[d].name, fr);
        printf("budgets %s of FullKV's mean length on %s / %s: listed once its FullKV point has "
               "run\n", fr, cfg->models[m], cfg->datasets[d].name);
        return 0;
    }
    int64_t *slots = calloc((size_t)cfg->n_budget_fracs, sizeof *slots);
    if (!slots) return cli_error("out of memory");
    sub.budgets = slots;
    sub.n_budgets = exp_config_resolve_fracs(cfg, len, slots);
    sub.budget_fracs = NULL;
    sub.n_budget_fracs = 0;
    char sl[256];
    k = 0;
    for (int i = 0; i < sub.n_budgets && k < (int)sizeof sl - 24; i++)
        k += snprintf(sl + k, sizeof sl - k, "%s%lld", i ? ", " : "", (long long)slots[i]);
    if (c->dry_run)
        printf("budgets %s of FullKV's mean length %.1f on %s / %s: %s slots\n", fr, len,
               cfg->models[m], cfg->datasets[d].name, sl);
    else
        fprintf(stderr, "%s: budgets %s of FullKV's mean length %.1f on %s / %s: %s slots\n",
                cfg->name, fr, len, cfg->models[m], cfg->datasets[d].name, sl);
    struct sweep sw;
    int rc = sweep_expand(&sub, c->data_dir, &sw, &e) ? cli_error(e.msg) : exp_run_sweep(&sub, &sw, c);
    free(slots);
    return rc;
}

int exp_run_fractions(struct exp_config *cfg, struct sweep *first, const struct exp_common *c)
{
    if (c->shard_count) {
        sweep_free(first);
        return cli_error("exp: budgets given as fractions of FullKV's length need FullKV's result "
                         "first; run this config without --shard");
    }
    int rc = exp_run_sweep(cfg, first, c);
    for (int m = 0; rc == 0 && m < cfg->n_models; m++)
        for (int d = 0; rc == 0 && d < cfg->n_datasets; d++) rc = run_slice(cfg, m, d, c);
    return rc;
}
