/* cpu_kv.c - typed KV caches on the CPU: storing f32 rows as f16/bf16,
 * loading them back, and the row kernels attention uses to read a 16-bit
 * cache in place (f32 accumulation, no f32 copy of the cache).
 *
 * f32 rows have the same row kernels (AVX2 + FMA where present), so attention
 * reads every type through one interface.
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

/* Element i of a row of type t (0 f32, 1 f16, 2 bf16) as f32. */
static inline float elem(const void *row, int i, int t)
{
    if (t == 0) return ((const float *)row)[i];
    uint16_t h = ((const uint16_t *)row)[i];
    return t == 1 ? quant_f16_to_f32(h) : bf16_f32(h);
}

static inline void dot_c(float *s, const float *q, int nr, const void *k, int n, int t)
{
    for (int r = 0; r < nr; r++) {
        const float *qr = q + (size_t)r * n;
        float acc = 0.0f;
        for (int i = 0; i < n; i++) acc += qr[i] * elem(k, i, t);
        s[r] = acc;
    }
}

static inline void axpy_c(float *o, const float *a, int nr, const void *v, int n, int t)
{
    for (int i = 0; i < n; i++) {
        float x = elem(v, i, t);
        for (int r = 0; r < nr; r++) o[(size_t)r * n + i] += a[r] * x;
    }
}

static void dot_f32_c(float *s, const float *q, int nr, const void *k, int n) { dot_c(s, q, nr, k, n, 0); }
static void dot_f16_c(float *s, const float *q, int nr, const void *k, int n) { dot_c(s, q, nr, k, n, 1); }
static void dot_bf16_c(float *s, const float *q, int nr, const void *k, int n) { dot_c(s, q, nr, k, n, 2); }
static void axpy_f32_c(float *o, const float *a, int nr, const void *v, int n) { axpy_c(o, a, nr, v, n, 0); }
static void axpy_f16_c(float *o, const float *a, int nr, const void *v, int n) { axpy_c(o, a, nr, v, n, 1); }
static void axpy_bf16_c(float *o, const float *a, int nr, const void *v, int n) { axpy_c(o, a, nr, v, n, 2); }

/* ---- AVX2 + F16C row kernels ---- */

#if defined(__x86_64__)

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/cpu_x8_avx2.h"

#define EB_INLINE static inline __attribute__((always_inline))

/* 8 elements of a row of type t from element i, as f32.  One body per type:
 * always_inline makes a copy per t, so the loops keep no branch. */
EB_INLINE __m256 load8(const void *row, int i, int t)
{
    if (t == 0) return _mm256_loadu_ps((const float *)row + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (t == 1) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

EB_INLINE float load1(const void *row, int i, int t)
{
    if (t == 1) return _cvtsh_ss(((const uint16_t *)row)[i]);
    return elem(row, i, t);
}

/* s[r] = q[r] . k for up to 4 query rows at once: each 8 elements of k are
 * widened once and used by every row. */
EB_INLINE void dot4(float *s, const float *q, int g, const void *k, int n, int t)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = load8(k, i, t);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), x, a0);
        if (g > 1) a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + n + i), x, a1);
        if (g > 2) a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * n + i), x, a2);
        if (g > 3) a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * n + i), x, a3);
    }
    float r[4] = {hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3)};
    for (; i < n; i++) {
        float x = load1(k, i, t);
        for (int j = 0; j < g; j++) r[j] += q[(size_t)j * n + i] * x;
    }
    for (int j = 0; j < g; j++) s[j] = r[j];
}

EB_INLINE void dot_avx2(float *s, const float *q, int nr, const void *k, int n, int t)
{
    for (int r = 0; r < nr; r += 4)
        dot4(s + r, q + (size_t)r * n, nr - r < 4 ? nr - r : 4, k, n, t);
}

/* o[r] += a[r] * v: each 8 elements of v are widened once for every row. */
EB_INLINE void axpy_avx2(float *o, const float *a, int nr, const void *v, int n, int t)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = load8(v, i, t);
        for (int r = 0; r < nr; r++) {
            float *orow = o + (size_t)r * n + i;
            _mm256_storeu_ps(orow, _mm256_fmadd_ps(_mm256_set1_ps(a[r]), x, _mm256_loadu_ps(orow)));
        }
    }
    for (; i < n; i++) {
        float x = load1(v, i, t);
        for (int r = 0; r < nr; r++) o[(size_t)r * n + i] += a[r] * x;
    }
}

static void dot_f32_avx2(float *s, const float *q, int nr, const void *k, int n) { dot_avx2(s, q, nr, k, n, 0); }
static void dot_f16_avx2(float *s, const float *q, int nr, const void *k, int n) { dot_avx2(s, q, nr, k, n, 1); }
static void dot_bf16_avx2(float *s, const float *q, int nr, const void *k, int n) { dot_avx2(s, q, nr, k, n, 2); }
static void axpy_f32_avx2(float *o, const float *a, int nr, const void *v, int n) { axpy_avx2(o, a, nr, v, n, 0); }
static void axpy_f16_avx2(float *o, const float *a, int nr, const void *v, int n) { axpy_avx2(o, a, nr, v, n, 1); }
static void axpy_bf16_avx2(float *o, const float *a, int nr, const void *v, int n) { axpy_avx2(o, a, nr, v, n, 2); }

#undef EB_INLINE

#pragma GCC pop_options

#endif

int cpu_kv_rows_for(enum kv_type type, enum cpu_simd level, struct cpu_kv_rows *out)
{
    static const struct cpu_kv_rows c_rows[KV_TYPE_COUNT] = {
        {dot_f32_c, axpy_f32_c}, {dot_f16_c, axpy_f16_c}, {dot_bf16_c, axpy_bf16_c}};
    if (kv_type_bytes(type) == 0) return -1;
    *out = c_rows[type];
#if defined(__x86_64__)
    static const struct cpu_kv_rows avx2_rows[KV_TYPE_COUNT] = {
        {dot_f32_avx2, axpy_f32_avx2}, {dot_f16_avx2, axpy_f16_avx2},
        {dot_bf16_avx2, axpy_bf16_avx2}};
    if (level == CPU_SIMD_AVX2) *out = avx2_rows[type];
#else
    (void)level;
#endif
    return 0;
}
