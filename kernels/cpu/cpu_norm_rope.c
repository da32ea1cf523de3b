/* cpu_norm_rope.c - RMSNorm and rotary position embedding.
 *
 * Both follow Hugging Face's f32 arithmetic step by step, so that logits agree
 * with transformers to rounding: RMSNorm scales by 1/sqrt(mean + eps) and then
 * multiplies by the weight; RoPE's angle is the f32 product (float)pos *
 * inv_freq[i] (at large positions this rounding is visible, and HF has it). */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>

void cpu_rmsnorm(struct backend *be, float *y, const float *x, const float *w,
                 int rows, int dim, float eps)
{
    if (rows <= 0 || dim <= 0) return;
    #pragma omp parallel for num_threads(cpu_threads(be)) \
        if ((size_t)rows * dim >= CPU_PARALLEL_MIN)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *yr = y + (size_t)r * dim;
        double ss = 0.0; /* the sum in double: as accurate as torch's pairwise sum, or more */
        for (int j = 0; j < dim; j++) ss += (double)xr[j] * xr[j];
        float inv = 1.0f / sqrtf((float)(ss / dim) + eps);
        for (int j = 0; j < dim; j++) yr[j] = w[j] * (xr[j] * inv);
    }
}

/* Pairs are processed in blocks so that cos/sin are computed once per row and
 * shared by all heads, with no limit on head_dim. */
enum { ROPE_BLOCK = 64 };

void cpu_rope(struct backend *be, float *x, int rows, int n_heads, int head_dim,
              const int *pos, const float *inv_freq, enum rope_pairing pairing)
{
    if (rows <= 0 || n_heads <= 0 || head_dim < 2) return;
    int half = head_dim / 2;
    size_t row_len = (size_t)n_heads * head_dim;
    #pragma omp parallel for num_threads(cpu_threads(be)) \
        if ((size_t)rows * row_len >= CPU_PARALLEL_MIN)
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * row_len;
        float p = (float)pos[r];
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
}
