/* cpu_gemm.c - y[m][n] = x[m][k] . w[n][k]^T (+ bias) through OpenBLAS.
 *
 * One thread pool, not two: OpenBLAS runs single-threaded inside the
 * backend's threads (cpu_pool.h) that split the output columns (the weight rows) into chunks.  With
 * OpenBLAS's own pool, the idle threads of the two pools spin against each
 * other between calls; on 2 cores that made a batch-16 decode projection 4x
 * slower.
 *
 * The chunk width is fixed, not derived from the thread count: OpenBLAS picks
 * different kernels (summing in different orders) for different shapes, so
 * fixed chunks are what makes the result bitwise independent of the number
 * of threads.  Chunks are handed out dynamically, so a thread preempted by
 * another process delays the call by one chunk, not by its whole share. */
#include "kernels/cpu/cpu_ops.h"

#include <cblas.h>
#include <string.h>

enum { GEMM_CHUNK_COLS = 128 };

/* Below this many multiply-adds one thread is quicker than waking the rest. */
static const double GEMM_PARALLEL_MIN = 1 << 17;

static void gemm_cols(float *y, const float *x, const float *w, float beta, int m, int n, int k,
                      int c0, int c1)
{
    if (m == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, c1 - c0, k, 1.0f, w + (size_t)c0 * k, k, x, 1,
                    beta, y + c0, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, c1 - c0, k, 1.0f, x, k,
                    w + (size_t)c0 * k, k, beta, y + c0, n);
}

struct gemm_job {
    float *y;
    const float *x, *w;
    float beta;
    int m, n, k;
};

static void gemm_chunks(void *ctx, int c0, int c1, int ith)
{
    (void)ith;
    const struct gemm_job *j = ctx;
    for (int c = c0; c < c1; c++) {
        int col0 = c * GEMM_CHUNK_COLS;
        int col1 = col0 + GEMM_CHUNK_COLS < j->n ? col0 + GEMM_CHUNK_COLS : j->n;
        gemm_cols(j->y, j->x, j->w, j->beta, j->m, j->n, j->k, col0, col1);
    }
}

void cpu_gemm(struct backend *be, float *y, const float *x, const float *w,
              const float *bias, int m, int n, int k)
{
    if (m <= 0 || n <= 0) return;
    /* Process-wide in OpenBLAS; checked per call in case other code changed it. */
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);

    /* With a bias, start from it in every row and accumulate (beta = 1). */
    float beta = 0.0f;
    if (bias) {
        for (int r = 0; r < m; r++) memcpy(y + (size_t)r * n, bias, (size_t)n * sizeof(float));
        beta = 1.0f;
    }
    if (k <= 0) {
        if (!bias) memset(y, 0, (size_t)m * n * sizeof(float));
        return;
    }
    int chunks = (n + GEMM_CHUNK_COLS - 1) / GEMM_CHUNK_COLS;
    struct gemm_job j = {y, x, w, beta, m, n, k};
    cpu_parallel_for(be, chunks, 1, (double)m * n * k >= GEMM_PARALLEL_MIN, gemm_chunks, &j);
}
