/* rpc.c - Reasoning Path Compression (../shared/specs/vase_beaconkv.md §5,
 * from the official code), BeaconKV's main baseline:
 *
 *   every P generated tokens, the R most recent (post-RoPE) queries attend to
 *   the generated keys except the last R (softmax over that range only; the
 *   prompt is excluded and always kept), summed over the queries, averaged
 *   over every query head of the layer (aggregation=all: one token set shared
 *   by the layer's kv heads) or over each GQA group (aggregation=group),
 *   avg-pooled with kernel 7; the top (n + 1) * P / c are kept (n = earlier
 *   compressions) in position order, with the prompt and the last R tokens.
 *
 * RPC's budget is a ratio and grows with the trace; budget_mode=fixed is the
 * fixed-budget adaptation BeaconKV presumably compares against [spec: INFER]:
 * keep B - prompt - R generated tokens.  The run's budget is ignored in ratio
 * mode.  The trigger is this policy's own (POLICY_EVERY_STEP): the count of
 * generated tokens, first at P + R as the released code does (trigger=released,
 * rpc/qwen2_custom.py), then every P; trigger=multiple compresses at multiples
 * of P.  The attention and keep-set steps are attend.c (shared with BeaconKV). */
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "policies.h"
#include "score.h"

/* The values of rpc_params (param_def.offset). */
struct rpc_params {
    int interval;
    int selector;
    double ratio;
    int kernel;
    int aggregation;
    int budget_mode;
    int trigger;
};

const struct param_def rpc_params[] = {
    {"interval", PARAM_INT, 1024, 1, 1 << 24, NULL, "P: compress every P generated tokens",
     offsetof(struct rpc_params, interval)},
    {"selector", PARAM_INT, 32, 1, 4096, NULL,
     "R: recent queries that score; the last R tokens are kept",
     offsetof(struct rpc_params, selector)},
    {"ratio", PARAM_FLOAT, 4, 1, 1024, NULL, "c: keep (n + 1) * P / c generated tokens",
     offsetof(struct rpc_params, ratio)},
    {"kernel", PARAM_INT, 7, 1, 63, NULL, "avg-pool kernel (odd; 1: none)",
     offsetof(struct rpc_params, kernel)},
    {"aggregation", PARAM_CHOICE, 0, 0, 1, "all|group",
     "mean over every query head of the layer (one set per layer) or per GQA group",
     offsetof(struct rpc_params, aggregation)},
    {"budget_mode", PARAM_CHOICE, 0, 0, 1, "ratio|fixed",
     "RPC's growing ratio budget, or keep B - prompt - R generated tokens",
     offsetof(struct rpc_params, budget_mode)},
    {"trigger", PARAM_CHOICE, 0, 0, 1, "released|multiple",
     "first compression at P + R generated tokens then every P (released), or at multiples of P",
     offsetof(struct rpc_params, trigger)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

struct rpc_seq {
    int n_prompt, n_comp;
};

struct rpc {
    int interval, selector, kernel, group_agg, fixed;
    int first;               /* generated tokens at the first compression */
    double ratio;
    struct policy_model m;
    struct seq_table seqs;
    struct attend_scratch w; /* qh: the selector rows [R][n_head * head_dim]; rows: [R * group] */
};

static int rpc_create(const struct policy_params *p, const struct policy_model *m, void **self,
                      struct policy_info *info, struct eb_err *e)
{
    const struct rpc_params *prm = policy_typed(p);
    int kernel = prm->kernel;
    if (kernel % 2 == 0) return eb_fail(e, "kernel=%d: the pooling kernel must be odd", kernel);
    struct rpc *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->interval = prm->interval;
    s->selector = prm->selector;
    s->ratio = prm->ratio;
    s->kernel = kernel;
    s->group_agg = prm->aggregation == 1;
    s->fixed = prm->budget_mode == 1;
    /* Released rpc/qwen2_custom.py compresses when the generated tokens
     * beyond the kept n*T + R reach P: first at P + R. */
    s->first = s->interval + (prm->trigger == 0 ? s->selector : 0);
    s->m = *m;
    size_t n_q = (size_t)s->selector * m->n_head * m->head_dim;
    if (attend_scratch_open(&s->w, n_q, n_q, e)) {
        free(s);
        return -1;
    }
    *info = (struct policy_info){
        .needs = POLICY_NEED_RECENT_Q,
        .q_window = s->selector,
        .window = s->selector,
        .schedule = POLICY_EVERY_STEP,
        /* ratio: the budget grows with the trace; fixed: B + P at the peak */
        .slot_slack = s->fixed ? s->interval : -1,
    };
    *self = s;
    return 0;
}

static void rpc_destroy(void *self)
{
    struct rpc *s = self;
    if (!s) return;
    attend_scratch_free(&s->w);
    seq_table_free(&s->seqs, free);
    free(s);
}

static int rpc_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct rpc_seq *q = seq_table_fresh(&((struct rpc *)self)->seqs, seq, sizeof *q, free, e);
    if (!q) return -1;
    q->n_prompt = sv->n_prompt;
    return 0;
}

static void rpc_end(void *self, int seq)
{
    struct rpc *s = self;
    seq_table_drop(&s->seqs, seq, free);
}

/* Sum over the selector rows and the group's query heads of the softmax over
 * the candidates [k0, k0 + n) of (l, h), added into out. */
static int group_sum(struct rpc *s, const struct cache_view *cv, int l, int h, int k0, int n,
                     int rows, double *out, struct eb_err *e)
{
    int nq = group_query_rows(s->w.rows, s->w.qh, rows, cv->n_head, cv->head_dim, h,
                              cv->n_head / cv->n_kv);
    return attend_reduce(&s->w.ab, cv, l, h, k0, n, s->w.rows, nq, 1, ATTEND_SUM, out, e);
}

/* Not on the shared selector (select.h): the released compress_kv protects
 * the whole prompt and the last R tokens, keeps a ratio budget that grows
 * with every compression, and compresses on its own P + R trigger, so
 * neither the len >= B gate nor a fixed recent window applies. */
static int rpc_select(void *self, int seq, const struct cache_view *cv, int budget,
                      struct keep_set *out, struct eb_err *e)
{
    struct rpc *s = self;
    keep_set_none(out);
    struct rpc_seq *q = seq_table_get(&s->seqs, seq);
    if (!q) return eb_fail(e, "sequence %d was not begun", seq);
    int generated = cv->next_pos - q->n_prompt, full = 0;
    for (int i = 0; i < cv->n_layer * cv->n_kv; i++)
        if (cv->len[i] >= cv->capacity) full = 1; /* the allocation forces it (long prompt) */
    int due = generated >= s->first && (generated - s->first) % s->interval == 0;
    if (cv->at_prefill || generated <= 0 || (!due && !full)) return 0;
    if (!cv->q || cv->n_q < 1) return eb_fail(e, "no recent queries recorded");
    int R = s->selector, rows = cv->n_q < R ? cv->n_q : R, d = cv->head_dim;
    int keep_n = s->fixed ? budget - q->n_prompt - R
                          : (int)((q->n_comp + 1) * (double)s->interval / s->ratio);
    if (keep_n < 0) keep_n = 0;
    for (int l = 0; l < cv->n_layer; l++) {
        cv->be->download(cv->be, s->w.qh,
                         cv->q[l] + (size_t)(cv->n_q - rows) * cv->n_head * d,
                         (size_t)rows * cv->n_head * d);
        /* aggregation=all needs the same candidate range in every head. */
        int len0 = cache_view_len(cv, l, 0), p0 = prompt_slots(cv, l, 0, q->n_prompt);
        int shared = !s->group_agg;
        for (int h = 1; h < cv->n_kv && shared; h++)
            shared = cache_view_len(cv, l, h) == len0 &&
                     prompt_slots(cv, l, h, q->n_prompt) == p0;
        if (shared) {
            int n = len0 - p0 - R;
            if (n <= keep_n) continue;
            if (attend_scratch_reserve(&s->w, n, e)) return -1;
            for (int j = 0; j < n; j++) s->w.acc[j] = 0.0;
            for (int h = 0; h < cv->n_kv; h++)
                if (group_sum(s, cv, l, h, p0, n, rows, s->w.acc, e)) return -1;
            for (int j = 0; j < n; j++) s->w.acc[j] /= (double)rows * cv->n_head;
        }
        for (int h = 0; h < cv->n_kv; h++) {
            int len = cache_view_len(cv, l, h), p = prompt_slots(cv, l, h, q->n_prompt);
            int n = len - p - R;
            if (n <= keep_n) continue;
            if (attend_scratch_reserve(&s->w, n, e)) return -1;
            if (shared) {
                memcpy(s->w.s, s->w.acc, (size_t)n * sizeof *s->w.s);
            } else {
                for (int j = 0; j < n; j++) s->w.s[j] = 0.0;
                if (group_sum(s, cv, l, h, p, n, rows, s->w.s, e)) return -1;
                int group = cv->n_head / cv->n_kv;
                for (int j = 0; j < n; j++) s->w.s[j] /= (double)rows * group;
            }
            score_avg_pool_inplace(s->w.s, s->w.tmp, n, s->kernel);
            int k = keep_prompt_topk_recent(&s->w.sb, s->w.s, p, n, keep_n, len,
                                            keep_set_head(out, l, h), e);
            if (k < 0) return -1;
            out->n_keep[l * cv->n_kv + h] = k;
        }
    }
    q->n_comp++;
    return 0;
}

/* policy_ops.window_of: the slots always kept. */
static int rpc_window_of(const void *prm)
{
    return ((const struct rpc_params *)prm)->selector;
}

const struct policy_ops rpc_ops = {
    .name = "rpc",
    .create = rpc_create,
    .window_of = rpc_window_of,
    .destroy = rpc_destroy,
    .begin_sequence = rpc_begin,
    .end_sequence = rpc_end,
    .select = rpc_select,
};
