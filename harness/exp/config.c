/* config.c - parse and validate experiment configs (see config.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "model/modelfile.h"
#include "harness/exp/config.h"
#include "harness/exp/device.h"

/* ---- validation helpers: every message is "<source>: <path>: <what>" ---- */

struct ctx {
    const char *source;
    struct eb_err *e;
};

static int bad(struct ctx *c, const char *path, const char *what)
{
    return eb_fail(c->e, "%s: %s: %s", c->source, path, what);
}

static void child(char *out, size_t cap, const char *path, const char *key)
{
    snprintf(out, cap, "%.180s.%.60s", path, key);
}

static void elem(char *out, size_t cap, const char *path, int i)
{
    snprintf(out, cap, "%.200s[%d]", path, i);
}

/* An integer in [lo, hi]. */
static int get_int(struct ctx *c, const cJSON *v, const char *path, double lo, double hi,
                   int64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || !isfinite(v->valuedouble))
        return bad(c, path, "expected an integer");
    if (v->valuedouble < lo || v->valuedouble > hi) {
        char msg[128];
        snprintf(msg, sizeof msg, "expected an integer in [%.0f, %.0f], got %.0f", lo, hi,
                 v->valuedouble);
        return bad(c, path, msg);
    }
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int get_string(struct ctx *c, const cJSON *v, const char *path, char **out)
{
    if (!cJSON_IsString(v) || !v->valuestring) return bad(c, path, "expected a string");
    if (!v->valuestring[0]) return bad(c, path, "expected a non-empty string");
    *out = strdup(v->valuestring);
    if (!*out) return bad(c, path, "out of memory");
    return 0;
}

/* Keys of an object must all be in allowed (NULL-terminated). */
static int check_keys(struct ctx *c, const cJSON *obj, const char *path, const char *const *allowed)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++)
            if (it->string && !strcmp(it->string, allowed[i])) ok = 1;
        if (!ok) {
            char p[256], msg[600];
            child(p, sizeof p, path, it->string ? it->string : "?");
            size_t n = (size_t)snprintf(msg, sizeof msg, "unknown key (known:");
            for (int i = 0; allowed[i] && n < sizeof msg; i++)
                n += (size_t)snprintf(msg + n, sizeof msg - n, " %s", allowed[i]);
            if (n < sizeof msg) snprintf(msg + n, sizeof msg - n, ")");
            return bad(c, p, msg);
        }
    }
    return 0;
}

/* An int or a non-empty list of ints. */
static int get_int_list(struct ctx *c, const cJSON *v, const char *path, double lo, double hi,
                        int64_t **out, int *n)
{
    int cnt = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (cJSON_IsArray(v) && cnt == 0) return bad(c, path, "expected a non-empty list");
    if (!cJSON_IsArray(v) && !cJSON_IsNumber(v)) return bad(c, path, "expected an integer or a list of integers");
    int64_t *a = calloc((size_t)cnt, sizeof *a);
    if (!a) return bad(c, path, "out of memory");
    for (int i = 0; i < cnt; i++) {
        char p[256];
        const cJSON *x = v;
        if (cJSON_IsArray(v)) { x = cJSON_GetArrayItem(v, i); elem(p, sizeof p, path, i); }
        else snprintf(p, sizeof p, "%s", path);
        if (get_int(c, x, p, lo, hi, &a[i])) { free(a); return -1; }
        for (int j = 0; j < i; j++)
            if (a[j] == a[i]) { free(a); return bad(c, p, "duplicate value"); }
    }
    *out = a;
    *n = cnt;
    return 0;
}

/* A string or a non-empty list of strings. */
static int get_string_list(struct ctx *c, const cJSON *v, const char *path, char ***out, int *n)
{
    int cnt = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (cJSON_IsArray(v) && cnt == 0) return bad(c, path, "expected a non-empty list");
    if (!cJSON_IsArray(v) && !cJSON_IsString(v)) return bad(c, path, "expected a string or a list of strings");
    char **a = calloc((size_t)cnt, sizeof *a);
    if (!a) return bad(c, path, "out of memory");
    *out = a;
    *n = cnt;
    for (int i = 0; i < cnt; i++) {
        char p[256];
        const cJSON *x = v;
        if (cJSON_IsArray(v)) { x = cJSON_GetArrayItem(v, i); elem(p, sizeof p, path, i); }
        else snprintf(p, sizeof p, "%s", path);
        if (get_string(c, x, p, &a[i])) return -1;
    }
    return 0;
}

/* ---- sections ---- */

static int parse_datasets(struct ctx *c, const cJSON *v, struct exp_config *cfg)
{
    static const char *const keys[] = {"name", "limit", "offset", NULL};
    const char *path = "$.datasets";
    int cnt = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (!v) return bad(c, "$", "missing key \"datasets\"");
    if (cJSON_IsArray(v) && cnt == 0) return bad(c, path, "expected a non-empty list");
    if (!cJSON_IsArray(v) && !cJSON_IsString(v) && !cJSON_IsObject(v))
        return bad(c, path, "expected a dataset name, an object or a list of them");
    cfg->datasets = calloc((size_t)cnt, sizeof *cfg->datasets);
    if (!cfg->datasets) return bad(c, path, "out of memory");
    cfg->n_datasets = cnt;
    for (int i = 0; i < cnt; i++) {
        struct exp_dataset *d = &cfg->datasets[i];
        d->limit = -1;
        char p[256], q[256];
        const cJSON *x = v;
        if (cJSON_IsArray(v)) { x = cJSON_GetArrayItem(v, i); elem(p, sizeof p, path, i); }
        else snprintf(p, sizeof p, "%s", path);
        if (cJSON_IsString(x)) {
            if (get_string(c, x, p, &d->name)) return -1;
        } else if (cJSON_IsObject(x)) {
            if (check_keys(c, x, p, keys)) return -1;
            const cJSON *f;
            child(q, sizeof q, p, "name");
            if (!(f = cJSON_GetObjectItemCaseSensitive(x, "name"))) return bad(c, q, "missing");
            if (get_string(c, f, q, &d->name)) return -1;
            int64_t n;
            if ((f = cJSON_GetObjectItemCaseSensitive(x, "limit"))) {
                child(q, sizeof q, p, "limit");
                if (get_int(c, f, q, 1, 1e9, &n)) return -1;
                d->limit = (int)n;
            }
            if ((f = cJSON_GetObjectItemCaseSensitive(x, "offset"))) {
                child(q, sizeof q, p, "offset");
                if (get_int(c, f, q, 0, 1e9, &n)) return -1;
                d->offset = (int)n;
            }
        } else {
            return bad(c, p, "expected a dataset name or an object {name, limit, offset}");
        }
        child(q, sizeof q, p, "name");
        struct eb_err de = {0};
        if (!dataset_find(d->name, &de)) return bad(c, cJSON_IsObject(x) ? q : p, de.msg);
        if (!strncmp(d->name, "synthetic", 9)) {
            int sn;
            uint32_t seed;
            if (synthetic_parse_name(d->name, &sn, &seed, &de)) return bad(c, p, de.msg);
        }
    }
    return 0;
}

/* A policy parameter value: number, string or bool, or a non-empty list of them. */
static int check_param(struct ctx *c, const cJSON *v, const char *path)
{
    if (cJSON_IsNumber(v) || cJSON_IsString(v) || cJSON_IsBool(v)) return 0;
    if (!cJSON_IsArray(v)) return bad(c, path, "expected a number, string, boolean or a list of them");
    if (cJSON_GetArraySize(v) == 0) return bad(c, path, "expected a non-empty list");
    const cJSON *x;
    int i = 0;
    cJSON_ArrayForEach(x, v) {
        char p[256];
        elem(p, sizeof p, path, i++);
        if (!cJSON_IsNumber(x) && !cJSON_IsString(x) && !cJSON_IsBool(x))
            return bad(c, p, "expected a number, string or boolean");
    }
    return 0;
}

static int parse_policies(struct ctx *c, const cJSON *v, struct exp_config *cfg)
{
    const char *path = "$.policies";
    int cnt = !v ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (v && cJSON_IsArray(v) && cnt == 0) return bad(c, path, "expected a non-empty list");
    if (v && !cJSON_IsArray(v) && !cJSON_IsString(v) && !cJSON_IsObject(v))
        return bad(c, path, "expected a policy name, an object or a list of them");
    cfg->policies = calloc((size_t)cnt, sizeof *cfg->policies);
    if (!cfg->policies) return bad(c, path, "out of memory");
    cfg->n_policies = cnt;
    for (int i = 0; i < cnt; i++) {
        struct exp_policy *pol = &cfg->policies[i];
        char p[256], q[256];
        const cJSON *x = v;
        if (v && cJSON_IsArray(v)) { x = cJSON_GetArrayItem(v, i); elem(p, sizeof p, path, i); }
        else snprintf(p, sizeof p, "%s", path);
        pol->params = cJSON_CreateObject();
        if (!pol->params) return bad(c, p, "out of memory");
        if (!x) {
            pol->name = strdup("fullkv");
            if (!pol->name) return bad(c, p, "out of memory");
            continue;
        }
        if (cJSON_IsString(x)) {
            if (get_string(c, x, p, &pol->name)) return -1;
            continue;
        }
        if (!cJSON_IsObject(x)) return bad(c, p, "expected a policy name or an object {name, budget, PARAM: value}");
        const cJSON *f;
        child(q, sizeof q, p, "name");
        if (!(f = cJSON_GetObjectItemCaseSensitive(x, "name"))) return bad(c, q, "missing");
        if (get_string(c, f, q, &pol->name)) return -1;
        cJSON_ArrayForEach(f, x) {
            child(q, sizeof q, p, f->string);
            if (!strcmp(f->string, "name")) continue;
            if (!strcmp(f->string, "budget") || !strcmp(f->string, "budgets")) {
                if (pol->budgets) return bad(c, q, "give either budget or budgets");
                if (get_int_list(c, f, q, 1, 1e9, &pol->budgets, &pol->n_budgets)) return -1;
                continue;
            }
            if (check_param(c, f, q)) return -1;
            cJSON *dup = cJSON_Duplicate(f, 1);
            if (!dup || !cJSON_AddItemToObject(pol->params, f->string, dup)) {
                cJSON_Delete(dup);
                return bad(c, q, "out of memory");
            }
        }
    }
    return 0;
}

static int parse_sampling(struct ctx *c, const cJSON *v, struct exp_sampling *s)
{
    static const char *const keys[] = {"greedy", "temperature", "top_p", "top_k", "n_samples",
                                       "seed", NULL};
    const char *path = "$.sampling";
    s->greedy = 1;
    s->temperature = 0;
    s->top_p = 1;
    s->top_k = 0;
    s->n_samples = 1;
    if (!v) return 0;
    if (cJSON_IsString(v)) {
        if (strcmp(v->valuestring, "greedy")) return bad(c, path, "expected \"greedy\" or an object");
        return 0;
    }
    if (!cJSON_IsObject(v)) return bad(c, path, "expected \"greedy\" or an object");
    if (check_keys(c, v, path, keys)) return -1;
    const cJSON *f;
    char q[256];
    int64_t n;
    int greedy_given = 0;
    if ((f = cJSON_GetObjectItemCaseSensitive(v, "greedy"))) {
        child(q, sizeof q, path, "greedy");
        if (!cJSON_IsBool(f)) return bad(c, q, "expected true or false");
        greedy_given = 1;
        s->greedy = cJSON_IsTrue(f);
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(v, "temperature"))) {
        child(q, sizeof q, path, "temperature");
        if (!cJSON_IsNumber(f) || f->valuedouble < 0 || f->valuedouble > 100)
            return bad(c, q, "expected a number in [0, 100]");
        s->temperature = f->valuedouble;
        if (greedy_given && s->greedy && s->temperature > 0)
            return bad(c, q, "greedy decoding takes no temperature");
        if (!greedy_given) s->greedy = s->temperature == 0;
    } else if (greedy_given && !s->greedy) {
        child(q, sizeof q, path, "temperature");
        return bad(c, q, "missing (sampling needs a temperature > 0)");
    }
    if (!s->greedy && s->temperature <= 0) {
        child(q, sizeof q, path, "temperature");
        return bad(c, q, "sampling needs a temperature > 0");
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(v, "top_p"))) {
        child(q, sizeof q, path, "top_p");
        if (!cJSON_IsNumber(f) || !(f->valuedouble > 0) || f->valuedouble > 1)
            return bad(c, q, "expected a number in (0, 1]");
        s->top_p = f->valuedouble;
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(v, "top_k"))) {
        child(q, sizeof q, path, "top_k");
        if (get_int(c, f, q, 0, 1e9, &n)) return -1;
        s->top_k = (int)n;
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(v, "n_samples"))) {
        child(q, sizeof q, path, "n_samples");
        if (get_int(c, f, q, 1, 100000, &n)) return -1;
        s->n_samples = (int)n;
        if (s->greedy && n > 1) return bad(c, q, "greedy decoding gives one sample per problem");
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(v, "seed"))) {
        child(q, sizeof q, path, "seed");
        if (get_int(c, f, q, 0, 9007199254740991.0, &n)) return -1;
        s->seed = (uint64_t)n;
    }
    if (s->greedy) { s->temperature = 0; s->top_p = 1; s->top_k = 0; }
    return 0;
}

static int parse_prompt(struct ctx *c, const cJSON *f, struct exp_config *cfg)
{
    cfg->prompt = prompt_template_find("r1-boxed");
    if (f) {
        if (!cJSON_IsString(f)) return bad(c, "$.prompt", "expected a template name");
        if (!(cfg->prompt = prompt_template_find(f->valuestring))) {
            char msg[256];
            int nt;
            const struct prompt_template *t = prompt_templates(&nt);
            size_t k = (size_t)snprintf(msg, sizeof msg, "unknown template \"%.40s\" (known:", f->valuestring);
            for (int i = 0; i < nt && k < sizeof msg; i++)
                k += (size_t)snprintf(msg + k, sizeof msg - k, " %s", t[i].name);
            if (k < sizeof msg) snprintf(msg + k, sizeof msg - k, ")");
            return bad(c, "$.prompt", msg);
        }
    }
    return 0;
}

/* batch_sizes and batching. */
static int parse_batching(struct ctx *c, const cJSON *root, struct exp_config *cfg)
{
    const cJSON *f;
    int64_t *bs = NULL;
    int nbs = 1;
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "batch_sizes"))) {
        if (get_int_list(c, f, "$.batch_sizes", 1, 1 << 20, &bs, &nbs)) return -1;
    }
    if (!(cfg->batch_sizes = calloc((size_t)nbs, sizeof *cfg->batch_sizes))) {
        free(bs);
        return bad(c, "$", "out of memory");
    }
    cfg->n_batch_sizes = nbs;
    for (int i = 0; i < nbs; i++) cfg->batch_sizes[i] = bs ? (int)bs[i] : 1;
    free(bs);

    f = cJSON_GetObjectItemCaseSensitive(root, "batching");
    int nb = !f ? 1 : cJSON_IsArray(f) ? cJSON_GetArraySize(f) : 1;
    if (f && !cJSON_IsString(f) && !cJSON_IsArray(f))
        return bad(c, "$.batching", "expected a batching mode or a list of them");
    if (f && cJSON_IsArray(f) && nb == 0) return bad(c, "$.batching", "expected a non-empty list");
    if (!(cfg->batchings = calloc((size_t)nb, sizeof *cfg->batchings))) return bad(c, "$", "out of memory");
    cfg->n_batchings = nb;
    cfg->batchings[0] = BATCHING_RAGGED;
    for (int i = 0; f && i < nb; i++) {
        char p[64];
        const cJSON *x = f;
        if (cJSON_IsArray(f)) { x = cJSON_GetArrayItem(f, i); elem(p, sizeof p, "$.batching", i); }
        else snprintf(p, sizeof p, "$.batching");
        if (!cJSON_IsString(x) || batching_parse(x->valuestring, &cfg->batchings[i]))
            return bad(c, p, "expected \"padded\", \"grouped\", \"ragged\" or \"continuous\"");
        for (int j = 0; j < i; j++)
            if (cfg->batchings[j] == cfg->batchings[i]) return bad(c, p, "duplicate value");
    }
    return 0;
}

/* seed, length and memory limits, steering vector. */
static int parse_limits(struct ctx *c, const cJSON *root, struct exp_config *cfg)
{
    const cJSON *f;
    int64_t n;
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "seed"))) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "sampling");
        if (cJSON_IsObject(s) && cJSON_GetObjectItemCaseSensitive(s, "seed"))
            return bad(c, "$.seed", "given twice (also $.sampling.seed)");
        if (get_int(c, f, "$.seed", 0, 9007199254740991.0, &n)) return -1;
        cfg->sampling.seed = (uint64_t)n;
    }
    cfg->max_new_tokens = 1024;
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "max_new_tokens"))) {
        if (get_int(c, f, "$.max_new_tokens", 1, 1 << 24, &n)) return -1;
        cfg->max_new_tokens = (int)n;
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "max_total_tokens"))) {
        if (get_int(c, f, "$.max_total_tokens", 2, 1 << 24, &n)) return -1;
        cfg->max_total_tokens = (int)n;
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "max_kv_bytes"))) {
        if (get_int(c, f, "$.max_kv_bytes", 1, 9007199254740991.0, &n)) return -1;
        cfg->max_kv_bytes = n;
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "steer_vector"))) {
        if (get_string(c, f, "$.steer_vector", &cfg->steer_vector)) return -1;
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "weights"))) {
        if (cJSON_IsString(f) && !strcmp(f->valuestring, "f32")) cfg->weights = MODEL_WEIGHTS_F32;
        else if (cJSON_IsString(f) && !strcmp(f->valuestring, "native")) cfg->weights = MODEL_WEIGHTS_NATIVE;
        else return bad(c, "$.weights", "expected \"f32\" or \"native\"");
    }
    cfg->retention = 1;
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "retention"))) {
        if (!cJSON_IsBool(f)) return bad(c, "$.retention", "expected true or false");
        cfg->retention = cJSON_IsTrue(f);
    }
    cfg->kv_type = DEVICE_KV_AUTO;
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "kv_type")) &&
        (!cJSON_IsString(f) || device_kv_type_parse(f->valuestring, &cfg->kv_type)))
        return bad(c, "$.kv_type", "expected \"f32\", \"f16\", \"bf16\" or \"auto\"");
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "device"))) {
        struct eb_err de;
        if (get_string(c, f, "$.device", &cfg->device)) return -1;
        if (device_syntax_check(cfg->device, &de)) return bad(c, "$.device", de.msg);
    }
    return 0;
}

/* cJSON keeps every duplicate of a key and lookups see only the first, so a
 * config that sets a key twice would silently drop a value: refuse it, at
 * any depth (the JSONL loader does the same). */
static int check_duplicates(struct ctx *c, const cJSON *v, const char *path)
{
    int i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        char p[256];
        if (cJSON_IsObject(v)) {
            child(p, sizeof p, path, it->string ? it->string : "?");
            for (const cJSON *prev = v->child; prev != it; prev = prev->next)
                if (prev->string && it->string && !strcmp(prev->string, it->string))
                    return bad(c, p, "duplicate key");
        } else {
            elem(p, sizeof p, path, i);
        }
        if ((cJSON_IsObject(it) || cJSON_IsArray(it)) && check_duplicates(c, it, p)) return -1;
    }
    return 0;
}

static int parse_root(struct ctx *c, const cJSON *root, struct exp_config *cfg)
{
    static const char *const keys[] = {
        "name", "description", "mode", "models", "datasets", "prompt", "policies", "budgets",
        "batch_sizes", "batching", "sampling", "max_new_tokens", "max_total_tokens",
        "max_kv_bytes", "seed", "steer_vector", "weights", "device", "kv_type", "retention", NULL};
    if (!cJSON_IsObject(root)) return bad(c, "$", "expected a JSON object");
    if (check_keys(c, root, "$", keys)) return -1;
    const cJSON *f;

    if ((f = cJSON_GetObjectItemCaseSensitive(root, "name"))) {
        if (get_string(c, f, "$.name", &cfg->name)) return -1;
    }
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "description")) && !cJSON_IsString(f))
        return bad(c, "$.description", "expected a string");
    cfg->mode = EXP_MODE_GENERATE;
    if ((f = cJSON_GetObjectItemCaseSensitive(root, "mode"))) {
        if (!cJSON_IsString(f)) return bad(c, "$.mode", "expected \"generate\" or \"fidelity\"");
        if (!strcmp(f->valuestring, "fidelity")) cfg->mode = EXP_MODE_FIDELITY;
        else if (strcmp(f->valuestring, "generate")) return bad(c, "$.mode", "expected \"generate\" or \"fidelity\"");
    }
    if (!(f = cJSON_GetObjectItemCaseSensitive(root, "models"))) return bad(c, "$", "missing key \"models\"");
    if (get_string_list(c, f, "$.models", &cfg->models, &cfg->n_models)) return -1;
    if (parse_datasets(c, cJSON_GetObjectItemCaseSensitive(root, "datasets"), cfg)) return -1;

    if (parse_prompt(c, cJSON_GetObjectItemCaseSensitive(root, "prompt"), cfg)) return -1;
    if (parse_policies(c, cJSON_GetObjectItemCaseSensitive(root, "policies"), cfg)) return -1;

    if ((f = cJSON_GetObjectItemCaseSensitive(root, "budgets"))) {
        if (exp_config_parse_budgets(f, c->source, cfg, c->e)) return -1;
    } else {
        if (!(cfg->budgets = malloc(sizeof *cfg->budgets))) return bad(c, "$", "out of memory");
        cfg->budgets[0] = 1024;
        cfg->n_budgets = 1;
    }

    if (parse_batching(c, root, cfg)) return -1;

    if (parse_sampling(c, cJSON_GetObjectItemCaseSensitive(root, "sampling"), &cfg->sampling)) return -1;
    if (parse_limits(c, root, cfg)) return -1;
    if (cfg->mode == EXP_MODE_FIDELITY) {
        if (!cfg->sampling.greedy)
            return bad(c, "$.sampling", "fidelity mode replays greedy FullKV traces; use \"greedy\"");
    }
    return 0;
}

/* The base name of a path without ".json". */
static char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".json")) n -= 5;
    return strndup(b, n);
}

int exp_config_parse(const char *text, size_t len, const char *source, struct exp_config *out,
                     struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    if (!source) source = "<config>";
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        /* cJSON reports where parsing stopped; turn that into line:column. */
        int line = 1, col = 1;
        for (const char *p = text; end && p < end && p < text + len; p++) {
            if (*p == '\n') { line++; col = 1; } else col++;
        }
        return eb_fail(e, "%s:%d:%d: not valid JSON", source, line, col);
    }
    struct ctx c = {source, e};
    out->source = strdup(source);
    int rc = out->source ? check_duplicates(&c, root, "$") : eb_fail(e, "%s: out of memory", source);
    if (rc == 0) rc = parse_root(&c, root, out);
    if (rc == 0 && !out->name && !(out->name = base_name(source))) rc = eb_fail(e, "%s: out of memory", source);
    if (rc == 0 && !(out->json = cJSON_PrintUnformatted(root))) rc = eb_fail(e, "%s: out of memory", source);
    cJSON_Delete(root);
    if (rc) exp_config_free(out);
    return rc;
}

int exp_config_load(const char *path_or_name, struct exp_config *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    char path[1024];
    size_t n = strlen(path_or_name);
    if (n > 5 && !strcmp(path_or_name + n - 5, ".json")) snprintf(path, sizeof path, "%s", path_or_name);
    else if (strchr(path_or_name, '/')) return eb_fail(e, "%s: expected a .json file or a config name", path_or_name);
    else snprintf(path, sizeof path, "experiments/%s.json", path_or_name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT && !strchr(path_or_name, '/'))
            return eb_fail(e, "%s: no such config (the names are the files in experiments/)", path);
        return eb_fail(e, "%s: %s", path, strerror(errno));
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        if (cap >= (64u << 20)) { free(buf); buf = NULL; fclose(f); return eb_fail(e, "%s: too large", path); }
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return eb_fail(e, "%s: out of memory", path);
    if (err) { free(buf); return eb_fail(e, "%s: read error", path); }
    int rc = exp_config_parse(buf, len, path, out, e);
    free(buf);
    return rc;
}

void exp_config_free(struct exp_config *c)
{
    if (!c) return;
    free(c->source);
    free(c->name);
    free(c->json);
    for (int i = 0; c->models && i < c->n_models; i++) free(c->models[i]);
    free(c->models);
    for (int i = 0; c->datasets && i < c->n_datasets; i++) {
        free(c->datasets[i].name);
    }
    free(c->datasets);
    for (int i = 0; c->policies && i < c->n_policies; i++) {
        free(c->policies[i].name);
        free(c->policies[i].budgets);
        cJSON_Delete(c->policies[i].params);
    }
    free(c->policies);
    free(c->budgets);
    free(c->budget_fracs);
    free(c->batch_sizes);
    free(c->batchings);
    free(c->steer_vector);
    free(c->device);
    memset(c, 0, sizeof *c);
}
