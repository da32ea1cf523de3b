/* registry.c - the table of policies: one row per name a policy runs under.
 * The lookups by name are registry_find.c, instances policy_instance.c.
 *
 * This file is the table alone, and the run key's code hash leaves it out
 * (tools/code_hash.sh): a row enters a run's key through what it resolves
 * to, its name, every parameter and the hashes of the files its .sources
 * names, so a new row changes no other policy's key. */
#include "registry.h"

#include "policies.h"
#include "row.h"

/* Each policy's vtable and parameter table, defined in its own file. */
extern const struct scorer_row streamingllm_row, h2o_row, h2o_rkv_row, snapkv_row, rkv_row,
    knorm_row, tova_row, keydiff_row, seal_row, skipkv_row;
extern const struct policy_ops fullkv_ops, vase_attnv_ops, vase_dkv_ops, rpc_ops, beaconkv_ops;
extern const struct param_def fullkv_params[], streamingllm_params[], h2o_params[],
    h2o_rkv_params[], snapkv_params[], rkv_params[], vase_attnv_params[], vase_dkv_params[],
    rpc_params[], beaconkv_params[], seal_params[], skipkv_params[], scored_policy_params[];
extern const struct policy_ops random_ops;
extern const struct param_def random_params[];
extern const struct policy_ops lagkv_ops;
extern const struct param_def lagkv_params[];
extern const struct policy_ops expected_attention_ops;
extern const struct param_def expected_attention_params[];
extern const struct policy_ops adakv_ops, pyramidkv_ops;
extern const struct param_def adakv_params[], pyramidkv_params[];
extern const struct policy_ops scheduled_ops;
extern const struct param_def scheduled_params[];
extern const struct policy_ops lazyeviction_ops;
extern const struct param_def lazyeviction_params[];

/* .sources: the files of policies/ that are this policy's own (its vtable,
 * parameter table and every file of its own these use), space-separated;
 * helpers that several policies share (select, score, sentences, steering)
 * are named by no row and so join every key.  A file named by a row must be
 * named by every row whose code uses it (tests/test_runkey.c checks the
 * includes). */
#define VASE_SOURCES "vase.c vase.h vase_priv.h vase_attnv.c vase_dkv.c vase_rules.c vase_state.c"
#define SKIPKV_SOURCES "skipkv.c rkv.c rkv.h"   /* SkipKV scores with R-KV's code */
/* a wrapper (wrap.h, scheduled.c) over any policy its `over` names */
#define WRAP_SOURCES                                                                            \
    "wrap.c wrap.h snapkv.c rkv.c rkv.h knorm.c keydiff.c tova.c streamingllm.c h2o.c random.c " \
    "lagkv.c expected_attention.c"

/* One row per name a policy is run under (presets included), in the order
 * `evictbench` lists them.  How figures and tables show a name is not here
 * but in harness/report/policy_style.c. */
static const struct policy_entry ENTRIES[] = {
    {.name = "fullkv",
     .summary = "no eviction",
     .ops = &fullkv_ops, .params = fullkv_params, .keeps_all = 1, .sources = "fullkv.c"},
    {.name = "streamingllm",
     .summary = "attention sinks + the most recent tokens",
     .row = &streamingllm_row, .params = streamingllm_params, .sources = "streamingllm.c"},
    {.name = "h2o",
     .summary = "original H2O: accumulated attention per head, evicts every step, heavy/recent "
                "split",
     .row = &h2o_row, .params = h2o_params, .sources = "h2o.c"},
    {.name = "h2o-rkv",
     .summary = "H2O as the R-KV/SkipKV baselines run it: last-query score, one set per layer, "
                "every divide_length steps",
     .row = &h2o_rkv_row, .params = h2o_rkv_params, .sources = "h2o.c"},
    {.name = "snapkv",
     .summary = "original SnapKV: the prompt compressed once at prefill (window 32, avg-pool 5)",
     .row = &snapkv_row, .params = snapkv_params, .sources = "snapkv.c"},
    {.name = "snapkv-decode",
     .summary = "R-KV's decode-time SnapKV: window 8, max-pool 7, every divide_length steps",
     .row = &snapkv_row, .params = snapkv_params,
     .preset = "window=8,kernel=7,pool=max,softmax=candidates,schedule=divide",
     .sources = "snapkv.c"},
    {.name = "rkv",
     .summary = "R-KV: lambda * importance - (1 - lambda) * redundancy",
     .row = &rkv_row, .params = rkv_params, .sources = "rkv.c rkv.h"},
    {.name = "rkv-code",
     .summary = "R-KV with the released code's default lambda = 0.07",
     .row = &rkv_row, .params = rkv_params, .preset = "lambda=0.07", .sources = "rkv.c rkv.h"},
    {.name = "vase-attnv",
     .summary = "VaSE-AttnV: the B/4 largest value ranges kept, the rest sampled by window "
                "attention; every 64 steps once over B",
     .ops = &vase_attnv_ops, .params = vase_attnv_params, .sources = VASE_SOURCES},
    {.name = "vase-attn",
     .summary = "VaSE's \"Attn\" baseline (SnapKV-decode): window-64 score, avg-pool 5, "
                "deterministic top-k, no sinks",
     .ops = &vase_attnv_ops, .params = vase_attnv_params,
     .preset = "protect=0,sinks=0,sample=0", .sources = VASE_SOURCES},
    {.name = "vase-range-attn",
     .summary = "VaSE ablation range_attn: value-range protection + deterministic top-k "
                "attention, no sinks (as released)",
     .ops = &vase_attnv_ops, .params = vase_attnv_params,
     .preset = "sample=0,sinks=0", .sources = VASE_SOURCES},
    {.name = "vase-attn-rkv",
     .summary = "VaSE's \"R-KV\" baseline (attn_rkv): 0.5 * window-64 attention (avg-pool 5) - "
                "0.5 * key redundancy without threshold, deterministic top-k",
     .ops = &vase_attnv_ops, .params = vase_attnv_params,
     .preset = "protect=0,sinks=0,sample=0,rkv_lambda=0.5", .sources = VASE_SOURCES},
    {.name = "vase-dkv",
     .summary = "VaSE-DKV: top |kG|^2 |vG|^2, Gaussian sketch (d x 20) redrawn at each eviction",
     .ops = &vase_dkv_ops, .params = vase_dkv_params, .sources = VASE_SOURCES},
    {.name = "curdkv",
     .summary = "CurDKV as VaSE runs it: vase-dkv with one fixed sketch per layer",
     .ops = &vase_dkv_ops, .params = vase_dkv_params,
     .preset = "sketch=fixed", .sources = VASE_SOURCES},
    {.name = "rpc",
     .summary = "Reasoning Path Compression: every P generated tokens keep (n+1)P/c by the last "
                "32 queries' attention; prompt kept",
     .ops = &rpc_ops, .params = rpc_params, .sources = "rpc.c"},
    {.name = "rpc-fixed",
     .summary = "RPC adapted to a fixed budget B (prompt and last 32 kept)",
     .ops = &rpc_ops, .params = rpc_params, .preset = "budget_mode=fixed", .sources = "rpc.c"},
    {.name = "beaconkv",
     .summary = "BeaconKV (APPROXIMATE reconstruction): FPS beacon + recent queries, max "
                "aggregation; prompt and recent kept",
     .ops = &beaconkv_ops, .params = beaconkv_params,
     .sources = "beaconkv.c beaconkv.h beaconkv_priv.h beacon_buffer.c beacon_fps.c"},
    {.name = "seal",
     .summary = "SEAL: FullKV + steering h + c*V at split tokens inside the thought",
     .row = &seal_row, .params = seal_params, .keeps_all = 1, .sources = "seal.c"},
    {.name = "skipkv",
     .summary = "SkipKV: R-KV + sentence redundancy penalty + adaptive steering; expects "
                "batching=grouped",
     .row = &skipkv_row, .params = skipkv_params, .preset = "batching=grouped",
     .sources = SKIPKV_SOURCES},
    {.name = "skipkv-sent",
     .summary = "SkipKV ablation: sentence scoring only (no steering)",
     .row = &skipkv_row, .params = skipkv_params, .preset = "steer=0",
     .sources = SKIPKV_SOURCES},
    {.name = "skipkv-sent-steer",
     .summary = "SkipKV ablation: sentence scoring + adaptive steering, no grouping",
     .row = &skipkv_row, .params = skipkv_params, .sources = SKIPKV_SOURCES},
    {.name = "seal-static",
     .summary = "SkipKV with static SEAL-style steering (gamma = 0)",
     .row = &skipkv_row, .params = skipkv_params, .preset = "gamma=0",
     .sources = SKIPKV_SOURCES},
    {.name = "fullkv-pss",
     .summary = "FullKV with SkipKV's sentence tracker: nothing evicted, PSS statistics and N_o "
                "recorded (tau 0.95: the statistics threshold, not a tuned eviction one)",
     .row = &skipkv_row, .params = skipkv_params, .preset = "evict=0,steer=0,tau=0.95",
     .keeps_all = 1, .sources = SKIPKV_SOURCES},
    {.name = "knorm",
     .summary = "KNorm (kvpress): keep the keys of lowest L2 norm",
     .row = &knorm_row, .params = scored_policy_params, .sources = "knorm.c"},
    {.name = "tova",
     .summary = "TOVA (kvpress): the last query's attention, mean over heads, one set per layer",
     .row = &tova_row, .params = scored_policy_params, .sources = "tova.c"},
    {.name = "random",
     .summary = "kvpress RandomPress: generated slots evicted at random (seeded), prompt kept",
     .ops = &random_ops, .params = random_params, .sources = "random.c"},
    {.name = "keydiff",
     .summary = "KeyDiff (kvpress): keep the keys least similar to the mean key direction",
     .row = &keydiff_row, .params = scored_policy_params, .sources = "keydiff.c"},
    {.name = "lagkv",
     .summary = "LagKV (kvpress): each lag partition scored by the next one's min/max",
     .ops = &lagkv_ops, .params = lagkv_params, .sources = "lagkv.c"},
    {.name = "expected-attention",
     .summary = "Expected Attention (kvpress): the attention the next queries are expected to "
                "pay, from the recent queries' mean and covariance",
     .ops = &expected_attention_ops, .params = expected_attention_params,
     .sources = "expected_attention.c"},
    {.name = "adakv-snapkv",
     .summary = "AdaKV (kvpress) over SnapKV: the layer's n_kv * B best slots across its heads, "
                "each head keeping its top alpha * B",
     .ops = &adakv_ops, .params = adakv_params, .preset = "over=snapkv,window=64",
     .sources = "adakv.c " WRAP_SOURCES},
    {.name = "adakv-rkv",
     .summary = "AdaKV over R-KV's score: head-adaptive budgets, the layer keeping n_kv * B",
     .ops = &adakv_ops, .params = adakv_params, .preset = "over=rkv,window=8",
     .sources = "adakv.c " WRAP_SOURCES},
    {.name = "pyramidkv",
     .summary = "PyramidKV (kvpress): SnapKV with per-layer budgets, more in lower layers "
                "(beta 20), B on average",
     .ops = &pyramidkv_ops, .params = pyramidkv_params, .sources = "pyramidkv.c " WRAP_SOURCES},
    {.name = "prefill",
     .summary = "a schedule over any policy (over=): the prompt compressed once",
     .ops = &scheduled_ops, .params = scheduled_params, .preset = "when=prefill",
     .sources = "scheduled.c " WRAP_SOURCES},
    {.name = "decoding",
     .summary = "kvpress DecodingPress over any policy (over=): every divide_length decoding "
                "forwards, never the prompt",
     .ops = &scheduled_ops, .params = scheduled_params, .sources = "scheduled.c " WRAP_SOURCES},
    {.name = "prefill-decoding",
     .summary = "kvpress PrefillDecodingPress over any policy (over=): the prompt, then every "
                "divide_length decoding forwards",
     .ops = &scheduled_ops, .params = scheduled_params, .preset = "when=prefill+decoding",
     .sources = "scheduled.c " WRAP_SOURCES},
    {.name = "lazyeviction",
     .summary = "LazyEviction: every W steps keep the W newest slots and those whose attention "
                "recurs, by the last recurrence and the longest interval between two",
     .ops = &lazyeviction_ops, .params = lazyeviction_params, .sources = "lazyeviction.c"},
};

const struct policy_entry *policy_registry(int *n)
{
    *n = (int)(sizeof ENTRIES / sizeof ENTRIES[0]);
    return ENTRIES;
}
