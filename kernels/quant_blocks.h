/* quant_blocks.h - ggml's block layouts, for the files of kernels/ that read
 * quantized weights (not a public header).
 *
 * Block structs hold every field as bytes (fp16 values as uint8_t[2]) so a
 * block may sit at any address: GGUF data is only as aligned as the file says.
 * Sizes are pinned by the static asserts below. */
#ifndef EB_QUANT_BLOCKS_H
#define EB_QUANT_BLOCKS_H

#include <stdint.h>

#define QK 32   /* elements per block of the 32-element formats */
#define QK_K 256 /* elements per super-block of the K-quants */

typedef struct { uint8_t d[2]; uint8_t qs[QK / 2]; } block_q4_0;
typedef struct { uint8_t d[2]; uint8_t m[2]; uint8_t qs[QK / 2]; } block_q4_1;
typedef struct { uint8_t d[2]; uint8_t qh[4]; uint8_t qs[QK / 2]; } block_q5_0;
typedef struct { uint8_t d[2]; uint8_t m[2]; uint8_t qh[4]; uint8_t qs[QK / 2]; } block_q5_1;
typedef struct { uint8_t d[2]; int8_t qs[QK]; } block_q8_0;
typedef struct {
    uint8_t d[2], dmin[2];
    uint8_t scales[12];  /* 8 x (6-bit scale, 6-bit min), packed */
    uint8_t qs[QK_K / 2];
} block_q4_k;
typedef struct {
    uint8_t d[2], dmin[2];
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_k;
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint8_t d[2];        /* d is last in Q6_K */
} block_q6_k;

/* 8 rows of Q4_K, super-block b of each, interleaved for the AVX2 matmul
 * (cpu_q4k_x8.c): per-row f16 scales side by side, the 6-bit sub-block
 * scales and mins unpacked (mins in pairs of sub-blocks, as madd wants them),
 * and the quants 4 bytes of each row in turn: qs[c][t][r] holds row r's
 * qs[32c + 4t .. 32c + 4t + 3]. */
typedef struct {
    uint8_t d[8][2], dmin[8][2];
    uint8_t sc[8][8];     /* [sub-block][row] */
    uint8_t mn[4][8][2];  /* [sub-block pair][row][which of the pair] */
    uint8_t qs[4][8][8][4];
} block_q4_k_x8;

/* 8 rows of Q6_K, super-block b of each (cpu_q6k_x8.c): f16 scales side by
 * side, the int8 sub-block scales in pairs, and for half h and 4-byte group
 * t the runs ql[64h + 4t..], ql[64h + 32 + 4t..] and qh[32h + 4t..] of
 * each row in turn: q[h][t][0..2][r]. */
typedef struct {
    uint8_t d[8][2];
    int8_t sc[8][8][2];   /* [sub-block pair][row][which of the pair] */
    uint8_t q[2][8][3][8][4];
} block_q6_k_x8;

_Static_assert(sizeof(block_q4_k_x8) == 8 * 148, "block_q4_k_x8 size");
_Static_assert(sizeof(block_q6_k_x8) == 8 * 210, "block_q6_k_x8 size");
/* The 8 six-bit scales and mins of a Q4_K/Q5_K super-block's 12 packed
 * bytes: scales and mins 0-3 are the low 6 bits of bytes 0-3 and 4-7; 4-7
 * take their low 4 bits from the nibbles of bytes 8-11 and their top 2 bits
 * from the top bits of bytes 0-3 and 4-7.  The one decoder every reader of
 * these blocks uses (dequantization, dot kernels, repacking). */
static inline void k4_scales_mins(const uint8_t s[12], uint8_t sc[8], uint8_t mn[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0x0F) | ((s[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
_Static_assert(sizeof(block_q4_k) == 144, "block_q4_k size");
_Static_assert(sizeof(block_q5_k) == 176, "block_q5_k size");
_Static_assert(sizeof(block_q6_k) == 210, "block_q6_k size");


/* Activations quantized to 8 bits for the integer dot products:
 * q8_32 pairs with the 32-element formats (one f32 scale per 32 values plus
 * the block sum d*sum(q), used by the formats with a min), q8_256 with the
 * k-quants (one scale per 256 values and the sum of every 16 quants). */
typedef struct { float d, s; int8_t qs[QK]; } block_q8_32;
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_256;

#endif
