/* config_budget.c - a config's "budgets": KV slots (integers >= 1) and
 * fractions of FullKV's mean generation length (numbers in (0, 1)), which
 * cmd_exp resolves per model and dataset slice once FullKV's point has run
 * (config.h). */
#include "harness/exp/config.h"

#include <math.h>
#include <stdlib.h>

int exp_config_parse_budgets(const cJSON *v, const char *source, struct exp_config *cfg,
                             struct eb_err *e)
{
    int cnt = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (cJSON_IsArray(v) && cnt == 0) return eb_fail(e, "%s: $.budgets: expected a non-empty list", source);
    if (!cJSON_IsArray(v) && !cJSON_IsNumber(v))
        return eb_fail(e, "%s: $.budgets: expected a number or a list of numbers", source);
    cfg->budgets = calloc((size_t)cnt, sizeof *cfg->budgets);
    cfg->budget_fracs = calloc((size_t)cnt, sizeof *cfg->budget_fracs);
    if (!cfg->budgets || !cfg->budget_fracs) return eb_fail(e, "%s: $.budgets: out of memory", source);
    for (int i = 0; i < cnt; i++) {
        const cJSON *x = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : v;
        double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        int whole = isfinite(d) && d == floor(d) && d >= 1 && d <= 1e9;
        if (!whole && !(d > 0 && d < 1))
            return eb_fail(e, "%s: $.budgets[%d]: expected KV slots (an integer >= 1) or a fraction of "
                              "FullKV's mean generation length (a number in (0, 1))", source, i);
        for (int j = 0; j < cfg->n_budgets; j++)
            if (whole && cfg->budgets[j] == (int64_t)d)
                return eb_fail(e, "%s: $.budgets[%d]: duplicate value", source, i);
        for (int j = 0; j < cfg->n_budget_fracs; j++)
            if (!whole && cfg->budget_fracs[j] == d)
                return eb_fail(e, "%s: $.budgets[%d]: duplicate value", source, i);
        if (whole) cfg->budgets[cfg->n_budgets++] = (int64_t)d;
        else cfg->budget_fracs[cfg->n_budget_fracs++] = d;
    }
    return 0;
}

int exp_config_resolve_fracs(const struct exp_config *cfg, double fullkv_len, int64_t *out)
{
    int n = 0;
    for (int i = 0; i < cfg->n_budget_fracs; i++) {
        int64_t b = (int64_t)llround(cfg->budget_fracs[i] * fullkv_len);
        if (b < 1) b = 1;
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= out[j] == b;
        if (!dup) out[n++] = b;
    }
    return n;
}
