/* cuda_split_rope.h - one head of a joined q/k/v product made ready: bias,
 * per-head norm (qwen3) and RoPE, as the single ops compute them.  Shared by
 * the fused layer_in (cuda_fused.cu: into q, k and v) and its form that
 * also appends the new K/V rows to the layer's caches (cuda_layer.cu: RoPE
 * fused with the KV append). */
#ifndef EB_CUDA_SPLIT_ROPE_H
#define EB_CUDA_SPLIT_ROPE_H

#include "kernels/cuda/cuda_internal.h"

struct split_args {
    float *q, *k, *v;
    const float *qkv, *bias;          /* bias [n_head + 2 n_kv][hd] or NULL */
    const float *q_norm, *k_norm;     /* both or neither */
    const int *pos;
    const float *inv_freq;
    int n_head, n_kv, hd, half_pairing;
    float eps;
};

enum split_kind { SPLIT_Q = 0, SPLIT_K = 1, SPLIT_V = 2 };

/* Called by every thread of the block for head h of row r: leaves the head,
 * ready, in shared `head` (hd floats; `red` is block_reduce's scratch) and
 * returns which of q, k, v it is and, in *idx, its head index there. */
__device__ static inline int split_head(const split_args &a, int r, int h, float *head,
                                        float *red, int *idx)
{
    int H = a.n_head + 2 * a.n_kv, hd = a.hd;
    const float *src = a.qkv + ((size_t)r * H + h) * hd;
    for (int j = threadIdx.x; j < hd; j += blockDim.x)
        head[j] = a.bias ? src[j] + a.bias[(size_t)h * hd + j] : src[j];
    __syncthreads();
    if (h >= a.n_head + a.n_kv) {
        *idx = h - a.n_head - a.n_kv;
        return SPLIT_V;
    }
    int is_k = h >= a.n_head;
    *idx = is_k ? h - a.n_head : h;
    const float *norm = is_k ? a.k_norm : a.q_norm;
    if (norm) { /* as k_rmsnorm over one head */
        float ss = 0.0f;
        for (int j = threadIdx.x; j < hd; j += blockDim.x) ss += head[j] * head[j];
        ss = block_reduce(ss, red, false);
        float inv = 1.0f / sqrtf(ss / hd + a.eps);
        for (int j = threadIdx.x; j < hd; j += blockDim.x) head[j] = norm[j] * (head[j] * inv);
        __syncthreads();
    }
    int half = hd / 2;
    for (int i = threadIdx.x; i < half; i += blockDim.x) { /* as k_rope; a pair per thread */
        float angle = (float)a.pos[r] * a.inv_freq[i];
        float c = cosf(angle), s = sinf(angle);
        int ia = a.half_pairing ? i : 2 * i;
        int ib = a.half_pairing ? i + half : 2 * i + 1;
        float x0 = head[ia], x1 = head[ib];
        head[ia] = x0 * c - x1 * s;
        head[ib] = x1 * c + x0 * s;
    }
    __syncthreads();
    return is_k ? SPLIT_K : SPLIT_Q;
}

/* Where head idx of kind `kind` of row r goes in q, k or v. */
__device__ static inline float *split_dst(const split_args &a, int kind, int r, int idx)
{
    if (kind == SPLIT_Q) return a.q + ((size_t)r * a.n_head + idx) * a.hd;
    return (kind == SPLIT_K ? a.k : a.v) + ((size_t)r * a.n_kv + idx) * a.hd;
}

/* The fused layer_in's last launch when it also appends (cuda_layer.cu):
 * the heads of `rows` rows made ready and written to q, k and v, the new K/V
 * rows appended to layer `layer` of the table's caches and the queries to
 * their rings, as kv_append does after k_split_rope; then the lengths grow.
 * 0, or -1 with the failure recorded (no room, bad arguments). */
int cuda_rope_append(struct backend *be, struct kv_table *t, int layer, const split_args *s,
                     int rows, unsigned threads);

#endif
