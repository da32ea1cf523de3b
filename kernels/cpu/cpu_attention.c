/* cpu_attention.c - causal GQA attention of new queries over one sequence's
 * KV cache.
 *
 * Each (head, query) pair is one task for OpenMP.  The softmax is the online
 * (running max) form: one pass over the visible slots accumulates the output
 * straight into its row, so the kernel needs no scratch memory whatever the
 * cache length, and the output is the same whether probabilities are asked
 * for or not (they are written afterwards from the final max and sum).
 * Slots flagged in the optional slot mask are skipped as if absent.
 *
 * A 16-bit cache (f16, bf16) is read in place, row by row, through the row
 * kernels of cpu_kv.c (widened to f32 in registers, f32 accumulation): no
 * f32 copy of the cache is made.  The f32 path is unchanged. */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <string.h>

static float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    #pragma omp simd reduction(+:s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Slots query i of n_new can see in a kv head holding kv_len slots. */
static int visible_slots(int kv_len, int n_new, int i, int cap)
{
    int n = kv_len - n_new + i + 1;
    if (n < 0) n = 0;
    if (n > cap) n = cap;
    return n;
}

static void attend_one(const struct attn_args *a, const struct cpu_kv_rows *rows, int h, int i)
{
    int hd = a->head_dim;
    size_t eb = kv_type_bytes(a->kv_type);
    int g = h / (a->n_head / a->n_kv);
    int n_vis = visible_slots(a->kv_len[g], a->n_new, i, a->cap);
    size_t row = (size_t)i * a->n_head * hd + (size_t)h * hd;
    const float *q = a->q + row;
    float *o = a->out + row;
    const char *k = (const char *)a->k_cache + (size_t)g * a->cap * hd * eb;
    const char *v = (const char *)a->v_cache + (size_t)g * a->cap * hd * eb;
    float *p = a->probs ? a->probs + ((size_t)h * a->n_new + i) * a->cap : NULL;
    const unsigned char *mask = a->slot_mask ? a->slot_mask + (size_t)g * a->cap : NULL;

    float max = -INFINITY, sum = 0.0f;
    memset(o, 0, (size_t)hd * sizeof(float));
    for (int j = 0; j < n_vis; j++) {
        if (mask && mask[j]) continue; /* a masked slot takes no part in the softmax */
        const void *kj = k + (size_t)j * hd * eb, *vj = v + (size_t)j * hd * eb;
        float s = (rows ? rows->dot(q, kj, hd) : dot(q, kj, hd)) * a->scale;
        if (p) p[j] = s;
        if (s > max) {
            /* A new maximum: rescale what was accumulated under the old one. */
            float c = expf(max - s);
            sum *= c;
            for (int d = 0; d < hd; d++) o[d] *= c;
            max = s;
        }
        float e = expf(s - max);
        sum += e;
        if (rows) {
            rows->axpy(o, e, vj, hd);
            continue;
        }
        const float *vf = vj;
        #pragma omp simd
        for (int d = 0; d < hd; d++) o[d] += e * vf[d];
    }
    if (n_vis > 0 && sum > 0.0f)
        for (int d = 0; d < hd; d++) o[d] /= sum;
    if (p) {
        for (int j = 0; j < n_vis; j++)
            p[j] = (mask && mask[j]) || sum <= 0.0f ? 0.0f : expf(p[j] - max) / sum;
        for (int j = n_vis; j < a->cap; j++) p[j] = 0.0f;
    }
}

void cpu_attention(struct backend *be, const struct attn_args *a)
{
    if (a->n_head <= 0 || a->n_kv <= 0 || a->n_head % a->n_kv != 0 || a->n_new <= 0 ||
        a->head_dim <= 0 || a->cap <= 0 || kv_type_bytes(a->kv_type) == 0)
        return;
    struct cpu_kv_rows kr, *rows = NULL;
    if (a->kv_type != KV_F32) {
        cpu_kv_rows_for(a->kv_type, ((const struct cpu_impl *)be->impl)->simd, &kr);
        rows = &kr;
    }
    int tasks = a->n_head * a->n_new;
    #pragma omp parallel for num_threads(cpu_threads(be)) if (tasks > 1) schedule(dynamic, 1)
    for (int t = 0; t < tasks; t++) attend_one(a, rows, t % a->n_head, t / a->n_head);
}
