/* cuda_selftest_fused.cu - the fused layer blocks (cuda_fused.cu) against
 * the single ops on the same device and the same joined weights (the
 * single ops multiply through the parts' views, as model/ does when a
 * block is not served): q, k, v after bias, per-head norm and RoPE, and x
 * after a whole layer_out.  Both round the same activations to 16 bits;
 * what may differ is the GEMMs' summation order for a wider output, so
 * the bound is 1e-4 of (1 + |single|).  Also: a block without joined
 * weights, or with EVICTBENCH_CUDA_FUSED=0, is not served (returns 1). */
#include "kernels/cuda/cuda_selftest_util.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <string.h>

namespace {

struct fshape {
    int rows, d, n_head, n_kv, hd, n_ff;
    bool bias, qk_norm;
    enum rope_pairing pairing;
    enum weight_type type; /* WEIGHT_BF16 or WEIGHT_F16 */
};

std::vector<float> rnd(struct selftest *st, size_t n, float scale)
{
    std::vector<float> h(n);
    for (auto &x : h) x = st_rnd(st) * scale;
    return h;
}

struct weight *weight16(struct selftest *st, enum weight_type t, int rows, int cols, float scale)
{
    std::vector<uint16_t> h((size_t)rows * cols);
    for (auto &x : h) {
        float v = st_rnd(st) * scale;
        if (t == WEIGHT_BF16) {
            __nv_bfloat16 b = __float2bfloat16_rn(v);
            memcpy(&x, &b, 2);
        } else {
            __half b = __float2half_rn(v);
            memcpy(&x, &b, 2);
        }
    }
    return st->gpu->weight_create(st->gpu, t, rows, cols, h.data(), 0, 0);
}

double worst(struct backend *be, const float *single, const float *fused, size_t n)
{
    std::vector<float> a(n), b(n);
    be->download(be, a.data(), single, n);
    be->download(be, b.data(), fused, n);
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double dd = fabs((double)b[i] - a[i]) / (1.0 + fabs(a[i]));
        if (!(dd <= w)) w = dd;
    }
    return w;
}

void test_fused(struct selftest *st, const fshape &s)
{
    struct backend *g = st->gpu;
    int qd = s.n_head * s.hd, kvd = s.n_kv * s.hd, T = s.rows, H = s.n_head + 2 * s.n_kv;
    float sc = 1.0f / sqrtf((float)s.d);
    struct weight *wq = weight16(st, s.type, qd, s.d, sc), *wk = weight16(st, s.type, kvd, s.d, sc);
    struct weight *wv = weight16(st, s.type, kvd, s.d, sc), *wo = weight16(st, s.type, s.d, qd, sc);
    struct weight *wg = weight16(st, s.type, s.n_ff, s.d, sc);
    struct weight *wu = weight16(st, s.type, s.n_ff, s.d, sc);
    struct weight *wd = weight16(st, s.type, s.d, s.n_ff, 1.0f / sqrtf((float)s.n_ff));
    struct weight *qkv[3] = {wq, wk, wv}, *gu[2] = {wg, wu};
    struct weight *wqkv = g->weight_join(g, qkv, 3), *wgu = g->weight_join(g, gu, 2);
    char what[96];
    snprintf(what, sizeof what, "fused layer T%d d%d %d/%d hd%d%s%s", T, s.d, s.n_head, s.n_kv,
             s.hd, s.bias ? " bias" : "", s.qk_norm ? " qknorm" : "");
    if (!wqkv || !wgu) {
        st_verdict(st, what, false, "weight_join refused 16-bit parts");
        return;
    }
    std::vector<int> pos(T);
    for (int i = 0; i < T; i++) pos[i] = 17 * i + 3;
    std::vector<float> inv(s.hd / 2);
    for (int i = 0; i < s.hd / 2; i++) inv[i] = 1.0f / powf(10000.0f, 2.0f * i / s.hd);
    float *x = st_upload(g, rnd(st, (size_t)T * s.d, 1.0f)), *x2 = st_upload(g, std::vector<float>((size_t)T * s.d));
    g->copy(g, x2, x, (size_t)T * s.d);
    float *an = st_upload(g, rnd(st, s.d, 1.0f)), *fn = st_upload(g, rnd(st, s.d, 1.0f));
    float *bqkv = s.bias ? st_upload(g, rnd(st, (size_t)qd + 2 * kvd, 0.5f)) : NULL;
    float *qn = s.qk_norm ? st_upload(g, rnd(st, s.hd, 1.0f)) : NULL;
    float *kn = s.qk_norm ? st_upload(g, rnd(st, s.hd, 1.0f)) : NULL;
    float *inv_d = st_upload(g, inv);
    int *pos_d = (int *)g->alloc(g, T);
    g->upload(g, (float *)pos_d, (const float *)pos.data(), T);
    std::vector<float> zero_q((size_t)T * qd), zero_kv((size_t)T * kvd);
    float *q1 = st_upload(g, zero_q), *k1 = st_upload(g, zero_kv), *v1 = st_upload(g, zero_kv);
    float *q2 = st_upload(g, zero_q), *k2 = st_upload(g, zero_kv), *v2 = st_upload(g, zero_kv);
    float *xb = st_upload(g, std::vector<float>((size_t)T * s.d));
    float *hb = st_upload(g, std::vector<float>((size_t)T * 2 * s.n_ff)), *hb2 = hb + (size_t)T * s.n_ff;
    float *scratch = st_upload(g, std::vector<float>((size_t)T * H * s.hd));
    float *att = st_upload(g, rnd(st, (size_t)T * qd, 1.0f));

    /* the single ops, through the views */
    g->rmsnorm(g, xb, x, an, T, s.d, 1e-6f);
    g->matmul(g, q1, xb, wq, bqkv, T);
    g->matmul(g, k1, xb, wk, bqkv ? bqkv + qd : NULL, T);
    g->matmul(g, v1, xb, wv, bqkv ? bqkv + qd + kvd : NULL, T);
    if (s.qk_norm) {
        g->rmsnorm(g, q1, q1, qn, T * s.n_head, s.hd, 1e-6f);
        g->rmsnorm(g, k1, k1, kn, T * s.n_kv, s.hd, 1e-6f);
    }
    g->rope(g, q1, T, s.n_head, s.hd, pos.data(), inv.data(), s.pairing);
    g->rope(g, k1, T, s.n_kv, s.hd, pos.data(), inv.data(), s.pairing);

    struct layer_in_args a = {T, s.d, s.n_head, s.n_kv, s.hd, x, an, 1e-6f, wq, wk, wv,
                              bqkv, bqkv ? bqkv + qd : NULL, bqkv ? bqkv + qd + kvd : NULL, qn, kn,
                              pos.data(), inv.data(), s.pairing, xb, q2, k2, v2,
                              wqkv, bqkv, pos_d, inv_d, scratch};
    int rc_in = g->layer_in(g, &a);
    double w_in = fmax(worst(g, q1, q2, (size_t)T * qd),
                       fmax(worst(g, k1, k2, (size_t)T * kvd), worst(g, v1, v2, (size_t)T * kvd)));

    /* layer_out: x single, x2 fused */
    g->matmul(g, xb, att, wo, NULL, T);
    g->add(g, x, xb, (size_t)T * s.d);
    g->rmsnorm(g, xb, x, fn, T, s.d, 1e-6f);
    g->matmul(g, hb, xb, wg, NULL, T);
    g->matmul(g, hb2, xb, wu, NULL, T);
    g->swiglu(g, hb, hb, hb2, (size_t)T * s.n_ff);
    g->matmul(g, xb, hb, wd, NULL, T);
    g->add(g, x, xb, (size_t)T * s.d);
    struct layer_out_args o = {T, s.d, s.n_ff, x2, att, wo, wg, wu, wd, fn, 1e-6f, xb, hb, hb2,
                               wgu};
    int rc_out = g->layer_out(g, &o);
    double w_out = worst(g, x, x2, (size_t)T * s.d);

    /* not served: no joined weight; or turned off */
    struct layer_in_args plain = a;
    plain.wqkv = NULL;
    int rc_plain = g->layer_in(g, &plain);
    setenv("EVICTBENCH_CUDA_FUSED", "0", 1);
    int rc_off = g->layer_in(g, &a) + g->layer_out(g, &o);
    unsetenv("EVICTBENCH_CUDA_FUSED");

    char detail[160];
    snprintf(detail, sizeof detail, "in %.2e out %.2e (rc %d %d; unjoined %d, off %d)", w_in,
             w_out, rc_in, rc_out, rc_plain, rc_off);
    st_verdict(st, what, rc_in == 0 && rc_out == 0 && rc_plain == 1 && rc_off == 2 &&
                             w_in <= 1e-4 && w_out <= 1e-4,
               detail);

    float *bufs[] = {x, x2, an, fn, bqkv, qn, kn, inv_d, (float *)pos_d, q1, k1, v1, q2, k2, v2,
                     xb, hb, scratch, att};
    for (float *p : bufs)
        if (p) g->free(g, p);
    struct weight *ws[] = {wq, wk, wv, wo, wg, wu, wd, wqkv, wgu}; /* views first */
    for (struct weight *w : ws) g->weight_free(g, w);
}

} // namespace

void selftest_fused(struct selftest *st)
{
    /* R1-Distill-Qwen-7B's widths (bias, 7:1 GQA), Llama-8B's (4:1), a
     * qwen3-like block with per-head norms, f16 weights, adjacent pairing */
    test_fused(st, {1, 3584, 28, 4, 128, 2048, true, false, ROPE_PAIR_HALF, WEIGHT_BF16});
    test_fused(st, {64, 3584, 28, 4, 128, 2048, true, false, ROPE_PAIR_HALF, WEIGHT_BF16});
    test_fused(st, {3, 4096, 32, 8, 128, 1024, false, false, ROPE_PAIR_HALF, WEIGHT_BF16});
    test_fused(st, {5, 1024, 16, 8, 64, 3072, false, true, ROPE_PAIR_HALF, WEIGHT_BF16});
    test_fused(st, {7, 576, 9, 3, 64, 1536, false, false, ROPE_PAIR_ADJACENT, WEIGHT_F16});
}
