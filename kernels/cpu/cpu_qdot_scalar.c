/* cpu_qdot_scalar.c - portable dot kernels: one weight row in its stored type
 * against one prepared activation row (see cpu_qdot.h).  Integer sums per
 * block, one float multiply per block (per sub-block for the k-quants). They
 * are the reference the SIMD kernels are tested against, and what runs on a
 * CPU without AVX2. */
#include "kernels/cpu/cpu_qdot.h"

#include <stdint.h>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

static float f16(const uint8_t *p)
{
    return quant_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

static uint32_t u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float dot_f32(int k, const void *wv, const void *xv)
{
    const float *w = wv, *x = xv;
    float s = 0.0f;
    for (int i = 0; i < k; i++) s += w[i] * x[i];
    return s;
}

static float dot_f16(int k, const void *wv, const void *xv)
{
    const uint8_t *w = wv;
    const float *x = xv;
    float s = 0.0f;
    for (int i = 0; i < k; i++) s += f16(w + 2 * i) * x[i];
    return s;
}

static float dot_bf16(int k, const void *wv, const void *xv)
{
    const uint8_t *w = wv;
    const float *x = xv;
    float s = 0.0f;
    for (int i = 0; i < k; i++)
        s += quant_bf16_to_f32((uint16_t)(w[2 * i] | (w[2 * i + 1] << 8))) * x[i];
    return s;
}

static float dot_q4_0(int k, const void *wv, const void *xv)
{
    const block_q4_0 *w = wv;
    const block_q8_32 *x = xv;
    float s = 0.0f;
    for (int b = 0; b < k / QK; b++) {
        int isum = 0;
        for (int j = 0; j < QK / 2; j++) {
            isum += ((w[b].qs[j] & 0xF) - 8) * x[b].qs[j];
            isum += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + QK / 2];
        }
        s += f16(w[b].d) * x[b].d * (float)isum;
    }
    return s;
}

/* (d q + m) . (dx qx) = d dx sum(q qx) + m (dx sum(qx)) */
static float dot_q4_1(int k, const void *wv, const void *xv)
{
    const block_q4_1 *w = wv;
    const block_q8_32 *x = xv;
    float s = 0.0f;
    for (int b = 0; b < k / QK; b++) {
        int isum = 0;
        for (int j = 0; j < QK / 2; j++) {
            isum += (w[b].qs[j] & 0xF) * x[b].qs[j];
            isum += (w[b].qs[j] >> 4) * x[b].qs[j + QK / 2];
        }
        s += f16(w[b].d) * x[b].d * (float)isum + f16(w[b].m) * x[b].s;
    }
    return s;
}

static float dot_q5_0(int k, const void *wv, const void *xv)
{
    const block_q5_0 *w = wv;
    const block_q8_32 *x = xv;
    float s = 0.0f;
    for (int b = 0; b < k / QK; b++) {
        uint32_t qh = u32(w[b].qh);
        int isum = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = (w[b].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int hi = (w[b].qs[j] >> 4) | (int)((qh >> (j + QK / 2)) & 1) << 4;
            isum += (lo - 16) * x[b].qs[j] + (hi - 16) * x[b].qs[j + QK / 2];
        }
        s += f16(w[b].d) * x[b].d * (float)isum;
    }
    return s;
}

static float dot_q5_1(int k, const void *wv, const void *xv)
{
    const block_q5_1 *w = wv;
    const block_q8_32 *x = xv;
    float s = 0.0f;
    for (int b = 0; b < k / QK; b++) {
        uint32_t qh = u32(w[b].qh);
        int isum = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = (w[b].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int hi = (w[b].qs[j] >> 4) | (int)((qh >> (j + QK / 2)) & 1) << 4;
            isum += lo * x[b].qs[j] + hi * x[b].qs[j + QK / 2];
        }
        s += f16(w[b].d) * x[b].d * (float)isum + f16(w[b].m) * x[b].s;
    }
    return s;
}

static float dot_q8_0(int k, const void *wv, const void *xv)
{
    const block_q8_0 *w = wv;
    const block_q8_32 *x = xv;
    float s = 0.0f;
    for (int b = 0; b < k / QK; b++) {
        int isum = 0;
        for (int j = 0; j < QK; j++) isum += w[b].qs[j] * x[b].qs[j];
        s += f16(w[b].d) * x[b].d * (float)isum;
    }
    return s;
}

/* Q4_K and Q5_K: value = d sc_j q - dmin m_j in sub-block j of 32; the min
 * term only needs the activation sums of each sub-block (two bsums). */
static float dot_q45_k(int k, const uint8_t *d2, const uint8_t *scales, const uint8_t *qs,
                       const uint8_t *qh, const block_q8_256 *x)
{
    (void)k;
    int sums = 0, mins = 0;
    uint8_t scs[8], mns[8];
    k4_scales_mins(scales, scs, mns);
    for (int c = 0; c < 4; c++) {                      /* 4 chunks of 64 values */
        for (int half = 0; half < 2; half++) {         /* low nibbles, then high */
            int j = 2 * c + half, sc = scs[j], mn = mns[j];
            const int8_t *xq = x->qs + 32 * j;
            int isum = 0;
            for (int l = 0; l < 32; l++) {
                int q = half ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
                if (qh) q |= ((qh[l] >> j) & 1) << 4;
                isum += q * xq[l];
            }
            sums += sc * isum;
            mins += mn * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
        }
    }
    return x->d * (f16(d2) * (float)sums - f16(d2 + 2) * (float)mins);
}

static float dot_q4_k(int k, const void *wv, const void *xv)
{
    const block_q4_k *w = wv;
    const block_q8_256 *x = xv;
    float s = 0.0f;
    for (int b = 0; b < k / QK_K; b++)
        s += dot_q45_k(k, w[b].d, w[b].scales, w[b].qs, NULL, &x[b]);
    return s;
}

static float dot_q5_k(int k, const void *wv, const void *xv)
{
    const block_q5_k *w = wv;
    const block_q8_256 *x = xv;
    float s = 0.0f;
    for (int b = 0; b < k / QK_K; b++)
        s += dot_q45_k(k, w[b].d, w[b].scales, w[b].qs, w[b].qh, &x[b]);
    return s;
}

/* Q6_K: value = d sc_s (q - 32), q 6-bit, scale sc_s per 16 values. */
static float dot_q6_k(int k, const void *wv, const void *xv)
{
    const block_q6_k *w = wv;
    const block_q8_256 *x = xv;
    float s = 0.0f;
    for (int b = 0; b < k / QK_K; b++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) {                  /* two halves of 128 */
            const uint8_t *ql = w[b].ql + 64 * h, *qh = w[b].qh + 32 * h;
            const int8_t *sc = w[b].scales + 8 * h;
            const int8_t *xq = x[b].qs + 128 * h;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                isum += sc[is + 0] * q1 * xq[l] + sc[is + 2] * q2 * xq[l + 32] +
                        sc[is + 4] * q3 * xq[l + 64] + sc[is + 6] * q4 * xq[l + 96];
            }
        }
        s += f16(w[b].d) * x[b].d * (float)isum;
    }
    return s;
}

qdot_fn qdot_scalar(enum weight_type t)
{
    switch (t) {
    case WEIGHT_F32: return dot_f32;
    case WEIGHT_F16: return dot_f16;
    case WEIGHT_BF16: return dot_bf16;
    case WEIGHT_Q4_0: return dot_q4_0;
    case WEIGHT_Q4_1: return dot_q4_1;
    case WEIGHT_Q5_0: return dot_q5_0;
    case WEIGHT_Q5_1: return dot_q5_1;
    case WEIGHT_Q8_0: return dot_q8_0;
    case WEIGHT_Q4_K: return dot_q4_k;
    case WEIGHT_Q5_K: return dot_q5_k;
    case WEIGHT_Q6_K: return dot_q6_k;
    }
    return NULL;
}
