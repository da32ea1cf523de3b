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
#include <stdlib.h>
#include <string.h>

#include "policies.h"
#include "select_batch.h"
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

struct h2o_seq {
    double *score;   /* [n_layer * n_kv][cap] accumulated attention per slot */
    int cap;
};

struct h2o {
    double heavy_ratio;
    struct scorer sc;
    struct policy_model m;
    struct seq_table seqs;
    struct selector sel;
};

/* The accumulated attention of the candidates. */
static int h2o_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                     int n_cand, double *z, struct eb_err *e)
{
    struct h2o *s = self;
    struct h2o_seq *q = seq_table_get(&s->seqs, seq);
    int len = cache_view_len(cv, layer, kv_head);
    if (len > q->cap) return eb_fail(e, "head holds %d slots, more than %d", len, q->cap);
    memcpy(z, q->score + ((size_t)layer * cv->n_kv + kv_head) * q->cap, (size_t)n_cand * sizeof *z);
    return 0;
}

/* The kept slots keep their scores, in the same compacted order. */
static void h2o_kept(void *self, int seq, int layer, int kv_head, const int *keep, int n)
{
    struct h2o *s = self;
    struct h2o_seq *q = seq_table_get(&s->seqs, seq);
    double *sc = q->score + ((size_t)layer * s->m.n_kv + kv_head) * q->cap;
    for (int i = 0; i < n; i++) sc[i] = sc[keep[i]];
    memset(sc + n, 0, (size_t)(q->cap - n) * sizeof *sc);
}

static int h2o_create(const struct policy_params *p, const struct policy_model *m, void **self,
                      struct policy_info *info, struct eb_err *e)
{
    struct h2o *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->heavy_ratio = policy_param(p, "heavy_ratio");
    s->sc = (struct scorer){.score = h2o_score, .kept = h2o_kept, .evict_above = 1,
                            .use_pads = 1, .pad_score = PAD_SCORE_H2O,
                            .pads = policy_param_int(p, "pad_policy") == 0 ? PAD_KEEP
                                                                          : PAD_EVICT_FIRST,
                            .order = KEEP_BY_POSITION};
    s->m = *m;
    *info = (struct policy_info){.needs = POLICY_NEED_ATTN_PROBS, .window = 0,
                                 .schedule = POLICY_EVERY_STEP};
    *self = s;
    return 0;
}

static void h2o_seq_free(void *p)
{
    struct h2o_seq *q = p;
    if (!q) return;
    free(q->score);
    free(q);
}

static void h2o_destroy(void *self)
{
    struct h2o *s = self;
    if (!s) return;
    seq_table_free(&s->seqs, h2o_seq_free);
    selector_free(&s->sel);
    free(s);
}

static int h2o_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct h2o *s = self;
    void **slot = seq_table_slot(&s->seqs, seq, e);
    if (!slot) return -1;
    h2o_seq_free(*slot);
    struct h2o_seq *q = *slot = eb_calloc(1, sizeof *q, e);
    if (!q) return -1;
    q->cap = sv->capacity;
    q->score = eb_calloc((size_t)s->m.n_layer * s->m.n_kv * (size_t)q->cap, sizeof *q->score, e);
    return q->score ? 0 : -1;
}

static void h2o_end(void *self, int seq)
{
    struct h2o *s = self;
    seq_table_drop(&s->seqs, seq, h2o_seq_free);
}

static int h2o_observe_attn(void *self, int seq, const struct attn_view *a, struct eb_err *e)
{
    (void)e;
    struct h2o *s = self;
    struct h2o_seq *q = seq_table_get(&s->seqs, seq);
    if (!q || !q->score || a->layer < 0 || a->layer >= s->m.n_layer || a->n_head != s->m.n_head)
        return 0;
    int group = s->m.n_head / s->m.n_kv;
    for (int g = 0; g < s->m.n_kv; g++) {
        double *sc = q->score + ((size_t)a->layer * s->m.n_kv + g) * q->cap;
        int len = a->kv_len[g] < q->cap ? a->kv_len[g] : q->cap;
        if (len > a->cap) len = a->cap;
        for (int hq = g * group; hq < (g + 1) * group; hq++)
            for (int r = 0; r < a->n_new; r++) {
                const float *p = a->probs + ((size_t)hq * a->n_new + r) * a->cap;
                for (int j = 0; j < len; j++) sc[j] += (double)p[j] / group;
            }
    }
    return 0;
}

static int h2o_select(void *self, int seq, const struct cache_view *cv, int budget,
                      struct keep_set *out, struct eb_err *e)
{
    struct h2o *s = self;
    struct h2o_seq *q = seq_table_get(&s->seqs, seq);
    if (!q) return eb_fail(e, "sequence %d was not begun", seq);
    int heavy = (int)(budget * s->heavy_ratio);
    return select_by_score(&s->sc, s, &s->sel, seq, cv, budget, budget - heavy, out, e);
}

/* The whole batch: its scores live on the host (observe_attn sums them), so
 * it writes them as a row per head, ranked on the device; h2o_kept moves
 * them once the keep-sets are back. */
static int h2o_host_scores(void *self, int seq, const struct cache_view *cv, int layer,
                           int kv_head, int n_cand, double *z, struct eb_err *e)
{
    struct h2o *s = self;
    if (!seq_table_get(&s->seqs, seq)) return eb_fail(e, "sequence %d was not begun", seq);
    return h2o_score(self, seq, cv, layer, kv_head, n_cand, z, e);
}

static int h2o_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    const struct h2o *s = self;
    int heavy = (int)(budget * s->heavy_ratio);
    if (!select_batch_plan_of(&s->sc, budget - heavy, out)) return 0;
    out->score = BATCH_SCORE_Z;
    out->host_scores = h2o_host_scores;
    out->kept = h2o_kept;
    return 1;
}

const struct policy_ops h2o_ops = {
    .name = "h2o",
    .create = h2o_create,
    .destroy = h2o_destroy,
    .begin_sequence = h2o_begin,
    .end_sequence = h2o_end,
    .observe_attn = h2o_observe_attn,
    .select = h2o_select,
    .batch_plan = h2o_batch_plan,
};

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

struct h2o_rkv {
    struct importance_opts imp;
    struct scorer sc;
    struct selector sel;
};

/* The last query's attention of one kv head (the selector averages the layer's). */
static int h2o_rkv_score(void *self, int seq, const struct cache_view *cv, int layer,
                         int kv_head, int n_cand, double *z, struct eb_err *e)
{
    (void)seq;
    struct h2o_rkv *s = self;
    return score_importance(&s->sel.buf, cv, layer, kv_head, &s->imp, n_cand, z, e);
}

static int h2o_rkv_create(const struct policy_params *p, const struct policy_model *m,
                          void **self, struct policy_info *info, struct eb_err *e)
{
    (void)m;
    struct h2o_rkv *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->imp = (struct importance_opts){
        .window = 1,
        .softmax_all = 0,
        .gqa = policy_param_int(p, "gqa") == 0 ? SCORE_GQA_MAX : SCORE_GQA_MEAN,
        .kernel = 1,
        .pool = SCORE_POOL_MAX,
    };
    select_params_scorer(p, h2o_rkv_score, &s->sc);
    s->sc.per_layer = 1;
    *info = (struct policy_info){.needs = POLICY_NEED_RECENT_Q, .q_window = 1, .window = 1,
                                 .schedule = POLICY_DIVIDE,
                                 .divide_length = policy_param_int(p, "divide_length"),
                                 /* compat=released: SkipKV's reset_for_new_sample resets the
                                  * count, not the flag */
                                 .divide_carry_flag = policy_param_int(p, "compat") == 1};
    *self = s;
    return 0;
}

static void h2o_rkv_destroy(void *self)
{
    if (self) selector_free(&((struct h2o_rkv *)self)->sel);
    free(self);
}

static int h2o_rkv_select(void *self, int seq, const struct cache_view *cv, int budget,
                          struct keep_set *out, struct eb_err *e)
{
    struct h2o_rkv *s = self;
    return select_by_score(&s->sc, s, &s->sel, seq, cv, budget, 1, out, e);
}

/* The whole batch: each head's window importance, then head_mean_batch's
 * mean over the layer's heads. */
static int h2o_rkv_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    (void)budget;
    const struct h2o_rkv *s = self;
    if (!select_batch_plan_of(&s->sc, 1, out)) return 0;
    out->shared = BATCH_SHARED_IMP_MEAN;
    out->imp = s->imp;
    return 1;
}

const struct policy_ops h2o_rkv_ops = {
    .name = "h2o-rkv",
    .create = h2o_rkv_create,
    .destroy = h2o_rkv_destroy,
    .select = h2o_rkv_select,
    .batch_plan = h2o_rkv_batch_plan,
};
