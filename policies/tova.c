/* tova.c - TOVA (Oren et al., 2024): the last query's attention, averaged
 * over all heads, one set per layer; the newest slot is always kept.
 * NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/tova_press.py (softmax over all keys, mean over heads, the
 * last key padded with max + 1), snapkv_press.py (compute_window_attention,
 * window 1: the current token's query), scorer_press.py (topk),
 * decoding_press.py (DecodingPress: no compression at the prompt; every
 * compression_interval-th decoding forward, here divide_length:
 * divide_decode_only). */
#include "policies.h"
#include "select_batch.h"

static int tova_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                      int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct scored_policy *s = self;
    return score_last_query_attn(&s->sel.buf, cv, layer, kv_head, n_cand, z, e);
}

static const struct scorer tova_scorer = {.score = tova_score, .per_layer = 1,
    .order = KEEP_BY_POSITION, .use_pads = 1, .pads = PAD_EVICT_FIRST, .pad_score = PAD_SCORE};

static int tova_create(const struct policy_params *p, const struct policy_model *m, void **self,
                       struct policy_info *info, struct eb_err *e)
{
    (void)m;
    if (scored_policy_create(&tova_scorer, 1, POLICY_NEED_RECENT_Q, p, self, info, e)) return -1;
    info->divide_decode_only = 1;
    return 0;
}

/* The whole batch: last_query_attn_batch gives each layer its heads' mean. */
static int tova_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    (void)budget;
    const struct scored_policy *s = self;
    if (!select_batch_plan_of(&s->sc, s->n_recent, out)) return 0;
    out->shared = BATCH_SHARED_LAST_QUERY;
    out->imp.window = 1; /* the last recorded query */
    return 1;
}

const struct policy_ops tova_ops = {.name = "tova", .create = tova_create,
    .destroy = scored_policy_destroy, .select = scored_policy_select,
    .batch_plan = tova_batch_plan};
