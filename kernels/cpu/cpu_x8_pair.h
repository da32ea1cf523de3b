/* cpu_x8_pair.h - loads for the 16-row kernels of the wide set (not a public
 * header): two neighbouring 8-row groups (the second gb bytes after the
 * first) side by side in one 512-bit vector, lanes 0-7 the first group's
 * rows and lanes 8-15 the second's.  cpu_q4k_x8.c and cpu_q6k_x8.c use them.
 *
 * Include inside the x86-64 part of a file; each helper carries the wide
 * set's target, so it inlines into the kernels compiled for it. */
#ifndef EB_CPU_X8_PAIR_H
#define EB_CPU_X8_PAIR_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 32 bytes of each group */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __m512i pair_load32(const void *p, size_t gb)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)p);
    __m256i b = _mm256_loadu_si256((const __m256i *)((const uint8_t *)p + gb));
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* 16 bytes of each group */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __m256i pair_load16(const void *p, size_t gb)
{
    __m128i a = _mm_loadu_si128((const __m128i *)p);
    __m128i b = _mm_loadu_si128((const __m128i *)((const uint8_t *)p + gb));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}

/* 8 bytes of each group */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __m128i pair_load8(const void *p, size_t gb)
{
    __m128i a = _mm_loadl_epi64((const __m128i *)p);
    __m128i b = _mm_loadl_epi64((const __m128i *)((const uint8_t *)p + gb));
    return _mm_unpacklo_epi64(a, b);
}

/* 4 activation bytes repeated in all 16 lanes */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __m512i pair_bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* the 16 rows' f16 scales (16 bytes per group) as floats */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __m512 pair_f16x16(const void *p, size_t gb)
{
    return _mm512_cvtph_ps(pair_load16(p, gb));
}

#endif
