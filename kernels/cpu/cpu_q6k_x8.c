/* cpu_q6k_x8.c - Q6_K weights with 8 rows interleaved, for the AVX2 matmul
 * (the same idea as cpu_q4k_x8.c: one 32-bit lane per row, no horizontal
 * sums, scales as vectors).
 *
 * A Q6_K super-block holds 256 6-bit quants as a low nibble in ql and two
 * high bits in qh: for half h (0, 1) and l in 0..31, the bytes ql[64h + l],
 * ql[64h + 32 + l] and qh[32h + l] give the four values at 128h + l + 0, 32,
 * 64 and 96 ("streams" 0..3 below), each in a sub-block of 16 with its own
 * int8 scale.  The interleaved block keeps, for every (h, 4-byte group t),
 * those three 4-byte runs of each of the 8 rows side by side.
 *
 * Exactness: quants are taken unsigned (0..63) and 32 * sum(x) per sub-block
 * is subtracted afterwards, as in the row kernel; maddubs adds two products
 * (|pair| <= 2 * 63 * 127 = 16002), two such vectors (one sub-block's 16
 * values are 4 groups of 4, taken 2 at a time) stay inside int16 (32004), and
 * everything after the scale multiply is int32: |sum| < 2^30 for a block. */
#include "kernels/cpu/cpu_qdot.h"

#include <stdint.h>
#include <string.h>

#include "kernels/quant_blocks.h"

void q6k_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out)
{
    block_q6_k_x8 *g = out;
    for (int b = 0; b < nblocks; b++, g++)
        for (int r = 0; r < 8; r++) {
            const block_q6_k *src = (const block_q6_k *)((const uint8_t *)rows8 + r * row_bytes) + b;
            memcpy(g->d[r], src->d, 2);
            for (int s = 0; s < 16; s++) g->sc[s / 2][r][s % 2] = src->scales[s];
            for (int h = 0; h < 2; h++)
                for (int t = 0; t < 8; t++) {
                    memcpy(g->q[h][t][0][r], src->ql + 64 * h + 4 * t, 4);
                    memcpy(g->q[h][t][1][r], src->ql + 64 * h + 32 + 4 * t, 4);
                    memcpy(g->q[h][t][2][r], src->qh + 32 * h + 4 * t, 4);
                }
        }
}

void q6k_x8_block(const void *group, int b, int r, void *out)
{
    const block_q6_k_x8 *g = (const block_q6_k_x8 *)group + b;
    block_q6_k *dst = out;
    memcpy(dst->d, g->d[r], 2);
    for (int s = 0; s < 16; s++) dst->scales[s] = g->sc[s / 2][r][s % 2];
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < 8; t++) {
            memcpy(dst->ql + 64 * h + 4 * t, g->q[h][t][0][r], 4);
            memcpy(dst->ql + 64 * h + 32 + 4 * t, g->q[h][t][1][r], 4);
            memcpy(dst->qh + 32 * h + 4 * t, g->q[h][t][2][r], 4);
        }
}

#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/cpu_x8_avx2.h"
#include "kernels/cpu/cpu_x8_pair.h"

/* Scales of sub-blocks 2p (odd = 0) or 2p + 1 of the 8 rows, each as an
 * int16 pair (s, s) in its row's lane, from the pair vector sp. */
static __m256i scale_of(__m256i sp, int odd)
{
    return odd ? _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(sp, 0xF5), 0xF5)
               : _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(sp, 0xA0), 0xA0);
}

/* The body of both kernels, for R activation rows (1, 2 or 4: see
 * cpu_q4k_x8.c on registers and unrolling); per row the same operations in
 * the same order whatever R, so every R agrees bit for bit.
 * Lane r of every vector belongs to weight row r.  Streams go in pairs that
 * share their ql bytes: (0, 2) low and high nibbles of ql[64h + l], (1, 3)
 * those of ql[64h + 32 + l]; stream s's two high bits are bits 2s, 2s + 1 of
 * qh, moved to bits 4, 5 with one shift. */
static inline __attribute__((always_inline)) void q6k_x8_body(int k, const void *group,
                                                              const void *act, size_t stride,
                                                              int R, float (*out)[8])
{
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    __m256 acc[4];
    const block_q8_256 *x0[4];
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        acc[i] = _mm256_setzero_ps();
        x0[i] = (const block_q8_256 *)((const uint8_t *)act + (size_t)i * stride);
    }
    for (int b = 0; b < k / QK_K; b++) {
        const block_q6_k_x8 *g = (const block_q6_k_x8 *)group + b;
        x8_prefetch_ahead(g, sizeof *g, X8_PREFETCH_BLOCKS * sizeof *g);
        __m256i isum[4], off[4];
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) isum[i] = off[i] = _mm256_setzero_si256();
        for (int p = 0; p < 8; p++) {
            __m256i sp = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)g->sc[p]));
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                int32_t bs;
                memcpy(&bs, x0[i][b].bsums + 2 * p, 4);
                off[i] = _mm256_add_epi32(off[i], _mm256_madd_epi16(sp, _mm256_set1_epi32(bs)));
            }
        }
        for (int h = 0; h < 2; h++)
            for (int pair = 0; pair < 2; pair++) {
                /* streams pair (low nibbles) and pair + 2 (high nibbles) */
                __m256i spa = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)g->sc[4 * h + pair]));
                __m256i spb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)g->sc[4 * h + pair + 2]));
                #pragma GCC unroll 1
                for (int t0 = 0; t0 < 8; t0 += 2) {
                    __m256i pa[4], pb[4];
                    #pragma GCC unroll 4
                    for (int i = 0; i < R; i++) pa[i] = pb[i] = _mm256_setzero_si256();
                    for (int t = t0; t < t0 + 2; t++) {
                        __m256i ql = load32(g->q[h][t][pair]), qh = load32(g->q[h][t][2]);
                        /* high bits of stream `pair` are qh bits 2*pair: shift left by 4 - 2*pair;
                         * of stream pair + 2, bits 4 + 2*pair: shift right by 2*pair */
                        __m256i ha = _mm256_and_si256(pair ? _mm256_slli_epi16(qh, 2) : _mm256_slli_epi16(qh, 4), bits45);
                        __m256i hb = _mm256_and_si256(pair ? _mm256_srli_epi16(qh, 2) : qh, bits45);
                        __m256i va = _mm256_or_si256(_mm256_and_si256(ql, low4), ha);
                        __m256i vb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), low4), hb);
                        #pragma GCC unroll 4
                        for (int i = 0; i < R; i++) {
                            const int8_t *xq = x0[i][b].qs + 128 * h + 32 * pair + 4 * t;
                            pa[i] = _mm256_add_epi16(pa[i], _mm256_maddubs_epi16(va, bcast4(xq)));
                            pb[i] = _mm256_add_epi16(pb[i], _mm256_maddubs_epi16(vb, bcast4(xq + 64)));
                        }
                    }
                    /* t0 < 4: the first 16 values of the streams' sub-block pairs */
                    __m256i sa = scale_of(spa, t0 >= 4), sb = scale_of(spb, t0 >= 4);
                    #pragma GCC unroll 4
                    for (int i = 0; i < R; i++) {
                        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(pa[i], sa));
                        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(pb[i], sb));
                    }
                }
            }
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g->d));
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            __m256i net = _mm256_sub_epi32(isum[i], _mm256_slli_epi32(off[i], 5));
            acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x0[i][b].d)),
                                     _mm256_cvtepi32_ps(net), acc[i]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) _mm256_storeu_ps(out[i], acc[i]);
}

void q6k_x8_dot_avx2(int k, const void *group, const void *act, float out[8])
{
    q6k_x8_body(k, group, act, 0, 1, (float (*)[8])out);
}

/* two activation rows at a time: four spill the accumulators */
void q6k_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                      float out[QDOT_ROWS][8])
{
    for (int i = 0; i < QDOT_ROWS; i += 2)
        q6k_x8_body(k, group, (const uint8_t *)act + (size_t)i * stride, stride, 2, out + i);
}

/* all QDOT_ROWS rows at once in AVX-512VL's 32 registers (cpu_q4k_x8.c) */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw")))
void q6k_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                          float out[QDOT_ROWS][8])
{
    q6k_x8_body(k, group, act, stride, QDOT_ROWS, out);
}

/* Sub-block 2p (odd = 0) or 2p + 1 scales of the 8 rows as int32, one per
 * lane, from the pair vector sp (as scale_of, widened). */
static __m256i scale32_of(__m256i sp, int odd)
{
    return odd ? _mm256_srai_epi32(sp, 16) : _mm256_srai_epi32(_mm256_slli_epi32(sp, 16), 16);
}

/* The body again with AVX-512 VNNI (see cpu_q4k_x8.c): vpdpbusd sums into
 * int32, so a whole sub-block of 16 values (four 4-byte groups) is summed
 * before its scale multiply (|sum| <= 16 * 63 * 127 = 128016, times |scale|
 * <= 128, sixteen sub-blocks: < 2^29).  The integers equal the AVX2 body's
 * and the float work is the same: bitwise the same result. */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __attribute__((always_inline)) void q6k_x8_body_vnni(int k, const void *group,
                                                                   const void *act, size_t stride,
                                                                   int R, float (*out)[8])
{
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    __m256 acc[4];
    const block_q8_256 *x0[4];
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        acc[i] = _mm256_setzero_ps();
        x0[i] = (const block_q8_256 *)((const uint8_t *)act + (size_t)i * stride);
    }
    for (int b = 0; b < k / QK_K; b++) {
        const block_q6_k_x8 *g = (const block_q6_k_x8 *)group + b;
        x8_prefetch_ahead(g, sizeof *g, X8_PREFETCH_BLOCKS * sizeof *g);
        __m256i isum[4], off[4];
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) isum[i] = off[i] = _mm256_setzero_si256();
        for (int p = 0; p < 8; p++) {
            __m256i sp = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)g->sc[p]));
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                int32_t bs;
                memcpy(&bs, x0[i][b].bsums + 2 * p, 4);
                off[i] = _mm256_add_epi32(off[i], _mm256_madd_epi16(sp, _mm256_set1_epi32(bs)));
            }
        }
        for (int h = 0; h < 2; h++)
            for (int pair = 0; pair < 2; pair++) {
                __m256i spa = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)g->sc[4 * h + pair]));
                __m256i spb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)g->sc[4 * h + pair + 2]));
                #pragma GCC unroll 1
                for (int half = 0; half < 2; half++) {
                    __m256i pa[4], pb[4];
                    #pragma GCC unroll 4
                    for (int i = 0; i < R; i++) pa[i] = pb[i] = _mm256_setzero_si256();
                    #pragma GCC unroll 4
                    for (int t = 4 * half; t < 4 * half + 4; t++) {
                        __m256i ql = load32(g->q[h][t][pair]), qh = load32(g->q[h][t][2]);
                        __m256i ha = _mm256_and_si256(pair ? _mm256_slli_epi16(qh, 2) : _mm256_slli_epi16(qh, 4), bits45);
                        __m256i hb = _mm256_and_si256(pair ? _mm256_srli_epi16(qh, 2) : qh, bits45);
                        __m256i va = _mm256_or_si256(_mm256_and_si256(ql, low4), ha);
                        __m256i vb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), low4), hb);
                        #pragma GCC unroll 4
                        for (int i = 0; i < R; i++) {
                            const int8_t *xq = x0[i][b].qs + 128 * h + 32 * pair + 4 * t;
                            pa[i] = _mm256_dpbusd_epi32(pa[i], va, bcast4(xq));
                            pb[i] = _mm256_dpbusd_epi32(pb[i], vb, bcast4(xq + 64));
                        }
                    }
                    __m256i sa = scale32_of(spa, half), sb = scale32_of(spb, half);
                    #pragma GCC unroll 4
                    for (int i = 0; i < R; i++) {
                        isum[i] = _mm256_add_epi32(isum[i], _mm256_mullo_epi32(pa[i], sa));
                        isum[i] = _mm256_add_epi32(isum[i], _mm256_mullo_epi32(pb[i], sb));
                    }
                }
            }
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g->d));
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            __m256i net = _mm256_sub_epi32(isum[i], _mm256_slli_epi32(off[i], 5));
            acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x0[i][b].d)),
                                     _mm256_cvtepi32_ps(net), acc[i]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) _mm256_storeu_ps(out[i], acc[i]);
}

__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q6k_x8_dot_vnni(int k, const void *group, const void *act, float out[8])
{
    q6k_x8_body_vnni(k, group, act, 0, 1, (float (*)[8])out);
}

__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q6k_x8_dots_vnni(int k, const void *group, const void *act, size_t stride,
                      float out[QDOT_ROWS][8])
{
    q6k_x8_body_vnni(k, group, act, stride, QDOT_ROWS, out);
}

/* QDOT_ROWS activation rows against the 16 weight rows of two neighbouring
 * groups (the second gb bytes after the first) in 512-bit vectors, as
 * q4k_x8_dots_pair_vnni (cpu_q4k_x8.c): each activation broadcast and each
 * scale step serves 16 weight rows.  Lane by lane the VNNI body's integers
 * and float operations in its order: out[i][0..7] is bitwise the first
 * group's dots, out[i][8..15] the second's. */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q6k_x8_dots_pair_vnni(int k, const void *group, size_t gb, const void *act, size_t stride,
                           float out[QDOT_ROWS][16])
{
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    __m512 acc[QDOT_ROWS];
    const block_q8_256 *x0[QDOT_ROWS];
    #pragma GCC unroll 4
    for (int i = 0; i < QDOT_ROWS; i++) {
        acc[i] = _mm512_setzero_ps();
        x0[i] = (const block_q8_256 *)((const uint8_t *)act + (size_t)i * stride);
    }
    for (int b = 0; b < k / QK_K; b++) {
        const block_q6_k_x8 *g = (const block_q6_k_x8 *)group + b;
        x8_prefetch_ahead(g, sizeof *g, X8_PREFETCH_BLOCKS * sizeof *g);
        __m512i isum[QDOT_ROWS], off[QDOT_ROWS];
        #pragma GCC unroll 4
        for (int i = 0; i < QDOT_ROWS; i++) isum[i] = off[i] = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) {
            __m512i sp = _mm512_cvtepi8_epi16(pair_load16(g->sc[p], gb));
            #pragma GCC unroll 4
            for (int i = 0; i < QDOT_ROWS; i++) {
                int32_t bs;
                memcpy(&bs, x0[i][b].bsums + 2 * p, 4);
                off[i] = _mm512_add_epi32(off[i], _mm512_madd_epi16(sp, _mm512_set1_epi32(bs)));
            }
        }
        for (int h = 0; h < 2; h++)
            for (int pair = 0; pair < 2; pair++) {
                __m512i spa = _mm512_cvtepi8_epi16(pair_load16(g->sc[4 * h + pair], gb));
                __m512i spb = _mm512_cvtepi8_epi16(pair_load16(g->sc[4 * h + pair + 2], gb));
                #pragma GCC unroll 1
                for (int half = 0; half < 2; half++) {
                    __m512i pa[QDOT_ROWS], pb[QDOT_ROWS];
                    #pragma GCC unroll 4
                    for (int i = 0; i < QDOT_ROWS; i++) pa[i] = pb[i] = _mm512_setzero_si512();
                    #pragma GCC unroll 4
                    for (int t = 4 * half; t < 4 * half + 4; t++) {
                        __m512i ql = pair_load32(g->q[h][t][pair], gb);
                        __m512i qh = pair_load32(g->q[h][t][2], gb);
                        __m512i ha = _mm512_and_si512(pair ? _mm512_slli_epi16(qh, 2) : _mm512_slli_epi16(qh, 4), bits45);
                        __m512i hb = _mm512_and_si512(pair ? _mm512_srli_epi16(qh, 2) : qh, bits45);
                        __m512i va = _mm512_or_si512(_mm512_and_si512(ql, low4), ha);
                        __m512i vb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), hb);
                        #pragma GCC unroll 4
                        for (int i = 0; i < QDOT_ROWS; i++) {
                            const int8_t *xq = x0[i][b].qs + 128 * h + 32 * pair + 4 * t;
                            pa[i] = _mm512_dpbusd_epi32(pa[i], va, pair_bcast4(xq));
                            pb[i] = _mm512_dpbusd_epi32(pb[i], vb, pair_bcast4(xq + 64));
                        }
                    }
                    /* scale32_of on 512 bits: the int16 pair's first (half 0) or second value */
                    __m512i sa = half ? _mm512_srai_epi32(spa, 16) : _mm512_srai_epi32(_mm512_slli_epi32(spa, 16), 16);
                    __m512i sb = half ? _mm512_srai_epi32(spb, 16) : _mm512_srai_epi32(_mm512_slli_epi32(spb, 16), 16);
                    #pragma GCC unroll 4
                    for (int i = 0; i < QDOT_ROWS; i++) {
                        isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(pa[i], sa));
                        isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(pb[i], sb));
                    }
                }
            }
        __m512 d = pair_f16x16(g->d, gb);
        #pragma GCC unroll 4
        for (int i = 0; i < QDOT_ROWS; i++) {
            __m512i net = _mm512_sub_epi32(isum[i], _mm512_slli_epi32(off[i], 5));
            acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(x0[i][b].d)),
                                     _mm512_cvtepi32_ps(net), acc[i]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < QDOT_ROWS; i++) _mm512_storeu_ps(out[i], acc[i]);
}

#pragma GCC pop_options

#endif
