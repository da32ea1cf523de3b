/* cpu_x8_avx2.h - the small AVX2 helpers the CPU kernels share (the
 * interleaved kernels cpu_q4k_x8.c, cpu_q6k_x8.c, cpu_q32_x8.c, the row
 * kernels of cpu_qdot_avx2.c and the 16-bit KV reads of cpu_kv.c; not a
 * public header).
 *
 * Include it after `#pragma GCC target("avx2,fma,f16c")`, inside the x86-64
 * part of the file: the helpers are compiled for AVX2 by that pragma, like
 * the kernels that call them. */
#ifndef EB_CPU_X8_AVX2_H
#define EB_CPU_X8_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline __m256i load32(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* 4 activation bytes repeated in every 32-bit lane (one lane per weight row) */
static inline __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Decode (one activation row) streams the weights from memory, and the
 * hardware prefetcher alone keeps too few lines in flight: the Q6_K LM head
 * of the 1.5B streamed at ~40 GB/s on two threads, 4 blocks (4.6-6.7 KB) of prefetch ahead
 * took it to ~50 and batch-1 decode from 37.7 to 43-49 tokens/s.  The
 * interleaved groups lie end to end, so "ahead" runs on into the next group;
 * past the last one it only prefetches (never reads) lines beyond the weights,
 * hence the integer arithmetic on the address. */
enum { X8_PREFETCH_BLOCKS = 4, X8_PREFETCH_BYTES = 4096 };

/* Prefetch the bytes bytes that lie ahead bytes past p. */
static inline void x8_prefetch_ahead(const void *p, size_t bytes, size_t ahead)
{
    uintptr_t a = (uintptr_t)p + ahead;
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(a + o), _MM_HINT_T0);
}

/* the 8 rows' f16 scales, side by side, as floats */
static inline __m256 f16x8(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* the sum of the 8 lanes */
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
