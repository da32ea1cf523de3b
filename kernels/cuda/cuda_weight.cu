/* cuda_weight.cu - typed weights on the device (struct weight, matmul,
 * embed_weight of kernels/backend.h).
 *
 * What the device holds:
 *   - as_f32 (exact mode): f32, whatever the file has; matmul is the
 *     pedantic f32 cuBLAS gemm of the exactness checks.
 *   - F32 tensors: f32 (the file's precision; nothing is gained by rounding
 *     them, and the tiny fixtures stay exact).
 *   - F16 tensors: f16; BF16 tensors: bf16, as stored.
 *   - quantized GGUF tensors: dequantized at upload (on the host, a few
 *     rows at a time, then rounded to bf16 on the device), so every 16-bit
 *     product is one tensor-core GEMM.
 * A 16-bit matmul rounds the activations to the weights' type (bf16 keeps
 * the f32 range; f16 saturates at 65504, which f16-trained models respect)
 * and multiplies with f32 accumulation and an f32 result: cublasGemmEx,
 * one call per projection whatever the batch, so batched decode reads each
 * weight once per step. */
#include "kernels/cuda/cuda_internal.h"

extern "C" {
#include "kernels/quant.h"
}

#include <cuda_fp16.h>

#include <stdlib.h>
#include <string.h>

__global__ static void k_f32_to_16(void *y, const float *x, size_t n, int bf16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (bf16) ((__nv_bfloat16 *)y)[i] = __float2bfloat16_rn(x[i]);
        else ((__half *)y)[i] = __float2half_rn(x[i]);
    }
}

__global__ static void k_bias_rows16(float *y, const float *bias, int m, int n)
{
    size_t total = (size_t)m * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = bias[i % n];
}

/* One block per id: y[i] = row ids[i] of a 16-bit table, in f32. */
__global__ static void k_gather16(float *y, const void *table, const int *ids, int dim, int bf16)
{
    size_t src = (size_t)ids[blockIdx.x] * dim;
    float *dst = y + (size_t)blockIdx.x * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        dst[j] = bf16 ? __bfloat162float(((const __nv_bfloat16 *)table)[src + j])
                      : __half2float(((const __half *)table)[src + j]);
}

static size_t held_elem_bytes(enum weight_type held)
{
    return held == WEIGHT_F32 ? 4 : 2;
}

/* Dequantizes `host` a slab of rows at a time into f32, uploads the slab
 * and rounds it to bf16 into dst on the device. */
static bool upload_dequantized(struct backend *be, void *dst, enum weight_type type, int rows,
                               int cols, const void *host)
{
    size_t row_bytes = quant_row_bytes((int)type, cols);
    int slab = (int)(((size_t)16 << 20) / ((size_t)cols * sizeof(float))); /* 64 MiB of f32 */
    if (slab < 1) slab = 1;
    if (slab > rows) slab = rows;
    size_t slab_n = (size_t)slab * cols;
    float *h = (float *)malloc(slab_n * sizeof(float));
    float *d = (float *)float_scratch(be, slab_n * sizeof(float), "weight upload");
    bool ok = h && d;
    for (int r0 = 0; ok && r0 < rows; r0 += slab) {
        int nr = rows - r0 < slab ? rows - r0 : slab;
        size_t n = (size_t)nr * cols;
        ok = quant_dequantize((int)type, (const char *)host + (size_t)r0 * row_bytes, h,
                              (int64_t)n) == 0 &&
             cuda_ok(be, cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice),
                     "weight upload");
        if (!ok) break;
        k_f32_to_16<<<blocks_for(n, CUDA_THREADS), CUDA_THREADS>>>(
            (__nv_bfloat16 *)dst + (size_t)r0 * cols, d, n, 1);
        ok = launched(be, "weight to bf16");
    }
    free(h);
    /* The slab buffer is reused by the next weight: the rounding must be done. */
    return ok && cuda_ok(be, cudaDeviceSynchronize(), "weight upload");
}

/* f32 from any type, for the exact mode, a slab of rows at a time. */
static bool upload_as_f32(struct backend *be, float *dst, enum weight_type type, int rows,
                          int cols, const void *host)
{
    size_t row_bytes = quant_row_bytes((int)type, cols);
    int slab = (int)(((size_t)16 << 20) / ((size_t)cols * sizeof(float)));
    if (slab < 1) slab = 1;
    if (slab > rows) slab = rows;
    float *h = (float *)malloc((size_t)slab * cols * sizeof(float));
    bool ok = h != NULL;
    for (int r0 = 0; ok && r0 < rows; r0 += slab) {
        int nr = rows - r0 < slab ? rows - r0 : slab;
        size_t n = (size_t)nr * cols;
        ok = quant_dequantize((int)type, (const char *)host + (size_t)r0 * row_bytes, h,
                              (int64_t)n) == 0 &&
             cuda_ok(be, cudaMemcpy(dst + (size_t)r0 * cols, h, n * sizeof(float),
                                    cudaMemcpyHostToDevice),
                     "weight upload");
    }
    free(h);
    return ok;
}

struct weight *cuda_weight_create(struct backend *be, enum weight_type type, int rows, int cols,
                                  const void *host, int borrow, int as_f32)
{
    (void)borrow; /* the bytes are copied to the device either way */
    if (rows <= 0 || cols <= 0 || !host || failed(be)) return NULL;
    size_t row_bytes = quant_row_bytes((int)type, cols);
    if (row_bytes == 0 || !quant_type_supported((int)type)) return NULL;
    enum weight_type held = WEIGHT_BF16;
    if (as_f32 || type == WEIGHT_F32) held = WEIGHT_F32;
    else if (type == WEIGHT_F16) held = WEIGHT_F16;
    size_t n = (size_t)rows * cols, bytes = n * held_elem_bytes(held);
    struct weight *w = (struct weight *)calloc(1, sizeof *w);
    void *d = w ? cuda_alloc(be, (bytes + sizeof(float) - 1) / sizeof(float)) : NULL;
    if (!d) {
        free(w);
        return NULL; /* out of (device or host) memory: the caller reports it */
    }
    bool ok;
    if (held == type) /* F32, F16 or BF16 as stored: the bytes go up unchanged */
        ok = cuda_ok(be, cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), "weight upload");
    else if (held == WEIGHT_F32)
        ok = upload_as_f32(be, (float *)d, type, rows, cols, host);
    else
        ok = upload_dequantized(be, d, type, rows, cols, host);
    if (!ok) {
        cuda_free(be, (float *)d);
        free(w);
        return NULL;
    }
    w->type = type;
    w->held = held;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = (size_t)cols * held_elem_bytes(held);
    w->bytes = bytes;
    w->data = d;
    return w;
}

void cuda_weight_free(struct backend *be, struct weight *w)
{
    if (!w) return;
    if (!w->view_of) cuda_free(be, (float *)w->data);
    free(w);
}

/* Parts of one held type and width (a GGUF's mixed Q4_K / Q6_K projections
 * are all bf16 here) are copied into one device block, on the device. */
struct weight *cuda_weight_join(struct backend *be, struct weight *const *parts, int n)
{
    if (n < 1 || failed(be)) return NULL;
    size_t total = 0;
    int rows = 0;
    for (int i = 0; i < n; i++) {
        const struct weight *p = parts[i];
        if (!p || p->view_of || !p->bytes || p->held != parts[0]->held ||
            p->cols != parts[0]->cols || p->rows > 0x7fffffff - rows)
            return NULL;
        rows += p->rows;
        total += p->bytes;
    }
    struct weight *w = (struct weight *)calloc(1, sizeof *w);
    char *d = w ? (char *)cuda_alloc(be, (total + sizeof(float) - 1) / sizeof(float)) : NULL;
    if (!d) {
        free(w);
        return NULL; /* the parts stay as they are: the model runs them apart */
    }
    size_t off = 0;
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        ok = cuda_ok(be, cudaMemcpy(d + off, parts[i]->data, parts[i]->bytes,
                                    cudaMemcpyDeviceToDevice), "weight join");
        off += parts[i]->bytes;
    }
    if (!ok) {
        cuda_free(be, (float *)d);
        free(w);
        return NULL;
    }
    *w = *parts[0];
    w->rows = rows;
    w->bytes = total;
    w->data = d;
    off = 0;
    for (int i = 0; i < n; i++) {
        struct weight *p = parts[i];
        if (p->type != w->type) w->type = w->held;
        cuda_free(be, (float *)p->data);
        p->data = d + off;
        off += p->bytes;
        p->bytes = 0;
        p->view_of = w;
    }
    return w;
}

void cuda_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                 const float *bias, int m)
{
    if (!w || m <= 0 || failed(be)) return;
    if (w->held == WEIGHT_F32) {
        cuda_gemm(be, y, x, (const float *)w->data, bias, m, w->rows, w->cols);
        return;
    }
    struct cuda_impl *im = impl_of(be);
    int bf16 = w->held == WEIGHT_BF16;
    size_t n_x = (size_t)m * w->cols;
    if (!grow(be, &im->d_act16, &im->d_act16_cap, n_x, 2, "16-bit activations")) return;
    k_f32_to_16<<<blocks_for(n_x, CUDA_THREADS), CUDA_THREADS>>>(im->d_act16, x, n_x, bf16);
    if (!launched(be, "activations to 16 bits")) return;
    float one = 1.0f, beta = 0.0f;
    if (bias) {
        k_bias_rows16<<<blocks_for((size_t)m * w->rows, CUDA_THREADS), CUDA_THREADS>>>(
            y, bias, m, w->rows);
        if (!launched(be, "matmul bias")) return;
        beta = 1.0f;
    }
    /* As cuda_gemm: y^T (rows x m) = W^T-as-stored (rows x cols) . x^T (cols x m). */
    cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    blas_ok(be, cublasGemmEx(im->blas16, CUBLAS_OP_T, CUBLAS_OP_N, w->rows, m, w->cols, &one,
                             w->data, t, w->cols, im->d_act16, t, w->cols, &beta, y,
                             CUDA_R_32F, w->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "gemm 16-bit");
}

void cuda_embed_weight(struct backend *be, float *y, const struct weight *w, const int *ids,
                       int n)
{
    if (!w || n <= 0 || failed(be)) return;
    if (w->held == WEIGHT_F32) {
        cuda_gather(be, y, (const float *)w->data, ids, n, w->cols, "embed");
        return;
    }
    const int *d_ids = (const int *)stage(be, ids, (size_t)n * sizeof(int));
    if (!d_ids) return;
    k_gather16<<<n, 128>>>(y, w->data, d_ids, w->cols, w->held == WEIGHT_BF16);
    launched(be, "embed 16-bit");
}

/* One block per id, ids already in device memory: y[i] = row ids[i] of an f32 table. */
__global__ static void k_gather32(float *y, const float *table, const int *ids, int dim)
{
    const float *src = table + (size_t)ids[blockIdx.x] * dim;
    float *dst = y + (size_t)blockIdx.x * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = src[j];
}

void cuda_embed_weight_dev(struct backend *be, float *y, const struct weight *w,
                           const int *ids_dev, int n)
{
    if (!w || n <= 0 || failed(be) || graph_mode(be) == STEP_REPLAY) return;
    if (w->held == WEIGHT_F32)
        k_gather32<<<n, 128>>>(y, (const float *)w->data, ids_dev, w->cols);
    else
        k_gather16<<<n, 128>>>(y, w->data, ids_dev, w->cols, w->held == WEIGHT_BF16);
    launched(be, "embed from device ids");
}
