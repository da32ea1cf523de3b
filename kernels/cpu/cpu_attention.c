/* cpu_attention.c - causal GQA attention of new queries over KV caches: the
 * whole batch of a layer in one parallel region (attention_layer), and the
 * per-sequence op (attention) as a batch of one.
 *
 * A unit is (sequence, kv head, query): the n_rep query heads sharing that kv
 * head are done together, so each K and V row is read once for all of them.
 * A unit's visible keys are cut into blocks of ATT_BLOCK; each block yields a
 * partial softmax (its max m, sum l and unnormalised output o), and a unit's
 * result is its blocks' partials merged left to right with the online-softmax
 * rule.  When there are fewer units than a few per thread (decode at small
 * batch over a long cache), the blocks of a unit are spread over the threads
 * and merged afterwards; otherwise a thread merges a unit's blocks as it goes.
 * Both give the same numbers, so results do not depend on the batch, its
 * order or the thread count.  Caches of every kv_type are read in place,
 * through the row kernels of cpu_kv.c (f32 accumulation).  Masked (pad)
 * slots take no part; a query that sees only pads outputs zeros.  A NaN or
 * +inf logit among a query head's visible keys makes its output and
 * probabilities NaN, as torch's softmax does (a NaN partial stays NaN through
 * the merge). */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ATT_BLOCK = 128 };

/* One sequence as the kernel sees it, for one layer. */
struct att_seq {
    const char *k, *v;          /* [n_kv][cap][head_dim] of the job's type */
    const int *len;             /* [n_kv] valid slots, the new ones included */
    const unsigned char *mask;  /* [n_kv][cap] pad flags, or NULL */
    int cap, n_new, row0;
    float *probs;               /* [n_head][n_new][cap], or NULL */
};

struct att_job {
    const struct att_seq *seqs;
    int n_seq;
    const float *q;
    float *out;
    int n_head, n_kv, hd, n_rep;
    size_t eb;                  /* bytes of one cache element */
    float scale;
    struct cpu_kv_rows rows;
};

/* A unit, or one block range of a split unit. */
struct att_item {
    int seq, g, t;              /* sequence, kv head, query */
    int b0, b1;                 /* blocks [b0, b1) of the unit's visible keys */
    int first;                  /* index of the unit's first item (split units) */
    int n_items;                /* items of the unit, on its first item */
};

/* Slots query t of a sequence sees in kv head g. */
static int visible(const struct att_seq *s, int g, int t)
{
    int n = s->len[g] - s->n_new + t + 1;
    return n < 0 ? 0 : n > s->cap ? s->cap : n;
}

/* A partial: per query head r of the group, m[r], l[r], then o[nr][hd]. */
static size_t part_floats(const struct att_job *j)
{
    return (size_t)j->n_rep * (j->hd + 2);
}

static void part_clear(const struct att_job *j, float *p)
{
    for (int r = 0; r < j->n_rep; r++) p[r] = -INFINITY;
    memset(p + j->n_rep, 0, (size_t)j->n_rep * (j->hd + 1) * sizeof *p);
}

/* acc = merge(acc, p), the online-softmax rule. */
static void part_merge(const struct att_job *j, float *acc, const float *p)
{
    int hd = j->hd, nr = j->n_rep;
    for (int r = 0; r < nr; r++) {
        float *ao = acc + 2 * nr + (size_t)r * hd;
        const float *po = p + 2 * nr + (size_t)r * hd;
        if (p[r] == -INFINITY) continue; /* the block had no visible key */
        if (acc[r] == -INFINITY) {
            acc[r] = p[r];
            acc[nr + r] = p[nr + r];
            memcpy(ao, po, (size_t)hd * sizeof *ao);
            continue;
        }
        float m = acc[r] > p[r] ? acc[r] : p[r];
        float ca = expf(acc[r] - m), cb = expf(p[r] - m);
        acc[r] = m;
        acc[nr + r] = acc[nr + r] * ca + p[nr + r] * cb;
        for (int d = 0; d < hd; d++) ao[d] = ao[d] * ca + po[d] * cb;
    }
}

/* The partial of keys [j0, j1) of unit (s, g, t) into part; sc is scratch of
 * n_rep * (ATT_BLOCK + 1) floats ([head][key], then one key's dots).  Raw
 * scores go to the
 * probabilities, if asked. */
static void block_partial(const struct att_job *jb, const struct att_seq *s, int g, int t,
                          int j0, int j1, float *sc, float *part)
{
    int hd = jb->hd, nr = jb->n_rep, n = j1 - j0;
    size_t qd = (size_t)jb->n_head * hd, row = (size_t)hd * jb->eb;
    const float *q = jb->q + (size_t)(s->row0 + t) * qd + (size_t)g * nr * hd;
    const char *k = s->k + ((size_t)g * s->cap + j0) * row;
    const char *v = s->v + ((size_t)g * s->cap + j0) * row;
    const unsigned char *mask = s->mask ? s->mask + (size_t)g * s->cap + j0 : NULL;
    float *dots = sc + (size_t)nr * ATT_BLOCK;
    for (int j = 0; j < n; j++) {
        if (mask && mask[j]) {
            for (int r = 0; r < nr; r++) sc[r * ATT_BLOCK + j] = -INFINITY;
            continue;
        }
        jb->rows.dot(dots, q, nr, k + (size_t)j * row, hd);
        for (int r = 0; r < nr; r++) sc[r * ATT_BLOCK + j] = dots[r] * jb->scale;
    }
    part_clear(jb, part);
    int any = 0;
    for (int r = 0; r < nr; r++) {
        float *sr = sc + r * ATT_BLOCK;
        if (s->probs)
            memcpy(s->probs + ((size_t)(g * nr + r) * s->n_new + t) * s->cap + j0, sr,
                   (size_t)n * sizeof *sr);
        /* The max skips NaN and the vector exp maps it to 0, so the max's
         * loop also looks for one (free: the loop waits on the max's latency)
         * and the block row is judged once, outside the dot and accumulate
         * loops.  A NaN logit (or a +inf one: exp(inf - inf)) makes the row
         * NaN, as torch's softmax does. */
        float m = -INFINITY;
        int nan = 0;
        for (int j = 0; j < n; j++) {
            m = sr[j] > m ? sr[j] : m;
            nan |= sr[j] != sr[j];
        }
        if (nan || m == INFINITY) {
            memset(sr, 0, (size_t)n * sizeof *sr);
            part[r] = part[nr + r] = NAN;          /* merge and finish keep it NaN */
            continue;
        }
        if (m == -INFINITY) {
            memset(sr, 0, (size_t)n * sizeof *sr); /* no visible key: weights 0 */
            continue;
        }
        part[r] = m;
        part[nr + r] = jb->rows.exp_sum(sr, n, m); /* a masked slot's -inf gives 0 */
        any = 1;
    }
    if (any) jb->rows.accum(part + 2 * nr, sc, ATT_BLOCK, nr, v, n, hd);
}

/* The unit's output rows (o / l) and its probabilities (exp(s - m) / l). */
static void finish_unit(const struct att_job *jb, const struct att_seq *s, int g, int t,
                        const float *acc)
{
    int hd = jb->hd, nr = jb->n_rep, n_vis = visible(s, g, t);
    for (int r = 0; r < nr; r++) {
        const float *ao = acc + 2 * nr + (size_t)r * hd;
        int h = g * nr + r;
        float *o = jb->out + (size_t)(s->row0 + t) * jb->n_head * hd + (size_t)h * hd;
        float l = acc[r] != -INFINITY ? acc[nr + r] : 0.0f;
        if (isnan(l)) {
            for (int d = 0; d < hd; d++) o[d] = NAN; /* l <= 0 below would give zeros */
        } else {
            for (int d = 0; d < hd; d++) o[d] = l > 0.0f ? ao[d] / l : 0.0f;
        }
        if (!s->probs) continue;
        float *p = s->probs + ((size_t)h * s->n_new + t) * s->cap;
        const unsigned char *mask = s->mask ? s->mask + (size_t)g * s->cap : NULL;
        for (int j = 0; j < n_vis; j++)
            p[j] = (mask && mask[j]) || l <= 0.0f ? 0.0f : expf(p[j] - acc[r]) / l;
        for (int j = n_vis; j < s->cap; j++) p[j] = 0.0f;
    }
}

/* Items of the job: one per unit, or one per block of each unit (split). */
static int plan_items(const struct att_job *jb, int split, struct att_item *it)
{
    int n = 0;
    for (int i = 0; i < jb->n_seq; i++) {
        const struct att_seq *s = &jb->seqs[i];
        for (int t = 0; t < s->n_new; t++)
            for (int g = 0; g < jb->n_kv; g++) {
                int nb = (visible(s, g, t) + ATT_BLOCK - 1) / ATT_BLOCK;
                int per = split && nb > 1 ? nb : 1, first = n;
                for (int b = 0; b < per; b++, n++)
                    if (it)
                        it[n] = (struct att_item){i, g, t, per > 1 ? b : 0,
                                                  per > 1 ? b + 1 : nb, first, per};
            }
    }
    return n;
}

static int grow(void **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap) return 0;
    void *p = malloc(bytes);
    if (!p) return -1;
    free(*buf);
    *buf = p;
    *cap = bytes;
    return 0;
}

/* One item: a whole unit (merging its blocks and finishing it), or one block
 * of a split unit into its partial slot. */
static void run_item(const struct att_job *jb, const struct att_item *it, int i, float *sc,
                     float *blk, float *acc, float *parts)
{
    const struct att_seq *s = &jb->seqs[it->seq];
    int n_vis = visible(s, it->g, it->t);
    if (it->n_items > 1) {
        int j0 = it->b0 * ATT_BLOCK, j1 = j0 + ATT_BLOCK < n_vis ? j0 + ATT_BLOCK : n_vis;
        block_partial(jb, s, it->g, it->t, j0, j1, sc, parts + (size_t)i * part_floats(jb));
        return;
    }
    part_clear(jb, acc);
    for (int b = it->b0; b < it->b1; b++) {
        int j0 = b * ATT_BLOCK, j1 = j0 + ATT_BLOCK < n_vis ? j0 + ATT_BLOCK : n_vis;
        block_partial(jb, s, it->g, it->t, j0, j1, sc, blk);
        part_merge(jb, acc, blk);
    }
    finish_unit(jb, s, it->g, it->t, acc);
}

/* The items on the backend's threads, each with its scratch; split units'
 * partials merged in block order, on the unit's first item, after a barrier. */
struct att_run {
    struct cpu_pool *pool;
    const struct att_job *jb;
    const struct att_item *items;
    int n, split;
    float *scratch;
    size_t per_thread;
    float *parts;
    atomic_int next, next_merge;
};

static void att_run_job(void *ctx, int ith, int nth)
{
    struct att_run *r = ctx;
    const struct att_job *jb = r->jb;
    size_t pf = part_floats(jb);
    float *sc = r->scratch + (size_t)ith * r->per_thread;
    float *blk = sc + (size_t)jb->n_rep * (ATT_BLOCK + 1), *acc = blk + pf;
    for (int i; (i = cpu_pool_chunk(&r->next, r->n)) >= 0;)
        run_item(jb, &r->items[i], i, sc, blk, acc, r->parts);
    if (!r->split) return;
    cpu_pool_barrier(r->pool, nth);
    for (int i; (i = cpu_pool_chunk(&r->next_merge, r->n)) >= 0;) {
        const struct att_item *it = &r->items[i];
        if (it->n_items < 2 || it->first != i) continue;
        part_clear(jb, acc);
        for (int b = 0; b < it->n_items; b++) part_merge(jb, acc, r->parts + (size_t)(i + b) * pf);
        finish_unit(jb, &jb->seqs[it->seq], it->g, it->t, acc);
    }
}

static int run_job(struct backend *be, const struct att_job *jb)
{
    struct cpu_impl *im = be->impl;
    int nt = im->n_threads, units = plan_items(jb, 0, NULL);
    /* Spread blocks over the threads only when units are too few to share. */
    int split = units < 4 * nt;
    int n = plan_items(jb, split, NULL);
    size_t pf = part_floats(jb), per_thread = (size_t)jb->n_rep * (ATT_BLOCK + 1) + 2 * pf;
    if (grow(&im->att_items, &im->att_items_cap, (size_t)n * sizeof(struct att_item)) ||
        grow((void **)&im->att_scratch, &im->att_scratch_cap,
             (nt * per_thread + (split ? (size_t)n * pf : 0)) * sizeof(float)))
        return -1;
    struct att_item *items = im->att_items;
    plan_items(jb, split, items);
    struct att_run r = {im->pool, jb, items, n, split, im->att_scratch, per_thread,
                        im->att_scratch + nt * per_thread, 0, 0};
    if (n > 1)
        cpu_parallel(be, att_run_job, &r);
    else
        att_run_job(&r, 0, 1);
    return 0;
}

static int job_init(struct backend *be, struct att_job *jb, enum kv_type type, int n_head,
                    int n_kv, int hd, float scale)
{
    if (n_head <= 0 || n_kv <= 0 || n_head % n_kv || hd <= 0) return -1;
    if (cpu_kv_rows_for(type, ((const struct cpu_impl *)be->impl)->simd, &jb->rows)) return -1;
    jb->n_head = n_head;
    jb->n_kv = n_kv;
    jb->hd = hd;
    jb->n_rep = n_head / n_kv;
    jb->eb = kv_type_bytes(type);
    jb->scale = scale;
    return 0;
}

void cpu_attention(struct backend *be, const struct attn_args *a)
{
    struct att_job jb = {0};
    if (a->n_new <= 0 || a->cap <= 0 ||
        job_init(be, &jb, a->kv_type, a->n_head, a->n_kv, a->head_dim, a->scale))
        return;
    struct att_seq s = {a->k_cache, a->v_cache, a->kv_len, a->slot_mask, a->cap, a->n_new, 0,
                        a->probs};
    jb.seqs = &s;
    jb.n_seq = 1;
    jb.q = a->q;
    jb.out = a->out;
    run_job(be, &jb);
}

int cpu_attention_layer(struct backend *be, struct kv_table *t, const struct attn_layer_args *a)
{
    struct att_job jb = {0};
    if (!t || !a || t->n_step < 1 || a->layer < 0 || a->layer >= t->n_layer ||
        job_init(be, &jb, t->type, t->n_head, t->n_kv, t->head_dim, a->scale))
        return -1;
    struct att_seq *seqs = malloc((size_t)t->n_step * sizeof *seqs);
    if (!seqs) return -1;
    size_t probs_off = 0;
    for (int i = 0; i < t->n_step; i++) {
        const struct kv_step_seq *q = &t->step[i];
        const struct cpu_kv_slot *s = &t->slots[q->slot];
        size_t heads = (size_t)a->layer * t->n_kv;
        seqs[i] = (struct att_seq){s->k[a->layer], s->v[a->layer], s->len + heads,
                                   s->pad ? s->pad + heads * s->cap : NULL, s->cap, q->n_new,
                                   q->row0, a->probs ? a->probs + probs_off : NULL};
        probs_off += (size_t)t->n_head * q->n_new * s->cap;
    }
    jb.seqs = seqs;
    jb.n_seq = t->n_step;
    jb.q = a->q;
    jb.out = a->out;
    int rc = run_job(be, &jb);
    free(seqs);
    return rc;
}
