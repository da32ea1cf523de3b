/* test_kernels.c - every CPU backend op against a naive double-precision
 * reference written here, on random inputs of several shapes.
 *
 * Tolerances (f32 kernel vs double reference):
 *   gemm         |y - ref| <= 1e-5 * sum_k |x_k w_k| (+ |bias|): the natural error
 *                bound of an f32 dot product, independent of cancellation
 *   rmsnorm      |y - ref| <= 1e-5 * (1 + |ref|)
 *   rope         |y - ref| <= 1e-5 * (1 + |ref|); the reference takes the angle as the
 *                f32 product (float)pos * inv_freq, then cos/sin in double
 *   swiglu, add  |y - ref| <= 1e-5 * (1 + |ref|)
 *   embed/gather exact
 *   attention    |out - ref| <= 1e-5 (values in [-1, 1]); probs within 1e-6,
 *                exactly 0 where masked, and summing to 1 within 1e-5; a NaN
 *                (or +inf) logit gives a NaN row, as torch's softmax */
#include "test.h"

#include "kernels/backend.h"

#include <stdint.h>

/* xorshift64*: a fixed stream of test data on every platform. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double rnd_uniform(void) /* [-1, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545f4914f6cdd1dull;
    return (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static float *rand_host(size_t n, double scale)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)(rnd_uniform() * scale);
    return p;
}

static struct backend *be;

/* Backend copy of a host array. */
static float *to_be(const float *h, size_t n)
{
    float *d = be->alloc(be, n ? n : 1);
    be->upload(be, d, h, n);
    return d;
}

static float *from_be(const float *d, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof(float));
    be->download(be, h, d, n);
    return h;
}

static int close_rel(double got, double ref, double tol)
{
    return fabs(got - ref) <= tol * (1.0 + fabs(ref));
}

/* ---- memory ---- */

static void test_memory(void)
{
    CHECK(be->alloc(be, SIZE_MAX / 2) == NULL); /* size overflow: NULL, not a crash */
    float *z = be->alloc(be, 0);
    CHECK(z != NULL);
    be->free(be, z);

    size_t n = 1003;
    float *h = rand_host(n, 1.0);
    float *a = to_be(h, n), *b = be->alloc(be, n);
    CHECK(((uintptr_t)a & 63) == 0);
    be->copy(be, b, a, n);
    float *back = from_be(b, n);
    CHECK(memcmp(back, h, n * sizeof(float)) == 0);
    be->fill(be, b + 10, 2.5f, 7);
    be->download(be, back, b, n);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= back[i] == (i >= 10 && i < 17 ? 2.5f : h[i]);
    CHECK(ok);
    be->free(be, a);
    be->free(be, b);
    free(h);
    free(back);
}

/* ---- gemm ---- */

static void check_gemm(int m, int n, int k, int with_bias)
{
    float *x = rand_host((size_t)m * k, 1.0), *w = rand_host((size_t)n * k, 0.5);
    float *bias = with_bias ? rand_host(n, 1.0) : NULL;
    float *dx = to_be(x, (size_t)m * k), *dw = to_be(w, (size_t)n * k);
    float *db = bias ? to_be(bias, n) : NULL;
    float *dy = be->alloc(be, (size_t)m * n);
    be->fill(be, dy, NAN, (size_t)m * n); /* beta must not read stale output */
    be->gemm(be, dy, dx, dw, db, m, n, k);
    float *y = from_be(dy, (size_t)m * n);
    int bad = 0;
    for (int r = 0; r < m; r++)
        for (int c = 0; c < n; c++) {
            double ref = bias ? bias[c] : 0.0, mag = bias ? fabs(bias[c]) : 0.0;
            for (int i = 0; i < k; i++) {
                double t = (double)x[(size_t)r * k + i] * w[(size_t)c * k + i];
                ref += t;
                mag += fabs(t);
            }
            double got = y[(size_t)r * n + c];
            if (!(fabs(got - ref) <= 1e-5 * mag + 1e-30)) {
                if (bad++ < 3)
                    fprintf(stderr, "  gemm m=%d n=%d k=%d bias=%d [%d][%d]: %g vs %g\n", m, n,
                            k, with_bias, r, c, got, ref);
            }
        }
    CHECK_MSG(bad == 0, "%d mismatches (m=%d n=%d k=%d)", bad, m, n, k);
    be->free(be, dx);
    be->free(be, dw);
    be->free(be, db);
    be->free(be, dy);
    free(x);
    free(w);
    free(bias);
    free(y);
}

static void test_gemm(void)
{
    static const int shapes[][3] = {
        {1, 1, 1},    {1, 64, 64},   {1, 49, 33},  {1, 1536, 576}, {2, 3, 5},
        {7, 33, 17},  {16, 96, 64},  {13, 200, 129}, {64, 576, 192}, {128, 37, 301},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int b = 0; b < 2; b++) check_gemm(shapes[s][0], shapes[s][1], shapes[s][2], b);
}

/* Column-split threading must not change a single bit of the result. */
static void test_gemm_thread_invariant(void)
{
    static const int shapes[][3] = {{1, 2048, 576}, {16, 1536, 576}, {5, 1000, 301}};
    struct backend *b1 = backend_cpu_create(1), *b3 = backend_cpu_create(3);
    CHECK(b1 && b3);
    for (size_t s = 0; b1 && b3 && s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *x = rand_host((size_t)m * k, 1.0), *w = rand_host((size_t)n * k, 1.0);
        float *bias = rand_host(n, 1.0);
        float *y1 = malloc((size_t)m * n * sizeof(float)), *y3 = malloc((size_t)m * n * sizeof(float));
        b1->gemm(b1, y1, x, w, bias, m, n, k); /* CPU backend memory is host memory */
        b3->gemm(b3, y3, x, w, bias, m, n, k);
        CHECK_MSG(memcmp(y1, y3, (size_t)m * n * sizeof(float)) == 0, "m=%d n=%d k=%d", m, n, k);
        free(x);
        free(w);
        free(bias);
        free(y1);
        free(y3);
    }
    if (b1) b1->destroy(b1);
    if (b3) b3->destroy(b3);
}

/* ---- rmsnorm ---- */

static void check_rmsnorm(int rows, int dim, int in_place, double scale)
{
    float eps = 1e-5f;
    float *x = rand_host((size_t)rows * dim, scale), *w = rand_host(dim, 1.0);
    float *dx = to_be(x, (size_t)rows * dim), *dw = to_be(w, dim);
    float *dy = in_place ? dx : be->alloc(be, (size_t)rows * dim);
    be->rmsnorm(be, dy, dx, dw, rows, dim, eps);
    float *y = from_be(dy, (size_t)rows * dim);
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int j = 0; j < dim; j++) ss += (double)x[(size_t)r * dim + j] * x[(size_t)r * dim + j];
        double inv = 1.0 / sqrt(ss / dim + eps);
        for (int j = 0; j < dim; j++) {
            double ref = x[(size_t)r * dim + j] * inv * w[j];
            bad += !close_rel(y[(size_t)r * dim + j], ref, 1e-5);
        }
    }
    CHECK_MSG(bad == 0, "%d mismatches (rows=%d dim=%d in_place=%d)", bad, rows, dim, in_place);
    if (!in_place) be->free(be, dy);
    be->free(be, dx);
    be->free(be, dw);
    free(x);
    free(w);
    free(y);
}

static void test_rmsnorm(void)
{
    check_rmsnorm(1, 576, 0, 3.0);
    check_rmsnorm(1, 576, 1, 3.0);
    check_rmsnorm(5, 63, 0, 3.0);
    check_rmsnorm(37, 64, 1, 3.0); /* per-head norm shape (qwen3 q_norm) */
    check_rmsnorm(64, 1024, 0, 3.0);
    check_rmsnorm(3, 100, 0, 1e-3); /* mean square below eps: eps must be added */
}

/* ---- rope ---- */

static void check_rope(int rows, int n_heads, int head_dim, enum rope_pairing pairing,
                       int max_pos)
{
    int half = head_dim / 2;
    size_t n = (size_t)rows * n_heads * head_dim;
    float *x = rand_host(n, 2.0);
    float *inv_freq = malloc(half * sizeof(float));
    for (int i = 0; i < half; i++) inv_freq[i] = (float)pow(10000.0, -2.0 * i / head_dim);
    int *pos = malloc(rows * sizeof(int));
    for (int r = 0; r < rows; r++) pos[r] = (int)((rnd_uniform() + 1.0) * 0.5 * max_pos);
    pos[0] = 0;
    float *dx = to_be(x, n);
    be->rope(be, dx, rows, n_heads, head_dim, pos, inv_freq, pairing);
    float *y = from_be(dx, n);
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < n_heads; h++) {
            const float *xh = x + ((size_t)r * n_heads + h) * head_dim;
            const float *yh = y + ((size_t)r * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                double angle = (float)pos[r] * inv_freq[i]; /* f32 product, as HF */
                double c = cos(angle), s = sin(angle);
                int a = pairing == ROPE_PAIR_HALF ? i : 2 * i;
                int b = pairing == ROPE_PAIR_HALF ? i + half : 2 * i + 1;
                double ra = xh[a] * c - xh[b] * s, rb = xh[b] * c + xh[a] * s;
                bad += !close_rel(yh[a], ra, 1e-5) + !close_rel(yh[b], rb, 1e-5);
            }
        }
    CHECK_MSG(bad == 0, "%d mismatches (rows=%d heads=%d hd=%d pairing=%d)", bad, rows, n_heads,
              head_dim, pairing);
    be->free(be, dx);
    free(x);
    free(y);
    free(inv_freq);
    free(pos);
}

static void test_rope(void)
{
    for (int p = 0; p < 2; p++) {
        enum rope_pairing pairing = p ? ROPE_PAIR_HALF : ROPE_PAIR_ADJACENT;
        check_rope(1, 9, 64, pairing, 100);
        check_rope(7, 3, 64, pairing, 4096);
        check_rope(33, 2, 128, pairing, 40000); /* large positions: f32 angle matters */
        check_rope(5, 4, 6, pairing, 50);
        check_rope(4, 2, 256, pairing, 1000);   /* more pairs than one block */
    }
}

/* Adjacent and half pairing are the same rotation under a permutation of the
 * head dimensions (the one llama.cpp applies to GGUF Q/K weights). */
static void test_rope_pairings_agree(void)
{
    int rows = 6, n_heads = 3, hd = 16, half = hd / 2;
    size_t n = (size_t)rows * n_heads * hd;
    float *x = rand_host(n, 1.0), *xp = malloc(n * sizeof(float));
    float inv_freq[8];
    for (int i = 0; i < half; i++) inv_freq[i] = (float)pow(10000.0, -2.0 * i / hd);
    int pos[6] = {0, 1, 2, 17, 300, 5000};
    /* xp: half layout; x: adjacent layout of the same vectors */
    for (size_t r = 0; r < (size_t)rows * n_heads; r++)
        for (int i = 0; i < half; i++) {
            xp[r * hd + i] = x[r * hd + 2 * i];
            xp[r * hd + i + half] = x[r * hd + 2 * i + 1];
        }
    float *dx = to_be(x, n), *dxp = to_be(xp, n);
    be->rope(be, dx, rows, n_heads, hd, pos, inv_freq, ROPE_PAIR_ADJACENT);
    be->rope(be, dxp, rows, n_heads, hd, pos, inv_freq, ROPE_PAIR_HALF);
    float *y = from_be(dx, n), *yp = from_be(dxp, n);
    int same = 1;
    for (size_t r = 0; r < (size_t)rows * n_heads; r++)
        for (int i = 0; i < half; i++)
            same &= y[r * hd + 2 * i] == yp[r * hd + i] &&
                    y[r * hd + 2 * i + 1] == yp[r * hd + i + half];
    CHECK(same);
    be->free(be, dx);
    be->free(be, dxp);
    free(x);
    free(xp);
    free(y);
    free(yp);
}

/* ---- elementwise ---- */

static void test_swiglu_add(void)
{
    static const size_t sizes[] = {1, 7, 1536, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *g = rand_host(n, 8.0), *u = rand_host(n, 2.0);
        float *dg = to_be(g, n), *du = to_be(u, n), *dy = be->alloc(be, n);
        be->swiglu(be, dy, dg, du, n);
        be->swiglu(be, dg, dg, du, n); /* in place: y == gate */
        float *y = from_be(dy, n), *y2 = from_be(dg, n);
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            double ref = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
            bad += !close_rel(y[i], ref, 1e-5) + (y2[i] != y[i]);
        }
        CHECK_MSG(bad == 0, "swiglu: %d mismatches (n=%zu)", bad, n);
        be->add(be, dy, du, n);
        float *z = from_be(dy, n);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += !close_rel(z[i], (double)y[i] + u[i], 1e-6);
        CHECK_MSG(bad == 0, "add: %d mismatches (n=%zu)", bad, n);
        /* the far ends of the sigmoid (exp overflows, underflows), signed zeros */
        if (s == 2) {
            static const float far[] = {-120.0f, -88.5f, -87.0f, -30.0f, -1e-30f, -0.0f,
                                        0.0f,    1e-30f, 30.0f,  87.0f,  88.5f,  120.0f};
            size_t nf = sizeof far / sizeof far[0];
            for (size_t i = 0; i < n; i++) g[i] = far[i % nf];
            be->upload(be, dg, g, n);
            be->swiglu(be, dy, dg, du, n);
            float *yf = from_be(dy, n);
            bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += !close_rel(yf[i], g[i] / (1.0 + exp(-(double)g[i])) * u[i], 1e-5);
            CHECK_MSG(bad == 0, "swiglu at the far ends: %d mismatches", bad);
            free(yf);
        }
        be->free(be, dg);
        be->free(be, du);
        be->free(be, dy);
        free(g);
        free(u);
        free(y);
        free(y2);
        free(z);
    }
}

/* gather_rows reads all its rows before it writes any (kernels/backend.h): a
 * tensor gathered onto itself, rows out of order and repeated, and one
 * gathered onto a window shifted into its own rows, must each give what a
 * copy-then-gather gives. */
static void test_gather_in_place(void)
{
    int dim = 7, n_rows = 12;
    float *host = rand_host((size_t)n_rows * dim, 1.0);
    struct { int out_off, n; int rows[8]; } cases[] = {
        {0, 8, {11, 3, 0, 3, 7, 1, 10, 2}}, /* onto itself, reversed reads */
        {2, 6, {0, 1, 5, 4, 4, 9}},         /* output two rows in: overwrites row 2.. */
        {0, 5, {1, 2, 3, 4, 5}},            /* a forward shift, the compaction case */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float *dx = to_be(host, (size_t)n_rows * dim);
        be->gather_rows(be, dx + (size_t)cases[c].out_off * dim, dx, cases[c].rows, cases[c].n,
                        dim);
        float *got = from_be(dx, (size_t)n_rows * dim);
        int ok = 1;
        for (int i = 0; i < n_rows; i++) {
            int k = i - cases[c].out_off; /* output row k, else untouched */
            const float *want = k >= 0 && k < cases[c].n ? host + (size_t)cases[c].rows[k] * dim
                                                          : host + (size_t)i * dim;
            ok &= memcmp(got + (size_t)i * dim, want, dim * sizeof(float)) == 0;
        }
        CHECK(ok);
        free(got);
        be->free(be, dx);
    }
    free(host);
}

static void test_embed_gather(void)
{
    int vocab = 50, dim = 13, n = 9;
    float *table = rand_host((size_t)vocab * dim, 1.0);
    int ids[9] = {0, 49, 3, 3, 17, 0, 48, 25, 1};
    float *dt = to_be(table, (size_t)vocab * dim), *dy = be->alloc(be, (size_t)n * dim);
    be->embed(be, dy, dt, ids, n, dim);
    float *y = from_be(dy, (size_t)n * dim);
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok &= memcmp(y + (size_t)i * dim, table + (size_t)ids[i] * dim, dim * sizeof(float)) == 0;
    CHECK(ok);

    int rows[4] = {8, 2, 2, 5};
    float *dg = be->alloc(be, 4 * (size_t)dim);
    be->gather_rows(be, dg, dy, rows, 4, dim);
    float *g = from_be(dg, 4 * (size_t)dim);
    ok = 1;
    for (int i = 0; i < 4; i++)
        ok &= memcmp(g + (size_t)i * dim, y + (size_t)rows[i] * dim, dim * sizeof(float)) == 0;
    CHECK(ok);
    be->free(be, dt);
    be->free(be, dy);
    be->free(be, dg);
    free(table);
    free(y);
    free(g);
}

/* ---- attention ---- */

/* Runs one attention call with random q/k/v (slots past kv_len hold NaN, so a
 * kernel that reads them fails) and compares with the double reference.
 * mask (NULL or [n_kv][cap]) marks slots no query may attend to; their keys
 * and values are made large, so a kernel that lets them in fails. */
static void check_attention_masked(int n_head, int n_kv, int head_dim, int n_new, int cap,
                                   const int *kv_len, int with_probs, const unsigned char *mask)
{
    size_t qn = (size_t)n_new * n_head * head_dim, cn = (size_t)n_kv * cap * head_dim;
    float *q = rand_host(qn, 1.0), *k = rand_host(cn, 1.0), *v = rand_host(cn, 1.0);
    for (int g = 0; g < n_kv; g++)
        for (size_t j = (size_t)kv_len[g] * head_dim; j < (size_t)cap * head_dim; j++)
            k[(size_t)g * cap * head_dim + j] = v[(size_t)g * cap * head_dim + j] = NAN;
    for (int g = 0; mask && g < n_kv; g++)
        for (int j = 0; j < kv_len[g]; j++)
            if (mask[(size_t)g * cap + j])
                for (int d = 0; d < head_dim; d++) {
                    k[((size_t)g * cap + j) * head_dim + d] = 50.0f * (float)q[d];
                    v[((size_t)g * cap + j) * head_dim + d] = 100.0f;
                }
    size_t pn = (size_t)n_head * n_new * cap;
    float *dq = to_be(q, qn), *dk = to_be(k, cn), *dv = to_be(v, cn);
    float *dout = be->alloc(be, qn), *dp = with_probs ? be->alloc(be, pn) : NULL;
    if (dp) be->fill(be, dp, 7.0f, pn);
    struct attn_args a = {
        .out = dout, .q = dq, .k_cache = dk, .v_cache = dv, .cap = cap, .n_head = n_head,
        .n_kv = n_kv, .head_dim = head_dim, .n_new = n_new, .kv_len = kv_len,
        .scale = 1.0f / sqrtf((float)head_dim), .probs = dp, .slot_mask = mask,
    };
    be->attention(be, &a);
    float *out = from_be(dout, qn), *probs = dp ? from_be(dp, pn) : NULL;

    double *s = malloc(cap * sizeof(double));
    int bad_out = 0, bad_p = 0, bad_sum = 0, bad_mask = 0;
    for (int h = 0; h < n_head; h++) {
        int g = h / (n_head / n_kv);
        const float *kg = k + (size_t)g * cap * head_dim, *vg = v + (size_t)g * cap * head_dim;
        for (int i = 0; i < n_new; i++) {
            const float *qi = q + ((size_t)i * n_head + h) * head_dim;
            const unsigned char *mg = mask ? mask + (size_t)g * cap : NULL;
            int n_vis = kv_len[g] - n_new + i + 1;
            double max = -INFINITY, sum = 0;
            for (int j = 0; j < n_vis; j++) {
                if (mg && mg[j]) { s[j] = -INFINITY; continue; }
                double d = 0;
                for (int e = 0; e < head_dim; e++) d += (double)qi[e] * kg[(size_t)j * head_dim + e];
                s[j] = d * a.scale;
                if (s[j] > max) max = s[j];
            }
            for (int j = 0; j < n_vis; j++) sum += (s[j] = mg && mg[j] ? 0.0 : exp(s[j] - max));
            for (int e = 0; e < head_dim; e++) {
                double ref = 0; /* every visible slot masked: zeros */
                for (int j = 0; j < n_vis && sum > 0; j++)
                    if (s[j] > 0) ref += s[j] / sum * vg[(size_t)j * head_dim + e];
                double got = out[((size_t)i * n_head + h) * head_dim + e];
                bad_out += !(fabs(got - ref) <= 1e-5);
            }
            if (!probs) continue;
            const float *pr = probs + ((size_t)h * n_new + i) * cap;
            double psum = 0;
            for (int j = 0; j < n_vis; j++) {
                psum += pr[j];
                if (mg && mg[j]) bad_mask += pr[j] != 0.0f;
                else bad_p += !(fabs(pr[j] - s[j] / sum) <= 1e-6);
            }
            for (int j = n_vis; j < cap; j++) bad_mask += pr[j] != 0.0f;
            bad_sum += !(fabs(psum - (sum > 0 ? 1.0 : 0.0)) <= 1e-5);
        }
    }
    CHECK_MSG(bad_out == 0 && bad_p == 0 && bad_sum == 0 && bad_mask == 0,
              "heads %d:%d hd=%d n_new=%d cap=%d: out %d, probs %d, sums %d, mask %d wrong",
              n_head, n_kv, head_dim, n_new, cap, bad_out, bad_p, bad_sum, bad_mask);
    be->free(be, dq);
    be->free(be, dk);
    be->free(be, dv);
    be->free(be, dout);
    be->free(be, dp);
    free(q);
    free(k);
    free(v);
    free(out);
    free(probs);
    free(s);
}

static void check_attention(int n_head, int n_kv, int head_dim, int n_new, int cap,
                            const int *kv_len, int with_probs)
{
    check_attention_masked(n_head, n_kv, head_dim, n_new, cap, kv_len, with_probs, NULL);
}

static void test_attention_decode(void)
{
    int len1[1] = {1}, len3[3] = {40, 40, 40}, len2[2] = {200, 57};
    check_attention(1, 1, 8, 1, 1, len1, 1);    /* a single slot: out == v */
    check_attention(9, 3, 64, 1, 48, len3, 0);  /* SmolLM2 shape, GQA 9:3 */
    check_attention(9, 3, 64, 1, 48, len3, 1);
    check_attention(4, 2, 32, 1, 256, len2, 1); /* GQA 4:2, kv_len differing per head */
}

static void test_attention_prefill(void)
{
    int len3[3] = {17, 9, 30}, len2[2] = {5, 5}, len1[1] = {64}, lenq[3] = {12, 12, 12};
    check_attention(9, 3, 64, 5, 32, len3, 1);  /* causal with history, per-head lengths */
    check_attention(9, 3, 64, 12, 12, lenq, 1); /* whole prompt, cap == kv_len */
    check_attention(4, 2, 16, 5, 8, len2, 1);   /* prefill of an empty cache */
    check_attention(4, 2, 16, 5, 8, len2, 0);
    check_attention(2, 1, 7, 64, 80, len1, 1);  /* odd head_dim, many queries */
}

/* Masked slots (left pads) get no weight and probability 0, per kv head; a
 * query that sees only masked slots outputs zeros (a pad's own query). */
static void test_attention_mask(void)
{
    enum { CAP = 24 };
    unsigned char mask[3 * CAP] = {0};
    for (int j = 0; j < 5; j++) mask[j] = mask[CAP + j] = mask[2 * CAP + j] = 1; /* 5 left pads */
    mask[2 * CAP + 9] = 1;                  /* and a pad kept mid-cache after compaction */
    int len3[3] = {20, 20, 14}, len_pf[3] = {8, 8, 8}, len1[1] = {CAP};
    check_attention_masked(9, 3, 64, 1, CAP, len3, 1, mask); /* decode */
    check_attention_masked(9, 3, 64, 1, CAP, len3, 0, mask);
    check_attention_masked(9, 3, 64, 8, CAP, len_pf, 1, mask); /* prefill: pad queries see only pads */
    unsigned char mask1[CAP] = {0};
    for (int j = 0; j < CAP; j += 3) mask1[j] = 1;
    check_attention_masked(2, 1, 16, 6, CAP, len1, 1, mask1);
}

/* ---- NaN: the reference softmax (torch) propagates it ---- */

/* One attention call on host arrays through the global backend: out[qn]
 * and probs[n_head * n_new * cap] (malloc'd). */
static void run_attention(const float *q, const float *k, const float *v, const int *kv_len,
                          const unsigned char *mask, int n_head, int n_kv, int hd, int n_new,
                          int cap, float **out, float **probs)
{
    size_t qn = (size_t)n_new * n_head * hd, cn = (size_t)n_kv * cap * hd;
    size_t pn = (size_t)n_head * n_new * cap;
    float *dq = to_be(q, qn), *dk = to_be(k, cn), *dv = to_be(v, cn);
    float *dout = be->alloc(be, qn), *dp = be->alloc(be, pn);
    struct attn_args a = {
        .out = dout, .q = dq, .k_cache = dk, .v_cache = dv, .cap = cap, .n_head = n_head,
        .n_kv = n_kv, .head_dim = hd, .n_new = n_new, .kv_len = kv_len,
        .scale = 1.0f / sqrtf((float)hd), .probs = dp, .slot_mask = mask,
    };
    be->attention(be, &a);
    *out = from_be(dout, qn);
    *probs = from_be(dp, pn);
    be->free(be, dq);
    be->free(be, dk);
    be->free(be, dv);
    be->free(be, dout);
    be->free(be, dp);
}

/* Rows of (query t, head h): nan_row[t * n_head + h] says whether torch's
 * softmax makes it NaN.  A NaN row: every output NaN, its visible unmasked
 * probabilities NaN and the rest 0.  Any other row: bit for bit the clean
 * run's (the poison changes nothing it does not reach).  Counts mismatches. */
static int nan_rows_ok(const float *out, const float *probs, const float *out0,
                       const float *probs0, const char *nan_row, const int *kv_len,
                       const unsigned char *mask, int n_head, int n_kv, int hd, int n_new,
                       int cap)
{
    int bad = 0;
    for (int t = 0; t < n_new; t++)
        for (int h = 0; h < n_head; h++) {
            int g = h / (n_head / n_kv), n_vis = kv_len[g] - n_new + t + 1;
            const float *o = out + ((size_t)t * n_head + h) * hd;
            const float *o0 = out0 + ((size_t)t * n_head + h) * hd;
            const float *p = probs + ((size_t)h * n_new + t) * cap;
            const float *p0 = probs0 + ((size_t)h * n_new + t) * cap;
            if (!nan_row[t * n_head + h]) {
                bad += memcmp(o, o0, (size_t)hd * sizeof *o) != 0;
                bad += memcmp(p, p0, (size_t)cap * sizeof *p) != 0;
                continue;
            }
            for (int d = 0; d < hd; d++) bad += !isnan(o[d]);
            for (int j = 0; j < cap; j++) {
                int live = j < n_vis && !(mask && mask[(size_t)g * cap + j]);
                bad += live ? !isnan(p[j]) : p[j] != 0.0f;
            }
        }
    return bad;
}

/* A NaN in q or k, or a +inf in q, among the keys a query row sees, makes
 * that row NaN (torch: softmax over a NaN logit, or exp(inf - inf)); masked
 * slots take no part even when NaN, and a row that sees only masked slots
 * still outputs zeros.  Three blocks of keys (the merge of partials), one
 * thread and three (blocks split over threads), AVX2 and scalar. */
static void test_attention_nan(void)
{
    enum { NH = 4, NKV = 2, HD = 32, NN = 3, CAP = 300 };
    int kv_len[NKV] = {CAP, 260};
    size_t qn = (size_t)NN * NH * HD, cn = (size_t)NKV * CAP * HD;
    float *q0 = rand_host(qn, 1.0), *k0 = rand_host(cn, 1.0), *v = rand_host(cn, 1.0);
    float *q = malloc(qn * sizeof *q), *k = malloc(cn * sizeof *k);
    unsigned char mask[NKV * CAP] = {0};
    mask[10] = 1;                           /* kv head 0, slot 10: masked, its key NaN below */
    memcpy(q, q0, qn * sizeof *q);
    memcpy(k, k0, cn * sizeof *k);
    q[((size_t)1 * NH + 0) * HD + 5] = NAN;         /* query 1, head 0 */
    q[((size_t)0 * NH + 1) * HD + 7] = INFINITY;    /* query 0, head 1: +inf logits */
    k[((size_t)0 * CAP + 10) * HD + 2] = NAN;       /* masked: no effect */
    k[((size_t)0 * CAP + 299) * HD + 3] = NAN;      /* kv head 0's last slot: query 2 only */
    k[((size_t)1 * CAP + 200) * HD + 0] = NAN;      /* kv head 1, second block: every query */
    char nan_row[NN * NH] = {0};
    nan_row[1 * NH + 0] = nan_row[0 * NH + 1] = 1;
    nan_row[2 * NH + 0] = nan_row[2 * NH + 1] = 1;
    for (int t = 0; t < NN; t++) nan_row[t * NH + 2] = nan_row[t * NH + 3] = 1;

    /* prefill of 8 where kv head 0's first 4 slots are masked NaN keys: its
     * queries 0..3 see only them (zeros), the later ones are clean */
    enum { PN = 8 };
    int plen[1] = {PN};
    float *pq = rand_host((size_t)PN * 2 * HD, 1.0), *pk0 = rand_host((size_t)PN * HD, 1.0);
    float *pv = rand_host((size_t)PN * HD, 1.0), *pk = malloc((size_t)PN * HD * sizeof *pk);
    unsigned char pmask[PN] = {1, 1, 1, 1, 0, 0, 0, 0};
    memcpy(pk, pk0, (size_t)PN * HD * sizeof *pk);
    for (int j = 0; j < 4; j++) pk[(size_t)j * HD + 1] = NAN;
    char none[PN * 2] = {0};

    struct backend *saved = be;
    const char *simd[2] = {NULL, "scalar"};
    for (int si = 0; si < 2; si++)
        for (int nt = 1; nt <= 3; nt += 2) {
            if (simd[si]) setenv("EVICTBENCH_CPU_SIMD", simd[si], 1);
            be = backend_cpu_create(nt);
            if (simd[si]) unsetenv("EVICTBENCH_CPU_SIMD");
            CHECK(be != NULL);
            if (!be) break;
            float *o0, *p0, *o, *p;
            run_attention(q0, k0, v, kv_len, mask, NH, NKV, HD, NN, CAP, &o0, &p0);
            run_attention(q, k, v, kv_len, mask, NH, NKV, HD, NN, CAP, &o, &p);
            int bad = nan_rows_ok(o, p, o0, p0, nan_row, kv_len, mask, NH, NKV, HD, NN, CAP);
            CHECK_MSG(bad == 0, "%s, %d threads: %d values wrong", simd[si] ? simd[si] : "auto",
                      nt, bad);
            free(o0);
            free(p0);
            free(o);
            free(p);
            run_attention(pq, pk0, pv, plen, pmask, 2, 1, HD, PN, PN, &o0, &p0);
            run_attention(pq, pk, pv, plen, pmask, 2, 1, HD, PN, PN, &o, &p);
            bad = nan_rows_ok(o, p, o0, p0, none, plen, pmask, 2, 1, HD, PN, PN);
            for (size_t i = 0; i < (size_t)4 * 2 * HD; i++) bad += o[i] != 0.0f;
            CHECK_MSG(bad == 0, "%s, %d threads: masked NaN keys: %d values wrong",
                      simd[si] ? simd[si] : "auto", nt, bad);
            free(o0);
            free(p0);
            free(o);
            free(p);
            be->destroy(be);
        }
    be = saved;
    free(q0);
    free(k0);
    free(v);
    free(q);
    free(k);
    free(pq);
    free(pk0);
    free(pv);
    free(pk);
}

/* The output must not depend on whether probabilities are requested, nor on
 * the thread count (each (head, query) is computed by one thread, in order). */
static void test_attention_deterministic(void)
{
    int n_head = 4, n_kv = 2, hd = 32, n_new = 3, cap = 64;
    int kv_len[2] = {50, 21};
    size_t qn = (size_t)n_new * n_head * hd, cn = (size_t)n_kv * cap * hd;
    float *q = rand_host(qn, 1.0), *k = rand_host(cn, 1.0), *v = rand_host(cn, 1.0);
    struct backend *one = backend_cpu_create(1), *three = backend_cpu_create(3);
    CHECK(one && three);
    if (!one || !three) return;
    float *res[3];
    for (int run = 0; run < 3; run++) {
        struct backend *b = run == 2 ? one : three;
        float *dq = b->alloc(b, qn), *dk = b->alloc(b, cn), *dv = b->alloc(b, cn);
        float *dout = b->alloc(b, qn);
        float *dp = run == 1 ? b->alloc(b, (size_t)n_head * n_new * cap) : NULL;
        b->upload(b, dq, q, qn);
        b->upload(b, dk, k, cn);
        b->upload(b, dv, v, cn);
        struct attn_args a = {
            .out = dout, .q = dq, .k_cache = dk, .v_cache = dv, .cap = cap, .n_head = n_head,
            .n_kv = n_kv, .head_dim = hd, .n_new = n_new, .kv_len = kv_len,
            .scale = 0.17f, .probs = dp,
        };
        b->attention(b, &a);
        res[run] = malloc(qn * sizeof(float));
        b->download(b, res[run], dout, qn);
        b->free(b, dq);
        b->free(b, dk);
        b->free(b, dv);
        b->free(b, dout);
        b->free(b, dp);
    }
    CHECK(memcmp(res[0], res[1], qn * sizeof(float)) == 0);
    CHECK(memcmp(res[0], res[2], qn * sizeof(float)) == 0);
    for (int run = 0; run < 3; run++) free(res[run]);
    one->destroy(one);
    three->destroy(three);
    free(q);
    free(k);
    free(v);
}

int main(void)
{
    be = backend_cpu_create(0);
    if (!be) {
        fprintf(stderr, "cannot create the CPU backend\n");
        return 1;
    }
    CHECK_STR(be->name, "cpu");
    RUN(test_memory);
    RUN(test_gemm);
    RUN(test_gemm_thread_invariant);
    RUN(test_rmsnorm);
    RUN(test_rope);
    RUN(test_rope_pairings_agree);
    RUN(test_swiglu_add);
    RUN(test_embed_gather);
    RUN(test_gather_in_place);
    RUN(test_attention_decode);
    RUN(test_attention_prefill);
    RUN(test_attention_mask);
    RUN(test_attention_deterministic);
    RUN(test_attention_nan);
    be->destroy(be);
    return test_summary("kernels");
}
