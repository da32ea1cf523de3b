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
#include "row.h"
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

static struct importance_opts snapkv_imp(const struct snapkv_params *p)
{
    return (struct importance_opts){.window = p->window, .kernel = p->kernel,
        .softmax_all = p->softmax == 0, .gqa = p->gqa == 0 ? SCORE_GQA_MAX : SCORE_GQA_MEAN,
        .pool = p->pool == 0 ? SCORE_POOL_MAX : SCORE_POOL_AVG};
}

static int snapkv_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    struct importance_opts imp = snapkv_imp(c->prm);
    const double *s = ctx_window_attn(c, &imp, e);
    if (!s) return -1;
    for (int j = 0; j < c->n_cand; j++) z[j] = s[j];
    return 0;
}

static int snapkv_configure(const void *prm, struct row_config *c, struct eb_err *e)
{
    const struct snapkv_params *p = prm;
    if (p->kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", p->kernel);
    select_params_scorer(&p->sel, NULL, &c->sel);
    return select_params_info(&p->sel, p->window, p->divide_length,
                              p->schedule ? POLICY_DIVIDE : POLICY_PREFILL_ONLY, &c->info, e);
}

static int snapkv_batch(const void *prm, const struct row_config *c, struct batch_plan *out)
{
    (void)c;
    out->score = BATCH_SCORE_IMP;
    out->imp = snapkv_imp(prm);
    return 1;
}

const struct scorer_row snapkv_row = {.score = snapkv_score, .configure = snapkv_configure,
    .batch = snapkv_batch, .shared_params = select_params};
