/* knorm.c - KNorm (Devoto et al., 2024): keep the keys of lowest L2 norm, no
 * window.  NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/knorm_press.py (score = -|k|), scorer_press.py (topk),
 * decoding_press.py (DecodingPress: no compression at the prompt; every
 * compression_interval-th decoding forward, here divide_length, compresses
 * to target_size, here the budget: POLICY_DECODING). */
#include "policies.h"
#include "row.h"

static int knorm_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    const double *norm = ctx_key_norms(c, e);
    if (!norm) return -1;
    for (int j = 0; j < c->n_cand; j++) z[j] = -norm[j];
    return 0;
}

/* The whole batch: the backend's key norms (BATCH_SCORE_KNORM). */
static int knorm_batch(const void *prm, const struct row_config *c, struct batch_plan *out)
{
    (void)prm; (void)c;
    out->score = BATCH_SCORE_KNORM;
    return 1;
}

const struct scorer_row knorm_row = {.score = knorm_score, .configure = row_configure_decoding,
    .base.sel = {.order = KEEP_BY_POSITION, .use_pads = 1, .pads = PAD_EVICT_FIRST,
                 .pad_score = PAD_SCORE_H2O},
    .batch = knorm_batch};
