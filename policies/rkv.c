/* rkv.c - R-KV, redundancy-aware selection (specs/policies.md §5):
 *
 *   Z = lambda * I - (1 - lambda) * R,   keep topk(Z[0, L-w), B - w) + window
 *
 * I: window importance (§1.3: 8 queries, softmax over the non-window keys,
 * mean, max-pool 7, GQA max); R: key-key redundancy over every slot, window
 * included (§5.2), sliced to the candidates.  Both are per kv head and per
 * sequence.
 *
 * rkv_batch0_bug=1 reproduces the released code's R from batch element 0 for
 * the whole batch: every sequence borrows R from the latest compression of
 * the lowest-numbered live sequence, slot by slot (zero past its length);
 * exact for padded batches compressing together.  Keep it 0 for real runs. */
#include <stdlib.h>
#include <string.h>

#include "rkv.h"

#include "policies.h"
#include "select_batch.h"
#include "select_params.h"

/* The values of rkv_params (param_def.offset). */
struct rkv_params {
    struct select_opts sel;   /* first: select_params's offsets */
    double lambda;
    int window;
    int kernel;
    int divide_length;
    int gqa;
    double threshold;
    int no_match_zero_col0;
    int rkv_batch0_bug;
};

const struct param_def rkv_params[] = {
    {"lambda", PARAM_FLOAT, 0.1, 0, 1, NULL, "weight of importance against redundancy",
     offsetof(struct rkv_params, lambda)},
    {"window", PARAM_INT, 8, 1, 4096, NULL, "observation queries; the last window slots are kept",
     offsetof(struct rkv_params, window)},
    {"kernel", PARAM_INT, 7, 1, 63, NULL, "max-pool kernel (odd)",
     offsetof(struct rkv_params, kernel)},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct rkv_params, divide_length)},
    {"gqa", PARAM_CHOICE, 0, 0, 1, "max|mean", "pooling of a group's logits before the softmax",
     offsetof(struct rkv_params, gqa)},
    {"threshold", PARAM_FLOAT, 0.5, -1, 1, NULL, "cosine above which keys are similar",
     offsetof(struct rkv_params, threshold)},
    {"no_match_zero_col0", PARAM_BOOL, 1, 0, 1, NULL,
     "reference quirk: a key with no similar key zeroes column 0 of its row",
     offsetof(struct rkv_params, no_match_zero_col0)},
    {"rkv_batch0_bug", PARAM_BOOL, 0, 0, 1, NULL,
     "reuse the first live sequence's redundancy for every sequence (released code's bug)",
     offsetof(struct rkv_params, rkv_batch0_bug)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},  /* then the selector's: select_params.h */
};

/* A sequence's last redundancy vectors (kept for rkv_batch0_bug only). */
struct rkv_seq {
    double *r;       /* [n_layer * n_kv][cap] */
    int *r_len;      /* [n_layer * n_kv], 0: none yet */
    int cap;
};

struct rkv {
    struct rkv_opts o;
    float threshold;
    int quirk, batch0_bug;
    struct scorer sc;
    struct policy_model m;
    struct selector sel;
    double *red;
    int red_cap;
    struct seq_table seqs;   /* batch0_bug: live sequences */
};

int rkv_opts_make(double lambda, int window, int kernel, enum score_gqa gqa,
                  enum score_dtype dtype, struct rkv_opts *o, struct eb_err *e)
{
    if (kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", kernel);
    *o = (struct rkv_opts){
        .imp = {.window = window, .softmax_all = 0, .gqa = gqa, .kernel = kernel,
                .pool = SCORE_POOL_MAX},
        .lambda = lambda,
        .dtype = dtype,
    };
    return 0;
}

int rkv_reserve(double **red, int *cap, int len, struct eb_err *e)
{
    if (len <= *cap) return 0;
    double *r = realloc(*red, (size_t)len * sizeof *r);
    if (!r) return eb_fail(e, "out of memory for %d redundancy scores", len);
    *red = r;
    *cap = len;
    return 0;
}

static void mix(double *z, const double *red, int n_cand, double lambda, enum score_dtype dt)
{
    if (dt == SCORE_BF16) {
        /* torch: a bf16 tensor times a Python float is computed in f32 (the
         * scalar rounded to f32) and rounded to bf16; so is the difference. */
        float fl = (float)lambda, fr = (float)(1.0 - lambda);
        for (int j = 0; j < n_cand; j++) {
            float a = (float)score_bf16((float)z[j] * fl), b = (float)score_bf16((float)red[j] * fr);
            z[j] = score_bf16(a - b);
        }
        return;
    }
    for (int j = 0; j < n_cand; j++) z[j] = lambda * z[j] - (1.0 - lambda) * red[j];
}

int rkv_score(const struct rkv_opts *o, struct score_buf *b, const struct cache_view *cv,
              int layer, int kv_head, int n_cand, double *red, double *z, struct eb_err *e)
{
    if (score_importance(b, cv, layer, kv_head, &o->imp, n_cand, z, e)) return -1;
    score_round(z, n_cand, o->dtype); /* pooling commutes with rounding */
    if (o->lambda >= 1.0) return 0;
    score_round(red, n_cand, o->dtype);
    mix(z, red, n_cand, o->lambda, o->dtype);
    return 0;
}

/* ---- the policy ---- */

static int rkv_scorer(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                      int n_cand, double *z, struct eb_err *e); /* below */
static int rkv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                      struct policy_info *info, struct eb_err *e)
{
    struct rkv_opts o;
    enum score_dtype dtype = policy_param_int(p, "score_dtype") == 1 ? SCORE_BF16 : SCORE_F32;
    if (rkv_opts_from_params(p, policy_param_int(p, "gqa") == 0 ? SCORE_GQA_MAX : SCORE_GQA_MEAN,
                             dtype, &o, e))
        return -1;
    if (select_params_info(p, o.imp.window, POLICY_DIVIDE, info, e)) return -1;
    struct rkv *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->o = o;
    s->threshold = (float)policy_param(p, "threshold");
    s->quirk = policy_param_int(p, "no_match_zero_col0");
    s->batch0_bug = policy_param_int(p, "rkv_batch0_bug");
    select_params_scorer(p, rkv_scorer, &s->sc);
    s->m = *m;
    *self = s;
    return 0;
}

static void rkv_seq_free(void *p)
{
    struct rkv_seq *q = p;
    if (!q) return;
    free(q->r);
    free(q->r_len);
    free(q);
}

static void rkv_destroy(void *self)
{
    struct rkv *s = self;
    if (!s) return;
    selector_free(&s->sel);
    free(s->red);
    seq_table_free(&s->seqs, rkv_seq_free);
    free(s);
}

static int rkv_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct rkv *s = self;
    if (!s->batch0_bug) return 0;
    void **slot = seq_table_slot(&s->seqs, seq, e);
    if (!slot) return -1;
    rkv_seq_free(*slot);
    struct rkv_seq *q = *slot = eb_calloc(1, sizeof *q, e);
    if (!q) return -1;
    size_t heads = (size_t)s->m.n_layer * s->m.n_kv;
    q->cap = sv->capacity;
    q->r = eb_calloc(heads * (size_t)q->cap, sizeof *q->r, e);
    q->r_len = eb_calloc(heads, sizeof *q->r_len, e);
    if (!q->r || !q->r_len) return -1; /* freed by end_sequence or destroy */
    return 0;
}

static void rkv_end(void *self, int seq)
{
    struct rkv *s = self;
    seq_table_drop(&s->seqs, seq, rkv_seq_free);
}

/* batch0_bug: the lowest-numbered live sequence. */
static int anchor_seq(const struct rkv *s)
{
    for (int i = 0; i < s->seqs.cap; i++)
        if (s->seqs.state[i]) return i;
    return -1;
}

/* R of (l, h) for seq into s->red[0, len). */
static int redundancy(struct rkv *s, int seq, const struct cache_view *cv, int l, int h, int len,
                      struct eb_err *e)
{
    int head = l * cv->n_kv + h;
    if (s->batch0_bug) {
        int a = anchor_seq(s);
        const struct rkv_seq *anchor = a >= 0 && a != seq ? seq_table_get(&s->seqs, a) : NULL;
        if (anchor && anchor->r_len[head] > 0) {
            const double *r = anchor->r + (size_t)head * anchor->cap;
            for (int j = 0; j < len; j++) s->red[j] = j < anchor->r_len[head] ? r[j] : 0.0;
            return 0;
        }
    }
    if (score_redundancy(&s->sel.buf, cv, l, h, s->threshold, s->quirk, s->red, e)) return -1;
    struct rkv_seq *mine = s->batch0_bug ? seq_table_get(&s->seqs, seq) : NULL;
    if (mine && len <= mine->cap) {
        memcpy(mine->r + (size_t)head * mine->cap, s->red, (size_t)len * sizeof *s->red);
        mine->r_len[head] = len;
    }
    return 0;
}

static int rkv_scorer(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                      int n_cand, double *z, struct eb_err *e)
{
    struct rkv *s = self;
    int len = cache_view_len(cv, layer, kv_head);
    if (s->o.lambda < 1.0 && (rkv_reserve(&s->red, &s->red_cap, len, e) ||
                              redundancy(s, seq, cv, layer, kv_head, len, e)))
        return -1;
    return rkv_score(&s->o, &s->sel.buf, cv, layer, kv_head, n_cand, s->red, z, e);
}

static int rkv_select(void *self, int seq, const struct cache_view *cv, int budget,
                      struct keep_set *out, struct eb_err *e)
{
    struct rkv *s = self;
    return select_by_score(&s->sc, s, &s->sel, seq, cv, budget, s->o.imp.window, out, e);
}

static int rkv_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    (void)budget;
    const struct rkv *s = self;
    if (s->batch0_bug || !select_batch_plan_of(&s->sc, s->o.imp.window, out)) return 0;
    out->score = s->o.lambda < 1.0 ? BATCH_SCORE_MIX : BATCH_SCORE_IMP;
    out->imp = s->o.imp;
    out->lambda = s->o.lambda;
    out->threshold = s->threshold;
    out->no_match_zero_col0 = s->quirk;
    return 1;
}

static const struct scorer *rkv_scorer_of(const void *self, int *n_recent)
{
    const struct rkv *s = self;
    *n_recent = s->o.imp.window;
    return &s->sc;
}

const struct policy_ops rkv_ops = {
    .name = "rkv",
    .create = rkv_create,
    .window_param = "window",
    .destroy = rkv_destroy,
    .begin_sequence = rkv_begin,
    .end_sequence = rkv_end,
    .select = rkv_select,
    .batch_plan = rkv_batch_plan,
    .shared_params = select_params,
    .scorer = rkv_scorer_of,
};
