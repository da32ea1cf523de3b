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

size_t select_batch_shared_floats(int n_runs, int stride)
{
    return (size_t)n_runs * stride * (sizeof(double) / sizeof(float));
}

size_t select_batch_pad_floats(int n_units, int stride)
{
    return ((size_t)n_units * stride + sizeof(float) - 1) / sizeof(float);
}

int select_batch_uses_imp(const struct batch_plan *plan)
{
    return plan->score == BATCH_SCORE_IMP || plan->score == BATCH_SCORE_MIX ||
           plan->shared == BATCH_SHARED_IMP_MEAN;
}

int select_batch_uses_red(const struct batch_plan *plan)
{
    return plan->score == BATCH_SCORE_MIX;
}

int select_batch_z_rows(const struct batch_plan *plan, int n_seq, int n_layer, int n_kv)
{
    if (plan->shared != BATCH_SHARED_NONE) return n_seq * n_layer;
    return plan->host_scores ? n_seq * n_layer * n_kv : 0;
}

/* The plan reads recent queries. */
static int uses_q(const struct batch_plan *plan)
{
    return select_batch_uses_imp(plan) || plan->shared == BATCH_SHARED_LAST_QUERY;
}

int select_batch_backend_ok(const struct backend *be, const struct batch_plan *plan)
{
    if (!be->upload || !be->batch_topk) return 0;
    int z_rows = plan->shared != BATCH_SHARED_NONE || plan->host_scores;
    if ((plan->score == BATCH_SCORE_Z) != z_rows) return 0;
    if (plan->shared != BATCH_SHARED_NONE && plan->host_scores) return 0;
    if (select_batch_uses_imp(plan) && !be->window_scores_batch) return 0;
    if (select_batch_uses_red(plan) && !be->key_redundancy_batch) return 0;
    if (plan->shared == BATCH_SHARED_IMP_MEAN && !be->head_mean_batch) return 0;
    return plan->shared != BATCH_SHARED_LAST_QUERY || be->last_query_attn_batch;
}

int select_batch_plan_of(const struct scorer *sc, int n_recent, struct batch_plan *out)
{
    *out = (struct batch_plan){.n_recent = n_recent, .evict_above = sc->evict_above,
                               .order = sc->order, .use_pads = sc->use_pads,
                               .pad_keep = sc->pads == PAD_KEEP, .pad_score = sc->pad_score,
                               .bf16 = sc->dtype == SCORE_BF16,
                               .score = sc->per_layer ? BATCH_SCORE_Z : BATCH_SCORE_AGE};
    return 1;
}

/* The descriptor of (layer l, kv head h) of job sequence s, unit u; z: its
 * run's shared row, its own host-written row, or NULL. */
static int make_unit(const struct batch_plan *plan, struct batch_job *job, int s, int l, int h,
                     int u, double *z, int budget, struct eb_err *e)
{
    const struct batch_seq *bs = &job->seqs[s];
    const struct cache_view *cv = bs->cv;
    int head = l * cv->n_kv + h, len = cache_view_len(cv, l, h);
    int n_cand = len - plan->n_recent, q = uses_q(plan);
    int rows = plan->imp.window < bs->q_count ? plan->imp.window : bs->q_count;
    if (q && (!bs->q_ring || rows < 1)) return eb_fail(e, "no recent queries recorded");
    if (q && (n_cand < 1 || n_cand > len))
        return eb_fail(e, "%d candidates for a head of %d slots", n_cand, len);
    size_t row = kv_type_bytes(bs->kv_type) * cv->head_dim;
    if (plan->host_scores &&
        plan->host_scores(job->policy, bs->seq, cv, l, h, n_cand, job->z_host + (z - job->z), e))
        return -1;
    /* a padded cache's flags, staged for the one upload (select_batch_run) */
    const unsigned char *pad = bs->padded ? cache_view_pad(cv, l, h) : NULL;
    unsigned char *pad_dev = NULL;
    if (pad) {
        if (!job->pad || !job->pad_host) return eb_fail(e, "a padded cache without pad rows");
        memcpy(job->pad_host + (size_t)u * job->stride, pad, (size_t)len);
        pad_dev = job->pad + (size_t)u * job->stride;
        job->n_padded++;
    }
    float *add = NULL;
    if (plan->add_row) {
        float *host = job->add_host + (size_t)u * job->stride;
        memset(host, 0, (size_t)job->stride * sizeof *host);
        if (plan->add_row(job->policy, bs->seq, cv, l, h, n_cand, host, e)) return -1;
        add = job->add + (size_t)u * job->stride;
    }
    job->units_host[u] = (struct score_unit){
        .k = (const char *)bs->k[l] + (size_t)h * cv->capacity * row,
        .q = q ? bs->q_ring[l] : NULL,
        .imp = job->imp ? job->imp + (size_t)u * job->stride : NULL, /* only what the plan uses */
        .red = job->red ? job->red + (size_t)u * job->stride : NULL,
        .keep = job->keep_dev + ((size_t)s * cv->n_layer * cv->n_kv + head) * job->stride,
        .z = z, .add = add,
        .pad = pad_dev,
        .kv_type = bs->kv_type, .kv_head = h, .len = len, .n_cand = n_cand,
        .n_select = budget - plan->n_recent, .n_q = q ? rows : 0,
        .q_ring = bs->q_ring_rows,
        .q_first = q ? (bs->q_next - rows + bs->q_ring_rows) % bs->q_ring_rows : 0};
    job->n_keep[(size_t)s * cv->n_layer * cv->n_kv + head] = budget;
    return 0;
}

/* Layer l of a per-layer plan: one run of units, its kv heads, sharing the
 * run's z row, when the layer is gated (select.c's rule: the heads hold
 * the same length, gated as one). */
static int make_run(const struct batch_plan *plan, struct batch_job *job, int s, int l, int *u,
                    int *n_runs, int budget, struct eb_err *e)
{
    const struct cache_view *cv = job->seqs[s].cv;
    int len = cache_view_len(cv, l, 0);
    for (int h = 1; h < cv->n_kv; h++)
        if (cache_view_len(cv, l, h) != len)
            return eb_fail(e, "layer %d: kv heads hold different lengths (%d, %d) but the policy "
                              "keeps one set per layer", l, len, cache_view_len(cv, l, h));
    if (plan->evict_above ? len <= budget : len < budget) return 0;
    double *z = job->z + (size_t)(*n_runs)++ * job->stride;
    for (int h = 0; h < cv->n_kv; h++)
        if (make_unit(plan, job, s, l, h, (*u)++, z, budget, e)) return -1;
    return 0;
}

/* The units of every gated head; job->n_units set. */
static int make_units(const struct batch_plan *plan, struct batch_job *job, int budget,
                      struct eb_err *e)
{
    int u = 0, n_runs = 0, shared = plan->shared != BATCH_SHARED_NONE;
    job->n_padded = 0;
    if ((shared || plan->host_scores) && !job->z)
        return eb_fail(e, "a plan ranking rows of scores without them");
    if (plan->host_scores && !job->z_host)
        return eb_fail(e, "a plan with host scores without their host rows");
    if (plan->add_row && (!job->add || !job->add_host))
        return eb_fail(e, "a plan with added scores without their rows");
    for (int s = 0; s < job->n_seq; s++) {
        const struct cache_view *cv = job->seqs[s].cv;
        int heads = cv->n_layer * cv->n_kv;
        for (int i = 0; i < heads; i++) job->n_keep[(size_t)s * heads + i] = -1;
        for (int l = 0; l < cv->n_layer; l++) {
            for (int h = 0; h < cv->n_kv; h++)
                if (cache_view_len(cv, l, h) > job->stride)
                    return eb_fail(e, "a head of %d slots, more than %d",
                                   cache_view_len(cv, l, h), job->stride);
            if (shared) {
                if (make_run(plan, job, s, l, &u, &n_runs, budget, e)) return -1;
                continue;
            }
            for (int h = 0; h < cv->n_kv; h++) {
                int len = cache_view_len(cv, l, h);
                if (plan->evict_above ? len <= budget : len < budget) continue;
                double *z = plan->host_scores ? job->z + (size_t)u * job->stride : NULL;
                if (make_unit(plan, job, s, l, h, u++, z, budget, e)) return -1;
            }
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
    if (!select_batch_backend_ok(be, plan))
        return eb_fail(e, "the %s backend lacks a batched op this plan needs", be->name);
    job->score_s = job->select_s = 0.0;
    if (job->n_seq < 1) return 0;
    double t0 = clock_now_s();
    if (make_units(plan, job, budget, e)) return -1;
    if (job->n_units == 0) return 0;
    const struct cache_view *cv = job->seqs[0].cv;
    be->upload(be, (float *)job->units, (const float *)job->units_host,
               select_batch_unit_floats(job->n_units));
    if (plan->add_row)
        be->upload(be, job->add, job->add_host, select_batch_score_floats(job->n_units,
                                                                          job->stride));
    if (plan->host_scores)
        be->upload(be, (float *)job->z, (const float *)job->z_host,
                   select_batch_shared_floats(job->n_units, job->stride));
    if (job->n_padded)
        be->upload(be, (float *)job->pad, (const float *)job->pad_host,
                   select_batch_pad_floats(job->n_units, job->stride));
    int max_len = 1, max_q = 0;
    for (int u = 0; u < job->n_units; u++) {
        if (job->units_host[u].len > max_len) max_len = job->units_host[u].len;
        if (job->units_host[u].n_q > max_q) max_q = job->units_host[u].n_q;
    }
    struct score_batch_args a = {
        .units = job->units, .n_units = job->n_units, .run = cv->n_kv, .max_len = max_len,
        .max_q = max_q,
        .n_head = cv->n_head, .n_kv = cv->n_kv,
        .head_dim = cv->head_dim, .scale = 1.0f / sqrtf((float)cv->head_dim),
        .softmax_all = plan->imp.softmax_all, .gqa = plan->imp.gqa,
        .kernel = plan->imp.kernel > 1 ? plan->imp.kernel : 1, .pool = plan->imp.pool,
        .threshold = plan->threshold, .no_match_zero_col0 = plan->no_match_zero_col0,
        .score = plan->score, .lambda = plan->lambda,
        .by_position = plan->order == KEEP_BY_POSITION, .use_pads = plan->use_pads,
        .pad_keep = plan->pad_keep, .pad_score = plan->pad_score, .bf16 = plan->bf16};
    if (select_batch_uses_imp(plan) && be->window_scores_batch(be, &a))
        return eb_fail(e, "batched window attention scores failed");
    if (select_batch_uses_red(plan) && be->key_redundancy_batch(be, &a))
        return eb_fail(e, "batched key redundancy failed");
    if (plan->shared == BATCH_SHARED_IMP_MEAN && be->head_mean_batch(be, &a))
        return eb_fail(e, "batched mean over a layer's heads failed");
    if (plan->shared == BATCH_SHARED_LAST_QUERY && be->last_query_attn_batch(be, &a))
        return eb_fail(e, "batched last-query attention failed");
    if (job->sync && be->sync) be->sync(be);
    double t1 = clock_now_s();
    job->score_s = t1 - t0;
    if (be->batch_topk(be, &a)) return eb_fail(e, "batched top-k failed");
    if (job->sync && be->sync) be->sync(be);
    job->select_s = clock_now_s() - t1;
    return 0;
}

void select_batch_kept(const struct batch_plan *plan, const struct batch_job *job,
                       const int *keep)
{
    if (!plan->kept) return;
    for (int s = 0; s < job->n_seq; s++) {
        const struct cache_view *cv = job->seqs[s].cv;
        for (int l = 0; l < cv->n_layer; l++)
            for (int h = 0; h < cv->n_kv; h++) {
                size_t head = ((size_t)s * cv->n_layer + l) * cv->n_kv + h;
                if (job->n_keep[head] >= 0)
                    plan->kept(job->policy, job->seqs[s].seq, l, h,
                               keep + head * job->stride, job->n_keep[head]);
            }
    }
}
