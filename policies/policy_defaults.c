/* policy_defaults.c - the lookup of per-model policy defaults: which model
 * and dataset family a run belongs to, and the values the loaded file
 * (policy_defaults_file.c) gives it, filled into its typed parameters
 * (see policy_defaults.h). */
#include "policy_defaults.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../util/repo_file.h"
#include "param_parse.h"
#include "policy_defaults_file.h"

const char *policy_defaults_family(const char *dataset)
{
    if (!dataset) return NULL;
    const char *d = eb_base_name(dataset);
    if (!strncasecmp(d, "math", 4)) return "math";   /* math500, math_train_1000, ... */
    if (!strncasecmp(d, "aime", 4)) return "aime";
    if (!strncasecmp(d, "gsm8k", 5)) return "gsm8k";
    if (!strncasecmp(d, "livecodebench", 13)) return "code";
    return NULL;
}

void policy_defaults_model_key(const char *model, policy_model_name_fn model_name, char *out,
                               size_t cap)
{
    if (cap == 0) return;
    out[0] = '\0';
    if (!model) return;
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", model);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    const char *base = eb_base_name(buf);
    if (model_name && model_name(buf, out, cap) == 0) return;
    snprintf(out, cap, "%s", base);
    n = strlen(out);
    if (n > 5 && !strcasecmp(out + n - 5, ".gguf")) out[n - 5] = '\0';
    for (char *c = out; *c; c++) *c = (char)tolower((unsigned char)*c);
}

/* The entry of table whose budget is nearest to budget (a tie: the
 * smaller), or NULL. */
static const cJSON *nearest_budget(const cJSON *table, int64_t budget)
{
    const cJSON *best = NULL, *it;
    int64_t best_b = 0, best_dist = 0;
    cJSON_ArrayForEach(it, table) {
        int64_t b;
        if (it->string[0] == '_' || defaults_budget_key(it->string, &b)) continue;
        int64_t dist = b > budget ? b - budget : budget - b;
        if (!best || dist < best_dist || (dist == best_dist && b < best_b)) {
            best = it;
            best_b = b;
            best_dist = dist;
        }
    }
    return best;
}

/* key = v where en has key and neither the user nor the preset set it (an
 * earlier level's default is replaced). */
static int fill(const struct policy_entry *en, struct policy_params *p, const char *key,
                const cJSON *v, struct eb_err *e)
{
    int i = policy_param_index(p, key);
    if (i < 0 || (p->from[i] != PARAM_FROM_TABLE && p->from[i] != PARAM_FROM_DEFAULTS)) return 0;
    return param_set_json(en->name, p, PARAM_FROM_DEFAULTS, key, v, e);
}

/* The plain parameters of obj (no comments, families or tables). */
static int fill_level(const struct policy_entry *en, struct policy_params *p, const cJSON *obj,
                      struct eb_err *e)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        if (it->string[0] == '_' || cJSON_IsObject(it)) continue;
        if (fill(en, p, it->string, it, e)) return -1;
    }
    return 0;
}

/* The levels in order, each overriding the one before: model, dataset
 * family, the family's tau_by_budget (tau) and by_budget at the budget. */
static int fill_model(const struct policy_entry *en, const cJSON *model, const char *family,
                      int64_t budget, struct policy_params *p, struct eb_err *e)
{
    if (fill_level(en, p, model, e)) return -1;
    const cJSON *fam = family ? cJSON_GetObjectItemCaseSensitive(model, family) : NULL;
    if (!cJSON_IsObject(fam)) return 0;
    if (fill_level(en, p, fam, e)) return -1;
    if (budget <= 0) return 0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(fam, "tau_by_budget");
    const cJSON *hit = t ? nearest_budget(t, budget) : NULL;
    if (hit && fill(en, p, "tau", hit, e)) return -1;
    t = cJSON_GetObjectItemCaseSensitive(fam, "by_budget");
    hit = t ? nearest_budget(t, budget) : NULL;
    return hit ? fill_level(en, p, hit, e) : 0;
}

int policy_defaults_fill(const struct policy_entry *en, const struct policy_where *at,
                         struct policy_params *p, struct eb_err *e)
{
    const struct defaults_file *d = NULL;
    const char *model = at->model;
    if (!model) return 0;
    int rc = defaults_file_get(&d, e);
    if (rc) return rc > 0 ? 0 : -1;
    int applies = 0;
    for (int i = 0; i < d->n_bases; i++) applies |= d->bases[i]->ops == en->ops;
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(d->root, "models");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(models, model);
    if (!m) {
        char key[256];
        policy_defaults_model_key(model, at->model_name, key, sizeof key);
        m = cJSON_GetObjectItemCaseSensitive(models, key);
    }
    if (!applies || !m) return 0;
    return fill_model(en, m, policy_defaults_family(at->dataset), at->budget, p, e);
}
