/* random.c - random eviction (kvpress RandomPress): every slot of every kv
 * head an independent uniform score, the lowest evicted.
 * NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05:
 * kvpress/presses/random_press.py (torch.rand over batch, kv heads, slots),
 * scorer_press.py (topk), decoding_press.py (DecodingPress as knorm.c: no
 * compression at the prompt, then every divide_length-th decoding forward
 * compresses to the budget: POLICY_DECODING).  Two deviations:
 *   - keep_prompt=1 (default) puts every prompt slot above every generated
 *     one, so eviction falls uniformly on the generated slots (a prompt over
 *     the budget keeps B of its slots at random); keep_prompt=0 scores the
 *     prompt like the rest, as RandomPress does.
 *   - RandomPress reseeds one generator with `seed` at every score() call, so
 *     every layer and every compression of one cache length draws the same
 *     numbers for the same slot indices; here each (seed, sequence, layer,
 *     compression (its next position), kv head) draws a Philox stream of its
 *     own (evict_rng.h), slot j its j-th uniform: fresh numbers every time,
 *     as RandomPress without a seed, and reproducible from `seed`. */
#include <stdlib.h>

#include "evict_rng.h"
#include "policies.h"
#include "select_batch.h"

/* The values of random_params (param_def.offset). */
struct random_params {
    int seed;
    int keep_prompt;
    int divide_length;
};

const struct param_def random_params[] = {
    {"seed", PARAM_INT, 0, 0, 2147483647, NULL, "eviction RNG seed (with the sequence id)",
     offsetof(struct random_params, seed)},
    {"keep_prompt", PARAM_BOOL, 1, 0, 1, NULL, "1: the prompt is kept, generated slots evicted",
     offsetof(struct random_params, keep_prompt)},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct random_params, divide_length)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

struct random_policy {
    struct selector sel;
    struct seq_table n_prompt;   /* int per sequence */
    uint64_t seed;
    int keep_prompt;
};

static int random_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                        int n_cand, double *z, struct eb_err *e)
{
    struct random_policy *s = self;
    const int *n_prompt = seq_table_get(&s->n_prompt, seq);
    if (!n_prompt) return eb_fail(e, "sequence %d was never begun", seq);
    const int *pos = cv->pos + ((size_t)layer * cv->n_kv + kv_head) * cv->capacity;
    struct evict_rng r;
    evict_rng_init(&r, s->seed, seq, layer, cv->next_pos, kv_head);
    for (int j = 0; j < n_cand; j++)
        z[j] = evict_rng_uniform(&r) + (s->keep_prompt && pos[j] < *n_prompt);
    return 0;
}

static const struct scorer random_scorer = {.score = random_score, .order = KEEP_BY_POSITION,
    .use_pads = 1, .pads = PAD_EVICT_FIRST, .pad_score = PAD_SCORE};

static int random_create(const struct policy_params *p, const struct policy_model *m, void **self,
                         struct policy_info *info, struct eb_err *e)
{
    const struct random_params *prm = policy_typed(p);
    (void)m;
    struct random_policy *s = *self = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->seed = (uint64_t)prm->seed;
    s->keep_prompt = prm->keep_prompt;
    *info = (struct policy_info){.schedule = POLICY_DECODING,
                                 .divide_length = prm->divide_length};
    return 0;
}

static void random_destroy(void *self)
{
    struct random_policy *s = self;
    if (!s) return;
    selector_free(&s->sel);
    seq_table_free(&s->n_prompt, free);
    free(s);
}

static int random_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    int *n = seq_table_fresh(&((struct random_policy *)self)->n_prompt, seq, sizeof *n, free, e);
    if (!n) return -1;
    *n = sv->n_prompt;
    return 0;
}

static void random_end(void *self, int seq)
{
    seq_table_drop(&((struct random_policy *)self)->n_prompt, seq, free);
}

static int random_select(void *self, int seq, const struct cache_view *cv, int budget,
                         struct keep_set *out, struct eb_err *e)
{
    struct random_policy *s = self;
    return select_by_score(&random_scorer, s, &s->sel, seq, cv, budget, 0, out, e);
}

/* The whole batch: the draws are made on the host as select makes them, a
 * row per head, ranked and compacted on the device. */
static int random_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    (void)self, (void)budget;
    if (!select_batch_plan_of(&random_scorer, 0, out)) return 0;
    out->score = BATCH_SCORE_Z;
    out->host_scores = random_score;
    return 1;
}

const struct policy_ops random_ops = {.name = "random", .create = random_create,
    .destroy = random_destroy, .begin_sequence = random_begin, .end_sequence = random_end,
    .select = random_select, .batch_plan = random_batch_plan};
