/* cpu_qdot_avx2.c - AVX2/FMA/F16C dot kernels: the same products as
 * cpu_qdot_scalar.c, 32 quants at a time.
 *
 * The functions are compiled for AVX2 by the target pragma below, not by the
 * build flags, so the binary still runs on any x86-64: they are only called
 * after cpu_simd_level() found AVX2, FMA and F16C in CPUID.
 *
 * Signed x signed bytes use the maddubs trick: |a| (unsigned) times b with
 * a's sign moved onto it.  Overflow: maddubs adds two products into an int16;
 * activations are in [-127, 127] (qact never makes -128) and weight quants
 * are at most 128 in magnitude, so a pair is at most 2 * 128 * 127 = 32512. */
#include "kernels/cpu/cpu_qdot.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/quant_blocks.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/cpu_x8_avx2.h"

static float f16(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

static uint32_t u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}


/* 16 bytes of packed nibbles -> 32 bytes: low nibbles (elements 0..15), then
 * high nibbles (16..31), the order of the 32-element formats. */
static __m256i nibbles(const uint8_t *qs)
{
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF when bit j of bits is set, else 0. */
static __m256i bits_to_bytes(uint32_t bits)
{
    const __m256i pick = _mm256_setr_epi64x(0x0000000000000000LL, 0x0101010101010101LL,
                                            0x0202020202020202LL, 0x0303030303030303LL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), pick);
    /* In each group of 8 bytes, byte i keeps only bit i: then all-ones iff set. */
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL);
    return _mm256_cmpeq_epi8(_mm256_or_si256(v, others), _mm256_set1_epi8(-1));
}

/* sum of a[i] * b[i] over 32 signed bytes, as 8 int32 lanes */
static __m256i dot_i8(__m256i a, __m256i b)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* the same with a unsigned (a[i] < 128) */
static __m256i dot_u8(__m256i a, __m256i b)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
}

static float dot_f32(int k, const void *wv, const void *xv)
{
    const float *w = wv, *x = xv;
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= k; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc);
    float s = hsum8(acc);
    for (; i < k; i++) s += w[i] * x[i];
    return s;
}

static float dot_f16(int k, const void *wv, const void *xv)
{
    const uint8_t *w = wv;
    const float *x = xv;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= k; i += 16) {
        __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i)));
        __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i + 16)));
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; i < k; i++) s += f16(w + 2 * i) * x[i];
    return s;
}

static __m256 bf16x8(const uint8_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static float dot_bf16(int k, const void *wv, const void *xv)
{
    const uint8_t *w = wv;
    const float *x = xv;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= k; i += 16) {
        a0 = _mm256_fmadd_ps(bf16x8(w + 2 * i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(bf16x8(w + 2 * i + 16), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; i < k; i++) {
        uint32_t u = (uint32_t)(w[2 * i] | (w[2 * i + 1] << 8)) << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        s += f * x[i];
    }
    return s;
}

static float dot_q4_0(int k, const void *wv, const void *xv)
{
    const block_q4_0 *w = wv;
    const block_q8_32 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < k / QK; b++) {
        __m256i q = _mm256_sub_epi8(nibbles(w[b].qs), _mm256_set1_epi8(8));
        __m256i i = dot_i8(q, load32(x[b].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * x[b].d), _mm256_cvtepi32_ps(i), acc);
    }
    return hsum8(acc);
}

static float dot_q4_1(int k, const void *wv, const void *xv)
{
    const block_q4_1 *w = wv;
    const block_q8_32 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int b = 0; b < k / QK; b++) {
        __m256i i = dot_u8(nibbles(w[b].qs), load32(x[b].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * x[b].d), _mm256_cvtepi32_ps(i), acc);
        mins += f16(w[b].m) * x[b].s;
    }
    return hsum8(acc) + mins;
}

static float dot_q5_0(int k, const void *wv, const void *xv)
{
    const block_q5_0 *w = wv;
    const block_q8_32 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < k / QK; b++) {
        /* nibble - 16 + 16 * bit: with the bit clear, nibble | 0xF0 is nibble - 16 */
        __m256i hi = _mm256_andnot_si256(bits_to_bytes(u32(w[b].qh)), _mm256_set1_epi8((char)0xF0));
        __m256i q = _mm256_or_si256(nibbles(w[b].qs), hi);
        __m256i i = dot_i8(q, load32(x[b].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * x[b].d), _mm256_cvtepi32_ps(i), acc);
    }
    return hsum8(acc);
}

static float dot_q5_1(int k, const void *wv, const void *xv)
{
    const block_q5_1 *w = wv;
    const block_q8_32 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int b = 0; b < k / QK; b++) {
        __m256i hi = _mm256_and_si256(bits_to_bytes(u32(w[b].qh)), _mm256_set1_epi8(0x10));
        __m256i q = _mm256_or_si256(nibbles(w[b].qs), hi);
        __m256i i = dot_u8(q, load32(x[b].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * x[b].d), _mm256_cvtepi32_ps(i), acc);
        mins += f16(w[b].m) * x[b].s;
    }
    return hsum8(acc) + mins;
}

static float dot_q8_0(int k, const void *wv, const void *xv)
{
    const block_q8_0 *w = wv;
    const block_q8_32 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < k / QK; b++) {
        __m256i i = dot_i8(load32(w[b].qs), load32(x[b].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * x[b].d), _mm256_cvtepi32_ps(i), acc);
    }
    return hsum8(acc);
}

/* sum_j mn[j] * (bsums[2j] + bsums[2j+1]) */
static int mins_dot(const uint8_t mn[8], const int16_t bsums[16])
{
    __m128i lo = _mm_loadu_si128((const __m128i *)bsums);
    __m128i hi = _mm_loadu_si128((const __m128i *)(bsums + 8));
    __m128i pairs = _mm_hadd_epi16(lo, hi); /* |pair| <= 32 * 127 */
    __m128i m = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn));
    __m128i p = _mm_madd_epi16(m, pairs);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4E));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xB1));
    return _mm_cvtsi128_si32(p);
}

/* Q4_K (qh NULL) and Q5_K: sub-block j of 32 has scale sc[j] and min mn[j]. */
static float dot_q45_k(int k, const void *wv, const void *xv, int five)
{
    const uint8_t *base = wv;
    size_t bsize = five ? sizeof(block_q5_k) : sizeof(block_q4_k);
    const block_q8_256 *x = xv;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = base + (size_t)b * bsize;
        /* d, dmin and scales sit at the same offsets in both layouts */
        const uint8_t *qs = five ? ((const block_q5_k *)blk)->qs : ((const block_q4_k *)blk)->qs;
        uint8_t sc[8], mn[8];
        k4_scales_mins(blk + 4, sc, mn);
        int msum = mins_dot(mn, x[b].bsums);
        __m256i hbits = five ? load32(((const block_q5_k *)blk)->qh) : _mm256_setzero_si256();
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i q = load32(qs + 32 * c);
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if (five) {
                __m256i m0 = _mm256_set1_epi8((char)(1 << (2 * c)));
                __m256i m1 = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
                __m256i h0 = _mm256_cmpeq_epi8(_mm256_and_si256(hbits, m0), m0);
                __m256i h1 = _mm256_cmpeq_epi8(_mm256_and_si256(hbits, m1), m1);
                lo = _mm256_or_si256(lo, _mm256_and_si256(h0, _mm256_set1_epi8(0x10)));
                hi = _mm256_or_si256(hi, _mm256_and_si256(h1, _mm256_set1_epi8(0x10)));
            }
            __m256i plo = _mm256_maddubs_epi16(lo, load32(x[b].qs + 64 * c));
            __m256i phi = _mm256_maddubs_epi16(hi, load32(x[b].qs + 64 * c + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, _mm256_set1_epi16((short)sc[2 * c])));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, _mm256_set1_epi16((short)sc[2 * c + 1])));
        }
        float dx = x[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(blk) * dx), _mm256_cvtepi32_ps(isum), acc);
        mins += f16(blk + 2) * dx * (float)msum;
    }
    return hsum8(acc) - mins;
}

static float dot_q4_k(int k, const void *wv, const void *xv)
{
    return dot_q45_k(k, wv, xv, 0);
}

static float dot_q5_k(int k, const void *wv, const void *xv)
{
    return dot_q45_k(k, wv, xv, 1);
}

/* Two sub-blocks of 16 (scales lo, hi) of 32 unsigned quants times x. */
static __m256i scaled_pair(__m256i q, const int8_t *xq, int lo, int hi)
{
    __m256i p = _mm256_maddubs_epi16(q, load32(xq));
    __m256i s = _mm256_set_m128i(_mm_set1_epi16((short)hi), _mm_set1_epi16((short)lo));
    return _mm256_madd_epi16(p, s);
}

/* sum_s sc[s] * bsums[s] over the 16 sub-blocks of a Q6_K block (exact:
 * |sum| <= 16 * 128 * 16 * 127, far inside int32). */
static int scales_bsums_dot(const int8_t sc[16], const int16_t bsums[16])
{
    __m128i s8 = _mm_loadu_si128((const __m128i *)sc);
    __m128i p = _mm_add_epi32(
        _mm_madd_epi16(_mm_cvtepi8_epi16(s8), _mm_loadu_si128((const __m128i *)bsums)),
        _mm_madd_epi16(_mm_cvtepi8_epi16(_mm_srli_si128(s8, 8)),
                       _mm_loadu_si128((const __m128i *)(bsums + 8))));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4E));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xB1));
    return _mm_cvtsi128_si32(p);
}

static float dot_q6_k(int k, const void *wv, const void *xv)
{
    const block_q6_k *w = wv;
    const block_q8_256 *x = xv;
    const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    float offsets = 0.0f;
    for (int b = 0; b < k / QK_K; b++) {
        const int8_t *sc = w[b].scales;
        /* (q - 32) with unsigned q: subtract 32 * sum(x) per sub-block afterwards */
        int offset = scales_bsums_dot(sc, x[b].bsums);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = load32(w[b].ql + 64 * h), ql1 = load32(w[b].ql + 64 * h + 32);
            __m256i qh = load32(w[b].qh + 32 * h);
            const int8_t *xq = x[b].qs + 128 * h;
            const int8_t *s = sc + 8 * h;
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, two), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4);
            __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4);
            __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4);
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql0, low4), h0);
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(ql1, low4), h1);
            __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), h2);
            __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), h3);
            isum = _mm256_add_epi32(isum, scaled_pair(q1, xq, s[0], s[1]));
            isum = _mm256_add_epi32(isum, scaled_pair(q2, xq + 32, s[2], s[3]));
            isum = _mm256_add_epi32(isum, scaled_pair(q3, xq + 64, s[4], s[5]));
            isum = _mm256_add_epi32(isum, scaled_pair(q4, xq + 96, s[6], s[7]));
        }
        float d = f16(w[b].d) * x[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        offsets += d * (float)(32 * offset);
    }
    return hsum8(acc) - offsets;
}

/* ---- QDOT_ROWS activation rows per weight row (batched decode) ----
 * Each weight block is unpacked once, then multiplied with every row.  Per
 * row, the float work (block scale times the integer sum, fused into acc; the
 * min / offset terms) is the 1-row kernel's, in the same order, so the results
 * are bitwise equal; integer sums are exact whatever their order. */

/* Row r's block b of a q8_32 / q8_256 prepared batch. */
static const block_q8_32 *act32(const void *act, size_t stride, int r, int b)
{
    return (const block_q8_32 *)((const uint8_t *)act + (size_t)r * stride) + b;
}

static const block_q8_256 *act256(const void *act, size_t stride, int r, int b)
{
    return (const block_q8_256 *)((const uint8_t *)act + (size_t)r * stride) + b;
}

/* Signed quants q (block scale dw) times block b of every row: dot_i8 per row. */
static inline void rows_i8(__m256i q, float dw, const void *act, size_t stride, int b,
                           __m256 acc[QDOT_ROWS])
{
    __m256i aq = _mm256_sign_epi8(q, q);
    for (int r = 0; r < QDOT_ROWS; r++) {
        const block_q8_32 *x = act32(act, stride, r, b);
        __m256i p = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(load32(x->qs), q));
        __m256i i = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x->d), _mm256_cvtepi32_ps(i), acc[r]);
    }
}

/* Unsigned quants q (scale dw, min dm): dot_u8 per row, plus the min term. */
static inline void rows_u8(__m256i q, float dw, float dm, const void *act, size_t stride, int b,
                           __m256 acc[QDOT_ROWS], float mins[QDOT_ROWS])
{
    for (int r = 0; r < QDOT_ROWS; r++) {
        const block_q8_32 *x = act32(act, stride, r, b);
        __m256i i = dot_u8(q, load32(x->qs));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x->d), _mm256_cvtepi32_ps(i), acc[r]);
        mins[r] += dm * x->s;
    }
}

static void rows_begin(__m256 acc[QDOT_ROWS], float mins[QDOT_ROWS])
{
    for (int r = 0; r < QDOT_ROWS; r++) {
        acc[r] = _mm256_setzero_ps();
        mins[r] = 0.0f;
    }
}

static void dots_q4_0(int k, const void *wv, const void *act, size_t stride, float out[QDOT_ROWS])
{
    const block_q4_0 *w = wv;
    __m256 acc[QDOT_ROWS];
    float unused[QDOT_ROWS];
    rows_begin(acc, unused);
    for (int b = 0; b < k / QK; b++)
        rows_i8(_mm256_sub_epi8(nibbles(w[b].qs), _mm256_set1_epi8(8)), f16(w[b].d), act, stride, b,
                acc);
    for (int r = 0; r < QDOT_ROWS; r++) out[r] = hsum8(acc[r]);
}

static void dots_q5_0(int k, const void *wv, const void *act, size_t stride, float out[QDOT_ROWS])
{
    const block_q5_0 *w = wv;
    __m256 acc[QDOT_ROWS];
    float unused[QDOT_ROWS];
    rows_begin(acc, unused);
    for (int b = 0; b < k / QK; b++) {
        __m256i hi = _mm256_andnot_si256(bits_to_bytes(u32(w[b].qh)), _mm256_set1_epi8((char)0xF0));
        rows_i8(_mm256_or_si256(nibbles(w[b].qs), hi), f16(w[b].d), act, stride, b, acc);
    }
    for (int r = 0; r < QDOT_ROWS; r++) out[r] = hsum8(acc[r]);
}

static void dots_q8_0(int k, const void *wv, const void *act, size_t stride, float out[QDOT_ROWS])
{
    const block_q8_0 *w = wv;
    __m256 acc[QDOT_ROWS];
    float unused[QDOT_ROWS];
    rows_begin(acc, unused);
    for (int b = 0; b < k / QK; b++) rows_i8(load32(w[b].qs), f16(w[b].d), act, stride, b, acc);
    for (int r = 0; r < QDOT_ROWS; r++) out[r] = hsum8(acc[r]);
}

static void dots_q4_1(int k, const void *wv, const void *act, size_t stride, float out[QDOT_ROWS])
{
    const block_q4_1 *w = wv;
    __m256 acc[QDOT_ROWS];
    float mins[QDOT_ROWS];
    rows_begin(acc, mins);
    for (int b = 0; b < k / QK; b++)
        rows_u8(nibbles(w[b].qs), f16(w[b].d), f16(w[b].m), act, stride, b, acc, mins);
    for (int r = 0; r < QDOT_ROWS; r++) out[r] = hsum8(acc[r]) + mins[r];
}

static void dots_q5_1(int k, const void *wv, const void *act, size_t stride, float out[QDOT_ROWS])
{
    const block_q5_1 *w = wv;
    __m256 acc[QDOT_ROWS];
    float mins[QDOT_ROWS];
    rows_begin(acc, mins);
    for (int b = 0; b < k / QK; b++) {
        __m256i hi = _mm256_and_si256(bits_to_bytes(u32(w[b].qh)), _mm256_set1_epi8(0x10));
        rows_u8(_mm256_or_si256(nibbles(w[b].qs), hi), f16(w[b].d), f16(w[b].m), act, stride, b,
                acc, mins);
    }
    for (int r = 0; r < QDOT_ROWS; r++) out[r] = hsum8(acc[r]) + mins[r];
}

static inline void dots_q45_k(int k, const void *wv, const void *act, size_t stride,
                              float out[QDOT_ROWS], int five)
{
    const uint8_t *base = wv;
    size_t bsize = five ? sizeof(block_q5_k) : sizeof(block_q4_k);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[QDOT_ROWS];
    float mins[QDOT_ROWS];
    rows_begin(acc, mins);
    for (int b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = base + (size_t)b * bsize;
        const uint8_t *qs = five ? ((const block_q5_k *)blk)->qs : ((const block_q4_k *)blk)->qs;
        uint8_t sc[8], mn[8];
        k4_scales_mins(blk + 4, sc, mn);
        __m256i hbits = five ? load32(((const block_q5_k *)blk)->qh) : _mm256_setzero_si256();
        __m256i isum[QDOT_ROWS];
        for (int r = 0; r < QDOT_ROWS; r++) isum[r] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i q = load32(qs + 32 * c);
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if (five) {
                __m256i m0 = _mm256_set1_epi8((char)(1 << (2 * c)));
                __m256i m1 = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
                __m256i h0 = _mm256_cmpeq_epi8(_mm256_and_si256(hbits, m0), m0);
                __m256i h1 = _mm256_cmpeq_epi8(_mm256_and_si256(hbits, m1), m1);
                lo = _mm256_or_si256(lo, _mm256_and_si256(h0, _mm256_set1_epi8(0x10)));
                hi = _mm256_or_si256(hi, _mm256_and_si256(h1, _mm256_set1_epi8(0x10)));
            }
            __m256i slo = _mm256_set1_epi16((short)sc[2 * c]);
            __m256i shi = _mm256_set1_epi16((short)sc[2 * c + 1]);
            for (int r = 0; r < QDOT_ROWS; r++) {
                const int8_t *xq = act256(act, stride, r, b)->qs + 64 * c;
                __m256i plo = _mm256_maddubs_epi16(lo, load32(xq));
                __m256i phi = _mm256_maddubs_epi16(hi, load32(xq + 32));
                isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(plo, slo));
                isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(phi, shi));
            }
        }
        float d = f16(blk), dmin = f16(blk + 2);
        for (int r = 0; r < QDOT_ROWS; r++) {
            const block_q8_256 *x = act256(act, stride, r, b);
            int msum = mins_dot(mn, x->bsums);
            float dx = x->d;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(isum[r]), acc[r]);
            mins[r] += dmin * dx * (float)msum;
        }
    }
    for (int r = 0; r < QDOT_ROWS; r++) out[r] = hsum8(acc[r]) - mins[r];
}

static void dots_q4_k(int k, const void *wv, const void *act, size_t stride, float out[QDOT_ROWS])
{
    dots_q45_k(k, wv, act, stride, out, 0);
}

static void dots_q5_k(int k, const void *wv, const void *act, size_t stride, float out[QDOT_ROWS])
{
    dots_q45_k(k, wv, act, stride, out, 1);
}

/* 16-bit scale pairs (lo for the first 16 values, hi for the next 16). */
static __m256i scale_pair(int lo, int hi)
{
    return _mm256_set_m128i(_mm_set1_epi16((short)hi), _mm_set1_epi16((short)lo));
}

static void dots_q6_k(int k, const void *wv, const void *act, size_t stride, float out[QDOT_ROWS])
{
    const block_q6_k *w = wv;
    const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
    __m256 acc[QDOT_ROWS];
    float offsets[QDOT_ROWS];
    rows_begin(acc, offsets);
    for (int b = 0; b < k / QK_K; b++) {
        const int8_t *sc = w[b].scales;
        __m256i isum[QDOT_ROWS];
        for (int r = 0; r < QDOT_ROWS; r++) isum[r] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = load32(w[b].ql + 64 * h), ql1 = load32(w[b].ql + 64 * h + 32);
            __m256i qh = load32(w[b].qh + 32 * h);
            const int8_t *s = sc + 8 * h;
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, two), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4);
            __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4);
            __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4);
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, low4), h0),
                _mm256_or_si256(_mm256_and_si256(ql1, low4), h1),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), h2),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), h3),
            };
            __m256i sp[4] = {scale_pair(s[0], s[1]), scale_pair(s[2], s[3]),
                             scale_pair(s[4], s[5]), scale_pair(s[6], s[7])};
            for (int r = 0; r < QDOT_ROWS; r++) {
                const int8_t *xq = act256(act, stride, r, b)->qs + 128 * h;
                for (int j = 0; j < 4; j++) {
                    __m256i p = _mm256_maddubs_epi16(q[j], load32(xq + 32 * j));
                    isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, sp[j]));
                }
            }
        }
        float dw = f16(w[b].d);
        for (int r = 0; r < QDOT_ROWS; r++) {
            const block_q8_256 *x = act256(act, stride, r, b);
            int offset = scales_bsums_dot(sc, x->bsums);
            float d = dw * x->d;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum[r]), acc[r]);
            offsets[r] += d * (float)(32 * offset);
        }
    }
    for (int r = 0; r < QDOT_ROWS; r++) out[r] = hsum8(acc[r]) - offsets[r];
}

/* ---- dequantization to f32 (the sgemm panels of large batches) ----
 * Bitwise equal to kernels/quant.c: the same products and sums in f32, each
 * rounded on its own (mul then add, never a fused multiply-add). */

/* 32 signed bytes -> scale * q (+ add) into dst[0..31]. */
static void store_scaled(__m256i q, float scale, float add, float *dst)
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    __m256 s = _mm256_set1_ps(scale), a = _mm256_set1_ps(add);
    for (int i = 0; i < 4; i++) {
        __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[i])), s);
        _mm256_storeu_ps(dst + 8 * i, add != 0.0f ? _mm256_add_ps(v, a) : v);
    }
}

static void deq_q4_0(const void *src, float *y, int k)
{
    const block_q4_0 *b = src;
    for (int i = 0; i < k / QK; i++, y += QK)
        store_scaled(_mm256_sub_epi8(nibbles(b[i].qs), _mm256_set1_epi8(8)), f16(b[i].d), 0.0f, y);
}

static void deq_q4_1(const void *src, float *y, int k)
{
    const block_q4_1 *b = src;
    for (int i = 0; i < k / QK; i++, y += QK)
        store_scaled(nibbles(b[i].qs), f16(b[i].d), f16(b[i].m), y);
}

static void deq_q5_0(const void *src, float *y, int k)
{
    const block_q5_0 *b = src;
    for (int i = 0; i < k / QK; i++, y += QK) {
        __m256i hi = _mm256_andnot_si256(bits_to_bytes(u32(b[i].qh)), _mm256_set1_epi8((char)0xF0));
        store_scaled(_mm256_or_si256(nibbles(b[i].qs), hi), f16(b[i].d), 0.0f, y);
    }
}

static void deq_q5_1(const void *src, float *y, int k)
{
    const block_q5_1 *b = src;
    for (int i = 0; i < k / QK; i++, y += QK) {
        __m256i hi = _mm256_and_si256(bits_to_bytes(u32(b[i].qh)), _mm256_set1_epi8(0x10));
        store_scaled(_mm256_or_si256(nibbles(b[i].qs), hi), f16(b[i].d), f16(b[i].m), y);
    }
}

static void deq_q8_0(const void *src, float *y, int k)
{
    const block_q8_0 *b = src;
    for (int i = 0; i < k / QK; i++, y += QK) store_scaled(load32(b[i].qs), f16(b[i].d), 0.0f, y);
}

static void deq_q45_k(const void *src, float *y, int k, int five)
{
    const uint8_t *base = src;
    size_t bsize = five ? sizeof(block_q5_k) : sizeof(block_q4_k);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = base + (size_t)b * bsize;
        const uint8_t *qs = five ? ((const block_q5_k *)blk)->qs : ((const block_q4_k *)blk)->qs;
        __m256i hbits = five ? load32(((const block_q5_k *)blk)->qh) : _mm256_setzero_si256();
        uint8_t sc[8], mn[8];
        k4_scales_mins(blk + 4, sc, mn);
        float d = f16(blk), dmin = f16(blk + 2);
        for (int c = 0; c < 4; c++) {
            __m256i q = load32(qs + 32 * c);
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if (five) {
                __m256i m0 = _mm256_set1_epi8((char)(1 << (2 * c)));
                __m256i m1 = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, m0), m0), _mm256_set1_epi8(0x10)));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, m1), m1), _mm256_set1_epi8(0x10)));
            }
            /* value = (d sc) q - (dmin m): store_scaled adds, so add the negated min */
            store_scaled(lo, d * (float)sc[2 * c], -(dmin * (float)mn[2 * c]), y);
            store_scaled(hi, d * (float)sc[2 * c + 1], -(dmin * (float)mn[2 * c + 1]), y + 32);
            y += 64;
        }
    }
}

static void deq_q4_k(const void *src, float *y, int k)
{
    deq_q45_k(src, y, k, 0);
}

static void deq_q5_k(const void *src, float *y, int k)
{
    deq_q45_k(src, y, k, 1);
}

static void deq_q6_k(const void *src, float *y, int k)
{
    const block_q6_k *w = src;
    const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
    const __m256i off = _mm256_set1_epi8(32);
    for (int b = 0; b < k / QK_K; b++) {
        float d = f16(w[b].d);
        for (int h = 0; h < 2; h++, y += 128) {
            __m256i ql0 = load32(w[b].ql + 64 * h), ql1 = load32(w[b].ql + 64 * h + 32);
            __m256i qh = load32(w[b].qh + 32 * h);
            const int8_t *s = w[b].scales + 8 * h;
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, low4),
                                _mm256_slli_epi16(_mm256_and_si256(qh, two), 4)),
                _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4)),
            };
            for (int i = 0; i < 4; i++) {
                /* 16 values per scale: store the 32 with the first, redo the upper 16 */
                float tmp[32];
                __m256i v = _mm256_sub_epi8(q[i], off);
                store_scaled(v, d * (float)s[2 * i], 0.0f, y + 32 * i);
                store_scaled(v, d * (float)s[2 * i + 1], 0.0f, tmp);
                memcpy(y + 32 * i + 16, tmp + 16, 16 * sizeof(float));
            }
        }
    }
}

static void deq_f16(const void *src, float *y, int k)
{
    const uint8_t *w = src;
    int i = 0;
    for (; i + 8 <= k; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))));
    for (; i < k; i++) y[i] = f16(w + 2 * i);
}

qdeq_fn qdeq_avx2(enum weight_type t)
{
    switch (t) {
    case WEIGHT_F16: return deq_f16;
    case WEIGHT_Q4_0: return deq_q4_0;
    case WEIGHT_Q4_1: return deq_q4_1;
    case WEIGHT_Q5_0: return deq_q5_0;
    case WEIGHT_Q5_1: return deq_q5_1;
    case WEIGHT_Q8_0: return deq_q8_0;
    case WEIGHT_Q4_K: return deq_q4_k;
    case WEIGHT_Q5_K: return deq_q5_k;
    case WEIGHT_Q6_K: return deq_q6_k;
    default: return NULL;
    }
}

#pragma GCC pop_options

qdot_rows_fn qdot_rows_avx2(enum weight_type t)
{
    switch (t) {
    case WEIGHT_Q4_0: return dots_q4_0;
    case WEIGHT_Q4_1: return dots_q4_1;
    case WEIGHT_Q5_0: return dots_q5_0;
    case WEIGHT_Q5_1: return dots_q5_1;
    case WEIGHT_Q8_0: return dots_q8_0;
    case WEIGHT_Q4_K: return dots_q4_k;
    case WEIGHT_Q5_K: return dots_q5_k;
    case WEIGHT_Q6_K: return dots_q6_k;
    default: return NULL;
    }
}

qdot_fn qdot_avx2(enum weight_type t)
{
    switch (t) {
    case WEIGHT_F32: return dot_f32;
    case WEIGHT_F16: return dot_f16;
    case WEIGHT_BF16: return dot_bf16;
    case WEIGHT_Q4_0: return dot_q4_0;
    case WEIGHT_Q4_1: return dot_q4_1;
    case WEIGHT_Q5_0: return dot_q5_0;
    case WEIGHT_Q5_1: return dot_q5_1;
    case WEIGHT_Q8_0: return dot_q8_0;
    case WEIGHT_Q4_K: return dot_q4_k;
    case WEIGHT_Q5_K: return dot_q5_k;
    case WEIGHT_Q6_K: return dot_q6_k;
    }
    return NULL;
}

#else

qdot_fn qdot_avx2(enum weight_type t)
{
    (void)t;
    return NULL;
}

qdot_rows_fn qdot_rows_avx2(enum weight_type t)
{
    (void)t;
    return NULL;
}

qdeq_fn qdeq_avx2(enum weight_type t)
{
    (void)t;
    return NULL;
}

#endif

qdot_rows_fn qdot_rows_for(enum weight_type t, enum cpu_simd level)
{
    return level == CPU_SIMD_AVX2 ? qdot_rows_avx2(t) : NULL;
}
