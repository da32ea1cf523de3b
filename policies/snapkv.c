/* snapkv.c - SnapKV (specs/policies.md §4), both forms from one scorer:
 *
 *   snapkv         the original: once, at prefill, when the prompt holds >= B
 *                  tokens; the last 32 prompt queries score every key with
 *                  a softmax over all keys (causal inside the window), summed
 *                  over the queries, average-pooled with kernel 5;
 *   snapkv-decode  R-KV's decode-time adaptation (a registry preset):
 *                  window 8, softmax over the non-window keys, mean over the
 *                  queries, max-pool 7, every divide_length tokens (= R-KV
 *                  with lambda = 1).
 *
 * Then topk(B - window) per kv head plus the window.  We take the mean over
 * the window queries in both forms: the original's sum is window x the mean,
 * which ranks the same.  The original repeats K/V to the query heads and
 * keeps a set per query head; a per-kv-head cache needs one set per group, so
 * the group's logits are pooled before the softmax (gqa=max|mean). */
#include <stdlib.h>

#include "policies.h"
#include "select.h"

const struct param_def snapkv_params[] = {
    {"window", PARAM_INT, 32, 1, 4096, NULL, "observation queries; the last window slots are kept"},
    {"kernel", PARAM_INT, 5, 1, 63, NULL, "pooling kernel (odd)"},
    {"pool", PARAM_CHOICE, 1, 0, 1, "max|avg", "pooling of the scores along positions"},
    {"softmax", PARAM_CHOICE, 0, 0, 1, "all|candidates",
     "softmax over all keys (causal) or over the non-window keys only"},
    {"schedule", PARAM_CHOICE, 0, 0, 1, "prefill|divide",
     "compress once at prefill, or also every divide_length tokens"},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens"},
    {"gqa", PARAM_CHOICE, 0, 0, 1, "max|mean", "pooling of a group's logits before the softmax"},
    {"pad_policy", PARAM_CHOICE, 0, 0, 1, PAD_CHOICES, "pad slots: always kept or evicted first"},
    {"cache_order", PARAM_CHOICE, 0, 0, 1, KEEP_ORDER_CHOICES,
     "kept slots in top-k score order (released code) or by position"},
    {"score_dtype", PARAM_CHOICE, 0, 0, 1, SCORE_DTYPE_CHOICES,
     "f32, or bf16: importance, redundancy and their mix rounded as the released code stores them"},
    {"compat", PARAM_CHOICE, 0, 0, 1, COMPAT_CHOICES,
     "released (schedule=divide): the step counter runs on across samples as in R-KV's "
     "modeling.py"},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL},
};

struct snapkv {
    struct importance_opts imp;
    struct scorer sc;
    struct selector sel;
};

static int snapkv_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                        int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct snapkv *s = self;
    return score_importance(&s->sel.buf, cv, layer, kv_head, &s->imp, n_cand, z, e);
}

static int snapkv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                         struct policy_info *info, struct eb_err *e)
{
    (void)m;
    int kernel = policy_param_int(p, "kernel");
    if (kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", kernel);
    int compat = policy_param_int(p, "compat") == 1;
    if (compat && policy_param_int(p, "schedule") == 0)
        return eb_fail(e, "compat=released reproduces R-KV's step counter: it needs "
                          "schedule=divide (snapkv-decode)");
    struct snapkv *s = *self = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->imp = (struct importance_opts){
        .window = policy_param_int(p, "window"),
        .softmax_all = policy_param_int(p, "softmax") == 0,
        .gqa = policy_param_int(p, "gqa") == 0 ? SCORE_GQA_MAX : SCORE_GQA_MEAN,
        .kernel = kernel,
        .pool = policy_param_int(p, "pool") == 0 ? SCORE_POOL_MAX : SCORE_POOL_AVG,
    };
    s->sc = (struct scorer){
        .score = snapkv_score, .use_pads = 1, .pad_score = PAD_SCORE,
        .pads = policy_param_int(p, "pad_policy") == 0 ? PAD_KEEP : PAD_EVICT_FIRST,
        .order = policy_param_int(p, "cache_order") == 0 ? KEEP_BY_SCORE : KEEP_BY_POSITION,
        .dtype = policy_param_int(p, "score_dtype") == 1 ? SCORE_BF16 : SCORE_F32,
    };
    *info = (struct policy_info){
        .needs = POLICY_NEED_RECENT_Q, .q_window = s->imp.window, .window = s->imp.window,
        .schedule = policy_param_int(p, "schedule") == 0 ? POLICY_PREFILL_ONLY : POLICY_DIVIDE,
        .divide_length = policy_param_int(p, "divide_length"),
        /* compat=released: R-KV's modeling.py never resets `self.length` */
        .divide_carry_flag = compat, .divide_carry_count = compat,
    };
    return 0;
}

static void snapkv_destroy(void *self)
{
    if (self) selector_free(&((struct snapkv *)self)->sel);
    free(self);
}

static int snapkv_select(void *self, int seq, const struct cache_view *cv, int budget,
                         struct keep_set *out, struct eb_err *e)
{
    struct snapkv *s = self;
    return select_by_score(&s->sc, s, &s->sel, seq, cv, budget, s->imp.window, out, e);
}

const struct policy_ops snapkv_ops = {
    .name = "snapkv",
    .create = snapkv_create,
    .destroy = snapkv_destroy,
    .select = snapkv_select,
};
