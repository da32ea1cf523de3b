/* cpu_x8.c - which weight types the AVX2 matmul keeps 8 rows interleaved. */
#include "kernels/cpu/cpu_qdot.h"

#include "kernels/quant_blocks.h"

#if defined(__x86_64__)

static const struct x8_kernels q4k = {sizeof(block_q4_k_x8), QK_K, q4k_x8_pack, q4k_x8_block,
                                      q4k_x8_dot_avx2, q4k_x8_dots_avx2};
static const struct x8_kernels q6k = {sizeof(block_q6_k_x8), QK_K, q6k_x8_pack, q6k_x8_block,
                                      q6k_x8_dot_avx2, q6k_x8_dots_avx2};
static const struct x8_kernels q4_0 = {8 * sizeof(block_q4_0), QK, q4_0_x8_pack, q4_0_x8_block,
                                       q4_0_x8_dot_avx2, q4_0_x8_dots_avx2};
static const struct x8_kernels q4_1 = {8 * sizeof(block_q4_1), QK, q4_1_x8_pack, q4_1_x8_block,
                                       q4_1_x8_dot_avx2, q4_1_x8_dots_avx2};
static const struct x8_kernels q5_0 = {8 * sizeof(block_q5_0), QK, q5_0_x8_pack, q5_0_x8_block,
                                       q5_0_x8_dot_avx2, q5_0_x8_dots_avx2};
static const struct x8_kernels q5_1 = {8 * sizeof(block_q5_1), QK, q5_1_x8_pack, q5_1_x8_block,
                                       q5_1_x8_dot_avx2, q5_1_x8_dots_avx2};
static const struct x8_kernels q8_0 = {8 * sizeof(block_q8_0), QK, q8_0_x8_pack, q8_0_x8_block,
                                       q8_0_x8_dot_avx2, q8_0_x8_dots_avx2};

const struct x8_kernels *x8_kernels_for(enum weight_type t)
{
    switch (t) {
    case WEIGHT_Q4_0: return &q4_0;
    case WEIGHT_Q4_1: return &q4_1;
    case WEIGHT_Q5_0: return &q5_0;
    case WEIGHT_Q5_1: return &q5_1;
    case WEIGHT_Q8_0: return &q8_0;
    case WEIGHT_Q4_K: return &q4k;
    case WEIGHT_Q6_K: return &q6k;
    default: return NULL;
    }
}

#else

const struct x8_kernels *x8_kernels_for(enum weight_type t)
{
    (void)t;
    return NULL;
}

#endif
