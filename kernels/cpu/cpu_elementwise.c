/* cpu_elementwise.c - SwiGLU, residual add, embedding lookup, row gather. */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Elements per work item of the elementwise ops (a multiple of 8). */
enum { ELEM_GRAIN = 1 << 13 };

struct elem_job {
    float *y;
    const float *a, *b;
    enum cpu_simd simd;
};

static void swiglu_c(float *y, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        y[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

#include "kernels/cpu/cpu_exp_avx2.h"

/* silu(g) = g * sigmoid(g), the sigmoid from e = exp(-|g|) (never overflows):
 * 1 / (1 + e) for g >= 0, e / (1 + e) below.  Within 3 ulp of the C loop's
 * expf form (tests/test_kernels.c); scalar expf took 4 ns an element, most
 * of SwiGLU's share of a decode step. */
static void swiglu_avx2(float *y, const float *gate, const float *up, size_t n)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = exp8_nonpos(_mm256_or_ps(g, sign));
        __m256 sig = _mm256_div_ps(_mm256_blendv_ps(one, e, g), _mm256_add_ps(one, e));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(g, sig), _mm256_loadu_ps(up + i)));
    }
    swiglu_c(y + i, gate + i, up + i, n - i);
}

#pragma GCC pop_options
#endif

void cpu_swiglu_span(enum cpu_simd level, float *y, const float *gate, const float *up, size_t n)
{
#if defined(__x86_64__)
    if (level == CPU_SIMD_AVX2) {
        swiglu_avx2(y, gate, up, n);
        return;
    }
#else
    (void)level;
#endif
    swiglu_c(y, gate, up, n);
}

static void swiglu_items(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    const struct elem_job *j = ctx;
    size_t e0 = (size_t)i0 * ELEM_GRAIN, e1 = (size_t)i1 * ELEM_GRAIN;
    cpu_swiglu_span(j->simd, j->y + e0, j->a + e0, j->b + e0, e1 - e0);
}

void cpu_swiglu(struct backend *be, float *y, const float *gate, const float *up, size_t n)
{
    size_t whole = n / ELEM_GRAIN;
    struct elem_job j = {y, gate, up, ((const struct cpu_impl *)be->impl)->simd};
    cpu_parallel_for(be, (int)whole, 1, n >= CPU_PARALLEL_MIN, swiglu_items, &j);
    cpu_swiglu_span(j.simd, y + whole * ELEM_GRAIN, gate + whole * ELEM_GRAIN, up + whole * ELEM_GRAIN,
                    n - whole * ELEM_GRAIN);
}

/* An add is one cycle's work per 8 elements: below ADD_PARALLEL_MIN (a
 * batch-16 decode step's 16 x 1,536 residual adds included) the job's start
 * and end cost more than the add, and on a busy machine its end waits for
 * the other thread's next time slice. */
enum { ADD_PARALLEL_MIN = 1 << 16 };

static void add_items(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    const struct elem_job *j = ctx;
    size_t e1 = (size_t)i1 * ELEM_GRAIN;
    for (size_t i = (size_t)i0 * ELEM_GRAIN; i < e1; i++) j->y[i] += j->a[i];
}

void cpu_add(struct backend *be, float *y, const float *x, size_t n)
{
    size_t whole = n / ELEM_GRAIN;
    struct elem_job j = {y, x, NULL, CPU_SIMD_SCALAR};
    cpu_parallel_for(be, (int)whole, 1, n >= ADD_PARALLEL_MIN, add_items, &j);
    for (size_t i = whole * ELEM_GRAIN; i < n; i++) y[i] += x[i];
}

/* The ids index a table whose row count the backend does not know: model/
 * checks them against the vocabulary before calling. */
void cpu_embed(struct backend *be, float *y, const float *table, const int *ids, int n, int dim)
{
    (void)be;
    if (dim <= 0) return;
    for (int i = 0; i < n; i++)
        memcpy(y + (size_t)i * dim, table + (size_t)ids[i] * dim, (size_t)dim * sizeof(float));
}

/* Read-all-first (kernels/backend.h): y may overlap x, e.g. a tensor gathered
 * onto itself in any order, and must then hold what a copy-then-gather would
 * give.  Overlapping calls go through a staging copy of the output; row by row
 * a later row could read what an earlier one just overwrote. */
void cpu_gather_rows(struct backend *be, float *y, const float *x, const int *rows, int n,
                     int dim)
{
    (void)be;
    if (n <= 0 || dim <= 0) return;
    size_t row = (size_t)dim * sizeof(float), out = (size_t)n * row;
    int max_row = 0;
    for (int i = 0; i < n; i++) max_row = rows[i] > max_row ? rows[i] : max_row;
    uintptr_t y0 = (uintptr_t)y, y1 = y0 + out;
    uintptr_t x0 = (uintptr_t)x, x1 = x0 + ((size_t)max_row + 1) * row;
    if (y1 <= x0 || x1 <= y0) {
        for (int i = 0; i < n; i++) memcpy(y + (size_t)i * dim, x + (size_t)rows[i] * dim, row);
        return;
    }
    float *stage = malloc(out);
    if (!stage) {
        /* The op returns nothing, and a gather left half done would corrupt
         * a cache silently; the staging is the size of the output itself. */
        fprintf(stderr, "cpu_gather_rows: no memory to stage an overlapping gather of %zu bytes\n",
                out);
        abort();
    }
    for (int i = 0; i < n; i++) memcpy(stage + (size_t)i * dim, x + (size_t)rows[i] * dim, row);
    memcpy(y, stage, out);
    free(stage);
}
