/* policy_schedule.c - the glue's selection schedule (see policy_schedule.h). */
#include "harness/exp/policy_schedule.h"

#include <string.h>

void sched_run_init(struct sched_run *r, const struct policy_info *in)
{
    memset(r, 0, sizeof *r);
    r->schedule = in->schedule;
    r->divide = in->divide_length > 0 ? in->divide_length : 1;
    if (in->schedule == POLICY_DIVIDE) {
        r->carry_flag = in->divide_carry_flag || in->divide_carry_count;
        r->carry_count = in->divide_carry_count;
    }
}

int sched_begin(struct sched_run *r, struct sched_seq *s, const char *policy, struct eb_err *e)
{
    memset(s, 0, sizeof *s);
    if (r->carry_flag && r->n_live > 0)
        return eb_fail(e, "policy %s: compat=released carries the step counter from one sample "
                          "to the next, as the released scripts run them (eval_batch_size 1); "
                          "run one sequence at a time (batch size 1)", policy);
    s->count0 = r->carry_count ? r->count : 0;
    s->prefill_selects = !r->carry_flag || r->n_begun == 0 || r->flag;
    s->live = 1;
    r->n_begun++;
    r->n_live++;
    return 0;
}

int sched_step(const struct sched_run *r, struct sched_seq *s, long processed, int at_prefill)
{
    s->processed = processed;
    switch (r->schedule) {
    case POLICY_NEVER:
        return 0;
    case POLICY_PREFILL_ONLY:
        return at_prefill;
    case POLICY_DIVIDE:
        /* The forward that follows a divisible count compresses; it processed
         * token `processed - 1`, so the count it followed is processed - 1. */
        if (at_prefill) return s->prefill_selects;
        return (s->count0 + processed - 1) % r->divide == 0;
    case POLICY_EVERY_STEP:
        return 1;
    }
    return 0;
}

int sched_selects_next(const struct sched_run *r, const struct sched_seq *s, long processed)
{
    switch (r->schedule) {
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
