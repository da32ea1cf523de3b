/* cpu_norm_rope.c - RMSNorm and rotary position embedding.
 *
 * Both follow Hugging Face's f32 arithmetic step by step, so that logits agree
 * with transformers to rounding: RMSNorm scales by 1/sqrt(mean + eps) and then
 * multiplies by the weight; RoPE's angle is the f32 product (float)pos *
 * inv_freq[i] (at large positions this rounding is visible, and HF has it). */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>

struct rmsnorm_job {
    float *y;
    const float *x, *w;
    int dim;
    float eps;
};

static void rmsnorm_rows(void *ctx, int r0, int r1, int ith)
{
    (void)ith;
    const struct rmsnorm_job *j = ctx;
    for (int r = r0; r < r1; r++) cpu_rmsnorm_row(j->y + (size_t)r * j->dim,
                                                 j->x + (size_t)r * j->dim, j->w, j->dim, j->eps);
}

void cpu_rmsnorm_row(float *yr, const float *xr, const float *w, int dim, float eps)
{
    double ss = 0.0; /* the sum in double: as accurate as torch's pairwise sum, or more */
    for (int j = 0; j < dim; j++) ss += (double)xr[j] * xr[j];
    float inv = 1.0f / sqrtf((float)(ss / dim) + eps);
    for (int j = 0; j < dim; j++) yr[j] = w[j] * (xr[j] * inv);
}

void cpu_rmsnorm(struct backend *be, float *y, const float *x, const float *w,
                 int rows, int dim, float eps)
{
    if (rows <= 0 || dim <= 0) return;
    struct rmsnorm_job j = {y, x, w, dim, eps};
    cpu_parallel_for(be, rows, 1, (size_t)rows * dim >= CPU_PARALLEL_MIN, rmsnorm_rows, &j);
}

/* Pairs are processed in blocks so that cos/sin are computed once per row and
 * shared by all heads, with no limit on head_dim. */
enum { ROPE_BLOCK = 64 };

void cpu_rope_row(float *xr, int n_heads, int head_dim, int pos, const float *inv_freq,
                  enum rope_pairing pairing)
{
    int half = head_dim / 2;
    float p = (float)pos;
    for (int i0 = 0; i0 < half; i0 += ROPE_BLOCK) {
        int nb = half - i0 < ROPE_BLOCK ? half - i0 : ROPE_BLOCK;
        float c[ROPE_BLOCK], s[ROPE_BLOCK];
        for (int i = 0; i < nb; i++) {
            float angle = p * inv_freq[i0 + i];
            c[i] = cosf(angle);
            s[i] = sinf(angle);
        }
        for (int h = 0; h < n_heads; h++) {
            float *xh = xr + (size_t)h * head_dim;
            for (int i = 0; i < nb; i++) {
                int a = pairing == ROPE_PAIR_HALF ? i0 + i : 2 * (i0 + i);
                int b = pairing == ROPE_PAIR_HALF ? i0 + i + half : a + 1;
                float x0 = xh[a], x1 = xh[b];
                xh[a] = x0 * c[i] - x1 * s[i];
                xh[b] = x1 * c[i] + x0 * s[i];
            }
        }
    }
}

struct rope_job {
    float *x;
    int n_heads, head_dim;
    const int *pos;
    const float *inv_freq;
    enum rope_pairing pairing;
};

static void rope_rows(void *ctx, int r0, int r1, int ith)
{
    (void)ith;
    const struct rope_job *j = ctx;
    size_t row_len = (size_t)j->n_heads * j->head_dim;
    for (int r = r0; r < r1; r++)
        cpu_rope_row(j->x + (size_t)r * row_len, j->n_heads, j->head_dim, j->pos[r], j->inv_freq,
                     j->pairing);
}

void cpu_rope(struct backend *be, float *x, int rows, int n_heads, int head_dim,
              const int *pos, const float *inv_freq, enum rope_pairing pairing)
{
    if (rows <= 0 || n_heads <= 0 || head_dim < 2) return;
    struct rope_job j = {x, n_heads, head_dim, pos, inv_freq, pairing};
    size_t row_len = (size_t)n_heads * head_dim;
    cpu_parallel_for(be, rows, 1, (size_t)rows * row_len >= CPU_PARALLEL_MIN, rope_rows, &j);
}
