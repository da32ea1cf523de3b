/* schedule.c - compression schedule and slot-limit arithmetic (schedule.h). */
#include "schedule.h"

int policy_info_check(const struct policy_info *in, const char *name, struct eb_err *e)
{
    if ((in->needs & POLICY_NEED_RECENT_Q) && in->q_window < 1)
        return eb_fail(e, "policy %s asks for recent queries with a window of %d", name,
                       in->q_window);
    if (in->schedule == POLICY_DIVIDE && in->divide_length < 1)
        return eb_fail(e, "policy %s: divide_length must be >= 1", name);
    return 0;
}

int policy_budget_check(const struct policy_info *in, const char *name, int budget,
                        struct eb_err *e)
{
    if (in->schedule == POLICY_NEVER) {
        if (budget < 0) return eb_fail(e, "budget must be > 0 (got %d)", budget);
        return 0;
    }
    if (budget <= 0) return eb_fail(e, "policy %s needs a budget > 0 (got %d)", name, budget);
    if (budget <= in->window)
        return eb_fail(e, "budget %d must exceed the %d slots policy %s always keeps (window)",
                       budget, in->window, name);
    return 0;
}

int policy_check_budget(const struct policy *p, int budget, struct eb_err *e)
{
    return policy_budget_check(&p->info, p->ops->name, budget, e);
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
    }
    return 0;
}

int policy_slot_limit(const struct policy_info *in, int budget)
{
    switch (in->schedule) {
    case POLICY_DIVIDE:
        return budget + in->divide_length + 1;
    case POLICY_EVERY_STEP:
        return in->slot_slack < 0 ? 0 : budget + 2 + in->slot_slack;
    default:
        return 0;
    }
}
