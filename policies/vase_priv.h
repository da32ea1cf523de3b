/* vase_priv.h - what the VaSE files share (vase.c: the policy and its
 * trigger; vase_state.c: its scratch and per-sequence state; vase_attnv.c:
 * the AttnV mode; vase_dkv.c: the DKV / CurDKV mode).  Private to
 * policies/vase*.c. */
#ifndef EB_VASE_PRIV_H
#define EB_VASE_PRIV_H

#include <stdint.h>

#include "policies.h"
#include "score.h"
#include "vase.h"

enum vase_mode { VASE_ATTNV, VASE_DKV };

/* The values of vase_attnv_params (param_def.offset). */
struct vase_attnv_params {
    int window;
    int sinks;
    double protect;
    int kernel;
    double temperature;
    int sample;
    int slot_order;
    int seed;
    double rkv_lambda;
};

/* The values of vase_dkv_params (param_def.offset). */
struct vase_dkv_params {
    int window;
    int sinks;
    int rank;
    int sketch;
    int seed;
};

struct vase_seq {
    int evictions;
    int *ord;                 /* attnv: [n_layer * n_kv][ord_cap] positions in slot order */
    int *n_ord;               /* [n_layer * n_kv]; 0: slot order = position order */
    int ord_cap;
    float *sketch;            /* dkv fixed: [n_layer][rank * head_dim] host, W = G^T */
    unsigned char *sketch_ready;
};

struct vase {
    enum vase_mode mode;
    int window, sinks, kernel, sample, positional, rank, fixed;
    double protect, temperature, rkv_lambda;
    uint64_t seed;
    struct policy_model m;
    struct seq_table seqs;
    struct backend *be;       /* the backend dev and proj belong to */
    float *dev;               /* backend scratch */
    size_t dev_cap;
    float *proj;              /* backend [rank][head_dim] */
    float *hf;                /* host floats */
    size_t hf_cap;
    double *range, *score, *tmp, *gum, *lk, *lv;
    int *l2p, *sel, *used;
    unsigned char *pad;
    int cap;
    float *w_host;            /* [rank * head_dim] */
};

/* The instance and its sequences (vase_state.c). */
void vase_destroy(void *self);
int vase_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e);
void vase_end(void *self, int seq);
/* seq's state, made empty when new; NULL with e set on out of memory. */
struct vase_seq *vase_get_seq(struct vase *s, int seq, struct eb_err *e);
/* Host scratch for heads of len slots, backend scratch of dev_n floats. */
int vase_reserve(struct vase *s, struct backend *be, int len, size_t dev_n, struct eb_err *e);
/* seq's per-head state for a select at this budget: CurDKV's sketches,
 * AttnV's slot orders (a new budget forgets the old orders). */
int vase_seq_reserve(struct vase *s, struct vase_seq *q, const struct cache_view *cv, int budget,
                     struct eb_err *e);
/* The keep-set of (l, h) into keep (AttnV and its ablations); its size, or -1. */
int vase_attnv_head(struct vase *s, struct vase_seq *q, const struct cache_view *cv, int seq,
                    int l, int h, int budget, int *keep, struct eb_err *e);
/* The layer's sketch into s->proj (DKV: drawn afresh, CurDKV: once per layer). */
void vase_load_sketch(struct vase *s, struct vase_seq *q, struct backend *be, int seq, int l);
/* The keep-set of (l, h) into keep (DKV / CurDKV); its size, or -1. */
int vase_dkv_head(struct vase *s, const struct cache_view *cv, int l, int h, int budget,
                  int *keep, struct eb_err *e);

#endif
