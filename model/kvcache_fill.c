/* kvcache_fill.c - extend a cache to a long context by repeating its K/V.
 *
 * Long-context benchmarks need a decode step that reads as many slots as a
 * real 16k-token context would, without a 16k-token prefill on every run.
 * The slots added are copies of the cache's own rows (a real prefill's K/V,
 * RoPE included), repeated in order; they take the next positions, so the
 * sequence continues at position n_slots as if every slot were a token. */
#include "kvcache.h"

#include <string.h>

int kvcache_fill_repeat(struct kvcache *c, int n_slots, struct eb_err *e)
{
    int len0 = c->len[0];
    if (c->left_pad > 0) return eb_fail(e, "kvcache: cannot fill a left-padded cache");
    if (len0 < 1) return eb_fail(e, "kvcache: cannot fill an empty cache");
    for (int i = 1; i < c->n_layer * c->n_kv; i++)
        if (c->len[i] != len0)
            return eb_fail(e, "kvcache: fill needs every head at the same length (%d vs %d)",
                           c->len[i], len0);
    if (n_slots > c->capacity)
        return eb_fail(e, "kvcache: cannot fill %d slots into a cache of %d", n_slots, c->capacity);
    if (n_slots <= len0) return 0;
    size_t row_floats = c->row_bytes / sizeof(float); /* 16-bit rows are whole floats */
    struct backend *be = c->be;
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_kv; h++) {
            float *k = kvcache_k(c, l, h), *v = kvcache_v(c, l, h);
            /* Doubling copies of the prefix keep the rows periodic in len0. */
            for (int len = len0; len < n_slots;) {
                int n = len < n_slots - len ? len : n_slots - len;
                be->copy(be, k + (size_t)len * row_floats, k, (size_t)n * row_floats);
                be->copy(be, v + (size_t)len * row_floats, v, (size_t)n * row_floats);
                len += n;
            }
            size_t base = ((size_t)l * c->n_kv + h) * c->capacity;
            for (int j = len0; j < n_slots; j++) {
                c->pos[base + j] = c->next_pos + (j - len0);
                c->pad[base + j] = 0;
            }
            c->len[l * c->n_kv + h] = n_slots;
        }
    c->next_pos += n_slots - len0;
    c->view_of[0] = c->view_of[1] = -1;
    kvcache_touch(c); /* a backend KV table holding the cache rebinds */
    c->bytes += (size_t)(n_slots - len0) * c->n_layer * c->n_kv * 2 * c->row_bytes;
    if (c->bytes > c->peak_bytes) c->peak_bytes = c->bytes;
    return 0;
}
