/* cuda_fused.cu - a layer's projections as few launches (backend.layer_in,
 * backend.layer_out) over joined 16-bit weights (weight_join).
 *
 * The single ops cost, per layer: rmsnorm; q, k and v each as a conversion
 * of the same activations to 16 bits plus a GEMM (plus a bias fill); rope of
 * q and of k, each staging positions and frequencies through the host ring;
 * then o, add, rmsnorm, gate and up (two conversions, two GEMMs), swiglu,
 * down, add: about 25 launches and 4 host copies.  Here:
 *   layer_in:  rmsnorm written straight to 16 bits; one GEMM over wqkv;
 *              one kernel that adds the bias, norms q and k per head
 *              (qwen3), rotates them and splits q, k and v: 3 launches, and
 *              the positions and frequencies are already in device memory
 *              (layer_in_args.pos_dev, inv_freq_dev); given the KV table
 *              (layer_in_args.tab), that kernel also stores K, V and the
 *              queries' ring rows where kv_append would (cuda_layer.cu's
 *              cuda_rope_append), and the lengths grow: 4 launches with the
 *              append instead of 5;
 *   layer_out: att to 16 bits; o's GEMM accumulating into x (beta = 1: the
 *              residual add is the GEMM's epilogue); rmsnorm to 16 bits; one
 *              GEMM over w_gate_up; swiglu written to 16 bits; down's GEMM
 *              accumulating into x: 6 launches.
 * The arithmetic per element is the single ops' (the same f32 formulas, one
 * rounding to 16 bits where the single ops round before their GEMM), so the
 * two paths differ only by the GEMMs' own summation order for a wider
 * output (cuda_selftest's "fused layer" cases bound it).  Anything else (f32
 * weights, parts that were not joined) returns 1: model/ runs the single
 * ops.  EVICTBENCH_CUDA_FUSED=0 turns it off, for comparisons. */
#include "kernels/cuda/cuda_split_rope.h"

#include <stdlib.h>
#include <string.h>

/* One block per row: y16 = 16-bit(w * (x * inv)), as k_rmsnorm then k_f32_to_16. */
__global__ static void k_rmsnorm_to16(void *y16, const float *x, const float *w, int dim,
                                      float eps, int bf16)
{
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * dim;
    size_t base = (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) ss += xr[j] * xr[j];
    ss = block_reduce(ss, red, false);
    float inv = 1.0f / sqrtf(ss / dim + eps);
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float v = w[j] * (xr[j] * inv);
        if (bf16) ((__nv_bfloat16 *)y16)[base + j] = __float2bfloat16_rn(v);
        else ((__half *)y16)[base + j] = __float2half_rn(v);
    }
}

__global__ static void k_to16(void *y, const float *x, size_t n, int bf16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (bf16) ((__nv_bfloat16 *)y)[i] = __float2bfloat16_rn(x[i]);
        else ((__half *)y)[i] = __float2half_rn(x[i]);
    }
}

/* One block per (row, head of q, k or v): bias, per-head norm, RoPE, and the
 * head's place in q, k or v.  Shared: the head's hd floats. */
__global__ static void k_split_rope(struct split_args a)
{
    extern __shared__ float head[];
    __shared__ float red[32];
    int H = a.n_head + 2 * a.n_kv, idx;
    int r = blockIdx.x / H, h = blockIdx.x % H;
    int kind = split_head(a, r, h, head, red, &idx);
    float *dst = split_dst(a, kind, r, idx);
    for (int j = threadIdx.x; j < a.hd; j += blockDim.x) dst[j] = head[j];
}

/* y16[r][c] = 16-bit(silu(gu[r][c]) * gu[r][n_ff + c]), as k_swiglu then k_f32_to_16. */
__global__ static void k_swiglu_to16(void *y16, const float *gu, int rows, int n_ff, int bf16)
{
    size_t n = (size_t)rows * n_ff;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / n_ff, c = i % n_ff;
        float g = gu[r * 2 * n_ff + c], u = gu[r * 2 * n_ff + n_ff + c];
        float v = g / (1.0f + expf(-g)) * u;
        if (bf16) ((__nv_bfloat16 *)y16)[i] = __float2bfloat16_rn(v);
        else ((__half *)y16)[i] = __float2half_rn(v);
    }
}

static bool fused_off(void)
{
    const char *s = getenv("EVICTBENCH_CUDA_FUSED");
    return s && s[0] == '0';
}

/* EVICTBENCH_CUDA_ROPE_APPEND=0: layer_in asked to append runs k_split_rope
 * and then kv_append's kernels, as before the two were fused. */
static bool rope_append_off(void)
{
    const char *s = getenv("EVICTBENCH_CUDA_ROPE_APPEND");
    return s && s[0] == '0';
}

static bool is16(const struct weight *w, enum weight_type held)
{
    return w && w->held == held && (held == WEIGHT_BF16 || held == WEIGHT_F16);
}

/* y[m][w->rows] = x16[m][w->cols] . W^T + beta * y, f32 accumulation. */
static bool gemm16(struct backend *be, float *y, const void *x16, const struct weight *w, int m,
                   float beta)
{
    struct cuda_impl *im = impl_of(be);
    float one = 1.0f;
    cudaDataType_t t = w->held == WEIGHT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    return blas_ok(be, cublasGemmEx(im->blas16, CUBLAS_OP_T, CUBLAS_OP_N, w->rows, m, w->cols,
                                    &one, w->data, t, w->cols, x16, t, w->cols, &beta, y,
                                    CUDA_R_32F, w->rows, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT),
                   "fused gemm 16-bit");
}

int cuda_layer_in(struct backend *be, const struct layer_in_args *a)
{
    const struct weight *w = a->wqkv;
    int hd = a->head_dim, H = a->n_head + 2 * a->n_kv;
    if (fused_off() || a->rows < 1 || !w || !is16(w, w->held) || !a->pos_dev ||
        !a->inv_freq_dev || !a->qkv_out || w->cols != a->n_embd || w->rows != H * hd ||
        hd % 2 != 0 || hd > 1024 || (!a->q_norm) != (!a->k_norm))
        return 1;
    /* a recorded failure: the step's outputs are not read (an append says it) */
    if (failed(be)) return a->tab ? -1 : 0;
    struct split_args s = {a->q, a->k, a->v, a->qkv_out, a->bqkv, a->q_norm, a->k_norm,
                           a->pos_dev, a->inv_freq_dev, a->n_head, a->n_kv, hd,
                           a->pairing == ROPE_PAIR_HALF, a->eps};
    unsigned threads = hd >= 128 ? 128 : 64;
    bool fuse_append = a->tab && !rope_append_off();
    if (graph_mode(be) == STEP_REPLAY) { /* the step graph holds the launches */
        if (!a->tab) return 0;
        /* the host's share of the append (the length mirror) still runs */
        return fuse_append ? cuda_rope_append(be, a->tab, a->layer, &s, a->rows, threads)
                           : be->kv_append(be, a->tab, a->layer, a->k, a->v, a->q);
    }
    struct cuda_impl *im = impl_of(be);
    int bf16 = w->held == WEIGHT_BF16;
    if (!grow(be, &im->d_act16, &im->d_act16_cap, (size_t)a->rows * a->n_embd, 2,
              "16-bit activations"))
        return a->tab ? -1 : 0;
    k_rmsnorm_to16<<<a->rows, CUDA_THREADS>>>(im->d_act16, a->x, a->attn_norm, a->n_embd, a->eps,
                                             bf16);
    if (!launched(be, "rmsnorm to 16 bits") || !gemm16(be, a->qkv_out, im->d_act16, w, a->rows, 0.0f))
        return a->tab ? -1 : 0;
    if (fuse_append) return cuda_rope_append(be, a->tab, a->layer, &s, a->rows, threads);
    k_split_rope<<<(unsigned)a->rows * H, threads, (size_t)hd * sizeof(float)>>>(s);
    if (!launched(be, "qkv split + rope")) return a->tab ? -1 : 0;
    return a->tab ? be->kv_append(be, a->tab, a->layer, a->k, a->v, a->q) : 0;
}

int cuda_layer_out(struct backend *be, const struct layer_out_args *a)
{
    const struct weight *gu = a->w_gate_up;
    if (fused_off() || a->rows < 1 || !gu || !is16(gu, gu->held) || !is16(a->wo, gu->held) ||
        !is16(a->w_down, gu->held) || gu->rows != 2 * a->n_ff || gu->cols != a->n_embd ||
        a->wo->rows != a->n_embd || a->w_down->rows != a->n_embd || a->w_down->cols != a->n_ff)
        return 1;
    if (failed(be) || graph_mode(be) == STEP_REPLAY) return 0;
    struct cuda_impl *im = impl_of(be);
    int bf16 = gu->held == WEIGHT_BF16, m = a->rows;
    size_t widest = (size_t)a->n_ff > (size_t)a->wo->cols ? (size_t)a->n_ff : (size_t)a->wo->cols;
    if (widest < (size_t)a->n_embd) widest = (size_t)a->n_embd;
    if (!grow(be, &im->d_act16, &im->d_act16_cap, (size_t)m * widest, 2, "16-bit activations"))
        return 0;
    size_t n_att = (size_t)m * a->wo->cols;
    k_to16<<<blocks_for(n_att, CUDA_THREADS), CUDA_THREADS>>>(im->d_act16, a->att, n_att, bf16);
    if (!launched(be, "attention to 16 bits") || !gemm16(be, a->x, im->d_act16, a->wo, m, 1.0f))
        return 0;
    k_rmsnorm_to16<<<m, CUDA_THREADS>>>(im->d_act16, a->x, a->ffn_norm, a->n_embd, a->eps, bf16);
    if (!launched(be, "ffn rmsnorm to 16 bits") || !gemm16(be, a->hb, im->d_act16, gu, m, 0.0f))
        return 0;
    size_t n_h = (size_t)m * a->n_ff;
    k_swiglu_to16<<<blocks_for(n_h, CUDA_THREADS), CUDA_THREADS>>>(im->d_act16, a->hb, m, a->n_ff,
                                                                  bf16);
    if (!launched(be, "swiglu to 16 bits")) return 0;
    gemm16(be, a->x, im->d_act16, a->w_down, m, 1.0f);
    return 0;
}
