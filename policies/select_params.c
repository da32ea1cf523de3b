/* select_params.c - the selector's common options as a shared parameter
 * table, and their reading (see select_params.h). */
#include "select_params.h"

const struct param_def select_params[] = {
    {"pad_policy", PARAM_CHOICE, 0, 0, 1, PAD_CHOICES, "pad slots: always kept or evicted first",
     offsetof(struct select_opts, pad_policy)},
    {"cache_order", PARAM_CHOICE, 0, 0, 1, KEEP_ORDER_CHOICES,
     "kept slots in top-k score order (released code) or by position",
     offsetof(struct select_opts, cache_order)},
    {"score_dtype", PARAM_CHOICE, 0, 0, 1, SCORE_DTYPE_CHOICES,
     "f32, or bf16: importance, redundancy and their mix rounded as the released code stores them",
     offsetof(struct select_opts, score_dtype)},
    {"compat", PARAM_CHOICE, 0, 0, 1, COMPAT_CHOICES,
     "released: the step counter runs on across samples as in R-KV's modeling.py (a later "
     "prompt is compressed at prefill only if the count left is divisible; snapkv: with "
     "schedule=divide)", offsetof(struct select_opts, compat)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

void select_params_scorer(const struct select_opts *o,
                          int (*score)(void *self, int seq, const struct cache_view *cv,
                                       int layer, int kv_head, int n_cand, double *z,
                                       struct eb_err *e),
                          struct scorer *sc)
{
    *sc = (struct scorer){
        .score = score, .use_pads = 1, .pad_score = PAD_SCORE,
        .pads = o->pad_policy == 0 ? PAD_KEEP : PAD_EVICT_FIRST,
        .order = o->cache_order == 0 ? KEEP_BY_SCORE : KEEP_BY_POSITION,
        .dtype = o->score_dtype == 1 ? SCORE_BF16 : SCORE_F32,
    };
}

int select_params_info(const struct select_opts *o, int window, int divide_length,
                       enum policy_schedule schedule, struct policy_info *info, struct eb_err *e)
{
    int released = o->compat == 1;
    if (released && schedule != POLICY_DIVIDE)
        return eb_fail(e, "compat=released reproduces R-KV's step counter: it needs "
                          "schedule=divide (snapkv-decode)");
    *info = (struct policy_info){
        .needs = POLICY_NEED_RECENT_Q, .q_window = window, .window = window,
        .schedule = schedule, .divide_length = divide_length,
        /* compat=released: modeling.py's `self.length` is never reset */
        .divide_carry_flag = released, .divide_carry_count = released,
    };
    return 0;
}
