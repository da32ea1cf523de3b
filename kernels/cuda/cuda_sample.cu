/* cuda_sample.cu - temperature + top-k + top-p sampling in device memory
 * (struct backend's `sample` op), with model/sampler.c's semantics.
 *
 * The host keeps each sequence's RNG and passes its one uniform draw u per
 * sampled token (struct sample_row), so the device picks what the CPU
 * sampler picks from the same logits:
 *   - candidates ids [0, n) with n = min(n_vocab, n_valid), ordered by
 *     (logit descending, id ascending); -0.0 ties with +0.0 as in C;
 *   - greedy: the first maximum (NaN never wins; an all-NaN row gives 0);
 *   - limit = top_k when 0 < top_k < n, else n; top = the largest logit;
 *     weights w_i = exp(((double)logit_i - top) / temperature) in double;
 *     z = the sum of w over the limit best;
 *   - kept = the shortest sorted prefix whose cumulative w/z reaches top_p,
 *     or limit when none does;
 *   - r = u * (sum of w over kept); the first kept candidate whose running
 *     sum exceeds r, else the last kept.
 * One block per row: a radix select finds the key of the C-th best candidate
 * (C = min(limit, SAMPLE_CAP)), the C best are sorted in shared memory
 * (bitonic), z is a block sum, and one thread walks the sorted prefix in the
 * CPU's order for the cut, the mass and the pick (the same additions in the
 * same order as the CPU).  z is summed in another order than the CPU's (its
 * partition order is an accident of quickselect), and CUDA's double exp is
 * within 1 ulp rather than glibc's: a pick can differ only when top_p or r
 * falls within about 1e-15 (relative) of a boundary.  Rows the device does
 * not finish come back as -1 and the host samples them from their logits
 * with the same u: a NaN or an infinite top logit (the CPU's arithmetic then
 * is NaN-driven), or a nucleus wider than SAMPLE_CAP candidates (a flat
 * distribution with top_p near 1 and no top-k). */
#include "kernels/cuda/cuda_internal.h"

#include <math.h>

static const int SAMPLE_CAP = 1024;  /* candidates sorted on the device */
static const int SAMPLE_THREADS = 1024;

/* Larger key = earlier in the candidate order. */
__device__ static inline unsigned long long cand_key(float x, int id)
{
    unsigned u = x == 0.0f ? 0u : __float_as_uint(x); /* -0.0 ties with +0.0 */
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);   /* order-preserving */
    return ((unsigned long long)u << 32) | (unsigned long long)(0xFFFFFFFFu - (unsigned)id);
}

__device__ static inline int key_id(unsigned long long key)
{
    return (int)(0xFFFFFFFFu - (unsigned)(key & 0xFFFFFFFFull));
}

/* The key of the k-th best (1-based) of x[0..n): eight passes of an 8-bit
 * radix select from the top byte down (keys are unique: the id is in them). */
__device__ static unsigned long long select_kth(const float *x, int n, int k, unsigned *hist,
                                                int *sh)
{
    unsigned long long prefix = 0, mask = 0;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            unsigned long long key = cand_key(x[i], i);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int acc = 0, d = 255;
            for (; d > 0; d--) {
                if (acc + (int)hist[d] >= k) break;
                acc += (int)hist[d];
            }
            sh[0] = k - acc;
            sh[1] = d;
        }
        __syncthreads();
        k = sh[0];
        prefix |= (unsigned long long)sh[1] << shift;
        mask |= 255ull << shift;
        __syncthreads(); /* sh and hist are rewritten by the next pass */
    }
    return prefix;
}

/* Sum over the block in double; every thread gets it.  red: 32 doubles. */
__device__ static double block_sum_d(double v, double *red)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += red[w];
        red[0] = t;
    }
    __syncthreads();
    double r = red[0];
    __syncthreads();
    return r;
}

/* 1024 threads a block: the bounds let ptxas budget registers for them. */
__global__ static void __launch_bounds__(SAMPLE_THREADS)
k_sample(int *out, const float *logits, int n_vocab, const struct sample_row *rows)
{
    __shared__ unsigned long long keys[1024];
    __shared__ double w[1024]; /* the sorted candidates' weights */
    __shared__ unsigned hist[256];
    __shared__ int sh[4];
    __shared__ double red[32];
    __shared__ float best_v[32];
    __shared__ int best_i[32], bad[32];
    const struct sample_row p = rows[blockIdx.x];
    const float *x = logits + (size_t)blockIdx.x * n_vocab;
    int n = p.n_valid < n_vocab ? p.n_valid : n_vocab;
    if (n <= 0) {
        if (threadIdx.x == 0) out[blockIdx.x] = 0;
        return;
    }

    /* The first maximum (NaN never wins) and whether any logit is NaN. */
    float v = -INFINITY;
    int idx = n, nan_seen = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float y = x[j];
        if (isnan(y)) nan_seen = 1;
        else if (y > v || idx == n) v = y, idx = j;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_down_sync(0xffffffffu, v, o);
        int oi = __shfl_down_sync(0xffffffffu, idx, o);
        nan_seen |= __shfl_down_sync(0xffffffffu, nan_seen, o);
        if (oi < n && (idx == n || ov > v || (ov == v && oi < idx))) v = ov, idx = oi;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) best_v[warp] = v, best_i[warp] = idx, bad[warp] = nan_seen;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) {
            nan_seen |= bad[w];
            if (best_i[w] < n && (idx == n || best_v[w] > v || (best_v[w] == v && best_i[w] < idx)))
                v = best_v[w], idx = best_i[w];
        }
        sh[2] = idx < n ? idx : 0;
        sh[3] = nan_seen || idx == n || isinf(v);
        best_v[0] = v;
    }
    __syncthreads();
    const int argmax_id = sh[2], host_row = sh[3];
    const float top = best_v[0];
    __syncthreads();
    if (p.greedy) {
        if (threadIdx.x == 0) out[blockIdx.x] = argmax_id;
        return;
    }
    if (host_row) {
        if (threadIdx.x == 0) out[blockIdx.x] = -1;
        return;
    }

    const int limit = p.top_k > 0 && p.top_k < n ? p.top_k : n;
    const int C = limit < SAMPLE_CAP ? limit : SAMPLE_CAP;
    const double inv_t = 1.0 / (double)p.temperature;

    /* The C best candidates, sorted (bitonic over 1024 slots; empty slots
     * hold key 0, below every real key). */
    unsigned long long kc = select_kth(x, n, C, hist, sh);
    for (int i = threadIdx.x; i < SAMPLE_CAP; i += blockDim.x) keys[i] = 0;
    if (threadIdx.x == 0) sh[0] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        unsigned long long key = cand_key(x[i], i);
        if (key >= kc) keys[atomicAdd(&sh[0], 1)] = key;
    }
    __syncthreads();
    for (int size = 2; size <= SAMPLE_CAP; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < SAMPLE_CAP; i += blockDim.x) {
                int j = i ^ stride;
                if (j > i) {
                    bool desc = (i & size) == 0;
                    unsigned long long a = keys[i], b = keys[j];
                    if (desc ? a < b : a > b) keys[i] = b, keys[j] = a;
                }
            }
            __syncthreads();
        }

    /* z over the limit best: all n, the C sorted, or those at or above the
     * limit-th key. */
    unsigned long long kz = limit == n ? 0 : limit == C ? kc : select_kth(x, n, limit, hist, sh);
    double part = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float y = x[i];
        if (limit == n || cand_key(y, i) >= kz) part += exp(((double)y - top) * inv_t);
    }
    double z = block_sum_d(part, red);
    /* Each weight once, in parallel; the walks below add them in order. */
    for (int i = threadIdx.x; i < C; i += blockDim.x)
        w[i] = exp(((double)x[key_id(keys[i])] - top) * inv_t);
    __syncthreads();

    if (threadIdx.x != 0) return;
    int kept = -1;
    double cum = 0;
    for (int i = 0; i < C; i++) {
        cum += w[i] / z;
        if (cum >= p.top_p) {
            kept = i + 1;
            break;
        }
    }
    if (kept < 0) {
        if (C < limit) { /* the nucleus is wider than the sorted candidates */
            out[blockIdx.x] = -1;
            return;
        }
        kept = limit;
    }
    double mass = 0;
    for (int i = 0; i < kept; i++) mass += w[i];
    double r = p.u * mass, acc = 0;
    for (int i = 0; i < kept; i++) {
        acc += w[i];
        if (r < acc) {
            out[blockIdx.x] = key_id(keys[i]);
            return;
        }
    }
    out[blockIdx.x] = key_id(keys[kept - 1]);
}

extern "C" int backend_cuda_sample(struct backend *be, int *tokens, const float *logits,
                                   int n_rows, int n_vocab, const struct sample_row *rows)
{
    struct cuda_impl *im = impl_of(be);
    if (!tokens || !logits || !rows || n_rows < 1 || n_vocab < 1 || failed(be)) return -1;
    for (int r = 0; r < n_rows; r++)
        if (!rows[r].greedy && !(rows[r].temperature > 0.0f && rows[r].top_p > 0.0f &&
                                 rows[r].top_p <= 1.0f && rows[r].top_k >= 0 &&
                                 rows[r].u >= 0.0 && rows[r].u < 1.0))
            return -1;
    if (!grow(be, (void **)&im->d_tokens, &im->d_tokens_cap, (size_t)n_rows, sizeof(int),
              "sampled ids"))
        return -1;
    const void *d_rows = stage(be, rows, (size_t)n_rows * sizeof *rows);
    if (!d_rows) return -1;
    k_sample<<<n_rows, SAMPLE_THREADS>>>(im->d_tokens, logits, n_vocab,
                                         (const struct sample_row *)d_rows);
    if (!launched(be, "sample")) return -1;
    double t0 = cuda_host_s();
    bool ok = cuda_ok(be, cudaMemcpy(tokens, im->d_tokens, (size_t)n_rows * sizeof(int),
                                     cudaMemcpyDeviceToHost),
                      "download ids");
    cuda_waited(be, t0);
    return ok ? 0 : -1;
}
