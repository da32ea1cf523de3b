/* select_batch.c - the shared selector for many sequences (select_batch.h). */
#include "select_batch.h"

#include <math.h>
#include <string.h>

#include "../util/clock.h"

size_t select_batch_unit_floats(int n_units)
{
    return (size_t)n_units * (sizeof(struct score_unit) / sizeof(float));
}

size_t select_batch_score_floats(int n_units, int stride)
{
    return (size_t)n_units * stride;
}

int select_batch_backend_ok(const struct backend *be, const struct batch_plan *plan)
{
    if (!be->upload || !be->batch_topk) return 0;
    if (plan->score == BATCH_SCORE_IMP || plan->score == BATCH_SCORE_MIX)
        if (!be->window_scores_batch) return 0;
    return plan->score != BATCH_SCORE_MIX || be->key_redundancy_batch;
}

int select_batch_plan_of(const struct scorer *sc, int n_recent, struct batch_plan *out)
{
    if (sc->per_layer || sc->dtype != SCORE_F32) return 0;
    *out = (struct batch_plan){.n_recent = n_recent, .evict_above = sc->evict_above,
                               .order = sc->order};
    return 1;
}

/* The descriptor of (layer l, kv head h) of job sequence s, unit u. */
static int make_unit(const struct batch_plan *plan, struct batch_job *job, int s, int l, int h,
                     int u, int budget, struct eb_err *e)
{
    const struct batch_seq *bs = &job->seqs[s];
    const struct cache_view *cv = bs->cv;
    int head = l * cv->n_kv + h, len = cache_view_len(cv, l, h);
    int n_cand = len - plan->n_recent, uses_q = plan->score == BATCH_SCORE_IMP ||
                                                plan->score == BATCH_SCORE_MIX;
    int rows = plan->imp.window < bs->q_count ? plan->imp.window : bs->q_count;
    if (uses_q && (!bs->q_ring || rows < 1)) return eb_fail(e, "no recent queries recorded");
    if (uses_q && (n_cand < 1 || n_cand > len))
        return eb_fail(e, "%d candidates for a head of %d slots", n_cand, len);
    size_t row = kv_type_bytes(bs->kv_type) * cv->head_dim;
    job->units_host[u] = (struct score_unit){
        .k = (const char *)bs->k[l] + (size_t)h * cv->capacity * row,
        .q = uses_q ? bs->q_ring[l] : NULL,
        .imp = job->imp ? job->imp + (size_t)u * job->stride : NULL, /* only what the plan uses */
        .red = job->red ? job->red + (size_t)u * job->stride : NULL,
        .keep = job->keep_dev + ((size_t)s * cv->n_layer * cv->n_kv + head) * job->stride,
        .kv_type = bs->kv_type, .kv_head = h, .len = len, .n_cand = n_cand,
        .n_select = budget - plan->n_recent, .n_q = uses_q ? rows : 0,
        .q_ring = bs->q_ring_rows,
        .q_first = uses_q ? (bs->q_next - rows + bs->q_ring_rows) % bs->q_ring_rows : 0};
    job->n_keep[(size_t)s * cv->n_layer * cv->n_kv + head] = budget;
    return 0;
}

/* The units of every gated head; job->n_units set. */
static int make_units(const struct batch_plan *plan, struct batch_job *job, int budget,
                      struct eb_err *e)
{
    int u = 0;
    for (int s = 0; s < job->n_seq; s++) {
        const struct cache_view *cv = job->seqs[s].cv;
        int heads = cv->n_layer * cv->n_kv;
        for (int i = 0; i < heads; i++) job->n_keep[(size_t)s * heads + i] = -1;
        for (int l = 0; l < cv->n_layer; l++)
            for (int h = 0; h < cv->n_kv; h++) {
                int len = cache_view_len(cv, l, h);
                if (len > job->stride) return eb_fail(e, "a head of %d slots, more than %d", len,
                                                      job->stride);
                if (plan->evict_above ? len <= budget : len < budget) continue;
                if (make_unit(plan, job, s, l, h, u++, budget, e)) return -1;
            }
    }
    job->n_units = u;
    return 0;
}

int select_batch_run(const struct batch_plan *plan, struct batch_job *job, int budget,
                     struct eb_err *e)
{
    if (plan->n_recent < 0 || plan->n_recent > budget)
        return eb_fail(e, "budget %d cannot hold the %d most recent slots", budget,
                       plan->n_recent);
    struct backend *be = job->be;
    job->score_s = job->select_s = 0.0;
    if (job->n_seq < 1) return 0;
    double t0 = clock_now_s();
    if (make_units(plan, job, budget, e)) return -1;
    if (job->n_units == 0) return 0;
    const struct cache_view *cv = job->seqs[0].cv;
    be->upload(be, (float *)job->units, (const float *)job->units_host,
               select_batch_unit_floats(job->n_units));
    int max_len = 1;
    for (int u = 0; u < job->n_units; u++)
        if (job->units_host[u].len > max_len) max_len = job->units_host[u].len;
    struct score_batch_args a = {
        .units = job->units, .n_units = job->n_units, .max_len = max_len, .n_head = cv->n_head, .n_kv = cv->n_kv,
        .head_dim = cv->head_dim, .scale = 1.0f / sqrtf((float)cv->head_dim),
        .softmax_all = plan->imp.softmax_all, .gqa = plan->imp.gqa,
        .kernel = plan->imp.kernel > 1 ? plan->imp.kernel : 1, .pool = plan->imp.pool,
        .threshold = plan->threshold, .no_match_zero_col0 = plan->no_match_zero_col0,
        .score = plan->score, .lambda = plan->lambda,
        .by_position = plan->order == KEEP_BY_POSITION};
    if ((a.score == BATCH_SCORE_IMP || a.score == BATCH_SCORE_MIX) &&
        be->window_scores_batch(be, &a))
        return eb_fail(e, "batched window attention scores failed");
    if (a.score == BATCH_SCORE_MIX && be->key_redundancy_batch(be, &a))
        return eb_fail(e, "batched key redundancy failed");
    if (job->sync && be->sync) be->sync(be);
    double t1 = clock_now_s();
    job->score_s = t1 - t0;
    if (be->batch_topk(be, &a)) return eb_fail(e, "batched top-k failed");
    if (job->sync && be->sync) be->sync(be);
    job->select_s = clock_now_s() - t1;
    return 0;
}
