/* h2o.c - the two incompatible H2Os of specs/policies.md §3:
 *
 *   h2o      the original (heavy hitters): per kv head, an accumulated score
 *            per slot, the sum of the attention every query has paid it
 *            (prefill rows included); whenever a head holds more than B slots,
 *            keep the heavy_ratio * B best of the older slots plus the
 *            B - heavy slots most recent, i.e. one eviction per generated
 *            token.  The original targets multi-head attention; with GQA a
 *            slot's score is the mean over the group's query heads.
 *   h2o-rkv  the baseline the SkipKV and R-KV papers plot: every
 *            divide_length tokens once a head holds >= B slots, the last
 *            query's attention (GQA max over the group's logits, softmax over
 *            keys [0, L-1)), averaged over the kv heads, picks one token set
 *            shared by every head of the layer: topk(B - 1) plus the last
 *            token. */
#include "policies.h"
#include "row.h"
#include "select_params.h"

/* ---- h2o (accumulated) ---- */

/* The values of h2o_params (param_def.offset). */
struct h2o_params {
    double heavy_ratio;
    int pad_policy;
};

const struct param_def h2o_params[] = {
    {"heavy_ratio", PARAM_FLOAT, 0.5, 0, 0.99, NULL,
     "share of the budget for heavy hitters; the rest holds the most recent slots",
     offsetof(struct h2o_params, heavy_ratio)},
    {"pad_policy", PARAM_CHOICE, 0, 0, 1, PAD_CHOICES, "pad slots: always kept or evicted first",
     offsetof(struct h2o_params, pad_policy)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

/* The accumulated attention of the candidates: the row's sums (row.h). */
static int h2o_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    const double *sum = ctx_attn_sum(c, e);
    if (!sum) return -1;
    for (int j = 0; j < c->n_cand; j++) z[j] = sum[j];
    return 0;
}

static int h2o_configure(const void *prm, struct row_config *c, struct eb_err *e)
{
    (void)e;
    c->sel.pads = ((const struct h2o_params *)prm)->pad_policy == 0 ? PAD_KEEP : PAD_EVICT_FIRST;
    return 0;
}

/* The B - heavy most recent slots, heavy = heavy_ratio * B. */
static int h2o_recent(const void *prm, int budget)
{
    return budget - (int)(budget * ((const struct h2o_params *)prm)->heavy_ratio);
}

/* Batched by the row's host scores (row.c): the sums ranked on the device. */
const struct scorer_row h2o_row = {.score = h2o_score, .configure = h2o_configure,
    .recent = h2o_recent,
    .base = {.sel = {.evict_above = 1, .use_pads = 1, .pad_score = PAD_SCORE_H2O,
                     .order = KEEP_BY_POSITION},
             .info = {.needs = POLICY_NEED_ATTN_PROBS, .schedule = POLICY_EVERY_STEP}}};

/* ---- h2o-rkv (last query, shared per layer) ---- */

/* The values of h2o_rkv_params (param_def.offset). */
struct h2o_rkv_params {
    int divide_length;
    int gqa;
    int pad_policy;
    int cache_order;
    int score_dtype;
    int compat;
};

const struct param_def h2o_rkv_params[] = {
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct h2o_rkv_params, divide_length)},
    {"gqa", PARAM_CHOICE, 0, 0, 1, "max|mean", "pooling of a group's logits before the softmax",
     offsetof(struct h2o_rkv_params, gqa)},
    {"pad_policy", PARAM_CHOICE, 1, 0, 1, PAD_CHOICES,
     "pad slots: always kept or evicted first (released code: masked, score 0, go first)",
     offsetof(struct h2o_rkv_params, pad_policy)},
    {"cache_order", PARAM_CHOICE, 0, 0, 1, KEEP_ORDER_CHOICES,
     "kept slots in top-k score order (released code) or by position",
     offsetof(struct h2o_rkv_params, cache_order)},
    {"score_dtype", PARAM_CHOICE, 0, 0, 1, SCORE_DTYPE_CHOICES,
     "f32, or bf16: importance, redundancy and their mix rounded as the released code stores them",
     offsetof(struct h2o_rkv_params, score_dtype)},
    {"compat", PARAM_CHOICE, 0, 0, 1, COMPAT_CHOICES,
     "released: the step flag outlives a sample as in SkipKV's modeling_nhid.py (a later prompt "
     "is compressed at prefill only if the previous sample ended on a divisible count)",
     offsetof(struct h2o_rkv_params, compat)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

static struct importance_opts h2o_rkv_imp(const struct h2o_rkv_params *p)
{
    return (struct importance_opts){.window = 1, .softmax_all = 0,
        .gqa = p->gqa == 0 ? SCORE_GQA_MAX : SCORE_GQA_MEAN, .kernel = 1, .pool = SCORE_POOL_MAX};
}

/* The last query's attention of one kv head (the selector averages the layer's). */
static int h2o_rkv_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    struct importance_opts imp = h2o_rkv_imp(c->prm);
    const double *s = ctx_window_attn(c, &imp, e);
    if (!s) return -1;
    for (int j = 0; j < c->n_cand; j++) z[j] = s[j];
    return 0;
}

static int h2o_rkv_configure(const void *prm, struct row_config *c, struct eb_err *e)
{
    (void)e;
    const struct h2o_rkv_params *p = prm;
    struct select_opts o = {.pad_policy = p->pad_policy, .cache_order = p->cache_order,
                            .score_dtype = p->score_dtype, .compat = p->compat};
    select_params_scorer(&o, NULL, &c->sel);
    c->sel.per_layer = 1;
    c->info.divide_length = p->divide_length;
    /* compat=released: SkipKV's reset_for_new_sample resets the count, not the flag */
    c->info.divide_carry_flag = p->compat == 1;
    return 0;
}

/* The whole batch: each head's window importance, then head_mean_batch's
 * mean over the layer's heads. */
static int h2o_rkv_batch(const void *prm, const struct row_config *c, struct batch_plan *out)
{
    (void)c;
    out->shared = BATCH_SHARED_IMP_MEAN;
    out->imp = h2o_rkv_imp(prm);
    return 1;
}

const struct scorer_row h2o_rkv_row = {.score = h2o_rkv_score, .configure = h2o_rkv_configure,
    .batch = h2o_rkv_batch,
    .base.info = {.needs = POLICY_NEED_RECENT_Q, .q_window = 1, .window = 1,
                  .schedule = POLICY_DIVIDE}};
