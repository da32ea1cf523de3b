/* kvcache.h - the KV cache of one sequence, owned by model/.
 *
 * Per layer, K and V are backend buffers laid out [n_kv][capacity][head_dim]
 * of the cache's element type (enum kv_type: f32, f16 or bf16; a row is
 * head_dim * kv_type_bytes bytes, and bytes/peak_bytes count that size);
 * each (layer, kv head) has its own length, so eviction can keep a different
 * set of tokens per head.  Keys are stored after RoPE.  Every slot remembers
 * its token's original position (host memory), and new tokens continue at the
 * sequence's next position however many slots were evicted.  Policies never
 * touch this memory: they hand keep-sets to kvcache_compact.
 *
 * Left-padded batching stores pad slots: each slot also has a pad flag (host,
 * same layout as pos).  Pad slots are appended like tokens (kvcache_append_pads),
 * take K+V bytes like tokens, move with compaction, and are masked in
 * attention (kvcache_pad_mask).  A sequence with p left pads starts at
 * position -p (kvcache_left_pad), so its first real token is at position 0.
 *
 * Optionally (kvcache_qring_enable) the cache also keeps, per layer, a ring of
 * the last w post-RoPE queries of the sequence, for policies that score keys
 * with recent queries. */
#ifndef EB_KVCACHE_H
#define EB_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/backend.h"
#include "../util/err.h"

struct kvcache {
    struct backend *be;
    int n_layer, n_kv, head_dim;
    int capacity;        /* slots per (layer, kv head) */
    enum kv_type type;   /* element type of k and v */
    size_t row_bytes;    /* head_dim * kv_type_bytes(type) */
    void **k, **v;       /* [n_layer] backend buffers of n_kv * capacity * head_dim elements */
    int *len;            /* host [n_layer][n_kv]: valid slots */
    int *pos;            /* host [n_layer][n_kv][capacity]: original position of each slot */
    unsigned char *pad;  /* host, same layout as pos: 1 = pad slot */
    int next_pos;        /* position of the next token appended */
    int left_pad;        /* pads the sequence starts with (kvcache_left_pad); 0: none */
    float *scratch;      /* backend, capacity rows: compaction staging */
    float *view[2];      /* 16-bit caches: backend, capacity * head_dim f32 each: the K [0]
                            and V [1] rows kvcache_rows_f32 converted last (else NULL) */
    int view_of[2];      /* layer * n_kv + kv head those rows are of; -1: none */
    int *idx;            /* host scratch for row indices */
    int idx_cap;
    size_t bytes;        /* K+V bytes of the valid slots now */
    size_t peak_bytes;   /* maximum of bytes over the cache's life */

    uint64_t gen;        /* changes whenever the cache changes other than by
                            kvcache_note_append (a backend KV table holding it must rebind) */

    /* ring of recent queries (NULL unless enabled) */
    int q_window, q_dim; /* w, n_head * head_dim */
    float **q_ring;      /* [n_layer] backend buffers of w * q_dim */
    int q_count;         /* queries held, <= w */
    int q_next;          /* ring slot the next query goes to */
};

/* A cache of element type `type`.  A 16-bit type needs an even head_dim
 * (rows move as 32-bit words) and a backend with kv_store and kv_load. */
int kvcache_create(struct backend *be, int n_layer, int n_kv, int head_dim, int capacity,
                   enum kv_type type, struct kvcache **out, struct eb_err *e);
void kvcache_free(struct kvcache *c);

/* Bytes kvcache_create allocates for these dimensions (for memory estimates):
 * backend memory (as kvcache_device_bytes) plus the host positions and pad
 * flags. */
size_t kvcache_alloc_bytes(int n_layer, int n_kv, int head_dim, int capacity, enum kv_type type);
/* Backend bytes of such a cache, each buffer as a rounding pool takes it
 * (backend_alloc_bytes): K and V, the compaction buffer, a 16-bit cache's
 * two f32 views, and a query ring of q_window rows of q_dim (0: none). */
size_t kvcache_device_bytes(int n_layer, int n_kv, int head_dim, int capacity, enum kv_type type,
                            int q_window, int q_dim);

/* Append n tokens to one layer.  k and v are backend rows [n][n_kv*head_dim]
 * (the sequence's rows of the batch's K/V activations, RoPE applied to k);
 * token i gets position c->next_pos + i.  Fails if any head would exceed the
 * capacity.  After every layer is appended, kvcache_advance(c, n). */
int kvcache_append(struct kvcache *c, int layer, const float *k, const float *v, int n,
                   struct eb_err *e);
/* The same, where the first n_pad of the n tokens are pads (0 <= n_pad <= n). */
int kvcache_append_pads(struct kvcache *c, int layer, const float *k, const float *v, int n,
                        int n_pad, struct eb_err *e);
void kvcache_advance(struct kvcache *c, int n);
/* The host side of an append whose K/V rows the backend already wrote at the
 * heads' ends (be->kv_append through a KV table): lengths, positions, pad
 * flags and bytes of one layer, without changing gen.  n must fit (checked
 * by the caller with kvcache_free_slots). */
void kvcache_note_append(struct kvcache *c, int layer, int n, int n_pad);
/* Mark the cache changed other than by kvcache_note_append (rows, lengths or
 * flags written directly): a new generation, unique in the process, so any
 * backend KV table holding it rebinds.  kvcache_* functions that change the
 * cache call it themselves. */
void kvcache_touch(struct kvcache *c);
/* What a backend KV table needs to hold this cache (kv_table_bind). */
void kvcache_describe(const struct kvcache *c, struct kv_seq_desc *d);

/* Declare, on an empty cache, that the sequence starts with n_pad left pads:
 * positions start at -n_pad so the first real token is at 0 (the pads are
 * still flagged by whoever appends them, with kvcache_append_pads).  Fails
 * once anything was appended. */
int kvcache_left_pad(struct kvcache *c, int n_pad, struct eb_err *e);

/* Space left in (layer, kv head) with the fewest free slots. */
int kvcache_free_slots(const struct kvcache *c);

static inline int kvcache_len(const struct kvcache *c, int layer, int kv_head)
{
    return c->len[layer * c->n_kv + kv_head];
}
/* Host array of the original positions of (layer, kv head)'s valid slots. */
static inline const int *kvcache_positions(const struct kvcache *c, int layer, int kv_head)
{
    return c->pos + ((size_t)layer * c->n_kv + kv_head) * c->capacity;
}
/* Host array of (layer, kv head)'s pad flags (1 = pad slot), parallel to positions. */
static inline const unsigned char *kvcache_pads(const struct kvcache *c, int layer, int kv_head)
{
    return c->pad + ((size_t)layer * c->n_kv + kv_head) * c->capacity;
}
/* Pad flags of a whole layer, [n_kv][capacity] (the attention mask), or NULL
 * when the cache holds no pad slot at all, so unpadded sequences pay nothing. */
static inline const unsigned char *kvcache_pad_mask(const struct kvcache *c, int layer)
{
    return c->left_pad > 0 ? c->pad + (size_t)layer * c->n_kv * c->capacity : NULL;
}
/* Backend pointers to (layer, kv head)'s K and V rows [len][head_dim], in
 * the cache's element type (float for an f32 cache). */
static inline void *kvcache_k(const struct kvcache *c, int layer, int kv_head)
{
    return (char *)c->k[layer] + (size_t)kv_head * c->capacity * c->row_bytes;
}
static inline void *kvcache_v(const struct kvcache *c, int layer, int kv_head)
{
    return (char *)c->v[layer] + (size_t)kv_head * c->capacity * c->row_bytes;
}

/* (layer, kv head)'s K (which = 0) or V (1) rows [len][head_dim] as f32
 * backend memory: the cache itself when it is f32, else the rows converted
 * into the cache's view buffer for K or V.  The pointer stays valid until the
 * next call for the same `which`, append or compaction (repeated calls for
 * the same head convert once).  For policies' occasional reads; attention
 * reads a 16-bit cache in place. */
const float *kvcache_rows_f32(struct kvcache *c, int which, int layer, int kv_head);

/* Keep only the slots listed in keep (indices into the current slots of
 * (layer, kv_head), no duplicates, each in [0, len)).  The kept slots land in
 * keep's order (sorted keep: original-position order) with their positions and
 * pad flags, so positions need not ascend after a compaction.  Returns the K+V
 * bytes freed (>= 0), or -1 with e set for a malformed keep-set. */
int64_t kvcache_compact(struct kvcache *c, int layer, int kv_head, const int *keep, int n_keep,
                        struct eb_err *e);

/* One cache's part of a batched compaction (kvcache_compact_batch): per
 * (layer, kv head) h = layer * n_kv + kv_head, n_keep[h] slots (-1: leave
 * the head) listed at keep + h * stride, on the host and the same in backend
 * memory at keep_dev + h * stride. */
struct kv_compact_seq {
    struct kvcache *c;
    const int *n_keep;       /* host [n_layer * n_kv] */
    const int *keep;         /* host [n_layer * n_kv][stride] */
    const int *keep_dev;     /* backend, same layout */
    int stride;
};

/* kvcache_compact for every listed head of n caches (same backend, layers
 * and kv heads), with be->kv_gather_batch: one upload of the row
 * descriptors, then one gather per layer for all sequences and heads; the
 * host mirrors (lengths, positions, pads, bytes) move as kvcache_compact
 * moves them.  units: backend room for n_layer * n * n_kv descriptors
 * (kvcache_batch_units_floats), staged through units_host (as many);
 * scratch: n * n_kv * unit_floats floats, unit_floats >= every n_keep times
 * the row's floats.  freed (may be NULL) gets the K+V bytes freed per cache.
 * 0, or -1 with e set (a malformed keep-set changes nothing). */
int kvcache_compact_batch(struct backend *be, const struct kv_compact_seq *seqs, int n,
                          struct gather_unit *units, struct gather_unit *units_host,
                          float *scratch, size_t unit_floats, int64_t *freed, struct eb_err *e);
/* Backend floats of the descriptors kvcache_compact_batch uploads for n caches. */
size_t kvcache_batch_units_floats(int n_layer, int n_kv, int n);

/* Extend every head from its length L (all equal, no left pads) to n_slots
 * by repeating its L rows in order (kvcache_fill.c): the added slots take
 * positions next_pos.. and next_pos advances past them.  Long-context
 * benchmarks reach a context this way after a short real prefill. */
int kvcache_fill_repeat(struct kvcache *c, int n_slots, struct eb_err *e);

/* Query ring: keep the last w queries (rows of q_dim = n_head * head_dim) per layer. */
int kvcache_qring_enable(struct kvcache *c, int window, int q_dim, struct eb_err *e);
/* Record n new queries (backend rows [n][q_dim]) of one layer; call per layer, then
 * kvcache_qring_advance(c, n) once per forward.  (model_forward does not call
 * it: its kv_append writes the queries into the ring; this is for callers
 * that fill a cache themselves.) */
void kvcache_qring_push(struct kvcache *c, int layer, const float *q, int n);
void kvcache_qring_advance(struct kvcache *c, int n);
/* Copy one layer's held queries, oldest first, into dst (backend, q_count rows);
 * returns q_count. */
int kvcache_qring_gather(const struct kvcache *c, int layer, float *dst);

#endif
