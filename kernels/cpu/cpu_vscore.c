/* cpu_vscore.c - value-aware scoring primitives (VaSE's value range). */
#include "kernels/cpu/cpu_ops.h"

int cpu_row_range(struct backend *be, float *out, const float *x, int n, int dim)
{
    if (!out || !x || n < 0 || dim < 1) return -1;
    #pragma omp parallel for num_threads(cpu_threads(be)) \
        if ((size_t)n * dim >= CPU_PARALLEL_MIN)
    for (int i = 0; i < n; i++) {
        const float *r = x + (size_t)i * dim;
        float lo = r[0], hi = r[0];
        for (int c = 1; c < dim; c++) {
            if (r[c] < lo) lo = r[c];
            if (r[c] > hi) hi = r[c];
        }
        out[i] = hi - lo;
    }
    return 0;
}
