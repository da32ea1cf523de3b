/* vase_state.c - VaSE's state and its lifetime (vase_priv.h): the
 * instance's host and backend scratch, grown on demand, and each sequence's
 * slot orders (AttnV) and sketches (CurDKV), made when first needed and freed
 * with the sequence or the instance. */
#include <stdlib.h>

#include "vase_priv.h"

static void vase_seq_free(void *p)
{
    struct vase_seq *q = p;
    if (!q) return;
    free(q->ord);
    free(q->n_ord);
    free(q->sketch);
    free(q->sketch_ready);
    free(q);
}

/* The per-slot host arrays, grown together to the longest head: listed once
 * for vase_reserve and vase_destroy. */
struct slot_arrays {
    double **d[6];
    int **n[3];
};
static struct slot_arrays slot_arrays(struct vase *s)
{
    return (struct slot_arrays){{&s->range, &s->score, &s->tmp, &s->gum, &s->lk, &s->lv},
                                {&s->l2p, &s->sel, &s->used}};
}

static void free_backend(struct vase *s)
{
    if (s->be) {
        if (s->dev) s->be->free(s->be, s->dev);
        if (s->proj) s->be->free(s->be, s->proj);
    }
    s->dev = s->proj = NULL;
    s->dev_cap = 0;
}

void vase_destroy(void *self)
{
    struct vase *s = self;
    if (!s) return;
    free_backend(s);
    struct slot_arrays a = slot_arrays(s);
    for (size_t i = 0; i < sizeof a.d / sizeof a.d[0]; i++) free(*a.d[i]);
    for (size_t i = 0; i < sizeof a.n / sizeof a.n[0]; i++) free(*a.n[i]);
    free(s->pad);
    free(s->hf);
    free(s->w_host);
    seq_table_free(&s->seqs, vase_seq_free);
    free(s);
}

struct vase_seq *vase_get_seq(struct vase *s, int seq, struct eb_err *e)
{
    void **slot = seq_table_slot(&s->seqs, seq, e);
    if (!slot) return NULL;
    if (!*slot) *slot = eb_calloc(1, sizeof(struct vase_seq), e);
    return *slot;
}

int vase_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    (void)sv;
    struct vase *s = self;
    return seq_table_fresh(&s->seqs, seq, sizeof(struct vase_seq), vase_seq_free, e) ? 0 : -1;
}

void vase_end(void *self, int seq)
{
    struct vase *s = self;
    seq_table_drop(&s->seqs, seq, vase_seq_free);
}

/* Host scratch for heads of len slots, backend scratch of dev_n floats. */
int vase_reserve(struct vase *s, struct backend *be, int len, size_t dev_n, struct eb_err *e)
{
    if (s->be != be) free_backend(s);
    s->be = be;
    if (dev_n > s->dev_cap) {
        if (s->dev) be->free(be, s->dev);
        s->dev = be->alloc(be, dev_n);
        s->dev_cap = s->dev ? dev_n : 0;
        if (!s->dev) return eb_fail(e, "out of backend memory for %zu scores", dev_n);
    }
    if (s->mode == VASE_DKV && !s->proj) {
        s->proj = be->alloc(be, (size_t)s->rank * s->m.head_dim);
        if (!s->proj) return eb_fail(e, "out of backend memory for the sketch");
    }
    size_t hf_n = dev_n > (size_t)len * s->m.head_dim ? dev_n : (size_t)len * s->m.head_dim;
    if (hf_n > s->hf_cap) {
        float *h = realloc(s->hf, hf_n * sizeof *h);
        if (!h) return eb_fail(e, "out of memory");
        s->hf = h;
        s->hf_cap = hf_n;
    }
    if (len <= s->cap) return 0;
    struct slot_arrays a = slot_arrays(s);
    for (size_t i = 0; i < sizeof a.d / sizeof a.d[0]; i++) {
        double *x = realloc(*a.d[i], (size_t)len * sizeof *x);
        if (!x) return eb_fail(e, "out of memory");
        *a.d[i] = x;
    }
    for (size_t i = 0; i < sizeof a.n / sizeof a.n[0]; i++) {
        int *x = realloc(*a.n[i], (size_t)len * sizeof *x);
        if (!x) return eb_fail(e, "out of memory");
        *a.n[i] = x;
    }
    unsigned char *pd = realloc(s->pad, (size_t)len);
    if (!pd) return eb_fail(e, "out of memory");
    s->pad = pd;
    s->cap = len;
    return 0;
}

int vase_seq_reserve(struct vase *s, struct vase_seq *q, const struct cache_view *cv, int budget,
                     struct eb_err *e)
{
    if (s->mode == VASE_DKV && s->fixed && !q->sketch) {
        q->sketch = malloc((size_t)cv->n_layer * s->rank * cv->head_dim * sizeof *q->sketch);
        q->sketch_ready = calloc((size_t)cv->n_layer, 1);
        if (!q->sketch || !q->sketch_ready) return eb_fail(e, "out of memory for the sketches");
    }
    if (s->mode == VASE_ATTNV && !s->positional && q->ord_cap < budget) {
        /* (Re)allocated before any head stores its order; a new size forgets
         * the old orders, which then fall back to position order. */
        size_t heads = (size_t)cv->n_layer * cv->n_kv;
        free(q->ord);
        free(q->n_ord);
        q->ord = malloc(heads * (size_t)budget * sizeof *q->ord);
        q->n_ord = calloc(heads, sizeof *q->n_ord);
        q->ord_cap = q->ord && q->n_ord ? budget : 0;
        if (!q->ord_cap) return eb_fail(e, "out of memory for the slot order");
    }
    return 0;
}
