/* backend_cuda.cu - struct backend on an NVIDIA GPU: creation, memory (the
 * run's pool), metadata staging, gemm, and the elementwise ops.  Attention is
 * in cuda_attention.cu, the scoring primitives in cuda_score.cu.
 *
 * Everything runs on the per-thread default stream (the library is compiled
 * with --default-stream per-thread; cuBLAS is set to it), so ops are ordered,
 * a step graph can capture them (cuda_graph.cu), and upload/download
 * (cudaMemcpy) wait for the work before them.  Host metadata
 * is staged asynchronously (stage()), so no op but download waits for the GPU.
 *
 * The ops return nothing (the interface is shared with the CPU backend), so
 * the first failure is kept in impl->err; backend_cuda_error() reports it and
 * later ops do nothing, rather than compute on garbage; download then fills
 * its output with NaN so that no result can pass for numbers. */
#include "kernels/cuda/cuda_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

static_assert((int)cudaSuccess == (int)CUDA_RC_SUCCESS &&
                  (int)cudaErrorMemoryAllocation == (int)CUDA_RC_MEMORY_ALLOCATION,
              "cuda_fault.h pins the runtime's codes");
static_assert((int)CUBLAS_STATUS_SUCCESS == (int)BLAS_RC_SUCCESS &&
                  (int)CUBLAS_STATUS_ALLOC_FAILED == (int)BLAS_RC_ALLOC_FAILED,
              "cuda_fault.h pins cuBLAS's codes");

/* After an allocation failure: clears it and says whether the context still
 * works (a sticky error from earlier work shows here, not as an OOM). */
static cudaError_t state_after_clearing(void)
{
    cudaGetLastError();
    cudaError_t rc = cudaDeviceSynchronize();
    return rc != cudaSuccess ? rc : cudaGetLastError();
}

/* Records kind for `what`, naming the CUDA error `named`. */
static void record_cuda(struct backend *be, enum cuda_fault_kind kind, const char *what,
                        cudaError_t named)
{
    char where[96], detail[192];
    snprintf(where, sizeof where, "cuda: %s", what);
    snprintf(detail, sizeof detail, "%s: %s", cudaGetErrorName(named), cudaGetErrorString(named));
    cuda_fault_record(&impl_of(be)->fault, kind, where, detail);
}

bool cuda_ok(struct backend *be, cudaError_t rc, const char *what)
{
    if (rc == cudaSuccess) return true;
    cudaError_t after = rc == cudaErrorMemoryAllocation ? state_after_clearing() : rc;
    enum cuda_fault_kind kind = cuda_fault_classify((int)rc, (int)after);
    record_cuda(be, kind, what, kind == CUDA_FAULT_FAIL ? after : rc);
    return false;
}

bool blas_ok(struct backend *be, cublasStatus_t rc, const char *what)
{
    if (rc == CUBLAS_STATUS_SUCCESS) return true;
    cudaError_t after = rc == CUBLAS_STATUS_ALLOC_FAILED ? state_after_clearing() : cudaSuccess;
    enum cuda_fault_kind kind = blas_fault_classify((int)rc, (int)after);
    char where[96], detail[192];
    snprintf(where, sizeof where, "cublas: %s", what);
    if (after != cudaSuccess)
        snprintf(detail, sizeof detail, "status %d, then %s: %s", (int)rc, cudaGetErrorName(after),
                 cudaGetErrorString(after));
    else
        snprintf(detail, sizeof detail, "status %d (%s)", (int)rc, cublasGetStatusString(rc));
    cuda_fault_record(&impl_of(be)->fault, kind, where, detail);
    return false;
}

void cuda_fail(struct backend *be, const char *what, const char *why)
{
    char where[96];
    snprintf(where, sizeof where, "cuda: %s", what);
    cuda_fault_record(&impl_of(be)->fault, CUDA_FAULT_FAIL, where, why);
}

bool launched(struct backend *be, const char *what)
{
    return cuda_ok(be, cudaGetLastError(), what);
}

bool grow(struct backend *be, void **buf, size_t *cap, size_t n, size_t size, const char *what)
{
    if (n <= *cap) return true;
    /* A recording may not wait for the device; the step before it sized this. */
    if (graph_mode(be) == STEP_CAPTURE) {
        cuda_fail(be, what, "a buffer would grow while a step graph is recorded");
        return false;
    }
    /* The buffer may still be read by queued work: wait before freeing it. */
    if (*buf && !cuda_ok(be, cudaDeviceSynchronize(), what)) return false;
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    /* Grow by half again, so a slowly growing need reallocates O(log n) times. */
    size_t want = n + n / 2;
    if (!cuda_ok(be, cudaMalloc(buf, want * size), what)) return false;
    *cap = want;
    impl_of(be)->grown++;
    return true;
}

enum { STAGE_ALIGN = 256 };
static const size_t STAGE_INITIAL = (size_t)8 << 20;

/* Allocates the pinned ring and its device twin of `cap` bytes. */
static bool stage_alloc(struct backend *be, size_t cap)
{
    struct cuda_impl *im = impl_of(be);
    if (im->stage_host) cudaFreeHost(im->stage_host);
    if (im->stage_dev) cudaFree(im->stage_dev);
    im->stage_host = im->stage_dev = NULL;
    im->stage_cap = im->stage_off = 0;
    if (!cuda_ok(be, cudaMallocHost((void **)&im->stage_host, cap), "staging ring (host)") ||
        !cuda_ok(be, cudaMalloc((void **)&im->stage_dev, cap), "staging ring (device)"))
        return false;
    im->stage_cap = cap;
    return true;
}

/* The host half of a region may be rewritten only once its copy has run;
 * the device half may be rewritten by a later copy at any time, because that
 * copy is queued after every kernel that reads the old contents.  So the ring
 * waits for the GPU only when it wraps around (or grows, for an array larger
 * than the whole ring).  ring_room: room for `need` bytes from stage_off on. */
static bool ring_room(struct backend *be, size_t need)
{
    struct cuda_impl *im = impl_of(be);
    if (failed(be)) return false;
    if (im->stage_off + need <= im->stage_cap) return true;
    if (graph_mode(be) == STEP_CAPTURE) {
        cuda_fail(be, "staging ring wrap", "the ring would wait while a step graph is recorded");
        return false;
    }
    if (!cuda_ok(be, cudaDeviceSynchronize(), "staging ring wrap")) return false;
    im->stage_off = 0;
    return need <= im->stage_cap || stage_alloc(be, need * 2);
}

/* Each staged array takes its size rounded up to STAGE_ALIGN: bytes plus
 * n_items alignments covers them all. */
bool stage_reserve(struct backend *be, size_t bytes, int n_items)
{
    return ring_room(be, bytes + (size_t)(n_items > 0 ? n_items : 0) * STAGE_ALIGN);
}

const void *stage(struct backend *be, const void *host, size_t bytes)
{
    struct cuda_impl *im = impl_of(be);
    size_t need = (bytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
    if (need == 0) need = STAGE_ALIGN;
    if (!ring_room(be, need)) return NULL;
    char *h = im->stage_host + im->stage_off, *d = im->stage_dev + im->stage_off;
    im->stage_off += need;
    /* A recorded copy would read this ring region again at every replay. */
    if (graph_mode(be) == STEP_CAPTURE) im->graph_tainted = true;
    memcpy(h, host, bytes);
    if (!cuda_ok(be, cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, 0), "stage metadata"))
        return NULL;
    return d;
}

static const int *device_ints(struct backend *be, const int *host, size_t n)
{
    return (const int *)stage(be, host, (n ? n : 1) * sizeof(int));
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


/* Greedy pick: one block per row, the largest logit, ties to the lowest id. */
__global__ static void __launch_bounds__(1024)
k_argmax(int *out, const float *logits, int n_vocab)
{
    __shared__ float best_v[32];
    __shared__ int best_i[32];
    const float *row = logits + (size_t)blockIdx.x * n_vocab;
    float v = -INFINITY;
    int idx = n_vocab; /* none yet: loses every tie */
    for (int j = threadIdx.x; j < n_vocab; j += blockDim.x)
        if (row[j] > v) v = row[j], idx = j; /* strided: a thread's first max is its lowest */
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_down_sync(0xffffffffu, v, o);
        int oi = __shfl_down_sync(0xffffffffu, idx, o);
        if (ov > v || (ov == v && oi < idx)) v = ov, idx = oi;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) best_v[warp] = v, best_i[warp] = idx;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)(blockDim.x >> 5); w++)
            if (best_v[w] > v || (best_v[w] == v && best_i[w] < idx)) v = best_v[w], idx = best_i[w];
        out[blockIdx.x] = idx < n_vocab ? idx : 0; /* an all-NaN row: id 0 */
    }
}

/* Typed KV caches: row i of dst = row rows[i] of src, converted (one block a row). */
template <typename T>
__global__ static void k_kv_store(T *dst, const float *src, const int *rows, int dim)
{
    const float *x = src + (size_t)rows[blockIdx.x] * dim;
    T *y = dst + (size_t)blockIdx.x * dim;
    for (int d = threadIdx.x; d < dim; d += blockDim.x) kv_put(&y[d], x[d]);
}

template <typename T>
__global__ static void k_kv_load(float *y, const T *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = kv_to_float(x[i]);
}

/* ---- memory: cudaMalloc until the run's pool is reserved, then the pool ---- */

/* On the emulator under AddressSanitizer (make test SAN=1) every device
 * access is checked: the pool's bytes are unreadable until served and again
 * once freed, so an access past a block served from the pool stops the run
 * as one past a cudaMalloc'd block does.  Nothing in a GPU build. */
static void pool_mark(const void *p, size_t bytes, bool served)
{
#if defined(__SANITIZE_ADDRESS__)
    if (served) __asan_unpoison_memory_region(p, bytes);
    else __asan_poison_memory_region(p, bytes);
#else
    (void)p;
    (void)bytes;
    (void)served;
#endif
}

static bool in_pool(const struct cuda_impl *im, const void *p)
{
    return im->pool_base && (const char *)p >= im->pool_base &&
           (const char *)p < im->pool_base + im->arena.size;
}

float *cuda_alloc(struct backend *be, size_t n_floats)
{
    struct cuda_impl *im = impl_of(be);
    if (n_floats > ((size_t)-1) / sizeof(float)) return NULL;
    size_t bytes = (n_floats ? n_floats : 1) * sizeof(float);
    if (im->pool_base && !im->pool_off) {
        size_t off;
        if (dev_arena_alloc(&im->arena, bytes, &off) != 0) return NULL; /* the pool is full */
        pool_mark(im->pool_base + off, bytes, true);
        return (float *)(im->pool_base + off);
    }
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc == cudaSuccess) return (float *)p;
    /* Out of memory on a healthy context is an answer (NULL: the caller's
     * EB_ERR_NOMEM); anything else is a failure, recorded. */
    cudaError_t after = rc == cudaErrorMemoryAllocation ? state_after_clearing() : rc;
    if (cuda_fault_classify((int)rc, (int)after) != CUDA_FAULT_OOM)
        record_cuda(be, CUDA_FAULT_FAIL, "alloc", after);
    return NULL;
}

void cuda_free(struct backend *be, float *p)
{
    struct cuda_impl *im = impl_of(be);
    if (!p) return;
    if (in_pool(im, p)) {
        /* Queued work may still read the block; a later allocation of it
         * only writes through work queued after that, so no wait is needed. */
        size_t used_before = im->arena.used;
        if (dev_arena_free(&im->arena, (size_t)((char *)p - im->pool_base)) != 0)
            cuda_fail(be, "free", "a pointer the pool never gave out");
        else pool_mark(p, used_before - im->arena.used, false);
        return;
    }
    cuda_ok(be, cudaFree(p), "free");
}

void cuda_upload(struct backend *be, float *dst, const float *src_host, size_t n)
{
    if (n && !failed(be))
        cuda_ok(be, cudaMemcpy(dst, src_host, n * sizeof(float), cudaMemcpyHostToDevice),
                "upload");
}

static void cuda_download(struct backend *be, float *dst_host, const float *src, size_t n)
{
    if (!n) return;
    double t0 = cuda_host_s();
    bool ok = !failed(be) &&
              cuda_ok(be, cudaMemcpy(dst_host, src, n * sizeof(float), cudaMemcpyDeviceToHost),
                      "download");
    cuda_waited(be, t0);
    if (ok) return;
    for (size_t i = 0; i < n; i++) dst_host[i] = NAN; /* a failed backend yields no numbers */
}

/* memmove semantics, as the CPU backend's: cudaMemcpy does not support
 * overlapping ranges (a compaction may move rows onto rows it still reads),
 * so an overlap goes through scratch. */
static void cuda_copy(struct backend *be, float *dst, const float *src, size_t n)
{
    if (!n || dst == src || failed(be)) return;
    size_t bytes = n * sizeof(float);
    if ((uintptr_t)dst < (uintptr_t)(src + n) && (uintptr_t)src < (uintptr_t)(dst + n)) {
        struct cuda_impl *im = impl_of(be);
        if (!grow(be, (void **)&im->d_floats, &im->d_floats_cap, n, sizeof(float), "copy scratch") ||
            !cuda_ok(be, cudaMemcpy(im->d_floats, src, bytes, cudaMemcpyDeviceToDevice), "copy"))
            return;
        src = im->d_floats;
    }
    cuda_ok(be, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy");
}

static void cuda_fill(struct backend *be, float *dst, float value, size_t n)
{
    if (!n || failed(be)) return;
    k_fill<<<blocks_for(n, CUDA_THREADS), CUDA_THREADS>>>(dst, value, n);
    launched(be, "fill");
}

/* Row-major y[m][n] = x[m][k] . w[n][k]^T is, read column-major, the product
 * y^T (n x m) = w^T (n x k, w stored k x n) . x^T (k x m): one cuBLAS call with
 * w transposed and no copies.  A batch of decode rows is m, so every
 * projection is one GEMM whatever the batch. */
void cuda_gemm(struct backend *be, float *y, const float *x, const float *w,
                      const float *bias, int m, int n, int k)
{
    if (m <= 0 || n <= 0 || failed(be)) return;
    float one = 1.0f, beta = 0.0f;
    if (bias) {
        k_bias_rows<<<blocks_for((size_t)m * n, CUDA_THREADS), CUDA_THREADS>>>(y, bias, m, n);
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
    k_rmsnorm<<<rows, CUDA_THREADS>>>(y, x, w, dim, eps);
    launched(be, "rmsnorm");
}

static void cuda_rope(struct backend *be, float *x, int rows, int n_heads, int head_dim,
                      const int *pos, const float *inv_freq, enum rope_pairing pairing)
{
    if (rows <= 0 || n_heads <= 0 || head_dim < 2 || failed(be)) return;
    int half = head_dim / 2;
    /* Both arrays in one reservation: a wrap between them would let the
     * second copy land on the first before the kernel reads it. */
    if (!stage_reserve(be, ((size_t)rows + half) * sizeof(int), 2)) return;
    const int *d_pos = device_ints(be, pos, rows);
    const float *d_freq = (const float *)stage(be, inv_freq, half * sizeof(float));
    if (!d_pos || !d_freq) return;
    size_t total = (size_t)rows * n_heads * half;
    k_rope<<<blocks_for(total, CUDA_THREADS), CUDA_THREADS>>>(x, rows, n_heads, head_dim, d_pos,
                                                             d_freq, pairing == ROPE_PAIR_HALF);
    launched(be, "rope");
}

static void cuda_swiglu(struct backend *be, float *y, const float *gate, const float *up,
                        size_t n)
{
    if (!n || failed(be)) return;
    k_swiglu<<<blocks_for(n, CUDA_THREADS), CUDA_THREADS>>>(y, gate, up, n);
    launched(be, "swiglu");
}

static void cuda_add(struct backend *be, float *y, const float *x, size_t n)
{
    if (!n || failed(be)) return;
    k_add<<<blocks_for(n, CUDA_THREADS), CUDA_THREADS>>>(y, x, n);
    launched(be, "add");
}

/* Blocks run in any order, so a gather whose output overlaps its input goes
 * through a staging buffer (the CPU backend allows that overlap too).  This
 * is also the compaction gather of kvcache_compact: kept rows move on the
 * device, the cache never visits the host. */
void cuda_gather(struct backend *be, float *y, const float *x, const int *rows, int n,
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
    cuda_gather(be, y, table, ids, n, dim, "embed");
}

static void cuda_gather_rows(struct backend *be, float *y, const float *x, const int *rows,
                             int n, int dim)
{
    cuda_gather(be, y, x, rows, n, dim, "gather_rows");
}

/* be->kv_store: f32 rows (device) gathered by host row indices into a typed
 * cache; dst must not overlap src (a cache and the activations never do). */
static void cuda_kv_store(struct backend *be, void *dst, enum kv_type type, const float *src,
                          const int *rows, int n, int dim)
{
    if (n <= 0 || dim <= 0 || failed(be)) return;
    if (!kv_type_known(type)) {
        cuda_fail(be, "kv store", "unknown cache type");
        return;
    }
    const int *d_rows = device_ints(be, rows, n);
    if (!d_rows) return;
    if (type == KV_BF16)
        k_kv_store<__nv_bfloat16><<<n, 128>>>((__nv_bfloat16 *)dst, src, d_rows, dim);
    else if (type == KV_F16)
        k_kv_store<__half><<<n, 128>>>((__half *)dst, src, d_rows, dim);
    else
        k_kv_store<float><<<n, 128>>>((float *)dst, src, d_rows, dim);
    launched(be, "kv store");
}

/* be->kv_load: n typed elements to f32 (both device memory). */
static void cuda_kv_load(struct backend *be, float *dst, const void *src, enum kv_type type,
                         size_t n)
{
    if (!n || failed(be)) return;
    if (!kv_type_known(type)) {
        cuda_fail(be, "kv load", "unknown cache type");
        return;
    }
    unsigned nb = blocks_for(n, CUDA_THREADS);
    if (type == KV_BF16)
        k_kv_load<<<nb, CUDA_THREADS>>>(dst, (const __nv_bfloat16 *)src, n);
    else if (type == KV_F16)
        k_kv_load<<<nb, CUDA_THREADS>>>(dst, (const __half *)src, n);
    else
        k_kv_load<<<nb, CUDA_THREADS>>>(dst, (const float *)src, n);
    launched(be, "kv load");
}

double cuda_host_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cuda_time_mark(struct backend *be)
{
    struct cuda_impl *im = impl_of(be);
    if (failed(be) || !im->ev[0] || !im->ev[1]) return;
    if (cuda_ok(be, cudaEventRecord(im->ev[im->ev_marks % 2]), "time mark")) im->ev_marks++;
}

static double cuda_time_device_s(struct backend *be)
{
    struct cuda_impl *im = impl_of(be);
    if (failed(be) || im->ev_marks < 2) return 0.0;
    cudaEvent_t later = im->ev[(im->ev_marks - 1) % 2], earlier = im->ev[im->ev_marks % 2];
    double t0 = cuda_host_s();
    float ms = 0.0f;
    bool ok = cuda_ok(be, cudaEventSynchronize(later), "time read") &&
              cuda_ok(be, cudaEventElapsedTime(&ms, earlier, later), "time read");
    cuda_waited(be, t0);
    return ok ? 1e-3 * (double)ms : 0.0;
}

static double cuda_time_waited_s(const struct backend *be)
{
    return impl_of(be)->waited_s;
}

static void cuda_destroy(struct backend *be)
{
    if (!be) return;
    struct cuda_impl *im = impl_of(be);
    if (im) {
        cudaDeviceSynchronize(); /* nothing queued may still use what is freed */
        cudaFree(im->d_floats);
        cudaFree(im->d_scores);
        cudaFree(im->d_part);
        cudaFree(im->d_tokens);
        free(im->h_scratch);
        cudaFree(im->d_act16);
        cudaFree(im->pool_base);
        cudaFree(im->stage_dev);
        cudaFreeHost(im->stage_host);
        dev_arena_release(&im->arena);
        for (int i = 0; i < 2; i++)
            if (im->ev[i]) cudaEventDestroy(im->ev[i]);
        if (im->blas) cublasDestroy(im->blas);
        if (im->blas16) cublasDestroy(im->blas16);
        cuda_graph_release(be); /* the recording, and cuBLAS's workspace once cuBLAS is gone */
        free(im);
    }
    free(be);
}

extern "C" int backend_cuda_linked(void)
{
    return 1;
}

extern "C" int backend_cuda_probe(int device, char *msg, size_t msg_size)
{
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        snprintf(msg, msg_size, "cuda: no usable driver or device: %s: %s", cudaGetErrorName(rc),
                 cudaGetErrorString(rc));
        return -1;
    }
    if (device < 0 || device >= count) {
        snprintf(msg, msg_size, "cuda: device %d does not exist (%d found)", device, count);
        return -1;
    }
    snprintf(msg, msg_size, "cuda: device %d usable", device);
    return 0;
}

extern "C" struct backend *backend_cuda_create(int device, struct eb_err *e)
{
    char why[160];
    if (backend_cuda_probe(device, why, sizeof why) != 0) {
        eb_fail(e, "%s", why);
        return NULL;
    }
    cudaError_t rc = cudaSetDevice(device);
    if (rc != cudaSuccess) {
        eb_fail(e, "cuda: cannot use device %d: %s: %s", device, cudaGetErrorName(rc),
                cudaGetErrorString(rc));
        return NULL;
    }
    struct backend *be = (struct backend *)calloc(1, sizeof *be);
    struct cuda_impl *im = (struct cuda_impl *)calloc(1, sizeof *im);
    if (!be || !im) {
        free(be);
        free(im);
        eb_fail_nomem(e, "cuda: out of host memory for the backend");
        return NULL;
    }
    im->device = device;
    be->impl = im;
    be->destroy = cuda_destroy;
    cudaDeviceGetAttribute(&im->n_sm, cudaDevAttrMultiProcessorCount, device);
    if (im->n_sm < 1) im->n_sm = 1;
    cublasStatus_t brc = cublasCreate(&im->blas);
    if (brc != CUBLAS_STATUS_SUCCESS) {
        im->blas = NULL;
        cuda_destroy(be);
        eb_fail(e, "cuda: cuBLAS cannot start on device %d (status %d)", device, (int)brc);
        return NULL;
    }
    /* Plain f32 arithmetic (no TF32 tensor-core shortcut): results must match
     * the CPU backend and the references to f32 rounding. */
    cublasSetMathMode(im->blas, CUBLAS_PEDANTIC_MATH);
    /* 16-bit weights go through a second handle in the default math mode:
     * tensor cores with f32 accumulation (cuda_weight.cu). */
    brc = cublasCreate(&im->blas16);
    if (brc != CUBLAS_STATUS_SUCCESS) {
        im->blas16 = NULL;
        cuda_destroy(be);
        eb_fail(e, "cuda: cuBLAS cannot start on device %d (status %d)", device, (int)brc);
        return NULL;
    }
    /* Every op on the per-thread default stream (the library is compiled
     * with --default-stream per-thread): cuBLAS too, so a step graph records it. */
    if (!blas_ok(be, cublasSetStream(im->blas, cudaStreamPerThread), "cuBLAS stream") ||
        !blas_ok(be, cublasSetStream(im->blas16, cudaStreamPerThread), "cuBLAS stream")) {
        eb_fail(e, "%s", im->fault.msg);
        cuda_destroy(be);
        return NULL;
    }
    /* the device clock (time_mark); without events the clock is off, not the backend */
    for (int i = 0; i < 2; i++)
        if (cudaEventCreate(&im->ev[i]) != cudaSuccess) im->ev[i] = NULL;
    if (!im->ev[0] || !im->ev[1]) cudaGetLastError(); /* clears the error */
    if (!stage_alloc(be, STAGE_INITIAL)) {
        eb_fail(e, "%s", im->fault.msg);
        cuda_destroy(be);
        return NULL;
    }
    be->name = "cuda";
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
    be->kv_store = cuda_kv_store;
    be->kv_load = cuda_kv_load;
    be->window_scores = cuda_window_scores;
    be->pool1d = cuda_pool1d;
    be->key_redundancy = cuda_key_redundancy;
    be->row_range = cuda_row_range;
    be->window_scores_batch = cuda_window_scores_batch;
    be->key_redundancy_batch = cuda_key_redundancy_batch;
    be->head_mean_batch = cuda_head_mean_batch;
    be->last_query_attn_batch = cuda_last_query_attn_batch;
    be->batch_topk = cuda_batch_topk;
    be->kv_gather_batch = cuda_kv_gather_batch;
    be->batch_pads = 1; /* cuda_batch*.cu read score_unit.pad as cpu_score.c masks pads */
    be->sync = cuda_sync;
    be->sample = backend_cuda_sample;
    be->weight_create = cuda_weight_create;
    be->weight_free = cuda_weight_free;
    be->weight_join = cuda_weight_join;
    be->prefers_joined = 1; /* one GEMM and one conversion instead of three */
    if (im->ev[0] && im->ev[1]) { /* else no clock: --stats says so */
        be->time_mark = cuda_time_mark;
        be->time_device_s = cuda_time_device_s;
        be->time_waited_s = cuda_time_waited_s;
    }
    be->layer_in = cuda_layer_in;
    be->layer_out = cuda_layer_out;
    be->matmul = cuda_matmul;
    be->embed_weight = cuda_embed_weight;
    be->embed_weight_dev = cuda_embed_weight_dev;
    cuda_layer_ops_install(be);
    if (cuda_graph_install(be)) {
        eb_fail(e, "%s", im->fault.msg);
        cuda_destroy(be);
        return NULL;
    }
    return be;
}

extern "C" const char *backend_cuda_error(const struct backend *be)
{
    if (!be || !be->impl) return "cuda: no backend";
    const struct cuda_impl *im = (const struct cuda_impl *)be->impl;
    return im->fault.kind != CUDA_FAULT_NONE ? im->fault.msg : NULL;
}

extern "C" int backend_cuda_status(const struct backend *be, struct eb_err *e)
{
    if (!be || !be->impl) return eb_fail(e, "cuda: no backend");
    return cuda_fault_take(&((struct cuda_impl *)be->impl)->fault, e);
}

extern "C" int backend_cuda_mem_info(struct backend *be, size_t *free_bytes, size_t *total_bytes,
                                     struct eb_err *e)
{
    *free_bytes = *total_bytes = 0;
    cudaError_t rc = cudaSetDevice(impl_of(be)->device);
    if (rc == cudaSuccess) rc = cudaMemGetInfo(free_bytes, total_bytes);
    if (rc != cudaSuccess)
        return eb_fail(e, "cuda: cannot read the memory of device %d: %s: %s", impl_of(be)->device,
                       cudaGetErrorName(rc), cudaGetErrorString(rc));
    return 0;
}

extern "C" int backend_cuda_reserve_pool(struct backend *be, const struct kv_pool_need *need,
                                         struct kv_pool_plan *plan, struct eb_err *e)
{
    struct cuda_impl *im = impl_of(be);
    if (im->pool_base) return eb_fail(e, "cuda: the device pool is already reserved");
    size_t free_bytes, total_bytes;
    if (backend_cuda_mem_info(be, &free_bytes, &total_bytes, e)) return -1;
    if (kv_pool_plan(free_bytes, total_bytes, need, plan, e)) return -1;
    void *base = NULL;
    cudaError_t rc = cudaMalloc(&base, plan->pool_bytes);
    if (rc != cudaSuccess) {
        cudaError_t after = rc == cudaErrorMemoryAllocation ? state_after_clearing() : rc;
        if (cuda_fault_classify((int)rc, (int)after) == CUDA_FAULT_OOM)
            return eb_fail_nomem(e, "cuda: cannot reserve the %.2f GiB device pool (%.2f GiB free)",
                                 plan->pool_bytes / 1073741824.0, free_bytes / 1073741824.0);
        record_cuda(be, CUDA_FAULT_FAIL, "reserving the device pool", after);
        return eb_fail(e, "%s", im->fault.msg);
    }
    if (dev_arena_init(&im->arena, plan->pool_bytes, STAGE_ALIGN, e)) {
        cudaFree(base);
        return -1;
    }
    im->pool_base = (char *)base;
    pool_mark(base, plan->pool_bytes, false);
    return 0;
}

extern "C" int backend_cuda_release_pool(struct backend *be, struct eb_err *e)
{
    struct cuda_impl *im = impl_of(be);
    if (!im->pool_base) return 0;
    if (im->arena.used)
        return eb_fail(e, "cuda: the device pool cannot be released: %zu bytes are in use",
                       im->arena.used);
    /* Queued work may still touch freed blocks; a fault it raised is reported. */
    if (!cuda_ok(be, cudaDeviceSynchronize(), "releasing the device pool"))
        return eb_fail(e, "%s", im->fault.msg);
    pool_mark(im->pool_base, im->arena.size, true);
    cudaError_t rc = cudaFree(im->pool_base);
    im->pool_base = NULL;
    dev_arena_release(&im->arena);
    memset(&im->arena, 0, sizeof im->arena);
    if (!cuda_ok(be, rc, "releasing the device pool")) return eb_fail(e, "%s", im->fault.msg);
    return 0;
}

extern "C" int backend_cuda_ensure_pool(struct backend *be, const struct kv_pool_need *need,
                                        struct kv_pool_plan *plan, struct eb_err *e)
{
    struct cuda_impl *im = impl_of(be);
    enum kv_pool_action act;
    size_t size = im->pool_base ? im->arena.size : 0, used = im->pool_base ? im->arena.used : 0;
    memset(plan, 0, sizeof *plan);
    if (kv_pool_decide(size, used, need, &act, e)) return -1;
    if (act == KV_POOL_KEEP) {
        plan->pool_bytes = size;
        plan->max_batch = need->batch;
        return 0;
    }
    if (act == KV_POOL_REPLAN && backend_cuda_release_pool(be, e)) return -1;
    return backend_cuda_reserve_pool(be, need, plan, e);
}

extern "C" void backend_cuda_pool_serve(struct backend *be, int on)
{
    impl_of(be)->pool_off = !on;
}

extern "C" int backend_cuda_check_weights(struct backend *be, size_t weight_bytes,
                                          struct eb_err *e)
{
    size_t free_bytes, total_bytes;
    if (backend_cuda_mem_info(be, &free_bytes, &total_bytes, e)) return -1;
    return cuda_weights_fit(weight_bytes, free_bytes, total_bytes, e);
}

extern "C" void backend_cuda_pool_usage(const struct backend *be, size_t *used, size_t *peak)
{
    const struct cuda_impl *im = (const struct cuda_impl *)be->impl;
    *used = im->pool_base ? im->arena.used : 0;
    *peak = im->pool_base ? im->arena.peak : 0;
}

extern "C" int backend_cuda_attention_batch(struct backend *be, const struct attn_args *a, int n)
{
    return cuda_attention_batch(be, a, n);
}

extern "C" int backend_cuda_argmax(struct backend *be, int *tokens, const float *logits,
                                   int n_rows, int n_vocab)
{
    struct cuda_impl *im = impl_of(be);
    if (!tokens || !logits || n_rows < 1 || n_vocab < 1 || failed(be)) return -1;
    if (!grow(be, (void **)&im->d_tokens, &im->d_tokens_cap, (size_t)n_rows, sizeof(int),
              "sampled ids"))
        return -1;
    k_argmax<<<n_rows, 1024>>>(im->d_tokens, logits, n_vocab);
    if (!launched(be, "argmax")) return -1;
    return cuda_ok(be, cudaMemcpy(tokens, im->d_tokens, (size_t)n_rows * sizeof(int),
                                  cudaMemcpyDeviceToHost),
                   "download ids")
               ? 0
               : -1;
}
