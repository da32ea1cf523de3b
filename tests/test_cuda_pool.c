/* test_cuda_pool.c - the CUDA backend's host-side pieces, on the CPU: the
 * device pool's arena (first fit, split, coalesce, full -> refusal), its
 * sizing from free/total bytes (a batch that does not fit is EB_ERR_NOMEM,
 * the harness's 'oom'), device names, and the answer of a build without
 * CUDA (the weak stubs of kernels/cuda/backend_cuda_stub.c, which this
 * binary links because it is not the CUDA build). */
#include "test.h"

#include "kernels/cuda/backend_cuda.h"
#include "model/model.h"
#include "model/modelfile.h"

#include <stdint.h>

static const size_t MIB = (size_t)1 << 20, GIB = (size_t)1 << 30;

/* The arena's segments tile [0, size) in order, with no two free ones adjacent. */
static int arena_consistent(const struct dev_arena *a)
{
    size_t at = 0, used = 0;
    for (int i = 0; i < a->n_segs; i++) {
        const struct dev_seg *s = &a->segs[i];
        if (s->off != at || s->size == 0 || s->off % a->align) return 0;
        if (i > 0 && !s->used && !a->segs[i - 1].used) return 0;
        if (s->used) used += s->size;
        at += s->size;
    }
    return at == a->size && used == a->used;
}

static void test_arena_basic(void)
{
    struct dev_arena a;
    struct eb_err e = {0};
    CHECK(dev_arena_init(&a, 1000, 256, &e) == 0);
    CHECK(a.size == 768); /* whole blocks only */
    size_t o1, o2, o3, o4;
    CHECK(dev_arena_alloc(&a, 1, &o1) == 0 && o1 == 0);
    CHECK(dev_arena_alloc(&a, 257, &o2) == 0 && o2 == 256);  /* rounded to 512 */
    CHECK(dev_arena_alloc(&a, 1, &o3) == -1);                /* full */
    CHECK(a.used == 768 && a.peak == 768);
    CHECK(arena_consistent(&a));
    CHECK(dev_arena_free(&a, o1) == 0);
    CHECK(dev_arena_free(&a, o1) == -1); /* twice */
    CHECK(dev_arena_free(&a, 100) == -1); /* not a block */
    CHECK(dev_arena_alloc(&a, 0, &o4) == 0 && o4 == 0); /* 0 bytes still takes a block */
    CHECK(dev_arena_free(&a, o4) == 0 && dev_arena_free(&a, o2) == 0);
    CHECK(a.used == 0 && a.n_segs == 1 && arena_consistent(&a));
    CHECK(dev_arena_alloc(&a, 768, &o1) == 0 && o1 == 0);
    CHECK(dev_arena_alloc(&a, SIZE_MAX, &o2) == -1); /* no overflow in the rounding */
    dev_arena_release(&a);
    CHECK(dev_arena_init(&a, 1000, 3, &e) == -1 && strstr(e.msg, "power of two"));
    CHECK(dev_arena_init(&a, 100, 256, &e) == -1);
}

/* Random allocations and frees against a shadow list: blocks never overlap,
 * the bookkeeping stays consistent, and freeing everything leaves one free
 * segment (coalescing works in both directions). */
static void test_arena_random(void)
{
    struct dev_arena a;
    struct eb_err e = {0};
    CHECK(dev_arena_init(&a, 64 * MIB, 256, &e) == 0);
    enum { N = 400 };
    size_t off[N], size[N];
    int live[N] = {0};
    uint64_t x = 88172645463325252ull;
    int refusals = 0;
    for (int step = 0; step < 20000; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % N);
        if (live[i]) {
            CHECK(dev_arena_free(&a, off[i]) == 0);
            live[i] = 0;
        } else {
            size[i] = (size_t)(x >> 20) % (1 * MIB) + 1;
            if (dev_arena_alloc(&a, size[i], &off[i]) == 0) live[i] = 1;
            else refusals++;
        }
        if (step % 1000 == 0) CHECK(arena_consistent(&a));
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N && live[i]; j++)
            if (live[j]) CHECK(off[i] + size[i] <= off[j] || off[j] + size[j] <= off[i]);
    CHECK(refusals > 0); /* the pool did fill up at times: the refusal path ran */
    for (int i = 0; i < N; i++)
        if (live[i]) CHECK(dev_arena_free(&a, off[i]) == 0);
    CHECK(a.used == 0 && a.n_segs == 1 && arena_consistent(&a));
    CHECK(a.peak <= a.size && a.peak > 32 * MIB);
    dev_arena_release(&a);
}

static void test_plan(void)
{
    struct eb_err e = {0};
    struct kv_pool_plan p;
    /* R1-Distill-Qwen-7B: 28 layers x 4 kv heads x 128 x 2 (K, V) x 2 bytes
     * = 56 KiB per token; a 4k-token budgeted run holds ~4.6k slots. */
    size_t per_token = 28 * 4 * 128 * 2 * 2;
    struct kv_pool_need need = {per_token * 4608, 2 * GIB, 64};
    size_t total = 141 * GIB, free_bytes = 141 * GIB - 16 * GIB; /* after 15.2 GB of weights */
    CHECK(kv_pool_headroom(total) == total / 32);
    CHECK(kv_pool_headroom(8 * GIB) == 512 * MIB);
    CHECK(kv_pool_plan(free_bytes, total, &need, &p, &e) == 0);
    CHECK(p.pool_bytes >= 64 * need.kv_bytes_per_seq + need.act_bytes);
    CHECK(p.pool_bytes % (2 * MIB) == 0 && p.pool_bytes <= free_bytes - p.headroom);
    CHECK(p.max_batch == (int)((free_bytes - p.headroom - need.act_bytes) / need.kv_bytes_per_seq));
    CHECK(p.max_batch > 64);
    /* FullKV at 64k tokens and batch 64 (235 GiB of KV) does not fit an H200: an 'oom'. */
    need.kv_bytes_per_seq = per_token * 65536;
    CHECK(kv_pool_plan(free_bytes, total, &need, &p, &e) == -1);
    CHECK(e.kind == EB_ERR_NOMEM);
    CHECK_MSG(strstr(e.msg, "batch 64 needs") && strstr(e.msg, "sequences fit"), "%s", e.msg);
    CHECK(p.max_batch == (int)((free_bytes - p.headroom - need.act_bytes) / need.kv_bytes_per_seq));
    CHECK(p.max_batch > 0 && p.max_batch < 64);
    /* less free than the headroom: nothing fits, still an answer */
    CHECK(kv_pool_plan(100 * MIB, 8 * GIB, &need, &p, &e) == -1 && e.kind == EB_ERR_NOMEM);
    CHECK(p.max_batch == 0);
    /* overflow of batch x bytes is a refusal, not a wrap-around */
    struct kv_pool_need huge = {SIZE_MAX / 2, 0, 4};
    CHECK(kv_pool_plan(free_bytes, total, &huge, &p, &e) == -1 && e.kind == EB_ERR_NOMEM);
    /* malformed needs are errors of another kind */
    struct kv_pool_need none = {0, 0, 1};
    e.kind = EB_ERR_NOMEM;
    CHECK(kv_pool_plan(free_bytes, total, &none, &p, &e) == -1 && e.kind == EB_ERR_OTHER);
    struct kv_pool_need no_batch = {MIB, 0, 0};
    CHECK(kv_pool_plan(free_bytes, total, &no_batch, &p, &e) == -1 && e.kind == EB_ERR_OTHER);
    CHECK(kv_pool_plan(total + 1, total, &need, &p, &e) == -1 && e.kind == EB_ERR_OTHER);
}

/* What a sweep over batches 1, 16, 64 in one process does with the pool:
 * the real pieces (kv_pool_decide, kv_pool_plan, the arena) driven as
 * backend_cuda_ensure_pool drives them, on a simulated device whose free
 * memory the pool takes from. */
struct sim_dev {
    size_t total, free;
    struct dev_arena arena; /* size 0: no pool */
};

static int sim_ensure(struct sim_dev *d, const struct kv_pool_need *need, enum kv_pool_action *act,
                      struct eb_err *e)
{
    size_t size = d->arena.size, used = d->arena.used;
    if (kv_pool_decide(size, used, need, act, e)) return -1;
    if (*act == KV_POOL_KEEP) return 0;
    if (*act == KV_POOL_REPLAN) {
        CHECK(used == 0);
        d->free += size;
        dev_arena_release(&d->arena);
        memset(&d->arena, 0, sizeof d->arena);
    }
    struct kv_pool_plan p;
    if (kv_pool_plan(d->free, d->total, need, &p, e)) return -1;
    CHECK(p.pool_bytes <= d->free - p.headroom);
    d->free -= p.pool_bytes;
    return dev_arena_init(&d->arena, p.pool_bytes, 256, e);
}

/* One generate of `batch` sequences: every cache and the activations come
 * out of the pool (none may fail: the plan holds them), then go back. */
static void sim_generate(struct sim_dev *d, const struct kv_pool_need *need)
{
    size_t offs[65], act;
    CHECK(need->batch <= 64);
    CHECK(dev_arena_alloc(&d->arena, need->act_bytes ? need->act_bytes : 1, &act) == 0);
    for (int i = 0; i < need->batch; i++)
        CHECK(dev_arena_alloc(&d->arena, need->kv_bytes_per_seq, &offs[i]) == 0);
    for (int i = 0; i < need->batch; i++) CHECK(dev_arena_free(&d->arena, offs[i]) == 0);
    CHECK(dev_arena_free(&d->arena, act) == 0);
}

static void test_replan_sweep(void)
{
    struct eb_err e = {0};
    enum kv_pool_action act;
    struct sim_dev d = {141 * GIB, 125 * GIB, {0}};
    size_t per_seq = (size_t)28 * 4 * 128 * 2 * 2 * 4608; /* 7B shape, budgeted run */
    struct kv_pool_need b1 = {per_seq, 64 * MIB, 1}, b16 = b1, b64 = b1;
    b16.batch = 16;
    b64.batch = 64;
    /* batch 1 reserves, batch 1 again keeps, 16 and 64 re-plan (each empty) */
    CHECK(sim_ensure(&d, &b1, &act, &e) == 0 && act == KV_POOL_RESERVE);
    sim_generate(&d, &b1);
    CHECK(sim_ensure(&d, &b1, &act, &e) == 0 && act == KV_POOL_KEEP);
    sim_generate(&d, &b1);
    CHECK(sim_ensure(&d, &b16, &act, &e) == 0 && act == KV_POOL_REPLAN);
    CHECK(d.arena.size >= kv_pool_bytes(&b16));
    sim_generate(&d, &b16);
    CHECK(sim_ensure(&d, &b64, &act, &e) == 0 && act == KV_POOL_REPLAN);
    sim_generate(&d, &b64);
    /* smaller batches fit the larger pool: kept, no churn */
    CHECK(sim_ensure(&d, &b16, &act, &e) == 0 && act == KV_POOL_KEEP);
    sim_generate(&d, &b16);
    /* the device's memory is conserved: pool + free = what it started with */
    CHECK(d.free + d.arena.size == 125 * GIB);

    /* too small and in use (a policy's scratch kept between batches): an
     * 'oom' for the point, the pool untouched */
    size_t held;
    CHECK(dev_arena_alloc(&d.arena, MIB, &held) == 0);
    struct kv_pool_need huge = b64;
    huge.kv_bytes_per_seq = d.arena.size / 32;
    size_t before = d.arena.size;
    CHECK(sim_ensure(&d, &huge, &act, &e) == -1 && e.kind == EB_ERR_NOMEM);
    CHECK_MSG(strstr(e.msg, "batch 64 needs") && strstr(e.msg, "cannot be re-planned") &&
                  strchr(e.msg, '\n') == NULL, "%s", e.msg);
    CHECK(d.arena.size == before && d.arena.used == 256 * 4096);
    /* free of it: re-planned, and a batch the device cannot hold is an 'oom' of the plan */
    CHECK(dev_arena_free(&d.arena, held) == 0);
    huge.kv_bytes_per_seq = 4 * GIB;
    CHECK(sim_ensure(&d, &huge, &act, &e) == -1 && e.kind == EB_ERR_NOMEM);
    CHECK_MSG(strstr(e.msg, "sequences fit"), "%s", e.msg);
    CHECK(d.arena.size == 0 && d.free == 125 * GIB); /* released, nothing leaked */
    /* the next point starts from no pool */
    CHECK(sim_ensure(&d, &b16, &act, &e) == 0 && act == KV_POOL_RESERVE);
    dev_arena_release(&d.arena);

    /* the decision on its own */
    CHECK(kv_pool_decide(0, 0, &b1, &act, &e) == 0 && act == KV_POOL_RESERVE);
    size_t want = kv_pool_bytes(&b16);
    CHECK(want % (2 * MIB) == 0 && want >= 16 * per_seq + 64 * MIB + 17 * 2 * MIB);
    CHECK(kv_pool_decide(want, 0, &b16, &act, &e) == 0 && act == KV_POOL_KEEP);
    CHECK(kv_pool_decide(want, 1, &b16, &act, &e) == -1 && e.kind == EB_ERR_NOMEM);
    CHECK(kv_pool_decide(want - 2 * MIB, 0, &b16, &act, &e) == 0 && act == KV_POOL_REPLAN);
    CHECK(kv_pool_decide(want, want + 1, &b16, &act, &e) == -1 && e.kind == EB_ERR_OTHER);
    struct kv_pool_need bad = {0, 0, 1};
    CHECK(kv_pool_decide(want, 0, &bad, &act, &e) == -1 && e.kind == EB_ERR_OTHER);
    struct kv_pool_need over = {SIZE_MAX / 2, 0, 4};
    CHECK(kv_pool_bytes(&over) == SIZE_MAX);
    CHECK(kv_pool_decide(want, 0, &over, &act, &e) == 0 && act == KV_POOL_REPLAN);
    CHECK(kv_pool_decide(want, MIB, &over, &act, &e) == -1 && e.kind == EB_ERR_NOMEM);
}

/* Weights against the device's free memory, counted as the CUDA backend
 * holds them (16-bit for quantized and 16-bit matrices, f32 otherwise). */
static void test_weights_fit(void)
{
    struct eb_err e = {0};
    CHECK(cuda_matrix_bytes(WEIGHT_Q4_K, 1000, 0) == 2000);
    CHECK(cuda_matrix_bytes(WEIGHT_BF16, 1000, 0) == 2000);
    CHECK(cuda_matrix_bytes(WEIGHT_F32, 1000, 0) == 4000);
    CHECK(cuda_matrix_bytes(WEIGHT_Q4_K, 1000, 1) == 4000);
    /* 7B bf16 (15.2 GB) fits an H200; 14B in f32 exact mode (59 GB) does not fit 40 GiB */
    CHECK(cuda_weights_fit((size_t)15200 * 1000 * 1000, 140 * GIB, 141 * GIB, &e) == 0);
    CHECK(cuda_weights_fit((size_t)59 * 1000 * 1000 * 1000, 39 * GIB, 40 * GIB, &e) == -1);
    CHECK(e.kind == EB_ERR_NOMEM);
    CHECK_MSG(strstr(e.msg, "the weights need 54.95 GiB") && strstr(e.msg, "39.00 GiB of 40.00"),
              "%s", e.msg);
    /* the headroom counts: weights = free bytes is not a fit */
    CHECK(cuda_weights_fit(10 * GIB, 10 * GIB, 16 * GIB, &e) == -1);
    CHECK(cuda_weights_fit(0, 100 * MIB, 16 * GIB, &e) == -1);

    /* a quantized fixture: matrices at 2 bytes an element, vectors in f32 */
    struct model_file *mf;
    CHECK(model_file_open("tests/fixtures/models/tiny-llama-q/model.gguf", &mf, &e) == 0);
    if (!mf) return;
    struct model_load_opts native = {.weights = MODEL_WEIGHTS_NATIVE};
    struct model_load_opts exact = {.weights = MODEL_WEIGHTS_F32};
    size_t want16 = 0, want32 = 0;
    int n_quant = 0;
    for (int i = 0; i < model_file_tensor_count(mf); i++) {
        const struct tensor_ref *t = model_file_tensor_at(mf, i);
        size_t n = (size_t)tensor_nelements(t);
        int matrix = t->ne[1] > 1 && strcmp(t->name, "rope_freqs.weight") != 0;
        if (!strcmp(t->name, "rope_freqs.weight")) continue;
        want32 += 4 * n;
        want16 += matrix && t->type != WEIGHT_F32 ? 2 * n : 4 * n;
        n_quant += matrix && t->type != WEIGHT_F32 && t->type != WEIGHT_F16 &&
                   t->type != WEIGHT_BF16;
    }
    CHECK(n_quant > 0); /* the fixture has quantized matrices: the 16-bit count differs */
    CHECK(want16 < want32);
    CHECK(model_weight_bytes_held(mf, &native, cuda_matrix_bytes) == want16);
    CHECK(model_weight_bytes_held(mf, &exact, cuda_matrix_bytes) == want32);
    CHECK(model_weight_bytes_held(mf, &exact, cuda_matrix_bytes) == model_weight_bytes(mf));
    model_file_close(mf);
}

static void test_device_names(void)
{
    struct eb_err e = {0};
    int d = -1;
    CHECK(cuda_device_parse("cuda", &d, &e) == 0 && d == 0);
    CHECK(cuda_device_parse("cuda:3", &d, &e) == 0 && d == 3);
    const char *bad[] = {"cpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "CUDA", "cuda:99999", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(cuda_device_parse(bad[i], &d, &e) == -1, "'%s' accepted", bad[i]);
        CHECK(strstr(e.msg, "not cuda or cuda:N") != NULL);
    }
    CHECK(cuda_device_parse(NULL, &d, &e) == -1);
}

/* This binary is the CPU build: every CUDA entry point answers with one
 * clear line and nothing crashes. */
static void test_no_cuda_build(void)
{
    struct eb_err e = {0};
    CHECK(backend_cuda_create(0, &e) == NULL);
    CHECK_MSG(strstr(e.msg, "built without CUDA") && strstr(e.msg, "make cuda"), "%s", e.msg);
    CHECK(strchr(e.msg, '\n') == NULL);
    char msg[200];
    CHECK(backend_cuda_probe(0, msg, sizeof msg) == -1 && strstr(msg, "without CUDA"));
    size_t f = 1, t = 1;
    CHECK(backend_cuda_mem_info(NULL, &f, &t, &e) == -1 && f == 0 && t == 0);
    struct kv_pool_need need = {MIB, 0, 1};
    struct kv_pool_plan plan;
    CHECK(backend_cuda_reserve_pool(NULL, &need, &plan, &e) == -1);
    CHECK(backend_cuda_status(NULL, &e) == -1 && e.kind == EB_ERR_OTHER);
    int tok = 0;
    CHECK(backend_cuda_argmax(NULL, &tok, NULL, 1, 1) == -1);
    CHECK(backend_cuda_ensure_pool(NULL, &need, &plan, &e) == -1 && strstr(e.msg, "without CUDA"));
    CHECK(backend_cuda_release_pool(NULL, &e) == -1 && strstr(e.msg, "without CUDA"));
    CHECK(backend_cuda_check_weights(NULL, 1, &e) == -1 && strstr(e.msg, "without CUDA"));
    backend_cuda_pool_serve(NULL, 0); /* nothing to do, nothing to crash */
}

int main(void)
{
    RUN(test_arena_basic);
    RUN(test_arena_random);
    RUN(test_plan);
    RUN(test_replan_sweep);
    RUN(test_weights_fit);
    RUN(test_device_names);
    RUN(test_no_cuda_build);
    return test_summary("cuda_pool");
}
