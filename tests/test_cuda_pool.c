/* test_cuda_pool.c - the CUDA backend's host-side pieces, on the CPU: the
 * device pool's arena (first fit, split, coalesce, full -> refusal), its
 * sizing from free/total bytes (a batch that does not fit is EB_ERR_NOMEM,
 * the harness's 'oom'), device names, and the answer of a build without
 * CUDA (the weak stubs of kernels/cuda/backend_cuda_stub.c, which this
 * binary links because it is not the CUDA build). */
#include "test.h"

#include "kernels/cuda/backend_cuda.h"

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
}

int main(void)
{
    RUN(test_arena_basic);
    RUN(test_arena_random);
    RUN(test_plan);
    RUN(test_device_names);
    RUN(test_no_cuda_build);
    return test_summary("cuda_pool");
}
