/* cpu_qact_avx2.c - activation rows quantized to 8 bits (cpu_qact.c) with
 * AVX2: bitwise the scalar result for finite inputs.
 *
 * The same float operations as the scalar code: max|x| of the block, d =
 * max / 127 and its inverse in scalar code, then q = round(x * inv) with
 * cvtps2dq, which rounds to nearest even under the default MXCSR like
 * lrintf; the sums of the quants are exact integers either way.  (With a
 * NaN or infinite input the two may differ; such an activation has no
 * meaningful quantization.) */
#include "kernels/cpu/cpu_qdot.h"

#include <stdint.h>

#include "kernels/quant_blocks.h"

#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include <immintrin.h>

/* max|x| over n values (n a multiple of 8), as the scalar loop finds it */
static float block_amax(const float *x, int n)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* 16 values rounded to int32 (two vectors) and stored as int8; returns their sum */
static int quantize16(const float *x, __m256 inv, int8_t *out)
{
    __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), inv));
    __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), inv));
    /* packs works within 128-bit lanes: a0 b0 a1 b1 -> reorder to a0 a1 b0 b1 */
    __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
    __m128i q = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    _mm_storeu_si128((__m128i *)out, q);
    __m256i s = _mm256_add_epi32(a, b);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    return _mm_cvtsi128_si32(s4);
}

void qact_q8_32_avx2(const float *x, void *out, int k)
{
    block_q8_32 *y = out;
    for (int b = 0; b < k / QK; b++, x += QK) {
        float d = block_amax(x, QK) / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
        __m256 iv = _mm256_set1_ps(inv);
        int sum = quantize16(x, iv, y[b].qs) + quantize16(x + 16, iv, y[b].qs + 16);
        y[b].d = d;
        y[b].s = d * (float)sum;
    }
}

void qact_q8_256_avx2(const float *x, void *out, int k)
{
    block_q8_256 *y = out;
    for (int b = 0; b < k / QK_K; b++, x += QK_K) {
        float d = block_amax(x, QK_K) / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
        __m256 iv = _mm256_set1_ps(inv);
        y[b].d = d;
        for (int g = 0; g < QK_K / 16; g++)
            y[b].bsums[g] = (int16_t)quantize16(x + 16 * g, iv, y[b].qs + 16 * g);
    }
}

#pragma GCC pop_options

#endif
