/* kvcache.c - per-sequence KV cache with per-(layer, kv head) lengths. */
#include "kvcache.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Cache generations are unique in the process, so a table that held a freed
 * cache never mistakes a new one at the same address for it. */
static atomic_ullong next_gen = 1;

void kvcache_touch(struct kvcache *c)
{
    c->gen = atomic_fetch_add(&next_gen, 1);
}

static size_t slot_bytes(const struct kvcache *c)
{
    return 2 * c->row_bytes; /* K and V */
}

/* Floats of backend memory holding n elements of type t (a 16-bit cache has
 * an even head_dim, so its rows are whole floats). */
static size_t floats_for(size_t n, enum kv_type t)
{
    return (n * kv_type_bytes(t) + sizeof(float) - 1) / sizeof(float);
}

size_t kvcache_device_bytes(int n_layer, int n_kv, int head_dim, int capacity, enum kv_type type,
                            int q_window, int q_dim)
{
    size_t row = (size_t)capacity * head_dim; /* elements of one head's slots */
    size_t per_layer = (size_t)n_kv * floats_for(row, type);
    size_t kv = 2 * (size_t)n_layer * backend_alloc_bytes(per_layer);
    size_t scratch = backend_alloc_bytes(floats_for(row, type));
    size_t view = type == KV_F32 ? 0 : 2 * backend_alloc_bytes(row);
    size_t ring = q_window > 0 ? (size_t)n_layer * backend_alloc_bytes((size_t)q_window * q_dim) : 0;
    return kv + scratch + view + ring;
}

size_t kvcache_alloc_bytes(int n_layer, int n_kv, int head_dim, int capacity, enum kv_type type)
{
    size_t host = (size_t)n_layer * n_kv * capacity * (sizeof(int) + 1); /* pos + pad */
    return kvcache_device_bytes(n_layer, n_kv, head_dim, capacity, type, 0, 0) + host;
}

void kvcache_free(struct kvcache *c)
{
    if (!c) return;
    for (int l = 0; l < c->n_layer; l++) {
        if (c->k && c->k[l]) c->be->free(c->be, c->k[l]);
        if (c->v && c->v[l]) c->be->free(c->be, c->v[l]);
        if (c->q_ring && c->q_ring[l]) c->be->free(c->be, c->q_ring[l]);
    }
    if (c->scratch) c->be->free(c->be, c->scratch);
    for (int w = 0; w < 2; w++)
        if (c->view[w]) c->be->free(c->be, c->view[w]);
    free(c->k);
    free(c->v);
    free(c->q_ring);
    free(c->len);
    free(c->pos);
    free(c->pad);
    free(c->idx);
    free(c);
}

static int check_type(struct backend *be, int head_dim, enum kv_type type, struct eb_err *e)
{
    if (kv_type_bytes(type) == 0) return eb_fail(e, "kvcache: unknown element type %d", (int)type);
    if (type == KV_F32) return 0;
    if (head_dim % 2)
        return eb_fail(e, "kvcache: a %s cache needs an even head_dim, not %d", kv_type_name(type),
                       head_dim);
    if (!be->kv_store || !be->kv_load)
        return eb_fail(e, "kvcache: the %s backend has no %s KV cache", be->name,
                       kv_type_name(type));
    return 0;
}

/* The backend buffers: K and V per layer, the compaction staging, and for a
 * 16-bit cache the two f32 view buffers. */
static int alloc_buffers(struct kvcache *c, struct eb_err *e)
{
    struct backend *be = c->be;
    size_t row = (size_t)c->capacity * c->head_dim;
    size_t per_layer = (size_t)c->n_kv * floats_for(row, c->type);
    for (int l = 0; l < c->n_layer; l++) {
        c->k[l] = be->alloc(be, per_layer);
        c->v[l] = be->alloc(be, per_layer);
        if (!c->k[l] || !c->v[l])
            return eb_fail_nomem(e, "kvcache: out of memory for %d slots x %d layers", c->capacity,
                                 c->n_layer);
    }
    c->scratch = be->alloc(be, floats_for(row, c->type));
    if (!c->scratch) return eb_fail_nomem(e, "kvcache: out of memory for the compaction buffer");
    for (int w = 0; w < 2 && c->type != KV_F32; w++)
        if (!(c->view[w] = be->alloc(be, row)))
            return eb_fail_nomem(e, "kvcache: out of memory for the f32 view buffers");
    return 0;
}

int kvcache_create(struct backend *be, int n_layer, int n_kv, int head_dim, int capacity,
                   enum kv_type type, struct kvcache **out, struct eb_err *e)
{
    *out = NULL;
    if (n_layer < 1 || n_kv < 1 || head_dim < 1 || capacity < 1)
        return eb_fail(e, "kvcache: bad dimensions (layers %d, kv heads %d, head_dim %d, capacity %d)",
                       n_layer, n_kv, head_dim, capacity);
    if (check_type(be, head_dim, type, e)) return -1;
    struct kvcache *c = eb_calloc(1, sizeof *c, e);
    if (!c) return -1;
    c->be = be;
    c->n_layer = n_layer;
    c->n_kv = n_kv;
    c->head_dim = head_dim;
    c->capacity = capacity;
    c->type = type;
    c->row_bytes = (size_t)head_dim * kv_type_bytes(type);
    c->view_of[0] = c->view_of[1] = -1;
    kvcache_touch(c);
    if (!(c->k = eb_calloc((size_t)n_layer, sizeof *c->k, e)) ||
        !(c->v = eb_calloc((size_t)n_layer, sizeof *c->v, e)) ||
        !(c->len = eb_calloc((size_t)n_layer * n_kv, sizeof *c->len, e)) ||
        !(c->pos = eb_malloc((size_t)n_layer * n_kv * capacity * sizeof *c->pos, e)) ||
        !(c->pad = eb_calloc((size_t)n_layer * n_kv * capacity, 1, e)) ||
        alloc_buffers(c, e))
        goto fail;
    *out = c;
    return 0;
fail:
    kvcache_free(c);
    return -1;
}

static int reserve_idx(struct kvcache *c, int n, struct eb_err *e)
{
    if (n <= c->idx_cap) return 0;
    int *p = realloc(c->idx, (size_t)n * sizeof *p);
    if (!p) return eb_fail_nomem(e, "kvcache: out of memory");
    c->idx = p;
    c->idx_cap = n;
    return 0;
}

int kvcache_free_slots(const struct kvcache *c)
{
    int max_len = 0;
    for (int i = 0; i < c->n_layer * c->n_kv; i++)
        if (c->len[i] > max_len) max_len = c->len[i];
    return c->capacity - max_len;
}

int kvcache_left_pad(struct kvcache *c, int n_pad, struct eb_err *e)
{
    int used = c->next_pos != 0 || c->left_pad != 0;
    for (int i = 0; i < c->n_layer * c->n_kv; i++) used |= c->len[i] > 0;
    if (used) return eb_fail(e, "kvcache: left padding set on a cache already in use");
    if (n_pad < 0) return eb_fail(e, "kvcache: %d left pads", n_pad);
    c->left_pad = n_pad;
    c->next_pos = -n_pad;
    kvcache_touch(c);
    return 0;
}

int kvcache_append(struct kvcache *c, int layer, const float *k, const float *v, int n,
                   struct eb_err *e)
{
    return kvcache_append_pads(c, layer, k, v, n, 0, e);
}

int kvcache_append_pads(struct kvcache *c, int layer, const float *k, const float *v, int n,
                        int n_pad, struct eb_err *e)
{
    if (layer < 0 || layer >= c->n_layer || n < 0)
        return eb_fail(e, "kvcache: append to layer %d of %d (%d tokens)", layer, c->n_layer, n);
    if (n_pad < 0 || n_pad > n)
        return eb_fail(e, "kvcache: %d pads among %d appended tokens", n_pad, n);
    if (n == 0) return 0;
    for (int h = 0; h < c->n_kv; h++)
        if (c->len[layer * c->n_kv + h] + n > c->capacity)
            return eb_fail(e, "kvcache: full (%d slots, appending %d to %d)", c->capacity, n,
                           c->len[layer * c->n_kv + h]);
    if (reserve_idx(c, n, e)) return -1;
    struct backend *be = c->be;
    for (int h = 0; h < c->n_kv; h++) {
        int len = c->len[layer * c->n_kv + h];
        /* K/V activations are [n][n_kv][head_dim]: head h of token t is row t*n_kv + h. */
        for (int t = 0; t < n; t++) c->idx[t] = t * c->n_kv + h;
        size_t off = ((size_t)h * c->capacity + len) * c->row_bytes;
        char *kd = (char *)c->k[layer] + off, *vd = (char *)c->v[layer] + off;
        if (c->type == KV_F32) {
            be->gather_rows(be, (float *)kd, k, c->idx, n, c->head_dim);
            be->gather_rows(be, (float *)vd, v, c->idx, n, c->head_dim);
        } else {
            be->kv_store(be, kd, c->type, k, c->idx, n, c->head_dim);
            be->kv_store(be, vd, c->type, v, c->idx, n, c->head_dim);
        }
    }
    kvcache_note_append(c, layer, n, n_pad);
    kvcache_touch(c); /* rows written behind any KV table's back */
    return 0;
}

void kvcache_note_append(struct kvcache *c, int layer, int n, int n_pad)
{
    c->view_of[0] = c->view_of[1] = -1;
    for (int h = 0; h < c->n_kv; h++) {
        int *len = &c->len[layer * c->n_kv + h];
        int *pos = c->pos + ((size_t)layer * c->n_kv + h) * c->capacity;
        unsigned char *pad = c->pad + ((size_t)layer * c->n_kv + h) * c->capacity;
        for (int t = 0; t < n; t++) {
            pos[*len + t] = c->next_pos + t;
            pad[*len + t] = t < n_pad;
        }
        *len += n;
    }
    c->bytes += (size_t)n * c->n_kv * slot_bytes(c);
    if (c->bytes > c->peak_bytes) c->peak_bytes = c->bytes;
}

void kvcache_describe(const struct kvcache *c, struct kv_seq_desc *d)
{
    *d = (struct kv_seq_desc){.k = c->k, .v = c->v, .kv_type = c->type, .cap = c->capacity,
                              .len = c->len, .pad = kvcache_pad_mask(c, 0),
                              .q_ring = c->q_ring, .q_window = c->q_window};
}

void kvcache_advance(struct kvcache *c, int n)
{
    c->next_pos += n;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* keep[0, n_keep) strictly ascends from 0 or above: the keep-sets of a
 * top-k by position, the common case, which need neither a mark array to
 * be checked nor a staging copy to be applied in place. */
static int ascending(const int *keep, int n_keep)
{
    int prev = -1;
    for (int i = 0; i < n_keep; i++) {
        if (keep[i] <= prev) return 0;
        prev = keep[i];
    }
    return 1;
}

/* The host side of one head's compaction (rows already gathered): its
 * positions and pad flags in keep order; c->idx is scratch. */
static void compact_mirror(struct kvcache *c, int head, const int *keep, int n_keep)
{
    int *pos = c->pos + (size_t)head * c->capacity, *moved = c->idx;
    unsigned char *pad = c->pad + (size_t)head * c->capacity;
    if (ascending(keep, n_keep)) { /* keep[i] >= i: slot keep[i] is read before it is written */
        for (int i = 0; i < n_keep; i++) pos[i] = pos[keep[i]];
        for (int i = 0; i < n_keep; i++) pad[i] = pad[keep[i]];
        return;
    }
    for (int i = 0; i < n_keep; i++) moved[i] = pos[keep[i]];
    for (int i = 0; i < n_keep; i++) pos[i] = moved[i];
    for (int i = 0; i < n_keep; i++) moved[i] = pad[keep[i]];
    for (int i = 0; i < n_keep; i++) pad[i] = (unsigned char)moved[i];
}

int64_t kvcache_compact(struct kvcache *c, int layer, int kv_head, const int *keep, int n_keep,
                        struct eb_err *e)
{
    if (layer < 0 || layer >= c->n_layer || kv_head < 0 || kv_head >= c->n_kv)
        return eb_fail(e, "kvcache: compact of layer %d kv head %d (model has %d x %d)", layer,
                       kv_head, c->n_layer, c->n_kv);
    int *len = &c->len[layer * c->n_kv + kv_head];
    if (n_keep < 0 || n_keep > *len)
        return eb_fail(e, "kvcache: keep-set of %d slots for a head holding %d", n_keep, *len);
    if (n_keep > 0 && !keep) return eb_fail(e, "kvcache: keep-set is NULL");
    /* idx[0, len): sorted copy for the checks, then compact_mirror's scratch. */
    if (reserve_idx(c, *len + 1, e)) return -1;
    if (n_keep > 0) memcpy(c->idx, keep, (size_t)n_keep * sizeof *keep);
    qsort(c->idx, (size_t)n_keep, sizeof *c->idx, cmp_int);
    int identity = 1;
    for (int i = 0; i < n_keep; i++) {
        if (c->idx[i] < 0 || c->idx[i] >= *len)
            return eb_fail(e, "kvcache: keep index %d out of range [0, %d) (layer %d, kv head %d)",
                           c->idx[i], *len, layer, kv_head);
        if (i > 0 && c->idx[i] == c->idx[i - 1])
            return eb_fail(e, "kvcache: duplicate keep index %d (layer %d, kv head %d)", c->idx[i],
                           layer, kv_head);
        if (keep[i] != i) identity = 0;
    }
    if (!identity) {
        /* Kept rows land in keep order (a policy may order its cache, e.g.
         * by score as R-KV's released code does).  Gather through a staging
         * buffer: the rows move within the buffer they come from.  Rows of
         * any element type move as whole 32-bit words, bit for bit. */
        struct backend *be = c->be;
        int words = (int)(c->row_bytes / sizeof(float));
        size_t n = (size_t)n_keep * words;
        float *kb = kvcache_k(c, layer, kv_head), *vb = kvcache_v(c, layer, kv_head);
        be->gather_rows(be, c->scratch, kb, keep, n_keep, words);
        be->copy(be, kb, c->scratch, n);
        be->gather_rows(be, c->scratch, vb, keep, n_keep, words);
        be->copy(be, vb, c->scratch, n);
        c->view_of[0] = c->view_of[1] = -1;
        compact_mirror(c, layer * c->n_kv + kv_head, keep, n_keep); /* the checks' copy is done */
    }
    int64_t freed = (int64_t)(*len - n_keep) * (int64_t)slot_bytes(c);
    c->bytes -= (size_t)freed;
    *len = n_keep;
    kvcache_touch(c);
    return freed;
}

/* A head's keep-set is distinct indices in [0, len); *identity set when it
 * keeps every slot where it is.  mark: len bytes of scratch. */
static int keep_check(const int *keep, int n_keep, int len, unsigned char *mark, int *identity)
{
    if (n_keep < 0 || n_keep > len) return -1;
    if (ascending(keep, n_keep)) { /* distinct; in range when the last is */
        if (n_keep > 0 && keep[n_keep - 1] >= len) return -1;
        *identity = n_keep == 0 || keep[n_keep - 1] == n_keep - 1;
        return 0;
    }
    memset(mark, 0, (size_t)len);
    *identity = 1;
    for (int i = 0; i < n_keep; i++) {
        if (keep[i] < 0 || keep[i] >= len || mark[keep[i]]) return -1;
        mark[keep[i]] = 1;
        if (keep[i] != i) *identity = 0;
    }
    return 0;
}

size_t kvcache_batch_units_floats(int n_layer, int n_kv, int n)
{
    return (size_t)n_layer * n_kv * n * (sizeof(struct gather_unit) / sizeof(float));
}

/* Check every head of every cache, and stage the gather descriptors of
 * those that move (per layer: sequence-major, then kv head); *per_layer[l]
 * gets how many layer l has. */
static int batch_plan(const struct kv_compact_seq *seqs, int n, struct gather_unit *units_host,
                      int *per_layer, struct eb_err *e)
{
    const struct kvcache *c0 = seqs[0].c;
    for (int l = 0; l < c0->n_layer; l++) {
        int m = 0;
        struct gather_unit *u = units_host + (size_t)l * c0->n_kv * n;
        for (int s = 0; s < n; s++) {
            struct kvcache *c = seqs[s].c;
            for (int h = 0; h < c->n_kv; h++) {
                int head = l * c->n_kv + h, nk = seqs[s].n_keep[head], same;
                const int *keep = seqs[s].keep + (size_t)head * seqs[s].stride;
                if (nk < 0) continue;
                if (reserve_idx(c, c->len[head] + 1, e)) return -1;
                if (nk > seqs[s].stride ||
                    keep_check(keep, nk, c->len[head], (unsigned char *)c->idx, &same))
                    return eb_fail(e, "kvcache: malformed keep-set of %d slots (layer %d, kv head "
                                      "%d, holding %d)", nk, l, h, c->len[head]);
                if (same) continue;
                u[m++] = (struct gather_unit){
                    .k = kvcache_k(c, l, h), .v = kvcache_v(c, l, h),
                    .keep = seqs[s].keep_dev + (size_t)head * seqs[s].stride,
                    .n_keep = nk, .row_words = (int)(c->row_bytes / sizeof(float))};
            }
        }
        per_layer[l] = m;
    }
    return 0;
}

int kvcache_compact_batch(struct backend *be, const struct kv_compact_seq *seqs, int n,
                          struct gather_unit *units, struct gather_unit *units_host,
                          float *scratch, size_t unit_floats, int64_t *freed, struct eb_err *e)
{
    if (n <= 0) return 0;
    const struct kvcache *c0 = seqs[0].c;
    if (!be->kv_gather_batch) return eb_fail(e, "kvcache: the %s backend has no batched gather",
                                             be->name);
    for (int s = 1; s < n; s++)
        if (seqs[s].c->n_layer != c0->n_layer || seqs[s].c->n_kv != c0->n_kv)
            return eb_fail(e, "kvcache: batched compaction of caches of different shapes");
    int *per_layer = malloc((size_t)c0->n_layer * sizeof *per_layer);
    if (!per_layer) return eb_fail_nomem(e, "kvcache: out of memory");
    int rc = batch_plan(seqs, n, units_host, per_layer, e);
    size_t per = (size_t)c0->n_kv * n, words = sizeof(struct gather_unit) / sizeof(float);
    if (rc == 0)
        be->upload(be, (float *)units, (const float *)units_host,
                   kvcache_batch_units_floats(c0->n_layer, c0->n_kv, n));
    /* Every layer gets its call, moving rows or not: the count is the same
     * whatever the batch holds. */
    for (int l = 0; l < c0->n_layer && rc == 0; l++) {
        if (be->kv_gather_batch(be, (const struct gather_unit *)((float *)units + l * per * words),
                                per_layer[l], scratch, unit_floats))
            rc = eb_fail(e, "kvcache: batched gather of layer %d failed", l);
    }
    free(per_layer);
    if (rc) return -1;
    for (int s = 0; s < n; s++) {
        struct kvcache *c = seqs[s].c;
        int64_t f = 0;
        for (int head = 0; head < c->n_layer * c->n_kv; head++) {
            int nk = seqs[s].n_keep[head];
            if (nk < 0) continue;
            compact_mirror(c, head, seqs[s].keep + (size_t)head * seqs[s].stride, nk);
            f += (int64_t)(c->len[head] - nk) * (int64_t)slot_bytes(c);
            c->len[head] = nk;
        }
        c->bytes -= (size_t)f;
        c->view_of[0] = c->view_of[1] = -1;
        kvcache_touch(c);
        if (freed) freed[s] = f;
    }
    return 0;
}

const float *kvcache_rows_f32(struct kvcache *c, int which, int layer, int kv_head)
{
    if (which < 0 || which > 1 || layer < 0 || layer >= c->n_layer || kv_head < 0 ||
        kv_head >= c->n_kv)
        return NULL;
    void *rows = which ? kvcache_v(c, layer, kv_head) : kvcache_k(c, layer, kv_head);
    if (c->type == KV_F32) return rows;
    int head = layer * c->n_kv + kv_head;
    if (c->view_of[which] != head) {
        size_t n = (size_t)c->len[head] * c->head_dim;
        c->be->kv_load(c->be, c->view[which], rows, c->type, n);
        c->view_of[which] = head;
    }
    return c->view[which];
}

int kvcache_qring_enable(struct kvcache *c, int window, int q_dim, struct eb_err *e)
{
    if (c->q_ring) return eb_fail(e, "kvcache: query ring already enabled");
    if (window < 1 || q_dim < 1) return eb_fail(e, "kvcache: query ring window must be >= 1");
    c->q_ring = eb_calloc((size_t)c->n_layer, sizeof *c->q_ring, e);
    if (!c->q_ring) return -1;
    for (int l = 0; l < c->n_layer; l++) {
        c->q_ring[l] = c->be->alloc(c->be, (size_t)window * q_dim);
        if (!c->q_ring[l]) {
            for (int j = 0; j < l; j++) c->be->free(c->be, c->q_ring[j]);
            free(c->q_ring);
            c->q_ring = NULL;
            return eb_fail_nomem(e, "kvcache: out of memory for the query ring");
        }
    }
    c->q_window = window;
    c->q_dim = q_dim;
    c->q_count = 0;
    c->q_next = 0;
    kvcache_touch(c);
    return 0;
}

void kvcache_qring_push(struct kvcache *c, int layer, const float *q, int n)
{
    if (!c->q_ring) return;
    int first = n > c->q_window ? n - c->q_window : 0; /* only the last w can stay */
    int slot = (c->q_next + first) % c->q_window;
    for (int t = first; t < n; t++) {
        c->be->copy(c->be, c->q_ring[layer] + (size_t)slot * c->q_dim, q + (size_t)t * c->q_dim,
                    (size_t)c->q_dim);
        slot = (slot + 1) % c->q_window;
    }
}

void kvcache_qring_advance(struct kvcache *c, int n)
{
    if (!c->q_ring) return;
    c->q_next = (int)(((long long)c->q_next + n) % c->q_window);
    c->q_count = c->q_count + n > c->q_window ? c->q_window : c->q_count + n;
}

int kvcache_qring_gather(const struct kvcache *c, int layer, float *dst)
{
    if (!c->q_ring) return 0;
    int oldest = (c->q_next - c->q_count + c->q_window) % c->q_window;
    for (int i = 0; i < c->q_count; i++) {
        int slot = (oldest + i) % c->q_window;
        c->be->copy(c->be, dst + (size_t)i * c->q_dim, c->q_ring[layer] + (size_t)slot * c->q_dim,
                    (size_t)c->q_dim);
    }
    return c->q_count;
}
