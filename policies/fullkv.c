/* fullkv.c - no eviction (specs/policies.md §2).  It asks the runtime for
 * nothing, so it costs nothing. */
#include "policies.h"

/* fullkv has no parameters. */
struct fullkv_params {
    int unused;
};

const struct param_def fullkv_params[] = {{NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0}};

static int fullkv_create(const struct policy_params *p, const struct policy_model *m, void **self,
                         struct policy_info *info, struct eb_err *e)
{
    (void)p; (void)m; (void)e;
    *self = NULL;
    *info = (struct policy_info){.schedule = POLICY_NEVER};
    return 0;
}

static void fullkv_destroy(void *self)
{
    (void)self;
}

static int fullkv_select(void *self, int seq, const struct cache_view *cv, int budget,
                         struct keep_set *out, struct eb_err *e)
{
    (void)self; (void)seq; (void)cv; (void)budget; (void)e;
    for (int i = 0; i < out->n_layer * out->n_kv; i++) out->n_keep[i] = -1;
    return 0;
}

const struct policy_ops fullkv_ops = {
    .name = "fullkv",
    .create = fullkv_create,
    .destroy = fullkv_destroy,
    .select = fullkv_select,
};
