/* schedule.c - compression schedule and slot-limit arithmetic (schedule.h). */
#include "schedule.h"

#include <string.h>


int policy_info_check(const struct policy_info *in, const char *name, struct eb_err *e)
{
    if ((in->needs & POLICY_NEED_RECENT_Q) && in->q_window < 1)
        return eb_fail(e, "policy %s asks for recent queries with a window of %d", name,
                       in->q_window);
    if ((in->schedule == POLICY_DIVIDE || in->schedule == POLICY_DECODING ||
         in->schedule == POLICY_PREFILL_DECODING) && in->divide_length < 1)
        return eb_fail(e, "policy %s: divide_length must be >= 1", name);
    return 0;
}

int policy_budget_check(const char *name, const struct policy_ops *ops,
                        const struct policy_params *params, int keeps_all, int window, int budget,
                        struct eb_err *e)
{
    if (!name) name = "?";
    if (keeps_all) return budget < 0 ? eb_fail(e, "budget must be > 0 (got %d)", budget) : 0;
    if (budget <= 0) return eb_fail(e, "policy %s needs a budget > 0 (got %d)", name, budget);
    if (window >= 0 && budget <= window)
        return eb_fail(e, "budget %d must exceed the %d slots policy %s always keeps (window)",
                       budget, window, name);
    if (ops && ops->check_budget && params && params->n > 0 &&
        ops->check_budget(params, budget, e))
        return eb_wrap(e, name);
    return 0;
}

int policy_check_budget(const struct policy *p, int budget, struct eb_err *e)
{
    return policy_budget_check(p->name, p->ops, &p->params, p->info.schedule == POLICY_NEVER,
                               p->info.window, budget, e);
}

int policy_compresses_at(const struct policy_info *in, int at_prefill, long n_seen)
{
    switch (in->schedule) {
    case POLICY_NEVER:
        return 0;
    case POLICY_PREFILL_ONLY:
        return at_prefill;
    case POLICY_DIVIDE:
        return at_prefill || (in->divide_length > 0 && (n_seen - 1) % in->divide_length == 0);
    case POLICY_EVERY_STEP:
        return 1;
    case POLICY_DECODING:
        return !at_prefill && in->divide_length > 0 && n_seen % in->divide_length == 0;
    case POLICY_PREFILL_DECODING:
        return at_prefill || (in->divide_length > 0 && n_seen % in->divide_length == 0);
    }
    return 0;
}

int policy_slot_limit(const struct policy_info *in, int budget)
{
    switch (in->schedule) {
    case POLICY_DIVIDE:
    case POLICY_PREFILL_DECODING:   /* the prompt is brought to the budget, as DIVIDE's */
        return budget + in->divide_length + 1;
    case POLICY_EVERY_STEP:
        return in->slot_slack < 0 ? 0 : budget + 2 + in->slot_slack;
    default:
        return 0;
    }
}

/* ---- over the sequences of one instance ---- */

void sched_run_init(struct sched_run *r, const struct policy_info *in)
{
    memset(r, 0, sizeof *r);
    r->info = *in;
    r->divide = in->divide_length > 0 ? in->divide_length : 1;
    if (in->schedule == POLICY_DIVIDE) {
        r->carry_flag = in->divide_carry_flag || in->divide_carry_count;
        r->carry_count = in->divide_carry_count;
    }
    r->decode_only = in->schedule == POLICY_DECODING;
    r->from_prompt = r->decode_only || in->schedule == POLICY_PREFILL_DECODING;
}

int sched_begin(struct sched_run *r, struct sched_seq *s, const char *policy, struct eb_err *e)
{
    memset(s, 0, sizeof *s);
    if (r->carry_flag && r->n_live > 0)
        return eb_fail(e, "policy %s: compat=released carries the step counter from one sample "
                          "to the next, as the released scripts run them (eval_batch_size 1); "
                          "run one sequence at a time (batch size 1)", policy);
    s->count0 = r->carry_count ? r->count : 0;
    s->prefill_selects = !r->decode_only && (!r->carry_flag || r->n_begun == 0 || r->flag);
    s->live = 1;
    r->n_begun++;
    r->n_live++;
    return 0;
}

int sched_step(const struct sched_run *r, struct sched_seq *s, long processed, int at_prefill)
{
    s->processed = processed;
    if (at_prefill) s->prompt_processed = processed;
    if (at_prefill && r->info.schedule == POLICY_DIVIDE) return s->prefill_selects;
    if (r->from_prompt)
        return policy_compresses_at(&r->info, at_prefill, processed - s->prompt_processed);
    return policy_compresses_at(&r->info, at_prefill, s->count0 + processed);
}

int sched_selects_next(const struct sched_run *r, const struct sched_seq *s, long processed)
{
    switch (r->info.schedule) {
    case POLICY_DECODING:
    case POLICY_PREFILL_DECODING: {
        /* called before sched_step at the prompt's forward: then it is this one */
        long prompt = s->prompt_processed > 0 ? s->prompt_processed : processed;
        return (processed + 1 - prompt) % r->divide == 0;
    }
    case POLICY_DIVIDE:
        return (s->count0 + processed) % r->divide == 0;
    case POLICY_EVERY_STEP:
        return 1;
    default:
        return 0;
    }
}

void sched_end(struct sched_run *r, struct sched_seq *s)
{
    if (!s->live) return;
    s->live = 0;
    r->n_live--;
    if (r->carry_count) r->count += s->processed;
    /* the flag the sequence's last forward set: its count after that forward */
    r->flag = (s->count0 + s->processed) % r->divide == 0;
}

int sched_slot_limit(const struct sched_run *r, int budget)
{
    return r->carry_flag || r->decode_only ? 0 : policy_slot_limit(&r->info, budget);
}
