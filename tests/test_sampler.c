/* test_sampler.c - greedy, temperature/top-k/top-p, seeded determinism. */
#include "test.h"

#include "model/sampler.h"

static void test_greedy(void)
{
    struct sampler s;
    struct eb_err e;
    struct sampler_params p = sampler_params_greedy();
    CHECK(sampler_init(&s, &p, 5, &e) == 0);
    float a[] = {0.1f, 2.0f, -1.0f, 2.0f, 0.5f};
    CHECK(sampler_sample(&s, a, 5) == 1); /* tie: lowest id */
    float b[] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 9.0f}; /* id 5 is past n_valid */
    CHECK(sampler_sample(&s, b, 6) == 4);
    sampler_free(&s);
    /* temperature 0 means greedy */
    struct sampler_params t0 = {0, 0.0f, 0, 1.0f, 7};
    CHECK(sampler_init(&s, &t0, 5, &e) == 0);
    CHECK(sampler_sample(&s, a, 5) == 1);
    sampler_free(&s);
}

static void test_bad_params(void)
{
    struct sampler s;
    struct eb_err e;
    struct sampler_params p = {0, -1.0f, 0, 1.0f, 0};
    CHECK(sampler_init(&s, &p, 10, &e) == -1);
    p.temperature = 1.0f;
    p.top_p = 0.0f;
    CHECK(sampler_init(&s, &p, 10, &e) == -1);
    p.top_p = 1.5f;
    CHECK(sampler_init(&s, &p, 10, &e) == -1);
    p.top_p = 1.0f;
    p.top_k = -3;
    CHECK(sampler_init(&s, &p, 10, &e) == -1);
    CHECK(strstr(e.msg, "top-k") != NULL);
    p.top_k = 0;
    CHECK(sampler_init(&s, &p, 0, &e) == -1);
}

static void test_rng(void)
{
    uint64_t a[4], b[4];
    sampler_rng_seed(a, 42);
    sampler_rng_seed(b, 42);
    for (int i = 0; i < 100; i++) CHECK(sampler_rng_next(a) == sampler_rng_next(b));
    sampler_rng_seed(b, 43);
    CHECK(sampler_rng_next(a) != sampler_rng_next(b));
    double lo = 1, hi = 0, sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = sampler_rng_uniform(a);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
        sum += u;
    }
    CHECK(lo >= 0.0 && hi < 1.0);
    CHECK_NEAR(sum / 100000, 0.5, 0.01);
}

/* Empirical frequencies of 3 tokens with probabilities .5 .3 .2. */
static void freqs(struct sampler_params p, double out[3])
{
    struct sampler s;
    struct eb_err e;
    float lg[] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    int cnt[3] = {0, 0, 0};
    CHECK(sampler_init(&s, &p, 3, &e) == 0);
    for (int i = 0; i < 40000; i++) cnt[sampler_sample(&s, lg, 3)]++;
    for (int i = 0; i < 3; i++) out[i] = cnt[i] / 40000.0;
    sampler_free(&s);
}

static void test_distribution(void)
{
    double f[3];
    struct sampler_params p = {0, 1.0f, 0, 1.0f, 1};
    freqs(p, f);
    CHECK_NEAR(f[0], 0.5, 0.015);
    CHECK_NEAR(f[1], 0.3, 0.015);
    CHECK_NEAR(f[2], 0.2, 0.015);
    p.top_k = 2; /* renormalized over the two best */
    freqs(p, f);
    CHECK_NEAR(f[0], 0.625, 0.015);
    CHECK_NEAR(f[1], 0.375, 0.015);
    CHECK(f[2] == 0.0);
    p.top_k = 0;
    p.top_p = 0.7f; /* .5 < .7 <= .8: the nucleus is {0, 1} */
    freqs(p, f);
    CHECK_NEAR(f[0], 0.625, 0.015);
    CHECK(f[2] == 0.0);
    p.top_p = 0.4f; /* only the best */
    freqs(p, f);
    CHECK(f[0] == 1.0);
    p.top_p = 1.0f;
    p.temperature = 0.5f; /* p^2 renormalized: .25 .09 .04 */
    freqs(p, f);
    CHECK_NEAR(f[0], 0.25 / 0.38, 0.015);
    CHECK_NEAR(f[2], 0.04 / 0.38, 0.015);
}

/* Straightforward reference: sort the whole vocabulary, cut, draw. */
static int cmp_desc(const void *pa, const void *pb)
{
    const struct sampler_cand *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return a->id - b->id;
}

static int reference_sample(uint64_t rng[4], const float *lg, int n, float temp, int top_k,
                            float top_p)
{
    struct sampler_cand *c = malloc((size_t)n * sizeof *c);
    for (int i = 0; i < n; i++) c[i] = (struct sampler_cand){lg[i], i};
    qsort(c, (size_t)n, sizeof *c, cmp_desc);
    int limit = top_k > 0 && top_k < n ? top_k : n;
    double top = c[0].logit, z = 0, cum = 0, mass = 0;
    for (int i = 0; i < limit; i++) z += exp((c[i].logit - top) / temp);
    int kept = limit;
    for (int i = 0; i < limit; i++) {
        cum += exp((c[i].logit - top) / temp) / z;
        if (cum >= top_p) { kept = i + 1; break; }
    }
    for (int i = 0; i < kept; i++) mass += exp((c[i].logit - top) / temp);
    double r = sampler_rng_uniform(rng) * mass, acc = 0;
    int id = c[kept - 1].id;
    for (int i = 0; i < kept; i++) {
        acc += exp((c[i].logit - top) / temp);
        if (r < acc) { id = c[i].id; break; }
    }
    free(c);
    return id;
}

static void test_matches_reference(void)
{
    enum { V = 20000 };
    float *lg = malloc(V * sizeof *lg);
    uint64_t gen[4];
    sampler_rng_seed(gen, 99);
    struct { float temp; int k; float p; } cases[] = {
        {1.0f, 0, 0.95f}, {0.7f, 40, 0.9f}, {1.3f, 0, 1.0f}, {0.6f, 1000, 0.99f}, {2.0f, 0, 0.999f},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct sampler s;
        struct eb_err e;
        struct sampler_params p = {0, cases[ci].temp, cases[ci].k, cases[ci].p, 1234 + ci};
        CHECK(sampler_init(&s, &p, V, &e) == 0);
        uint64_t ref[4];
        sampler_rng_seed(ref, p.seed);
        int mismatches = 0;
        for (int step = 0; step < 30; step++) {
            for (int i = 0; i < V; i++) /* peaked, with ties */
                lg[i] = (float)((int)(sampler_rng_uniform(gen) * 4000) / 400.0);
            int a = sampler_sample(&s, lg, V);
            int b = reference_sample(ref, lg, V, p.temperature, p.top_k, p.top_p);
            if (a != b) mismatches++;
        }
        CHECK_MSG(mismatches == 0, "case %zu: %d mismatches", ci, mismatches);
        sampler_free(&s);
    }
    free(lg);
}

/* sampler_draw + sampler_sample_u (what a backend that samples in its own
 * memory gets) pick exactly what sampler_sample picks, and advance the RNG
 * the same way: one draw per sampled token, none when greedy. */
static void test_draw_then_pick(void)
{
    enum { V = 5000 };
    float *lg = malloc(V * sizeof *lg);
    uint64_t gen[4];
    sampler_rng_seed(gen, 5);
    struct sampler_params ps[] = {{0, 0.8f, 40, 0.9f, 11}, {0, 1.0f, 0, 1.0f, 12},
                                  {1, 0.0f, 0, 1.0f, 13}, {0, 0.0f, 0, 0.5f, 14}};
    for (size_t ci = 0; ci < sizeof ps / sizeof ps[0]; ci++) {
        struct sampler a, b;
        struct eb_err e;
        CHECK(sampler_init(&a, &ps[ci], V - 7, &e) == 0 && sampler_init(&b, &ps[ci], V - 7, &e) == 0);
        int diff = 0;
        for (int step = 0; step < 40; step++) {
            for (int i = 0; i < V; i++) lg[i] = (float)(sampler_rng_uniform(gen) * 8.0);
            int x = sampler_sample(&a, lg, V);
            double u = sampler_draw(&b);
            CHECK(u >= 0.0 && u < 1.0);
            int y = sampler_sample_u(&b, lg, V, u);
            diff += x != y;
            CHECK(x < V - 7); /* never past n_valid */
        }
        CHECK_MSG(diff == 0, "case %zu: %d differ", ci, diff);
        CHECK(memcmp(a.rng, b.rng, sizeof a.rng) == 0);
        sampler_free(&a);
        sampler_free(&b);
    }
    /* greedy draws nothing */
    struct sampler g;
    struct eb_err e;
    struct sampler_params gp = sampler_params_greedy();
    CHECK(sampler_init(&g, &gp, 10, &e) == 0);
    uint64_t before[4];
    memcpy(before, g.rng, sizeof before);
    CHECK(sampler_draw(&g) == 0.0 && memcmp(before, g.rng, sizeof before) == 0);
    sampler_free(&g);
    free(lg);
}

static void test_seed_determinism(void)
{
    enum { V = 300 };
    float lg[V];
    for (int i = 0; i < V; i++) lg[i] = sinf((float)i * 0.37f) * 3.0f;
    struct sampler a, b, c;
    struct eb_err e;
    struct sampler_params p = {0, 0.9f, 50, 0.95f, 2024};
    CHECK(sampler_init(&a, &p, V, &e) == 0);
    CHECK(sampler_init(&b, &p, V, &e) == 0);
    p.seed = 2025;
    CHECK(sampler_init(&c, &p, V, &e) == 0);
    int same = 1, differ = 0;
    for (int i = 0; i < 200; i++) {
        int x = sampler_sample(&a, lg, V), y = sampler_sample(&b, lg, V), z = sampler_sample(&c, lg, V);
        same &= x == y;
        differ |= x != z;
    }
    CHECK(same);
    CHECK(differ);
    sampler_free(&a);
    sampler_free(&b);
    sampler_free(&c);
}

int main(void)
{
    RUN(test_greedy);
    RUN(test_bad_params);
    RUN(test_rng);
    RUN(test_distribution);
    RUN(test_matches_reference);
    RUN(test_draw_then_pick);
    RUN(test_seed_determinism);
    return test_summary("sampler");
}
