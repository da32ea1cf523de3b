/* streamingllm.c - attention sinks plus the most recent tokens
 * (specs/policies.md §1.2: first_tokens = 4 sinks + B - 4 recent), on the
 * common trigger: every divide_length tokens once a head holds >= B slots.
 * divide_length=1 gives the original rolling cache. */
#include <stdlib.h>

#include "policies.h"

const struct param_def streamingllm_params[] = {
    {"sinks", PARAM_INT, 4, 0, 1 << 20, NULL, "oldest slots always kept"},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL, "compress every this many tokens"},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL},
};

struct streaming {
    int sinks;
};

static int streaming_create(const struct policy_params *p, const struct policy_model *m,
                            void **self, struct policy_info *info, struct eb_err *e)
{
    (void)m;
    struct streaming *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->sinks = policy_param_int(p, "sinks");
    *info = (struct policy_info){.window = s->sinks, .schedule = POLICY_DIVIDE,
                                 .divide_length = policy_param_int(p, "divide_length")};
    *self = s;
    return 0;
}

static void streaming_destroy(void *self)
{
    free(self);
}

static int streaming_select(void *self, int seq, const struct cache_view *cv, int budget,
                            struct keep_set *out, struct eb_err *e)
{
    (void)seq; (void)e;
    const struct streaming *s = self;
    for (int l = 0; l < cv->n_layer; l++)
        for (int h = 0; h < cv->n_kv; h++) {
            int len = cache_view_len(cv, l, h), *keep = keep_set_head(out, l, h), n = 0;
            if (len < budget) {
                out->n_keep[l * cv->n_kv + h] = -1;
                continue;
            }
            for (int j = 0; j < s->sinks; j++) keep[n++] = j;
            for (int j = len - (budget - s->sinks); j < len; j++) keep[n++] = j;
            out->n_keep[l * cv->n_kv + h] = n;
        }
    return 0;
}

const struct policy_ops streamingllm_ops = {
    .name = "streamingllm",
    .create = streaming_create,
    .destroy = streaming_destroy,
    .select = streaming_select,
};
