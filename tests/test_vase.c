/* test_vase.c - VaSE-AttnV, VaSE-DKV and CurDKV (policies/vase.c) and the
 * eviction RNG (policies/evict_rng.c):
 *   - Philox4x32-10 known answers, and the eviction streams bit for bit
 *     against tools/golden/vase_ref.py;
 *   - Gumbel-top-k draw order and fallback against the reference, and the
 *     inclusion frequencies of many draws against the exact
 *     without-replacement probabilities;
 *   - two evictions of a random cache: kept positions equal to the numpy
 *     emulation of the original code (its slot order included);
 *   - the trigger (every W steps once over B, never at prefill);
 *   - budget >= prompt + max_new gives FullKV's greedy output on the tiny
 *     models (and SmolLM2 when present); a tight budget runs and keeps the
 *     cache within B + W. */
#include "test.h"
#include "test_util.h"

#include "policies/evict_rng.h"
#include "policies/vase.h"

#define CASES FIXTURE("vase/vase_cases.json")
#define SMOL_PATH "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static struct backend *be;

static cJSON *cases;

/* ---- RNG ---- */

static void test_philox_known_answers(void)
{
    static const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                                       {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                       {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
    static const uint32_t key[3][2] = {{0, 0}, {0xffffffffu, 0xffffffffu},
                                       {0xa4093822u, 0x299f31d0u}};
    static const uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                                        {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                                        {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
    for (int t = 0; t < 3; t++) {
        uint32_t out[4];
        philox4x32_10(ctr[t], key[t], out);
        for (int i = 0; i < 4; i++) CHECK(out[i] == want[t][i]);
    }
}

static void test_streams_match_reference(void)
{
    if (!cases) SKIP("no %s", CASES);
    const cJSON *s;
    int n = 0;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(cases, "philox")) {
        struct evict_rng r;
        evict_rng_init(&r, (uint64_t)cJSON_GetObjectItem(s, "seed")->valuedouble, json_int(s, "seq"),
                       json_int(s, "layer"), json_int(s, "eviction"), json_int(s, "stream"));
        const cJSON *u;
        cJSON_ArrayForEach(u, cJSON_GetObjectItem(s, "uniform")) {
            double got = evict_rng_uniform(&r);
            CHECK_MSG(got == u->valuedouble, "%.17g vs %.17g", got, u->valuedouble);
            n++;
        }
    }
    CHECK(n == 18);
    /* Streams differ by sequence, layer, eviction and head; same key, same draws. */
    struct evict_rng a, b, c;
    evict_rng_init(&a, 5, 1, 2, 3, 4);
    evict_rng_init(&b, 5, 1, 2, 3, 4);
    evict_rng_init(&c, 5, 2, 2, 3, 4);
    uint32_t xa = evict_rng_u32(&a), xb = evict_rng_u32(&b), xc = evict_rng_u32(&c);
    CHECK(xa == xb && xa != xc);
}

static double *jdoubles(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = cJSON_GetArrayItem(arr, i)->valuedouble;
    return v;
}

static void test_sample_matches_reference(void)
{
    if (!cases) SKIP("no %s", CASES);
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(cases, "sample")) {
        int n, k = json_int(c, "k"), nn;
        double *w = jdoubles(cJSON_GetObjectItem(c, "w"), &n);
        double *g = jdoubles(cJSON_GetObjectItem(c, "g"), &nn);
        double *fb = jdoubles(cJSON_GetObjectItem(c, "fallback"), &nn);
        double *tk = jdoubles(cJSON_GetObjectItem(c, "taken"), &nn);
        double *want = jdoubles(cJSON_GetObjectItem(c, "want"), &nn);
        unsigned char taken[64];
        int out[64];
        struct eb_err e;
        for (int j = 0; j < n; j++) taken[j] = tk[j] != 0;
        int drawn = evict_sample_topk(w, g, taken, fb, n, k, out, &e);
        CHECK(drawn >= 0 && drawn <= k && nn == k);
        for (int t = 0; t < k; t++) CHECK_MSG(out[t] == (int)want[t], "case %d item %d", n_cases, t);
        free(w); free(g); free(fb); free(tk); free(want);
        n_cases++;
    }
    CHECK(n_cases == 4);
    /* Asking for more than is available is an error, not a crash. */
    double w[3] = {1, 1, 1}, g[3] = {0, 0, 0};
    unsigned char taken[3] = {1, 0, 0};
    int out[3];
    struct eb_err e;
    CHECK(evict_sample_topk(w, g, taken, NULL, 3, 3, out, &e) == -1);
}

/* Exact inclusion probabilities of sequential sampling without replacement
 * (k draws from w[0..n), n <= 8) by enumerating the draw sequences. */
static void inclusion(const double *w, int n, int k, unsigned mask, double p, double *incl)
{
    if (k == 0) {
        for (int j = 0; j < n; j++)
            if (mask & 1u << j) incl[j] += p;
        return;
    }
    double rest = 0;
    for (int j = 0; j < n; j++)
        if (!(mask & 1u << j)) rest += w[j];
    for (int j = 0; j < n; j++)
        if (!(mask & 1u << j) && w[j] > 0) inclusion(w, n, k - 1, mask | 1u << j, p * w[j] / rest, incl);
}

static void test_sample_frequencies(void)
{
    /* 6 tokens, 3 draws; N draws from the eviction streams.  Tolerance: 5
     * binomial standard deviations (sqrt(p(1-p)/N) <= 0.0035 for N = 20000). */
    const double w[6] = {0.40, 0.25, 0.15, 0.10, 0.07, 0.03};
    const int N = 20000, n = 6, k = 3;
    double exact[6] = {0}, freq[6] = {0}, g[6];
    inclusion(w, n, k, 0, 1.0, exact);
    double first[6] = {0};
    for (int t = 0; t < N; t++) {
        struct evict_rng r;
        int out[3];
        struct eb_err e;
        evict_rng_init(&r, 99, t, 0, 0, 0);
        for (int j = 0; j < n; j++) g[j] = evict_gumbel(evict_rng_uniform(&r));
        CHECK(evict_sample_topk(w, g, NULL, NULL, n, k, out, &e) == k);
        for (int i = 0; i < k; i++) freq[out[i]] += 1.0 / N;
        first[out[0]] += 1.0 / N;
    }
    double sum = 0;
    for (int j = 0; j < n; j++) {
        double sd = sqrt(exact[j] * (1 - exact[j]) / N);
        CHECK_MSG(fabs(freq[j] - exact[j]) <= 5 * sd + 1e-9, "token %d: %.4f vs exact %.4f", j,
                  freq[j], exact[j]);
        /* The first draw is categorical in w. */
        CHECK_NEAR(first[j], w[j], 5 * sqrt(w[j] * (1 - w[j]) / N));
        sum += exact[j];
    }
    CHECK_NEAR(sum, k, 1e-9);
}

/* ---- a small cache driven by the fixture ---- */

struct fake {
    int L, H, HKV, D, cap, W;
    float **k, **v, **q;
    int *len, *pos;
    float *hk, *hv;     /* host copies [L][HKV][cap][D] */
};

static void fake_free(struct fake *f)
{
    for (int l = 0; l < f->L; l++) {
        be->free(be, f->k[l]);
        be->free(be, f->v[l]);
        be->free(be, f->q[l]);
    }
    free(f->k); free(f->v); free(f->q); free(f->len); free(f->pos); free(f->hk); free(f->hv);
}

static void fake_init(struct fake *f, const cJSON *cfg, int cap)
{
    f->L = json_int(cfg, "n_layer");
    f->H = json_int(cfg, "n_head");
    f->HKV = json_int(cfg, "n_kv");
    f->D = json_int(cfg, "head_dim");
    f->W = json_int(cfg, "window");
    f->cap = cap;
    f->k = calloc((size_t)f->L, sizeof *f->k);
    f->v = calloc((size_t)f->L, sizeof *f->v);
    f->q = calloc((size_t)f->L, sizeof *f->q);
    for (int l = 0; l < f->L; l++) {
        f->k[l] = be->alloc(be, (size_t)f->HKV * cap * f->D);
        f->v[l] = be->alloc(be, (size_t)f->HKV * cap * f->D);
        f->q[l] = be->alloc(be, (size_t)f->W * f->H * f->D);
    }
    f->len = calloc((size_t)f->L * f->HKV, sizeof *f->len);
    f->pos = calloc((size_t)f->L * f->HKV * cap, sizeof *f->pos);
    f->hk = calloc((size_t)f->L * f->HKV * cap * f->D, sizeof *f->hk);
    f->hv = calloc((size_t)f->L * f->HKV * cap * f->D, sizeof *f->hv);
}

static void fake_upload(struct fake *f)
{
    size_t plane = (size_t)f->HKV * f->cap * f->D;
    for (int l = 0; l < f->L; l++) {
        be->upload(be, f->k[l], f->hk + l * plane, plane);
        be->upload(be, f->v[l], f->hv + l * plane, plane);
    }
}

/* Append step s of the fixture (n tokens at positions next..) and set the queries. */
static void fake_append(struct fake *f, const cJSON *step, int next)
{
    int n = json_int(step, "n"), cnt;
    double *k = jdoubles(cJSON_GetObjectItem(step, "k"), &cnt);
    double *v = jdoubles(cJSON_GetObjectItem(step, "v"), &cnt);
    double *q = jdoubles(cJSON_GetObjectItem(step, "q"), &cnt);
    for (int l = 0; l < f->L; l++)
        for (int h = 0; h < f->HKV; h++) {
            int head = l * f->HKV + h;
            for (int t = 0; t < n; t++) {
                int slot = f->len[head]++;
                f->pos[(size_t)head * f->cap + slot] = next + t;
                for (int c = 0; c < f->D; c++) {
                    size_t src = (((size_t)l * f->HKV + h) * n + t) * f->D + c;
                    size_t dst = ((size_t)head * f->cap + slot) * f->D + c;
                    f->hk[dst] = (float)k[src];
                    f->hv[dst] = (float)v[src];
                }
            }
        }
    fake_upload(f);
    size_t qn = (size_t)f->W * f->H * f->D;
    float *hq = malloc(qn * sizeof *hq);
    for (int l = 0; l < f->L; l++) {
        for (size_t i = 0; i < qn; i++) hq[i] = (float)q[l * qn + i];
        be->upload(be, f->q[l], hq, qn);
    }
    free(hq); free(k); free(v); free(q);
}

/* Keep the listed slots in position order (what kvcache_compact does). */
static void fake_compact(struct fake *f, const struct keep_set *ks)
{
    for (int l = 0; l < f->L; l++)
        for (int h = 0; h < f->HKV; h++) {
            int head = l * f->HKV + h, n = ks->n_keep[head];
            if (n < 0) continue;
            unsigned char keep[256] = {0};
            const int *idx = ks->idx + (size_t)head * ks->stride;
            for (int i = 0; i < n; i++) keep[idx[i]] = 1;
            int o = 0;
            for (int j = 0; j < f->len[head]; j++) {
                if (!keep[j]) continue;
                f->pos[(size_t)head * f->cap + o] = f->pos[(size_t)head * f->cap + j];
                memmove(f->hk + ((size_t)head * f->cap + o) * f->D,
                        f->hk + ((size_t)head * f->cap + j) * f->D, (size_t)f->D * sizeof(float));
                memmove(f->hv + ((size_t)head * f->cap + o) * f->D,
                        f->hv + ((size_t)head * f->cap + j) * f->D, (size_t)f->D * sizeof(float));
                o++;
            }
            f->len[head] = o;
        }
    fake_upload(f);
}

static struct cache_view fake_view(struct fake *f, int next_pos, int at_prefill)
{
    return (struct cache_view){
        .be = be, .n_layer = f->L, .n_head = f->H, .n_kv = f->HKV, .head_dim = f->D,
        .capacity = f->cap, .len = f->len, .pos = f->pos, .pad = NULL, .k = f->k, .v = f->v,
        .q = f->q, .n_q = f->W, .next_pos = next_pos, .at_prefill = at_prefill,
    };
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Run policy `spec` through the fixture's two evictions and compare the kept
 * positions with the reference's `mode`. */
static void check_scenario(const char *spec, const char *mode)
{
    if (!cases) SKIP("no %s", CASES);
    const cJSON *cfg = cJSON_GetObjectItem(cases, "config");
    const cJSON *steps = cJSON_GetObjectItem(cases, "steps");
    const cJSON *want = cJSON_GetObjectItem(cJSON_GetObjectItem(cases, mode), "kept_positions");
    struct fake f;
    fake_init(&f, cfg, 128);
    struct policy_model pm = {.n_layer = f.L, .n_head = f.H, .n_kv = f.HKV, .head_dim = f.D};
    struct policy *p;
    struct eb_err e;
    if (policy_create(spec, &pm, &p, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        fake_free(&f);
        return;
    }
    int seq = json_int(cfg, "seq"), budget = json_int(cfg, "budget");
    struct seq_view sv = {.n_prompt = json_int(cJSON_GetArrayItem(steps, 0), "n"), .capacity = f.cap};
    CHECK(p->ops->begin_sequence(p->self, seq, &sv, &e) == 0);
    struct keep_set ks = {f.L, f.HKV, f.cap, calloc((size_t)f.L * f.HKV, sizeof(int)),
                          calloc((size_t)f.L * f.HKV * f.cap, sizeof(int))};
    int next = 0;
    for (int ev = 0; ev < 2; ev++) {
        const cJSON *step = cJSON_GetArrayItem(steps, ev);
        fake_append(&f, step, next);
        next += json_int(step, "n");
        struct cache_view cv = fake_view(&f, next, 0);
        int rc = p->ops->select(p->self, seq, &cv, budget, &ks, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        if (rc) break;
        for (int l = 0; l < f.L; l++)
            for (int h = 0; h < f.HKV; h++) {
                int head = l * f.HKV + h, n = ks.n_keep[head];
                const cJSON *w = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(want, ev), l), h);
                CHECK_MSG(n == cJSON_GetArraySize(w), "eviction %d layer %d head %d: %d kept", ev, l, h, n);
                if (n != cJSON_GetArraySize(w)) continue;
                int got[256];
                for (int i = 0; i < n; i++) got[i] = f.pos[(size_t)head * f.cap + ks.idx[(size_t)head * ks.stride + i]];
                qsort(got, (size_t)n, sizeof *got, cmp_int);
                int same = 1;
                for (int i = 0; i < n; i++) same &= got[i] == cJSON_GetArrayItem(w, i)->valueint;
                CHECK_MSG(same, "%s eviction %d layer %d head %d: kept positions differ", spec, ev, l, h);
            }
        fake_compact(&f, &ks);
    }
    p->ops->end_sequence(p->self, seq);
    free(ks.n_keep);
    free(ks.idx);
    policy_free(p);
    fake_free(&f);
}

static void test_attnv_matches_reference(void)
{
    check_scenario("vase-attnv:window=8,seed=1234", "attnv");
}

static void test_dkv_matches_reference(void)
{
    check_scenario("vase-dkv:window=8,seed=1234", "dkv");
}

static void test_curdkv_matches_reference(void)
{
    check_scenario("curdkv:window=8,seed=1234", "curdkv");
}

static void test_attn_rkv_matches_reference(void)
{
    check_scenario("vase-attn-rkv:window=8", "attn_rkv");
}

/* The trigger: nothing at prefill, nothing unless a head holds > B slots, a
 * multiple of W; a bad budget is a clear error. */
static void test_trigger(void)
{
    if (!cases) SKIP("no %s", CASES);
    const cJSON *cfg = cJSON_GetObjectItem(cases, "config");
    struct fake f;
    fake_init(&f, cfg, 128);
    fake_append(&f, cJSON_GetArrayItem(cJSON_GetObjectItem(cases, "steps"), 0), 0); /* 48 */
    struct policy_model pm = {.n_layer = f.L, .n_head = f.H, .n_kv = f.HKV, .head_dim = f.D};
    struct policy *p;
    struct eb_err e;
    CHECK(policy_create("vase-attnv:window=8", &pm, &p, &e) == 0);
    CHECK(p->info.schedule == POLICY_EVERY_STEP && p->info.window == 8 && p->info.q_window == 8);
    struct keep_set ks = {f.L, f.HKV, f.cap, calloc((size_t)f.L * f.HKV, sizeof(int)),
                          calloc((size_t)f.L * f.HKV * f.cap, sizeof(int))};
    struct cache_view cv = fake_view(&f, 48, 1);
    CHECK(p->ops->select(p->self, 0, &cv, 32, &ks, &e) == 0 && ks.n_keep[0] == -1); /* prefill */
    cv.at_prefill = 0;
    CHECK(p->ops->select(p->self, 0, &cv, 48, &ks, &e) == 0 && ks.n_keep[0] == -1); /* == B */
    CHECK(p->ops->select(p->self, 0, &cv, 40, &ks, &e) == 0 && ks.n_keep[0] == 40);
    for (int i = 0; i < f.L * f.HKV; i++) f.len[i] = 47; /* not a multiple of W */
    CHECK(p->ops->select(p->self, 0, &cv, 32, &ks, &e) == 0 && ks.n_keep[0] == -1);
    for (int i = 0; i < f.L * f.HKV; i++) f.len[i] = 48;
    CHECK(p->ops->select(p->self, 0, &cv, 36, &ks, &e) == -1 && strstr(e.msg, "multiple"));
    /* protect = K / B keeps exactly the top-K value ranges (sinks first). */
    struct policy *p2;
    CHECK(policy_create("vase-attnv:window=8,protect=1", &pm, &p2, &e) == 0);
    CHECK(p2->ops->select(p2->self, 0, &cv, 32, &ks, &e) == 0 && ks.n_keep[0] == 32);
    float v[48 * 16];
    be->download(be, v, f.v[0], 48 * 16);
    double r[40];
    for (int j = 0; j < 40; j++) {
        float lo = v[j * 16], hi = v[j * 16];
        for (int c = 1; c < 16; c++) {
            lo = v[j * 16 + c] < lo ? v[j * 16 + c] : lo;
            hi = v[j * 16 + c] > hi ? v[j * 16 + c] : hi;
        }
        r[j] = j < 4 ? INFINITY : hi - lo;
    }
    unsigned char kept[48] = {0};
    for (int i = 0; i < 32; i++) kept[ks.idx[i]] = 1;
    for (int j = 40; j < 48; j++) CHECK(kept[j]);
    for (int a = 0; a < 40; a++)
        for (int b = 0; b < 40; b++)
            if (kept[a] && !kept[b]) CHECK(r[a] >= r[b]);
    policy_free(p2);
    /* Bad parameters. */
    CHECK(policy_create("vase-attnv:kernel=4", &pm, &p2, &e) == -1 && strstr(e.msg, "odd"));
    CHECK(policy_create("vase-dkv:rank=0", &pm, &p2, &e) == -1);
    free(ks.n_keep);
    free(ks.idx);
    policy_free(p);
    fake_free(&f);
}

/* ---- end to end through generate() ---- */

static const char *SPECS[] = {"vase-attnv", "vase-dkv", "curdkv", "vase-range-attn",
                              "vase-attn-rkv"};

static void check_model_equivalence(const char *path, int n_prompt, int max_new, int tight_budget)
{
    struct model *m = open_model_on(be, path);
    if (!m) { CHECK_MSG(0, "cannot load %s", path); return; }
    int prompt[64];
    for (int i = 0; i < n_prompt; i++) prompt[i] = 1 + (i * 37) % (m->cfg.n_vocab - 1);
    struct gen_result full[2];
    if (run_policy(m, NULL, 0, prompt, n_prompt, max_new, full, NULL, NULL)) {
        CHECK(0);
        model_free(m);
        return;
    }
    int big = 64 * ((n_prompt + max_new) / 64 + 2); /* > prompt + max_new and the window, a multiple of 64 */
    for (size_t s = 0; s < sizeof SPECS / sizeof SPECS[0]; s++) {
        struct gen_result r[2];
        if (run_policy(m, SPECS[s], big, prompt, n_prompt, max_new, r, NULL, NULL)) { CHECK(0); continue; }
        for (int i = 0; i < 2; i++) {
            CHECK_MSG(same_ints(r[i].tokens, r[i].n_tokens, full[i].tokens, full[i].n_tokens),
                      "%s on %s: output differs from FullKV with budget %d", SPECS[s], path, big);
        }
        gen_results_free(r, 2);
        /* A tight budget evicts, completes and stays within B + W slots. */
        if (tight_budget) {
            char spec[64];
            int slots = 0;
            long comp = 0, want = 0;
            snprintf(spec, sizeof spec, "%s:window=8", SPECS[s]);
            if (run_policy(m, spec, tight_budget, prompt, n_prompt, max_new, r, &slots, &comp)) { CHECK(0); continue; }
            CHECK(r[0].n_tokens == max_new && r[1].n_tokens == max_new);
            CHECK_MSG(slots <= (n_prompt > tight_budget ? n_prompt + 8 : tight_budget + 8),
                      "%s: %d slots", spec, slots);
            /* Cadence (spec 2.2): a decode forward that leaves t tokens processed
             * compresses when t is a multiple of W and t > B. */
            for (int i = 0; i < 2; i++)
                for (int t = n_prompt - i + 1; t <= n_prompt - i + max_new - 1; t++)
                    want += t % 8 == 0 && t > tight_budget;
            CHECK_MSG(comp == want, "%s: %ld compressions, expected %ld", spec, comp, want);
            gen_results_free(r, 2);
        }
    }
    gen_results_free(full, 2);
    model_free(m);
}

static void test_budget_above_length_is_fullkv_tiny(void)
{
    static const char *TINY[] = {"tiny-llama", "tiny-qwen2", "tiny-qwen3"};
    for (size_t i = 0; i < sizeof TINY / sizeof TINY[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/fixtures/models/%s/model.gguf", TINY[i]);
        if (!file_exists(path)) SKIP("no %s", path);
        check_model_equivalence(path, 20, 40, 16);
    }
}

static void test_budget_above_length_is_fullkv_smollm2(void)
{
    if (!file_exists(SMOL_PATH)) SKIP("no %s", SMOL_PATH);
    check_model_equivalence(SMOL_PATH, 12, 12, 0);
}

int main(void)
{
    be = backend_cpu_create(1);
    cases = read_json(CASES);
    RUN(test_philox_known_answers);
    RUN(test_streams_match_reference);
    RUN(test_sample_matches_reference);
    RUN(test_sample_frequencies);
    RUN(test_attnv_matches_reference);
    RUN(test_dkv_matches_reference);
    RUN(test_curdkv_matches_reference);
    RUN(test_attn_rkv_matches_reference);
    RUN(test_trigger);
    RUN(test_budget_above_length_is_fullkv_tiny);
    RUN(test_budget_above_length_is_fullkv_smollm2);
    cJSON_Delete(cases);
    be->destroy(be);
    return test_summary("vase");
}
