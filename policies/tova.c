/* tova.c - TOVA (Oren et al., 2024): the last query's attention, averaged
 * over all heads, one set per layer; the newest slot is always kept.
 * NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/tova_press.py (softmax over all keys, mean over heads, the
 * last key padded with max + 1), snapkv_press.py (compute_window_attention,
 * window 1: the current token's query), scorer_press.py (topk),
 * decoding_press.py (DecodingPress: no compression at the prompt; every
 * compression_interval-th decoding forward, here divide_length:
 * POLICY_DECODING). */
#include "policies.h"
#include "row.h"

static int tova_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    const double *attn = ctx_last_query_attn(c, e);
    if (!attn) return -1;
    for (int j = 0; j < c->n_cand; j++) z[j] = attn[j];
    return 0;
}

/* The whole batch: last_query_attn_batch gives each layer its heads' mean. */
static int tova_batch(const void *prm, const struct row_config *c, struct batch_plan *out)
{
    (void)prm; (void)c;
    out->shared = BATCH_SHARED_LAST_QUERY;
    out->imp.window = 1; /* the last recorded query */
    return 1;
}

const struct scorer_row tova_row = {.score = tova_score, .configure = row_configure_decoding,
    .base = {.sel = {.per_layer = 1, .order = KEEP_BY_POSITION, .use_pads = 1,
                     .pads = PAD_EVICT_FIRST, .pad_score = PAD_SCORE},
             .info = {.needs = POLICY_NEED_RECENT_Q, .q_window = 1, .window = 1}},
    .batch = tova_batch};
