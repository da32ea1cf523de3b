/* cpu_x8.c - which weight types the AVX2 matmul keeps 8 rows interleaved, and
 * which of their kernels run here.
 *
 * Two sets share the layout: the AVX2 set takes QDOT_ROWS activation rows two
 * at a time (16 vector registers); the wide set all four at once in
 * AVX-512VL's 32 registers, summing with AVX-512 VNNI's vpdpbusd (and its
 * 1-row Q4_K / Q6_K kernels too), and for Q4_K / Q6_K also two groups (16
 * weight rows) at once in 512-bit vectors (dots_pair).  Both compute the same integers and then
 * the same float operations, so they give the same bits.  The wide set runs
 * where the CPU has AVX-512F/VL/BW and VNNI and EVICTBENCH_CPU_SIMD does not
 * cap the level at avx2 (or scalar). */
#include "kernels/cpu/cpu_qdot.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/quant_blocks.h"

#if defined(__x86_64__)

static const struct x8_kernels q4k = {sizeof(block_q4_k_x8), QK_K, q4k_x8_pack, q4k_x8_block,
                                      q4k_x8_dot_avx2, q4k_x8_dots_avx2, NULL};
static const struct x8_kernels q6k = {sizeof(block_q6_k_x8), QK_K, q6k_x8_pack, q6k_x8_block,
                                      q6k_x8_dot_avx2, q6k_x8_dots_avx2, NULL};
static const struct x8_kernels q4_0 = {8 * sizeof(block_q4_0), QK, q4_0_x8_pack, q4_0_x8_block,
                                       q4_0_x8_dot_avx2, q4_0_x8_dots_avx2, NULL};
static const struct x8_kernels q4_1 = {8 * sizeof(block_q4_1), QK, q4_1_x8_pack, q4_1_x8_block,
                                       q4_1_x8_dot_avx2, q4_1_x8_dots_avx2, NULL};
static const struct x8_kernels q5_0 = {8 * sizeof(block_q5_0), QK, q5_0_x8_pack, q5_0_x8_block,
                                       q5_0_x8_dot_avx2, q5_0_x8_dots_avx2, NULL};
static const struct x8_kernels q5_1 = {8 * sizeof(block_q5_1), QK, q5_1_x8_pack, q5_1_x8_block,
                                       q5_1_x8_dot_avx2, q5_1_x8_dots_avx2, NULL};
static const struct x8_kernels q8_0 = {8 * sizeof(block_q8_0), QK, q8_0_x8_pack, q8_0_x8_block,
                                       q8_0_x8_dot_avx2, q8_0_x8_dots_avx2, NULL};

static const struct x8_kernels q4k_w = {sizeof(block_q4_k_x8), QK_K, q4k_x8_pack, q4k_x8_block,
                                        q4k_x8_dot_vnni, q4k_x8_dots_vnni,
                                        q4k_x8_dots_pair_vnni};
static const struct x8_kernels q6k_w = {sizeof(block_q6_k_x8), QK_K, q6k_x8_pack, q6k_x8_block,
                                        q6k_x8_dot_vnni, q6k_x8_dots_vnni,
                                        q6k_x8_dots_pair_vnni};
static const struct x8_kernels q4_0_w = {8 * sizeof(block_q4_0), QK, q4_0_x8_pack, q4_0_x8_block,
                                         q4_0_x8_dot_avx2, q4_0_x8_dots_avx512vl, NULL};
static const struct x8_kernels q4_1_w = {8 * sizeof(block_q4_1), QK, q4_1_x8_pack, q4_1_x8_block,
                                         q4_1_x8_dot_avx2, q4_1_x8_dots_avx512vl, NULL};
static const struct x8_kernels q5_0_w = {8 * sizeof(block_q5_0), QK, q5_0_x8_pack, q5_0_x8_block,
                                         q5_0_x8_dot_avx2, q5_0_x8_dots_avx512vl, NULL};
static const struct x8_kernels q5_1_w = {8 * sizeof(block_q5_1), QK, q5_1_x8_pack, q5_1_x8_block,
                                         q5_1_x8_dot_avx2, q5_1_x8_dots_avx512vl, NULL};
static const struct x8_kernels q8_0_w = {8 * sizeof(block_q8_0), QK, q8_0_x8_pack, q8_0_x8_block,
                                         q8_0_x8_dot_avx2, q8_0_x8_dots_avx512vl, NULL};

const struct x8_kernels *x8_kernels_avx2(enum weight_type t)
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

const struct x8_kernels *x8_kernels_avx512vl(enum weight_type t)
{
    if (!x8_wide_supported()) return NULL;
    switch (t) {
    case WEIGHT_Q4_0: return &q4_0_w;
    case WEIGHT_Q4_1: return &q4_1_w;
    case WEIGHT_Q5_0: return &q5_0_w;
    case WEIGHT_Q5_1: return &q5_1_w;
    case WEIGHT_Q8_0: return &q8_0_w;
    case WEIGHT_Q4_K: return &q4k_w;
    case WEIGHT_Q6_K: return &q6k_w;
    default: return NULL;
    }
}

int x8_wide_supported(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
}

/* Read once: the matmul asks per call. */
static int wide_allowed(void)
{
    static _Atomic int allowed = -1;
    if (allowed < 0) {
        const char *cap = getenv("EVICTBENCH_CPU_SIMD");
        allowed = x8_wide_supported() &&
                  !(cap && (strcmp(cap, "avx2") == 0 || strcmp(cap, "scalar") == 0));
    }
    return allowed;
}

const struct x8_kernels *x8_kernels_for(enum weight_type t)
{
    return wide_allowed() ? x8_kernels_avx512vl(t) : x8_kernels_avx2(t);
}

#else

const struct x8_kernels *x8_kernels_for(enum weight_type t)
{
    (void)t;
    return NULL;
}

const struct x8_kernels *x8_kernels_avx2(enum weight_type t)
{
    (void)t;
    return NULL;
}

const struct x8_kernels *x8_kernels_avx512vl(enum weight_type t)
{
    (void)t;
    return NULL;
}

int x8_wide_supported(void)
{
    return 0;
}

#endif
