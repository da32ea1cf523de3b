/* cpu_qdot.h - dot products of a weight row in its stored type with an
 * activation row, for the CPU backend's matmul (not a public header).
 *
 * Quantized weights meet activations quantized per block to 8 bits (as
 * llama.cpp does): the 32-element formats (Q4_0 .. Q8_0) pair with
 * block_q8_32, the k-quants (Q4_K, Q5_K, Q6_K) with block_q8_256; the products
 * are then integer sums scaled once per block.  F16 and BF16 weights meet
 * the f32 activations directly (f32 accumulation).
 *
 * Every type has a scalar kernel and an AVX2 one; which runs is chosen once
 * from CPUID (cpu_simd_level), and tests call both. */
#ifndef EB_CPU_QDOT_H
#define EB_CPU_QDOT_H

#include <stddef.h>

#include "kernels/backend.h"

enum cpu_simd { CPU_SIMD_SCALAR = 0, CPU_SIMD_AVX2 = 1 };

/* What this CPU runs, capped by EVICTBENCH_CPU_SIMD=scalar|avx2 when set. */
enum cpu_simd cpu_simd_level(void);
const char *cpu_simd_name(enum cpu_simd s);

/* How a type's activation row is prepared. */
enum qact_kind {
    QACT_F32 = 0,   /* f32 as is (F16, BF16, F32 weights) */
    QACT_Q8_32 = 1, /* block_q8_32 per 32 values */
    QACT_Q8_256 = 2 /* block_q8_256 per 256 values */
};

/* -1 when the type has no dot kernel. */
int qact_kind_of(enum weight_type t);
/* Bytes of one prepared activation row of k values (k a multiple of the block). */
size_t qact_row_bytes(enum qact_kind kind, int k);
/* Quantize x[k] into a prepared row (no-op copy for QACT_F32), with the
 * AVX2 code where this CPU runs it (cpu_qact_avx2.c: bitwise the scalar
 * result for finite x); _at: at a given level, for tests. */
void qact_quantize_row(enum qact_kind kind, const float *x, void *out, int k);
void qact_quantize_row_at(enum qact_kind kind, const float *x, void *out, int k,
                          enum cpu_simd level);
void qact_q8_32_avx2(const float *x, void *out, int k);
void qact_q8_256_avx2(const float *x, void *out, int k);

/* The f32 values a prepared row stands for (d * q per value). */
void qact_dequantize_row(enum qact_kind kind, const void *act, float *out, int k);

/* Dot of one weight row (k values of type t) with one prepared activation
 * row.  NULL when the type has no kernel at this level. */
typedef float (*qdot_fn)(int k, const void *w_row, const void *act_row);
qdot_fn qdot_scalar(enum weight_type t);
qdot_fn qdot_avx2(enum weight_type t);
qdot_fn qdot_for(enum weight_type t, enum cpu_simd level);

/* Dots of one weight row with QDOT_ROWS prepared activation rows (row i at
 * act + i * act_stride): the weight blocks are unpacked once for all rows,
 * which is what makes batched decode cheaper than QDOT_ROWS single dots.
 * out[i] is bitwise the 1-row kernel's result for row i (the same float
 * operations in the same order; only exact integer sums are shared).  NULL
 * when the type has no such kernel at this level (use the 1-row kernel). */
enum { QDOT_ROWS = 4 };
typedef void (*qdot_rows_fn)(int k, const void *w_row, const void *act, size_t act_stride,
                             float out[QDOT_ROWS]);
qdot_rows_fn qdot_rows_avx2(enum weight_type t);
qdot_rows_fn qdot_rows_for(enum weight_type t, enum cpu_simd level);

/* Weights with 8 rows interleaved (block_q4_k_x8, block_q6_k_x8 and the
 * 32-element formats: cpu_q4k_x8.c, cpu_q6k_x8.c, cpu_q32_x8.c), the layout
 * the AVX2 matmul keeps Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K and Q6_K weights in when the
 * row count is a multiple of 8.
 *  pack:  8 rows of nblocks blocks (row r at rows8 + r * row_bytes) into
 *         nblocks interleaved blocks;
 *  block: row r's block b back, bit for bit;
 *  dot:   out[r] = row r of the group . one prepared (q8_256) activation row;
 *  dots:  the same for QDOT_ROWS activation rows (row i at act + i *
 *         stride), bitwise equal to QDOT_ROWS dot calls;
 *  dots_pair: dots for two neighbouring groups at once (the second gb
 *         bytes after the first): out[i][0..7] the first group's rows,
 *         out[i][8..15] the second's, bitwise equal to two dots calls; NULL
 *         where the set has none (the AVX2 set, the 32-element types). */
struct x8_kernels {
    size_t block_bytes; /* one interleaved block: 8 rows x block_elems values */
    int block_elems;    /* values per row in a block: 32 or 256 */
    void (*pack)(const void *rows8, size_t row_bytes, int nblocks, void *out);
    void (*block)(const void *group, int b, int r, void *out);
    void (*dot)(int k, const void *group, const void *act, float out[8]);
    void (*dots)(int k, const void *group, const void *act, size_t stride,
                 float out[QDOT_ROWS][8]);
    void (*dots_pair)(int k, const void *group, size_t gb, const void *act, size_t stride,
                      float out[QDOT_ROWS][16]);
};
/* NULL when the type has no interleaved kernels (or this is not x86-64).
 * _for: the set this CPU runs (cpu_x8.c); _avx2 and _avx512vl: each set by
 * name, for tests (_avx512vl NULL where the CPU lacks AVX-512F/VL/BW or VNNI). */
const struct x8_kernels *x8_kernels_for(enum weight_type t);
const struct x8_kernels *x8_kernels_avx2(enum weight_type t);
const struct x8_kernels *x8_kernels_avx512vl(enum weight_type t);
int x8_wide_supported(void);
void q4k_x8_dot_vnni(int k, const void *group, const void *act, float out[8]);
void q4k_x8_dots_vnni(int k, const void *group, const void *act, size_t stride,
                      float out[QDOT_ROWS][8]);
void q4k_x8_dots_pair_vnni(int k, const void *group, size_t gb, const void *act, size_t stride,
                           float out[QDOT_ROWS][16]);
void q6k_x8_dots_pair_vnni(int k, const void *group, size_t gb, const void *act, size_t stride,
                           float out[QDOT_ROWS][16]);
void q6k_x8_dot_vnni(int k, const void *group, const void *act, float out[8]);
void q6k_x8_dots_vnni(int k, const void *group, const void *act, size_t stride,
                      float out[QDOT_ROWS][8]);

void q4k_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out);
void q4k_x8_block(const void *group, int b, int r, void *out);
void q4k_x8_dot_avx2(int k, const void *group, const void *act, float out[8]);
void q4k_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                      float out[QDOT_ROWS][8]);
void q6k_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out);
void q6k_x8_block(const void *group, int b, int r, void *out);
void q6k_x8_dot_avx2(int k, const void *group, const void *act, float out[8]);
void q6k_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                      float out[QDOT_ROWS][8]);
void q4_0_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out);
void q4_1_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out);
void q5_0_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out);
void q5_1_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out);
void q8_0_x8_pack(const void *rows8, size_t row_bytes, int nblocks, void *out);
void q4_0_x8_block(const void *group, int b, int r, void *out);
void q4_1_x8_block(const void *group, int b, int r, void *out);
void q5_0_x8_block(const void *group, int b, int r, void *out);
void q5_1_x8_block(const void *group, int b, int r, void *out);
void q8_0_x8_block(const void *group, int b, int r, void *out);
void q4_0_x8_dot_avx2(int k, const void *group, const void *act, float out[8]);
void q4_1_x8_dot_avx2(int k, const void *group, const void *act, float out[8]);
void q5_0_x8_dot_avx2(int k, const void *group, const void *act, float out[8]);
void q5_1_x8_dot_avx2(int k, const void *group, const void *act, float out[8]);
void q8_0_x8_dot_avx2(int k, const void *group, const void *act, float out[8]);
void q4_0_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8]);
void q4_1_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8]);
void q5_0_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8]);
void q5_1_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8]);
void q8_0_x8_dots_avx2(int k, const void *group, const void *act, size_t stride,
                       float out[QDOT_ROWS][8]);
void q4k_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                           float out[QDOT_ROWS][8]);
void q6k_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                           float out[QDOT_ROWS][8]);
void q4_0_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                            float out[QDOT_ROWS][8]);
void q4_1_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                            float out[QDOT_ROWS][8]);
void q5_0_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                            float out[QDOT_ROWS][8]);
void q5_1_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                            float out[QDOT_ROWS][8]);
void q8_0_x8_dots_avx512vl(int k, const void *group, const void *act, size_t stride,
                            float out[QDOT_ROWS][8]);

/* Dequantize one row of k values of type t to f32, bitwise as
 * quant_dequantize does; NULL when there is no SIMD version (use
 * quant_dequantize). */
typedef void (*qdeq_fn)(const void *w_row, float *out, int k);
qdeq_fn qdeq_avx2(enum weight_type t);

#endif
