/* cpu_batch.c - the batched eviction ops (backend.h, "batched eviction") on
 * the CPU: every unit runs the per-head primitive of cpu_score.c, so its
 * scores are those of the per-sequence path bit for bit; the units are
 * spread over the threads (a primitive inside a unit then runs on one, its
 * results being independent of the thread count).  Top-k ranks by the one
 * tie rule of policies/score.h: higher score first, equal scores lower index
 * first, NaN last. */
#include "kernels/cpu/cpu_ops.h"
#include "util/bf16.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const float *cpu_batch_unit_keys(struct backend *be, const struct score_unit *u, int head_dim,
                                 float **tmp)
{
    *tmp = NULL;
    if (u->kv_type == KV_F32) return u->k;
    size_t n = (size_t)u->len * head_dim;
    if (!(*tmp = malloc((n ? n : 1) * sizeof **tmp))) return NULL;
    cpu_kv_load(be, *tmp, u->k, (enum kv_type)u->kv_type, n);
    return *tmp;
}

/* Units run in parallel when there are enough to share; else one after
 * another, each primitive then using every thread itself. */
static int spread(const struct backend *be, int n_units)
{
    return n_units >= 2 && cpu_threads(be) > 1;
}

static int window_unit(struct backend *be, const struct score_batch_args *a,
                       const struct score_unit *u)
{
    if (u->n_q < 1 || u->q_ring < u->n_q || u->n_cand < 1 || u->n_cand > u->len) return -1;
    size_t qdim = (size_t)a->n_head * a->head_dim;
    float *tmp, *q = malloc((size_t)u->n_q * qdim * sizeof *q);
    float *pooled = a->kernel > 1 ? malloc((size_t)u->n_cand * sizeof *pooled) : NULL;
    const float *k =
        q && (pooled || a->kernel <= 1) ? cpu_batch_unit_keys(be, u, a->head_dim, &tmp) : NULL;
    int rc = -1;
    if (k) {
        for (int i = 0; i < u->n_q; i++) /* the ring's rows, oldest first */
            memcpy(q + i * qdim, u->q + (size_t)((u->q_first + i) % u->q_ring) * qdim,
                   qdim * sizeof *q);
        struct window_score_args w = {
            .out = a->kernel > 1 ? pooled : u->imp, .q = q, .k = k, .n_head = a->n_head,
            .n_kv = a->n_kv, .kv_head = u->kv_head, .head_dim = a->head_dim, .n_q = u->n_q,
            .len = u->len, .n_cand = u->n_cand, .pad = u->pad, .softmax_all = a->softmax_all,
            .gqa = a->gqa, .scale = a->scale};
        rc = cpu_window_scores(be, &w);
        if (rc == 0 && a->kernel > 1)
            rc = cpu_pool1d(be, u->imp, pooled, u->n_cand, a->kernel, a->pool);
        free(tmp);
    }
    free(q);
    free(pooled);
    return rc;
}

/* Units [i0, i1) of a batched op; a failed unit sets bad. */
struct units_job {
    struct backend *be;
    const struct score_batch_args *a;
    atomic_int bad;
};

static void window_units(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    struct units_job *j = ctx;
    for (int i = i0; i < i1; i++)
        if (window_unit(j->be, j->a, &j->a->units[i])) atomic_store(&j->bad, 1);
}

int cpu_window_scores_batch(struct backend *be, const struct score_batch_args *a)
{
    if (!a->units || a->n_units < 0 || a->kernel < 1 || a->kernel % 2 == 0) return -1;
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    struct units_job j = {be, a, 0};
    cpu_parallel_for(be, a->n_units, 1, spread(be, a->n_units), window_units, &j);
    return atomic_load(&j.bad) ? -1 : 0;
}

static void redundancy_units(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    struct units_job *j = ctx;
    const struct score_batch_args *a = j->a;
    for (int i = i0; i < i1; i++) {
        const struct score_unit *u = &a->units[i];
        float *tmp;
        const float *k = cpu_batch_unit_keys(j->be, u, a->head_dim, &tmp);
        struct redundancy_args r = {.out = u->red, .k = k, .len = u->len,
                                    .head_dim = a->head_dim, .threshold = a->threshold,
                                    .no_match_zero_col0 = a->no_match_zero_col0, .pad = u->pad};
        if (!k || cpu_key_redundancy(j->be, &r) != 0) atomic_store(&j->bad, 1);
        free(tmp);
    }
}

int cpu_key_redundancy_batch(struct backend *be, const struct score_batch_args *a)
{
    if (!a->units || a->n_units < 0) return -1;
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    struct units_job j = {be, a, 0};
    cpu_parallel_for(be, a->n_units, 1, spread(be, a->n_units), redundancy_units, &j);
    return atomic_load(&j.bad) ? -1 : 0;
}

/* ---- top-k by the tie rule ---- */

struct pair { double s; int i; };

/* < 0 when a ranks before b. */
static int pair_cmp(const void *pa, const void *pb)
{
    const struct pair *a = pa, *b = pb;
    int na = isnan(a->s), nb = isnan(b->s);
    if (na != nb) return na - nb;
    if (!na && a->s != b->s) return a->s > b->s ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static void swap(struct pair *a, struct pair *b)
{
    struct pair t = *a;
    *a = *b;
    *b = t;
}

/* p[k - 1] the k-th best, p[0, k - 1) the better ones in no order: a
 * quickselect with a median-of-three pivot, sorting what is left after
 * 2 log2(n) rounds (the order is total, so the set is unique). */
static void nth_best(struct pair *p, int n, int k)
{
    int lo = 0, hi = n - 1, t = k - 1, rounds = 2;
    for (int m = n; m > 1; m >>= 1) rounds += 2;
    while (hi > lo) {
        if (--rounds < 0) {
            qsort(p + lo, (size_t)(hi - lo + 1), sizeof *p, pair_cmp);
            return;
        }
        int mid = lo + (hi - lo) / 2;
        if (pair_cmp(&p[mid], &p[lo]) < 0) swap(&p[mid], &p[lo]);
        if (pair_cmp(&p[hi], &p[lo]) < 0) swap(&p[hi], &p[lo]);
        if (pair_cmp(&p[mid], &p[hi]) < 0) swap(&p[mid], &p[hi]);
        struct pair pivot = p[hi];
        int at = lo;
        for (int j = lo; j < hi; j++)
            if (pair_cmp(&p[j], &pivot) < 0) swap(&p[j], &p[at++]);
        swap(&p[at], &p[hi]);
        if (at == t) return;
        if (at < t) lo = at + 1;
        else hi = at - 1;
    }
}

static double unit_score(const struct score_batch_args *a, const struct score_unit *u,
                         const float *k, int j)
{
    switch (a->score) {
    case BATCH_SCORE_AGE: return -j;
    case BATCH_SCORE_IMP: return a->bf16 ? bf16_round(u->imp[j]) : u->imp[j];
    case BATCH_SCORE_MIX:
        if (a->bf16) return bf16_mix(a->lambda, bf16_round(u->imp[j]), bf16_round(u->red[j]));
        return a->lambda * (double)u->imp[j] - (1.0 - a->lambda) * u->red[j];
    case BATCH_SCORE_KNORM: {
        double s = 0.0;
        for (int d = 0; d < a->head_dim; d++)
            s += (double)k[(size_t)j * a->head_dim + d] * k[(size_t)j * a->head_dim + d];
        return -sqrt(s);
    }
    case BATCH_SCORE_Z: return u->z[j];
    }
    return NAN;
}

/* One unit's keep-set; p and z: n_cand pairs and scores of scratch. */
static int topk_unit(struct backend *be, const struct score_batch_args *a,
                     const struct score_unit *u, struct pair *p, double *z)
{
    int n = u->n_cand, k = u->n_select;
    if (n < 0 || n > u->len || k < 0 || k > n) return -1;
    float *tmp = NULL;
    const float *keys = NULL;
    if (a->score == BATCH_SCORE_KNORM && !(keys = cpu_batch_unit_keys(be, u, a->head_dim, &tmp)))
        return -1;
    if (a->score == BATCH_SCORE_Z && !u->z) return -1;
    for (int j = 0; j < n; j++) {
        z[j] = unit_score(a, u, keys, j);
        if (u->add) z[j] += u->add[j];
        if (a->bf16) z[j] = bf16_round(z[j]);
        if (a->use_pads && u->pad && u->pad[j]) z[j] = a->pad_keep ? a->pad_score : -a->pad_score;
        p[j] = (struct pair){z[j], j};
    }
    free(tmp);
    int m = 0;
    if (k > 0 && k < n) nth_best(p, n, k);
    if (!a->by_position) {
        if (k > 0) qsort(p, (size_t)k, sizeof *p, pair_cmp);
        for (int j = 0; j < k; j++) u->keep[m++] = p[j].i;
    } else if (k > 0) { /* those ranked no lower than the k-th, in index order */
        struct pair kth = p[k - 1];
        for (int j = 0; j < n && m < k; j++) {
            struct pair q = {z[j], j};
            if (k == n || pair_cmp(&q, &kth) <= 0) u->keep[m++] = j;
        }
    }
    for (int j = n; j < u->len; j++) u->keep[m++] = j;
    return 0;
}

/* Units [i0, i1) ranked with scratch of this call (grown to the largest unit). */
static void topk_units(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    struct units_job *j = ctx;
    struct pair *p = NULL;
    double *z = NULL;
    int cap = 0;
    for (int i = i0; i < i1; i++) {
        const struct score_unit *u = &j->a->units[i];
        if (u->n_cand > cap) {
            free(p);
            free(z);
            cap = u->n_cand;
            p = malloc((size_t)cap * sizeof *p);
            z = malloc((size_t)cap * sizeof *z);
            if (!p || !z) cap = 0;
        }
        if (u->n_cand > cap || topk_unit(j->be, j->a, u, p, z) != 0) atomic_store(&j->bad, 1);
    }
    free(p);
    free(z);
}

int cpu_batch_topk(struct backend *be, const struct score_batch_args *a)
{
    if (!a->units || a->n_units < 0) return -1;
    struct units_job j = {be, a, 0};
    cpu_parallel_for(be, a->n_units, 4, spread(be, a->n_units), topk_units, &j);
    return atomic_load(&j.bad) ? -1 : 0;
}

struct gather_job {
    const struct gather_unit *units;
    float *scratch;
    size_t unit_floats;
    atomic_int bad;
};

/* 1 when keep[r0, n) ascends strictly: each row then moves to a lower
 * index, read before anything overwrites it, so it can move in place. */
static int ascends(const int *keep, int r0, int n)
{
    for (int r = r0 + 1; r < n; r++)
        if (keep[r] <= keep[r - 1]) return 0;
    return 1;
}

/* The rows [0, r0) that stay where they are (keep[r] == r: the slots before
 * the first evicted one of a set in position order, most of H2O's one
 * eviction a step) are not touched; the rest move in place when they
 * ascend, else through the unit's staging. */
static void gather_units(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    struct gather_job *j = ctx;
    for (int i = i0; i < i1; i++) {
        const struct gather_unit *u = &j->units[i];
        size_t w = (size_t)u->row_words, n = (size_t)u->n_keep * w;
        if (u->n_keep < 0 || n > j->unit_floats) {
            atomic_store(&j->bad, 1);
            continue;
        }
        int r0 = 0;
        while (r0 < u->n_keep && u->keep[r0] == r0) r0++;
        int in_place = ascends(u->keep, r0, u->n_keep);
        float *s = j->scratch + (size_t)i * j->unit_floats;
        for (int which = 0; which < 2; which++) {
            float *rows = which ? u->v : u->k;
            if (in_place) {
                for (int r = r0; r < u->n_keep; r++) /* keep[r] > r: rows do not overlap */
                    memcpy(rows + r * w, rows + (size_t)u->keep[r] * w, w * sizeof *s);
                continue;
            }
            for (int r = r0; r < u->n_keep; r++)
                memcpy(s + r * w, rows + (size_t)u->keep[r] * w, w * sizeof *s);
            memcpy(rows + r0 * w, s + r0 * w, (n - r0 * w) * sizeof *s);
        }
    }
}

int cpu_kv_gather_batch(struct backend *be, const struct gather_unit *units, int n_units,
                        float *scratch, size_t unit_floats)
{
    if (n_units < 0 || (n_units > 0 && (!units || !scratch))) return -1;
    struct gather_job j = {units, scratch, unit_floats, 0};
    cpu_parallel_for(be, n_units, 1, spread(be, n_units), gather_units, &j);
    return atomic_load(&j.bad) ? -1 : 0;
}
