/* scheduled.c - a schedule as composition: any policy wrap.h's `over` names
 * (its other parameters at their defaults) run on another schedule, as
 * NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05 composes presses:
 *   when=prefill           the prompt compressed once (a press on its own);
 *   when=decoding          decoding_press.py: every divide_length-th decoding
 *                          forward compresses to the budget, the prompt never;
 *   when=prefill+decoding  prefill_decoding_press.py: both.
 * The instance is the inner policy itself: its selection, batched plan and
 * hooks are passed on; only its schedule is this one's. */
#include "policies.h"
#include "select_batch.h"
#include "wrap.h"

/* The values of scheduled_params (param_def.offset). */
struct scheduled_params {
    struct wrap_params wrap;   /* first: wrap_params's offsets */
    int when;
};

const struct param_def scheduled_params[] = {
    {"when", PARAM_CHOICE, 1, 0, 2, "prefill|decoding|prefill+decoding",
     "the prompt once, every divide_length decoding forwards, or both",
     offsetof(struct scheduled_params, when)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},  /* then wrap_params */
};

static const enum policy_schedule WHEN[] = {POLICY_PREFILL_ONLY, POLICY_DECODING,
                                            POLICY_PREFILL_DECODING};

static int scheduled_create(const struct policy_params *p, const struct policy_model *m,
                            void **self, struct policy_info *info, struct eb_err *e)
{
    const struct scheduled_params *prm = policy_typed(p);
    char spec[256];
    struct policy *in = NULL;
    if (wrap_inner_spec(&prm->wrap, spec, sizeof spec, e) || policy_create(spec, m, &in, e))
        return -1;
    *info = in->info;
    info->schedule = WHEN[prm->when];
    info->divide_length = prm->wrap.divide_length;
    info->divide_carry_flag = info->divide_carry_count = 0;
    *self = in;
    return 0;
}

static void scheduled_destroy(void *self) { policy_free(self); }

static int scheduled_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct policy *in = self;
    return in->ops->begin_sequence ? in->ops->begin_sequence(in->self, seq, sv, e) : 0;
}

static void scheduled_end(void *self, int seq)
{
    struct policy *in = self;
    if (in->ops->end_sequence) in->ops->end_sequence(in->self, seq);
}

static int scheduled_observe(void *self, int seq, const struct step_view *s, struct eb_err *e)
{
    struct policy *in = self;
    return in->ops->observe ? in->ops->observe(in->self, seq, s, e) : 0;
}

static int scheduled_observe_attn(void *self, int seq, const struct attn_view *a,
                                  struct eb_err *e)
{
    struct policy *in = self;
    return in->ops->observe_attn ? in->ops->observe_attn(in->self, seq, a, e) : 0;
}

static int scheduled_observe_hidden(void *self, int seq, const float *rows, int n, int dim,
                                    struct eb_err *e)
{
    struct policy *in = self;
    return in->ops->observe_hidden ? in->ops->observe_hidden(in->self, seq, rows, n, dim, e) : 0;
}

static int scheduled_select(void *self, int seq, const struct cache_view *cv, int budget,
                            struct keep_set *out, struct eb_err *e)
{
    struct policy *in = self;
    return in->ops->select(in->self, seq, cv, budget, out, e);
}

static int scheduled_batch_plan(const void *self, int budget, struct batch_plan *out)
{
    const struct policy *in = self;
    if (!in->ops->batch_plan || !in->ops->batch_plan(in->self, budget, out)) return 0;
    if (!out->self) out->self = in->self;   /* its callbacks take the inner */
    return 1;
}

static size_t scheduled_device_bytes(const void *self, const struct policy_model *m, int n_live,
                                     int max_slots)
{
    const struct policy *in = self;
    return in->ops->device_bytes ? in->ops->device_bytes(in->self, m, n_live, max_slots) : 0;
}

const struct policy_ops scheduled_ops = {.name = "scheduled", .create = scheduled_create,
    .destroy = scheduled_destroy, .begin_sequence = scheduled_begin, .end_sequence = scheduled_end,
    .observe = scheduled_observe, .observe_attn = scheduled_observe_attn,
    .observe_hidden = scheduled_observe_hidden, .select = scheduled_select,
    .batch_plan = scheduled_batch_plan, .device_bytes = scheduled_device_bytes,
    .shared_params = wrap_params, .window_of = wrap_window_of};
