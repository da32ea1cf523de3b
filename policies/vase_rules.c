/* vase_rules.c - VaSE's selection rules on host arrays (vase.h). */
#include "vase.h"

#include <math.h>
#include <stdlib.h>

#include "evict_rng.h"
#include "score.h"

/* ---- the rules on host arrays (vase.h) ---- */

int vase_attnv_select(const struct vase_attnv_in *in, int *out, struct eb_err *e)
{
    int n = in->n, k = in->k;
    if (n < 0 || k < 0 || k > n) return eb_fail(e, "vase: keep %d of %d candidates", k, n);
    int n_large = in->n_large < 0 ? 0 : in->n_large > k ? k : in->n_large;
    struct score_pair *rk = malloc((size_t)(n ? n : 1) * sizeof *rk);
    double *fallback = malloc((size_t)(n ? n : 1) * sizeof *fallback);
    double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    double *zero = calloc((size_t)(n ? n : 1), sizeof *zero);
    unsigned char *taken = calloc((size_t)(n ? n : 1), 1);
    int rc = -1;
    if (!rk || !fallback || !w || !zero || !taken) {
        eb_fail(e, "vase: out of memory for %d candidates", n);
        goto done;
    }
    for (int j = 0; j < n; j++) {
        double r = j < in->n_sink ? INFINITY : in->range[j];
        if (in->pad && in->pad[j]) r = -INFINITY;
        fallback[j] = r;
        rk[j] = (struct score_pair){r, j};
    }
    qsort(rk, (size_t)n, sizeof *rk, score_pair_cmp);
    for (int t = 0; t < n_large; t++) {
        out[t] = rk[t].i;
        taken[rk[t].i] = 1;
    }
    for (int j = 0; j < n; j++)
        w[j] = taken[j] || (in->pad && in->pad[j]) ? 0.0 : in->score[j];
    if (evict_sample_topk(w, in->gumbel ? in->gumbel : zero, taken, fallback, n, k - n_large,
                          out + n_large, e) < 0)
        goto done;
    rc = 0;
done:
    free(rk);
    free(fallback);
    free(w);
    free(zero);
    free(taken);
    return rc;
}

int vase_dkv_select(int n, int n_sink, int k, const double *lk, const double *lv,
                    const unsigned char *pad, int *out, struct eb_err *e)
{
    if (n < 0 || k < 0 || k > n) return eb_fail(e, "vase: keep %d of %d candidates", k, n);
    struct score_pair *rk = malloc((size_t)(n ? n : 1) * sizeof *rk);
    if (!rk) return eb_fail(e, "vase: out of memory for %d candidates", n);
    double sum = 0.0;
    for (int j = 0; j < n; j++) sum += lk[j] * lv[j];
    for (int j = 0; j < n; j++) {
        double s = sum > 0 ? lk[j] * lv[j] / sum : lk[j] * lv[j];
        if (j < n_sink) s = 1.0;
        if (pad && pad[j]) s = -1.0;
        rk[j] = (struct score_pair){s, j};
    }
    qsort(rk, (size_t)n, sizeof *rk, score_pair_cmp);
    for (int t = 0; t < k; t++) out[t] = rk[t].i;
    free(rk);
    return 0;
}
