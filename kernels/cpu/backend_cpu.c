/* backend_cpu.c - the CPU backend: memory, and the table wiring its kernels.
 *
 * Backend memory is 64-byte aligned host memory, so upload/download/copy are
 * memcpy.  The kernels live in cpu_gemm.c, cpu_norm_rope.c, cpu_elementwise.c,
 * cpu_attention.c and cpu_kvtable.c (the layer-granular KV table). */
#include "kernels/cpu/cpu_ops.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

enum { CPU_ALIGN = 64 };

static float *cpu_alloc(struct backend *be, size_t n_floats)
{
    (void)be;
    if (n_floats > (SIZE_MAX - CPU_ALIGN) / sizeof(float)) return NULL;
    size_t bytes = n_floats * sizeof(float);
    /* aligned_alloc wants a multiple of the alignment (and a non-zero size). */
    bytes = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if (bytes == 0) bytes = CPU_ALIGN;
    return aligned_alloc(CPU_ALIGN, bytes);
}

static void cpu_free(struct backend *be, float *p)
{
    (void)be;
    free(p);
}

static void cpu_upload(struct backend *be, float *dst, const float *src_host, size_t n)
{
    (void)be;
    if (n) memcpy(dst, src_host, n * sizeof(float));
}

static void cpu_download(struct backend *be, float *dst_host, const float *src, size_t n)
{
    (void)be;
    if (n) memcpy(dst_host, src, n * sizeof(float));
}

static void cpu_copy(struct backend *be, float *dst, const float *src, size_t n)
{
    (void)be;
    /* memmove: callers may shift a cache row onto an overlapping one. */
    if (n && dst != src) memmove(dst, src, n * sizeof(float));
}

static void cpu_fill(struct backend *be, float *dst, float value, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) dst[i] = value;
}

struct par_for {
    void (*body)(void *ctx, int i0, int i1, int ith);
    void *ctx;
    int n, grain, chunks;
    atomic_int next;
};

static void par_for_job(void *arg, int ith, int nth)
{
    (void)nth;
    struct par_for *pf = arg;
    for (int c; (c = cpu_pool_chunk(&pf->next, pf->chunks)) >= 0;) {
        int i0 = c * pf->grain, i1 = pf->n - i0 < pf->grain ? pf->n : i0 + pf->grain;
        pf->body(pf->ctx, i0, i1, ith);
    }
}

void cpu_parallel_for(struct backend *be, int n, int grain, int par,
                      void (*body)(void *ctx, int i0, int i1, int ith), void *ctx)
{
    if (n <= 0) return;
    struct cpu_impl *im = be->impl;
    if (grain < 1) grain = 1;
    int chunks = (n + grain - 1) / grain;
    if (!par || im->n_threads <= 1 || chunks < 2) {
        body(ctx, 0, n, 0);
        return;
    }
    struct par_for pf = {body, ctx, n, grain, chunks, 0};
    cpu_pool_run(im->pool, chunks < im->n_threads ? chunks : im->n_threads, par_for_job, &pf);
}

void cpu_parallel(struct backend *be, void (*fn)(void *ctx, int ith, int nth), void *ctx)
{
    struct cpu_impl *im = be->impl;
    cpu_pool_run(im->pool, im->n_threads, fn, ctx);
}

static void cpu_destroy(struct backend *be)
{
    if (!be) return;
    struct cpu_impl *im = be->impl;
    if (im) {
        cpu_pool_free(im->pool);
        free(im->scratch[0]);
        free(im->scratch[1]);
        free(im->scratch[2]);
        free(im->att_items);
        free(im->att_scratch);
    }
    free(im);
    free(be);
}

/* The CPUs this process may run on (a Slurm job's share, a taskset), as
 * OpenMP counted them. */
static int cpus_allowed(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

struct backend *backend_cpu_create(int n_threads)
{
    struct backend *be = calloc(1, sizeof *be);
    struct cpu_impl *impl = calloc(1, sizeof *impl);
    if (!be || !impl) {
        free(be);
        free(impl);
        return NULL;
    }
    impl->n_threads = n_threads > 0 ? n_threads : cpus_allowed();
    if (!(impl->pool = cpu_pool_create(impl->n_threads))) {
        free(be);
        free(impl);
        return NULL;
    }
    impl->simd = cpu_simd_level();
    /* From this batch size on, f32 panels + sgemm are used.  With the
     * multi-row integer kernels, a Q4_K 1536 x 8960 matmul on one thread
     * cost per x row: integer 0.66 / 0.55 / 0.73 ms at m = 8 / 16 / 32,
     * panels 1.82 / 1.16 / 0.86 (Q6_K 8960 x 1536 alike; timed on a shared
     * machine).  So decode batches up to 32 stay on the integer path (bitwise
     * equal to batch 1) and prefill takes the panels.  (Small-k Q4_1 / Q8_0,
     * SmolLM's, tie at 16 and favour panels by up to 1.4x at 32.)  This was
     * measured with the row-by-row kernels; weights held 8 rows interleaved
     * (cpu_q*_x8.c) never take the panels (cpu_matmul). */
    impl->panel_min_m = 33;
    const char *pm = getenv("EVICTBENCH_CPU_PANEL_M");
    if (pm && atoi(pm) > 0) impl->panel_min_m = atoi(pm);
    const char *fb = getenv("EVICTBENCH_CPU_FAIL_BIND");
    if (fb && atoi(fb) > 0) impl->fail_bind = atoi(fb);
    be->name = "cpu";
    be->impl = impl;
    be->alloc = cpu_alloc;
    be->free = cpu_free;
    be->upload = cpu_upload;
    be->download = cpu_download;
    be->copy = cpu_copy;
    be->fill = cpu_fill;
    be->gemm = cpu_gemm;
    be->rmsnorm = cpu_rmsnorm;
    be->rope = cpu_rope;
    be->swiglu = cpu_swiglu;
    be->add = cpu_add;
    be->embed = cpu_embed;
    be->gather_rows = cpu_gather_rows;
    be->attention = cpu_attention;
    be->destroy = cpu_destroy;
    be->window_scores = cpu_window_scores;
    be->pool1d = cpu_pool1d;
    be->key_redundancy = cpu_key_redundancy;
    be->row_range = cpu_row_range;
    be->window_scores_batch = cpu_window_scores_batch;
    be->key_redundancy_batch = cpu_key_redundancy_batch;
    be->head_mean_batch = cpu_head_mean_batch;
    be->last_query_attn_batch = cpu_last_query_attn_batch;
    be->batch_topk = cpu_batch_topk;
    be->batch_pads = 1; /* cpu_batch*.c pass score_unit.pad on to the per-head primitives */
    be->kv_gather_batch = cpu_kv_gather_batch;
    be->weight_create = cpu_weight_create;
    be->weight_free = cpu_weight_free;
    be->weight_join = cpu_weight_join;
    be->matmul = cpu_matmul;
    be->embed_weight = cpu_embed_weight;
    be->embed_weight_dev = cpu_embed_weight; /* backend memory is host memory */
    be->layer_in = cpu_layer_in;
    be->layer_out = cpu_layer_out;
    be->thread_syncs = cpu_thread_syncs;
    be->kv_store = cpu_kv_store;
    be->kv_load = cpu_kv_load;
    be->kv_table_create = cpu_kv_table_create;
    be->kv_table_free = cpu_kv_table_free;
    be->kv_table_bind = cpu_kv_table_bind;
    be->kv_table_step = cpu_kv_table_step;
    be->kv_append = cpu_kv_append;
    be->attention_layer = cpu_attention_layer;
    return be;
}
