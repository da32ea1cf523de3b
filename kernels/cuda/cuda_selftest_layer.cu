/* cuda_selftest_layer.cu - the layer-granular ops (kv_table_*, kv_append,
 * attention_layer) on the CUDA backend against the CPU backend's, the same
 * calls on both: a batch of sequences in non-adjacent slots with their own
 * capacities, per-(layer, kv head) lengths, pads (bound and appended) and
 * query rings, through a mixed step (decode rows and prefill chunks, pads),
 * a rebind (a compaction shortens the lengths), a decode step, and a step
 * with probabilities.  Outputs 1e-4 of (1 + |cpu|) (summation order only:
 * both attend the same typed caches); probabilities 1e-5; caches and rings
 * bit for bit (rounding to nearest even on both). */
#include "kernels/cuda/cuda_selftest_util.h"

#include <math.h>
#include <string.h>

namespace {

struct shape {
    int n_layer, n_head, n_kv, hd;
    enum kv_type type;
};

struct seq_state {
    int slot, cap, window;          /* window 0: no query ring */
    std::vector<int> len;           /* [n_layer][n_kv] */
    std::vector<unsigned char> pad; /* [n_layer][n_kv][cap] */
    std::vector<st_pair> k, v, ring;/* per layer */
    int q_next;
};

struct checks {
    double out_worst = 0, probs_worst = 0;
    int rc_bad = 0;
};

size_t cache_floats(const shape &s, int cap)
{
    return ((size_t)s.n_kv * cap * s.hd * kv_type_bytes(s.type) + 3) / 4;
}

/* Caches filled with the same rounded values on both sides (kv_store). */
st_pair filled_cache(struct selftest *st, const shape &s, int cap)
{
    size_t n = (size_t)s.n_kv * cap * s.hd;
    std::vector<float> h(n);
    for (auto &x : h) x = st_rnd(st);
    st_pair src = st_make(st, h), dst = st_make(st, std::vector<float>(cache_floats(s, cap), 0.0f));
    std::vector<int> rows(n / s.hd);
    for (size_t r = 0; r < rows.size(); r++) rows[r] = (int)r;
    st->cpu->kv_store(st->cpu, dst.c, s.type, src.c, rows.data(), (int)rows.size(), s.hd);
    st->gpu->kv_store(st->gpu, dst.g, s.type, src.g, rows.data(), (int)rows.size(), s.hd);
    st_drop(st, src);
    return dst;
}

void bind(struct selftest *st, const shape &s, struct kv_table *tc, struct kv_table *tg,
          seq_state &q, checks &ck, bool with_pad)
{
    std::vector<void *> kc, vc, kg, vg;
    std::vector<float *> rc, rg;
    for (int l = 0; l < s.n_layer; l++) {
        kc.push_back(q.k[l].c), vc.push_back(q.v[l].c), kg.push_back(q.k[l].g), vg.push_back(q.v[l].g);
        if (q.window) rc.push_back(q.ring[l].c), rg.push_back(q.ring[l].g);
    }
    struct kv_seq_desc d = {};
    d.kv_type = s.type, d.cap = q.cap, d.len = q.len.data(), d.q_window = q.window;
    d.pad = with_pad ? q.pad.data() : NULL;
    d.k = kc.data(), d.v = vc.data(), d.q_ring = q.window ? rc.data() : NULL;
    ck.rc_bad += st->cpu->kv_table_bind(st->cpu, tc, q.slot, &d) != 0;
    d.k = kg.data(), d.v = vg.data(), d.q_ring = q.window ? rg.data() : NULL;
    ck.rc_bad += st->gpu->kv_table_bind(st->gpu, tg, q.slot, &d) != 0;
}

double worst_diff(struct selftest *st, st_pair p)
{
    std::vector<float> c, g;
    st_fetch(st, p, c, g);
    double w = 0;
    for (size_t i = 0; i < c.size(); i++) {
        double d = fabs((double)g[i] - c[i]) / (1.0 + fabs(c[i]));
        if (!(d <= w)) w = d;
    }
    return w;
}

/* One forward pass's attention side: step, then per layer append + attention. */
void run_step(struct selftest *st, const shape &s, struct kv_table *tc, struct kv_table *tg,
              std::vector<seq_state> &seqs, const std::vector<int> &n_new,
              const std::vector<int> &n_pad, bool probs, checks &ck)
{
    std::vector<struct kv_step_seq> step;
    int T = 0;
    size_t probs_n = 0;
    for (size_t j = 0; j < seqs.size(); j++) {
        /* a one-row gap before each sequence: rows of no sequence are left alone */
        struct kv_step_seq x = {seqs[j].slot, T + 1, n_new[j], n_pad[j], seqs[j].q_next};
        step.push_back(x);
        T = x.row0 + x.n_new;
        probs_n += (size_t)s.n_head * n_new[j] * seqs[j].cap;
    }
    ck.rc_bad += st->cpu->kv_table_step(st->cpu, tc, (int)step.size(), step.data()) != 0;
    ck.rc_bad += st->gpu->kv_table_step(st->gpu, tg, (int)step.size(), step.data()) != 0;
    size_t qd = (size_t)s.n_head * s.hd, kd = (size_t)s.n_kv * s.hd;
    for (int l = 0; l < s.n_layer; l++) {
        std::vector<float> hq((size_t)T * qd), hk((size_t)T * kd), hv((size_t)T * kd);
        for (auto &x : hq) x = st_rnd(st) * 2;
        for (auto &x : hk) x = st_rnd(st) * 2;
        for (auto &x : hv) x = st_rnd(st);
        st_pair q = st_make(st, hq), k = st_make(st, hk), v = st_make(st, hv);
        st_pair out = st_make(st, std::vector<float>((size_t)T * qd, 7.0f));
        st_pair pr = st_make(st, std::vector<float>(probs ? probs_n : 1, 3.0f));
        ck.rc_bad += st->cpu->kv_append(st->cpu, tc, l, k.c, v.c, q.c) != 0;
        ck.rc_bad += st->gpu->kv_append(st->gpu, tg, l, k.g, v.g, q.g) != 0;
        struct attn_layer_args a = {l, out.c, q.c, 1.0f / sqrtf((float)s.hd), probs ? pr.c : NULL};
        ck.rc_bad += st->cpu->attention_layer(st->cpu, tc, &a) != 0;
        a.out = out.g, a.q = q.g, a.probs = probs ? pr.g : NULL;
        ck.rc_bad += st->gpu->attention_layer(st->gpu, tg, &a) != 0;
        ck.out_worst = fmax(ck.out_worst, worst_diff(st, out));
        if (probs) ck.probs_worst = fmax(ck.probs_worst, worst_diff(st, pr));
        st_drop(st, q), st_drop(st, k), st_drop(st, v), st_drop(st, out), st_drop(st, pr);
    }
    for (size_t j = 0; j < seqs.size(); j++) {
        for (auto &x : seqs[j].len) x += n_new[j];
        if (seqs[j].window) seqs[j].q_next = (seqs[j].q_next + n_new[j]) % seqs[j].window;
    }
}

/* Caches and rings equal bit for bit. */
int differing_words(struct selftest *st, const std::vector<seq_state> &seqs)
{
    int bad = 0;
    for (const auto &q : seqs)
        for (size_t l = 0; l < q.k.size(); l++) {
            std::vector<st_pair> all = {q.k[l], q.v[l]};
            if (q.window) all.push_back(q.ring[l]);
            for (st_pair p : all) {
                std::vector<float> c, g;
                st_fetch(st, p, c, g);
                bad += memcmp(c.data(), g.data(), c.size() * sizeof(float)) != 0;
            }
        }
    return bad;
}

void layer_case(struct selftest *st, const shape &s, const char *label)
{
    const int caps[] = {600, 4096, 64, 1500, 2100, 333};
    const int slots[] = {5, 0, 3, 7, 1, 6};
    const int n = 6;
    struct kv_table *tc = st->cpu->kv_table_create(st->cpu, 8, s.n_layer, s.n_kv, s.n_head, s.hd);
    struct kv_table *tg = st->gpu->kv_table_create(st->gpu, 8, s.n_layer, s.n_kv, s.n_head, s.hd);
    checks ck;
    std::vector<seq_state> seqs(n);
    for (int j = 0; j < n; j++) {
        seq_state &q = seqs[j];
        q.slot = slots[j], q.cap = caps[j], q.window = j % 2 ? 8 : 0, q.q_next = j % 5;
        for (int x = 0; x < s.n_layer * s.n_kv; x++) /* ragged, with room for 320 more */
            q.len.push_back((int)((st_rnd(st) + 1) * 0.5f * (q.cap - 320 > 0 ? q.cap - 320 : 0)));
        q.pad.assign((size_t)s.n_layer * s.n_kv * q.cap, 0);
        for (size_t x = 0; x < q.pad.size(); x++) q.pad[x] = j % 3 == 1 && x % 13 < 2;
        for (int l = 0; l < s.n_layer; l++) {
            q.k.push_back(filled_cache(st, s, q.cap));
            q.v.push_back(filled_cache(st, s, q.cap));
            if (q.window) q.ring.push_back(st_make(st, std::vector<float>((size_t)8 * s.n_head * s.hd, 0.0f)));
        }
        if (tc && tg) bind(st, s, tc, tg, q, ck, j % 3 == 1);
    }
    if (tc && tg) {
        run_step(st, s, tc, tg, seqs, {1, 7, 1, 3, 300, 1}, {0, 2, 0, 1, 0, 0}, false, ck);
        for (auto &x : seqs[1].len) x = x / 2; /* a compaction: shorter, pads moved */
        for (size_t x = 0; x < seqs[1].pad.size(); x++) seqs[1].pad[x] = x % 7 == 0;
        bind(st, s, tc, tg, seqs[1], ck, true);
        run_step(st, s, tc, tg, seqs, {1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0}, false, ck);
        run_step(st, s, tc, tg, seqs, {1, 2, 1, 5, 1, 1}, {0, 1, 0, 0, 0, 0}, true, ck);
    }
    int words = tc && tg ? differing_words(st, seqs) : -1;
    char what[80], detail[160];
    snprintf(what, sizeof what, "layer ops %s", label);
    snprintf(detail, sizeof detail, "out %.3g, probs %.3g, %d bad returns, %d caches/rings differ ",
             ck.out_worst, ck.probs_worst, ck.rc_bad, words);
    st_verdict(st, what, tc && tg && ck.rc_bad == 0 && words == 0 && ck.out_worst <= 1e-4 &&
                             ck.probs_worst <= 1e-5, detail);
    if (tc) st->cpu->kv_table_free(st->cpu, tc);
    if (tg) st->gpu->kv_table_free(st->gpu, tg);
    for (auto &q : seqs) {
        for (auto p : q.k) st_drop(st, p);
        for (auto p : q.v) st_drop(st, p);
        for (auto p : q.ring) st_drop(st, p);
    }
}

/* Bad calls are refused (and recorded: the op did nothing). */
void layer_refusals(struct selftest *st)
{
    struct kv_table *t = st->gpu->kv_table_create(st->gpu, 2, 1, 2, 4, 64);
    struct kv_step_seq unbound = {1, 0, 1, 0, 0};
    int rc = t ? st->gpu->kv_table_step(st->gpu, t, 1, &unbound) : 0;
    const char *err = backend_cuda_error(st->gpu);
    bool ok = t && rc == -1 && err && strstr(err, "unbound");
    printf("  %-4s %-36s %s\n", ok ? "ok" : "FAIL", "layer ops refuse an unbound slot",
           err ? err : "(nothing recorded)");
    ok ? (*st->passed)++ : (*st->failed)++;
    if (t) st->gpu->kv_table_free(st->gpu, t);
}

} // namespace

void selftest_layer(struct selftest *st)
{
    layer_case(st, {2, 28, 4, 128, KV_BF16}, "7B shape bf16");
    layer_case(st, {2, 28, 4, 128, KV_F32}, "7B shape f32");
    layer_case(st, {2, 9, 3, 64, KV_F16}, "135M shape f16");
    layer_case(st, {1, 4, 2, 32, KV_F32}, "hd 32 (general kernel)");
}

/* Last: it leaves the backend failed on purpose. */
void selftest_layer_refusals(struct selftest *st)
{
    layer_refusals(st);
}
