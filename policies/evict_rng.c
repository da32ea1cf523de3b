/* evict_rng.c - Philox4x32-10 streams and Gumbel-top-k sampling (see
 * evict_rng.h).  Philox: Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3" (SC'11), with its published multipliers and Weyl constants. */
#include "evict_rng.h"

#include <math.h>
#include <stdlib.h>

#include "score.h"

enum {
    PHILOX_M0 = 0xD2511F53u,
    PHILOX_M1 = 0xCD9E8D57u,
    PHILOX_W0 = 0x9E3779B9u,
    PHILOX_W1 = 0xBB67AE85u
};

void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void evict_rng_init(struct evict_rng *r, uint64_t seed, int seq, int layer, int eviction,
                    int stream)
{
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    r->ctr[0] = 0;
    r->ctr[1] = (uint32_t)seq;
    r->ctr[2] = ((uint32_t)layer & 0xffffu) << 16 | ((uint32_t)stream & 0xffffu);
    r->ctr[3] = (uint32_t)eviction;
    r->left = 0;
}

uint32_t evict_rng_u32(struct evict_rng *r)
{
    if (r->left == 0) {
        philox4x32_10(r->ctr, r->key, r->out);
        r->ctr[0]++;
        r->left = 4;
    }
    return r->out[4 - r->left--];
}

double evict_rng_uniform(struct evict_rng *r)
{
    uint64_t hi = evict_rng_u32(r) >> 5, lo = evict_rng_u32(r) >> 6; /* 27 + 26 bits */
    uint64_t x = hi << 26 | lo;
    return ((double)x + 0.5) / 9007199254740992.0; /* 2^53 */
}

double evict_rng_normal(struct evict_rng *r)
{
    double u1 = evict_rng_uniform(r), u2 = evict_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double evict_gumbel(double u)
{
    return -log(-log(u));
}

int evict_sample_topk(const double *w, const double *g, const unsigned char *taken,
                      const double *fallback, int n, int k, int *out, struct eb_err *e)
{
    if (n < 0 || k < 0) return eb_fail(e, "evict_rng: sample %d of %d items", k, n);
    if (k == 0) return 0;
    struct score_pair *rk = malloc((size_t)n * sizeof *rk);
    unsigned char *used = calloc((size_t)n, 1);
    if (!rk || !used) {
        free(rk);
        free(used);
        return eb_fail(e, "evict_rng: out of memory sampling %d items", n);
    }
    int m = 0, avail = 0;
    for (int j = 0; j < n; j++) {
        if (taken && taken[j]) continue;
        avail++;
        if (!(w[j] > 0) || !isfinite(w[j])) continue;
        double key = log(w[j]) + g[j];
        if (isnan(key)) continue;
        rk[m++] = (struct score_pair){key, j};
    }
    if (avail < k) {
        free(rk);
        free(used);
        return eb_fail(e, "evict_rng: %d items to draw but only %d available", k, avail);
    }
    qsort(rk, (size_t)m, sizeof *rk, score_pair_cmp);
    int drawn = m < k ? m : k;
    for (int t = 0; t < drawn; t++) {
        out[t] = rk[t].i;
        used[rk[t].i] = 1;
    }
    if (drawn < k) { /* fallback fill: too few items with positive weight */
        int f = 0;
        for (int j = 0; j < n; j++) {
            if ((taken && taken[j]) || used[j]) continue;
            double s = fallback ? fallback[j] : 0.0;
            rk[f++] = (struct score_pair){isnan(s) ? -INFINITY : s, j};
        }
        qsort(rk, (size_t)f, sizeof *rk, score_pair_cmp);
        for (int t = drawn; t < k; t++) out[t] = rk[t - drawn].i;
    }
    free(rk);
    free(used);
    return drawn;
}
