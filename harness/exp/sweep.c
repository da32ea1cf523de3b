/* sweep.c - expand a config into points with their run keys (see sweep.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "datasets/dataset.h"
#include "model/modelfile.h"
#include "harness/exp/code_hash.h"
#include "policies/policy_defaults.h"
#include "policies/registry.h"
#include "util/sha256.h"
#include "harness/exp/sweep.h"

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
static int param_combo(const cJSON *params, long k, cJSON **out, struct eb_err *e)
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
    *out = o;
    return 0;
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
    /* Native weights change the numbers (8-bit activations), so they make another key. */
    if (c->weights != MODEL_WEIGHTS_F32)
        cJSON_AddStringToObject(o, "weights", model_weights_name(c->weights));
    /* A GPU computes in 16 bits: another measurement, another key.  The kind,
     * not the index, so shards on several GPUs share their keys. */
    if (c->device && strncmp(c->device, "cuda", 4) == 0) cJSON_AddStringToObject(o, "device", "cuda");
    /* A 16-bit KV cache changes the numbers: another key (f32 keeps the old keys). */
    if (exp_config_kv_type(c) != KV_F32)
        cJSON_AddStringToObject(o, "kv_type", kv_type_name(exp_config_kv_type(c)));
    /* A steering vector changes results through its contents, not its name. */
    char hex[65];
    if (c->steer_vector && file_sha256(c->steer_vector, hex) == 0)
        cJSON_AddStringToObject(o, "steer_vector_sha256", hex);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t;
}

void sweep_free(struct sweep *s)
{
    for (int i = 0; s->pts && i < s->n; i++) point_free(&s->pts[i]);
    free(s->pts);
    memset(s, 0, sizeof *s);
}

static int push_point(struct sweep *s, int *cap, const struct point *p, struct eb_err *e)
{
    if (s->n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        struct point *np = realloc(s->pts, (size_t)nc * sizeof *np);
        if (!np) return eb_fail(e, "out of memory");
        s->pts = np;
        *cap = nc;
    }
    s->pts[s->n] = *p;
    s->pts[s->n].index = s->n;
    s->n++;
    return 0;
}

/* SHA-256 over the slice's items (id, problem, answer, other fields), so an
 * edited line of a dataset file makes new run keys.  "absent" when the data
 * cannot be loaded (only a dry run gets this far without it). */
int sweep_data_hash(const char *dataset, const char *data_dir, int offset, int limit,
                    char out[65], struct eb_err *e)
{
    struct dataset ds;
    struct eb_err le = {0};
    if (dataset_load(dataset, data_dir, offset, limit, &ds, &le)) {
        snprintf(out, 65, "absent");
        return 0;
    }
    struct sha256 h;
    sha256_init(&h);
    for (int i = 0; i < ds.n; i++) {
        const struct dataset_item *it = &ds.items[i];
        const char *fields[4] = {it->id, it->problem, it->answer, it->extra_json};
        for (int f = 0; f < 4; f++) {
            const char *v = fields[f] ? fields[f] : "";
            sha256_update(&h, v, strlen(v) + 1);   /* the NUL separates fields */
        }
    }
    dataset_free(&ds);
    uint8_t d[32];
    sha256_final(&h, d);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
    (void)e;
    return 0;
}

/* What every point of a sweep shares, computed once. */
struct shared {
    const struct exp_config *cfg;
    char *samp, *extra, *tpl;
    char **model_ids;            /* by model index */
};

static void shared_free(struct shared *sh)
{
    for (int m = 0; sh->model_ids && m < sh->cfg->n_models; m++) free(sh->model_ids[m]);
    free(sh->model_ids);
    free(sh->samp);
    free(sh->extra);
    free(sh->tpl);
}

static int shared_init(struct shared *sh, const struct exp_config *cfg, struct eb_err *e)
{
    memset(sh, 0, sizeof *sh);
    sh->cfg = cfg;
    sh->samp = sampling_json(&cfg->sampling);
    sh->extra = extra_json(cfg);
    sh->tpl = prompt_template_key(cfg->prompt);
    sh->model_ids = calloc((size_t)cfg->n_models, sizeof *sh->model_ids);
    if (!sh->samp || !sh->extra || !sh->tpl || !sh->model_ids) return eb_fail(e, "out of memory");
    for (int m = 0; m < cfg->n_models; m++)
        if (sweep_model_id(cfg->models[m], &sh->model_ids[m], e)) return -1;
    return 0;
}

/* Fill p's owned fields and run key from what the sweep shares; p's plain
 * fields and its policy are set by the caller. */
static int finish_point(struct point *p, const struct shared *sh, const char *model_id,
                        struct eb_err *e)
{
    p->model_id = strdup(model_id);
    p->sampling_json = strdup(sh->samp);
    p->extra_json = strdup(sh->extra);
    p->device = sh->cfg->device;
    if (!p->model_id || !p->sampling_json || !p->extra_json) return eb_fail(e, "out of memory");
    return point_run_key(p, sh->cfg, sh->tpl, e);
}

/* A point's fields every point of (model, dataset) shares. */
static int start_point(struct point *p, const struct exp_config *cfg, int m,
                       const struct exp_dataset *ds, const char *dname, const char *dhash,
                       struct eb_err *e)
{
    memset(p, 0, sizeof *p);
    p->model = cfg->models[m];
    p->weights = cfg->weights;
    p->kv_type = exp_config_kv_type(cfg);
    p->data_offset = ds->offset;
    p->data_limit = ds->limit;
    snprintf(p->data_hash, sizeof p->data_hash, "%s", dhash);
    p->data = dataset_find(dname, NULL);
    p->family = policy_defaults_family(dname);
    if (!(p->dataset = strdup(dname))) return eb_fail(e, "out of memory");
    return 0;
}

int sweep_point_finish(struct point *p, const struct exp_config *cfg, const char *data_dir,
                       struct eb_err *e)
{
    struct exp_dataset ds = {p->dataset, p->data_offset, p->data_limit};
    const char *dname = exp_dataset_resolve(&ds, data_dir);
    if (!dname) dname = p->dataset;
    char dhash[65];
    if (sweep_data_hash(dname, data_dir, ds.offset, ds.limit, dhash, e)) return -1;
    snprintf(p->data_hash, sizeof p->data_hash, "%s", dhash);
    p->data = dataset_find(p->dataset, NULL);
    p->family = policy_defaults_family(p->dataset);
    p->weights = cfg->weights;
    p->kv_type = exp_config_kv_type(cfg);
    struct shared sh;
    int rc = shared_init(&sh, cfg, e);
    if (rc == 0) rc = finish_point(p, &sh, sh.model_ids[0], e);
    shared_free(&sh);
    return rc;
}

/* The points of one (model, dataset, policy, parameter combination): every
 * budget x batching x batch size.  Points repeating a key are dropped. */
static int expand_combo(struct sweep *out, int *cap, const struct shared *sh, int m,
                        const struct exp_dataset *ds, const char *dname, const char *dhash,
                        const struct exp_policy *pol, const cJSON *params, struct eb_err *e)
{
    const struct exp_config *cfg = sh->cfg;
    /* fullkv, fullkv-pss, skipkv with evict 0: no budget */
    int keeps_all = policy_named_keeps_all(pol->name, params);
    const int64_t *budgets = pol->budgets ? pol->budgets : cfg->budgets;
    int nb = keeps_all ? 1 : pol->budgets ? pol->n_budgets : cfg->n_budgets;
    for (int b = 0; b < nb; b++)
    for (int bm = 0; bm < cfg->n_batchings; bm++)
    for (int bs = 0; bs < cfg->n_batch_sizes; bs++) {
        struct point p;
        if (start_point(&p, cfg, m, ds, dname, dhash, e)) { point_free(&p); return -1; }
        p.budget = keeps_all ? POLICY_NO_BUDGET : (int)budgets[b];
        p.batch_size = cfg->batch_sizes[bs];
        /* One sequence per batch has no pads and nothing to refill: every
         * mode is the same run, recorded as ragged. */
        p.batching = p.batch_size == 1 ? BATCHING_RAGGED : cfg->batchings[bm];
        if (point_set_policy(&p, pol->name, params, e) ||
            finish_point(&p, sh, sh->model_ids[m], e)) {
            point_free(&p);
            return -1;
        }
        int dup = 0;
        for (int q = 0; q < out->n && !dup; q++) dup = !strcmp(out->pts[q].run_key, p.run_key);
        if (dup) { point_free(&p); continue; }
        if (push_point(out, cap, &p, e)) { point_free(&p); return -1; }
    }
    return 0;
}

/* Every parameter combination of one policy entry on one (model, dataset). */
static int expand_policy(struct sweep *out, int *cap, const struct shared *sh, int m, int d,
                         const char *dname, const char *dhash, int pi, struct eb_err *e)
{
    const struct exp_config *cfg = sh->cfg;
    const struct exp_policy *pol = &cfg->policies[pi];
    if (!strcmp(pol->name, "fullkv") && cfg->mode == EXP_MODE_FIDELITY) return 0;
    long nc = param_combos(pol->params);
    for (long k = 0; k < nc; k++) {
        cJSON *params = NULL;
        if (param_combo(pol->params, k, &params, e)) return -1;
        int rc = expand_combo(out, cap, sh, m, &cfg->datasets[d], dname, dhash, pol, params, e);
        cJSON_Delete(params);
        if (rc) {
            char where[320];
            snprintf(where, sizeof where, "%s: $.policies[%d]", cfg->source, pi);
            return eb_wrap(e, where);
        }
    }
    return 0;
}

int sweep_expand(const struct exp_config *cfg, const char *data_dir, struct sweep *out,
                 struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    out->cfg = cfg;
    int cap = 0;
    struct shared sh;
    if (shared_init(&sh, cfg, e)) goto fail;
    for (int m = 0; m < cfg->n_models; m++)
    for (int d = 0; d < cfg->n_datasets; d++) {
        const struct exp_dataset *ds = &cfg->datasets[d];
        const char *dname = exp_dataset_resolve(ds, data_dir);
        if (!dname) dname = ds->name; /* absent: only a dry run gets this far */
        char dhash[65];
        if (sweep_data_hash(dname, data_dir, ds->offset, ds->limit, dhash, e)) goto fail;
        for (int pi = 0; pi < cfg->n_policies; pi++)
            if (expand_policy(out, &cap, &sh, m, d, dname, dhash, pi, e)) goto fail;
    }
    if (out->n == 0) {
        eb_fail(e, "%s: the sweep has no points (fidelity mode needs a policy other than fullkv)",
                cfg->source);
        goto fail;
    }
    shared_free(&sh);
    return 0;
fail:
    shared_free(&sh);
    sweep_free(out);
    return -1;
}

void sweep_point_label(const struct point *p, char *buf, size_t cap)
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
    if (p->budget != POLICY_NO_BUDGET) snprintf(bud, sizeof bud, " B=%d", p->budget);
    else bud[0] = '\0';
    snprintf(buf, cap, "%.100s %s %.60s%.200s%s bs=%d %s", p->model, ds, p->policy->name,
             strcmp(p->params_json, "{}") ? p->params_json : "", bud, p->batch_size,
             batching_name(p->batching));
}
