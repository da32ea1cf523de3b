/* backend_cuda.cu - struct backend on an NVIDIA GPU.
 *
 * Memory is cudaMalloc'd device memory; gemm is cuBLAS; the other ops are
 * plain one-job kernels, written for clarity first.  Everything runs on the
 * legacy default stream, so ops are ordered, and upload/download (cudaMemcpy)
 * wait for the work before them.  Host metadata (ids, positions, kv lengths,
 * inv_freq) is copied into small device buffers that grow on demand.
 *
 * The ops return nothing (the interface is shared with the CPU backend), so
 * the first failure is kept in impl->err; backend_cuda_error() reports it and
 * later ops do nothing, rather than compute on garbage. */
#include "kernels/cuda/backend_cuda.h"

extern "C" {
#include "kernels/quant.h"
}

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_impl {
    int device;
    cublasHandle_t blas;
    int *d_ints;       /* device copy of the current op's int metadata */
    size_t d_ints_cap;
    float *d_floats;   /* device copy of inv_freq, staging for an in-place gather, or scratch for the scoring ops */
    size_t d_floats_cap;
    float *d_scores;   /* attention scores when the caller wants no probs */
    size_t d_scores_cap;
    unsigned char *d_mask; /* device copy of the attention slot mask */
    size_t d_mask_cap;
    char err[256];     /* first failure; empty while all is well */
};

static struct cuda_impl *impl_of(const struct backend *be)
{
    return (struct cuda_impl *)be->impl;
}

static bool failed(struct backend *be)
{
    return impl_of(be)->err[0] != 0;
}

/* Records the first failure; returns true when rc is success. */
static bool cuda_ok(struct backend *be, cudaError_t rc, const char *what)
{
    if (rc == cudaSuccess) return true;
    struct cuda_impl *im = impl_of(be);
    if (!im->err[0])
        snprintf(im->err, sizeof im->err, "cuda: %s: %s", what, cudaGetErrorString(rc));
    return false;
}

static bool blas_ok(struct backend *be, cublasStatus_t rc, const char *what)
{
    if (rc == CUBLAS_STATUS_SUCCESS) return true;
    struct cuda_impl *im = impl_of(be);
    if (!im->err[0])
        snprintf(im->err, sizeof im->err, "cublas: %s: status %d", what, (int)rc);
    return false;
}

/* After a kernel launch: catches bad launch configurations. */
static bool launched(struct backend *be, const char *what)
{
    return cuda_ok(be, cudaGetLastError(), what);
}

/* Grows a device buffer to hold n elements of `size` bytes. */
static bool grow(struct backend *be, void **buf, size_t *cap, size_t n, size_t size,
                 const char *what)
{
    if (n <= *cap) return true;
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    if (!cuda_ok(be, cudaMalloc(buf, n * size), what)) return false;
    *cap = n;
    return true;
}

static const int *device_ints(struct backend *be, const int *host, size_t n)
{
    struct cuda_impl *im = impl_of(be);
    if (!grow(be, (void **)&im->d_ints, &im->d_ints_cap, n ? n : 1, sizeof(int), "metadata"))
        return NULL;
    if (n && !cuda_ok(be, cudaMemcpy(im->d_ints, host, n * sizeof(int), cudaMemcpyHostToDevice),
                      "copy metadata"))
        return NULL;
    return im->d_ints;
}

static unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return b > 65535u * 16u ? 65535u * 16u : (unsigned)b; /* kernels loop over the rest */
}

/* ---- block reductions ---- */

__device__ static float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ static float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

/* Sum (or max) over the block; every thread gets the result.  blockDim.x is a
 * multiple of 32; `red` is 32 floats of shared memory. */
__device__ static float block_reduce(float v, float *red, bool is_max)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads(); /* red may still be read from a previous reduction */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = is_max ? -INFINITY : 0.0f;
    if (warp == 0) {
        float t = lane < n_warps ? red[lane] : r;
        r = is_max ? warp_max(t) : warp_sum(t);
        if (lane == 0) red[0] = r;
    }
    __syncthreads();
    return red[0];
}

/* ---- kernels ---- */

__global__ static void k_fill(float *y, float value, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = value;
}

__global__ static void k_bias_rows(float *y, const float *bias, int m, int n)
{
    size_t total = (size_t)m * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = bias[i % n];
}

/* One block per row. */
__global__ static void k_rmsnorm(float *y, const float *x, const float *w, int dim, float eps)
{
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *yr = y + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) ss += xr[j] * xr[j];
    ss = block_reduce(ss, red, false);
    float inv = 1.0f / sqrtf(ss / dim + eps);
    /* Each thread rewrites only the elements it read, so y may equal x. */
    for (int j = threadIdx.x; j < dim; j += blockDim.x) yr[j] = w[j] * (xr[j] * inv);
}

/* One thread per (row, head, pair). */
__global__ static void k_rope(float *x, int rows, int n_heads, int head_dim, const int *pos,
                              const float *inv_freq, int half_pairing)
{
    int half = head_dim / 2;
    size_t total = (size_t)rows * n_heads * half;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(t % half);
        size_t rh = t / half; /* row * n_heads + head */
        int r = (int)(rh / n_heads);
        float *xh = x + rh * head_dim;
        float angle = (float)pos[r] * inv_freq[i]; /* the f32 product, as HF */
        float c = cosf(angle), s = sinf(angle);
        int a = half_pairing ? i : 2 * i;
        int b = half_pairing ? i + half : 2 * i + 1;
        float x0 = xh[a], x1 = xh[b];
        xh[a] = x0 * c - x1 * s;
        xh[b] = x1 * c + x0 * s;
    }
}

__global__ static void k_swiglu(float *y, const float *gate, const float *up, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = gate[i];
        y[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ static void k_add(float *y, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

/* One block per output row: y[i] = x[rows[i]] (embed and gather alike). */
__global__ static void k_gather(float *y, const float *x, const int *rows, int dim)
{
    const float *src = x + (size_t)rows[blockIdx.x] * dim;
    float *dst = y + (size_t)blockIdx.x * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = src[j];
}

/* One block per (head, query q0 + blockIdx.y).  Scores go to a row of
 * `scores`, laid out [n_head][sc_queries][cap] from query sc_q0 on (the probs
 * array itself, or scratch for this launch's queries), are turned into
 * probabilities there, and weight the values. */
__global__ static void k_attention(struct attn_args a, const int *kv_len,
                                   const unsigned char *mask, int q0, float *scores,
                                   int sc_queries, int sc_q0)
{
    extern __shared__ float q_sh[]; /* head_dim floats */
    __shared__ float red[32];
    int h = blockIdx.x, i = q0 + blockIdx.y, hd = a.head_dim;
    int g = h / (a.n_head / a.n_kv);
    int n_vis = kv_len[g] - a.n_new + i + 1;
    n_vis = n_vis < 0 ? 0 : (n_vis > a.cap ? a.cap : n_vis);
    size_t row = ((size_t)i * a.n_head + h) * hd;
    const float *k = a.k_cache + (size_t)g * a.cap * hd;
    const float *v = a.v_cache + (size_t)g * a.cap * hd;
    float *sc = scores + ((size_t)h * sc_queries + (i - sc_q0)) * a.cap;
    const unsigned char *m = mask ? mask + (size_t)g * a.cap : NULL; /* 1: never attended */

    for (int d = threadIdx.x; d < hd; d += blockDim.x) q_sh[d] = a.q[row + d];
    __syncthreads();

    float max = -INFINITY;
    for (int j = threadIdx.x; j < n_vis; j += blockDim.x) {
        const float *kj = k + (size_t)j * hd;
        float s = 0.0f;
        for (int d = 0; d < hd; d++) s += q_sh[d] * kj[d];
        s *= a.scale;
        if (m && m[j]) s = -INFINITY;
        sc[j] = s;
        max = fmaxf(max, s);
    }
    max = block_reduce(max, red, true);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < n_vis; j += blockDim.x) {
        float e = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - max); /* masked (or all masked) */
        sc[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, red, false); /* its barriers also publish sc[] to the block */

    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < n_vis; j++) acc += sc[j] * v[(size_t)j * hd + d];
        a.out[row + d] = sum > 0.0f ? acc / sum : 0.0f;
    }
    if (!a.probs) return;
    __syncthreads(); /* every thread is done reading sc[] as weights */
    for (int j = threadIdx.x; j < a.cap; j += blockDim.x)
        sc[j] = j < n_vis && sum > 0.0f ? sc[j] / sum : 0.0f;
}

/* ---- the backend's ops ---- */

static const unsigned THREADS = 256;

static float *cuda_alloc(struct backend *be, size_t n_floats)
{
    (void)be;
    if (n_floats > ((size_t)-1) / sizeof(float)) return NULL;
    void *p = NULL;
    if (cudaMalloc(&p, (n_floats ? n_floats : 1) * sizeof(float)) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is an answer, not a sticky failure */
        return NULL;
    }
    return (float *)p;
}

static void cuda_free(struct backend *be, float *p)
{
    if (p) cuda_ok(be, cudaFree(p), "free");
}

static void cuda_upload(struct backend *be, float *dst, const float *src_host, size_t n)
{
    if (n && !failed(be))
        cuda_ok(be, cudaMemcpy(dst, src_host, n * sizeof(float), cudaMemcpyHostToDevice),
                "upload");
}

static void cuda_download(struct backend *be, float *dst_host, const float *src, size_t n)
{
    if (n && !failed(be))
        cuda_ok(be, cudaMemcpy(dst_host, src, n * sizeof(float), cudaMemcpyDeviceToHost),
                "download");
}

static void cuda_copy(struct backend *be, float *dst, const float *src, size_t n)
{
    if (n && dst != src && !failed(be))
        cuda_ok(be, cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice), "copy");
}

static void cuda_fill(struct backend *be, float *dst, float value, size_t n)
{
    if (!n || failed(be)) return;
    k_fill<<<blocks_for(n, THREADS), THREADS>>>(dst, value, n);
    launched(be, "fill");
}

/* Row-major y[m][n] = x[m][k] . w[n][k]^T is, read column-major, the product
 * y^T (n x m) = w^T (n x k, w stored k x n) . x^T (k x m): one cuBLAS call with
 * w transposed and no copies. */
static void cuda_gemm(struct backend *be, float *y, const float *x, const float *w,
                      const float *bias, int m, int n, int k)
{
    if (m <= 0 || n <= 0 || failed(be)) return;
    float one = 1.0f, beta = 0.0f;
    if (bias) {
        k_bias_rows<<<blocks_for((size_t)m * n, THREADS), THREADS>>>(y, bias, m, n);
        if (!launched(be, "gemm bias")) return;
        beta = 1.0f;
    }
    if (k <= 0) {
        if (!bias) cuda_fill(be, y, 0.0f, (size_t)m * n);
        return;
    }
    blas_ok(be, cublasSgemm(impl_of(be)->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, k,
                            x, k, &beta, y, n),
            "sgemm");
}

static void cuda_rmsnorm(struct backend *be, float *y, const float *x, const float *w, int rows,
                         int dim, float eps)
{
    if (rows <= 0 || dim <= 0 || failed(be)) return;
    k_rmsnorm<<<rows, THREADS>>>(y, x, w, dim, eps);
    launched(be, "rmsnorm");
}

static void cuda_rope(struct backend *be, float *x, int rows, int n_heads, int head_dim,
                      const int *pos, const float *inv_freq, enum rope_pairing pairing)
{
    if (rows <= 0 || n_heads <= 0 || head_dim < 2 || failed(be)) return;
    struct cuda_impl *im = impl_of(be);
    int half = head_dim / 2;
    const int *d_pos = device_ints(be, pos, rows);
    if (!d_pos) return;
    if (!grow(be, (void **)&im->d_floats, &im->d_floats_cap, half, sizeof(float), "inv_freq") ||
        !cuda_ok(be, cudaMemcpy(im->d_floats, inv_freq, half * sizeof(float),
                                cudaMemcpyHostToDevice),
                 "copy inv_freq"))
        return;
    size_t total = (size_t)rows * n_heads * half;
    k_rope<<<blocks_for(total, THREADS), THREADS>>>(x, rows, n_heads, head_dim, d_pos,
                                                   im->d_floats, pairing == ROPE_PAIR_HALF);
    launched(be, "rope");
}

static void cuda_swiglu(struct backend *be, float *y, const float *gate, const float *up,
                        size_t n)
{
    if (!n || failed(be)) return;
    k_swiglu<<<blocks_for(n, THREADS), THREADS>>>(y, gate, up, n);
    launched(be, "swiglu");
}

static void cuda_add(struct backend *be, float *y, const float *x, size_t n)
{
    if (!n || failed(be)) return;
    k_add<<<blocks_for(n, THREADS), THREADS>>>(y, x, n);
    launched(be, "add");
}

/* Blocks run in any order, so a gather whose output overlaps its input goes
 * through a staging buffer (the CPU backend allows that overlap too). */
static void gather(struct backend *be, float *y, const float *x, const int *rows, int n,
                   int dim, const char *what)
{
    if (n <= 0 || dim <= 0 || failed(be)) return;
    struct cuda_impl *im = impl_of(be);
    const int *d_rows = device_ints(be, rows, n);
    if (!d_rows) return;
    size_t out_n = (size_t)n * dim;
    int max_row = 0;
    for (int i = 0; i < n; i++) max_row = rows[i] > max_row ? rows[i] : max_row;
    const float *x_end = x + ((size_t)max_row + 1) * dim;
    float *dst = y;
    if ((uintptr_t)y < (uintptr_t)x_end && (uintptr_t)x < (uintptr_t)(y + out_n)) {
        if (!grow(be, (void **)&im->d_floats, &im->d_floats_cap, out_n, sizeof(float), what))
            return;
        dst = im->d_floats;
    }
    k_gather<<<n, 128>>>(dst, x, d_rows, dim);
    if (!launched(be, what)) return;
    if (dst != y)
        cuda_ok(be, cudaMemcpy(y, dst, out_n * sizeof(float), cudaMemcpyDeviceToDevice), what);
}

static void cuda_embed(struct backend *be, float *y, const float *table, const int *ids, int n,
                       int dim)
{
    gather(be, y, table, ids, n, dim, "embed");
}

/* ---- typed weights: held as f32 in device memory for now (dequantized on
 * the host at creation, then cuBLAS sgemm), whatever the stored type ---- */

static struct weight *cuda_weight_create(struct backend *be, enum weight_type type, int rows,
                                         int cols, const void *host, int borrow, int as_f32)
{
    (void)borrow; /* the bytes are copied to the device either way */
    (void)as_f32; /* always f32 here */
    if (rows <= 0 || cols <= 0 || failed(be)) return NULL;
    size_t row_bytes = quant_row_bytes((int)type, cols);
    if (row_bytes == 0 || !quant_type_supported((int)type)) return NULL;
    size_t n = (size_t)rows * (size_t)cols;
    struct weight *w = (struct weight *)calloc(1, sizeof *w);
    float *h = (float *)malloc(n * sizeof(float));
    float *d = h ? cuda_alloc(be, n) : NULL;
    if (!w || !h || !d ||
        quant_dequantize((int)type, host, h, (int64_t)n) != 0) {
        if (d) cuda_free(be, d);
        free(h);
        free(w);
        return NULL;
    }
    cuda_upload(be, d, h, n);
    free(h);
    w->type = type;
    w->held = WEIGHT_F32;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = (size_t)cols * sizeof(float);
    w->bytes = n * sizeof(float);
    w->data = d;
    return w;
}

static void cuda_weight_free(struct backend *be, struct weight *w)
{
    if (!w) return;
    cuda_free(be, (float *)w->data);
    free(w);
}

static void cuda_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                        const float *bias, int m)
{
    cuda_gemm(be, y, x, (const float *)w->data, bias, m, w->rows, w->cols);
}

static void cuda_embed_weight(struct backend *be, float *y, const struct weight *w,
                              const int *ids, int n)
{
    gather(be, y, (const float *)w->data, ids, n, w->cols, "embed");
}

static void cuda_gather_rows(struct backend *be, float *y, const float *x, const int *rows,
                             int n, int dim)
{
    gather(be, y, x, rows, n, dim, "gather_rows");
}

/* Scratch scores are bounded: queries are launched in chunks that fit. */
static const size_t SCORE_SCRATCH_MAX = (size_t)64 << 20; /* floats */

static void cuda_attention(struct backend *be, const struct attn_args *a)
{
    if (a->n_head <= 0 || a->n_kv <= 0 || a->n_head % a->n_kv != 0 || a->n_new <= 0 ||
        a->head_dim <= 0 || a->cap <= 0 || failed(be))
        return;
    struct cuda_impl *im = impl_of(be);
    const int *d_len = device_ints(be, a->kv_len, a->n_kv);
    if (!d_len) return;
    const unsigned char *d_mask = NULL;
    if (a->slot_mask) {
        size_t n = (size_t)a->n_kv * a->cap;
        if (!grow(be, (void **)&im->d_mask, &im->d_mask_cap, n, 1, "attention mask") ||
            !cuda_ok(be, cudaMemcpy(im->d_mask, a->slot_mask, n, cudaMemcpyHostToDevice),
                     "copy attention mask"))
            return;
        d_mask = im->d_mask;
    }
    size_t per_query = (size_t)a->n_head * a->cap;
    int chunk = a->n_new < 65535 ? a->n_new : 65535; /* grid.y limit */
    if (!a->probs) {
        size_t fit = SCORE_SCRATCH_MAX / per_query;
        if (fit < 1) fit = 1;
        if ((size_t)chunk > fit) chunk = (int)fit;
        if (!grow(be, (void **)&im->d_scores, &im->d_scores_cap, per_query * chunk,
                  sizeof(float), "attention scratch"))
            return;
    }
    size_t shared = (size_t)a->head_dim * sizeof(float);
    for (int q0 = 0; q0 < a->n_new; q0 += chunk) {
        int nq = a->n_new - q0 < chunk ? a->n_new - q0 : chunk;
        dim3 grid((unsigned)a->n_head, (unsigned)nq);
        if (a->probs)
            k_attention<<<grid, 128, shared>>>(*a, d_len, d_mask, q0, a->probs, a->n_new, 0);
        else
            k_attention<<<grid, 128, shared>>>(*a, d_len, d_mask, q0, im->d_scores, nq, q0);
        if (!launched(be, "attention")) return;
    }
}

/* ---- scoring primitives (the reference is kernels/cpu/cpu_score.c and
 * cpu_vscore.c) ----
 *
 * Softmax sums and means accumulate in double, as on the CPU, so the two
 * backends agree to f32 rounding.  Scratch lives in the grow-on-demand
 * buffers: floats and doubles in d_floats, a pad mask's bytes in d_ints.
 * These ops do return a status: -1 for arguments the CPU backend also
 * refuses, or for a CUDA failure (then recorded, see backend_cuda_error). */

/* Double sum / max over the block, as block_reduce.  `red` is 32 doubles. */
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

/* One thread per (query row i, key j < cols): the logits of the group's query
 * heads, pooled (max, or mean of the f32 sum) into s[i][j]. */
__global__ static void k_window_logits(float *s, const float *q, const float *k, int n_q,
                                       int cols, int group, int first_head, int qstride, int hd,
                                       float scale, int gqa_mean)
{
    size_t total = (size_t)n_q * cols;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(t / cols), j = (int)(t % cols);
        const float *kj = k + (size_t)j * hd;
        float v = 0.0f;
        for (int g = 0; g < group; g++) {
            const float *qg = q + (size_t)i * qstride + (size_t)(first_head + g) * hd;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++) dot += qg[d] * kj[d];
            dot *= scale;
            if (g == 0) v = dot;
            else v = gqa_mean ? v + dot : fmaxf(v, dot);
        }
        s[t] = gqa_mean ? v / (float)group : v;
    }
}

/* One block per query row i: softmax over the visible, unpadded keys of row i
 * of s, written back as probability / n_q for the candidates j < n_cand
 * (0 where hidden or padded; a row with nothing visible adds nothing). */
__global__ static void k_window_softmax(float *s, int cols, int n_cand, int n_q, int len,
                                        int softmax_all, const unsigned char *pad)
{
    __shared__ double red[32];
    int i = blockIdx.x;
    float *row = s + (size_t)i * cols;
    int visible = cols;
    if (softmax_all) {
        visible = len - n_q + i + 1;
        visible = visible < 0 ? 0 : (visible > cols ? cols : visible);
    }
    double max = -INFINITY;
    for (int j = threadIdx.x; j < visible; j += blockDim.x)
        if (!(pad && pad[j])) max = fmax(max, (double)row[j]);
    max = block_reduce_d(max, red, true);
    double sum = 0.0;
    if (max != -INFINITY)
        for (int j = threadIdx.x; j < visible; j += blockDim.x)
            if (!(pad && pad[j])) sum += exp((double)row[j] - max);
    sum = block_reduce_d(sum, red, false);
    /* Each thread rewrites only the entries it read. */
    for (int j = threadIdx.x; j < n_cand; j += blockDim.x) {
        double p = 0.0;
        if (max != -INFINITY && j < visible && !(pad && pad[j]))
            p = exp((double)row[j] - max) / sum / n_q;
        row[j] = (float)p;
    }
}

/* out[j] = sum over rows of p[i][j] (rows already divided by n_q), in row order. */
__global__ static void k_column_sum(float *out, const float *p, int n_rows, int cols, int n)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        double acc = 0.0;
        for (int i = 0; i < n_rows; i++) acc += p[(size_t)i * cols + j];
        out[j] = (float)acc;
    }
}

/* One thread per output; max pads with -inf, avg counts the pads as zeros. */
__global__ static void k_pool1d(float *out, const float *in, int n, int half, int kernel,
                                int avg)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        int lo = j - half < 0 ? 0 : j - half, hi = j + half >= n ? n - 1 : j + half;
        if (avg) {
            double sum = 0.0;
            for (int t = lo; t <= hi; t++) sum += in[t];
            out[j] = (float)(sum / kernel);
        } else {
            float m = in[lo];
            for (int t = lo + 1; t <= hi; t++) m = fmaxf(m, in[t]);
            out[j] = m;
        }
    }
}

/* One block per key: kn = k / (|k| + 1e-8), zero for a pad key. */
__global__ static void k_normalize_keys(float *kn, const float *k, int hd,
                                        const unsigned char *pad)
{
    __shared__ double red[32];
    size_t off = (size_t)blockIdx.x * hd;
    if (pad && pad[blockIdx.x]) {
        for (int d = threadIdx.x; d < hd; d += blockDim.x) kn[off + d] = 0.0f;
        return; /* the whole block leaves: no barrier is skipped by some only */
    }
    double ss = 0.0;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) ss += (double)k[off + d] * k[off + d];
    ss = block_reduce_d(ss, red, false);
    float inv = (float)(1.0 / (sqrt(ss) + 1e-8));
    for (int d = threadIdx.x; d < hd; d += blockDim.x) kn[off + d] = k[off + d] * inv;
}

/* One thread per dimension: sum[d] = sum over keys of kn[i][d], in key order. */
__global__ static void k_key_sum(double *sum, const float *kn, int len, int hd)
{
    for (int d = blockIdx.x * blockDim.x + threadIdx.x; d < hd; d += gridDim.x * blockDim.x) {
        double acc = 0.0;
        for (int i = 0; i < len; i++) acc += kn[(size_t)i * hd + d];
        sum[d] = acc;
    }
}

/* One block per row i of the cosine matrix C = kn kn^T (zero diagonal).
 * base[i] = sum_j C[i][j], which by symmetry is column i's sum, computed as
 * kn_i . sum - kn_i . kn_i.  Then the largest j != i with C[i][j] > threshold
 * is searched from the most recent key down, a block of columns at a time,
 * and its C[i][j] is added to sub[j] (the zeroed entry leaves column j's sum).
 * No match with the quirk flag: C[i][0] is zeroed instead. */
__global__ static void k_redundancy_rows(double *base, double *sub, const float *kn,
                                         const double *sum, int len, int hd, float threshold,
                                         int no_match_zero_col0)
{
    extern __shared__ float ki[]; /* hd floats */
    __shared__ double red[32];
    __shared__ int red_i[32];
    __shared__ float match_c;
    int i = blockIdx.x;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) ki[d] = kn[(size_t)i * hd + d];
    __syncthreads();

    double self = 0.0, dot = 0.0;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        self += (double)ki[d] * ki[d];
        dot += (double)ki[d] * sum[d];
    }
    self = block_reduce_d(self, red, false);
    dot = block_reduce_d(dot, red, false);
    if (threadIdx.x == 0) base[i] = dot - self;

    int jstar = -1;
    for (int e = len; e > 0 && jstar < 0; e -= (int)blockDim.x) {
        int j = e - 1 - (int)threadIdx.x, cand = -1;
        float c = 0.0f;
        if (j >= 0 && j != i) {
            const float *kj = kn + (size_t)j * hd;
            for (int d = 0; d < hd; d++) c += ki[d] * kj[d];
            if (c > threshold) cand = j;
        }
        jstar = block_max_int(cand, red_i);
        if (jstar >= 0 && j == jstar) match_c = c;
        __syncthreads();
    }
    if (jstar >= 0) {
        if (threadIdx.x == 0) atomicAdd(&sub[jstar], (double)match_c);
        return;
    }
    if (!no_match_zero_col0 || i == 0) return; /* C[0][0] is the zero diagonal */
    double d0 = 0.0;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) d0 += (double)ki[d] * kn[d];
    d0 = block_reduce_d(d0, red, false);
    if (threadIdx.x == 0) atomicAdd(&sub[0], d0);
}

/* One block: out = softmax_j((base[j] - sub[j]) / len). */
__global__ static void k_redundancy_softmax(float *out, double *base, const double *sub,
                                            int len)
{
    __shared__ double red[32];
    double max = -INFINITY;
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
        double v = (base[j] - sub[j]) / len;
        base[j] = v;
        max = fmax(max, v);
    }
    max = block_reduce_d(max, red, true);
    double total = 0.0;
    for (int j = threadIdx.x; j < len; j += blockDim.x) total += exp(base[j] - max);
    total = block_reduce_d(total, red, false);
    for (int j = threadIdx.x; j < len; j += blockDim.x)
        out[j] = (float)(exp(base[j] - max) / total);
}

/* One warp per row: out[i] = max - min of the row. */
__global__ static void k_row_range(float *out, const float *x, int n, int dim)
{
    int lane = threadIdx.x & 31;
    int warps = (gridDim.x * blockDim.x) >> 5;
    for (int i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += warps) {
        const float *r = x + (size_t)i * dim;
        float hi = -INFINITY, lo = INFINITY;
        for (int c = lane; c < dim; c += 32) {
            hi = fmaxf(hi, r[c]);
            lo = fminf(lo, r[c]);
        }
        hi = warp_max(hi);
        lo = -warp_max(-lo);
        if (lane == 0) out[i] = hi - lo;
    }
}

/* Scratch of `bytes` in d_floats (256-byte aligned by cudaMalloc). */
static void *float_scratch(struct backend *be, size_t bytes, const char *what)
{
    struct cuda_impl *im = impl_of(be);
    size_t n = (bytes + sizeof(float) - 1) / sizeof(float);
    if (!grow(be, (void **)&im->d_floats, &im->d_floats_cap, n ? n : 1, sizeof(float), what))
        return NULL;
    return im->d_floats;
}

/* A device copy of a host byte mask of n entries, in d_ints; *out is NULL
 * when mask is.  Returns false on a CUDA failure. */
static bool device_mask(struct backend *be, const unsigned char *mask, size_t n,
                        const unsigned char **out)
{
    struct cuda_impl *im = impl_of(be);
    *out = NULL;
    if (!mask || n == 0) return true;
    size_t n_ints = (n + sizeof(int) - 1) / sizeof(int);
    if (!grow(be, (void **)&im->d_ints, &im->d_ints_cap, n_ints, sizeof(int), "pad mask") ||
        !cuda_ok(be, cudaMemcpy(im->d_ints, mask, n, cudaMemcpyHostToDevice), "copy pad mask"))
        return false;
    *out = (const unsigned char *)im->d_ints;
    return true;
}

static int cuda_window_scores(struct backend *be, const struct window_score_args *a)
{
    if (!a->out || !a->q || !a->k || a->n_head < 1 || a->n_kv < 1 || a->n_head % a->n_kv != 0 ||
        a->kv_head < 0 || a->kv_head >= a->n_kv || a->head_dim < 1 || a->n_q < 1 || a->len < 1 ||
        a->n_cand < 1 || a->n_cand > a->len)
        return -1;
    if (failed(be)) return -1;
    int group = a->n_head / a->n_kv, cols = a->softmax_all ? a->len : a->n_cand;
    size_t plane = (size_t)a->n_q * cols;
    const unsigned char *d_pad;
    if (!device_mask(be, a->pad, (size_t)a->len, &d_pad)) return -1;
    float *s = (float *)float_scratch(be, plane * sizeof(float), "window scores scratch");
    if (!s) return -1;
    k_window_logits<<<blocks_for(plane, THREADS), THREADS>>>(
        s, a->q, a->k, a->n_q, cols, group, a->kv_head * group, a->n_head * a->head_dim,
        a->head_dim, a->scale, a->gqa == SCORE_GQA_MEAN);
    if (!launched(be, "window logits")) return -1;
    k_window_softmax<<<a->n_q, THREADS>>>(s, cols, a->n_cand, a->n_q, a->len, a->softmax_all,
                                          d_pad);
    if (!launched(be, "window softmax")) return -1;
    k_column_sum<<<blocks_for(a->n_cand, THREADS), THREADS>>>(a->out, s, a->n_q, cols,
                                                               a->n_cand);
    return launched(be, "window mean") ? 0 : -1;
}

static int cuda_pool1d(struct backend *be, float *out, const float *in, int n, int kernel,
                       enum score_pool mode)
{
    if (!out || !in || out == in || n < 0 || kernel < 1 || kernel % 2 == 0) return -1;
    if (failed(be)) return -1;
    if (n == 0) return 0;
    k_pool1d<<<blocks_for(n, THREADS), THREADS>>>(out, in, n, kernel / 2, kernel,
                                                  mode == SCORE_POOL_AVG);
    return launched(be, "pool1d") ? 0 : -1;
}

static int cuda_key_redundancy(struct backend *be, const struct redundancy_args *a)
{
    if (!a->out || !a->k || a->len < 1 || a->head_dim < 1) return -1;
    if (failed(be)) return -1;
    int n = a->len, hd = a->head_dim;
    size_t shared = (size_t)hd * sizeof(float);
    if (shared > 48 * 1024) return -1; /* one key per block in static-sized shared memory */
    /* Layout: sum[hd], base[n], sub[n] (doubles), then kn[n][hd]. */
    size_t n_doubles = (size_t)hd + 2 * (size_t)n;
    const unsigned char *d_pad;
    if (!device_mask(be, a->pad, (size_t)n, &d_pad)) return -1;
    char *buf = (char *)float_scratch(be, n_doubles * sizeof(double) + (size_t)n * hd * sizeof(float),
                                      "redundancy scratch");
    if (!buf) return -1;
    double *sum = (double *)buf, *base = sum + hd, *sub = base + n;
    float *kn = (float *)(sub + n);
    if (!cuda_ok(be, cudaMemset(sub, 0, (size_t)n * sizeof(double)), "redundancy clear"))
        return -1;
    k_normalize_keys<<<n, 128>>>(kn, a->k, hd, d_pad);
    if (!launched(be, "normalize keys")) return -1;
    k_key_sum<<<blocks_for(hd, 128), 128>>>(sum, kn, n, hd);
    if (!launched(be, "key sum")) return -1;
    k_redundancy_rows<<<n, THREADS, shared>>>(base, sub, kn, sum, n, hd, a->threshold,
                                              a->no_match_zero_col0);
    if (!launched(be, "redundancy rows")) return -1;
    k_redundancy_softmax<<<1, 1024>>>(a->out, base, sub, n);
    return launched(be, "redundancy softmax") ? 0 : -1;
}

static int cuda_row_range(struct backend *be, float *out, const float *x, int n, int dim)
{
    if (!out || !x || n < 0 || dim < 1) return -1;
    if (failed(be)) return -1;
    if (n == 0) return 0;
    k_row_range<<<blocks_for((size_t)n * 32, THREADS), THREADS>>>(out, x, n, dim);
    return launched(be, "row_range") ? 0 : -1;
}

static void cuda_destroy(struct backend *be)
{
    if (!be) return;
    struct cuda_impl *im = impl_of(be);
    if (im) {
        cudaFree(im->d_ints);
        cudaFree(im->d_floats);
        cudaFree(im->d_scores);
        cudaFree(im->d_mask);
        if (im->blas) cublasDestroy(im->blas);
        free(im);
    }
    free(be);
}

extern "C" int backend_cuda_probe(int device, char *msg, size_t msg_size)
{
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        snprintf(msg, msg_size, "cuda: no usable driver or device: %s", cudaGetErrorString(rc));
        return -1;
    }
    if (device < 0 || device >= count) {
        snprintf(msg, msg_size, "cuda: device %d does not exist (%d found)", device, count);
        return -1;
    }
    snprintf(msg, msg_size, "cuda: device %d usable", device);
    return 0;
}

extern "C" struct backend *backend_cuda_create(int device)
{
    char why[128];
    if (backend_cuda_probe(device, why, sizeof why) != 0) return NULL;
    if (cudaSetDevice(device) != cudaSuccess) return NULL;
    struct backend *be = (struct backend *)calloc(1, sizeof *be);
    struct cuda_impl *im = (struct cuda_impl *)calloc(1, sizeof *im);
    if (!be || !im) {
        free(be);
        free(im);
        return NULL;
    }
    im->device = device;
    if (cublasCreate(&im->blas) != CUBLAS_STATUS_SUCCESS) {
        free(im);
        free(be);
        return NULL;
    }
    /* Plain f32 arithmetic (no TF32 tensor-core shortcut): results must match
     * the CPU backend and the references to f32 rounding. */
    cublasSetMathMode(im->blas, CUBLAS_PEDANTIC_MATH);
    be->name = "cuda";
    be->impl = im;
    be->alloc = cuda_alloc;
    be->free = cuda_free;
    be->upload = cuda_upload;
    be->download = cuda_download;
    be->copy = cuda_copy;
    be->fill = cuda_fill;
    be->gemm = cuda_gemm;
    be->rmsnorm = cuda_rmsnorm;
    be->rope = cuda_rope;
    be->swiglu = cuda_swiglu;
    be->add = cuda_add;
    be->embed = cuda_embed;
    be->gather_rows = cuda_gather_rows;
    be->attention = cuda_attention;
    be->destroy = cuda_destroy;
    be->window_scores = cuda_window_scores;
    be->pool1d = cuda_pool1d;
    be->key_redundancy = cuda_key_redundancy;
    be->row_range = cuda_row_range;
    be->weight_create = cuda_weight_create;
    be->weight_free = cuda_weight_free;
    be->matmul = cuda_matmul;
    be->embed_weight = cuda_embed_weight;
    return be;
}

extern "C" const char *backend_cuda_error(const struct backend *be)
{
    if (!be || !be->impl) return "cuda: no backend";
    const struct cuda_impl *im = (const struct cuda_impl *)be->impl;
    return im->err[0] ? im->err : NULL;
}
