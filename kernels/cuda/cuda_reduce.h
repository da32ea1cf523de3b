/* cuda_reduce.h - block-wide reductions shared by the scoring kernels
 * (cuda_score.cu, cuda_batch.cu): every thread of the block gets the result.
 * Included by .cu files only. */
#ifndef EB_CUDA_REDUCE_H
#define EB_CUDA_REDUCE_H

/* Double sum / max over the block.  `red` is 32 doubles. */
__device__ static double block_reduce_d(double v, double *red, bool is_max)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        double t = __shfl_down_sync(0xffffffffu, v, o);
        v = is_max ? fmax(v, t) : v + t;
    }
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        double r = is_max ? -INFINITY : 0.0;
        double t = lane < n_warps ? red[lane] : r;
        for (int o = 16; o > 0; o >>= 1) {
            double u = __shfl_down_sync(0xffffffffu, t, o);
            t = is_max ? fmax(t, u) : t + u;
        }
        if (lane == 0) red[0] = t;
    }
    __syncthreads();
    return red[0];
}

/* Largest of values >= -1 over the block (every thread gets it); `red` is 32 ints. */
__device__ static int block_max_int(int v, int *red)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_down_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int t = lane < n_warps ? red[lane] : -1; /* candidates are >= -1 */
        for (int o = 16; o > 0; o >>= 1) t = max(t, __shfl_down_sync(0xffffffffu, t, o));
        if (lane == 0) red[0] = t;
    }
    __syncthreads();
    return red[0];
}


/* out[j] = softmax_j((base[j] - sub[j]) / len) over the block's threads
 * (R-KV's redundancy row, cuda_score.cu and cuda_batch.cu); base is
 * overwritten with the scaled logits. */
__device__ static void block_redundancy_softmax(float *out, double *base, const double *sub,
                                                int len, double *red)
{
    double mx = -INFINITY;
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
        double v = (base[j] - sub[j]) / len;
        base[j] = v;
        mx = fmax(mx, v);
    }
    mx = block_reduce_d(mx, red, true);
    double total = 0.0;
    for (int j = threadIdx.x; j < len; j += blockDim.x) total += exp(base[j] - mx);
    total = block_reduce_d(total, red, false);
    for (int j = threadIdx.x; j < len; j += blockDim.x) out[j] = (float)(exp(base[j] - mx) / total);
}

#endif
