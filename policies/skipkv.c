/* skipkv.c - SkipKV (../shared/specs/policies.md §7) = the R-KV scorer (rkv.h)
 * + a sentence-level redundancy penalty (skip KV storage) + adaptive SEAL
 * steering (skip KV generation), sentences and steering from follow.h: a
 * scorer row (row.h) composing R-KV's score, the penalty as its added term
 * (`add`) and the follower (`follow`).
 *
 * In the forward before each compression step (the R-KV schedule, §1.2),
 * as the released modeling_nhid.py does when a forward raises its step flag
 * (`is_newline`; step_view.selects_next here), before that forward's sampled
 * token is labelled:
 *   1. alpha = alpha0 - gamma * N_o            (steer=1; N_o counts Check sentences)
 *   2. complete sentences not compared yet are compared with every earlier
 *      one (sentences.h); the earlier sentence of a pair above tau is marked
 *      redundant for good;
 * then at the compression step, the shared selector (select.h) with the score
 *   3. Z = lambda * I - (1 - lambda) * R (R-KV, §5), minus lambda_ij on every
 *      candidate slot of a redundant sentence holding >= 2 slots in the head
 *      (slot -> sentence by original position, §7.3); kept slots sorted by
 *      position as released (cache_order=score: top-k order).
 * Steering (steer=1) adds alpha * V to the residual stream entering `layer`
 * at split tokens inside the thought, as SEAL does (§6.6).
 *
 * The prompt's compression (a prefill step) gets no sentence penalty: the
 * released flag's similarity is computed after that forward's compression.
 * Pads matter only for padded caches; batch grouping belongs to the runner
 * (`batching=grouped` records that a preset expects it).
 *
 * Ablation presets (registry.c): skipkv-sent (steer=0), skipkv-sent-steer
 * (batching=any), skipkv (batching=grouped), seal-static
 * (gamma=0).  fullkv-pss (evict=0, steer=0) keeps every token and only
 * tracks sentences (compared when the sequence ends), so FullKV traces get
 * the same PSS statistics.  Per sentence: span, label, largest similarity
 * and the step of its first penalty. */
#include <string.h>

#include "policies.h"
#include "rkv.h"
#include "row.h"

/* The values of skipkv_params (param_def.offset). */
struct skipkv_params {
    double lambda;
    int window;
    int kernel;
    int divide_length;
    double threshold;
    int pad_policy;
    int cache_order;
    double tau;
    int sentence;
    int steer;
    double alpha0;
    double gamma;
    int layer;
    int split;
    int think;
    int check_space;
    int batching;
    int evict;
    int compat;
};

const struct param_def skipkv_params[] = {
    {"lambda", PARAM_FLOAT, 0.1, 0, 1, NULL, "weight of importance against redundancy (mix_lambda)",
     offsetof(struct skipkv_params, lambda)},
    {"window", PARAM_INT, 8, 1, 4096, NULL, "observation queries; the last window slots are kept",
     offsetof(struct skipkv_params, window)},
    {"kernel", PARAM_INT, 7, 1, 63, NULL, "max-pool kernel (odd)",
     offsetof(struct skipkv_params, kernel)},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct skipkv_params, divide_length)},
    {"threshold", PARAM_FLOAT, 0.5, -1, 1, NULL, "R-KV: cosine above which keys are similar",
     offsetof(struct skipkv_params, threshold)},
    {"pad_policy", PARAM_CHOICE, 0, 0, 1, PAD_CHOICES, "pad slots: always kept or evicted first",
     offsetof(struct skipkv_params, pad_policy)},
    {"cache_order", PARAM_CHOICE, 1, 0, 1, KEEP_ORDER_CHOICES,
     "kept slots in top-k score order or by position (released SkipKV sorts)",
     offsetof(struct skipkv_params, cache_order)},
    {"tau", PARAM_FLOAT, 0.95, -1, 2, NULL, "sentence similarity above which the earlier sentence "
                                           "is redundant (S_threshold)",
     offsetof(struct skipkv_params, tau)},
    {"sentence", PARAM_BOOL, 1, 0, 1, NULL, "sentence redundancy penalty (skip KV storage)",
     offsetof(struct skipkv_params, sentence)},
    {"steer", PARAM_BOOL, 1, 0, 1, NULL, "adaptive steering (skip KV generation)",
     offsetof(struct skipkv_params, steer)},
    {"alpha0", PARAM_FLOAT, -1.25, -100, 100, NULL, "initial steering coefficient (steering_coef)",
     offsetof(struct skipkv_params, alpha0)},
    {"gamma", PARAM_FLOAT, 0.02, -10, 10, NULL, "alpha = alpha0 - gamma * N_o (steering_gamma)",
     offsetof(struct skipkv_params, gamma)},
    {"layer", PARAM_INT, 0, 0, 1000, NULL, "steering layer; 0: the vector file's",
     offsetof(struct skipkv_params, layer)},
    {"split", PARAM_CHOICE, 0, 0, 1, "vocab|pairs",
     "split tokens: SEAL's (text contains \"\\n\\n\"), or also a \"\\n\"-led token after a "
     "\"\\n\"-ended one (tokenizers that write \"\\n\\n\" as two tokens, e.g. SmolLM2)",
     offsetof(struct skipkv_params, split)},
    {"think", PARAM_CHOICE, 0, 0, 1, "tags|always",
     "thought region for steering: <think>..</think>, or every generated token",
     offsetof(struct skipkv_params, think)},
    {"check_space", PARAM_BOOL, 0, 0, 1, NULL,
     "also count check words with a leading space (the reference misses \" Wait\")",
     offsetof(struct skipkv_params, check_space)},
    {"batching", PARAM_CHOICE, 0, 0, 1, "any|grouped",
     "batching the preset expects from the runner (grouped = SkipKV batch grouping)",
     offsetof(struct skipkv_params, batching)},
    {"evict", PARAM_BOOL, 1, 0, 1, NULL,
     "evict at all; 0: keep every token (FullKV) and only track sentences and PSS, whose pairs "
     "are then compared when the sequence ends", offsetof(struct skipkv_params, evict)},
    {"compat", PARAM_CHOICE, 0, 0, 1, COMPAT_CHOICES,
     "released: the step flag outlives a sample as in modeling_nhid.py (a later prompt is "
     "compressed at prefill only if the previous sample ended on a divisible count)",
     offsetof(struct skipkv_params, compat)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

/* The R-KV options of p (the kernel was checked by skipkv_configure). */
static struct rkv_opts skipkv_rkv(const struct skipkv_params *p)
{
    struct rkv_opts o;
    struct eb_err e;
    rkv_opts_make(p->lambda, p->window, p->kernel, SCORE_GQA_MAX, SCORE_F32, &o, &e);
    return o;
}

/* R-KV's Z (the released code's R keeps the no-match quirk). */
static int skipkv_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    const struct skipkv_params *p = c->prm;
    struct rkv_opts o = skipkv_rkv(p);
    const double *imp = ctx_window_attn(c, &o.imp, e);
    const double *red = imp && o.lambda < 1.0 ? ctx_redundancy(c, (float)p->threshold, 1, e) : NULL;
    if (!imp || (o.lambda < 1.0 && !red)) return -1;
    memcpy(z, imp, (size_t)c->n_cand * sizeof *z);
    if (o.lambda < 1.0) rkv_mix_rows(z, red, c->n_cand, o.lambda, SCORE_F32);
    return 0;
}

/* The sentence penalty: minus lambda_ij on every candidate of a redundant
 * sentence holding >= 2 slots in the head.  None at prefill: the released
 * layers hold no removal ranges yet.  Spans are disjoint, so a slot gets one
 * penalty at most, and lambda is a float, so the batched path's float row
 * holds it exactly: z + row is the per-sequence z - lambda. */
static int skipkv_penalty(struct score_ctx *c, double *z, struct eb_err *e)
{
    struct follow_seq *q = c->follow;
    if (!q) return eb_fail(e, "select for unknown sequence %d", c->seq);
    if (c->cv->at_prefill) return 0;
    sent_tracker_penalize(&q->tr, ctx_positions(c), c->n_cand, c->len, z,
                          q->tr.n_tokens - q->n_prompt /* tokens generated */);
    return 0;
}

static int skipkv_configure(const void *prm, struct row_config *c, struct eb_err *e)
{
    const struct skipkv_params *p = prm;
    if (p->kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", p->kernel);
    c->sel.pads = p->pad_policy == 0 ? PAD_KEEP : PAD_EVICT_FIRST;
    c->sel.order = p->cache_order == 0 ? KEEP_BY_SCORE : KEEP_BY_POSITION;
    c->add = p->sentence && p->evict;
    c->info = (struct policy_info){
        .needs = POLICY_NEED_RECENT_Q | (p->sentence ? POLICY_NEED_HIDDEN_LAST : 0),
        .q_window = p->window,
        .window = p->window,
        .schedule = POLICY_DIVIDE,
        .divide_length = p->divide_length,
        /* compat=released: reset_for_new_sample resets the count, not the flag */
        .divide_carry_flag = p->compat == 1,
    };
    if (!p->evict) /* an observer: no selection, so no queries and no budget */
        c->info = (struct policy_info){
            .needs = p->sentence ? POLICY_NEED_HIDDEN_LAST : 0,
            .schedule = POLICY_NEVER,
        };
    return 0;
}

/* The whole batch: R-KV's batched scores, the penalty an added row (c->add). */
static int skipkv_batch(const void *prm, const struct row_config *c, struct batch_plan *out)
{
    (void)c;
    const struct skipkv_params *p = prm;
    if (!p->evict) return 0;
    struct rkv_opts o = skipkv_rkv(p);
    out->score = o.lambda < 1.0 ? BATCH_SCORE_MIX : BATCH_SCORE_IMP;
    out->imp = o.imp;
    out->lambda = o.lambda;
    out->threshold = (float)p->threshold;
    out->no_match_zero_col0 = 1; /* as skipkv_score */
    return 1;
}

static int skipkv_follow_opts(const void *prm, const struct policy_model *m,
                              struct follow_opts *o, struct eb_err *e)
{
    const struct skipkv_params *p = prm;
    if (m->text && p->sentence && m->n_embd < 1)
        return eb_fail(e, "policy skipkv needs the model's hidden size (n_embd)");
    *o = (struct follow_opts){
        .name = "skipkv", .check_space = p->check_space,
        .steer = p->steer, .layer = p->layer,
        .mode = p->think == 0 ? THINK_TAGS : THINK_ALWAYS,
        .pairs = p->split, .dim = p->sentence ? m->n_embd : 0,
        .tau = (float)p->tau, .alpha0 = p->alpha0,
    };
    return 0;
}

/* In the forward before each compression step: alpha from N_o, then the
 * complete sentences not compared yet against every earlier one. */
static void skipkv_at_flag(const void *prm, struct follow_seq *q)
{
    const struct skipkv_params *p = prm;
    if (p->steer) q->alpha = steering_alpha(p->alpha0, p->gamma, q->tr.n_check);
    if (p->sentence) sent_tracker_compare(&q->tr);
}

static const struct row_follow skipkv_follow = {.opts = skipkv_follow_opts,
                                                .at_flag = skipkv_at_flag};

const struct scorer_row skipkv_row = {.score = skipkv_score, .add = skipkv_penalty,
    .configure = skipkv_configure, .batch = skipkv_batch, .follow = &skipkv_follow,
    .base.sel = {.use_pads = 1, .pad_score = PAD_SCORE}};
