/* retention.c - the token-retention recorder and its blob (see retention.h). */
#include "harness/exp/retention.h"

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "model/kvcache.h"
#include "model/tokenizer.h"
#include "util/clock.h"

int retention_create(int n_layer, int n_kv, struct retention **out, struct eb_err *e)
{
    *out = NULL;
    if (n_layer < 1 || n_kv < 1) return eb_fail(e, "retention: %d layers, %d KV heads", n_layer, n_kv);
    struct retention *r = calloc(1, sizeof *r);
    if (!r) return eb_fail_nomem(e, "retention record");
    r->n_heads = n_layer * n_kv;
    r->n_kv = n_kv;
    *out = r;
    return 0;
}

void retention_free(struct retention *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_seqs; i++) free(r->seqs[i].step);
    free(r->seqs);
    free(r);
}

static struct retention_seq *seq_of(struct retention *r, int seq, struct eb_err *e)
{
    if (seq < 0 || seq > (1 << 24)) return eb_fail(e, "retention: sequence id %d", seq), NULL;
    if (seq >= r->n_seqs) {
        int n = r->n_seqs ? r->n_seqs : 8;
        while (n <= seq) n *= 2;
        struct retention_seq *s = realloc(r->seqs, (size_t)n * sizeof *s);
        if (!s) return eb_fail_nomem(e, "retention record"), NULL;
        memset(s + r->n_seqs, 0, (size_t)(n - r->n_seqs) * sizeof *s);
        r->seqs = s;
        r->n_seqs = n;
    }
    return &r->seqs[seq];
}

int retention_begin(struct retention *r, int seq, int n_prompt, struct eb_err *e)
{
    struct retention_seq *s = seq_of(r, seq, e);
    if (!s) return -1;
    s->n_prompt = n_prompt;
    s->n_pos = 0;
    if (s->step) memset(s->step, 0, (size_t)s->cap_pos * r->n_heads * sizeof *s->step);
    return 0;
}

/* Room for position pos (rows of n_heads, new ones "never"). */
static int grow(struct retention *r, struct retention_seq *s, int pos, struct eb_err *e)
{
    if (pos < s->cap_pos) return 0;
    int cap = s->cap_pos ? s->cap_pos : 256;
    while (cap <= pos) cap *= 2;
    uint32_t *p = realloc(s->step, (size_t)cap * r->n_heads * sizeof *p);
    if (!p) return eb_fail_nomem(e, "retention record");
    memset(p + (size_t)s->cap_pos * r->n_heads, 0,
           (size_t)(cap - s->cap_pos) * r->n_heads * sizeof *p);
    s->step = p;
    s->cap_pos = cap;
    return 0;
}

int retention_evict(struct retention *r, int seq, const struct kvcache *c, int layer, int kv_head,
                    const int *keep, int n_keep, int step, struct eb_err *e)
{
    double t0 = clock_now_s();
    struct retention_seq *s = seq_of(r, seq, e);
    if (!s) return -1;
    int head = layer * r->n_kv + kv_head, len = c->len[head];
    const int *pos = c->pos + (size_t)head * c->capacity;
    const unsigned char *pad = c->pad + (size_t)head * c->capacity;
    /* keep-sets are short: mark them in a bitmap of the head's slots */
    unsigned char mark[4096], *kept = len <= (int)sizeof mark ? mark : calloc((size_t)len, 1);
    if (!kept) return eb_fail_nomem(e, "retention record");
    memset(kept, 0, (size_t)len);
    for (int i = 0; i < n_keep; i++)
        if (keep[i] >= 0 && keep[i] < len) kept[keep[i]] = 1;
    int rc = 0;
    for (int i = 0; i < len && rc == 0; i++) {
        if (kept[i] || pad[i] || pos[i] < 0) continue;
        if ((rc = grow(r, s, pos[i], e))) break;
        s->step[(size_t)pos[i] * r->n_heads + head] = (uint32_t)step;
        if (pos[i] >= s->n_pos) s->n_pos = pos[i] + 1;
    }
    if (kept != mark) free(kept);
    r->cost_s += clock_now_s() - t0;
    return rc;
}

static int deflate_buf(const unsigned char *in, size_t n, unsigned char **out, size_t *out_len,
                       struct eb_err *e)
{
    uLongf cap = compressBound((uLong)n);
    unsigned char *z = malloc(cap ? cap : 1);
    if (!z) return eb_fail_nomem(e, "retention blob");
    if (compress2(z, &cap, in, (uLong)n, 6) != Z_OK) {
        free(z);
        return eb_fail(e, "retention: zlib could not compress %zu bytes", n);
    }
    *out = z;
    *out_len = cap;
    return 0;
}

static int inflate_buf(const unsigned char *z, size_t len, unsigned char *out, size_t n,
                       struct eb_err *e)
{
    uLongf got = (uLongf)n;
    if (uncompress(out, &got, z, (uLong)len) != Z_OK || got != n)
        return eb_fail(e, "retention: a corrupt blob (expected %zu bytes unpacked)", n);
    return 0;
}

/* Each generated token's byte length in the decoded text, when decoding
 * them one by one adds up to it (byte-level BPE does; a tokenizer that joins
 * tokens differently leaves the record without them). */
static int token_lengths(const struct tokenizer *tok, const int *tokens, int n, size_t text_len,
                         unsigned char **out, size_t *out_len, struct eb_err *e)
{
    *out = NULL;
    *out_len = 0;
    if (!tok || n <= 0) return 0;
    unsigned char *raw = malloc((size_t)n * 2);
    if (!raw) return eb_fail_nomem(e, "retention token lengths");
    size_t sum = 0;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        char *t = NULL;
        size_t tl = 0;
        if (tokenizer_decode(tok, tokens + i, 1, &t, &tl, e)) {
            free(raw);
            return -1;
        }
        free(t);
        ok = tl <= 0xffff;
        raw[2 * i] = (unsigned char)(tl & 0xff);
        raw[2 * i + 1] = (unsigned char)(tl >> 8);
        sum += tl;
    }
    int rc = ok && sum == text_len ? deflate_buf(raw, (size_t)n * 2, out, out_len, e) : 0;
    free(raw);
    return rc;
}

int retention_encode(struct retention *r, int seq, int n_gen, const struct tokenizer *tok,
                     const int *tokens, size_t text_len, struct retention_blob *out,
                     struct eb_err *e)
{
    double t0 = clock_now_s();
    memset(out, 0, sizeof *out);
    struct retention_seq *s = seq_of(r, seq, e);
    if (!s) return -1;
    int n_pos = s->n_prompt + (n_gen > 0 ? n_gen : 0);
    if (s->n_pos > n_pos) n_pos = s->n_pos;
    out->n_kv = r->n_kv;
    out->n_layer = r->n_heads / r->n_kv;
    out->n_prompt = s->n_prompt;
    out->n_positions = n_pos;
    size_t n = (size_t)n_pos * r->n_heads;
    unsigned char *raw = malloc(n ? n * 4 : 1);
    if (!raw) return eb_fail_nomem(e, "retention blob");
    for (int p = 0; p < n_pos; p++) {
        int gone_everywhere = 1;
        for (int h = 0; h < r->n_heads; h++) {
            uint32_t v = p < s->n_pos ? s->step[(size_t)p * r->n_heads + h] : 0;
            unsigned char *d = raw + ((size_t)h * n_pos + p) * 4;
            d[0] = (unsigned char)v, d[1] = (unsigned char)(v >> 8);
            d[2] = (unsigned char)(v >> 16), d[3] = (unsigned char)(v >> 24);
            if (v) out->n_evicted_slots++;
            else gone_everywhere = 0;
            if ((int)v > out->max_step) out->max_step = (int)v;
        }
        out->n_evicted_tokens += gone_everywhere;
    }
    int rc = deflate_buf(raw, n * 4, &out->steps, &out->steps_len, e);
    free(raw);
    if (rc == 0)
        rc = token_lengths(tok, tokens, n_gen, text_len, &out->token_bytes, &out->token_bytes_len, e);
    if (rc) retention_blob_free(out);
    r->cost_s += clock_now_s() - t0;
    return rc;
}

void retention_blob_free(struct retention_blob *b)
{
    free(b->steps);
    free(b->token_bytes);
    b->steps = b->token_bytes = NULL;
}

/* n little-endian values of width bytes each, zlib-packed, into uint32 (malloc'd). */
static int unpack_values(const unsigned char *z, size_t len, size_t n, int width, uint32_t **out,
                         struct eb_err *e)
{
    *out = NULL;
    if (n > ((size_t)1 << 30)) return eb_fail(e, "retention: %zu values is too many", n);
    unsigned char *raw = malloc(n ? n * (size_t)width : 1);
    uint32_t *v = malloc(n ? n * sizeof *v : 1);
    if (!raw || !v || inflate_buf(z, len, raw, n * (size_t)width, e)) {
        int nomem = !raw || !v;
        free(raw);
        free(v);
        return nomem ? eb_fail_nomem(e, "retention record") : -1;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = 0;
        for (int k = width - 1; k >= 0; k--) v[i] = v[i] << 8 | raw[i * (size_t)width + k];
    }
    free(raw);
    *out = v;
    return 0;
}

int retention_decode_steps(const unsigned char *z, size_t len, size_t n_values, uint32_t **out,
                           struct eb_err *e)
{
    return unpack_values(z, len, n_values, 4, out, e);
}

int retention_decode_token_bytes(const unsigned char *z, size_t len, size_t n, int **out,
                                 struct eb_err *e)
{
    uint32_t *v = NULL;
    *out = NULL;
    if (unpack_values(z, len, n, 2, &v, e)) return -1;
    int *w = malloc(n ? n * sizeof *w : 1);
    if (!w) {
        free(v);
        return eb_fail_nomem(e, "retention record");
    }
    for (size_t i = 0; i < n; i++) w[i] = (int)v[i];
    free(v);
    *out = w;
    return 0;
}
