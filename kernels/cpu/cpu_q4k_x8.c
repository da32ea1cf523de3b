/* cpu_q4k_x8.c - Q4_K weights with 8 rows interleaved, for the AVX2 matmul.
 *
 * Why: the row-by-row Q4_K kernel spends about half its instructions on work
 * that does not touch the quants: unpacking the 12 bytes of packed 6-bit
 * scales, broadcasting each scale, the mins term, the horizontal sum of a row.
 * With 8 rows side by side, one 32-byte vector holds 4 bytes of each of the 8
 * rows, every SIMD lane belongs to one row, scales arrive as vectors (one lane
 * per row) and no horizontal sum is needed: decode reads the weights at close
 * to memory speed.  The layout is made once, at load, from the file's blocks
 * (llama.cpp repacks Q4_K for AVX2 the same way); the file stays the source
 * of truth and q4k_x8_block() gives any row's original block back bit for bit,
 * so the sgemm panels and the embedding lookups dequantize exactly as before.
 *
 * Exactness: maddubs adds two products of a 4-bit quant (0..15) and an 8-bit
 * activation (-127..127) into an int16: |pair| <= 3810; eight such pairs of a
 * sub-block lane are summed in int16 (<= 30480 < 32767) before the scale
 * multiply widens to int32.  So the integer sums are exact, as in the row
 * kernel; only the f32 operations differ in order (the tests bound it). */
#include "kernels/cpu/cpu_qdot.h"

#include <stdint.h>
#include <string.h>

#include "kernels/quant_blocks.h"

/* Pack sub-block scales/mins 0..7 back into the 12 bytes of a Q4_K block
 * (the inverse of k4_scales_mins). */
static void pack_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t out[12])
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        out[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        out[j + 8] = (uint8_t)((sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4));
    }
}

void q4k_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out)
{
    block_q4_k_x8 *g = out;
    for (int b = 0; b < nblocks; b++, g++) {
        for (int r = 0; r < 8; r++) {
            const block_q4_k *src = (const block_q4_k *)((const uint8_t *)rows8 + r * row_bytes) + b;
            uint8_t sc[8], mn[8];
            k4_scales_mins(src->scales, sc, mn);
            memcpy(g->d[r], src->d, 2);
            memcpy(g->dmin[r], src->dmin, 2);
            for (int j = 0; j < 8; j++) {
                g->sc[j][r] = sc[j];
                g->mn[j / 2][r][j % 2] = mn[j];
            }
            for (int c = 0; c < 4; c++)
                for (int t = 0; t < 8; t++) memcpy(g->qs[c][t][r], src->qs + 32 * c + 4 * t, 4);
        }
    }
}

void q4k_x8_block(const void *group, int b, int r, void *out)
{
    const block_q4_k_x8 *g = (const block_q4_k_x8 *)group + b;
    block_q4_k *dst = out;
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = g->sc[j][r];
        mn[j] = g->mn[j / 2][r][j % 2];
    }
    memcpy(dst->d, g->d[r], 2);
    memcpy(dst->dmin, g->dmin[r], 2);
    pack_scales(sc, mn, dst->scales);
    for (int c = 0; c < 4; c++)
        for (int t = 0; t < 8; t++) memcpy(dst->qs + 32 * c + 4 * t, g->qs[c][t][r], 4);
}

#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/cpu_x8_avx2.h"
#include "kernels/cpu/cpu_x8_pair.h"

/* Lane r = (s[r], s[r]) as two int16: the scale of row r for madd. */
static __m256i scale_pairs(const uint8_t s[8])
{
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)s));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* Lane r = sum_j mn[j][r] * bsum_j, bsum_j the activation sum of sub-block j. */
static __m256i mins_sum(const block_q4_k_x8 *g, const int16_t bsums[16])
{
    __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums),
                                   _mm_loadu_si128((const __m128i *)(bsums + 8)));
    int32_t p[4];
    _mm_storeu_si128((__m128i *)p, pairs); /* p[jp] = bsum_2jp | bsum_2jp+1 << 16 */
    __m256i m = _mm256_setzero_si256();
    for (int jp = 0; jp < 4; jp++) {
        __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)g->mn[jp]));
        m = _mm256_add_epi32(m, _mm256_madd_epi16(mn, _mm256_set1_epi32(p[jp])));
    }
    return m;
}

/* The float work of one block for one activation row, lane = weight row. */
static void block_accumulate(const block_q4_k_x8 *g, float dx, __m256i isum, __m256i msum,
                             __m256 *acc, __m256 *macc)
{
    __m256 dxv = _mm256_set1_ps(dx);
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g->d));
    __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g->dmin));
    *acc = _mm256_fmadd_ps(_mm256_mul_ps(d, dxv), _mm256_cvtepi32_ps(isum), *acc);
    *macc = _mm256_fmadd_ps(_mm256_mul_ps(dm, dxv), _mm256_cvtepi32_ps(msum), *macc);
}

/* The body of both kernels, for R activation rows (1, 2 or 4); per row the
 * same operations in the same order whatever R, so every R agrees bit for
 * bit.  R = 2 keeps the accumulators in AVX2's 16 registers, R = 4 needs the
 * 32 of AVX-512VL (q4k_x8_dots_avx512vl).  The activation-row loops are
 * unrolled so the accumulators live in registers; the t loop stays rolled:
 * unrolled, GCC regroups the int16 sums into a tree and spills them. */
static inline __attribute__((always_inline)) void q4k_x8_body(int k, const void *group,
                                                              const void *act, size_t stride,
                                                              int R, float (*out)[8])
{
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[4], macc[4];
    const block_q8_256 *x0[4];
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        acc[i] = macc[i] = _mm256_setzero_ps();
        x0[i] = (const block_q8_256 *)((const uint8_t *)act + (size_t)i * stride);
    }
    for (int b = 0; b < k / QK_K; b++) {
        const block_q4_k_x8 *g = (const block_q4_k_x8 *)group + b;
        x8_prefetch_ahead(g, sizeof *g, X8_PREFETCH_BLOCKS * sizeof *g);
        __m256i isum[4];
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) isum[i] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i slo[4], shi[4];
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) slo[i] = shi[i] = _mm256_setzero_si256();
            #pragma GCC unroll 1
            for (int t = 0; t < 8; t++) {
                __m256i v = load32(g->qs[c][t]);
                __m256i lo = _mm256_and_si256(v, low4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                #pragma GCC unroll 4
                for (int i = 0; i < R; i++) {
                    const int8_t *xq = x0[i][b].qs + 64 * c + 4 * t;
                    slo[i] = _mm256_add_epi16(slo[i], _mm256_maddubs_epi16(lo, bcast4(xq)));
                    shi[i] = _mm256_add_epi16(shi[i], _mm256_maddubs_epi16(hi, bcast4(xq + 32)));
                }
            }
            __m256i s0 = scale_pairs(g->sc[2 * c]), s1 = scale_pairs(g->sc[2 * c + 1]);
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(slo[i], s0));
                isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(shi[i], s1));
            }
        }
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++)
            block_accumulate(g, x0[i][b].d, isum[i], mins_sum(g, x0[i][b].bsums), &acc[i], &macc[i]);
    }
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) _mm256_storeu_ps(out[i], _mm256_sub_ps(acc[i], macc[i]));
}

void q4k_x8_dot_avx2(int k, const void *group, const void *act, float out[8])
{
    q4k_x8_body(k, group, act, 0, 1, (float (*)[8])out);
}

/* QDOT_ROWS activation rows, two at a time (four spill AVX2's 16 registers
 * and were slower per row than one). */
void q4k_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                      float out[QDOT_ROWS][8])
{
    for (int i = 0; i < QDOT_ROWS; i += 2)
        q4k_x8_body(k, group, (const uint8_t *)act + (size_t)i * stride, stride, 2, out + i);
}

/* All QDOT_ROWS rows at once in AVX-512VL's 32 registers: each weight
 * vector is unpacked once for four rows (the same instructions otherwise, so
 * bitwise equal to the AVX2 kernels). */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw")))
void q4k_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                          float out[QDOT_ROWS][8])
{
    q4k_x8_body(k, group, act, stride, QDOT_ROWS, out);
}

/* The body again with AVX-512 VNNI: vpdpbusd sums four products straight
 * into int32 (one instruction for maddubs + add), so the sub-block sums are
 * int32 and the scale multiply is mullo (|sum| <= 8 * 4 * 15 * 127 = 60960,
 * times a 6-bit scale, eight sub-blocks: < 2^25).  The integers equal the
 * AVX2 body's and the float work is the same, so the result is bitwise the
 * same.  A second body, not a flag: a body compiled for AVX2 cannot hold
 * vpdpbusd, and one compiled for AVX-512 would let the AVX2 entry points use
 * EVEX encodings.  Here the t loop is unrolled: vpdpbusd chains cannot be
 * regrouped (measured 15-20% faster than rolled, where GCC shuffles the
 * accumulators through extra moves). */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __attribute__((always_inline)) void q4k_x8_body_vnni(int k, const void *group,
                                                                   const void *act, size_t stride,
                                                                   int R, float (*out)[8])
{
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[4], macc[4];
    const block_q8_256 *x0[4];
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        acc[i] = macc[i] = _mm256_setzero_ps();
        x0[i] = (const block_q8_256 *)((const uint8_t *)act + (size_t)i * stride);
    }
    for (int b = 0; b < k / QK_K; b++) {
        const block_q4_k_x8 *g = (const block_q4_k_x8 *)group + b;
        x8_prefetch_ahead(g, sizeof *g, X8_PREFETCH_BLOCKS * sizeof *g);
        __m256i isum[4];
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) isum[i] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i slo[4], shi[4];
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) slo[i] = shi[i] = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                __m256i v = load32(g->qs[c][t]);
                __m256i lo = _mm256_and_si256(v, low4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                #pragma GCC unroll 4
                for (int i = 0; i < R; i++) {
                    const int8_t *xq = x0[i][b].qs + 64 * c + 4 * t;
                    slo[i] = _mm256_dpbusd_epi32(slo[i], lo, bcast4(xq));
                    shi[i] = _mm256_dpbusd_epi32(shi[i], hi, bcast4(xq + 32));
                }
            }
            __m256i s0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)g->sc[2 * c]));
            __m256i s1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)g->sc[2 * c + 1]));
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                isum[i] = _mm256_add_epi32(isum[i], _mm256_mullo_epi32(slo[i], s0));
                isum[i] = _mm256_add_epi32(isum[i], _mm256_mullo_epi32(shi[i], s1));
            }
        }
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++)
            block_accumulate(g, x0[i][b].d, isum[i], mins_sum(g, x0[i][b].bsums), &acc[i], &macc[i]);
    }
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) _mm256_storeu_ps(out[i], _mm256_sub_ps(acc[i], macc[i]));
}

__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q4k_x8_dot_vnni(int k, const void *group, const void *act, float out[8])
{
    q4k_x8_body_vnni(k, group, act, 0, 1, (float (*)[8])out);
}

__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q4k_x8_dots_vnni(int k, const void *group, const void *act, size_t stride,
                      float out[QDOT_ROWS][8])
{
    q4k_x8_body_vnni(k, group, act, stride, QDOT_ROWS, out);
}

/* Lane r = sum_j mn[j][r] * bsum_j for the 16 rows of two groups (mins_sum
 * on 512 bits; the same exact int32 sums). */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __attribute__((always_inline)) __m512i mins_sum_pair(const block_q4_k_x8 *g,
                                                                   size_t gb,
                                                                   const int16_t bsums[16])
{
    __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums),
                                   _mm_loadu_si128((const __m128i *)(bsums + 8)));
    int32_t p[4];
    _mm_storeu_si128((__m128i *)p, pairs);
    __m512i m = _mm512_setzero_si512();
    for (int jp = 0; jp < 4; jp++) {
        __m512i mn = _mm512_cvtepu8_epi16(pair_load16(g->mn[jp], gb));
        m = _mm512_add_epi32(m, _mm512_madd_epi16(mn, _mm512_set1_epi32(p[jp])));
    }
    return m;
}

/* QDOT_ROWS activation rows against the 16 weight rows of two neighbouring
 * groups (the second gb bytes after the first) in 512-bit vectors: each
 * activation broadcast, each scale and mins step and each float operation
 * then serves 16 weight rows instead of 8, which halves the instructions per
 * multiply-add that are not vpdpbusd.  Lane by lane the VNNI body's integers
 * and float operations in its order, so out[i][0..7] is bitwise the first
 * group's dots and out[i][8..15] the second's. */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q4k_x8_dots_pair_vnni(int k, const void *group, size_t gb, const void *act, size_t stride,
                           float out[QDOT_ROWS][16])
{
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512 acc[QDOT_ROWS], macc[QDOT_ROWS];
    const block_q8_256 *x0[QDOT_ROWS];
    #pragma GCC unroll 4
    for (int i = 0; i < QDOT_ROWS; i++) {
        acc[i] = macc[i] = _mm512_setzero_ps();
        x0[i] = (const block_q8_256 *)((const uint8_t *)act + (size_t)i * stride);
    }
    for (int b = 0; b < k / QK_K; b++) {
        const block_q4_k_x8 *g = (const block_q4_k_x8 *)group + b;
        x8_prefetch_ahead(g, sizeof *g, X8_PREFETCH_BLOCKS * sizeof *g);
        __m512i isum[QDOT_ROWS];
        #pragma GCC unroll 4
        for (int i = 0; i < QDOT_ROWS; i++) isum[i] = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m512i slo[QDOT_ROWS], shi[QDOT_ROWS];
            #pragma GCC unroll 4
            for (int i = 0; i < QDOT_ROWS; i++) slo[i] = shi[i] = _mm512_setzero_si512();
            #pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                __m512i v = pair_load32(g->qs[c][t], gb);
                __m512i lo = _mm512_and_si512(v, low4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                #pragma GCC unroll 4
                for (int i = 0; i < QDOT_ROWS; i++) {
                    const int8_t *xq = x0[i][b].qs + 64 * c + 4 * t;
                    slo[i] = _mm512_dpbusd_epi32(slo[i], lo, pair_bcast4(xq));
                    shi[i] = _mm512_dpbusd_epi32(shi[i], hi, pair_bcast4(xq + 32));
                }
            }
            __m512i s0 = _mm512_cvtepu8_epi32(pair_load8(g->sc[2 * c], gb));
            __m512i s1 = _mm512_cvtepu8_epi32(pair_load8(g->sc[2 * c + 1], gb));
            #pragma GCC unroll 4
            for (int i = 0; i < QDOT_ROWS; i++) {
                isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(slo[i], s0));
                isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(shi[i], s1));
            }
        }
        __m512 d = pair_f16x16(g->d, gb), dm = pair_f16x16(g->dmin, gb);
        #pragma GCC unroll 4
        for (int i = 0; i < QDOT_ROWS; i++) {
            __m512 dxv = _mm512_set1_ps(x0[i][b].d);
            __m512i msum = mins_sum_pair(g, gb, x0[i][b].bsums);
            acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(d, dxv), _mm512_cvtepi32_ps(isum[i]), acc[i]);
            macc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dm, dxv), _mm512_cvtepi32_ps(msum), macc[i]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < QDOT_ROWS; i++) _mm512_storeu_ps(out[i], _mm512_sub_ps(acc[i], macc[i]));
}

#pragma GCC pop_options

#endif
