/* knorm.c - KNorm (Devoto et al., 2024): keep the keys of lowest L2 norm, no
 * window.  NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/knorm_press.py (score = -|k|), scorer_press.py (topk),
 * decoding_press.py (DecodingPress: no compression at the prompt; every
 * compression_interval-th decoding forward, here divide_length, compresses
 * to target_size, here the budget: divide_decode_only). */
#include "policies.h"
#include "select_batch.h"

static int knorm_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                       int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct scored_policy *s = self;
    if (score_key_norms(&s->sel.buf, cv, layer, kv_head, n_cand, z, e)) return -1;
    for (int j = 0; j < n_cand; j++) z[j] = -z[j];
    return 0;
}

static const struct scorer knorm_scorer = {.score = knorm_score, .order = KEEP_BY_POSITION,
    .use_pads = 1, .pads = PAD_EVICT_FIRST, .pad_score = PAD_SCORE_H2O};

static int knorm_create(const struct policy_params *p, const struct policy_model *m, void **self,
                        struct policy_info *info, struct eb_err *e)
{
    (void)m;
    if (scored_policy_create(&knorm_scorer, 0, 0, p, self, info, e)) return -1;
    info->divide_decode_only = 1;
    return 0;
}

static int knorm_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    (void)budget;
    const struct scored_policy *s = self;
    if (!select_batch_plan_of(&s->sc, s->n_recent, out)) return 0;
    out->score = BATCH_SCORE_KNORM;
    return 1;
}

const struct policy_ops knorm_ops = {.name = "knorm", .create = knorm_create,
    .destroy = scored_policy_destroy, .select = scored_policy_select,
    .batch_plan = knorm_batch_plan};
