/* sampler.h - pick the next token from one row of logits.
 *
 * Greedy (argmax, lowest id on ties), or temperature + top-k + top-p with a
 * per-sequence RNG (xoshiro256** seeded through splitmix64).  Each sequence
 * owns its sampler, and a sampler draws exactly one random number per sampled
 * token, so the same seed gives the same tokens whatever else is in the batch. */
#ifndef EB_SAMPLER_H
#define EB_SAMPLER_H

#include <stdint.h>

#include "../util/err.h"

struct sampler_params {
    int greedy;          /* 1: argmax; the fields below are ignored */
    float temperature;   /* > 0; 0 means greedy */
    int top_k;           /* 0: no top-k cut */
    float top_p;         /* (0, 1]; 1: no nucleus cut */
    uint64_t seed;
};

struct sampler_cand {
    float logit;
    int id;
};

struct sampler {
    struct sampler_params p;
    int n_valid;                 /* ids >= n_valid are never sampled (embedding padding) */
    uint64_t rng[4];
    struct sampler_cand *cand;   /* scratch, n_valid entries */
};

/* Defaults: greedy. */
struct sampler_params sampler_params_greedy(void);

/* Check parameters (temperature >= 0, top_k >= 0, 0 < top_p <= 1, n_valid >= 1). */
int sampler_init(struct sampler *s, const struct sampler_params *p, int n_valid, struct eb_err *e);
void sampler_free(struct sampler *s);

/* Next token from logits[0..n_logits); only the first min(n_logits, n_valid)
 * are candidates. */
int sampler_sample(struct sampler *s, const float *logits, int n_logits);

/* sampler_sample in two halves, for a backend that samples in its own
 * memory (struct backend's sample op): the sequence's one uniform draw per
 * sampled token (none when greedy; the RNG advances exactly as
 * sampler_sample's), and the pick from logits given that draw. */
double sampler_draw(struct sampler *s);
int sampler_sample_u(struct sampler *s, const float *logits, int n_logits, double u);

/* The RNG on its own (exposed for tests). */
void sampler_rng_seed(uint64_t state[4], uint64_t seed);
uint64_t sampler_rng_next(uint64_t state[4]);
/* Uniform double in [0, 1) with 53 random bits. */
double sampler_rng_uniform(uint64_t state[4]);

#endif
