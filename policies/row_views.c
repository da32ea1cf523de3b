/* row_views.c - a score context's views (row.h), each computed on first use
 * and kept until the next head. */
#include "row_views.h"

#include <math.h>
#include <stdlib.h>

enum view { V_KEYS, V_VALUES, V_NORMS, V_IMP, V_LAST_Q, V_RED, N_VIEWS };

struct row_views {
    struct score_buf *buf;     /* the selector's scratch, for the backend primitives */
    const double *sum;         /* the head's attention sums, or NULL */
    int sum_cap;
    unsigned have;             /* 1 << enum view: filled for this head */
    float *rows[2];            /* keys, values: [cap_rows] */
    size_t cap_rows[2];
    double *d[N_VIEWS];        /* norms, importance, last query, redundancy: [cap_d] */
    int cap_d[N_VIEWS];
};

struct row_views *row_views_new(struct eb_err *e)
{
    return eb_calloc(1, sizeof(struct row_views), e);
}

void row_views_free(struct row_views *v)
{
    if (!v) return;
    for (int i = 0; i < 2; i++) free(v->rows[i]);
    for (int i = 0; i < N_VIEWS; i++) free(v->d[i]);
    free(v);
}

void row_views_begin(struct row_views *v, struct score_buf *b, const double *sum, int cap)
{
    v->buf = b;
    v->sum = sum;
    v->sum_cap = cap;
    v->have = 0;
}

/* v->d[which] with room for n doubles, or NULL with e set. */
static double *doubles(struct row_views *v, enum view which, int n, struct eb_err *e)
{
    if (n + 1 > v->cap_d[which]) {   /* + 1: never a zero-size allocation */
        double *d = realloc(v->d[which], (size_t)(n + 1) * sizeof *d);
        if (!d) return eb_fail(e, "out of memory for %d scores", n), NULL;
        v->d[which] = d;
        v->cap_d[which] = n + 1;
    }
    return v->d[which];
}

/* Keys (which 0) or values (1) of the head on the host. */
static const float *rows(struct score_ctx *c, int which, struct eb_err *e)
{
    struct row_views *v = c->views;
    if (v->have & (1u << (V_KEYS + which))) return v->rows[which];
    const float *dev = which ? cache_view_v(c->cv, c->layer, c->kv_head)
                             : cache_view_k(c->cv, c->layer, c->kv_head);
    if (!dev) return eb_fail(e, "the cache exposes no %s rows", which ? "value" : "key"), NULL;
    size_t n = (size_t)c->len * c->cv->head_dim;
    if (n + 1 > v->cap_rows[which]) {
        float *r = realloc(v->rows[which], (n + 1) * sizeof *r);
        if (!r) return eb_fail(e, "out of memory for %zu host rows", n), NULL;
        v->rows[which] = r;
        v->cap_rows[which] = n + 1;
    }
    c->cv->be->download(c->cv->be, v->rows[which], dev, n);
    v->have |= 1u << (V_KEYS + which);
    return v->rows[which];
}

const float *ctx_keys(struct score_ctx *c, struct eb_err *e)
{
    return rows(c, 0, e);
}

const float *ctx_values(struct score_ctx *c, struct eb_err *e)
{
    return rows(c, 1, e);
}

const double *ctx_key_norms(struct score_ctx *c, struct eb_err *e)
{
    struct row_views *v = c->views;
    if (v->have & (1u << V_NORMS)) return v->d[V_NORMS];
    const float *k = ctx_keys(c, e);
    double *out = k ? doubles(v, V_NORMS, c->len, e) : NULL;
    if (!out) return NULL;
    int hd = c->cv->head_dim;
    for (int j = 0; j < c->len; j++) {
        double s = 0.0;
        for (int d = 0; d < hd; d++) s += (double)k[(size_t)j * hd + d] * k[(size_t)j * hd + d];
        out[j] = sqrt(s);
    }
    v->have |= 1u << V_NORMS;
    return out;
}

const double *ctx_window_attn(struct score_ctx *c, const struct importance_opts *o,
                              struct eb_err *e)
{
    struct row_views *v = c->views;
    if (v->have & (1u << V_IMP)) return v->d[V_IMP];
    double *out = doubles(v, V_IMP, c->n_cand, e);
    if (!out || score_importance(v->buf, c->cv, c->layer, c->kv_head, o, c->n_cand, out, e))
        return NULL;
    v->have |= 1u << V_IMP;
    return out;
}

const double *ctx_last_query_attn(struct score_ctx *c, struct eb_err *e)
{
    struct row_views *v = c->views;
    if (v->have & (1u << V_LAST_Q)) return v->d[V_LAST_Q];
    double *out = doubles(v, V_LAST_Q, c->n_cand, e);
    if (!out || score_last_query_attn(v->buf, c->cv, c->layer, c->kv_head, c->n_cand, out, e))
        return NULL;
    v->have |= 1u << V_LAST_Q;
    return out;
}

const double *ctx_redundancy(struct score_ctx *c, float threshold, int no_match_zero_col0,
                             struct eb_err *e)
{
    struct row_views *v = c->views;
    if (v->have & (1u << V_RED)) return v->d[V_RED];
    double *out = doubles(v, V_RED, c->len, e);
    if (!out || score_redundancy(v->buf, c->cv, c->layer, c->kv_head, threshold,
                                 no_match_zero_col0, out, e))
        return NULL;
    v->have |= 1u << V_RED;
    return out;
}

const double *ctx_attn_sum(struct score_ctx *c, struct eb_err *e)
{
    const struct row_views *v = c->views;
    if (!v->sum) return eb_fail(e, "no attention sums: the row does not ask for them"), NULL;
    if (c->len > v->sum_cap)
        return eb_fail(e, "head holds %d slots, more than %d", c->len, v->sum_cap), NULL;
    return v->sum;
}

const int *ctx_positions(const struct score_ctx *c)
{
    return c->cv->pos + ((size_t)c->layer * c->cv->n_kv + c->kv_head) * c->cv->capacity;
}

const unsigned char *ctx_pads(const struct score_ctx *c)
{
    return cache_view_pad(c->cv, c->layer, c->kv_head);
}
