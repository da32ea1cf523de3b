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

/* One row per name a policy is run under (presets included), in the order
 * `evictbench` lists them.  How figures and tables show a name is not here
 * but in harness/report/policy_style.c. */
static const struct policy_entry ENTRIES[] = {
    {.name = "fullkv",
     .summary = "no eviction",
     .ops = &fullkv_ops, .params = fullkv_params, .keeps_all = 1},
    {.name = "streamingllm",
     .summary = "attention sinks + the most recent tokens",
     .ops = &streamingllm_ops, .params = streamingllm_params},
    {.name = "h2o",
     .summary = "original H2O: accumulated attention per head, evicts every step, heavy/recent "
                "split",
     .ops = &h2o_ops, .params = h2o_params},
    {.name = "h2o-rkv",
     .summary = "H2O as the R-KV/SkipKV baselines run it: last-query score, one set per layer, "
                "every divide_length steps",
     .ops = &h2o_rkv_ops, .params = h2o_rkv_params},
    {.name = "snapkv",
     .summary = "original SnapKV: the prompt compressed once at prefill (window 32, avg-pool 5)",
     .ops = &snapkv_ops, .params = snapkv_params},
    {.name = "snapkv-decode",
     .summary = "R-KV's decode-time SnapKV: window 8, max-pool 7, every divide_length steps",
     .ops = &snapkv_ops, .params = snapkv_params,
     .preset = "window=8,kernel=7,pool=max,softmax=candidates,schedule=divide"},
    {.name = "rkv",
     .summary = "R-KV: lambda * importance - (1 - lambda) * redundancy",
     .ops = &rkv_ops, .params = rkv_params},
    {.name = "rkv-code",
     .summary = "R-KV with the released code's default lambda = 0.07",
     .ops = &rkv_ops, .params = rkv_params, .preset = "lambda=0.07"},
    {.name = "vase-attnv",
     .summary = "VaSE-AttnV: the B/4 largest value ranges kept, the rest sampled by window "
                "attention; every 64 steps once over B",
     .ops = &vase_attnv_ops, .params = vase_attnv_params},
    {.name = "vase-attn",
     .summary = "VaSE's \"Attn\" baseline (SnapKV-decode): window-64 score, avg-pool 5, "
                "deterministic top-k, no sinks",
     .ops = &vase_attnv_ops, .params = vase_attnv_params, .preset = "protect=0,sinks=0,sample=0"},
    {.name = "vase-range-attn",
     .summary = "VaSE ablation range_attn: value-range protection + deterministic top-k "
                "attention, no sinks (as released)",
     .ops = &vase_attnv_ops, .params = vase_attnv_params, .preset = "sample=0,sinks=0"},
    {.name = "vase-attn-rkv",
     .summary = "VaSE's \"R-KV\" baseline (attn_rkv): 0.5 * window-64 attention (avg-pool 5) - "
                "0.5 * key redundancy without threshold, deterministic top-k",
     .ops = &vase_attnv_ops, .params = vase_attnv_params,
     .preset = "protect=0,sinks=0,sample=0,rkv_lambda=0.5"},
    {.name = "vase-dkv",
     .summary = "VaSE-DKV: top |kG|^2 |vG|^2, Gaussian sketch (d x 20) redrawn at each eviction",
     .ops = &vase_dkv_ops, .params = vase_dkv_params},
    {.name = "curdkv",
     .summary = "CurDKV as VaSE runs it: vase-dkv with one fixed sketch per layer",
     .ops = &vase_dkv_ops, .params = vase_dkv_params, .preset = "sketch=fixed"},
    {.name = "rpc",
     .summary = "Reasoning Path Compression: every P generated tokens keep (n+1)P/c by the last "
                "32 queries' attention; prompt kept",
     .ops = &rpc_ops, .params = rpc_params},
    {.name = "rpc-fixed",
     .summary = "RPC adapted to a fixed budget B (prompt and last 32 kept)",
     .ops = &rpc_ops, .params = rpc_params, .preset = "budget_mode=fixed"},
    {.name = "beaconkv",
     .summary = "BeaconKV (APPROXIMATE reconstruction): FPS beacon + recent queries, max "
                "aggregation; prompt and recent kept",
     .ops = &beaconkv_ops, .params = beaconkv_params},
    {.name = "seal",
     .summary = "SEAL: FullKV + steering h + c*V at split tokens inside the thought",
     .ops = &seal_ops, .params = seal_params, .keeps_all = 1},
    {.name = "skipkv",
     .summary = "SkipKV: R-KV + sentence redundancy penalty + adaptive steering; expects "
                "batching=grouped",
     .ops = &skipkv_ops, .params = skipkv_params, .preset = "batching=grouped"},
    {.name = "skipkv-sent",
     .summary = "SkipKV ablation: sentence scoring only (no steering)",
     .ops = &skipkv_ops, .params = skipkv_params, .preset = "steer=0"},
    {.name = "skipkv-sent-steer",
     .summary = "SkipKV ablation: sentence scoring + adaptive steering, no grouping",
     .ops = &skipkv_ops, .params = skipkv_params},
    {.name = "seal-static",
     .summary = "SkipKV with static SEAL-style steering (gamma = 0)",
     .ops = &skipkv_ops, .params = skipkv_params, .preset = "gamma=0"},
    {.name = "fullkv-pss",
     .summary = "FullKV with SkipKV's sentence tracker: nothing evicted, PSS statistics and N_o "
                "recorded (tau 0.95: the statistics threshold, not a tuned eviction one)",
     .ops = &skipkv_ops, .params = skipkv_params, .preset = "evict=0,steer=0,tau=0.95",
     .keeps_all = 1},
    {.name = "knorm",
     .summary = "KNorm (kvpress): keep the keys of lowest L2 norm",
     .ops = &knorm_ops, .params = scored_policy_params},
    {.name = "tova",
     .summary = "TOVA (kvpress): the last query's attention, mean over heads, one set per layer",
     .ops = &tova_ops, .params = scored_policy_params},
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
    char names[320];
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
