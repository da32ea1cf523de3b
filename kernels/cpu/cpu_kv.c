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

#include <math.h>
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

#if defined(__x86_64__)
static void widen_f16_avx2(float *dst, const uint16_t *h, size_t n);
#endif

#if defined(__x86_64__)
enum { WIDEN_CHUNK = 1 << 13 }; /* elements per task, a multiple of 8 */

struct widen_job {
    float *dst;
    const uint16_t *h;
    size_t n;
};

static void widen_chunks(void *ctx, int c0, int c1, int ith)
{
    (void)ith;
    const struct widen_job *j = ctx;
    for (int c = c0; c < c1; c++) {
        size_t i0 = (size_t)c * WIDEN_CHUNK, w = j->n - i0 < WIDEN_CHUNK ? j->n - i0 : WIDEN_CHUNK;
        widen_f16_avx2(j->dst + i0, j->h + i0, w);
    }
}
#endif

/* A policy's scoring widens a whole head at a time (16k keys x 128 at long
 * context, once per head and compression): F16C on both threads then, the
 * same values as quant_f16_to_f32 (f16 -> f32 is exact; a signalling NaN
 * comes back quiet). */
static void widen_f16(struct backend *be, float *dst, const uint16_t *h, size_t n)
{
#if defined(__x86_64__)
    if (((const struct cpu_impl *)be->impl)->simd == CPU_SIMD_AVX2) {
        struct widen_job j = {dst, h, n};
        long n_chunk = (long)((n + WIDEN_CHUNK - 1) / WIDEN_CHUNK);
        cpu_parallel_for(be, (int)n_chunk, 1, n >= 4 * CPU_PARALLEL_MIN, widen_chunks, &j);
        return;
    }
#endif
    (void)be;
    for (size_t i = 0; i < n; i++) dst[i] = quant_f16_to_f32(h[i]);
}

void cpu_kv_load(struct backend *be, float *dst, const void *src, enum kv_type type, size_t n)
{
    const uint16_t *h = src;
    if (type == KV_F32) {
        if (n) memmove(dst, src, n * sizeof(float));
    } else if (type == KV_F16) {
        widen_f16(be, dst, h, n);
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

/* o[r][i] += sum over rows j of e[r][j] * v_j[i], j in order (e is [nr][stride]). */
static inline void accum_c(float *o, const float *e, int stride, int nr, const void *v, int n,
                           int hd, int t)
{
    size_t row = (size_t)hd * (t ? 2 : 4);
    for (int j = 0; j < n; j++) {
        const void *vj = (const char *)v + j * row;
        for (int r = 0; r < nr; r++) {
            float a = e[(size_t)r * stride + j];
            for (int i = 0; i < hd; i++) o[(size_t)r * hd + i] += a * elem(vj, i, t);
        }
    }
}

static float exp_sum_c(float *x, int n, float m)
{
    float l = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        l += x[i];
    }
    return l;
}

static void dot_f32_c(float *s, const float *q, int nr, const void *k, int n)
{
    dot_c(s, q, nr, k, n, 0);
}
static void dot_f16_c(float *s, const float *q, int nr, const void *k, int n)
{
    dot_c(s, q, nr, k, n, 1);
}
static void dot_bf16_c(float *s, const float *q, int nr, const void *k, int n)
{
    dot_c(s, q, nr, k, n, 2);
}
static void accum_f32_c(float *o, const float *e, int stride, int nr, const void *v, int n, int hd)
{
    accum_c(o, e, stride, nr, v, n, hd, 0);
}
static void accum_f16_c(float *o, const float *e, int stride, int nr, const void *v, int n, int hd)
{
    accum_c(o, e, stride, nr, v, n, hd, 1);
}
static void accum_bf16_c(float *o, const float *e, int stride, int nr, const void *v, int n, int hd)
{
    accum_c(o, e, stride, nr, v, n, hd, 2);
}

/* ---- AVX2 + F16C row kernels ---- */

#if defined(__x86_64__)

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/cpu_exp_avx2.h"
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

/* The 8 lane sums of a0..a7, as one vector (lane r: the sum of ar). */
EB_INLINE __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                         __m256 a6, __m256 a7)
{
    __m256 b0 = _mm256_hadd_ps(a0, a1), b1 = _mm256_hadd_ps(a2, a3);
    __m256 b2 = _mm256_hadd_ps(a4, a5), b3 = _mm256_hadd_ps(a6, a7);
    __m256 c0 = _mm256_hadd_ps(b0, b1), c1 = _mm256_hadd_ps(b2, b3);
    /* c0 lanes: 0-3 low halves of a0..a3, 4-7 their high halves; c1 alike for a4..a7 */
    return _mm256_add_ps(_mm256_permute2f128_ps(c0, c1, 0x20),
                         _mm256_permute2f128_ps(c0, c1, 0x31));
}

/* s[r] = q[r] . k for up to 8 query rows at once: each 8 elements of k are
 * widened once and used by every row, whose sums stay in registers. */
EB_INLINE void dot8(float *s, const float *q, int g, const void *k, int n, int t)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = load8(k, i, t);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), x, a0);
        if (g > 1) a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + n + i), x, a1);
        if (g > 2) a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * n + i), x, a2);
        if (g > 3) a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * n + i), x, a3);
        if (g > 4) a4 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 4 * n + i), x, a4);
        if (g > 5) a5 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 5 * n + i), x, a5);
        if (g > 6) a6 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 6 * n + i), x, a6);
        if (g > 7) a7 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 7 * n + i), x, a7);
    }
    float r[8];
    _mm256_storeu_ps(r, hsum8x8(a0, a1, a2, a3, a4, a5, a6, a7));
    for (; i < n; i++) {
        float x = load1(k, i, t);
        for (int j = 0; j < g; j++) r[j] += q[(size_t)j * n + i] * x;
    }
    for (int j = 0; j < g; j++) s[j] = r[j];
}

/* dot8 with g a constant, so the unused accumulators and their tests vanish. */
EB_INLINE void dot8_fixed(float *s, const float *q, int g, const void *k, int n, int t)
{
    switch (g) {
    case 1: dot8(s, q, 1, k, n, t); break;
    case 2: dot8(s, q, 2, k, n, t); break;
    case 3: dot8(s, q, 3, k, n, t); break;
    case 4: dot8(s, q, 4, k, n, t); break;
    case 5: dot8(s, q, 5, k, n, t); break;
    case 6: dot8(s, q, 6, k, n, t); break;
    case 7: dot8(s, q, 7, k, n, t); break;
    default: dot8(s, q, 8, k, n, t); break;
    }
}

EB_INLINE void dot_avx2(float *s, const float *q, int nr, const void *k, int n, int t)
{
    for (int r = 0; r < nr; r += 8)
        dot8_fixed(s + r, q + (size_t)r * n, nr - r < 8 ? nr - r : 8, k, n, t);
}

/* accum_c for up to 8 heads: 8 output columns of each head stay in
 * registers over all n rows (each row's 8 elements widened once). */
EB_INLINE void accum8(float *o, const float *e, int stride, int g, const void *v, int n, int hd,
                      int t)
{
    size_t row = (size_t)hd * (t ? 2 : 4);
    int i = 0;
    for (; i + 8 <= hd; i += 8) {
        __m256 a0 = _mm256_loadu_ps(o + i), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        if (g > 1) a1 = _mm256_loadu_ps(o + hd + i);
        if (g > 2) a2 = _mm256_loadu_ps(o + 2 * hd + i);
        if (g > 3) a3 = _mm256_loadu_ps(o + 3 * hd + i);
        if (g > 4) a4 = _mm256_loadu_ps(o + 4 * hd + i);
        if (g > 5) a5 = _mm256_loadu_ps(o + 5 * hd + i);
        if (g > 6) a6 = _mm256_loadu_ps(o + 6 * hd + i);
        if (g > 7) a7 = _mm256_loadu_ps(o + 7 * hd + i);
        const char *vj = v;
        for (int j = 0; j < n; j++, vj += row) {
            __m256 x = load8(vj, i, t);
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + j), x, a0);
            if (g > 1) a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + stride + j), x, a1);
            if (g > 2) a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 2 * stride + j), x, a2);
            if (g > 3) a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 3 * stride + j), x, a3);
            if (g > 4) a4 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 4 * stride + j), x, a4);
            if (g > 5) a5 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 5 * stride + j), x, a5);
            if (g > 6) a6 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 6 * stride + j), x, a6);
            if (g > 7) a7 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 7 * stride + j), x, a7);
        }
        _mm256_storeu_ps(o + i, a0);
        if (g > 1) _mm256_storeu_ps(o + hd + i, a1);
        if (g > 2) _mm256_storeu_ps(o + 2 * hd + i, a2);
        if (g > 3) _mm256_storeu_ps(o + 3 * hd + i, a3);
        if (g > 4) _mm256_storeu_ps(o + 4 * hd + i, a4);
        if (g > 5) _mm256_storeu_ps(o + 5 * hd + i, a5);
        if (g > 6) _mm256_storeu_ps(o + 6 * hd + i, a6);
        if (g > 7) _mm256_storeu_ps(o + 7 * hd + i, a7);
    }
    for (; i < hd; i++)
        for (int r = 0; r < g; r++)
            for (int j = 0; j < n; j++)
                o[(size_t)r * hd + i] += e[(size_t)r * stride + j] *
                                         load1((const char *)v + j * row, i, t);
}

EB_INLINE void accum8_fixed(float *o, const float *e, int stride, int g, const void *v, int n,
                            int hd, int t)
{
    switch (g) {
    case 1: accum8(o, e, stride, 1, v, n, hd, t); break;
    case 2: accum8(o, e, stride, 2, v, n, hd, t); break;
    case 3: accum8(o, e, stride, 3, v, n, hd, t); break;
    case 4: accum8(o, e, stride, 4, v, n, hd, t); break;
    case 5: accum8(o, e, stride, 5, v, n, hd, t); break;
    case 6: accum8(o, e, stride, 6, v, n, hd, t); break;
    case 7: accum8(o, e, stride, 7, v, n, hd, t); break;
    default: accum8(o, e, stride, 8, v, n, hd, t); break;
    }
}

EB_INLINE void accum_avx2(float *o, const float *e, int stride, int nr, const void *v, int n,
                          int hd, int t)
{
    for (int r = 0; r < nr; r += 8)
        accum8_fixed(o + (size_t)r * hd, e + (size_t)r * stride, stride, nr - r < 8 ? nr - r : 8,
                     v, n, hd, t);
}

static float exp_sum_avx2(float *x, int n, float m)
{
    __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, y);
        acc = _mm256_add_ps(acc, y);
    }
    return hsum8(acc) + exp_sum_c(x + i, n - i, m);
}

static void dot_f32_avx2(float *s, const float *q, int nr, const void *k, int n)
{
    dot_avx2(s, q, nr, k, n, 0);
}
static void dot_f16_avx2(float *s, const float *q, int nr, const void *k, int n)
{
    dot_avx2(s, q, nr, k, n, 1);
}
static void dot_bf16_avx2(float *s, const float *q, int nr, const void *k, int n)
{
    dot_avx2(s, q, nr, k, n, 2);
}
static void accum_f32_avx2(float *o, const float *e, int stride, int nr, const void *v, int n,
                           int hd)
{
    accum_avx2(o, e, stride, nr, v, n, hd, 0);
}
static void accum_f16_avx2(float *o, const float *e, int stride, int nr, const void *v, int n,
                           int hd)
{
    accum_avx2(o, e, stride, nr, v, n, hd, 1);
}
static void accum_bf16_avx2(float *o, const float *e, int stride, int nr, const void *v, int n,
                            int hd)
{
    accum_avx2(o, e, stride, nr, v, n, hd, 2);
}

static void widen_f16_avx2(float *dst, const uint16_t *h, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(h[i]);
}

#undef EB_INLINE

#pragma GCC pop_options

#endif

int cpu_kv_rows_for(enum kv_type type, enum cpu_simd level, struct cpu_kv_rows *out)
{
    static const struct cpu_kv_rows c_rows[KV_TYPE_COUNT] = {
        {dot_f32_c, accum_f32_c, exp_sum_c}, {dot_f16_c, accum_f16_c, exp_sum_c},
        {dot_bf16_c, accum_bf16_c, exp_sum_c}};
    if (kv_type_bytes(type) == 0) return -1;
    *out = c_rows[type];
#if defined(__x86_64__)
    static const struct cpu_kv_rows avx2_rows[KV_TYPE_COUNT] = {
        {dot_f32_avx2, accum_f32_avx2, exp_sum_avx2}, {dot_f16_avx2, accum_f16_avx2, exp_sum_avx2},
        {dot_bf16_avx2, accum_bf16_avx2, exp_sum_avx2}};
    if (level == CPU_SIMD_AVX2) *out = avx2_rows[type];
#else
    (void)level;
#endif
    return 0;
}
