/* cpu_kv.c - typed KV caches on the CPU: storing f32 rows as f16/bf16,
 * loading them back, and the row kernels attention uses to read a 16-bit
 * cache in place (f32 accumulation, no f32 copy of the cache).
 *
 * f16 rows are widened with F16C (_mm256_cvtph_ps) when cpu_simd_level()
 * found AVX2+FMA+F16C, else in C (quant_f16_to_f32); bf16 rows are a shift
 * (the top 16 bits of an f32).  The AVX2 functions are compiled for AVX2 by
 * the target pragma, as in cpu_qdot_avx2.c, and only called after the check. */
#include "kernels/cpu/cpu_ops.h"

#include <stdint.h>
#include <string.h>

#include "kernels/quant.h"

void cpu_kv_store(struct backend *be, void *dst, enum kv_type type, const float *src,
                  const int *rows, int n, int dim)
{
    (void)be;
    if (dim <= 0) return;
    for (int i = 0; i < n; i++) {
        const float *x = src + (size_t)rows[i] * dim;
        if (type == KV_F32) {
            memcpy((float *)dst + (size_t)i * dim, x, (size_t)dim * sizeof(float));
            continue;
        }
        uint16_t *y = (uint16_t *)dst + (size_t)i * dim;
        if (type == KV_F16)
            for (int d = 0; d < dim; d++) y[d] = quant_f32_to_f16(x[d]);
        else
            for (int d = 0; d < dim; d++) y[d] = quant_f32_to_bf16(x[d]);
    }
}

void cpu_kv_load(struct backend *be, float *dst, const void *src, enum kv_type type, size_t n)
{
    (void)be;
    const uint16_t *h = src;
    if (type == KV_F32) {
        if (n) memmove(dst, src, n * sizeof(float));
    } else if (type == KV_F16) {
        for (size_t i = 0; i < n; i++) dst[i] = quant_f16_to_f32(h[i]);
    } else {
        for (size_t i = 0; i < n; i++) dst[i] = quant_bf16_to_f32(h[i]);
    }
}

/* ---- portable row kernels ---- */

static float bf16_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float dot_f16_c(const float *q, const void *k, int n)
{
    const uint16_t *h = k;
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += q[i] * quant_f16_to_f32(h[i]);
    return s;
}

static void axpy_f16_c(float *o, float a, const void *v, int n)
{
    const uint16_t *h = v;
    for (int i = 0; i < n; i++) o[i] += a * quant_f16_to_f32(h[i]);
}

static float dot_bf16_c(const float *q, const void *k, int n)
{
    const uint16_t *h = k;
    float s = 0.0f;
    #pragma omp simd reduction(+:s)
    for (int i = 0; i < n; i++) s += q[i] * bf16_f32(h[i]);
    return s;
}

static void axpy_bf16_c(float *o, float a, const void *v, int n)
{
    const uint16_t *h = v;
    #pragma omp simd
    for (int i = 0; i < n; i++) o[i] += a * bf16_f32(h[i]);
}

/* ---- AVX2 + F16C row kernels ---- */

#if defined(__x86_64__)

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/cpu_x8_avx2.h"

static __m256 load_f16x8(const uint16_t *h)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

static __m256 load_bf16x8(const uint16_t *h)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* One body for both 16-bit types: the element load is all that differs, and
 * always_inline makes a copy per type, so the loop keeps no branch. */
static inline __attribute__((always_inline)) __m256 load16x8(const uint16_t *h, int bf16)
{
    return bf16 ? load_bf16x8(h) : load_f16x8(h);
}

static inline __attribute__((always_inline)) float load16(uint16_t h, int bf16)
{
    return bf16 ? bf16_f32(h) : _cvtsh_ss(h);
}

static inline __attribute__((always_inline)) float dot16(const float *q, const void *k, int n,
                                                         int bf16)
{
    const uint16_t *h = k;
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load16x8(h + i, bf16), acc);
    float s = hsum8(acc);
    for (; i < n; i++) s += q[i] * load16(h[i], bf16);
    return s;
}

static inline __attribute__((always_inline)) void axpy16(float *o, float a, const void *v, int n,
                                                         int bf16)
{
    const uint16_t *h = v;
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(va, load16x8(h + i, bf16), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) o[i] += a * load16(h[i], bf16);
}

static float dot_f16_avx2(const float *q, const void *k, int n) { return dot16(q, k, n, 0); }
static float dot_bf16_avx2(const float *q, const void *k, int n) { return dot16(q, k, n, 1); }
static void axpy_f16_avx2(float *o, float a, const void *v, int n) { axpy16(o, a, v, n, 0); }
static void axpy_bf16_avx2(float *o, float a, const void *v, int n) { axpy16(o, a, v, n, 1); }

#pragma GCC pop_options

#endif

int cpu_kv_rows_for(enum kv_type type, enum cpu_simd level, struct cpu_kv_rows *out)
{
    int avx2 = 0;
#if defined(__x86_64__)
    avx2 = level == CPU_SIMD_AVX2;
    if (avx2 && type == KV_F16) *out = (struct cpu_kv_rows){dot_f16_avx2, axpy_f16_avx2};
    if (avx2 && type == KV_BF16) *out = (struct cpu_kv_rows){dot_bf16_avx2, axpy_bf16_avx2};
#else
    (void)level;
#endif
    if (!avx2 && type == KV_F16) *out = (struct cpu_kv_rows){dot_f16_c, axpy_f16_c};
    if (!avx2 && type == KV_BF16) *out = (struct cpu_kv_rows){dot_bf16_c, axpy_bf16_c};
    return type == KV_F16 || type == KV_BF16 ? 0 : -1;
}
