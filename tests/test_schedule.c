/* test_schedule.c - the compression schedule and the slot limit
 * (policies/schedule.h), without a model:
 *   - when each schedule compresses, left pads counted as the reference does;
 *   - the slot limit bounds a simulated head under the divide schedule for
 *     every prompt length, left padding, budget and divide_length tried, and
 *     is at most one slot above the largest it reached (not a loose bound);
 *   - budget and info checks, and a registry policy's own info. */
#include "test.h"

#include "policies/registry.h"
#include "policies/schedule.h"

static struct policy_info divide(int dl, int window)
{
    return (struct policy_info){.schedule = POLICY_DIVIDE, .divide_length = dl, .window = window};
}

static void test_compresses_at(void)
{
    struct policy_info d = divide(128, 8), never = {.schedule = POLICY_NEVER},
                       pre = {.schedule = POLICY_PREFILL_ONLY},
                       every = {.schedule = POLICY_EVERY_STEP};
    CHECK(policy_compresses_at(&d, 1, 37) == 1);     /* prefill, any prompt length */
    CHECK(policy_compresses_at(&d, 0, 128) == 0);
    CHECK(policy_compresses_at(&d, 0, 129) == 1);    /* the forward after count 128 */
    CHECK(policy_compresses_at(&d, 0, 130) == 0);
    CHECK(policy_compresses_at(&d, 0, 257) == 1);
    CHECK(policy_compresses_at(&never, 1, 10) == 0 && policy_compresses_at(&never, 0, 129) == 0);
    CHECK(policy_compresses_at(&pre, 1, 10) == 1 && policy_compresses_at(&pre, 0, 129) == 0);
    CHECK(policy_compresses_at(&every, 0, 2) == 1 && policy_compresses_at(&every, 0, 77) == 1);
    /* decoding: counted from the prompt's end, never at the prompt */
    struct policy_info dec = {.schedule = POLICY_DECODING, .divide_length = 128};
    CHECK(policy_compresses_at(&dec, 1, 128) == 0 && policy_compresses_at(&dec, 0, 128) == 1);
    CHECK(policy_compresses_at(&dec, 0, 129) == 0 && policy_compresses_at(&dec, 0, 256) == 1);
    /* prefill + decoding: the prompt, then as decoding */
    struct policy_info pd = {.schedule = POLICY_PREFILL_DECODING, .divide_length = 128};
    CHECK(policy_compresses_at(&pd, 1, 0) == 1 && policy_compresses_at(&pd, 0, 128) == 1);
    CHECK(policy_compresses_at(&pd, 0, 127) == 0 && policy_compresses_at(&pd, 0, 256) == 1);
    struct policy_info one = divide(1, 0);
    for (long n = 2; n < 50; n++) CHECK(policy_compresses_at(&one, 0, n) == 1);
}

/* A head under the divide schedule: the prompt (left pads included) enters,
 * then one token per forward; a selection brings a head holding >= budget
 * slots back to budget (R-KV, SnapKV-decode, H2O-rkv, SkipKV).  Returns the
 * most slots it held after any forward. */
static int simulate(const struct policy_info *in, int budget, int n_prompt, int n_new)
{
    long seen = n_prompt;
    int len = n_prompt, most = len;
    if (policy_compresses_at(in, 1, seen) && len >= budget) len = budget;
    for (int t = 1; t < n_new; t++) {
        len++;
        seen++;
        if (len > most) most = len;
        if (policy_compresses_at(in, 0, seen) && len >= budget) len = budget;
    }
    return most;
}

static void test_slot_limit_bounds_divide(void)
{
    const int dls[] = {1, 2, 7, 128}, budgets[] = {16, 64, 100};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++) {
            struct policy_info in = divide(dls[a], 4);
            int limit = policy_slot_limit(&in, budgets[b]), worst = 0;
            CHECK(limit == budgets[b] + dls[a] + 1);
            for (int np = 1; np < 3 * budgets[b]; np++) {
                int most = simulate(&in, budgets[b], np, 4 * dls[a] + 300);
                /* a prompt longer than the budget is compressed at prefill, so
                 * only its own length can exceed the limit (generate allocates
                 * max(n_prompt + 1, limit)) */
                if (np < limit)
                    CHECK_MSG(most <= limit, "dl %d budget %d prompt %d: %d slots > limit %d",
                              dls[a], budgets[b], np, most, limit);
                if (most > worst && np < budgets[b]) worst = most;
            }
            CHECK_MSG(worst >= limit - 1, "dl %d budget %d: limit %d, at most %d reached",
                      dls[a], budgets[b], limit, worst);
        }
}

static void test_slot_limit_other_schedules(void)
{
    struct policy_info in = {.schedule = POLICY_EVERY_STEP, .slot_slack = 10};
    CHECK(policy_slot_limit(&in, 64) == 76);
    in.slot_slack = 0;
    CHECK(policy_slot_limit(&in, 64) == 66);
    in.slot_slack = -1; /* RPC: the budget grows with the trace */
    CHECK(policy_slot_limit(&in, 64) == 0);
    in = (struct policy_info){.schedule = POLICY_PREFILL_ONLY};
    CHECK(policy_slot_limit(&in, 64) == 0);
    in = (struct policy_info){.schedule = POLICY_NEVER};
    CHECK(policy_slot_limit(&in, 64) == 0);
}

/* A sequence through the run's schedule (sched_begin .. sched_end): its
 * prompt of n_prompt, n_new tokens one per forward, each selection bringing
 * a head holding >= budget back to it.  The forwards that selected go to
 * at[] (-1: the prompt's); returns how many, *most the most slots held. */
static int run_sched(const struct policy_info *in, int budget, int n_prompt, int n_new, int *at,
                     int *most)
{
    struct sched_run r;
    struct sched_seq s;
    struct eb_err e = {0};
    sched_run_init(&r, in);
    CHECK(sched_begin(&r, &s, "t", &e) == 0);
    int n = 0, len = n_prompt;
    *most = len;
    if (sched_step(&r, &s, n_prompt, 1)) {
        at[n++] = -1;
        if (len >= budget) len = budget;
    }
    for (int t = 1; t <= n_new; t++) {
        len++;
        if (len > *most) *most = len;
        CHECK(sched_selects_next(&r, &s, n_prompt + t - 1) == ((t % in->divide_length) == 0));
        if (sched_step(&r, &s, n_prompt + t, 0)) {
            at[n++] = t;
            if (len >= budget) len = budget;
        }
    }
    sched_end(&r, &s);
    return n;
}

/* PrefillDecodingPress: the prompt's forward, then every divide_length-th
 * decoding forward counted from the prompt's end; the slots held stay within
 * policy_slot_limit, as glue sizes the pool (sched_slot_limit). */
static void test_prefill_decoding(void)
{
    struct policy_info in = {.schedule = POLICY_PREFILL_DECODING, .divide_length = 5};
    int at[64], most = 0, n = run_sched(&in, 12, 30, 22, at, &most);
    CHECK(n == 5 && at[0] == -1 && at[1] == 5 && at[2] == 10 && at[4] == 20);
    struct sched_run r;
    sched_run_init(&r, &in);
    CHECK(sched_slot_limit(&r, 12) == policy_slot_limit(&in, 12));
    CHECK(most <= 30 && policy_slot_limit(&in, 12) >= 12 + 5);
    n = run_sched(&in, 12, 10, 22, at, &most);   /* a prompt under the budget */
    CHECK(n == 5 && most <= policy_slot_limit(&in, 12));
    /* decoding alone never at the prompt, and no bound (the prompt stays whole) */
    in.schedule = POLICY_DECODING;
    n = run_sched(&in, 12, 30, 22, at, &most);
    CHECK(n == 4 && at[0] == 5);
    sched_run_init(&r, &in);
    CHECK(sched_slot_limit(&r, 12) == 0);
    struct eb_err e = {0};
    in = (struct policy_info){.schedule = POLICY_PREFILL_DECODING};
    CHECK(policy_info_check(&in, "t", &e) != 0);   /* divide_length 0 */
}

static void test_checks(void)
{
    struct eb_err e = {0};
    struct policy_info never = {.schedule = POLICY_NEVER}, d = divide(128, 8);
    /* the one budget check: (ops, params, keeps_all, window, budget) */
    CHECK(policy_budget_check(NULL, NULL, NULL, 1, never.window, 0, &e) == 0);
    CHECK(policy_budget_check(NULL, NULL, NULL, 1, never.window, -1, &e) == -1);
    CHECK(policy_budget_check(NULL, NULL, NULL, 0, d.window, 0, &e) == -1 &&
          strstr(e.msg, "needs a budget > 0"));
    CHECK(policy_budget_check(NULL, NULL, NULL, 0, d.window, 8, &e) == -1 &&
          strstr(e.msg, "must exceed the 8 slots"));
    CHECK(policy_budget_check(NULL, NULL, NULL, 0, d.window, 9, &e) == 0);
    CHECK(policy_budget_check(NULL, NULL, NULL, 0, -1, 8, &e) == 0); /* window not known yet */
    /* a policy's own rule, from its parameters alone (VaSE: a multiple of its window) */
    const struct policy_entry *vase = policy_registry_find("vase-attnv");
    struct policy_params vp;
    CHECK(vase && policy_parse("vase-attnv:window=8", &vase, &vp, &e) == 0);
    CHECK(policy_budget_check("vase-attnv", vase->ops, &vp, 0, -1, 36, &e) == -1 && strstr(e.msg, "multiple"));
    CHECK(policy_budget_check("vase-attnv", vase->ops, &vp, 0, -1, 40, &e) == 0);
    CHECK(policy_info_check(&d, "rkv", &e) == 0);
    struct policy_info bad = divide(0, 8);
    CHECK(policy_info_check(&bad, "x", &e) == -1 && strstr(e.msg, "divide_length"));
    struct policy_info q = {.needs = POLICY_NEED_RECENT_Q, .q_window = 0};
    CHECK(policy_info_check(&q, "x", &e) == -1 && strstr(e.msg, "window of 0"));
}

/* A registry policy: its create fills the info the arithmetic reads. */
static void test_registry_policy(void)
{
    struct policy_model m = {.n_layer = 2, .n_head = 4, .n_kv = 2, .head_dim = 8};
    struct policy *p = NULL;
    struct eb_err e = {0};
    CHECK_MSG(policy_create("rkv:divide_length=32", &m, &p, &e) == 0, "%s", e.msg);
    if (!p) return;
    CHECK(p->info.schedule == POLICY_DIVIDE);
    CHECK(policy_slot_limit(&p->info, 100) == 133);
    CHECK(policy_check_budget(p, p->info.window, &e) == -1);
    CHECK(policy_check_budget(p, 100, &e) == 0);
    policy_free(p);
}

int main(void)
{
    RUN(test_compresses_at);
    RUN(test_slot_limit_bounds_divide);
    RUN(test_slot_limit_other_schedules);
    RUN(test_prefill_decoding);
    RUN(test_checks);
    RUN(test_registry_policy);
    return test_summary("schedule");
}
