/* sampler.c - greedy and temperature/top-k/top-p sampling.
 *
 * Candidates are ordered by (logit descending, id ascending), a total order, so
 * the kept set never depends on sort stability.  Top-p does not sort the whole
 * vocabulary: it selects the best m candidates (m = 64, 256, ... until their
 * probability mass reaches top_p), which are exactly the first m of the full
 * sorted order. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

struct sampler_params sampler_params_greedy(void)
{
    struct sampler_params p = {1, 0.0f, 0, 1.0f, 0};
    return p;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sampler_rng_seed(uint64_t state[4], uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) state[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sampler_rng_next(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sampler_rng_uniform(uint64_t s[4])
{
    return (double)(sampler_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

int sampler_init(struct sampler *s, const struct sampler_params *p, int n_valid, struct eb_err *e)
{
    s->cand = NULL;
    if (n_valid < 1) return eb_fail(e, "sampler: vocabulary is empty");
    if (!p->greedy) {
        if (!(p->temperature >= 0.0f) || isinf(p->temperature))
            return eb_fail(e, "sampler: temperature must be >= 0 (got %g)", (double)p->temperature);
        if (p->top_k < 0) return eb_fail(e, "sampler: top-k must be >= 0 (got %d)", p->top_k);
        if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
            return eb_fail(e, "sampler: top-p must be in (0, 1] (got %g)", (double)p->top_p);
    }
    s->p = *p;
    if (s->p.temperature == 0.0f) s->p.greedy = 1;
    s->n_valid = n_valid;
    sampler_rng_seed(s->rng, p->seed);
    if (!s->p.greedy) {
        s->cand = eb_malloc((size_t)n_valid * sizeof *s->cand, e);
        if (!s->cand) return -1;
    }
    return 0;
}

void sampler_free(struct sampler *s)
{
    free(s->cand);
    s->cand = NULL;
}

/* a before b in the candidate order.  NaN logits sort last. */
static int cand_before(const struct sampler_cand *a, const struct sampler_cand *b)
{
    if (a->logit != b->logit) {
        if (isnan(a->logit)) return 0;
        if (isnan(b->logit)) return 1;
        return a->logit > b->logit;
    }
    return a->id < b->id;
}

static void swap_cand(struct sampler_cand *a, struct sampler_cand *b)
{
    struct sampler_cand t = *a;
    *a = *b;
    *b = t;
}

/* Rearrange c[0..n) so that its first m entries are the m best (unordered). */
static void select_best(struct sampler_cand *c, int n, int m)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        /* median of three as pivot, moved to hi */
        if (cand_before(&c[mid], &c[lo])) swap_cand(&c[mid], &c[lo]);
        if (cand_before(&c[hi], &c[lo])) swap_cand(&c[hi], &c[lo]);
        if (cand_before(&c[mid], &c[hi])) swap_cand(&c[mid], &c[hi]);
        struct sampler_cand pivot = c[hi];
        int store = lo;
        for (int i = lo; i < hi; i++)
            if (cand_before(&c[i], &pivot)) swap_cand(&c[i], &c[store++]);
        swap_cand(&c[store], &c[hi]);
        if (store == m - 1 || store == m) return;
        if (store < m) lo = store + 1;
        else hi = store - 1;
    }
}

static int cmp_cand(const void *pa, const void *pb)
{
    const struct sampler_cand *a = pa, *b = pb;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best] || (isnan(x[best]) && !isnan(x[i]))) best = i;
    return best;
}

int sampler_sample(struct sampler *s, const float *logits, int n_logits)
{
    int n = n_logits < s->n_valid ? n_logits : s->n_valid;
    if (n <= 0) return 0;
    if (s->p.greedy) return argmax(logits, n);
    return sampler_sample_u(s, logits, n_logits, sampler_draw(s));
}

double sampler_draw(struct sampler *s)
{
    return s->p.greedy ? 0.0 : sampler_rng_uniform(s->rng);
}

int sampler_sample_u(struct sampler *s, const float *logits, int n_logits, double u)
{
    int n = n_logits < s->n_valid ? n_logits : s->n_valid;
    if (n <= 0) return 0;
    if (s->p.greedy) return argmax(logits, n);

    struct sampler_cand *c = s->cand;
    for (int i = 0; i < n; i++) {
        c[i].logit = logits[i];
        c[i].id = i;
    }
    int limit = n;
    if (s->p.top_k > 0 && s->p.top_k < n) limit = s->p.top_k;
    double inv_t = 1.0 / s->p.temperature;
    float top = logits[argmax(logits, n)];

    /* Grow the sorted prefix until it holds limit candidates or top_p of the
     * probability mass.  The softmax denominator covers the top-k set. */
    double z = 0.0;
    if (limit < n) select_best(c, n, limit);
    for (int i = 0; i < limit; i++) z += exp(((double)c[i].logit - top) * inv_t);
    int m = limit < 64 ? limit : 64, kept = limit;
    for (;;) {
        if (m < limit) select_best(c, limit, m);
        qsort(c, (size_t)m, sizeof *c, cmp_cand);
        double cum = 0.0;
        int cut = -1;
        for (int i = 0; i < m; i++) {
            cum += exp(((double)c[i].logit - top) * inv_t) / z;
            if (cum >= s->p.top_p) { cut = i + 1; break; }
        }
        if (cut > 0) { kept = cut; break; }
        if (m == limit) { kept = limit; break; }
        m = m * 4 < limit ? m * 4 : limit;
    }

    double mass = 0.0;
    for (int i = 0; i < kept; i++) mass += exp(((double)c[i].logit - top) * inv_t);
    double r = u * mass;
    double acc = 0.0;
    for (int i = 0; i < kept; i++) {
        acc += exp(((double)c[i].logit - top) * inv_t);
        if (r < acc) return c[i].id;
    }
    return c[kept - 1].id;
}
