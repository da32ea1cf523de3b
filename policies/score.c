/* score.c - combining helpers shared by the policies (see score.h). */
#include "score.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../util/bf16.h"

void score_buf_free(struct score_buf *b)
{
    if (b->dev) b->be->free(b->be, b->dev);
    free(b->host);
    free(b->pairs);
    free(b->rows);
    free(b->work);
    memset(b, 0, sizeof *b);
}

/* Room for two backend rows and one host row of n floats. */
static int reserve(struct score_buf *b, struct backend *be, size_t n, struct eb_err *e)
{
    if (b->be && b->be != be) score_buf_free(b);
    b->be = be;
    if (n <= b->dev_cap) return 0;
    if (b->dev) be->free(be, b->dev);
    free(b->host);
    b->dev_cap = 0;
    b->dev = be->alloc(be, 2 * n);
    b->host = malloc(n * sizeof *b->host);
    if (!b->dev || !b->host) return eb_fail(e, "out of memory for %zu scores", n);
    b->dev_cap = n;
    return 0;
}

int score_check_backend(const struct backend *be, int need_redundancy, struct eb_err *e)
{
    if (!be->window_scores || !be->pool1d || (need_redundancy && !be->key_redundancy))
        return eb_fail(e, "the %s backend has no scoring primitives (window_scores, pool1d%s)",
                       be->name, need_redundancy ? ", key_redundancy" : "");
    return 0;
}

struct window_score_args score_window_args(const struct cache_view *cv, int layer, int kv_head,
                                          int rows, int n_cand, float *out)
{
    return (struct window_score_args){
        .out = out,
        .q = cv->q[layer] + (size_t)(cv->n_q - rows) * cv->n_head * cv->head_dim,
        .k = cache_view_k(cv, layer, kv_head),
        .n_head = cv->n_head,
        .n_kv = cv->n_kv,
        .kv_head = kv_head,
        .head_dim = cv->head_dim,
        .n_q = rows,
        .len = cache_view_len(cv, layer, kv_head),
        .n_cand = n_cand,
        .pad = cache_view_pad(cv, layer, kv_head),
        .scale = 1.0f / sqrtf((float)cv->head_dim),
    };
}

int score_importance(struct score_buf *b, const struct cache_view *cv, int layer, int kv_head,
                     const struct importance_opts *o, int n_cand, double *out, struct eb_err *e)
{
    struct backend *be = cv->be;
    int len = cache_view_len(cv, layer, kv_head);
    if (!cv->q || cv->n_q < 1) return eb_fail(e, "no recent queries recorded");
    if (score_check_backend(be, 0, e)) return -1;
    if (n_cand < 1 || n_cand > len)
        return eb_fail(e, "%d candidates for a head of %d slots", n_cand, len);
    if (reserve(b, be, (size_t)len, e)) return -1;
    int rows = o->window < cv->n_q ? o->window : cv->n_q;
    struct window_score_args a = score_window_args(cv, layer, kv_head, rows, n_cand, b->dev);
    a.softmax_all = o->softmax_all;
    a.gqa = o->gqa;
    if (be->window_scores(be, &a)) return eb_fail(e, "window attention scores failed");
    const float *res = b->dev;
    if (o->kernel > 1) {
        if (be->pool1d(be, b->dev + b->dev_cap, b->dev, n_cand, o->kernel, o->pool))
            return eb_fail(e, "pooling with kernel %d failed", o->kernel);
        res = b->dev + b->dev_cap;
    }
    be->download(be, b->host, res, (size_t)n_cand);
    for (int j = 0; j < n_cand; j++) out[j] = b->host[j];
    return 0;
}

int score_redundancy(struct score_buf *b, const struct cache_view *cv, int layer, int kv_head,
                     float threshold, int no_match_zero_col0, double *out, struct eb_err *e)
{
    struct backend *be = cv->be;
    int len = cache_view_len(cv, layer, kv_head);
    if (score_check_backend(be, 1, e)) return -1;
    if (len < 1) return eb_fail(e, "redundancy of an empty head");
    if (reserve(b, be, (size_t)len, e)) return -1;
    struct redundancy_args a = {
        .out = b->dev,
        .k = cache_view_k(cv, layer, kv_head),
        .len = len,
        .head_dim = cv->head_dim,
        .threshold = threshold,
        .no_match_zero_col0 = no_match_zero_col0,
        .pad = cache_view_pad(cv, layer, kv_head),
    };
    if (be->key_redundancy(be, &a)) return eb_fail(e, "key redundancy of %d keys failed", len);
    be->download(be, b->host, b->dev, (size_t)len);
    for (int j = 0; j < len; j++) out[j] = b->host[j];
    return 0;
}

double score_bf16(double x)
{
    return bf16_round(x);
}

void score_round(double *x, int n, enum score_dtype dt)
{
    if (dt != SCORE_BF16) return;
    for (int j = 0; j < n; j++) x[j] = score_bf16(x[j]);
}

void score_apply_pads(double *z, int n, const unsigned char *pad, enum pad_policy pp,
                      double pad_score)
{
    assert(n >= 0);
    if (!pad) return;
    for (int j = 0; j < n; j++)
        if (pad[j]) z[j] = pp == PAD_KEEP ? pad_score : -pad_score;
}

void score_avg_pool(const double *in, int n, int kernel, double *out)
{
    int half = kernel / 2;
    for (int j = 0; j < n; j++) {
        double a = 0.0;
        for (int t = j - half; t <= j + half; t++)
            if (t >= 0 && t < n) a += in[t];
        out[j] = a / kernel;
    }
}

void score_avg_pool_inplace(double *s, double *tmp, int n, int kernel)
{
    if (kernel <= 1) return;
    score_avg_pool(s, n, kernel, tmp);
    memcpy(s, tmp, (size_t)n * sizeof *s);
}

void **seq_table_slot(struct seq_table *t, int seq, struct eb_err *e)
{
    if (seq < 0 || seq > (1 << 28)) return eb_fail(e, "sequence id %d out of range", seq), NULL;
    if (seq >= t->cap) {
        int cap = t->cap ? t->cap : 16;
        while (cap <= seq) cap *= 2;
        void **s = realloc(t->state, (size_t)cap * sizeof *s);
        if (!s) return eb_fail(e, "out of memory for sequence %d", seq), NULL;
        memset(s + t->cap, 0, (size_t)(cap - t->cap) * sizeof *s);
        t->state = s;
        t->cap = cap;
    }
    return &t->state[seq];
}

void *seq_table_fresh(struct seq_table *t, int seq, size_t size, void (*free_state)(void *),
                      struct eb_err *e)
{
    void **slot = seq_table_slot(t, seq, e);
    if (!slot) return NULL;
    if (*slot && free_state) free_state(*slot);
    *slot = eb_calloc(1, size, e);
    return *slot;
}

void *seq_table_get(const struct seq_table *t, int seq)
{
    return seq >= 0 && seq < t->cap ? t->state[seq] : NULL;
}

void seq_table_drop(struct seq_table *t, int seq, void (*free_state)(void *))
{
    if (seq < 0 || seq >= t->cap || !t->state[seq]) return;
    if (free_state) free_state(t->state[seq]);
    t->state[seq] = NULL;
}

void seq_table_free(struct seq_table *t, void (*free_state)(void *))
{
    for (int i = 0; i < t->cap; i++)
        if (t->state[i] && free_state) free_state(t->state[i]);
    free(t->state);
    t->state = NULL;
    t->cap = 0;
}
