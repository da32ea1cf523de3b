/* vase_dkv.c - VaSE-DKV and CurDKV: Gaussian sketches and the |kG|^2 |vG|^2
 * keep-set of a head (see vase.c for the method and its sources). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "evict_rng.h"
#include "vase_priv.h"

const struct param_def vase_dkv_params[] = {
    {"window", PARAM_INT, 64, 1, 4096, NULL,
     "recent slots always kept; eviction every window steps",
     offsetof(struct vase_dkv_params, window)},
    {"sinks", PARAM_INT, 4, 0, 4096, NULL, "first slots always kept (score 1.0)",
     offsetof(struct vase_dkv_params, sinks)},
    {"rank", PARAM_INT, 20, 1, 4096, NULL, "columns of the Gaussian sketch",
     offsetof(struct vase_dkv_params, rank)},
    {"sketch", PARAM_CHOICE, 0, 0, 1, "resample|fixed",
     "draw the sketch at every eviction (VaSE-DKV) or once per layer (CurDKV)",
     offsetof(struct vase_dkv_params, sketch)},
    {"seed", PARAM_INT, 0, 0, 2147483647, NULL, "eviction RNG seed (with the sequence id)",
     offsetof(struct vase_dkv_params, seed)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

/* The layer's sketch, transposed to [rank][head_dim], into s->proj. */
void vase_load_sketch(struct vase *s, struct vase_seq *q, struct backend *be, int seq, int l)
{
    int d = s->m.head_dim, r = s->rank;
    size_t n = (size_t)r * d;
    float *w = s->w_host;
    if (s->fixed && q->sketch && q->sketch_ready[l]) {
        w = q->sketch + (size_t)l * n;
    } else {
        struct evict_rng rng;
        evict_rng_init(&rng, s->seed, seq, l, s->fixed ? 0 : q->evictions, EVICT_STREAM_LAYER);
        double scale = 1.0 / sqrt((double)r);
        for (int i = 0; i < d; i++)       /* G[i][c], row-major, is W[c][i] */
            for (int c = 0; c < r; c++) w[(size_t)c * d + i] = (float)(evict_rng_normal(&rng) * scale);
        if (s->fixed && q->sketch) {
            memcpy(q->sketch + (size_t)l * n, w, n * sizeof *w);
            q->sketch_ready[l] = 1;
        }
    }
    be->upload(be, s->proj, w, n);
}

/* |x_j G|^2 of the rows [0, n) of x into out. */
static void sketch_norms(struct vase *s, struct backend *be, const float *x, int n, double *out)
{
    int r = s->rank;
    be->gemm(be, s->dev, x, s->proj, NULL, n, r, s->m.head_dim);
    be->download(be, s->hf, s->dev, (size_t)n * r);
    for (int j = 0; j < n; j++) {
        double acc = 0.0;
        for (int c = 0; c < r; c++) acc += (double)s->hf[(size_t)j * r + c] * s->hf[(size_t)j * r + c];
        out[j] = acc;
    }
}

int vase_dkv_head(struct vase *s, const struct cache_view *cv, int l, int h, int budget,
                    int *keep, struct eb_err *e)
{
    int len = cache_view_len(cv, l, h), n_cand = len - s->window, k = budget - s->window;
    sketch_norms(s, cv->be, cache_view_k(cv, l, h), n_cand, s->lk);
    sketch_norms(s, cv->be, cache_view_v(cv, l, h), n_cand, s->lv);
    if (vase_dkv_select(n_cand, s->sinks, k, s->lk, s->lv, cache_view_pad(cv, l, h), s->sel, e))
        return -1;
    int n = 0;
    for (int i = 0; i < k; i++) keep[n++] = s->sel[i];
    for (int i = n_cand; i < len; i++) keep[n++] = i;
    return n;
}
