/* cpu_vscore.c - value-aware scoring primitives (VaSE's value range). */
#include "kernels/cpu/cpu_ops.h"

struct range_job {
    float *out;
    const float *x;
    int dim;
};

static void range_rows(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    const struct range_job *j = ctx;
    for (int i = i0; i < i1; i++) {
        const float *r = j->x + (size_t)i * j->dim;
        float lo = r[0], hi = r[0];
        for (int c = 1; c < j->dim; c++) {
            if (r[c] < lo) lo = r[c];
            if (r[c] > hi) hi = r[c];
        }
        j->out[i] = hi - lo;
    }
}

int cpu_row_range(struct backend *be, float *out, const float *x, int n, int dim)
{
    if (!out || !x || n < 0 || dim < 1) return -1;
    struct range_job j = {out, x, dim};
    cpu_parallel_for(be, n, 64, (size_t)n * dim >= CPU_PARALLEL_MIN, range_rows, &j);
    return 0;
}
