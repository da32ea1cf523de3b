/* cuda_selftest_fused.cu - the fused layer blocks (cuda_fused.cu) against
 * the single ops on the same device and the same joined weights (the
 * single ops multiply through the parts' views, as model/ does when a
 * block is not served): q, k, v after bias, per-head norm and RoPE, and x
 * after a whole layer_out.  Both round the same activations to 16 bits;
 * what may differ is the GEMMs' summation order for a wider output, so
 * q, k and v are within 1e-4 of (1 + |single|).  x is within 1e-3: a
 * gate/up value that differs in its last f32 bits can round to the next
 * 16-bit value before the down product, and each such activation moves
 * x by |w| 2^-8 |h| (measured 1.06e-4 on the 7B shape, the CPU emulator's
 * OpenBLAS summing in another order; 1e-4 failed there).  Also: a block without joined
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
                              wqkv, bqkv, pos_d, inv_d, scratch, NULL, 0};
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
                             w_in <= 1e-4 && w_out <= 1e-3,
               detail);

    float *bufs[] = {x, x2, an, fn, bqkv, qn, kn, inv_d, (float *)pos_d, q1, k1, v1, q2, k2, v2,
                     xb, hb, scratch, att};
    for (float *p : bufs)
        if (p) g->free(g, p);
    struct weight *ws[] = {wq, wk, wv, wo, wg, wu, wd, wqkv, wgu}; /* views first */
    for (struct weight *w : ws) g->weight_free(g, w);
}

/* ---- RoPE fused with the KV append ---- */

/* A table of three sequences' caches (zeros, ragged lengths, two layers),
 * query rings on two of them, and its step: 1 decode row, 5 (the first a
 * pad), 2; ring slots start mid-ring.  bufs: every cache and ring with its
 * size in floats, in the same order for every table. */
struct app_table {
    struct kv_table *t;
    std::vector<std::pair<float *, size_t>> bufs;
};

app_table append_table(struct backend *g, const fshape &s, enum kv_type type)
{
    const int n_layer = 2, cap = 64, window[3] = {4, 0, 4}, len0[3] = {9, 30, 0};
    app_table at = {g->kv_table_create(g, 3, n_layer, s.n_kv, s.n_head, s.hd), {}};
    size_t kv_floats = ((size_t)s.n_kv * cap * s.hd * kv_type_bytes(type) + 3) / 4;
    size_t ring_floats = (size_t)4 * s.n_head * s.hd;
    for (int j = 0; at.t && j < 3; j++) {
        void *k[2], *v[2];
        float *ring[2];
        for (int l = 0; l < n_layer; l++) {
            k[l] = st_upload(g, std::vector<float>(kv_floats));
            v[l] = st_upload(g, std::vector<float>(kv_floats));
            at.bufs.push_back({(float *)k[l], kv_floats});
            at.bufs.push_back({(float *)v[l], kv_floats});
            ring[l] = window[j] ? st_upload(g, std::vector<float>(ring_floats)) : NULL;
            if (ring[l]) at.bufs.push_back({ring[l], ring_floats});
        }
        std::vector<int> len((size_t)n_layer * s.n_kv);
        for (size_t x = 0; x < len.size(); x++) len[x] = len0[j] + (int)x % 3;
        struct kv_seq_desc d = {};
        d.kv_type = type, d.cap = cap, d.len = len.data(), d.q_window = window[j];
        d.k = k, d.v = v, d.q_ring = window[j] ? ring : NULL;
        g->kv_table_bind(g, at.t, j, &d);
    }
    struct kv_step_seq step[3] = {{0, 0, 1, 0, 3}, {1, 1, 5, 1, 0}, {2, 6, 2, 0, 1}};
    if (at.t) g->kv_table_step(g, at.t, 3, step);
    return at;
}

/* Layer 1 of three sequences three ways: layer_in with the table (fused: the
 * kernel that ropes K/V writes them to the caches), layer_in then kv_append,
 * and layer_in with the table under EVICTBENCH_CUDA_ROPE_APPEND=0.  The
 * caches, rings, q/k/v and the attention after each must equal bit for bit
 * (the same head arithmetic and stores; the attention reads the lengths and
 * pad flags). */
void test_rope_append(struct selftest *st, const fshape &s, enum kv_type type)
{
    struct backend *g = st->gpu;
    const int T = 8, qd = s.n_head * s.hd, kvd = s.n_kv * s.hd;
    float sc = 1.0f / sqrtf((float)s.d);
    struct weight *wq = weight16(st, s.type, qd, s.d, sc), *wk = weight16(st, s.type, kvd, s.d, sc);
    struct weight *wv = weight16(st, s.type, kvd, s.d, sc);
    struct weight *parts[3] = {wq, wk, wv};
    struct weight *wqkv = g->weight_join(g, parts, 3);
    std::vector<int> pos = {40, 30, 31, 32, 33, 34, 2, 3};
    std::vector<float> inv(s.hd / 2);
    for (int i = 0; i < s.hd / 2; i++) inv[i] = 1.0f / powf(1e6f, 2.0f * i / s.hd);
    float *x = st_upload(g, rnd(st, (size_t)T * s.d, 1.0f)), *an = st_upload(g, rnd(st, s.d, 1.0f));
    float *bqkv = s.bias ? st_upload(g, rnd(st, (size_t)qd + 2 * kvd, 0.5f)) : NULL;
    float *inv_d = st_upload(g, inv), *pos_d = st_upload(g, std::vector<float>(T));
    g->upload(g, pos_d, (const float *)pos.data(), T);
    float *xb = st_upload(g, std::vector<float>((size_t)T * s.d));
    float *scratch = st_upload(g, std::vector<float>((size_t)T * (qd + 2 * kvd)));
    std::vector<float *> owned = {x, an, bqkv, inv_d, pos_d, xb, scratch};
    float *q[3], *k[3], *v[3], *out[3];
    app_table t[3];
    int rc[3];
    for (int w = 0; w < 3; w++) { /* one table at a time: a step is the backend's current one */
        owned.push_back(q[w] = st_upload(g, std::vector<float>((size_t)T * qd)));
        owned.push_back(k[w] = st_upload(g, std::vector<float>((size_t)T * kvd)));
        owned.push_back(v[w] = st_upload(g, std::vector<float>((size_t)T * kvd)));
        owned.push_back(out[w] = st_upload(g, std::vector<float>((size_t)T * qd)));
        t[w] = append_table(g, s, type);
        struct layer_in_args a = {T, s.d, s.n_head, s.n_kv, s.hd, x, an, 1e-6f, wq, wk, wv,
                                  bqkv, bqkv ? bqkv + qd : NULL, bqkv ? bqkv + qd + kvd : NULL,
                                  NULL, NULL, pos.data(), inv.data(), s.pairing, xb, q[w], k[w],
                                  v[w], wqkv, bqkv, (const int *)pos_d, inv_d, scratch,
                                  w == 1 ? NULL : t[w].t, 1};
        if (w == 2) setenv("EVICTBENCH_CUDA_ROPE_APPEND", "0", 1);
        rc[w] = t[w].t && wqkv ? g->layer_in(g, &a) : -2;
        unsetenv("EVICTBENCH_CUDA_ROPE_APPEND");
        if (w == 1 && rc[w] == 0) rc[w] = g->kv_append(g, t[w].t, 1, k[w], v[w], q[w]);
        struct attn_layer_args at = {1, out[w], q[w], 1.0f / sqrtf((float)s.hd), NULL};
        if (rc[w] == 0) rc[w] = g->attention_layer(g, t[w].t, &at);
    }
    int differ = 0;
    auto same = [&](const float *p0, const float *p1, size_t n) {
        std::vector<float> a(n), b(n);
        g->download(g, a.data(), p0, n);
        g->download(g, b.data(), p1, n);
        differ += memcmp(a.data(), b.data(), n * sizeof(float)) != 0;
    };
    for (int w = 0; w < 3; w += 2) { /* runs 0 and 2 against run 1 */
        same(q[1], q[w], (size_t)T * qd), same(out[1], out[w], (size_t)T * qd);
        same(k[1], k[w], (size_t)T * kvd), same(v[1], v[w], (size_t)T * kvd);
        for (size_t i = 0; i < t[1].bufs.size() && i < t[w].bufs.size(); i++)
            same(t[1].bufs[i].first, t[w].bufs[i].first, t[1].bufs[i].second);
    }
    char what[96], detail[160];
    snprintf(what, sizeof what, "rope + kv append %d/%d hd%d %s", s.n_head, s.n_kv, s.hd,
             type == KV_BF16 ? "bf16" : type == KV_F16 ? "f16" : "f32");
    snprintf(detail, sizeof detail, "rc fused %d, separate %d, switched off %d; %d buffers differ",
             rc[0], rc[1], rc[2], differ);
    st_verdict(st, what, rc[0] == 0 && rc[1] == 0 && rc[2] == 0 && differ == 0 &&
                             t[0].bufs.size() == t[1].bufs.size(), detail);
    for (int w = 0; w < 3; w++) {
        if (t[w].t) g->kv_table_free(g, t[w].t);
        for (auto &p : t[w].bufs) g->free(g, p.first);
    }
    for (float *p : owned)
        if (p) g->free(g, p);
    struct weight *ws[] = {wq, wk, wv, wqkv}; /* views first */
    for (struct weight *w : ws)
        if (w) g->weight_free(g, w);
}

} // namespace

void selftest_fused(struct selftest *st)
{
    test_rope_append(st, {8, 3584, 28, 4, 128, 0, true, false, ROPE_PAIR_HALF, WEIGHT_BF16}, KV_BF16);
    test_rope_append(st, {8, 576, 9, 3, 64, 0, false, false, ROPE_PAIR_ADJACENT, WEIGHT_F16}, KV_F16);
    test_rope_append(st, {8, 1024, 16, 8, 64, 0, false, false, ROPE_PAIR_HALF, WEIGHT_BF16}, KV_F32);
    /* R1-Distill-Qwen-7B's widths (bias, 7:1 GQA), Llama-8B's (4:1), a
     * qwen3-like block with per-head norms, f16 weights, adjacent pairing */
    test_fused(st, {1, 3584, 28, 4, 128, 2048, true, false, ROPE_PAIR_HALF, WEIGHT_BF16});
    test_fused(st, {64, 3584, 28, 4, 128, 2048, true, false, ROPE_PAIR_HALF, WEIGHT_BF16});
    test_fused(st, {3, 4096, 32, 8, 128, 1024, false, false, ROPE_PAIR_HALF, WEIGHT_BF16});
    test_fused(st, {5, 1024, 16, 8, 64, 3072, false, true, ROPE_PAIR_HALF, WEIGHT_BF16});
    test_fused(st, {7, 576, 9, 3, 64, 1536, false, false, ROPE_PAIR_ADJACENT, WEIGHT_F16});
}
