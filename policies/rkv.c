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
#include "row.h"
#include "select_params.h"

#include "../util/bf16.h"

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

void rkv_mix_rows(double *z, const double *red, int n_cand, double lambda, enum score_dtype dt)
{
    if (dt == SCORE_BF16) { /* torch's arithmetic on bf16 tensors (util/bf16.h) */
        for (int j = 0; j < n_cand; j++) z[j] = bf16_mix(lambda, z[j], red[j]);
        return;
    }
    for (int j = 0; j < n_cand; j++) z[j] = lambda * z[j] - (1.0 - lambda) * red[j];
}

void rkv_mix(const struct rkv_opts *o, double *red, int n_cand, double *z)
{
    score_round(z, n_cand, o->dtype); /* pooling commutes with rounding */
    if (o->lambda >= 1.0) return;
    score_round(red, n_cand, o->dtype);
    rkv_mix_rows(z, red, n_cand, o->lambda, o->dtype);
}

int rkv_score(const struct rkv_opts *o, struct score_buf *b, const struct cache_view *cv,
              int layer, int kv_head, int n_cand, double *red, double *z, struct eb_err *e)
{
    if (score_importance(b, cv, layer, kv_head, &o->imp, n_cand, z, e)) return -1;
    rkv_mix(o, red, n_cand, z);
    return 0;
}

/* ---- the row ---- */

static struct rkv_opts rkv_opts_of(const struct rkv_params *p)
{
    struct rkv_opts o;
    struct eb_err e;
    /* the kernel was checked by rkv_configure */
    rkv_opts_make(p->lambda, p->window, p->kernel, p->gqa == 0 ? SCORE_GQA_MAX : SCORE_GQA_MEAN,
                  p->sel.score_dtype == 1 ? SCORE_BF16 : SCORE_F32, &o, &e);
    return o;
}

/* A sequence's last redundancy vectors (kept for rkv_batch0_bug only). */
struct rkv_seq {
    double *r;       /* [n_layer * n_kv][cap] */
    int *r_len;      /* [n_layer * n_kv], 0: none yet */
    int cap;
};

struct rkv_state {
    int batch0_bug;
    size_t heads;            /* n_layer * n_kv */
    double *red;             /* the head's redundancy, rounded in place by rkv_mix */
    int red_cap;
    struct seq_table seqs;   /* batch0_bug: live sequences */
};

static void rkv_seq_free(void *p)
{
    struct rkv_seq *q = p;
    if (!q) return;
    free(q->r);
    free(q->r_len);
    free(q);
}

static int rkv_state_create(const void *prm, const struct policy_model *m, void **state,
                            struct eb_err *e)
{
    struct rkv_state *st = *state = eb_calloc(1, sizeof *st, e);
    if (!st) return -1;
    st->batch0_bug = ((const struct rkv_params *)prm)->rkv_batch0_bug;
    st->heads = (size_t)m->n_layer * m->n_kv;
    return 0;
}

static void rkv_state_destroy(void *state)
{
    struct rkv_state *st = state;
    if (!st) return;
    free(st->red);
    seq_table_free(&st->seqs, rkv_seq_free);
    free(st);
}

static int rkv_begin(void *state, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct rkv_state *st = state;
    if (!st->batch0_bug) return 0;
    struct rkv_seq *q = seq_table_fresh(&st->seqs, seq, sizeof *q, rkv_seq_free, e);
    if (!q) return -1;
    q->cap = sv->capacity;
    q->r = eb_calloc(st->heads * (size_t)q->cap, sizeof *q->r, e);
    q->r_len = eb_calloc(st->heads, sizeof *q->r_len, e);
    return q->r && q->r_len ? 0 : -1; /* freed by end_sequence or destroy */
}

static void rkv_end(void *state, int seq)
{
    seq_table_drop(&((struct rkv_state *)state)->seqs, seq, rkv_seq_free);
}

/* batch0_bug: the lowest-numbered live sequence. */
static int anchor_seq(const struct rkv_state *st)
{
    for (int i = 0; i < st->seqs.cap; i++)
        if (st->seqs.state[i]) return i;
    return -1;
}

/* R of the context's head into st->red[0, len). */
static int redundancy(struct score_ctx *c, struct eb_err *e)
{
    const struct rkv_params *p = c->prm;
    struct rkv_state *st = c->state;
    int head = c->layer * c->cv->n_kv + c->kv_head, len = c->len;
    if (rkv_reserve(&st->red, &st->red_cap, len, e)) return -1;
    if (st->batch0_bug) {
        int a = anchor_seq(st);
        const struct rkv_seq *anchor = a >= 0 && a != c->seq ? seq_table_get(&st->seqs, a) : NULL;
        if (anchor && anchor->r_len[head] > 0) {
            const double *r = anchor->r + (size_t)head * anchor->cap;
            for (int j = 0; j < len; j++) st->red[j] = j < anchor->r_len[head] ? r[j] : 0.0;
            return 0;
        }
    }
    const double *r = ctx_redundancy(c, (float)p->threshold, p->no_match_zero_col0, e);
    if (!r) return -1;
    memcpy(st->red, r, (size_t)len * sizeof *r);
    struct rkv_seq *mine = st->batch0_bug ? seq_table_get(&st->seqs, c->seq) : NULL;
    if (mine && len <= mine->cap) {
        memcpy(mine->r + (size_t)head * mine->cap, r, (size_t)len * sizeof *r);
        mine->r_len[head] = len;
    }
    return 0;
}

static int rkv_row_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    struct rkv_opts o = rkv_opts_of(c->prm);
    if (o.lambda < 1.0 && redundancy(c, e)) return -1;
    const double *imp = ctx_window_attn(c, &o.imp, e);
    if (!imp) return -1;
    memcpy(z, imp, (size_t)c->n_cand * sizeof *z);
    rkv_mix(&o, ((struct rkv_state *)c->state)->red, c->n_cand, z);
    return 0;
}

static int rkv_configure(const void *prm, struct row_config *c, struct eb_err *e)
{
    const struct rkv_params *p = prm;
    if (p->kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", p->kernel);
    select_params_scorer(&p->sel, NULL, &c->sel);
    return select_params_info(&p->sel, p->window, p->divide_length, POLICY_DIVIDE, &c->info, e);
}

static int rkv_batch(const void *prm, const struct row_config *c, struct batch_plan *out)
{
    (void)c;
    const struct rkv_params *p = prm;
    if (p->rkv_batch0_bug) return 0;
    struct rkv_opts o = rkv_opts_of(p);
    out->score = o.lambda < 1.0 ? BATCH_SCORE_MIX : BATCH_SCORE_IMP;
    out->imp = o.imp;
    out->lambda = o.lambda;
    out->threshold = (float)p->threshold;
    out->no_match_zero_col0 = p->no_match_zero_col0;
    return 1;
}

static const struct row_state_ops rkv_state_ops = {.create = rkv_state_create,
    .destroy = rkv_state_destroy, .begin_sequence = rkv_begin, .end_sequence = rkv_end};

const struct scorer_row rkv_row = {.score = rkv_row_score, .configure = rkv_configure,
    .batch = rkv_batch, .state = &rkv_state_ops, .shared_params = select_params};
