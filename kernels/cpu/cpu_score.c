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
struct logits_job {
    const struct window_score_args *a;
    int group, cols;
    const float *qa;
    float *logits;
};

static void logit_blocks(void *ctx, int b0, int b1, int ith)
{
    (void)ith;
    const struct logits_job *j = ctx;
    const struct window_score_args *a = j->a;
    int rows = j->group * a->n_q, hd = a->head_dim, cols = j->cols;
    for (int b = b0; b < b1; b++) {
        int c0 = b * SCORE_COLS, w = cols - c0 < SCORE_COLS ? cols - c0 : SCORE_COLS;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, w, hd, a->scale, j->qa, hd,
                    a->k + (size_t)c0 * hd, hd, 0.0f, j->logits + c0, cols);
    }
}

/* Plane 0 over elements [t0, t1): the group's max or mean. */
static void pool_group(void *ctx, int t0, int t1, int ith)
{
    (void)ith;
    const struct logits_job *j = ctx;
    size_t plane = (size_t)j->a->n_q * j->cols;
    for (int t = t0; t < t1; t++) {
        float v = j->logits[t];
        for (int g = 1; g < j->group; g++) {
            float x = j->logits[g * plane + t];
            if (j->a->gqa == SCORE_GQA_MAX) v = x > v ? x : v;
            else v += x;
        }
        j->logits[t] = j->a->gqa == SCORE_GQA_MAX ? v : v / (float)j->group;
    }
}

static void group_logits(struct backend *be, const struct window_score_args *a, int group,
                         int cols, const float *qa, float *logits, int nt)
{
    int n_blk = (cols + SCORE_COLS - 1) / SCORE_COLS;
    struct logits_job j = {a, group, cols, qa, logits};
    cpu_parallel_for(be, n_blk, (n_blk + nt - 1) / nt, n_blk > 1, logit_blocks, &j);
    size_t plane = (size_t)a->n_q * cols;
    cpu_parallel_for(be, (int)plane, (int)((plane + nt - 1) / nt),
                     plane * group >= CPU_PARALLEL_MIN, pool_group, &j);
}

/* Softmax of query rows [i0, i1) and the mean over rows of candidates [j0, j1). */
struct softmax_job {
    const struct window_score_args *a;
    int cols, nc;
    float *logits;
    double *ex, *sum;
};

static void softmax_rows(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    const struct softmax_job *j = ctx;
    const struct window_score_args *a = j->a;
    for (int i = i0; i < i1; i++) {
        int visible = j->cols;
        if (a->softmax_all) {
            visible = a->len - a->n_q + i + 1;
            if (visible < 0) visible = 0;
            if (visible > j->cols) visible = j->cols;
        }
        j->sum[i] = softmax_row(j->logits + (size_t)i * j->cols, visible, j->nc, a->pad,
                                j->ex + (size_t)i * j->nc);
    }
}

/* The mean over rows, each row's share added in row order. */
static void mean_cols(void *ctx, int j0, int j1, int ith)
{
    (void)ith;
    const struct softmax_job *jb = ctx;
    const struct window_score_args *a = jb->a;
    for (int j = j0; j < j1; j++) {
        double acc = 0.0;
        for (int i = 0; i < a->n_q; i++)
            if (jb->sum[i] > 0) acc += 1.0 / a->n_q * jb->ex[(size_t)i * jb->nc + j] / jb->sum[i];
        a->out[j] = (float)acc;
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
    group_logits(be, a, group, cols, qa, logits, nt);
    struct softmax_job sj = {a, cols, nc, logits, ex, sum};
    int par = plane >= CPU_PARALLEL_MIN;
    cpu_parallel_for(be, a->n_q, (a->n_q + nt - 1) / nt, par, softmax_rows, &sj);
    cpu_parallel_for(be, nc, (nc + nt - 1) / nt, par, mean_cols, &sj);
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
struct red_job {
    const struct redundancy_args *a;
    int n, hd;
    float *kn;
    double *sum, *col, *zeroed;
    int *jstar;
    float *scratch;      /* per thread: RED_ROWS x RED_COLS */
};

/* Keys [i0, i1) normalised into kn (pads as zero rows). */
static void red_normalise(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    const struct red_job *j = ctx;
    int hd = j->hd;
    for (int i = i0; i < i1; i++) {
        const float *k = j->a->k + (size_t)i * hd;
        float *d = j->kn + (size_t)i * hd;
        if (j->a->pad && j->a->pad[i]) {
            memset(d, 0, (size_t)hd * sizeof *d);
            continue;
        }
        double ss = 0.0;
        #pragma omp simd reduction(+ : ss)
        for (int t = 0; t < hd; t++) ss += (double)k[t] * k[t];
        float inv = (float)(1.0 / (sqrt(ss) + 1e-8));
        for (int t = 0; t < hd; t++) d[t] = k[t] * inv;
    }
}

/* Column sums [i0, i1) of the cosine matrix: k_i . S - k_i . k_i. */
static void red_columns(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    const struct red_job *j = ctx;
    int hd = j->hd;
    for (int i = i0; i < i1; i++) {
        const float *ki = j->kn + (size_t)i * hd;
        double self = 0.0, dot = 0.0;
        #pragma omp simd reduction(+ : self, dot)
        for (int t = 0; t < hd; t++) {
            self += (double)ki[t] * ki[t];
            dot += (double)ki[t] * j->sum[t];
        }
        j->col[i] = dot - self;
        j->jstar[i] = -1;
        j->zeroed[i] = 0.0;
    }
}

/* Blocks [b0, b1) of RED_ROWS rows: each row's most recent match above the threshold. */
static void red_blocks(void *ctx, int b0, int b1, int ith)
{
    const struct red_job *j = ctx;
    const struct redundancy_args *a = j->a;
    int n = j->n, hd = j->hd;
    const float *kn = j->kn;
    float *c = j->scratch + (size_t)ith * RED_ROWS * RED_COLS;
    for (int b = b0; b < b1; b++) {
        int i0 = b * RED_ROWS, rows = n - i0 < RED_ROWS ? n - i0 : RED_ROWS, left = rows;
        for (int e = n, span = RED_COLS_FIRST; e > 0 && left > 0;
             e -= span, span = 2 * span < RED_COLS ? 2 * span : RED_COLS) {
            int s = e - span > 0 ? e - span : 0, w = e - s;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, w, hd, 1.0f,
                        kn + (size_t)i0 * hd, hd, kn + (size_t)s * hd, hd, 0.0f, c, w);
            for (int r = 0; r < rows; r++) {
                int i = i0 + r;
                if (j->jstar[i] >= 0) continue;
                for (int jj = e - 1; jj >= s; jj--)
                    if (jj != i && c[(size_t)r * w + (jj - s)] > a->threshold) {
                        j->jstar[i] = jj;
                        j->zeroed[i] = c[(size_t)r * w + (jj - s)];
                        left--;
                        break;
                    }
            }
        }
        if (a->no_match_zero_col0)
            for (int r = 0; r < rows; r++) {
                int i = i0 + r;
                if (j->jstar[i] >= 0) continue;
                j->jstar[i] = 0;
                double d = 0.0;
                if (i != 0)
                    for (int t = 0; t < hd; t++) d += (double)kn[(size_t)i * hd + t] * kn[t];
                j->zeroed[i] = d;
            }
    }
}

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
    int big = (size_t)n * hd >= CPU_PARALLEL_MIN, grain = (n + nt - 1) / nt;
    struct red_job j = {a, n, hd, kn, sum, col, zeroed, jstar, scratch};
    cpu_parallel_for(be, n, grain, big, red_normalise, &j);
    for (int i = 0; i < n; i++)
        for (int t = 0; t < hd; t++) sum[t] += kn[(size_t)i * hd + t];
    cpu_parallel_for(be, n, grain, big, red_columns, &j);
    int n_blocks = (n + RED_ROWS - 1) / RED_ROWS;
    cpu_parallel_for(be, n_blocks, 1, n_blocks > 1 && (double)n * n * hd > 4e6, red_blocks, &j);
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
