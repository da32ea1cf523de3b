/* skipkv.c - SkipKV (../shared/specs/policies.md §7) = the R-KV scorer (rkv.h)
 * + a sentence-level redundancy penalty (skip KV storage) + adaptive SEAL
 * steering (skip KV generation), sentences and steering from follow.h.
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
 * (batching=any), skipkv / skipkv-full (batching=grouped), seal-static
 * (gamma=0).  fullkv-pss (evict=0, steer=0) keeps every token and only
 * tracks sentences (compared when the sequence ends), so FullKV traces get
 * the same PSS statistics.  Per sentence: span, label, largest similarity
 * and the step of its first penalty. */
#include <stdlib.h>

#include "follow_hooks.h"
#include "policies.h"
#include "rkv.h"
#include "select_batch.h"

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

struct skipkv {
    struct follower f;       /* first: sentences and steering (follow.h); the follow_hook_*
                                take the state as the follower */
    struct rkv_opts o;
    double gamma;
    float threshold;
    int sentence, evict;
    struct scorer sc;
    struct selector sel;
    double *red;
    int red_cap;
    double *pen;             /* the batched path's penalty of one head */
    int pen_cap;
    struct follow_seq *cur;  /* during select: the sequence, its step, and whether */
    int step, penalize;      /* its sentences are penalised */
};

static void skipkv_destroy(void *self)
{
    struct skipkv *s = self;
    if (!s) return;
    selector_free(&s->sel);
    free(s->red);
    free(s->pen);
    follower_close(&s->f);
    free(s);
}

/* R-KV's Z (the released code's R keeps the no-match quirk), minus the
 * sentence penalty on the candidates of redundant sentences (sentences.h). */
static int skipkv_score(void *self, int seq, const struct cache_view *cv, int layer,
                        int kv_head, int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct skipkv *s = self;
    int len = cache_view_len(cv, layer, kv_head);
    if (s->o.lambda < 1.0 &&
        (rkv_reserve(&s->red, &s->red_cap, len, e) ||
         score_redundancy(&s->sel.buf, cv, layer, kv_head, s->threshold, 1, s->red, e)))
        return -1;
    if (rkv_score(&s->o, &s->sel.buf, cv, layer, kv_head, n_cand, s->red, z, e)) return -1;
    if (s->penalize) {
        const int *pos = cv->pos + ((size_t)layer * cv->n_kv + kv_head) * cv->capacity;
        sent_tracker_penalize(&s->cur->tr, pos, n_cand, len, z, s->step);
    }
    return 0;
}

static int skipkv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                         struct policy_info *info, struct eb_err *e)
{
    const struct skipkv_params *prm = policy_typed(p);
    struct rkv_opts o;
    if (rkv_opts_make(prm->lambda, prm->window, prm->kernel, SCORE_GQA_MAX, SCORE_F32, &o, e))
        return -1;
    struct skipkv *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->o = o;
    s->threshold = (float)prm->threshold;
    s->sc = (struct scorer){
        .score = skipkv_score, .use_pads = 1, .pad_score = PAD_SCORE,
        .pads = prm->pad_policy == 0 ? PAD_KEEP : PAD_EVICT_FIRST,
        .order = prm->cache_order == 0 ? KEEP_BY_SCORE : KEEP_BY_POSITION,
    };
    s->sentence = prm->sentence;
    s->gamma = prm->gamma;
    s->evict = prm->evict;
    struct follow_opts fo = {
        .name = "skipkv", .check_space = prm->check_space,
        .steer = prm->steer, .layer = prm->layer,
        .mode = prm->think == 0 ? THINK_TAGS : THINK_ALWAYS,
        .pairs = prm->split, .dim = s->sentence ? m->n_embd : 0,
        .tau = (float)prm->tau, .alpha0 = prm->alpha0,
    };
    if (m->text && s->sentence && m->n_embd < 1) {
        skipkv_destroy(s);
        return eb_fail(e, "policy skipkv needs the model's hidden size (n_embd)");
    }
    if (follower_open(&s->f, &fo, m, e)) {
        skipkv_destroy(s);
        return -1;
    }
    *info = (struct policy_info){
        .needs = POLICY_NEED_RECENT_Q | (s->sentence ? POLICY_NEED_HIDDEN_LAST : 0),
        .q_window = o.imp.window,
        .window = o.imp.window,
        .schedule = POLICY_DIVIDE,
        .divide_length = prm->divide_length,
        /* compat=released: reset_for_new_sample resets the count, not the flag */
        .divide_carry_flag = prm->compat == 1,
    };
    if (!s->evict) /* an observer: no selection, so no queries and no budget */
        *info = (struct policy_info){
            .needs = s->sentence ? POLICY_NEED_HIDDEN_LAST : 0,
            .schedule = POLICY_NEVER,
        };
    *self = s;
    return 0;
}

static int skipkv_observe(void *self, int seq, const struct step_view *sv, struct eb_err *e)
{
    struct skipkv *s = self;
    struct follow_seq *q;
    if (follower_live(&s->f, seq, &q, e)) return -1;
    if (!q) return 0;
    /* The forward that raised the step flag ends: its rows are in, its
     * sampled token not yet labelled (the released code labels a token in
     * the forward that processes it). */
    if (sv->selects_next) {
        if (s->f.o.steer) q->alpha = steering_alpha(s->f.o.alpha0, s->gamma, q->tr.n_check);
        if (s->sentence) sent_tracker_compare(&q->tr);
    }
    return follower_push(&s->f, q, sv->token, e);
}

static int skipkv_observe_hidden(void *self, int seq, const float *rows, int n, int dim,
                                 struct eb_err *e)
{
    struct skipkv *s = self;
    struct follow_seq *q;
    if (follower_live(&s->f, seq, &q, e)) return -1;
    if (q && sent_tracker_rows(&q->tr, rows, n, dim, e)) {
        q->failed = 1;
        return -1;
    }
    return 0;
}

static int skipkv_select(void *self, int seq, const struct cache_view *cv, int budget,
                         struct keep_set *out, struct eb_err *e)
{
    struct skipkv *s = self;
    struct follow_seq *q;
    if (follower_live(&s->f, seq, &q, e)) return -1;
    if (!q) return eb_fail(e, "select for unknown sequence %d", seq);
    s->cur = q;
    s->step = q->tr.n_tokens - q->n_prompt; /* tokens generated */
    /* at prefill the released layers hold no removal ranges yet */
    s->penalize = s->sentence && !cv->at_prefill;
    return select_by_score(&s->sc, s, &s->sel, seq, cv, budget, s->o.imp.window, out, e);
}

/* The whole batch: R-KV's batched scores, the sentence penalty a row per
 * head written here and uploaded once.  sent_tracker_penalize on zeros
 * gives -lambda where the per-sequence score subtracts lambda; spans are
 * disjoint, so a slot gets one penalty at most, and lambda is a float, so
 * the float row holds it exactly: z + row is the per-sequence z - lambda. */
static int skipkv_add_row(void *self, int seq, const struct cache_view *cv, int layer,
                          int kv_head, int n_cand, float *add, struct eb_err *e)
{
    struct skipkv *s = self;
    struct follow_seq *q;
    if (follower_live(&s->f, seq, &q, e)) return -1;
    if (!q) return eb_fail(e, "select for unknown sequence %d", seq);
    if (!s->sentence || cv->at_prefill) return 0; /* as skipkv_select: no penalty */
    int len = cache_view_len(cv, layer, kv_head);
    if (rkv_reserve(&s->pen, &s->pen_cap, len, e)) return -1;
    double *z = s->pen;
    for (int j = 0; j < n_cand; j++) z[j] = 0.0;
    const int *pos = cv->pos + ((size_t)layer * cv->n_kv + kv_head) * cv->capacity;
    sent_tracker_penalize(&q->tr, pos, n_cand, len, z, q->tr.n_tokens - q->n_prompt);
    for (int j = 0; j < n_cand; j++) add[j] = (float)z[j];
    return 0;
}

static int skipkv_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    (void)budget;
    const struct skipkv *s = self;
    if (!s->evict || !select_batch_plan_of(&s->sc, s->o.imp.window, out)) return 0;
    out->score = s->o.lambda < 1.0 ? BATCH_SCORE_MIX : BATCH_SCORE_IMP;
    out->imp = s->o.imp;
    out->lambda = s->o.lambda;
    out->threshold = s->threshold;
    out->no_match_zero_col0 = 1; /* as skipkv_score */
    if (s->sentence) out->add_row = skipkv_add_row;
    return 1;
}

/* policy_ops.window_of: the slots always kept. */
static int skipkv_window_of(const void *prm)
{
    return ((const struct skipkv_params *)prm)->window;
}

const struct policy_ops skipkv_ops = {
    .name = "skipkv",
    .create = skipkv_create,
    .window_of = skipkv_window_of,
    .destroy = skipkv_destroy,
    .begin_sequence = follow_hook_begin,
    .end_sequence = follow_hook_end,
    .observe = skipkv_observe,
    .observe_hidden = skipkv_observe_hidden,
    .select = skipkv_select,
    .batch_plan = skipkv_batch_plan,
    .steer = follow_hook_steer,
    .trace_stats = follow_hook_trace_stats,
    .trace_sentences = follow_hook_trace_sentences,
};
