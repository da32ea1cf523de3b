/* score_host.c - scores computed on key and query rows downloaded to the
 * host (score.h): the key norm (KNorm) and the last query's per-head
 * attention (TOVA), as NVIDIA/kvpress computes them, and the rows themselves
 * for scorers of their own (KeyDiff, LagKV, Expected Attention). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "score.h"

/* Grow b's host rows to n_rows floats and its work to n_work doubles. */
static int reserve_host(struct score_buf *b, size_t n_rows, int n_work, struct eb_err *e)
{
    if (n_rows > b->rows_cap) {
        float *r = realloc(b->rows, n_rows * sizeof *r);
        if (!r) return eb_fail(e, "out of memory for %zu host rows", n_rows);
        b->rows = r;
        b->rows_cap = n_rows;
    }
    if (n_work > b->work_cap) {
        double *w = realloc(b->work, (size_t)n_work * sizeof *w);
        if (!w) return eb_fail(e, "out of memory for %d scores", n_work);
        b->work = w;
        b->work_cap = n_work;
    }
    return 0;
}

/* (layer, kv head)'s first n keys on the host, or NULL with e set. */
static const float *host_keys(struct score_buf *b, const struct cache_view *cv, int layer,
                              int kv_head, int n, size_t extra, struct eb_err *e)
{
    const float *k = cache_view_k(cv, layer, kv_head);
    if (!k) return eb_fail(e, "the cache exposes no key rows"), NULL;
    size_t nk = (size_t)n * cv->head_dim;
    if (reserve_host(b, nk + extra, n, e)) return NULL;
    cv->be->download(cv->be, b->rows, k, nk);
    return b->rows;
}

int score_host_kv(struct score_buf *b, const struct cache_view *cv, int layer, int kv_head,
                  int n, const float **k, const float **v, struct eb_err *e)
{
    assert(n >= 0 && n <= cache_view_len(cv, layer, kv_head));
    size_t nk = (size_t)n * cv->head_dim;
    if (!(*k = host_keys(b, cv, layer, kv_head, n, v ? nk : 0, e))) return -1;
    if (!v) return 0;
    const float *dv = cache_view_v(cv, layer, kv_head);
    if (!dv) return eb_fail(e, "the cache exposes no value rows");
    cv->be->download(cv->be, b->rows + nk, dv, nk);
    *v = b->rows + nk;
    return 0;
}

int score_key_norms(struct score_buf *b, const struct cache_view *cv, int layer, int kv_head,
                    int n, double *out, struct eb_err *e)
{
    assert(n >= 0 && n <= cache_view_len(cv, layer, kv_head));
    const float *k = host_keys(b, cv, layer, kv_head, n, 0, e);
    if (!k) return -1;
    for (int j = 0; j < n; j++) {
        double s = 0.0;
        for (int d = 0; d < cv->head_dim; d++) s += (double)k[(size_t)j * cv->head_dim + d] *
                                                    k[(size_t)j * cv->head_dim + d];
        out[j] = sqrt(s);
    }
    return 0;
}

int score_last_query_attn(struct score_buf *b, const struct cache_view *cv, int layer,
                          int kv_head, int n_cand, double *out, struct eb_err *e)
{
    int len = cache_view_len(cv, layer, kv_head), hd = cv->head_dim;
    int group = cv->n_head / cv->n_kv;
    assert(n_cand >= 0 && n_cand <= len);
    if (!cv->q || cv->n_q < 1) return eb_fail(e, "no recent queries recorded");
    size_t nq = (size_t)group * hd;
    const float *k = host_keys(b, cv, layer, kv_head, len, nq, e);
    if (!k) return -1;
    float *q = b->rows + (size_t)len * hd;
    cv->be->download(cv->be, q, cv->q[layer] + ((size_t)(cv->n_q - 1) * cv->n_head +
                                                (size_t)kv_head * group) * hd, nq);
    const unsigned char *pad = cache_view_pad(cv, layer, kv_head);
    double scale = 1.0 / sqrt((double)hd), *logit = b->work;
    for (int j = 0; j < n_cand; j++) out[j] = 0.0;
    for (int g = 0; g < group; g++) {
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < len; j++) {
            double s = 0.0;
            for (int d = 0; d < hd; d++) s += (double)q[(size_t)g * hd + d] * k[(size_t)j * hd + d];
            logit[j] = pad && pad[j] ? -INFINITY : s * scale;
            if (logit[j] > mx) mx = logit[j];
        }
        for (int j = 0; j < len; j++) sum += logit[j] = exp(logit[j] - mx);
        for (int j = 0; j < n_cand; j++) out[j] += logit[j] / sum / group;
    }
    return 0;
}
