/* point.c - a typed point: its policy resolved once, its run key (see point.h). */
#include "harness/exp/point.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "harness/exp/code_hash.h"
#include "harness/store/store.h"
#include "model/modelfile.h"
#include "policies/schedule.h"

const char *point_grader(const struct point *p)
{
    return p->data && p->data->grader ? p->data->grader : "math";
}

/* The budget, checked once, where the point is built (so `exp --dry-run` and
 * config validation catch a bad one), against the window the row's resolved
 * parameters give (SnapKV's 32 slots): policies/schedule.h. */
static int check_budget(const struct point *p, struct eb_err *e)
{
    return policy_entry_budget_check(p->policy, &p->params, p->budget, e);
}

int point_store_budget(const struct point *p)
{
    return p->budget != POLICY_NO_BUDGET ? p->budget : STORE_NONE;
}

/* params_json, what the run stores: the values the config or spec and the
 * per-model defaults gave, typed, in that order; then the budget check. */
static int finish_policy(struct point *p, struct eb_err *e)
{
    cJSON *o = policy_params_json(&p->params, 1);
    free(p->params_json);
    p->params_json = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return p->params_json ? check_budget(p, e) : eb_fail(e, "out of memory");
}

int point_set_policy(struct point *p, const char *name, const cJSON *params, struct eb_err *e)
{
    struct policy_where at = {p->model, p->dataset, p->budget, model_registry_name};
    if (policy_resolve_named(name, params, &at, &p->policy, &p->params, e)) return -1;
    return finish_policy(p, e);
}

int point_set_policy_spec(struct point *p, const char *spec, struct eb_err *e)
{
    struct policy_where at = {p->model, p->dataset, p->budget, model_registry_name};
    if (policy_resolve(spec, &at, &p->policy, &p->params, e)) return -1;
    return finish_policy(p, e);
}

/* Every resolved parameter, typed, in table order: what the run key hashes. */
static char *typed_params_json(const struct point *p)
{
    cJSON *o = policy_params_json(&p->params, 0);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

int point_run_key(struct point *p, const struct exp_config *cfg, const char *template_key,
                  struct eb_err *e)
{
    /* the shared sources and this policy's own files, not the others' */
    char code[65];
    if (code_hash_policy(p->policy, code, e)) return -1;
    char *params = typed_params_json(p);
    if (!params) return eb_fail(e, "out of memory");
    struct runkey_params rk = {
        .model = p->model_id, .dataset = p->dataset, .data_hash = p->data_hash,
        .data_offset = p->data_offset, .data_limit = p->data_limit,
        .prompt_template = template_key, .policy = p->policy->name,
        .params_json = params, .budget = p->budget,
        .batch_size = p->batch_size, .batching = batching_name(p->batching),
        .sampling_json = p->sampling_json, .seed = cfg->sampling.seed,
        .max_new_tokens = cfg->max_new_tokens, .extra_json = p->extra_json,
        .code_version = code};
    int rc = runkey_compute(&rk, p->run_key, e);
    free(params);
    return rc;
}

void point_free(struct point *p)
{
    free(p->model_id);
    free(p->dataset);
    free(p->params_json);
    free(p->sampling_json);
    free(p->extra_json);
    memset(p, 0, sizeof *p);
}
