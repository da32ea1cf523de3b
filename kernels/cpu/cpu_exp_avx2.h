/* cpu_exp_avx2.h - exp of 8 floats at once, for the AVX2 bodies that need
 * one (attention's softmax rows, SwiGLU).  Include it inside a region
 * compiled for AVX2 and FMA (#pragma GCC target), after <immintrin.h>. */
#ifndef EB_CPU_EXP_AVX2_H
#define EB_CPU_EXP_AVX2_H

/* exp(x) for x <= 0 (Cephes' expf: range reduction by ln 2 in two parts and
 * a degree-5 polynomial, within 2 ulp of expf); below -87 (and -inf) it is 0. */
static inline __m256 exp8_nonpos(__m256 x)
{
    __m256 zero_mask = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f),
                                                _mm256_set1_ps(0.5f)));
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127));
    e = _mm256_slli_epi32(e, 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), zero_mask);
}

#endif
