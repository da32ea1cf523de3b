/* streamingllm.c - sinks plus the most recent tokens (specs/policies.md §1.2:
 * 4 sinks + B - 4 recent) every divide_length tokens once a head holds >= B
 * slots (divide_length=1: the original rolling cache).  As a scorer: older
 * slots rank by age, oldest first; the B - sinks newest are the window. */
#include <stdlib.h>

#include "policies.h"
#include "select_batch.h"

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

struct streaming {
    int sinks;
    struct selector sel;
};
static int age_score(void *self, int seq, const struct cache_view *cv, int layer, int kv_head,
                     int n_cand, double *z, struct eb_err *e)
{
    (void)self; (void)seq; (void)cv; (void)layer; (void)kv_head; (void)e;
    for (int j = 0; j < n_cand; j++) z[j] = -j;
    return 0;
}
static const struct scorer streaming_scorer = {.score = age_score, .order = KEEP_BY_POSITION};

static int streaming_create(const struct policy_params *p, const struct policy_model *m,
                            void **self, struct policy_info *info, struct eb_err *e)
{
    (void)m;
    struct streaming *s = *self = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->sinks = policy_param_int(p, "sinks");
    *info = (struct policy_info){.window = s->sinks, .schedule = POLICY_DIVIDE,
                                 .divide_length = policy_param_int(p, "divide_length")};
    return 0;
}

static void streaming_destroy(void *self)
{
    if (self) selector_free(&((struct streaming *)self)->sel);
    free(self);
}

static int streaming_select(void *self, int seq, const struct cache_view *cv, int budget,
                            struct keep_set *out, struct eb_err *e)
{
    struct streaming *s = self;
    return select_by_score(&streaming_scorer, s, &s->sel, seq, cv, budget, budget - s->sinks,
                           out, e);
}

static int streaming_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    const struct streaming *s = self;
    if (!select_batch_plan_of(&streaming_scorer, budget - s->sinks, out)) return 0;
    out->score = BATCH_SCORE_AGE;
    return 1;
}

const struct policy_ops streamingllm_ops = {
    .name = "streamingllm",
    .create = streaming_create,
    .window_param = "sinks",
    .destroy = streaming_destroy,
    .select = streaming_select,
    .batch_plan = streaming_batch_plan,
};
