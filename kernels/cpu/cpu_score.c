/* cpu_score.c - the scoring primitives eviction policies combine: window
 * attention importance, 1-D pooling and key-key redundancy, for one kv head.
 *
 * Logits and cosines are f32 dot products through OpenBLAS (single-threaded,
 * see cpu_gemm.c); softmax sums and means accumulate in double so the scores
 * do not depend on the cache length's rounding.  Every result is independent
 * of the thread count. */
#include "kernels/cpu/cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

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
    /* One thread pool, ours (see cpu_gemm.c). */
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
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

enum {
    RED_ROWS = 64,  /* rows of the cosine matrix per task */
    RED_COLS = 256  /* columns computed at a time, from the most recent key down */
};

/* The cosine matrix is never formed whole.  It is symmetric with a zero
 * diagonal, so column j sums to row j's sum, k_j . S - k_j . k_j with S the
 * sum of all normalised keys: O(L d).  The zeroing needs, per row i, the
 * largest j with C[i][j] > threshold: a block of rows is multiplied (GEMM)
 * against blocks of columns from the most recent key down, and stops as soon
 * as every row of the block has its match; only keys like no other cost a
 * full row. */
int cpu_key_redundancy(struct backend *be, const struct redundancy_args *a)
{
    if (!a->out || !a->k || a->len < 1 || a->head_dim < 1) return -1;
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    int n = a->len, hd = a->head_dim, nt = cpu_threads(be);
    float *kn = malloc((size_t)n * hd * sizeof *kn);
    double *sum = calloc((size_t)hd, sizeof *sum);
    double *col = malloc((size_t)n * sizeof *col);
    double *zeroed = malloc((size_t)n * sizeof *zeroed); /* C[i][j*_i], removed from column j*_i */
    int *jstar = malloc((size_t)n * sizeof *jstar);
    float *scratch = malloc((size_t)nt * RED_ROWS * RED_COLS * sizeof *scratch);
    int rc = -1;
    if (!kn || !sum || !col || !zeroed || !jstar || !scratch) goto out;

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
        for (int t = 0; t < hd; t++) {
            d[t] = k[t] * inv;
            sum[t] += d[t];
        }
    }
    for (int i = 0; i < n; i++) {
        const float *ki = kn + (size_t)i * hd;
        double self = 0.0, dot = 0.0;
        for (int t = 0; t < hd; t++) {
            self += (double)ki[t] * ki[t];
            dot += (double)ki[t] * sum[t];
        }
        col[i] = dot - self;
        jstar[i] = -1;
        zeroed[i] = 0.0;
    }
    int n_blocks = (n + RED_ROWS - 1) / RED_ROWS;
    #pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (n_blocks > 1 && (double)n * n * hd > 4e6)
    for (int b = 0; b < n_blocks; b++) {
        int i0 = b * RED_ROWS, rows = n - i0 < RED_ROWS ? n - i0 : RED_ROWS, left = rows;
        float *c = scratch + (size_t)omp_get_thread_num() * RED_ROWS * RED_COLS;
        for (int e = n; e > 0 && left > 0; e -= RED_COLS) {
            int s = e - RED_COLS > 0 ? e - RED_COLS : 0, w = e - s;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, w, hd, 1.0f,
                        kn + (size_t)i0 * hd, hd, kn + (size_t)s * hd, hd, 0.0f, c, w);
            for (int r = 0; r < rows; r++) {
                int i = i0 + r;
                if (jstar[i] >= 0) continue;
                for (int j = e - 1; j >= s; j--)
                    if (j != i && c[(size_t)r * w + (j - s)] > a->threshold) {
                        jstar[i] = j;
                        zeroed[i] = c[(size_t)r * w + (j - s)];
                        left--;
                        break;
                    }
            }
        }
        if (a->no_match_zero_col0)
            for (int r = 0; r < rows; r++) {
                int i = i0 + r;
                if (jstar[i] >= 0) continue;
                jstar[i] = 0;
                double d = 0.0;
                if (i != 0)
                    for (int t = 0; t < hd; t++) d += (double)kn[(size_t)i * hd + t] * kn[t];
                zeroed[i] = d;
            }
    }
    for (int i = 0; i < n; i++)
        if (jstar[i] >= 0) col[jstar[i]] -= zeroed[i];
    double max = -INFINITY, total = 0.0;
    for (int j = 0; j < n; j++) {
        col[j] /= n;
        if (col[j] > max) max = col[j];
    }
    for (int j = 0; j < n; j++) total += exp(col[j] - max);
    for (int j = 0; j < n; j++) a->out[j] = (float)(exp(col[j] - max) / total);
    rc = 0;
out:
    free(kn);
    free(sum);
    free(col);
    free(zeroed);
    free(jstar);
    free(scratch);
    return rc;
}
