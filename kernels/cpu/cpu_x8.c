/* cpu_x8.c - which weight types the AVX2 matmul keeps 8 rows interleaved. */
#include "kernels/cpu/cpu_qdot.h"

#include "kernels/quant_blocks.h"

#if defined(__x86_64__)

static const struct x8_kernels q4k = {sizeof(block_q4_k_x8), q4k_x8_pack, q4k_x8_block,
                                      q4k_x8_dot_avx2, q4k_x8_dots_avx2};
static const struct x8_kernels q6k = {sizeof(block_q6_k_x8), q6k_x8_pack, q6k_x8_block,
                                      q6k_x8_dot_avx2, q6k_x8_dots_avx2};

const struct x8_kernels *x8_kernels_for(enum weight_type t)
{
    switch (t) {
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
