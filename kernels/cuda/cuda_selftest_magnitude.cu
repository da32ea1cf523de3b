/* cuda_selftest_magnitude.cu - attention at the magnitudes a real model
 * reaches, against the CPU backend (cuda_selftest's part for issue 24):
 *
 *   - logits up to +-80: each query head's q is scaled so that its largest
 *     |q.k| * scale over the keys it sees is exactly 80, for decode at every
 *     split-K count the device's plan uses (lengths s * 128 - (s % 3) * 37
 *     give s splits up to 64 on a 132-SM H200; cuda_split.c, tested on the
 *     CPU) and for prefill, over f32 and bf16 caches.  Tolerance 1e-3 of
 *     (1 + |cpu|): a logit is an f32 dot product of head_dim terms summed in
 *     another order, off by at most head_dim 2^-24 sum|q_d k_d| scale, which
 *     is ~1e-3 at hd 128 when the largest logit is 80 (sum|q_d k_d| is about
 *     twice the largest |q.k| for random vectors); a weight moves by that
 *     relative amount and so does the output.  Typical errors are ~1e-5.
 *   - rows that see only masked slots (their max is -inf) give zeros, and a
 *     head whose first 3,000 slots are masked (whole splits of -inf) merges
 *     the splits without NaN.
 *   - NaN inputs are reported, not hidden: a NaN query makes its head's
 *     output NaN and a NaN value in a visible slot makes that dimension NaN
 *     for the kv head's query heads (so the decode's non-finite check sees
 *     them), a NaN key in a masked slot changes nothing, and no CUDA failure
 *     is recorded (NaN is data).  The count of NaN outputs is checked
 *     exactly; the CPU's count is printed beside it (its attention turns a
 *     NaN score into a zero output), and finite outputs match it. */
#include "kernels/cuda/cuda_selftest_util.h"

extern "C" {
#include "kernels/cuda/cuda_split.h"
}

#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

namespace {

struct attn_case {
    int n_head, n_kv, hd, n_new, cap;
    std::vector<int> len;
    enum kv_type type;
    float target;                     /* largest |logit| per query head; 0: as drawn */
    std::vector<unsigned char> mask;  /* [n_kv][cap] or empty */
    std::vector<float> q, k, v;
};

struct outcome {
    double worst;      /* max |gpu - cpu| / (1 + |cpu|) over finite pairs */
    size_t nan_cpu, nan_gpu, nan_mismatch, zero_rows_bad;
};

void draw(struct selftest *st, attn_case &c)
{
    c.q.resize((size_t)c.n_new * c.n_head * c.hd);
    c.k.resize((size_t)c.n_kv * c.cap * c.hd);
    c.v.resize(c.k.size());
    for (auto &x : c.q) x = st_rnd(st);
    for (auto &x : c.k) x = st_rnd(st);
    for (auto &x : c.v) x = st_rnd(st);
}

/* Scales each query head so its largest |q.k| * scale over visible keys is c.target. */
void aim_logits(attn_case &c)
{
    const int group = c.n_head / c.n_kv;
    const float scale = 1.0f / sqrtf((float)c.hd);
    for (int i = 0; i < c.n_new; i++)
        for (int h = 0; h < c.n_head; h++) {
            int g = h / group, n_vis = c.len[g] - c.n_new + i + 1;
            float *qr = &c.q[((size_t)i * c.n_head + h) * c.hd];
            double best = 0;
            for (int j = 0; j < n_vis && j < c.cap; j++) {
                if (!c.mask.empty() && c.mask[(size_t)g * c.cap + j]) continue;
                const float *kr = &c.k[((size_t)g * c.cap + j) * c.hd];
                double s = 0;
                for (int d = 0; d < c.hd; d++) s += (double)qr[d] * kr[d];
                best = fmax(best, fabs(s) * scale);
            }
            if (best > 0)
                for (int d = 0; d < c.hd; d++) qr[d] = (float)(qr[d] * (c.target / best));
        }
}

/* A typed copy (kv_store on both backends) of an f32 cache pair. */
st_pair typed(struct selftest *st, st_pair x, enum kv_type t, int hd)
{
    st_pair y = st_make(st, std::vector<float>((x.n * kv_type_bytes(t) + 3) / 4, 0.0f));
    std::vector<int> rows(x.n / (size_t)hd);
    for (size_t r = 0; r < rows.size(); r++) rows[r] = (int)r;
    st->cpu->kv_store(st->cpu, y.c, t, x.c, rows.data(), (int)rows.size(), hd);
    st->gpu->kv_store(st->gpu, y.g, t, x.g, rows.data(), (int)rows.size(), hd);
    return y;
}

outcome run(struct selftest *st, attn_case &c)
{
    st_pair q = st_make(st, c.q), k = st_make(st, c.k), v = st_make(st, c.v);
    st_pair out = st_make(st, std::vector<float>(c.q.size(), 7.0f));
    st_pair k16 = k, v16 = v;
    if (c.type != KV_F32) k16 = typed(st, k, c.type, c.hd), v16 = typed(st, v, c.type, c.hd);
    struct attn_args a = {};
    a.cap = c.cap, a.n_head = c.n_head, a.n_kv = c.n_kv, a.head_dim = c.hd, a.n_new = c.n_new;
    a.kv_len = c.len.data(), a.scale = 1.0f / sqrtf((float)c.hd), a.kv_type = c.type;
    a.slot_mask = c.mask.empty() ? NULL : c.mask.data();
    a.out = out.c, a.q = q.c, a.k_cache = k16.c, a.v_cache = v16.c;
    st->cpu->attention(st->cpu, &a);
    a.out = out.g, a.q = q.g, a.k_cache = k16.g, a.v_cache = v16.g;
    st->gpu->attention(st->gpu, &a);
    std::vector<float> hc, hg;
    st_fetch(st, out, hc, hg);
    outcome o = {};
    for (size_t x = 0; x < hc.size(); x++) {
        bool nc = isnan(hc[x]), ng = isnan(hg[x]);
        o.nan_cpu += nc, o.nan_gpu += ng, o.nan_mismatch += nc != ng;
        if (nc || ng) continue;
        double d = fabs((double)hg[x] - hc[x]) / (1.0 + fabs(hc[x]));
        if (!(d <= o.worst)) o.worst = d; /* an infinity counts as worst */
    }
    /* rows that see nothing: exactly zero */
    const int group = c.n_head / c.n_kv;
    for (int i = 0; i < c.n_new; i++)
        for (int h = 0; h < c.n_head; h++) {
            int g = h / group, n_vis = c.len[g] - c.n_new + i + 1, seen = 0;
            for (int j = 0; j < n_vis && j < c.cap; j++)
                seen += c.mask.empty() || !c.mask[(size_t)g * c.cap + j];
            if (seen) continue;
            for (int d = 0; d < c.hd; d++)
                o.zero_rows_bad += hg[((size_t)i * c.n_head + h) * c.hd + d] != 0.0f;
        }
    if (c.type != KV_F32) st_drop(st, k16), st_drop(st, v16);
    st_drop(st, q), st_drop(st, k), st_drop(st, v), st_drop(st, out);
    return o;
}

void split_sweep(struct selftest *st, enum kv_type type, int n_sm)
{
    double worst = 0;
    int bad = 0, lo = 1 << 30, hi = 0;
    for (int s = 1; s <= FLASH_MAX_SPLITS; s++) {
        int L = s * 128 - (s % 3) * 37;
        attn_case c = {28, 4, 128, 1, L, {L, L / 2 + 1, 1, L - 1}, type, 80.0f, {}, {}, {}, {}};
        draw(st, c);
        aim_logits(c);
        outcome o = run(st, c);
        int n = flash_split_plan(n_sm, 4, 1, L, 128).n_split;
        lo = n < lo ? n : lo, hi = n > hi ? n : hi;
        bad += o.nan_cpu + o.nan_gpu > 0 || !(o.worst <= 1e-3);
        worst = fmax(worst, o.worst);
    }
    char what[80], detail[120];
    snprintf(what, sizeof what, "decode logits +-80 %s", kv_type_name(type));
    snprintf(detail, sizeof detail, "split-K %d..%d (%d SMs): max scaled diff %.3g, %d lengths bad ",
             lo, hi, n_sm, worst, bad);
    st_verdict(st, what, bad == 0, detail);
}

void prefill_80(struct selftest *st, enum kv_type type)
{
    attn_case c = {28, 4, 128, 300, 1500, {1500, 900, 300, 1201}, type, 80.0f, {}, {}, {}, {}};
    draw(st, c);
    aim_logits(c);
    outcome o = run(st, c);
    char what[80], detail[96];
    snprintf(what, sizeof what, "prefill logits +-80 %s", kv_type_name(type));
    snprintf(detail, sizeof detail, "max scaled diff %.3g ", o.worst);
    st_verdict(st, what, o.nan_cpu + o.nan_gpu == 0 && o.worst <= 1e-3, detail);
}

/* kv head 1 fully masked; kv head 2 masked but its last 100 slots. */
void masked_rows(struct selftest *st, int n_new)
{
    const int cap = 4096, L = 3100;
    attn_case c = {28, 4, 128, n_new, cap, {L, L, L, L}, KV_F32, 80.0f, {}, {}, {}, {}};
    c.mask.assign((size_t)4 * cap, 0);
    for (int j = 0; j < cap; j++) c.mask[(size_t)1 * cap + j] = 1;
    for (int j = 0; j < L - 100; j++) c.mask[(size_t)2 * cap + j] = 1;
    draw(st, c);
    aim_logits(c);
    outcome o = run(st, c);
    char what[80], detail[120];
    snprintf(what, sizeof what, "all-masked rows, %d new", n_new);
    snprintf(detail, sizeof detail, "max scaled diff %.3g, %zu non-zero outputs of unseeing rows ",
             o.worst, o.zero_rows_bad);
    st_verdict(st, what, o.nan_cpu + o.nan_gpu == 0 && o.zero_rows_bad == 0 && o.worst <= 1e-3,
               detail);
}

/* NaN where it must show (query head 3, a visible value of kv head 3) and
 * where it must not (a masked key of kv head 2). */
void nan_inputs(struct selftest *st, int n_new, int L)
{
    const int cap = L + 8, hd = 128;
    attn_case c = {28, 4, hd, n_new, cap, {L, L, L, L}, KV_F32, 0.0f, {}, {}, {}, {}};
    c.mask.assign((size_t)4 * cap, 0);
    c.mask[(size_t)2 * cap + 5] = 1;
    draw(st, c);
    c.q[3 * hd + 7] = NAN;                                   /* query 0, head 3 */
    c.k[((size_t)2 * cap + 5) * hd + 1] = NAN;               /* masked: must not leak */
    c.v[((size_t)3 * cap + L / 2) * hd + 9] = NAN;           /* visible to every query */
    outcome o = run(st, c);
    /* head 3 of query 0 (every dimension), and dimension 9 of kv head 3's
     * seven query heads for every query */
    size_t want = (size_t)hd + (size_t)7 * n_new;
    char what[80], detail[140];
    snprintf(what, sizeof what, "NaN inputs, %d new, %d keys", n_new, L);
    snprintf(detail, sizeof detail, "NaN outputs gpu %zu (want %zu; cpu %zu), finite diff %.3g ",
             o.nan_gpu, want, o.nan_cpu, o.worst);
    st_verdict(st, what, o.nan_gpu == want && o.worst <= 1e-4, detail);
}

} // namespace

void selftest_magnitude(struct selftest *st)
{
    int n_sm = 1, dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev);
    split_sweep(st, KV_F32, n_sm);
    split_sweep(st, KV_BF16, n_sm);
    prefill_80(st, KV_F32);
    prefill_80(st, KV_BF16);
    masked_rows(st, 1);
    masked_rows(st, 5);
    nan_inputs(st, 1, 5000);
    nan_inputs(st, 1, 60);
    nan_inputs(st, 6, 700);
}
