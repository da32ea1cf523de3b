/* attend.c - what RPC and BeaconKV share (attend.h): host query rows
 * attending to a slot range of one kv head, reduced over the rows; the
 * prompt prefix of a head; a kv group's query rows; and their keep-set of
 * prompt + top candidates + recent slots; the scratch they score with. */
#include "attend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void attend_buf_free(struct attend_buf *b)
{
    if (b->be) {
        if (b->dq) b->be->free(b->be, b->dq);
        if (b->dy) b->be->free(b->be, b->dy);
    }
    free(b->hy);
    memset(b, 0, sizeof *b);
}

static int grow_dev(struct backend *be, float **p, size_t *cap, size_t n, struct eb_err *e)
{
    if (n <= *cap) return 0;
    if (*p) be->free(be, *p);
    *p = be->alloc(be, n);
    *cap = *p ? n : 0;
    return *p ? 0 : eb_fail(e, "out of backend memory for %zu floats", n);
}

int attend_scratch_open(struct attend_scratch *w, size_t n_qh, size_t n_rows, struct eb_err *e)
{
    memset(w, 0, sizeof *w);
    w->qh = malloc(n_qh * sizeof *w->qh);
    w->rows = malloc(n_rows * sizeof *w->rows);
    if (w->qh && w->rows) return 0;
    attend_scratch_free(w);
    return eb_fail(e, "out of memory for %zu query rows", n_qh + n_rows);
}

int attend_scratch_reserve(struct attend_scratch *w, int n, struct eb_err *e)
{
    if (n <= w->cap) return 0;
    double **d[] = {&w->s, &w->acc, &w->tmp};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        double *x = realloc(*d[i], (size_t)n * sizeof *x);
        if (!x) return eb_fail(e, "out of memory for %d scores", n);
        *d[i] = x;
    }
    w->cap = n;
    return 0;
}

void attend_scratch_free(struct attend_scratch *w)
{
    attend_buf_free(&w->ab);
    score_buf_free(&w->sb);
    free(w->qh);
    free(w->rows);
    free(w->s);
    free(w->acc);
    free(w->tmp);
    memset(w, 0, sizeof *w);
}

int attend_reduce(struct attend_buf *b, const struct cache_view *cv, int layer, int kv_head,
                  int k0, int n, const float *q, int nq, int softmax, enum attend_reduce red,
                  double *out, struct eb_err *e)
{
    struct backend *be = cv->be;
    int d = cv->head_dim;
    if (n <= 0 || nq <= 0) return 0;
    if (b->be && b->be != be) attend_buf_free(b);
    b->be = be;
    size_t ny = (size_t)nq * n;
    if (grow_dev(be, &b->dq, &b->dq_cap, (size_t)nq * d, e) ||
        grow_dev(be, &b->dy, &b->dy_cap, ny, e))
        return -1;
    if (ny > b->hy_cap) {
        float *h = realloc(b->hy, ny * sizeof *h);
        if (!h) return eb_fail(e, "out of memory for %zu logits", ny);
        b->hy = h;
        b->hy_cap = ny;
    }
    be->upload(be, b->dq, q, (size_t)nq * d);
    be->gemm(be, b->dy, b->dq, cache_view_k(cv, layer, kv_head) + (size_t)k0 * d, NULL, nq, n, d);
    be->download(be, b->hy, b->dy, ny);
    double scale = 1.0 / sqrt((double)d);
    for (int r = 0; r < nq; r++) {
        const float *y = b->hy + (size_t)r * n;
        double mx = -INFINITY, sum = 0.0;
        if (softmax) {
            for (int j = 0; j < n; j++)
                if (y[j] * scale > mx) mx = y[j] * scale;
            for (int j = 0; j < n; j++) sum += exp(y[j] * scale - mx);
        }
        for (int j = 0; j < n; j++) {
            double v = softmax ? exp(y[j] * scale - mx) / sum : y[j] * scale;
            if (red == ATTEND_SUM) out[j] += v;
            else if (v > out[j]) out[j] = v;
        }
    }
    return 0;
}

int prompt_slots(const struct cache_view *cv, int layer, int kv_head, int n_prompt)
{
    int len = cache_view_len(cv, layer, kv_head);
    const int *pos = cv->pos + ((size_t)layer * cv->n_kv + kv_head) * cv->capacity;
    int lo = 0, hi = len; /* first slot with pos >= n_prompt */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (pos[mid] < n_prompt) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int group_query_rows(float *dst, const float *qh, int rows, int n_head, int head_dim, int h,
                     int group)
{
    int d = head_dim, n = 0;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < group; g++)
            memcpy(dst + (size_t)n++ * d, qh + (size_t)r * n_head * d + (size_t)(h * group + g) * d,
                   (size_t)d * sizeof *dst);
    return n;
}

int keep_prompt_topk_recent(struct score_buf *sb, const double *s, int p, int n, int keep_n,
                            int len, int *keep, struct eb_err *e)
{
    int k = 0;
    for (int j = 0; j < p; j++) keep[k++] = j;
    if (score_topk(sb, s, n, keep_n, keep + k, e)) return -1;
    for (int i = 0; i < keep_n; i++) keep[k + i] += p;
    k += keep_n;
    for (int j = p + n; j < len; j++) keep[k++] = j;
    return k;
}
