/* cuda_score.cu - the eviction policies' scoring primitives on the GPU
 * (window_scores, pool1d, key_redundancy, row_range).  The reference is
 * kernels/cpu/cpu_score.c and cpu_vscore.c. */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_reduce.h"

#include <stdint.h>
/* ---- scoring primitives (the reference is kernels/cpu/cpu_score.c and
 * cpu_vscore.c) ----
 *
 * Softmax sums and means accumulate in double, as on the CPU, so the two
 * backends agree to f32 rounding.  Scratch lives in the grow-on-demand
 * buffers: floats and doubles in d_floats; a pad mask goes through the
 * metadata staging ring.
 * These ops do return a status: -1 for arguments the CPU backend also
 * refuses, or for a CUDA failure (then recorded, see backend_cuda_error). */

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
__global__ static void __launch_bounds__(1024)
k_redundancy_softmax(float *out, double *base, const double *sub, int len)
{
    __shared__ double red[32];
    block_redundancy_softmax(out, base, sub, len, red);
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

void *float_scratch(struct backend *be, size_t bytes, const char *what)
{
    struct cuda_impl *im = impl_of(be);
    size_t n = (bytes + sizeof(float) - 1) / sizeof(float);
    if (!grow(be, (void **)&im->d_floats, &im->d_floats_cap, n ? n : 1, sizeof(float), what))
        return NULL;
    return im->d_floats;
}

/* A device copy of a host byte mask of n entries; *out is NULL when mask is.
 * Returns false on a CUDA failure. */
static bool device_mask(struct backend *be, const unsigned char *mask, size_t n,
                        const unsigned char **out)
{
    *out = NULL;
    if (!mask || n == 0) return true;
    *out = (const unsigned char *)stage(be, mask, n);
    return *out != NULL;
}

/* A device copy of one head's score unit u of len keys for the batched ops,
 * its pad mask (host, or NULL) staged with it; NULL on failure. */
static const struct score_unit *stage_unit(struct backend *be, struct score_unit u,
                                           const unsigned char *pad, int len)
{
    const unsigned char *d_pad;
    if (!stage_reserve(be, (size_t)len + sizeof u, 2) || !device_mask(be, pad, (size_t)len, &d_pad))
        return NULL;
    u.pad = d_pad;
    u.kv_type = KV_F32;
    return (const struct score_unit *)stage(be, &u, sizeof u);
}

int cuda_window_scores(struct backend *be, const struct window_score_args *a)
{
    if (!a->out || !a->q || !a->k || a->n_head < 1 || a->n_kv < 1 || a->n_head % a->n_kv != 0 ||
        a->kv_head < 0 || a->kv_head >= a->n_kv || a->head_dim < 1 || a->n_q < 1 || a->len < 1 ||
        a->n_cand < 1 || a->n_cand > a->len)
        return -1;
    if (failed(be)) return -1;
    if (!cuda_tiles_off() && a->n_head / a->n_kv <= 64 && a->head_dim <= 256) {
        /* one unit of the batched op (its tiles), the rows a ring of n_q */
        struct score_unit u = {};
        u.k = a->k;
        u.q = a->q;
        u.imp = a->out;
        u.kv_head = a->kv_head;
        u.len = a->len;
        u.n_cand = a->n_cand;
        u.n_q = u.q_ring = a->n_q;
        struct score_batch_args b = {};
        if (!(b.units = stage_unit(be, u, a->pad, a->len))) return -1;
        b.n_units = 1;
        b.max_len = a->len;
        b.max_q = a->n_q;
        b.n_head = a->n_head;
        b.n_kv = a->n_kv;
        b.head_dim = a->head_dim;
        b.scale = a->scale;
        b.softmax_all = a->softmax_all;
        b.gqa = a->gqa;
        b.kernel = 1;
        return cuda_window_scores_batch(be, &b);
    }
    int group = a->n_head / a->n_kv, cols = a->softmax_all ? a->len : a->n_cand;
    size_t plane = (size_t)a->n_q * cols;
    const unsigned char *d_pad;
    if (!device_mask(be, a->pad, (size_t)a->len, &d_pad)) return -1;
    float *s = (float *)float_scratch(be, plane * sizeof(float), "window scores scratch");
    if (!s) return -1;
    k_window_logits<<<blocks_for(plane, CUDA_THREADS), CUDA_THREADS>>>(
        s, a->q, a->k, a->n_q, cols, group, a->kv_head * group, a->n_head * a->head_dim,
        a->head_dim, a->scale, a->gqa == SCORE_GQA_MEAN);
    if (!launched(be, "window logits")) return -1;
    k_window_softmax<<<a->n_q, CUDA_THREADS>>>(s, cols, a->n_cand, a->n_q, a->len, a->softmax_all,
                                          d_pad);
    if (!launched(be, "window softmax")) return -1;
    k_column_sum<<<blocks_for(a->n_cand, CUDA_THREADS), CUDA_THREADS>>>(a->out, s, a->n_q, cols,
                                                               a->n_cand);
    return launched(be, "window mean") ? 0 : -1;
}

int cuda_pool1d(struct backend *be, float *out, const float *in, int n, int kernel,
                       enum score_pool mode)
{
    if (!out || !in || out == in || n < 0 || kernel < 1 || kernel % 2 == 0) return -1;
    if (failed(be)) return -1;
    if (n == 0) return 0;
    k_pool1d<<<blocks_for(n, CUDA_THREADS), CUDA_THREADS>>>(out, in, n, kernel / 2, kernel,
                                                  mode == SCORE_POOL_AVG);
    return launched(be, "pool1d") ? 0 : -1;
}

int cuda_key_redundancy(struct backend *be, const struct redundancy_args *a)
{
    if (!a->out || !a->k || a->len < 1 || a->head_dim < 1) return -1;
    if (failed(be)) return -1;
    int n = a->len, hd = a->head_dim;
    size_t shared = (size_t)hd * sizeof(float);
    if (shared > 48 * 1024) return -1; /* one key per block in static-sized shared memory */
    if (!cuda_tiles_off()) { /* one unit of the batched op: its tiled search */
        struct score_unit u = {};
        u.k = a->k;
        u.red = a->out;
        u.len = u.n_cand = n;
        struct score_batch_args b = {};
        if (!(b.units = stage_unit(be, u, a->pad, n))) return -1;
        b.n_units = 1;
        b.max_len = n;
        b.head_dim = hd;
        b.threshold = a->threshold;
        b.no_match_zero_col0 = a->no_match_zero_col0;
        return cuda_key_redundancy_batch(be, &b);
    }
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
    k_redundancy_rows<<<n, CUDA_THREADS, shared>>>(base, sub, kn, sum, n, hd, a->threshold,
                                              a->no_match_zero_col0);
    if (!launched(be, "redundancy rows")) return -1;
    k_redundancy_softmax<<<1, 1024>>>(a->out, base, sub, n);
    return launched(be, "redundancy softmax") ? 0 : -1;
}

int cuda_row_range(struct backend *be, float *out, const float *x, int n, int dim)
{
    if (!out || !x || n < 0 || dim < 1) return -1;
    if (failed(be)) return -1;
    if (n == 0) return 0;
    k_row_range<<<blocks_for((size_t)n * 32, CUDA_THREADS), CUDA_THREADS>>>(out, x, n, dim);
    return launched(be, "row_range") ? 0 : -1;
}
