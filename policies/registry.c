/* registry.c - the table of policies and the parsing of their parameters. */
#include "registry.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies.h"
#include "steering.h"

/* Each policy's vtable and parameter table, defined in its own file. */
extern const struct policy_ops fullkv_ops, streamingllm_ops, h2o_ops, h2o_rkv_ops, snapkv_ops,
    rkv_ops, vase_attnv_ops, vase_dkv_ops, rpc_ops, beaconkv_ops, seal_ops, skipkv_ops, knorm_ops,
    tova_ops;
extern const struct param_def fullkv_params[], streamingllm_params[], h2o_params[],
    h2o_rkv_params[], snapkv_params[], rkv_params[], vase_attnv_params[], vase_dkv_params[],
    rpc_params[], beaconkv_params[], seal_params[], skipkv_params[], scored_policy_params[];

/* One row per name a policy is run under (presets included), in the order
 * `evictbench` lists them; .style is how figures and tables show it. */
static const struct policy_entry ENTRIES[] = {
    {"fullkv", "no eviction", &fullkv_ops, fullkv_params, NULL,
     {"FullKV", 0x000000, 4, 1}, 1},
    {"streamingllm", "attention sinks + the most recent tokens", &streamingllm_ops,
     streamingllm_params, NULL,
     {"StreamingLLM", 0x999999, 12, 0}, 0},
    {"h2o", "original H2O: accumulated attention per head, evicts every step, heavy/recent split",
     &h2o_ops, h2o_params, NULL,
     {"H2O", 0xE69F00, 9, 0}, 0},
    {"h2o-rkv", "H2O as the R-KV/SkipKV baselines run it: last-query score, one set per layer, "
                "every divide_length steps",
     &h2o_rkv_ops, h2o_rkv_params, NULL,
     {"H2O (R-KV baseline)", 0xDDCC77, 9, 0}, 0},
    {"snapkv", "original SnapKV: the prompt compressed once at prefill (window 32, avg-pool 5)",
     &snapkv_ops, snapkv_params, NULL,
     {"SnapKV", 0x56B4E9, 11, 0}, 0},
    {"snapkv-decode", "R-KV's decode-time SnapKV: window 8, max-pool 7, every divide_length steps",
     &snapkv_ops, snapkv_params,
     "window=8,kernel=7,pool=max,softmax=candidates,schedule=divide",
     {"SnapKV (decode)", 0x88CCEE, 11, 0}, 0},
    {"rkv", "R-KV: lambda * importance - (1 - lambda) * redundancy", &rkv_ops, rkv_params, NULL,
     {"R-KV", 0x0072B2, 5, 0}, 0},
    {"rkv-code", "R-KV with the released code's default lambda = 0.07", &rkv_ops, rkv_params,
     "lambda=0.07",
     {"R-KV (lambda 0.07)", 0x332288, 5, 0}, 0},
    {"vase-attnv", "VaSE-AttnV: the B/4 largest value ranges kept, the rest sampled by window "
                   "attention; every 64 steps once over B", &vase_attnv_ops, vase_attnv_params,
     NULL,
     {"VaSE-AttnV", 0x117733, 10, 0}, 0},
    {"vase-attn", "VaSE's \"Attn\" baseline (SnapKV-decode): window-64 score, avg-pool 5, "
                  "deterministic top-k, no sinks", &vase_attnv_ops, vase_attnv_params,
     "protect=0,sinks=0,sample=0",
     {"VaSE Attn", 0x44AA99, 14, 0}, 0},
    {"vase-range-attn", "VaSE ablation range_attn: value-range protection + deterministic top-k "
                        "attention, no sinks (as released)", &vase_attnv_ops, vase_attnv_params,
     "sample=0,sinks=0",
     {"VaSE range+Attn", 0x999933, 14, 0}, 0},
    {"vase-attn-rkv", "VaSE's \"R-KV\" baseline (attn_rkv): 0.5 * window-64 attention (avg-pool "
                      "5) - 0.5 * key redundancy without threshold, deterministic top-k",
     &vase_attnv_ops, vase_attnv_params, "protect=0,sinks=0,sample=0,rkv_lambda=0.5",
     {"VaSE Attn+R-KV", 0x6699CC, 14, 0}, 0},
    {"vase-dkv", "VaSE-DKV: top |kG|^2 |vG|^2, Gaussian sketch (d x 20) redrawn at each eviction",
     &vase_dkv_ops, vase_dkv_params, NULL,
     {"VaSE-DKV", 0x882255, 10, 0}, 0},
    {"curdkv", "CurDKV as VaSE runs it: vase-dkv with one fixed sketch per layer", &vase_dkv_ops,
     vase_dkv_params, "sketch=fixed",
     {"CurDKV", 0xCC6677, 10, 0}, 0},
    {"rpc", "Reasoning Path Compression: every P generated tokens keep (n+1)P/c by the last 32 "
            "queries' attention; prompt kept", &rpc_ops, rpc_params, NULL,
     {"RPC", 0x661100, 2, 0}, 0},
    {"rpc-fixed", "RPC adapted to a fixed budget B (prompt and last 32 kept)", &rpc_ops,
     rpc_params, "budget_mode=fixed",
     {"RPC (fixed budget)", 0x994455, 2, 0}, 0},
    {"beaconkv", "BeaconKV (APPROXIMATE reconstruction): FPS beacon + recent queries, max "
                 "aggregation; prompt and recent kept", &beaconkv_ops, beaconkv_params, NULL,
     {"BeaconKV", 0xAA4499, 8, 0}, 0},
    {"seal", "SEAL: FullKV + steering h + c*V at split tokens inside the thought", &seal_ops,
     seal_params, NULL,
     {"SEAL", 0x8C564B, 3, 0}, 1},
    {"skipkv", "SkipKV: R-KV + sentence redundancy penalty + adaptive steering; expects "
               "batching=grouped", &skipkv_ops, skipkv_params, "batching=grouped",
     {"SkipKV", 0xD55E00, 7, 0}, 0},
    {"skipkv-full", "the full SkipKV method (same as skipkv)", &skipkv_ops, skipkv_params,
     "batching=grouped",
     {"SkipKV", 0xD55E00, 7, 0}, 0},
    {"skipkv-sent", "SkipKV ablation: sentence scoring only (no steering)", &skipkv_ops,
     skipkv_params, "steer=0",
     {"SkipKV (sentence only)", 0xCC79A7, 13, 0}, 0},
    {"skipkv-sent-steer", "SkipKV ablation: sentence scoring + adaptive steering, no grouping",
     &skipkv_ops, skipkv_params, NULL,
     {"SkipKV (no grouping)", 0x009E73, 15, 0}, 0},
    {"seal-static", "SkipKV with static SEAL-style steering (gamma = 0)", &skipkv_ops,
     skipkv_params, "gamma=0",
     {"static steering", 0x8C564B, 3, 0}, 0},
    {"fullkv-pss", "FullKV with SkipKV's sentence tracker: nothing evicted, PSS statistics and "
                   "N_o recorded (tau 0.95: the statistics threshold, not a tuned eviction one)",
     &skipkv_ops, skipkv_params, "evict=0,steer=0,tau=0.95",
     {"FullKV (PSS tracking)", 0x555555, 4, 1}, 1},
    {"knorm", "KNorm (kvpress): keep the keys of lowest L2 norm", &knorm_ops,
     scored_policy_params, NULL, {"KNorm", 0x7F7F7F, 6, 0}, 0},
    {"tova", "TOVA (kvpress): the last query's attention, mean over heads, one set per layer",
     &tova_ops, scored_policy_params, NULL, {"TOVA", 0x17BECF, 1, 0}, 0},
};

const struct policy_entry *policy_registry(int *n)
{
    *n = (int)(sizeof ENTRIES / sizeof ENTRIES[0]);
    return ENTRIES;
}

const struct policy_entry *policy_registry_find(const char *name)
{
    for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++)
        if (!strcmp(ENTRIES[i].name, name)) return &ENTRIES[i];
    return NULL;
}

int policy_spec_keeps_all(const char *spec)
{
    size_t n = strcspn(spec, ":");
    for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++)
        if (strlen(ENTRIES[i].name) == n && !strncmp(ENTRIES[i].name, spec, n))
            return ENTRIES[i].keeps_all;
    return 0;
}

int policy_keeps_all(const struct policy_entry *entry, const struct policy_params *p)
{
    for (int i = 0; p && i < p->n; i++)
        if (!strcmp(p->defs[i].key, "evict") && p->val[i] == 0) return 1;
    return entry->keeps_all;
}

const char *policy_display_name(const char *name)
{
    if (!name) return "?";
    const struct policy_entry *en = policy_registry_find(name);
    return en && en->style.display ? en->style.display : name;
}

int policy_param_index(const struct policy_params *p, const char *key)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->defs[i].key, key)) return i;
    return -1;
}

double policy_param(const struct policy_params *p, const char *key)
{
    int i = policy_param_index(p, key);
    return i < 0 ? NAN : p->val[i];
}

int policy_param_int(const struct policy_params *p, const char *key)
{
    int i = policy_param_index(p, key);
    return i < 0 ? 0 : (int)p->val[i];
}

static void list_names(char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0] && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "", ENTRIES[i].name);
}

static void list_keys(const struct param_def *defs, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; defs[i].key && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "", defs[i].key);
    if (!defs[0].key) snprintf(buf, size, "none");
}

static int choice_index(const char *choices, const char *v, size_t vlen)
{
    int idx = 0;
    for (const char *c = choices; *c; idx++) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == vlen && !strncmp(c, v, n)) return idx;
        if (!bar) break;
        c = bar + 1;
    }
    return -1;
}

const char *policy_choice_name(const char *choices, int idx, char *buf, size_t size)
{
    const char *c = choices;
    for (int i = 0; i < idx && c; i++) {
        c = strchr(c, '|');
        if (c) c++;
    }
    if (!c) return "?";
    const char *bar = strchr(c, '|');
    size_t n = bar ? (size_t)(bar - c) : strlen(c);
    if (n >= size) n = size - 1;
    memcpy(buf, c, n);
    buf[n] = '\0';
    return buf;
}

static int range_error(const char *policy, const struct param_def *d, const char *v,
                       struct eb_err *e)
{
    switch (d->type) {
    case PARAM_INT:
        return eb_fail(e, "policy %s: %s=%s: expected an integer in [%.0f, %.0f]", policy, d->key,
                       v, d->lo, d->hi);
    case PARAM_FLOAT:
        return eb_fail(e, "policy %s: %s=%s: expected a number in [%g, %g]", policy, d->key, v,
                       d->lo, d->hi);
    case PARAM_BOOL:
        return eb_fail(e, "policy %s: %s=%s: expected 0, 1, true or false", policy, d->key, v);
    case PARAM_CHOICE:
        return eb_fail(e, "policy %s: %s=%s: expected one of %s", policy, d->key, v, d->choices);
    }
    return -1;
}

/* Set parameter `key` (klen bytes) from the text value v (vlen bytes). */
static int set_param(const char *policy, struct policy_params *p, unsigned char *seen,
                     const char *key, size_t klen, const char *v, size_t vlen, struct eb_err *e)
{
    char k[64], val[128];
    if (klen == 0) return eb_fail(e, "policy %s: empty parameter name", policy);
    if (klen >= sizeof k) klen = sizeof k - 1;
    memcpy(k, key, klen);
    k[klen] = '\0';
    int i = policy_param_index(p, k);
    if (i < 0) {
        char keys[256];
        list_keys(p->defs, keys, sizeof keys);
        return eb_fail(e, "policy %s: unknown parameter '%s' (valid: %s)", policy, k, keys);
    }
    if (seen[i]) return eb_fail(e, "policy %s: parameter '%s' given twice", policy, k);
    seen[i] = 1;
    const struct param_def *d = &p->defs[i];
    if (vlen >= sizeof val) return range_error(policy, d, "(too long)", e);
    memcpy(val, v, vlen);
    val[vlen] = '\0';
    if (vlen == 0) return range_error(policy, d, "(empty)", e);
    double x;
    char *end;
    switch (d->type) {
    case PARAM_INT:
        errno = 0;
        x = (double)strtol(val, &end, 10);
        if (errno || *end || x < d->lo || x > d->hi) return range_error(policy, d, val, e);
        break;
    case PARAM_FLOAT:
        errno = 0;
        x = strtod(val, &end);
        if (errno || *end || !isfinite(x) || x < d->lo || x > d->hi)
            return range_error(policy, d, val, e);
        break;
    case PARAM_BOOL:
        if (!strcmp(val, "1") || !strcmp(val, "true")) x = 1;
        else if (!strcmp(val, "0") || !strcmp(val, "false")) x = 0;
        else return range_error(policy, d, val, e);
        break;
    case PARAM_CHOICE:
        x = choice_index(d->choices, val, vlen);
        if (x < 0) return range_error(policy, d, val, e);
        break;
    default:
        return range_error(policy, d, val, e);
    }
    p->val[i] = x;
    return 0;
}

/* Apply "key=value,key=value" (list of length len). */
static int apply_list(const char *policy, struct policy_params *p, unsigned char *seen,
                      const char *s, size_t len, struct eb_err *e)
{
    const char *end = s + len;
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *item_end = comma ? comma : end;
        const char *eq = memchr(s, '=', (size_t)(item_end - s));
        if (item_end == s) return eb_fail(e, "policy %s: empty parameter in the list", policy);
        if (!eq) {
            char keys[256];
            list_keys(p->defs, keys, sizeof keys);
            return eb_fail(e, "policy %s: '%.*s' is not key=value (valid keys: %s)", policy,
                           (int)(item_end - s), s, keys);
        }
        if (set_param(policy, p, seen, s, (size_t)(eq - s), eq + 1, (size_t)(item_end - eq - 1), e))
            return -1;
        if (!comma) break;
        s = comma + 1;
        if (s == end) return eb_fail(e, "policy %s: empty parameter in the list", policy);
    }
    return 0;
}

/* Defaults of the entry: the table's, then the preset's. */
static int init_params(const struct policy_entry *en, struct policy_params *p, struct eb_err *e)
{
    memset(p, 0, sizeof *p);
    p->defs = en->params;
    while (en->params[p->n].key) {
        if (p->n == POLICY_MAX_PARAMS)
            return eb_fail(e, "policy %s: more than %d parameters", en->name, POLICY_MAX_PARAMS);
        p->val[p->n] = en->params[p->n].def;
        p->n++;
    }
    if (en->preset) {
        unsigned char seen[POLICY_MAX_PARAMS] = {0};
        if (apply_list(en->name, p, seen, en->preset, strlen(en->preset), e)) return -1;
    }
    return 0;
}

static const struct policy_entry *find_entry(const char *name, size_t len, struct eb_err *e)
{
    for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++)
        if (strlen(ENTRIES[i].name) == len && !strncmp(ENTRIES[i].name, name, len))
            return &ENTRIES[i];
    char names[256];
    list_names(names, sizeof names);
    if (len == 0) eb_fail(e, "policy: empty policy name (known: %s)", names);
    else eb_fail(e, "policy: unknown policy '%.*s' (known: %s)", (int)len, name, names);
    return NULL;
}

int policy_parse(const char *spec, const struct policy_entry **entry, struct policy_params *out,
                 struct eb_err *e)
{
    if (!spec) return eb_fail(e, "policy: no policy given");
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const struct policy_entry *en = find_entry(spec, nlen, e);
    if (!en || init_params(en, out, e)) return -1;
    if (colon) {
        unsigned char seen[POLICY_MAX_PARAMS] = {0};
        if (colon[1] == '\0') return eb_fail(e, "policy %s: nothing after ':'", en->name);
        if (apply_list(en->name, out, seen, colon + 1, strlen(colon + 1), e)) return -1;
    }
    *entry = en;
    return 0;
}

static int set_json(const char *policy, struct policy_params *p, unsigned char *seen,
                    const cJSON *item, struct eb_err *e)
{
    char buf[64];
    const char *v = buf;
    if (cJSON_IsString(item)) v = item->valuestring;
    else if (cJSON_IsBool(item)) v = cJSON_IsTrue(item) ? "1" : "0";
    else if (cJSON_IsNumber(item)) snprintf(buf, sizeof buf, "%.17g", item->valuedouble);
    else return eb_fail(e, "policy %s: parameter '%s' must be a number, a bool or a string",
                        policy, item->string);
    /* An integral JSON number for an int parameter prints without a point. */
    return set_param(policy, p, seen, item->string, strlen(item->string), v, strlen(v), e);
}

int policy_parse_json(const cJSON *j, const struct policy_entry **entry,
                      struct policy_params *out, struct eb_err *e)
{
    if (cJSON_IsString(j)) return policy_parse(j->valuestring, entry, out, e);
    if (!cJSON_IsObject(j))
        return eb_fail(e, "policy: expected a string \"NAME[:key=value,...]\" or an object with "
                          "\"name\"");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (!cJSON_IsString(name)) return eb_fail(e, "policy: the object has no string \"name\"");
    const struct policy_entry *en = find_entry(name->valuestring, strlen(name->valuestring), e);
    if (!en || init_params(en, out, e)) return -1;
    unsigned char seen[POLICY_MAX_PARAMS] = {0};
    const cJSON *item;
    cJSON_ArrayForEach(item, j) {
        if (!strcmp(item->string, "name")) continue;
        if (!strcmp(item->string, "params")) {
            if (!cJSON_IsObject(item))
                return eb_fail(e, "policy %s: \"params\" must be an object", en->name);
            const cJSON *sub;
            cJSON_ArrayForEach(sub, item) if (set_json(en->name, out, seen, sub, e)) return -1;
            continue;
        }
        if (set_json(en->name, out, seen, item, e)) return -1;
    }
    *entry = en;
    return 0;
}

void policy_params_format(const struct policy_entry *entry, const struct policy_params *p,
                          char *buf, size_t size)
{
    size_t off = (size_t)snprintf(buf, size, "%s", entry->name);
    for (int i = 0; i < p->n && off < size; i++) {
        const struct param_def *d = &p->defs[i];
        char cb[32];
        if (d->type == PARAM_CHOICE)
            off += (size_t)snprintf(buf + off, size - off, "%s%s=%s", i ? "," : ":", d->key,
                                    policy_choice_name(d->choices, (int)p->val[i], cb, sizeof cb));
        else
            off += (size_t)snprintf(buf + off, size - off, "%s%s=%.10g", i ? "," : ":", d->key,
                                    p->val[i]);
    }
}

int policy_instantiate(const struct policy_entry *entry, const struct policy_params *params,
                       const struct policy_model *m, struct policy **out, struct eb_err *e)
{
    *out = NULL;
    if (m->n_layer < 1 || m->n_head < 1 || m->n_kv < 1 || m->head_dim < 1 ||
        m->n_head % m->n_kv != 0)
        return eb_fail(e, "policy %s: bad model shape (%d layers, %d heads, %d kv heads, head_dim "
                          "%d)", entry->name, m->n_layer, m->n_head, m->n_kv, m->head_dim);
    struct policy *p = eb_calloc(1, sizeof *p, e);
    if (!p) return -1;
    p->ops = entry->ops;
    p->params = *params;
    policy_params_format(entry, params, p->spec, sizeof p->spec);
    if (entry->ops->create(params, m, &p->self, &p->info, e)) {
        eb_wrap(e, entry->name);
        free(p);
        return -1;
    }
    if ((p->info.schedule == POLICY_NEVER) != policy_keeps_all(entry, params)) {
        policy_free(p);
        return eb_fail(e, "policy %s: its registry row and its schedule disagree on whether it "
                          "evicts", entry->name);
    }
    *out = p;
    return 0;
}

int policy_create(const char *spec, const struct policy_model *m, struct policy **out,
                  struct eb_err *e)
{
    const struct policy_entry *en;
    struct policy_params pp;
    *out = NULL;
    if (policy_parse(spec, &en, &pp, e)) return -1;
    return policy_instantiate(en, &pp, m, out, e);
}

int policy_trace_stats(const struct policy *p, int seq, struct policy_trace_stats *out)
{
    memset(out, 0, sizeof *out);
    return p->ops->trace_stats ? p->ops->trace_stats(p->self, seq, out) : -1;
}

int policy_trace_sentences(const struct policy *p, int seq, struct sent_info **out, int *n,
                           struct eb_err *e)
{
    *out = NULL;
    *n = 0;
    return p->ops->trace_sentences ? p->ops->trace_sentences(p->self, seq, out, n, e) : 1;
}

void policy_free(struct policy *p)
{
    if (!p) return;
    if (p->ops && p->ops->destroy) p->ops->destroy(p->self);
    free(p);
}
