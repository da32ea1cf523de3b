/* cuda_batch_layer.cu - the batched ops that give a run of units (the kv
 * heads of one layer of one sequence) one shared score (kernels/backend.h,
 * head_mean_batch and last_query_attn_batch) on the GPU; the reference is
 * kernels/cpu/cpu_batch_layer.c.  A run's sum over its units goes in unit
 * order in double, without fused multiply-adds, as the CPU adds; the head
 * mean is then the CPU's bit for bit, the last query's attention differs
 * only in the order of its softmax sum and in exp's last bit.  Pad slots
 * (score_unit.pad) are masked out of the last query's softmax as on the CPU.
 *
 * Scratch (float_scratch), for at most LAYER_CHUNK runs at a time:
 *   last query      16 bytes per run and slot (logits and the group's mean, double). */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_reduce.h"

enum { LAYER_CHUNK = 512, LQ_MAX_SHARED = 48 * 1024 };

/* ---- the heads' mean of their importance rows ---- */

__global__ static void k_head_mean(const struct score_unit *units, int run)
{
    const struct score_unit *lead = &units[(size_t)blockIdx.y * run];
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < lead->n_cand;
         j += gridDim.x * blockDim.x) {
        double s = 0.0;
        for (int g = 0; g < run; g++) s = __dadd_rn(s, (double)lead[g].imp[j]);
        lead->z[j] = s / run;
    }
}

/* Runs of units: run >= 1, n_units a multiple of it. */
static bool runs_ok(const struct score_batch_args *a)
{
    return a->units && a->n_units >= 0 && a->run >= 1 && a->n_units % a->run == 0 &&
           a->max_len >= 1;
}

int cuda_head_mean_batch(struct backend *be, const struct score_batch_args *a)
{
    if (!runs_ok(a)) return -1;
    if (failed(be)) return -1;
    int n_runs = a->n_units / a->run;
    unsigned bx = blocks_for(a->max_len, CUDA_THREADS);
    for (int r0 = 0; r0 < n_runs; r0 += 65535) { /* grid.y's limit */
        int n = n_runs - r0 < 65535 ? n_runs - r0 : 65535;
        k_head_mean<<<dim3(bx, n), CUDA_THREADS>>>(a->units + (size_t)r0 * a->run, a->run);
        if (!launched(be, "batched head mean")) return -1;
    }
    return 0;
}

/* ---- the last query's attention, the heads' mean: one block per run ---- */

struct last_query_params {
    int n_head, head_dim, group, run, max_len;
    double scale;
};

__global__ static void k_last_query(const struct score_unit *units, last_query_params p,
                                    double *logit_buf, double *one_buf)
{
    extern __shared__ float qs[]; /* [group][head_dim]: the unit's query heads */
    __shared__ double red[32];
    const struct score_unit *lead = &units[(size_t)blockIdx.x * p.run];
    double *logit = logit_buf + (size_t)blockIdx.x * p.max_len;
    double *one = one_buf + (size_t)blockIdx.x * p.max_len;
    int len = lead->len, nc = lead->n_cand, hd = p.head_dim;
    for (int j = threadIdx.x; j < nc; j += blockDim.x) lead->z[j] = 0.0;
    for (int g = 0; g < p.run; g++) {
        const struct score_unit *u = &lead[g];
        const float *q = u->q + ((size_t)((u->q_first + u->n_q - 1) % u->q_ring) * p.n_head +
                                 (size_t)u->kv_head * p.group) * hd;
        __syncthreads(); /* the previous unit is done with qs */
        for (int d = threadIdx.x; d < p.group * hd; d += blockDim.x) qs[d] = q[d];
        for (int j = threadIdx.x; j < nc; j += blockDim.x) one[j] = 0.0;
        __syncthreads();
        for (int h = 0; h < p.group; h++) {
            double mx = -INFINITY;
            for (int j = threadIdx.x; j < len; j += blockDim.x) {
                double s = 0.0;
                for (int d = 0; d < hd; d++)
                    s = __dadd_rn(s, __dmul_rn((double)qs[h * hd + d],
                                               (double)kv_elem_at(u->k, u->kv_type,
                                                                  (size_t)j * hd + d)));
                /* a pad takes no share (score_last_query_attn's rule) */
                logit[j] = u->pad && u->pad[j] ? -INFINITY : __dmul_rn(s, p.scale);
                mx = fmax(mx, logit[j]);
            }
            mx = block_reduce_d(mx, red, true);
            double sum = 0.0;
            for (int j = threadIdx.x; j < len; j += blockDim.x) {
                logit[j] = exp(logit[j] - mx);
                sum += logit[j];
            }
            sum = block_reduce_d(sum, red, false);
            /* each thread reads back only the slots it wrote */
            for (int j = threadIdx.x; j < nc; j += blockDim.x)
                one[j] = __dadd_rn(one[j], logit[j] / sum / p.group);
        }
        for (int j = threadIdx.x; j < nc; j += blockDim.x)
            lead->z[j] = __dadd_rn(lead->z[j], one[j]);
    }
    for (int j = threadIdx.x; j < nc; j += blockDim.x) lead->z[j] /= p.run;
}

int cuda_last_query_attn_batch(struct backend *be, const struct score_batch_args *a)
{
    if (!runs_ok(a) || a->head_dim < 1 || a->n_kv < 1 || a->n_head % a->n_kv != 0) return -1;
    if (failed(be)) return -1;
    int n_runs = a->n_units / a->run;
    if (n_runs == 0) return 0;
    last_query_params p = {a->n_head, a->head_dim, a->n_head / a->n_kv, a->run, a->max_len,
                           1.0 / sqrt((double)a->head_dim)};
    size_t shared = (size_t)p.group * a->head_dim * sizeof(float);
    if (shared > LQ_MAX_SHARED) return -1;
    int chunk = n_runs < LAYER_CHUNK ? n_runs : LAYER_CHUNK;
    size_t row = (size_t)chunk * a->max_len;
    double *logits = (double *)float_scratch(be, 2 * row * sizeof(double),
                                            "batched last-query scratch");
    if (!logits) return -1;
    for (int r0 = 0; r0 < n_runs; r0 += chunk) {
        int n = n_runs - r0 < chunk ? n_runs - r0 : chunk;
        k_last_query<<<n, CUDA_THREADS, shared>>>(a->units + (size_t)r0 * a->run, p, logits,
                                                  logits + row);
        if (!launched(be, "batched last-query attention")) return -1;
    }
    return 0;
}
