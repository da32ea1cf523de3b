/* cpu_qact.c - activation rows quantized to 8 bits for the integer dot
 * products, and the choice of SIMD level.
 *
 * A block of values x gets d = max|x| / 127 and q = round(x / d), so
 * x ~= d * q with an error of at most d / 2 per value; the dot kernels
 * multiply by d once per block.  block_q8_32 also keeps s = d * sum(q), which
 * the formats with a min (Q4_1, Q5_1) need; block_q8_256 keeps the sum of
 * every 16 quants for the k-quants' mins and offsets. */
#include "kernels/cpu/cpu_qdot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant_blocks.h"

int qact_kind_of(enum weight_type t)
{
    switch (t) {
    case WEIGHT_F32:
    case WEIGHT_F16:
    case WEIGHT_BF16: return QACT_F32;
    case WEIGHT_Q4_0:
    case WEIGHT_Q4_1:
    case WEIGHT_Q5_0:
    case WEIGHT_Q5_1:
    case WEIGHT_Q8_0: return QACT_Q8_32;
    case WEIGHT_Q4_K:
    case WEIGHT_Q5_K:
    case WEIGHT_Q6_K: return QACT_Q8_256;
    }
    return -1;
}

size_t qact_row_bytes(enum qact_kind kind, int k)
{
    switch (kind) {
    case QACT_F32: return (size_t)k * sizeof(float);
    case QACT_Q8_32: return (size_t)(k / QK) * sizeof(block_q8_32);
    case QACT_Q8_256: return (size_t)(k / QK_K) * sizeof(block_q8_256);
    }
    return 0;
}

/* Scale of a block: max|x| / 127, and its inverse (0 for an all-zero block). */
static float block_scale(const float *x, int n, float *inv)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    float d = amax / 127.0f;
    *inv = d > 0.0f ? 1.0f / d : 0.0f;
    return d;
}

static void quantize_q8_32(const float *x, block_q8_32 *y, int k)
{
    for (int b = 0; b < k / QK; b++, x += QK) {
        float inv;
        float d = block_scale(x, QK, &inv);
        int sum = 0;
        for (int i = 0; i < QK; i++) {
            int q = (int)lrintf(x[i] * inv);
            y[b].qs[i] = (int8_t)q;
            sum += q;
        }
        y[b].d = d;
        y[b].s = d * (float)sum;
    }
}

static void quantize_q8_256(const float *x, block_q8_256 *y, int k)
{
    for (int b = 0; b < k / QK_K; b++, x += QK_K) {
        float inv;
        y[b].d = block_scale(x, QK_K, &inv);
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++) {
                int q = (int)lrintf(x[i] * inv);
                y[b].qs[i] = (int8_t)q;
                sum += q;
            }
            y[b].bsums[g] = (int16_t)sum;
        }
    }
}

void qact_quantize_row_at(enum qact_kind kind, const float *x, void *out, int k,
                          enum cpu_simd level)
{
#if defined(__x86_64__)
    if (level == CPU_SIMD_AVX2 && kind == QACT_Q8_32) {
        qact_q8_32_avx2(x, out, k);
        return;
    }
    if (level == CPU_SIMD_AVX2 && kind == QACT_Q8_256) {
        qact_q8_256_avx2(x, out, k);
        return;
    }
#endif
    switch (kind) {
    case QACT_F32: memcpy(out, x, (size_t)k * sizeof(float)); break;
    case QACT_Q8_32: quantize_q8_32(x, out, k); break;
    case QACT_Q8_256: quantize_q8_256(x, out, k); break;
    }
}

void qact_quantize_row(enum qact_kind kind, const float *x, void *out, int k)
{
    static _Atomic int level = -1; /* looked up once: the matmul quantizes per row */
    if (level < 0) level = (int)cpu_simd_level();
    qact_quantize_row_at(kind, x, out, k, (enum cpu_simd)level);
}

void qact_dequantize_row(enum qact_kind kind, const void *act, float *out, int k)
{
    if (kind == QACT_F32) {
        memcpy(out, act, (size_t)k * sizeof(float));
    } else if (kind == QACT_Q8_32) {
        const block_q8_32 *b = act;
        for (int i = 0; i < k; i++) out[i] = b[i / QK].d * (float)b[i / QK].qs[i % QK];
    } else {
        const block_q8_256 *b = act;
        for (int i = 0; i < k; i++) out[i] = b[i / QK_K].d * (float)b[i / QK_K].qs[i % QK_K];
    }
}

const char *cpu_simd_name(enum cpu_simd s)
{
    return s == CPU_SIMD_AVX2 ? "avx2" : "scalar";
}

enum cpu_simd cpu_simd_level(void)
{
    enum cpu_simd level = CPU_SIMD_SCALAR;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
        level = CPU_SIMD_AVX2;
#endif
    const char *cap = getenv("EVICTBENCH_CPU_SIMD");
    if (cap && strcmp(cap, "scalar") == 0) level = CPU_SIMD_SCALAR;
    return level;
}

qdot_fn qdot_for(enum weight_type t, enum cpu_simd level)
{
    qdot_fn f = level == CPU_SIMD_AVX2 ? qdot_avx2(t) : NULL;
    return f ? f : qdot_scalar(t);
}
