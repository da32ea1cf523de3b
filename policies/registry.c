/* registry.c - the table of policies: one row per name a policy runs under,
 * the lookups by name, and building an instance from a resolved row. */
#include "registry.h"

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
extern const struct policy_ops random_ops;
extern const struct param_def random_params[];
extern const struct policy_ops keydiff_ops;
extern const struct policy_ops lagkv_ops;
extern const struct param_def lagkv_params[];
extern const struct policy_ops expected_attention_ops;
extern const struct param_def expected_attention_params[];

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
    {"random", "kvpress RandomPress: generated slots evicted at random (seeded), prompt kept",
     &random_ops, random_params, NULL, {"Random", 0xB0B0B0, 6, 0}, 0},
    {"keydiff", "KeyDiff (kvpress): keep the keys least similar to the mean key direction",
     &keydiff_ops, scored_policy_params, NULL, {"KeyDiff", 0xBCBD22, 7, 0}, 0},
    {"lagkv", "LagKV (kvpress): each lag partition scored by the next one's min/max",
     &lagkv_ops, lagkv_params, NULL, {"LagKV", 0x9467BD, 8, 0}, 0},
    {"expected-attention", "Expected Attention (kvpress): the attention the next queries are "
                           "expected to pay, from the recent queries' mean and covariance",
     &expected_attention_ops, expected_attention_params, NULL,
     {"Expected Attention", 0x2CA02C, 10, 0}, 0},
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

const struct policy_entry *policy_registry_find_n(const char *name, size_t len,
                                                  struct eb_err *e)
{
    size_t n = sizeof ENTRIES / sizeof ENTRIES[0], off = 0;
    for (size_t i = 0; i < n; i++)
        if (strlen(ENTRIES[i].name) == len && !strncmp(ENTRIES[i].name, name, len))
            return &ENTRIES[i];
    if (!e) return NULL;
    char names[512];
    names[0] = '\0';
    for (size_t i = 0; i < n && off < sizeof names; i++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "",
                                ENTRIES[i].name);
    if (len == 0) eb_fail(e, "policy: empty policy name (known: %s)", names);
    else eb_fail(e, "policy: unknown policy '%.*s' (known: %s)", (int)len, name, names);
    return NULL;
}

int policy_spec_keeps_all(const char *spec)
{
    const struct policy_entry *en = policy_registry_find_n(spec, strcspn(spec, ":"), NULL);
    return en ? en->keeps_all : 0;
}

int policy_keeps_all(const struct policy_entry *entry, const struct policy_params *p)
{
    for (int i = 0; p && i < p->n; i++)
        if (!strcmp(p->def[i]->key, "evict") && p->val[i] == 0) return 1;
    return entry->keeps_all;
}

const char *policy_display_name(const char *name)
{
    if (!name) return "?";
    const struct policy_entry *en = policy_registry_find(name);
    return en && en->style.display ? en->style.display : name;
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
