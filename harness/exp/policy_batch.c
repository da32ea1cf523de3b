/* policy_batch.c - the whole batch's compression (policy_glue.h,
 * policy_glue_flush): on_step queues each due sequence whose policy has a
 * batch plan (policies/select_batch.h); after_step selects for all of them
 * with the backend's batched ops and compacts them with one gather per
 * layer (kvcache_compact_batch).  The keep indices come to the host once per
 * compression, for the caches' host mirrors and the retention record.
 *
 * Backend scratch (be->alloc, grown to the largest batch seen, bounded by
 * policy_glue_scratch_bytes): the score unit descriptors, the importance
 * and redundancy rows, the rows of doubles (per-layer scores, H2O's host
 * scores) and the added rows (SkipKV) a plan asks for, the pad flags of
 * left-padded caches, the keep indices,
 * the gather descriptors and the gather's staging. */
#include "harness/exp/policy_glue_priv.h"
#include "model/model.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

/* ---- scratch ---- */

static void dev_free(struct backend *be, void *p)
{
    if (p) be->free(be, p);
}

static void free_buffers(struct policy_glue *g)
{
    struct glue_batch *b = &g->bt;
    dev_free(g->be, b->units);
    dev_free(g->be, b->imp);
    dev_free(g->be, b->red);
    dev_free(g->be, b->z);
    dev_free(g->be, b->add);
    dev_free(g->be, b->pad);
    dev_free(g->be, b->keep_dev);
    dev_free(g->be, b->gunits);
    dev_free(g->be, b->gscratch);
    free(b->units_host);
    free(b->add_host);
    free(b->z_host);
    free(b->pad_host);
    free(b->keep);
    free(b->n_keep);
    free(b->gunits_host);
    free(b->bseq);
    free(b->cv);
    free(b->cseq);
    free(b->freed);
    b->units = b->units_host = NULL;
    b->imp = b->red = b->gscratch = b->add = b->add_host = NULL;
    b->z = b->z_host = NULL;
    b->pad = b->pad_host = NULL;
    b->keep_dev = b->keep = b->n_keep = NULL;
    b->gunits = b->gunits_host = NULL;
    b->bseq = NULL;
    b->cv = NULL;
    b->cseq = NULL;
    b->freed = NULL;
    b->n_cap = b->stride_cap = 0;
    b->gather_cap = 0;
}

/* Floats of each backend buffer for n sequences of stride slots per head. */
struct batch_sizes {
    size_t units, imp, red, z, add, pad, keep, gunits, gscratch, unit_floats;
};

static struct batch_sizes sizes_of(const struct batch_plan *plan, int n_layer, int n_kv,
                                   int head_dim, int n, int stride, int budget)
{
    int heads = n * n_layer * n_kv;
    /* Every selected head keeps budget slots; f32 rows are the widest. */
    size_t kept = (size_t)(budget < stride ? budget : stride);
    struct batch_sizes z = {
        .units = select_batch_unit_floats(heads),
        .imp = select_batch_uses_imp(plan) ? select_batch_score_floats(heads, stride) : 0,
        .red = select_batch_uses_red(plan) ? select_batch_score_floats(heads, stride) : 0,
        .z = select_batch_shared_floats(select_batch_z_rows(plan, n, n_layer, n_kv), stride),
        .add = plan->add_row ? select_batch_score_floats(heads, stride) : 0,
        .pad = select_batch_pad_floats(heads, stride),
        .keep = (size_t)heads * stride,
        .gunits = kvcache_batch_units_floats(n_layer, n_kv, n),
        .unit_floats = kept * head_dim,
    };
    z.gscratch = (size_t)n * n_kv * z.unit_floats;
    return z;
}

static int dev_alloc(struct backend *be, size_t n, void **out)
{
    *out = NULL;
    if (n == 0) return 0;
    *out = be->alloc(be, n);
    return *out ? 0 : -1;
}

/* Room for n sequences of stride slots per head. */
static int reserve(struct policy_glue *g, int n, int stride, struct eb_err *e)
{
    struct glue_batch *b = &g->bt;
    if (n <= b->n_cap && stride <= b->stride_cap) return 0;
    if (n < b->n_cap) n = b->n_cap;
    if (stride < b->stride_cap) stride = b->stride_cap;
    free_buffers(g);
    struct batch_sizes z = sizes_of(&b->plan, g->pm.n_layer, g->pm.n_kv, g->pm.head_dim, n,
                                    stride, g->budget);
    size_t heads = (size_t)n * g->pm.n_layer * g->pm.n_kv;
    struct backend *be = g->be;
    if (dev_alloc(be, z.units, (void **)&b->units) || dev_alloc(be, z.imp, (void **)&b->imp) ||
        dev_alloc(be, z.red, (void **)&b->red) || dev_alloc(be, z.z, (void **)&b->z) ||
        dev_alloc(be, z.add, (void **)&b->add) || dev_alloc(be, z.pad, (void **)&b->pad) ||
        dev_alloc(be, z.keep, (void **)&b->keep_dev) ||
        dev_alloc(be, z.gunits, (void **)&b->gunits) ||
        dev_alloc(be, z.gscratch, (void **)&b->gscratch)) {
        free_buffers(g);
        return eb_fail_nomem(e, "policy glue: out of backend memory for the batch's compression "
                                "(%d sequences, %d slots)", n, stride);
    }
    b->units_host = malloc(heads * sizeof *b->units_host);
    if (z.add) b->add_host = malloc(z.add * sizeof *b->add_host);
    b->pad_host = malloc(z.pad * sizeof(float)); /* bytes, as the backend's floats hold them */
    if (b->plan.host_scores) b->z_host = malloc(z.z * sizeof(float)); /* doubles, as z */
    b->keep = malloc(heads * stride * sizeof *b->keep);
    b->n_keep = malloc(heads * sizeof *b->n_keep);
    b->gunits_host = malloc(heads * sizeof *b->gunits_host);
    b->bseq = malloc((size_t)n * sizeof *b->bseq);
    b->cv = malloc((size_t)n * sizeof *b->cv);
    b->cseq = malloc((size_t)n * sizeof *b->cseq);
    b->freed = malloc((size_t)n * sizeof *b->freed);
    if (!b->units_host || !b->pad_host || !b->keep || !b->n_keep || !b->gunits_host ||
        !b->bseq || !b->cv || !b->cseq || !b->freed || (z.add && !b->add_host) ||
        (b->plan.host_scores && !b->z_host)) {
        free_buffers(g);
        return eb_fail_nomem(e, "policy glue: out of memory for the batch's compression");
    }
    b->n_cap = n;
    b->stride_cap = stride;
    b->gather_cap = z.unit_floats;
    return 0;
}

size_t policy_glue_scratch_bytes(const struct policy *p, int budget,
                                 const struct model_config *c, int n_live, int max_slots)
{
    struct batch_plan plan;
    if (!p->ops->batch_plan || !p->ops->batch_plan(p->self, budget, &plan) || n_live < 1)
        return 0;
    struct batch_sizes z = sizes_of(&plan, c->n_layer, c->n_head_kv, c->head_dim, n_live,
                                    max_slots, budget);
    size_t parts[] = {z.units, z.imp, z.red, z.z, z.add, z.pad, z.keep, z.gunits, z.gscratch};
    size_t bytes = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i]) bytes += backend_alloc_bytes(parts[i]); /* as a rounding pool takes it */
    return bytes;
}

/* ---- the queue ---- */

/* 1 when this policy's selections and this backend batch. */
static int batch_possible(struct policy_glue *g)
{
    struct glue_batch *b = &g->bt;
    const struct policy_ops *ops = g->p->ops;
    return ops->batch_plan && ops->batch_plan(g->p->self, g->budget, &b->plan) &&
           g->be->kv_gather_batch && g->be->upload && g->be->download &&
           select_batch_backend_ok(g->be, &b->plan);
}

void glue_batch_init(struct policy_glue *g)
{
    memset(&g->bt, 0, sizeof g->bt);
    g->bt.on = batch_possible(g);
}

void glue_batch_free(struct policy_glue *g)
{
    free_buffers(g);
    free(g->bt.due);
}

void policy_glue_set_batch(struct policy_glue *g, int on)
{
    g->bt.on = on && batch_possible(g);
}

void policy_glue_time_phases(struct policy_glue *g, int on)
{
    g->bt.time_phases = on;
}

int glue_batch_wants(const struct policy_glue *g, const struct kvcache *c)
{
    /* A padded cache batches only where the backend's batched ops read the
     * pad flags (batch_pads). */
    return g->bt.on && (c->left_pad == 0 || g->be->batch_pads);
}

int glue_batch_queue(struct policy_glue *g, int seq, int token, int at_prefill,
                     struct kvcache *c, struct eb_err *e)
{
    struct glue_batch *b = &g->bt;
    struct glue_seq *s = &g->seqs[seq];
    if (s->queued) return eb_fail(e, "policy glue: sequence %d queued twice", seq);
    if (b->n_due == b->due_cap) {
        int cap = b->due_cap ? 2 * b->due_cap : 16;
        int *d = realloc(b->due, (size_t)cap * sizeof *d);
        if (!d) return eb_fail(e, "policy glue: out of memory");
        b->due = d;
        b->due_cap = cap;
    }
    b->due[b->n_due++] = seq;
    *s = (struct glue_seq){.n_steps = s->n_steps, .sched = s->sched, .queued = 1, .token = token,
                           .at_prefill = at_prefill, .cache = c};
    return 0;
}

/* inner's on_step for a queued sequence, deferred from glue_step. */
static int inner_step(struct policy_glue *g, int seq, struct eb_err *e)
{
    struct glue_seq *s = &g->seqs[seq];
    s->queued = 0;
    if (g->inner && g->inner->on_step)
        return g->inner->on_step(g->inner->ctx, seq, s->token, s->cache, e);
    return 0;
}

void glue_batch_drop(struct policy_glue *g, int seq)
{
    struct glue_batch *b = &g->bt;
    if (seq < 0 || seq >= g->seqs_cap || !g->seqs[seq].queued) return;
    int m = 0;
    for (int i = 0; i < b->n_due; i++)
        if (b->due[i] != seq) b->due[m++] = b->due[i];
    b->n_due = m;
    /* Its cache is still there (generate frees it after end_sequence): its
     * last selection runs alone, as it would have in on_step, so the counts
     * and the retention record do not depend on when a compression runs.
     * end_sequence cannot fail: the next flush reports an error. */
    struct glue_seq *s = &g->seqs[seq];
    struct eb_err *e = b->failed ? &(struct eb_err){0} : &b->err;
    double t0 = clock_now_s();
    int rc = glue_run_select(g, seq, s->cache, s->at_prefill, e);
    g->st.policy_s += clock_now_s() - t0;
    if (rc == 0) rc = inner_step(g, seq, e);
    else s->queued = 0;
    if (rc) b->failed = 1;
}

/* ---- the compression ---- */

/* Views of the queued sequences; the largest capacity into *stride. */
static int make_views(struct policy_glue *g, int *stride, struct eb_err *e)
{
    struct glue_batch *b = &g->bt;
    int cap = 0;
    for (int i = 0; i < b->n_due; i++)
        if (g->seqs[b->due[i]].cache->capacity > cap) cap = g->seqs[b->due[i]].cache->capacity;
    if (reserve(g, b->n_due, cap, e)) return -1;
    *stride = b->stride_cap;
    for (int i = 0; i < b->n_due; i++) {
        struct glue_seq *s = &g->seqs[b->due[i]];
        struct kvcache *c = s->cache;
        glue_cache_view(g, c, s->at_prefill, &b->cv[i]);
        b->bseq[i] = (struct batch_seq){.seq = b->due[i], .cv = &b->cv[i],
                                        .k = (const void *const *)c->k,
                                        .kv_type = c->type, .q_ring = c->q_ring,
                                        .q_ring_rows = c->q_window, .q_next = c->q_next,
                                        .q_count = c->q_count, .padded = c->left_pad > 0};
    }
    return 0;
}

/* Score and select on the backend; keep indices to the host once. */
static int device_selects(struct policy_glue *g, int stride, int *any, struct eb_err *e)
{
    struct glue_batch *b = &g->bt;
    int heads = g->pm.n_layer * g->pm.n_kv;
    struct batch_job job = {.be = g->be, .n_seq = b->n_due, .seqs = b->bseq, .stride = stride,
                            .units = b->units, .units_host = b->units_host, .imp = b->imp,
                            .red = b->red, .z = b->z, .z_host = b->z_host, .add = b->add,
                            .add_host = b->add_host, .pad = b->pad, .pad_host = b->pad_host,
                            .policy = b->plan.self ? b->plan.self : g->p->self,
                            .keep_dev = b->keep_dev,
                            .n_keep = b->n_keep, .sync = b->time_phases};
    if (select_batch_run(&b->plan, &job, g->budget, e)) return eb_wrap(e, g->p->name);
    g->st.score_s += job.score_s;
    g->st.select_s += job.select_s;
    *any = job.n_units > 0;
    if (*any) {
        g->be->download(g->be, (float *)b->keep, (const float *)b->keep_dev,
                        (size_t)b->n_due * heads * stride);
        select_batch_kept(&b->plan, &job, b->keep);
    }
    return 0;
}

/* Compact every queued cache; counts what was evicted. */
static int compact_all(struct policy_glue *g, int stride, struct eb_err *e)
{
    struct glue_batch *b = &g->bt;
    int heads = g->pm.n_layer * g->pm.n_kv;
    for (int i = 0; i < b->n_due; i++) {
        struct kvcache *c = g->seqs[b->due[i]].cache;
        b->cseq[i] = (struct kv_compact_seq){.c = c, .n_keep = b->n_keep + (size_t)i * heads,
                                             .keep = b->keep + (size_t)i * heads * stride,
                                             .keep_dev = b->keep_dev + (size_t)i * heads * stride,
                                             .stride = stride};
        long evicted = 0;
        for (int h = 0; h < heads; h++)
            if (b->cseq[i].n_keep[h] >= 0) evicted += c->len[h] - b->cseq[i].n_keep[h];
        if (glue_note_retention(g, b->due[i], c, b->cseq[i].n_keep, b->cseq[i].keep, stride, e))
            return -1;
        if (evicted > 0) g->st.compressions++;
        g->st.evicted_slots += evicted;
    }
    if (kvcache_compact_batch(g->be, b->cseq, b->n_due, b->gunits, b->gunits_host, b->gscratch,
                              b->gather_cap, b->freed, e))
        return eb_wrap(e, g->p->name);
    if (b->time_phases && g->be->sync) g->be->sync(g->be);
    return 0;
}

static int compress(struct policy_glue *g, struct eb_err *e)
{
    struct glue_batch *b = &g->bt;
    int stride, any = 1;
    if (make_views(g, &stride, e)) return -1;
    /* counted from here: growing the scratch is not the compression's work */
    unsigned long long calls0 = backend_count_calls(g->be);
    g->st.selections += b->n_due;
    if (device_selects(g, stride, &any, e)) return -1;
    double t1 = clock_now_s();
    if (!any) return 0; /* no head had reached the budget */
    if (compact_all(g, stride, e)) return -1;
    g->st.compact_s += clock_now_s() - t1;
    g->st.batch_compressions++;
    g->st.compress_calls += backend_count_calls(g->be) - calls0;
    return 0;
}

int policy_glue_flush(struct policy_glue *g, struct eb_err *e)
{
    struct glue_batch *b = &g->bt;
    if (b->failed) {
        b->failed = 0;
        *e = b->err;
        return -1;
    }
    if (b->n_due == 0) return 0;
    double t0 = clock_now_s();
    int rc = compress(g, e);
    g->st.policy_s += clock_now_s() - t0;
    /* inner's on_steps, deferred, now see the compacted caches */
    int n = b->n_due;
    b->n_due = 0;
    for (int i = 0; i < n; i++)
        if (rc == 0) rc = inner_step(g, b->due[i], e);
        else g->seqs[b->due[i]].queued = 0;
    return rc;
}
