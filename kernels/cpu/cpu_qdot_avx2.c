/* cpu_qdot_avx2.c - AVX2/FMA/F16C dot kernels (placeholder: filled next). */
#include "kernels/cpu/cpu_qdot.h"

qdot_fn qdot_avx2(enum weight_type t)
{
    (void)t;
    return NULL;
}
