/* cuda_selftest_batch.cu - the batched eviction ops (window_scores_batch,
 * key_redundancy_batch, head_mean_batch, last_query_attn_batch, batch_topk,
 * kv_gather_batch) against the CPU backend: scores to f32 rounding (the
 * head mean bit for bit), keep-sets exactly when both sides rank the same
 * scores (added rows and pad rules included), gathers bit for bit.  The
 * "pads" cases give every other unit (every other run) left pad slots,
 * masked by both sides as cpu_score.c masks them. */
#include "kernels/cuda/cuda_selftest_util.h"

#include <math.h>
#include <string.h>

#include <string>

namespace {

enum { HEAD_DIM = 64, N_HEAD = 8, N_KV = 2, RING = 8 };

struct batch_case {
    std::vector<int> lens;     /* one unit per entry */
    enum kv_type type;
    int n_q, q_first, n_recent, budget;
    int n_pad;                 /* left pads of every other unit (run); 0: none */
    int pad_rule;              /* top-k: 0 pads ranked as scored, 1 evicted first, 2 kept */
    int dups;                  /* 1: every third key a near copy of an older one, so the
                                  redundancy finds matches near and far (random keys
                                  rarely pass the threshold) */
    int bf16;                  /* top-k: scores rounded as a bf16 run stores them */
};

/* One backend's side of a case: keys, ring, outputs, descriptors. */
struct side {
    struct backend *be;
    std::vector<float *> keys, imp, red, keep;
    std::vector<float *> z, add; /* layer cases: a double row per run; an added row per unit */
    std::vector<float *> pads;   /* pad flags (bytes) of the padded units */
    float *ring, *units;
    std::vector<score_unit> host;
};

/* Keys of len rows stored as type (f32 floats, or 16-bit pairs packed in
 * floats); with dups, row j = 3m (m >= 1) is row j / 2 scaled by 1.01 plus
 * 1% noise. */
std::vector<float> typed_keys(struct selftest *st, int len, enum kv_type t, int dups = 0)
{
    size_t n = (size_t)len * HEAD_DIM;
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = st_rnd(st);
    for (int j = 3; dups && j < len; j += 3)
        for (int d = 0; d < HEAD_DIM; d++)
            f[(size_t)j * HEAD_DIM + d] =
                1.01f * f[(size_t)(j / 2) * HEAD_DIM + d] + 0.01f * st_rnd(st);
    if (t == KV_F32) return f;
    std::vector<float> packed((n + 1) / 2);
    uint16_t *h = (uint16_t *)packed.data();
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        h[i] = t == KV_BF16 ? (uint16_t)(u >> 16) : 0x3c00u ^ (uint16_t)(u & 0x03ffu); /* f16 in [1, 2) */
    }
    return packed;
}

/* adds: NULL, or a row per unit added to its scores; run > 1: units in runs
 * of `run` sharing one z row (a layer's kv heads). */
void build(struct selftest *st, const batch_case &c, side &s, const std::vector<std::vector<float>> &keys,
           const std::vector<float> &ring, const std::vector<std::vector<float>> *adds = NULL,
           int run = 1)
{
    (void)st;
    s.ring = st_upload(s.be, ring);
    for (size_t u = 0; u < c.lens.size(); u++) {
        int len = c.lens[u];
        if (run > 1 && u % run == 0)
            s.z.push_back(st_upload(s.be, std::vector<float>(2 * (size_t)len, 0.0f)));
        if (adds) s.add.push_back(st_upload(s.be, (*adds)[u]));
        s.keys.push_back(st_upload(s.be, keys[u]));
        s.imp.push_back(st_upload(s.be, std::vector<float>((size_t)len, 0.0f)));
        s.red.push_back(st_upload(s.be, std::vector<float>((size_t)len, 0.0f)));
        s.keep.push_back(st_upload(s.be, std::vector<float>((size_t)len, 0.0f)));
        score_unit d = {};
        d.k = s.keys[u];
        d.q = s.ring;
        d.imp = s.imp[u];
        d.red = s.red[u];
        d.keep = (int *)s.keep[u];
        d.kv_type = c.type;
        d.kv_head = (int)u % N_KV;
        d.len = len;
        d.n_cand = len - c.n_recent;
        d.n_select = c.budget - c.n_recent;
        d.n_q = c.n_q;
        d.q_ring = RING;
        d.q_first = c.q_first;
        d.z = run > 1 ? (double *)s.z.back() : NULL;
        d.add = adds ? s.add.back() : NULL;
        if (c.n_pad > 0 && (u / run) % 2 == 0) { /* a run's units share their pads */
            std::vector<float> flags(((size_t)len + 3) / 4, 0.0f);
            memset(flags.data(), 1, (size_t)(c.n_pad < len ? c.n_pad : len - 1));
            s.pads.push_back(st_upload(s.be, flags));
            d.pad = (const unsigned char *)s.pads.back();
        }
        s.host.push_back(d);
    }
    size_t n = s.host.size() * sizeof(score_unit) / sizeof(float);
    s.units = s.be->alloc(s.be, n);
    s.be->upload(s.be, s.units, (const float *)s.host.data(), n);
}

void release(side &s)
{
    for (size_t u = 0; u < s.keys.size(); u++) {
        s.be->free(s.be, s.keys[u]);
        s.be->free(s.be, s.imp[u]);
        s.be->free(s.be, s.red[u]);
        s.be->free(s.be, s.keep[u]);
    }
    for (float *p : s.z) s.be->free(s.be, p);
    for (float *p : s.add) s.be->free(s.be, p);
    for (float *p : s.pads) s.be->free(s.be, p);
    s.be->free(s.be, s.ring);
    s.be->free(s.be, s.units);
}

std::vector<float> fetch(struct backend *be, const float *p, size_t n)
{
    std::vector<float> h(n);
    be->download(be, h.data(), p, n);
    return h;
}

/* Largest |a - b| / (atol + rtol |a|) over the units' rows. */
double worst(side &a, side &b, std::vector<float *> side::*rows, const batch_case &c, bool cand)
{
    double w = 0;
    for (size_t u = 0; u < c.lens.size(); u++) {
        size_t n = cand ? (size_t)(c.lens[u] - c.n_recent) : (size_t)c.lens[u];
        std::vector<float> x = fetch(a.be, (a.*rows)[u], n), y = fetch(b.be, (b.*rows)[u], n);
        for (size_t j = 0; j < n; j++) {
            double e = fabs((double)x[j] - y[j]) / (1e-6 + 1e-3 * fabs((double)x[j]));
            if (!(e <= w)) w = e; /* NaN counts as worst */
        }
    }
    return w;
}

void run_case(struct selftest *st, const char *name, const batch_case &c, enum batch_score score,
              int by_position)
{
    std::vector<std::vector<float>> keys;
    for (int len : c.lens) keys.push_back(typed_keys(st, len, c.type, c.dups));
    std::vector<float> ring((size_t)RING * N_HEAD * HEAD_DIM);
    for (float &x : ring) x = st_rnd(st);
    side cs, gs;
    cs.be = st->cpu;
    gs.be = st->gpu;
    build(st, c, cs, keys, ring);
    build(st, c, gs, keys, ring);
    int max_len = 1;
    for (int len : c.lens) max_len = len > max_len ? len : max_len;
    score_batch_args a = {};
    a.n_units = (int)c.lens.size();
    a.max_len = max_len;
    a.max_q = c.n_q;
    a.n_head = N_HEAD;
    a.n_kv = N_KV;
    a.head_dim = HEAD_DIM;
    a.scale = 1.0f / sqrtf((float)HEAD_DIM);
    a.softmax_all = by_position; /* both forms, one per order */
    a.gqa = by_position ? SCORE_GQA_MEAN : SCORE_GQA_MAX;
    a.kernel = by_position ? 5 : 7;
    a.pool = by_position ? SCORE_POOL_AVG : SCORE_POOL_MAX;
    a.threshold = 0.5f;
    a.no_match_zero_col0 = 1;
    a.score = score;
    a.lambda = 0.1;
    a.by_position = by_position;
    a.use_pads = c.pad_rule != 0;
    a.pad_keep = c.pad_rule == 2;
    a.pad_score = 100.0;
    a.bf16 = c.bf16;
    char detail[160];
    a.units = (const score_unit *)cs.units;
    int rc_c = cs.be->window_scores_batch(cs.be, &a) | cs.be->key_redundancy_batch(cs.be, &a);
    a.units = (const score_unit *)gs.units;
    int rc_g = gs.be->window_scores_batch(gs.be, &a) | gs.be->key_redundancy_batch(gs.be, &a);
    double wi = worst(cs, gs, &side::imp, c, true), wr = worst(cs, gs, &side::red, c, false);
    snprintf(detail, sizeof detail, "imp %.2g red %.2g (units of atol 1e-6 + rtol 1e-3)", wi, wr);
    std::string what = std::string("batch scores ") + name;
    st_verdict(st, what.c_str(), rc_c == 0 && rc_g == 0 && wi <= 1 && wr <= 1, detail);
    /* the kernels before the tiles (a warp per key, a block per row), kept
     * for comparisons */
    setenv("EVICTBENCH_CUDA_TILES", "0", 1);
    rc_g = gs.be->window_scores_batch(gs.be, &a) | gs.be->key_redundancy_batch(gs.be, &a);
    unsetenv("EVICTBENCH_CUDA_TILES");
    wi = worst(cs, gs, &side::imp, c, true);
    wr = worst(cs, gs, &side::red, c, false);
    snprintf(detail, sizeof detail, "imp %.2g red %.2g (units of atol 1e-6 + rtol 1e-3)", wi, wr);
    what = std::string("batch scores without tiles ") + name;
    st_verdict(st, what.c_str(), rc_g == 0 && wi <= 1 && wr <= 1, detail);
    /* The same scores on both sides: the keep-sets must match exactly. */
    for (size_t u = 0; u < c.lens.size(); u++) {
        std::vector<float> i = fetch(cs.be, cs.imp[u], (size_t)c.lens[u]);
        std::vector<float> r = fetch(cs.be, cs.red[u], (size_t)c.lens[u]);
        gs.be->upload(gs.be, gs.imp[u], i.data(), i.size());
        gs.be->upload(gs.be, gs.red[u], r.data(), r.size());
    }
    a.units = (const score_unit *)cs.units;
    rc_c = cs.be->batch_topk(cs.be, &a);
    for (int counting = 0; counting < 2; counting++) { /* sorted, then ranked by counting */
        if (counting) setenv("EVICTBENCH_CUDA_TILES", "0", 1);
        a.units = (const score_unit *)gs.units;
        rc_g = gs.be->batch_topk(gs.be, &a);
        unsetenv("EVICTBENCH_CUDA_TILES");
        bool same = rc_c == 0 && rc_g == 0;
        for (size_t u = 0; u < c.lens.size() && same; u++) {
            size_t n = (size_t)(c.budget);
            std::vector<float> x = fetch(cs.be, cs.keep[u], n), y = fetch(gs.be, gs.keep[u], n);
            same = memcmp(x.data(), y.data(), n * sizeof(float)) == 0;
        }
        what = std::string(counting ? "batch top-k by counting " : "batch top-k ") + name;
        st_verdict(st, what.c_str(), same, by_position ? "by position" : "by score");
    }
    release(cs);
    release(gs);
}

/* Largest |a - b| / (atol + rtol |a|) over the runs' shared rows, at
 * atol = rtol = 1e-9; infinite for a row left all zeros. */
double worst_z(side &a, side &b, const batch_case &c, int run)
{
    double w = 0;
    for (size_t r = 0; r < a.z.size(); r++) {
        size_t n = (size_t)(c.lens[r * run] - c.n_recent);
        std::vector<double> x(n), y(n);
        a.be->download(a.be, (float *)x.data(), a.z[r], 2 * n);
        b.be->download(b.be, (float *)y.data(), b.z[r], 2 * n);
        bool written = false;
        for (size_t j = 0; j < n; j++) {
            double e = fabs(x[j] - y[j]) / (1e-9 + 1e-9 * fabs(x[j]));
            if (!(e <= w)) w = e;
            written = written || x[j] != 0.0;
        }
        if (!written) w = INFINITY;
    }
    return w;
}

/* A per-layer case (runs of N_KV units of equal length): the shared score
 * from the heads' mean of their importance (window 1) and from the last
 * query's attention, then the top-k of the shared rows with an added row
 * (SkipKV's penalty form: -0.25 on every third candidate). */
void layer_case(struct selftest *st, const char *name, const batch_case &c, int by_position)
{
    std::vector<std::vector<float>> keys, adds;
    for (int len : c.lens) {
        keys.push_back(typed_keys(st, len, c.type));
        std::vector<float> add((size_t)len, 0.0f);
        for (int j = 0; j < len; j += 3) add[j] = -0.25f;
        adds.push_back(add);
    }
    std::vector<float> ring((size_t)RING * N_HEAD * HEAD_DIM);
    for (float &x : ring) x = st_rnd(st);
    side cs, gs;
    cs.be = st->cpu;
    gs.be = st->gpu;
    build(st, c, cs, keys, ring, &adds, N_KV);
    build(st, c, gs, keys, ring, &adds, N_KV);
    int max_len = 1;
    for (int len : c.lens) max_len = len > max_len ? len : max_len;
    score_batch_args a = {};
    a.n_units = (int)c.lens.size();
    a.run = N_KV;
    a.max_len = max_len;
    a.max_q = c.n_q;
    a.n_head = N_HEAD;
    a.n_kv = N_KV;
    a.head_dim = HEAD_DIM;
    a.scale = 1.0f / sqrtf((float)HEAD_DIM);
    a.gqa = by_position ? SCORE_GQA_MEAN : SCORE_GQA_MAX;
    a.kernel = 1;
    a.score = BATCH_SCORE_Z;
    a.by_position = by_position;
    a.use_pads = c.pad_rule != 0;
    a.pad_keep = c.pad_rule == 2;
    a.pad_score = 100.0;
    std::string base = std::string(name);
    char detail[160];
    for (int form = 0; form < 2; form++) {
        int rc_c, rc_g;
        a.units = (const score_unit *)cs.units;
        rc_c = form ? cs.be->last_query_attn_batch(cs.be, &a)
                    : cs.be->window_scores_batch(cs.be, &a) | cs.be->head_mean_batch(cs.be, &a);
        a.units = (const score_unit *)gs.units;
        rc_g = form ? gs.be->last_query_attn_batch(gs.be, &a)
                    : gs.be->window_scores_batch(gs.be, &a) | gs.be->head_mean_batch(gs.be, &a);
        /* the mean: f32 rows to 1e-3; the last query in double to 1e-9 */
        double wz = worst_z(cs, gs, c, N_KV) * (form ? 1.0 : 1e-6);
        snprintf(detail, sizeof detail, "%.2g (units of %s)", wz,
                 form ? "atol 1e-9 + rtol 1e-9" : "atol 1e-3 + rtol 1e-3");
        std::string what = std::string(form ? "batch last query " : "batch head mean ") + base;
        st_verdict(st, what.c_str(), rc_c == 0 && rc_g == 0 && wz <= 1, detail);
    }
    /* The CPU's shared rows on both sides: the keep-sets must match exactly. */
    for (size_t r = 0; r < cs.z.size(); r++) {
        size_t n = 2 * (size_t)c.lens[r * N_KV];
        std::vector<float> z = fetch(cs.be, cs.z[r], n);
        gs.be->upload(gs.be, gs.z[r], z.data(), n);
    }
    a.units = (const score_unit *)cs.units;
    int rc_c = cs.be->batch_topk(cs.be, &a);
    a.units = (const score_unit *)gs.units;
    int rc_g = gs.be->batch_topk(gs.be, &a);
    bool same = rc_c == 0 && rc_g == 0;
    for (size_t u = 0; u < c.lens.size() && same; u++) {
        size_t n = (size_t)c.budget;
        std::vector<float> x = fetch(cs.be, cs.keep[u], n), y = fetch(gs.be, gs.keep[u], n);
        same = memcmp(x.data(), y.data(), n * sizeof(float)) == 0;
        /* a run's units share one keep-set */
        std::vector<float> lead = fetch(cs.be, cs.keep[u - u % N_KV], n);
        same = same && memcmp(x.data(), lead.data(), n * sizeof(float)) == 0;
    }
    std::string what = std::string("batch shared top-k ") + base;
    st_verdict(st, what.c_str(), same, by_position ? "by position, added row" : "by score, added row");
    release(cs);
    release(gs);
}

/* Gathers of random keep-sets, K and V, f32 rows and 16-bit ones (half the words). */
void gather_case(struct selftest *st, int words)
{
    const int cap = 300, n_units = 6;
    std::vector<int> n_keep = {100, 1, 0, 299, 64, 299};
    side cs, gs;
    cs.be = st->cpu;
    gs.be = st->gpu;
    std::vector<std::vector<float>> rows(2 * n_units);
    std::vector<std::vector<float>> keep(n_units);
    for (auto &r : rows) {
        r.resize((size_t)cap * words);
        for (float &x : r) x = st_rnd(st);
    }
    for (int u = 0; u < n_units; u++) {
        std::vector<int> perm(cap);
        for (int i = 0; i < cap; i++) perm[i] = i;
        for (int i = cap - 1; i > 0; i--) {
            int j = (int)((st_rnd(st) + 1) * 0.5 * (i + 1)) % (i + 1);
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        if (u == n_units - 1) /* position order, slot 120 evicted: rows before it stay */
            for (int i = 0; i < cap; i++) perm[i] = i < 120 ? i : i + 1;
        keep[u].resize(cap > 0 ? cap : 1);
        memcpy(keep[u].data(), perm.data(), (size_t)cap * sizeof(int));
    }
    size_t unit_floats = (size_t)cap * words;
    bool ok = true;
    std::vector<std::vector<float>> out[2];
    for (int b = 0; b < 2; b++) {
        struct backend *be = b ? st->gpu : st->cpu;
        std::vector<gather_unit> host(n_units);
        std::vector<float *> bufs, kbufs;
        for (int u = 0; u < n_units; u++) {
            float *k = st_upload(be, rows[2 * u]), *v = st_upload(be, rows[2 * u + 1]);
            float *kp = st_upload(be, keep[u]);
            bufs.push_back(k);
            bufs.push_back(v);
            kbufs.push_back(kp);
            host[u] = gather_unit{k, v, (const int *)kp, n_keep[u], words};
        }
        size_t n = host.size() * sizeof(gather_unit) / sizeof(float);
        float *units = be->alloc(be, n), *scratch = be->alloc(be, n_units * unit_floats);
        be->upload(be, units, (const float *)host.data(), n);
        ok = ok && be->kv_gather_batch(be, (const gather_unit *)units, n_units, scratch,
                                       unit_floats) == 0;
        for (float *p : bufs) out[b].push_back(fetch(be, p, unit_floats));
        for (float *p : bufs) be->free(be, p);
        for (float *p : kbufs) be->free(be, p);
        be->free(be, units);
        be->free(be, scratch);
    }
    for (size_t i = 0; i < out[0].size() && ok; i++)
        ok = memcmp(out[0][i].data(), out[1][i].data(), unit_floats * sizeof(float)) == 0;
    /* and what a gather means: row r is the old row keep[r], the rest untouched */
    for (int u = 0; u < n_units && ok && out[0].size() == 2 * (size_t)n_units; u++)
        for (int which = 0; which < 2; which++) {
            std::vector<float> want = rows[2 * u + which];
            const int *kp = (const int *)keep[u].data();
            for (int r = 0; r < n_keep[u]; r++)
                memcpy(&want[(size_t)r * words], &rows[2 * u + which][(size_t)kp[r] * words],
                       (size_t)words * sizeof(float));
            ok = ok && memcmp(want.data(), out[0][2 * u + which].data(),
                              unit_floats * sizeof(float)) == 0;
        }
    char what[64];
    snprintf(what, sizeof what, "batch gather (%d words)", words);
    st_verdict(st, what, ok, "");
}

} /* namespace */

void selftest_batch(struct selftest *st)
{
    batch_case f32 = {{300, 1000, 257, 64, 513, 2049}, KV_F32, 8, 3, 8, 48, 0, 0, 0, 0};
    run_case(st, "f32 mix", f32, BATCH_SCORE_MIX, 0);
    run_case(st, "f32 imp", f32, BATCH_SCORE_IMP, 1);
    batch_case f16 = {{129, 700, 40, 40}, KV_F16, 5, 6, 8, 33, 0, 0, 0, 0};
    run_case(st, "f16 mix", f16, BATCH_SCORE_MIX, 0);
    run_case(st, "f16 knorm", f16, BATCH_SCORE_KNORM, 1);
    batch_case bf16 = {{90, 1500}, KV_BF16, 8, 0, 4, 20, 0, 0, 0, 0};
    run_case(st, "bf16 age", bf16, BATCH_SCORE_AGE, 1);
    run_case(st, "bf16 mix", bf16, BATCH_SCORE_MIX, 0);
    batch_case layer_f32 = {{300, 300, 1000, 1000, 65, 65}, KV_F32, 1, 5, 1, 48, 0, 0, 0, 0};
    layer_case(st, "f32", layer_f32, 1);
    batch_case layer_bf16 = {{129, 129, 700, 700}, KV_BF16, 1, 2, 1, 33, 0, 0, 0, 0};
    layer_case(st, "bf16", layer_bf16, 0);
    /* left-padded units: masked in every score, ranked by the pad rule */
    batch_case pads_f32 = {{300, 1000, 257, 64}, KV_F32, 8, 3, 8, 48, 37, 1, 1, 0};
    run_case(st, "f32 mix pads", pads_f32, BATCH_SCORE_MIX, 0);
    batch_case pads_f16 = {{129, 700, 90}, KV_F16, 5, 6, 8, 33, 20, 2, 0, 0};
    run_case(st, "f16 imp pads kept", pads_f16, BATCH_SCORE_IMP, 1);
    batch_case pads_layer = {{300, 300, 1000, 1000, 65, 65}, KV_F32, 1, 5, 1, 48, 30, 1, 0, 0};
    layer_case(st, "f32 pads", pads_layer, 1);
    /* near-duplicate keys: the redundancy's matches, near and far */
    /* 5000 slots: past the top-k's sort (4,096), ranked by counting */
    batch_case dups_f32 = {{300, 1000, 2049, 64, 129, 5000}, KV_F32, 8, 3, 8, 48, 0, 0, 1, 0};
    run_case(st, "f32 mix dups", dups_f32, BATCH_SCORE_MIX, 0);
    batch_case dups_bf16 = {{90, 1500}, KV_BF16, 8, 0, 4, 20, 0, 0, 1, 0};
    run_case(st, "bf16 mix dups", dups_bf16, BATCH_SCORE_MIX, 1);
    /* bf16 scores: many ties, ranked by the one tie rule on both sides */
    batch_case round_f32 = {{300, 1000, 257}, KV_F32, 8, 3, 8, 48, 0, 0, 1, 1};
    run_case(st, "f32 mix bf16 scores", round_f32, BATCH_SCORE_MIX, 0);
    run_case(st, "f32 imp bf16 scores", round_f32, BATCH_SCORE_IMP, 1);
    gather_case(st, HEAD_DIM);
    gather_case(st, HEAD_DIM / 2);
}

/* The same kinds of case at a few hundred slots: every path above (the
 * tiles, pads, per-layer runs, near duplicates, bf16 scores) in seconds on
 * the CPU emulator, where the group above takes minutes (make test). */
void selftest_batch_small(struct selftest *st)
{
    batch_case f32 = {{300, 257, 64, 129}, KV_F32, 8, 3, 8, 48, 0, 0, 0, 0};
    run_case(st, "small f32 mix", f32, BATCH_SCORE_MIX, 0);
    batch_case f16 = {{129, 40}, KV_F16, 5, 6, 8, 33, 0, 0, 0, 0};
    run_case(st, "small f16 knorm", f16, BATCH_SCORE_KNORM, 1);
    batch_case bf16 = {{90, 200}, KV_BF16, 8, 0, 4, 20, 0, 0, 1, 0};
    run_case(st, "small bf16 mix dups", bf16, BATCH_SCORE_MIX, 1);
    batch_case layer = {{129, 129, 65, 65}, KV_F32, 1, 5, 1, 48, 30, 1, 0, 0};
    layer_case(st, "small f32 pads", layer, 1);
    batch_case pads = {{300, 257, 64}, KV_F32, 8, 3, 8, 48, 37, 1, 1, 0};
    run_case(st, "small f32 mix pads dups", pads, BATCH_SCORE_MIX, 0);
    batch_case round = {{257, 129}, KV_F32, 8, 3, 8, 48, 0, 0, 1, 1};
    run_case(st, "small f32 imp bf16 scores", round, BATCH_SCORE_IMP, 1);
    gather_case(st, HEAD_DIM / 2);
}
