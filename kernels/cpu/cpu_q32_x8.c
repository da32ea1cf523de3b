/* cpu_q32_x8.c - Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 weights (blocks of 32) with
 * 8 rows interleaved for the AVX2 matmul, as cpu_q4k_x8.c does for Q4_K: one
 * 32-bit lane per row, the rows' f16 scales side by side, no horizontal sums.
 *
 * Block b of a group holds, for 4-byte group t, the 4 quant bytes of each of
 * the 8 rows in turn.  Q4 / Q5 bytes l = 0..15 hold elements l (low nibble)
 * and l + 16 (high); Q8_0 bytes are elements.  Q5's 32 fifth bits (the file's
 * qh) are stored per row with their bits permuted (qh_permute) so that group
 * t's bits come out of one shift and one mask, already in place: bit 4 of
 * byte b of the lane is the fifth bit of element 4t + b (after a shift by 4
 * for the low nibbles).
 *
 * Exactness: 4-bit quants (0..15) times 8-bit activations: a maddubs pair is
 * at most 3810, four of them (one block) 15240 in int16.  5-bit quants
 * (0..31): a pair at most 7874, and the low and high halves are summed apart
 * (four pairs each, 31496) before madd widens them.  Q8_0 (-128..127): |w|
 * times x with w's sign moved onto x, a pair at most 2 * 128 * 127 = 32512,
 * widened to int32 at once.  Q4_0's offset 8 and Q5_0's 16 are applied as
 * 8 or 16 * sum(x) per block (block_q8_32.s = d * sum(q)), Q4_1's and Q5_1's
 * min as m * that sum. */
#include "kernels/cpu/cpu_qdot.h"

#include <stdint.h>
#include <string.h>

#include "kernels/quant_blocks.h"

/* Bytes of one row's block: scale fields (d, or d and m), the fifth bits
 * (Q5 only), then quants. */
struct q32_layout {
    size_t block, head, qh, quants; /* bytes: the file's block, its f16 fields, qh, quants */
};

static struct q32_layout layout_of(enum weight_type t)
{
    switch (t) {
    case WEIGHT_Q4_0: return (struct q32_layout){sizeof(block_q4_0), 2, 0, 16};
    case WEIGHT_Q4_1: return (struct q32_layout){sizeof(block_q4_1), 4, 0, 16};
    case WEIGHT_Q5_0: return (struct q32_layout){sizeof(block_q5_0), 2, 4, 16};
    case WEIGHT_Q5_1: return (struct q32_layout){sizeof(block_q5_1), 4, 4, 16};
    default: return (struct q32_layout){sizeof(block_q8_0), 2, 0, 32};
    }
}

/* Fifth bits: file bit 4t + b (element 4t + b, low nibble) goes to bit
 * 8b + t, file bit 16 + 4t + b (element 16 + 4t + b) to bit 8b + 4 + t. */
static uint32_t qh_permute(uint32_t qh)
{
    uint32_t out = 0;
    for (int t = 0; t < 4; t++)
        for (int b = 0; b < 4; b++) {
            out |= ((qh >> (4 * t + b)) & 1u) << (8 * b + t);
            out |= ((qh >> (16 + 4 * t + b)) & 1u) << (8 * b + 4 + t);
        }
    return out;
}

static uint32_t qh_unpermute(uint32_t p)
{
    uint32_t qh = 0;
    for (int t = 0; t < 4; t++)
        for (int b = 0; b < 4; b++) {
            qh |= ((p >> (8 * b + t)) & 1u) << (4 * t + b);
            qh |= ((p >> (8 * b + 4 + t)) & 1u) << (16 + 4 * t + b);
        }
    return qh;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Interleaved block: [head/2 f16 fields][8 rows][2], then (Q5) [8 rows][4]
 * permuted fifth bits, then [quants/4][8][4]. */
static void pack(enum weight_type t, const void *rows8, size_t row_bytes, int nblocks, void *out)
{
    struct q32_layout L = layout_of(t);
    uint8_t *g = out;
    for (int b = 0; b < nblocks; b++, g += 8 * L.block)
        for (int r = 0; r < 8; r++) {
            const uint8_t *src = (const uint8_t *)rows8 + r * row_bytes + b * L.block;
            for (size_t f = 0; f < L.head / 2; f++) memcpy(g + 16 * f + 2 * r, src + 2 * f, 2);
            if (L.qh) put_u32(g + 8 * L.head + 4 * r, qh_permute(get_u32(src + L.head)));
            for (size_t q = 0; q < L.quants / 4; q++)
                memcpy(g + 8 * (L.head + L.qh) + 32 * q + 4 * r, src + L.head + L.qh + 4 * q, 4);
        }
}

static void unpack_block(enum weight_type t, const void *group, int b, int r, void *out)
{
    struct q32_layout L = layout_of(t);
    const uint8_t *g = (const uint8_t *)group + (size_t)b * 8 * L.block;
    uint8_t *dst = out;
    for (size_t f = 0; f < L.head / 2; f++) memcpy(dst + 2 * f, g + 16 * f + 2 * r, 2);
    if (L.qh) put_u32(dst + L.head, qh_unpermute(get_u32(g + 8 * L.head + 4 * r)));
    for (size_t q = 0; q < L.quants / 4; q++)
        memcpy(dst + L.head + L.qh + 4 * q, g + 8 * (L.head + L.qh) + 32 * q + 4 * r, 4);
}

void q4_0_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out)
{
    pack(WEIGHT_Q4_0, rows8, row_bytes, nblocks, out);
}
void q4_1_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out)
{
    pack(WEIGHT_Q4_1, rows8, row_bytes, nblocks, out);
}
void q5_0_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out)
{
    pack(WEIGHT_Q5_0, rows8, row_bytes, nblocks, out);
}
void q5_1_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out)
{
    pack(WEIGHT_Q5_1, rows8, row_bytes, nblocks, out);
}
void q8_0_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out)
{
    pack(WEIGHT_Q8_0, rows8, row_bytes, nblocks, out);
}
void q4_0_x8_block(const void *group, int b, int r, void *out)
{
    unpack_block(WEIGHT_Q4_0, group, b, r, out);
}
void q4_1_x8_block(const void *group, int b, int r, void *out)
{
    unpack_block(WEIGHT_Q4_1, group, b, r, out);
}
void q5_0_x8_block(const void *group, int b, int r, void *out)
{
    unpack_block(WEIGHT_Q5_0, group, b, r, out);
}
void q5_1_x8_block(const void *group, int b, int r, void *out)
{
    unpack_block(WEIGHT_Q5_1, group, b, r, out);
}
void q8_0_x8_block(const void *group, int b, int r, void *out)
{
    unpack_block(WEIGHT_Q8_0, group, b, r, out);
}

#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/cpu_x8_avx2.h"

/* The 32 quants of 8 rows for 4-byte group t as unsigned bytes: lo holds
 * elements 4t..4t+3 of every row, hi elements 16+4t..; Q5's fifth bits come
 * from qh (the permuted bits of the 8 rows; ignored for Q4). */
static inline __attribute__((always_inline)) void q32_nibbles(int q5, __m256i v, __m256i qh, int t,
                                                              __m256i *lo, __m256i *hi)
{
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    *lo = _mm256_and_si256(v, low4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if (q5) {
        const __m256i bit0 = _mm256_set1_epi32(0x01010101), bit4 = _mm256_set1_epi32(0x10101010);
        __m256i h = _mm256_srli_epi32(qh, t);
        *lo = _mm256_or_si256(*lo, _mm256_slli_epi32(_mm256_and_si256(h, bit0), 4));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(h, bit4));
    }
}

/* The float work of one block for one activation row (lane = weight row). */
static inline __attribute__((always_inline)) __m256 q32_finish(enum weight_type type,
                                                               const uint8_t *g, __m256 d,
                                                               const block_q8_32 *x, __m256i isum,
                                                               __m256 acc)
{
    acc = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x->d)), _mm256_cvtepi32_ps(isum), acc);
    if (type == WEIGHT_Q4_0) /* q - 8: minus 8 * d * d_x * sum(q_x) */
        acc = _mm256_fnmadd_ps(d, _mm256_set1_ps(8.0f * x->s), acc);
    else if (type == WEIGHT_Q5_0) /* q - 16 */
        acc = _mm256_fnmadd_ps(d, _mm256_set1_ps(16.0f * x->s), acc);
    else if (type == WEIGHT_Q4_1 || type == WEIGHT_Q5_1) /* + m * d_x * sum(q_x) */
        acc = _mm256_fmadd_ps(f16x8(g + 16), _mm256_set1_ps(x->s), acc);
    return acc;
}

/* The body of every kernel here, for R activation rows (1, 2 or 4: see
 * cpu_q4k_x8.c on registers and unrolling); per row the same operations in
 * the same order whatever R, so every R agrees bit for bit.  Lane r of every
 * vector belongs to weight row r. */
static inline __attribute__((always_inline)) void q32_body(enum weight_type type, int k,
                                                           const void *group, const void *act,
                                                           size_t stride, int R, float (*out)[8])
{
    struct q32_layout L = layout_of(type);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    const block_q8_32 *x0[4];
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        acc[i] = _mm256_setzero_ps();
        x0[i] = (const block_q8_32 *)((const uint8_t *)act + (size_t)i * stride);
    }
    for (int b = 0; b < k / QK; b++) {
        const uint8_t *g = (const uint8_t *)group + (size_t)b * 8 * L.block;
        const uint8_t *qs = g + 8 * (L.head + L.qh);
        x8_prefetch_ahead(g, 8 * L.block, X8_PREFETCH_BYTES);
        __m256i isum[4];
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) isum[i] = _mm256_setzero_si256();
        if (type == WEIGHT_Q8_0) {
            for (int t = 0; t < 8; t++) {
                __m256i w = load32(qs + 32 * t), aw = _mm256_sign_epi8(w, w);
                #pragma GCC unroll 4
                for (int i = 0; i < R; i++) {
                    __m256i xs = _mm256_sign_epi8(bcast4(x0[i][b].qs + 4 * t), w);
                    isum[i] = _mm256_add_epi32(
                        isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones));
                }
            }
        } else if (L.qh) {
            /* Q5: low and high halves summed apart (see the header's bounds) */
            __m256i qh = load32(g + 8 * L.head), plo[4], phi[4];
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) plo[i] = phi[i] = _mm256_setzero_si256();
            for (int t = 0; t < 4; t++) {
                __m256i lo, hi;
                q32_nibbles(1, load32(qs + 32 * t), qh, t, &lo, &hi);
                #pragma GCC unroll 4
                for (int i = 0; i < R; i++) {
                    const int8_t *xq = x0[i][b].qs + 4 * t;
                    plo[i] = _mm256_add_epi16(plo[i], _mm256_maddubs_epi16(lo, bcast4(xq)));
                    phi[i] = _mm256_add_epi16(phi[i], _mm256_maddubs_epi16(hi, bcast4(xq + 16)));
                }
            }
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++)
                isum[i] = _mm256_add_epi32(_mm256_madd_epi16(plo[i], ones),
                                           _mm256_madd_epi16(phi[i], ones));
        } else {
            __m256i p16[4];
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) p16[i] = _mm256_setzero_si256();
            for (int t = 0; t < 4; t++) {
                __m256i lo, hi;
                q32_nibbles(0, load32(qs + 32 * t), _mm256_setzero_si256(), t, &lo, &hi);
                #pragma GCC unroll 4
                for (int i = 0; i < R; i++) {
                    const int8_t *xq = x0[i][b].qs + 4 * t;
                    p16[i] = _mm256_add_epi16(p16[i], _mm256_maddubs_epi16(lo, bcast4(xq)));
                    p16[i] = _mm256_add_epi16(p16[i], _mm256_maddubs_epi16(hi, bcast4(xq + 16)));
                }
            }
            #pragma GCC unroll 4
            for (int i = 0; i < R; i++) isum[i] = _mm256_madd_epi16(p16[i], ones);
        }
        __m256 d = f16x8(g);
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) acc[i] = q32_finish(type, g, d, &x0[i][b], isum[i], acc[i]);
    }
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) _mm256_storeu_ps(out[i], acc[i]);
}

void q4_0_x8_dot_avx2(int k, const void *group, const void *act, float out[8])
{
    q32_body(WEIGHT_Q4_0, k, group, act, 0, 1, (float (*)[8])out);
}
void q4_1_x8_dot_avx2(int k, const void *group, const void *act, float out[8])
{
    q32_body(WEIGHT_Q4_1, k, group, act, 0, 1, (float (*)[8])out);
}
void q5_0_x8_dot_avx2(int k, const void *group, const void *act, float out[8])
{
    q32_body(WEIGHT_Q5_0, k, group, act, 0, 1, (float (*)[8])out);
}
void q5_1_x8_dot_avx2(int k, const void *group, const void *act, float out[8])
{
    q32_body(WEIGHT_Q5_1, k, group, act, 0, 1, (float (*)[8])out);
}
void q8_0_x8_dot_avx2(int k, const void *group, const void *act, float out[8])
{
    q32_body(WEIGHT_Q8_0, k, group, act, 0, 1, (float (*)[8])out);
}

/* two activation rows at a time, as in cpu_q4k_x8.c */
void q4_0_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8])
{
    for (int i = 0; i < QDOT_ROWS; i += 2)
        q32_body(WEIGHT_Q4_0, k, group, (const uint8_t *)act + (size_t)i * stride, stride, 2,
                 out + i);
}
void q4_1_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8])
{
    for (int i = 0; i < QDOT_ROWS; i += 2)
        q32_body(WEIGHT_Q4_1, k, group, (const uint8_t *)act + (size_t)i * stride, stride, 2,
                 out + i);
}
void q5_0_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8])
{
    for (int i = 0; i < QDOT_ROWS; i += 2)
        q32_body(WEIGHT_Q5_0, k, group, (const uint8_t *)act + (size_t)i * stride, stride, 2,
                 out + i);
}
void q5_1_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8])
{
    for (int i = 0; i < QDOT_ROWS; i += 2)
        q32_body(WEIGHT_Q5_1, k, group, (const uint8_t *)act + (size_t)i * stride, stride, 2,
                 out + i);
}
void q8_0_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8])
{
    for (int i = 0; i < QDOT_ROWS; i += 2)
        q32_body(WEIGHT_Q8_0, k, group, (const uint8_t *)act + (size_t)i * stride, stride, 2,
                 out + i);
}

/* The body again with AVX-512 VNNI (cpu_q4k_x8.c says why a second body):
 * vpdpbusd sums four u8 x s8 products straight into int32, the whole block
 * in one accumulator (|sum| <= 32 * 31 * 127 for Q5, 32 * 128 * 127 for
 * Q8_0: far inside int32), the same integers as the AVX2 body and the same
 * float work after them, so the same bits. */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __attribute__((always_inline)) void q32_body_vnni(enum weight_type type, int k,
                                                                const void *group, const void *act,
                                                                size_t stride, int R,
                                                                float (*out)[8])
{
    struct q32_layout L = layout_of(type);
    __m256 acc[4];
    const block_q8_32 *x0[4];
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        acc[i] = _mm256_setzero_ps();
        x0[i] = (const block_q8_32 *)((const uint8_t *)act + (size_t)i * stride);
    }
    for (int b = 0; b < k / QK; b++) {
        const uint8_t *g = (const uint8_t *)group + (size_t)b * 8 * L.block;
        const uint8_t *qs = g + 8 * (L.head + L.qh);
        x8_prefetch_ahead(g, 8 * L.block, X8_PREFETCH_BYTES);
        __m256i isum[4];
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) isum[i] = _mm256_setzero_si256();
        if (type == WEIGHT_Q8_0) {
            #pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                __m256i w = load32(qs + 32 * t), aw = _mm256_sign_epi8(w, w);
                #pragma GCC unroll 4
                for (int i = 0; i < R; i++)
                    isum[i] = _mm256_dpbusd_epi32(isum[i], aw,
                                                  _mm256_sign_epi8(bcast4(x0[i][b].qs + 4 * t), w));
            }
        } else {
            __m256i qh = L.qh ? load32(g + 8 * L.head) : _mm256_setzero_si256();
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                __m256i lo, hi;
                q32_nibbles(L.qh != 0, load32(qs + 32 * t), qh, t, &lo, &hi);
                #pragma GCC unroll 4
                for (int i = 0; i < R; i++) {
                    const int8_t *xq = x0[i][b].qs + 4 * t;
                    isum[i] = _mm256_dpbusd_epi32(isum[i], lo, bcast4(xq));
                    isum[i] = _mm256_dpbusd_epi32(isum[i], hi, bcast4(xq + 16));
                }
            }
        }
        __m256 d = f16x8(g);
        #pragma GCC unroll 4
        for (int i = 0; i < R; i++) acc[i] = q32_finish(type, g, d, &x0[i][b], isum[i], acc[i]);
    }
    #pragma GCC unroll 4
    for (int i = 0; i < R; i++) _mm256_storeu_ps(out[i], acc[i]);
}

/* All QDOT_ROWS rows at once in AVX-512VL's 32 registers (cpu_q4k_x8.c),
 * with VNNI: the wide set's 4-row kernels; its 1-row kernels are the AVX2
 * ones. */
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q4_0_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                           float out[QDOT_ROWS][8])
{
    q32_body_vnni(WEIGHT_Q4_0, k, group, act, stride, QDOT_ROWS, out);
}
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q4_1_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                           float out[QDOT_ROWS][8])
{
    q32_body_vnni(WEIGHT_Q4_1, k, group, act, stride, QDOT_ROWS, out);
}
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q5_0_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                           float out[QDOT_ROWS][8])
{
    q32_body_vnni(WEIGHT_Q5_0, k, group, act, stride, QDOT_ROWS, out);
}
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q5_1_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                           float out[QDOT_ROWS][8])
{
    q32_body_vnni(WEIGHT_Q5_1, k, group, act, stride, QDOT_ROWS, out);
}
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
void q8_0_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                           float out[QDOT_ROWS][8])
{
    q32_body_vnni(WEIGHT_Q8_0, k, group, act, stride, QDOT_ROWS, out);
}

#pragma GCC pop_options

#endif
