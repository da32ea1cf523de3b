/* streamingllm.c - sinks plus the most recent tokens (specs/policies.md §1.2:
 * 4 sinks + B - 4 recent) every divide_length tokens once a head holds >= B
 * slots (divide_length=1: the original rolling cache).  As a scorer: older
 * slots rank by age, oldest first; the B - sinks newest are the window. */
#include "policies.h"
#include "row.h"

/* The values of streamingllm_params (param_def.offset). */
struct streamingllm_params {
    int sinks;
    int divide_length;
};

const struct param_def streamingllm_params[] = {
    {"sinks", PARAM_INT, 4, 0, 1 << 20, NULL, "oldest slots always kept",
     offsetof(struct streamingllm_params, sinks)},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens",
     offsetof(struct streamingllm_params, divide_length)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

static int age_score(struct score_ctx *c, double *z, struct eb_err *e)
{
    (void)e;
    for (int j = 0; j < c->n_cand; j++) z[j] = -j;
    return 0;
}

/* The sinks are the slots always kept: a budget must exceed them. */
static int streaming_configure(const void *prm, struct row_config *c, struct eb_err *e)
{
    (void)e;
    const struct streamingllm_params *p = prm;
    c->info.window = p->sinks;
    c->info.divide_length = p->divide_length;
    return 0;
}

/* The B - sinks newest slots. */
static int streaming_recent(const void *prm, int budget)
{
    return budget - ((const struct streamingllm_params *)prm)->sinks;
}

static int streaming_batch(const void *prm, const struct row_config *c, struct batch_plan *out)
{
    (void)prm; (void)c;
    out->score = BATCH_SCORE_AGE;
    return 1;
}

const struct scorer_row streamingllm_row = {.score = age_score,
    .configure = streaming_configure, .recent = streaming_recent, .batch = streaming_batch,
    .base = {.sel = {.order = KEEP_BY_POSITION}, .info = {.schedule = POLICY_DIVIDE}}};
