/* sweep.c - expand a config into points with their run keys (see sweep.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../model/modelfile.h"
#include "policy_defaults.h"
#include "../util/sha256.h"
#include "sweep.h"

int sweep_model_id(const char *model, char **out, struct eb_err *e)
{
    struct model_file *mf = NULL;
    struct eb_err me = {0};
    char buf[512];
    if (model_file_open(model, &mf, &me) == 0) {
        snprintf(buf, sizeof buf, "%s@%zu", model, model_file_bytes(mf));
        model_file_close(mf);
    } else {
        snprintf(buf, sizeof buf, "%s@absent", model);
    }
    *out = strdup(buf);
    return *out ? 0 : eb_fail(e, "out of memory");
}

/* Number of parameter combinations of one policy entry. */
static long param_combos(const cJSON *params)
{
    long n = 1;
    const cJSON *it;
    cJSON_ArrayForEach(it, params)
        if (cJSON_IsArray(it)) n *= cJSON_GetArraySize(it);
    return n;
}

/* Combination k as a JSON object (last key varies fastest). */
static int param_combo_json(const cJSON *params, long k, char **out, struct eb_err *e)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return eb_fail(e, "out of memory");
    /* The value index of key i is (k / stride_i) % n_i, stride_i being the
     * product of the list lengths after it, so the last key varies fastest. */
    int nkeys = cJSON_GetArraySize(params);
    for (int i = 0; i < nkeys; i++) {
        const cJSON *it = cJSON_GetArrayItem(params, i);
        const cJSON *v = it;
        if (cJSON_IsArray(it)) {
            long stride = 1;
            for (int j = i + 1; j < nkeys; j++) {
                const cJSON *later = cJSON_GetArrayItem(params, j);
                if (cJSON_IsArray(later)) stride *= cJSON_GetArraySize(later);
            }
            v = cJSON_GetArrayItem(it, (int)((k / stride) % cJSON_GetArraySize(it)));
        }
        cJSON *dup = cJSON_Duplicate(v, 1);
        if (!dup || !cJSON_AddItemToObject(o, it->string, dup)) {
            cJSON_Delete(dup);
            cJSON_Delete(o);
            return eb_fail(e, "out of memory");
        }
    }
    /* Readable numbers here (0.1, not 0.10000000000000001); run keys
     * canonicalise the text themselves. */
    *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return *out ? 0 : eb_fail(e, "out of memory");
}

static char *sampling_json(const struct exp_sampling *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (s->greedy) {
        cJSON_AddBoolToObject(o, "greedy", 1);
    } else {
        cJSON_AddNumberToObject(o, "temperature", s->temperature);
        cJSON_AddNumberToObject(o, "top_p", s->top_p);
        cJSON_AddNumberToObject(o, "top_k", s->top_k);
    }
    cJSON_AddNumberToObject(o, "n_samples", s->n_samples);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t;
}

/* SHA-256 of a file's bytes as hex; -1 if it cannot be read. */
static int file_sha256(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct sha256 h;
    sha256_init(&h);
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&h, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) return -1;
    uint8_t d[32];
    sha256_final(&h, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return 0;
}

static char *extra_json(const struct exp_config *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (c->max_total_tokens) cJSON_AddNumberToObject(o, "max_total_tokens", c->max_total_tokens);
    if (c->max_kv_bytes) cJSON_AddNumberToObject(o, "max_kv_bytes", (double)c->max_kv_bytes);
    cJSON_AddStringToObject(o, "mode", c->mode == EXP_MODE_FIDELITY ? "fidelity" : "generate");
    /* A steering vector changes results through its contents, not its name. */
    char hex[65];
    if (c->steer_vector && file_sha256(c->steer_vector, hex) == 0)
        cJSON_AddStringToObject(o, "steer_vector_sha256", hex);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t;
}

static void point_free(struct sweep_point *p)
{
    free(p->model_id);
    free(p->dataset);
    free(p->params_json);
    free(p->sampling_json);
    free(p->extra_json);
}

void sweep_free(struct sweep *s)
{
    for (int i = 0; s->pts && i < s->n; i++) point_free(&s->pts[i]);
    free(s->pts);
    memset(s, 0, sizeof *s);
}

static int push_point(struct sweep *s, int *cap, const struct sweep_point *p, struct eb_err *e)
{
    if (s->n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        struct sweep_point *np = realloc(s->pts, (size_t)nc * sizeof *np);
        if (!np) return eb_fail(e, "out of memory");
        s->pts = np;
        *cap = nc;
    }
    s->pts[s->n] = *p;
    s->pts[s->n].index = s->n;
    s->n++;
    return 0;
}

int sweep_expand(const struct exp_config *cfg, const char *data_dir, sweep_policy_check_fn check,
                 struct sweep *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    out->cfg = cfg;
    int cap = 0;
    char *samp = sampling_json(&cfg->sampling);
    char *extra = extra_json(cfg);
    char *tpl = prompt_template_key(cfg->prompt);
    char **model_ids = calloc((size_t)cfg->n_models, sizeof *model_ids);
    if (!samp || !extra || !tpl || !model_ids) {
        eb_fail(e, "out of memory");
        goto fail;
    }
    for (int m = 0; m < cfg->n_models; m++)
        if (sweep_model_id(cfg->models[m], &model_ids[m], e)) goto fail;

    for (int m = 0; m < cfg->n_models; m++)
    for (int d = 0; d < cfg->n_datasets; d++) {
        const struct exp_dataset *ds = &cfg->datasets[d];
        const char *dname = exp_dataset_resolve(ds, data_dir);
        if (!dname) dname = ds->name; /* absent: only a dry run gets this far */
        for (int pi = 0; pi < cfg->n_policies; pi++) {
            const struct exp_policy *pol = &cfg->policies[pi];
            int fullkv = !strcmp(pol->name, "fullkv");
            if (fullkv && cfg->mode == EXP_MODE_FIDELITY) continue;
            const int64_t *budgets = pol->budgets ? pol->budgets : cfg->budgets;
            int nb = fullkv ? 1 : pol->budgets ? pol->n_budgets : cfg->n_budgets;
            long nc = param_combos(pol->params);
            for (long k = 0; k < nc; k++) {
                char *params = NULL;
                if (param_combo_json(pol->params, k, &params, e)) goto fail;
                if (check && m == 0 && d == 0 && check(pol->name, params, e)) {
                    char where[320];
                    snprintf(where, sizeof where, "%s: $.policies[%d]", cfg->source, pi);
                    eb_wrap(e, where);
                    free(params);
                    goto fail;
                }
                for (int b = 0; b < nb; b++)
                for (int bm = 0; bm < cfg->n_batchings; bm++)
                for (int bs = 0; bs < cfg->n_batch_sizes; bs++) {
                    struct sweep_point p;
                    memset(&p, 0, sizeof p);
                    p.model = cfg->models[m];
                    p.data_offset = ds->offset;
                    p.data_limit = ds->limit;
                    p.policy = pol->name;
                    p.budget = fullkv ? -1 : budgets[b];
                    p.batch_size = cfg->batch_sizes[bs];
                    /* One sequence per batch has no pads and nothing to refill:
                     * every mode is the same run, recorded as ragged. */
                    p.batching = p.batch_size == 1 ? BATCHING_RAGGED : cfg->batchings[bm];
                    p.model_id = strdup(model_ids[m]);
                    p.dataset = strdup(dname);
                    p.sampling_json = strdup(samp);
                    p.extra_json = strdup(extra);
                    if (!p.model_id || !p.dataset || !p.sampling_json || !p.extra_json) {
                        point_free(&p);
                        free(params);
                        eb_fail(e, "out of memory");
                        goto fail;
                    }
                    /* The per-model defaults (policies/policy_defaults.json) are
                     * resolved here, so the run key records what actually runs. */
                    if (policy_defaults_apply_json(p.policy, p.model, dname, p.budget, params,
                                                   &p.params_json, e)) {
                        point_free(&p);
                        free(params);
                        goto fail;
                    }
                    struct runkey_params rk = {
                        .model = p.model_id, .dataset = p.dataset,
                        .data_offset = p.data_offset, .data_limit = p.data_limit,
                        .prompt_template = tpl, .policy = p.policy,
                        .params_json = p.params_json, .budget = p.budget,
                        .batch_size = p.batch_size, .batching = batching_name(p.batching),
                        .sampling_json = p.sampling_json, .seed = cfg->sampling.seed,
                        .max_new_tokens = cfg->max_new_tokens, .extra_json = p.extra_json,
                        .code_version = SWEEP_CODE_VERSION};
                    if (runkey_compute(&rk, p.run_key, e)) {
                        point_free(&p);
                        free(params);
                        goto fail;
                    }
                    int dup = 0;
                    for (int q = 0; q < out->n && !dup; q++)
                        dup = !strcmp(out->pts[q].run_key, p.run_key);
                    if (dup) { point_free(&p); continue; }
                    if (push_point(out, &cap, &p, e)) {
                        point_free(&p);
                        free(params);
                        goto fail;
                    }
                }
                free(params);
            }
        }
    }
    if (out->n == 0) {
        eb_fail(e, "%s: the sweep has no points (fidelity mode needs a policy other than fullkv)",
                cfg->source);
        goto fail;
    }
    for (int m = 0; m < cfg->n_models; m++) free(model_ids[m]);
    free(model_ids);
    free(samp);
    free(extra);
    free(tpl);
    return 0;
fail:
    for (int m = 0; model_ids && m < cfg->n_models; m++) free(model_ids[m]);
    free(model_ids);
    free(samp);
    free(extra);
    free(tpl);
    sweep_free(out);
    return -1;
}

void sweep_point_label(const struct sweep_point *p, char *buf, size_t cap)
{
    char ds[160], bud[32];
    if (p->data_offset || p->data_limit >= 0) {
        if (p->data_limit >= 0)
            snprintf(ds, sizeof ds, "%.100s[%d:%d]", p->dataset, p->data_offset,
                     p->data_offset + p->data_limit);
        else
            snprintf(ds, sizeof ds, "%.100s[%d:]", p->dataset, p->data_offset);
    } else {
        snprintf(ds, sizeof ds, "%.100s", p->dataset);
    }
    if (p->budget >= 0) snprintf(bud, sizeof bud, " B=%lld", (long long)p->budget);
    else bud[0] = '\0';
    snprintf(buf, cap, "%.100s %s %.60s%.200s%s bs=%d %s", p->model, ds, p->policy,
             strcmp(p->params_json, "{}") ? p->params_json : "", bud, p->batch_size,
             batching_name(p->batching));
}
