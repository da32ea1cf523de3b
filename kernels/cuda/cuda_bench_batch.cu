/* cuda_bench_batch.cu - times the batched eviction ops at a model's shape:
 * one compression of every (sequence, layer, kv head) of a batch, as
 * harness/exp/policy_batch.c issues it for R-KV (window scores, key
 * redundancy, top-k, then one gather per layer), then the shared scores of
 * the per-layer policies (TOVA's last-query attention, h2o-rkv's head
 * mean).  The window scores and the redundancy are timed as tiles (the
 * default) and once with the kernels before them (EVICTBENCH_CUDA_TILES=0).
 * Not part of the tests.
 *
 *   cuda_bench_batch [n_seq n_layer n_head n_kv head_dim len budget]
 *   (default: 64 sequences, the 7B's 28 x 28:4 x 128, 2176 slots, budget 2048) */
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <vector>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* The window scores, the redundancy and the top-k of a, each timed to the
 * device's end: ms[0..2]; 0, or nonzero when an op failed. */
static int time_scores(struct backend *be, const score_batch_args *a, double ms[3])
{
    int (*const ops[3])(struct backend *, const score_batch_args *) = {
        be->window_scores_batch, be->key_redundancy_batch, be->batch_topk};
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        rc |= ops[i](be, a);
        be->sync(be);
        ms[i] = 1e3 * (now_s() - t0);
    }
    return rc;
}

int main(int argc, char **argv)
{
    int v[7] = {64, 28, 28, 4, 128, 2176, 2048};
    for (int i = 1; i < argc && i <= 7; i++) v[i - 1] = atoi(argv[i]);
    int n_seq = v[0], n_layer = v[1], n_head = v[2], n_kv = v[3], hd = v[4], len = v[5],
        budget = v[6], window = 8;
    struct eb_err e;
    struct backend *be = backend_cuda_create(0, &e);
    if (!be) {
        fprintf(stderr, "cuda_bench_batch: %s\n", e.msg);
        return 1;
    }
    int per_layer = n_seq * n_kv, n_units = n_layer * per_layer;
    size_t head = (size_t)len * hd / 2; /* bf16 keys, as floats */
    size_t kv_floats = (size_t)n_units * head;
    float *keys = be->alloc(be, kv_floats), *vals = be->alloc(be, kv_floats);
    float *ring = be->alloc(be, (size_t)n_seq * n_layer * window * n_head * hd);
    float *imp = be->alloc(be, (size_t)n_units * len), *red = be->alloc(be, (size_t)n_units * len);
    float *keep = be->alloc(be, (size_t)n_units * len);
    float *zrows = be->alloc(be, (size_t)n_layer * n_seq * len * 2); /* doubles, a row a run */
    float *scratch = be->alloc(be, (size_t)per_layer * budget * hd / 2);
    if (!keys || !vals || !ring || !imp || !red || !keep || !zrows || !scratch) {
        fprintf(stderr, "cuda_bench_batch: out of device memory\n");
        return 1;
    }
    /* Random bf16 keys (small integers' bit patterns would do; use an LCG). */
    std::vector<float> host(head);
    uint32_t x = 12345;
    for (size_t i = 0; i < head; i++) {
        uint16_t h[2];
        for (int k = 0; k < 2; k++) {
            x = x * 1664525u + 1013904223u;
            h[k] = (uint16_t)(0x3c00u | ((x >> 9) & 0x00ffu)) ^ (uint16_t)((x >> 31) << 15);
        }
        memcpy(&host[i], h, 4);
    }
    for (int u = 0; u < n_units; u++) {
        be->upload(be, keys + (size_t)u * head, host.data(), head);
        be->upload(be, vals + (size_t)u * head, host.data(), head);
    }
    std::vector<float> qh((size_t)window * n_head * hd);
    for (auto &q : qh) {
        x = x * 1664525u + 1013904223u;
        q = (float)((int)(x >> 16) - 32768) / 32768.0f;
    }
    for (int s = 0; s < n_seq * n_layer; s++)
        be->upload(be, ring + (size_t)s * qh.size(), qh.data(), qh.size());
    std::vector<score_unit> units(n_units);
    std::vector<gather_unit> gunits(n_units);
    for (int l = 0; l < n_layer; l++)
        for (int s = 0; s < n_seq; s++)
            for (int h = 0; h < n_kv; h++) {
                int u = (l * n_seq + s) * n_kv + h;
                score_unit d = {};
                d.k = keys + (size_t)u * head;
                d.q = ring + (size_t)(s * n_layer + l) * qh.size();
                d.imp = imp + (size_t)u * len;
                d.red = red + (size_t)u * len;
                d.keep = (int *)(keep + (size_t)u * len);
                d.z = (double *)zrows + (size_t)(l * n_seq + s) * len; /* runs: a layer's heads */
                d.kv_type = KV_BF16;
                d.kv_head = h;
                d.len = len;
                d.n_cand = len - window;
                d.n_select = budget - window;
                d.n_q = window;
                d.q_ring = window;
                d.q_first = 3;
                units[u] = d;
                gunits[u] = gather_unit{keys + (size_t)u * head, vals + (size_t)u * head,
                                        (const int *)d.keep, budget, hd / 2};
            }
    size_t uf = units.size() * sizeof(score_unit) / sizeof(float);
    size_t gf = gunits.size() * sizeof(gather_unit) / sizeof(float);
    float *d_units = be->alloc(be, uf), *d_gunits = be->alloc(be, gf);
    score_batch_args a = {};
    a.units = (const score_unit *)d_units;
    a.n_units = n_units;
    a.max_len = len;
    a.max_q = window;
    a.n_head = n_head;
    a.n_kv = n_kv;
    a.head_dim = hd;
    a.scale = 1.0f / sqrtf((float)hd);
    a.gqa = SCORE_GQA_MAX;
    a.kernel = 7;
    a.pool = SCORE_POOL_MAX;
    a.threshold = 0.5f;
    a.no_match_zero_col0 = 1;
    a.score = BATCH_SCORE_MIX;
    a.lambda = 0.1;
    double ms[3];
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        be->upload(be, d_units, (const float *)units.data(), uf);
        int rc = time_scores(be, &a, ms);
        double t3 = now_s();
        be->upload(be, d_gunits, (const float *)gunits.data(), gf);
        for (int l = 0; l < n_layer; l++)
            rc |= be->kv_gather_batch(be, (const gather_unit *)(d_gunits) + (size_t)l * per_layer,
                                      per_layer, scratch, (size_t)budget * hd / 2);
        be->sync(be);
        double t4 = now_s();
        const char *err = backend_cuda_error(be);
        printf("%d seqs x %d layers x %d kv heads, %d slots -> %d: window %.1f ms, redundancy "
               "%.1f ms, top-k %.1f ms, gather %.1f ms, total %.1f ms%s%s\n",
               n_seq, n_layer, n_kv, len, budget, ms[0], ms[1], ms[2], 1e3 * (t4 - t3),
               1e3 * (t4 - t0), rc ? " (an op failed)" : "", err ? err : "");
    }
    { /* the kernels before the tiles (once: seconds at 64 sequences) */
        setenv("EVICTBENCH_CUDA_TILES", "0", 1);
        int rc = time_scores(be, &a, ms);
        unsetenv("EVICTBENCH_CUDA_TILES");
        const char *err = backend_cuda_error(be);
        printf("without tiles (EVICTBENCH_CUDA_TILES=0): window %.1f ms, redundancy %.1f ms, "
               "top-k %.1f ms%s%s\n", ms[0], ms[1], ms[2], rc ? " (an op failed)" : "",
               err ? err : "");
    }
    a.run = n_kv; /* the units of one (layer, sequence) are consecutive */
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        int rc = be->last_query_attn_batch(be, &a);
        be->sync(be);
        double t1 = now_s();
        rc |= be->head_mean_batch(be, &a);
        be->sync(be);
        double t2 = now_s();
        const char *err = backend_cuda_error(be);
        printf("per-layer scores: last query (TOVA) %.1f ms, head mean (h2o-rkv, after the "
               "window scores) %.1f ms%s%s\n", 1e3 * (t1 - t0), 1e3 * (t2 - t1),
               rc ? " (an op failed)" : "", err ? err : "");
    }
    be->destroy(be);
    return 0;
}
