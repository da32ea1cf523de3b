/* cuda_batch.cu - the batched eviction ops (kernels/backend.h, "batched
 * eviction") on the GPU: many (sequence, layer, kv head) units per launch,
 * the unit descriptors read from device memory, so a compression costs a
 * few launches whatever the batch.  The reference is kernels/cpu/cpu_batch.c
 * (each unit as cpu_score.c computes one head).  Softmax sums, means and
 * the scores the top-k ranks accumulate in double as on the CPU; the top-k
 * uses the same total order (higher first, ties to the lower index, NaN
 * last) and the mix and key norm are computed without fused multiply-adds,
 * so the same scores give the same keep-sets.  A unit's pad flags
 * (score_unit.pad, staged by the caller) are masked as cpu_score.c masks
 * them: out of the window softmax, zero keys in the redundancy, and ranked
 * at +-pad_score by the top-k.
 *
 * Scratch comes from the backend's grow-on-demand float buffer
 * (float_scratch), for at most BATCH_CHUNK units at a time:
 *   window scores   as tiles 4 max_q + 8 bytes per unit and slot (logit rows,
 *                   double sums), at most 64 MiB a launch; without, 12 bytes
 *   redundancy      24 bytes per unit and slot + 8 per unit and dimension
 *   top-k           12 bytes per unit and slot (scores, ranks); up to 4,096
 *                   slots a unit sorts in 48 KiB of shared memory instead
 * The per-layer shared scores are cuda_batch_layer.cu's. */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_reduce.h"

enum { BATCH_CHUNK = 512 };

/* ---- tiles: a 64 x 64 block of dot products as a small f32 GEMM ----
 * 256 threads, each holding 4 x 4 entries (rows tr.., columns tc..), the
 * dimension staged RT_DK at a time through shared memory as a[d][row] and
 * b[d][col] (rows of 68 floats: 16-byte aligned for the float4 reads).  The
 * redundancy's search and the window logits use it; EVICTBENCH_CUDA_TILES=0
 * takes the kernels before them (a warp per key), for comparisons. */

enum { RT_ROWS = 64, RT_COLS = RT_ROWS, RT_DK = 16, RT_THREADS = 256 }; /* square tiles */

typedef float tile_stage[RT_DK][RT_ROWS + 4];

/* acc += a^T b over one staged block of RT_DK dimensions. */
__device__ static void tile_fma(float acc[4][4], const tile_stage &as, const tile_stage &bs,
                                int tr, int tc)
{
    for (int d = 0; d < RT_DK; d++) {
        float4 a4 = *(const float4 *)&as[d][tr], b4 = *(const float4 *)&bs[d][tc];
        float a[4] = {a4.x, a4.y, a4.z, a4.w}, b[4] = {b4.x, b4.y, b4.z, b4.w};
        for (int x = 0; x < 4; x++)
            for (int y = 0; y < 4; y++) acc[x][y] = fmaf(a[x], b[y], acc[x][y]);
    }
}

bool cuda_tiles_off(void)
{
    const char *s = getenv("EVICTBENCH_CUDA_TILES");
    return s && s[0] == '0';
}


/* ---- window importance: one block per unit, its query rows in order ---- */

struct window_params {
    int n_head, head_dim, group, softmax_all, gqa_mean, kernel, avg, max_len;
    float scale;
};

enum { WIN_MAX_HD = 256 }; /* a lane holds head_dim / 32 of a key, at most 8 */

/* The group's pooled logit of query rows qs (shared, [group][head_dim])
 * against key j: a warp per key, lanes across the dimensions (kr: this
 * lane's elements of the key); every lane gets it. */
__device__ static float window_logit(const window_params &p, const float *qs, const float *kr)
{
    int lane = threadIdx.x & 31;
    float v = 0.0f;
    for (int g = 0; g < p.group; g++) {
        float dot = 0.0f;
        for (int t = 0, d = lane; d < p.head_dim; t++, d += 32) dot += qs[g * p.head_dim + d] * kr[t];
        dot = warp_sum_all(dot) * p.scale;
        v = g == 0 ? dot : (p.gqa_mean ? v + dot : fmaxf(v, dot));
    }
    return p.gqa_mean ? v / (float)p.group : v;
}

/* Slot j of u is a left pad: masked out of softmaxes, a zero key for the
 * redundancy (cpu_score.c's rules). */
__device__ static bool is_pad(const struct score_unit *u, int j)
{
    return u->pad && u->pad[j];
}

/* The unit's importance u->imp: acc (the rows' mean, in double) as floats
 * in s (nc floats of scratch), pooled over the kernel (max, or average
 * counting the padding as zeros).  Block-wide. */
__device__ static void window_pool(const struct score_unit *u, const window_params &p, float *s,
                                   const double *acc, int nc)
{
    for (int j = threadIdx.x; j < nc; j += blockDim.x) s[j] = (float)acc[j];
    __syncthreads();
    int half = p.kernel / 2;
    for (int j = threadIdx.x; j < nc; j += blockDim.x) {
        if (p.kernel <= 1) {
            u->imp[j] = s[j];
            continue;
        }
        int lo = j - half < 0 ? 0 : j - half, hi = j + half >= nc ? nc - 1 : j + half;
        if (p.avg) {
            double a = 0.0;
            for (int t = lo; t <= hi; t++) a += s[t];
            u->imp[j] = (float)(a / p.kernel);
        } else {
            float m = s[lo];
            for (int t = lo + 1; t <= hi; t++) m = fmaxf(m, s[t]);
            u->imp[j] = m;
        }
    }
}


/* Keys query row i of u sees: the candidates, or (softmax_all) every key up
 * to its own position. */
__device__ static int window_visible(const struct score_unit *u, const window_params &p, int i)
{
    int cols = p.softmax_all ? u->len : u->n_cand;
    if (!p.softmax_all) return cols;
    int visible = u->len - u->n_q + i + 1;
    return visible < 0 ? 0 : (visible > cols ? cols : visible);
}

/* Row i's share: the softmax of its logits s[0, visible) over the unpadded
 * slots (nothing visible adds nothing), 1/n_q of it added to acc (each
 * thread the entries it alone touches).  Block-wide; s published. */
__device__ static void window_row_share(const struct score_unit *u, const float *s, int visible,
                                        double *acc, double *red)
{
    double mx = -INFINITY;
    for (int j = threadIdx.x; j < visible; j += blockDim.x)
        if (!is_pad(u, j)) mx = fmax(mx, (double)s[j]);
    mx = block_reduce_d(mx, red, true);
    double sum = 0.0;
    if (mx != -INFINITY)
        for (int j = threadIdx.x; j < visible; j += blockDim.x)
            if (!is_pad(u, j)) sum += exp((double)s[j] - mx);
    sum = block_reduce_d(sum, red, false);
    if (sum > 0)
        for (int j = threadIdx.x; j < u->n_cand && j < visible; j += blockDim.x)
            if (!is_pad(u, j)) acc[j] += 1.0 / u->n_q * exp((double)s[j] - mx) / sum;
}

__global__ static void k_batch_window(const struct score_unit *units, window_params p,
                                      float *logit_buf, double *acc_buf)
{
    extern __shared__ float qs[]; /* [group][head_dim]: row i's queries of the group */
    __shared__ double red[32];
    const struct score_unit *u = &units[blockIdx.x];
    float *s = logit_buf + (size_t)blockIdx.x * p.max_len;
    double *acc = acc_buf + (size_t)blockIdx.x * p.max_len;
    int nc = u->n_cand;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    size_t qstride = (size_t)p.n_head * p.head_dim;
    for (int j = threadIdx.x; j < nc; j += blockDim.x) acc[j] = 0.0;
    for (int i = 0; i < u->n_q; i++) {
        const float *q = u->q + (size_t)((u->q_first + i) % u->q_ring) * qstride +
                         (size_t)u->kv_head * p.group * p.head_dim;
        for (int d = threadIdx.x; d < p.group * p.head_dim; d += blockDim.x) qs[d] = q[d];
        __syncthreads();
        int visible = window_visible(u, p, i);
        for (int j = warp; j < visible; j += n_warps) {
            float kr[WIN_MAX_HD / 32];
            for (int t = 0, d = lane; d < p.head_dim; t++, d += 32)
                kr[t] = kv_elem_at(u->k, u->kv_type, (size_t)j * p.head_dim + d);
            float v = window_logit(p, qs, kr);
            if (lane == 0) s[j] = v;
        }
        __syncthreads(); /* s published */
        window_row_share(u, s, visible, acc, red);
        __syncthreads(); /* qs and s free for the next row */
    }
    window_pool(u, p, s, acc, nc);
}

/* ---- window importance as tiles: the logits of every query row of a unit
 * (n_q rows x its group of heads) against a 64-key tile as tile GEMMs, the
 * group pooled, into rows [unit][max_q][max_len]; then a block per unit
 * takes each row's softmax in order, as k_batch_window does. ---- */

__global__ static void __launch_bounds__(RT_THREADS)
k_batch_window_tiles(const struct score_unit *units, window_params p, int max_q,
                     float *rows_buf)
{
    __shared__ __align__(16) tile_stage as, bs;
    __shared__ float cs[RT_ROWS][RT_COLS + 1];
    const struct score_unit *u = &units[blockIdx.y];
    int cols = p.softmax_all ? u->len : u->n_cand, j0 = blockIdx.x * RT_COLS;
    if (j0 >= cols) return; /* the whole block */
    int n_rows = u->n_q * p.group, per = RT_ROWS / p.group * p.group; /* whole groups a tile */
    size_t qstride = (size_t)p.n_head * p.head_dim;
    float *rows = rows_buf + (size_t)blockIdx.y * max_q * p.max_len;
    int tr = threadIdx.x / 16 * 4, tc = threadIdx.x % 16 * 4;
    for (int r0 = 0; r0 < n_rows; r0 += per) {
        float acc[4][4] = {};
        for (int d0 = 0; d0 < p.head_dim; d0 += RT_DK) {
            __syncthreads(); /* the previous stage's reads (and cs's) are done */
            for (int x = threadIdx.x; x < RT_ROWS * RT_DK; x += RT_THREADS) {
                int r = x / RT_DK, d = x % RT_DK, row = r0 + r, j = j0 + r;
                float qv = 0.0f;
                if (r < per && row < n_rows && d0 + d < p.head_dim) {
                    int i = row / p.group, g = row % p.group; /* query row i, head g */
                    qv = u->q[(size_t)((u->q_first + i) % u->q_ring) * qstride +
                              (size_t)(u->kv_head * p.group + g) * p.head_dim + d0 + d];
                }
                as[d][r] = qv;
                bs[d][r] = j < cols && d0 + d < p.head_dim
                               ? kv_elem_at(u->k, u->kv_type, (size_t)j * p.head_dim + d0 + d)
                               : 0.0f;
            }
            __syncthreads();
            tile_fma(acc, as, bs, tr, tc);
        }
        for (int x = 0; x < 4; x++)
            for (int y = 0; y < 4; y++) cs[tr + x][tc + y] = acc[x][y] * p.scale;
        __syncthreads();
        int n_i = (n_rows - r0 < per ? n_rows - r0 : per) / p.group;
        for (int x = threadIdx.x; x < n_i * RT_COLS; x += RT_THREADS) {
            int il = x / RT_COLS, c = x % RT_COLS, j = j0 + c;
            if (j >= cols) continue;
            float v = cs[il * p.group][c]; /* the group pooled as window_logit pools it */
            for (int g = 1; g < p.group; g++)
                v = p.gqa_mean ? v + cs[il * p.group + g][c] : fmaxf(v, cs[il * p.group + g][c]);
            rows[(size_t)(r0 / p.group + il) * p.max_len + j] = p.gqa_mean ? v / (float)p.group : v;
        }
    }
}

__global__ static void k_batch_window_rows(const struct score_unit *units, window_params p,
                                           int max_q, float *rows_buf, double *acc_buf)
{
    __shared__ double red[32];
    const struct score_unit *u = &units[blockIdx.x];
    float *rows = rows_buf + (size_t)blockIdx.x * max_q * p.max_len;
    double *acc = acc_buf + (size_t)blockIdx.x * p.max_len;
    int nc = u->n_cand;
    for (int j = threadIdx.x; j < nc; j += blockDim.x) acc[j] = 0.0;
    for (int i = 0; i < u->n_q; i++) /* the rows were written by the previous launch */
        window_row_share(u, rows + (size_t)i * p.max_len, window_visible(u, p, i), acc, red);
    __syncthreads(); /* every row read: row 0 becomes the pooling's input */
    window_pool(u, p, rows, acc, nc);
}

/* Bytes of logit rows per launch, at most: the score scratch lives in the
 * pool's headroom (kv_pool_headroom), no larger than the kernels before. */
enum { WIN_TILE_SCRATCH = 64 << 20 };

/* The tiles' launches, for as many units at a time as WIN_TILE_SCRATCH
 * holds (at least one). */
static int window_tiles(struct backend *be, const struct score_batch_args *a,
                        const window_params &p)
{
    size_t per_unit = (size_t)a->max_q * a->max_len * sizeof(float) +
                      (size_t)a->max_len * sizeof(double);
    size_t fit = WIN_TILE_SCRATCH / per_unit;
    int chunk = a->n_units < BATCH_CHUNK ? a->n_units : BATCH_CHUNK;
    if ((size_t)chunk > fit) chunk = fit > 0 ? (int)fit : 1;
    double *acc = (double *)float_scratch(be, (size_t)chunk * per_unit, "batched window scratch");
    if (!acc) return -1;
    float *rows = (float *)(acc + (size_t)chunk * a->max_len);
    for (int u0 = 0; u0 < a->n_units; u0 += chunk) {
        int n = a->n_units - u0 < chunk ? a->n_units - u0 : chunk;
        k_batch_window_tiles<<<dim3(blocks_for(a->max_len, RT_COLS), n), RT_THREADS>>>(
            a->units + u0, p, a->max_q, rows);
        if (!launched(be, "batched window logits")) return -1;
        k_batch_window_rows<<<n, CUDA_THREADS>>>(a->units + u0, p, a->max_q, rows, acc);
        if (!launched(be, "batched window softmax")) return -1;
    }
    return 0;
}

int cuda_window_scores_batch(struct backend *be, const struct score_batch_args *a)
{
    if (!a->units || a->n_units < 0 || a->max_len < 1 || a->kernel < 1 || a->kernel % 2 == 0 ||
        a->n_head < 1 || a->n_kv < 1 || a->n_head % a->n_kv != 0 || a->head_dim < 1 ||
        a->head_dim > WIN_MAX_HD)
        return -1;
    if (failed(be)) return -1;
    if (a->n_units == 0) return 0;
    window_params p = {a->n_head, a->head_dim, a->n_head / a->n_kv, a->softmax_all,
                       a->gqa == SCORE_GQA_MEAN, a->kernel, a->pool == SCORE_POOL_AVG,
                       a->max_len, a->scale};
    if (!cuda_tiles_off() && a->max_q >= 1 && p.group <= RT_ROWS)
        return window_tiles(be, a, p);
    size_t shared = (size_t)p.group * a->head_dim * sizeof(float);
    if (shared > 48 * 1024) return -1;
    int chunk = a->n_units < BATCH_CHUNK ? a->n_units : BATCH_CHUNK;
    size_t row = (size_t)chunk * a->max_len;
    double *acc = (double *)float_scratch(be, row * (sizeof(double) + sizeof(float)),
                                         "batched window scratch");
    if (!acc) return -1;
    float *logits = (float *)(acc + row);
    for (int u0 = 0; u0 < a->n_units; u0 += chunk) {
        int n = a->n_units - u0 < chunk ? a->n_units - u0 : chunk;
        k_batch_window<<<n, CUDA_THREADS, shared>>>(a->units + u0, p, logits, acc);
        if (!launched(be, "batched window scores")) return -1;
    }
    return 0;
}

/* ---- key redundancy ---- */

/* inv[j] = 1 / (|k_j| + 1e-8) for every unit's keys; sub cleared. */
__global__ static void k_batch_norms(const struct score_unit *units, int hd, int max_len,
                                     float *inv_buf, double *sub_buf)
{
    const struct score_unit *u = &units[blockIdx.y];
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < u->len; j += gridDim.x * blockDim.x) {
        double ss = 0.0;
        for (int d = 0; d < hd; d++) {
            double x = kv_elem_at(u->k, u->kv_type, (size_t)j * hd + d);
            ss += x * x;
        }
        inv_buf[(size_t)blockIdx.y * max_len + j] = is_pad(u, j) ? 0.0f
                                                                 : (float)(1.0 / (sqrt(ss) + 1e-8));
        sub_buf[(size_t)blockIdx.y * max_len + j] = 0.0;
    }
}

/* A pad key normalises to a zero row, whatever its slot holds. */
__device__ static float kn_at(const struct score_unit *u, const float *inv, int hd, int j, int d)
{
    return is_pad(u, j) ? 0.0f : kv_elem_at(u->k, u->kv_type, (size_t)j * hd + d) * inv[j];
}

/* sum[d] over the normalised keys, in key order; one block per unit. */
__global__ static void k_batch_key_sum(const struct score_unit *units, int hd, int max_len,
                                       const float *inv_buf, double *sum_buf)
{
    const struct score_unit *u = &units[blockIdx.x];
    const float *inv = inv_buf + (size_t)blockIdx.x * max_len;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        double acc = 0.0;
        for (int i = 0; i < u->len; i++) acc += kn_at(u, inv, hd, i, d);
        sum_buf[(size_t)blockIdx.x * hd + d] = acc;
    }
}

enum { RED_SPAN = 16 }; /* columns a warp searches per round, from the top down */

/* One block per (row i, unit): as cuda_score.cu's k_redundancy_rows, but a
 * warp per column (lanes across the dimensions: coalesced reads), each warp
 * searching its own span of RED_SPAN columns from the most recent down and
 * stopping at its first match; a round covers n_warps spans. */
__global__ static void k_batch_red_rows(const struct score_unit *units, int hd, int max_len,
                                        const float *inv_buf, const double *sum_buf,
                                        double *base_buf, double *sub_buf, float threshold,
                                        int quirk)
{
    extern __shared__ float ki[];
    __shared__ double red[32];
    __shared__ int red_i[32];
    __shared__ float warp_c[32];
    const struct score_unit *u = &units[blockIdx.y];
    int i = blockIdx.x, len = u->len;
    if (i >= len) return; /* the whole block */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    const float *inv = inv_buf + (size_t)blockIdx.y * max_len;
    const double *sum = sum_buf + (size_t)blockIdx.y * hd;
    double *sub = sub_buf + (size_t)blockIdx.y * max_len;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) ki[d] = kn_at(u, inv, hd, i, d);
    __syncthreads();
    double self = 0.0, dot = 0.0;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        self += (double)ki[d] * ki[d];
        dot += (double)ki[d] * sum[d];
    }
    self = block_reduce_d(self, red, false);
    dot = block_reduce_d(dot, red, false);
    if (threadIdx.x == 0) base_buf[(size_t)blockIdx.y * max_len + i] = dot - self;
    int jstar = -1;
    for (int e = len; e > 0 && jstar < 0; e -= n_warps * RED_SPAN) {
        int top = e - 1 - warp * RED_SPAN, cand = -1;
        float cand_c = 0.0f;
        for (int j = top; j > top - RED_SPAN && j >= 0 && cand < 0; j--) {
            if (j == i) continue;
            float c = 0.0f;
            for (int d = lane; d < hd; d += 32) c += ki[d] * kn_at(u, inv, hd, j, d);
            c = warp_sum_all(c);
            if (c > threshold) cand = j, cand_c = c;
        }
        if (lane == 0) warp_c[warp] = cand_c;
        jstar = block_max_int(cand, red_i);
        if (jstar >= 0 && threadIdx.x == 0) {
            int w = (e - 1 - jstar) / RED_SPAN; /* the warp whose span holds jstar */
            atomicAdd(&sub[jstar], (double)warp_c[w]);
        }
        __syncthreads();
    }
    if (jstar >= 0) return;
    if (!quirk || i == 0) return;
    double d0 = 0.0;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) d0 += (double)ki[d] * kn_at(u, inv, hd, 0, d);
    d0 = block_reduce_d(d0, red, false);
    if (threadIdx.x == 0) atomicAdd(&sub[0], d0);
}

/* ---- the redundancy search as tiles of the cosine matrix ----
 * The rows kernel above reads every key once per row (a warp per column):
 * L^2 d reads of keys and a warp reduction per (row, column), 3.9 s for a
 * 64-sequence 7B-shaped batch of random keys.  Here a block takes RT_ROWS
 * rows of one unit and walks column tiles from the most recent key down,
 * each tile a small f32 GEMM in shared memory (256 threads, 4 x 4 entries
 * each, the dimension in RT_DK steps), so a key is read once per tile of
 * rows; the walk stops as soon as every row of the tile has its match.
 * The products are f32 as the CPU's sgemm, summed in another order (so a
 * product within rounding of the threshold may match on one side only, as
 * with the rows kernel).  EVICTBENCH_CUDA_TILES=0 takes the rows kernel. */

/* kn rows [r0, r0 + RT_ROWS) x dims [d0, d0 + RT_DK) into t[d][r] (zero
 * outside [0, end) or past hd; r0 < 0 in a unit's oldest column tile);
 * thread-consecutive dims of a row, so the reads of a row coalesce. */
__device__ static void red_tile_load(tile_stage &t, const struct score_unit *u,
                                     const float *inv, int hd, int r0, int end, int d0)
{
    for (int x = threadIdx.x; x < RT_ROWS * RT_DK; x += RT_THREADS) {
        int r = x / RT_DK, d = x % RT_DK, j = r0 + r;
        t[d][r] = j >= 0 && j < end && d0 + d < hd ? kn_at(u, inv, hd, j, d0 + d) : 0.0f;
    }
}

__global__ static void __launch_bounds__(RT_THREADS)
k_batch_red_tiles(const struct score_unit *units, int hd, int max_len, const float *inv_buf,
                  double *sub_buf, int *jstar_buf, float threshold)
{
    __shared__ __align__(16) tile_stage as, bs;
    __shared__ int best[RT_ROWS], found[RT_ROWS];
    __shared__ float best_c[RT_ROWS], found_c[RT_ROWS];
    __shared__ int n_left;
    const struct score_unit *u = &units[blockIdx.y];
    int len = u->len, i0 = blockIdx.x * RT_ROWS;
    if (i0 >= len) return; /* the whole block */
    const float *inv = inv_buf + (size_t)blockIdx.y * max_len;
    double *sub = sub_buf + (size_t)blockIdx.y * max_len;
    int rows = len - i0 < RT_ROWS ? len - i0 : RT_ROWS;
    int tr = threadIdx.x / 16 * 4, tc = threadIdx.x % 16 * 4; /* this thread's 4 x 4 */
    if (threadIdx.x < RT_ROWS) found[threadIdx.x] = -1;
    if (threadIdx.x == 0) n_left = rows;
    for (int e = len; e > 0; e -= RT_COLS) {
        int c0 = e - RT_COLS; /* columns [c0, e); c0 < 0 only in the last tile */
        float acc[4][4] = {};
        for (int d0 = 0; d0 < hd; d0 += RT_DK) {
            __syncthreads(); /* the previous stage's reads are done */
            red_tile_load(as, u, inv, hd, i0, len, d0);
            red_tile_load(bs, u, inv, hd, c0, e, d0);
            __syncthreads();
            tile_fma(acc, as, bs, tr, tc);
        }
        if (threadIdx.x < RT_ROWS) best[threadIdx.x] = -1;
        __syncthreads();
        for (int x = 0; x < 4; x++) {
            int r = tr + x, i = i0 + r;
            if (r >= rows || found[r] >= 0) continue;
            for (int y = 3; y >= 0; y--) { /* this thread's most recent match */
                int j = c0 + tc + y;
                if (j >= 0 && j < e && j != i && acc[x][y] > threshold) {
                    atomicMax(&best[r], j);
                    break;
                }
            }
        }
        __syncthreads();
        for (int x = 0; x < 4; x++) /* the one thread holding a row's best writes its value */
            for (int y = 0; y < 4; y++)
                if (tr + x < rows && best[tr + x] >= 0 && best[tr + x] == c0 + tc + y)
                    best_c[tr + x] = acc[x][y];
        __syncthreads();
        if ((int)threadIdx.x < rows && found[threadIdx.x] < 0 && best[threadIdx.x] >= 0) {
            found[threadIdx.x] = best[threadIdx.x];
            found_c[threadIdx.x] = best_c[threadIdx.x];
            atomicSub(&n_left, 1);
        }
        __syncthreads();
        if (n_left == 0) break;
    }
    if ((int)threadIdx.x < rows) {
        int r = threadIdx.x;
        jstar_buf[(size_t)blockIdx.y * max_len + i0 + r] = found[r];
        if (found[r] >= 0) atomicAdd(&sub[found[r]], (double)found_c[r]);
    }
}

/* A double summed over a warp, every lane getting it. */
__device__ static double warp_sum_double(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* A warp per row i: base[i] = k_i . S - k_i . k_i in double; with the
 * quirk, a row with no match takes its product with key 0 off column 0. */
__global__ static void k_batch_red_base(const struct score_unit *units, int hd, int max_len,
                                        const float *inv_buf, const double *sum_buf,
                                        double *base_buf, double *sub_buf,
                                        const int *jstar_buf, int quirk)
{
    const struct score_unit *u = &units[blockIdx.y];
    int lane = threadIdx.x & 31, i = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (i >= u->len) return; /* the whole warp */
    const float *inv = inv_buf + (size_t)blockIdx.y * max_len;
    const double *sum = sum_buf + (size_t)blockIdx.y * hd;
    double self = 0.0, dot = 0.0, d0 = 0.0;
    bool zero_col0 = quirk && i != 0 && jstar_buf[(size_t)blockIdx.y * max_len + i] < 0;
    for (int d = lane; d < hd; d += 32) {
        float ki = kn_at(u, inv, hd, i, d);
        self += (double)ki * ki;
        dot += (double)ki * sum[d];
        if (zero_col0) d0 += (double)ki * kn_at(u, inv, hd, 0, d);
    }
    self = warp_sum_double(self);
    dot = warp_sum_double(dot);
    if (zero_col0) d0 = warp_sum_double(d0);
    if (lane != 0) return;
    base_buf[(size_t)blockIdx.y * max_len + i] = dot - self;
    if (zero_col0) atomicAdd(&sub_buf[(size_t)blockIdx.y * max_len], d0);
}

/* One block per unit: red = softmax_j((base[j] - sub[j]) / len). */
__global__ static void __launch_bounds__(1024)
k_batch_red_softmax(const struct score_unit *units, int max_len, double *base_buf,
                    const double *sub_buf)
{
    __shared__ double red[32];
    const struct score_unit *u = &units[blockIdx.x];
    block_redundancy_softmax(u->red, base_buf + (size_t)blockIdx.x * max_len,
                             sub_buf + (size_t)blockIdx.x * max_len, u->len, red);
}

int cuda_key_redundancy_batch(struct backend *be, const struct score_batch_args *a)
{
    if (!a->units || a->n_units < 0 || a->max_len < 1 || a->head_dim < 1) return -1;
    if (failed(be)) return -1;
    if (a->n_units == 0) return 0;
    int hd = a->head_dim, chunk = a->n_units < BATCH_CHUNK ? a->n_units : BATCH_CHUNK;
    size_t shared = (size_t)hd * sizeof(float);
    if (shared > 48 * 1024) return -1;
    size_t slots = (size_t)chunk * a->max_len;
    /* base, sub (doubles), sum (doubles), inv (floats), jstar (ints) */
    double *base = (double *)float_scratch(be, slots * 2 * sizeof(double) +
                                                   (size_t)chunk * hd * sizeof(double) +
                                                   slots * (sizeof(float) + sizeof(int)),
                                           "batched redundancy scratch");
    if (!base) return -1;
    double *sub = base + slots, *sum = sub + slots;
    float *inv = (float *)(sum + (size_t)chunk * hd);
    int *jstar = (int *)(inv + slots);
    bool tiles = !cuda_tiles_off();
    for (int u0 = 0; u0 < a->n_units; u0 += chunk) {
        int n = a->n_units - u0 < chunk ? a->n_units - u0 : chunk;
        const struct score_unit *units = a->units + u0;
        k_batch_norms<<<dim3(blocks_for(a->max_len, 128), n), 128>>>(units, hd, a->max_len, inv,
                                                                       sub);
        if (!launched(be, "batched key norms")) return -1;
        k_batch_key_sum<<<n, 128>>>(units, hd, a->max_len, inv, sum);
        if (!launched(be, "batched key sums")) return -1;
        if (tiles) {
            k_batch_red_tiles<<<dim3(blocks_for(a->max_len, RT_ROWS), n), RT_THREADS>>>(
                units, hd, a->max_len, inv, sub, jstar, a->threshold);
            if (!launched(be, "batched redundancy tiles")) return -1;
            k_batch_red_base<<<dim3(blocks_for(a->max_len, 8), n), 256>>>(
                units, hd, a->max_len, inv, sum, base, sub, jstar, a->no_match_zero_col0);
            if (!launched(be, "batched redundancy bases")) return -1;
        } else {
            k_batch_red_rows<<<dim3(a->max_len, n), CUDA_THREADS, shared>>>(
                units, hd, a->max_len, inv, sum, base, sub, a->threshold, a->no_match_zero_col0);
            if (!launched(be, "batched redundancy rows")) return -1;
        }
        k_batch_red_softmax<<<n, 1024>>>(units, a->max_len, base, sub);
        if (!launched(be, "batched redundancy softmax")) return -1;
    }
    return 0;
}

/* ---- top-k: every candidate's rank by counting, O(n^2) per unit ---- */

struct topk_params {
    int score, by_position, head_dim, max_len, use_pads, pad_keep, bf16;
    double lambda, pad_score;
};

/* x through f32 to bf16, nearest, ties to even (util/bf16.h's bf16_round). */
__device__ static double bf16_round_d(double x)
{
    float f = __double2float_rn(x);
    if (isnan(f)) return x;
    unsigned u = __float_as_uint(f);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (double)__uint_as_float(u & 0xffff0000u);
}

/* The mix of bf16 tensors (util/bf16.h, bf16_mix): f32 products and
 * difference, each rounded to bf16. */
__device__ static double mix_bf16_d(double lambda, float imp, float red)
{
    float fl = __double2float_rn(lambda), fr = __double2float_rn(1.0 - lambda);
    float a = (float)bf16_round_d(__fmul_rn((float)bf16_round_d(imp), fl));
    float b = (float)bf16_round_d(__fmul_rn((float)bf16_round_d(red), fr));
    return bf16_round_d(__fsub_rn(a, b));
}

/* Scores in double, no contraction: as the CPU's expressions round. */
__global__ static void k_batch_scores(const struct score_unit *units, topk_params p,
                                      double *z_buf)
{
    const struct score_unit *u = &units[blockIdx.y];
    double *z = z_buf + (size_t)blockIdx.y * p.max_len;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < u->n_cand;
         j += gridDim.x * blockDim.x) {
        double v;
        if (p.score == BATCH_SCORE_AGE) {
            v = -j;
        } else if (p.score == BATCH_SCORE_IMP) {
            v = p.bf16 ? bf16_round_d(u->imp[j]) : u->imp[j];
        } else if (p.score == BATCH_SCORE_MIX && p.bf16) {
            v = mix_bf16_d(p.lambda, u->imp[j], u->red[j]);
        } else if (p.score == BATCH_SCORE_MIX) {
            v = __dsub_rn(__dmul_rn(p.lambda, (double)u->imp[j]),
                          __dmul_rn(1.0 - p.lambda, (double)u->red[j]));
        } else if (p.score == BATCH_SCORE_Z) {
            v = u->z[j];
        } else {
            double s = 0.0;
            for (int d = 0; d < p.head_dim; d++) {
                double x = kv_elem_at(u->k, u->kv_type, (size_t)j * p.head_dim + d);
                s = __dadd_rn(s, __dmul_rn(x, x));
            }
            v = -sqrt(s);
        }
        z[j] = u->add ? __dadd_rn(v, (double)u->add[j]) : v;
        if (p.bf16) z[j] = bf16_round_d(z[j]);
        if (p.use_pads && is_pad(u, j)) z[j] = p.pad_keep ? p.pad_score : -p.pad_score;
    }
}

/* a (score, index) ranks before b. */
__device__ static bool ranks_before(double za, int ia, double zb, int ib)
{
    bool na = isnan(za), nb = isnan(zb);
    if (na != nb) return nb;
    if (!na && za != zb) return za > zb;
    return ia < ib;
}

__global__ static void k_batch_rank(const struct score_unit *units, topk_params p,
                                    const double *z_buf, int *rank_buf)
{
    const struct score_unit *u = &units[blockIdx.y];
    const double *z = z_buf + (size_t)blockIdx.y * p.max_len;
    int *rank = rank_buf + (size_t)blockIdx.y * p.max_len, n = u->n_cand;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < u->len; j += gridDim.x * blockDim.x) {
        if (j >= n) { /* the window, after the selected */
            u->keep[u->n_select + j - n] = j;
            continue;
        }
        int r = 0;
        double zj = z[j];
        for (int i = 0; i < n; i++) r += ranks_before(z[i], i, zj, j);
        rank[j] = r;
        if (!p.by_position && r < u->n_select) u->keep[r] = j;
    }
}

/* By position: a kept candidate lands after the kept ones before it. */
__global__ static void k_batch_place(const struct score_unit *units, topk_params p,
                                     const int *rank_buf)
{
    const struct score_unit *u = &units[blockIdx.y];
    const int *rank = rank_buf + (size_t)blockIdx.y * p.max_len;
    int k = u->n_select;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < u->n_cand;
         j += gridDim.x * blockDim.x) {
        if (rank[j] >= k) continue;
        int at = 0;
        for (int i = 0; i < j; i++) at += rank[i] < k;
        u->keep[at] = j;
    }
}

/* ---- top-k by sorting: a block per unit, its candidates in shared memory ----
 * Ranking by counting costs n^2 comparisons a unit (1.3 million at 1,152
 * candidates); a bitonic sort of the (score, index) pairs costs about
 * n log^2 n / 4.  The order is the total one (ranks_before), so the sorted
 * sequence, hence every keep-set, is the one ranking gives.  Up to
 * SORT_MAX candidates (48 KiB of shared memory); more take the counting. */

enum { SORT_MAX = 4096, SORT_THREADS = 1024 };

/* Sorts (z, ix)[0, n2) into rank order (n2 a power of two); block-wide. */
__device__ static void bitonic_rank_sort(double *z, int *ix, int n2)
{
    for (int size = 2; size <= n2; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int t = threadIdx.x; t < n2 / 2; t += blockDim.x) {
                int lo = 2 * stride * (t / stride) + t % stride, hi = lo + stride;
                bool first = (lo & size) == 0; /* this run ascends in rank order */
                bool swap = first ? ranks_before(z[hi], ix[hi], z[lo], ix[lo])
                                  : ranks_before(z[lo], ix[lo], z[hi], ix[hi]);
                if (swap) {
                    double tz = z[lo];
                    int ti = ix[lo];
                    z[lo] = z[hi], ix[lo] = ix[hi];
                    z[hi] = tz, ix[hi] = ti;
                }
            }
        }
    __syncthreads();
}

__global__ static void __launch_bounds__(SORT_THREADS)
k_batch_sort_select(const struct score_unit *units, topk_params p, const double *z_buf, int n2)
{
    extern __shared__ double sz[]; /* [n2] scores, then [n2] indices */
    int *ix = (int *)(sz + n2);
    const struct score_unit *u = &units[blockIdx.x];
    const double *z = z_buf + (size_t)blockIdx.x * p.max_len;
    int n = u->n_cand, k = u->n_select;
    for (int j = threadIdx.x; j < u->len - n; j += blockDim.x) /* the window, after the top */
        u->keep[k + j] = n + j;
    for (int t = threadIdx.x; t < n2; t += blockDim.x) { /* past n: NaN, ranked last */
        sz[t] = t < n ? z[t] : (double)NAN;
        ix[t] = t;
    }
    bitonic_rank_sort(sz, ix, n2);
    if (p.by_position) { /* the top k again, by index: -index ranks them ascending */
        for (int t = threadIdx.x; t < n2; t += blockDim.x) {
            int keep = t < k;
            sz[t] = keep ? -(double)ix[t] : (double)NAN;
            ix[t] = keep ? ix[t] : n2 + t;
        }
        bitonic_rank_sort(sz, ix, n2);
    }
    for (int r = threadIdx.x; r < k; r += blockDim.x) u->keep[r] = ix[r];
}

int cuda_batch_topk(struct backend *be, const struct score_batch_args *a)
{
    if (!a->units || a->n_units < 0 || a->max_len < 1) return -1;
    if (failed(be)) return -1;
    if (a->n_units == 0) return 0;
    int chunk = a->n_units < BATCH_CHUNK ? a->n_units : BATCH_CHUNK;
    size_t slots = (size_t)chunk * a->max_len;
    double *z = (double *)float_scratch(be, slots * (sizeof(double) + sizeof(int)),
                                       "batched top-k scratch");
    if (!z) return -1;
    int *rank = (int *)(z + slots);
    topk_params p = {a->score, a->by_position, a->head_dim, a->max_len, a->use_pads,
                     a->pad_keep, a->bf16, a->lambda, a->pad_score};
    unsigned bx = blocks_for(a->max_len, CUDA_THREADS);
    int n2 = 1; /* candidates are at most max_len */
    while (n2 < a->max_len) n2 <<= 1;
    bool sort = !cuda_tiles_off() && n2 <= SORT_MAX;
    for (int u0 = 0; u0 < a->n_units; u0 += chunk) {
        int n = a->n_units - u0 < chunk ? a->n_units - u0 : chunk;
        const struct score_unit *units = a->units + u0;
        k_batch_scores<<<dim3(bx, n), CUDA_THREADS>>>(units, p, z);
        if (!launched(be, "batched scores")) return -1;
        if (sort) {
            k_batch_sort_select<<<n, SORT_THREADS, (size_t)n2 * (sizeof(double) + sizeof(int))>>>(
                units, p, z, n2);
            if (!launched(be, "batched top-k sort")) return -1;
            continue;
        }
        k_batch_rank<<<dim3(bx, n), CUDA_THREADS>>>(units, p, z, rank);
        if (!launched(be, "batched ranks")) return -1;
        if (a->by_position) {
            k_batch_place<<<dim3(bx, n), CUDA_THREADS>>>(units, p, rank);
            if (!launched(be, "batched placement")) return -1;
        }
    }
    return 0;
}

/* ---- compaction: rows to the staging, then back ---- */

/* A row r with keep[r] == r stays (nothing else writes it): neither staged
 * nor written back (the slots before the first evicted one of a set in
 * position order, most of H2O's one eviction a step). */
__global__ static void k_batch_gather(const struct gather_unit *units, float *scratch,
                                      size_t unit_floats, int which, int back)
{
    const struct gather_unit *u = &units[blockIdx.y];
    float *rows = which ? u->v : u->k, *s = scratch + (size_t)blockIdx.y * unit_floats;
    size_t w = (size_t)u->row_words, n = (size_t)u->n_keep * w;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n;
         t += (size_t)gridDim.x * blockDim.x) {
        size_t r = t / w, from = (size_t)u->keep[r];
        if (from == r) continue;
        if (back) rows[t] = s[t];
        else s[t] = rows[from * w + t % w];
    }
}

int cuda_kv_gather_batch(struct backend *be, const struct gather_unit *units, int n_units,
                         float *scratch, size_t unit_floats)
{
    if (n_units < 0 || (n_units > 0 && (!units || !scratch))) return -1;
    if (failed(be)) return -1;
    if (n_units == 0 || unit_floats == 0) return 0;
    unsigned bx = blocks_for(unit_floats, CUDA_THREADS);
    if (bx > 4096) bx = 4096;
    for (int u0 = 0; u0 < n_units; u0 += 65535) { /* grid.y's limit */
        int n = n_units - u0 < 65535 ? n_units - u0 : 65535;
        for (int which = 0; which < 2; which++)
            for (int back = 0; back < 2; back++) {
                k_batch_gather<<<dim3(bx, n), CUDA_THREADS>>>(
                    units + u0, scratch + (size_t)u0 * unit_floats, unit_floats, which, back);
                if (!launched(be, "batched gather")) return -1;
            }
    }
    return 0;
}

void cuda_sync(struct backend *be)
{
    double t0 = cuda_host_s();
    if (!failed(be)) cuda_ok(be, cudaDeviceSynchronize(), "sync");
    cuda_waited(be, t0);
}
