/* quant.c - ggml tensor types: sizes, f16/bf16 conversion and dequantization.
 *
 * Block structs hold every field as bytes (fp16 values as uint8_t[2]) so a
 * block may sit at any address: GGUF data is only as aligned as the file says,
 * and a memory buffer handed to gguf_open_memory may not be aligned at all.
 * Multi-byte fields are read little-endian with the helpers below.
 *
 * Rounding follows the gguf Python package's dequantizers exactly: scales are
 * converted to f32, products like d*sc are rounded to f32 before they multiply
 * the quant, and "d*q + m" is a product rounded to f32 and then a sum.  Each
 * step is its own statement so a compiler that contracts a*b+c into a fused
 * multiply-add within one expression cannot change the result. */
#include "kernels/quant.h"

#include <string.h>

#include "kernels/backend.h"
#include "kernels/quant_blocks.h"

struct type_info {
    const char *name;
    int block_elems;     /* 0: no such type */
    int block_bytes;
    int supported;       /* dequantized by this file */
};

/* Sizes of every type a GGUF file may name, so the reader can validate and
 * describe tensors it cannot dequantize.  Q8_1 is ggml's current 36-byte block. */
static const struct type_info types[QUANT_TYPE_COUNT] = {
    [0] = {"F32", 1, 4, 1},        [1] = {"F16", 1, 2, 1},
    [2] = {"Q4_0", 32, 18, 1},     [3] = {"Q4_1", 32, 20, 1},
    [6] = {"Q5_0", 32, 22, 1},     [7] = {"Q5_1", 32, 24, 1},
    [8] = {"Q8_0", 32, 34, 1},     [9] = {"Q8_1", 32, 36, 0},
    [10] = {"Q2_K", 256, 84, 0},   [11] = {"Q3_K", 256, 110, 0},
    [12] = {"Q4_K", 256, 144, 1},  [13] = {"Q5_K", 256, 176, 1},
    [14] = {"Q6_K", 256, 210, 1},  [15] = {"Q8_K", 256, 292, 0},
    [16] = {"IQ2_XXS", 256, 66, 0}, [17] = {"IQ2_XS", 256, 74, 0},
    [18] = {"IQ3_XXS", 256, 98, 0}, [19] = {"IQ1_S", 256, 50, 0},
    [20] = {"IQ4_NL", 32, 18, 0},  [21] = {"IQ3_S", 256, 110, 0},
    [22] = {"IQ2_S", 256, 82, 0},  [23] = {"IQ4_XS", 256, 136, 0},
    [24] = {"I8", 1, 1, 0},        [25] = {"I16", 1, 2, 0},
    [26] = {"I32", 1, 4, 0},       [27] = {"I64", 1, 8, 0},
    [28] = {"F64", 1, 8, 0},       [29] = {"IQ1_M", 256, 56, 0},
    [30] = {"BF16", 1, 2, 1},      [34] = {"TQ1_0", 256, 54, 0},
    [35] = {"TQ2_0", 256, 66, 0},  [39] = {"MXFP4", 32, 17, 0},
};

static const struct type_info *type_get(int type)
{
    if (type < 0 || type >= QUANT_TYPE_COUNT || types[type].block_elems == 0) return NULL;
    return &types[type];
}

const char *quant_type_name(int type)
{
    const struct type_info *t = type_get(type);
    return t ? t->name : "?";
}

int quant_type_supported(int type)
{
    const struct type_info *t = type_get(type);
    return t ? t->supported : 0;
}

int quant_block_elems(int type)
{
    const struct type_info *t = type_get(type);
    return t ? t->block_elems : 0;
}

size_t quant_block_bytes(int type)
{
    const struct type_info *t = type_get(type);
    return t ? (size_t)t->block_bytes : 0;
}

size_t quant_row_bytes(int type, int64_t n)
{
    const struct type_info *t = type_get(type);
    if (!t || n < 0 || n % t->block_elems != 0) return 0;
    uint64_t blocks = (uint64_t)n / (uint64_t)t->block_elems;
    if (blocks > SIZE_MAX / (size_t)t->block_bytes) return 0;
    return (size_t)blocks * (size_t)t->block_bytes;
}

/* ---- half and bfloat16 ---- */

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F)                       /* inf / nan: keep the payload */
        return f32_from_bits(sign | 0x7F800000u | (man << 13));
    if (exp != 0)                          /* normal: rebias 15 -> 127 */
        return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0) return f32_from_bits(sign);
    /* subnormal: man * 2^-24, renormalized into an f32 normal */
    int e = 113;                           /* 127 - 14 */
    while (!(man & 0x400)) { man <<= 1; e--; }
    return f32_from_bits(sign | ((uint32_t)e << 23) | ((man & 0x3FF) << 13));
}

uint16_t quant_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t exp = (u >> 23) & 0xFF;
    uint32_t man = u & 0x7FFFFF;
    if (exp == 0xFF) {                     /* inf, or nan kept quiet */
        if (man == 0) return sign | 0x7C00;
        return sign | 0x7E00 | (uint16_t)(man >> 13);
    }
    int e = (int)exp - 127 + 15;           /* half exponent field, before rounding */
    if (e >= 31) return sign | 0x7C00;     /* too large: inf */
    uint32_t mant;                         /* 24-bit significand with the implicit 1 */
    int shift;                             /* bits to drop to reach the half's 10 */
    if (e >= 1) {
        mant = man | 0x800000;
        shift = 13;
    } else {                               /* half subnormal (or underflow to zero) */
        if (e < -10) return sign;          /* below half of the smallest subnormal */
        mant = man | 0x800000;
        shift = 14 - e;
        e = 0;
    }
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++; /* round to nearest even */
    /* q may carry into the exponent; adding works because the fields are adjacent */
    uint32_t bits = e >= 1 ? ((uint32_t)e << 10) + (q - 0x400) : q;
    if (bits >= 0x7C00) return sign | 0x7C00;
    return sign | (uint16_t)bits;
}

float quant_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t quant_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1);        /* round to nearest even; inf stays inf */
    return (uint16_t)(u >> 16);
}

static float rd_f16(const uint8_t *p)
{
    return quant_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

/* ---- dequantizers, one per type; nb = number of blocks ---- */

static void deq_f32(const uint8_t *src, float *y, int64_t n)
{
    memcpy(y, src, (size_t)n * sizeof(float));
}

static void deq_f16(const uint8_t *src, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = rd_f16(src + 2 * i);
}

static void deq_bf16(const uint8_t *src, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = quant_bf16_to_f32((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
}

static void deq_q8_0(const block_q8_0 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rd_f16(b[i].d);
        for (int j = 0; j < QK; j++) y[j] = d * (float)b[i].qs[j];
    }
}

static void deq_q4_0(const block_q4_0 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rd_f16(b[i].d);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = d * (float)((b[i].qs[j] & 0xF) - 8);
            y[j + QK / 2] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

static void deq_q4_1(const block_q4_1 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rd_f16(b[i].d), m = rd_f16(b[i].m);
        for (int j = 0; j < QK / 2; j++) {
            float lo = d * (float)(b[i].qs[j] & 0xF);
            float hi = d * (float)(b[i].qs[j] >> 4);
            y[j] = lo + m;
            y[j + QK / 2] = hi + m;
        }
    }
}

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void deq_q5_0(const block_q5_0 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rd_f16(b[i].d);
        uint32_t qh = rd_u32(b[i].qh);
        for (int j = 0; j < QK / 2; j++) {
            int lo = (b[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int hi = (b[i].qs[j] >> 4) | (int)((qh >> (j + QK / 2)) & 1) << 4;
            y[j] = d * (float)(lo - 16);
            y[j + QK / 2] = d * (float)(hi - 16);
        }
    }
}

static void deq_q5_1(const block_q5_1 *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rd_f16(b[i].d), m = rd_f16(b[i].m);
        uint32_t qh = rd_u32(b[i].qh);
        for (int j = 0; j < QK / 2; j++) {
            int lo = (b[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int hi = (b[i].qs[j] >> 4) | (int)((qh >> (j + QK / 2)) & 1) << 4;
            float a = d * (float)lo, c = d * (float)hi;
            y[j] = a + m;
            y[j + QK / 2] = c + m;
        }
    }
}

static void deq_q4_k(const block_q4_k *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = rd_f16(b[i].d), dmin = rd_f16(b[i].dmin);
        const uint8_t *q = b[i].qs;
        uint8_t sc[8], mn[8];
        k4_scales_mins(b[i].scales, sc, mn);
        for (int c = 0; c < 4; c++, q += 32) {      /* 4 chunks of 64 values */
            float d1 = d * (float)sc[2 * c], m1 = dmin * (float)mn[2 * c];
            float d2 = d * (float)sc[2 * c + 1], m2 = dmin * (float)mn[2 * c + 1];
            for (int l = 0; l < 32; l++) {
                float v = d1 * (float)(q[l] & 0xF);
                *y++ = v - m1;
            }
            for (int l = 0; l < 32; l++) {
                float v = d2 * (float)(q[l] >> 4);
                *y++ = v - m2;
            }
        }
    }
}

static void deq_q5_k(const block_q5_k *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = rd_f16(b[i].d), dmin = rd_f16(b[i].dmin);
        const uint8_t *q = b[i].qs, *qh = b[i].qh;
        uint8_t sc[8], mn[8];
        k4_scales_mins(b[i].scales, sc, mn);
        for (int c = 0; c < 4; c++, q += 32) {
            float d1 = d * (float)sc[2 * c], m1 = dmin * (float)mn[2 * c];
            float d2 = d * (float)sc[2 * c + 1], m2 = dmin * (float)mn[2 * c + 1];
            for (int l = 0; l < 32; l++) {
                int v = (q[l] & 0xF) + (((qh[l] >> (2 * c)) & 1) << 4);
                float t = d1 * (float)v;
                *y++ = t - m1;
            }
            for (int l = 0; l < 32; l++) {
                int v = (q[l] >> 4) + (((qh[l] >> (2 * c + 1)) & 1) << 4);
                float t = d2 * (float)v;
                *y++ = t - m2;
            }
        }
    }
}

static void deq_q6_k(const block_q6_k *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = rd_f16(b[i].d);
        for (int h = 0; h < 2; h++, y += 128) {     /* two halves of 128 values */
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                float s1 = d * (float)sc[is + 0], s2 = d * (float)sc[is + 2];
                float s3 = d * (float)sc[is + 4], s4 = d * (float)sc[is + 6];
                y[l] = s1 * (float)q1;
                y[l + 32] = s2 * (float)q2;
                y[l + 64] = s3 * (float)q3;
                y[l + 96] = s4 * (float)q4;
            }
        }
    }
}

int quant_dequantize(int type, const void *src, float *dst, int64_t n)
{
    const struct type_info *t = type_get(type);
    if (!t || !t->supported || n < 0 || n % t->block_elems != 0) return -1;
    int64_t nb = n / t->block_elems;
    const uint8_t *s = src;
    switch (type) {
    case WEIGHT_F32: deq_f32(s, dst, n); break;
    case WEIGHT_F16: deq_f16(s, dst, n); break;
    case WEIGHT_BF16: deq_bf16(s, dst, n); break;
    case WEIGHT_Q8_0: deq_q8_0((const block_q8_0 *)src, dst, nb); break;
    case WEIGHT_Q4_0: deq_q4_0((const block_q4_0 *)src, dst, nb); break;
    case WEIGHT_Q4_1: deq_q4_1((const block_q4_1 *)src, dst, nb); break;
    case WEIGHT_Q5_0: deq_q5_0((const block_q5_0 *)src, dst, nb); break;
    case WEIGHT_Q5_1: deq_q5_1((const block_q5_1 *)src, dst, nb); break;
    case WEIGHT_Q4_K: deq_q4_k((const block_q4_k *)src, dst, nb); break;
    case WEIGHT_Q5_K: deq_q5_k((const block_q5_k *)src, dst, nb); break;
    case WEIGHT_Q6_K: deq_q6_k((const block_q6_k *)src, dst, nb); break;
    default: return -1;
    }
    return 0;
}
