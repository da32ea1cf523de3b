/* test_layerops.c - the layer-granular backend ops: backend calls per decode
 * step do not grow with the batch (counting wrapper), and attention_layer over
 * a ragged, padded batch equals a plain double-precision reference, bit for
 * bit the same whatever the batch around a sequence and the thread count. */
#include "test.h"
#include "test_util.h"

#include "kernels/quant.h"

#define TINY_QWEN2 "tests/fixtures/models/tiny-qwen2"

/* Backend calls of the steady decode step of `batch` sequences generating 8
 * tokens each; -1 when the model cannot be run. */
static long decode_calls(struct backend *counted, int batch, int *n_layer)
{
    struct model *m = open_model_on(counted, TINY_QWEN2);
    if (!m) return -1;
    *n_layer = m->cfg.n_layer;
    struct gen_request req[64];
    int ids[64][5];
    for (int i = 0; i < batch; i++) {
        for (int j = 0; j < 5; j++) ids[i][j] = (7 * i + 3 * j + 1) % m->cfg.n_vocab;
        req[i] = (struct gen_request){ids[i], 5, 8, sampler_params_greedy()};
    }
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.max_live = batch;
    struct gen_result res[64];
    struct gen_stats st;
    struct eb_err e;
    long calls = -1;
    if (generate(m, req, batch, &opt, res, &st, &e) == 0) {
        calls = st.decode_calls_min;
        CHECK(st.decode_calls_max == st.decode_calls_min); /* no policy: nothing rebinds */
        gen_results_free(res, batch);
    } else {
        fprintf(stderr, "  %s\n", e.msg);
    }
    model_free(m);
    return calls;
}

/* One decode step costs the same number of backend calls at batch 1, 16
 * and 64, at most 40 per layer: KV append and attention are per layer, not
 * per sequence or head (a per-sequence forward would add calls per sequence
 * and fail the equality). */
static void test_calls_per_decode_step(void)
{
    struct backend *be = backend_count_create(backend_cpu_create(2));
    if (!be) { CHECK(0); return; }
    int n_layer = 0;
    long c1 = decode_calls(be, 1, &n_layer), c16 = decode_calls(be, 16, &n_layer),
         c64 = decode_calls(be, 64, &n_layer);
    fprintf(stderr, "  backend calls per decode step: %ld at batch 1, %ld at 16, %ld at 64 "
                    "(%d layers)\n", c1, c16, c64, n_layer);
    CHECK(c1 > 0);
    CHECK(c1 == c16);
    CHECK(c1 == c64);
    CHECK(c1 <= 40L * n_layer);
    struct backend *plain = backend_cpu_create(1);
    CHECK(backend_count_calls(plain) == 0); /* not a counting backend */
    plain->destroy(plain);
    be->destroy(be);
}

/* ---- attention_layer against a reference ---- */

enum { NL = 2, NKV = 2, NH = 6, HD = 40, CAP = 700 };

struct ref_seq {
    int len[NL][NKV];  /* before the step's append */
    int n_new, n_pad, left_pad;
    void *k[NL], *v[NL];
    float kf[NL][NKV][CAP][HD], vf[NL][NKV][CAP][HD]; /* the cache as f32 (after rounding) */
    unsigned char pad[NL][NKV][CAP];
};

static float frand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f) * 4.0f;
}

/* Element of type t rounded as the cache stores it. */
static float rounded(float x, enum kv_type t)
{
    return t == KV_F16 ? quant_f16_to_f32(quant_f32_to_f16(x)) : x;
}

/* A cache holding len slots per head (some flagged pads), written in place. */
static void fill_seq(struct backend *be, struct ref_seq *s, enum kv_type t, unsigned seed)
{
    size_t eb = kv_type_bytes(t), n = (size_t)NKV * CAP * HD;
    for (int l = 0; l < NL; l++) {
        s->k[l] = be->alloc(be, (n * eb + 3) / 4);
        s->v[l] = be->alloc(be, (n * eb + 3) / 4);
        for (int h = 0; h < NKV; h++)
            for (int j = 0; j < CAP; j++) {
                s->pad[l][h][j] = j < s->len[l][h] && j < s->left_pad;
                for (int d = 0; d < HD; d++) {
                    float kx = rounded(frand(&seed), t), vx = rounded(frand(&seed), t);
                    s->kf[l][h][j][d] = kx;
                    s->vf[l][h][j][d] = vx;
                    size_t i = ((size_t)h * CAP + j) * HD + d;
                    if (t == KV_F16) {
                        ((uint16_t *)s->k[l])[i] = quant_f32_to_f16(kx);
                        ((uint16_t *)s->v[l])[i] = quant_f32_to_f16(vx);
                    } else {
                        ((float *)s->k[l])[i] = kx;
                        ((float *)s->v[l])[i] = vx;
                    }
                }
            }
    }
}

/* Reference output of query i (row r) for head h of layer l, after the append. */
static void ref_attend(const struct ref_seq *s, int l, int h, int i, const float *q, double *o)
{
    int g = h / (NH / NKV), n_vis = s->len[l][g] + i + 1;
    double m = -INFINITY, sum = 0.0;
    for (int d = 0; d < HD; d++) o[d] = 0.0;
    for (int j = 0; j < n_vis; j++) {
        if (s->pad[l][g][j]) continue;
        double x = 0.0;
        for (int d = 0; d < HD; d++) x += (double)q[d] * s->kf[l][g][j][d];
        x /= sqrt((double)HD);
        if (x > m) m = x;
    }
    for (int j = 0; j < n_vis; j++) {
        if (s->pad[l][g][j]) continue;
        double x = 0.0;
        for (int d = 0; d < HD; d++) x += (double)q[d] * s->kf[l][g][j][d];
        double w = exp(x / sqrt((double)HD) - m);
        sum += w;
        for (int d = 0; d < HD; d++) o[d] += w * s->vf[l][g][j][d];
    }
    for (int d = 0; d < HD; d++) o[d] = sum > 0 ? o[d] / sum : 0.0;
}

/* Run one step of the given sequences (table slots in the order given) on a
 * backend of n_threads; out gets [T][NH*HD]. */
static int run_step(int n_threads, struct ref_seq **seqs, int n, enum kv_type t,
                    const float *k, const float *v, const float *q, float *out, float *probs)
{
    struct backend *be = backend_cpu_create(n_threads);
    struct kv_table *tab = be->kv_table_create(be, 8, NL, NKV, NH, HD);
    struct kv_step_seq step[8];
    int rc = 0, row = 0;
    for (int i = 0; i < n; i++) {
        struct ref_seq *s = seqs[i];
        unsigned char pads[NL][NKV][CAP];
        memcpy(pads, s->pad, sizeof pads);
        struct kv_seq_desc d = {.k = s->k, .v = s->v, .kv_type = t, .cap = CAP,
                                .len = &s->len[0][0], .pad = s->left_pad ? &pads[0][0][0] : NULL};
        rc |= be->kv_table_bind(be, tab, i, &d);
        step[i] = (struct kv_step_seq){i, row, s->n_new, s->n_pad, 0};
        row += s->n_new;
    }
    rc |= be->kv_table_step(be, tab, n, step);
    for (int l = 0; l < NL && !rc; l++) {
        rc |= be->kv_append(be, tab, l, k, v, NULL);
        struct attn_layer_args a = {l, out + (size_t)l * row * NH * HD, q, 1.0f / sqrtf(HD),
                                    l == NL - 1 ? probs : NULL};
        rc |= be->attention_layer(be, tab, &a);
    }
    be->kv_table_free(be, tab);
    be->destroy(be);
    return rc;
}

static void check_layer_attention(enum kv_type t)
{
    static struct ref_seq seq[3];
    struct backend *be = backend_cpu_create(1);
    /* ragged: a long cache (several key blocks, split at batch 1), a short one
     * with different lengths per kv head and 3 new tokens, a left-padded one */
    int lens[3][NKV] = {{650, 600}, {20, 9}, {30, 30}};
    int n_new[3] = {1, 3, 2}, left_pad[3] = {0, 0, 5};
    for (int i = 0; i < 3; i++) {
        memset(&seq[i], 0, sizeof seq[i]);
        for (int l = 0; l < NL; l++)
            for (int h = 0; h < NKV; h++) seq[i].len[l][h] = lens[i][h] - l;
        seq[i].n_new = n_new[i];
        seq[i].left_pad = left_pad[i];
        fill_seq(be, &seq[i], t, 11u + i);
    }
    enum { T = 6 };
    static float k[T * NKV * HD], v[T * NKV * HD], q[T * NH * HD];
    static float out[NL * T * NH * HD], out1[NL * T * NH * HD], out2[NL * T * NH * HD];
    static float probs[NH * 6 * CAP];
    unsigned seed = 99;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) k[i] = frand(&seed);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) v[i] = frand(&seed);
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) q[i] = frand(&seed) * 3.0f;
    struct ref_seq *all[3] = {&seq[0], &seq[1], &seq[2]};
    CHECK(run_step(2, all, 3, t, k, v, q, out, probs) == 0);
    /* the reference sees the appended rows as the cache stores them */
    int row = 0;
    double worst = 0.0, o[HD];
    for (int i = 0; i < 3; i++) {
        struct ref_seq *s = &seq[i];
        for (int l = 0; l < NL; l++)
            for (int h = 0; h < NKV; h++)
                for (int j = 0; j < s->n_new; j++)
                    for (int d = 0; d < HD; d++) {
                        int src = ((row + j) * NKV + h) * HD + d, dst = s->len[l][h] + j;
                        s->kf[l][h][dst][d] = rounded(k[src], t);
                        s->vf[l][h][dst][d] = rounded(v[src], t);
                    }
        for (int l = 0; l < NL; l++)
            for (int j = 0; j < s->n_new; j++)
                for (int h = 0; h < NH; h++) {
                    ref_attend(s, l, h, j, q + ((size_t)(row + j) * NH + h) * HD, o);
                    const float *got = out + ((size_t)l * T + row + j) * NH * HD + (size_t)h * HD;
                    for (int d = 0; d < HD; d++)
                        if (fabs(got[d] - o[d]) > worst) worst = fabs(got[d] - o[d]);
                }
        row += s->n_new;
    }
    fprintf(stderr, "  %s: max |attention_layer - reference| %.2e\n", kv_type_name(t), worst);
    CHECK(worst < 2e-5);
    /* the last layer's probabilities of the padded sequence: pads 0, rows sum to 1 */
    const float *p2 = probs + (size_t)NH * (1 * CAP + 3 * CAP);
    double sum = 0.0;
    for (int j = 0; j < CAP; j++) sum += p2[j];
    CHECK_NEAR(sum, 1.0, 1e-5);
    for (int j = 0; j < left_pad[2]; j++) CHECK(p2[j] == 0.0f);
    /* the long sequence alone (split over threads) and on one thread: the same bits */
    float k0[NKV * HD], v0[NKV * HD], q0[NH * HD];
    memcpy(k0, k, sizeof k0);
    memcpy(v0, v, sizeof v0);
    memcpy(q0, q, sizeof q0);
    for (int l = 0; l < NL; l++)
        for (int h = 0; h < NKV; h++) seq[0].len[l][h] = lens[0][h] - l;
    struct ref_seq *one[1] = {&seq[0]};
    CHECK(run_step(2, one, 1, t, k0, v0, q0, out1, NULL) == 0);
    CHECK(run_step(1, one, 1, t, k0, v0, q0, out2, NULL) == 0);
    int same = 1;
    for (int l = 0; l < NL; l++)
        same &= !memcmp(out1 + (size_t)l * NH * HD, out + (size_t)l * T * NH * HD,
                        NH * HD * sizeof(float)) &&
                !memcmp(out2 + (size_t)l * NH * HD, out + (size_t)l * T * NH * HD,
                        NH * HD * sizeof(float));
    CHECK_MSG(same, "batch of 3 on 2 threads vs batch of 1 on 2 and on 1 thread (%s)",
              kv_type_name(t));
    for (int i = 0; i < 3; i++)
        for (int l = 0; l < NL; l++) {
            be->free(be, seq[i].k[l]);
            be->free(be, seq[i].v[l]);
        }
    be->destroy(be);
}

/* The counting wrapper offers every optional op its inner backend has, so a
 * counted run (generate --stats, gpu_check) takes the path an uncounted one
 * takes: the fused layer blocks, the joined weights, device ids, the
 * thread and clock instrumentation. */
static void test_count_forwards_optional_ops(void)
{
    struct backend *cpu = backend_cpu_create(1);
    struct backend *be = backend_count_create(backend_cpu_create(1));
    CHECK(cpu && be);
    if (!cpu || !be) return;
    CHECK(!cpu->layer_in == !be->layer_in && !cpu->layer_out == !be->layer_out);
    CHECK(!cpu->thread_syncs == !be->thread_syncs && !cpu->weight_join == !be->weight_join);
    CHECK(!cpu->embed_weight_dev == !be->embed_weight_dev && !cpu->sample == !be->sample);
    CHECK(!cpu->time_mark == !be->time_mark && cpu->prefers_joined == be->prefers_joined);
    CHECK(!cpu->kv_gather_batch == !be->kv_gather_batch && !cpu->batch_topk == !be->batch_topk);
    CHECK(be->layer_in && be->layer_out && be->thread_syncs); /* the CPU has them */
    cpu->destroy(cpu);
    be->destroy(be);
}

static void test_layer_attention(void)
{
    check_layer_attention(KV_F32);
    check_layer_attention(KV_F16);
}

/* Bad use is refused, not run: an unbound slot, a step that would overflow a
 * cache, a layer out of range. */
static void test_table_refuses(void)
{
    struct backend *be = backend_cpu_create(1);
    struct kv_table *t = be->kv_table_create(be, 2, 1, 1, 2, 8);
    CHECK(t != NULL);
    CHECK(be->kv_table_create(be, 2, 1, 2, 3, 8) == NULL); /* heads not a multiple */
    struct kv_step_seq st = {0, 0, 1, 0, 0};
    CHECK(be->kv_table_step(be, t, 1, &st) == -1); /* slot 0 unbound */
    float *k = be->alloc(be, 4 * 8), *v = be->alloc(be, 4 * 8);
    void *kb[1] = {k}, *vb[1] = {v};
    int len[1] = {4};
    struct kv_seq_desc d = {.k = kb, .v = vb, .kv_type = KV_F32, .cap = 4, .len = len};
    CHECK(be->kv_table_bind(be, t, 0, &d) == 0);
    CHECK(be->kv_table_step(be, t, 1, &st) == -1); /* full */
    len[0] = 3;
    CHECK(be->kv_table_bind(be, t, 0, &d) == 0);
    CHECK(be->kv_table_step(be, t, 1, &st) == 0);
    float x[8] = {0}, q[16] = {0}, out[16];
    CHECK(be->kv_append(be, t, 1, x, x, NULL) == -1);
    CHECK(be->kv_append(be, t, 0, x, x, q) == 0);
    struct attn_layer_args a = {0, out, q, 1.0f, NULL};
    CHECK(be->attention_layer(be, t, &a) == 0);
    a.layer = 1;
    CHECK(be->attention_layer(be, t, &a) == -1);
    be->free(be, k);
    be->free(be, v);
    be->kv_table_free(be, t);
    be->destroy(be);
}

int main(void)
{
    RUN(test_calls_per_decode_step);
    RUN(test_count_forwards_optional_ops);
    RUN(test_layer_attention);
    RUN(test_table_refuses);
    return test_summary("layerops");
}
