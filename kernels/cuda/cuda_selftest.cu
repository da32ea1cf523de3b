/* cuda_selftest.cu - runs every backend op on the CUDA backend and on the CPU
 * backend with the same random inputs and compares the results.
 *
 *     kernels/cuda/build/cuda_selftest [device]
 *
 * Prints one line per op and "cuda_selftest: N passed, N failed"; exits
 * non-zero on any failure or when no device is usable.  Tolerance: max
 * |gpu - cpu| <= 1e-4 * (1 + |cpu|) (cuBLAS and the kernels sum in other
 * orders than OpenBLAS and the CPU loops); embed/gather exact. */
#include "kernels/cuda/backend_cuda.h"

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
    cpu->fill(cpu, y.c, 0.25f, n / 2);
    gpu->fill(gpu, y.g, 0.25f, n / 2);
    cpu->copy(cpu, y.c + 7, g.c, 1000);
    gpu->copy(gpu, y.g + 7, g.g, 1000);
    compare("fill + copy", y, 0);
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
    int rows[5] = {3, 0, 16, 16, 9};
    cpu->gather_rows(cpu, y.c, y.c, rows, 5, dim); /* overlapping: onto itself */
    gpu->gather_rows(gpu, y.g, y.g, rows, 5, dim);
    compare("gather_rows in place", y, 0);
    drop(table), drop(y);
}

static void test_attention(int n_head, int n_kv, int hd, int n_new, int cap,
                           std::vector<int> kv_len, bool probs)
{
    pair q = make(random_vec((size_t)n_new * n_head * hd, 1));
    pair k = make(random_vec((size_t)n_kv * cap * hd, 1)), v = make(random_vec((size_t)n_kv * cap * hd, 1));
    pair out = make_empty((size_t)n_new * n_head * hd);
    pair p = make(std::vector<float>((size_t)n_head * n_new * cap, 7.0f));
    struct attn_args a = {};
    a.cap = cap, a.n_head = n_head, a.n_kv = n_kv, a.head_dim = hd, a.n_new = n_new;
    a.kv_len = kv_len.data(), a.scale = 1.0f / sqrtf((float)hd);
    a.out = out.c, a.q = q.c, a.k_cache = k.c, a.v_cache = v.c, a.probs = probs ? p.c : NULL;
    cpu->attention(cpu, &a);
    a.out = out.g, a.q = q.g, a.k_cache = k.g, a.v_cache = v.g, a.probs = probs ? p.g : NULL;
    gpu->attention(gpu, &a);
    char what[80];
    snprintf(what, sizeof what, "attention %d:%d hd%d new%d%s", n_head, n_kv, hd, n_new,
             probs ? " out" : "");
    compare(what, out, 1e-4);
    if (probs) compare("  probs", p, 1e-5);
    drop(q), drop(k), drop(v), drop(out), drop(p);
}

int main(int argc, char **argv)
{
    int device = argc > 1 ? atoi(argv[1]) : 0;
    char why[256];
    if (backend_cuda_probe(device, why, sizeof why) != 0) {
        fprintf(stderr, "cuda_selftest: %s\n", why);
        return 1;
    }
    cpu = backend_cpu_create(0);
    gpu = backend_cuda_create(device);
    if (!cpu || !gpu) {
        fprintf(stderr, "cuda_selftest: cannot create the %s backend\n", cpu ? "cuda" : "cpu");
        return 1;
    }
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
    test_attention(9, 3, 64, 1, 300, {257, 100, 3}, true);
    test_attention(9, 3, 64, 1, 300, {257, 100, 3}, false);
    test_attention(4, 2, 32, 7, 40, {20, 7}, true);
    test_attention(4, 2, 128, 33, 64, {50, 40}, false);
    test_attention(14, 2, 64, 512, 600, {512, 530}, false);
    printf("cuda_selftest: %d passed, %d failed\n", n_passed, n_failed);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return n_failed ? 1 : 0;
}
