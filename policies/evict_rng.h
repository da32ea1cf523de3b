/* evict_rng.h - the eviction policies' own random numbers.
 *
 * A counter-based generator (Philox4x32-10): every draw is a pure function
 * of (run seed, sequence id, layer, eviction index, stream, draw index), so
 * a stochastic policy's choices do not depend on token sampling, on what
 * else is in the batch, or on the order in which sequences are processed.
 *
 * Sampling without replacement in proportion to weights uses Gumbel-top-k
 * (key_j = log w_j + G_j, largest keys first), which has the same
 * distribution over ordered draws as sequential categorical sampling. */
#ifndef EB_EVICT_RNG_H
#define EB_EVICT_RNG_H

#include <stdint.h>

#include "../util/err.h"

/* Stream ids for evict_rng_init's `stream` argument: a kv head (>= 0) or a
 * layer-wide stream. */
enum { EVICT_STREAM_LAYER = 0xffff };

struct evict_rng {
    uint32_t key[2];
    uint32_t ctr[4];    /* ctr[0] counts blocks; ctr[1..3] name the stream */
    uint32_t out[4];
    int left;           /* unread words of out */
};

/* One Philox4x32-10 block. */
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The stream of (seed, seq, layer, eviction, stream); layer and stream are
 * taken modulo 2^16. */
void evict_rng_init(struct evict_rng *r, uint64_t seed, int seq, int layer, int eviction,
                    int stream);
uint32_t evict_rng_u32(struct evict_rng *r);
/* Uniform in (0, 1), 53 bits; never 0 or 1. */
double evict_rng_uniform(struct evict_rng *r);
/* Standard normal (Box-Muller; one value per call). */
double evict_rng_normal(struct evict_rng *r);
/* Gumbel(0, 1) from a uniform in (0, 1). */
double evict_gumbel(double u);

/* Draw k of n items without replacement, with probability proportional to
 * w[j], given the Gumbel noise g[j] of every item (the caller's draws, so a
 * reference can replay them).  Items with taken[j] != 0 (may be NULL) are
 * never drawn; items with w[j] <= 0 or a non-finite weight are not drawn by
 * the sampler.  When fewer than k items have positive weight, the rest are
 * filled with the untaken, unsampled items of highest fallback[j] (ties:
 * lower index; fallback NULL: lower index first).  out[0..k) receives the
 * items in draw order (descending key), then the fill.  Returns the number of
 * items drawn by the sampler (<= k), or -1 with e set (k > items available,
 * out of memory). */
int evict_sample_topk(const double *w, const double *g, const unsigned char *taken,
                      const double *fallback, int n, int k, int *out, struct eb_err *e);

#endif
