/* snapkv.c - SnapKV (specs/policies.md §4) as a scorer, both forms: snapkv,
 * the original (once at prefill when the prompt holds >= B tokens: the last
 * 32 prompt queries, softmax over all keys, causal inside the window,
 * avg-pool 5), and snapkv-decode, R-KV's decode-time form (a preset: window
 * 8, softmax over the non-window keys, max-pool 7, every divide_length
 * tokens; R-KV with lambda = 1).  Then topk(B - window) per kv head plus the
 * window.  The mean over the window's queries ranks as the original's sum;
 * a group's logits are pooled before the softmax (gqa), as a per-kv-head
 * cache keeps one set per group.  Selector options: select_params.h. */
#include "policies.h"
#include "select_batch.h"
#include "select_params.h"

/* The values of snapkv_params (param_def.offset). */
struct snapkv_params {
    struct select_opts sel;   /* first: select_params's offsets */
    int window;
    int kernel;
    int pool;
    int softmax;
    int schedule;
    int divide_length;
    int gqa;
};

const struct param_def snapkv_params[] = {
    {"window", PARAM_INT, 32, 1, 4096, NULL, "observation queries; the last window slots are kept",
     offsetof(struct snapkv_params, window)},
    {"kernel", PARAM_INT, 5, 1, 63, NULL, "pooling kernel (odd)",
     offsetof(struct snapkv_params, kernel)},
    {"pool", PARAM_CHOICE, 1, 0, 1, "max|avg", "pooling of the scores along positions",
     offsetof(struct snapkv_params, pool)},
    {"softmax", PARAM_CHOICE, 0, 0, 1, "all|candidates", "over all keys or the non-window ones",
     offsetof(struct snapkv_params, softmax)},
    {"schedule", PARAM_CHOICE, 0, 0, 1, "prefill|divide", "at prefill, or every divide_length too",
     offsetof(struct snapkv_params, schedule)},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct snapkv_params, divide_length)},
    {"gqa", PARAM_CHOICE, 0, 0, 1, "max|mean", "pooling of a group's logits before the softmax",
     offsetof(struct snapkv_params, gqa)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

struct snapkv {
    struct scored_policy base;   /* first: scored_policy_select and _destroy run it */
    struct importance_opts imp;
};

static int snapkv_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                        int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct snapkv *s = self;
    return score_importance(&s->base.sel.buf, cv, layer, kv_head, &s->imp, n_cand, z, e);
}

static int snapkv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                         struct policy_info *info, struct eb_err *e)
{
    (void)m;
    int kernel = policy_param_int(p, "kernel"), window = policy_param_int(p, "window");
    if (kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", kernel);
    enum policy_schedule when = policy_param_int(p, "schedule") ? POLICY_DIVIDE
                                                                : POLICY_PREFILL_ONLY;
    if (select_params_info(p, window, when, info, e)) return -1;
    struct snapkv *s = *self = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->imp = (struct importance_opts){.window = window, .kernel = kernel,
        .softmax_all = policy_param_int(p, "softmax") == 0,
        .gqa = policy_param_int(p, "gqa") == 0 ? SCORE_GQA_MAX : SCORE_GQA_MEAN,
        .pool = policy_param_int(p, "pool") == 0 ? SCORE_POOL_MAX : SCORE_POOL_AVG};
    select_params_scorer(p, snapkv_score, &s->base.sc);
    s->base.n_recent = window;
    return 0;
}

static int snapkv_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    (void)budget;
    const struct snapkv *s = self;
    if (!select_batch_plan_of(&s->base.sc, s->base.n_recent, out)) return 0;
    out->score = BATCH_SCORE_IMP;
    out->imp = s->imp;
    return 1;
}

static const struct scorer *snapkv_scorer(const void *self, int *n_recent)
{
    const struct snapkv *s = self;
    *n_recent = s->base.n_recent;
    return &s->base.sc;
}

const struct policy_ops snapkv_ops = {.name = "snapkv", .create = snapkv_create,
    .destroy = scored_policy_destroy, .select = scored_policy_select,
    .batch_plan = snapkv_batch_plan,
    .shared_params = select_params, .window_param = "window", .scorer = snapkv_scorer};
