/* cpu_score.c - the scoring primitives eviction policies combine: window
 * attention importance, 1-D pooling and key-key redundancy, for one kv head.
 *
 * Logits and cosines are f32 dot products through OpenBLAS (single-threaded,
 * see cpu_gemm.c; the work is split across our threads instead); softmax sums
 * and means accumulate in double so the scores do not depend on the cache
 * length's rounding (the per-key norms and dots in double too, in SIMD
 * lanes).  Every result is independent of the thread count. */
#include "kernels/cpu/cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { SCORE_COLS = 2048 }; /* keys per GEMM task: a block of K stays in cache */

/* Row i's exponentials, ex[j] = exp(s[j] - max) over the visible, unmasked
 * keys (0 elsewhere), and their sum (0: nothing visible). */
static double softmax_row(const float *s, int n, int n_out, const unsigned char *pad, double *ex)
{
    float max = -INFINITY;
    for (int j = 0; j < n; j++)
        if (!(pad && pad[j]) && s[j] > max) max = s[j];
    memset(ex, 0, (size_t)n_out * sizeof *ex);
    if (max == -INFINITY) return 0.0;
    double sum = 0.0;
    for (int j = 0; j < n; j++)
        if (!(pad && pad[j])) {
            double x = exp((double)s[j] - max);
            sum += x;
            if (j < n_out) ex[j] = x;
        }
    return sum;
}

/* The group's queries as one [group * n_q][hd] matrix, query head g's rows first. */
static void gather_queries(const struct window_score_args *a, int group, float *qa)
{
    int hd = a->head_dim, qstride = a->n_head * hd;
    for (int g = 0; g < group; g++)
        for (int i = 0; i < a->n_q; i++)
            memcpy(qa + ((size_t)g * a->n_q + i) * hd,
                   a->q + (size_t)i * qstride + (size_t)(a->kv_head * group + g) * hd,
                   (size_t)hd * sizeof *qa);
}

/* Every query row of the group against every key: one GEMM per block of
 * keys, so each key is read once for the whole group, blocks split across
 * the threads.  Then the group pooled into plane 0. */
static void group_logits(const struct window_score_args *a, int group, int cols, const float *qa,
                         float *logits, int nt)
{
    int rows = group * a->n_q, hd = a->head_dim, n_blk = (cols + SCORE_COLS - 1) / SCORE_COLS;
    #pragma omp parallel for num_threads(nt) schedule(static) if (n_blk > 1)
    for (int b = 0; b < n_blk; b++) {
        int c0 = b * SCORE_COLS, w = cols - c0 < SCORE_COLS ? cols - c0 : SCORE_COLS;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, w, hd, a->scale, qa, hd,
                    a->k + (size_t)c0 * hd, hd, 0.0f, logits + c0, cols);
    }
    size_t plane = (size_t)a->n_q * cols;
    #pragma omp parallel for num_threads(nt) schedule(static) if (plane * group >= CPU_PARALLEL_MIN)
    for (size_t t = 0; t < plane; t++) {
        float v = logits[t];
        for (int g = 1; g < group; g++) {
            float x = logits[g * plane + t];
            if (a->gqa == SCORE_GQA_MAX) v = x > v ? x : v;
            else v += x;
        }
        logits[t] = a->gqa == SCORE_GQA_MAX ? v : v / (float)group;
    }
}

int cpu_window_scores(struct backend *be, const struct window_score_args *a)
{
    if (!a->out || !a->q || !a->k || a->n_head < 1 || a->n_kv < 1 || a->n_head % a->n_kv != 0 ||
        a->kv_head < 0 || a->kv_head >= a->n_kv || a->head_dim < 1 || a->n_q < 1 || a->len < 1 ||
        a->n_cand < 1 || a->n_cand > a->len)
        return -1;
    /* One thread pool, ours (see cpu_gemm.c). */
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    int group = a->n_head / a->n_kv, nt = cpu_threads(be), nc = a->n_cand;
    int cols = a->softmax_all ? a->len : a->n_cand;
    size_t plane = (size_t)a->n_q * cols;
    float *qa = malloc((size_t)group * a->n_q * a->head_dim * sizeof *qa);
    float *logits = malloc((size_t)group * plane * sizeof *logits);
    double *ex = malloc((size_t)a->n_q * nc * sizeof *ex), *sum = malloc((size_t)a->n_q * sizeof *sum);
    if (!qa || !logits || !ex || !sum) {
        free(qa), free(logits), free(ex), free(sum);
        return -1;
    }
    gather_queries(a, group, qa);
    group_logits(a, group, cols, qa, logits, nt);
    #pragma omp parallel for num_threads(nt) schedule(static) if (plane >= CPU_PARALLEL_MIN)
    for (int i = 0; i < a->n_q; i++) {
        int visible = cols;
        if (a->softmax_all) {
            visible = a->len - a->n_q + i + 1;
            if (visible < 0) visible = 0;
            if (visible > cols) visible = cols;
        }
        sum[i] = softmax_row(logits + (size_t)i * cols, visible, nc, a->pad, ex + (size_t)i * nc);
    }
    /* The mean over rows, each row's share added in row order as before. */
    #pragma omp parallel for num_threads(nt) schedule(static) if (plane >= CPU_PARALLEL_MIN)
    for (int j = 0; j < nc; j++) {
        double acc = 0.0;
        for (int i = 0; i < a->n_q; i++)
            if (sum[i] > 0) acc += 1.0 / a->n_q * ex[(size_t)i * nc + j] / sum[i];
        a->out[j] = (float)acc;
    }
    free(qa), free(logits), free(ex), free(sum);
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
    RED_ROWS = 64,        /* rows of the cosine matrix per task */
    RED_COLS_FIRST = 32,  /* columns of the first block, from the most recent key down */
    RED_COLS = 512        /* the most columns of a later block (each doubles the last) */
};

/* The cosine matrix is never formed whole.  It is symmetric with a zero
 * diagonal, so column j sums to row j's sum, k_j . S - k_j . k_j with S the
 * sum of all normalised keys: O(L d).  The zeroing needs, per row i, the
 * largest j with C[i][j] > threshold: a block of rows is multiplied (GEMM)
 * against blocks of columns from the most recent key down, and stops as soon
 * as every row of the block has its match; only keys like no other cost a
 * full row.  Most keys have a similar key among the last few, so the first
 * block is small and later ones grow. */
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

    /* Rows are independent except for S, summed in row order (as one thread would). */
    int big = (size_t)n * hd >= CPU_PARALLEL_MIN;
    #pragma omp parallel for num_threads(nt) schedule(static) if (big)
    for (int i = 0; i < n; i++) {
        const float *k = a->k + (size_t)i * hd;
        float *d = kn + (size_t)i * hd;
        if (a->pad && a->pad[i]) {
            memset(d, 0, (size_t)hd * sizeof *d);
            continue;
        }
        double ss = 0.0;
        #pragma omp simd reduction(+ : ss)
        for (int t = 0; t < hd; t++) ss += (double)k[t] * k[t];
        float inv = (float)(1.0 / (sqrt(ss) + 1e-8));
        for (int t = 0; t < hd; t++) d[t] = k[t] * inv;
    }
    for (int i = 0; i < n; i++)
        for (int t = 0; t < hd; t++) sum[t] += kn[(size_t)i * hd + t];
    #pragma omp parallel for num_threads(nt) schedule(static) if (big)
    for (int i = 0; i < n; i++) {
        const float *ki = kn + (size_t)i * hd;
        double self = 0.0, dot = 0.0;
        #pragma omp simd reduction(+ : self, dot)
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
        for (int e = n, span = RED_COLS_FIRST; e > 0 && left > 0;
             e -= span, span = 2 * span < RED_COLS ? 2 * span : RED_COLS) {
            int s = e - span > 0 ? e - span : 0, w = e - s;
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
