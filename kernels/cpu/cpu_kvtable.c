/* cpu_kvtable.c - the KV table of the layer-granular ops on the CPU: which
 * cache each batch slot holds, its lengths and pad flags (copied at bind,
 * then advanced by kv_append itself, as a GPU keeps them on the device), and
 * the one-call-per-layer append of every new K/V row and query. */
#include "kernels/cpu/cpu_ops.h"

#include <stdlib.h>
#include <string.h>

static void slot_clear(struct cpu_kv_slot *s)
{
    free(s->k);
    free(s->v);
    free(s->q_ring);
    free(s->len);
    free(s->pad);
    memset(s, 0, sizeof *s);
}

void cpu_kv_table_free(struct backend *be, struct kv_table *t)
{
    (void)be;
    if (!t) return;
    for (int i = 0; t->slots && i < t->max_seqs; i++) slot_clear(&t->slots[i]);
    free(t->slots);
    free(t->step);
    free(t);
}

struct kv_table *cpu_kv_table_create(struct backend *be, int max_seqs, int n_layer, int n_kv,
                                     int n_head, int head_dim)
{
    if (max_seqs < 1 || n_layer < 1 || n_kv < 1 || n_head < n_kv || n_head % n_kv ||
        head_dim < 1)
        return NULL;
    struct kv_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    *t = (struct kv_table){.max_seqs = max_seqs, .n_layer = n_layer, .n_kv = n_kv,
                           .n_head = n_head, .head_dim = head_dim};
    t->slots = calloc((size_t)max_seqs, sizeof *t->slots);
    t->step = calloc((size_t)max_seqs, sizeof *t->step);
    if (!t->slots || !t->step) {
        cpu_kv_table_free(be, t);
        return NULL;
    }
    return t;
}

/* The slot's arrays, allocated at its first bind (a table sized for a long
 * prefill has many slots that never hold a sequence). */
static int slot_arrays(const struct kv_table *t, struct cpu_kv_slot *s)
{
    if (s->k) return 0;
    s->k = calloc((size_t)t->n_layer, sizeof *s->k);
    s->v = calloc((size_t)t->n_layer, sizeof *s->v);
    s->q_ring = calloc((size_t)t->n_layer, sizeof *s->q_ring);
    s->len = calloc((size_t)t->n_layer * t->n_kv, sizeof *s->len);
    if (s->k && s->v && s->q_ring && s->len) return 0;
    slot_clear(s);
    return -1;
}

/* Pad flags for the slot's whole capacity (zeroed), kept once allocated. */
static int slot_pads(const struct kv_table *t, struct cpu_kv_slot *s)
{
    size_t need = (size_t)t->n_layer * t->n_kv * s->cap;
    if (s->pad && s->pad_bytes >= need) return 0;
    free(s->pad);
    s->pad = calloc(need, 1);
    s->pad_bytes = s->pad ? need : 0;
    return s->pad ? 0 : -1;
}

/* EVICTBENCH_CPU_FAIL_BIND's countdown: 1 when this bind is the one to fail. */
static int bind_fault_injected(struct backend *be)
{
    struct cpu_impl *im = be ? be->impl : NULL;
    return im && im->fail_bind > 0 && --im->fail_bind == 0;
}

int cpu_kv_table_bind(struct backend *be, struct kv_table *t, int slot,
                      const struct kv_seq_desc *d)
{
    if (!t || !d || slot < 0 || slot >= t->max_seqs || d->cap < 1 || !d->k || !d->v ||
        !d->len || kv_type_bytes(d->kv_type) == 0 || (d->q_ring && d->q_window < 1))
        return -1;
    struct cpu_kv_slot *s = &t->slots[slot];
    s->bound = 0;
    if (bind_fault_injected(be) || slot_arrays(t, s)) return KV_TABLE_NOMEM;
    s->type = d->kv_type;
    s->cap = d->cap;
    s->q_window = d->q_ring ? d->q_window : 0;
    size_t n_heads = (size_t)t->n_layer * t->n_kv;
    memcpy(s->k, d->k, (size_t)t->n_layer * sizeof *s->k);
    memcpy(s->v, d->v, (size_t)t->n_layer * sizeof *s->v);
    for (int l = 0; l < t->n_layer; l++) s->q_ring[l] = d->q_ring ? d->q_ring[l] : NULL;
    for (size_t i = 0; i < n_heads; i++) {
        if (d->len[i] < 0 || d->len[i] > d->cap) return -1;
        s->len[i] = d->len[i];
    }
    if (d->pad) {
        if (slot_pads(t, s)) return KV_TABLE_NOMEM;
        memcpy(s->pad, d->pad, n_heads * s->cap);
    } else if (s->pad) {
        memset(s->pad, 0, s->pad_bytes);
    }
    s->bound = 1;
    return 0;
}

int cpu_kv_table_step(struct backend *be, struct kv_table *t, int n_seq,
                      const struct kv_step_seq *seqs)
{
    (void)be;
    if (!t || n_seq < 1 || n_seq > t->max_seqs) return -1;
    t->n_step = 0;
    for (int i = 0; i < n_seq; i++) {
        const struct kv_step_seq *q = &seqs[i];
        if (q->slot < 0 || q->slot >= t->max_seqs || q->n_new < 1 || q->n_pad < 0 ||
            q->n_pad > q->n_new || q->row0 < 0)
            return -1;
        const struct cpu_kv_slot *s = &t->slots[q->slot];
        if (!s->bound || (i > 0 && s->type != t->type)) return -1;
        t->type = s->type;
        for (int h = 0; h < t->n_layer * t->n_kv; h++)
            if (s->len[h] > s->cap - q->n_new) return -1;
    }
    memcpy(t->step, seqs, (size_t)n_seq * sizeof *seqs);
    t->n_step = n_seq;
    return 0;
}

/* The n new tokens' rows of kv head h, from the f32 activations
 * [T][n_kv][head_dim] (head h of token r is row r * n_kv + h), stored in the
 * cache's type from dst_head on. */
static void store_rows(struct kv_table *t, const struct cpu_kv_slot *s, void *dst_head,
                       const float *src, int row0, int n, int h)
{
    size_t eb = kv_type_bytes(s->type);
    int hd = t->head_dim;
    for (int i = 0; i < n; i++) {
        int r = (row0 + i) * t->n_kv + h;
        cpu_kv_store(NULL, (char *)dst_head + (size_t)i * hd * eb, s->type, src, &r, 1, hd);
    }
}

int cpu_kv_append(struct backend *be, struct kv_table *t, int layer, const float *k,
                  const float *v, const float *q)
{
    (void)be;
    if (!t || layer < 0 || layer >= t->n_layer || !k || !v || t->n_step < 1) return -1;
    int hd = t->head_dim;
    size_t qd = (size_t)t->n_head * hd;
    for (int i = 0; i < t->n_step; i++) {
        const struct kv_step_seq *q_ = &t->step[i];
        struct cpu_kv_slot *s = &t->slots[q_->slot];
        size_t row_bytes = (size_t)hd * kv_type_bytes(s->type);
        if (q_->n_pad > 0 && slot_pads(t, s)) return -1;
        for (int h = 0; h < t->n_kv; h++) {
            int *len = &s->len[layer * t->n_kv + h];
            if (*len > s->cap - q_->n_new) return -1;
            size_t off = ((size_t)h * s->cap + *len) * row_bytes;
            store_rows(t, s, (char *)s->k[layer] + off, k, q_->row0, q_->n_new, h);
            store_rows(t, s, (char *)s->v[layer] + off, v, q_->row0, q_->n_new, h);
            if (s->pad) {
                unsigned char *pad = s->pad + ((size_t)layer * t->n_kv + h) * s->cap + *len;
                for (int j = 0; j < q_->n_new; j++) pad[j] = j < q_->n_pad;
            }
            *len += q_->n_new;
        }
        if (!q || !s->q_ring[layer]) continue;
        /* Only the last `window` queries can stay in the ring. */
        int first = q_->n_new > s->q_window ? q_->n_new - s->q_window : 0;
        for (int j = first; j < q_->n_new; j++) {
            int slot = (int)(((long long)q_->q_next + j) % s->q_window);
            memcpy(s->q_ring[layer] + (size_t)slot * qd, q + (size_t)(q_->row0 + j) * qd,
                   qd * sizeof *q);
        }
    }
    return 0;
}
