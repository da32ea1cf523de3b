/* point.c - a typed point: its policy resolved once, its run key (see point.h). */
#include "harness/exp/point.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "harness/exp/code_hash.h"
#include "policies/policy_defaults.h"
#include "harness/store/store.h"
#include "policies/schedule.h"

const char *point_grader(const struct point *p)
{
    return p->data && p->data->grader ? p->data->grader : "math";
}

/* Parameter i of p as a JSON value of its type. */
static cJSON *param_value(const struct policy_params *p, int i)
{
    const struct param_def *d = &p->defs[i];
    char cb[64];
    if (d->type == PARAM_CHOICE)
        return cJSON_CreateString(policy_choice_name(d->choices, (int)p->val[i], cb, sizeof cb));
    if (d->type == PARAM_BOOL) return cJSON_CreateBool(p->val[i] != 0);
    return cJSON_CreateNumber(p->val[i]);
}

/* The budget, checked once, where the point is built (so `exp --dry-run` and
 * config validation catch a bad one): policies/schedule.h. */
static int check_budget(const struct point *p, struct eb_err *e)
{
    return policy_budget_check(p->policy->ops, &p->params, policy_keeps_all(p->policy, &p->params),
                               -1, p->budget, e);
}

int point_store_budget(const struct point *p)
{
    return p->budget != POLICY_NO_BUDGET ? p->budget : STORE_NONE;
}

int point_set_policy(struct point *p, const char *name, const cJSON *params, struct eb_err *e)
{
    char *in = params ? cJSON_PrintUnformatted(params) : strdup("{}");
    if (!in) return eb_fail(e, "out of memory");
    free(p->params_json);
    p->params_json = NULL;
    int rc = policy_defaults_apply_json(name, p->model, p->dataset, p->budget, in,
                                        &p->params_json, e);
    free(in);
    if (rc) return -1;
    cJSON *o = cJSON_Parse(p->params_json);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return eb_fail(e, "policy parameters are not a JSON object");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "name");
    rc = cJSON_AddStringToObject(o, "name", name) ? policy_parse_json(o, &p->policy, &p->params, e)
                                                  : eb_fail(e, "out of memory");
    cJSON_Delete(o);
    return rc ? rc : check_budget(p, e);
}

int point_set_policy_spec(struct point *p, const char *spec, struct eb_err *e)
{
    char *full = NULL;
    if (policy_defaults_apply_spec(spec, p->model, p->dataset, p->budget, &full, e)) return -1;
    int rc = policy_parse(full, &p->policy, &p->params, e);
    /* params_json: the keys the spec (with its defaults) sets, typed by the registry */
    cJSON *o = rc ? NULL : cJSON_CreateObject();
    const char *colon = full ? strchr(full, ':') : NULL;
    for (const char *kv = colon ? colon + 1 : NULL; o && kv && *kv;) {
        size_t n = strcspn(kv, "="), len = strcspn(kv, ",");
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(n < sizeof key ? n : sizeof key - 1), kv);
        int i = policy_param_index(&p->params, key);
        cJSON_DeleteItemFromObjectCaseSensitive(o, key);
        if (i >= 0) cJSON_AddItemToObject(o, key, param_value(&p->params, i));
        kv += len + (kv[len] == ',');
    }
    free(full);
    if (rc) return -1;
    free(p->params_json);
    p->params_json = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return p->params_json ? check_budget(p, e) : eb_fail(e, "out of memory");
}

/* Every resolved parameter as a JSON object: what the run key hashes. */
static char *typed_params_json(const struct point *p)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < p->params.n; i++)
        cJSON_AddItemToObject(o, p->params.defs[i].key, param_value(&p->params, i));
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

int point_run_key(struct point *p, const struct exp_config *cfg, const char *template_key,
                  struct eb_err *e)
{
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
        .code_version = code_hash};
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
