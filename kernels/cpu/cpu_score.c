/* cpu_score.c - the scoring primitives eviction policies combine: window
 * attention importance, 1-D pooling and key-key redundancy, for one kv head.
 *
 * Logits and cosines are f32 dot products through OpenBLAS (single-threaded,
 * see cpu_gemm.c); softmax sums and means accumulate in double so the scores
 * do not depend on the cache length's rounding.  Fixed row blocks make the
 * redundancy bitwise independent of the thread count. */
#include "kernels/cpu/cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { REDUNDANCY_BLOCK = 64 }; /* rows of the cosine matrix per task */

/* Softmax of s[0..n) over the entries not masked by pad (probability 0 there),
 * added times `weight` into acc[0..n_acc). */
static void softmax_accumulate(const float *s, int n, const unsigned char *pad, double *acc,
                               int n_acc, double weight)
{
    float max = -INFINITY;
    for (int j = 0; j < n; j++)
        if (!(pad && pad[j]) && s[j] > max) max = s[j];
    if (max == -INFINITY) return; /* nothing visible */
    double sum = 0.0;
    for (int j = 0; j < n; j++)
        if (!(pad && pad[j])) sum += exp((double)s[j] - max);
    int m = n < n_acc ? n : n_acc;
    for (int j = 0; j < m; j++)
        if (!(pad && pad[j])) acc[j] += weight * exp((double)s[j] - max) / sum;
}

int cpu_window_scores(struct backend *be, const struct window_score_args *a)
{
    (void)be;
    if (!a->out || !a->q || !a->k || a->n_head < 1 || a->n_kv < 1 || a->n_head % a->n_kv != 0 ||
        a->kv_head < 0 || a->kv_head >= a->n_kv || a->head_dim < 1 || a->n_q < 1 || a->len < 1 ||
        a->n_cand < 1 || a->n_cand > a->len)
        return -1;
    int group = a->n_head / a->n_kv, hd = a->head_dim, qstride = a->n_head * hd;
    int cols = a->softmax_all ? a->len : a->n_cand;
    size_t plane = (size_t)a->n_q * cols;
    float *logits = malloc((size_t)group * plane * sizeof *logits);
    double *acc = calloc((size_t)a->n_cand, sizeof *acc);
    if (!logits || !acc) {
        free(logits);
        free(acc);
        return -1;
    }
    /* One GEMM per query head of the group: [n_q][hd] x [cols][hd]^T. */
    for (int g = 0; g < group; g++) {
        const float *qg = a->q + (size_t)(a->kv_head * group + g) * hd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->n_q, cols, hd, a->scale, qg,
                    qstride, a->k, hd, 0.0f, logits + g * plane, cols);
    }
    /* Pool the group into plane 0. */
    for (size_t t = 0; t < plane; t++) {
        float v = logits[t];
        for (int g = 1; g < group; g++) {
            float x = logits[g * plane + t];
            if (a->gqa == SCORE_GQA_MAX) v = x > v ? x : v;
            else v += x;
        }
        logits[t] = a->gqa == SCORE_GQA_MAX ? v : v / (float)group;
    }
    for (int i = 0; i < a->n_q; i++) {
        int visible = cols;
        if (a->softmax_all) {
            visible = a->len - a->n_q + i + 1;
            if (visible < 0) visible = 0;
            if (visible > cols) visible = cols;
        }
        softmax_accumulate(logits + (size_t)i * cols, visible, a->pad, acc, a->n_cand,
                           1.0 / a->n_q);
    }
    for (int j = 0; j < a->n_cand; j++) a->out[j] = (float)acc[j];
    free(logits);
    free(acc);
    return 0;
}

int cpu_pool1d(struct backend *be, float *out, const float *in, int n, int kernel,
               enum score_pool mode)
{
    (void)be;
    if (!out || !in || out == in || n < 0 || kernel < 1 || kernel % 2 == 0) return -1;
    int half = kernel / 2;
    for (int j = 0; j < n; j++) {
        int lo = j - half < 0 ? 0 : j - half, hi = j + half >= n ? n - 1 : j + half;
        if (mode == SCORE_POOL_MAX) {
            float m = in[lo];
            for (int t = lo + 1; t <= hi; t++)
                if (in[t] > m) m = in[t];
            out[j] = m;
        } else {
            double s = 0.0;
            for (int t = lo; t <= hi; t++) s += in[t];
            out[j] = (float)(s / kernel); /* the zero padding counts in the divisor */
        }
    }
    return 0;
}

int cpu_key_redundancy(struct backend *be, const struct redundancy_args *a)
{
    if (!a->out || !a->k || a->len < 1 || a->head_dim < 1) return -1;
    int n = a->len, hd = a->head_dim;
    float *kn = malloc((size_t)n * hd * sizeof *kn);
    double *rowsum = malloc((size_t)n * sizeof *rowsum);
    double *zeroed = malloc((size_t)n * sizeof *zeroed); /* C[i][j*_i], removed from column j*_i */
    int *jstar = malloc((size_t)n * sizeof *jstar);
    int nt = cpu_threads(be);
    float *scratch = malloc((size_t)nt * REDUNDANCY_BLOCK * n * sizeof *scratch);
    int rc = -1;
    if (!kn || !rowsum || !zeroed || !jstar || !scratch) goto out;

    for (int i = 0; i < n; i++) {
        const float *k = a->k + (size_t)i * hd;
        float *d = kn + (size_t)i * hd;
        if (a->pad && a->pad[i]) {
            memset(d, 0, (size_t)hd * sizeof *d);
            continue;
        }
        double ss = 0.0;
        for (int t = 0; t < hd; t++) ss += (double)k[t] * k[t];
        float inv = (float)(1.0 / (sqrt(ss) + 1e-8));
        for (int t = 0; t < hd; t++) d[t] = k[t] * inv;
    }

    int n_blocks = (n + REDUNDANCY_BLOCK - 1) / REDUNDANCY_BLOCK;
    #pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (n_blocks > 1 && (double)n * n * hd > 1e6)
    for (int b = 0; b < n_blocks; b++) {
        int i0 = b * REDUNDANCY_BLOCK, rows = n - i0 < REDUNDANCY_BLOCK ? n - i0 : REDUNDANCY_BLOCK;
        float *c = scratch + (size_t)omp_get_thread_num() * REDUNDANCY_BLOCK * n;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, hd, 1.0f,
                    kn + (size_t)i0 * hd, hd, kn, hd, 0.0f, c, n);
        for (int r = 0; r < rows; r++) {
            int i = i0 + r;
            float *row = c + (size_t)r * n;
            row[i] = 0.0f; /* the diagonal */
            double s = 0.0;
            int js = -1;
            for (int j = 0; j < n; j++) {
                s += row[j];
                if (row[j] > a->threshold) js = j;
            }
            if (js < 0 && a->no_match_zero_col0) js = 0;
            rowsum[i] = s;
            jstar[i] = js;
            zeroed[i] = js >= 0 ? row[js] : 0.0;
        }
    }
    /* C is symmetric before the zeroing, so column j sums to row j's sum;
     * then take away the entries the rows zeroed. */
    for (int i = 0; i < n; i++)
        if (jstar[i] >= 0) rowsum[jstar[i]] -= zeroed[i];
    double max = -INFINITY, sum = 0.0;
    for (int j = 0; j < n; j++) {
        rowsum[j] /= n;
        if (rowsum[j] > max) max = rowsum[j];
    }
    for (int j = 0; j < n; j++) sum += exp(rowsum[j] - max);
    for (int j = 0; j < n; j++) a->out[j] = (float)(exp(rowsum[j] - max) / sum);
    rc = 0;
out:
    free(kn);
    free(rowsum);
    free(zeroed);
    free(jstar);
    free(scratch);
    return rc;
}
