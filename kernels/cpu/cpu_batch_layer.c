/* cpu_batch_layer.c - the batched ops that give a run of units (the kv heads
 * of one layer of one sequence) one shared score (backend.h,
 * head_mean_batch and last_query_attn_batch): the per-layer keep-sets of
 * policies that average their heads.  Each run is summed in unit order and
 * in double, as a per-sequence selector averages a layer's heads, so the
 * shared rows are the per-sequence path's bit for bit; runs are spread over
 * the threads. */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Runs [i0, i1) of a batched op; a failed run sets bad. */
struct runs_job {
    struct backend *be;
    const struct score_batch_args *a;
    atomic_int bad;
};

static int runs_ok(const struct score_batch_args *a)
{
    return a->units && a->n_units >= 0 && a->run >= 1 && a->n_units % a->run == 0;
}

/* The run starting at unit u0: its units agree on the candidates. */
static int run_units_ok(const struct score_batch_args *a, int u0)
{
    const struct score_unit *lead = &a->units[u0];
    if (!lead->z || lead->n_cand < 0 || lead->n_cand > lead->len) return 0;
    for (int g = 1; g < a->run; g++)
        if (a->units[u0 + g].n_cand != lead->n_cand || a->units[u0 + g].len != lead->len)
            return 0;
    return 1;
}

static void mean_runs(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    struct runs_job *j = ctx;
    const struct score_batch_args *a = j->a;
    for (int r = i0; r < i1; r++) {
        int u0 = r * a->run;
        if (!run_units_ok(a, u0)) {
            atomic_store(&j->bad, 1);
            continue;
        }
        const struct score_unit *lead = &a->units[u0];
        double *z = lead->z;
        memset(z, 0, (size_t)lead->n_cand * sizeof *z);
        for (int g = 0; g < a->run; g++)
            for (int t = 0; t < lead->n_cand; t++) z[t] += a->units[u0 + g].imp[t];
        for (int t = 0; t < lead->n_cand; t++) z[t] /= a->run;
    }
}

int cpu_head_mean_batch(struct backend *be, const struct score_batch_args *a)
{
    if (!runs_ok(a)) return -1;
    struct runs_job j = {be, a, 0};
    int n_runs = a->n_units / a->run;
    cpu_parallel_for(be, n_runs, 1, n_runs >= 2 && cpu_threads(be) > 1, mean_runs, &j);
    return atomic_load(&j.bad) ? -1 : 0;
}

/* One unit's group mean of the last query's softmax into one[0, n_cand),
 * its pad slots masked out of the softmax (score_last_query_attn's rule);
 * logit: len doubles of scratch. */
static int last_query_unit(struct backend *be, const struct score_batch_args *a,
                           const struct score_unit *u, double *logit, double *one)
{
    int hd = a->head_dim, group = a->n_head / a->n_kv, len = u->len;
    if (u->n_q < 1 || u->q_ring < 1 || !u->q) return -1;
    const float *q = u->q + ((size_t)((u->q_first + u->n_q - 1) % u->q_ring) * a->n_head +
                             (size_t)u->kv_head * group) * hd;
    float *tmp;
    const float *k = cpu_batch_unit_keys(be, u, hd, &tmp);
    if (!k) return -1;
    double scale = 1.0 / sqrt((double)hd);
    for (int t = 0; t < u->n_cand; t++) one[t] = 0.0;
    for (int g = 0; g < group; g++) {
        double mx = -INFINITY, sum = 0.0;
        for (int t = 0; t < len; t++) {
            double s = 0.0;
            for (int d = 0; d < hd; d++) s += (double)q[(size_t)g * hd + d] * k[(size_t)t * hd + d];
            logit[t] = u->pad && u->pad[t] ? -INFINITY : s * scale; /* a pad takes no share */
            if (logit[t] > mx) mx = logit[t];
        }
        for (int t = 0; t < len; t++) sum += logit[t] = exp(logit[t] - mx);
        for (int t = 0; t < u->n_cand; t++) one[t] += logit[t] / sum / group;
    }
    free(tmp);
    return 0;
}

static void last_query_runs(void *ctx, int i0, int i1, int ith)
{
    (void)ith;
    struct runs_job *j = ctx;
    const struct score_batch_args *a = j->a;
    double *logit = NULL, *one = NULL;
    int cap = 0;
    for (int r = i0; r < i1; r++) {
        int u0 = r * a->run;
        const struct score_unit *lead = &a->units[u0];
        if (!run_units_ok(a, u0)) {
            atomic_store(&j->bad, 1);
            continue;
        }
        if (lead->len > cap) {
            free(logit);
            free(one);
            cap = lead->len;
            logit = malloc((size_t)cap * sizeof *logit);
            one = malloc((size_t)cap * sizeof *one);
            if (!logit || !one) cap = 0;
        }
        if (lead->len > cap) {
            atomic_store(&j->bad, 1);
            continue;
        }
        double *z = lead->z;
        memset(z, 0, (size_t)lead->n_cand * sizeof *z);
        for (int g = 0; g < a->run; g++) {
            if (last_query_unit(j->be, a, &a->units[u0 + g], logit, one)) {
                atomic_store(&j->bad, 1);
                break;
            }
            for (int t = 0; t < lead->n_cand; t++) z[t] += one[t];
        }
        for (int t = 0; t < lead->n_cand; t++) z[t] /= a->run;
    }
    free(logit);
    free(one);
}

int cpu_last_query_attn_batch(struct backend *be, const struct score_batch_args *a)
{
    if (!runs_ok(a) || a->head_dim < 1 || a->n_kv < 1 || a->n_head % a->n_kv != 0) return -1;
    struct runs_job j = {be, a, 0};
    int n_runs = a->n_units / a->run;
    cpu_parallel_for(be, n_runs, 1, n_runs >= 2 && cpu_threads(be) > 1, last_query_runs, &j);
    return atomic_load(&j.bad) ? -1 : 0;
}
