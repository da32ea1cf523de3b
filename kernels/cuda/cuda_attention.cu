/* cuda_attention.cu - causal GQA attention of new queries over one
 * sequence's cache, for caches stored in f32, f16 or bf16 (attn_args.kv_type;
 * f32 arithmetic).
 *
 * The flash kernel (no probabilities asked for; head_dim 64, 128 or 256;
 * at most 8 query heads per kv head) keeps every score in registers: a warp
 * scores 32 keys at a time, one key per lane, for all the query heads of a
 * kv head at once (so each key and value is read once per GQA group, not once
 * per query head), keeps an online softmax per head, and accumulates the
 * values with lanes over head_dim.  Nothing of size L x L exists anywhere.
 *   - Decode (at most 4 queries): the 4 warps of a block share one query
 *     and split its keys; blocks split the keys further (split-K, flash-
 *     decoding), each writing (max, sum, unnormalised output) partials that
 *     k_flash_combine merges, so a batch-1 step still fills the GPU.
 *   - Prefill: each warp owns one query and the block's 4 consecutive
 *     queries walk the same keys (one L2-resident stream per block).
 * Per-head lengths (compacted caches) and the pad slot mask are honoured as
 * in struct attn_args: query i of n_new sees slots [0, kv_len - n_new + i],
 * masked slots get no weight, a query that sees nothing outputs zeros.
 *
 * The general kernel covers the rest (probabilities requested, other head
 * sizes or groups): scores in a [n_head][n_new][cap] plane (the probs array
 * itself, or scratch), as the probabilities must be written anyway. */
#include "kernels/cuda/cuda_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_flash.h"

/* The result of (query i of sequence sq, head h, split) for dimension d: the
 * output when there is one split, else the partial (O unnormalised, M, L). */
__device__ static inline void flash_write(const flash_params &p, const flash_seq &sq, int i, int h,
                                          int split, int d, int hd, float M, float L, float O)
{
    if (p.n_split == 1) {
        /* no weight at all gives zeros; a NaN sum (a NaN score) stays NaN */
        sq.out[((size_t)i * p.n_head + h) * hd + d] = L == 0.0f ? 0.0f : O / L;
        return;
    }
    float *pp = p.part + (((size_t)(sq.row0 + i) * p.n_head + h) * p.n_split + split) * (hd + 2);
    pp[d] = O;
    if (d == 0) {
        pp[hd] = M;
        pp[hd + 1] = L;
    }
}

/* grid (n_kv, n_split, blocks of all sequences), FLASH_WARPS warps; block z
 * belongs to sequence zmap[z] and covers its queries from (z - z0) * Q on.
 * Q = 1: the warps share one query and take turns over 32-key tiles; Q =
 * FLASH_WARPS: warp w owns the block's query w. */
template <typename T, int HD, int Q>
__global__ static void __launch_bounds__(FLASH_WARPS * 32) k_flash(const flash_params p)
{
    constexpr int E = HD / 32; /* output dimensions per lane */
    constexpr int MG = FLASH_MAX_GROUP;
    extern __shared__ float sm[];
    const int kvh = blockIdx.x, split = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = p.group, h0 = kvh * G;
    const flash_seq &sq = p.seqs[p.zmap[blockIdx.z]];
    const int n_new = sq.n_new, cap = sq.cap, q_first = (blockIdx.z - sq.z0) * Q;
    const int qslot = Q == 1 ? 0 : warp;
    const int i = q_first + qslot;

    for (int t = threadIdx.x; t < Q * G * HD; t += blockDim.x) {
        int qs = t / (G * HD), r = t % (G * HD), qi = q_first + qs;
        sm[qs * MG * HD + r] =
            qi < n_new ? sq.q[(size_t)qi * p.n_head * HD + (size_t)h0 * HD + r] : 0.0f;
    }
    __syncthreads();
    const float *qsm = sm + qslot * MG * HD;

    int n_vis = 0;
    if (i < n_new) {
        n_vis = sq.kv_len[kvh] - n_new + i + 1;
        n_vis = n_vis < 0 ? 0 : (n_vis > cap ? cap : n_vis);
    }
    int kps = p.keys_per_split;
    if (Q == 1 && p.dyn_keys_min > 0) { /* this query's keys over the fixed grid */
        const int per = (n_vis + p.n_split - 1) / p.n_split;
        kps = (per + p.dyn_keys_min - 1) / p.dyn_keys_min * p.dyn_keys_min;
    }
    const int s0 = split * kps;
    const int s1 = min(s0 + kps, n_vis);
    float m[MG], l[MG], o[MG][E];
#pragma unroll
    for (int g = 0; g < MG; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) o[g][e] = 0.0f;
    }
    const T *K = (const T *)sq.k + (size_t)kvh * cap * HD;
    const T *V = (const T *)sq.v + (size_t)kvh * cap * HD;
    const unsigned char *mk = sq.mask ? sq.mask + (size_t)kvh * cap : nullptr;
    const int first = s0 + (Q == 1 ? warp * FLASH_TILE : 0);
    const int step = Q == 1 ? FLASH_WARPS * FLASH_TILE : FLASH_TILE;

    for (int j0 = first; j0 < s1; j0 += step) { /* uniform over the warp */
        const int j = j0 + lane;
        const bool valid = j < s1 && !(mk && mk[j]);
        float s[MG];
#pragma unroll
        for (int g = 0; g < MG; g++) s[g] = 0.0f;
        if (valid) {
            const T *kj = K + (size_t)j * HD;
            for (int d = 0; d < HD; d += 8) {
                float kf[8];
                kv_load8(kj + d, kf);
#pragma unroll
                for (int g = 0; g < MG; g++) {
                    if (g >= G) break;
                    const float *qg = qsm + g * HD + d; /* one address for the warp: broadcast */
#pragma unroll
                    for (int e = 0; e < 8; e++) s[g] += qg[e] * kf[e];
                }
            }
        }
        float pr[MG];
#pragma unroll
        for (int g = 0; g < MG; g++) {
            pr[g] = 0.0f;
            if (g >= G) continue;
            float sc = valid ? s[g] * p.scale : -INFINITY;
            float tmax = warp_max_all(sc);
            if (tmax == -INFINITY) continue; /* nothing visible in this tile */
            float mnew = fmaxf(m[g], tmax);
            float corr = expf(m[g] - mnew); /* 0 while nothing was seen */
            pr[g] = valid ? expf(sc - mnew) : 0.0f;
            l[g] = l[g] * corr + warp_sum_all(pr[g]);
#pragma unroll
            for (int e = 0; e < E; e++) o[g][e] *= corr;
            m[g] = mnew;
        }
        const int nt = min(FLASH_TILE, s1 - j0);
        for (int jj = 0; jj < nt; jj++) {
            const T *vj = V + (size_t)(j0 + jj) * HD + lane * E;
            float vv[E];
#pragma unroll
            for (int e = 0; e < E; e++) vv[e] = kv_to_float(vj[e]);
#pragma unroll
            for (int g = 0; g < MG; g++) {
                if (g >= G) break;
                float pj = __shfl_sync(0xffffffffu, pr[g], jj);
                if (pj == 0.0f) continue; /* a masked slot: skipped, as on the CPU (0 * inf) */
#pragma unroll
                for (int e = 0; e < E; e++) o[g][e] += pj * vv[e];
            }
        }
    }

    if (Q != 1) { /* the warp holds its query's whole result */
        if (i >= n_new) return;
        /* g bounded at compile time, so o, m and l stay in registers */
#pragma unroll
        for (int g = 0; g < MG; g++) {
            if (g >= G) break;
#pragma unroll
            for (int e = 0; e < E; e++)
                flash_write(p, sq, i, h0 + g, split, lane * E + e, HD, m[g], l[g], o[g][e]);
        }
        return;
    }
    /* Merge the warps' online softmaxes: rescale each to the common max. */
    __syncthreads(); /* the queries in sm are no longer read */
    float *cm = sm;  /* [FLASH_WARPS][MG][HD + 2] */
#pragma unroll
    for (int g = 0; g < MG; g++) {
        if (g >= G) break;
        float *row = cm + ((size_t)warp * MG + g) * (HD + 2);
#pragma unroll
        for (int e = 0; e < E; e++) row[lane * E + e] = o[g][e];
        if (lane == 0) {
            row[HD] = m[g];
            row[HD + 1] = l[g];
        }
    }
    __syncthreads();
    for (int t = threadIdx.x; t < G * HD; t += blockDim.x) {
        int g = t / HD, d = t % HD;
        float M = -INFINITY, L = 0.0f, O = 0.0f;
        bool nan = false; /* a NaN score: reported as NaN, never merged away */
        for (int w = 0; w < FLASH_WARPS; w++) {
            const float *row = cm + ((size_t)w * MG + g) * (HD + 2);
            M = fmaxf(M, row[HD]);
            nan = nan || isnan(row[HD + 1]);
        }
        if (nan)
            L = O = NAN;
        else if (M != -INFINITY)
            for (int w = 0; w < FLASH_WARPS; w++) {
                const float *row = cm + ((size_t)w * MG + g) * (HD + 2);
                float c = expf(row[HD] - M);
                L += row[HD + 1] * c;
                O += row[d] * c;
            }
        flash_write(p, sq, i, h0 + g, split, d, HD, M, L, O);
    }
}

/* grid (n_head, rows), head_dim threads: merges the splits of one row
 * (query) of the launch; rowmap gives its sequence. */
__global__ static void k_flash_combine(const flash_seq *seqs, const int *rowmap, const float *part,
                                       int n_head, int n_split, int hd)
{
    int h = blockIdx.x, r = blockIdx.y, d = threadIdx.x;
    const flash_seq &sq = seqs[rowmap[r]];
    const float *pp = part + ((size_t)r * n_head + h) * n_split * (hd + 2);
    float M = -INFINITY, L = 0.0f, O = 0.0f;
    bool nan = false; /* a NaN score in any split: NaN, as in one piece */
    for (int s = 0; s < n_split; s++) {
        M = fmaxf(M, pp[(size_t)s * (hd + 2) + hd]);
        nan = nan || isnan(pp[(size_t)s * (hd + 2) + hd + 1]);
    }
    if (nan)
        L = O = NAN;
    else if (M != -INFINITY)
        for (int s = 0; s < n_split; s++) {
            const float *ps = pp + (size_t)s * (hd + 2);
            float c = expf(ps[hd] - M);
            L += ps[hd + 1] * c;
            O += ps[d] * c;
        }
    sq.out[((size_t)(r - sq.row0) * n_head + h) * hd + d] = L == 0.0f ? 0.0f : O / L;
}

/* The general kernel: one block per (head, query q0 + blockIdx.y).  Scores
 * go to a row of `scores`, laid out [n_head][sc_queries][cap] from query
 * sc_q0 on (the probs array itself, or scratch for this launch's queries),
 * are turned into probabilities there, and weight the values. */
template <typename T>
__global__ static void k_attention(struct attn_args a, const T *kc, const T *vc,
                                   const int *kv_len, const unsigned char *mask, int q0,
                                   float *scores, int sc_queries, int sc_q0)
{
    extern __shared__ float q_sh[]; /* head_dim floats */
    __shared__ float red[32];
    int h = blockIdx.x, i = q0 + blockIdx.y, hd = a.head_dim;
    int g = h / (a.n_head / a.n_kv);
    int n_vis = kv_len[g] - a.n_new + i + 1;
    n_vis = n_vis < 0 ? 0 : (n_vis > a.cap ? a.cap : n_vis);
    size_t row = ((size_t)i * a.n_head + h) * hd;
    const T *k = kc + (size_t)g * a.cap * hd;
    const T *v = vc + (size_t)g * a.cap * hd;
    float *sc = scores + ((size_t)h * sc_queries + (i - sc_q0)) * a.cap;
    const unsigned char *m = mask ? mask + (size_t)g * a.cap : NULL; /* 1: never attended */

    for (int d = threadIdx.x; d < hd; d += blockDim.x) q_sh[d] = a.q[row + d];
    __syncthreads();

    float max = -INFINITY;
    for (int j = threadIdx.x; j < n_vis; j += blockDim.x) {
        const T *kj = k + (size_t)j * hd;
        float s = 0.0f;
        for (int d = 0; d < hd; d++) s += q_sh[d] * kv_to_float(kj[d]);
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
        for (int j = 0; j < n_vis; j++) acc += sc[j] * kv_to_float(v[(size_t)j * hd + d]);
        a.out[row + d] = sum == 0.0f ? 0.0f : acc / sum; /* a NaN sum stays NaN */
    }
    if (!a.probs) return;
    __syncthreads(); /* every thread is done reading sc[] as weights */
    for (int j = threadIdx.x; j < a.cap; j += blockDim.x)
        sc[j] = j < n_vis && sum != 0.0f ? sc[j] / sum : 0.0f;
}

/* Scratch scores of the general kernel are bounded: queries are launched in
 * chunks that fit. */
static const size_t SCORE_SCRATCH_MAX = (size_t)64 << 20; /* floats */

template <typename T>
static int general_run(struct backend *be, const struct attn_args *a, const int *d_len,
                       const unsigned char *d_mask)
{
    struct cuda_impl *im = impl_of(be);
    size_t per_query = (size_t)a->n_head * a->cap;
    int chunk = a->n_new < 65535 ? a->n_new : 65535; /* grid.y limit */
    if (!a->probs) {
        size_t fit = SCORE_SCRATCH_MAX / per_query;
        if (fit < 1) fit = 1;
        if ((size_t)chunk > fit) chunk = (int)fit;
        if (!grow(be, (void **)&im->d_scores, &im->d_scores_cap, per_query * chunk,
                  sizeof(float), "attention scratch"))
            return -1;
    }
    size_t shared = (size_t)a->head_dim * sizeof(float);
    const T *kc = (const T *)(const void *)a->k_cache, *vc = (const T *)(const void *)a->v_cache;
    for (int q0 = 0; q0 < a->n_new; q0 += chunk) {
        int nq = a->n_new - q0 < chunk ? a->n_new - q0 : chunk;
        dim3 grid((unsigned)a->n_head, (unsigned)nq);
        if (a->probs)
            k_attention<T><<<grid, 128, shared>>>(*a, kc, vc, d_len, d_mask, q0, a->probs,
                                                  a->n_new, 0);
        else
            k_attention<T><<<grid, 128, shared>>>(*a, kc, vc, d_len, d_mask, q0, im->d_scores,
                                                  nq, q0);
        if (!launched(be, "attention")) return -1;
    }
    return 0;
}

int general_run_typed(struct backend *be, const struct attn_args *a, const int *d_len,
                      const unsigned char *d_mask)
{
    switch (a->kv_type) {
    case KV_BF16: return general_run<__nv_bfloat16>(be, a, d_len, d_mask);
    case KV_F16: return general_run<__half>(be, a, d_len, d_mask);
    default: return general_run<float>(be, a, d_len, d_mask);
    }
}

/* One sequence through the general kernel, its lengths and mask staged. */
static int general_typed(struct backend *be, const struct attn_args *a)
{
    size_t mask_bytes = a->slot_mask ? (size_t)a->n_kv * a->cap : 0;
    if (!stage_reserve(be, (size_t)a->n_kv * sizeof(int) + mask_bytes, 2)) return -1;
    const int *d_len = (const int *)stage(be, a->kv_len, (size_t)a->n_kv * sizeof(int));
    if (!d_len) return -1;
    const unsigned char *d_mask = NULL;
    if (a->slot_mask) {
        d_mask = (const unsigned char *)stage(be, a->slot_mask, (size_t)a->n_kv * a->cap);
        if (!d_mask) return -1;
    }
    return general_run_typed(be, a, d_len, d_mask);
}

static int div_up(long a, long b)
{
    return (int)((a + b - 1) / b);
}

/* Host scratch that grows (the descriptors and block maps of a launch). */
static void *host_scratch(struct backend *be, size_t bytes)
{
    struct cuda_impl *im = impl_of(be);
    if (bytes <= im->h_scratch_cap) return im->h_scratch;
    void *p = realloc(im->h_scratch, bytes * 2);
    if (!p) {
        cuda_fault_record(&im->fault, CUDA_FAULT_OOM, "cuda: attention", "out of host memory");
        return NULL;
    }
    im->h_scratch = (char *)p;
    im->h_scratch_cap = bytes * 2;
    return p;
}

/* The flash kernels over descriptors already in device memory: the split
 * plan for the longest visible cache, the kernel, and the combine. */
template <typename T, int HD, int Q>
static int flash_run(struct backend *be, const struct flash_launch *L)
{
    struct cuda_impl *im = impl_of(be);
    const int keys_min = Q == 1 ? FLASH_WARPS * FLASH_TILE : 8 * FLASH_TILE;
    struct flash_split sp = flash_split_plan(im->n_sm, L->n_kv, L->n_z, L->max_vis, keys_min);
    flash_params p = {};
    p.seqs = L->seqs;
    p.zmap = L->zmap;
    p.n_head = L->n_head;
    p.group = L->n_head / L->n_kv;
    p.n_split = sp.n_split;
    p.keys_per_split = sp.keys_per_split;
    p.dyn_keys_min = Q == 1 && L->fixed_grid ? keys_min : 0;
    p.scale = L->scale;
    if (sp.n_split > 1) {
        size_t need = (size_t)L->rows * L->n_head * sp.n_split * (HD + 2);
        if (!grow(be, (void **)&im->d_part, &im->d_part_cap, need, sizeof(float),
                  "attention splits"))
            return -1;
        p.part = im->d_part;
    }
    size_t q_floats = (size_t)Q * FLASH_MAX_GROUP * HD;
    size_t merge_floats = Q == 1 ? (size_t)FLASH_WARPS * FLASH_MAX_GROUP * (HD + 2) : 0;
    size_t shared = (q_floats > merge_floats ? q_floats : merge_floats) * sizeof(float);
    k_flash<T, HD, Q><<<dim3((unsigned)L->n_kv, (unsigned)sp.n_split, (unsigned)L->n_z),
                        FLASH_WARPS * 32, shared>>>(p);
    if (!launched(be, "flash attention")) return -1;
    if (sp.n_split > 1) {
        k_flash_combine<<<dim3((unsigned)L->n_head, (unsigned)L->rows), HD>>>(
            p.seqs, L->rowmap, p.part, L->n_head, sp.n_split, HD);
        if (!launched(be, "flash combine")) return -1;
    }
    return 0;
}

bool flash_reserve_decode(struct backend *be, const struct flash_launch *L, int hd)
{
    struct cuda_impl *im = impl_of(be);
    struct flash_split sp =
        flash_split_plan(im->n_sm, L->n_kv, L->n_z, L->max_vis, FLASH_WARPS * FLASH_TILE);
    if (sp.n_split <= 1) return true;
    size_t need = (size_t)L->rows * L->n_head * sp.n_split * (hd + 2);
    return grow(be, (void **)&im->d_part, &im->d_part_cap, need, sizeof(float),
                "attention splits");
}

template <typename T>
static int flash_run_hd(struct backend *be, int hd, bool decode, const struct flash_launch *L)
{
    switch (hd) {
    case 64: return decode ? flash_run<T, 64, 1>(be, L) : flash_run<T, 64, FLASH_WARPS>(be, L);
    case 128: return decode ? flash_run<T, 128, 1>(be, L) : flash_run<T, 128, FLASH_WARPS>(be, L);
    case 256: return decode ? flash_run<T, 256, 1>(be, L) : flash_run<T, 256, FLASH_WARPS>(be, L);
    }
    return refuse(be, "flash attention", "unsupported head size");
}

int flash_run_typed(struct backend *be, enum kv_type t, int hd, bool decode,
                    const struct flash_launch *L)
{
    switch (t) {
    case KV_BF16: return flash_run_hd<__nv_bfloat16>(be, hd, decode, L);
    case KV_F16: return flash_run_hd<__half>(be, hd, decode, L);
    default: return flash_run_hd<float>(be, hd, decode, L);
    }
}

/* One launch over the sequences a[idx[0..n)] (all decode-sized when Q = 1). */
template <typename T, int HD, int Q>
static int launch_flash(struct backend *be, const struct attn_args *a, const int *idx, int n)
{
    const int n_kv = a[idx[0]].n_kv, n_head = a[idx[0]].n_head;
    int n_z = 0, rows = 0, max_vis = 0;
    size_t mask_bytes = 0;
    for (int j = 0; j < n; j++) {
        const struct attn_args *x = &a[idx[j]];
        n_z += div_up(x->n_new, Q);
        rows += x->n_new;
        for (int h = 0; h < n_kv; h++) {
            int len = x->kv_len[h] < x->cap ? x->kv_len[h] : x->cap;
            if (len > max_vis) max_vis = len;
        }
        if (x->slot_mask) mask_bytes += (size_t)n_kv * x->cap;
    }
    size_t desc_bytes = (size_t)n * sizeof(flash_seq);
    size_t map_bytes = ((size_t)n_z + (size_t)rows) * sizeof(int);
    char *h = (char *)host_scratch(be, desc_bytes + map_bytes);
    if (!h || !stage_reserve(be, desc_bytes + map_bytes + mask_bytes, 3 + n)) return -1;
    flash_seq *desc = (flash_seq *)h;
    int *zmap = (int *)(h + desc_bytes), *rowmap = zmap + n_z;
    int z = 0, r = 0;
    for (int j = 0; j < n; j++) {
        const struct attn_args *x = &a[idx[j]];
        flash_seq *d = &desc[j];
        memset(d, 0, sizeof *d);
        d->out = x->out;
        d->q = x->q;
        d->k = x->k_cache;
        d->v = x->v_cache;
        d->cap = x->cap;
        d->n_new = x->n_new;
        d->z0 = z;
        d->row0 = r;
        for (int hh = 0; hh < n_kv; hh++) d->kv_len[hh] = x->kv_len[hh];
        if (x->slot_mask &&
            !(d->mask = (const unsigned char *)stage(be, x->slot_mask, (size_t)n_kv * x->cap)))
            return -1;
        for (int t = div_up(x->n_new, Q); t > 0; t--) zmap[z++] = j;
        for (int t = 0; t < x->n_new; t++) rowmap[r++] = j;
    }
    struct flash_launch L = {};
    L.seqs = (const flash_seq *)stage(be, desc, desc_bytes);
    L.zmap = (const int *)stage(be, zmap, (size_t)n_z * sizeof(int));
    L.rowmap = (const int *)stage(be, rowmap, (size_t)rows * sizeof(int));
    if (!L.seqs || !L.zmap || !L.rowmap) return -1;
    L.n_z = n_z, L.rows = rows, L.n_head = n_head, L.n_kv = n_kv, L.max_vis = max_vis;
    L.scale = a[idx[0]].scale;
    return flash_run<T, HD, Q>(be, &L);
}

/* Decode-sized sequences (at most FLASH_DECODE_MAX_NEW queries) in one
 * launch, the others (prefill chunks) in another. */
template <typename T, int HD>
static int attention_flash(struct backend *be, const struct attn_args *a, int n, int *idx)
{
    int n_dec = 0, n_pre = 0;
    for (int j = 0; j < n; j++)
        if (a[j].n_new <= FLASH_DECODE_MAX_NEW) idx[n_dec++] = j;
    for (int j = 0; j < n; j++)
        if (a[j].n_new > FLASH_DECODE_MAX_NEW) idx[n_dec + n_pre++] = j;
    if (n_dec && launch_flash<T, HD, 1>(be, a, idx, n_dec)) return -1;
    if (n_pre && launch_flash<T, HD, FLASH_WARPS>(be, a, idx + n_dec, n_pre)) return -1;
    return 0;
}

/* The flash kernels' conditions: see the file comment.  The cache rows are
 * read 8 values at a time, so its base must be 16-byte aligned (backend
 * allocations are 256-byte aligned; head_dim keeps every row aligned). */
static bool flash_fits(const struct attn_args *a)
{
    return !a->probs && flash_shape_ok(a->n_head, a->n_kv, a->head_dim) &&
           ((uintptr_t)a->k_cache & 15) == 0 && ((uintptr_t)a->v_cache & 15) == 0;
}

static bool args_ok(const struct attn_args *a)
{
    return a->n_head > 0 && a->n_kv > 0 && a->n_head % a->n_kv == 0 && a->n_new > 0 &&
           a->head_dim > 0 && a->cap > 0 && a->kv_len && a->out && a->q && a->k_cache &&
           a->v_cache && kv_type_known(a->kv_type);
}

/* Launch limits of one batched launch: blocks along z, rows of the combine. */
static const long FLASH_MAX_Z = 65535;

/* Every a[j] has a[0]'s cache type here. */
template <int HD>
static int flash_typed(struct backend *be, const struct attn_args *a, int n, int *idx)
{
    switch (a[0].kv_type) {
    case KV_BF16: return attention_flash<__nv_bfloat16, HD>(be, a, n, idx);
    case KV_F16: return attention_flash<__half, HD>(be, a, n, idx);
    default: return attention_flash<float, HD>(be, a, n, idx);
    }
}

int cuda_attention_batch(struct backend *be, const struct attn_args *a, int n)
{
    if (n < 1 || !a) return refuse(be, "attention", "no problems given");
    bool flash = true;
    long z = 0;
    for (int j = 0; j < n; j++) {
        if (!args_ok(&a[j])) return refuse(be, "attention", "bad arguments");
        flash = flash && flash_fits(&a[j]) && a[j].n_head == a[0].n_head &&
                a[j].n_kv == a[0].n_kv && a[j].head_dim == a[0].head_dim &&
                a[j].scale == a[0].scale && a[j].kv_type == a[0].kv_type;
        z += a[j].n_new; /* rows: an upper bound on the blocks too */
    }
    if (failed(be)) return -1;
    if (!flash || z > FLASH_MAX_Z) { /* one sequence at a time */
        for (int j = 0; j < n; j++) {
            int rc;
            if (n > 1 && flash_fits(&a[j]) && a[j].n_new <= FLASH_MAX_Z)
                rc = cuda_attention_batch(be, &a[j], 1);
            else
                rc = general_typed(be, &a[j]);
            if (rc) return -1;
        }
        return 0;
    }
    int *idx = (int *)malloc((size_t)n * sizeof *idx);
    if (!idx) {
        cuda_fault_record(&impl_of(be)->fault, CUDA_FAULT_OOM, "cuda: attention", "out of host memory");
        return -1;
    }
    int rc;
    switch (a[0].head_dim) {
    case 64: rc = flash_typed<64>(be, a, n, idx); break;
    case 128: rc = flash_typed<128>(be, a, n, idx); break;
    default: rc = flash_typed<256>(be, a, n, idx);
    }
    free(idx);
    return rc;
}

void cuda_attention(struct backend *be, const struct attn_args *a)
{
    cuda_attention_batch(be, a, 1);
}
