/* cuda_selftest_graph.cu - step graphs (cuda_graph.cu) at the op level: a
 * decode step's KV appends and attention, recorded once on a backend made
 * with EVICTBENCH_CUDA_GRAPH=1 and replayed as the caches grow, against the
 * CPU backend running the same ops each step.  Three sequences in scattered
 * slots with their own capacities and ragged lengths (one with a query
 * ring), bf16 caches, the 7B shape; fresh q/k/v are uploaded into the same
 * buffers before each step, as model/forward.c's activations are.  The step
 * modes must run eager, capture, then replay, and again after a rebind (a
 * compaction: a new shape); outputs 1e-4 of (1 + |cpu|) (the replayed grid
 * splits each query's keys for the caches' capacity: summation order only);
 * caches and rings bit for bit. */
#include "kernels/cuda/cuda_selftest_util.h"

extern "C" {
#include "kernels/step_graph.h"
}

#include <math.h>
#include <string.h>

namespace {

const int N_LAYER = 2, N_HEAD = 28, N_KV = 4, HD = 128, N_SEQ = 3;

struct gseq {
    int slot, cap, window, q_next;
    std::vector<int> len; /* [N_LAYER][N_KV] */
    std::vector<st_pair> k, v, ring;
};

st_pair typed_cache(struct selftest *st, int cap)
{
    size_t n = (size_t)N_KV * cap * HD;
    std::vector<float> h(n);
    for (auto &x : h) x = st_rnd(st);
    st_pair src = st_make(st, h);
    st_pair dst = st_make(st, std::vector<float>((n * 2 + 3) / 4, 0.0f));
    std::vector<int> rows(n / HD);
    for (size_t r = 0; r < rows.size(); r++) rows[r] = (int)r;
    st->cpu->kv_store(st->cpu, dst.c, KV_BF16, src.c, rows.data(), (int)rows.size(), HD);
    st->gpu->kv_store(st->gpu, dst.g, KV_BF16, src.g, rows.data(), (int)rows.size(), HD);
    st_drop(st, src);
    return dst;
}

int bind_both(struct selftest *st, struct backend *gb, struct kv_table *tc, struct kv_table *tg,
              gseq &q)
{
    std::vector<void *> kc, vc, kg, vg;
    std::vector<float *> rc, rg;
    for (int l = 0; l < N_LAYER; l++) {
        kc.push_back(q.k[l].c), vc.push_back(q.v[l].c), kg.push_back(q.k[l].g), vg.push_back(q.v[l].g);
        if (q.window) rc.push_back(q.ring[l].c), rg.push_back(q.ring[l].g);
    }
    struct kv_seq_desc d = {};
    d.kv_type = KV_BF16, d.cap = q.cap, d.len = q.len.data(), d.q_window = q.window;
    d.k = kc.data(), d.v = vc.data(), d.q_ring = q.window ? rc.data() : NULL;
    int bad = st->cpu->kv_table_bind(st->cpu, tc, q.slot, &d) != 0;
    d.k = kg.data(), d.v = vg.data(), d.q_ring = q.window ? rg.data() : NULL;
    return bad + (gb->kv_table_bind(gb, tg, q.slot, &d) != 0);
}

void graph_case(struct selftest *st, int device)
{
    setenv("EVICTBENCH_CUDA_GRAPH", "1", 1);
    struct eb_err e = {};
    struct backend *gb = backend_cuda_create(device, &e);
    unsetenv("EVICTBENCH_CUDA_GRAPH");
    if (!gb || !gb->graph_begin) {
        st_verdict(st, "step graphs: decode replays", false, gb ? "no graph ops" : e.msg);
        if (gb) gb->destroy(gb);
        return;
    }
    struct kv_table *tc = st->cpu->kv_table_create(st->cpu, 8, N_LAYER, N_KV, N_HEAD, HD);
    struct kv_table *tg = gb->kv_table_create(gb, 8, N_LAYER, N_KV, N_HEAD, HD);
    const int caps[N_SEQ] = {600, 4096, 1500}, slots[N_SEQ] = {2, 0, 5};
    std::vector<gseq> seqs(N_SEQ);
    int bad = !tc || !tg;
    for (int j = 0; j < N_SEQ && !bad; j++) {
        gseq &q = seqs[j];
        q.slot = slots[j], q.cap = caps[j], q.window = j == 1 ? 8 : 0, q.q_next = 3;
        for (int x = 0; x < N_LAYER * N_KV; x++)
            q.len.push_back((int)((st_rnd(st) + 1) * 0.5f * (q.cap - 64)));
        for (int l = 0; l < N_LAYER; l++) {
            q.k.push_back(typed_cache(st, q.cap));
            q.v.push_back(typed_cache(st, q.cap));
            if (q.window)
                q.ring.push_back(st_make(st, std::vector<float>((size_t)8 * N_HEAD * HD, 0.0f)));
        }
        bad += bind_both(st, gb, tc, tg, q);
    }
    /* the step's buffers: the same addresses every step, as a graph needs */
    const size_t qd = (size_t)N_HEAD * HD, kd = (size_t)N_KV * HD;
    std::vector<st_pair> bq, bk, bv, bo;
    for (int l = 0; l < N_LAYER; l++) {
        bq.push_back(st_make(st, std::vector<float>(N_SEQ * qd, 0.0f)));
        bk.push_back(st_make(st, std::vector<float>(N_SEQ * kd, 0.0f)));
        bv.push_back(st_make(st, std::vector<float>(N_SEQ * kd, 0.0f)));
        bo.push_back(st_make(st, std::vector<float>(N_SEQ * qd, 0.0f)));
    }
    /* 0-5: eager, capture, four replays; a rebind; 6-8: eager, capture, replay */
    const int want[9] = {STEP_EAGER, STEP_CAPTURE, STEP_REPLAY, STEP_REPLAY, STEP_REPLAY,
                         STEP_REPLAY, STEP_EAGER, STEP_CAPTURE, STEP_REPLAY};
    double worst = 0;
    int modes_bad = 0;
    for (int s = 0; s < 9 && !bad; s++) {
        if (s == 6) { /* a compaction of sequence 1: shorter caches, rebound */
            for (auto &x : seqs[1].len) x /= 2;
            bad += bind_both(st, gb, tc, tg, seqs[1]);
        }
        std::vector<struct kv_step_seq> step;
        for (int j = 0; j < N_SEQ; j++)
            step.push_back({seqs[j].slot, j, 1, 0, seqs[j].q_next});
        for (int l = 0; l < N_LAYER; l++) {
            std::vector<float> hq(N_SEQ * qd), hk(N_SEQ * kd), hv(N_SEQ * kd);
            for (auto &x : hq) x = st_rnd(st) * 2;
            for (auto &x : hk) x = st_rnd(st) * 2;
            for (auto &x : hv) x = st_rnd(st);
            const std::vector<float> *src[3] = {&hq, &hk, &hv};
            st_pair dst[3] = {bq[l], bk[l], bv[l]};
            for (int i = 0; i < 3; i++) {
                st->cpu->upload(st->cpu, dst[i].c, src[i]->data(), src[i]->size());
                gb->upload(gb, dst[i].g, src[i]->data(), src[i]->size());
            }
        }
        bad += st->cpu->kv_table_step(st->cpu, tc, N_SEQ, step.data()) != 0;
        bad += gb->kv_table_step(gb, tg, N_SEQ, step.data()) != 0;
        int mode = gb->graph_begin(gb, tg, s < 6 ? 1 : 2);
        modes_bad += mode != want[s];
        for (int l = 0; l < N_LAYER; l++) {
            bad += st->cpu->kv_append(st->cpu, tc, l, bk[l].c, bv[l].c, bq[l].c) != 0;
            bad += gb->kv_append(gb, tg, l, bk[l].g, bv[l].g, bq[l].g) != 0;
            struct attn_layer_args a = {l, bo[l].c, bq[l].c, 1.0f / sqrtf((float)HD), NULL};
            bad += st->cpu->attention_layer(st->cpu, tc, &a) != 0;
            a.out = bo[l].g, a.q = bq[l].g;
            bad += gb->attention_layer(gb, tg, &a) != 0;
        }
        bad += gb->graph_end(gb, 1) != 0;
        for (int l = 0; l < N_LAYER; l++) {
            std::vector<float> c(bo[l].n), g(bo[l].n);
            st->cpu->download(st->cpu, c.data(), bo[l].c, c.size());
            gb->download(gb, g.data(), bo[l].g, g.size());
            for (size_t i = 0; i < c.size(); i++) {
                double d = fabs((double)g[i] - c[i]) / (1.0 + fabs(c[i]));
                if (!(d <= worst)) worst = d;
            }
        }
        for (auto &q : seqs) {
            for (auto &x : q.len) x += 1;
            if (q.window) q.q_next = (q.q_next + 1) % q.window;
        }
    }
    int words = 0;
    for (const auto &q : seqs)
        for (int l = 0; l < N_LAYER && !bad; l++) {
            std::vector<st_pair> all = {q.k[l], q.v[l]};
            if (q.window) all.push_back(q.ring[l]);
            for (st_pair p : all) {
                std::vector<float> c(p.n), g(p.n);
                st->cpu->download(st->cpu, c.data(), p.c, p.n);
                gb->download(gb, g.data(), p.g, p.n);
                words += memcmp(c.data(), g.data(), p.n * sizeof(float)) != 0;
            }
        }
    unsigned long caps_n = 0, reps = 0, drop = 0;
    gb->graph_counts(gb, &caps_n, &reps, &drop);
    const char *err = backend_cuda_error(gb);
    char detail[200];
    snprintf(detail, sizeof detail,
             "out %.3g, %d bad returns, %d modes off, %d caches/rings differ, %lu captures, "
             "%lu replays %s", worst, bad, modes_bad, words, caps_n, reps, err ? err : "");
    st_verdict(st, "step graphs: decode replays", !bad && !modes_bad && !words && !err &&
                                                      worst <= 1e-4 && caps_n == 2 && reps == 5,
               detail);
    if (tc) st->cpu->kv_table_free(st->cpu, tc);
    if (tg) gb->kv_table_free(gb, tg);
    for (auto &q : seqs) {
        for (auto p : q.k) st_drop(st, p);
        for (auto p : q.v) st_drop(st, p);
        for (auto p : q.ring) st_drop(st, p);
    }
    for (int l = 0; l < N_LAYER; l++) st_drop(st, bq[l]), st_drop(st, bk[l]), st_drop(st, bv[l]), st_drop(st, bo[l]);
    gb->destroy(gb);
}

} // namespace

void selftest_graph(struct selftest *st, int device)
{
    graph_case(st, device);
}
