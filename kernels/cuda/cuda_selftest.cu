/* cuda_selftest.cu - runs every backend op on the CUDA backend and on the CPU
 * backend with the same random inputs and compares the results.
 *
 *     kernels/cuda/build/cuda_selftest [device] [--only GROUP,...]
 *
 * Prints one line per op and "cuda_selftest: N passed, N failed"; exits
 * non-zero on any failure or when no device is usable.  Tolerance: max
 * |gpu - cpu| <= 1e-4 * (1 + |cpu|) (cuBLAS and the kernels sum in other
 * orders than OpenBLAS and the CPU loops); embed exact; fill + copy and an
 * in-place gather_rows (read-all-first) bit for bit against a host-computed
 * expectation, on both backends.  Scoring
 * primitives: window scores |gpu - cpu| <= 1e-7 + 2e-4 |cpu|, key redundancy
 * 1e-7 + 1e-4 |cpu| (both are small probabilities, so relative); pool1d max
 * and row_range exact, pool1d avg 1e-6 * (1 + |cpu|); bad arguments must give
 * -1 on both backends and leave no CUDA error.
 *
 * Attention runs both kernels (flash: no probabilities, head_dim 64/128/256,
 * GQA up to 8:1, split-K for long caches; general: the rest) with per-head
 * lengths and pad masks, at the same f32 tolerance, one sequence per call and
 * many sequences (decode rows and prefill chunks mixed) in one batched call.  Typed caches
 * (f16 and bf16, attn_args.kv_type): kv_store must write the CPU's bits
 * (round to nearest even) and kv_load give back the CPU's values exactly;
 * attention over them is checked twice: against the CPU attending the same
 * typed cache in place, where only the summation order differs (1e-4, as
 * f32; one sequence per call and batched), and against the CPU on
 * the unrounded f32 cache, which bounds what bf16 storage costs.  A bf16
 * value has 8 significant bits, so each K and V entry moves by at most
 * 2^-9 relative; with |q|,|k| entries in [-1, 1] and head_dim d the logit
 * q.k/sqrt(d) moves by at most sqrt(d) 2^-9 (0.02 at d = 128) in the worst
 * case and ~2^-9 typically (errors of random sign), the softmax weights by
 * that relative amount, and the output (a convex combination of rows of V)
 * by |V| 2^-9 + |V| x that: 2e-2 of (1 + |out|) bounds it with room, and
 * 4e-3 is what random-sign errors give; the check uses 2e-2.  Then the device
 * pool (allocations served from it, NULL when full, freed blocks reused),
 * greedy sampling (exact, ties to the lowest id), temperature/top-k/top-p
 * sampling against model/sampler.c and against the exact distribution
 * (cuda_selftest_sample.cu states the tolerances), and the metadata staging
 * ring across a wrap.
 *
 * Typed weights: the GPU holds F32 as f32, F16 as f16, BF16 as bf16 and a
 * quantized type dequantized to bf16, and a 16-bit matmul rounds the
 * activations to the weight's type.  The reference is the CPU's exact mode
 * (weight_create as_f32: the weight dequantized to f32, an f32 product).
 * Rounding to bf16 moves a value by at most 2^-9 of itself (unit roundoff of
 * 8 significant bits), f16 by 2^-11, so each term x_k w_k of an output moves
 * by at most (2^-9 + 2^-9 + 2^-18) |x_k w_k| and the output by at most
 * 2^-8 sum_k |x_k w_k| (+ f32 summation, k 2^-24 of the same sum): that
 * bound is computed per output and checked, with 1e-5 (1 + |y|) for the f32
 * order of summation.  embed_weight is exact for F32/F16/BF16 (a 16-bit
 * value is exact in f32) and within 2^-8 |value| for a quantized type. */
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/cuda_selftest_sample.h"
#include "kernels/cuda/cuda_selftest_util.h"

extern "C" {
#include "kernels/quant.h"
}

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static struct backend *cpu, *gpu;
static int n_passed, n_failed;
static uint64_t rng = 0x243f6a8885a308d3ull;

static float rnd(void) /* [-1, 1) */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (float)((double)((rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0 * 2 - 1);
}

static std::vector<float> random_vec(size_t n, float scale)
{
    std::vector<float> v(n);
    for (auto &x : v) x = rnd() * scale;
    return v;
}

/* The same tensor in both backends. */
struct pair {
    float *c, *g;
    size_t n;
};

static pair make(const std::vector<float> &h)
{
    pair p = {cpu->alloc(cpu, h.size()), gpu->alloc(gpu, h.size()), h.size()};
    if (!p.c || !p.g) {
        fprintf(stderr, "cuda_selftest: out of memory\n");
        exit(1);
    }
    cpu->upload(cpu, p.c, h.data(), h.size());
    gpu->upload(gpu, p.g, h.data(), h.size());
    return p;
}

static pair make_empty(size_t n) { return make(std::vector<float>(n, 0.0f)); }

static void drop(pair p)
{
    cpu->free(cpu, p.c);
    gpu->free(gpu, p.g);
}

static void compare(const char *what, pair p, double tol)
{
    std::vector<float> a(p.n), b(p.n);
    cpu->download(cpu, a.data(), p.c, p.n);
    gpu->download(gpu, b.data(), p.g, p.n);
    const char *err = backend_cuda_error(gpu);
    double worst = 0;
    size_t bad = 0;
    for (size_t i = 0; i < p.n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1.0 + fabs(a[i]));
        if (!(d <= tol)) bad++;
        if (d > worst || d != d) worst = d;
    }
    bool ok = !err && bad == 0;
    printf("  %-4s %-28s max scaled diff %.3g%s%s\n", ok ? "ok" : "FAIL", what, worst,
           err ? "  " : "", err ? err : "");
    ok ? n_passed++ : n_failed++;
}

/* Both backends' first want.size() values of p against a host-computed
 * expectation, bit for bit (ops that only move values). */
static void check_exact(const char *what, pair p, const std::vector<float> &want)
{
    std::vector<float> a(want.size()), b(want.size());
    cpu->download(cpu, a.data(), p.c, a.size());
    gpu->download(gpu, b.data(), p.g, b.size());
    const char *err = backend_cuda_error(gpu);
    size_t bad_c = 0, bad_g = 0;
    for (size_t i = 0; i < want.size(); i++) {
        bad_c += memcmp(&a[i], &want[i], sizeof(float)) != 0;
        bad_g += memcmp(&b[i], &want[i], sizeof(float)) != 0;
    }
    bool ok = !err && bad_c == 0 && bad_g == 0;
    printf("  %-4s %-28s values off the host's expected: cpu %zu, gpu %zu of %zu%s%s\n",
           ok ? "ok" : "FAIL", what, bad_c, bad_g, want.size(), err ? "  " : "", err ? err : "");
    ok ? n_passed++ : n_failed++;
}

static void test_gemm(int m, int n, int k, bool bias)
{
    pair x = make(random_vec((size_t)m * k, 1)), w = make(random_vec((size_t)n * k, 0.5f));
    pair b = make(random_vec(n, 1)), y = make_empty((size_t)m * n);
    cpu->gemm(cpu, y.c, x.c, w.c, bias ? b.c : NULL, m, n, k);
    gpu->gemm(gpu, y.g, x.g, w.g, bias ? b.g : NULL, m, n, k);
    char what[64];
    snprintf(what, sizeof what, "gemm %dx%dx%d%s", m, n, k, bias ? " +bias" : "");
    compare(what, y, 1e-4);
    drop(x), drop(w), drop(b), drop(y);
}

static void test_rmsnorm(int rows, int dim)
{
    pair x = make(random_vec((size_t)rows * dim, 3)), w = make(random_vec(dim, 1));
    pair y = make_empty((size_t)rows * dim);
    cpu->rmsnorm(cpu, y.c, x.c, w.c, rows, dim, 1e-6f);
    gpu->rmsnorm(gpu, y.g, x.g, w.g, rows, dim, 1e-6f);
    compare("rmsnorm", y, 1e-4);
    cpu->rmsnorm(cpu, x.c, x.c, w.c, rows, dim, 1e-6f);
    gpu->rmsnorm(gpu, x.g, x.g, w.g, rows, dim, 1e-6f);
    compare("rmsnorm in place", x, 1e-4);
    drop(x), drop(w), drop(y);
}

static void test_rope(enum rope_pairing pairing)
{
    int rows = 19, heads = 9, hd = 64;
    pair x = make(random_vec((size_t)rows * heads * hd, 2));
    std::vector<int> pos(rows);
    std::vector<float> inv_freq(hd / 2);
    for (int r = 0; r < rows; r++) pos[r] = r * 997;
    for (int i = 0; i < hd / 2; i++) inv_freq[i] = (float)pow(10000.0, -2.0 * i / hd);
    cpu->rope(cpu, x.c, rows, heads, hd, pos.data(), inv_freq.data(), pairing);
    gpu->rope(gpu, x.g, rows, heads, hd, pos.data(), inv_freq.data(), pairing);
    compare(pairing == ROPE_PAIR_HALF ? "rope half" : "rope adjacent", x, 1e-4);
    drop(x);
}

static void test_elementwise(void)
{
    size_t n = 100003;
    pair g = make(random_vec(n, 8)), u = make(random_vec(n, 2)), y = make_empty(n);
    cpu->swiglu(cpu, y.c, g.c, u.c, n);
    gpu->swiglu(gpu, y.g, g.g, u.g, n);
    compare("swiglu", y, 1e-5);
    cpu->add(cpu, y.c, u.c, n);
    gpu->add(gpu, y.g, u.g, n);
    compare("add", y, 1e-5);
    /* The first half only: the rest still holds the add's tolerated difference. */
    std::vector<float> want(n / 2, 0.25f), src(1000);
    cpu->download(cpu, src.data(), g.c, src.size());
    memcpy(want.data() + 7, src.data(), src.size() * sizeof(float));
    cpu->fill(cpu, y.c, 0.25f, n / 2);
    gpu->fill(gpu, y.g, 0.25f, n / 2);
    cpu->copy(cpu, y.c + 7, g.c, 1000);
    gpu->copy(gpu, y.g + 7, g.g, 1000);
    check_exact("fill + copy", y, want);
    drop(g), drop(u), drop(y);
}

static void test_embed_gather(void)
{
    int vocab = 1000, dim = 576, n = 17;
    pair table = make(random_vec((size_t)vocab * dim, 1)), y = make_empty((size_t)n * dim);
    std::vector<int> ids(n);
    for (int i = 0; i < n; i++) ids[i] = (i * 7919) % vocab;
    cpu->embed(cpu, y.c, table.c, ids.data(), n, dim);
    gpu->embed(gpu, y.g, table.g, ids.data(), n, dim);
    compare("embed", y, 0);
    /* Onto itself, rows out of order and repeated: read-all-first
     * (kernels/backend.h), so row i becomes the old row rows[i]. */
    int rows[5] = {3, 0, 16, 16, 9};
    std::vector<float> before((size_t)n * dim), want;
    cpu->download(cpu, before.data(), y.c, before.size());
    want = before;
    for (int i = 0; i < 5; i++)
        memcpy(want.data() + (size_t)i * dim, before.data() + (size_t)rows[i] * dim,
               (size_t)dim * sizeof(float));
    cpu->gather_rows(cpu, y.c, y.c, rows, 5, dim);
    gpu->gather_rows(gpu, y.g, y.g, rows, 5, dim);
    check_exact("gather_rows in place", y, want);
    drop(table), drop(y);
}

static void test_attention(int n_head, int n_kv, int hd, int n_new, int cap,
                           std::vector<int> kv_len, bool probs, bool masked = false)
{
    pair q = make(random_vec((size_t)n_new * n_head * hd, 1));
    pair k = make(random_vec((size_t)n_kv * cap * hd, 1)), v = make(random_vec((size_t)n_kv * cap * hd, 1));
    pair out = make_empty((size_t)n_new * n_head * hd);
    pair p = make(std::vector<float>((size_t)n_head * n_new * cap, 7.0f));
    std::vector<unsigned char> mask((size_t)n_kv * cap, 0);
    for (int h = 0; h < n_kv; h++) /* left pads, as padded batching stores them, and a few more */
        for (int j = 0; j < cap; j++) mask[(size_t)h * cap + j] = j < 5 + h || j % 17 == 3;
    struct attn_args a = {};
    a.cap = cap, a.n_head = n_head, a.n_kv = n_kv, a.head_dim = hd, a.n_new = n_new;
    a.kv_len = kv_len.data(), a.scale = 1.0f / sqrtf((float)hd);
    a.slot_mask = masked ? mask.data() : NULL;
    a.out = out.c, a.q = q.c, a.k_cache = k.c, a.v_cache = v.c, a.probs = probs ? p.c : NULL;
    cpu->attention(cpu, &a);
    a.out = out.g, a.q = q.g, a.k_cache = k.g, a.v_cache = v.g, a.probs = probs ? p.g : NULL;
    gpu->attention(gpu, &a);
    char what[80];
    snprintf(what, sizeof what, "attention %d:%d hd%d new%d cap%d%s%s", n_head, n_kv, hd, n_new,
             cap, probs ? " out" : "", masked ? " mask" : "");
    compare(what, out, 1e-4);
    if (probs) compare("  probs", p, 1e-5);
    drop(q), drop(k), drop(v), drop(out), drop(p);
}

static pair typed_copy(pair x, enum kv_type t, int hd, const char *label);

/* Several sequences' attention in one call (backend_cuda_attention_batch):
 * each sequence its own cache, length per head, new-token count and pads;
 * every output must equal the CPU's attention of that sequence alone. */
static void test_attention_batch(int n_head, int n_kv, int hd, std::vector<int> n_new,
                                 std::vector<int> cap, enum kv_type t = KV_F32)
{
    int n = (int)n_new.size();
    std::vector<pair> q, k, v, out, k16, v16;
    std::vector<std::vector<int>> len(n);
    std::vector<std::vector<unsigned char>> mask(n);
    std::vector<struct attn_args> a(n);
    for (int s = 0; s < n; s++) {
        q.push_back(make(random_vec((size_t)n_new[s] * n_head * hd, 1)));
        k.push_back(make(random_vec((size_t)n_kv * cap[s] * hd, 1)));
        v.push_back(make(random_vec((size_t)n_kv * cap[s] * hd, 1)));
        out.push_back(make_empty((size_t)n_new[s] * n_head * hd));
        for (int h = 0; h < n_kv; h++) { /* compacted heads: any length from n_new to cap */
            int l = n_new[s] + (int)((rnd() + 1) * 0.5f * (cap[s] - n_new[s]));
            len[s].push_back(l > cap[s] ? cap[s] : l);
        }
        mask[s].assign((size_t)n_kv * cap[s], 0);
        for (size_t j = 0; j < mask[s].size(); j++) mask[s][j] = s % 3 == 1 && j % 11 < 3;
        struct attn_args &x = a[s];
        x = {};
        x.cap = cap[s], x.n_head = n_head, x.n_kv = n_kv, x.head_dim = hd, x.n_new = n_new[s];
        x.kv_len = len[s].data(), x.scale = 1.0f / sqrtf((float)hd);
        x.slot_mask = s % 3 == 1 ? mask[s].data() : NULL;
        x.out = out[s].c, x.q = q[s].c, x.k_cache = k[s].c, x.v_cache = v[s].c;
        if (t != KV_F32) { /* both backends attend the same typed caches */
            k16.push_back(typed_copy(k[s], t, hd, "K"));
            v16.push_back(typed_copy(v[s], t, hd, "V"));
            x.kv_type = t, x.k_cache = k16[s].c, x.v_cache = v16[s].c;
        }
        cpu->attention(cpu, &x);
        x.out = out[s].g, x.q = q[s].g, x.k_cache = k[s].g, x.v_cache = v[s].g;
        if (t != KV_F32) x.k_cache = k16[s].g, x.v_cache = v16[s].g;
    }
    int rc = backend_cuda_attention_batch(gpu, a.data(), n);
    char what[80];
    snprintf(what, sizeof what, "attention batch of %d %d:%d hd%d %s", n, n_head, n_kv, hd,
             kv_type_name(t));
    if (rc != 0) {
        printf("  FAIL %-28s returned %d: %s\n", what, rc, backend_cuda_error(gpu));
        n_failed++;
    } else {
        std::vector<float> all_c, all_g; /* one comparison over every sequence */
        for (int s = 0; s < n; s++) {
            std::vector<float> hc(out[s].n), hg(out[s].n);
            cpu->download(cpu, hc.data(), out[s].c, out[s].n);
            gpu->download(gpu, hg.data(), out[s].g, out[s].n);
            all_c.insert(all_c.end(), hc.begin(), hc.end());
            all_g.insert(all_g.end(), hg.begin(), hg.end());
        }
        pair all = make(all_c);
        gpu->upload(gpu, all.g, all_g.data(), all.n);
        compare(what, all, 1e-4);
        drop(all);
    }
    for (int s = 0; s < n; s++) drop(q[s]), drop(k[s]), drop(v[s]), drop(out[s]);
    for (size_t s = 0; s < k16.size(); s++) drop(k16[s]), drop(v16[s]);
}

static void result(const char *what, bool ok, const char *detail);

/* A typed (f16/bf16) copy of an f32 pair, written by kv_store on both
 * backends (identity rows of hd); the stored bits must be equal (both round
 * to nearest even), and kv_load must give back the same f32 values. */
static pair typed_copy(pair x, enum kv_type t, int hd, const char *label)
{
    size_t words = (x.n * kv_type_bytes(t) + 3) / 4;
    pair y = make_empty(words);
    int rows_n = (int)(x.n / (size_t)hd);
    std::vector<int> rows(rows_n);
    for (int i = 0; i < rows_n; i++) rows[i] = i;
    cpu->kv_store(cpu, y.c, t, x.c, rows.data(), rows_n, hd);
    gpu->kv_store(gpu, y.g, t, x.g, rows.data(), rows_n, hd);
    std::vector<float> a(words), b(words);
    cpu->download(cpu, a.data(), y.c, words);
    gpu->download(gpu, b.data(), y.g, words);
    char what[96];
    snprintf(what, sizeof what, "kv_store %s %s bits", kv_type_name(t), label);
    result(what, memcmp(a.data(), b.data(), words * sizeof(float)) == 0, "stored bits differ");
    pair back = make_empty(x.n);
    cpu->kv_load(cpu, back.c, y.c, t, x.n);
    gpu->kv_load(gpu, back.g, y.g, t, x.n);
    snprintf(what, sizeof what, "kv_load %s %s", kv_type_name(t), label);
    compare(what, back, 0);
    drop(back);
    return y;
}

/* The same attention over an f16 or bf16 cache (attn_args.kv_type), on both
 * backends: the GPU against the CPU's attention over the same typed cache
 * (the CPU reads it in place; the same rounded values, so only summation
 * order differs: 1e-4, as f32), and against the CPU on the unrounded f32
 * cache, which bounds what 16-bit storage costs (see the file comment: 2e-2
 * for bf16's 8 significant bits, 4x less, 5e-3, for f16's 11). */
static void test_attention_typed(enum kv_type t, int n_head, int n_kv, int hd, int n_new, int cap,
                                 std::vector<int> kv_len, bool masked)
{
    size_t kv_n = (size_t)n_kv * cap * hd;
    pair q = make(random_vec((size_t)n_new * n_head * hd, 1));
    pair k = make(random_vec(kv_n, 1)), v = make(random_vec(kv_n, 1));
    pair out = make_empty((size_t)n_new * n_head * hd), exact = make_empty(out.n);
    std::vector<unsigned char> mask((size_t)n_kv * cap, 0);
    for (size_t j = 0; j < mask.size(); j++) mask[j] = j % 13 == 1;
    pair k16 = typed_copy(k, t, hd, "K"), v16 = typed_copy(v, t, hd, "V");

    struct attn_args a = {};
    a.cap = cap, a.n_head = n_head, a.n_kv = n_kv, a.head_dim = hd, a.n_new = n_new;
    a.kv_len = kv_len.data(), a.scale = 1.0f / sqrtf((float)hd);
    a.slot_mask = masked ? mask.data() : NULL;
    a.kv_type = t;
    a.q = q.c, a.out = out.c, a.k_cache = k16.c, a.v_cache = v16.c;
    cpu->attention(cpu, &a);
    a.kv_type = KV_F32, a.out = exact.c, a.k_cache = k.c, a.v_cache = v.c;
    cpu->attention(cpu, &a);
    a.kv_type = t, a.q = q.g, a.out = out.g, a.k_cache = k16.g, a.v_cache = v16.g;
    gpu->attention(gpu, &a);
    std::vector<float> g(out.n);
    gpu->download(gpu, g.data(), out.g, out.n);
    gpu->upload(gpu, exact.g, g.data(), out.n);
    char what[96];
    snprintf(what, sizeof what, "%s attention %d:%d hd%d new%d%s", kv_type_name(t), n_head, n_kv,
             hd, n_new, masked ? " mask" : "");
    compare(what, out, 1e-4);
    snprintf(what, sizeof what, "  vs f32 cache %d:%d hd%d", n_head, n_kv, hd);
    compare(what, exact, t == KV_BF16 ? 2e-2 : 5e-3);
    drop(k16), drop(v16);
    drop(q), drop(k), drop(v), drop(out), drop(exact);
}

static void result(const char *what, bool ok, const char *detail)
{
    const char *err = backend_cuda_error(gpu);
    ok = ok && !err;
    printf("  %-4s %-28s %s%s\n", ok ? "ok" : "FAIL", what, detail, err ? err : "");
    ok ? n_passed++ : n_failed++;
}

/* Greedy ids on the device equal the CPU's argmax (lowest id on ties). */
static void test_argmax(int rows, int vocab)
{
    std::vector<float> h = random_vec((size_t)rows * vocab, 10);
    for (int r = 0; r < rows; r++) { /* a tie at the top in every other row */
        float *row = h.data() + (size_t)r * vocab;
        if (r % 2) row[vocab - 1] = row[r % vocab] = 11.0f;
    }
    pair x = make(h);
    std::vector<int> ids(rows, -1);
    int rc = backend_cuda_argmax(gpu, ids.data(), x.g, rows, vocab);
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        const float *row = h.data() + (size_t)r * vocab;
        int best = 0;
        for (int j = 1; j < vocab; j++)
            if (row[j] > row[best]) best = j;
        bad += ids[r] != best;
    }
    char what[64], detail[64];
    snprintf(what, sizeof what, "argmax %dx%d", rows, vocab);
    snprintf(detail, sizeof detail, "%d rows differ ", bad);
    result(what, rc == 0 && bad == 0, detail);
    drop(x);
}

/* More rope calls than the staging ring holds: every call's positions
 * arrive intact across the wraps. */
static void test_staging_wrap(void)
{
    int rows = 4096, heads = 1, hd = 8; /* 16 KiB of positions per call */
    std::vector<float> inv_freq(hd / 2, 0.001f);
    pair x = make(random_vec((size_t)rows * heads * hd, 1));
    std::vector<int> pos(rows);
    for (int call = 0; call < 1200; call++) { /* ~19 MiB staged: two wraps of 8 MiB */
        for (int r = 0; r < rows; r++) pos[r] = (r * 31 + call) % 5000;
        cpu->rope(cpu, x.c, rows, heads, hd, pos.data(), inv_freq.data(), ROPE_PAIR_HALF);
        gpu->rope(gpu, x.g, rows, heads, hd, pos.data(), inv_freq.data(), ROPE_PAIR_HALF);
    }
    compare("staging ring wraps (rope)", x, 1e-3); /* 1200 rotations compound f32 rounding */
    drop(x);
    /* Positions larger than the whole ring: it grows, and both arrays of the
     * op (positions, inv_freq) arrive intact. */
    rows = 2200000, hd = 2;
    std::vector<float> one_freq(1, 0.01f);
    pair y = make(random_vec((size_t)rows * hd, 1));
    pos.assign(rows, 0);
    for (int r = 0; r < rows; r++) pos[r] = r % 7919;
    cpu->rope(cpu, y.c, rows, 1, hd, pos.data(), one_freq.data(), ROPE_PAIR_ADJACENT);
    gpu->rope(gpu, y.g, rows, 1, hd, pos.data(), one_freq.data(), ROPE_PAIR_ADJACENT);
    compare("staging ring grows (rope)", y, 1e-4);
    drop(y);
}

static void compare_rel(const char *what, pair p, double atol, double rtol);

static uint16_t to_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (finite inputs) */
    return (uint16_t)(u >> 16);
}

/* Host bytes of a random [rows][cols] weight of `type`; quantized blocks get
 * random codes with small, finite scales. */
static std::vector<uint8_t> random_weight(enum weight_type type, int rows, int cols)
{
    size_t rb = quant_row_bytes((int)type, cols), bb = quant_block_bytes((int)type);
    std::vector<uint8_t> h(rb * rows);
    if (type == WEIGHT_F32 || type == WEIGHT_F16 || type == WEIGHT_BF16) {
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            float f = rnd() * 0.5f;
            if (type == WEIGHT_F32) memcpy(&h[i * 4], &f, 4);
            uint16_t b = type == WEIGHT_F16 ? quant_f32_to_f16(f) : to_bf16_bits(f);
            if (type != WEIGHT_F32) memcpy(&h[i * 2], &b, 2);
        }
        return h;
    }
    for (auto &b : h) b = (uint8_t)((rnd() + 1) * 127.9f);
    uint16_t d = quant_f32_to_f16(0.02f), dmin = quant_f32_to_f16(0.01f);
    for (size_t blk = 0; blk < h.size() / bb; blk++) {
        uint8_t *p = &h[blk * bb];
        if (type == WEIGHT_Q6_K) {
            memcpy(p + 208, &d, 2); /* ql[128] qh[64] scales[16] d */
        } else {
            memcpy(p, &d, 2);
            if (type == WEIGHT_Q4_K || type == WEIGHT_Q4_1) memcpy(p + 2, &dmin, 2);
        }
    }
    return h;
}

static void test_matmul_typed(enum weight_type type, enum weight_type want_held, int m, int n,
                              int k, bool bias)
{
    std::vector<uint8_t> host = random_weight(type, n, k);
    struct weight *wc = cpu->weight_create(cpu, type, n, k, host.data(), 0, 1);
    struct weight *wg = gpu->weight_create(gpu, type, n, k, host.data(), 0, 0);
    char what[80];
    snprintf(what, sizeof what, "matmul %s %dx%dx%d%s", quant_type_name((int)type), m, n, k,
             bias ? " +bias" : "");
    if (!wc || !wg || wg->held != want_held) {
        printf("  FAIL %-28s weight_create: cpu %p, gpu %p, held %d (want %d) %s\n", what,
               (void *)wc, (void *)wg, wg ? (int)wg->held : -1, (int)want_held,
               backend_cuda_error(gpu) ? backend_cuda_error(gpu) : "");
        n_failed++;
        if (wc) cpu->weight_free(cpu, wc);
        if (wg) gpu->weight_free(gpu, wg);
        return;
    }
    std::vector<float> xh = random_vec((size_t)m * k, 1), wf((size_t)n * k);
    quant_dequantize((int)type, host.data(), wf.data(), (int64_t)n * k);
    pair x = make(xh), b = make(random_vec(n, 1)), y = make_empty((size_t)m * n);
    cpu->matmul(cpu, y.c, x.c, wc, bias ? b.c : NULL, m);
    gpu->matmul(gpu, y.g, x.g, wg, bias ? b.g : NULL, m);
    std::vector<float> yc(y.n), yg(y.n);
    cpu->download(cpu, yc.data(), y.c, y.n);
    gpu->download(gpu, yg.data(), y.g, y.n);
    double worst = 0;
    size_t bad = 0;
    bool exact = want_held == WEIGHT_F32;
    for (int r = 0; r < m; r++)
        for (int j = 0; j < n; j++) {
            double mag = 0;
            for (int t = 0; t < k; t++) mag += fabs((double)xh[(size_t)r * k + t] * wf[(size_t)j * k + t]);
            size_t i = (size_t)r * n + j;
            double allowed = (exact ? 0 : ldexp(mag, -8)) + 1e-5 * (1 + fabs(yc[i])) + k * ldexp(mag, -24);
            double d = fabs((double)yc[i] - yg[i]) / allowed;
            if (!(d <= 1.0)) bad++;
            if (d > worst || d != d) worst = d;
        }
    char detail[64];
    snprintf(detail, sizeof detail, "max diff %.3g of the bound ", worst);
    result(what, bad == 0, detail);
    /* embed_weight: rows of the held weight, in f32 */
    int ids[5] = {0, n - 1, n / 2, 3 % n, n - 1};
    pair e = make_empty((size_t)5 * k);
    cpu->embed_weight(cpu, e.c, wc, ids, 5);
    gpu->embed_weight(gpu, e.g, wg, ids, 5);
    snprintf(what, sizeof what, "embed_weight %s", quant_type_name((int)type));
    bool quantized = type != WEIGHT_F32 && type != WEIGHT_F16 && type != WEIGHT_BF16;
    if (quantized) compare_rel(what, e, 1e-30, ldexp(1.0, -8));
    else compare(what, e, 0);
    /* embed_weight_dev: the same rows from ids in device memory */
    float *ids_dev = gpu->alloc(gpu, 5);
    gpu->upload(gpu, ids_dev, (const float *)ids, 5);
    gpu->fill(gpu, e.g, 0.0f, e.n);
    gpu->embed_weight_dev(gpu, e.g, wg, (const int *)ids_dev, 5);
    snprintf(what, sizeof what, "embed_weight_dev %s", quant_type_name((int)type));
    if (quantized) compare_rel(what, e, 1e-30, ldexp(1.0, -8));
    else compare(what, e, 0);
    gpu->free(gpu, ids_dev);
    cpu->weight_free(cpu, wc);
    gpu->weight_free(gpu, wg);
    drop(x), drop(b), drop(y), drop(e);
}

/* Run last: once the pool is reserved, every allocation comes from it. */
static void test_pool(void)
{
    struct eb_err e = {};
    size_t free0, total;
    if (backend_cuda_mem_info(gpu, &free0, &total, &e)) {
        result("mem_info", false, e.msg);
        return;
    }
    struct kv_pool_need too_big = {total, 0, 2};
    struct kv_pool_plan plan;
    int rc = backend_cuda_reserve_pool(gpu, &too_big, &plan, &e);
    result("pool: a batch that cannot fit", rc == -1 && e.kind == EB_ERR_NOMEM, e.msg);
    struct kv_pool_need need = {(size_t)64 << 20, (size_t)32 << 20, 4}; /* 4 x 64 MiB + 32 MiB */
    rc = backend_cuda_reserve_pool(gpu, &need, &plan, &e);
    char detail[160];
    snprintf(detail, sizeof detail, "%.0f MiB pool, max batch %d ", plan.pool_bytes / 1048576.0,
             plan.max_batch);
    result("pool reserved", rc == 0 && plan.pool_bytes >= 4 * need.kv_bytes_per_seq, detail);
    if (rc) return;
    size_t used, peak;
    std::vector<float *> blocks;
    for (float *p; (p = gpu->alloc(gpu, (16 << 20) / sizeof(float))) != NULL;) blocks.push_back(p);
    backend_cuda_pool_usage(gpu, &used, &peak);
    snprintf(detail, sizeof detail, "%zu blocks of 16 MiB, %zu bytes used ", blocks.size(), used);
    result("pool: full pool gives NULL", blocks.size() >= 16 && used <= plan.pool_bytes, detail);
    for (float *p : blocks) gpu->free(gpu, p);
    backend_cuda_pool_usage(gpu, &used, &peak);
    /* Freed blocks are reused: a test that computes in pool memory still agrees. */
    result("pool: freed blocks coalesce", used == 0 && peak >= (size_t)16 << 24, "");
    test_attention(28, 4, 128, 1, 4096, {4000, 4096, 1, 2500}, false, true);
}

/* Relative check for scores (probabilities are small, so the scaled diff of
 * compare() would be loose): |gpu - cpu| <= atol + rtol * |cpu| everywhere. */
static void compare_rel(const char *what, pair p, double atol, double rtol)
{
    std::vector<float> a(p.n), b(p.n);
    cpu->download(cpu, a.data(), p.c, p.n);
    gpu->download(gpu, b.data(), p.g, p.n);
    const char *err = backend_cuda_error(gpu);
    double worst = 0; /* in units of the allowed error */
    size_t bad = 0;
    for (size_t i = 0; i < p.n; i++) {
        double d = fabs((double)a[i] - b[i]) / (atol + rtol * fabs(a[i]));
        if (!(d <= 1.0)) bad++;
        if (d > worst || d != d) worst = d;
    }
    bool ok = !err && bad == 0;
    printf("  %-4s %-28s max diff %.3g of allowed%s%s\n", ok ? "ok" : "FAIL", what, worst,
           err ? "  " : "", err ? err : "");
    ok ? n_passed++ : n_failed++;
}

/* Both backends must give the same status; a failure here is counted. */
static bool same_rc(const char *what, int rc_cpu, int rc_gpu, int want)
{
    if (rc_cpu == want && rc_gpu == want) return true;
    printf("  FAIL %-28s returned cpu %d, cuda %d (want %d)\n", what, rc_cpu, rc_gpu, want);
    n_failed++;
    return false;
}

/* Random pads: about one key in `every`, never all of them. */
static std::vector<unsigned char> random_pad(int len, int every)
{
    std::vector<unsigned char> pad(len, 0);
    for (int j = 0; j < len; j++) pad[j] = (rnd() + 1) * every < 2 ? 1 : 0;
    pad[len - 1] = 0;
    return pad;
}

static void test_window_scores(int n_head, int n_kv, int kv_head, int hd, int n_q, int len,
                               int n_cand, int softmax_all, enum score_gqa gqa, bool with_pad)
{
    pair q = make(random_vec((size_t)n_q * n_head * hd, 2)), k = make(random_vec((size_t)len * hd, 1));
    pair out = make(std::vector<float>(n_cand, 7.0f));
    std::vector<unsigned char> pad = random_pad(len, 5);
    struct window_score_args a = {};
    a.n_head = n_head, a.n_kv = n_kv, a.kv_head = kv_head, a.head_dim = hd, a.n_q = n_q;
    a.len = len, a.n_cand = n_cand, a.softmax_all = softmax_all, a.gqa = gqa;
    a.pad = with_pad ? pad.data() : NULL, a.scale = 1.0f / sqrtf((float)hd);
    a.out = out.c, a.q = q.c, a.k = k.c;
    int rc_c = cpu->window_scores(cpu, &a);
    a.out = out.g, a.q = q.g, a.k = k.g;
    int rc_g = gpu->window_scores(gpu, &a);
    char what[96];
    snprintf(what, sizeof what, "window %d:%d h%d hd%d q%d len%d c%d%s%s%s", n_head, n_kv, kv_head,
             hd, n_q, len, n_cand, softmax_all ? " all" : "", gqa == SCORE_GQA_MEAN ? " mean" : " max",
             with_pad ? " pad" : "");
    if (same_rc(what, rc_c, rc_g, 0)) compare_rel(what, out, 1e-7, 2e-4);
    drop(q), drop(k), drop(out);
}

static void test_pool1d(int n, int kernel, enum score_pool mode)
{
    pair in = make(random_vec(n, 3)), out = make(std::vector<float>(n, 7.0f));
    int rc_c = cpu->pool1d(cpu, out.c, in.c, n, kernel, mode);
    int rc_g = gpu->pool1d(gpu, out.g, in.g, n, kernel, mode);
    char what[64];
    snprintf(what, sizeof what, "pool1d %s n%d k%d", mode == SCORE_POOL_MAX ? "max" : "avg", n,
             kernel);
    /* max is exact; avg sums a handful of floats in double on both sides */
    if (same_rc(what, rc_c, rc_g, 0)) compare(what, out, mode == SCORE_POOL_MAX ? 0 : 1e-6);
    drop(in), drop(out);
}

/* Keys with near-duplicates of earlier keys (cosine ~0.99), so the threshold
 * search finds matches at every distance, and plain random keys that match
 * nothing (cosine ~N(0, 1/hd)), which exercise the no-match quirk. */
static void test_key_redundancy(int len, int hd, int quirk, bool with_pad)
{
    std::vector<float> h = random_vec((size_t)len * hd, 1);
    for (int j = 1; j < len; j++) {
        if (rnd() < 0.2f) continue; /* ~40% of the keys repeat an earlier one */
        int i = (int)((rnd() + 1) * 0.5f * j) % j;
        float s = 0.5f + (rnd() + 1);
        for (int d = 0; d < hd; d++)
            h[(size_t)j * hd + d] = s * h[(size_t)i * hd + d] + 0.05f * rnd();
    }
    pair k = make(h), out = make(std::vector<float>(len, 7.0f));
    std::vector<unsigned char> pad = random_pad(len, 7);
    struct redundancy_args a = {};
    a.len = len, a.head_dim = hd, a.threshold = 0.5f, a.no_match_zero_col0 = quirk;
    a.pad = with_pad ? pad.data() : NULL;
    a.out = out.c, a.k = k.c;
    int rc_c = cpu->key_redundancy(cpu, &a);
    a.out = out.g, a.k = k.g;
    int rc_g = gpu->key_redundancy(gpu, &a);
    char what[64];
    snprintf(what, sizeof what, "redundancy len%d hd%d%s%s", len, hd, quirk ? " quirk" : "",
             with_pad ? " pad" : "");
    if (same_rc(what, rc_c, rc_g, 0)) compare_rel(what, out, 1e-7, 1e-4);
    drop(k), drop(out);
}

static void test_row_range(int n, int dim)
{
    pair x = make(random_vec((size_t)n * dim, 4)), out = make(std::vector<float>(n, 7.0f));
    int rc_c = cpu->row_range(cpu, out.c, x.c, n, dim);
    int rc_g = gpu->row_range(gpu, out.g, x.g, n, dim);
    char what[64];
    snprintf(what, sizeof what, "row_range %dx%d", n, dim);
    if (same_rc(what, rc_c, rc_g, 0)) compare(what, out, 0); /* max - min is exact */
    drop(x), drop(out);
}

/* Arguments the CPU backend refuses are refused on the GPU too, and leave
 * no sticky error behind. */
static void test_score_bad_args(void)
{
    pair x = make(random_vec(64, 1)), y = make_empty(64);
    struct window_score_args w = {};
    w.n_head = 4, w.n_kv = 2, w.kv_head = 0, w.head_dim = 8, w.n_q = 1, w.len = 8;
    w.n_cand = 9, w.scale = 1; /* n_cand > len */
    w.out = y.c, w.q = x.c, w.k = x.c;
    int c1 = cpu->window_scores(cpu, &w);
    w.out = y.g, w.q = x.g, w.k = x.g;
    int g1 = gpu->window_scores(gpu, &w);
    struct redundancy_args r = {};
    r.len = 0, r.head_dim = 8, r.threshold = 0.5f, r.out = y.g, r.k = x.g;
    int g2 = gpu->key_redundancy(gpu, &r);
    r.out = y.c, r.k = x.c;
    int c2 = cpu->key_redundancy(cpu, &r);
    bool ok = same_rc("window bad n_cand", c1, g1, -1) &
              same_rc("redundancy len 0", c2, g2, -1) &
              same_rc("pool1d even kernel", cpu->pool1d(cpu, y.c, x.c, 64, 4, SCORE_POOL_MAX),
                      gpu->pool1d(gpu, y.g, x.g, 64, 4, SCORE_POOL_MAX), -1) &
              same_rc("pool1d in place", cpu->pool1d(cpu, x.c, x.c, 64, 3, SCORE_POOL_AVG),
                      gpu->pool1d(gpu, x.g, x.g, 64, 3, SCORE_POOL_AVG), -1) &
              same_rc("row_range dim 0", cpu->row_range(cpu, y.c, x.c, 8, 0),
                      gpu->row_range(gpu, y.g, x.g, 8, 0), -1) &
              same_rc("row_range n 0", cpu->row_range(cpu, y.c, x.c, 0, 8),
                      gpu->row_range(gpu, y.g, x.g, 0, 8), 0);
    const char *err = backend_cuda_error(gpu);
    if (ok && !err) {
        printf("  ok   %-28s\n", "scoring bad arguments");
        n_passed++;
    } else if (err) {
        printf("  FAIL %-28s %s\n", "scoring bad arguments", err);
        n_failed++;
    }
    drop(x), drop(y);
}

/* --only a,b,...: the named groups alone (the CPU emulator's quick run). */
static const char GROUPS[] = "ops,attention,matmul,sample,scores,pool,magnitude,layer,fused,"
                             "batch,batch-small,graph";
static const char *only_groups;

/* Whether the comma-separated list holds the name name[0, n) as one item. */
static bool listed(const char *list, const char *name, size_t n)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, name, n)) return true;
        p += len + (p[len] == ',');
    }
    return false;
}

static bool want(const char *group)
{
    return !only_groups || listed(only_groups, group, strlen(group));
}

/* Every name in --only is a group, so a misspelt one cannot pass by running nothing. */
static bool groups_known(const char *list)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (!listed(GROUPS, p, len)) return false;
        p += len + (p[len] == ',');
    }
    return *list != '\0';
}

int main(int argc, char **argv)
{
    int device = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only_groups = argv[++i];
        else device = atoi(argv[i]);
    }
    if (only_groups && !groups_known(only_groups)) {
        fprintf(stderr, "cuda_selftest: --only %s: the groups are %s\n", only_groups, GROUPS);
        return 2;
    }
    struct eb_err e = {};
    cpu = backend_cpu_create(0);
    gpu = backend_cuda_create(device, &e);
    if (!cpu || !gpu) {
        fprintf(stderr, "cuda_selftest: %s\n", cpu ? e.msg : "cannot create the cpu backend");
        return 1;
    }
    if (want("ops")) {
        test_gemm(1, 1536, 576, false);
        test_gemm(1, 49152, 576, false);
        test_gemm(7, 33, 17, true);
        test_gemm(512, 576, 1536, true);
        test_rmsnorm(1, 576);
        test_rmsnorm(37, 64);
        test_rope(ROPE_PAIR_ADJACENT);
        test_rope(ROPE_PAIR_HALF);
        test_elementwise();
        test_embed_gather();
    }
    if (want("attention")) {
        test_attention(9, 3, 64, 1, 300, {257, 100, 3}, true);
        test_attention(9, 3, 64, 1, 300, {257, 100, 3}, false);
        test_attention(4, 2, 32, 7, 40, {20, 7}, true);
        test_attention(4, 2, 128, 33, 64, {50, 40}, false);
        test_attention(14, 2, 64, 512, 600, {512, 530}, false);
        /* flash kernels: decode with split-K (7:1 and 4:1 GQA as R1-Distill-Qwen-7B
         * and -Llama-8B, per-head compacted lengths, pads), prefill, head sizes */
        test_attention(28, 4, 128, 1, 4096, {4096, 700, 1, 2049}, false);
        test_attention(28, 4, 128, 1, 4096, {4096, 700, 33, 2049}, false, true);
        test_attention(32, 8, 128, 1, 600, {512, 513, 511, 1, 2, 300, 600, 0}, false);
        test_attention(32, 8, 128, 3, 9000, {8999, 4000, 3, 9000, 128, 129, 7000, 5}, false, true);
        test_attention(28, 4, 128, 300, 812, {812, 500, 300, 640}, false);
        test_attention(28, 4, 128, 300, 812, {812, 500, 300, 640}, false, true);
        test_attention(16, 16, 64, 1, 1000, std::vector<int>(16, 999), false, true);
        test_attention(8, 2, 256, 37, 333, {333, 40}, false, true);
        test_attention(9, 3, 64, 4, 300, {257, 100, 3}, true, true); /* general kernel, masked */
        test_attention(36, 4, 128, 1, 200, {200, 100, 50, 25}, false); /* 9:1: general kernel */
        /* batched: decode rows and prefill chunks of many sequences together */
        test_attention_batch(28, 4, 128, {1, 1, 3, 1, 7, 1, 300, 4, 5}, {600, 4096, 50, 1, 900, 2000,
                                                                          812, 4, 77});
        test_attention_batch(28, 4, 128, std::vector<int>(64, 1), std::vector<int>(64, 1500));
        test_attention_batch(32, 8, 128, {2, 9, 1}, {3000, 64, 9000});
        test_attention_batch(9, 3, 64, {1, 2}, {300, 40}); /* hd 64 */
        test_attention_batch(4, 2, 32, {1, 3}, {40, 20});  /* hd 32: one sequence at a time */
        for (enum kv_type t : {KV_BF16, KV_F16}) {
            test_attention_typed(t, 28, 4, 128, 1, 4096, {4096, 700, 1, 2049}, true);
            test_attention_typed(t, 32, 8, 128, 64, 512, {512, 500, 400, 300, 200, 100, 64, 64}, false);
            test_attention_typed(t, 9, 3, 64, 1, 300, {257, 100, 3}, false);
            test_attention_typed(t, 4, 2, 32, 7, 40, {20, 7}, true); /* hd 32: the general kernel */
            test_attention_batch(28, 4, 128, {1, 1, 3, 1, 7, 1, 300}, {600, 4096, 50, 1, 900, 2000, 512},
                                 t);
            test_attention_batch(9, 3, 64, {1, 2}, {300, 40}, t);
    }
    }
    if (want("matmul")) {
        test_matmul_typed(WEIGHT_F32, WEIGHT_F32, 7, 33, 64, true);
        test_matmul_typed(WEIGHT_BF16, WEIGHT_BF16, 1, 3584, 512, false);
        test_matmul_typed(WEIGHT_BF16, WEIGHT_BF16, 64, 1024, 3584, true);
        test_matmul_typed(WEIGHT_F16, WEIGHT_F16, 16, 4096, 256, false);
        test_matmul_typed(WEIGHT_Q8_0, WEIGHT_BF16, 3, 512, 1024, true);
        test_matmul_typed(WEIGHT_Q4_0, WEIGHT_BF16, 1, 300, 576, false);
        test_matmul_typed(WEIGHT_Q4_K, WEIGHT_BF16, 5, 256, 512, false);
        test_matmul_typed(WEIGHT_Q6_K, WEIGHT_BF16, 64, 128, 768, false);
        test_argmax(1, 151936);
        test_argmax(64, 128256);
        test_argmax(3, 5);
    }
    if (want("sample")) selftest_sample(gpu, &n_passed, &n_failed);
    if (want("ops")) test_staging_wrap();
    if (want("scores")) {
        /* scoring primitives: GQA 1:1, 3:1 and 7:1; lengths off the 256-thread blocks */
        test_window_scores(4, 4, 2, 64, 8, 300, 292, 0, SCORE_GQA_MAX, false);
        test_window_scores(4, 4, 3, 64, 8, 300, 292, 1, SCORE_GQA_MEAN, true);
        test_window_scores(9, 3, 1, 64, 32, 1000, 968, 1, SCORE_GQA_MAX, true);
        test_window_scores(9, 3, 2, 64, 32, 1000, 968, 0, SCORE_GQA_MEAN, false);
        test_window_scores(12, 4, 0, 128, 1, 257, 256, 1, SCORE_GQA_MAX, false);
        test_window_scores(2, 2, 0, 80, 3, 3, 1, 1, SCORE_GQA_MEAN, true);
        test_window_scores(3, 1, 0, 64, 10, 5, 5, 1, SCORE_GQA_MAX, false); /* rows that see nothing */
        test_window_scores(14, 2, 1, 64, 128, 4099, 3971, 1, SCORE_GQA_MAX, true);
        test_pool1d(1, 1, SCORE_POOL_MAX);
        test_pool1d(1, 7, SCORE_POOL_AVG);
        test_pool1d(7, 3, SCORE_POOL_MAX);
        test_pool1d(300, 7, SCORE_POOL_AVG);
        test_pool1d(1001, 31, SCORE_POOL_MAX);
        test_pool1d(1001, 31, SCORE_POOL_AVG);
        test_pool1d(257, 513, SCORE_POOL_AVG);
        test_key_redundancy(1, 64, 1, false);
        test_key_redundancy(2, 64, 1, false);
        test_key_redundancy(300, 64, 1, true);
        test_key_redundancy(300, 64, 0, false);
        test_key_redundancy(1000, 128, 1, false);
        test_key_redundancy(1000, 128, 0, true);
        test_key_redundancy(2049, 64, 1, true);
        test_row_range(1, 1);
        test_row_range(5, 64);
        test_row_range(1000, 128);
        test_row_range(333, 129);
        test_score_bad_args();
    }
    if (want("pool")) test_pool();
    struct selftest st = {cpu, gpu, &n_passed, &n_failed, 0x9e3779b97f4a7c15ull};
    if (want("magnitude")) selftest_magnitude(&st);
    if (want("layer")) selftest_layer(&st);
    if (want("fused")) selftest_fused(&st);
    if (want("batch")) selftest_batch(&st);
    if (want("batch-small")) selftest_batch_small(&st);
    if (want("graph")) selftest_graph(&st, device);
    if (want("layer")) selftest_layer_refusals(&st);
    printf("cuda_selftest: %d passed, %d failed\n", n_passed, n_failed);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return n_failed ? 1 : 0;
}
